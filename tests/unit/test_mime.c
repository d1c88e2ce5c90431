/* Unit tests for the MIME table (src/http/mime.c). */
#include "http/mime.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const char *lookup(const mime_table *t, const char *name, char *out, size_t cap)
{
    bk_str s = mime_lookup(t, (bk_str){ name, strlen(name) });
    assert_non_null(s.p);
    assert_true(s.len < cap);
    memcpy(out, s.p, s.len);
    out[s.len] = '\0';
    return out;
}

#define assert_type(t, name, want)                                        \
    do {                                                                  \
        char got_[256];                                                   \
        assert_string_equal(lookup((t), (name), got_, sizeof got_), (want)); \
    } while (0)

/* Tables live in *state so a failing assertion does not leak them. */
static int teardown_table(void **state)
{
    mime_free(*state);
    *state = NULL;
    return 0;
}

static void test_mime_system_file(void **state)
{
    if (access("/etc/mime.types", R_OK) != 0)
        skip();
    mime_table *t = *state = mime_load("/etc/mime.types", "application/octet-stream");
    assert_non_null(t);
    assert_type(t, "index.html", "text/html; charset=utf-8");
    assert_type(t, "a.CSS", "text/css; charset=utf-8");
    assert_type(t, "A.Html", "text/html; charset=utf-8");
    assert_type(t, "x.png", "image/png");
    assert_type(t, "x.PNG", "image/png");
    assert_type(t, "x.js", "text/javascript; charset=utf-8");
    assert_type(t, "x.mjs", "text/javascript; charset=utf-8");
    assert_type(t, "x.txt", "text/plain; charset=utf-8");
    assert_type(t, "x.json", "application/json");
    assert_type(t, "x.svg", "image/svg+xml");
    assert_type(t, "dir/archive.tar.gz", "application/gzip");
    /* The file replaces the built-in entry (text/xml). */
    assert_type(t, "x.xml", "application/xml");
    /* An extension only the file knows. */
    assert_type(t, "x.markdown", "text/markdown; charset=utf-8");

    assert_type(t, "noext", "application/octet-stream");
    assert_type(t, "dir.d/file", "application/octet-stream");
    assert_type(t, "dir.html/file", "application/octet-stream");
    assert_type(t, "file.", "application/octet-stream");
    assert_type(t, "", "application/octet-stream");
    assert_type(t, ".", "application/octet-stream");
    assert_type(t, "x.unknownext", "application/octet-stream");
    /* A dot file: what follows the dot is taken as the extension. */
    assert_type(t, ".hidden", "application/octet-stream");
    assert_type(t, "dir/.hidden", "application/octet-stream");
    assert_type(t, ".html", "text/html; charset=utf-8");
    /* Only the last extension counts. */
    assert_type(t, "page.html.zzqq", "application/octet-stream");
    assert_type(t, "image.zzqq.png", "image/png");
}

static void test_mime_builtin(void **state)
{
    mime_table *t = *state = mime_load(NULL, "x/y");
    assert_non_null(t);
    assert_type(t, "index.html", "text/html; charset=utf-8");
    assert_type(t, "a.htm", "text/html; charset=utf-8");
    assert_type(t, "a.CSS", "text/css; charset=utf-8");
    assert_type(t, "x.png", "image/png");
    assert_type(t, "x.js", "text/javascript; charset=utf-8");
    assert_type(t, "x.xml", "text/xml; charset=utf-8");
    assert_type(t, "x.wasm", "application/wasm");
    assert_type(t, "x.woff2", "font/woff2");
    assert_type(t, "noext", "x/y");
    assert_type(t, "x.markdown", "x/y");
    mime_free(t);
    *state = NULL;

    /* A missing file is the same as none. */
    t = *state = mime_load("/nonexistent/mime.types", "a/b");
    assert_non_null(t);
    assert_type(t, "x.css", "text/css; charset=utf-8");
    assert_type(t, "x.nope", "a/b");
    mime_free(t);
    *state = NULL;

    /* No default given: application/octet-stream. */
    t = *state = mime_load(NULL, NULL);
    assert_non_null(t);
    assert_type(t, "x.nope", "application/octet-stream");
}

static void test_mime_custom_file(void **state)
{
    char path[] = "/tmp/brisk-mime-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "# a comment line\n"
               "\n"
               "text/x-custom\t\tfoo BAR\r\n"
               "application/x-override html\n"
               "application/javascript js\n"
               "# text/x-commented cmt\n"
               "noslash ignored\n"
               "image/x-noext\n"
               "   application/x-indented   ind   \n");
    /* Enough extensions to make the table grow several times. */
    for (int i = 0; i < 2000; i++)
        fprintf(f, "application/x-gen%d e%d\n", i, i);
    fclose(f);

    mime_table *t = *state = mime_load(path, "application/octet-stream");
    unlink(path);
    assert_non_null(t);
    assert_type(t, "a.foo", "text/x-custom; charset=utf-8");
    assert_type(t, "a.bar", "text/x-custom; charset=utf-8");
    assert_type(t, "a.BaR", "text/x-custom; charset=utf-8");
    assert_type(t, "a.html", "application/x-override");
    assert_type(t, "a.htm", "text/html; charset=utf-8");
    /* .js stays text/javascript whatever the file says. */
    assert_type(t, "a.js", "text/javascript; charset=utf-8");
    assert_type(t, "a.cmt", "application/octet-stream");
    assert_type(t, "a.ignored", "application/octet-stream");
    assert_type(t, "a.ind", "application/x-indented");
    assert_type(t, "a.e0", "application/x-gen0");
    assert_type(t, "a.e1999", "application/x-gen1999");
    assert_type(t, "a.E777", "application/x-gen777");
    assert_type(t, "a.e2000", "application/octet-stream");
    assert_type(t, "x.png", "image/png");
    /* Over-long extensions are not looked up. */
    assert_type(t, "a.e123456789012345678901234567890123", "application/octet-stream");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_mime_system_file, teardown_table),
        cmocka_unit_test_teardown(test_mime_builtin, teardown_table),
        cmocka_unit_test_teardown(test_mime_custom_file, teardown_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
