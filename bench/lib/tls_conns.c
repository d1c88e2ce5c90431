/* tls_conns: the new-connection cases of the https race. Each connection
 * makes one TLS 1.3 handshake and one request, then closes: the rate is
 * handshakes (= connections = requests) per second.
 *
 *   tls_conns PORT PATH CONNS SECONDS [--resume] [--expect-len N]
 *
 * CONNS slots, each a loop: nonblocking connect to 127.0.0.1:PORT, TLS 1.3
 * handshake (the client allows TLS 1.3 only; the certificate is not
 * checked against a CA, its signature over the handshake is), one
 * "GET PATH HTTP/1.1" with "Connection: close", the reply read to the end
 * of its Content-Length (status 200 and, with --expect-len, the length
 * checked), close_notify, close; then the next connection. One thread,
 * epoll.
 *
 * Without --resume every handshake is a full one (no session is offered).
 * With --resume each slot keeps the last session ticket the server sent it
 * (TLS 1.3 NewSessionTicket) and offers it on its next connection, as a
 * returning browser does; the first connection of each slot is full. A
 * ticket is used once (RFC 8446 C.4; OpenSSL's client marks a TLS 1.3
 * session not resumable once used, and browsers do the same): a server that
 * sends no new ticket on a resumed connection gets a full handshake on the
 * slot's next one.
 *
 * Prints one line:
 *   connections N resumed R errors E seconds S rate X cipher C group G
 * (rate = connections completed per second; group: the key exchange of the
 * first handshake; resumed counts the connections after each slot's first
 * that were resumed, of "later" L). Exit 1 when a connection failed (the
 * first error goes to stderr), or when --resume is given and no connection
 * was resumed (a server that ignores tickets). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 1024

enum { CONNECTING, HANDSHAKE, WRITING, READING };

typedef struct {
    int fd;
    SSL *ssl;
    int state;
    int first;               /* this slot's first connection (never resumed) */
    SSL_SESSION *sess;       /* the last ticket received (--resume) */
    char head[4096];
    size_t hlen;
    long long left;          /* body bytes still to read, -1 until the head is in */
    size_t wpos;
} slot;

static slot slots[MAXCONN];
static SSL_CTX *ctx;
static int ep, port, resume, slot_idx;
static long long expect_len = -1;
static char req[1024];
static size_t reqlen;
static long long done, resumed, errors, later;  /* later: connections after each slot's first */
static char first_err[512], cipher[64], group[64];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char *why) {
    fprintf(stderr, "tls_conns: %s\n", why);
    exit(1);
}

static void note_error(slot *s, const char *what) {
    errors++;
    if (!first_err[0]) {
        unsigned long e = ERR_peek_error();
        char ebuf[256] = "";
        if (e)
            ERR_error_string_n(e, ebuf, sizeof ebuf);
        snprintf(first_err, sizeof first_err, "slot %d, %s%s%s%s", (int)(s - slots), what,
                 errno ? ": " : "", errno ? strerror(errno) : "", ebuf[0] ? ebuf : "");
    }
    ERR_clear_error();
}

/* The session callback (--resume): keep the newest ticket of the slot. */
static int new_session(SSL *ssl, SSL_SESSION *sess) {
    slot *s = SSL_get_ex_data(ssl, slot_idx);
    if (s->sess)
        SSL_SESSION_free(s->sess);
    s->sess = sess;
    return 1;                /* we hold the reference */
}

static void want(slot *s, unsigned ev) {
    struct epoll_event e = { .events = ev, .data.ptr = s };
    if (epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e) < 0)
        fail("epoll_ctl MOD");
}

static void open_conn(slot *s) {
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        fail("socket");
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    s->state = CONNECTING;
    s->hlen = 0;
    s->left = -1;
    s->wpos = 0;
    s->ssl = NULL;
    struct epoll_event e = { .events = EPOLLOUT, .data.ptr = s };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &e) < 0)
        fail("epoll_ctl ADD");
    if (connect(s->fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS)
        fail("connect");     /* loopback: EINPROGRESS or at once */
}

static void close_conn(slot *s, int ok) {
    if (s->ssl) {
        if (ok)
            SSL_shutdown(s->ssl);    /* close_notify; keeps the session resumable */
        else
            SSL_set_quiet_shutdown(s->ssl, 1);
        SSL_free(s->ssl);
        s->ssl = NULL;
    }
    close(s->fd);            /* also leaves the epoll set */
    s->fd = -1;
}

/* The reply head is in s->head[0..end): status 200, Content-Length. */
static int parse_head(slot *s, size_t end) {
    if (end < 12 || memcmp(s->head, "HTTP/1.", 7) != 0 || memcmp(s->head + 8, " 200", 4) != 0) {
        errno = 0;
        note_error(s, "status is not 200");
        return -1;
    }
    long long len = -1;
    for (char *p = s->head; p && p < s->head + end; p = memchr(p, '\n', s->head + end - p)) {
        if (*p == '\n')
            p++;
        if (strncasecmp(p, "content-length:", 15) == 0)
            len = atoll(p + 15);
    }
    if (len < 0 || (expect_len >= 0 && len != expect_len)) {
        errno = 0;
        note_error(s, len < 0 ? "no Content-Length" : "wrong Content-Length");
        return -1;
    }
    s->left = len - (long long)(s->hlen - end);
    return 0;
}

