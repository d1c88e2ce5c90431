/* Unit tests for the request-head parser and the chunked decoder
 * (src/http/parse.c). */
#include "http/parse.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const http_limits default_limits = { .max_head_size = 8192, .max_headers = 100 };

#define assert_str(s, lit)                                   \
    do {                                                     \
        bk_str s_ = (s);                                        \
        assert_non_null(s_.p);                               \
        assert_int_equal(s_.len, strlen(lit));               \
        assert_memory_equal(s_.p, (lit), strlen(lit));       \
    } while (0)

static int parse_all(http_parser *p, const char *s, size_t len, const http_limits *lim)
{
    http_parser_reset(p);
    return http_parse_head(p, s, len, lim);
}

static int parse_str(http_parser *p, const char *s)
{
    return parse_all(p, s, strlen(s), &default_limits);
}

/* Compares every result field of two parsers that parsed the same bytes. */
static void assert_same_result(const http_parser *a, const http_parser *b)
{
    assert_int_equal(a->method, b->method);
    assert_int_equal(a->version_minor, b->version_minor);
    assert_int_equal(a->body_kind, b->body_kind);
    assert_int_equal(a->keep_alive, b->keep_alive);
    assert_int_equal(a->expect_continue, b->expect_continue);
    assert_int_equal(a->line_off, b->line_off);
    assert_int_equal(a->line_len, b->line_len);
    assert_int_equal(a->method_len, b->method_len);
    assert_int_equal(a->target_off, b->target_off);
    assert_int_equal(a->target_len, b->target_len);
    assert_int_equal(a->nheaders, b->nheaders);
    assert_memory_equal(a->known, b->known, sizeof a->known);
    assert_int_equal(a->conn_close, b->conn_close);
    assert_int_equal(a->conn_keep_alive, b->conn_keep_alive);
    assert_int_equal(a->content_length, b->content_length);
    for (uint16_t i = 0; i < a->nheaders; i++) {
        assert_int_equal(a->hdr[i].name_off, b->hdr[i].name_off);
        assert_int_equal(a->hdr[i].name_len, b->hdr[i].name_len);
        assert_int_equal(a->hdr[i].val_off, b->hdr[i].val_off);
        assert_int_equal(a->hdr[i].val_len, b->hdr[i].val_len);
    }
}

/* ---- whole and split parsing ---- */

static const char full_req[] =
    "POST /upload/file.txt?x=1&y=%20 HTTP/1.1\r\n"
    "Host: example.com:8080\r\n"
    "User-Agent: unit-test/1.0\r\n"
    "Accept: */*\r\n"
    "Content-Length: 12\r\n"
    "X-Empty:\r\n"
    "X-Spaces: \t  padded value \t\r\n"
    "Referer: http://example.com/\r\n"
    "Connection: keep-alive\r\n"
    "\r\n";

static void check_full_req(const http_parser *p, const char *buf)
{
    assert_int_equal(p->method, HTTP_POST);
    assert_int_equal(p->method_len, 4);
    assert_int_equal(p->version_minor, 1);
    assert_str(http_parser_slice(buf, p->target_off, p->target_len), "/upload/file.txt?x=1&y=%20");
    assert_str(http_parser_slice(buf, p->line_off, p->line_len),
               "POST /upload/file.txt?x=1&y=%20 HTTP/1.1");
    assert_int_equal(p->nheaders, 8);
    assert_str(http_parser_known(p, buf, HH_HOST), "example.com:8080");
    assert_str(http_parser_known(p, buf, HH_USER_AGENT), "unit-test/1.0");
    assert_str(http_parser_known(p, buf, HH_CONTENT_LENGTH), "12");
    assert_str(http_parser_known(p, buf, HH_REFERER), "http://example.com/");
    assert_str(http_parser_known(p, buf, HH_CONNECTION), "keep-alive");
    assert_null(http_parser_known(p, buf, HH_RANGE).p);
    assert_null(http_parser_known(p, buf, HH_TRANSFER_ENCODING).p);
    assert_str(http_parser_header(p, buf, BK_STR("X-Empty")), "");
    assert_str(http_parser_header(p, buf, BK_STR("X-Spaces")), "padded value");
    assert_str(http_parser_header(p, buf, BK_STR("Accept")), "*/*");
    assert_int_equal(p->content_length, 12);
    assert_int_equal(p->body_kind, HTTP_BODY_LENGTH);
    assert_int_equal(p->keep_alive, 1);
    assert_int_equal(p->expect_continue, 0);
}

