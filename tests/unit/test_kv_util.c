/* Unit tests for brisk-kv number parsing/formatting and glob matching
 * (src/kv/util.c). */
#include "kv/util.h"

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static int ll(const char *s, long long *v)
{
    return kv_parse_ll(s, strlen(s), v);
}

static int dbl(const char *s, double *v)
{
    return kv_parse_double(s, strlen(s), v);
}

static void test_parse_ll(void **state)
{
    long long v;
    assert_int_equal(ll("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(ll("-42", &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(ll("9223372036854775807", &v), 0);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(ll("-9223372036854775808", &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(ll("9223372036854775808", &v), -1);
    assert_int_equal(ll("-9223372036854775809", &v), -1);
    assert_int_equal(ll("99999999999999999999", &v), -1);
    assert_int_equal(ll("01", &v), -1);
    assert_int_equal(ll("+1", &v), -1);
    assert_int_equal(ll(" 1", &v), -1);
    assert_int_equal(ll("1 ", &v), -1);
    assert_int_equal(ll("-", &v), -1);
    assert_int_equal(ll("-0", &v), -1);
    assert_int_equal(ll("", &v), -1);
    assert_int_equal(ll("12a", &v), -1);
}

static void test_parse_double(void **state)
{
    double v;
    assert_int_equal(dbl("1", &v), 0);
    assert_true(v == 1.0);
    assert_int_equal(dbl("-17", &v), 0);
    assert_true(v == -17.0);
    assert_int_equal(dbl("1.5", &v), 0);
    assert_true(v == 1.5);
    assert_int_equal(dbl("0.1", &v), 0);
    assert_true(v == 0.1); /* exact: strtod, not digit arithmetic */
    assert_int_equal(dbl("1e3", &v), 0);
    assert_true(v == 1000.0);
    assert_int_equal(dbl("inf", &v), 0);
    assert_true(isinf(v) && v > 0);
    assert_int_equal(dbl("+inf", &v), 0);
    assert_true(isinf(v) && v > 0);
    assert_int_equal(dbl("-inf", &v), 0);
    assert_true(isinf(v) && v < 0);
    assert_int_equal(dbl("1234567890123456789", &v), 0);
    assert_true(v == 1234567890123456789.0);
    assert_int_equal(dbl("nan", &v), -1);
    assert_int_equal(dbl("NaN", &v), -1);
    assert_int_equal(dbl("abc", &v), -1);
    assert_int_equal(dbl(" 1", &v), -1);
    assert_int_equal(dbl("1 ", &v), -1);
    assert_int_equal(dbl("", &v), -1);
    assert_int_equal(dbl("1e999", &v), -1);
    assert_int_equal(kv_parse_double("1\0", 2, &v), -1);
}

static void test_format_double(void **state)
{
    char b[KV_DBL_STR_MAX];
    struct {
        double v;
        const char *s;
    } cases[] = {
        { 1.0, "1" },       { -2.0, "-2" },       { 1.5, "1.5" },      { 0.1, "0.10000000000000001" },
        { 1.1, "1.1000000000000001" },     { 1e20, "1e+20" },    { INFINITY, "inf" }, { -INFINITY, "-inf" },
        { 0.0, "0" },       { 3.14159, "3.1415899999999999" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = kv_fmt_double(b, cases[i].v);
        b[n] = '\0';
        assert_string_equal(b, cases[i].s);
    }
    /* round trip */
    for (int i = 1; i < 1000; i++) {
        double v = 1.0 / i;
        size_t n = kv_fmt_double(b, v);
        b[n] = '\0';
        double back;
        assert_int_equal(kv_parse_double(b, n, &back), 0);
        assert_true(back == v);
    }
}

static void test_format_ldouble(void **state)
{
    char b[128];
    kv_fmt_ldouble(b, sizeof b, 10.5L + 0.1L);
    assert_string_equal(b, "10.6");
    kv_fmt_ldouble(b, sizeof b, 3.0L);
    assert_string_equal(b, "3");
    kv_fmt_ldouble(b, sizeof b, -0.5L);
    assert_string_equal(b, "-0.5");
    char l[32];
    assert_int_equal(kv_fmt_ll(l, -123), 4);
    assert_memory_equal(l, "-123", 4);
}

/* kv_fmt_ll against printf: both ends, every power of ten and its
 * neighbours, both signs, and a sweep of small values */
static void check_fmt_ll(long long v)
{
    char want[32], got[32];
    int n = snprintf(want, sizeof want, "%lld", v);
    assert_int_equal(kv_fmt_ll(got, v), (size_t)n);
    got[n] = '\0';
    assert_string_equal(got, want);
}

static void test_format_ll(void **state)
{
    check_fmt_ll(LLONG_MIN);
    check_fmt_ll(LLONG_MAX);
    check_fmt_ll(LLONG_MIN + 1);
    for (long long p = 1; p <= LLONG_MAX / 10; p *= 10) {
        for (long long d = -1; d <= 1; d++) {
            check_fmt_ll(p + d);
            check_fmt_ll(-(p + d));
        }
    }
    for (long long v = -100000; v <= 100000; v++)
        check_fmt_ll(v);
}

static int gm(const char *p, const char *s, int nocase)
{
    return kv_glob_match(p, strlen(p), s, strlen(s), nocase);
}

static void test_glob(void **state)
{
    assert_true(gm("*", "anything", 0));
    assert_true(gm("h?llo", "hello", 0));
    assert_true(gm("h*llo", "heeeello", 0));
    assert_true(gm("h[ae]llo", "hallo", 0));
    assert_false(gm("h[ae]llo", "hillo", 0));
    assert_true(gm("h[^e]llo", "hallo", 0));
    assert_false(gm("h[^e]llo", "hello", 0));
    assert_true(gm("h[a-b]llo", "hbllo", 0));
    assert_true(gm("user:*:name", "user:42:name", 0));
    assert_false(gm("user:*:name", "user:42:age", 0));
    assert_true(gm("a\\*b", "a*b", 0));
    assert_false(gm("a\\*b", "axb", 0));
    assert_true(gm("MAX*", "maxmemory", 1));
    assert_false(gm("MAX*", "maxmemory", 0));
    assert_true(gm("*a*b*c*", "xxaxxbxxcxx", 0));
    assert_false(gm("*a*b*c*", "xxaxxcxxbxx", 0));
    assert_true(gm("", "", 0));
    assert_false(gm("", "a", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ll),     cmocka_unit_test(test_parse_double),
        cmocka_unit_test(test_format_double), cmocka_unit_test(test_format_ldouble),
        cmocka_unit_test(test_glob),         cmocka_unit_test(test_format_ll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
