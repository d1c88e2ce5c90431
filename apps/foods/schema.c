#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FOOD_COLS "id, name, category_id, kcal, protein, carbs, fat"
#define FOOD_INSERT "INSERT INTO foods (name, category_id, kcal, protein, carbs, fat) VALUES "
#define ROW "(?, ?, ?, ?, ?, ?)"
#define ROWS10 ROW ", " ROW ", " ROW ", " ROW ", " ROW ", " ROW ", " ROW ", " ROW ", " ROW ", " ROW
#define ROWS100 ROWS10 ", " ROWS10 ", " ROWS10 ", " ROWS10 ", " ROWS10 ", " ROWS10 ", " ROWS10 \
    ", " ROWS10 ", " ROWS10 ", " ROWS10

/* Case-insensitive substring search without LIKE (so '%' and '_' in the
 * query are plain characters). */
#define Q_SQLITE "instr(lower(name), lower(?)) > 0"
#define Q_PG "strpos(lower(name), lower(?)) > 0"
#define Q_MY "INSTR(LOWER(name), LOWER(?)) > 0"

const db_stmt_def foods_stmts[ST_COUNT] = {
    [ST_PING] = { .sql = "SELECT 1" },
    [ST_CATEGORIES] = { .sql = "SELECT id, name FROM categories ORDER BY id" },
    [ST_FOODS_LIST] = { .sql = "SELECT " FOOD_COLS " FROM foods ORDER BY id LIMIT ? OFFSET ?",
                        .nparams = 2 },
    [ST_FOODS_LIST_CAT] = { .sql = "SELECT " FOOD_COLS " FROM foods WHERE category_id = ?"
                                   " ORDER BY id LIMIT ? OFFSET ?",
                            .nparams = 3 },
    [ST_FOODS_LIST_Q] = { .sql = "SELECT " FOOD_COLS " FROM foods WHERE " Q_SQLITE
                                 " ORDER BY id LIMIT ? OFFSET ?",
                          .sql_pg = "SELECT " FOOD_COLS " FROM foods WHERE " Q_PG
                                    " ORDER BY id LIMIT ? OFFSET ?",
                          .sql_my = "SELECT " FOOD_COLS " FROM foods WHERE " Q_MY
                                    " ORDER BY id LIMIT ? OFFSET ?",
                          .nparams = 3 },
    [ST_FOODS_LIST_CAT_Q] = { .sql = "SELECT " FOOD_COLS " FROM foods WHERE category_id = ? AND "
                                     Q_SQLITE " ORDER BY id LIMIT ? OFFSET ?",
                              .sql_pg = "SELECT " FOOD_COLS " FROM foods WHERE category_id = ? AND "
                                        Q_PG " ORDER BY id LIMIT ? OFFSET ?",
                              .sql_my = "SELECT " FOOD_COLS " FROM foods WHERE category_id = ? AND "
                                        Q_MY " ORDER BY id LIMIT ? OFFSET ?",
                              .nparams = 4 },
    [ST_FOOD_GET] = { .sql = "SELECT " FOOD_COLS " FROM foods WHERE id = ?", .nparams = 1 },
    [ST_FOOD_INSERT] = { .sql = FOOD_INSERT ROW " RETURNING id",
                         .nparams = 6,
                         .flags = DB_WRITE },
    [ST_FOOD_UPDATE] = { .sql = "UPDATE foods SET name = ?, category_id = ?, kcal = ?, protein = ?,"
                                " carbs = ?, fat = ? WHERE id = ?",
                         .nparams = 7,
                         .flags = DB_WRITE },
    [ST_FOOD_DELETE] = { .sql = "DELETE FROM foods WHERE id = ?", .nparams = 1, .flags = DB_WRITE },
    [ST_TEMPLATES_LIST] = { .sql = "SELECT id, name FROM templates ORDER BY id LIMIT ? OFFSET ?",
                            .nparams = 2 },
    [ST_TEMPLATE_INSERT] = { .sql = "INSERT INTO templates (name) VALUES (?) RETURNING id",
                             .nparams = 1,
                             .flags = DB_WRITE },
    /* The id of the template inserted just before on this connection: the
     * items table has no generated key, so none of these moves on (SQLite:
     * it is WITHOUT ROWID). */
    [ST_TEMPLATE_ITEM_ADD] = {
        .sql = "INSERT INTO template_items (template_id, position, food_id, grams)"
               " VALUES (last_insert_rowid(), ?, ?, ?)",
        .sql_pg = "INSERT INTO template_items (template_id, position, food_id, grams)"
                  " VALUES (currval(pg_get_serial_sequence('templates', 'id')), ?, ?, ?)",
        .sql_my = "INSERT INTO template_items (template_id, position, food_id, grams)"
                  " VALUES (LAST_INSERT_ID(), ?, ?, ?)",
        .nparams = 3,
        .flags = DB_WRITE },
    /* One query: the template, its items, their foods and categories. */
    [ST_TEMPLATE_FULL] = {
        .sql = "SELECT t.id, t.name, i.position, i.grams, f.id, f.name, f.category_id, f.kcal,"
               " f.protein, f.carbs, f.fat, c.name"
               " FROM templates t"
               " LEFT JOIN template_items i ON i.template_id = t.id"
               " LEFT JOIN foods f ON f.id = i.food_id"
               " LEFT JOIN categories c ON c.id = f.category_id"
               " WHERE t.id = ? ORDER BY i.position",
        .nparams = 1 },
    [ST_CATEGORY_INSERT] = { .sql = "INSERT INTO categories (id, name) VALUES (?, ?)",
                             .nparams = 2,
                             .flags = DB_WRITE },
    [ST_COUNT_CATEGORIES] = { .sql = "SELECT COUNT(*) FROM categories" },
    [ST_COUNT_FOODS] = { .sql = "SELECT COUNT(*) FROM foods" },
    /* Bulk inserts go 100 and 10 rows a statement: one executor run instead
     * of 100. Every backend numbers the rows in VALUES order. */
    [ST_FOOD_INSERT_10] = { .sql = FOOD_INSERT ROWS10 " RETURNING id",
                            .nparams = 60,
                            .flags = DB_WRITE },
    [ST_FOOD_INSERT_100] = { .sql = FOOD_INSERT ROWS100 " RETURNING id",
                             .nparams = 600,
                             .flags = DB_WRITE },
};