/* The byte class table of parse.c against the definitions it encodes. */
static void test_char_classes(void **state)
{
    (void)state;
    static const char tchars[] = "!#$%&'*+-.^_`|~";
    for (int ch = 0; ch < 256; ch++) {
        int alnum = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        int token = alnum || (ch && strchr(tchars, ch));
        int value = ch == '\t' || (ch >= 0x20 && ch != 0x7f);
        int target = ch > 0x20 && ch != 0x7f && ch != '#';
        int regname = (token && ch != '#' && ch != '^' && ch != '`' && ch != '|') ||
                      (ch && strchr("(),;=", ch));
        uint8_t want = (uint8_t)((token ? HTTP_CH_TOKEN : 0) | (value ? HTTP_CH_VALUE : 0) |
                                 (target ? HTTP_CH_TARGET : 0) | (regname ? HTTP_CH_REGNAME : 0));
        if (http_char_class[ch] != want)
            fail_msg("byte 0x%02x: class %u, expected %u", ch, http_char_class[ch], want);
    }
}

static void test_parse_whole(void **state)
{
    (void)state;
    http_parser p;
    size_t n = sizeof full_req - 1;
    assert_int_equal(parse_str(&p, full_req), (int)n);
    check_full_req(&p, full_req);

    /* Bytes after the head (the body) are not part of it. */
    char buf[1024];
    memcpy(buf, full_req, n);
    memcpy(buf + n, "hello world!", 12);
    http_parser q;
    assert_int_equal(parse_all(&q, buf, n + 12, &default_limits), (int)n);
    assert_same_result(&p, &q);
}

/* Feeding lengths 1..N to the same parser: 0 until complete, then the same
 * result as the one-shot parse. */
static void test_parse_split_every_offset(void **state)
{
    (void)state;
    size_t n = sizeof full_req - 1;
    http_parser whole;
    assert_int_equal(parse_str(&whole, full_req), (int)n);

    /* A heap copy of exactly len bytes, so ASan catches any read beyond. */
    char *buf = malloc(n);
    assert_non_null(buf);
    memcpy(buf, full_req, n);

    http_parser p;
    http_parser_reset(&p);
    for (size_t len = 1; len < n; len++) {
        int rc = http_parse_head(&p, buf, len, &default_limits);
        if (rc != 0)
            fail_msg("len %zu: rc %d, want 0", len, rc);
    }
    assert_int_equal(http_parse_head(&p, buf, n, &default_limits), (int)n);
    assert_same_result(&whole, &p);
    check_full_req(&p, buf);

    /* Two calls: a prefix of every length, then the rest at once. */
    for (size_t split = 1; split < n; split++) {
        http_parser_reset(&p);
        int rc = http_parse_head(&p, buf, split, &default_limits);
        if (rc != 0)
            fail_msg("split %zu: first rc %d, want 0", split, rc);
        rc = http_parse_head(&p, buf, n, &default_limits);
        if (rc != (int)n)
            fail_msg("split %zu: second rc %d, want %zu", split, rc, n);
        assert_same_result(&whole, &p);
    }

    /* The caller may move the bytes between calls: offsets are relative. */
    http_parser_reset(&p);
    char *moved = malloc(n);
    assert_non_null(moved);
    assert_int_equal(http_parse_head(&p, buf, n / 2, &default_limits), 0);
    memcpy(moved, buf, n);
    memset(buf, 'Z', n);
    assert_int_equal(http_parse_head(&p, moved, n, &default_limits), (int)n);
    check_full_req(&p, moved);
    free(moved);
    free(buf);
}

