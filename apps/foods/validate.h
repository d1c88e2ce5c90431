/* Input checks for brisk-foods: request bodies (JSON, via cJSON) and query
 * and path parameters. Every failure fills a foods_err: the HTTP status,
 * a short message and the offending field ("" when the whole body is at
 * fault), which the handlers send as {"error": ..., "field": ...}. */
#ifndef BRISK_FOODS_VALIDATE_H
#define BRISK_FOODS_VALIDATE_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Limits: the API's contract (the OpenAPI document repeats them). */
#define FOODS_NAME_MAX 200       /* characters */
#define FOODS_Q_MAX 100          /* characters */
#define FOODS_KCAL_MAX 900.0     /* per 100 g */
#define FOODS_MACRO_MAX 100.0    /* g per 100 g */
#define FOODS_GRAMS_MAX 10000.0
#define FOODS_ID_MAX 9007199254740991LL /* 2^53 - 1: exact in every JSON reader */
#define FOODS_CATEGORY_ID_MAX 2147483647LL
#define FOODS_LIMIT_MAX 100
#define FOODS_LIMIT_DEFAULT 20
#define FOODS_OFFSET_MAX 1000000000LL
#define FOODS_TEMPLATES_LIMIT_MAX 1000
#define FOODS_TEMPLATES_LIMIT_DEFAULT 100
#define FOODS_BULK_MAX 1000
#define FOODS_TEMPLATE_ITEMS_MAX 100

typedef struct {
    int status;
    char error[160];
    char field[64];
} foods_err;

typedef struct {
    const char *name; /* points into the cJSON tree */
    size_t name_len;
    int64_t category_id;
    double kcal, protein, carbs, fat;
} food_in;

typedef struct {
    int64_t food_id;
    double grams;
} template_item_in;

/* Fills e and returns -1 (for `return foods_fail(...)`). */
int foods_fail(foods_err *e, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks the raw body (valid UTF-8; no raw control characters and no
 * \u0000 inside strings) and parses it. NULL with e filled (400). */
cJSON *foods_parse_json(const char *body, size_t len, foods_err *e);

/* A food object; field names in errors get prefix ("[3]." for bulk). */
int foods_food_from_json(const cJSON *j, const char *prefix, food_in *out, foods_err *e);

/* A template: name and 1..FOODS_TEMPLATE_ITEMS_MAX items; items is
 * malloc'd (caller frees). */
int foods_template_from_json(const cJSON *j, const char **name, size_t *name_len,
                             template_item_in **items, int *nitems, foods_err *e);

/* A decimal integer in [min, max] (optional '-', digits only). 0 or -1. */
int foods_parse_int(const char *p, size_t len, int64_t min, int64_t max, int64_t *out);

/* A free-text name: 1..max characters of valid UTF-8, no control chars.
 * 0 or -1 with e (422) naming field. */
int foods_check_text(const char *p, size_t len, size_t max, const char *field, foods_err *e);

#endif
