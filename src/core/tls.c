/* TLS over OpenSSL 3: contexts with rotated ticket keys, ALPN and OCSP
 * stapling; non-blocking connections with read/write-like calls. */
#include "core/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* Mozilla's "intermediate" TLS 1.2 list: forward secret, AEAD only. */
#define TLS12_CIPHERS                                                                            \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:" \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

typedef struct {
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
    time_t born;
} ticket_key;

struct tls_ctx {
    SSL_CTX *ssl;
    atomic_int refs;
    unsigned char alpn[64]; /* wire format: length-prefixed names */
    unsigned alpn_len;
    unsigned char *ocsp;
    long ocsp_len;
    unsigned lifetime;
    EVP_CIPHER *ticket_cipher; /* AES-256-CBC, fetched once (not per ticket) */
    pthread_mutex_t keys_lock;
    ticket_key keys[2]; /* [0] seals new tickets; [1] still opens old ones */
    char subject[128];
    char expires[40];
};

/* Coalesced writes (tls_buffer_writes): records are encrypted into wbuf
 * and go to the socket together, one send(2) per WBUF_FLUSH_AT bytes of
 * ciphertext instead of one per 16 KiB record. Before each record there
 * is room for a whole one (WBUF_RECORD: 16 KiB of plaintext, the header,
 * the tag and padding), so the buffer never refuses OpenSSL a write. */
#define WBUF_FLUSH_AT (64 * 1024)
#define WBUF_RECORD (16 * 1024 + 512)
#define WBUF_CAP (WBUF_FLUSH_AT + 2 * WBUF_RECORD)

struct tls_conn {
    SSL *ssl;
    tls_ctx *ctx;
    unsigned want;
    int fd;
    uint8_t buffer_wanted;  /* tls_buffer_writes was called */
    uint8_t buffered;       /* ... and the write BIO is wbuf (no kTLS) */
    char *wbuf;             /* ciphertext not yet sent: [woff, wlen); NULL when empty */
    size_t woff, wlen;
    char *held;             /* a TLS 1.3 session ticket waiting for the first write, */
    size_t held_len;        /* out of wbuf: an idle connection keeps no 97 KiB buffer */
};

void tls_config_defaults(tls_config *c)
{
    memset(c, 0, sizeof *c);
    c->session_tickets = 1;
    c->ticket_lifetime = 3600;
    c->ktls = 1;
}

const char *tls_last_error(char *buf, size_t n)
{
    unsigned long e = ERR_peek_last_error();
    if (!e) {
        buf[0] = '\0';
        return buf;
    }
    ERR_error_string_n(e, buf, n);
    ERR_clear_error();
    return buf;
}

static void fail(char *err, size_t errlen, const char *what, const char *arg)
{
    char ssl[200];
    tls_last_error(ssl, sizeof ssl);
    snprintf(err, errlen, "%s%s%s%s%s", what, arg ? " " : "", arg ? arg : "", ssl[0] ? ": " : "", ssl);
}

/* TLS 1.3 suites in the server's order (prefer_server_ciphers): AES-128-GCM
 * first, as RFC 8446 makes it the one every implementation has: with
 * AES-NI it is the cheapest, and its SHA-256 key schedule costs less than
 * SHA-384's (a handshake hashes and HMACs a few dozen times). Clients
 * without AES hardware put ChaCha20 first and get it
 * (SSL_OP_PRIORITIZE_CHACHA). */
#define TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

/* ---- ticket keys ---- */

static int new_key(ticket_key *k)
{
    if (RAND_bytes(k->name, sizeof k->name) != 1 || RAND_bytes(k->aes, sizeof k->aes) != 1 ||
        RAND_bytes(k->hmac, sizeof k->hmac) != 1)
        return -1;
    k->born = time(NULL);
    return 0;
}

/* Returns the key to seal with, rotating it when it has sealed long enough. */
static ticket_key *sealing_key(tls_ctx *t, ticket_key *copy)
{
    pthread_mutex_lock(&t->keys_lock);
    if (time(NULL) - t->keys[0].born >= (time_t)t->lifetime) {
        ticket_key k;
        if (new_key(&k) == 0) {
            t->keys[1] = t->keys[0];
            t->keys[0] = k;
        }
    }
    *copy = t->keys[0];
    pthread_mutex_unlock(&t->keys_lock);
    return copy;
}

static int find_key(tls_ctx *t, const unsigned char *name, ticket_key *copy)
{
    int found = -1;
    pthread_mutex_lock(&t->keys_lock);
    for (int i = 0; i < 2; i++) {
        /* An old key opens tickets for two lifetimes at most. */
        if (memcmp(t->keys[i].name, name, 16) == 0 &&
            time(NULL) - t->keys[i].born < 2 * (time_t)t->lifetime) {
            *copy = t->keys[i];
            found = i;
            break;
        }
    }
    pthread_mutex_unlock(&t->keys_lock);
    return found;
}

