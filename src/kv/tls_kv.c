/* TLS for brisk-kv, as Redis 6+ has it: the tls-* options, a second set
 * of listeners on tls-port, the handshake (driven by the loop, with a
 * deadline) and the client's reads and writes through core/tls.
 *
 * A TLS client is an ordinary kv_client whose c->tls is set: server.c
 * calls kv_tls_read/kv_tls_write instead of read/write on that one branch,
 * so a plain client pays nothing else. The handshake runs before the
 * kv_client exists (a kv_tls_hs of its own), so maxclients, protected mode
 * and the client list see only connections that completed it; their
 * refusals then travel inside TLS, where the client can read them.
 *
 * Replication over TLS: a replica that arrives on tls-port is served like
 * any (replication.c relays its full sync through the parent); with
 * tls-replication yes our own link to a master is a TLS client
 * (kv_tls_link_conn): tls-client-cert-file/-key-file, else tls-cert-file/
 * -key-file, is the certificate we present, and tls-ca-cert-file and/or
 * tls-ca-cert-dir verify the master's. Encrypted keys load with
 * tls-key-file-pass / tls-client-key-file-pass. */
#include "kv/server.h"

#include "core/log.h"
#include "core/net.h"
#include "core/tls.h"
#include "kv/mem.h"
#include "kv/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HANDSHAKE_MS 10000 /* a peer that does not finish by then is dropped */
#define MAX_TLS_LISTEN KV_MAX_BIND

/* The TLS side of a client (c->tls). */
struct kv_tls_client {
    tls_conn *conn;
    kv_client *c;
    int write_wants_read; /* tls_write said EAGAIN + TLS_WANT_READ */
    int queued;           /* in the pending-read list */
    struct kv_tls_client *next_pending;
};

/* A connection between accept and the end of its handshake. */
typedef struct kv_tls_hs {
    bk_io io;
    bk_timer deadline;
    tls_conn *conn;
    int fd;
    struct sockaddr_storage ss;
    struct kv_tls_hs *prev, *next, *next_free;
} kv_tls_hs;

/* ---- options ---- */

enum tkind { T_STR, T_BOOL, T_INT, T_AUTH };

static struct {
    long long port, cache_size, cache_timeout;
    long long auth; /* TLS_VERIFY_*: tls-auth-clients no / optional / yes */
    long long session_caching, prefer_server, replication, cluster;
    char *cert, *key, *key_pass, *client_cert, *client_key, *client_key_pass, *dh, *ca, *ca_dir,
        *protocols, *ciphers, *ciphersuites;
} tc = { .cache_size = 20480, .cache_timeout = 300, .auth = TLS_VERIFY_REQUIRED,
         .session_caching = 1 };

typedef struct {
    const char *name;
    enum tkind kind;
    void *p;
    long long min, max;
    int ctx; /* a change rebuilds the server context */
} topt;

static const topt topts[] = {
    { "tls-port", T_INT, &tc.port, 0, 65535, 0 },
    { "tls-cert-file", T_STR, &tc.cert, 0, 0, 1 },
    { "tls-key-file", T_STR, &tc.key, 0, 0, 1 },
    { "tls-key-file-pass", T_STR, &tc.key_pass, 0, 0, 1 },
    { "tls-client-cert-file", T_STR, &tc.client_cert, 0, 0, 0 },
    { "tls-client-key-file", T_STR, &tc.client_key, 0, 0, 0 },
    { "tls-client-key-file-pass", T_STR, &tc.client_key_pass, 0, 0, 0 },
    { "tls-dh-params-file", T_STR, &tc.dh, 0, 0, 1 },
    { "tls-ca-cert-file", T_STR, &tc.ca, 0, 0, 1 },
    { "tls-ca-cert-dir", T_STR, &tc.ca_dir, 0, 0, 1 },
    { "tls-auth-clients", T_AUTH, &tc.auth, 0, 0, 1 },
    { "tls-protocols", T_STR, &tc.protocols, 0, 0, 1 },
    { "tls-ciphers", T_STR, &tc.ciphers, 0, 0, 1 },
    { "tls-ciphersuites", T_STR, &tc.ciphersuites, 0, 0, 1 },
    { "tls-prefer-server-ciphers", T_BOOL, &tc.prefer_server, 0, 1, 1 },
    { "tls-session-caching", T_BOOL, &tc.session_caching, 0, 1, 1 },
    { "tls-session-cache-size", T_INT, &tc.cache_size, 0, INT_MAX, 1 },
    { "tls-session-cache-timeout", T_INT, &tc.cache_timeout, 0, INT_MAX, 1 },
    { "tls-replication", T_BOOL, &tc.replication, 0, 1, 0 },
    { "tls-cluster", T_BOOL, &tc.cluster, 0, 1, 0 },
};

