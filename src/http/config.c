#include "http/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    http_conf *c;
    char dir[PATH_MAX]; /* directory of the config file, for relative paths */
    int listen_from_file;
} load_ctx;

enum kind { K_LISTEN, K_CGI, K_WORKERS, K_PATH_DIR, K_PATH, K_LOGPATH, K_STR, K_BOOL, K_MSEC,
            K_SIZE, K_UINT, K_LEVEL };

#define OFF(f) offsetof(http_conf, f)
#define FSZ(f) sizeof(((http_conf *)0)->f)

static const struct key {
    const char *name;
    enum kind kind;
    size_t off, size; /* field */
    uint64_t max;     /* for K_UINT / K_SIZE */
} keys[] = {
    { "listen", K_LISTEN, 0, 0, 0 },
    { "workers", K_WORKERS, 0, 0, 0 },
    { "user", K_STR, OFF(user), FSZ(user), 0 },
    { "cgi", K_CGI, 0, 0, 0 },
    { "cgi_timeout", K_MSEC, OFF(cgi_timeout), 0, 0 },
    { "cgi_max_processes", K_UINT, OFF(cgi_max_processes), 4, 100000 },
    { "root", K_PATH_DIR, OFF(root), FSZ(root), 0 },
    { "index", K_STR, OFF(index), FSZ(index), 0 },
    { "autoindex", K_BOOL, OFF(autoindex), 0, 0 },
    { "precompressed", K_BOOL, OFF(precompressed), 0, 0 },
    { "default_type", K_STR, OFF(default_type), FSZ(default_type), 0 },
    { "status", K_STR, OFF(status), FSZ(status), 0 },
    { "mime_types", K_PATH, OFF(mime_types), FSZ(mime_types), 0 },
    { "access_log", K_LOGPATH, OFF(access_log), FSZ(access_log), 0 },
    { "error_log", K_LOGPATH, OFF(error_log), FSZ(error_log), 0 },
    { "log_level", K_LEVEL, OFF(log_level), 0, 0 },
    { "keepalive_timeout", K_MSEC, OFF(keepalive_timeout), 0, 0 },
    { "client_header_timeout", K_MSEC, OFF(header_timeout), 0, 0 },
    { "client_body_timeout", K_MSEC, OFF(body_timeout), 0, 0 },
    { "send_timeout", K_MSEC, OFF(send_timeout), 0, 0 },
    { "shutdown_timeout", K_MSEC, OFF(shutdown_timeout), 0, 0 },
    { "lingering_timeout", K_MSEC, OFF(linger_timeout), 0, 0 },
    { "max_connections", K_UINT, OFF(max_connections), 4, 1000000 },
    { "keepalive_requests", K_UINT, OFF(keepalive_requests), 4, 100000000 },
    { "max_body_size", K_SIZE, OFF(max_body_size), 8, (uint64_t)1 << 40 },
    { "max_header_size", K_SIZE, OFF(limits.max_head_size), 4, HTTP_MAX_HEAD_SIZE },
    { "max_headers", K_UINT, OFF(limits.max_headers), 4, HTTP_MAX_HEADERS },
    { "open_file_cache_max", K_UINT, OFF(open_file_cache_max), 4, 1000000 },
    { "open_file_cache_valid", K_MSEC, OFF(open_file_cache_valid), 0, 0 },
    { "memory_cache_max_file", K_SIZE, OFF(memory_cache_max_file), 4, 1024 * 1024 },
    { "busy_poll", K_UINT, OFF(busy_poll_us), FSZ(busy_poll_us), 10000 },
    { "ssl_certificate", K_PATH, OFF(ssl_certificate), FSZ(ssl_certificate), 0 },
    { "ssl_certificate_key", K_PATH, OFF(ssl_certificate_key), FSZ(ssl_certificate_key), 0 },
    { "ssl_stapling_file", K_PATH, OFF(ssl_stapling_file), FSZ(ssl_stapling_file), 0 },
    { "ssl_password_file", K_PATH, OFF(ssl_password_file), FSZ(ssl_password_file), 0 },
    { "ssl_protocols", K_STR, OFF(ssl_protocols), FSZ(ssl_protocols), 0 },
    { "ssl_ciphers", K_STR, OFF(ssl_ciphers), FSZ(ssl_ciphers), 0 },
    { "ssl_session_tickets", K_BOOL, OFF(ssl_session_tickets), 0, 0 },
    { "ssl_prefer_server_ciphers", K_BOOL, OFF(ssl_prefer_server_ciphers), 0, 0 },
    { "http2", K_BOOL, OFF(http2), 0, 0 },
    { "http2_max_concurrent_streams", K_UINT, OFF(http2_max_streams), 4, 1000 },
};

