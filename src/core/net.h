/* Addresses and listening sockets. Errors are negative errno values. */
#ifndef BRISK_CORE_NET_H
#define BRISK_CORE_NET_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct {
    struct sockaddr_storage ss;
    socklen_t len;
    char text[64]; /* "127.0.0.1:8080" or "[::1]:8080" */
} net_addr;

/* Parses "ADDR:PORT", "[V6ADDR]:PORT", "*:PORT" (all IPv4) or "PORT"
 * (127.0.0.1). Returns 0, or -1 with a message in err. */
int net_parse_addr(const char *s, net_addr *out, char *err, size_t errlen);

enum {
    NET_REUSEPORT = 1,    /* SO_REUSEPORT: one socket per worker */
    NET_DEFER_ACCEPT = 2, /* TCP_DEFER_ACCEPT: wake on data, for protocols where the client speaks first */
};

/* A non-blocking listening socket with SO_REUSEADDR, IPV6_V6ONLY for IPv6,
 * TCP_NODELAY (inherited by accepted sockets) and the NET_* flags. Returns
 * the fd or negative errno. */
int net_listen(const net_addr *a, int backlog, unsigned flags);

/* 0 if nothing listens on a yet, else negative errno (-EADDRINUSE). With
 * SO_REUSEPORT a second server of the same user could otherwise share the
 * address silently; call it for every address before listening on any. */
int net_check_free(const net_addr *a);

/* Formats the IP of sa into out (no port); returns its length. */
size_t net_format_ip(const struct sockaddr *sa, char *out, size_t n);
int net_port(const struct sockaddr *sa);

#endif
