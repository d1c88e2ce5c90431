/* h2_load: a lean HTTP/2-over-TLS load generator for the https race.
 *
 *   h2_load PORT PATH CONNS STREAMS SECONDS [--expect-len N] [--conn-requests N]
 *
 * CONNS TLS 1.3 connections to 127.0.0.1:PORT (ALPN h2, which must be
 * negotiated; TLS_AES_128_GCM_SHA256 offered first; the certificate is not
 * checked against a CA), each keeping
 * STREAMS GETs of PATH in flight (fewer if the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS is lower). What h2load -c CONNS -m STREAMS
 * does, at a fraction of its CPU: h2load's single thread spent ~13,500
 * user-space instructions per request, more than the servers it loaded, so on
 * a 2-core machine it was the limit for every server.
 *
 * What it saves:
 * - the request's HEADERS frame is HPACK-encoded once (:method GET and
 *   :scheme https from the static table, :path and :authority as literals
 *   without indexing, so the server's decoder table is never touched); per
 *   request only the stream id is patched in, and every request that fits is
 *   written with one SSL_write;
 * - responses are skipped, not decoded: only frame headers are read. The
 *   status is the first byte of the response's header block, which must be
 *   the static-table index of ":status 200" (0x88; a dynamic table size
 *   update before it is skipped): brisk, nginx and h2o all send it so for a
 *   200. Any other first byte counts as an error, not a request. No other
 *   header is looked at, and HPACK state is never kept (the client cannot
 *   tell a server's 200 with a wrong body type from a right one).
 * - with --expect-len N the DATA payload of each stream (less padding) must
 *   sum to N, or the stream counts as an error.
 *
 * The connection does its duty as an h2 peer: SETTINGS (push off, 16 MiB
 * stream window) and a connection WINDOW_UPDATE to 16 MiB after the preface;
 * SETTINGS and PING are acknowledged; WINDOW_UPDATEs are sent (stream and
 * connection) once 8 MiB of a window is consumed, so nothing stalls. A
 * stream is done at END_STREAM (on DATA or HEADERS). RST_STREAM and GOAWAY
 * count as errors and the connection is replaced. Stream ids run out at
 * 2^31: the connection is closed and replaced before that (or after
 * --conn-requests requests, which tests that path).
 *
 * One thread, epoll (level-triggered), non-blocking sockets. The clock
 * starts when every connection has its server's SETTINGS; requests finished
 * in the SECONDS after that are counted. Prints one line:
 *   requests N errors E seconds S rate R reconnects C cipher X
 * Exit 1 on any error (the first goes to stderr) or when ALPN gives no h2. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 1024
#define MAXSTREAMS 256
#define RBUF (1 << 16)          /* > 16,384 + 9: the largest frame we allow */
#define WINDOW (16u << 20)      /* our stream and connection windows */
#define REFILL (8u << 20)       /* consumed bytes that trigger a WINDOW_UPDATE */
#define LAST_SID 0x7fffffffu
#define CTRL_MAX 4096           /* queued control frames (acks, window updates) */

enum { F_DATA, F_HEADERS, F_PRIORITY, F_RST_STREAM, F_SETTINGS, F_PUSH_PROMISE, F_PING,
       F_GOAWAY, F_WINDOW_UPDATE, F_CONTINUATION };
enum { FL_END_STREAM = 0x1, FL_ACK = 0x1, FL_END_HEADERS = 0x4, FL_PADDED = 0x8,
       FL_PRIORITY = 0x20 };
enum { S_CONNECTING, S_HANDSHAKE, S_WAIT_SETTINGS, S_RUNNING, S_DRAINING };

typedef struct {
    uint32_t sid;
    int headers_seen;
    long long data;           /* DATA payload bytes, padding excluded */
    uint32_t unacked;         /* DATA bytes (padding included) not yet given back */
} stream;

