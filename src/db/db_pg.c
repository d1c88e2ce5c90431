/* PostgreSQL backend.
 *
 * On a worker (the engine): every link is a libpq connection in
 * non-blocking pipeline mode whose socket the worker loop watches. A batch
 * is sent as one PQsendQueryPrepared per statement followed by one
 * PQpipelineSync, so the statements between two syncs form one implicit
 * transaction (all or nothing) and the whole batch costs one round trip.
 * Several batches may be in flight on a link; their results come back in
 * order. A new batch goes to the ready link with the fewest in flight, so a
 * slow query delays only what queued behind it once every link is busy.
 * Statements are prepared (in the same pipeline) as soon as a link is up.
 *
 * A link that fails (server restart, network) fails its batches with
 * DB_EUNAVAILABLE and reconnects in the background with backoff; with no
 * link up or coming up, batches fail at once.
 *
 * The blocking face (startup, tests) uses the same statements with the
 * synchronous libpq calls. */
#include "db/db_internal.h"

#include "core/log.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIPE_MAX 32            /* batches in flight per link */
#define CONNECT_TIMEOUT_MS 5000
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 2000
#define QUERY_TIMEOUT_MS 30000 /* a link silent this long on a batch is dropped */

/* Type OIDs (catalog/pg_type.h is not in the client headers). */
enum { OID_BOOL = 16, OID_NAME = 19, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_TEXT = 25,
       OID_OID = 26, OID_FLOAT4 = 700, OID_FLOAT8 = 701, OID_BPCHAR = 1042, OID_VARCHAR = 1043,
       OID_NUMERIC = 1700 };

static PGconn *connect_start(const db_config *cfg, int blocking)
{
    /* expand_dbname: "dbname" may be a URL or a conninfo string. */
    static const char *const keys[] = { "dbname", "client_encoding", "application_name", NULL };
    const char *vals[] = { cfg->target, "UTF8", "brisk", NULL };
    return blocking ? PQconnectdbParams(keys, vals, 1) : PQconnectStartParams(keys, vals, 1);
}

/* Notices ("relation already exists, skipping") are not errors: libpq
 * would print them on stderr. */
static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static void stmt_name(char *out, size_t cap, int i)
{
    snprintf(out, cap, "b%d", i);
}

/* One line of a libpq error message. */
static const char *msg_line(const char *m, char *buf, size_t cap)
{
    if (!m || !*m)
        return "unknown error";
    size_t n = strcspn(m, "\n");
    snprintf(buf, cap, "%.*s", (int)n, m);
    return buf;
}

static db_status classify(const PGresult *res, const PGconn *pg)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!state)
        return PQstatus(pg) == CONNECTION_BAD ? DB_EUNAVAILABLE : DB_EINTERNAL;
    if (strncmp(state, "23", 2) == 0)
        return DB_ECONSTRAINT;
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0)
        return DB_EUNAVAILABLE; /* connection exception, admin shutdown, cannot connect now */
    if (strncmp(state, "40", 2) == 0 || strcmp(state, "55P03") == 0 || strcmp(state, "57014") == 0)
        return DB_EBUSY; /* serialization, deadlock, lock not available, canceled */
    return DB_EINTERNAL;
}

static void fail_from(db_result *r, const PGresult *res, const PGconn *pg, int k)
{
    char line[200];
    const char *m = res ? PQresultErrorMessage(res) : NULL;
    if (!m || !*m)
        m = PQerrorMessage(pg);
    db_result_fail(r, classify(res, pg), k, "postgresql: %s", msg_line(m, line, sizeof line));
}

/* Results come in text the first time a statement runs; when every column
 * is of a type below, its later runs ask for PostgreSQL's binary format,
 * which spares the server formatting numbers and us parsing them back
 * (GET /api/foods?limit=20 on PostgreSQL: +10% requests per second). */
static int binary_type(Oid t)
{
    switch (t) {
    case OID_BOOL:
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
    case OID_OID:
    case OID_FLOAT8: /* exact both ways (text is shortest-exact since PostgreSQL 12) */
    case OID_NAME:
    case OID_TEXT:
    case OID_BPCHAR:
    case OID_VARCHAR: return 1;
    default: return 0; /* float4 too: its text "0.1" is not (double)0.1f */
    }
}

