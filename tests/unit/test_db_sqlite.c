/* Unit tests for src/db through its blocking face on SQLite: URL parsing,
 * placeholder rewriting, bound parameters, result types, all-or-nothing
 * batches; and brisk-foods' schema and deterministic seed (schema.c is
 * compiled in). Each test works in its own temporary directory. */
#include "db/db_internal.h"
#include "schema.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct {
    char dir[64];
    char url[128];
} tmpdb;

static int setup_tmp(void **state)
{
    tmpdb *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    snprintf(t->dir, sizeof t->dir, "/tmp/brisk-db-XXXXXX");
    if (!mkdtemp(t->dir)) {
        free(t);
        return -1;
    }
    snprintf(t->url, sizeof t->url, "sqlite:%s/test.db", t->dir);
    *state = t;
    return 0;
}

static int teardown_tmp(void **state)
{
    tmpdb *t = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    if (system(cmd) != 0)
        return -1;
    free(t);
    return 0;
}

static void test_config_parse(void **state)
{
    db_config c = { 0 };
    char err[256];
    assert_int_equal(db_config_parse(&c, "sqlite:foods.db", err, sizeof err), 0);
    assert_int_equal(c.kind, DB_SQLITE);
    assert_string_equal(c.target, "foods.db");
    db_config_free(&c);
    assert_int_equal(db_config_parse(&c, "sqlite:///tmp/x.db", err, sizeof err), 0);
    assert_string_equal(c.target, "/tmp/x.db");
    db_config_free(&c);
    assert_int_equal(db_config_parse(&c, "postgresql://u:p@127.0.0.1:5432/db", err, sizeof err), 0);
    assert_int_equal(c.kind, DB_POSTGRES);
    assert_string_equal(c.target, "postgresql://u:p@127.0.0.1:5432/db");
    db_config_free(&c);
    assert_int_equal(db_config_parse(&c, "postgres://h/db", err, sizeof err), 0);
    assert_int_equal(c.kind, DB_POSTGRES);
    db_config_free(&c);
    assert_int_equal(db_config_parse(&c, "mysql://root@/db?socket=/tmp/s", err, sizeof err), 0);
    assert_int_equal(c.kind, DB_MYSQL);
    db_config_free(&c);
    assert_int_equal(db_config_parse(&c, "sqlite:", err, sizeof err), -1);
    assert_non_null(strstr(err, "without a path"));
    assert_int_equal(db_config_parse(&c, "oracle://x", err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown database URL"));
    assert_string_equal(db_kind_name(DB_MYSQL), "mysql");
}

static void test_dollar_placeholders(void **state)
{
    char *s = db_sql_dollar("SELECT ?, '?', \"?\" FROM t WHERE a = ? AND b = 'it''s ?' AND c = ?");
    assert_non_null(s);
    assert_string_equal(s, "SELECT $1, '?', \"?\" FROM t WHERE a = $2 AND b = 'it''s ?' AND c = $3");
    free(s);
    s = db_sql_dollar("SELECT 1");
    assert_string_equal(s, "SELECT 1");
    free(s);
}

static void test_values(void **state)
{
    db_value v = db_text("42", 2);
    assert_int_equal(db_as_int(&v), 42);
    v = db_double(2.75);
    assert_int_equal(db_as_int(&v), 2);
    assert_true(db_as_double(&v) == 2.75);
    v = db_int(7);
    assert_true(db_as_double(&v) == 7.0);
    v = db_null();
    assert_int_equal(db_as_int(&v), 0);
}

enum { T_INSERT, T_SELECT, T_COUNT, T_DELETE_ALL, T_N };
static const db_stmt_def test_stmts[T_N] = {
    [T_INSERT] = { .sql = "INSERT INTO t (name, x) VALUES (?, ?) RETURNING id, name, x",
                   .nparams = 2,
                   .flags = DB_WRITE },
    [T_SELECT] = { .sql = "SELECT id, name, x, NULL FROM t WHERE name = ?", .nparams = 1 },
    [T_COUNT] = { .sql = "SELECT COUNT(*) FROM t" },
    [T_DELETE_ALL] = { .sql = "DELETE FROM t", .flags = DB_WRITE },
};

static db_conn *open_test_db(tmpdb *t, db_config *cfg)
{
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    assert_int_equal(db_config_parse(cfg, t->url, err, sizeof err), 0);
    cfg->stmts = test_stmts;
    cfg->nstmts = T_N;
    db_conn *c = db_connect(cfg, err, sizeof err);
    if (!c)
        fail_msg("connect: %s", err);
    if (db_exec(c, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                   " name TEXT NOT NULL UNIQUE, x REAL)",
                err, sizeof err) < 0)
        fail_msg("exec: %s", err);
    return c;
}

static int64_t count_rows(db_conn *c)
{
    db_batch *b = db_batch_new(1);
    assert_int_equal(db_batch_add(b, T_COUNT, NULL, 0), 0);
    const db_result *r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_OK);
    int64_t n = db_as_int(&db_result_row(r, 0, 0)[0]);
    db_batch_free(b);
    return n;
}

static void test_bound_parameters_round_trip(void **state)
{
    db_config cfg;
    db_conn *c = open_test_db(*state, &cfg);
    /* Quotes, SQL and a NUL byte: bound, stored and returned verbatim. */
    static const char nasty[] = "Robert'); DROP TABLE t;--\0\"é";
    db_batch *b = db_batch_new(1);
    db_value p[2] = { db_text(nasty, sizeof nasty - 1), db_double(1.5) };
    assert_int_equal(db_batch_add(b, T_INSERT, p, 2), 0);
    const db_result *r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_OK);
    assert_int_equal(db_result_nrows(r, 0), 1);
    assert_int_equal(db_result_ncols(r, 0), 3);
    assert_int_equal(db_result_affected(r, 0), 1);
    const db_value *row = db_result_row(r, 0, 0);
    assert_int_equal(row[0].type, DB_T_INT);
    assert_int_equal(row[0].v.i, 1);
    assert_int_equal(row[1].type, DB_T_TEXT);
    assert_int_equal(row[1].v.s.len, sizeof nasty - 1);
    assert_memory_equal(row[1].v.s.p, nasty, sizeof nasty - 1);
    assert_int_equal(row[2].type, DB_T_DOUBLE);
    assert_true(row[2].v.d == 1.5);
    assert_null(db_result_row(r, 0, 1));
    db_batch_free(b);

    b = db_batch_new(0);
    assert_int_equal(db_batch_add(b, T_SELECT, p, 1), 0);
    r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_OK);
    assert_int_equal(db_result_nrows(r, 0), 1);
    row = db_result_row(r, 0, 0);
    assert_memory_equal(row[1].v.s.p, nasty, sizeof nasty - 1);
    assert_int_equal(row[3].type, DB_T_NULL);
    db_batch_free(b);
    assert_int_equal(count_rows(c), 1);
    db_close(c);
    db_config_free(&cfg);
}

