/* The db layer: URLs, batches, results, and the worker-pool engine that runs
 * blocking backends (SQLite writes, MariaDB) off the event loop. */
#include "db/db_internal.h"

#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values --------------------------------------------------------- */

int64_t db_as_int(const db_value *v)
{
    switch (v->type) {
    case DB_T_INT: return v->v.i;
    case DB_T_DOUBLE: return (int64_t)v->v.d;
    case DB_T_TEXT: return v->v.s.p ? strtoll(v->v.s.p, NULL, 10) : 0;
    default: return 0;
    }
}

double db_as_double(const db_value *v)
{
    switch (v->type) {
    case DB_T_INT: return (double)v->v.i;
    case DB_T_DOUBLE: return v->v.d;
    case DB_T_TEXT: return v->v.s.p ? strtod(v->v.s.p, NULL) : 0.0;
    default: return 0.0;
    }
}

/* ---- configuration -------------------------------------------------- */

static int has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int db_config_parse(db_config *cfg, const char *url, char *err, size_t errlen)
{
    const char *target = url;
    if (has_prefix(url, "sqlite:")) {
        cfg->kind = DB_SQLITE;
        target = url + 7;
        if (has_prefix(target, "//"))
            target += 2; /* sqlite:///abs/path, sqlite://rel/path */
        if (!*target) {
            snprintf(err, errlen, "sqlite URL without a path: \"%s\"", url);
            return -1;
        }
    } else if (has_prefix(url, "postgresql://") || has_prefix(url, "postgres://")) {
        cfg->kind = DB_POSTGRES;
    } else if (has_prefix(url, "mysql://") || has_prefix(url, "mariadb://")) {
        cfg->kind = DB_MYSQL;
    } else {
        snprintf(err, errlen,
                 "unknown database URL \"%s\" (sqlite:PATH, postgresql://..., mysql://...)", url);
        return -1;
    }
    cfg->target = strdup(target);
    if (!cfg->target) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void db_config_free(db_config *cfg)
{
    free(cfg->target);
    cfg->target = NULL;
}

const char *db_kind_name(db_kind kind)
{
    switch (kind) {
    case DB_SQLITE: return "sqlite";
    case DB_POSTGRES: return "postgresql";
    case DB_MYSQL: return "mysql";
    }
    return "?";
}

static const db_backend *backend_of(db_kind kind)
{
    switch (kind) {
    case DB_SQLITE: return &db_sqlite_backend;
    case DB_POSTGRES: return &db_pg_backend;
    case DB_MYSQL: return &db_mysql_backend;
    }
    return NULL;
}

const char *db_stmt_sql(const db_config *cfg, int i)
{
    const db_stmt_def *d = &cfg->stmts[i];
    if (cfg->kind == DB_POSTGRES && d->sql_pg)
        return d->sql_pg;
    if (cfg->kind == DB_MYSQL && d->sql_my)
        return d->sql_my;
    return d->sql;
}

char *db_sql_dollar(const char *sql)
{
    size_t n = strlen(sql), q = 0;
    for (size_t i = 0; i < n; i++)
        q += sql[i] == '?';
    char *out = malloc(n + q * 6 + 1);
    if (!out)
        return NULL;
    char *o = out;
    char quote = 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = sql[i];
        if (quote) {
            if (ch == quote)
                quote = 0;
        } else if (ch == '\'' || ch == '"') {
            quote = ch;
        } else if (ch == '?') {
            o += sprintf(o, "$%d", ++k);
            continue;
        }
        *o++ = ch;
    }
    *o = '\0';
    return out;
}

/* ---- arena ---------------------------------------------------------- */