static int binary_ok(const PGresult *res)
{
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK)
        return 1;
    if (st != PGRES_TUPLES_OK)
        return 0;
    for (int j = 0, n = PQnfields(res); j < n; j++)
        if (!binary_type(PQftype(res, j)))
            return 0;
    return 1;
}

static uint64_t be_bits(const char *v, int len)
{
    uint64_t u = 0;
    for (int i = 0; i < len; i++)
        u = u << 8 | (unsigned char)v[i];
    return u;
}

/* One binary value; -1 when its type or size is not what binary_type
 * promised (the schema changed under a running statement), -2 when out of
 * memory. */
static int from_binary(db_result *r, Oid t, const char *v, int len, db_value *out)
{
    switch (t) {
    case OID_BOOL:
        if (len != 1)
            return -1;
        *out = db_int(v[0] != 0);
        return 0;
    case OID_INT2:
        if (len != 2)
            return -1;
        *out = db_int((int16_t)be_bits(v, 2));
        return 0;
    case OID_INT4:
        if (len != 4)
            return -1;
        *out = db_int((int32_t)be_bits(v, 4));
        return 0;
    case OID_OID:
        if (len != 4)
            return -1;
        *out = db_int((int64_t)be_bits(v, 4));
        return 0;
    case OID_INT8:
        if (len != 8)
            return -1;
        *out = db_int((int64_t)be_bits(v, 8));
        return 0;
    case OID_FLOAT8: {
        if (len != 8)
            return -1;
        uint64_t u = be_bits(v, 8);
        double d;
        memcpy(&d, &u, sizeof d);
        *out = db_double(d);
        return 0;
    }
    case OID_NAME:
    case OID_TEXT:
    case OID_BPCHAR:
    case OID_VARCHAR: { /* the same bytes as in text */
        const char *copy = db_result_copy(r, v, (size_t)len);
        if (!copy)
            return -2;
        *out = db_text(copy, (size_t)len);
        return 0;
    }
    default: return -1;
    }
}

/* Copies the rows of res into set k. 0, or -1 with r failed. */
static int store(db_result *r, int k, const PGresult *res)
{
    const char *ct = PQcmdTuples((PGresult *)res);
    r->sets[k].affected = ct && *ct ? strtoll(ct, NULL, 10) : 0;
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        return 0;
    int nrows = PQntuples(res), ncols = PQnfields(res);
    for (int i = 0; i < nrows; i++) {
        db_value *row = db_result_push_row(r, k, ncols);
        if (!row)
            goto oom;
        for (int j = 0; j < ncols; j++) {
            if (PQgetisnull(res, i, j)) {
                row[j] = db_null();
                continue;
            }
            const char *v = PQgetvalue(res, i, j);
            if (PQfformat(res, j) == 1) {
                int rc = from_binary(r, PQftype(res, j), v, PQgetlength(res, i, j), &row[j]);
                if (rc == -2)
                    goto oom;
                if (rc < 0) {
                    db_result_fail(r, DB_EINTERNAL, k, "postgresql: binary column %d of type %u", j,
                                   (unsigned)PQftype(res, j));
                    return -1;
                }
                continue;
            }
            switch (PQftype(res, j)) {
            case OID_BOOL: row[j] = db_int(v[0] == 't'); break;
            case OID_INT2:
            case OID_INT4:
            case OID_INT8:
            case OID_OID: row[j] = db_int(strtoll(v, NULL, 10)); break;
            case OID_FLOAT4:
            case OID_FLOAT8:
            case OID_NUMERIC: row[j] = db_double(strtod(v, NULL)); break;
            default: {
                size_t len = (size_t)PQgetlength(res, i, j);
                const char *copy = db_result_copy(r, v, len);
                if (!copy)
                    goto oom;
                row[j] = db_text(copy, len);
            }
            }
        }
    }
    return 0;
oom:
    db_result_fail(r, DB_EINTERNAL, k, "out of memory");
    return -1;
}