static const char *auth_names[] = { "no", "optional", "yes" }; /* by TLS_VERIFY_* */

/* ---- state ---- */

static tls_ctx *ctx;
static tls_ctx *client_ctx; /* the replication link's, built at its first use */
static bk_io listen_io[MAX_TLS_LISTEN];
static int nlisten;
static int started; /* kv_tls_start ran: option changes apply at once */
static kv_tls_hs *handshakes, *hs_to_free;
static unsigned long long nhandshakes;
static struct kv_tls_client *pending_reads;
static bk_timer later; /* after the batch: pending reads, freeing handshakes */
static bk_timer accept_resume; /* listeners paused by EMFILE listen again */

static const char *nz(const char *s)
{
    return s && s[0] ? s : NULL;
}

/* Builds the context from the options; NULL with a message in err. */
static tls_ctx *build_ctx(char *err, size_t errlen)
{
    if (!nz(tc.cert) || !nz(tc.key)) {
        snprintf(err, errlen, "tls-cert-file and tls-key-file must be set");
        return NULL;
    }
    if (tc.auth != TLS_VERIFY_NONE && !nz(tc.ca) && !nz(tc.ca_dir)) {
        snprintf(err, errlen, "tls-ca-cert-file must be set when tls-auth-clients is %s "
                              "(or tls-ca-cert-dir)", auth_names[tc.auth]);
        return NULL;
    }
    tls_config c;
    tls_config_defaults(&c);
    c.cert_file = tc.cert;
    c.key_file = tc.key;
    c.key_pass = nz(tc.key_pass);
    c.ca_file = nz(tc.ca);
    c.ca_dir = nz(tc.ca_dir);
    c.verify_clients = (int)tc.auth;
    c.protocols = nz(tc.protocols);
    c.ciphers = nz(tc.ciphers);
    c.ciphersuites = nz(tc.ciphersuites);
    c.session_tickets = (int)tc.session_caching;
    c.session_cache = tc.session_caching ? (int)tc.cache_size : 0;
    c.ticket_lifetime = tc.cache_timeout > 0 ? (unsigned)tc.cache_timeout : 300;
    c.ktls = 0; /* small replies: kernel TLS buys nothing and costs a syscall path */
    return tls_ctx_new(&c, ctx, err, errlen);
}

/* ---- client I/O (server.c's hooks) ---- */

static void later_cb(bk_loop *l, bk_timer *t);

static void queue_pending(struct kv_tls_client *t)
{
    if (t->queued)
        return;
    t->queued = 1;
    t->next_pending = pending_reads;
    pending_reads = t;
    if (!timer_active(&later))
        timer_start(&srv.loop, &later, 0);
}

/* One tls_read per readable event, as read(2) for a plain client (it
 * returns one TLS record, 16 KiB at most), then more while the TLS layer
 * holds data (decrypted, or records read ahead): that costs no syscall.
 * Records still in the socket wake the loop again; what the TLS layer
 * holds when p is full is read after this batch, without waiting for the
 * socket, which may have nothing more to say. */
ssize_t kv_tls_read(kv_client *c, void *p, size_t n)
{
    struct kv_tls_client *t = c->tls;
    if (t->write_wants_read) {
        t->write_wants_read = 0;
        kv_client_output_added(c); /* the blocked write may go on now */
    }
    ssize_t r = tls_read(t->conn, p, n);
    if (r > 0) {
        size_t got = (size_t)r;
        while (got < n && tls_pending(t->conn)) {
            ssize_t more = tls_read(t->conn, (char *)p + got, n - got);
            if (more <= 0) {
                /* The end or an error: the next read after this batch
                 * sees it again (the socket may never wake for it).
                 * EAGAIN is a partial record: the socket will. */
                if (more == 0 || errno != EAGAIN)
                    queue_pending(t);
                break;
            }
            got += (size_t)more;
        }
        if (tls_pending(t->conn))
            queue_pending(t);
        return (ssize_t)got;
    }
    if (r < 0 && errno == EAGAIN && tls_want(t->conn) == TLS_WANT_WRITE)
        loop_io_set(&srv.loop, &c->io, LOOP_READ | LOOP_WRITE);
    return r;
}

