/* Unit tests for brisk-foods' JSON output writer (apps/foods/jsonw.c) and
 * its input checks (apps/foods/validate.c). The app's sources are compiled
 * in here: they are not part of a library. Every output is also parsed back
 * with cJSON to prove it is valid JSON with the intended value. */
#include "jsonw.c"
#include "validate.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The JSON string literal jw_str makes of p[0..len), NUL-terminated. */
static char *render(const char *p, size_t len)
{
    jw w;
    jw_init(&w);
    jw_str(&w, p, len);
    assert_false(w.oom);
    char *out = malloc(w.len + 1);
    assert_non_null(out);
    memcpy(out, w.buf, w.len);
    out[w.len] = '\0';
    jw_free(&w);
    return out;
}

#define assert_renders(in, want)                              \
    do {                                                      \
        char *got_ = render((in), sizeof(in) - 1);            \
        assert_string_equal(got_, (want));                    \
        free(got_);                                           \
    } while (0)

static void test_escape_quotes_and_backslash(void **state)
{
    assert_renders("a\"b", "\"a\\\"b\"");
    assert_renders("a\\b", "\"a\\\\b\"");
    assert_renders("'); DROP TABLE foods;--", "\"'); DROP TABLE foods;--\"");
    assert_renders("/", "\"/\""); /* solidus needs no escape */
    assert_renders("", "\"\"");
}

