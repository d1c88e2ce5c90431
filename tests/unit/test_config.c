/* Unit tests for configuration loading (src/http/config.c, src/core/conf.c):
 * real files in a temporary directory, errors as "file:line: message", the
 * command-line overrides, and the value parsers. */
#include "http/config.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char tmpdir[] = "/tmp/brisk-conf-XXXXXX";
static char www[PATH_MAX], other[PATH_MAX];

/* Every conf a test loads is kept here and released by the teardown, so a
 * failing assertion does not turn into a leak report. */
static http_conf *loaded[8];
static size_t nloaded;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(www, sizeof www, "%s/www", tmpdir);
    snprintf(other, sizeof other, "%s/other", tmpdir);
    if (mkdir(www, 0755) < 0 || mkdir(other, 0755) < 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int release_all(void **state)
{
    (void)state;
    for (size_t i = 0; i < nloaded; i++)
        http_conf_release(loaded[i]);
    nloaded = 0;
    return 0;
}

/* Writes text to a new file in tmpdir; path receives its name. */
static void write_conf(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "%s/brisk-XXXXXX", tmpdir);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static http_conf *load(const http_cli *cli, char *err)
{
    err[0] = '\0';
    http_conf *c = http_conf_load(cli, err);
    if (c) {
        assert_true(nloaded < BK_ARRAY_LEN(loaded));
        loaded[nloaded++] = c;
    }
    return c;
}

static http_conf *load_file(const char *text, char *path, size_t cap, char *err)
{
    write_conf(path, cap, text);
    http_cli cli = { .conf_path = path };
    return load(&cli, err);
}

/* Loads text and expects an error that names the file and the line, and
 * contains what. */
static void expect_error(const char *text, int line, const char *what)
{
    char path[PATH_MAX], err[CONF_ERR_MAX], prefix[PATH_MAX + 16];
    http_conf *c = load_file(text, path, sizeof path, err);
    if (c)
        fail_msg("loaded, want an error at line %d for:\n%s", line, text);
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    if (strncmp(err, prefix, strlen(prefix)) != 0)
        fail_msg("err \"%s\" does not start with \"%s\"", err, prefix);
    if (!strstr(err, what))
        fail_msg("err \"%s\" does not mention \"%s\"", err, what);
    unlink(path);
}

/* ---- loading ---- */

static void test_conf_good_file(void **state)
{
    (void)state;
    char path[PATH_MAX], err[CONF_ERR_MAX], want[PATH_MAX + 32];
    http_conf *c = load_file("# brisk test configuration\n"
                             "; another comment\n"
                             "[server]\n"
                             "listen = 127.0.0.1:18080\n"
                             "listen = [::1]:18081\n"
                             "workers = 2\n"
                             "root = .\n"
                             "index = start.html\n"
                             "autoindex = on\n"
                             "precompressed = off\n"
                             "keepalive_timeout = 500ms\n"
                             "client_header_timeout = 2m\n"
                             "client_body_timeout = 30\n"
                             "send_timeout = 1h\n"
                             "max_header_size = 16k\n"
                             "max_body_size = 16k\n"
                             "max_headers = 50\n"
                             "max_connections = 1000\n"
                             "memory_cache_max_file = 1m\n"
                             "access_log = access.log\n"
                             "log_level = debug\n"
                             "default_type = text/plain\n",
                             path, sizeof path, err);
    if (!c)
        fail_msg("load failed: %s", err);
    assert_string_equal(c->path, path);
    assert_int_equal(c->nlisten, 2);
    assert_string_equal(c->listen[0].text, "127.0.0.1:18080");
    assert_int_equal(c->listen[0].ss.ss_family, AF_INET);
    assert_string_equal(c->listen[1].text, "[::1]:18081");
    assert_int_equal(c->listen[1].ss.ss_family, AF_INET6);
    assert_int_equal(c->workers, 2);
    /* Relative paths are relative to the file's directory. */
    snprintf(want, sizeof want, "%s/.", tmpdir);
    assert_string_equal(c->root, want);
    assert_true(c->root_fd >= 0);
    assert_string_equal(c->index, "start.html");
    assert_int_equal(c->autoindex, 1);
    assert_int_equal(c->precompressed, 0);
    assert_int_equal(c->keepalive_timeout, 500);
    assert_int_equal(c->header_timeout, 120000);
    assert_int_equal(c->body_timeout, 30000);
    assert_int_equal(c->send_timeout, 3600000);
    assert_int_equal(c->limits.max_head_size, 16384);
    assert_int_equal(c->max_body_size, 16384);
    assert_int_equal(c->limits.max_headers, 50);
    assert_int_equal(c->max_connections, 1000);
    assert_int_equal(c->memory_cache_max_file, 1024 * 1024);
    snprintf(want, sizeof want, "%s/access.log", tmpdir);
    assert_string_equal(c->access_log, want);
    assert_true(c->access_fd >= 0);
    assert_int_equal(access(want, F_OK), 0);
    assert_int_equal(c->log_level, LOG_DEBUG);
    assert_string_equal(c->default_type, "text/plain");
    assert_non_null(c->mime);
    bk_str t = mime_lookup(c->mime, BK_STR("x.unknownext"));
    assert_int_equal(t.len, 10);
    assert_memory_equal(t.p, "text/plain", 10);
    /* Untouched keys keep their defaults. */
    assert_int_equal(c->shutdown_timeout, 10000);
    assert_int_equal(c->keepalive_requests, 10000);
    assert_string_equal(c->error_log, "stderr");
    unlink(path);
}

static void test_conf_relative_root(void **state)
{
    (void)state;
    char path[PATH_MAX], err[CONF_ERR_MAX], want[PATH_MAX + 8];
    http_conf *c = load_file("root = www\naccess_log = off\nerror_log = stderr\n", path,
                             sizeof path, err);
    if (!c)
        fail_msg("load failed: %s", err);
    snprintf(want, sizeof want, "%s/www", tmpdir);
    assert_string_equal(c->root, want);
    assert_string_equal(c->access_log, "");
    assert_int_equal(c->access_fd, -1);
    assert_string_equal(c->error_log, "stderr");
    /* Without any listen line the default stays. */
    assert_int_equal(c->nlisten, 1);
    assert_string_equal(c->listen[0].text, "127.0.0.1:8080");
    unlink(path);

    /* Absolute paths are kept as they are. */
    char text[PATH_MAX + 16];
    snprintf(text, sizeof text, "root = %s\n", other);
    c = load_file(text, path, sizeof path, err);
    if (!c)
        fail_msg("load failed: %s", err);
    assert_string_equal(c->root, other);
    unlink(path);
}

static void test_conf_defaults_without_file(void **state)
{
    (void)state;
    char err[CONF_ERR_MAX];
    http_cli cli = { .root = www };
    http_conf *c = load(&cli, err);
    if (!c)
        fail_msg("load failed: %s", err);
    assert_string_equal(c->path, "");
    assert_int_equal(c->nlisten, 1);
    assert_string_equal(c->listen[0].text, "127.0.0.1:8080");
    assert_int_equal(c->workers, 0);
    assert_string_equal(c->root, www);
    assert_string_equal(c->index, "index.html");
    assert_int_equal(c->autoindex, 0);
    assert_int_equal(c->precompressed, 1);
    assert_int_equal(c->keepalive_timeout, 75000);
    assert_int_equal(c->header_timeout, 60000);
    assert_int_equal(c->limits.max_head_size, 8192);
    assert_int_equal(c->limits.max_headers, HTTP_MAX_HEADERS);
    assert_int_equal(c->max_body_size, 1024 * 1024);
    assert_int_equal(c->access_fd, -1);
    assert_int_equal(c->log_level, LOG_INFO);

    /* Reference counting: retain returns the same generation. */
    assert_ptr_equal(http_conf_retain(c), c);
    http_conf_release(c); /* the teardown drops the last reference */
}

static void test_conf_errors(void **state)
{
    (void)state;
    expect_error("root = www\nworkers = 2\nbogus_key = 1\n", 3, "unknown directive \"bogus_key\"");
    expect_error("root = www\nworkers = 0\n", 2, "invalid workers");
    expect_error("workers = many\n", 1, "invalid workers");
    expect_error("workers = 1025\n", 1, "invalid workers");
    expect_error("workers = -1\n", 1, "invalid workers");
    expect_error("root = www\n\nlisten = 1.2.3.4:99999\n", 3, "invalid port");
    expect_error("listen = 1.2.3.4:0\n", 1, "invalid port");
    expect_error("listen = ::1:80\n", 1, "[brackets]");
    expect_error("listen = [::1:80\n", 1, "invalid address");
    expect_error("listen = 300.1.1.1:80\n", 1, "invalid IP address");
    expect_error("listen = localhost:80\n", 1, "invalid IP address");
    expect_error("listen = 127.0.0.1:80\nlisten = 127.0.0.1:80\n", 2, "duplicate listen");
    expect_error("listen = 127.0.0.1:80\nlisten = 127.0.0.1:80 ssl\n", 2, "duplicate listen");
    expect_error("listen = 127.0.0.1:80 tls\n", 1, "unknown listen parameter \"tls\"");
    expect_error("listen = 127.0.0.1:80 ssl x\n", 1, "unknown listen parameter \"x\"");
    expect_error("ssl_session_tickets = maybe\n", 1, "invalid ssl_session_tickets");
    expect_error("autoindex = maybe\n", 1, "invalid autoindex");
    expect_error("root = www\nprecompressed = 2\n", 2, "invalid precompressed");
    expect_error("root = www\n[http]\nworkers = 2\n", 3, "unknown section [http]");
    expect_error("root = www\nthis line has no equals sign\n", 2, "syntax error");
    expect_error("root = www\n[server\n", 2, "syntax error");
    expect_error("root = does-not-exist\n", 1, "is not a directory");
    expect_error("keepalive_timeout = 10x\n", 1, "invalid keepalive_timeout");
    expect_error("keepalive_timeout = 0\n", 1, "invalid keepalive_timeout");
    expect_error("keepalive_timeout = 366d\n", 1, "invalid keepalive_timeout");
    expect_error("keepalive_timeout = 8761h\n", 1, "invalid keepalive_timeout");
    expect_error("max_header_size = 65536\n", 1, "invalid max_header_size");
    expect_error("max_headers = 101\n", 1, "invalid max_headers");
    expect_error("max_body_size = 2t\n", 1, "invalid max_body_size");
    expect_error("log_level = verbose\n", 1, "invalid log_level");
    expect_error("index = a/b.html\n", 1, "invalid index");
    expect_error("default_type =\n", 1, "invalid default_type");
    /* The first error wins. */
    expect_error("workers = 0\nbogus = 1\n", 1, "invalid workers");
}

static void test_conf_other_errors(void **state)
{
    (void)state;
    char path[PATH_MAX], err[CONF_ERR_MAX];

    /* A missing file names the file. */
    snprintf(path, sizeof path, "%s/missing.conf", tmpdir);
    http_cli cli = { .conf_path = path, .root = www };
    assert_null(load(&cli, err));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "cannot open"));

    /* Checks made after reading name the file, without a line. */
    assert_null(load_file("root = www\nmax_header_size = 512\n", path, sizeof path, err));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "max_header_size must be at least 1k"));
    unlink(path);

    /* An ssl listener needs a certificate and a key; without an ssl
     * listener they are not loaded (nor needed). */
    assert_null(load_file("root = www\nlisten = 127.0.0.1:18443   ssl\n", path, sizeof path, err));
    assert_non_null(strstr(err, "needs ssl_certificate and ssl_certificate_key"));
    unlink(path);
    assert_null(load_file("root = www\nlisten = 127.0.0.1:18443 ssl\n"
                          "ssl_certificate = /nonexistent.pem\nssl_certificate_key = /nonexistent.key\n",
                          path, sizeof path, err));
    assert_non_null(strstr(err, "ssl_certificate \"/nonexistent.pem\": No such file"));
    unlink(path);
    /* /dev/zero would keep OpenSSL's PEM reader busy for ever */
    assert_null(load_file("root = www\nlisten = 127.0.0.1:18443 ssl\n"
                          "ssl_certificate = /dev/zero\nssl_certificate_key = /dev/zero\n",
                          path, sizeof path, err));
    assert_non_null(strstr(err, "ssl_certificate \"/dev/zero\" is not a regular file"));
    unlink(path);
    http_conf *c = load_file("root = www\nlisten = 127.0.0.1:18080\n"
                             "ssl_certificate = /nonexistent.pem\n", path, sizeof path, err);
    assert_non_null(c);
    assert_int_equal(c->listen_tls[0], 0);
    assert_null(c->tls); /* (released by the teardown) */
    unlink(path);
}