/* Ticket IVs come from the CSPRNG 256 at a time per thread, not one
 * RAND_bytes per ticket (each call costs a provider round trip and a
 * getpid(2), OpenSSL's fork check). An IV is public (it travels in the
 * ticket) and must only be unpredictable and fresh: a pool drawn ahead
 * keeps both. A forked child starts with an empty pool, so that parent
 * and child never hand out the same IVs. */
#define IV_POOL (256 * 16)

static _Thread_local struct {
    unsigned char b[IV_POOL];
    unsigned used; /* bytes of b handed out */
    uint8_t ready; /* b was filled once (a new thread starts with nothing) */
} iv_pool;
static pthread_once_t iv_pool_once = PTHREAD_ONCE_INIT;

static void iv_pool_forget(void)
{
    iv_pool.ready = 0; /* (the child's only thread is the one that forked) */
}

static void iv_pool_init(void)
{
    pthread_atfork(NULL, NULL, iv_pool_forget);
}

static int ticket_iv(unsigned char *iv, size_t n)
{
    if (!iv_pool.ready || iv_pool.used + n > IV_POOL) {
        pthread_once(&iv_pool_once, iv_pool_init);
        if (RAND_bytes(iv_pool.b, IV_POOL) != 1)
            return -1;
        iv_pool.used = 0;
        iv_pool.ready = 1;
    }
    memcpy(iv, iv_pool.b + iv_pool.used, n);
    iv_pool.used += (unsigned)n;
    return 0;
}

static int set_mac(EVP_MAC_CTX *hctx, unsigned char *key)
{
    OSSL_PARAM p[3];
    p[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key, 32);
    p[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    p[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(hctx, p);
}

static int ticket_cb(SSL *s, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
    tls_ctx *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(s));
    ticket_key k;
    int rc = 1;
    if (enc) {
        sealing_key(t, &k);
        if (ticket_iv(iv, (size_t)EVP_CIPHER_get_iv_length(t->ticket_cipher)) < 0)
            rc = -1;
        memcpy(name, k.name, 16);
        if (rc == 1 && (EVP_EncryptInit_ex(cctx, t->ticket_cipher, NULL, k.aes, iv) != 1 ||
                        set_mac(hctx, k.hmac) != 1))
            rc = -1;
    } else {
        int i = find_key(t, name, &k);
        if (i < 0)
            rc = 0; /* unknown or retired key: a full handshake */
        else if (EVP_DecryptInit_ex(cctx, t->ticket_cipher, NULL, k.aes, iv) != 1 ||
                 set_mac(hctx, k.hmac) != 1)
            rc = -1;
        else if (i != 0 || SSL_version(s) == TLS1_3_VERSION)
            /* 2: valid, and issue a new ticket: under the new key, or in TLS
             * 1.3, where clients use a ticket once (RFC 8446 C.4; OpenSSL's
             * client and browsers do): without a new one their next
             * connection would be a full handshake */
            rc = 2;
    }
    OPENSSL_cleanse(&k, sizeof k);
    return rc;
}

/* ---- kernel TLS ---- */

static pthread_once_t ktls_once = PTHREAD_ONCE_INIT;
static int ktls_kernel; /* set once, then only read */

/* Whether the kernel has the "tls" TCP upper-layer protocol. Without it,
 * OpenSSL's attempt at every handshake costs two failing setsockopt calls
 * (TCP_ULP, then SOL_TLS); asked once here instead. On a socket that is not
 * connected the kernel answers ENOTCONN when the ULP exists (loading its
 * module first if it can), ENOENT when it does not, and ENOPROTOOPT when
 * it knows no ULPs at all. */
static void ktls_probe(void)
{
    ktls_kernel = 1; /* unknown: let OpenSSL try */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") < 0 &&
        (errno == ENOENT || errno == ENOPROTOOPT))
        ktls_kernel = 0;
    close(fd);
}

static int ktls_available(void)
{
    pthread_once(&ktls_once, ktls_probe);
    return ktls_kernel;
}

/* ---- ALPN and OCSP ---- */

static int alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                   unsigned inlen, void *arg)
{
    tls_ctx *t = arg;
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, t->alpn, t->alpn_len, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* no common protocol: go on without ALPN (HTTP/1.1) */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static int ocsp_cb(SSL *s, void *arg)
{
    tls_ctx *t = arg;
    if (!t->ocsp || SSL_get_tlsext_status_type(s) != TLSEXT_STATUSTYPE_ocsp)
        return SSL_TLSEXT_ERR_NOACK;
    unsigned char *copy = OPENSSL_memdup(t->ocsp, (size_t)t->ocsp_len);
    if (!copy)
        return SSL_TLSEXT_ERR_NOACK;
    SSL_set_tlsext_status_ocsp_resp(s, copy, t->ocsp_len); /* OpenSSL frees copy */
    return SSL_TLSEXT_ERR_OK;
}

static int parse_alpn(tls_ctx *t, const char *list, char *err, size_t errlen)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && p[0] == ' ')
            p++, n--;
        while (n && p[n - 1] == ' ')
            n--;
        if (n == 0 || n > 255 || t->alpn_len + 1 + n > sizeof t->alpn) {
            snprintf(err, errlen, "bad ALPN list '%s'", list);
            return -1;
        }
        t->alpn[t->alpn_len++] = (unsigned char)n;
        memcpy(t->alpn + t->alpn_len, p, n);
        t->alpn_len += (unsigned)n;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