static void test_escape_control_characters(void **state)
{
    assert_renders("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
    assert_renders("\x01\x1f", "\"\\u0001\\u001f\"");
    assert_renders("\x7f", "\"\\u007f\"");
    /* A NUL byte inside the slice is data, not a terminator. */
    char *got = render("a\0b", 3);
    assert_string_equal(got, "\"a\\u0000b\"");
    free(got);
    /* Every byte below 0x20 comes out escaped, and cJSON reads it back. */
    char all[32];
    for (int i = 0; i < 32; i++)
        all[i] = (char)i;
    got = render(all, sizeof all);
    for (const char *p = got; *p; p++)
        assert_true((unsigned char)*p >= 0x20);
    cJSON *j = cJSON_Parse(got);
    assert_non_null(j);
    assert_true(cJSON_IsString(j));
    /* cJSON stops at the decoded NUL; the rest must match from byte 1. */
    assert_int_equal(strlen(j->valuestring), 0);
    cJSON_Delete(j);
    free(got);
    got = render(all + 1, sizeof all - 1);
    j = cJSON_Parse(got);
    assert_non_null(j);
    assert_memory_equal(j->valuestring, all + 1, sizeof all - 1);
    cJSON_Delete(j);
    free(got);
}

static void test_non_ascii_passes_through(void **state)
{
    assert_renders("Crème Fraîche", "\"Crème Fraîche\"");
    assert_renders("日本語", "\"日本語\"");
    assert_renders("\xF0\x9F\x8D\x8E", "\"\xF0\x9F\x8D\x8E\""); /* U+1F34E, 4 bytes */
    assert_renders("\xE2\x80\xA8", "\"\xE2\x80\xA8\"");          /* U+2028 is valid JSON */
    assert_renders("é\"\n", "\"é\\\"\\n\"");
}

static void test_invalid_utf8_becomes_replacement(void **state)
{
    assert_renders("a\xff" "b", "\"a\xEF\xBF\xBD" "b\"");            /* stray byte */
    assert_renders("\xC3", "\"\xEF\xBF\xBD\"");                   /* truncated sequence */
    assert_renders("\xC0\xAF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");   /* overlong '/' */
    assert_renders("\xED\xA0\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""); /* surrogate */
    assert_renders("\xF4\x90\x80\x80",
                   "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""); /* > U+10FFFF */
    char *got = render("x\x80y\xE2\x82", 5);
    assert_int_equal(utf8_valid_prefix(got, strlen(got)), strlen(got));
    free(got);
}

static void test_utf8_validation(void **state)
{
    static const struct {
        const char *s;
        size_t len, valid;
    } cases[] = {
        { "abc", 3, 3 },
        { "\xC2\x80", 2, 2 },            /* U+0080 */
        { "\xDF\xBF", 2, 2 },            /* U+07FF */
        { "\xE0\xA0\x80", 3, 3 },        /* U+0800 */
        { "\xEF\xBF\xBF", 3, 3 },        /* U+FFFF */
        { "\xF0\x90\x80\x80", 4, 4 },    /* U+10000 */
        { "\xF4\x8F\xBF\xBF", 4, 4 },    /* U+10FFFF */
        { "\xC1\xBF", 2, 0 },            /* overlong */
        { "\xE0\x9F\xBF", 3, 0 },        /* overlong */
        { "\xF0\x8F\xBF\xBF", 4, 0 },    /* overlong */
        { "\xED\xA0\x80", 3, 0 },        /* U+D800 */
        { "\xED\xBF\xBF", 3, 0 },        /* U+DFFF */
        { "\xF4\x90\x80\x80", 4, 0 },    /* U+110000 */
        { "\xF5\x80\x80\x80", 4, 0 },
        { "ab\x80", 3, 2 },              /* lone continuation */
        { "a\xE2\x82", 3, 1 },           /* truncated */
        { "\xE2\x28\xA1", 3, 0 },        /* bad continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = utf8_valid_prefix(cases[i].s, cases[i].len);
        if (got != cases[i].valid)
            fail_msg("case %zu: valid prefix %zu, want %zu", i, got, cases[i].valid);
    }
    assert_int_equal(utf8_count("Crème", 6), 5);
    assert_int_equal(utf8_count("\xF0\x9F\x8D\x8E", 4), 1);
}

static char *doc(jw *w)
{
    assert_false(w->oom);
    char *out = malloc(w->len + 1);
    memcpy(out, w->buf, w->len);
    out[w->len] = '\0';
    return out;
}

static void test_structure_and_commas(void **state)
{
    jw w;
    jw_init(&w);
    jw_obj_open(&w);
    jw_key(&w, "a");
    jw_arr_open(&w);
    jw_arr_close(&w);
    jw_key(&w, "b");
    jw_arr_open(&w);
    jw_int(&w, 1);
    jw_obj_open(&w);
    jw_obj_close(&w);
    jw_null(&w);
    jw_bool(&w, 1);
    jw_bool(&w, 0);
    jw_arr_close(&w);
    jw_key(&w, "k\"ey");
    jw_cstr(&w, NULL);
    jw_key(&w, "n");
    jw_int(&w, INT64_MIN);
    jw_obj_close(&w);
    char *s = doc(&w);
    assert_string_equal(
        s, "{\"a\":[],\"b\":[1,{},null,true,false],\"k\\\"ey\":null,\"n\":-9223372036854775808}");
    assert_int_equal(w.depth, 0);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    cJSON_Delete(j);
    free(s);
    /* reset starts a new document */
    jw_reset(&w);
    jw_arr_open(&w);
    jw_int(&w, 7);
    jw_arr_close(&w);
    s = doc(&w);
    assert_string_equal(s, "[7]");
    free(s);
    jw_free(&w);
}

static void test_doubles(void **state)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        { 0.0, "0.0" },    { 52.0, "52.0" },   { 52.1, "52.1" },    { 0.05, "0.05" },
        { -3.25, "-3.25" }, { 899.1, "899.1" }, { 1234.56, "1234.56" }, { 100, "100.0" },
        { 1e300, "1e+300" }, { 0.1 + 0.2, "0.30000000000000004" }, { 1.0 / 3, "0.3333333333333333" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        size_t n = jw_format_double(out, cases[i].v);
        out[n] = '\0';
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("%.17g: got %s, want %s", cases[i].v, out, cases[i].want);
        assert_true(strtod(out, NULL) == cases[i].v); /* round trip */
    }
    char out[32];
    size_t n = jw_format_double(out, 1.0 / 0.0);
    out[n] = '\0';
    assert_string_equal(out, "null");
    /* Shortest form round-trips for many values. */
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v;
        if (i % 2)
            v = (double)(x % 10000000) / 1000.0;
        else
            memcpy(&v, &x, sizeof v);
        if (v != v || v - v != 0)
            continue; /* NaN, infinities */
        n = jw_format_double(out, v);
        out[n] = '\0';
        if (strtod(out, NULL) != v)
            fail_msg("%.17g printed as %s", v, out);
    }
    assert_true(jw_round2(2314.3849999) == 2314.38);
    assert_true(jw_round2(-0.125) == -0.13);
    assert_int_equal(jw_round_int(2.5), 3);
    assert_int_equal(jw_round_int(-2.5), -3);
}

/* ---- validation ------------------------------------------------------ */

static cJSON *parse_ok(const char *s)
{
    foods_err e;
    cJSON *j = foods_parse_json(s, strlen(s), &e);
    if (!j)
        fail_msg("rejected %s: %s", s, e.error);
    return j;
}

static void expect_parse_error(const char *s, size_t len)
{
    foods_err e;
    cJSON *j = foods_parse_json(s, len, &e);
    if (j)
        fail_msg("accepted %.*s", (int)len, s);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.field, "");
}

static void test_parse_rejects_bad_json(void **state)
{
    expect_parse_error("", 0);
    expect_parse_error("{", 1);
    expect_parse_error("{\"a\":1} x", 9);      /* trailing data */
    expect_parse_error("{\"a\":1}{}", 9);
    expect_parse_error("{\"a\":\"\xff\"}", 9);  /* invalid UTF-8 */
    expect_parse_error("{\"a\":\"\xC0\xAF\"}", 10);
    expect_parse_error("{\"a\":\"x\ny\"}", 11); /* raw control character */
    expect_parse_error("{\"a\":\"\\u0000\"}", 14);
    expect_parse_error("\"\\ud800\"", 8);       /* lone surrogate */
    expect_parse_error("{\"a\":1}\0", 8);
    char deep[3000];
    memset(deep, '[', sizeof deep);
    expect_parse_error(deep, sizeof deep);
    cJSON_Delete(parse_ok(" {\"a\": \"\\u00e9\\\\u0000\"} \n"));
    cJSON_Delete(parse_ok("[]"));
}

static void expect_food_error(const char *json, const char *prefix, int status,
                              const char *field)
{
    cJSON *j = parse_ok(json);
    food_in f;
    foods_err e;
    if (foods_food_from_json(j, prefix, &f, &e) == 0)
        fail_msg("accepted %s", json);
    cJSON_Delete(j);
    assert_int_equal(e.status, status);
    assert_string_equal(e.field, field);
}

#define GOOD_FOOD "\"name\":\"Apple\",\"category_id\":1,\"kcal\":52,\"protein\":0.3,\"carbs\":14,\"fat\":0.2"

static void test_food_validation(void **state)
{
    cJSON *j = parse_ok("{" GOOD_FOOD ",\"extra\":true}");
    food_in f;
    foods_err e;
    assert_int_equal(foods_food_from_json(j, NULL, &f, &e), 0);
    assert_int_equal(f.name_len, 5);
    assert_int_equal(f.category_id, 1);
    assert_true(f.kcal == 52 && f.protein == 0.3 && f.carbs == 14 && f.fat == 0.2);
    cJSON_Delete(j);

    expect_food_error("[]", NULL, 422, "");
    expect_food_error("[]", "[4].", 422, "[4]");
    expect_food_error("{\"category_id\":1}", NULL, 422, "name");
    expect_food_error("{\"name\":5}", NULL, 422, "name");
    expect_food_error("{\"name\":\"\"}", NULL, 422, "name");
    expect_food_error("{\"name\":\"a\\u0001b\"}", NULL, 422, "name");
    expect_food_error("{\"name\":\"a\",\"category_id\":\"1\"}", NULL, 422, "category_id");
    expect_food_error("{\"name\":\"a\",\"category_id\":1.5}", NULL, 422, "category_id");
    expect_food_error("{\"name\":\"a\",\"category_id\":0}", NULL, 422, "category_id");
    expect_food_error("{\"name\":\"a\",\"category_id\":true}", NULL, 422, "category_id");
    expect_food_error("{\"name\":\"a\",\"category_id\":1e300}", NULL, 422, "category_id");
    expect_food_error("{\"name\":\"a\",\"category_id\":1,\"protein\":1}", NULL, 422, "kcal");
    expect_food_error("{\"name\":\"a\",\"category_id\":1,\"kcal\":900.01}", NULL, 422, "kcal");
    expect_food_error("{\"name\":\"a\",\"category_id\":1,\"kcal\":-1}", "[2].", 422, "[2].kcal");
    expect_food_error("{\"name\":\"a\",\"category_id\":1,\"kcal\":1,\"protein\":null}", NULL, 422,
                      "protein");
    expect_food_error("{\"name\":\"a\",\"category_id\":1,\"kcal\":1,\"protein\":1,\"carbs\":101}",
                      NULL, 422, "carbs");
    expect_food_error(
        "{\"name\":\"a\",\"category_id\":1,\"kcal\":1,\"protein\":1,\"carbs\":1,\"fat\":1e999}", NULL,
        422, "fat");

    /* 200 characters pass, 201 do not, counted in code points. */
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "{\"name\":\"");
    for (int i = 0; i < 200; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "é");
    snprintf(buf + n, sizeof buf - (size_t)n,
             "\",\"category_id\":1,\"kcal\":1,\"protein\":1,\"carbs\":1,\"fat\":1}");
    j = parse_ok(buf);
    assert_int_equal(foods_food_from_json(j, NULL, &f, &e), 0);
    cJSON_Delete(j);
    n = snprintf(buf, sizeof buf, "{\"name\":\"");
    for (int i = 0; i < 201; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "é");
    snprintf(buf + n, sizeof buf - (size_t)n, "\"}");
    expect_food_error(buf, NULL, 422, "name");
}