static void test_conf_cli_override(void **state)
{
    (void)state;
    char path[PATH_MAX], err[CONF_ERR_MAX];
    write_conf(path, sizeof path,
               "listen = 127.0.0.1:18080\nlisten = [::1]:18081\nroot = www\nworkers = 2\n");
    http_cli cli = {
        .conf_path = path,
        .listen = { "127.0.0.1:19999" },
        .nlisten = 1,
        .root = other,
        .workers = "3",
    };
    http_conf *c = load(&cli, err);
    if (!c)
        fail_msg("load failed: %s", err);
    assert_int_equal(c->nlisten, 1);
    assert_string_equal(c->listen[0].text, "127.0.0.1:19999");
    assert_string_equal(c->root, other);
    assert_int_equal(c->workers, 3);

    /* Several listen flags, and "auto" workers. */
    cli = (http_cli){
        .conf_path = path,
        .listen = { "19998", "[::1]:19997" },
        .nlisten = 2,
        .workers = "auto",
    };
    c = load(&cli, err);
    if (!c)
        fail_msg("load failed: %s", err);
    assert_int_equal(c->nlisten, 2);
    assert_string_equal(c->listen[0].text, "127.0.0.1:19998");
    assert_string_equal(c->listen[1].text, "[::1]:19997");
    assert_int_equal(c->workers, 0);
    char want[PATH_MAX + 8];
    snprintf(want, sizeof want, "%s/www", tmpdir);
    assert_string_equal(c->root, want); /* not overridden: the file's value */

    /* Bad values on the command line. */
    cli = (http_cli){ .conf_path = path, .workers = "0" };
    assert_null(load(&cli, err));
    assert_true(strncmp(err, "command line: ", 14) == 0);
    assert_non_null(strstr(err, "invalid workers"));
    cli = (http_cli){ .conf_path = path, .listen = { "nope:1" }, .nlisten = 1 };
    assert_null(load(&cli, err));
    assert_true(strncmp(err, "command line: ", 14) == 0);
    cli = (http_cli){ .conf_path = path, .root = "/nonexistent-brisk-dir" };
    assert_null(load(&cli, err));
    assert_true(strncmp(err, "command line: ", 14) == 0);
    assert_non_null(strstr(err, "is not a directory"));
    unlink(path);
}