typedef struct {
    int fd;
    SSL *ssl;
    int state;
    unsigned events;          /* what epoll is asked for */
    uint32_t next_sid;
    uint32_t limit;           /* streams in flight at most: min(STREAMS, server's) */
    long long issued;         /* requests sent on this connection */
    int nstreams;
    stream streams[MAXSTREAMS];
    uint32_t conn_unacked;    /* connection-level DATA bytes not yet given back */
    size_t rlen;
    unsigned char rbuf[RBUF];
    size_t wlen, wtry;        /* bytes queued; length of a write that must be retried */
    unsigned char *wbuf;
} conn;

static conn *conns;
static int nconn, streams_per_conn, ep, port;
static SSL_CTX *ctx;
static long long expect_len = -1, conn_requests;
static unsigned char req[1024];   /* one HEADERS frame; bytes 5..8 are the stream id */
static size_t req_len;
static size_t wcap;               /* a connection's write buffer: requests + CTRL_MAX */
static long long done, errors, reconnects;
static int running;               /* connections that have their server's SETTINGS */
static char first_err[512], cipher[64];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *why)
{
    fprintf(stderr, "h2_load: %s\n", why);
    exit(1);
}

static void note_error(conn *c, const char *what)
{
    errors++;
    if (!first_err[0]) {
        unsigned long e = ERR_peek_error();
        char ebuf[256] = "";
        if (e)
            ERR_error_string_n(e, ebuf, sizeof ebuf);
        snprintf(first_err, sizeof first_err, "connection %d: %s%s%s", (int)(c - conns), what,
                 ebuf[0] ? ": " : "", ebuf);
    }
    ERR_clear_error();
}

static void put24(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 16);
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)v;
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned char *frame_head(unsigned char *p, uint32_t len, int type, int flags, uint32_t sid)
{
    put24(p, len);
    p[3] = (unsigned char)type;
    p[4] = (unsigned char)flags;
    put32(p + 5, sid);
    return p + 9;
}

/* HPACK integer with an N-bit prefix (RFC 7541 5.1); first carries the
 * pattern bits above the prefix. */
static size_t hpack_int(unsigned char *p, int prefix_bits, unsigned char first, size_t v)
{
    size_t max = ((size_t)1 << prefix_bits) - 1, n = 0;
    if (v < max) {
        p[n++] = (unsigned char)(first | v);
        return n;
    }
    p[n++] = (unsigned char)(first | max);
    for (v -= max; v >= 128; v >>= 7)
        p[n++] = (unsigned char)(0x80 | (v & 0x7f));
    p[n++] = (unsigned char)v;
    return n;
}

/* A literal header field without indexing, its name from the static table
 * (RFC 7541 6.2.2), value not Huffman-coded. */
static size_t hpack_literal(unsigned char *p, int name_index, const char *value)
{
    size_t vlen = strlen(value);
    size_t n = hpack_int(p, 4, 0x00, (size_t)name_index);
    n += hpack_int(p + n, 7, 0x00, vlen);
    memcpy(p + n, value, vlen);
    return n + vlen;
}

static void build_request(const char *path)
{
    char authority[64];
    snprintf(authority, sizeof authority, "127.0.0.1:%d", port);
    if (strlen(path) > sizeof req - 64)
        die("PATH too long");
    unsigned char *b = req + 9;
    size_t n = 0;
    b[n++] = 0x82;                       /* :method GET (static index 2) */
    b[n++] = 0x87;                       /* :scheme https (static index 7) */
    n += hpack_literal(b + n, 4, path);  /* :path */
    n += hpack_literal(b + n, 1, authority); /* :authority */
    frame_head(req, (uint32_t)n, F_HEADERS, FL_END_STREAM | FL_END_HEADERS, 0);
    req_len = 9 + n;
}

static void want(conn *c, unsigned ev)
{
    if (c->events == ev)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e) < 0)
        die("epoll_ctl MOD");
    c->events = ev;
}

