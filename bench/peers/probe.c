/* The limit probe of `make bench`: not an HTTP server, the least a program
 * can do and still answer wrk. One thread, epoll, level-triggered; it reads
 * what a connection sent, counts the "\r\n\r\n" that end request heads
 * (bodies are not parsed: the races send none) and writes that many copies
 * of a fixed response, in one write per read. Each HTTP table shows brisk as
 * a fraction of this: what the machine allows at all.
 *
 * usage: probe PORT RESPONSE_FILE   (the response's exact bytes, head and body)
 * Not part of brisk: bench/run.sh builds it into bench/.peers/probe. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS 65536

typedef struct {
    unsigned match; /* bytes of "\r\n\r\n" matched at the end of the last read */
    char *pending;  /* unsent output */
    size_t plen, pcap;
} conn;

static conn *conns;
static const char *resp;
static size_t resp_len;

static void drop(int ep, int fd)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    free(conns[fd].pending);
    memset(&conns[fd], 0, sizeof conns[fd]);
}

/* Writes what is pending; 0 when all went, 1 when the socket is full,
 * -1 on error. */
static int flush_out(int fd)
{
    conn *c = &conns[fd];
    size_t off = 0;
    while (off < c->plen) {
        ssize_t n = write(fd, c->pending + off, c->plen - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return -1;
            memmove(c->pending, c->pending + off, c->plen - off);
            c->plen -= off;
            return 1;
        }
        off += (size_t)n;
    }
    c->plen = 0;
    return 0;
}

static int queue(conn *c, size_t copies)
{
    size_t need = c->plen + copies * resp_len;
    if (need > c->pcap) {
        size_t cap = c->pcap ? c->pcap : 4096;
        while (cap < need)
            cap *= 2;
        char *p = realloc(c->pending, cap);
        if (!p)
            return -1;
        c->pending = p;
        c->pcap = cap;
    }
    for (size_t i = 0; i < copies; i++) {
        memcpy(c->pending + c->plen, resp, resp_len);
        c->plen += resp_len;
    }
    return 0;
}

static void on_readable(int ep, int fd)
{
    static const char end[4] = { '\r', '\n', '\r', '\n' };
    char buf[65536];
    conn *c = &conns[fd];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        drop(ep, fd);
        return;
    }
    size_t heads = 0;
    unsigned m = c->match;
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == end[m]) {
            if (++m == 4) {
                heads++;
                m = 0;
            }
        } else {
            m = buf[i] == '\r' ? 1 : 0;
        }
    }
    c->match = m;
    if (!heads)
        return;
    if (queue(c, heads) < 0) {
        drop(ep, fd);
        return;
    }
    int rc = flush_out(fd);
    if (rc < 0) {
        drop(ep, fd);
    } else if (rc == 1) {
        struct epoll_event ev = { .events = EPOLLOUT, .data.fd = fd };
        epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT RESPONSE_FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    static char body[1 << 20];
    resp_len = fread(body, 1, sizeof body, f);
    fclose(f);
    resp = body;
    conns = calloc(MAX_FDS, sizeof *conns);
    signal(SIGPIPE, SIG_IGN);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0) {
        perror("bind/listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = ls };
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAX_FDS) {
                        close(c);
                        continue;
                    }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event ce = { .events = EPOLLIN, .data.fd = c };
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
            } else if (evs[i].events & EPOLLOUT) {
                int rc = flush_out(fd);
                if (rc < 0) {
                    drop(ep, fd);
                } else if (rc == 0) {
                    struct epoll_event ce = { .events = EPOLLIN, .data.fd = fd };
                    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ce);
                }
            } else {
                on_readable(ep, fd);
            }
        }
    }
}