#if 1
/* FIXED BUG: conf_load reports the line of the first error but the message of the
 * first failing key. With a syntax error on line 2 and an unknown key on
 * line 3, inih returns 2 (its first error) while the callback's message is
 * kept, so the two are mixed:
 *   file "root = www\nthis line has no equals sign\nbogus = 1\n"
 *   expected "FILE:2: syntax error" (or "FILE:3: unknown directive ...")
 *   actual   "FILE:2: unknown directive \"bogus\"" */
static void test_conf_error_line_matches_message(void **state)
{
    (void)state;
    expect_error("root = www\nthis line has no equals sign\nbogus = 1\n", 2, "syntax error");
}

/* BUG: conf_parse_msec does not check the multiplication for overflow
 * (conf_parse_size does). The number may be up to UINT64_MAX / 4096, so
 * "307445734561826m" (307445734561826 * 60000 = 2^64 * 1 + 8384) wraps:
 *   expected -1, actual 0 with *out = 8384.
 * In a config file "keepalive_timeout = 307445734561826m" is accepted as an
 * 8.4 second timeout instead of being refused. */
static void test_conf_msec_overflow(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(conf_parse_msec("307445734561826m", &v), -1);
    assert_int_equal(conf_parse_msec("4503599627370495h", &v), -1);
    expect_error("keepalive_timeout = 307445734561826m\n", 1, "invalid keepalive_timeout");
}
#endif

