/* Unit tests for the RESP request parser (src/kv/resp.c): whole commands,
 * every split point, inline quoting, limits and Redis's protocol errors. */
#include "kv/resp.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAXARGS 8
#define ARGLEN 80

typedef struct {
    int argc;
    char argv[MAXARGS][ARGLEN];
    size_t len[MAXARGS];
} cmd;

/* Feeds data in pieces: bytes [0, cut) first, then one byte at a time when
 * bytewise, else the rest at once. Like the server, consumed bytes are
 * dropped from the front of the buffer after every round (so offsets of a
 * partly parsed command must survive the shift). Returns the command count,
 * or -1 on a protocol error (message copied to err). */
static int feed(const char *data, size_t n, size_t cut, int bytewise, cmd *out, int max, char *err)
{
    resp_parser p;
    resp_parser_init(&p);
    char *b = malloc(n + 1);
    size_t fed = 0, have = 0; /* bytes of data given; bytes in b */
    int ncmd = 0, rc;
    while (fed < n || n == 0) {
        size_t next = fed < cut ? cut : (bytewise ? fed + 1 : n);
        if (next > n)
            next = n;
        memcpy(b + have, data + fed, next - fed);
        have += next - fed;
        fed = next;
        for (;;) {
            int r = resp_parse(&p, b, have);
            if (r == RESP_AGAIN)
                break;
            if (r == RESP_ERROR) {
                if (err)
                    snprintf(err, 128, "%s", p.err);
                rc = -1;
                goto out;
            }
            assert_true(ncmd < max);
            out[ncmd].argc = (int)p.nargs;
            for (size_t i = 0; i < p.nargs && i < MAXARGS; i++) {
                size_t l = p.args[i].len < ARGLEN ? p.args[i].len : ARGLEN;
                out[ncmd].len[i] = p.args[i].len;
                memcpy(out[ncmd].argv[i], b + p.args[i].off, l);
            }
            ncmd++;
            resp_parser_next(&p);
        }
        size_t used = resp_parser_consumed(&p);
        memmove(b, b + used, have - used);
        have -= used;
        resp_parser_shift(&p, used);
        if (n == 0)
            break;
    }
    rc = ncmd;
out:
    resp_parser_free(&p);
    free(b);
    return rc;
}

static void assert_arg(const cmd *c, int i, const char *s, size_t n)
{
    assert_true(i < c->argc);
    assert_int_equal(c->len[i], n);
    assert_memory_equal(c->argv[i], s, n < ARGLEN ? n : ARGLEN);
}
#define ARG(c, i, lit) assert_arg((c), (i), (lit), sizeof(lit) - 1)

static const char stream[] =
    "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n" /* binary-safe bulk with CRLF */
    "PING\r\n"
    "*0\r\n"                                           /* empty: skipped */
    "\r\n"                                             /* empty inline: skipped */
    "set \"a b\" 'c d' \"\\x41\\n\"\n"                 /* inline quoting, LF only */
    "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"                   /* empty bulk */
    "*1\r\n$4\r\nPING\r\n";

static void check_stream(const cmd *c, int n)
{
    assert_int_equal(n, 5);
    assert_int_equal(c[0].argc, 3);
    ARG(&c[0], 0, "SET");
    ARG(&c[0], 1, "key");
    ARG(&c[0], 2, "va\r\nl");
    assert_int_equal(c[1].argc, 1);
    ARG(&c[1], 0, "PING");
    assert_int_equal(c[2].argc, 4);
    ARG(&c[2], 0, "set");
    ARG(&c[2], 1, "a b");
    ARG(&c[2], 2, "c d");
    ARG(&c[2], 3, "A\n");
    assert_int_equal(c[3].argc, 2);
    ARG(&c[3], 0, "ECHO");
    ARG(&c[3], 1, "");
    ARG(&c[4], 0, "PING");
}

static void test_whole_stream(void **state)
{
    cmd c[8];
    int n = feed(stream, sizeof stream - 1, sizeof stream - 1, 0, c, 8, NULL);
    check_stream(c, n);
}

static void test_split_at_every_byte(void **state)
{
    size_t len = sizeof stream - 1;
    for (size_t cut = 0; cut <= len; cut++) {
        cmd c[8];
        memset(c, 0, sizeof c);
        int n = feed(stream, len, cut, 0, c, 8, NULL);
        check_stream(c, n);
    }
}

static void test_byte_at_a_time(void **state)
{
    cmd c[8];
    memset(c, 0, sizeof c);
    int n = feed(stream, sizeof stream - 1, 0, 1, c, 8, NULL);
    check_stream(c, n);
}

static void test_inline_escapes(void **state)
{
    const char in[] = "a \"\\x41\\n\\t\\\\\" 'it\\'s' x\"y z\"\r\n";
    cmd c[2];
    int n = feed(in, sizeof in - 1, sizeof in - 1, 0, c, 2, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].argc, 4);
    ARG(&c[0], 1, "A\n\t\\");
    ARG(&c[0], 2, "it's");
    ARG(&c[0], 3, "xy z");
}

static void expect_error(const char *in, const char *msg)
{
    cmd c[4];
    char err[128] = "";
    int n = feed(in, strlen(in), strlen(in), 0, c, 4, err);
    assert_int_equal(n, -1);
    assert_string_equal(err, msg);
}