struct db_chunk {
    db_chunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

void *db_arena_alloc(db_arena *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    db_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 4096 ? n : 4096;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

void db_arena_free(db_arena *a)
{
    db_chunk *c = a->head;
    while (c) {
        db_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---- batches -------------------------------------------------------- */

db_batch *db_batch_new(int nstmts_hint)
{
    db_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->cap_items = nstmts_hint > 0 ? nstmts_hint : 1;
    b->items = malloc((size_t)b->cap_items * sizeof *b->items);
    if (!b->items) {
        free(b);
        return NULL;
    }
    b->result.failed = -1;
    b->conn = -1;
    return b;
}

int db_batch_add(db_batch *b, int stmt, const db_value *params, int nparams)
{
    if (b->nitems == b->cap_items) {
        int cap = b->cap_items * 2;
        db_item *n = realloc(b->items, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        b->items = n;
        b->cap_items = cap;
    }
    if (b->nparams + nparams > b->cap_params) {
        int cap = b->cap_params ? b->cap_params : 8;
        while (cap < b->nparams + nparams)
            cap *= 2;
        db_value *n = realloc(b->params, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        b->params = n;
        b->cap_params = cap;
    }
    for (int i = 0; i < nparams; i++) {
        db_value v = params[i];
        if (v.type == DB_T_TEXT) {
            char *copy = db_arena_alloc(&b->text, v.v.s.len + 1);
            if (!copy)
                return -1;
            if (v.v.s.len)
                memcpy(copy, v.v.s.p, v.v.s.len);
            copy[v.v.s.len] = '\0';
            v.v.s.p = copy;
        }
        b->params[b->nparams + i] = v;
    }
    b->items[b->nitems++] = (db_item){ .stmt = stmt, .nparams = nparams, .first = b->nparams };
    b->nparams += nparams;
    return 0;
}

int db_batch_count(const db_batch *b)
{
    return b->nitems;
}

static void result_clear(db_result *r)
{
    for (int i = 0; i < r->nsets; i++)
        free(r->sets[i].vals);
    free(r->sets);
    r->sets = NULL;
    r->nsets = 0;
    db_arena_free(&r->arena);
}

void db_batch_free(db_batch *b)
{
    if (!b)
        return;
    result_clear(&b->result);
    db_arena_free(&b->text);
    free(b->items);
    free(b->params);
    free(b);
}

/* ---- results -------------------------------------------------------- */

int db_result_begin(db_result *r, int nsets)
{
    result_clear(r);
    r->status = DB_OK;
    r->failed = -1;
    r->err[0] = '\0';
    if (nsets == 0)
        return 0;
    r->sets = calloc((size_t)nsets, sizeof *r->sets);
    if (!r->sets)
        return -1;
    r->nsets = nsets;
    return 0;
}

db_value *db_result_push_row(db_result *r, int set, int ncols)
{
    db_rowset *s = &r->sets[set];
    if (s->nrows == 0)
        s->ncols = ncols;
    if (s->nrows == s->cap) {
        int cap = s->cap ? s->cap * 2 : 4;
        db_value *n = realloc(s->vals, (size_t)cap * (size_t)(ncols ? ncols : 1) * sizeof *n);
        if (!n)
            return NULL;
        s->vals = n;
        s->cap = cap;
    }
    return &s->vals[(size_t)s->nrows++ * (size_t)s->ncols];
}

const char *db_result_copy(db_result *r, const char *p, size_t len)
{
    char *out = db_arena_alloc(&r->arena, len + 1);
    if (!out)
        return NULL;
    if (len)
        memcpy(out, p, len);
    out[len] = '\0';
    return out;
}

void db_result_fail(db_result *r, db_status st, int stmt, const char *fmt, ...)
{
    if (r->status != DB_OK)
        return; /* keep the first failure */
    r->status = st;
    r->failed = stmt;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
}

db_status db_result_status(const db_result *r) { return r->status; }
int db_result_failed(const db_result *r) { return r->failed; }
const char *db_result_error(const db_result *r) { return r->err; }

int db_result_nrows(const db_result *r, int stmt)
{
    return stmt >= 0 && stmt < r->nsets ? r->sets[stmt].nrows : 0;
}

int db_result_ncols(const db_result *r, int stmt)
{
    return stmt >= 0 && stmt < r->nsets ? r->sets[stmt].ncols : 0;
}

const db_value *db_result_row(const db_result *r, int stmt, int row)
{
    if (stmt < 0 || stmt >= r->nsets || row < 0 || row >= r->sets[stmt].nrows)
        return NULL;
    return &r->sets[stmt].vals[(size_t)row * (size_t)r->sets[stmt].ncols];
}

int64_t db_result_affected(const db_result *r, int stmt)
{
    return stmt >= 0 && stmt < r->nsets ? r->sets[stmt].affected : 0;
}

/* ---- global --------------------------------------------------------- */

void db_global_init(void)
{
    db_mysql_library_init();
}

/* ---- blocking ------------------------------------------------------- */

struct db_conn {
    const db_config *cfg;
    const db_backend *be;
    void *conn;
};

db_conn *db_connect(const db_config *cfg, char *err, size_t errlen)
{
    const db_backend *be = backend_of(cfg->kind);
    if (!be) {
        snprintf(err, errlen, "unknown database kind");
        return NULL;
    }
    db_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->cfg = cfg;
    c->be = be;
    c->conn = be->open(cfg, err, errlen);
    if (!c->conn) {
        free(c);
        return NULL;
    }
    return c;
}

int db_exec(db_conn *c, const char *sql, char *err, size_t errlen)
{
    return c->be->exec(c->conn, sql, err, errlen);
}

/* Checks statement indices and parameter counts; 0 or -1 (result set). */
static int batch_check(const db_config *cfg, db_batch *b)
{
    b->write = 0;
    for (int i = 0; i < b->nitems; i++) {
        const db_item *it = &b->items[i];
        if (it->stmt < 0 || it->stmt >= cfg->nstmts || it->nparams != cfg->stmts[it->stmt].nparams ||
            it->nparams > DB_MAX_PARAMS) {
            db_result_begin(&b->result, 0);
            db_result_fail(&b->result, DB_EINTERNAL, i, "statement %d: bad index or parameter count",
                           it->stmt);
            return -1;
        }
        if (cfg->stmts[it->stmt].flags & DB_WRITE)
            b->write = 1;
    }
    return 0;
}

const db_result *db_run_sync(db_conn *c, db_batch *b)
{
    if (batch_check(c->cfg, b) == 0)
        c->be->run(c->conn, c->cfg, b);
    return &b->result;
}

void db_close(db_conn *c)
{
    if (!c)
        return;
    c->be->close(c->conn);
    free(c);
}

/* ---- on a worker ---------------------------------------------------- */

struct db_pool {
    const db_config *cfg;
    const db_backend *be;
    brisk_loop *loop;
    void *engine; /* async backends */
    /* The worker-pool engine: n blocking connections, each used by one
     * pool thread at a time; which one is free is known on the worker only. */
    int n;
    void **conns;
    uint8_t *busy;
    void *loop_conn; /* read-only batches on the loop (SQLite) */
    db_batch *wait_head, *wait_tail;
};

db_pool *db_pool_open(const db_config *cfg, brisk_loop *loop)
{
    db_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cfg = cfg;
    p->be = backend_of(cfg->kind);
    p->loop = loop;
    p->n = cfg->pool_size > 0 ? cfg->pool_size : p->be->default_pool;
    if (p->be->async_open) {
        p->engine = p->be->async_open(p, cfg, loop);
        if (!p->engine)
            goto fail;
        return p;
    }
    p->conns = calloc((size_t)p->n, sizeof *p->conns);
    p->busy = calloc((size_t)p->n, 1);
    if (!p->conns || !p->busy)
        goto fail;
    return p;
fail:
    free(p->conns);
    free(p->busy);
    free(p);
    return NULL;
}

void db_pool_close(db_pool *p)
{
    if (!p)
        return;
    if (p->engine)
        p->be->async_close(p->engine);
    for (int i = 0; i < p->n && p->conns; i++)
        if (p->conns[i])
            p->be->close(p->conns[i]);
    if (p->loop_conn)
        p->be->close(p->loop_conn);
    /* Batches still waiting (none after a graceful stop) are failed. */
    while (p->wait_head) {
        db_batch *b = p->wait_head;
        p->wait_head = b->next;
        db_result_begin(&b->result, 0);
        db_result_fail(&b->result, DB_EUNAVAILABLE, -1, "pool closed");
        db_batch_complete(b);
    }
    free(p->conns);
    free(p->busy);
    free(p);
}

void db_batch_complete(db_batch *b)
{
    b->cb(&b->result, b->udata);
    db_batch_free(b);
}

/* On a pool thread: the connection b holds is used by this thread only. */
static void pool_work(void *arg)
{
    db_batch *b = arg;
    db_pool *p = b->pool;
    for (int attempt = 0; attempt < 2; attempt++) {
        void *conn = p->conns[b->conn];
        if (conn && p->be->broken(conn)) {
            p->be->close(conn);
            conn = p->conns[b->conn] = NULL;
        }
        int fresh = !conn;
        if (!conn) {
            char err[256];
            conn = p->conns[b->conn] = p->be->open(p->cfg, err, sizeof err);
            if (!conn) {
                db_result_begin(&b->result, 0);
                db_result_fail(&b->result, DB_EUNAVAILABLE, -1, "%s", err);
                return;
            }
        }
        /* A connection that died while idle is retried once, fresh. */
        if (p->be->run(conn, p->cfg, b) == 0 || fresh)
            return;
    }
}

static void pool_dispatch(db_pool *p, db_batch *b, int i);

static void pool_done(brisk_res *res, void *arg)
{
    db_batch *b = arg;
    db_pool *p = b->pool;
    p->busy[b->conn] = 0;
    if (p->wait_head) {
        db_batch *next = p->wait_head;
        p->wait_head = next->next;
        if (!p->wait_head)
            p->wait_tail = NULL;
        pool_dispatch(p, next, b->conn);
    }
    db_batch_complete(b);
}

static void pool_dispatch(db_pool *p, db_batch *b, int i)
{
    p->busy[i] = 1;
    b->conn = i;
    if (brisk_work(b->res, pool_work, pool_done, b) < 0) {
        p->busy[i] = 0;
        db_result_begin(&b->result, 0);
        db_result_fail(&b->result, DB_EINTERNAL, -1, "cannot start work");
        db_batch_complete(b);
    }
}

void db_run(db_pool *p, db_batch *b, brisk_res *res, db_cb cb, void *udata)
{
    b->pool = p;
    b->res = res;
    b->cb = cb;
    b->udata = udata;
    b->next = NULL;
    if (batch_check(p->cfg, b) < 0) {
        db_batch_complete(b);
        return;
    }
    if (p->engine) {
        p->be->async_submit(p->engine, b);
        return;
    }
    if (p->be->reads_on_loop && !b->write) {
        if (!p->loop_conn) {
            char err[256];
            p->loop_conn = p->be->open(p->cfg, err, sizeof err);
            if (!p->loop_conn) {
                db_result_begin(&b->result, 0);
                db_result_fail(&b->result, DB_EUNAVAILABLE, -1, "%s", err);
                db_batch_complete(b);
                return;
            }
        }
        p->be->run(p->loop_conn, p->cfg, b);
        db_batch_complete(b);
        return;
    }
    for (int i = 0; i < p->n; i++) {
        if (!p->busy[i]) {
            pool_dispatch(p, b, i);
            return;
        }
    }
    if (p->wait_tail)
        p->wait_tail->next = b;
    else
        p->wait_head = b;
    p->wait_tail = b;
}
