/* Unit tests for the TLS layer (src/core/tls.c): a real OpenSSL client talks
 * to a tls_conn over a non-blocking socketpair. Certificates are made here
 * (self-signed P-256), so the test needs no files of its own. */
#include "core/tls.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char cert_ok[128], key_ok[128], cert_old[128], key_other[128], ocsp_file[128];

static EVP_PKEY *make_key(void)
{
    return EVP_EC_gen("P-256");
}

/* A self-signed certificate for "localhost" valid from now+from_s to now+to_s. */
static void write_cert(const char *path, EVP_PKEY *key, long from_s, long to_s)
{
    X509 *x = X509_new();
    assert_non_null(x);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, n);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    PEM_write_X509(f, x);
    fclose(f);
    X509_free(x);
}

static void write_key(const char *path, EVP_PKEY *key)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
    fclose(f);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/brisk-tls-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(cert_ok, sizeof cert_ok, "%s/ok.pem", dir);
    snprintf(key_ok, sizeof key_ok, "%s/ok.key", dir);
    snprintf(cert_old, sizeof cert_old, "%s/old.pem", dir);
    snprintf(key_other, sizeof key_other, "%s/other.key", dir);
    snprintf(ocsp_file, sizeof ocsp_file, "%s/ocsp.der", dir);
    EVP_PKEY *k = make_key(), *k2 = make_key();
    write_cert(cert_ok, k, -60, 86400);
    write_key(key_ok, k);
    write_cert(cert_old, k, -7200, -3600);
    write_key(key_other, k2);
    FILE *f = fopen(ocsp_file, "w");
    fputs("not really DER, stapled as is", f);
    fclose(f);
    EVP_PKEY_free(k);
    EVP_PKEY_free(k2);
    return 0;
}

static int teardown(void **state)
{
    const char *files[] = { cert_ok, key_ok, cert_old, key_other, ocsp_file };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(files[i]);
    rmdir(dir);
    return 0;
}

static tls_ctx *server_ctx_ktls(const char *alpn, int tickets, int ktls)
{
    tls_config c;
    tls_config_defaults(&c);
    c.ktls = ktls;
    c.cert_file = cert_ok;
    c.key_file = key_ok;
    c.alpn = alpn;
    c.session_tickets = tickets;
    c.ocsp_file = ocsp_file;
    char err[256];
    tls_ctx *t = tls_ctx_new(&c, NULL, err, sizeof err);
    if (!t)
        fail_msg("tls_ctx_new: %s", err);
    return t;
}

static tls_ctx *server_ctx(const char *alpn, int tickets)
{
    return server_ctx_ktls(alpn, tickets, 1);
}

typedef struct {
    int fds[2];
    tls_conn *s;
    SSL *c;
} pair;

static void pair_open(pair *p, tls_ctx *t, SSL_CTX *cctx)
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fds), 0);
    for (int i = 0; i < 2; i++)
        fcntl(p->fds[i], F_SETFL, O_NONBLOCK);
    p->s = tls_conn_new(t, p->fds[0]);
    assert_non_null(p->s);
    p->c = SSL_new(cctx);
    SSL_set_fd(p->c, p->fds[1]);
    SSL_set_connect_state(p->c);
}

static void pair_close(pair *p)
{
    tls_conn_free(p->s);
    SSL_free(p->c);
    close(p->fds[0]);
    close(p->fds[1]);
}

/* Steps both ends until both finish (1), or one fails (-1). */
static int handshake(pair *p)
{
    int sdone = 0, cdone = 0;
    for (int i = 0; i < 100 && !(sdone && cdone); i++) {
        if (!cdone) {
            int rc = SSL_do_handshake(p->c);
            if (rc == 1)
                cdone = 1;
            else if (SSL_get_error(p->c, rc) != SSL_ERROR_WANT_READ)
                return -1;
        }
        if (!sdone) {
            int rc = tls_handshake(p->s);
            if (rc == 1)
                sdone = 1;
            else if (errno != EAGAIN)
                return -1;
        }
    }
    ERR_clear_error();
    return sdone && cdone ? 1 : -1;
}

