/* SQLite backend: one sqlite3 handle per connection, each statement
 * prepared on first use and kept (SQLITE_PREPARE_PERSISTENT). WAL lets the
 * loop's read connection run while a pool thread writes; writes take the
 * lock up front (BEGIN IMMEDIATE) so they wait in busy_timeout instead of
 * failing half way. */
#include "db/db_internal.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_TIMEOUT_MS 5000

/* SQLite runs one write transaction at a time per file. Writers of this
 * process (every worker's pool connections) queue here, blocked, instead of
 * polling in the busy handler; busy_timeout still covers other processes.
 * Off the request path: only pool threads running writes take it. */
static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;

enum { TX_BEGIN, TX_BEGIN_IMMEDIATE, TX_COMMIT, TX_ROLLBACK, TX_N };
static const char *const tx_sql[TX_N] = { "BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK" };

typedef struct {
    sqlite3 *db;
    int n;
    sqlite3_stmt **stmts; /* cfg->nstmts, prepared lazily */
    sqlite3_stmt *tx[TX_N];
} sq_conn;

static void sq_close(void *p)
{
    sq_conn *c = p;
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        sqlite3_finalize(c->stmts[i]);
    for (int i = 0; i < TX_N; i++)
        sqlite3_finalize(c->tx[i]);
    sqlite3_close_v2(c->db);
    free(c->stmts);
    free(c);
}

