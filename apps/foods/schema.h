/* brisk-foods: the schema (per SQL dialect), every statement the app runs,
 * and the deterministic sample data of --seed N. */
#ifndef BRISK_FOODS_SCHEMA_H
#define BRISK_FOODS_SCHEMA_H

#include "db/db.h"

enum foods_stmt {
    ST_PING,
    ST_CATEGORIES,
    ST_FOODS_LIST,
    ST_FOODS_LIST_CAT,
    ST_FOODS_LIST_Q,
    ST_FOODS_LIST_CAT_Q,
    ST_FOOD_GET,
    ST_FOOD_INSERT,
    ST_FOOD_UPDATE,
    ST_FOOD_DELETE,
    ST_TEMPLATES_LIST,
    ST_TEMPLATE_INSERT,
    ST_TEMPLATE_ITEM_ADD, /* to the template inserted just before, same batch */
    ST_TEMPLATE_FULL,
    ST_CATEGORY_INSERT,
    ST_COUNT_CATEGORIES,
    ST_COUNT_FOODS,
    ST_FOOD_INSERT_10,  /* ST_FOOD_INSERT with 10 rows: 60 parameters */
    ST_FOOD_INSERT_100, /* 100 rows: 600 parameters */
    ST_COUNT,
};

extern const db_stmt_def foods_stmts[ST_COUNT];

/* The columns of a food row, in the order every food query returns them. */
enum { FC_ID, FC_NAME, FC_CATEGORY, FC_KCAL, FC_PROTEIN, FC_CARBS, FC_FAT, FC_N };

#define FOODS_NCATEGORIES 20
extern const char *const foods_categories[FOODS_NCATEGORIES];

/* Creates the schema if missing, the categories if there are none, and
 * with seed > 0 and no foods yet, `seed` foods and seed/10 (at least one)
 * templates of 5-15 items. Blocking; at startup. 0 or -1 with err. */
int foods_schema_setup(const db_config *cfg, long seed, char *err, size_t errlen);

#endif