/* Text parameters for item k; numbers are formatted into num. */
typedef char param_buf[32];

static int params_of(const db_batch *b, int k, const char **vals, param_buf *num)
{
    const db_item *it = &b->items[k];
    if (it->nparams > DB_MAX_PARAMS)
        return -1;
    for (int i = 0; i < it->nparams; i++) {
        const db_value *v = &b->params[it->first + i];
        switch (v->type) {
        case DB_T_INT:
            snprintf(num[i], sizeof num[i], "%lld", (long long)v->v.i);
            vals[i] = num[i];
            break;
        case DB_T_DOUBLE:
            snprintf(num[i], sizeof num[i], "%.17g", v->v.d);
            vals[i] = num[i];
            break;
        case DB_T_TEXT: vals[i] = v->v.s.p; break; /* NUL-terminated by db_batch_add */
        default: vals[i] = NULL; break;
        }
    }
    return 0;
}

/* ================= blocking face ================= */

typedef struct {
    PGconn *pg;
    const db_config *cfg;
    uint8_t *prepared; /* per statement: PREP_DONE, | PREP_BINARY (binary_ok) */
} pgs_conn;

enum { PREP_DONE = 1, PREP_BINARY = 2 };

static void pgs_close(void *p)
{
    pgs_conn *c = p;
    if (!c)
        return;
    PQfinish(c->pg);
    free(c->prepared);
    free(c);
}

static void *pgs_open(const db_config *cfg, char *err, size_t errlen)
{
    pgs_conn *c = calloc(1, sizeof *c);
    if (!c || !(c->prepared = calloc((size_t)cfg->nstmts + 1, 1))) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->cfg = cfg;
    c->pg = connect_start(cfg, 1);
    if (c->pg)
        PQsetNoticeProcessor(c->pg, ignore_notice, NULL);
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
        char line[200];
        snprintf(err, errlen, "postgresql: %s",
                 msg_line(c->pg ? PQerrorMessage(c->pg) : "out of memory", line, sizeof line));
        pgs_close(c);
        return NULL;
    }
    return c;
}

static int pgs_exec(void *p, const char *sql, char *err, size_t errlen)
{
    pgs_conn *c = p;
    PGresult *res = PQexec(c->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc = 0;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        char line[200];
        snprintf(err, errlen, "postgresql: %s", msg_line(PQresultErrorMessage(res), line, sizeof line));
        rc = -1;
    }
    PQclear(res);
    return rc;
}

static int simple(pgs_conn *c, const char *sql)
{
    PGresult *res = PQexec(c->pg, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    return ok ? 0 : -1;
}

static int pgs_run(void *p, const db_config *cfg, db_batch *b)
{
    pgs_conn *c = p;
    db_result *r = &b->result;
    if (db_result_begin(r, b->nitems) < 0) {
        db_result_fail(r, DB_EINTERNAL, -1, "out of memory");
        return 0;
    }
    int tx = b->nitems > 1 || b->write;
    if (tx && simple(c, "BEGIN") < 0) {
        fail_from(r, NULL, c->pg, -1);
        return 0;
    }
    for (int k = 0; k < b->nitems && r->status == DB_OK; k++) {
        const db_item *it = &b->items[k];
        char name[16];
        stmt_name(name, sizeof name, it->stmt);
        if (!c->prepared[it->stmt]) {
            char *sql = db_sql_dollar(db_stmt_sql(cfg, it->stmt));
            PGresult *res = sql ? PQprepare(c->pg, name, sql, it->nparams, NULL) : NULL;
            free(sql);
            if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                fail_from(r, res, c->pg, k);
                PQclear(res);
                break;
            }
            PQclear(res);
            c->prepared[it->stmt] = PREP_DONE;
        }
        const char *vals[DB_MAX_PARAMS];
        param_buf num[DB_MAX_PARAMS];
        if (params_of(b, k, vals, num) < 0) {
            db_result_fail(r, DB_EINTERNAL, k, "too many parameters");
            break;
        }
        int binary = c->prepared[it->stmt] & PREP_BINARY;
        PGresult *res = PQexecPrepared(c->pg, name, it->nparams, vals, NULL, NULL, binary ? 1 : 0);
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
            if (store(r, k, res) < 0)
                c->prepared[it->stmt] &= (uint8_t)~PREP_BINARY;
            else if (!binary && binary_ok(res))
                c->prepared[it->stmt] |= PREP_BINARY;
        } else {
            fail_from(r, res, c->pg, k);
        }
        PQclear(res);
    }
    if (!tx)
        return 0;
    if (r->status == DB_OK && simple(c, "COMMIT") < 0)
        fail_from(r, NULL, c->pg, -1);
    if (r->status != DB_OK && PQstatus(c->pg) == CONNECTION_OK)
        simple(c, "ROLLBACK");
    return 0;
}

