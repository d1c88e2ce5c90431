/* Internals shared by the db layer and its backends (not for apps). */
#ifndef BRISK_DB_INTERNAL_H
#define BRISK_DB_INTERNAL_H

#include "db/db.h"

#include <stdarg.h>

/* Bump allocator for copied text and result values; freed as a whole. */
typedef struct db_chunk db_chunk;
typedef struct {
    db_chunk *head;
} db_arena;

void *db_arena_alloc(db_arena *a, size_t n); /* 8-byte aligned; NULL on OOM */
void db_arena_free(db_arena *a);

typedef struct {
    int nrows, cap;
    int ncols;
    int64_t affected;
    db_value *vals; /* nrows * ncols, malloc'd */
} db_rowset;

struct db_result {
    db_status status;
    int failed; /* statement index, -1 */
    char err[256];
    int nsets;
    db_rowset *sets;
    db_arena arena; /* text of result values */
};

typedef struct {
    int stmt;
    int nparams;
    int first; /* index of its first parameter in db_batch.params */
} db_item;

struct db_batch {
    db_item *items;
    int nitems, cap_items;
    db_value *params; /* text copied into `text`, NUL-terminated */
    int nparams, cap_params;
    db_arena text;
    db_result result;

    /* Run state, set by db_run. */
    db_batch *next;
    db_pool *pool;
    brisk_res *res;
    db_cb cb;
    void *udata;
    int write; /* has a DB_WRITE statement */
    int conn;  /* blocking engine: the connection it holds */
    int internal; /* PostgreSQL: the prepare batch of a new connection */
    uint64_t since; /* PostgreSQL: loop time when it was queued, ms */
    int cur, got; /* PostgreSQL: result position while reading */
};

/* A backend's blocking face: used at startup, by the tests, and by the
 * worker-pool engine (SQLite writes, MariaDB). */
typedef struct {
    void *(*open)(const db_config *cfg, char *err, size_t errlen);
    int (*exec)(void *conn, const char *sql, char *err, size_t errlen);
    /* Runs b (in a transaction when b has several statements or a write)
     * and fills b->result. Returns 1 when the connection turned out dead
     * before anything could have run (so a new connection may retry it),
     * else 0. */
    int (*run)(void *conn, const db_config *cfg, db_batch *b);
    /* 1 when the connection was lost and must be reopened. */
    int (*broken)(void *conn);
    void (*close)(void *conn);
    int default_pool;
    int reads_on_loop; /* read-only batches may run on the worker loop */
    /* An asynchronous engine on the worker loop instead of the pool. */
    void *(*async_open)(db_pool *p, const db_config *cfg, brisk_loop *loop);
    void (*async_submit)(void *engine, db_batch *b);
    void (*async_close)(void *engine);
} db_backend;

extern const db_backend db_sqlite_backend;
extern const db_backend db_pg_backend;
extern const db_backend db_mysql_backend;

/* Once per process (db_global_init). */
void db_mysql_library_init(void);

/* Result building for backends. */
int db_result_begin(db_result *r, int nsets); /* 0 or -1 */
db_value *db_result_push_row(db_result *r, int set, int ncols); /* NULL on OOM */
const char *db_result_copy(db_result *r, const char *p, size_t len); /* NUL-ended */
void db_result_fail(db_result *r, db_status st, int stmt, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Completes a batch: calls its callback, then frees it. */
void db_batch_complete(db_batch *b);

/* The SQL of statement i for a backend, with '?' kept. */
const char *db_stmt_sql(const db_config *cfg, int i);
/* '?' -> $1, $2 ... outside quotes (PostgreSQL). malloc'd; NULL on OOM. */
char *db_sql_dollar(const char *sql);

#endif