static void test_batch_is_all_or_nothing(void **state)
{
    db_config cfg;
    db_conn *c = open_test_db(*state, &cfg);
    db_batch *b = db_batch_new(2); /* grows past the hint */
    char name[16];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "n%d", i);
        db_value p[2] = { db_text(name, strlen(name)), db_int(i) };
        assert_int_equal(db_batch_add(b, T_INSERT, p, 2), 0);
    }
    db_value dup[2] = { db_text("n7", 2), db_null() }; /* UNIQUE violation */
    assert_int_equal(db_batch_add(b, T_INSERT, dup, 2), 0);
    assert_int_equal(db_batch_count(b), 51);
    const db_result *r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_ECONSTRAINT);
    assert_int_equal(db_result_failed(r), 50);
    assert_non_null(strstr(db_result_error(r), "UNIQUE"));
    db_batch_free(b);
    assert_int_equal(count_rows(c), 0); /* rolled back */

    /* The connection is usable after the rollback; ids follow on. */
    b = db_batch_new(1);
    db_value p[2] = { db_text("ok", 2), db_int(1) };
    assert_int_equal(db_batch_add(b, T_INSERT, p, 2), 0);
    r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_OK);
    db_batch_free(b);
    assert_int_equal(count_rows(c), 1);

    /* A wrong parameter count is refused before running. */
    b = db_batch_new(1);
    assert_int_equal(db_batch_add(b, T_INSERT, p, 1), 0);
    r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_EINTERNAL);
    db_batch_free(b);
    db_close(c);
    db_config_free(&cfg);
}