static void set_defaults(http_conf *c)
{
    memset(c, 0, sizeof *c);
    atomic_init(&c->refs, 1);
    c->workers = 0;
    c->root[0] = '\0'; /* no static files unless set */
    strcpy(c->index, "index.html");
    c->precompressed = 1;
    strcpy(c->default_type, "application/octet-stream");
    strcpy(c->mime_types, "/etc/mime.types");
    strcpy(c->error_log, "stderr");
    c->log_level = LOG_INFO;
    c->keepalive_timeout = 75000; /* nginx's defaults */
    c->header_timeout = 60000;
    c->body_timeout = 60000;
    c->send_timeout = 60000;
    c->shutdown_timeout = 10000;
    c->linger_timeout = 5000;
    c->max_connections = 16384;
    c->keepalive_requests = 10000;
    c->max_body_size = 1024 * 1024;
    c->limits.max_head_size = 8192;
    c->limits.max_headers = HTTP_MAX_HEADERS;
    c->open_file_cache_max = 4096;
    c->open_file_cache_valid = 1000;
    c->memory_cache_max_file = 64 * 1024;
    c->cgi_timeout = 60000;
    c->cgi_max_processes = 64;
    c->busy_poll_us = 100; /* see loop_set_busy_poll and the README */
    c->ssl_session_tickets = 1;
    c->ssl_prefer_server_ciphers = 1;
    c->http2 = 1;
    c->http2_max_streams = 128; /* nginx's default */
    c->root_fd = -1;
    c->access_fd = -1;
    for (int i = 0; i < HTTP_MAX_CGI; i++)
        c->cgi[i].dir_fd = -1;
}

static int copy_str(char *dst, size_t cap, const char *s, char *err, size_t errlen)
{
    if (strlen(s) >= cap) {
        snprintf(err, errlen, "value too long");
        return -1;
    }
    strcpy(dst, s);
    return 0;
}

/* Relative paths in a config file are relative to the file's directory. */
static int resolve_path(const char *dir, const char *s, char *dst, size_t cap, char *err,
                        size_t errlen)
{
    int n = (s[0] == '/' || !dir[0]) ? snprintf(dst, cap, "%s", s)
                                    : snprintf(dst, cap, "%s/%s", dir, s);
    if (n < 0 || (size_t)n >= cap) {
        snprintf(err, errlen, "path too long");
        return -1;
    }
    return 0;
}

int http_listen_parse(const char *v, net_addr *a, int *tls, int *h2c, char *err, size_t errlen)
{
    /* "ADDR:PORT", then optional parameters: "ssl", or "h2c" (HTTP/2 with
     * prior knowledge only: anything else is closed) */
    char addr[128];
    size_t n = strcspn(v, " \t");
    if (n >= sizeof addr) {
        snprintf(err, errlen, "invalid listen \"%s\"", v);
        return -1;
    }
    memcpy(addr, v, n);
    addr[n] = '\0';
    *tls = *h2c = 0;
    for (const char *p = v + n; *p;) {
        p += strspn(p, " \t");
        size_t w = strcspn(p, " \t");
        if (w == 3 && memcmp(p, "ssl", 3) == 0) {
            *tls = 1;
        } else if (w == 3 && memcmp(p, "h2c", 3) == 0) {
            *h2c = 1;
        } else if (w) {
            snprintf(err, errlen, "unknown listen parameter \"%.*s\" (ssl and h2c are known)",
                     (int)w, p);
            return -1;
        }
        p += w;
    }
    if (*tls && *h2c) {
        snprintf(err, errlen, "listen \"%s\": h2c is for plain listeners (ssl ones offer h2 by ALPN)",
                 v);
        return -1;
    }
    return net_parse_addr(addr, a, err, errlen);
}