/* ---- value parsers ---- */

static void test_conf_parse_size(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        uint64_t v;
    } cases[] = {
        { "0", 0, 0 },
        { "512", 0, 512 },
        { "512b", 0, 512 },
        { "8k", 0, 8192 },
        { "8K", 0, 8192 },
        { "8kb", 0, 8192 },
        { "8KB", 0, 8192 },
        { "16k", 0, 16384 },
        { "1m", 0, 1048576 },
        { "1MB", 0, 1048576 },
        { "2g", 0, 2147483648ull },
        { "2Gb", 0, 2147483648ull },
        { "4503599627370495", 0, 4503599627370495ull }, /* UINT64_MAX / 4096 */
        { "4503599627370495k", 0, 4503599627370495ull * 1024 },
        { "4503599627370496", -1, 0 },
        { "17179869183g", 0, 17179869183ull << 30 },
        { "17179869184g", -1, 0 }, /* 2^34 GiB = 2^64 */
        { "", -1, 0 },
        { "k", -1, 0 },
        { "-1", -1, 0 },
        { "+1", -1, 0 },
        { " 1k", -1, 0 },
        { "1 k", -1, 0 },
        { "1k ", -1, 0 },
        { "1kk", -1, 0 },
        { "1kib", -1, 0 },
        { "1t", -1, 0 },
        { "1.5k", -1, 0 },
        { "0x10", -1, 0 },
        { "99999999999999999999999", -1, 0 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(cases); i++) {
        uint64_t v = 12345;
        int rc = conf_parse_size(cases[i].s, &v);
        if (rc != cases[i].rc || (rc == 0 && v != cases[i].v))
            fail_msg("case %zu (\"%s\"): rc %d v %llu, want rc %d v %llu", i, cases[i].s, rc,
                     (unsigned long long)v, cases[i].rc, (unsigned long long)cases[i].v);
    }
}

