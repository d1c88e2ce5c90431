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

/* A non-blocking listening socket with SO_REUSEADDR, SO_REUSEPORT when
 * reuseport is set, IPV6_V6ONLY for IPv6 and TCP_NODELAY (inherited by
 * accepted sockets). Returns the fd or negative errno. */
int net_listen(const net_addr *a, int backlog, int reuseport);

/* Formats the IP of sa into out (no port); returns its length. */
size_t net_format_ip(const struct sockaddr *sa, char *out, size_t n);
int net_port(const struct sockaddr *sa);

#endif