static int add_listen(http_conf *c, const char *v, int force_tls, char *err, size_t errlen)
{
    if (c->nlisten == HTTP_MAX_LISTEN) {
        snprintf(err, errlen, "too many listen addresses (max %d)", HTTP_MAX_LISTEN);
        return -1;
    }
    net_addr a;
    int tls, h2c;
    if (http_listen_parse(v, &a, &tls, &h2c, err, errlen) < 0)
        return -1;
    if (h2c && force_tls) {
        snprintf(err, errlen, "listen \"%s\": h2c is for plain listeners", v);
        return -1;
    }
    for (int i = 0; i < c->nlisten; i++)
        if (strcmp(c->listen[i].text, a.text) == 0) {
            snprintf(err, errlen, "duplicate listen %s", a.text);
            return -1;
        }
    c->listen_tls[c->nlisten] = (uint8_t)(tls || force_tls);
    c->listen_h2c[c->nlisten] = (uint8_t)h2c;
    c->listen[c->nlisten++] = a;
    return 0;
}

/* "PREFIX DIR" (config file) or "PREFIX=DIR" (command line). */
static int add_cgi(http_conf *c, const char *dir_base, const char *v, char sep, char *err,
                   size_t errlen)
{
    if (c->ncgi == HTTP_MAX_CGI) {
        snprintf(err, errlen, "too many cgi mappings (max %d)", HTTP_MAX_CGI);
        return -1;
    }
    const char *s = strchr(v, sep);
    http_cgi_map *m = &c->cgi[c->ncgi];
    size_t plen = s ? (size_t)(s - v) : 0;
    if (!s || plen == 0 || v[0] != '/' || plen + 2 > sizeof m->prefix) {
        snprintf(err, errlen, "invalid cgi \"%s\" (expected PREFIX%sDIR, PREFIX starting with /)",
                 v, sep == ' ' ? " " : "=");
        return -1;
    }
    memcpy(m->prefix, v, plen);
    if (m->prefix[plen - 1] != '/')
        m->prefix[plen++] = '/';
    m->prefix[plen] = '\0';
    /* Requests are matched after normalisation, so the prefix must be in
     * normal form too: "/a/b/", no empty, "." or ".." segment, no escapes,
     * and not "/" alone (that would make every file a script). */
    int bad = plen < 3 || strchr(m->prefix, '%') || strchr(m->prefix, '\\');
    for (const char *q = m->prefix + 1; !bad && *q; ) {
        const char *e = strchr(q, '/');
        size_t n = (size_t)(e - q);
        bad = n == 0 || (n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.');
        q = e + 1;
    }
    if (bad) {
        snprintf(err, errlen, "invalid cgi prefix \"%s\" (a plain path such as /cgi-bin/)",
                 m->prefix);
        return -1;
    }
    while (*++s == ' ')
        ;
    if (resolve_path(dir_base, s, m->dir, sizeof m->dir, err, errlen) < 0)
        return -1;
    struct stat st;
    char abs[PATH_MAX];
    if (stat(m->dir, &st) < 0 || !S_ISDIR(st.st_mode) || !realpath(m->dir, abs)) {
        snprintf(err, errlen, "cgi directory \"%s\" is not a directory", m->dir);
        return -1;
    }
    strcpy(m->dir, abs); /* scripts run with their directory as working directory */
    c->ncgi++;
    return 0;
}

static int set_workers(http_conf *c, const char *v, char *err, size_t errlen)
{
    uint64_t n;
    if (strcmp(v, "auto") == 0) {
        c->workers = 0;
        return 0;
    }
    if (conf_parse_uint(v, 1024, &n) < 0 || n == 0) {
        snprintf(err, errlen, "invalid workers \"%s\" (auto or 1..1024)", v);
        return -1;
    }
    c->workers = (int)n;
    return 0;
}

static int set_key(load_ctx *x, const struct key *k, const char *v, char *err, size_t errlen)
{
    http_conf *c = x->c;
    char *field = (char *)c + k->off;
    uint64_t n;
    int b;
    struct stat st;

    switch (k->kind) {
    case K_LISTEN:
        return add_listen(c, v, 0, err, errlen);
    case K_CGI:
        return add_cgi(c, x->dir, v, ' ', err, errlen);
    case K_WORKERS:
        return set_workers(c, v, err, errlen);
    case K_PATH_DIR:
        if (resolve_path(x->dir, v, field, k->size, err, errlen) < 0)
            return -1;
        if (stat(field, &st) < 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s \"%s\" is not a directory", k->name, field);
            return -1;
        }
        return 0;
    case K_PATH:
        return resolve_path(x->dir, v, field, k->size, err, errlen);
    case K_LOGPATH:
        if (strcmp(v, "off") == 0 || strcmp(v, "stderr") == 0)
            return copy_str(field, k->size, strcmp(v, "off") == 0 ? "" : v, err, errlen);
        return resolve_path(x->dir, v, field, k->size, err, errlen);
    case K_STR:
        if (k->off == OFF(status)) {
            /* off, or an absolute path of plain characters */
            if (strcmp(v, "off") == 0)
                return copy_str(field, k->size, "", err, errlen);
            if (v[0] != '/' || strpbrk(v, "?#% \t")) {
                snprintf(err, errlen, "invalid status \"%s\" (off, or a path such as /brisk-status)", v);
                return -1;
            }
            return copy_str(field, k->size, v, err, errlen);
        }
        if (!v[0] || (strchr(v, '/') && k->off == OFF(index))) {
            snprintf(err, errlen, "invalid %s \"%s\"", k->name, v);
            return -1;
        }
        return copy_str(field, k->size, v, err, errlen);
    case K_BOOL:
        if (conf_parse_bool(v, &b) < 0) {
            snprintf(err, errlen, "invalid %s \"%s\" (on or off)", k->name, v);
            return -1;
        }
        *(int *)(void *)field = b;
        return 0;
    case K_MSEC:
        if (conf_parse_msec(v, &n) < 0 || n == 0 || n > 86400000ull * 365) {
            snprintf(err, errlen, "invalid %s \"%s\" (a duration such as 60s or 500ms)",
                     k->name, v);
            return -1;
        }
        *(uint64_t *)(void *)field = n;
        return 0;
    case K_SIZE:
    case K_UINT:
        if ((k->kind == K_SIZE ? conf_parse_size(v, &n) : conf_parse_uint(v, k->max, &n)) < 0 ||
            n > k->max) {
            snprintf(err, errlen, "invalid %s \"%s\" (at most %llu)", k->name, v,
                     (unsigned long long)k->max);
            return -1;
        }
        if (k->size == 4)
            *(uint32_t *)(void *)field = (uint32_t)n;
        else
            *(uint64_t *)(void *)field = n;
        return 0;
    case K_LEVEL: {
        static const char *levels[] = { "error", "warn", "info", "debug" };
        for (int i = 0; i < 4; i++)
            if (strcasecmp(v, levels[i]) == 0) {
                *(int *)(void *)field = i;
                return 0;
            }
        snprintf(err, errlen, "invalid log_level \"%s\" (error, warn, info or debug)", v);
        return -1;
    }
    }
    return -1;
}