static int pgs_broken(void *p)
{
    return PQstatus(((pgs_conn *)p)->pg) == CONNECTION_BAD;
}

/* ================= the engine on a worker ================= */

enum { LINK_DOWN, LINK_CONNECTING, LINK_READY };

typedef struct pg_engine pg_engine;

typedef struct {
    pg_engine *e;
    int idx;
    int state;
    PGconn *pg;
    brisk_io *io;
    unsigned events;
    brisk_timer *timer; /* connect timeout, or the next attempt */
    int backoff_ms;
    unsigned gen; /* bumped when the link fails: stale loops stop */
    db_batch *head, *tail; /* in flight, in send order */
    int inflight;
} pg_link;

struct pg_engine {
    const db_config *cfg;
    brisk_loop *loop;
    char **sql; /* per statement, with $n placeholders */
    uint8_t *binary; /* per statement: ask for binary results (binary_ok) */
    int n;
    pg_link *links;
    db_batch *wait_head, *wait_tail;
    brisk_timer *watchdog; /* runs while batches are queued or in flight */
    int warned; /* one log line per outage */
};

static void link_io(brisk_io *io, unsigned events, void *udata);
static void pump(pg_engine *e);

static void watchdog_arm(pg_engine *e)
{
    brisk_timer_start(e->watchdog, 1000);
}

static void watch(pg_link *l, unsigned events)
{
    if (l->io && events != l->events) {
        brisk_io_set(l->io, events);
        l->events = events;
    }
}

/* (Re)registers the link's current socket: libpq may replace it while
 * connecting (another address), so the watcher is renewed at each step. */
static int watch_socket(pg_link *l, unsigned events)
{
    brisk_io_free(l->io);
    l->io = NULL;
    int fd = PQsocket(l->pg);
    if (fd < 0)
        return -1;
    l->io = brisk_io_new(l->e->loop, fd, events, link_io, l);
    l->events = events;
    return l->io ? 0 : -1;
}

static void fail_batch(db_batch *b, const char *why)
{
    if (b->internal) {
        db_batch_free(b);
        return;
    }
    /* Keep a more precise failure already recorded for this batch. */
    if (b->result.status == DB_OK)
        db_result_begin(&b->result, 0);
    db_result_fail(&b->result, DB_EUNAVAILABLE, -1, "postgresql: %s", why);
    db_batch_complete(b);
}

static int any_link_alive(const pg_engine *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->links[i].state != LINK_DOWN)
            return 1;
    return 0;
}

static void link_fail(pg_link *l, const char *why)
{
    pg_engine *e = l->e;
    char msg[200];
    snprintf(msg, sizeof msg, "%s", why);
    if (!e->warned) {
        log_warn("postgresql: connection lost or refused: %s", msg);
        e->warned = 1;
    }
    brisk_io_free(l->io);
    l->io = NULL;
    PQfinish(l->pg);
    l->pg = NULL;
    l->state = LINK_DOWN;
    l->gen++;
    db_batch *lost = l->head;
    l->head = l->tail = NULL;
    l->inflight = 0;
    brisk_timer_start(l->timer, (uint64_t)l->backoff_ms);
    l->backoff_ms = l->backoff_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : l->backoff_ms * 2;
    /* Nothing will come up soon: waiting batches fail now. */
    db_batch *waiting = NULL;
    if (!any_link_alive(e)) {
        waiting = e->wait_head;
        e->wait_head = e->wait_tail = NULL;
    }
    /* Callbacks last: they may submit again, and see a consistent engine. */
    while (lost) {
        db_batch *next = lost->next;
        fail_batch(lost, msg);
        lost = next;
    }
    while (waiting) {
        db_batch *next = waiting->next;
        fail_batch(waiting, "database unavailable");
        waiting = next;
    }
}