static SSL_CTX *client_ctx(int max_version)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(c, TLS1_VERSION);
    if (max_version)
        SSL_CTX_set_max_proto_version(c, max_version);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT);
    return c;
}

static void test_handshake_alpn_and_data(void **state)
{
    tls_ctx *t = server_ctx("h2,http/1.1", 1);
    SSL_CTX *cc = client_ctx(0);
    static const unsigned char protos[] = "\x08http/1.1\x02h2";
    SSL_CTX_set_alpn_protos(cc, protos, sizeof protos - 1);
    pair p;
    pair_open(&p, t, cc);
    assert_int_equal(handshake(&p), 1);
    size_t n;
    const char *a = tls_alpn(p.s, &n);
    assert_non_null(a);
    assert_memory_equal(a, "h2", 2); /* the server's preference wins */
    assert_int_equal(n, 2);
    assert_string_equal(tls_version(p.s), "TLSv1.3");
    assert_int_equal(SSL_write(p.c, "GET / HTTP/1.1\r\n\r\n", 18), 18);
    char buf[64];
    assert_int_equal(tls_read(p.s, buf, sizeof buf), 18);
    assert_memory_equal(buf, "GET /", 5);
    /* nothing more: EAGAIN, wanting to read, even with a stale error left
     * in this thread's queue by other code (SSL_get_error would say
     * SSL_ERROR_SSL) */
    ERR_raise(ERR_LIB_SSL, ERR_R_INTERNAL_ERROR);
    assert_int_equal(tls_read(p.s, buf, sizeof buf), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(tls_want(p.s), TLS_WANT_READ);
    ERR_raise(ERR_LIB_SSL, ERR_R_INTERNAL_ERROR);
    assert_int_equal(tls_write(p.s, "HTTP/1.1 200 OK\r\n", 17), 17);
    assert_int_equal(SSL_read(p.c, buf, sizeof buf), 17);
    /* no kTLS over a unix socket: sendfile says so, callers fall back */
    assert_int_equal(tls_sendfile(p.s, 0, 0, 1), -1);
    assert_int_equal(errno, ENOTSUP);
    /* the client's close_notify reads as the end */
    SSL_shutdown(p.c);
    assert_int_equal(tls_read(p.s, buf, sizeof buf), 0);
    pair_close(&p);
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

static void test_no_common_alpn_goes_on_without(void **state)
{
    tls_ctx *t = server_ctx("h2,http/1.1", 1);
    SSL_CTX *cc = client_ctx(0);
    static const unsigned char protos[] = "\x06spdy/3";
    SSL_CTX_set_alpn_protos(cc, protos, sizeof protos - 1);
    pair p;
    pair_open(&p, t, cc);
    assert_int_equal(handshake(&p), 1);
    size_t n;
    assert_null(tls_alpn(p.s, &n));
    pair_close(&p);
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

static void test_old_protocols_refused(void **state)
{
    tls_ctx *t = server_ctx(NULL, 1);
    int olds[] = { TLS1_VERSION, TLS1_1_VERSION };
    for (size_t i = 0; i < 2; i++) {
        SSL_CTX *cc = client_ctx(olds[i]);
        SSL_CTX_set_security_level(cc, 0);
        pair p;
        pair_open(&p, t, cc);
        assert_int_equal(handshake(&p), -1);
        pair_close(&p);
        SSL_CTX_free(cc);
    }
    /* TLS 1.2 is accepted, with a forward-secret AEAD cipher */
    SSL_CTX *cc = client_ctx(TLS1_2_VERSION);
    pair p;
    pair_open(&p, t, cc);
    assert_int_equal(handshake(&p), 1);
    assert_string_equal(tls_version(p.s), "TLSv1.2");
    assert_non_null(strstr(tls_cipher(p.s), "ECDHE"));
    assert_non_null(strstr(tls_cipher(p.s), "GCM"));
    pair_close(&p);
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

/* One connection that reads the server's ticket, then one that offers it. */
static int resumes(tls_ctx *t, SSL_CTX *cc, tls_ctx *t2)
{
    pair p;
    pair_open(&p, t, cc);
    assert_int_equal(handshake(&p), 1);
    /* TLS 1.3 tickets come after the handshake: let the client read them */
    assert_int_equal(tls_write(p.s, "x", 1), 1);
    char b;
    assert_int_equal(SSL_read(p.c, &b, 1), 1);
    SSL_SESSION *sess = SSL_get1_session(p.c);
    SSL_shutdown(p.c); /* a session freed without close_notify is not resumable */
    pair_close(&p);
    pair_open(&p, t2, cc);
    SSL_set_session(p.c, sess);
    assert_int_equal(handshake(&p), 1);
    int r = tls_resumed(p.s);
    assert_int_equal(SSL_session_reused(p.c), r);
    SSL_SESSION_free(sess);
    pair_close(&p);
    return r;
}

/* TLS 1.3 clients use a ticket once: a resumed connection must bring a new
 * one, so that a third connection resumes too. */
static void test_resumed_connection_gets_a_new_ticket(void **state)
{
    SSL_CTX *cc = client_ctx(0);
    tls_ctx *t = server_ctx(NULL, 1);
    SSL_SESSION *sess = NULL;
    for (int i = 0; i < 3; i++) {
        pair p;
        pair_open(&p, t, cc);
        if (sess)
            SSL_set_session(p.c, sess);
        assert_int_equal(handshake(&p), 1);
        assert_int_equal(SSL_session_reused(p.c), i > 0);
        assert_int_equal(SSL_version(p.c), TLS1_3_VERSION);
        assert_int_equal(tls_write(p.s, "x", 1), 1);
        char b;
        assert_int_equal(SSL_read(p.c, &b, 1), 1);
        SSL_SESSION *next = SSL_get1_session(p.c);
        /* OpenSSL's client marks an offered TLS 1.3 session not resumable */
        assert_int_equal(SSL_SESSION_is_resumable(next), 1);
        if (sess)
            assert_ptr_not_equal(next, sess);
        SSL_SESSION_free(sess);
        sess = next;
        SSL_shutdown(p.c);
        pair_close(&p);
    }
    SSL_SESSION_free(sess);
    tls_ctx_unref(t);
    SSL_CTX_free(cc);
}

/* Tickets are AES-CBC sealed: key name (16 bytes), IV (16), ciphertext,
 * MAC. Every ticket needs a fresh IV, also past the first pool of 256
 * that a thread draws at once, and in a forked child, which must not hand
 * out its parent's. */
#define IV_TICKETS 300

static void ticket_ivs(tls_ctx *t, SSL_CTX *cc, unsigned char (*ivs)[16], int n)
{
    for (int i = 0; i < n; i++) {
        pair p;
        pair_open(&p, t, cc);
        assert_int_equal(handshake(&p), 1);
        assert_int_equal(tls_write(p.s, "x", 1), 1);
        char b;
        assert_int_equal(SSL_read(p.c, &b, 1), 1); /* (after the ticket) */
        const unsigned char *tick;
        size_t len;
        SSL_SESSION_get0_ticket(SSL_get_session(p.c), &tick, &len);
        assert_true(len > 32);
        memcpy(ivs[i], tick + 16, 16);
        pair_close(&p);
    }
}

static void test_ticket_ivs_are_fresh(void **state)
{
    SSL_CTX *cc = client_ctx(0);
    tls_ctx *t = server_ctx(NULL, 1);
    static unsigned char ivs[IV_TICKETS + 4][16];
    ticket_ivs(t, cc, ivs, IV_TICKETS);
    /* a child forked now draws other IVs than its parent goes on with (the
     * child's come back through a pipe) */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsigned char mine[2][16];
        ticket_ivs(t, cc, mine, 2);
        _exit(write(fds[1], mine, sizeof mine) == (ssize_t)sizeof mine ? 0 : 1);
    }
    close(fds[1]);
    ticket_ivs(t, cc, ivs + IV_TICKETS + 2, 2);
    unsigned char theirs[2][16];
    assert_int_equal(read(fds[0], theirs, sizeof theirs), (ssize_t)sizeof theirs);
    memcpy(ivs[IV_TICKETS], theirs, sizeof theirs);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < IV_TICKETS + 4; i++)
        for (int j = 0; j < i; j++)
            if (memcmp(ivs[i], ivs[j], 16) == 0)
                fail_msg("tickets %d and %d have the same IV", j, i);
    tls_ctx_unref(t);
    SSL_CTX_free(cc);
}

static void test_resumption_by_tickets(void **state)
{
    SSL_CTX *cc = client_ctx(0);
    tls_ctx *on = server_ctx(NULL, 1);
    assert_int_equal(resumes(on, cc, on), 1);
    /* a reloaded context keeps the ticket keys */
    tls_config c;
    tls_config_defaults(&c);
    c.cert_file = cert_ok;
    c.key_file = key_ok;
    char err[256];
    tls_ctx *reloaded = tls_ctx_new(&c, on, err, sizeof err);
    assert_non_null(reloaded);
    assert_int_equal(resumes(on, cc, reloaded), 1);
    /* a fresh context does not know them: a full handshake */
    tls_ctx *fresh = server_ctx(NULL, 1);
    assert_int_equal(resumes(on, cc, fresh), 0);
    tls_ctx *off = server_ctx(NULL, 0);
    assert_int_equal(resumes(off, cc, off), 0);
    tls_ctx_unref(on);
    tls_ctx_unref(reloaded);
    tls_ctx_unref(fresh);
    tls_ctx_unref(off);
    SSL_CTX_free(cc);
}

static int ocsp_seen;

static int client_ocsp_cb(SSL *s, void *arg)
{
    const unsigned char *resp;
    long n = SSL_get_tlsext_status_ocsp_resp(s, &resp);
    ocsp_seen = n == 29 && memcmp(resp, "not really DER", 14) == 0;
    return 1;
}

static void test_ocsp_stapled(void **state)
{
    tls_ctx *t = server_ctx(NULL, 1);
    SSL_CTX *cc = client_ctx(0);
    SSL_CTX_set_tlsext_status_cb(cc, client_ocsp_cb);
    pair p;
    pair_open(&p, t, cc);
    SSL_set_tlsext_status_type(p.c, TLSEXT_STATUSTYPE_ocsp);
    ocsp_seen = 0;
    assert_int_equal(handshake(&p), 1);
    assert_int_equal(ocsp_seen, 1);
    pair_close(&p);
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

static void expect_refused(const char *cert, const char *key, const char *protocols, const char *want)
{
    tls_config c;
    tls_config_defaults(&c);
    c.cert_file = cert;
    c.key_file = key;
    c.protocols = protocols;
    char err[512] = "";
    tls_ctx *t = tls_ctx_new(&c, NULL, err, sizeof err);
    assert_null(t);
    if (!strstr(err, want))
        fail_msg("error '%s' does not say '%s'", err, want);
}

static void test_bad_configs_refused_clearly(void **state)
{
    expect_refused(cert_old, key_ok, NULL, "expired on");
    expect_refused(cert_ok, key_other, NULL, "does not match the certificate");
    expect_refused("/nonexistent.pem", key_ok, NULL, "cannot load the certificate chain /nonexistent.pem");
    expect_refused(cert_ok, "/nonexistent.key", NULL, "cannot load the private key");
    expect_refused(cert_ok, key_ok, "TLSv1.1", "unsupported TLS protocol 'TLSv1.1'");
    expect_refused(NULL, NULL, NULL, "needs a certificate file");
}

/* Coalesced writes: records wait in the buffer until 64 KiB do or
 * tls_flush; a full socket leaves ciphertext in tls_unsent, sent by the
 * next tls_flush; the bytes arrive exact and in order; close_notify too. */
static void test_coalesced_writes(void **state)
{
    tls_ctx *t = server_ctx(NULL, 0);
    SSL_CTX *cc = client_ctx(0);
    pair p;
    pair_open(&p, t, cc);
    tls_buffer_writes(p.s);
    assert_int_equal(handshake(&p), 1);
    char buf[4096];
    memset(buf, 'a', 1000);
    assert_int_equal(tls_write(p.s, buf, 1000), 1000);
    assert_true(tls_unsent(p.s) > 1000); /* one record, not sent yet */
    assert_int_equal(SSL_read(p.c, buf, sizeof buf), -1);
    assert_int_equal(tls_flush(p.s), 0);
    assert_int_equal(tls_unsent(p.s), 0);
    assert_int_equal(SSL_read(p.c, buf, sizeof buf), 1000);

    /* 3 MiB through a socket that takes far less: write until full, then
     * read some and flush, as a server's event loop would */
    size_t total = 3 << 20, sent = 0, got = 0;
    unsigned char *src = malloc(total), *dst = malloc(total);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < total; i++)
        src[i] = (unsigned char)(i * 7 + i / 251);
    int saw_unsent = 0;
    for (int rounds = 0; got < total && rounds < 100000; rounds++) {
        if (tls_flush(p.s) == 0 && sent < total) {
            ssize_t w = tls_write(p.s, src + sent, total - sent);
            if (w > 0)
                sent += (size_t)w;
            else
                assert_int_equal(errno, EAGAIN);
            if (sent == total && tls_flush(p.s) < 0)
                assert_int_equal(errno, EAGAIN);
        } else if (tls_unsent(p.s)) {
            assert_int_equal(errno, EAGAIN);
            assert_int_equal(tls_want(p.s), TLS_WANT_WRITE);
            saw_unsent = 1;
        }
        int r = SSL_read(p.c, dst + got, (int)(total - got < 7000 ? total - got : 7000));
        if (r > 0)
            got += (size_t)r;
    }
    assert_true(saw_unsent);
    assert_int_equal(got, total);
    assert_memory_equal(src, dst, total);
    assert_int_equal(tls_unsent(p.s), 0);
    free(src);
    free(dst);

    tls_shutdown(p.s);
    assert_int_equal(tls_unsent(p.s), 0);
    assert_int_equal(SSL_read(p.c, buf, sizeof buf), 0);
    assert_int_equal(SSL_get_error(p.c, 0), SSL_ERROR_ZERO_RETURN);
    pair_close(&p);
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

/* Fills the socket from fd's side with junk until it takes no more;
 * returns the bytes sent (the peer drains them with drain_junk). */
static size_t fill_with_junk(int fd)
{
    static const char junk[4096];
    size_t n = 0;
    for (;;) {
        ssize_t w = send(fd, junk, sizeof junk, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        n += (size_t)w;
    }
    assert_int_equal(errno, EAGAIN);
    return n;
}

static void drain_junk(int fd, size_t n)
{
    char b[4096];
    while (n) {
        ssize_t r = read(fd, b, n < sizeof b ? n : sizeof b);
        assert_true(r > 0);
        n -= (size_t)r;
    }
}

/* One client step that must go on (it has what it waited for). */
static int client_step(pair *p)
{
    int rc = SSL_do_handshake(p->c);
    if (rc == 1)
        return 1;
    assert_int_equal(SSL_get_error(p->c, rc), SSL_ERROR_WANT_READ);
    return 0;
}

/* Coalesced from the handshake on: the server's first flight still leaves
 * within tls_handshake (the client waits for it; no tls_flush will come),
 * also when the socket takes it only later; the TLS 1.3 ticket waits for
 * the first response and leaves with it; a read does not send it. */
static void test_ticket_held_for_the_first_response(void **state)
{
    tls_ctx *t = server_ctx_ktls(NULL, 1, 0);
    SSL_CTX *cc = client_ctx(0);
    for (int full = 0; full < 2; full++) {
        pair p;
        pair_open(&p, t, cc);
        tls_buffer_writes(p.s);
        assert_int_equal(tls_coalescing(p.s), 1);
        assert_int_equal(client_step(&p), 0); /* ClientHello */
        size_t junk = full ? fill_with_junk(p.fds[0]) : 0;
        assert_int_equal(tls_handshake(p.s), -1);
        assert_int_equal(errno, EAGAIN);
        if (full) { /* the socket took nothing: wait until it is writable */
            assert_int_equal(tls_want(p.s), TLS_WANT_WRITE);
            assert_true(tls_unsent(p.s) > 0);
            drain_junk(p.fds[1], junk);
            assert_int_equal(tls_handshake(p.s), -1);
            assert_int_equal(errno, EAGAIN);
        }
        assert_int_equal(tls_want(p.s), TLS_WANT_READ);
        assert_int_equal(tls_unsent(p.s), 0); /* the whole flight sent */
        assert_int_equal(client_step(&p), 1); /* ... so the client can finish */
        assert_int_equal(tls_handshake(p.s), 1);
        size_t ticket = tls_unsent(p.s);
        assert_true(ticket > 0); /* the NewSessionTicket, held */
        assert_int_equal(SSL_write(p.c, "GET /", 5), 5);
        char buf[64];
        assert_int_equal(tls_read(p.s, buf, sizeof buf), 5);
        assert_int_equal(tls_unsent(p.s), ticket); /* a read left it there */
        assert_int_equal(tls_write(p.s, "200", 3), 3);
        assert_int_equal(tls_flush(p.s), 0);
        assert_int_equal(SSL_read(p.c, buf, sizeof buf), 3);
        SSL_SESSION *sess = SSL_get1_session(p.c);
        assert_int_equal(SSL_SESSION_has_ticket(sess), 1);
        SSL_SESSION_free(sess);
        pair_close(&p);
    }
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

/* TLS 1.2 (full handshake): the server's last flight (ticket,
 * ChangeCipherSpec, Finished) is what the client waits for, so a socket
 * that does not take it at once keeps the handshake going (EAGAIN,
 * TLS_WANT_WRITE) instead of ending it with the flight unsent. */
static void test_tls12_last_flight_sent_when_the_socket_takes_it(void **state)
{
    tls_ctx *t = server_ctx_ktls(NULL, 1, 0);
    SSL_CTX *cc = client_ctx(TLS1_2_VERSION);
    pair p;
    pair_open(&p, t, cc);
    tls_buffer_writes(p.s);
    assert_int_equal(client_step(&p), 0);   /* ClientHello */
    assert_int_equal(tls_handshake(p.s), -1); /* ServerHello .. ServerHelloDone */
    assert_int_equal(tls_unsent(p.s), 0);
    assert_int_equal(client_step(&p), 0); /* ClientKeyExchange .. Finished */
    size_t junk = fill_with_junk(p.fds[0]);
    assert_int_equal(tls_handshake(p.s), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(tls_want(p.s), TLS_WANT_WRITE);
    drain_junk(p.fds[1], junk);
    assert_int_equal(tls_handshake(p.s), 1);
    assert_int_equal(tls_unsent(p.s), 0);
    assert_int_equal(client_step(&p), 1);
    assert_string_equal(tls_version(p.s), "TLSv1.2");
    assert_int_equal(tls_write(p.s, "ok", 2), 2);
    assert_int_equal(tls_flush(p.s), 0);
    char buf[8];
    assert_int_equal(SSL_read(p.c, buf, sizeof buf), 2);
    pair_close(&p);
    SSL_CTX_free(cc);
    tls_ctx_unref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_alpn_and_data),
        cmocka_unit_test(test_coalesced_writes),
        cmocka_unit_test(test_ticket_held_for_the_first_response),
        cmocka_unit_test(test_tls12_last_flight_sent_when_the_socket_takes_it),
        cmocka_unit_test(test_no_common_alpn_goes_on_without),
        cmocka_unit_test(test_old_protocols_refused),
        cmocka_unit_test(test_resumption_by_tickets),
        cmocka_unit_test(test_resumed_connection_gets_a_new_ticket),
        cmocka_unit_test(test_ticket_ivs_are_fresh),
        cmocka_unit_test(test_ocsp_stapled),
        cmocka_unit_test(test_bad_configs_refused_clearly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
