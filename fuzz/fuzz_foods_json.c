/* libFuzzer target: brisk-foods input validation (apps/foods/validate.c)
 * and its JSON string writer (apps/foods/jsonw.c).
 *
 * The input is a request body. It goes through foods_parse_json and then,
 * as the handlers use them, foods_food_from_json (one food; each element
 * of an array with the "[i]." prefix) and foods_template_from_json.
 * Properties:
 *   - a body that parses is valid UTF-8 (the prescan runs before cJSON);
 *   - an accepted food or template has a name of 1..200 characters of
 *     valid UTF-8 without control characters, finite numbers inside the
 *     documented ranges, and ids in 1..max;
 *   - every refusal has status 400 or 422 and NUL-terminated messages.
 * The raw input is also fed to foods_parse_int and foods_check_text, and
 * written as a JSON string by jw_str: the output must parse back (cJSON)
 * to the same string when the input is valid UTF-8 without NUL, and be
 * valid UTF-8 in every case (jw_escape writes into exactly 6 * len bytes,
 * so ASan sees an overflow). */
#include "jsonw.h"
#include "validate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                               \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "fuzz_foods_json: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                                    \
            abort();                                                              \
        }                                                                         \
    } while (0)

static void check_err(const foods_err *e)
{
    CHECK(e->status == 400 || e->status == 422);
    CHECK(memchr(e->error, 0, sizeof e->error) && e->error[0]);
    CHECK(memchr(e->field, 0, sizeof e->field));
}

static void check_name(const char *p, size_t len)
{
    CHECK(p && strlen(p) == len);
    CHECK(utf8_valid_prefix(p, len) == len);
    size_t n = utf8_count(p, len);
    CHECK(n >= 1 && n <= FOODS_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        CHECK((unsigned char)p[i] >= 0x20 && p[i] != 0x7f);
}

static void check_food(const food_in *f)
{
    check_name(f->name, f->name_len);
    CHECK(f->category_id >= 1 && f->category_id <= FOODS_CATEGORY_ID_MAX);
    CHECK(isfinite(f->kcal) && f->kcal >= 0 && f->kcal <= FOODS_KCAL_MAX);
    CHECK(isfinite(f->protein) && f->protein >= 0 && f->protein <= FOODS_MACRO_MAX);
    CHECK(isfinite(f->carbs) && f->carbs >= 0 && f->carbs <= FOODS_MACRO_MAX);
    CHECK(isfinite(f->fat) && f->fat >= 0 && f->fat <= FOODS_MACRO_MAX);
}

static void validate(const char *body, size_t len)
{
    foods_err e;
    memset(&e, 0x55, sizeof e);
    cJSON *j = foods_parse_json(body, len, &e);
    if (!j) {
        CHECK(e.status == 400);
        check_err(&e);
        return;
    }
    CHECK(utf8_valid_prefix(body, len) == len);

    food_in f;
    if (foods_food_from_json(j, NULL, &f, &e) == 0)
        check_food(&f);
    else
        check_err(&e);

    if (cJSON_IsArray(j)) { /* the bulk handler */
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, j)
        {
            char prefix[24];
            snprintf(prefix, sizeof prefix, "[%d].", i++);
            if (foods_food_from_json(it, prefix, &f, &e) == 0) {
                check_food(&f);
            } else {
                check_err(&e);
                CHECK(strncmp(e.field, prefix, strlen(prefix) - 1) == 0);
            }
        }
    }

    const char *name;
    size_t name_len;
    template_item_in *items = (template_item_in *)1;
    int n = -1;
    if (foods_template_from_json(j, &name, &name_len, &items, &n, &e) == 0) {
        check_name(name, name_len);
        CHECK(n >= 1 && n <= FOODS_TEMPLATE_ITEMS_MAX);
        for (int i = 0; i < n; i++) {
            CHECK(items[i].food_id >= 1 && items[i].food_id <= FOODS_ID_MAX);
            CHECK(isfinite(items[i].grams) && items[i].grams > 0 &&
                  items[i].grams <= FOODS_GRAMS_MAX);
        }
        free(items);
    } else {
        check_err(&e);
        CHECK(items == NULL && n == 0);
    }
    cJSON_Delete(j);
}

static void round_trip(const char *p, size_t len)
{
    /* jw_escape into exactly the documented room */
    char *esc = malloc(6 * len + 1);
    size_t n = jw_escape(esc, p, len);
    CHECK(n <= 6 * len);
    free(esc);

    jw w;
    jw_init(&w);
    jw_obj_open(&w);
    jw_key(&w, "s");
    jw_str(&w, p, len);
    jw_obj_close(&w);
    CHECK(!w.oom);
    CHECK(utf8_valid_prefix(w.buf, w.len) == w.len);
    cJSON *j = cJSON_ParseWithLength(w.buf, w.len);
    CHECK(j != NULL);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "s");
    CHECK(cJSON_IsString(s));
    if (utf8_valid_prefix(p, len) == len && !memchr(p, 0, len))
        CHECK(strlen(s->valuestring) == len && memcmp(s->valuestring, p, len) == 0);
    cJSON_Delete(j);
    jw_free(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len > 65536)
        return 0;
    char *body = malloc(len ? len : 1); /* exact size: over-reads show */
    memcpy(body, data, len);
    validate(body, len);

    int64_t v;
    if (foods_parse_int(body, len, INT64_MIN, INT64_MAX, &v) == 0) {
        char again[32];
        int k = snprintf(again, sizeof again, "%lld", (long long)v);
        /* leading zeros and "-0" are the only other spellings */
        CHECK((size_t)k <= len);
    }
    foods_err e;
    if (foods_check_text(body, len, FOODS_NAME_MAX, "name", &e) == 0) {
        CHECK(utf8_valid_prefix(body, len) == len);
        for (size_t i = 0; i < len; i++)
            CHECK((unsigned char)body[i] >= 0x20 && body[i] != 0x7f);
    } else {
        CHECK(e.status == 422);
    }
    round_trip(body, len);

    if (len >= 8) { /* numbers: the shortest form reads back exactly */
        double d;
        memcpy(&d, data, 8);
        char out[32];
        size_t k = jw_format_double(out, d);
        CHECK(k < sizeof out);
        out[k] = 0;
        if (isfinite(d))
            CHECK(strtod(out, NULL) == d);
        else
            CHECK(strcmp(out, "null") == 0);
        cJSON *num = cJSON_Parse(out);
        CHECK(num && (cJSON_IsNumber(num) || cJSON_IsNull(num)));
        cJSON_Delete(num);
    }
    free(body);
    return 0;
}