static const char *const ddl_sqlite[] = {
    "CREATE TABLE IF NOT EXISTS categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS foods (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
    " category_id INTEGER NOT NULL REFERENCES categories(id), kcal REAL NOT NULL,"
    " protein REAL NOT NULL, carbs REAL NOT NULL, fat REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS foods_category ON foods(category_id)",
    "CREATE TABLE IF NOT EXISTS templates (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS template_items ("
    " template_id INTEGER NOT NULL REFERENCES templates(id) ON DELETE CASCADE,"
    " position INTEGER NOT NULL, food_id INTEGER NOT NULL REFERENCES foods(id),"
    " grams REAL NOT NULL, PRIMARY KEY (template_id, position)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS template_items_food ON template_items(food_id)",
    NULL,
};

static const char *const ddl_pg[] = {
    "CREATE TABLE IF NOT EXISTS categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS foods (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL,"
    " category_id INTEGER NOT NULL REFERENCES categories(id), kcal DOUBLE PRECISION NOT NULL,"
    " protein DOUBLE PRECISION NOT NULL, carbs DOUBLE PRECISION NOT NULL,"
    " fat DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS foods_category ON foods(category_id)",
    "CREATE TABLE IF NOT EXISTS templates (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS template_items ("
    " template_id BIGINT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,"
    " position INTEGER NOT NULL, food_id BIGINT NOT NULL REFERENCES foods(id),"
    " grams DOUBLE PRECISION NOT NULL, PRIMARY KEY (template_id, position))",
    "CREATE INDEX IF NOT EXISTS template_items_food ON template_items(food_id)",
    NULL,
};

/* utf8mb4_bin: names compare byte for byte; the search lower-cases both
 * sides explicitly, as on the other databases. */