static int read_file(const char *path, unsigned char **out, long *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = -1;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && n <= 1 << 20 && fseek(f, 0, SEEK_SET) == 0) {
            *out = malloc((size_t)n);
            if (*out && fread(*out, 1, (size_t)n, f) == (size_t)n) {
                *len = n;
                rc = 0;
            }
        }
    }
    fclose(f);
    if (rc < 0) {
        free(*out);
        *out = NULL;
        snprintf(err, errlen, "cannot read %s (empty, over 1 MiB or unreadable)", path);
    }
    return rc;
}

static int parse_protocols(SSL_CTX *ssl, const char *list, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int version;
    } known[] = { { "TLSv1.2", TLS1_2_VERSION }, { "TLSv1.3", TLS1_3_VERSION } };
    int lo = 0, hi = 0;
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s", list);
    for (char *save, *w = strtok_r(tmp, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
        int v = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(w, known[i].name) == 0)
                v = known[i].version;
        if (!v) {
            snprintf(err, errlen, "unsupported TLS protocol '%s' (TLSv1.2 and TLSv1.3 are)", w);
            return -1;
        }
        lo = lo && lo < v ? lo : v;
        hi = hi > v ? hi : v;
    }
    if (!lo) {
        snprintf(err, errlen, "no TLS protocol in '%s'", list);
        return -1;
    }
    SSL_CTX_set_min_proto_version(ssl, lo);
    SSL_CTX_set_max_proto_version(ssl, hi);
    return 0;
}

static void asn1_time_text(const ASN1_TIME *at, char *out, size_t n)
{
    struct tm tm;
    if (ASN1_TIME_to_tm(at, &tm) == 1)
        strftime(out, n, "%Y-%m-%d %H:%M:%S GMT", &tm);
    else
        snprintf(out, n, "(unreadable time)");
}

/* The certificate must be valid now: a server that starts with an expired
 * one would fail every handshake without saying why. */
static int check_cert(tls_ctx *t, const char *path, char *err, size_t errlen)
{
    X509 *x = SSL_CTX_get0_certificate(t->ssl);
    if (!x) {
        snprintf(err, errlen, "no certificate in %s", path);
        return -1;
    }
    char when[40];
    asn1_time_text(X509_get0_notAfter(x), t->expires, sizeof t->expires);
    if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
        snprintf(err, errlen, "certificate %s expired on %s", path, t->expires);
        return -1;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
        asn1_time_text(X509_get0_notBefore(x), when, sizeof when);
        snprintf(err, errlen, "certificate %s is not valid before %s", path, when);
        return -1;
    }
    X509_NAME_oneline(X509_get_subject_name(x), t->subject, sizeof t->subject);
    return 0;
}

/* A context of this method with the protocol versions and ciphers (NULL:
 * brisk's defaults); NULL with a message in err. */
static tls_ctx *ctx_new(const SSL_METHOD *method, const char *protocols, const char *ciphers,
                        const char *ciphersuites, char *err, size_t errlen)
{
    tls_ctx *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    atomic_init(&t->refs, 1);
    pthread_mutex_init(&t->keys_lock, NULL);
    ERR_clear_error();
    t->ssl = SSL_CTX_new(method);
    if (!t->ssl) {
        fail(err, errlen, "cannot create a TLS context", NULL);
        goto fail;
    }
    SSL_CTX_set_app_data(t->ssl, t);
    if (parse_protocols(t->ssl, protocols ? protocols : "TLSv1.2 TLSv1.3", err, errlen) < 0)
        goto fail;
    if (SSL_CTX_set_cipher_list(t->ssl, ciphers ? ciphers : TLS12_CIPHERS) != 1) {
        fail(err, errlen, "bad TLS 1.2 cipher list", ciphers);
        goto fail;
    }
    if (ciphersuites && SSL_CTX_set_ciphersuites(t->ssl, ciphersuites) != 1) {
        fail(err, errlen, "bad TLS 1.3 cipher suites", ciphersuites);
        goto fail;
    }
    return t;
fail:
    tls_ctx_unref(t);
    return NULL;
}