static void link_fail_pg(pg_link *l)
{
    char line[200];
    link_fail(l, msg_line(l->pg ? PQerrorMessage(l->pg) : NULL, line, sizeof line));
}

/* Queues b on the link: one pipeline segment ending in a sync. */
static void link_send(pg_link *l, db_batch *b)
{
    b->next = NULL;
    b->cur = b->got = 0;
    b->since = brisk_loop_now(l->e->loop);
    if (!l->head)
        watchdog_arm(l->e);
    if (l->tail)
        l->tail->next = b;
    else
        l->head = b;
    l->tail = b;
    l->inflight++;
    if (!b->internal && db_result_begin(&b->result, b->nitems) < 0) {
        /* Still sent (so the result order holds); answered as a failure. */
        db_result_fail(&b->result, DB_EINTERNAL, -1, "out of memory");
    }
    for (int k = 0; k < b->nitems; k++) {
        const db_item *it = &b->items[k];
        char name[16];
        stmt_name(name, sizeof name, it->stmt);
        int ok;
        if (b->internal) {
            ok = PQsendPrepare(l->pg, name, l->e->sql[it->stmt], l->e->cfg->stmts[it->stmt].nparams,
                               NULL);
        } else {
            const char *vals[DB_MAX_PARAMS];
            param_buf num[DB_MAX_PARAMS];
            if (params_of(b, k, vals, num) < 0) {
                db_result_fail(&b->result, DB_EINTERNAL, k, "too many parameters");
                vals[0] = NULL;
                ok = PQsendQueryPrepared(l->pg, name, 0, NULL, NULL, NULL, 0);
            } else {
                ok = PQsendQueryPrepared(l->pg, name, it->nparams, vals, NULL, NULL,
                                         l->e->binary[it->stmt]);
            }
        }
        if (!ok) {
            link_fail_pg(l);
            return;
        }
    }
    if (!PQpipelineSync(l->pg)) {
        link_fail_pg(l);
        return;
    }
    int f = PQflush(l->pg);
    if (f < 0) {
        link_fail_pg(l);
        return;
    }
    watch(l, BRISK_READ | (f ? BRISK_WRITE : 0));
}

static void link_ready(pg_link *l)
{
    pg_engine *e = l->e;
    brisk_timer_stop(l->timer);
    if (PQsetnonblocking(l->pg, 1) != 0 || !PQenterPipelineMode(l->pg) ||
        watch_socket(l, BRISK_READ) < 0) {
        link_fail_pg(l);
        return;
    }
    l->state = LINK_READY;
    /* A new connection may meet another schema: results go back to text
     * until each statement shows its column types again. */
    memset(e->binary, 0, (size_t)e->cfg->nstmts);
    l->backoff_ms = RETRY_MIN_MS;
    if (e->warned) {
        log_info("postgresql: connected again");
        e->warned = 0;
    }
    /* Prepare every statement first, in the same pipeline. */
    db_batch *prep = db_batch_new(e->cfg->nstmts);
    if (!prep) {
        link_fail(l, "out of memory");
        return;
    }
    prep->internal = 1;
    for (int i = 0; i < e->cfg->nstmts; i++)
        db_batch_add(prep, i, NULL, 0);
    unsigned gen = l->gen;
    link_send(l, prep);
    if (l->gen == gen)
        pump(e);
}

static void link_connect_step(pg_link *l)
{
    switch (PQconnectPoll(l->pg)) {
    case PGRES_POLLING_READING:
        if (watch_socket(l, BRISK_READ) < 0)
            link_fail_pg(l);
        return;
    case PGRES_POLLING_WRITING:
        if (watch_socket(l, BRISK_WRITE) < 0)
            link_fail_pg(l);
        return;
    case PGRES_POLLING_OK:
        link_ready(l);
        return;
    default:
        link_fail_pg(l);
        return;
    }
}

