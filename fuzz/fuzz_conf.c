/* libFuzzer target: the configuration loader (src/core/conf.c over libinih,
 * and the brisk server's schema in src/http/config.c).
 *
 * The input is a config file. It is written to a file in a private
 * temporary directory (conf_load and http_conf_load read files; relative
 * paths in it resolve inside that directory, which holds www/ and cgi/),
 * then
 *   - conf_load runs with a callback that applies every value parser
 *     (conf_parse_bool/uint/size/msec) to every value and refuses the key
 *     "reject", checking the "file:line: message" error format;
 *   - http_conf_load runs on it as `brisk -c FILE` would, and a loaded
 *     configuration is checked against the bounds the server relies on
 *     (header limits the parser accepts, non-zero timeouts, ...).
 * Side effects are kept out: log_open_append and mime_load are wrapped at
 * link time (-Wl,--wrap), so no log file is ever created and no MIME file
 * read (a config may name any path, such as /dev/zero). */
#include "core/conf.h"
#include "http/config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_conf: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                              \
            abort();                                                        \
        }                                                                   \
    } while (0)

int __wrap_log_open_append(const char *path);
mime_table *__real_mime_load(const char *path, const char *default_type);
mime_table *__wrap_mime_load(const char *path, const char *default_type);

int __wrap_log_open_append(const char *path)
{
    (void)path;
    return open("/dev/null", O_WRONLY | O_CLOEXEC);
}

mime_table *__wrap_mime_load(const char *path, const char *default_type)
{
    (void)path;
    return __real_mime_load(NULL, default_type); /* built-in types only */
}

static char dir[64];
static char conf_path[128];

static void cleanup(void)
{
    char p[256];
    snprintf(p, sizeof p, "%s/www", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/cgi", dir);
    rmdir(p);
    unlink(conf_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/brisk-fuzz-conf-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    char p[256];
    snprintf(p, sizeof p, "%s/www", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/cgi", dir);
    mkdir(p, 0755);
    snprintf(conf_path, sizeof conf_path, "%s/brisk.conf", dir);
    atexit(cleanup);
    return 0;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

typedef struct {
    int keys;
} cb_state;

static int on_key(void *udata, const char *section, const char *key, const char *value,
                  char *err, size_t errlen)
{
    cb_state *st = udata;
    CHECK(section && key && value);
    CHECK(errlen > 0);
    st->keys++;
    int b;
    uint64_t u, sz, ms;
    int ub = conf_parse_bool(value, &b);
    if (ub == 0)
        CHECK(b == 0 || b == 1);
    int uu = conf_parse_uint(value, UINT64_MAX, &u);
    if (uu == 0)
        CHECK(all_digits(value));
    int us = conf_parse_size(value, &sz);
    int um = conf_parse_msec(value, &ms);
    if (uu == 0) {
        /* a bare number is bytes for a size and seconds for a duration */
        if (us == 0)
            CHECK(sz == u);
        if (um == 0)
            CHECK(ms == u * 1000);
    }
    uint64_t small;
    if (conf_parse_uint(value, 100, &small) == 0)
        CHECK(small <= 100);
    if (strcmp(key, "reject") == 0) {
        snprintf(err, errlen, "refused %s", key);
        return -1;
    }
    return 0;
}

static void check_conf(const http_conf *c)
{
    CHECK(c->limits.max_head_size >= 1024 && c->limits.max_head_size <= HTTP_MAX_HEAD_SIZE);
    CHECK(c->limits.max_headers <= HTTP_MAX_HEADERS);
    CHECK(c->nlisten >= 1 && c->nlisten <= HTTP_MAX_LISTEN);
    CHECK(c->ncgi >= 0 && c->ncgi <= HTTP_MAX_CGI);
    CHECK(c->workers >= 0 && c->workers <= 1024);
    CHECK(c->keepalive_timeout > 0 && c->header_timeout > 0 && c->body_timeout > 0);
    CHECK(c->send_timeout > 0 && c->shutdown_timeout > 0 && c->linger_timeout > 0);
    CHECK(c->cgi_timeout > 0);
    CHECK(c->max_body_size <= (uint64_t)1 << 40);
    CHECK(c->memory_cache_max_file <= 1024 * 1024);
    CHECK(c->index[0] && !strchr(c->index, '/'));
    CHECK(memchr(c->root, 0, sizeof c->root) && memchr(c->index, 0, sizeof c->index));
    for (int i = 0; i < c->ncgi; i++) {
        size_t n = strlen(c->cgi[i].prefix);
        CHECK(n >= 1 && c->cgi[i].prefix[0] == '/' && c->cgi[i].prefix[n - 1] == '/');
        CHECK(c->cgi[i].dir_fd >= 0);
    }
    CHECK(c->mime != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len > 16384)
        return 0;
    int fd = open(conf_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, len) == (ssize_t)len);
    close(fd);

    char err[CONF_ERR_MAX];
    memset(err, 'x', sizeof err);
    cb_state st = { 0 };
    int rc = conf_load(conf_path, on_key, &st, err);
    CHECK(rc == 0 || rc == -1);
    if (rc < 0) {
        CHECK(memchr(err, 0, sizeof err) != NULL);
        CHECK(strncmp(err, conf_path, strlen(conf_path)) == 0);
        CHECK(err[strlen(conf_path)] == ':');
    }

    memset(err, 'x', sizeof err);
    http_cli cli = { .conf_path = conf_path };
    http_conf *c = http_conf_load(&cli, err);
    if (c) {
        check_conf(c);
        http_conf_release(c);
    } else {
        CHECK(memchr(err, 0, sizeof err) != NULL && err[0]);
    }
    return 0;
}
