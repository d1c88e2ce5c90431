/* MariaDB/MySQL backend: blocking connections, each with its statements
 * prepared on first use (binary protocol, parameters bound), driven by the
 * worker-pool engine of db.c so no round trip runs on the event loop. A
 * connection that reports a lost server is marked broken and reopened on
 * its next use.
 *
 * URL: mysql://user:password@host:port/database
 *      mysql://user@/database?socket=/path/to/socket   (%XX escapes allowed) */
#include "db/db_internal.h"

#include <errno.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <errmsg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_S 3
#define IO_TIMEOUT_S 30

void db_mysql_library_init(void)
{
    /* Before any thread connects: the library's global state is not
     * thread-safe to initialise lazily. */
    mysql_library_init(0, NULL, NULL);
}

typedef struct {
    char *user, *password, *host, *database, *socket;
    unsigned port;
    char *buf; /* owns the strings */
} my_url;

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes %XX in place. */
static void pct_decode(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

static int parse_url(const char *url, my_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    const char *rest = strstr(url, "://");
    if (!rest) {
        snprintf(err, errlen, "mysql: bad URL");
        return -1;
    }
    u->buf = strdup(rest + 3);
    if (!u->buf) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *s = u->buf;
    char *query = strchr(s, '?');
    if (query)
        *query++ = '\0';
    char *path = strchr(s, '/');
    if (path) {
        *path++ = '\0';
        if (*path)
            u->database = path;
    }
    char *at = strrchr(s, '@');
    char *hostport = s;
    if (at) {
        *at = '\0';
        hostport = at + 1;
        char *colon = strchr(s, ':');
        if (colon) {
            *colon = '\0';
            u->password = colon + 1;
        }
        if (*s)
            u->user = s;
    }
    if (*hostport == '[') { /* [::1]:3306 */
        char *close = strchr(hostport, ']');
        if (!close) {
            snprintf(err, errlen, "mysql: bad host in URL");
            return -1;
        }
        *close = '\0';
        u->host = hostport + 1;
        hostport = close + 1;
    } else if (*hostport && *hostport != ':') {
        u->host = hostport;
    }
    char *colon = strrchr(hostport, ':');
    if (colon) {
        *colon = '\0';
        char *end;
        errno = 0;
        unsigned long port = strtoul(colon + 1, &end, 10);
        if (*end || port == 0 || port > 65535 || errno) {
            snprintf(err, errlen, "mysql: bad port in URL");
            return -1;
        }
        u->port = (unsigned)port;
    }
    for (char *q = query; q && *q;) {
        char *amp = strchr(q, '&');
        if (amp)
            *amp = '\0';
        if (strncmp(q, "socket=", 7) == 0)
            u->socket = q + 7;
        q = amp ? amp + 1 : NULL;
    }
    char **fields[] = { &u->user, &u->password, &u->host, &u->database, &u->socket };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (*fields[i])
            pct_decode(*fields[i]);
    return 0;
}

typedef struct {
    MYSQL *my;
    int n;
    MYSQL_STMT **stmts;
    int broken;
    unsigned prep_errno; /* a failed prepare's error (its handle is gone) */
    char prep_error[160];
} my_conn;

static void my_close(void *p)
{
    my_conn *c = p;
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        if (c->stmts[i])
            mysql_stmt_close(c->stmts[i]);
    if (c->my)
        mysql_close(c->my);
    free(c->stmts);
    free(c);
}

static void *my_open(const db_config *cfg, char *err, size_t errlen)
{
    my_url u;
    if (parse_url(cfg->target, &u, err, errlen) < 0) {
        free(u.buf);
        return NULL;
    }
    my_conn *c = calloc(1, sizeof *c);
    if (!c || !(c->stmts = calloc((size_t)cfg->nstmts + 1, sizeof *c->stmts)) ||
        !(c->my = mysql_init(NULL))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    c->n = cfg->nstmts;
    unsigned connect_timeout = CONNECT_TIMEOUT_S, io_timeout = IO_TIMEOUT_S;
    mysql_optionsv(c->my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_optionsv(c->my, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
    mysql_optionsv(c->my, MYSQL_OPT_READ_TIMEOUT, &io_timeout);
    mysql_optionsv(c->my, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout);
    /* CLIENT_FOUND_ROWS: an UPDATE reports the rows it matched, as the
     * other databases do, not only those it changed. */
    if (!mysql_real_connect(c->my, u.host, u.user, u.password, u.database, u.port, u.socket,
                            CLIENT_FOUND_ROWS)) {
        snprintf(err, errlen, "mysql: %s", mysql_error(c->my));
        goto fail;
    }
    free(u.buf);
    return c;
fail:
    free(u.buf);
    my_close(c);
    return NULL;
}

static int lost(unsigned e)
{
    switch (e) {
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_LOST_EXTENDED:
    case ER_SERVER_SHUTDOWN:
    case ER_CONNECTION_KILLED:
    case 4031: /* ER_CLIENT_INTERACTION_TIMEOUT */
        return 1;
    default:
        return 0;
    }
}

static db_status classify(my_conn *c, unsigned e)
{
    if (lost(e)) {
        c->broken = 1;
        return DB_EUNAVAILABLE;
    }
    switch (e) {
    case ER_DUP_ENTRY:
    case ER_NO_REFERENCED_ROW:
    case ER_ROW_IS_REFERENCED:
    case ER_NO_REFERENCED_ROW_2:
    case ER_ROW_IS_REFERENCED_2:
    case ER_BAD_NULL_ERROR:
    case 4025: /* ER_CONSTRAINT_FAILED */
        return DB_ECONSTRAINT;
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_LOCK_DEADLOCK:
        return DB_EBUSY;
    default:
        return DB_EINTERNAL;
    }
}

static int my_exec(void *p, const char *sql, char *err, size_t errlen)
{
    my_conn *c = p;
    if (mysql_real_query(c->my, sql, strlen(sql)) != 0) {
        classify(c, mysql_errno(c->my));
        snprintf(err, errlen, "mysql: %s", mysql_error(c->my));
        return -1;
    }
    MYSQL_RES *res = mysql_store_result(c->my);
    if (res)
        mysql_free_result(res);
    return 0;
}

static int simple(my_conn *c, const char *sql)
{
    return mysql_real_query(c->my, sql, strlen(sql)) == 0 ? 0 : -1;
}

static MYSQL_STMT *prepared(my_conn *c, const db_config *cfg, int i)
{
    if (c->stmts[i])
        return c->stmts[i];
    MYSQL_STMT *st = mysql_stmt_init(c->my);
    if (!st)
        return NULL;
    const char *sql = db_stmt_sql(cfg, i);
    my_bool update_max = 1; /* so string columns can be sized before fetching */
    if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0 ||
        mysql_stmt_attr_set(st, STMT_ATTR_UPDATE_MAX_LENGTH, &update_max) != 0) {
        c->prep_errno = mysql_stmt_errno(st);
        snprintf(c->prep_error, sizeof c->prep_error, "%s", mysql_stmt_error(st));
        mysql_stmt_close(st);
        return NULL;
    }
    c->stmts[i] = st;
    return st;
}

static void stmt_fail(my_conn *c, db_result *r, MYSQL_STMT *st, int k)
{
    unsigned e = st ? mysql_stmt_errno(st) : mysql_errno(c->my);
    const char *m = st ? mysql_stmt_error(st) : mysql_error(c->my);
    if (!st && c->prep_errno) {
        e = c->prep_errno;
        m = c->prep_error;
    }
    c->prep_errno = 0;
    if (!e) {
        e = mysql_errno(c->my);
        m = mysql_error(c->my);
    }
    db_result_fail(r, e ? classify(c, e) : DB_EINTERNAL, k, "mysql: %s", m && *m ? m : "error");
}

/* Fetches every row of the executed statement into set k; on failure
 * records it (before the result is freed, which resets the error). */
static int fetch_rows(my_conn *c, MYSQL_STMT *st, db_result *r, int k)
{
    MYSQL_RES *meta = mysql_stmt_result_metadata(st);
    if (!meta)
        return 0; /* no result set */
    int rc = -1;
    unsigned ncols = mysql_num_fields(meta);
    MYSQL_FIELD *fields = mysql_fetch_fields(meta);
    MYSQL_BIND *bind = calloc(ncols ? ncols : 1, sizeof *bind);
    db_value *vals = calloc(ncols ? ncols : 1, sizeof *vals);
    unsigned long *lens = calloc(ncols ? ncols : 1, sizeof *lens);
    my_bool *nulls = calloc(ncols ? ncols : 1, sizeof *nulls);
    char **bufs = calloc(ncols ? ncols : 1, sizeof *bufs);
    if (!bind || !vals || !lens || !nulls || !bufs)
        goto oom;
    if (mysql_stmt_store_result(st) != 0) {
        stmt_fail(c, r, st, k);
        goto out;
    }
    for (unsigned j = 0; j < ncols; j++) {
        bind[j].is_null = &nulls[j];
        bind[j].length = &lens[j];
        switch (fields[j].type) {
        case MYSQL_TYPE_TINY:
        case MYSQL_TYPE_SHORT:
        case MYSQL_TYPE_INT24:
        case MYSQL_TYPE_LONG:
        case MYSQL_TYPE_LONGLONG:
            vals[j].type = DB_T_INT;
            bind[j].buffer_type = MYSQL_TYPE_LONGLONG;
            bind[j].buffer = &vals[j].v.i;
            bind[j].is_unsigned = 0;
            break;
        case MYSQL_TYPE_FLOAT:
        case MYSQL_TYPE_DOUBLE:
        case MYSQL_TYPE_DECIMAL:
        case MYSQL_TYPE_NEWDECIMAL:
            vals[j].type = DB_T_DOUBLE;
            bind[j].buffer_type = MYSQL_TYPE_DOUBLE;
            bind[j].buffer = &vals[j].v.d;
            break;
        default:
            vals[j].type = DB_T_TEXT;
            bufs[j] = malloc(fields[j].max_length + 1);
            if (!bufs[j])
                goto oom;
            bind[j].buffer_type = MYSQL_TYPE_STRING;
            bind[j].buffer = bufs[j];
            bind[j].buffer_length = fields[j].max_length + 1;
            break;
        }
    }
    if (ncols && mysql_stmt_bind_result(st, bind) != 0) {
        stmt_fail(c, r, st, k);
        goto out;
    }
    int f;
    while ((f = mysql_stmt_fetch(st)) == 0 || f == MYSQL_DATA_TRUNCATED) {
        db_value *row = db_result_push_row(r, k, (int)ncols);
        if (!row)
            goto oom;
        for (unsigned j = 0; j < ncols; j++) {
            if (nulls[j]) {
                row[j] = db_null();
            } else if (vals[j].type == DB_T_TEXT) {
                size_t len = lens[j] < fields[j].max_length + 1 ? lens[j] : fields[j].max_length;
                const char *copy = db_result_copy(r, bufs[j], len);
                if (!copy)
                    goto oom;
                row[j] = db_text(copy, len);
            } else {
                row[j] = vals[j];
            }
        }
    }
    if (f == MYSQL_NO_DATA)
        rc = 0;
    else
        stmt_fail(c, r, st, k);
    goto out;
oom:
    db_result_fail(r, DB_EINTERNAL, k, "out of memory");
out:
    mysql_stmt_free_result(st);
    for (unsigned j = 0; bufs && j < ncols; j++)
        free(bufs[j]);
    free(bufs);
    free(nulls);
    free(lens);
    free(vals);
    free(bind);
    mysql_free_result(meta);
    return rc;
}

static int my_run(void *p, const db_config *cfg, db_batch *b)
{
    my_conn *c = p;
    db_result *r = &b->result;
    if (db_result_begin(r, b->nitems) < 0) {
        db_result_fail(r, DB_EINTERNAL, -1, "out of memory");
        return 0;
    }
    /* Writes always open a transaction, so the first command of a batch is
     * START TRANSACTION or a read: when it finds the connection dead (the
     * server restarted while it was idle), nothing ran and a retry on a new
     * connection is safe. */
    int tx = b->nitems > 1 || b->write;
    if (tx && simple(c, "START TRANSACTION") < 0) {
        stmt_fail(c, r, NULL, -1);
        return c->broken;
    }
    for (int k = 0; k < b->nitems; k++) {
        const db_item *it = &b->items[k];
        MYSQL_STMT *st = prepared(c, cfg, it->stmt);
        if (!st) {
            stmt_fail(c, r, NULL, k);
            if (!tx && c->broken)
                return 1;
            break;
        }
        MYSQL_BIND bind[DB_MAX_PARAMS];
        unsigned long lens[DB_MAX_PARAMS];
        if (it->nparams > DB_MAX_PARAMS) {
            db_result_fail(r, DB_EINTERNAL, k, "too many parameters");
            break;
        }
        memset(bind, 0, (size_t)it->nparams * sizeof bind[0]);
        for (int i = 0; i < it->nparams; i++) {
            db_value *v = &b->params[it->first + i];
            switch (v->type) {
            case DB_T_INT:
                bind[i].buffer_type = MYSQL_TYPE_LONGLONG;
                bind[i].buffer = &v->v.i;
                break;
            case DB_T_DOUBLE:
                bind[i].buffer_type = MYSQL_TYPE_DOUBLE;
                bind[i].buffer = &v->v.d;
                break;
            case DB_T_TEXT:
                lens[i] = (unsigned long)v->v.s.len;
                bind[i].buffer_type = MYSQL_TYPE_STRING;
                bind[i].buffer = (void *)v->v.s.p;
                bind[i].buffer_length = lens[i];
                bind[i].length = &lens[i];
                break;
            default: bind[i].buffer_type = MYSQL_TYPE_NULL; break;
            }
        }
        if ((it->nparams && mysql_stmt_bind_param(st, bind) != 0) || mysql_stmt_execute(st) != 0) {
            stmt_fail(c, r, st, k);
            if (!tx && c->broken)
                return 1; /* a lone read */
        } else {
            fetch_rows(c, st, r, k);
        }
        if (r->status != DB_OK) {
            /* An error in the middle of a result (INSERT ... RETURNING sends
             * the columns first) leaves the statement mid-protocol. */
            if (!c->broken)
                mysql_stmt_reset(st);
            break;
        }
        r->sets[k].affected = (int64_t)mysql_stmt_affected_rows(st);
    }
    if (c->broken || !tx)
        return 0;
    if (r->status == DB_OK && simple(c, "COMMIT") < 0)
        stmt_fail(c, r, NULL, -1);
    if (r->status != DB_OK && !c->broken && simple(c, "ROLLBACK") < 0)
        c->broken = 1; /* never reuse a connection with a transaction open */
    return 0;
}

static int my_broken(void *p)
{
    return ((my_conn *)p)->broken;
}

const db_backend db_mysql_backend = {
    .open = my_open,
    .exec = my_exec,
    .run = my_run,
    .broken = my_broken,
    .close = my_close,
    .default_pool = 4,
};