#define MY_TABLE " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
static const char *const ddl_my[] = {
    "CREATE TABLE IF NOT EXISTS categories (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL UNIQUE)"
    MY_TABLE,
    "CREATE TABLE IF NOT EXISTS foods (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
    " name VARCHAR(200) NOT NULL, category_id INT NOT NULL, kcal DOUBLE NOT NULL,"
    " protein DOUBLE NOT NULL, carbs DOUBLE NOT NULL, fat DOUBLE NOT NULL,"
    " INDEX foods_category (category_id),"
    " FOREIGN KEY (category_id) REFERENCES categories(id))" MY_TABLE,
    "CREATE TABLE IF NOT EXISTS templates (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
    " name VARCHAR(200) NOT NULL)" MY_TABLE,
    "CREATE TABLE IF NOT EXISTS template_items (template_id BIGINT NOT NULL,"
    " position INT NOT NULL, food_id BIGINT NOT NULL, grams DOUBLE NOT NULL,"
    " PRIMARY KEY (template_id, position), INDEX template_items_food (food_id),"
    " FOREIGN KEY (template_id) REFERENCES templates(id) ON DELETE CASCADE,"
    " FOREIGN KEY (food_id) REFERENCES foods(id))" MY_TABLE,
    NULL,
};

const char *const foods_categories[FOODS_NCATEGORIES] = {
    "Fruits",      "Vegetables", "Grains",   "Dairy",   "Meat",
    "Fish & Seafood", "Legumes", "Nuts & Seeds", "Oils & Fats", "Beverages",
    "Sweets",      "Snacks",     "Bakery",   "Eggs",    "Herbs & Spices",
    "Sauces",      "Cereals",    "Soups",    "Fast Food", "Baby Food",
};

/* The sample data: the FastAPI peer (bench/peers/fastapi_foods.py) makes
 * the same rows from the same generator. Integer arithmetic only, so both
 * agree to the bit. */