static void link_connect(pg_link *l)
{
    l->pg = connect_start(l->e->cfg, 0);
    if (l->pg)
        PQsetNoticeProcessor(l->pg, ignore_notice, NULL);
    if (!l->pg || PQstatus(l->pg) == CONNECTION_BAD) {
        link_fail_pg(l);
        return;
    }
    l->state = LINK_CONNECTING;
    brisk_timer_start(l->timer, CONNECT_TIMEOUT_MS);
    /* The first poll waits for the socket to be writable. */
    if (watch_socket(l, BRISK_WRITE) < 0)
        link_fail_pg(l);
}

static void link_timer(brisk_timer *t, void *udata)
{
    pg_link *l = udata;
    if (l->state == LINK_DOWN)
        link_connect(l);
    else if (l->state == LINK_CONNECTING)
        link_fail(l, "connect timeout");
}

/* Reads every complete result; finishes batches at their sync. */
static void link_read(pg_link *l)
{
    unsigned gen = l->gen;
    if (!PQconsumeInput(l->pg)) {
        link_fail_pg(l);
        return;
    }
    while (l->head && !PQisBusy(l->pg)) {
        db_batch *b = l->head;
        PGresult *res = PQgetResult(l->pg);
        if (!res) {
            if (!b->got)
                break; /* nothing for this statement yet */
            b->cur++;
            b->got = 0;
            continue;
        }
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            l->head = b->next;
            if (!l->head)
                l->tail = NULL;
            l->inflight--;
            if (b->internal) {
                db_batch_free(b);
            } else {
                db_batch_complete(b);
                if (l->gen != gen)
                    return; /* the callback's new batch broke the link */
            }
            continue;
        }
        b->got = 1;
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
            if (!b->internal && b->result.status == DB_OK && b->cur < b->nitems) {
                uint8_t *binary = &l->e->binary[b->items[b->cur].stmt];
                int text = PQnfields(res) == 0 || PQfformat(res, 0) == 0;
                if (store(&b->result, b->cur, res) < 0)
                    *binary = 0;
                else if (text && binary_ok(res))
                    *binary = 1;
            }
        } else if (st != PGRES_PIPELINE_ABORTED) {
            if (b->internal) {
                char line[200];
                log_error("postgresql: cannot prepare statement %d: %s", b->items[b->cur].stmt,
                          msg_line(PQresultErrorMessage(res), line, sizeof line));
            } else {
                fail_from(&b->result, res, l->pg, b->cur);
            }
        }
        PQclear(res);
    }
    if (l->gen == gen && PQstatus(l->pg) == CONNECTION_BAD)
        link_fail_pg(l);
    else if (l->gen == gen && l->inflight < PIPE_MAX)
        pump(l->e);
}

static void link_io(brisk_io *io, unsigned events, void *udata)
{
    pg_link *l = udata;
    if (l->state == LINK_CONNECTING) {
        link_connect_step(l);
        return;
    }
    if (l->state != LINK_READY)
        return;
    unsigned gen = l->gen;
    if (events & BRISK_WRITE) {
        int f = PQflush(l->pg);
        if (f < 0) {
            link_fail_pg(l);
            return;
        }
        watch(l, BRISK_READ | (f ? BRISK_WRITE : 0));
    }
    if ((events & BRISK_READ) && l->gen == gen)
        link_read(l);
}

/* The ready link with the fewest batches in flight, or NULL. */
static pg_link *pick(pg_engine *e)
{
    pg_link *best = NULL;
    for (int i = 0; i < e->n; i++) {
        pg_link *l = &e->links[i];
        if (l->state == LINK_READY && l->inflight < PIPE_MAX && (!best || l->inflight < best->inflight))
            best = l;
    }
    return best;
}

static void pump(pg_engine *e)
{
    pg_link *l;
    while (e->wait_head && (l = pick(e))) {
        db_batch *b = e->wait_head;
        e->wait_head = b->next;
        if (!e->wait_head)
            e->wait_tail = NULL;
        link_send(l, b);
    }
}