ssize_t kv_tls_write(kv_client *c, const void *p, size_t n)
{
    struct kv_tls_client *t = c->tls;
    size_t done = 0;
    ssize_t r = 0;
    while (done < n) {
        r = tls_write(t->conn, (const char *)p + done, n - done);
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    if (r < 0 && errno == EAGAIN)
        t->write_wants_read = tls_want(t->conn) == TLS_WANT_READ;
    return done > 0 ? (ssize_t)done : r;
}

/* The events to wait for while output is pending. */
unsigned kv_tls_events(kv_client *c)
{
    return c->tls->write_wants_read ? LOOP_READ : LOOP_READ | LOOP_WRITE;
}

static void tls_client_free(struct kv_tls_client *t)
{
    tls_conn_free(t->conn);
    kv_free(t);
}

/* From kv_client_close, before the socket closes. */
void kv_tls_client_closed(kv_client *c)
{
    struct kv_tls_client *t = c->tls;
    c->tls = NULL;
    tls_shutdown(t->conn);
    if (t->queued) {
        for (struct kv_tls_client **pp = &pending_reads; *pp; pp = &(*pp)->next_pending)
            if (*pp == t) {
                *pp = t->next_pending;
                break;
            }
    }
    tls_client_free(t);
}

/* c's connection now belongs to a forked child (a Lua debugging session):
 * closing it here must not send close_notify or anything unsent. */
void kv_tls_client_handed_off(kv_client *c)
{
    tls_abandon(c->tls->conn);
}

/* kv_client_accept's refusal of a TLS client: the message goes inside TLS. */
void kv_tls_refuse(struct kv_tls_client *t, const char *msg, size_t n)
{
    ssize_t w = tls_write(t->conn, msg, n);
    (void)w;
    tls_shutdown(t->conn);
    tls_client_free(t);
}

/* ---- handshakes ---- */

static void hs_unlink(kv_tls_hs *h)
{
    loop_io_stop(&srv.loop, &h->io);
    timer_stop(&srv.loop, &h->deadline);
    if (h->prev)
        h->prev->next = h->next;
    else
        handshakes = h->next;
    if (h->next)
        h->next->prev = h->prev;
    nhandshakes--;
    /* Its bk_io may still be in this batch: freed after it. */
    h->next_free = hs_to_free;
    hs_to_free = h;
    if (!timer_active(&later))
        timer_start(&srv.loop, &later, 0);
}

static void hs_fail(kv_tls_hs *h, const char *why)
{
    char ip[64];
    net_format_ip((struct sockaddr *)&h->ss, ip, sizeof ip);
    /* Verbose, as Redis logs a failed accept: at the default level a flood
     * of garbage connections must not fill the log. */
    log_debug("TLS handshake with %s:%d failed: %s", ip, net_port((struct sockaddr *)&h->ss), why);
    srv.stat_rejected_conns++;
    hs_unlink(h);
    tls_conn_free(h->conn);
    close(h->fd);
}

static void hs_io_cb(bk_loop *l, bk_io *io, unsigned events)
{
    kv_tls_hs *h = io->udata;
    int rc = tls_handshake(h->conn);
    if (rc < 0 && errno == EAGAIN) {
        loop_io_set(l, io, tls_want(h->conn) == TLS_WANT_WRITE ? LOOP_WRITE : LOOP_READ);
        return;
    }
    if (rc < 0) {
        char e[200];
        tls_last_error(e, sizeof e);
        hs_fail(h, e[0] ? e : errno == EPROTO ? "protocol error" : strerror(errno));
        return;
    }
    hs_unlink(h);
    struct kv_tls_client *t = kv_calloc(sizeof *t);
    t->conn = h->conn;
    kv_client *c = kv_client_accept(h->fd, &h->ss, t);
    if (!c)
        return; /* refused (and freed) by kv_client_accept */
    t->c = c;
    if (tls_pending(t->conn))
        queue_pending(t); /* a command that came with the handshake's last flight */
}

static void hs_timeout_cb(bk_loop *l, bk_timer *tm)
{
    hs_fail(tm->udata, "timed out");
}

static void accept_resume_cb(bk_loop *l, bk_timer *t)
{
    for (int i = 0; i < srv.nlisten; i++)
        if (srv.listen_io[i].fd >= 0)
            loop_io_set(l, &srv.listen_io[i], LOOP_READ);
    for (int i = 0; i < nlisten; i++)
        if (listen_io[i].fd >= 0)
            loop_io_set(l, &listen_io[i], LOOP_READ);
}

/* accept() failed with errno. Out of descriptors, the connection stays in
 * the backlog and the listener readable: returning at once would spin the
 * loop at 100% CPU until a descriptor frees. So every listener (plain and
 * TLS: they share the limit) stops for 100 ms, then tries again. */
void kv_accept_failed(bk_io *io)
{
    if (errno != EMFILE && errno != ENFILE) {
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
            log_warn("accept: %s", strerror(errno));
        return;
    }
    if (timer_active(&accept_resume))
        return; /* paused already */
    log_warn("accept: %s; pausing accepts for 100 ms", strerror(errno));
    for (int i = 0; i < srv.nlisten; i++)
        if (srv.listen_io[i].fd >= 0)
            loop_io_set(&srv.loop, &srv.listen_io[i], 0);
    for (int i = 0; i < nlisten; i++)
        if (listen_io[i].fd >= 0)
            loop_io_set(&srv.loop, &listen_io[i], 0);
    (void)io;
    timer_init(&accept_resume, accept_resume_cb, NULL); /* (not active: see above) */
    timer_start(&srv.loop, &accept_resume, 100);
}

static void tls_accept_cb(bk_loop *l, bk_io *io, unsigned events)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(io->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            kv_accept_failed(io);
            return;
        }
        /* maxclients only sees connections whose handshake is done: without
         * this bound, silent peers could hold any number of descriptors and
         * TLS sessions for the whole handshake deadline. */
        if (nhandshakes >= (unsigned long long)srv.cfg.maxclients) {
            srv.stat_rejected_conns++;
            close(fd);
            continue;
        }
        tls_conn *conn = ctx ? tls_conn_new(ctx, fd) : NULL;
        if (!conn) {
            close(fd);
            continue;
        }
        kv_tls_hs *h = kv_calloc(sizeof *h);
        h->conn = conn;
        h->fd = fd;
        h->ss = ss;
        timer_init(&h->deadline, hs_timeout_cb, h);
        if (loop_io_start(l, &h->io, fd, LOOP_READ, hs_io_cb, h) < 0) {
            tls_conn_free(conn);
            close(fd);
            kv_free(h);
            continue;
        }
        timer_start(l, &h->deadline, HANDSHAKE_MS);
        nhandshakes++;
        h->next = handshakes;
        if (handshakes)
            handshakes->prev = h;
        handshakes = h;
    }
}