static void *sq_open(const db_config *cfg, char *err, size_t errlen)
{
    sq_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->n = cfg->nstmts;
    c->stmts = calloc((size_t)(c->n ? c->n : 1), sizeof *c->stmts);
    if (!c->stmts) {
        snprintf(err, errlen, "out of memory");
        free(c);
        return NULL;
    }
    /* NOMUTEX: a connection is used by one thread at a time (the loop, or
     * the pool thread that holds it). */
    int rc = sqlite3_open_v2(cfg->target, &c->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: cannot open %s: %s", cfg->target,
                 c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
    static const char pragmas[] = "PRAGMA journal_mode=WAL;"
                                  "PRAGMA synchronous=NORMAL;"
                                  "PRAGMA foreign_keys=ON;"
                                  "PRAGMA temp_store=MEMORY;"
                                  "PRAGMA mmap_size=268435456;";
    char *msg = NULL;
    if (sqlite3_exec(c->db, pragmas, NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: %s: %s", cfg->target, msg ? msg : "pragma failed");
        sqlite3_free(msg);
        goto fail;
    }
    for (int i = 0; i < TX_N; i++) {
        if (sqlite3_prepare_v3(c->db, tx_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &c->tx[i], NULL) !=
            SQLITE_OK) {
            snprintf(err, errlen, "sqlite: %s", sqlite3_errmsg(c->db));
            goto fail;
        }
    }
    return c;
fail:
    sq_close(c);
    return NULL;
}

static int sq_exec(void *p, const char *sql, char *err, size_t errlen)
{
    sq_conn *c = p;
    char *msg = NULL;
    if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "sqlite: %s", msg ? msg : sqlite3_errmsg(c->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static db_status classify(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_CONSTRAINT: return DB_ECONSTRAINT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return DB_EBUSY;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL: return DB_EUNAVAILABLE;
    default: return DB_EINTERNAL;
    }
}

static int step_simple(sq_conn *c, int which)
{
    sqlite3_stmt *st = c->tx[which];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int bind_params(sqlite3_stmt *st, const db_value *v, int n)
{
    for (int i = 0; i < n; i++) {
        int rc;
        switch (v[i].type) {
        case DB_T_INT: rc = sqlite3_bind_int64(st, i + 1, v[i].v.i); break;
        case DB_T_DOUBLE: rc = sqlite3_bind_double(st, i + 1, v[i].v.d); break;
        case DB_T_TEXT:
            /* The batch owns the text until it completes. */
            rc = sqlite3_bind_text64(st, i + 1, v[i].v.s.p, v[i].v.s.len, SQLITE_STATIC, SQLITE_UTF8);
            break;
        default: rc = sqlite3_bind_null(st, i + 1); break;
        }
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* Runs one statement, appending its rows to set k. SQLITE_OK or an error. */
static int run_stmt(sq_conn *c, sqlite3_stmt *st, db_result *r, int k)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int ncols = sqlite3_column_count(st);
        db_value *row = db_result_push_row(r, k, ncols);
        if (!row)
            return SQLITE_NOMEM;
        for (int j = 0; j < ncols; j++) {
            switch (sqlite3_column_type(st, j)) {
            case SQLITE_INTEGER: row[j] = db_int(sqlite3_column_int64(st, j)); break;
            case SQLITE_FLOAT: row[j] = db_double(sqlite3_column_double(st, j)); break;
            case SQLITE_NULL: row[j] = db_null(); break;
            default: {
                const char *t = (const char *)sqlite3_column_text(st, j);
                size_t len = (size_t)sqlite3_column_bytes(st, j);
                const char *copy = db_result_copy(r, t ? t : "", t ? len : 0);
                if (!copy)
                    return SQLITE_NOMEM;
                row[j] = db_text(copy, t ? len : 0);
            }
            }
        }
    }
    if (rc != SQLITE_DONE)
        return rc;
    r->sets[k].affected = sqlite3_changes64(c->db);
    return SQLITE_OK;
}

static int run_batch(sq_conn *c, const db_config *cfg, db_batch *b);

static int sq_run(void *p, const db_config *cfg, db_batch *b)
{
    if (!b->write)
        return run_batch(p, cfg, b);
    pthread_mutex_lock(&write_mu);
    int rc = run_batch(p, cfg, b);
    pthread_mutex_unlock(&write_mu);
    return rc;
}

static int run_batch(sq_conn *c, const db_config *cfg, db_batch *b)
{
    db_result *r = &b->result;
    if (db_result_begin(r, b->nitems) < 0) {
        db_result_fail(r, DB_EINTERNAL, -1, "out of memory");
        return 0;
    }
    int tx = b->nitems > 1 || b->write;
    int rc;
    if (tx && (rc = step_simple(c, b->write ? TX_BEGIN_IMMEDIATE : TX_BEGIN)) != SQLITE_OK) {
        db_result_fail(r, classify(rc), -1, "sqlite: begin: %s", sqlite3_errmsg(c->db));
        return 0;
    }
    for (int k = 0; k < b->nitems; k++) {
        const db_item *it = &b->items[k];
        sqlite3_stmt *st = c->stmts[it->stmt];
        if (!st) {
            rc = sqlite3_prepare_v3(c->db, db_stmt_sql(cfg, it->stmt), -1,
                                    SQLITE_PREPARE_PERSISTENT, &c->stmts[it->stmt], NULL);
            if (rc != SQLITE_OK) {
                db_result_fail(r, DB_EINTERNAL, k, "sqlite: prepare %d: %s", it->stmt,
                               sqlite3_errmsg(c->db));
                break;
            }
            st = c->stmts[it->stmt];
        }
        rc = bind_params(st, &b->params[it->first], it->nparams);
        if (rc == SQLITE_OK)
            rc = run_stmt(c, st, r, k);
        if (rc != SQLITE_OK) {
            db_result_fail(r, classify(rc), k, "sqlite: %s", sqlite3_errmsg(c->db));
            sqlite3_reset(st);
            break;
        }
        sqlite3_reset(st);
    }
    if (!tx)
        return 0;
    if (r->status == DB_OK && (rc = step_simple(c, TX_COMMIT)) != SQLITE_OK)
        db_result_fail(r, classify(rc), -1, "sqlite: commit: %s", sqlite3_errmsg(c->db));
    if (r->status != DB_OK && !sqlite3_get_autocommit(c->db))
        step_simple(c, TX_ROLLBACK);
    return 0;
}

static int sq_broken(void *p)
{
    (void)p;
    return 0;
}

const db_backend db_sqlite_backend = {
    .open = sq_open,
    .exec = sq_exec,
    .run = sq_run,
    .broken = sq_broken,
    .close = sq_close,
    .default_pool = 1, /* one writer at a time anyway */
    .reads_on_loop = 1,
};