static int load_cert_key_files(tls_ctx *t, const char *cert_file, const char *key_file, char *err,
                               size_t errlen)
{
    if (SSL_CTX_use_certificate_chain_file(t->ssl, cert_file) != 1) {
        fail(err, errlen, "cannot load the certificate chain", cert_file);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(t->ssl, key_file, SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
        fail(err, errlen, "cannot load the private key", key_file);
        return -1;
    }
    if (ERR_peek_last_error() || SSL_CTX_check_private_key(t->ssl) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "the private key %s does not match the certificate %s", key_file,
                 cert_file);
        return -1;
    }
    return check_cert(t, cert_file, err, errlen);
}

/* An encrypted key's passphrase: the string given (u), or none. Never a
 * prompt: OpenSSL's default callback would read one from the terminal. */
static int pass_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    size_t n = u ? strlen(u) : 0;
    if (n == 0 || n > (size_t)size)
        return 0; /* no passphrase (or one too long): the key does not load */
    memcpy(buf, u, n);
    return (int)n;
}

/* The certificate chain and its private key (which must match, and may be
 * encrypted with pass), then check_cert's dates. */
static int load_cert_key(tls_ctx *t, const char *cert_file, const char *key_file,
                         const char *pass, char *err, size_t errlen)
{
    SSL_CTX_set_default_passwd_cb(t->ssl, pass_cb);
    SSL_CTX_set_default_passwd_cb_userdata(t->ssl, (void *)pass);
    int rc = load_cert_key_files(t, cert_file, key_file, err, errlen);
    SSL_CTX_set_default_passwd_cb_userdata(t->ssl, NULL); /* (pass is the caller's) */
    return rc;
}

