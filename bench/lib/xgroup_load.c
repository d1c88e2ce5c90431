/* xgroup_load: the XREADGROUP+XACK load of the kv race (redis-benchmark
 * cannot send a command built from the previous reply).
 *
 *   xgroup_load PORT CONNS STREAM GROUP COUNT
 *
 * CONNS connections, consumer "c<i>" on connection i, drain the group's
 * pending-free entries: each write carries the XACK of the entries the
 * connection read last time and the next XREADGROUP GROUP g c<i> COUNT n
 * STREAMS s > (two commands per write: pipelined). A connection stops when
 * XREADGROUP answers nil (the stream is drained). Every connection writes,
 * then every connection's replies are read, round after round.
 * Prints "acked N seconds S rate R" (R = acked entries per second); exit 1
 * on a protocol error or an error reply. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 256
#define MAXCOUNT 1000
#define IDLEN 48

typedef struct {
    int fd;
    char buf[1 << 16];
    size_t pos, len;
    int live;
    int nids;                       /* ids read last time, to XACK */
    char ids[MAXCOUNT][IDLEN];
    int acking;                     /* an XACK precedes the pending XREADGROUP */
} conn;

static conn conns[MAXCONN];

static void die(const char *why) {
    fprintf(stderr, "xgroup_load: %s\n", why);
    exit(1);
}

static int getbyte(conn *c) {
    if (c->pos == c->len) {
        ssize_t n = read(c->fd, c->buf, sizeof c->buf);
        if (n <= 0)
            die("connection closed or read error");
        c->pos = 0;
        c->len = (size_t)n;
    }
    return (unsigned char)c->buf[c->pos++];
}

/* One header line ("*3", "$5", ":1", "-ERR ..."): type byte, value. */
static long long header(conn *c, int *type) {
    char line[512];
    size_t n = 0;
    *type = getbyte(c);
    for (;;) {
        int ch = getbyte(c);
        if (ch == '\r') {
            if (getbyte(c) != '\n')
                die("bad line ending");
            break;
        }
        if (n + 1 < sizeof line)
            line[n++] = (char)ch;
    }
    line[n] = 0;
    if (*type == '-') {
        fprintf(stderr, "xgroup_load: error reply: %s\n", line);
        exit(1);
    }
    return strtoll(line, NULL, 10);
}

/* A bulk string's payload into out (at most cap-1 bytes kept). */
static void bulk(conn *c, char *out, size_t cap) {
    int t;
    long long len = header(c, &t);
    if (t != '$' || len < 0)
        die("expected a bulk string");
    for (long long i = 0; i < len; i++) {
        int ch = getbyte(c);
        if (out && (size_t)i + 1 < cap)
            out[i] = (char)ch;
    }
    if (out)
        out[len < (long long)cap ? len : (long long)cap - 1] = 0;
    if (getbyte(c) != '\r' || getbyte(c) != '\n')
        die("bad bulk ending");
}

static void skip(conn *c) {
    int t;
    long long n = header(c, &t);
    if (t == '$') {
        if (n >= 0) {
            for (long long i = 0; i < n + 2; i++)
                getbyte(c);
        }
    } else if (t == '*') {
        for (long long i = 0; i < n; i++)
            skip(c);
    }
}

/* The XREADGROUP reply: nil (drained) or [[stream, [[id, fields]...]]]. */
static void read_entries(conn *c) {
    int t;
    long long n = header(c, &t);
    c->nids = 0;
    if (t != '*')
        die("XREADGROUP: expected an array");
    if (n <= 0) {
        c->live = 0;
        return;
    }
    if (header(c, &t) != 2 || t != '*')
        die("XREADGROUP: expected [stream, entries]");
    bulk(c, NULL, 0);
    long long m = header(c, &t);
    if (t != '*' || m > MAXCOUNT)
        die("XREADGROUP: bad entry list");
    if (m <= 0)
        c->live = 0;
    for (long long i = 0; i < m; i++) {
        if (header(c, &t) != 2 || t != '*')
            die("XREADGROUP: expected [id, fields]");
        bulk(c, c->ids[c->nids++], IDLEN);
        skip(c);
    }
}

static size_t put(char *p, const char *s) {
    size_t n = strlen(s);
    return (size_t)sprintf(p, "$%zu\r\n%s\r\n", n, s);
}

int main(int argc, char **argv) {
    if (argc != 6)
        die("usage: xgroup_load PORT CONNS STREAM GROUP COUNT");
    int port = atoi(argv[1]), nconn = atoi(argv[2]), count = atoi(argv[5]);
    const char *stream = argv[3], *group = argv[4];
    if (nconn < 1 || nconn > MAXCONN || count < 1 || count > MAXCOUNT)
        die("CONNS must be 1-256, COUNT 1-1000");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < nconn; i++) {
        conns[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(conns[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(conns[i].fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            die("connect failed");
        conns[i].live = 1;
    }
    static char out[MAXCOUNT * (IDLEN + 16) + 1024];
    char cnt[16], consumer[16];
    snprintf(cnt, sizeof cnt, "%d", count);
    long long acked = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int live = nconn; live > 0;) {
        for (int i = 0; i < nconn; i++) {
            conn *c = &conns[i];
            if (!c->live)
                continue;
            size_t n = 0;
            c->acking = c->nids > 0;
            if (c->acking) {
                n += (size_t)sprintf(out + n, "*%d\r\n", 3 + c->nids);
                n += put(out + n, "XACK");
                n += put(out + n, stream);
                n += put(out + n, group);
                for (int k = 0; k < c->nids; k++)
                    n += put(out + n, c->ids[k]);
            }
            snprintf(consumer, sizeof consumer, "c%d", i);
            n += (size_t)sprintf(out + n, "*9\r\n");
            n += put(out + n, "XREADGROUP");
            n += put(out + n, "GROUP");
            n += put(out + n, group);
            n += put(out + n, consumer);
            n += put(out + n, "COUNT");
            n += put(out + n, cnt);
            n += put(out + n, "STREAMS");
            n += put(out + n, stream);
            n += put(out + n, ">");
            for (size_t off = 0; off < n;) {
                ssize_t w = write(c->fd, out + off, n - off);
                if (w <= 0)
                    die("write failed");
                off += (size_t)w;
            }
        }
        for (int i = 0; i < nconn; i++) {
            conn *c = &conns[i];
            if (!c->live)
                continue;
            if (c->acking) {
                int t;
                long long k = header(c, &t);
                if (t != ':')
                    die("XACK: expected an integer");
                acked += k;
            }
            read_entries(c);
            if (!c->live)
                live--;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("acked %lld seconds %.6f rate %.1f\n", acked, secs, secs > 0 ? (double)acked / secs : 0.0);
    return 0;
}