static void pg_submit(void *engine, db_batch *b)
{
    pg_engine *e = engine;
    pg_link *l = e->wait_head ? NULL : pick(e);
    if (l) {
        link_send(l, b);
        return;
    }
    if (!any_link_alive(e)) {
        fail_batch(b, "database unavailable");
        return;
    }
    b->next = NULL;
    b->since = brisk_loop_now(e->loop);
    if (e->wait_tail)
        e->wait_tail->next = b;
    else
        e->wait_head = b;
    e->wait_tail = b;
    watchdog_arm(e);
}

/* Drops links stuck on a batch (a hung server, a lost network: the socket
 * may say nothing for a long time) and fails batches queued too long. */
static void watchdog(brisk_timer *t, void *udata)
{
    pg_engine *e = udata;
    uint64_t now = brisk_loop_now(e->loop);
    for (int i = 0; i < e->n; i++) {
        pg_link *l = &e->links[i];
        if (l->state == LINK_READY && l->head && now - l->head->since > QUERY_TIMEOUT_MS)
            link_fail(l, "no answer within the query timeout");
    }
    while (e->wait_head && now - e->wait_head->since > QUERY_TIMEOUT_MS) {
        db_batch *b = e->wait_head;
        e->wait_head = b->next;
        if (!e->wait_head)
            e->wait_tail = NULL;
        fail_batch(b, "no connection free within the query timeout");
    }
    int busy = e->wait_head != NULL;
    for (int i = 0; i < e->n && !busy; i++)
        busy = e->links[i].head != NULL;
    if (busy)
        watchdog_arm(e);
}

static void pg_engine_close(void *engine)
{
    pg_engine *e = engine;
    if (!e)
        return;
    brisk_timer_free(e->watchdog);
    for (int i = 0; i < e->n && e->links; i++) {
        pg_link *l = &e->links[i];
        brisk_timer_free(l->timer);
        l->timer = NULL;
        brisk_io_free(l->io);
        PQfinish(l->pg);
        while (l->head) {
            db_batch *b = l->head;
            l->head = b->next;
            db_batch_free(b); /* after a graceful stop there are none */
        }
    }
    while (e->wait_head) {
        db_batch *b = e->wait_head;
        e->wait_head = b->next;
        db_batch_free(b);
    }
    for (int i = 0; e->sql && i < e->cfg->nstmts; i++)
        free(e->sql[i]);
    free(e->sql);
    free(e->binary);
    free(e->links);
    free(e);
}

static void *pg_engine_open(db_pool *p, const db_config *cfg, brisk_loop *loop)
{
    pg_engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->cfg = cfg;
    e->loop = loop;
    e->n = cfg->pool_size > 0 ? cfg->pool_size : db_pg_backend.default_pool;
    e->links = calloc((size_t)e->n, sizeof *e->links);
    e->sql = calloc((size_t)cfg->nstmts + 1, sizeof *e->sql);
    e->binary = calloc((size_t)cfg->nstmts + 1, 1);
    if (!e->links || !e->sql || !e->binary || !(e->watchdog = brisk_timer_new(loop, watchdog, e)))
        goto fail;
    for (int i = 0; i < cfg->nstmts; i++)
        if (!(e->sql[i] = db_sql_dollar(db_stmt_sql(cfg, i))))
            goto fail;
    for (int i = 0; i < e->n; i++) {
        pg_link *l = &e->links[i];
        l->e = e;
        l->idx = i;
        l->backoff_ms = RETRY_MIN_MS;
        l->timer = brisk_timer_new(loop, link_timer, l);
        if (!l->timer)
            goto fail;
    }
    for (int i = 0; i < e->n; i++)
        link_connect(&e->links[i]);
    return e;
fail:
    pg_engine_close(e);
    return NULL;
}

const db_backend db_pg_backend = {
    .open = pgs_open,
    .exec = pgs_exec,
    .run = pgs_run,
    .broken = pgs_broken,
    .close = pgs_close,
    .default_pool = 4,
    .async_open = pg_engine_open,
    .async_submit = pg_submit,
    .async_close = pg_engine_close,
};