static void test_protocol_errors(void **state)
{
    expect_error("*abc\r\n", "Protocol error: invalid multibulk length");
    expect_error("*2\r\n$x\r\n", "Protocol error: invalid bulk length");
    expect_error("*2\r\n$-1\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n+OK\r\n", "Protocol error: expected '$', got '+'");
    expect_error("*1\r\nx\r\n", "Protocol error: expected '$', got 'x'");
    expect_error("set \"abc\r\n", "Protocol error: unbalanced quotes in request");
    expect_error("set \"abc\"x\r\n", "Protocol error: unbalanced quotes in request");
    expect_error("set 'abc\r\n", "Protocol error: unbalanced quotes in request");
    expect_error("*1048577\r\n", "Protocol error: invalid multibulk length");
    expect_error("*1\r\n$536870913\r\n", "Protocol error: invalid bulk length");
    /* the one-pass length lines: leading zeros, signs, 19+ digits, a
     * character other than a digit before the CR all go to the general
     * path and get its errors */
    expect_error("*01\r\n", "Protocol error: invalid multibulk length");
    expect_error("*1\r\n$03\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n$+3\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n$3x\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n$-0\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n$99999999999999999999\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n$999999999999999999\r\n", "Protocol error: invalid bulk length");
    expect_error("*1\r\n$9223372036854775808\r\n", "Protocol error: invalid bulk length");
    expect_error("*9223372036854775807\r\n", "Protocol error: invalid multibulk length");
}

static void test_length_lines(void **state)
{
    /* "*0" and "*-1" are skipped; "$0" is an empty argument; lengths of
     * one to three digits, split anywhere (test_split_at_every_byte runs
     * the general stream) */
    static const char s[] = "*-1\r\n*0\r\n*2\r\n$0\r\n\r\n$10\r\n0123456789\r\n"
                            "*1\r\n$100\r\n"
                            "0123456789012345678901234567890123456789012345678901234567890123456789"
                            "012345678901234567890123456789\r\n";
    for (size_t cut = 0; cut < sizeof s - 1; cut++) {
        cmd c[4];
        int n = feed(s, sizeof s - 1, cut, 0, c, 4, NULL);
        assert_int_equal(n, 2);
        assert_int_equal(c[0].argc, 2);
        ARG(&c[0], 0, "");
        ARG(&c[0], 1, "0123456789");
        assert_int_equal(c[1].argc, 1);
        assert_int_equal(c[1].len[0], 100);
    }
}

static void test_limits(void **state)
{
    resp_parser p;
    resp_parser_init(&p);
    p.max_multibulk = 10;
    p.max_bulk = 16384;
    char a[] = "*11\r\n";
    assert_int_equal(resp_parse(&p, a, strlen(a)), RESP_ERROR);
    resp_parser_free(&p);
    resp_parser_init(&p);
    p.max_bulk = 16384;
    char b[] = "*1\r\n$16385\r\n";
    assert_int_equal(resp_parse(&p, b, strlen(b)), RESP_ERROR);
    resp_parser_free(&p);

    /* an inline line longer than 64 KB without a newline is refused */
    size_t big = RESP_INLINE_MAX + 2;
    char *s = malloc(big);
    memset(s, 'a', big);
    resp_parser_init(&p);
    assert_int_equal(resp_parse(&p, s, big), RESP_ERROR);
    assert_string_equal(p.err, "Protocol error: too big inline request");
    resp_parser_free(&p);
    free(s);
}

static void test_want_and_shift(void **state)
{
    /* A big bulk: the parser reports how many bytes it still needs, and
     * offsets survive the caller dropping consumed bytes. */
    const char head[] = "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$10\r\n0123";
    resp_parser p;
    resp_parser_init(&p);
    char buf[128];
    memcpy(buf, head, sizeof head - 1);
    size_t len = sizeof head - 1;
    assert_int_equal(resp_parse(&p, buf, len), RESP_CMD);
    resp_parser_next(&p);
    assert_int_equal(resp_parse(&p, buf, len), RESP_AGAIN);
    assert_int_equal(resp_parser_want(&p, len), 6 + 2);
    /* drop the PING command (14 bytes) as the server does between reads */
    size_t used = 14;
    memmove(buf, buf + used, len - used);
    len -= used;
    resp_parser_shift(&p, used);
    memcpy(buf + len, "456789\r\n", 8);
    len += 8;
    assert_int_equal(resp_parse(&p, buf, len), RESP_CMD);
    assert_int_equal(p.nargs, 2);
    assert_int_equal(p.args[0].len, 3);
    assert_memory_equal(buf + p.args[0].off, "GET", 3);
    assert_int_equal(p.args[1].len, 10);
    assert_memory_equal(buf + p.args[1].off, "0123456789", 10);
    resp_parser_free(&p);
}

static void test_many_args(void **state)
{
    /* 1000 arguments: the argument array grows without per-arg mallocs
     * failing, and all slices are right. */
    size_t cap = 1000 * 16 + 32, n = 0;
    char *b = malloc(cap);
    n += (size_t)sprintf(b + n, "*1000\r\n");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(b + n, "$%d\r\n%d\r\n", i < 10 ? 1 : i < 100 ? 2 : 3, i);
    resp_parser p;
    resp_parser_init(&p);
    assert_int_equal(resp_parse(&p, b, n), RESP_CMD);
    assert_int_equal(p.nargs, 1000);
    char tmp[8];
    for (int i = 0; i < 1000; i++) {
        int l = sprintf(tmp, "%d", i);
        assert_int_equal(p.args[i].len, (size_t)l);
        assert_memory_equal(b + p.args[i].off, tmp, (size_t)l);
    }
    resp_parser_free(&p);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_stream),     cmocka_unit_test(test_split_at_every_byte),
        cmocka_unit_test(test_byte_at_a_time),   cmocka_unit_test(test_inline_escapes),
        cmocka_unit_test(test_protocol_errors),  cmocka_unit_test(test_limits),
        cmocka_unit_test(test_want_and_shift),   cmocka_unit_test(test_many_args),
        cmocka_unit_test(test_length_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