static void open_conn(conn *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->state = S_CONNECTING;
    c->ssl = NULL;
    c->next_sid = 1;
    c->limit = (uint32_t)streams_per_conn;   /* the server's default: no limit */
    c->issued = 0;
    c->nstreams = 0;
    c->conn_unacked = 0;
    c->rlen = c->wlen = c->wtry = 0;
    c->events = EPOLLOUT;
    struct epoll_event e = {.events = EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0)
        die("epoll_ctl ADD");
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS)
        die("connect");
}

static void close_conn(conn *c, int clean)
{
    if (c->ssl) {
        if (clean)
            SSL_shutdown(c->ssl);
        else
            SSL_set_quiet_shutdown(c->ssl, 1);
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->state >= S_RUNNING)
        running--;
    close(c->fd);               /* also leaves the epoll set */
    c->fd = -1;
}

static void replace_conn(conn *c, int clean)
{
    close_conn(c, clean);
    reconnects++;
    open_conn(c);
}

/* Queues a control frame; returns -1 when too many are queued (a peer that
 * floods PINGs or SETTINGS faster than we can write). */
static int queue_ctrl(conn *c, const unsigned char *f, size_t len)
{
    if (c->wlen + len > wcap)
        return -1;
    memcpy(c->wbuf + c->wlen, f, len);
    c->wlen += len;
    return 0;
}

static int queue_window_update(conn *c, uint32_t sid, uint32_t inc)
{
    unsigned char f[13];
    put32(frame_head(f, 4, F_WINDOW_UPDATE, 0, sid), inc);
    return queue_ctrl(c, f, sizeof f);
}

/* Opens streams up to the limit: one HEADERS frame each, copied from the
 * template with its stream id patched in. */
static void fill_streams(conn *c)
{
    if (c->state != S_RUNNING)
        return;
    while ((uint32_t)c->nstreams < c->limit) {
        if (c->next_sid > LAST_SID || (conn_requests && c->issued >= conn_requests)) {
            c->state = S_DRAINING;          /* replaced once its streams are done */
            return;
        }
        if (c->wlen + req_len > wcap)
            return;                         /* control frames queued: the rest later */
        unsigned char *p = c->wbuf + c->wlen;
        memcpy(p, req, req_len);
        put32(p + 5, c->next_sid);
        c->wlen += req_len;
        stream *s = &c->streams[c->nstreams++];
        s->sid = c->next_sid;
        s->headers_seen = 0;
        s->data = 0;
        s->unacked = 0;
        c->next_sid += 2;
        c->issued++;
    }
}

/* Writes what is queued; returns -1 on a failed connection. */
static int flush(conn *c)
{
    while (c->wlen > 0) {
        size_t len = c->wtry ? c->wtry : c->wlen;   /* a retry repeats the same call */
        int rc = SSL_write(c->ssl, c->wbuf, (int)len);
        if (rc > 0) {
            c->wtry = 0;
            memmove(c->wbuf, c->wbuf + rc, c->wlen - (size_t)rc);
            c->wlen -= (size_t)rc;
            continue;
        }
        int err = SSL_get_error(c->ssl, rc);
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
            c->wtry = len;
            want(c, err == SSL_ERROR_WANT_WRITE ? EPOLLIN | EPOLLOUT : EPOLLIN);
            return 0;
        }
        note_error(c, "write");
        return -1;
    }
    want(c, EPOLLIN);
    return 0;
}

static stream *find_stream(conn *c, uint32_t sid)
{
    for (int i = 0; i < c->nstreams; i++)
        if (c->streams[i].sid == sid)
            return &c->streams[i];
    return NULL;
}

static void end_stream(conn *c, stream *s)
{
    if (expect_len >= 0 && s->data != expect_len) {
        char why[96];
        snprintf(why, sizeof why, "stream %u: %lld body bytes, want %lld", s->sid, s->data,
                 expect_len);
        note_error(c, why);
    } else {
        done++;
    }
    *s = c->streams[--c->nstreams];
}

/* The first byte of a response header block, after any dynamic table size
 * update (001xxxxx, an integer with a 5-bit prefix), must be 0x88. */
