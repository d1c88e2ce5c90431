#include "core/net.h"

#include "core/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int parse_port(const char *p, int *port)
{
    uint64_t v;
    if (num_parse_u64(p, strlen(p), 65535, &v) < 0 || v == 0)
        return -1;
    *port = (int)v;
    return 0;
}

int net_parse_addr(const char *s, net_addr *out, char *err, size_t errlen)
{
    char host[64];
    const char *port_s;
    memset(out, 0, sizeof *out);

    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof host) {
            snprintf(err, errlen, "invalid address \"%s\" (expected [IPv6]:PORT)", s);
            return -1;
        }
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port_s = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon) {
            strcpy(host, "127.0.0.1");
            port_s = s;
        } else {
            if (strchr(s, ':') != colon || (size_t)(colon - s) >= sizeof host) {
                snprintf(err, errlen, "invalid address \"%s\" (IPv6 needs [brackets])", s);
                return -1;
            }
            memcpy(host, s, (size_t)(colon - s));
            host[colon - s] = '\0';
            if (strcmp(host, "*") == 0 || host[0] == '\0')
                strcpy(host, "0.0.0.0");
            port_s = colon + 1;
        }
    }
    int port;
    if (parse_port(port_s, &port) < 0) {
        snprintf(err, errlen, "invalid port in \"%s\"", s);
        return -1;
    }
    struct sockaddr_in *v4 = (struct sockaddr_in *)&out->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out->ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        out->len = sizeof *v4;
        snprintf(out->text, sizeof out->text, "%s:%d", host, port);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        out->len = sizeof *v6;
        snprintf(out->text, sizeof out->text, "[%s]:%d", host, port);
    } else {
        snprintf(err, errlen, "invalid IP address \"%s\" in \"%s\"", host, s);
        return -1;
    }
    return 0;
}

/* A plain bind (no SO_REUSEPORT) fails where anything listens. */
int net_check_free(const net_addr *a)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, rc = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (a->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

int net_listen(const net_addr *a, int backlog, unsigned flags)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        goto fail;
    if ((flags & NET_REUSEPORT) && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        goto fail;
    int defer_s = 1;
    if ((flags & NET_DEFER_ACCEPT) &&
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof defer_s) < 0)
        goto fail;
    if (a->ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
        goto fail;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        goto fail;
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        goto fail;
    if (listen(fd, backlog) < 0)
        goto fail;
    return fd;
fail:;
    int e = errno;
    close(fd);
    return -e;
}

size_t net_format_ip(const struct sockaddr *sa, char *out, size_t n)
{
    const void *src = sa->sa_family == AF_INET6
                          ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                          : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
    if (!inet_ntop(sa->sa_family, src, out, (socklen_t)n)) {
        out[0] = '-';
        out[1] = '\0';
        return 1;
    }
    return strlen(out);
}

int net_port(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                     : ntohs(((const struct sockaddr_in *)sa)->sin_port);
}