static void later_cb(bk_loop *l, bk_timer *t)
{
    while (hs_to_free) {
        kv_tls_hs *h = hs_to_free;
        hs_to_free = h->next_free;
        kv_free(h);
    }
    struct kv_tls_client *list = pending_reads;
    pending_reads = NULL;
    while (list) {
        struct kv_tls_client *tc_ = list;
        list = tc_->next_pending;
        tc_->queued = 0;
        kv_client *c = tc_->c;
        /* As if the socket were readable: server.c's client callback. */
        if (c && !(c->flags & CLIENT_CLOSED) && c->io.cb)
            c->io.cb(l, &c->io, LOOP_READ);
    }
}

/* ---- the replication link (we are the client) ---- */

int kv_tls_replication(void)
{
    return (int)tc.replication;
}

int kv_tls_port(void)
{
    return (int)tc.port;
}

/* The link's context from the options, unless built already; -1 with err. */
static int client_ctx_build(char *err, size_t errlen)
{
    if (client_ctx)
        return 0;
    /* Redis's rules: tls-cert-file and tls-key-file are required; the
     * certificate shown is tls-client-cert-file's when set */
    if (!nz(tc.cert) || !nz(tc.key)) {
        snprintf(err, errlen, "tls-cert-file and tls-key-file must be set");
        return -1;
    }
    int own = nz(tc.client_cert) != NULL;
    tls_client_config c = {
        .cert_file = own ? tc.client_cert : tc.cert,
        .key_file = own ? nz(tc.client_key) : tc.key,
        .key_pass = own ? nz(tc.client_key_pass) : nz(tc.key_pass),
        .ca_file = nz(tc.ca),
        .ca_dir = nz(tc.ca_dir),
        .protocols = nz(tc.protocols),
        .ciphers = nz(tc.ciphers),
        .ciphersuites = nz(tc.ciphersuites),
    };
    client_ctx = tls_client_ctx_new(&c, err, errlen);
    return client_ctx ? 0 : -1;
}

