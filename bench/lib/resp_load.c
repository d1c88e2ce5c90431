/* resp_load: a lean pipelined RESP load generator for the kv race.
 *
 *   resp_load PORT CONNS DEPTH N ARG...
 *
 * Sends the command ARG... N times in all over CONNS connections, DEPTH at a
 * time per connection: a connection writes DEPTH copies of the command in one
 * write, reads until all DEPTH replies are in, and writes again (what
 * redis-benchmark -c CONNS -P DEPTH does). The command is encoded once; a
 * reply is skipped, not decoded, so the client spends its CPU in the kernel,
 * not in user space: at -P 16 redis-benchmark's single thread is the limit of
 * a 2-CPU machine before the server is (its CPU was 0-5% idle in brisk-kv's
 * runs), so the race could not tell two fast servers apart.
 *
 * Prints "ops N seconds S rate R"; exit 1 on an error reply, a protocol error
 * or a closed connection. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 1024
#define RBUF (1 << 16)

typedef struct {
    int fd;
    long long want;   /* replies still due for the batch in flight */
    size_t len;       /* unparsed bytes at the start of buf */
    char buf[RBUF];
} conn;

static char *batch;          /* DEPTH copies of the command */
static size_t cmd_len;
static long long total, sent, done;
static int depth;

static void die(const char *why, const char *detail)
{
    fprintf(stderr, "resp_load: %s%s%s\n", why, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* Length of the complete reply at p (an array counts its elements), 0 when
 * more bytes are needed, -1 on a protocol error; *err is set by an error
 * reply. */
static long long reply_len(const char *p, const char *end, int *err)
{
    if (end - p < 3)
        return 0;
    const char *q = p + 1;
    const char *nl = memchr(q, '\n', (size_t)(end - q));
    if (!nl)
        return 0;
    long long v = 0;
    int neg = 0;
    switch (*p) {
    case '+': case ':':
        return nl + 1 - p;
    case '-':
        *err = 1;
        return nl + 1 - p;
    case '$': case '*':
        if (*q == '-') {
            neg = 1;
            q++;
        }
        for (; *q >= '0' && *q <= '9'; q++)
            v = v * 10 + (*q - '0');
        if (neg)
            return nl + 1 - p;        /* nil */
        break;
    default:
        return -1;
    }
    const char *r = nl + 1;
    if (*p == '$')
        return end - r >= v + 2 ? (r - p) + v + 2 : 0;
    for (long long i = 0; i < v; i++) {
        long long n = reply_len(r, end, err);
        if (n <= 0)
            return n;
        r += n;
    }
    return r - p;
}

static void send_batch(conn *c)
{
    long long n = total - sent < depth ? total - sent : depth;
    if (n <= 0) {
        c->want = 0;
        return;
    }
    size_t bytes = (size_t)n * cmd_len, off = 0;
    while (off < bytes) {
        ssize_t w = write(c->fd, batch + off, bytes - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write", strerror(errno));   /* the socket is blocking */
        off += (size_t)w;
    }
    sent += n;
    c->want = n;
}

/* Reads what is there, skips the complete replies, writes the next batch
 * when the one in flight is answered. */
static void on_readable(conn *c)
{
    ssize_t n = read(c->fd, c->buf + c->len, RBUF - c->len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0)
        die("connection closed by the server", n < 0 ? strerror(errno) : NULL);
    c->len += (size_t)n;
    char *p = c->buf, *end = c->buf + c->len;
    int err = 0;
    while (p < end && c->want > 0) {
        long long r = reply_len(p, end, &err);
        if (r < 0)
            die("protocol error", NULL);
        if (r == 0)
            break;
        if (err) {
            p[r - 2] = 0;
            die("error reply", p);
        }
        p += r;
        c->want--;
        done++;
    }
    c->len = (size_t)(end - p);
    if (c->len == RBUF)
        die("a reply longer than the read buffer", NULL);
    memmove(c->buf, p, c->len);
    if (c->want == 0)
        send_batch(c);
}

int main(int argc, char **argv)
{
    if (argc < 6)
        die("usage: resp_load PORT CONNS DEPTH N ARG...", NULL);
    int port = atoi(argv[1]), nconn = atoi(argv[2]);
    depth = atoi(argv[3]);
    total = atoll(argv[4]);
    if (nconn < 1 || nconn > MAXCONN || depth < 1 || total < 1)
        die("CONNS 1..1024, DEPTH >= 1 and N >= 1", NULL);

    /* the command in RESP, DEPTH times */
    size_t cap = 32;
    for (int i = 5; i < argc; i++)
        cap += strlen(argv[i]) + 32;
    char *one = malloc(cap);
    cmd_len = (size_t)sprintf(one, "*%d\r\n", argc - 5);
    for (int i = 5; i < argc; i++)
        cmd_len += (size_t)sprintf(one + cmd_len, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    batch = malloc(cmd_len * (size_t)depth);
    for (int i = 0; i < depth; i++)
        memcpy(batch + (size_t)i * cmd_len, one, cmd_len);

    conn *conns = calloc((size_t)nconn, sizeof *conns);
    int ep = epoll_create1(0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < nconn; i++) {
        conn *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        int one_ = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            die("connect", strerror(errno));
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nconn; i++)
        send_batch(&conns[i]);
    struct epoll_event evs[MAXCONN];
    while (done < total) {
        int n = epoll_wait(ep, evs, MAXCONN, 10000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("no reply for 10 s", NULL);
        for (int i = 0; i < n; i++)
            on_readable(evs[i].data.ptr);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("ops %lld seconds %.3f rate %.0f\n", done, s, (double)done / s);
    return 0;
}
