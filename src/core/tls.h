/* TLS for brisk's connections: OpenSSL 3 behind a small non-blocking API.
 *
 * A tls_ctx holds what every connection of a listener shares: the
 * certificate chain and key, the ALPN list, the OCSP response to staple and
 * the session-ticket keys (rotated: tickets sealed with the previous key are
 * still accepted, and renewed). It is reference counted so that a reload
 * (SIGHUP) can build a new one while connections finish on the old one.
 *
 * A tls_conn wraps one accepted, non-blocking socket. Its calls mirror
 * read(2)/write(2): -1 with errno EAGAIN means "call again when the socket
 * is ready for tls_want()" (a TLS read may need to write and the other way
 * round, so the caller must watch what tls_want() says, not what it asked).
 * Data can sit inside the TLS layer (decrypted, or read ahead): read until
 * EAGAIN, or check tls_pending(), before waiting for the socket again.
 *
 * Coalesced writes (tls_buffer_writes): without kTLS, OpenSSL writes one
 * record of 16 KiB at most per send(2). A connection that opts in has its
 * records encrypted into a buffer instead and sent 64 KiB at a time; what
 * is left when tls_write returns is sent by tls_flush, which the caller
 * must call (and, on EAGAIN, call again when the socket is writable) before
 * it takes its output for sent. The buffer is held only while ciphertext
 * waits (an idle connection has none; a TLS 1.3 session ticket waiting for
 * the first response is kept apart, in an allocation of its size).
 *
 * Thread safety: a tls_ctx may be used by connections on many threads at
 * once; a tls_conn belongs to one thread. */
#ifndef BRISK_CORE_TLS_H
#define BRISK_CORE_TLS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct tls_ctx tls_ctx;
typedef struct tls_conn tls_conn;

enum { TLS_VERIFY_NONE = 0, TLS_VERIFY_OPTIONAL = 1, TLS_VERIFY_REQUIRED = 2 };
enum { TLS_WANT_READ = 1, TLS_WANT_WRITE = 2 };

typedef struct tls_config {
    const char *cert_file;    /* PEM: the certificate, then its chain */
    const char *key_file;     /* PEM private key */
    const char *key_pass;     /* its passphrase when encrypted (NULL: none) */
    const char *ca_file;      /* PEM CAs for client certificates (NULL: none) */
    const char *ca_dir;       /* and/or a directory of them, hashed (openssl rehash) */
    int verify_clients;       /* TLS_VERIFY_*: client certificates */
    const char *alpn;         /* "h2,http/1.1": server preference order; NULL: no ALPN */
    const char *ocsp_file;    /* DER OCSP response to staple (NULL: none) */
    const char *protocols;    /* "TLSv1.2 TLSv1.3" (the default); TLS 1.0/1.1 are refused */
    const char *ciphers;      /* TLS 1.2 cipher list (NULL: forward-secret AEAD only) */
    const char *ciphersuites; /* TLS 1.3 suites (NULL: OpenSSL's, all AEAD; with
                               * prefer_server_ciphers, brisk's order: TLS13_SUITES) */
    int prefer_server_ciphers; /* the server's order picks the cipher, ChaCha20 first for
                                * a client that puts it first (default 0: the client's) */
    int session_tickets;      /* resumption by tickets (default 1) */
    int session_cache;        /* server-side session cache entries (default 0: tickets only) */
    unsigned ticket_lifetime; /* seconds a ticket key seals new tickets (default 3600) */
    int ktls;                 /* try kernel TLS for tls_sendfile (default 1) */
} tls_config;

void tls_config_defaults(tls_config *c);

/* The client side (brisk-kv's replication link to a TLS master): the peer's
 * certificate chain is verified against ca_file and/or ca_dir (one of them
 * is required); the host name is not checked (Redis's replicas do not).
 * cert_file/key_file: the certificate we present (NULL: none). */
typedef struct tls_client_config {
    const char *cert_file, *key_file;
    const char *key_pass; /* key_file's passphrase (NULL: none) */
    const char *ca_file, *ca_dir;
    const char *protocols, *ciphers, *ciphersuites; /* as in tls_config */
} tls_client_config;

tls_ctx *tls_client_ctx_new(const tls_client_config *c, char *err, size_t errlen);
/* A connection that will tls_handshake as the client over fd (non-blocking,
 * connected); server_name goes in SNI when it is a name, not an address. */