tls_conn *kv_tls_link_conn(int fd, const char *host, char *err, size_t errlen)
{
    if (client_ctx_build(err, errlen) < 0)
        return NULL;
    tls_conn *conn = tls_conn_new_client(client_ctx, fd, host);
    if (!conn)
        snprintf(err, errlen, "out of memory");
    return conn;
}

void kv_tls_attach(kv_client *c, tls_conn *conn)
{
    struct kv_tls_client *t = kv_calloc(sizeof *t);
    t->conn = conn;
    t->c = c;
    c->tls = t;
    if (tls_pending(conn))
        queue_pending(t); /* records read with the link's last handshake bytes */
}

/* ---- listeners and start ---- */

void kv_tls_child_close_listeners(void)
{
    for (int i = 0; i < nlisten; i++)
        if (listen_io[i].fd >= 0)
            close(listen_io[i].fd); /* the parent's epoll keeps its own */
}

static void close_listeners(void)
{
    for (int i = 0; i < nlisten; i++) {
        int fd = listen_io[i].fd;
        if (fd >= 0) {
            loop_io_forget(&srv.loop, &listen_io[i]);
            close(fd);
        }
    }
    nlisten = 0;
}

void kv_tls_close_listeners(void)
{
    close_listeners();
}

static int open_tls_listeners(int port)
{
    int fds[MAX_TLS_LISTEN];
    char err[256];
    int n = kv_open_listeners(port, srv.cfg.bind, srv.cfg.nbind, fds, err, sizeof err);
    if (n < 0) {
        log_error("tls-port: %s", err);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (loop_io_start(&srv.loop, &listen_io[nlisten], fds[i], LOOP_READ, tls_accept_cb,
                          NULL) < 0) {
            close(fds[i]);
            continue;
        }
        nlisten++;
    }
    return 0;
}

/* The context, when TLS is wanted; logs why not and returns -1. */
static int configure(void)
{
    if (!tc.port)
        return 0;
    char err[512];
    tls_ctx *n = build_ctx(err, sizeof err);
    if (!n) {
        log_error("Failed to configure TLS: %s", err);
        return -1;
    }
    tls_ctx_unref(ctx); /* connections keep the old one until they close */
    ctx = n;
    char d[256];
    tls_ctx_describe(ctx, d, sizeof d);
    log_info("TLS certificate: %s", d);
    if (nz(tc.dh))
        log_info("tls-dh-params-file is not used: OpenSSL 3 picks the DH parameters");
    return 0;
}

int kv_tls_start(void)
{
    timer_init(&later, later_cb, NULL);
    if (srv.cfg.port == 0 && tc.port == 0) {
        log_error("Configured to not listen anywhere, exiting.");
        return -1;
    }
    if (configure() < 0)
        return -1;
    char err[512];
    if (tc.replication && client_ctx_build(err, sizeof err) < 0) {
        log_error("Failed to configure TLS for replication: %s", err);
        return -1;
    }
    if (tc.port && open_tls_listeners((int)tc.port) < 0)
        return -1;
    started = 1;
    return 0;
}

void kv_tls_stop(void)
{
    close_listeners();
    while (handshakes) {
        kv_tls_hs *h = handshakes;
        int fd = h->fd;
        tls_conn_free(h->conn);
        hs_unlink(h);
        close(fd);
    }
    if (timer_active(&later))
        timer_stop(&srv.loop, &later);
    if (timer_active(&accept_resume))
        timer_stop(&srv.loop, &accept_resume);
    while (hs_to_free) {
        kv_tls_hs *h = hs_to_free;
        hs_to_free = h->next_free;
        kv_free(h);
    }
    tls_ctx_unref(ctx);
    ctx = NULL;
    tls_ctx_unref(client_ctx);
    client_ctx = NULL;
    for (size_t i = 0; i < BK_ARRAY_LEN(topts); i++)
        if (topts[i].kind == T_STR) {
            char **s = topts[i].p;
            kv_free(*s);
            *s = NULL;
        }
    started = 0;
}

/* ---- CONFIG ---- */

static void fmt(const topt *o, char *out, size_t n)
{
    switch (o->kind) {
    case T_STR: {
        const char *s = *(char *const *)o->p;
        snprintf(out, n, "%s", s ? s : "");
        break;
    }
    case T_BOOL: snprintf(out, n, "%s", *(long long *)o->p ? "yes" : "no"); break;
    case T_INT: snprintf(out, n, "%lld", *(long long *)o->p); break;
    case T_AUTH: snprintf(out, n, "%s", auth_names[*(long long *)o->p]); break;
    }
}

