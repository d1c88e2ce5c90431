/* Unit tests for the exchange layer (src/http/exchange.c) on a fake
 * protocol that records what it is handed: the layer needs no connection,
 * which is the seam HTTP/2 will use. */
#include "http/exchange.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* What the fake protocol was handed, as text. */
static char trace[8192];
static size_t trace_len;

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(trace + trace_len, sizeof trace - trace_len, fmt, ap);
    va_end(ap);
    trace_len += (size_t)n;
}

static void fake_head(http_exchange *x, int status, const bk_str *lines, size_t nlines,
                      uint64_t length, const void *body, size_t body_len)
{
    say("head %d ", status);
    if (length == HTTP_LEN_NONE)
        say("none");
    else if (length == HTTP_LEN_STREAM)
        say("stream");
    else
        say("%llu", (unsigned long long)length);
    say(" [");
    for (size_t i = 0; i < nlines; i++)
        say("%.*s", (int)lines[i].len, lines[i].p ? lines[i].p : "");
    say("] <%.*s>;", (int)body_len, body_len ? (const char *)body : "");
}

static void fake_body(http_exchange *x, const void *p, size_t n)
{
    say("body <%.*s>;", (int)n, (const char *)p);
}

static void fake_ref(http_exchange *x, const char *p, size_t n, http_release_fn release, void *arg)
{
    say("ref %zu;", n);
    if (release)
        release(arg);
}

static void fake_fd(http_exchange *x, int fd, const bk_fmap *map, uint64_t off, uint64_t len,
                    http_release_fn release, void *arg)
{
    (void)map;
    say("fd %d %llu+%llu;", fd, (unsigned long long)off, (unsigned long long)len);
    if (release)
        release(arg);
}

static void fake_finish(http_exchange *x, int cut)
{
    say("finish %d;", cut);
}

static size_t fake_pending(const http_exchange *x)
{
    return 42;
}

static int fake_local(const http_exchange *x, struct sockaddr_storage *ss, socklen_t *len)
{
    return -1;
}

static const http_proto_ops fake_ops = {
    .send_head = fake_head,
    .send_body = fake_body,
    .send_ref = fake_ref,
    .send_fd = fake_fd,
    .finish = fake_finish,
    .pending = fake_pending,
    .local_addr = fake_local,
};

static http_worker hw;
static http_exchange ex;

static http_exchange *fresh(int version_minor)
{
    memset(&hw, 0, sizeof hw);
    http_exchange_init(&ex);
    ex.proto = &fake_ops;
    ex.hw = &hw;
    ex.req.version_minor = version_minor;
    trace_len = 0;
    trace[0] = '\0';
    return &ex;
}

static void done(http_exchange *x)
{
    http_exchange_reset(x, 1);
}

#define TEXT_PLAIN "Content-Type: text/plain; charset=utf-8\r\n"

static void test_end_with_headers(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_status(x, 201);
    http_exchange_header(x, BK_STR("X-A"), BK_STR("1"));
    http_exchange_header(x, BK_STR("Content-Length"), BK_STR("99")); /* managed: ignored */
    http_exchange_header(x, BK_STR("X-Bad"), BK_STR("a\r\nb"));      /* would split: dropped */
    http_exchange_header(x, BK_STR("Bad Name"), BK_STR("v"));        /* not a name: dropped */
    http_exchange_end(x, "hello", 5);
    assert_string_equal(trace, "head 201 5 [X-A: 1\r\n" TEXT_PLAIN "] <hello>;finish 0;");
    done(x);
}

static void test_content_type_given(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_header(x, BK_STR("content-type"), BK_STR("application/json"));
    http_exchange_end(x, "{}", 2);
    assert_string_equal(trace, "head 200 2 [content-type: application/json\r\n] <{}>;finish 0;");
    done(x);
}

static void test_stream(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_write(x, "ab", 2);
    http_exchange_write(x, "", 0);
    http_exchange_header(x, BK_STR("X-Late"), BK_STR("1")); /* after the head: ignored */
    http_exchange_end(x, "cd", 2);
    assert_string_equal(trace, "head 200 stream [" TEXT_PLAIN "] <>;body <ab>;body <cd>;finish 0;");
    done(x);
}

static void test_no_body_status(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_status(x, 204);
    http_exchange_end(x, "x", 1);
    assert_string_equal(trace, "head 204 none [] <>;finish 0;");
    done(x);
}

static void test_aborted_drops_output(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_abort(x);
    assert_int_equal(x->aborted, 1);
    http_exchange_header(x, BK_STR("X-A"), BK_STR("1"));
    http_exchange_write(x, "ab", 2);
    http_exchange_end(x, "cd", 2);
    assert_string_equal(trace, "finish 0;"); /* the protocol lets it go */
    done(x);
}

static void on_abort(void *arg)
{
    ++*(int *)arg;
}