tls_ctx *tls_ctx_new(const tls_config *c, const tls_ctx *prev, char *err, size_t errlen)
{
    if (!c->cert_file || !c->key_file) {
        snprintf(err, errlen, "TLS needs a certificate file and a key file");
        return NULL;
    }
    tls_ctx *t = ctx_new(TLS_server_method(), c->protocols, c->ciphers, c->ciphersuites, err,
                         errlen);
    if (!t)
        return NULL;
    t->lifetime = c->ticket_lifetime ? c->ticket_lifetime : 3600;
    /* Compression invites CRIME; renegotiation is a DoS lever. Released
     * buffers keep an idle TLS connection small (no 34 KiB of buffers). */
    SSL_CTX_set_options(t->ssl, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                    (c->ktls && ktls_available() ? SSL_OP_ENABLE_KTLS : 0));
    SSL_CTX_set_mode(t->ssl, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                                 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (c->prefer_server_ciphers) {
        SSL_CTX_set_options(t->ssl, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
        if (!c->ciphersuites && SSL_CTX_set_ciphersuites(t->ssl, TLS13_SUITES) != 1) {
            fail(err, errlen, "bad TLS 1.3 cipher suites", TLS13_SUITES);
            goto fail;
        }
    }
    /* One read(2) takes what the socket holds, not a 5-byte record header
     * and then its body: a keep-alive request costs one read instead of
     * two. Whole records may then wait in the buffer: tls_pending. */
    SSL_CTX_set_read_ahead(t->ssl, 1);
    if (load_cert_key(t, c->cert_file, c->key_file, c->key_pass, err, errlen) < 0)
        goto fail;
    if ((c->ca_file || c->ca_dir) &&
        SSL_CTX_load_verify_locations(t->ssl, c->ca_file, c->ca_dir) != 1) {
        fail(err, errlen, "cannot load the CA file or directory", c->ca_file ? c->ca_file : c->ca_dir);
        goto fail;
    }
    if (c->verify_clients != TLS_VERIFY_NONE) {
        if (!c->ca_file && !c->ca_dir) {
            snprintf(err, errlen, "verifying client certificates needs a CA file");
            goto fail;
        }
        int mode = SSL_VERIFY_PEER;
        if (c->verify_clients == TLS_VERIFY_REQUIRED)
            mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        SSL_CTX_set_verify(t->ssl, mode, NULL);
        /* (the CA names offered to clients: the file's; a directory's
         * CAs still verify) */
        STACK_OF(X509_NAME) *names = c->ca_file ? SSL_load_client_CA_file(c->ca_file) : NULL;
        if (names)
            SSL_CTX_set_client_CA_list(t->ssl, names);
    }
    if (c->alpn) {
        if (parse_alpn(t, c->alpn, err, errlen) < 0)
            goto fail;
        SSL_CTX_set_alpn_select_cb(t->ssl, alpn_cb, t);
    }
    if (c->ocsp_file) {
        if (read_file(c->ocsp_file, &t->ocsp, &t->ocsp_len, err, errlen) < 0)
            goto fail;
        SSL_CTX_set_tlsext_status_cb(t->ssl, ocsp_cb);
        SSL_CTX_set_tlsext_status_arg(t->ssl, t);
    }
    SSL_CTX_set_session_cache_mode(t->ssl, c->session_cache > 0 ? SSL_SESS_CACHE_SERVER : SSL_SESS_CACHE_OFF);
    if (c->session_cache > 0)
        SSL_CTX_sess_set_cache_size(t->ssl, c->session_cache);
    if (c->session_tickets) {
        if (prev) {
            /* prev's workers may be rotating its keys right now */
            pthread_mutex_t *lock = (pthread_mutex_t *)&prev->keys_lock;
            pthread_mutex_lock(lock);
            t->keys[0] = prev->keys[0];
            t->keys[1] = prev->keys[1];
            pthread_mutex_unlock(lock);
        } else if (new_key(&t->keys[0]) < 0 || new_key(&t->keys[1]) < 0) {
            fail(err, errlen, "no random bytes for ticket keys", NULL);
            goto fail;
        }
        /* (EVP_aes_256_cbc() would be looked up in the provider at every
         * ticket sealed or opened) */
        t->ticket_cipher = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
        if (!t->ticket_cipher) {
            fail(err, errlen, "no AES-256-CBC for session tickets", NULL);
            goto fail;
        }
        SSL_CTX_set_tlsext_ticket_key_evp_cb(t->ssl, ticket_cb);
        SSL_CTX_set_timeout(t->ssl, (long)t->lifetime);
        SSL_CTX_set_num_tickets(t->ssl, 1);
    } else {
        SSL_CTX_set_options(t->ssl, SSL_OP_NO_TICKET);
        if (c->session_cache <= 0)
            SSL_CTX_set_num_tickets(t->ssl, 0);
    }
    return t;
fail:
    tls_ctx_unref(t);
    return NULL;
}

tls_ctx *tls_client_ctx_new(const tls_client_config *c, char *err, size_t errlen)
{
    if (!c->ca_file && !c->ca_dir) {
        snprintf(err, errlen, "a CA file or directory is needed to verify the server");
        return NULL;
    }
    tls_ctx *t = ctx_new(TLS_client_method(), c->protocols, c->ciphers, c->ciphersuites, err,
                         errlen);
    if (!t)
        return NULL;
    SSL_CTX_set_options(t->ssl, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(t->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(t->ssl, 1);
    if (c->cert_file) {
        if (!c->key_file) {
            snprintf(err, errlen, "a client certificate needs its key file");
            goto fail;
        }
        if (load_cert_key(t, c->cert_file, c->key_file, c->key_pass, err, errlen) < 0)
            goto fail;
    }
    if (SSL_CTX_load_verify_locations(t->ssl, c->ca_file, c->ca_dir) != 1) {
        fail(err, errlen, "cannot load the CA file or directory", c->ca_file ? c->ca_file : c->ca_dir);
        goto fail;
    }
    SSL_CTX_set_verify(t->ssl, SSL_VERIFY_PEER, NULL);
    return t;
fail:
    tls_ctx_unref(t);
    return NULL;
}

void tls_ctx_ref(tls_ctx *t)
{
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void tls_ctx_unref(tls_ctx *t)
{
    if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    SSL_CTX_free(t->ssl);
    EVP_CIPHER_free(t->ticket_cipher);
    free(t->ocsp);
    pthread_mutex_destroy(&t->keys_lock);
    OPENSSL_cleanse(t->keys, sizeof t->keys);
    free(t);
}

void tls_ctx_describe(const tls_ctx *t, char *out, size_t n)
{
    snprintf(out, n, "%s, expires %s", t->subject, t->expires);
}

/* ---- the ciphertext buffer under coalesced writes ---- */

static pthread_once_t wbio_once = PTHREAD_ONCE_INIT;
static BIO_METHOD *wbio_method; /* set once, then only read */
static pthread_key_t spare_key; /* each thread's spare buffer (one), freed at thread exit */
static int wbio_ready;

/* A buffer for c's ciphertext: the thread's spare, or a new one. A
 * connection holds one only while it has ciphertext to send, so an idle
 * one costs nothing and a busy thread reuses the same memory. */
static int wbuf_get(tls_conn *c)
{
    char *b = pthread_getspecific(spare_key);
    if (b)
        pthread_setspecific(spare_key, NULL);
    else if (!(b = malloc(WBUF_CAP)))
        return -1;
    c->wbuf = b;
    c->woff = c->wlen = 0;
    if (c->held) { /* the held ticket goes first */
        memcpy(b, c->held, c->held_len);
        c->wlen = c->held_len;
        free(c->held);
        c->held = NULL;
        c->held_len = 0;
    }
    return 0;
}

static void wbuf_put(tls_conn *c)
{
    if (!c->wbuf)
        return;
    if (pthread_getspecific(spare_key) || pthread_setspecific(spare_key, c->wbuf) != 0)
        free(c->wbuf);
    c->wbuf = NULL;
    c->woff = c->wlen = 0;
}

/* The write BIO: appends records to wbuf; never touches the socket. */
static int wbio_write(BIO *b, const char *p, size_t n, size_t *done)
{
    tls_conn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (!c->wbuf && wbuf_get(c) < 0)
        return 0; /* out of memory: the write fails (EPROTO) */
    size_t k = WBUF_CAP - c->wlen < n ? WBUF_CAP - c->wlen : n;
    if (k == 0) { /* (never: see WBUF_RECORD) the caller sends first */
        BIO_set_retry_write(b);
        return 0;
    }
    memcpy(c->wbuf + c->wlen, p, k);
    c->wlen += k;
    *done = k;
    return 1;
}

static void send_quietly(tls_conn *c);

static long wbio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num, (void)ptr;
    if (cmd != BIO_CTRL_FLUSH)
        return 0;
    /* A flush ends a handshake flight: the peer waits for it, and OpenSSL
     * reads for the answer right after, so it goes now (what the socket does
     * not take, tls_handshake sends). Not a TLS 1.3 server's ticket: it
     * waits for the first response. After the handshake (a KeyUpdate, a
     * close_notify) the records wait in wbuf for tls_flush, or tls_read's
     * attempt. The flush succeeds either way. */
    tls_conn *c = BIO_get_data(b);
    if (SSL_in_init(c->ssl) && SSL_get_state(c->ssl) != TLS_ST_SW_SESSION_TICKET)
        send_quietly(c);
    return 1;
}

static int wbio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void wbio_init(void)
{
    if (pthread_key_create(&spare_key, free) != 0)
        return;
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "brisk ciphertext");
    if (!m || BIO_meth_set_write_ex(m, wbio_write) != 1 || BIO_meth_set_ctrl(m, wbio_ctrl) != 1 ||
        BIO_meth_set_create(m, wbio_create) != 1) {
        BIO_meth_free(m);
        return;
    }
    wbio_method = m;
    wbio_ready = 1;
}

/* Sends the pending ciphertext: 0 all of it, -1 with errno (EAGAIN: the
 * socket is full; a short send is taken as full, the next would only say
 * EAGAIN). */
static int send_out(tls_conn *c)
{
    while (c->woff < c->wlen) {
        size_t n = c->wlen - c->woff;
        ssize_t w = send(c->fd, c->wbuf + c->woff, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->want = TLS_WANT_WRITE;
                errno = EAGAIN;
            }
            return -1;
        }
        c->woff += (size_t)w;
        if ((size_t)w < n) {
            c->want = TLS_WANT_WRITE;
            errno = EAGAIN;
            return -1;
        }
    }
    c->woff = c->wlen = 0;
    return 0;
}

/* Sends what it can without reporting anything (errno and want kept): for
 * bytes OpenSSL wrote on its own, an alert or a KeyUpdate. What the socket
 * does not take waits for the next tls_flush. */
static void send_quietly(tls_conn *c)
{
    if (c->woff == c->wlen)
        return;
    int e = errno;
    unsigned want = c->want;
    if (send_out(c) == 0)
        wbuf_put(c);
    errno = e;
    c->want = want;
}

/* Keeps the unsent ciphertext (a TLS 1.3 ticket, a few hundred bytes) in
 * an allocation of its size until the next record joins it in wbuf
 * (wbuf_get), so that a connection waiting for its first request holds no
 * whole buffer. Out of memory: it is sent now instead. */
static void hold_unsent(tls_conn *c)
{
    size_t n = c->wlen - c->woff;
    char *h = malloc(n);
    if (!h) {
        send_quietly(c);
        return;
    }
    memcpy(h, c->wbuf + c->woff, n);
    c->woff = c->wlen = 0;
    wbuf_put(c);
    c->held = h;
    c->held_len = n;
}

/* The write BIO becomes wbuf (before the handshake, or after it unless
 * kTLS sends: see tls_buffer_writes). */
static void start_buffering(tls_conn *c)
{
    c->buffer_wanted = 0;
    if (tls_ktls_send(c) || (pthread_once(&wbio_once, wbio_init), !wbio_ready))
        return;
    BIO *b = BIO_new(wbio_method);
    if (!b)
        return; /* out of memory: records go to the socket one by one */
    BIO_set_data(b, c);
    SSL_set0_wbio(c->ssl, b); /* the socket BIO stays as the read BIO */
    c->buffered = 1;
}

/* ---- connections ---- */

tls_conn *tls_conn_new(tls_ctx *t, int fd)
{
    tls_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ssl = SSL_new(t->ssl);
    if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
        SSL_free(c->ssl);
        free(c);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(c->ssl);
    tls_ctx_ref(t);
    c->ctx = t;
    c->fd = fd;
    return c;
}

tls_conn *tls_conn_new_client(tls_ctx *t, int fd, const char *server_name)
{
    tls_conn *c = tls_conn_new(t, fd);
    if (!c)
        return NULL;
    SSL_set_connect_state(c->ssl);
    struct in6_addr a6;
    struct in_addr a4;
    if (server_name && server_name[0] && inet_pton(AF_INET, server_name, &a4) != 1 &&
        inet_pton(AF_INET6, server_name, &a6) != 1)
        SSL_set_tlsext_host_name(c->ssl, server_name); /* SNI carries names only (RFC 6066) */
    return c;
}

const char *tls_verify_error(const tls_conn *c)
{
    long v = SSL_get_verify_result(c->ssl);
    return v == X509_V_OK ? NULL : X509_verify_cert_error_string(v);
}

void tls_conn_free(tls_conn *c)
{
    if (!c)
        return;
    SSL_free(c->ssl);
    wbuf_put(c);
    free(c->held);
    tls_ctx_unref(c->ctx);
    free(c);
}

/* Without kTLS the buffer is the write BIO from the start of the
 * handshake: a TLS 1.3 server's session ticket, written as the handshake
 * ends, then waits there for the first response and leaves in its send
 * (one send(2) less per connection); tls_handshake sends every flight the
 * peer waits for itself. With kTLS asked for (SSL_OP_ENABLE_KTLS), the
 * socket BIO must be the write BIO when OpenSSL installs the keys: it hands
 * them to the kernel through it (a BIO of ours would silently mean no
 * kTLS), so the buffer comes after the handshake and the ticket goes on its
 * own, through the kernel, as OpenSSL writes it. */
void tls_buffer_writes(tls_conn *c)
{
    if (SSL_is_init_finished(c->ssl) || !(SSL_get_options(c->ssl) & SSL_OP_ENABLE_KTLS))
        start_buffering(c);
    else
        c->buffer_wanted = 1;
}

/* SSL_get_error reads this thread's error queue, which must be empty
 * before an I/O call. It almost always is (successful calls and
 * WANT_READ/WANT_WRITE leave nothing in it): a peek costs about a quarter
 * of ERR_clear_error (~840 instructions, a 16-slot loop), which was 8% of
 * an HTTPS/1.1 request's user-space instructions when it ran before every
 * SSL_read_ex and SSL_write_ex. */
static inline void err_clean(void)
{
    if (__builtin_expect(ERR_peek_error() != 0, 0))
        ERR_clear_error();
}

/* Maps an OpenSSL result to the read/write convention; rc <= 0. */
static int io_result(tls_conn *c, int rc)
{
    int e = SSL_get_error(c->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        c->want = TLS_WANT_READ;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        c->want = TLS_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        /* errno is the socket's; an EOF without close_notify reads as 0
         * (a truncation the HTTP framing detects). */
        if (ERR_peek_error() == 0 && errno == 0)
            return 0;
        if (errno == 0)
            errno = EPROTO;
        return -1;
    default:
        errno = EPROTO;
        if (c->buffered)
            send_quietly(c); /* the fatal alert, as a socket BIO would have sent it */
        return -1;
    }
}

int tls_handshake(tls_conn *c)
{
    err_clean();
    errno = 0;
    int rc = SSL_do_handshake(c->ssl);
    if (rc == 1) {
        /* (called again after an EAGAIN below: OpenSSL answers 1 at once) */
        c->want = 0;
        if (c->buffer_wanted)
            start_buffering(c);
        /* The last flight (TLS 1.2's ticket, ChangeCipherSpec and Finished; a
         * client's Finished): the peer waits for it, so the handshake is not
         * done for the caller until it is all sent. A TLS 1.3 server's is its
         * session ticket, which no client waits for: it stays for the first
         * response's send (tls_flush, or close_notify's at a close). */
        if (c->woff < c->wlen) {
            if (SSL_is_server(c->ssl) && SSL_version(c->ssl) == TLS1_3_VERSION) {
                hold_unsent(c);
                return 1;
            }
            if (send_out(c) < 0)
                return -1; /* EAGAIN with TLS_WANT_WRITE: call again when writable */
            wbuf_put(c);
        }
        return 1;
    }
    int r = io_result(c, rc);
    if (r < 0 && errno == EAGAIN && c->woff < c->wlen) {
        /* This step's flight (the server's first, a HelloRetryRequest): the
         * peer answers nothing until it has it, so it goes now; what the
         * socket does not take makes the caller wait for TLS_WANT_WRITE. */
        if (send_out(c) < 0)
            return -1;
        wbuf_put(c);
        errno = EAGAIN; /* (want: io_result's) */
    }
    if (r == 0) {
        errno = ECONNRESET;
        return -1;
    }
    return -1;
}

ssize_t tls_read(tls_conn *c, void *p, size_t n)
{
    size_t got = 0;
    err_clean();
    errno = 0;
    size_t before = c->wlen; /* (a held session ticket stays held) */
    int rc = SSL_read_ex(c->ssl, p, n, &got);
    ssize_t r = rc == 1 ? (ssize_t)got : io_result(c, 0);
    if (__builtin_expect(c->wlen > before, 0))
        send_quietly(c); /* a read that wrote: a KeyUpdate answered */
    return r;
}

/* tls_write under tls_buffer_writes: records into wbuf, sent whenever
 * WBUF_FLUSH_AT bytes wait. Both kinds of tls_write go on until all is
 * taken or the socket is full, so a short count means "full". */
static ssize_t write_buffered(tls_conn *c, const char *p, size_t n)
{
    size_t done = 0;
    err_clean(); /* (a record written leaves nothing there; a failure ends the loop) */
    while (done < n) {
        if (c->wlen - c->woff >= WBUF_FLUSH_AT || (c->wbuf && WBUF_CAP - c->wlen < WBUF_RECORD)) {
            if (send_out(c) < 0)
                break;
        }
        size_t k = 0;
        errno = 0;
        if (SSL_write_ex(c->ssl, p + done, n - done, &k) != 1) {
            if (io_result(c, 0) == 0)
                errno = EPIPE;
            break;
        }
        done += k; /* one record (SSL_MODE_ENABLE_PARTIAL_WRITE) */
    }
    return done ? (ssize_t)done : -1;
}

ssize_t tls_write(tls_conn *c, const void *p, size_t n)
{
    size_t done = 0;
    if (n == 0)
        return 0;
    if (c->buffered)
        return write_buffered(c, p, n);
    err_clean();
    while (done < n) { /* a record per SSL_write_ex, straight to the socket */
        size_t k = 0;
        errno = 0;
        if (SSL_write_ex(c->ssl, (const char *)p + done, n - done, &k) != 1) {
            if (io_result(c, 0) == 0)
                errno = EPIPE;
            break;
        }
        done += k;
    }
    return done ? (ssize_t)done : -1;
}

int tls_flush(tls_conn *c)
{
    if (__builtin_expect(c->held != NULL, 0) && wbuf_get(c) < 0)
        return -1; /* (ENOMEM) */
    if (c->woff < c->wlen && send_out(c) < 0)
        return -1;
    wbuf_put(c); /* empty (or never taken): the thread's spare again */
    return 0;
}

size_t tls_unsent(const tls_conn *c)
{
    return c->wlen - c->woff + c->held_len;
}

int tls_coalescing(const tls_conn *c)
{
    return c->buffered;
}

void tls_abandon(tls_conn *c)
{
    c->woff = c->wlen = 0;
    wbuf_put(c);
    free(c->held);
    c->held = NULL;
    c->held_len = 0;
    SSL_set_shutdown(c->ssl, SSL_get_shutdown(c->ssl) | SSL_SENT_SHUTDOWN);
}

int tls_ktls_send(const tls_conn *c)
{
    return BIO_get_ktls_send(SSL_get_wbio(c->ssl)) > 0;
}

ssize_t tls_sendfile(tls_conn *c, int fd, off_t off, size_t n)
{
    if (c->buffered || !tls_ktls_send(c)) {
        errno = ENOTSUP;
        return -1;
    }
    ERR_clear_error();
    errno = 0;
    ossl_ssize_t rc = SSL_sendfile(c->ssl, fd, off, n, 0);
    if (rc >= 0)
        return (ssize_t)rc;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c->want = TLS_WANT_WRITE;
        errno = EAGAIN;
    } else if (errno == 0) {
        errno = EPROTO;
    }
    ERR_clear_error();
    return -1;
}

void tls_shutdown(tls_conn *c)
{
    /* Once: a second SSL_shutdown would read the socket for the peer's
     * (and a connection may ask three times: its last flush, the close
     * after the response, the close itself). */
    if (SSL_is_init_finished(c->ssl) && !(SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN)) {
        err_clean();
        SSL_shutdown(c->ssl); /* (buffered: close_notify joins wbuf) */
        err_clean();
    }
    send_quietly(c);
}

unsigned tls_want(const tls_conn *c)
{
    return c->want;
}

size_t tls_pending(const tls_conn *c)
{
    int n = SSL_pending(c->ssl);
    if (n > 0)
        return (size_t)n;
    return SSL_has_pending(c->ssl) ? 1 : 0; /* records read ahead, not yet decrypted */
}

const char *tls_alpn(const tls_conn *c, size_t *len)
{
    const unsigned char *p = NULL;
    unsigned n = 0;
    SSL_get0_alpn_selected(c->ssl, &p, &n);
    *len = n;
    return n ? (const char *)p : NULL;
}

int tls_resumed(const tls_conn *c)
{
    return SSL_session_reused(c->ssl);
}

const char *tls_version(const tls_conn *c)
{
    return SSL_get_version(c->ssl);
}

const char *tls_cipher(const tls_conn *c)
{
    return SSL_get_cipher_name(c->ssl);
}