/* Parses v into *val (a long long, or a new string in *sval). */
static int parse(const topt *o, const char *v, long long *val, char **sval, char *err,
                 size_t errlen)
{
    switch (o->kind) {
    case T_STR:
        *sval = kv_strndup(v, strlen(v));
        return 0;
    case T_BOOL:
        if (strcasecmp(v, "yes") == 0 || strcasecmp(v, "no") == 0) {
            *val = strcasecmp(v, "yes") == 0;
            return 0;
        }
        snprintf(err, errlen, "argument must be 'yes' or 'no'");
        return -1;
    case T_INT:
        if (kv_parse_ll(v, strlen(v), val) < 0) {
            snprintf(err, errlen, "argument couldn't be parsed into an integer");
            return -1;
        }
        if (*val < o->min || *val > o->max) {
            snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min,
                     o->max);
            return -1;
        }
        return 0;
    case T_AUTH:
        for (size_t i = 0; i < BK_ARRAY_LEN(auth_names); i++)
            if (strcasecmp(v, auth_names[i]) == 0) {
                *val = (long long)i;
                return 0;
            }
        snprintf(err, errlen, "argument(s) must be one of the following: no, yes, optional");
        return -1;
    }
    return -1;
}

static void store(const topt *o, long long val, char *sval)
{
    if (o->kind == T_STR) {
        char **s = o->p;
        kv_free(*s);
        *s = sval;
    } else {
        *(long long *)o->p = val;
    }
}

/* Makes a changed option take effect while serving; -1 (logged) when it
 * cannot, and the caller puts the old value back. */
static int apply(const topt *o, long long old_port)
{
    if (o->p == &tc.port) {
        if (tc.port == old_port)
            return 0;
        if (tc.port && configure() < 0)
            return -1;
        close_listeners();
        if (!tc.port || open_tls_listeners((int)tc.port) == 0)
            return 0;
        if (old_port && open_tls_listeners((int)old_port) < 0)
            log_error("CONFIG SET tls-port: the old TLS listeners did not come back");
        return -1;
    }
    /* With tls-replication on, the link's context must build too (Redis
     * refuses a TLS setting it cannot configure) */
    char err[512];
    if (tc.replication && client_ctx_build(err, sizeof err) < 0) {
        log_error("Failed to configure TLS for replication: %s", err);
        return -1;
    }
    return o->ctx ? configure() : 0;
}

int kv_tls_config_set(const char *name, int argc, char **argv, int at_runtime, char *err,
                      size_t errlen)
{
    const topt *o = NULL;
    for (size_t i = 0; i < BK_ARRAY_LEN(topts); i++)
        if (strcasecmp(name, topts[i].name) == 0)
            o = &topts[i];
    if (!o)
        return 1;
    if (argc != 1) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    long long val = 0;
    char *sval = NULL;
    if (parse(o, argv[0], &val, &sval, err, errlen) < 0)
        return -1;
    /* the next replication link builds its context from the new options */
    tls_ctx_unref(client_ctx);
    client_ctx = NULL;
    if (!at_runtime || !started) {
        store(o, val, sval);
        return 0;
    }
    /* Keep the old value to put back if the change cannot apply. */
    long long old = 0;
    char *olds = NULL;
    if (o->kind == T_STR) {
        const char *s = *(char *const *)o->p;
        olds = s ? kv_strndup(s, strlen(s)) : NULL;
    } else {
        old = *(long long *)o->p;
    }
    store(o, val, sval);
    if (apply(o, old) == 0) {
        kv_free(olds);
        return 0;
    }
    store(o, old, olds);
    snprintf(err, errlen, o->p == &tc.port ? "Unable to listen on this port. Check server logs."
                                           : "Unable to update TLS configuration. Check server "
                                             "logs.");
    return -1;
}

void kv_tls_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                       void *ud)
{
    char val[PATH_MAX + 64];
    for (size_t i = 0; i < BK_ARRAY_LEN(topts); i++) {
        const char *name = topts[i].name;
        if (!kv_glob_match(pattern.p, pattern.len, name, strlen(name), 1))
            continue;
        fmt(&topts[i], val, sizeof val);
        fn(ud, name, val);
    }
}