static const struct key *find_key(const char *name)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(keys); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static int on_key(void *udata, const char *section, const char *name, const char *value,
                  char *err, size_t errlen)
{
    load_ctx *x = udata;
    if (section[0] && strcmp(section, "server") != 0) {
        snprintf(err, errlen, "unknown section [%s]", section);
        return -1;
    }
    const struct key *k = find_key(name);
    if (!k) {
        snprintf(err, errlen, "unknown directive \"%s\"", name);
        return -1;
    }
    if (k->kind == K_LISTEN && !x->listen_from_file) { /* the file replaces the default */
        x->listen_from_file = 1;
        x->c->nlisten = 0;
    }
    return set_key(x, k, value, err, errlen);
}

static int apply_cli(http_conf *c, const http_cli *cli, char *err)
{
    char msg[CONF_ERR_MAX - 32];
    load_ctx x = { .c = c };
    if (cli->nlisten) {
        c->nlisten = 0;
        for (int i = 0; i < cli->nlisten; i++)
            if (add_listen(c, cli->listen[i], cli->listen_tls[i], msg, sizeof msg) < 0)
                goto fail;
    }
    const struct { const char *key, *value; } flags[] = {
        { "root", cli->root },
        { "workers", cli->workers },
        { "access_log", cli->access_log },
        { "error_log", cli->error_log },
        { "ssl_certificate", cli->ssl_cert },
        { "ssl_certificate_key", cli->ssl_key },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(flags); i++)
        if (flags[i].value && set_key(&x, find_key(flags[i].key), flags[i].value, msg,
                                      sizeof msg) < 0)
            goto fail;
    if (cli->ncgi) {
        c->ncgi = 0;
        for (int i = 0; i < cli->ncgi; i++)
            if (add_cgi(c, "", cli->cgi[i], '=', msg, sizeof msg) < 0)
                goto fail;
    }
    if (!c->root[0] && cli->default_root &&
        set_key(&x, find_key("root"), cli->default_root, msg, sizeof msg) < 0)
        goto fail;
    if (cli->max_body)
        c->max_body_size = cli->max_body;
    return 0;
fail:
    snprintf(err, CONF_ERR_MAX, "command line: %s", msg);
    return -1;
}