static void test_abort_callback_once(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    int n = 0;
    x->on_abort = on_abort;
    x->abort_arg = &n;
    http_exchange_abort(x);
    http_exchange_abort(x);
    assert_int_equal(n, 1);
    done(x);
}

static void test_error_after_head_cuts(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_write(x, "a", 1);
    http_exchange_fail(x, 500);
    assert_string_equal(trace, "head 200 stream [" TEXT_PLAIN "] <>;body <a>;finish 1;");
    done(x);
}

static void test_default_error_page(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_error(x, 405, "Allow: GET, HEAD\r\n");
    assert_non_null(strstr(trace, "head 405 "));
    assert_non_null(strstr(trace, "[Content-Type: text/html; charset=utf-8\r\nAllow: GET, HEAD\r\n]"));
    assert_non_null(strstr(trace, "<h1>405 Method Not Allowed</h1>"));
    assert_non_null(strstr(trace, ";finish 0;"));
    done(x);
}

static int rendered_status;

static void renderer(http_exchange *x, int status, void *udata)
{
    rendered_status = status;
    http_exchange_end(x, udata, strlen(udata));
}

static void test_error_renderer(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    hw.error_page = renderer;
    hw.error_udata = "{\"error\":404}";
    http_exchange_header(x, BK_STR("X-App"), BK_STR("kept"));
    http_exchange_error(x, 301, "Location: /a/\r\n");
    assert_int_equal(rendered_status, 301);
    assert_string_equal(trace, "head 301 13 [X-App: kept\r\nLocation: /a/\r\n" TEXT_PLAIN
                               "] <{\"error\":404}>;finish 0;");
    done(x);

    /* brisk_res_error's form drops what the handler had set */
    x = fresh(1);
    hw.error_page = renderer;
    hw.error_udata = "e";
    http_exchange_header(x, BK_STR("X-App"), BK_STR("dropped"));
    http_exchange_fail(x, 500);
    assert_string_equal(trace, "head 500 1 [" TEXT_PLAIN "] <e>;finish 0;");
    done(x);
}

static void release_count(void *arg)
{
    ++*(int *)arg;
}

static void test_end_ref_and_fd(void **state)
{
    (void)state;
    int released = 0;
    http_exchange *x = fresh(1);
    http_exchange_end_ref(x, "0123456789", 10, release_count, &released);
    assert_string_equal(trace, "head 200 10 [" TEXT_PLAIN "] <>;ref 10;finish 0;");
    assert_int_equal(released, 1);
    done(x);

    x = fresh(1);
    http_exchange_end_fd(x, 7, 0, 117, BK_STR("text/html"), release_count, &released);
    assert_string_equal(trace, "head 200 117 [Content-Type: text/html\r\n] <>;fd 7 0+117;finish 0;");
    assert_int_equal(released, 2);
    done(x);

    /* after the head, the file is released unsent and the stream ends */
    x = fresh(1);
    http_exchange_write(x, "a", 1);
    http_exchange_end_fd(x, 7, 0, 117, BK_STR("text/html"), release_count, &released);
    assert_int_equal(released, 3);
    assert_string_equal(trace, "head 200 stream [" TEXT_PLAIN "] <>;body <a>;finish 0;");
    done(x);
}

static void test_arena(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    char *a = http_exchange_alloc(x, 1);
    char *b = http_exchange_alloc(x, 17);
    char *big = http_exchange_alloc(x, 100000);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(big);
    assert_int_equal((uintptr_t)a % 16, 0);
    assert_int_equal((uintptr_t)b % 16, 0);
    assert_int_equal(b - a, 16);
    memset(big, 1, 100000);
    assert_null(http_exchange_alloc(x, (size_t)1 << 41));
    http_exchange_reset(x, 0); /* keeps one ordinary chunk */
    char *c = http_exchange_alloc(x, 1);
    assert_non_null(c);
    assert_int_equal(x->status, 200);
    done(x);
}

static void test_restart(void **state)
{
    (void)state;
    http_exchange *x = fresh(1);
    http_exchange_status(x, 302);
    http_exchange_header(x, BK_STR("Content-Type"), BK_STR("a/b"));
    http_exchange_restart(x);
    http_exchange_end(x, "z", 1);
    assert_string_equal(trace, "head 200 1 [" TEXT_PLAIN "] <z>;finish 0;");
    assert_int_equal(http_exchange_pending(x), 42);
    done(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_with_headers),
        cmocka_unit_test(test_content_type_given),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_no_body_status),
        cmocka_unit_test(test_aborted_drops_output),
        cmocka_unit_test(test_abort_callback_once),
        cmocka_unit_test(test_error_after_head_cuts),
        cmocka_unit_test(test_default_error_page),
        cmocka_unit_test(test_error_renderer),
        cmocka_unit_test(test_end_ref_and_fd),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
