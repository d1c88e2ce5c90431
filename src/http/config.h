/* The brisk server's configuration: one immutable, reference-counted
 * generation per load. Workers and connections hold references, so a reload
 * (SIGHUP) swaps generations without stopping anyone. */
#ifndef BRISK_HTTP_CONFIG_H
#define BRISK_HTTP_CONFIG_H

#include "core/conf.h"
#include "core/log.h"
#include "core/net.h"
#include "core/tls.h"
#include "http/mime.h"
#include "http/parse.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>

#define HTTP_MAX_LISTEN 16
#define HTTP_MAX_CGI 8

/* CGI: requests under prefix run executables from dir. */
typedef struct {
    char prefix[256]; /* starts and ends with '/' */
    char dir[PATH_MAX];
    int dir_fd;
} http_cgi_map;

typedef struct http_conf {
    atomic_int refs;
    char path[PATH_MAX]; /* the config file; "" when none */

    net_addr listen[HTTP_MAX_LISTEN];
    uint8_t listen_tls[HTTP_MAX_LISTEN]; /* 1: "listen = ADDR ssl" */
    uint8_t listen_h2c[HTTP_MAX_LISTEN]; /* 1: "listen = ADDR h2c" (HTTP/2 only) */
    int nlisten;
    int workers; /* 0 = auto (one per CPU) */
    char user[64]; /* when started as root: run as this user ("" = stay) */

    char root[PATH_MAX];
    char index[256];
    int autoindex;
    int precompressed; /* serve FILE.br / FILE.gz siblings */
    char default_type[128];
    char status[128];  /* path of the status endpoint; "" = off (loopback clients only) */
    char mime_types[PATH_MAX];

    char access_log[PATH_MAX]; /* "" = off */
    char error_log[PATH_MAX];  /* "stderr" or a path */
    int log_level;

    uint64_t keepalive_timeout, header_timeout, body_timeout, send_timeout;
    uint64_t shutdown_timeout, linger_timeout;
    uint32_t max_connections;    /* per worker */
    uint32_t keepalive_requests; /* per connection */
    uint64_t max_body_size;
    http_limits limits;          /* max_head_size, max_headers */
    uint32_t open_file_cache_max;
    uint64_t open_file_cache_valid;
    uint32_t memory_cache_max_file; /* files up to this size are kept in memory */
    uint32_t busy_poll_us;          /* loop_set_busy_poll: spin before sleeping while busy */

    http_cgi_map cgi[HTTP_MAX_CGI];
    int ncgi;
    uint64_t cgi_timeout;
    uint32_t cgi_max_processes; /* per worker; 503 beyond */

    /* TLS, for the listeners marked ssl (one certificate for all of them) */
    char ssl_certificate[PATH_MAX];     /* PEM: the certificate, then its chain */
    char ssl_certificate_key[PATH_MAX]; /* PEM private key */
    char ssl_stapling_file[PATH_MAX];   /* DER OCSP response to staple; "" = none */
    char ssl_password_file[PATH_MAX];   /* an encrypted key's passphrases, a line each */
    char ssl_protocols[64];             /* "" = TLSv1.2 TLSv1.3 */
    char ssl_ciphers[512];              /* TLS 1.2 list; "" = forward-secret AEAD only */
    int ssl_session_tickets;
    int ssl_prefer_server_ciphers;      /* TLS 1.3: AES-128-GCM first (see core/tls.c) */

    /* HTTP/2: ALPN h2 on ssl listeners, prior knowledge and Upgrade: h2c on
     * plain ones */
    int http2;
    uint32_t http2_max_streams;         /* SETTINGS_MAX_CONCURRENT_STREAMS */

    /* resources, opened by http_conf_load */
    int root_fd;
    int access_fd; /* -1 when off */
    mime_table *mime;
    /* built when a listener is ssl (NULL otherwise); connections accepted
     * under this generation take a reference of their own (tls_conn_new) */
    tls_ctx *tls;
} http_conf;

/* Command-line settings; they override the file, also on reload. */
typedef struct {
    const char *conf_path;
    const char *listen[HTTP_MAX_LISTEN]; /* "ADDR:PORT" or "ADDR:PORT ssl" */
    uint8_t listen_tls[HTTP_MAX_LISTEN]; /* 1: ssl given as a separate word */
    int nlisten;
    const char *ssl_cert;                /* ssl_certificate */
    const char *ssl_key;                 /* ssl_certificate_key */
    const char *root;
    const char *workers;
    const char *access_log;
    const char *error_log;
    const char *cgi[HTTP_MAX_CGI]; /* "PREFIX=DIR" */
    int ncgi;
    const char *default_root;      /* when neither file nor flags set root */
    uint64_t max_body;             /* 0 = the file's or the default */
    const char *prog;              /* names the program in the start-up line; NULL = "brisk" */
    const char *what;              /* more words for that line (the app's), or NULL */
} http_cli;

/* Loads a generation (refs = 1): defaults, then the file, then cli; opens
 * root, the access log and the MIME table. NULL with a message in err
 * (CONF_ERR_MAX bytes; "file:line: message" for errors in the file). */
http_conf *http_conf_load(const http_cli *cli, char *err);
/* The same for a reload: with prev (the running generation), the TLS
 * context keeps prev's session-ticket keys, so resumption survives. */
http_conf *http_conf_reload(const http_cli *cli, const http_conf *prev, char *err);
/* Parses a listen value, "ADDR:PORT" with an optional " ssl" or " h2c" word. */
int http_listen_parse(const char *v, net_addr *a, int *tls, int *h2c, char *err, size_t errlen);
http_conf *http_conf_retain(http_conf *c);
void http_conf_release(http_conf *c);

/* 1 once a configuration with CGI mappings has been loaded (before any
 * worker uses it): the process may start children from then on. */
int http_conf_children_possible(void);

#endif