static int open_resources(http_conf *c, char *err)
{
    if (c->limits.max_head_size < 1024) {
        snprintf(err, CONF_ERR_MAX, "%s: max_header_size must be at least 1k",
                 c->path[0] ? c->path : "config");
        return -1;
    }
    if (c->root[0]) {
        c->root_fd = open(c->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (c->root_fd < 0) {
            snprintf(err, CONF_ERR_MAX, "root \"%s\": %s", c->root, strerror(errno));
            return -1;
        }
    }
    for (int i = 0; i < c->ncgi; i++) {
        c->cgi[i].dir_fd = open(c->cgi[i].dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (c->cgi[i].dir_fd < 0) {
            snprintf(err, CONF_ERR_MAX, "cgi \"%s\": %s", c->cgi[i].dir, strerror(errno));
            return -1;
        }
    }
    if (c->access_log[0] && strcmp(c->access_log, "stderr") != 0) {
        c->access_fd = log_open_append(c->access_log);
        if (c->access_fd < 0) {
            snprintf(err, CONF_ERR_MAX, "access_log \"%s\": %s", c->access_log,
                     strerror(-c->access_fd));
            return -1;
        }
    } else if (c->access_log[0]) {
        c->access_fd = dup(2);
    }
    c->mime = mime_load(c->mime_types, c->default_type);
    if (!c->mime) {
        snprintf(err, CONF_ERR_MAX, "out of memory loading MIME types");
        return -1;
    }
    return 0;
}

#define PASSWORD_FILE_MAX 4096

/* nginx's ssl_password_file: each line a passphrase for the encrypted key,
 * tried in order until one loads it. The file's bytes are wiped after. */
static int open_tls_with_passwords(http_conf *c, const http_conf *prev, tls_config *tc, char *err)
{
    char buf[PASSWORD_FILE_MAX + 1], msg[CONF_ERR_MAX - 16] = "";
    int fd = open(c->ssl_password_file, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0 || n > PASSWORD_FILE_MAX) {
        snprintf(err, CONF_ERR_MAX, "ssl_password_file \"%s\": %s", c->ssl_password_file,
                 n < 0 ? strerror(e) : "over 4096 bytes");
        explicit_bzero(buf, sizeof buf);
        return -1;
    }
    buf[n] = '\0';
    int tried = 0;
    for (char *line = buf, *next; line && !c->tls; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[--len] = '\0';
        if (!len)
            continue; /* (blank lines, and the end after a last newline) */
        tried++;
        tc->key_pass = line;
        c->tls = tls_ctx_new(tc, prev ? prev->tls : NULL, msg, sizeof msg);
    }
    tc->key_pass = NULL;
    explicit_bzero(buf, sizeof buf);
    if (c->tls)
        return 0;
    if (!tried)
        snprintf(err, CONF_ERR_MAX, "ssl_password_file \"%s\" has no passphrase in it",
                 c->ssl_password_file);
    else
        snprintf(err, CONF_ERR_MAX, "TLS: %s (tried %d passphrase%s from %s)", msg, tried,
                 tried == 1 ? "" : "s", c->ssl_password_file);
    return -1;
}

/* One context for every ssl listener; ALPN offers HTTP/1.1 only (h2 is
 * not spoken yet). A certificate that has expired, is not valid yet or does
 * not match its key stops the load with tls_ctx_new's message. */
static int open_tls(http_conf *c, const http_conf *prev, char *err)
{
    int any = 0;
    for (int i = 0; i < c->nlisten; i++)
        any |= c->listen_tls[i];
    if (!any)
        return 0;
    if (!c->ssl_certificate[0] || !c->ssl_certificate_key[0]) {
        snprintf(err, CONF_ERR_MAX, "%s: an ssl listener needs ssl_certificate and "
                 "ssl_certificate_key", c->path[0] ? c->path : "command line");
        return -1;
    }
    /* Regular files only: OpenSSL's PEM reader would read /dev/zero or a
     * FIFO for ever. */
    const struct { const char *key, *path; } files[] = {
        { "ssl_certificate", c->ssl_certificate },
        { "ssl_certificate_key", c->ssl_certificate_key },
        { "ssl_stapling_file", c->ssl_stapling_file },
        { "ssl_password_file", c->ssl_password_file },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(files); i++) {
        struct stat st;
        if (!files[i].path[0])
            continue;
        if (stat(files[i].path, &st) < 0) {
            snprintf(err, CONF_ERR_MAX, "%s \"%s\": %s", files[i].key, files[i].path,
                     strerror(errno));
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, CONF_ERR_MAX, "%s \"%s\" is not a regular file", files[i].key,
                     files[i].path);
            return -1;
        }
    }
    tls_config tc;
    tls_config_defaults(&tc);
    tc.cert_file = c->ssl_certificate;
    tc.key_file = c->ssl_certificate_key;
    tc.ocsp_file = c->ssl_stapling_file[0] ? c->ssl_stapling_file : NULL;
    tc.protocols = c->ssl_protocols[0] ? c->ssl_protocols : NULL;
    tc.ciphers = c->ssl_ciphers[0] ? c->ssl_ciphers : NULL;
    tc.session_tickets = c->ssl_session_tickets;
    tc.prefer_server_ciphers = c->ssl_prefer_server_ciphers;
    tc.alpn = c->http2 ? "h2,http/1.1" : "http/1.1";
    char msg[CONF_ERR_MAX - 16];
    if (c->ssl_password_file[0])
        return open_tls_with_passwords(c, prev, &tc, err);
    c->tls = tls_ctx_new(&tc, prev ? prev->tls : NULL, msg, sizeof msg);
    if (!c->tls) {
        snprintf(err, CONF_ERR_MAX, "TLS: %s", msg);
        return -1;
    }
    return 0;
}

/* Set once a generation with CGI mappings loads: from then on the process
 * may start children, which matters to how sockets are closed (conn.c). */
static atomic_int children_possible;

http_conf *http_conf_load(const http_cli *cli, char *err)
{
    return http_conf_reload(cli, NULL, err);
}

http_conf *http_conf_reload(const http_cli *cli, const http_conf *prev, char *err)
{
    http_conf *c = malloc(sizeof *c);
    if (!c) {
        snprintf(err, CONF_ERR_MAX, "out of memory");
        return NULL;
    }
    set_defaults(c);
    if (!c->nlisten)
        net_parse_addr("127.0.0.1:8080", &c->listen[c->nlisten++], err, CONF_ERR_MAX);

    if (cli->conf_path) {
        load_ctx x = { .c = c };
        if (copy_str(c->path, sizeof c->path, cli->conf_path, err, CONF_ERR_MAX) < 0)
            goto fail;
        const char *slash = strrchr(cli->conf_path, '/');
        if (slash) {
            size_t n = (size_t)(slash - cli->conf_path);
            memcpy(x.dir, cli->conf_path, n ? n : 1);
            x.dir[n ? n : 1] = '\0';
        }
        if (conf_load(cli->conf_path, on_key, &x, err) < 0)
            goto fail;
    }
    if (apply_cli(c, cli, err) < 0 || open_resources(c, err) < 0 || open_tls(c, prev, err) < 0)
        goto fail;
    if (c->ncgi)
        atomic_store(&children_possible, 1); /* before any worker uses c */
    return c;
fail:
    http_conf_release(c);
    return NULL;
}

int http_conf_children_possible(void)
{
    return atomic_load_explicit(&children_possible, memory_order_relaxed);
}

http_conf *http_conf_retain(http_conf *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void http_conf_release(http_conf *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (c->root_fd >= 0)
        close(c->root_fd);
    for (int i = 0; i < HTTP_MAX_CGI; i++)
        if (c->cgi[i].dir_fd >= 0)
            close(c->cgi[i].dir_fd);
    if (c->access_fd >= 0)
        close(c->access_fd);
    mime_free(c->mime);
    tls_ctx_unref(c->tls);
    free(c);
}