tls_conn *tls_conn_new_client(tls_ctx *t, int fd, const char *server_name);
/* Why the peer's certificate did not verify ("self-signed certificate"), or
 * NULL when it did or was not checked. */
const char *tls_verify_error(const tls_conn *c);

/* Builds a context; NULL with a message in err when a file is missing or
 * unreadable, the certificate has expired or is not valid yet, the key does
 * not match the certificate, or a setting is not understood. With prev, the
 * new context keeps prev's ticket keys (resumption survives a reload). */
tls_ctx *tls_ctx_new(const tls_config *c, const tls_ctx *prev, char *err, size_t errlen);
void tls_ctx_ref(tls_ctx *t);
void tls_ctx_unref(tls_ctx *t);
/* "CN=example.org, expires 2027-01-01 00:00:00 GMT" for start-up logs. */
void tls_ctx_describe(const tls_ctx *t, char *out, size_t n);

/* A connection over fd (non-blocking, accepted); NULL on out-of-memory.
 * Holds a reference on t until tls_conn_free. */
tls_conn *tls_conn_new(tls_ctx *t, int fd);
void tls_conn_free(tls_conn *c);

/* 1: handshake done; -1 with errno EAGAIN: again when tls_want() is ready;
 * -1 with another errno (EPROTO for a TLS failure): close. Every flight the
 * peer waits for is sent before 1; under coalescing, a TLS 1.3 server's
 * session ticket is not: it waits in tls_unsent for the first response's
 * tls_flush (or tls_shutdown's close_notify). */
int tls_handshake(tls_conn *c);
/* Like read(2)/write(2); 0 from tls_read is the peer's end (close_notify
 * or a plain EOF). */
ssize_t tls_read(tls_conn *c, void *p, size_t n);
/* Returns the plaintext bytes taken: all of them, or fewer when the
 * socket is full (or failed: the next call says how). Coalescing: they may
 * sit in the buffer as ciphertext (tls_unsent) until tls_flush. After -1
 * with EAGAIN, or a short count, the rest must be offered again unchanged
 * (OpenSSL's rule for a record it could not finish). */
ssize_t tls_write(tls_conn *c, const void *p, size_t n);
/* Coalesced writes (callable before or after tls_handshake): from the
 * start of the handshake when the context does not ask for kTLS; else from
 * its end, unless kTLS sends. */
void tls_buffer_writes(tls_conn *c);
/* Sends the buffered ciphertext: 0 when none is left, -1 with errno
 * (EAGAIN: again when the socket is writable). 0 at once without
 * coalescing. */
int tls_flush(tls_conn *c);
/* Bytes of ciphertext not yet sent (coalescing only; else 0). */
size_t tls_unsent(const tls_conn *c);
/* 1 when writes are coalesced now: a record stays in tls_unsent until
 * the next tls_write or tls_flush sends it. */
int tls_coalescing(const tls_conn *c);
/* Drops the unsent ciphertext and any close_notify to come: for a
 * connection whose last records must not reach the peer (they were made
 * from bad bytes). Only closing is left to do. */
void tls_abandon(tls_conn *c);
/* Sends n bytes of file fd from off without copying them through user space
 * when kernel TLS carries the connection; -1 with errno ENOTSUP when it does
 * not (the caller falls back to pread + tls_write). */
ssize_t tls_sendfile(tls_conn *c, int fd, off_t off, size_t n);
int tls_ktls_send(const tls_conn *c);
/* Sends close_notify, once (best effort, never blocks: under coalescing,
 * what the socket does not take stays in tls_unsent for a tls_flush). */
void tls_shutdown(tls_conn *c);

unsigned tls_want(const tls_conn *c); /* TLS_WANT_* for the last EAGAIN */
/* Nonzero when bytes wait inside the TLS layer, where no socket event will
 * announce them: decrypted ones (their count), or records read ahead from
 * the socket and not yet decrypted (1). */
size_t tls_pending(const tls_conn *c);
/* The ALPN protocol agreed ("h2"), or NULL; valid until tls_conn_free. */
const char *tls_alpn(const tls_conn *c, size_t *len);
int tls_resumed(const tls_conn *c);
const char *tls_version(const tls_conn *c); /* "TLSv1.3" */
const char *tls_cipher(const tls_conn *c);
/* The last TLS failure on this thread, for a log line ("" if none). */
const char *tls_last_error(char *buf, size_t n);

#endif