static int status_is_200(const unsigned char *b, size_t len)
{
    size_t i = 0;
    while (i < len && (b[i] & 0xe0) == 0x20) {
        if ((b[i++] & 0x1f) == 0x1f)
            while (i < len && (b[i++] & 0x80))
                ;
    }
    return i < len && b[i] == 0x88;
}

static void apply_settings(conn *c, const unsigned char *p, uint32_t len)
{
    for (uint32_t i = 0; i + 6 <= len; i += 6) {
        unsigned id = (unsigned)p[i] << 8 | p[i + 1];
        uint32_t v = get32(p + i + 2);
        if (id == 0x3)                  /* SETTINGS_MAX_CONCURRENT_STREAMS */
            c->limit = v < (uint32_t)streams_per_conn ? v : (uint32_t)streams_per_conn;
    }
}

/* Handles one complete frame; returns -1 when the connection must go. */
static int on_frame(conn *c, const unsigned char *f)
{
    uint32_t len = (uint32_t)f[0] << 16 | (uint32_t)f[1] << 8 | f[2];
    int type = f[3], flags = f[4];
    uint32_t sid = get32(f + 5) & 0x7fffffff;
    const unsigned char *p = f + 9;
    stream *s;
    char why[96];

    switch (type) {
    case F_DATA: {
        uint32_t pad = 0;
        if ((flags & FL_PADDED) && len > 0)
            pad = 1u + p[0];
        c->conn_unacked += len;
        if (c->conn_unacked >= REFILL) {
            if (queue_window_update(c, 0, c->conn_unacked) < 0)
                goto flood;
            c->conn_unacked = 0;
        }
        if (!(s = find_stream(c, sid)))
            return 0;                   /* not ours: ignored */
        s->data += len > pad ? len - pad : 0;
        s->unacked += len;
        if (flags & FL_END_STREAM) {
            end_stream(c, s);
        } else if (s->unacked >= REFILL) {
            if (queue_window_update(c, sid, s->unacked) < 0)
                goto flood;
            s->unacked = 0;
        }
        return 0;
    }
    case F_HEADERS: {
        if (!(s = find_stream(c, sid)))
            return 0;
        if (!s->headers_seen) {
            uint32_t skip = 0;
            if (flags & FL_PADDED)
                skip += 1;
            if (flags & FL_PRIORITY)
                skip += 5;
            uint32_t pad = (flags & FL_PADDED) && len > 0 ? p[0] : 0;
            if (skip + pad > len || !status_is_200(p + skip, len - skip - pad)) {
                snprintf(why, sizeof why, "stream %u: status is not 200 (block starts 0x%02x)",
                         sid, skip < len ? p[skip] : 0);
                note_error(c, why);
                *s = c->streams[--c->nstreams];
                return 0;
            }
            s->headers_seen = 1;
        }
        if (flags & FL_END_STREAM)
            end_stream(c, s);
        return 0;
    }
    case F_RST_STREAM:
        snprintf(why, sizeof why, "RST_STREAM on stream %u, error code %u", sid,
                 len >= 4 ? get32(p) : 0);
        note_error(c, why);
        return -1;
    case F_SETTINGS:
        if (flags & FL_ACK)
            return 0;
        apply_settings(c, p, len);
        {
            unsigned char ack[9];
            frame_head(ack, 0, F_SETTINGS, FL_ACK, 0);
            if (queue_ctrl(c, ack, sizeof ack) < 0)
                goto flood;
        }
        if (c->state == S_WAIT_SETTINGS) {
            c->state = S_RUNNING;
            running++;
        }
        if (c->limit == 0) {
            note_error(c, "the server allows no streams");
            return -1;
        }
        return 0;
    case F_PING:
        if (!(flags & FL_ACK) && len == 8) {
            unsigned char pong[17];
            memcpy(frame_head(pong, 8, F_PING, FL_ACK, 0), p, 8);
            if (queue_ctrl(c, pong, sizeof pong) < 0)
                goto flood;
        }
        return 0;
    case F_GOAWAY:
        snprintf(why, sizeof why, "GOAWAY, last stream %u, error code %u",
                 len >= 4 ? get32(p) & 0x7fffffff : 0, len >= 8 ? get32(p + 4) : 0);
        note_error(c, why);
        return -1;
    case F_PUSH_PROMISE:
        note_error(c, "PUSH_PROMISE with push disabled");
        return -1;
    default:                            /* PRIORITY, WINDOW_UPDATE, CONTINUATION, unknown */
        return 0;
    }
flood:
    note_error(c, "too many control frames queued");
    return -1;
}

