#include "validate.h"

#include "jsonw.h"

#include <math.h> /* isfinite: a macro, no libm */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int foods_fail(foods_err *e, int status, const char *field, const char *fmt, ...)
{
    e->status = status;
    snprintf(e->field, sizeof e->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->error, sizeof e->error, fmt, ap);
    va_end(ap);
    return -1;
}

/* JSON itself forbids raw control characters in strings; cJSON does not
 * check, and it turns \u0000 into a C string terminator, so both are
 * caught here, with invalid UTF-8, before cJSON sees the body. */
static int prescan(const char *body, size_t len, foods_err *e)
{
    size_t ok = utf8_valid_prefix(body, len);
    if (ok != len)
        return foods_fail(e, 400, NULL, "request body is not valid UTF-8 (byte %zu)", ok);
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)body[i];
        if (!in_str) {
            if (c == '"')
                in_str = 1;
            continue;
        }
        if (c == '"') {
            in_str = 0;
        } else if (c < 0x20) {
            return foods_fail(e, 400, NULL, "malformed JSON: control character in a string");
        } else if (c == '\\' && i + 1 < len) {
            if (body[i + 1] == 'u' && i + 5 < len && memcmp(body + i + 2, "0000", 4) == 0)
                return foods_fail(e, 400, NULL, "\\u0000 is not allowed in strings");
            i++; /* skip the escaped character */
        }
    }
    return 0;
}

cJSON *foods_parse_json(const char *body, size_t len, foods_err *e)
{
    if (len == 0) {
        foods_fail(e, 400, NULL, "request body is empty; a JSON document is expected");
        return NULL;
    }
    if (prescan(body, len, e) < 0)
        return NULL;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!j) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        foods_fail(e, 400, NULL, "malformed JSON near byte %zu", at);
        return NULL;
    }
    size_t at = (size_t)(end - body);
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' || body[at] == '\r'))
        at++;
    if (at != len) {
        cJSON_Delete(j);
        foods_fail(e, 400, NULL, "malformed JSON: unexpected data after the document at byte %zu", at);
        return NULL;
    }
    return j;
}

int foods_check_text(const char *p, size_t len, size_t max, const char *field, foods_err *e)
{
    if (utf8_valid_prefix(p, len) != len)
        return foods_fail(e, 422, field, "must be valid UTF-8");
    size_t n = utf8_count(p, len);
    if (n < 1 || n > max)
        return foods_fail(e, 422, field, "must be 1 to %zu characters", max);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f)
            return foods_fail(e, 422, field, "must not contain control characters");
    }
    return 0;
}

static int get_text(const cJSON *obj, const char *key, const char *field, const char **p,
                    size_t *len, foods_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return foods_fail(e, 422, field, "field required");
    if (!cJSON_IsString(v) || !v->valuestring)
        return foods_fail(e, 422, field, "must be a string");
    *p = v->valuestring;
    *len = strlen(v->valuestring);
    return foods_check_text(*p, *len, FOODS_NAME_MAX, field, e);
}

static int get_number(const cJSON *obj, const char *key, const char *field, double min,
                      double max, int min_exclusive, double *out, foods_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return foods_fail(e, 422, field, "field required");
    if (!cJSON_IsNumber(v))
        return foods_fail(e, 422, field, "must be a number");
    double d = v->valuedouble;
    if (!isfinite(d) || d > max || d < min || (min_exclusive && d == min))
        return foods_fail(e, 422, field, "must be %s %g and at most %g",
                          min_exclusive ? "greater than" : "at least", min, max);
    *out = d;
    return 0;
}

static int get_id(const cJSON *obj, const char *key, const char *field, int64_t max,
                  int64_t *out, foods_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return foods_fail(e, 422, field, "field required");
    double d = cJSON_IsNumber(v) ? v->valuedouble : 0.5;
    if (!cJSON_IsNumber(v) || !isfinite(d) ||
        (d > -9e15 && d < 9e15 && (double)(int64_t)d != d))
        return foods_fail(e, 422, field, "must be an integer");
    if (d < 1 || d > (double)max)
        return foods_fail(e, 422, field, "must be between 1 and %lld", (long long)max);
    *out = (int64_t)d;
    return 0;
}

int foods_food_from_json(const cJSON *j, const char *prefix, food_in *out, foods_err *e)
{
    char f[64];
    if (!cJSON_IsObject(j)) {
        snprintf(f, sizeof f, "%.*s", prefix && *prefix ? (int)strlen(prefix) - 1 : 0,
                 prefix ? prefix : "");
        return foods_fail(e, 422, f, "must be a JSON object");
    }
#define FIELD(name) (snprintf(f, sizeof f, "%s%s", prefix ? prefix : "", name), f)
    if (get_text(j, "name", FIELD("name"), &out->name, &out->name_len, e) < 0 ||
        get_id(j, "category_id", FIELD("category_id"), FOODS_CATEGORY_ID_MAX, &out->category_id,
               e) < 0 ||
        get_number(j, "kcal", FIELD("kcal"), 0, FOODS_KCAL_MAX, 0, &out->kcal, e) < 0 ||
        get_number(j, "protein", FIELD("protein"), 0, FOODS_MACRO_MAX, 0, &out->protein, e) < 0 ||
        get_number(j, "carbs", FIELD("carbs"), 0, FOODS_MACRO_MAX, 0, &out->carbs, e) < 0 ||
        get_number(j, "fat", FIELD("fat"), 0, FOODS_MACRO_MAX, 0, &out->fat, e) < 0)
        return -1;
#undef FIELD
    return 0;
}

int foods_template_from_json(const cJSON *j, const char **name, size_t *name_len,
                             template_item_in **items, int *nitems, foods_err *e)
{
    *items = NULL;
    *nitems = 0;
    if (!cJSON_IsObject(j))
        return foods_fail(e, 422, NULL, "must be a JSON object");
    if (get_text(j, "name", "name", name, name_len, e) < 0)
        return -1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "items");
    if (!arr)
        return foods_fail(e, 422, "items", "field required");
    if (!cJSON_IsArray(arr))
        return foods_fail(e, 422, "items", "must be an array");
    int n = cJSON_GetArraySize(arr);
    if (n < 1 || n > FOODS_TEMPLATE_ITEMS_MAX)
        return foods_fail(e, 422, "items", "must hold 1 to %d items", FOODS_TEMPLATE_ITEMS_MAX);
    template_item_in *out = malloc((size_t)n * sizeof *out);
    if (!out)
        return foods_fail(e, 500, NULL, "out of memory");
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        char f[64];
        if (!cJSON_IsObject(it)) {
            snprintf(f, sizeof f, "items[%d]", i);
            foods_fail(e, 422, f, "must be a JSON object");
            goto fail;
        }
        snprintf(f, sizeof f, "items[%d].food_id", i);
        if (get_id(it, "food_id", f, FOODS_ID_MAX, &out[i].food_id, e) < 0)
            goto fail;
        snprintf(f, sizeof f, "items[%d].grams", i);
        if (get_number(it, "grams", f, 0, FOODS_GRAMS_MAX, 1, &out[i].grams, e) < 0)
            goto fail;
        i++;
    }
    *items = out;
    *nitems = n;
    return 0;
fail:
    free(out);
    return -1;
}

int foods_parse_int(const char *p, size_t len, int64_t min, int64_t max, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (len > 0 && p[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == len || len - i > 19)
        return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return -1;
    int64_t s = neg ? -(int64_t)v : (int64_t)v;
    if (s < min || s > max)
        return -1;
    *out = s;
    return 0;
}