static void test_conf_parse_msec(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        uint64_t v;
    } cases[] = {
        { "500ms", 0, 500 },
        { "500MS", 0, 500 },
        { "0ms", 0, 0 },
        { "60s", 0, 60000 },
        { "60S", 0, 60000 },
        { "7", 0, 7000 },
        { "0", 0, 0 },
        { "5m", 0, 300000 },
        { "2m", 0, 120000 },
        { "1h", 0, 3600000 },
        { "24h", 0, 86400000 },
        { "4503599627370495ms", 0, 4503599627370495ull },
        { "", -1, 0 },
        { "ms", -1, 0 },
        { "s", -1, 0 },
        { "1d", -1, 0 },
        { "1 s", -1, 0 },
        { "1s ", -1, 0 },
        { " 1s", -1, 0 },
        { "-1s", -1, 0 },
        { "1.5s", -1, 0 },
        { "1sec", -1, 0 },
        { "1msec", -1, 0 },
        { "4503599627370496ms", -1, 0 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(cases); i++) {
        uint64_t v = 12345;
        int rc = conf_parse_msec(cases[i].s, &v);
        if (rc != cases[i].rc || (rc == 0 && v != cases[i].v))
            fail_msg("case %zu (\"%s\"): rc %d v %llu, want rc %d v %llu", i, cases[i].s, rc,
                     (unsigned long long)v, cases[i].rc, (unsigned long long)cases[i].v);
    }
}

static void test_conf_parse_bool(void **state)
{
    (void)state;
    static const char *yes[] = { "on", "yes", "true", "1", "ON", "Yes", "TRUE", "True" };
    static const char *no[] = { "off", "no", "false", "0", "OFF", "No", "FALSE", "False" };
    static const char *bad[] = { "", "2", "onn", " on", "on ", "y", "n", "enabled", "-1", "01" };
    for (size_t i = 0; i < BK_ARRAY_LEN(yes); i++) {
        int b = -1;
        assert_int_equal(conf_parse_bool(yes[i], &b), 0);
        assert_int_equal(b, 1);
    }
    for (size_t i = 0; i < BK_ARRAY_LEN(no); i++) {
        int b = -1;
        assert_int_equal(conf_parse_bool(no[i], &b), 0);
        assert_int_equal(b, 0);
    }
    for (size_t i = 0; i < BK_ARRAY_LEN(bad); i++) {
        int b = -1;
        if (conf_parse_bool(bad[i], &b) != -1)
            fail_msg("\"%s\" accepted as %d", bad[i], b);
        assert_int_equal(b, -1); /* untouched */
    }
}

static void test_conf_parse_uint(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(conf_parse_uint("1024", 1024, &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(conf_parse_uint("1025", 1024, &v), -1);
    assert_int_equal(conf_parse_uint("", 1024, &v), -1);
    assert_int_equal(conf_parse_uint("1k", 1024, &v), -1);
    assert_int_equal(conf_parse_uint("18446744073709551615", UINT64_MAX, &v), 0);
    assert_int_equal(v, UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_conf_good_file, release_all),
        cmocka_unit_test_teardown(test_conf_relative_root, release_all),
        cmocka_unit_test_teardown(test_conf_defaults_without_file, release_all),
        cmocka_unit_test_teardown(test_conf_errors, release_all),
        cmocka_unit_test_teardown(test_conf_other_errors, release_all),
        cmocka_unit_test_teardown(test_conf_cli_override, release_all),
        cmocka_unit_test(test_conf_parse_size),
        cmocka_unit_test(test_conf_parse_msec),
        cmocka_unit_test(test_conf_parse_bool),
        cmocka_unit_test(test_conf_parse_uint),
#if 1 /* fixed bugs, kept as regression tests */
        cmocka_unit_test_teardown(test_conf_error_line_matches_message, release_all),
        cmocka_unit_test_teardown(test_conf_msec_overflow, release_all),
#endif
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