/* Reads and handles every complete frame; returns -1 when the connection
 * must go. Reads again only while OpenSSL holds bytes it has not handed out:
 * the socket's own readiness is epoll's (level-triggered), which saves the
 * read that would return EAGAIN. */
static int on_readable(conn *c)
{
    for (;;) {
        int rc = SSL_read(c->ssl, c->rbuf + c->rlen, (int)(RBUF - c->rlen));
        if (rc <= 0) {
            int err = SSL_get_error(c->ssl, rc);
            if (err == SSL_ERROR_WANT_READ)
                return 0;
            if (err == SSL_ERROR_WANT_WRITE) {
                want(c, EPOLLIN | EPOLLOUT);
                return 0;
            }
            note_error(c, "connection closed by the server");
            return -1;
        }
        c->rlen += (size_t)rc;
        size_t off = 0;
        while (c->rlen - off >= 9) {
            const unsigned char *f = c->rbuf + off;
            uint32_t len = (uint32_t)f[0] << 16 | (uint32_t)f[1] << 8 | f[2];
            if (len > 16384) {          /* our SETTINGS_MAX_FRAME_SIZE: the default */
                note_error(c, "a frame larger than 16384 bytes");
                return -1;
            }
            if (c->rlen - off < 9 + (size_t)len)
                break;
            if (on_frame(c, f) < 0)
                return -1;
            off += 9 + (size_t)len;
        }
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
        if (!SSL_has_pending(c->ssl))
            return 0;
    }
}

/* After the handshake: the preface, our SETTINGS (push off, 16 MiB stream
 * window) and the connection window raised to match. */
static int start_h2(conn *c)
{
    const unsigned char *proto;
    unsigned plen;
    SSL_get0_alpn_selected(c->ssl, &proto, &plen);
    if (plen != 2 || memcmp(proto, "h2", 2) != 0)
        die("the server did not select h2 by ALPN");
    if (!cipher[0])
        snprintf(cipher, sizeof cipher, "%s", SSL_get_cipher_name(c->ssl));
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    unsigned char f[64], *p = f;
    memcpy(p, preface, 24);
    p = frame_head(p + 24, 12, F_SETTINGS, 0, 0);
    p[0] = 0, p[1] = 0x2, put32(p + 2, 0);             /* SETTINGS_ENABLE_PUSH 0 */
    p[6] = 0, p[7] = 0x4, put32(p + 8, WINDOW);        /* SETTINGS_INITIAL_WINDOW_SIZE */
    p = frame_head(p + 12, 4, F_WINDOW_UPDATE, 0, 0);
    put32(p, WINDOW - 65535);
    p += 4;
    c->state = S_WAIT_SETTINGS;
    if (queue_ctrl(c, f, (size_t)(p - f)) < 0)
        return -1;
    return flush(c);
}

/* Runs a connection until it must wait; returns -1 when it failed. */
static int drive(conn *c)
{
    if (c->state == S_CONNECTING) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            errno = soerr;
            note_error(c, strerror(soerr));
            return -1;
        }
        c->ssl = SSL_new(ctx);
        if (!c->ssl)
            die("SSL_new");
        SSL_set_fd(c->ssl, c->fd);
        c->state = S_HANDSHAKE;
    }
    if (c->state == S_HANDSHAKE) {
        int rc = SSL_connect(c->ssl);
        if (rc != 1) {
            int err = SSL_get_error(c->ssl, rc);
            if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
                want(c, err == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT);
                return 0;
            }
            note_error(c, "handshake");
            return -1;
        }
        return start_h2(c);
    }
    if (c->wtry && flush(c) < 0)        /* a write waiting for the socket first */
        return -1;
    if (on_readable(c) < 0)
        return -1;
    fill_streams(c);
    if (flush(c) < 0)
        return -1;
    if (c->state == S_DRAINING && c->nstreams == 0 && c->wlen == 0)
        replace_conn(c, 1);             /* stream ids used up: a new connection */
    return 0;
}