/* Runs a slot's state machine until it must wait; returns 1 when the
 * connection is over (done or failed). */
static int drive(slot *s) {
    for (;;) {
        int rc, err;
        switch (s->state) {
        case CONNECTING: {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            if (soerr) {
                errno = soerr;
                note_error(s, "connect");
                return 1;
            }
            s->ssl = SSL_new(ctx);
            SSL_set_ex_data(s->ssl, slot_idx, s);
            SSL_set_fd(s->ssl, s->fd);
            if (resume && s->sess)
                SSL_set_session(s->ssl, s->sess);
            s->state = HANDSHAKE;
            break;
        }
        case HANDSHAKE:
            rc = SSL_connect(s->ssl);
            if (rc == 1) {
                if (!cipher[0]) {
                    snprintf(cipher, sizeof cipher, "%s", SSL_get_cipher_name(s->ssl));
                    int nid = SSL_get_negotiated_group(s->ssl);
                    const char *g = nid ? OBJ_nid2sn(nid) : NULL;
                    snprintf(group, sizeof group, "%s", g ? g : "?");
                }
                if (!s->first) {
                    later++;
                    resumed += SSL_session_reused(s->ssl) ? 1 : 0;
                }
                s->state = WRITING;
                break;
            }
            err = SSL_get_error(s->ssl, rc);
            if (err == SSL_ERROR_WANT_READ) { want(s, EPOLLIN); return 0; }
            if (err == SSL_ERROR_WANT_WRITE) { want(s, EPOLLOUT); return 0; }
            note_error(s, "handshake");
            return 1;
        case WRITING:
            rc = SSL_write(s->ssl, req + s->wpos, (int)(reqlen - s->wpos));
            if (rc > 0) {
                s->wpos += (size_t)rc;
                if (s->wpos == reqlen)
                    s->state = READING;
                break;
            }
            err = SSL_get_error(s->ssl, rc);
            if (err == SSL_ERROR_WANT_READ) { want(s, EPOLLIN); return 0; }
            if (err == SSL_ERROR_WANT_WRITE) { want(s, EPOLLOUT); return 0; }
            note_error(s, "write");
            return 1;
        case READING: {
            char buf[1 << 16];
            char *dst = s->left < 0 ? s->head + s->hlen : buf;
            int cap = s->left < 0 ? (int)(sizeof s->head - 1 - s->hlen) : (int)sizeof buf;
            if (cap <= 0) {
                errno = 0;
                note_error(s, "reply head over 4 KiB");
                return 1;
            }
            rc = SSL_read(s->ssl, dst, cap);
            if (rc <= 0) {
                err = SSL_get_error(s->ssl, rc);
                if (err == SSL_ERROR_WANT_READ) { want(s, EPOLLIN); return 0; }
                if (err == SSL_ERROR_WANT_WRITE) { want(s, EPOLLOUT); return 0; }
                errno = 0;
                note_error(s, "connection closed before the end of the reply");
                return 1;
            }
            if (s->left < 0) {
                s->hlen += (size_t)rc;
                s->head[s->hlen] = 0;
                char *e = strstr(s->head, "\r\n\r\n");
                if (e && parse_head(s, (size_t)(e + 4 - s->head)) < 0)
                    return 1;
            } else {
                s->left -= rc;
            }
            if (s->left == 0) {
                done++;
                s->first = 0;
                return 2;
            }
            break;
        }
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 5)
        fail("usage: tls_conns PORT PATH CONNS SECONDS [--resume] [--expect-len N]");
    port = atoi(argv[1]);
    const char *path = argv[2];
    int nconn = atoi(argv[3]);
    double secs = atof(argv[4]);
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--resume"))
            resume = 1;
        else if (!strcmp(argv[i], "--expect-len") && i + 1 < argc)
            expect_len = atoll(argv[++i]);
        else
            fail("unknown argument");
    }
    if (port <= 0 || nconn <= 0 || nconn > MAXCONN || secs <= 0)
        fail("bad PORT, CONNS or SECONDS");
    reqlen = (size_t)snprintf(req, sizeof req,
                              "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n",
                              path, port);

    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        fail("SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    if (resume) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, new_session);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    slot_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        fail("epoll_create1");

    double t0 = now(), end = t0 + secs;
    for (int i = 0; i < nconn; i++) {
        slots[i].first = 1;
        open_conn(&slots[i]);
    }
    struct epoll_event evs[MAXCONN];
    double t = t0;
    while ((t = now()) < end) {
        int n = epoll_wait(ep, evs, MAXCONN, 50);
        if (n < 0 && errno != EINTR)
            fail("epoll_wait");
        for (int i = 0; i < n; i++) {
            slot *s = evs[i].data.ptr;
            int r = drive(s);
            if (r) {
                close_conn(s, r == 2);
                open_conn(s);
            }
        }
    }
    t = now();
    printf("connections %lld resumed %lld later %lld errors %lld seconds %.3f rate %.1f cipher %s "
           "group %s\n", done, resumed, later, errors, t - t0, done / (t - t0), cipher[0] ? cipher : "?",
           group[0] ? group : "?");
    if (errors) {
        fprintf(stderr, "tls_conns: %lld failed connections; first: %s\n", errors, first_err);
        return 1;
    }
    if (resume && later && !resumed) {
        fprintf(stderr, "tls_conns: none of %lld later connections was resumed\n", later);
        return 1;
    }
    return 0;
}
