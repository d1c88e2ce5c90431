/* Unit tests for the HPACK encoder (src/http/hpack.c): every block it
 * writes is decoded by libnghttp2's decoder (the one curl, h2load and
 * nghttp2-based clients use), which must give back the same fields. */
#include "http/hpack.h"

#include <nghttp2/nghttp2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct {
    http_hpack_enc enc;
    nghttp2_hd_inflater *dec;
    uint8_t *buf;
} pair;

static int setup(void **state)
{
    pair *p = calloc(1, sizeof *p);
    assert_non_null(p);
    http_hpack_enc_init(&p->enc);
    assert_int_equal(nghttp2_hd_inflate_new(&p->dec), 0);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    pair *p = *state;
    nghttp2_hd_inflate_del(p->dec);
    free(p->buf);
    free(p);
    return 0;
}

/* Encodes f, decodes it, compares; returns the block's length. */
static size_t round_trip(pair *p, const http_hpack_field *f, size_t n)
{
    size_t bound = http_hpack_bound(f, n);
    free(p->buf);
    p->buf = malloc(bound);
    assert_non_null(p->buf);
    size_t len = http_hpack_encode(&p->enc, p->buf, f, n);
    assert_true(len <= bound);
    uint8_t *in = p->buf;
    size_t left = len, got = 0;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(p->dec, &nv, &flags, in, left, 1);
        assert_true(r >= 0);
        in += r;
        left -= (size_t)r;
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            assert_true(got < n);
            assert_int_equal(nv.namelen, f[got].name_len);
            assert_int_equal(nv.valuelen, f[got].value_len);
            assert_memory_equal(nv.name, f[got].name, nv.namelen);
            if (nv.valuelen)
                assert_memory_equal(nv.value, f[got].value, nv.valuelen);
            got++;
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(p->dec);
            break;
        }
        assert_true((flags & NGHTTP2_HD_INFLATE_EMIT) || left > 0);
    }
    assert_int_equal(got, n);
    return len;
}

#define F(n, v) { n, v, sizeof n - 1, sizeof v - 1, 0 }
#define KF(n, v, k) { n, v, sizeof n - 1, sizeof v - 1, k }

static void test_hpack_repeated_head_one_byte_a_field(void **state)
{
    pair *p = *state;
    const http_hpack_field head[] = {
        F(":status", "200"), F("server", "brisk/0.1.0"), F("date", "Tue, 24 Nov 2026 21:04:40 GMT"),
        F("content-type", "text/html; charset=utf-8"), F("etag", "\"98a442-75-18eb164169206596\""),
        F("accept-ranges", "bytes"), F("content-length", "117"),
    };
    size_t first = round_trip(p, head, 7);
    assert_true(first > 100);
    for (int i = 0; i < 5; i++)
        assert_int_equal(round_trip(p, head, 7), 7); /* all indexed */
    /* a new date: one literal (with an indexed name), the rest indexed */
    http_hpack_field next[7];
    memcpy(next, head, sizeof next);
    next[2].value = "Tue, 24 Nov 2026 21:04:41 GMT";
    assert_int_equal(round_trip(p, next, 7), 6 + 2 + 29);
    assert_int_equal(round_trip(p, next, 7), 7);
    const http_hpack_field other[] = { F(":status", "404"), F(":status", "201"), F(":status", "201") };
    assert_int_equal(round_trip(p, other, 3), 1 + 5 + 1);
    /* keyed fields: the same bytes whether found by key or by content */
    const http_hpack_field keyed[] = {
        KF("server", "brisk/0.1.0", 7), KF("date", "Tue, 24 Nov 2026 21:04:41 GMT", 8),
        KF("x-keyed", "first", 9), F("x-keyed", "first"), KF("x-keyed", "first", 9),
    };
    assert_int_equal(round_trip(p, keyed, 5), 1 + 1 + (1 + 8 + 6) + 1 + 1);
    assert_int_equal(round_trip(p, keyed, 5), 5);
}

static void test_hpack_big_and_unindexed_fields(void **state)
{
    pair *p = *state;
    static char big[3000], huge[60000];
    memset(big, 'b', sizeof big);
    memset(huge, 'h', sizeof huge);
    const http_hpack_field f[] = {
        { "x-big", big, 5, sizeof big, 0 }, { "x-huge", huge, 6, sizeof huge, 0 },
        F("set-cookie", "a=1"), F("set-cookie", "a=1"), F("x-new-name", ""),
        F("x-new-name", ""), F("location", "/somewhere/else"),
    };
    size_t len = round_trip(p, f, 7);
    /* neither big one nor the set-cookies were indexed: sent again in full;
     * x-new-name (13 bytes, then 1) and location (17) now 1 byte each */
    assert_int_equal(round_trip(p, f, 7), len - (13 + 1 - 2) - (17 - 1));
}

static void test_hpack_table_eviction_and_size_updates(void **state)
{
    pair *p = *state;
    char names[400][16], values[400][40];
    http_hpack_field f[400];
    for (int i = 0; i < 400; i++) { /* ~64 bytes each: 400 of them go round the table */
        snprintf(names[i], sizeof names[i], "x-field-%d", i % 97);
        snprintf(values[i], sizeof values[i], "value-%d-%d", i, i * 7919);
        /* (half of them keyed: found by key while their entries live) */
        f[i] = (http_hpack_field){ names[i], values[i], (uint32_t)strlen(names[i]),
                                   (uint32_t)strlen(values[i]), i % 2 ? 1000 + (uint64_t)i : 0 };
    }
    for (int round = 0; round < 3; round++)
        for (int i = 0; i + 20 <= 400; i += 13)
            round_trip(p, f + i, 20);
    /* The client lowers its table (twice between two blocks: the smallest
     * and the last are said), then raises it; the decoder follows. */
    assert_int_equal(nghttp2_hd_inflate_change_table_size(p->dec, 100), 0);
    assert_int_equal(nghttp2_hd_inflate_change_table_size(p->dec, 600), 0);
    http_hpack_enc_set_max(&p->enc, 100);
    http_hpack_enc_set_max(&p->enc, 600);
    round_trip(p, f, 30);
    assert_int_equal(nghttp2_hd_inflate_change_table_size(p->dec, 0), 0);
    http_hpack_enc_set_max(&p->enc, 0);
    assert_true(round_trip(p, f, 5) > 5 * 10);
    assert_true(round_trip(p, f, 5) > 5 * 10); /* nothing indexed */
    assert_int_equal(nghttp2_hd_inflate_change_table_size(p->dec, 65536), 0);
    http_hpack_enc_set_max(&p->enc, 65536);
    for (int i = 0; i + 50 <= 400; i += 7)
        round_trip(p, f + i, 50);
    assert_int_equal(round_trip(p, f + 350, 50), 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hpack_repeated_head_one_byte_a_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hpack_big_and_unindexed_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hpack_table_eviction_and_size_updates, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