static void test_parse_pipelined(void **state)
{
    (void)state;
    static const char r1[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    static const char r2[] = "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n";
    static const char body2[] = "abc";
    static const char r3[] = "HEAD /c?d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    char buf[512];
    size_t len = 0;
    memcpy(buf + len, r1, sizeof r1 - 1), len += sizeof r1 - 1;
    memcpy(buf + len, r2, sizeof r2 - 1), len += sizeof r2 - 1;
    memcpy(buf + len, body2, sizeof body2 - 1), len += sizeof body2 - 1;
    memcpy(buf + len, r3, sizeof r3 - 1), len += sizeof r3 - 1;

    http_parser p;
    size_t off = 0;
    int rc = parse_all(&p, buf + off, len - off, &default_limits);
    assert_int_equal(rc, (int)sizeof r1 - 1);
    assert_int_equal(p.method, HTTP_GET);
    assert_str(http_parser_slice(buf + off, p.target_off, p.target_len), "/a");
    assert_int_equal(p.body_kind, HTTP_BODY_NONE);
    assert_int_equal(p.keep_alive, 1);
    off += (size_t)rc;

    rc = parse_all(&p, buf + off, len - off, &default_limits);
    assert_int_equal(rc, (int)sizeof r2 - 1);
    assert_int_equal(p.method, HTTP_POST);
    assert_str(http_parser_slice(buf + off, p.target_off, p.target_len), "/b");
    assert_int_equal(p.body_kind, HTTP_BODY_LENGTH);
    assert_int_equal(p.content_length, 3);
    assert_str(http_parser_known(&p, buf + off, HH_HOST), "h");
    off += (size_t)rc;
    assert_memory_equal(buf + off, "abc", 3);
    off += p.content_length;

    rc = parse_all(&p, buf + off, len - off, &default_limits);
    assert_int_equal(rc, (int)sizeof r3 - 1);
    assert_int_equal(p.method, HTTP_HEAD);
    assert_int_equal(p.version_minor, 0);
    assert_str(http_parser_slice(buf + off, p.target_off, p.target_len), "/c?d");
    assert_int_equal(p.keep_alive, 1);
    off += (size_t)rc;
    assert_int_equal(off, len);
}

/* One leading empty line before the request line is tolerated. */
static void test_parse_leading_crlf(void **state)
{
    (void)state;
    http_parser p;
    static const char req[] = "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_int_equal(parse_str(&p, req), (int)sizeof req - 1);
    assert_int_equal(p.method, HTTP_GET);
    assert_str(http_parser_slice(req, p.target_off, p.target_len), "/");
    /* Bare LF line endings are accepted too. */
    static const char lf[] = "GET /x HTTP/1.1\nHost: h\n\n";
    assert_int_equal(parse_str(&p, lf), (int)sizeof lf - 1);
    assert_str(http_parser_known(&p, lf, HH_HOST), "h");
}

static void test_parse_request_targets(void **state)
{
    (void)state;
    http_parser p;
    assert_int_equal(parse_str(&p, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"), 31);
    assert_int_equal(p.method, HTTP_OPTIONS);
    static const char abs[] = "GET http://h/x HTTP/1.1\r\nHost: h\r\n\r\n";
    assert_int_equal(parse_str(&p, abs), (int)sizeof abs - 1);
    assert_str(http_parser_slice(abs, p.target_off, p.target_len), "http://h/x");
    assert_int_equal(parse_str(&p, "GET * HTTP/1.1\r\nHost: h\r\n\r\n"), -400);
    assert_int_equal(parse_str(&p, "GET x HTTP/1.1\r\nHost: h\r\n\r\n"), -400);
    /* Every known method. */
    static const struct { const char *name; int id; } m[] = {
        { "GET", HTTP_GET }, { "HEAD", HTTP_HEAD }, { "POST", HTTP_POST },
        { "PUT", HTTP_PUT }, { "DELETE", HTTP_DELETE }, { "PATCH", HTTP_PATCH },
        { "OPTIONS", HTTP_OPTIONS }, { "TRACE", HTTP_TRACE }, { "CONNECT", HTTP_CONNECT },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(m); i++) {
        char req[128];
        int n = snprintf(req, sizeof req, "%s / HTTP/1.1\r\nHost: h\r\n\r\n", m[i].name);
        assert_int_equal(parse_str(&p, req), n);
        assert_int_equal(p.method, m[i].id);
        assert_int_equal(p.method_len, strlen(m[i].name));
    }
    /* Unknown methods (tokens, case-sensitive) parse; the handler answers. */
    static const char *unknown[] = { "FOO", "get", "GETS", "PURGE", "PROPFIND" };
    for (size_t i = 0; i < BK_ARRAY_LEN(unknown); i++) {
        char req[128];
        int n = snprintf(req, sizeof req, "%s / HTTP/1.1\r\nHost: h\r\n\r\n", unknown[i]);
        assert_int_equal(parse_str(&p, req), n);
        assert_int_equal(p.method, HTTP_METHOD_UNKNOWN);
        assert_int_equal(p.method_len, strlen(unknown[i]));
    }
}

/* ---- keep-alive ---- */

static void test_parse_keep_alive(void **state)
{
    (void)state;
    static const struct {
        const char *req;
        int keep_alive;
    } cases[] = {
        { "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 1 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: CLOSE\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n", 1 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo,close , bar\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", 1 },
        { "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", 0 },
        { "GET / HTTP/1.0\r\n\r\n", 0 },
        { "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1 },
        { "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 1 },
        { "GET / HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\n", 1 },
        { "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", 0 },
        { "GET / HTTP/1.0\r\nConnection: close\r\n\r\n", 0 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(cases); i++) {
        http_parser p;
        int rc = parse_str(&p, cases[i].req);
        if (rc != (int)strlen(cases[i].req))
            fail_msg("case %zu: rc %d", i, rc);
        if (p.keep_alive != cases[i].keep_alive)
            fail_msg("case %zu (%s): keep_alive %d, want %d", i, cases[i].req, p.keep_alive,
                     cases[i].keep_alive);
    }
}

/* ---- errors ---- */

static void test_parse_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *req;
        size_t len; /* 0 = strlen */
        int status;
    } cases[] = {
        /* request line */
        { "garbage\r\n\r\n", 0, -400 },
        { "GET\r\n\r\n", 0, -400 },
        { "GET /\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 0, -400 },
        { " GET / HTTP/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 0, -505 },
        { "GET / HTTP/0.9\r\nHost: h\r\n\r\n", 0, -505 },
        { "GET / HTTP/1.1x\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET / HTTP/11\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.x\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET / http/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET / HTTP/1,1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET /a\x01" "b HTTP/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET /a\x7f" "b HTTP/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        { "GET /a\rb HTTP/1.1\r\nHost: h\r\n\r\n", 0, -400 },
        /* Host */
        { "GET / HTTP/1.1\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 0, -400 },
        /* body framing */
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
          "Transfer-Encoding: chunked\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
          "Content-Length: 5\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
          "Transfer-Encoding: chunked\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 0, -501 },
        { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n", 0, -501 },
        { "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0, -400 },
        { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4611686018427387905\r\n\r\n", 0, -400 },
        /* field syntax */
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n  folded\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n\tfolded\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\n Host: h\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n",
          sizeof "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n" - 1, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x01\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX-A\t: a\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\n: a\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX(A): a\r\n\r\n", 0, -400 },
        { "GET / HTTP/1.1\r\nHost: h\r\nX\x80: a\r\n\r\n", 0, -400 },
        /* Expect */
        { "POST / HTTP/1.1\r\nHost: h\r\nExpect: foo\r\nContent-Length: 1\r\n\r\n", 0, -417 },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, foo\r\n\r\n", 0, -417 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(cases); i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].req);
        char *buf = malloc(len);
        assert_non_null(buf);
        memcpy(buf, cases[i].req, len);
        http_parser p;
        int rc = parse_all(&p, buf, len, &default_limits);
        if (rc != cases[i].status)
            fail_msg("case %zu (%.*s): rc %d, want %d", i, (int)len, cases[i].req, rc,
                     cases[i].status);

        /* Fed one byte at a time it fails the same way. */
        http_parser_reset(&p);
        rc = 0;
        for (size_t k = 1; k <= len && rc == 0; k++)
            rc = http_parse_head(&p, buf, k, &default_limits);
        if (rc != cases[i].status)
            fail_msg("case %zu byte by byte: rc %d, want %d", i, rc, cases[i].status);
        free(buf);
    }
}

static void test_parse_content_length_limits(void **state)
{
    (void)state;
    http_parser p;
    static const char max[] =
        "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4611686018427387904\r\n\r\n";
    assert_int_equal(parse_str(&p, max), (int)sizeof max - 1);
    assert_int_equal(p.content_length, (uint64_t)1 << 62);
    assert_int_equal(p.body_kind, HTTP_BODY_LENGTH);
    static const char zeros[] = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n";
    assert_int_equal(parse_str(&p, zeros), (int)sizeof zeros - 1);
    assert_int_equal(p.content_length, 7);
    static const char ows[] = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \t 9 \t\r\n\r\n";
    assert_int_equal(parse_str(&p, ows), (int)sizeof ows - 1);
    assert_int_equal(p.content_length, 9);
}

static void test_parse_head_too_large(void **state)
{
    (void)state;
    const http_limits lim = { .max_head_size = 64, .max_headers = 100 };
    char buf[256];
    http_parser p;

    /* Still in the request line at the limit: 414. */
    memset(buf, 'a', sizeof buf);
    memcpy(buf, "GET /", 5);
    assert_int_equal(parse_all(&p, buf, 63, &lim), 0);
    assert_int_equal(http_parse_head(&p, buf, 64, &lim), -414);
    assert_int_equal(parse_all(&p, buf, sizeof buf, &lim), -414);
    /* A complete request line that is too long is also 414. */
    int n = snprintf(buf, sizeof buf, "GET /%070d HTTP/1.1\r\nHost: h\r\n\r\n", 0);
    assert_int_equal(parse_all(&p, buf, (size_t)n, &lim), -414);

    /* In the headers: 431. */
    n = snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nX-Long: %060d\r\n\r\n", 0);
    assert_int_equal(parse_all(&p, buf, 63, &lim), 0);
    assert_int_equal(http_parse_head(&p, buf, 64, &lim), -431);
    assert_int_equal(parse_all(&p, buf, (size_t)n, &lim), -431);
    /* Many short header lines overflowing the limit: 431. */
    n = snprintf(buf, sizeof buf,
                 "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\n"
                 "G: 7\r\n\r\n");
    assert_true(n > 64);
    assert_int_equal(parse_all(&p, buf, (size_t)n, &lim), -431);

    /* A head of exactly max_head_size bytes is accepted, one more is not. */
    n = snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nX: %032d\r\n\r\n", 0);
    assert_int_equal(n, 64);
    assert_int_equal(parse_all(&p, buf, (size_t)n, &lim), 64);
    n = snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\nX: %033d\r\n\r\n", 0);
    assert_int_equal(n, 65);
    assert_int_equal(parse_all(&p, buf, (size_t)n, &lim), -431);
}

static void test_parse_too_many_headers(void **state)
{
    (void)state;
    const http_limits lim = { .max_head_size = 8192, .max_headers = 4 };
    http_parser p;
    static const char four[] = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_int_equal(parse_all(&p, four, sizeof four - 1, &lim), (int)sizeof four - 1);
    assert_int_equal(p.nheaders, 4);
    static const char five[] = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    assert_int_equal(parse_all(&p, five, sizeof five - 1, &lim), -431);

    /* The compile-time maximum: HTTP_MAX_HEADERS headers fit, one more does not. */
    char buf[4096];
    size_t len = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (int i = 1; i < HTTP_MAX_HEADERS; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "X%d: %d\r\n", i, i);
    size_t before_end = len;
    len += (size_t)snprintf(buf + len, sizeof buf - len, "\r\n");
    assert_int_equal(parse_all(&p, buf, len, &default_limits), (int)len);
    assert_int_equal(p.nheaders, HTTP_MAX_HEADERS);
    assert_str(http_parser_header(&p, buf, BK_STR("x99")), "99");
    len = before_end;
    len += (size_t)snprintf(buf + len, sizeof buf - len, "Extra: 1\r\n\r\n");
    assert_int_equal(parse_all(&p, buf, len, &default_limits), -431);
}

/* ---- bodies and Expect ---- */

static void test_parse_body_kinds(void **state)
{
    (void)state;
    http_parser p;
    assert_true(parse_str(&p, "GET / HTTP/1.1\r\nHost: h\r\n\r\n") > 0);
    assert_int_equal(p.body_kind, HTTP_BODY_NONE);
    assert_int_equal(p.content_length, 0);

    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n") > 0);
    assert_int_equal(p.body_kind, HTTP_BODY_NONE);
    assert_int_equal(p.content_length, 0);

    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 1234\r\n\r\n") > 0);
    assert_int_equal(p.body_kind, HTTP_BODY_LENGTH);
    assert_int_equal(p.content_length, 1234);

    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n") > 0);
    assert_int_equal(p.body_kind, HTTP_BODY_CHUNKED);
    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked \r\n\r\n") > 0);
    assert_int_equal(p.body_kind, HTTP_BODY_CHUNKED);

    /* HTTP/1.0 with a length body and no Host. */
    assert_true(parse_str(&p, "PUT /x HTTP/1.0\r\nContent-Length: 3\r\n\r\n") > 0);
    assert_int_equal(p.body_kind, HTTP_BODY_LENGTH);
    assert_int_equal(p.content_length, 3);
    assert_int_equal(p.version_minor, 0);
}

static void test_parse_expect(void **state)
{
    (void)state;
    http_parser p;
    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                              "Expect: 100-continue\r\n\r\n") > 0);
    assert_int_equal(p.expect_continue, 1);
    assert_int_equal(p.body_kind, HTTP_BODY_LENGTH);
    assert_int_equal(p.content_length, 5);

    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n") > 0);
    assert_int_equal(p.expect_continue, 1);
    assert_int_equal(p.body_kind, HTTP_BODY_CHUNKED);

    /* Nothing to continue without a body. */
    assert_true(parse_str(&p, "GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n") > 0);
    assert_int_equal(p.expect_continue, 0);
    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n"
                              "Expect: 100-continue\r\n\r\n") > 0);
    assert_int_equal(p.expect_continue, 0);

    assert_true(parse_str(&p, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n") > 0);
    assert_int_equal(p.expect_continue, 0);
}

static void test_parse_header_lookup(void **state)
{
    (void)state;
    static const char req[] = "GET / HTTP/1.1\r\nhOsT: h\r\nX-Custom-Thing: one\r\n"
                              "x-custom-thing: two\r\nACCEPT-ENCODING: gzip\r\n\r\n";
    http_parser p;
    assert_int_equal(parse_str(&p, req), (int)sizeof req - 1);
    assert_str(http_parser_header(&p, req, BK_STR("x-custom-thing")), "one");
    assert_str(http_parser_header(&p, req, BK_STR("X-CUSTOM-THING")), "one");
    assert_str(http_parser_header(&p, req, BK_STR("Host")), "h");
    assert_str(http_parser_header(&p, req, BK_STR("accept-encoding")), "gzip");
    assert_str(http_parser_known(&p, req, HH_HOST), "h");
    assert_str(http_parser_known(&p, req, HH_ACCEPT_ENCODING), "gzip");
    assert_null(http_parser_header(&p, req, BK_STR("X-Custom")).p);
    assert_null(http_parser_header(&p, req, BK_STR("X-Custom-Thingy")).p);
    assert_null(http_parser_header(&p, req, BK_STR("Missing")).p);
    /* The first of repeated fields wins for known headers. */
    static const char rng[] = "GET / HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n"
                              "Range: bytes=2-3\r\n\r\n";
    assert_int_equal(parse_str(&p, rng), (int)sizeof rng - 1);
    assert_str(http_parser_known(&p, rng, HH_RANGE), "bytes=0-1");
}

static void test_status_and_method_names(void **state)
{
    (void)state;
    assert_str(http_status_reason(404), "Not Found");
    assert_str(http_status_reason(431), "Request Header Fields Too Large");
    assert_str(http_status_reason(299), "Unknown");
    assert_str(http_method_name(HTTP_OPTIONS), "OPTIONS");
    assert_str(http_method_name(HTTP_METHOD_UNKNOWN), "UNKNOWN");
}

/* ---- chunked ---- */

static const char chunked_body[] =
    "5;ext=1;name=\"quoted value\"\r\n"
    "hello\r\n"
    "6 ; a=b\r\n"
    " world\r\n"
    "A\r\n"
    "0123456789\r\n"
    "000\r\n"
    "X-Trailer: yes\r\n"
    "Other: 2\r\n"
    "\r\n";
static const char chunked_data[] = "hello world0123456789";
#define NEXT_REQ "GET / HTTP/1.1\r\n"

typedef struct {
    char pending[512];
    size_t plen;
    char out[512];
    size_t olen;
    size_t consumed;
    int done;
    int error;
} chunk_feeder;

/* Appends bytes to the caller's buffer and decodes what is there, keeping
 * the unconsumed tail as a real caller would. */
static void feed(http_chunked *c, chunk_feeder *f, const char *p, size_t n)
{
    assert_true(f->plen + n <= sizeof f->pending);
    memcpy(f->pending + f->plen, p, n);
    f->plen += n;
    if (f->done || f->error)
        return; /* the bytes stay for whoever reads next */
    size_t out_len = 12345;
    int done = -1;
    ssize_t rc = http_chunked_decode(c, f->pending, f->plen, &out_len, &done);
    if (rc < 0) {
        f->error = (int)rc;
        return;
    }
    assert_true((size_t)rc <= f->plen);
    assert_true(out_len <= (size_t)rc);
    assert_true(f->olen + out_len <= sizeof f->out);
    memcpy(f->out + f->olen, f->pending, out_len);
    f->olen += out_len;
    f->consumed += (size_t)rc;
    memmove(f->pending, f->pending + rc, f->plen - (size_t)rc);
    f->plen -= (size_t)rc;
    f->done = done;
}

static void test_chunked_whole(void **state)
{
    (void)state;
    char buf[512];
    size_t n = sizeof chunked_body - 1;
    memcpy(buf, chunked_body, n);
    memcpy(buf + n, NEXT_REQ, sizeof NEXT_REQ - 1);
    http_chunked c;
    http_chunked_reset(&c);
    size_t out_len = 0;
    int done = 0;
    ssize_t rc = http_chunked_decode(&c, buf, n + sizeof NEXT_REQ - 1, &out_len, &done);
    assert_int_equal(rc, (ssize_t)n); /* the next request is left alone */
    assert_int_equal(done, 1);
    assert_int_equal(out_len, sizeof chunked_data - 1);
    assert_memory_equal(buf, chunked_data, out_len);
    assert_memory_equal(buf + n, NEXT_REQ, sizeof NEXT_REQ - 1);

    /* Once done, further calls consume nothing. */
    rc = http_chunked_decode(&c, buf + n, sizeof NEXT_REQ - 1, &out_len, &done);
    assert_int_equal(rc, 0);
    assert_int_equal(done, 1);
    assert_int_equal(out_len, 0);

    /* The smallest body, and upper-case hex. */
    static const char tiny[] = "0\r\n\r\n";
    memcpy(buf, tiny, sizeof tiny);
    http_chunked_reset(&c);
    assert_int_equal(http_chunked_decode(&c, buf, 5, &out_len, &done), 5);
    assert_int_equal(done, 1);
    assert_int_equal(out_len, 0);
    static const char hex[] = "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n1A\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n0\r\n\r\n";
    memcpy(buf, hex, sizeof hex);
    http_chunked_reset(&c);
    assert_int_equal(http_chunked_decode(&c, buf, sizeof hex - 1, &out_len, &done),
                     (ssize_t)sizeof hex - 1);
    assert_int_equal(done, 1);
    assert_int_equal(out_len, 52);
    assert_memory_equal(buf, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 52);
}

static void test_chunked_split_every_offset(void **state)
{
    (void)state;
    char input[512];
    size_t n = sizeof chunked_body - 1;
    memcpy(input, chunked_body, n);
    memcpy(input + n, NEXT_REQ, sizeof NEXT_REQ - 1);
    size_t total = n + sizeof NEXT_REQ - 1;

    /* Two pieces, split at every offset. */
    for (size_t split = 0; split <= total; split++) {
        http_chunked c;
        http_chunked_reset(&c);
        chunk_feeder f = { 0 };
        feed(&c, &f, input, split);
        feed(&c, &f, input + split, total - split);
        if (f.error || !f.done)
            fail_msg("split %zu: error %d done %d", split, f.error, f.done);
        assert_int_equal(f.consumed, n);
        assert_int_equal(f.olen, sizeof chunked_data - 1);
        assert_memory_equal(f.out, chunked_data, f.olen);
        /* What was not consumed is exactly the next request. */
        assert_int_equal(f.plen, total - n);
        assert_memory_equal(f.pending, NEXT_REQ, f.plen);
    }

    /* One byte at a time: done exactly when the last byte of the body arrives. */
    http_chunked c;
    http_chunked_reset(&c);
    chunk_feeder f = { 0 };
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(f.done, 0);
        feed(&c, &f, input + i, 1);
        assert_int_equal(f.error, 0);
    }
    assert_int_equal(f.done, 1);
    assert_int_equal(f.consumed, n);
    assert_int_equal(f.olen, sizeof chunked_data - 1);
    assert_memory_equal(f.out, chunked_data, f.olen);
}

static void test_chunked_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        size_t len; /* 0 = strlen */
    } cases[] = {
        { "0x10\r\n0123456789abcdef\r\n0\r\n\r\n", 0 },
        { "1_0\r\n0123456789abcdef\r\n0\r\n\r\n", 0 },
        { "-1\r\nx\r\n0\r\n\r\n", 0 },
        { "+1\r\nx\r\n0\r\n\r\n", 0 },
        { "\r\n", 0 },
        { ";ext\r\n", 0 },
        { "g\r\n", 0 },
        { "1000000000000000\r\n", 0 },  /* 16 hex digits */
        { "0000000000000001\r\nx\r\n0\r\n\r\n", 0 },
        { "FFFFFFFFFFFFFFFFF\r\n", 0 }, /* 17 */
        { "5\r\nhelloX\r\n0\r\n\r\n", 0 },
        { "5\r\nhello\n0\r\n\r\n", 0 },
        { "5\r\nhello\rX0\r\n\r\n", 0 },
        { "5\r\nhello0\r\n\r\n", 0 },
        { "5\nhello\r\n0\r\n\r\n", 0 },
        { "5\rhello\r\n0\r\n\r\n", 0 },
        { "5;a\nhello\r\n0\r\n\r\n", 0 },
        { "5;a\x01\r\nhello\r\n0\r\n\r\n", 0 },
        { "5;a\0b\r\nhello\r\n0\r\n\r\n", sizeof "5;a\0b\r\nhello\r\n0\r\n\r\n" - 1 },
        { "0\r\n@junk\r\n\r\n", 0 },
        { "0\r\n\x01\r\n\r\n", 0 },
        { "0\r\nA: b\r\n continued\r\n\r\n", 0 },
        { "0\r\nA: b\r\n\tcontinued\r\n\r\n", 0 },
        { "0\r\n\n", 0 },
        { "0\r\nA: b\n\r\n", 0 },
        { "0\r\nA: b\x01\r\n\r\n", 0 },
        { "0\r\nA: b\rX\r\n", 0 },
        { "0\r\n\rX", 0 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(cases); i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].body);
        char buf[128];
        assert_true(len <= sizeof buf);
        memcpy(buf, cases[i].body, len);
        http_chunked c;
        http_chunked_reset(&c);
        size_t out_len;
        int done;
        ssize_t rc = http_chunked_decode(&c, buf, len, &out_len, &done);
        if (rc >= 0)
            fail_msg("case %zu: rc %zd done %d, want < 0", i, rc, done);
        assert_int_equal(rc, -400);

        /* Byte by byte it fails too. */
        http_chunked_reset(&c);
        chunk_feeder f = { 0 };
        for (size_t k = 0; k < len && !f.error && !f.done; k++)
            feed(&c, &f, cases[i].body + k, 1);
        if (!f.error)
            fail_msg("case %zu byte by byte: no error (done %d)", i, f.done);
    }
}

static void test_chunked_trailer_limit(void **state)
{
    (void)state;
    /* A trailer section longer than 8 KiB is refused. */
    size_t cap = 3 + 9000 * 2 + 2;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t len = 0;
    memcpy(buf, "0\r\n", 3), len = 3;
    while (len + 12 < cap - 2) {
        memcpy(buf + len, "X-T: abcd\r\n", 11);
        len += 11;
    }
    memcpy(buf + len, "\r\n", 2), len += 2;
    http_chunked c;
    http_chunked_reset(&c);
    size_t out_len;
    int done;
    assert_int_equal(http_chunked_decode(&c, buf, len, &out_len, &done), -400);

    /* A short one is fine. */
    http_chunked_reset(&c);
    static const char ok[] = "0\r\nX-T: abcd\r\n\r\n";
    memcpy(buf, ok, sizeof ok - 1);
    assert_int_equal(http_chunked_decode(&c, buf, sizeof ok - 1, &out_len, &done),
                     (ssize_t)sizeof ok - 1);
    assert_int_equal(done, 1);
    free(buf);
}

#if 1
/* FIXED BUG: the chunked decoder accepts a trailer line that is not a field line.
 * Only the first byte of a trailer line is checked (must be a tchar); the
 * rest only has to be value characters, so a line with no ':' at all, or
 * with whitespace before the ':', is accepted, while the head parser refuses
 * the same lines with 400 (RFC 9112 5.1).
 * Input "0\r\nFoo bar\r\n\r\n": expected -400, actual 14 (all consumed, done).
 * Input "0\r\nFoo : bar\r\n\r\n": expected -400, actual 16 (all consumed, done). */
static void test_chunked_trailer_not_a_field(void **state)
{
    (void)state;
    static const char *bodies[] = { "0\r\nFoo bar\r\n\r\n", "0\r\nFoo : bar\r\n\r\n" };
    for (size_t i = 0; i < BK_ARRAY_LEN(bodies); i++) {
        char buf[64];
        size_t len = strlen(bodies[i]);
        memcpy(buf, bodies[i], len);
        http_chunked c;
        http_chunked_reset(&c);
        size_t out_len;
        int done;
        assert_int_equal(http_chunked_decode(&c, buf, len, &out_len, &done), -400);
    }
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_char_classes),
        cmocka_unit_test(test_parse_whole),
        cmocka_unit_test(test_parse_split_every_offset),
        cmocka_unit_test(test_parse_pipelined),
        cmocka_unit_test(test_parse_leading_crlf),
        cmocka_unit_test(test_parse_request_targets),
        cmocka_unit_test(test_parse_keep_alive),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_parse_content_length_limits),
        cmocka_unit_test(test_parse_head_too_large),
        cmocka_unit_test(test_parse_too_many_headers),
        cmocka_unit_test(test_parse_body_kinds),
        cmocka_unit_test(test_parse_expect),
        cmocka_unit_test(test_parse_header_lookup),
        cmocka_unit_test(test_status_and_method_names),
        cmocka_unit_test(test_chunked_whole),
        cmocka_unit_test(test_chunked_split_every_offset),
        cmocka_unit_test(test_chunked_malformed),
        cmocka_unit_test(test_chunked_trailer_limit),
#if 1 /* fixed bugs, kept as regression tests */
        cmocka_unit_test(test_chunked_trailer_not_a_field),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