static long long parse_count(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "h2_load: bad %s: %s\n", what, s);
        exit(1);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 6)
        die("usage: h2_load PORT PATH CONNS STREAMS SECONDS [--expect-len N] "
            "[--conn-requests N]");
    port = (int)parse_count(argv[1], "PORT");
    const char *path = argv[2];
    nconn = (int)parse_count(argv[3], "CONNS");
    streams_per_conn = (int)parse_count(argv[4], "STREAMS");
    double secs = atof(argv[5]);
    for (int i = 6; i < argc; i++) {
        if (!strcmp(argv[i], "--expect-len") && i + 1 < argc)
            expect_len = parse_count(argv[++i], "--expect-len");
        else if (!strcmp(argv[i], "--conn-requests") && i + 1 < argc)
            conn_requests = parse_count(argv[++i], "--conn-requests");
        else
            die("unknown argument");
    }
    if (port < 1 || port > 65535 || nconn < 1 || nconn > MAXCONN || streams_per_conn < 1 ||
        streams_per_conn > MAXSTREAMS || !(secs > 0) || path[0] != '/')
        die("PORT 1..65535, PATH /..., CONNS 1..1024, STREAMS 1..256, SECONDS > 0");
    build_request(path);

    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        die("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    /* AES-128-GCM first, as h2load and browsers offer (OpenSSL's default
     * puts AES-256 first): the h2 cases then differ only in the client */
    if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                      "TLS_CHACHA20_POLY1305_SHA256") != 1)
        die("SSL_CTX_set_ciphersuites");
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);     /* whole socket reads, not header then record */
    static const unsigned char alpn[] = "\x02h2";
    if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1) != 0)
        die("SSL_CTX_set_alpn_protos");
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");

    conns = calloc((size_t)nconn, sizeof *conns);
    if (!conns)
        die("out of memory");
    wcap = CTRL_MAX + (size_t)streams_per_conn * req_len;
    for (int i = 0; i < nconn; i++) {
        conns[i].wbuf = malloc(wcap);
        if (!conns[i].wbuf)
            die("out of memory");
        open_conn(&conns[i]);
    }

    /* the clock starts when every connection is ready to send requests */
    double t = now(), t0 = 0, end = t + 10, last_progress = t;
    long long done0 = 0, last_done = 0;
    static struct epoll_event evs[MAXCONN];
    while ((t = now()) < end) {
        int n = epoll_wait(ep, evs, MAXCONN, 50);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (drive(c) < 0)
                replace_conn(c, 0);
        }
        if (!t0 && errors) {            /* before the clock: nothing to measure */
            fprintf(stderr, "h2_load: %s\n", first_err);
            return 1;
        }
        if (!t0 && running == nconn) {
            t0 = now();
            end = t0 + secs;
            done0 = done;
        }
        if (done != last_done) {
            last_done = done;
            last_progress = t;
        } else if (t0 && t - last_progress > 10) {
            die("no response for 10 s");
        }
    }
    if (!t0)
        die("the connections were not all ready after 10 s");
    t = now();
    long long n = done - done0;
    printf("requests %lld errors %lld seconds %.3f rate %.1f reconnects %lld cipher %s\n", n,
           errors, t - t0, (double)n / (t - t0), reconnects, cipher[0] ? cipher : "?");
    if (errors) {
        fprintf(stderr, "h2_load: %lld errors; first: %s\n", errors, first_err);
        return 1;
    }
    return 0;
}
