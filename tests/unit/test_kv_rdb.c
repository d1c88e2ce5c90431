/* Unit tests for the RDB codec pieces of src/kv/rdb.c: CRC-64/Jones, LZF
 * round trips and hostile LZF input, length and string encodings. */
#include "kv/rdb.h"
#include "kv/mem.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_crc64_check_value(void **state)
{
    (void)state;
    assert_true(rdb_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caull);
    /* Incremental over any split equals one pass (slice-by-8 and tail). */
    char data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)next();
    uint64_t whole = rdb_crc64(0, data, sizeof data);
    for (size_t cut = 0; cut < 40; cut++)
        assert_true(rdb_crc64(rdb_crc64(0, data, cut), data + cut, sizeof data - cut) == whole);
}

static void test_lzf_round_trip(void **state)
{
    (void)state;
    static unsigned char in[70000], z[70000], out[70000];
    for (int iter = 0; iter < 300; iter++) {
        size_t n = 3 + next() % (iter < 200 ? 300 : sizeof in - 3);
        int alphabet = 1 + (int)(next() % 256);
        for (size_t i = 0; i < n; i++)
            in[i] = (unsigned char)(next() % (uint64_t)alphabet);
        size_t zn = rdb_lzf_compress(in, n, z, n - 1);
        if (zn == 0)
            continue; /* did not fit: allowed */
        assert_true(zn <= n - 1);
        assert_int_equal(rdb_lzf_decompress(z, zn, out, n), n);
        assert_memory_equal(in, out, n);
        /* One byte short of room: refused, never overflowed. */
        assert_int_equal(rdb_lzf_decompress(z, zn, out, n - 1), 0);
    }
}

static void test_lzf_hostile_input(void **state)
{
    (void)state;
    unsigned char in[64], out[128];
    for (int iter = 0; iter < 100000; iter++) {
        size_t n = next() % sizeof in;
        for (size_t i = 0; i < n; i++)
            in[i] = (unsigned char)next();
        size_t cap = next() % sizeof out;
        assert_true(rdb_lzf_decompress(in, n, out, cap) <= cap);
    }
    /* A back reference before the start of the output. */
    const unsigned char bad[] = { 0x00, 'a', 0x20, 0x05 };
    assert_int_equal(rdb_lzf_decompress(bad, sizeof bad, out, sizeof out), 0);
}

static void test_len_round_trip(void **state)
{
    (void)state;
    const uint64_t lens[] = { 0, 1, 63, 64, 16383, 16384, 0xffffffffull, 0x100000000ull,
                              UINT64_MAX };
    const size_t sizes[] = { 1, 1, 1, 2, 2, 5, 5, 9, 9 };
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        bk_buf b = { 0 };
        rdb_save_len(&b, lens[i]);
        assert_int_equal(b.len, sizes[i]);
        rdb_reader r = { (const unsigned char *)b.data, (const unsigned char *)b.data + b.len };
        uint64_t v;
        assert_int_equal(rdb_load_len(&r, &v), 0);
        assert_true(v == lens[i]);
        /* Truncated: refused. */
        rdb_reader t = { (const unsigned char *)b.data, (const unsigned char *)b.data + b.len - 1 };
        assert_int_equal(rdb_load_len(&t, &v), -1);
        buf_free(&b);
    }
}

static void test_string_encodings(void **state)
{
    (void)state;
    srv.cfg.proto_max_bulk_len = 512ull * 1024 * 1024;
    static const struct {
        const char *s;
        unsigned char first; /* expected first byte */
    } cases[] = {
        { "0", 0xc0 },          { "-128", 0xc0 },     { "127", 0xc0 },
        { "128", 0xc1 },        { "-32768", 0xc1 },   { "32768", 0xc2 },
        { "2147483647", 0xc2 }, { "-2147483648", 0xc2 },
        { "2147483648", 10 },   { "-0", 2 },          { "01", 2 },           { "+1", 2 },
        { "", 0 },              { "hello", 5 },
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0xc3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bk_buf b = { 0 };
        size_t n = strlen(cases[i].s);
        rdb_save_string(&b, cases[i].s, n);
        assert_int_equal((unsigned char)b.data[0], cases[i].first);
        rdb_reader r = { (const unsigned char *)b.data, (const unsigned char *)b.data + b.len };
        char *s;
        size_t sn;
        assert_int_equal(rdb_load_string(&r, &s, &sn), 0);
        assert_int_equal(sn, n);
        assert_memory_equal(s, cases[i].s, n);
        assert_true(r.p == r.end);
        kv_free(s);
        /* Every truncation is refused. */
        for (size_t cut = 0; cut < b.len; cut++) {
            rdb_reader t = { (const unsigned char *)b.data, (const unsigned char *)b.data + cut };
            assert_int_equal(rdb_load_string(&t, &s, &sn), -1);
        }
        buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc64_check_value),
        cmocka_unit_test(test_lzf_round_trip),
        cmocka_unit_test(test_lzf_hostile_input),
        cmocka_unit_test(test_len_round_trip),
        cmocka_unit_test(test_string_encodings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
