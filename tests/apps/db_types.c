/* Prints what src/db returns for columns of many types, each statement run
 * three times on one connection (PostgreSQL: the first run in text, the
 * later ones in binary when every column allows it). Used by
 * tests/integration/foods/test_db_types.py. Usage: db_types URL */
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>

static const db_stmt_def stmts[] = {
    /* every column decodable in binary */
    { .sql = "SELECT CAST(1 = 1 AS BOOLEAN), CAST(2 AS SMALLINT), CAST(-3 AS INTEGER),"
             " CAST(9007199254740993 AS BIGINT), CAST(0.1 AS DOUBLE PRECISION),"
             " CAST('x' AS TEXT), CAST('ab' AS VARCHAR(5)), CAST(NULL AS INTEGER), CAST(? AS TEXT)",
      .sql_pg = "SELECT true, 2::int2, -3::int4, 9007199254740993::int8, 0.1::float8,"
                " 'x'::text, 'ab'::varchar, NULL::int4, ?::text",
      .sql_my = "SELECT 1 = 1, 2, -3, 9007199254740993, 0.1e0, 'x', 'ab', NULL, ?",
      .nparams = 1 },
    /* columns that keep a statement in text on PostgreSQL: real (its text
     * "0.1" is not the double of the binary 0.1f), numeric, date */
    { .sql = "SELECT CAST(7 AS INTEGER), CAST(0.1 AS REAL), CAST(1.25 AS NUMERIC(5,2))",
      .sql_pg = "SELECT 7::int4, 0.1::float4, 1.25::numeric, '2020-01-02'::date",
      .sql_my = "SELECT 7, 0.1e0, 1.25e0" },
};

static void print_value(const db_value *v)
{
    switch (v->type) {
    case DB_T_NULL: printf(" null"); break;
    case DB_T_INT: printf(" i:%lld", (long long)v->v.i); break;
    case DB_T_DOUBLE: printf(" d:%.17g", v->v.d); break;
    case DB_T_TEXT: printf(" t:%.*s", (int)v->v.s.len, v->v.s.p); break;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: db_types URL\n");
        return 2;
    }
    db_global_init();
    db_config cfg = { 0 };
    char err[256];
    if (db_config_parse(&cfg, argv[1], err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    cfg.stmts = stmts;
    cfg.nstmts = 2;
    db_conn *c = db_connect(&cfg, err, sizeof err);
    if (!c) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = 0;
    for (int s = 0; s < 2; s++) {
        for (int run = 0; run < 3; run++) {
            db_batch *b = db_batch_new(1);
            db_value p = db_text("h\xc3\xa9\"llo", 7);
            if (!b || db_batch_add(b, s, &p, stmts[s].nparams) < 0)
                return 1;
            const db_result *r = db_run_sync(c, b);
            if (db_result_status(r) != DB_OK) {
                printf("stmt %d run %d: error %s\n", s, run, db_result_error(r));
                rc = 1;
            } else {
                printf("stmt %d:", s);
                for (int j = 0; j < db_result_ncols(r, 0); j++)
                    print_value(&db_result_row(r, 0, 0)[j]);
                printf("\n");
            }
            db_batch_free(b);
        }
    }
    db_close(c);
    db_config_free(&cfg);
    return rc;
}
