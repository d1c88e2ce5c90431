/*
 * src/db: a small asynchronous database layer for brisk applications.
 *
 *   SQLite      sqlite:PATH            (embedded; WAL, synchronous=NORMAL)
 *   PostgreSQL  postgresql://...       (libpq, non-blocking, pipelined, on the worker loop)
 *   MariaDB     mysql://user:pass@host:port/db  or  mysql://user@/db?socket=/path
 *
 * MODEL. The application declares its statements once (db_stmt_def, '?'
 * placeholders, optional per-dialect SQL). Every worker opens a db_pool from
 * its brisk_on_worker hook: connections of its own (no lock is shared with
 * other workers), each with every statement prepared once. A request builds
 * a db_batch (statements + bound parameters; SQL is never built from input)
 * and hands it to db_run; the callback runs later on the same worker with a
 * db_result. A batch of more than one statement, or with a DB_WRITE
 * statement, runs in one transaction: all or nothing.
 *
 * WHERE THE WORK HAPPENS. PostgreSQL: the connection socket is watched by
 * the worker loop; queries are sent with the pipeline API, never waited for.
 * SQLite: read-only batches run on the loop (in-process, microseconds);
 * writes run on brisk_work's pool (BEGIN IMMEDIATE, busy_timeout).
 * MariaDB: batches run on brisk_work's pool on blocking connections owned by
 * the worker. The callback may run before db_run returns (SQLite reads, or
 * an immediate failure); the caller must not touch its request after db_run.
 *
 * FAILURES. A lost connection fails its batches with DB_EUNAVAILABLE and is
 * reopened in the background (PostgreSQL) or on next use (MariaDB); while
 * the database is down batches fail fast with DB_EUNAVAILABLE.
 */
#ifndef BRISK_DB_DB_H
#define BRISK_DB_DB_H

#include <brisk/brisk.h>

#include <stddef.h>
#include <stdint.h>

typedef enum { DB_SQLITE = 1, DB_POSTGRES = 2, DB_MYSQL = 3 } db_kind;

typedef enum {
    DB_OK = 0,
    DB_ECONSTRAINT,  /* a foreign key, unique, not-null or check constraint failed */
    DB_EUNAVAILABLE, /* no usable connection: the database is down or restarting */
    DB_EBUSY,        /* locked or timed out */
    DB_EINTERNAL,    /* anything else (bad SQL, out of memory, protocol error) */
} db_status;

typedef enum { DB_T_NULL = 0, DB_T_INT, DB_T_DOUBLE, DB_T_TEXT } db_type;

/* A parameter or a column value. Text is not NUL-terminated unless said. */
typedef struct {
    db_type type;
    union {
        int64_t i;
        double d;
        struct {
            const char *p;
            size_t len;
        } s;
    } v;
} db_value;

static inline db_value db_null(void) { return (db_value){ .type = DB_T_NULL }; }
static inline db_value db_int(int64_t i) { return (db_value){ .type = DB_T_INT, .v.i = i }; }
static inline db_value db_double(double d) { return (db_value){ .type = DB_T_DOUBLE, .v.d = d }; }
static inline db_value db_text(const char *p, size_t len)
{
    return (db_value){ .type = DB_T_TEXT, .v.s = { p, len } };
}

/* Column readers: convert between int and double; text is parsed when a
 * backend delivered a number as text; NULL reads as 0. */
int64_t db_as_int(const db_value *v);
double db_as_double(const db_value *v);

enum { DB_WRITE = 1 }; /* db_stmt_def.flags */
#define DB_MAX_PARAMS 640   /* parameters of one statement */

typedef struct {
    const char *sql;    /* '?' placeholders, used by every backend without an override */
    const char *sql_pg; /* PostgreSQL override (still '?'), or NULL */
    const char *sql_my; /* MariaDB/MySQL override, or NULL */
    int nparams;
    unsigned flags;
} db_stmt_def;

typedef struct {
    db_kind kind;
    char *target;             /* SQLite path, libpq conninfo (URL) or the MariaDB URL */
    int pool_size;            /* connections per worker; 0 = the backend's default */
    const db_stmt_def *stmts; /* the caller's table; must outlive every pool */
    int nstmts;
} db_config;

/* Parses a URL into cfg (kind and target; stmts and pool_size are the
 * caller's). Returns 0, or -1 with a message in err. */
int db_config_parse(db_config *cfg, const char *url, char *err, size_t errlen);
void db_config_free(db_config *cfg);
const char *db_kind_name(db_kind kind); /* "sqlite", "postgresql", "mysql" */

/* Once per process, before any thread uses a backend. */
void db_global_init(void);

/* ---- batches and results ------------------------------------------ */

typedef struct db_batch db_batch;
typedef struct db_result db_result;

/* A batch with room for statements; grows as needed. NULL on OOM. */
db_batch *db_batch_new(int nstmts_hint);
/* Adds statement `stmt` (an index into cfg->stmts) with its parameters
 * (copied, text included). Returns 0 or -1 (out of memory). */
int db_batch_add(db_batch *b, int stmt, const db_value *params, int nparams);
int db_batch_count(const db_batch *b);
void db_batch_free(db_batch *b);

db_status db_result_status(const db_result *r);
/* The statement that failed (index in the batch), or -1. */
int db_result_failed(const db_result *r);
const char *db_result_error(const db_result *r); /* for logs; "" when ok */
int db_result_nrows(const db_result *r, int stmt);
int db_result_ncols(const db_result *r, int stmt);
/* The ncols values of a row; valid until the callback returns. */
const db_value *db_result_row(const db_result *r, int stmt, int row);
/* Rows changed by statement `stmt` (rows matched, for updates). */
int64_t db_result_affected(const db_result *r, int stmt);

/* ---- on a worker: asynchronous ------------------------------------- */

typedef struct db_pool db_pool;
typedef void (*db_cb)(const db_result *r, void *udata);

/* Opens the worker's pool (from the brisk_on_worker hook, on that worker).
 * Connections are made in the background; NULL only when out of memory. */
db_pool *db_pool_open(const db_config *cfg, brisk_loop *loop);
/* Closes it (the hook with start = 0); no batch may be in flight. */
void db_pool_close(db_pool *p);

/* Runs batch b (db_run takes it and frees it after cb returns) for the
 * response res, then cb(result, udata) on this worker. */
void db_run(db_pool *p, db_batch *b, brisk_res *res, db_cb cb, void *udata);

/* ---- anywhere: blocking (startup, schema, seeding, tests) ---------- */

typedef struct db_conn db_conn;

db_conn *db_connect(const db_config *cfg, char *err, size_t errlen);
/* Runs one SQL statement without parameters (DDL). 0, or -1 with err. */
int db_exec(db_conn *c, const char *sql, char *err, size_t errlen);
/* Runs the batch and returns its result, owned by b (db_batch_free). */
const db_result *db_run_sync(db_conn *c, db_batch *b);
void db_close(db_conn *c);

#endif