static const char *const adjectives[16] = {
    "Fresh", "Organic", "Roasted", "Smoked", "Grilled", "Steamed", "Raw",    "Dried",
    "Frozen", "Baked",  "Spiced",  "Sweet",  "Salted",  "Crispy",  "Creamy", "Wild",
};
static const char *const bases[32] = {
    "Apple",     "Banana",    "Carrot",       "Broccoli", "Rice",      "Oats",
    "Yogurt",    "Cheese",    "Chicken",      "Beef",     "Salmon",    "Tuna",
    "Lentils",   "Chickpeas", "Almonds",      "Walnuts",  "Olive Oil", "Butter",
    "Orange Juice", "Coffee", "Chocolate",    "Crackers", "Bread",     "Egg",
    "Basil",     "Tomato Sauce", "Muesli",    "Soup",     "Burger",    "Purée",
    "Jalapeño",  "Crème Fraîche",
};
static const char *const meals[6] = { "Breakfast", "Lunch", "Dinner", "Snack", "Brunch", "Supper" };

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t count(db_conn *c, int stmt, char *err, size_t errlen)
{
    db_batch *b = db_batch_new(1);
    if (!b || db_batch_add(b, stmt, NULL, 0) < 0) {
        db_batch_free(b);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const db_result *r = db_run_sync(c, b);
    int64_t n = -1;
    if (db_result_status(r) != DB_OK)
        snprintf(err, errlen, "%s", db_result_error(r));
    else if (db_result_nrows(r, 0) == 1)
        n = db_as_int(&db_result_row(r, 0, 0)[0]);
    else
        snprintf(err, errlen, "count: no row");
    db_batch_free(b);
    return n;
}

static int run_batch(db_conn *c, db_batch *b, char *err, size_t errlen)
{
    const db_result *r = db_run_sync(c, b);
    if (db_result_status(r) != DB_OK) {
        snprintf(err, errlen, "%s", db_result_error(r));
        return -1;
    }
    return 0;
}

static int seed_data(db_conn *c, long n, char *err, size_t errlen)
{
    int rc = -1;
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    db_batch *b = db_batch_new((int)n);
    if (!ids || !b)
        goto oom;
    rng_state = 0x5EED;
    for (long i = 0; i < n; i++) {
        char name[128];
        const char *adj = adjectives[rng_next() % 16];
        const char *base = bases[rng_next() % 32];
        int len = snprintf(name, sizeof name, "%s %s %ld", adj, base, i + 1);
        int64_t cat = 1 + (int64_t)(rng_next() % FOODS_NCATEGORIES);
        int64_t total = (int64_t)(rng_next() % 1000); /* tenths of a gram of macros */
        int64_t a = (int64_t)(rng_next() % 101);
        int64_t bb = (int64_t)(rng_next() % (uint64_t)(101 - a));
        int64_t p = total * a / 100, cb = total * bb / 100, f = total - p - cb;
        int64_t kcal = 4 * p + 4 * cb + 9 * f;
        db_value v[6] = { db_text(name, (size_t)len), db_int(cat),       db_double(kcal / 10.0),
                          db_double(p / 10.0),         db_double(cb / 10.0), db_double(f / 10.0) };
        if (db_batch_add(b, ST_FOOD_INSERT, v, 6) < 0)
            goto oom;
    }
    const db_result *r = db_run_sync(c, b);
    if (db_result_status(r) != DB_OK) {
        snprintf(err, errlen, "seeding foods: %s", db_result_error(r));
        goto out;
    }
    for (long i = 0; i < n; i++)
        ids[i] = db_as_int(&db_result_row(r, (int)i, 0)[0]);
    db_batch_free(b);

    long ntemplates = n / 10 > 0 ? n / 10 : 1;
    b = db_batch_new((int)(ntemplates * 11));
    if (!b)
        goto oom;
    for (long t = 0; t < ntemplates; t++) {
        char name[64];
        int len = snprintf(name, sizeof name, "%s plan %ld", meals[rng_next() % 6], t + 1);
        db_value tv = db_text(name, (size_t)len);
        if (db_batch_add(b, ST_TEMPLATE_INSERT, &tv, 1) < 0)
            goto oom;
        int items = 5 + (int)(rng_next() % 11);
        for (int k = 0; k < items; k++) {
            int64_t food = ids[rng_next() % (uint64_t)n];
            int64_t grams = 10 * (1 + (int64_t)(rng_next() % 30));
            db_value iv[3] = { db_int(k + 1), db_int(food), db_double((double)grams) };
            if (db_batch_add(b, ST_TEMPLATE_ITEM_ADD, iv, 3) < 0)
                goto oom;
        }
    }
    if (run_batch(c, b, err, errlen) < 0)
        goto out;
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "out of memory");
out:
    db_batch_free(b);
    free(ids);
    return rc;
}

int foods_schema_setup(const db_config *cfg, long seed, char *err, size_t errlen)
{
    const char *const *ddl = cfg->kind == DB_POSTGRES ? ddl_pg
                             : cfg->kind == DB_MYSQL  ? ddl_my
                                                      : ddl_sqlite;
    db_conn *c = db_connect(cfg, err, errlen);
    if (!c)
        return -1;
    int rc = -1;
    for (int i = 0; ddl[i]; i++)
        if (db_exec(c, ddl[i], err, errlen) < 0)
            goto out;
    int64_t ncat = count(c, ST_COUNT_CATEGORIES, err, errlen);
    if (ncat < 0)
        goto out;
    if (ncat == 0) {
        db_batch *b = db_batch_new(FOODS_NCATEGORIES);
        if (!b)
            goto out;
        for (int i = 0; i < FOODS_NCATEGORIES; i++) {
            db_value v[2] = { db_int(i + 1), db_text(foods_categories[i], strlen(foods_categories[i])) };
            if (db_batch_add(b, ST_CATEGORY_INSERT, v, 2) < 0) {
                db_batch_free(b);
                snprintf(err, errlen, "out of memory");
                goto out;
            }
        }
        int brc = run_batch(c, b, err, errlen);
        db_batch_free(b);
        if (brc < 0)
            goto out;
    }
    if (seed > 0) {
        int64_t nfoods = count(c, ST_COUNT_FOODS, err, errlen);
        if (nfoods < 0)
            goto out;
        if (nfoods == 0 && seed_data(c, seed, err, errlen) < 0)
            goto out;
    }
    rc = 0;
out:
    db_close(c);
    return rc;
}