static void test_template_validation(void **state)
{
    const char *name;
    size_t len;
    template_item_in *items;
    int n;
    foods_err e;
    cJSON *j = parse_ok("{\"name\":\"Lunch\",\"items\":[{\"food_id\":3,\"grams\":150.5}]}");
    assert_int_equal(foods_template_from_json(j, &name, &len, &items, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(items[0].food_id, 3);
    assert_true(items[0].grams == 150.5);
    free(items);
    cJSON_Delete(j);

    static const struct {
        const char *json, *field;
    } bad[] = {
        { "{\"items\":[]}", "name" },
        { "{\"name\":\"a\"}", "items" },
        { "{\"name\":\"a\",\"items\":{}}", "items" },
        { "{\"name\":\"a\",\"items\":[]}", "items" },
        { "{\"name\":\"a\",\"items\":[1]}", "items[0]" },
        { "{\"name\":\"a\",\"items\":[{\"food_id\":1,\"grams\":1},{\"grams\":1}]}", "items[1].food_id" },
        { "{\"name\":\"a\",\"items\":[{\"food_id\":1,\"grams\":0}]}", "items[0].grams" },
        { "{\"name\":\"a\",\"items\":[{\"food_id\":1,\"grams\":10001}]}", "items[0].grams" },
        { "{\"name\":\"a\",\"items\":[{\"food_id\":-1,\"grams\":1}]}", "items[0].food_id" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = parse_ok(bad[i].json);
        if (foods_template_from_json(j, &name, &len, &items, &n, &e) == 0)
            fail_msg("accepted %s", bad[i].json);
        assert_null(items);
        assert_int_equal(e.status, 422);
        if (strcmp(e.field, bad[i].field) != 0)
            fail_msg("%s: field %s, want %s", bad[i].json, e.field, bad[i].field);
        cJSON_Delete(j);
    }
}

static void test_parse_int(void **state)
{
    int64_t v;
    assert_int_equal(foods_parse_int("20", 2, 1, 100, &v), 0);
    assert_int_equal(v, 20);
    assert_int_equal(foods_parse_int("-5", 2, -10, 10, &v), 0);
    assert_int_equal(v, -5);
    assert_int_equal(foods_parse_int("0", 1, 1, 100, &v), -1);
    assert_int_equal(foods_parse_int("101", 3, 1, 100, &v), -1);
    assert_int_equal(foods_parse_int("", 0, 0, 100, &v), -1);
    assert_int_equal(foods_parse_int("-", 1, -10, 100, &v), -1);
    assert_int_equal(foods_parse_int("1a", 2, 0, 100, &v), -1);
    assert_int_equal(foods_parse_int("+1", 2, 0, 100, &v), -1);
    assert_int_equal(foods_parse_int(" 1", 2, 0, 100, &v), -1);
    assert_int_equal(foods_parse_int("9223372036854775807", 19, 0, INT64_MAX, &v), 0);
    assert_int_equal(foods_parse_int("9223372036854775808", 19, 0, INT64_MAX, &v), -1);
    assert_int_equal(foods_parse_int("99999999999999999999", 20, 0, INT64_MAX, &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_quotes_and_backslash),
        cmocka_unit_test(test_escape_control_characters),
        cmocka_unit_test(test_non_ascii_passes_through),
        cmocka_unit_test(test_invalid_utf8_becomes_replacement),
        cmocka_unit_test(test_utf8_validation),
        cmocka_unit_test(test_structure_and_commas),
        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_parse_rejects_bad_json),
        cmocka_unit_test(test_food_validation),
        cmocka_unit_test(test_template_validation),
        cmocka_unit_test(test_parse_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