static void test_connect_failure(void **state)
{
    tmpdb *t = *state;
    db_config cfg = { 0 };
    char err[256], url[160];
    snprintf(url, sizeof url, "sqlite:%s/no/such/dir/x.db", t->dir);
    assert_int_equal(db_config_parse(&cfg, url, err, sizeof err), 0);
    cfg.stmts = test_stmts;
    cfg.nstmts = T_N;
    assert_null(db_connect(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
    db_config_free(&cfg);
}

/* ---- brisk-foods schema and seed ---------------------------------------- */

enum { D_FOODS, D_ITEMS, D_TEMPLATES, D_N };
static const db_stmt_def dump_stmts[D_N] = {
    [D_FOODS] = { .sql = "SELECT id, name, category_id, kcal, protein, carbs, fat FROM foods ORDER BY id" },
    [D_ITEMS] = { .sql = "SELECT template_id, position, food_id, grams FROM template_items"
                         " ORDER BY template_id, position" },
    [D_TEMPLATES] = { .sql = "SELECT id, name FROM templates ORDER BY id" },
};

/* Every row of the seeded tables as text, for comparison. */
static char *dump(const char *url)
{
    db_config cfg = { 0 };
    char err[256];
    assert_int_equal(db_config_parse(&cfg, url, err, sizeof err), 0);
    cfg.stmts = dump_stmts;
    cfg.nstmts = D_N;
    db_conn *c = db_connect(&cfg, err, sizeof err);
    assert_non_null(c);
    db_batch *b = db_batch_new(3);
    for (int i = 0; i < D_N; i++)
        assert_int_equal(db_batch_add(b, i, NULL, 0), 0);
    const db_result *r = db_run_sync(c, b);
    assert_int_equal(db_result_status(r), DB_OK);
    size_t cap = 1 << 20, len = 0;
    char *out = malloc(cap);
    for (int s = 0; s < D_N; s++) {
        for (int i = 0; i < db_result_nrows(r, s); i++) {
            const db_value *row = db_result_row(r, s, i);
            for (int k = 0; k < db_result_ncols(r, s); k++) {
                const db_value *v = &row[k];
                if (v->type == DB_T_TEXT)
                    len += (size_t)snprintf(out + len, cap - len, "%s|", v->v.s.p);
                else if (v->type == DB_T_DOUBLE)
                    len += (size_t)snprintf(out + len, cap - len, "%.17g|", v->v.d);
                else
                    len += (size_t)snprintf(out + len, cap - len, "%lld|", (long long)db_as_int(v));
            }
            len += (size_t)snprintf(out + len, cap - len, "\n");
            assert_true(len < cap - 256);
        }
    }
    db_batch_free(b);
    db_close(c);
    db_config_free(&cfg);
    return out;
}

static void test_foods_seed_is_deterministic(void **state)
{
    tmpdb *t = *state;
    db_config cfg = { 0 };
    char err[256], url2[160];
    assert_int_equal(db_config_parse(&cfg, t->url, err, sizeof err), 0);
    cfg.stmts = foods_stmts;
    cfg.nstmts = ST_COUNT;
    if (foods_schema_setup(&cfg, 50, err, sizeof err) < 0)
        fail_msg("setup: %s", err);
    db_config_free(&cfg);
    char *a = dump(t->url);

    snprintf(url2, sizeof url2, "sqlite:%s/other.db", t->dir);
    assert_int_equal(db_config_parse(&cfg, url2, err, sizeof err), 0);
    cfg.stmts = foods_stmts;
    cfg.nstmts = ST_COUNT;
    assert_int_equal(foods_schema_setup(&cfg, 50, err, sizeof err), 0);
    /* A second start with --seed on a populated database adds nothing. */
    assert_int_equal(foods_schema_setup(&cfg, 50, err, sizeof err), 0);
    db_config_free(&cfg);
    char *b = dump(url2);
    assert_string_equal(a, b);

    /* 50 foods, 5 templates of 5..15 items each, items numbered 1..n and
     * attached to the template inserted just before them. */
    int foods_rows = 0, items = 0, templates = 0;
    int per_template[6] = { 0 };
    for (char *line = strtok(a, "\n"); line; line = strtok(NULL, "\n")) {
        int bars = 0;
        for (char *p = line; *p; p++)
            bars += *p == '|';
        if (bars == 7) {
            foods_rows++;
        } else if (bars == 4) {
            long tid, pos;
            assert_int_equal(sscanf(line, "%ld|%ld|", &tid, &pos), 2);
            assert_true(tid >= 1 && tid <= 5);
            per_template[tid]++;
            assert_int_equal(pos, per_template[tid]);
            items++;
        } else if (bars == 2) {
            templates++;
            assert_non_null(strstr(line, " plan "));
        }
    }
    assert_int_equal(foods_rows, 50);
    assert_int_equal(templates, 5);
    for (int i = 1; i <= 5; i++)
        assert_true(per_template[i] >= 5 && per_template[i] <= 15);
    assert_true(items >= 25);
    /* The first food of the generator (the FastAPI peer makes the same). */
    assert_memory_equal(b, "1|Grilled Crackers 1|12|88.299999999999997|13.9", 47);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_parse),
        cmocka_unit_test(test_dollar_placeholders),
        cmocka_unit_test(test_values),
        cmocka_unit_test_setup_teardown(test_bound_parameters_round_trip, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_batch_is_all_or_nothing, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_connect_failure, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_foods_seed_is_deterministic, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
