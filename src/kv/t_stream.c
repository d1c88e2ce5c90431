/* Stream commands: XADD, XRANGE, XREAD, consumer groups (XGROUP,
 * XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM), XINFO, XSETID. Replies,
 * errors and propagated effects follow Redis 7.0. */
#include "kv/aof.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/script.h"
#include "kv/stream.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* XREAD/XREADGROUP BLOCK park on the blocking layer when it is built in. */
#if __has_include("kv/blocking.h")
#include "kv/blocking.h"
#define ST_BLOCKING 1
#else
#define ST_BLOCKING 0
#endif

#define ERR_BAD_ID "ERR Invalid stream ID specified as stream command argument"
#define ERR_XADD_SMALL "ERR The ID specified in XADD is equal or smaller than the target stream top item"

static int arg_is(bk_str s, const char *lower)
{
    size_t n = strlen(lower);
    return s.len == n && strncasecmp(s.p, lower, n) == 0;
}

static int is_lit(bk_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.p, lit, n) == 0;
}

/* ---- IDs ---- */

static int parse_u64(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Parses "ms-seq", "ms" (seq = missing_seq), and unless strict "-"/"+".
 * seq_given (when not NULL) accepts "ms-*" and tells which form it was. */
static int id_parse(bk_str s, st_id *id, int strict, uint64_t missing_seq, int *seq_given)
{
    if (seq_given)
        *seq_given = 1;
    if (s.len > 127)
        return -1;
    if (!strict && s.len == 1 && (s.p[0] == '-' || s.p[0] == '+')) {
        *id = s.p[0] == '-' ? ST_ID_MIN : ST_ID_MAX;
        return 0;
    }
    const char *dash = memchr(s.p, '-', s.len);
    if (!dash) {
        if (parse_u64(s.p, s.len, &id->ms) < 0)
            return -1;
        id->seq = missing_seq;
        return 0;
    }
    size_t ml = (size_t)(dash - s.p);
    if (parse_u64(s.p, ml, &id->ms) < 0)
        return -1;
    const char *sp = dash + 1;
    size_t sl = s.len - ml - 1;
    if (seq_given && sl == 1 && sp[0] == '*') {
        id->seq = 0;
        *seq_given = 0;
        return 0;
    }
    return parse_u64(sp, sl, &id->seq);
}

static int id_parse_or_reply(kv_client *c, bk_str s, st_id *id, int strict, uint64_t missing_seq,
                             int *seq_given)
{
    if (id_parse(s, id, strict, missing_seq, seq_given) == 0)
        return 0;
    reply_error(c, ERR_BAD_ID);
    return -1;
}

/* A range bound: "(" makes it exclusive (and parses the rest strictly). */
static int interval_parse(kv_client *c, bk_str s, st_id *id, int *excl, uint64_t missing_seq)
{
    *excl = 0;
    if (s.len > 1 && s.p[0] == '(') {
        *excl = 1;
        s.p++;
        s.len--;
        return id_parse_or_reply(c, s, id, 1, missing_seq, NULL);
    }
    return id_parse_or_reply(c, s, id, 0, missing_seq, NULL);
}

static int id_incr(st_id *id)
{
    if (id->seq == UINT64_MAX) {
        if (id->ms == UINT64_MAX)
            return -1;
        id->ms++;
        id->seq = 0;
    } else {
        id->seq++;
    }
    return 0;
}

static int id_decr(st_id *id)
{
    if (id->seq == 0) {
        if (id->ms == 0)
            return -1;
        id->ms--;
        id->seq = UINT64_MAX;
    } else {
        id->seq--;
    }
    return 0;
}

static void reply_id(kv_client *c, st_id id)
{
    char b[ST_ID_STR_MAX];
    reply_bulk(c, b, st_id_fmt(b, id));
}

/* ---- lookups ---- */

static kv_stream *get_stream(kv_client *c, bk_str key, int write, int *err)
{
    *err = 0;
    kv_entry *e = lookup_typed(c, key, KV_STREAM, write);
    if (e == KV_WRONGTYPE) {
        *err = 1;
        return NULL;
    }
    return e ? entry_obj(e) : NULL;
}

/* Creates a consumer and tells the keyspace: every path that creates one
 * (XGROUP CREATECONSUMER, XREADGROUP, XCLAIM, XAUTOCLAIM) does in Redis. */
static st_consumer *consumer_add(kv_db *db, bk_str key, st_group *g, bk_str name)
{
    st_consumer *cons = group_consumer_create(g, name);
    if (cons)
        kv_notify(db, NOTIFY_STREAM, "xgroup-createconsumer", key);
    return cons;
}

static void reply_nogroup(kv_client *c, bk_str key, bk_str group, const char *tail)
{
    reply_errorf(c, "NOGROUP No such key '%.*s' or consumer group '%.*s'%s", (int)key.len, key.p,
                 (int)group.len, group.p, tail);
}

/* Effects (XCLAIM, XGROUP SETID, ...) go to the AOF in place of the
 * command. As Redis, more than one from a command are wrapped in
 * MULTI/EXEC, so a replica or a reload applies them together: the first is
 * held until a second comes or the command ends (prop_end). Keyspace-thread
 * scratch, empty between commands. */
static struct {
    int n;
    kv_db *db;
    int argc;
    bk_str argv[14];
    bk_buf b;
} held;

/* Whether a write has anywhere to go: aof_feed's own test (AOF on, a
 * child collecting the rewrite diff, or replicas fed). When it has not, the
 * effect commands (an XCLAIM per delivered entry) are not even formatted. */
static inline int prop_wanted(void)
{
    return repl_feeding || srv.aof_state != 0 || srv.child_pid > 0; /* 0: AOF off */
}

static void prop(kv_client *c, int argc, const bk_str *argv)
{
    if ((c->flags & CLIENT_NO_PROPAGATE) || srv.loading || !prop_wanted())
        return;
    if (srv.aof_in_multi != 0) { /* inside EXEC: already wrapped */
        aof_feed(c->db, argc, argv);
        return;
    }
    if (held.n == 0) {
        size_t bytes = 0;
        for (int i = 0; i < argc; i++)
            bytes += argv[i].len;
        held.b.len = 0;
        if (buf_reserve(&held.b, bytes + 1) < 0)
            abort();
        /* copy first, then point into the copy (reserve may move it) */
        size_t off[14];
        for (int i = 0; i < argc; i++) {
            off[i] = held.b.len;
            buf_put(&held.b, argv[i].p, argv[i].len);
        }
        for (int i = 0; i < argc; i++)
            held.argv[i] = (bk_str){ held.b.data + off[i], argv[i].len };
        held.argc = argc;
        held.db = c->db;
        held.n = 1;
        return;
    }
    if (held.n == 1) {
        srv.aof_in_multi = -1; /* aof_feed writes MULTI first */
        aof_feed(held.db, held.argc, held.argv);
    }
    aof_feed(c->db, argc, argv);
    held.n++;
}

/* The command is done: writes a lone held effect, or closes the MULTI. */
static void prop_end(void)
{
    if (held.n == 1)
        aof_feed(held.db, held.argc, held.argv);
    else if (held.n > 1)
        aof_exec_end();
    held.n = 0;
}

static bk_str fmt_ll(char *b, long long v) { return (bk_str){ b, kv_fmt_ll(b, v) }; }
static bk_str fmt_id(char *b, st_id id) { return (bk_str){ b, st_id_fmt(b, id) }; }

/* XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID id:
 * the idempotent form of a delivery (or, for an entry gone from the stream,
 * of dropping its NACK). */
static void prop_xclaim(kv_client *c, bk_str key, st_group *g, st_id id, const st_nack *n)
{
    if (!prop_wanted())
        return;
    char ib[ST_ID_STR_MAX], tb[24], rb[24], lb[ST_ID_STR_MAX];
    bk_str a[14] = { BK_STR("XCLAIM"),     key,
                  { g->name, g->nlen }, { n->consumer->name, n->consumer->nlen },
                  BK_STR("0"),          fmt_id(ib, id),
                  BK_STR("TIME"),       fmt_ll(tb, n->delivery_ms),
                  BK_STR("RETRYCOUNT"), fmt_ll(rb, (long long)n->delivery_count),
                  BK_STR("FORCE"),      BK_STR("JUSTID"),
                  BK_STR("LASTID"),     fmt_id(lb, g->last_id) };
    prop(c, 14, a);
}

static void prop_setid(kv_client *c, bk_str key, st_group *g)
{
    if (!prop_wanted())
        return;
    char ib[ST_ID_STR_MAX], eb[24];
    bk_str a[7] = { BK_STR("XGROUP"), BK_STR("SETID"), key, { g->name, g->nlen }, fmt_id(ib, g->last_id),
                 BK_STR("ENTRIESREAD"), fmt_ll(eb, g->entries_read) };
    prop(c, 7, a);
}

/* ---- range replies ---- */

static void reply_fields(kv_client *c, st_iter *it)
{
    reply_array(c, (long long)it->nfields * 2);
    for (size_t i = 0; i < it->nfields; i++) {
        bk_str f, v;
        st_iter_field(it, &f, &v);
        reply_bulk_str(c, f);
        reply_bulk_str(c, v);
    }
}

enum { RWR_NOACK = 1, RWR_RAW = 2, RWR_HISTORY = 4 };

typedef struct {
    bk_str key;
    int propagate; /* XREADGROUP: emit XCLAIM / XGROUP SETID effects */
} rwr_prop;

static st_nack *nack_new(st_consumer *cons)
{
    st_nack *n = kv_malloc(sizeof *n);
    n->delivery_ms = srv.now_ms;
    n->delivery_count = 1;
    n->consumer = cons;
    return n;
}

static size_t reply_range_pel(kv_client *c, kv_stream *s, st_id start, size_t count,
                              st_consumer *cons);

/* Replies with entries [start, end] (count 0 = all). With a group, delivers
 * them: moves last_id, creates or reassigns NACKs (unless NOACK). */
static size_t reply_range(kv_client *c, kv_stream *s, st_id start, st_id end, size_t count,
                          int rev, st_group *g, st_consumer *cons, int flags, rwr_prop *pi)
{
    if (g && (flags & RWR_HISTORY))
        return reply_range_pel(c, s, start, count, cons);
    size_t handle = 0, n = 0;
    int moved = 0;
    if (!(flags & RWR_RAW))
        handle = reply_defer(c);
    st_iter it;
    st_iter_start(&it, s, start, end, rev);
    while (st_iter_next(&it)) {
        st_id id = it.id;
        if (g && st_id_cmp(id, g->last_id) > 0) {
            if (g->entries_read != ST_INVALID_READ &&
                !stream_range_has_tombstones(s, id, 0, ST_ID_MAX))
                g->entries_read++;
            else if (s->entries_added)
                g->entries_read = stream_estimate_distance(s, id);
            g->last_id = id;
            moved = 1;
        }
        reply_array(c, 2);
        reply_id(c, id);
        reply_fields(c, &it);
        if (g && !(flags & RWR_NOACK)) {
            st_nack *x = pel_find(&g->pel, id);
            if (!x) {
                x = nack_new(cons);
                x->id = id;
                pel_insert(&g->pel, x);
                pel_insert(&cons->pel, x);
            } else {
                if (x->consumer != cons) {
                    pel_remove(&x->consumer->pel, id);
                    x->consumer = cons;
                    pel_insert(&cons->pel, x);
                }
                x->delivery_ms = srv.now_ms;
                x->delivery_count = 1;
            }
            if (pi && pi->propagate)
                prop_xclaim(c, pi->key, g, id, x);
        }
        n++;
        if (count && n == count)
            break;
    }
    st_iter_stop(&it);
    /* Redis 7.0 sends the group's new last ID only with NOACK: otherwise
     * the XCLAIMs' LASTID carries it. */
    if (pi && pi->propagate && moved && (flags & RWR_NOACK))
        prop_setid(c, pi->key, g);
    if (!(flags & RWR_RAW))
        reply_defer_array(c, handle, (long long)n);
    return n;
}

/* One entry as [id, [fields...]], or nothing (returns 0) when it is gone. */
static size_t reply_one(kv_client *c, kv_stream *s, st_id id)
{
    return reply_range(c, s, id, id, 1, 0, NULL, NULL, RWR_RAW, NULL);
}

/* A consumer's history: its pending entries from start on. */
static size_t reply_range_pel(kv_client *c, kv_stream *s, st_id start, size_t count,
                              st_consumer *cons)
{
    size_t handle = reply_defer(c), n = 0;
    for (size_t i = pel_lower(&cons->pel, start); i < cons->pel.n && (!count || n < count);
         i++) {
        st_nack *x = cons->pel.v[i];
        if (reply_one(c, s, x->id) == 0) {
            reply_array(c, 2);
            reply_id(c, x->id);
            reply_null_array(c);
        } else {
            x->delivery_ms = srv.now_ms;
            x->delivery_count++;
        }
        n++;
    }
    reply_defer_array(c, handle, (long long)n);
    return n;
}

/* ---- XADD / XTRIM ---- */

typedef struct {
    int strategy, approx, limit_given, nomk, id_given, seq_given;
    long long maxlen, limit;
    st_id minid, id;
    int strat_idx; /* argv index of the MAXLEN/MINID value */
    int limit_idx;
} trim_args;

/* Parses [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] and, for
 * XADD, the ID. Returns the argv index of the ID (XADD) or argc, -1 after
 * replying an error. */
static int parse_trim(kv_client *c, trim_args *a, int xadd)
{
    memset(a, 0, sizeof *a);
    int i = 2;
    for (; i < c->argc; i++) {
        int more = c->argc - 1 - i;
        bk_str o = c->argv[i];
        if (xadd && is_lit(o, "*")) {
            break;
        } else if ((arg_is(o, "maxlen") || arg_is(o, "minid")) && more) {
            int maxlen = arg_is(o, "maxlen");
            if (a->strategy != ST_TRIM_NONE) {
                reply_error(c, "ERR syntax error, MAXLEN and MINID options at the same time are "
                               "not compatible");
                return -1;
            }
            a->approx = 0;
            bk_str nx = c->argv[i + 1];
            if (more >= 2 && is_lit(nx, "~")) {
                a->approx = 1;
                i++;
            } else if (more >= 2 && is_lit(nx, "=")) {
                i++;
            }
            if (maxlen) {
                if (arg_ll(c, c->argv[i + 1], &a->maxlen) < 0)
                    return -1;
                if (a->maxlen < 0) {
                    reply_error(c, "ERR The MAXLEN argument must be >= 0.");
                    return -1;
                }
                a->strategy = ST_TRIM_MAXLEN;
            } else {
                if (id_parse_or_reply(c, c->argv[i + 1], &a->minid, 1, 0, NULL) < 0)
                    return -1;
                a->strategy = ST_TRIM_MINID;
            }
            i++;
            a->strat_idx = i;
        } else if (arg_is(o, "limit") && more) {
            if (arg_ll(c, c->argv[i + 1], &a->limit) < 0)
                return -1;
            if (a->limit < 0) {
                reply_error(c, "ERR The LIMIT argument must be >= 0.");
                return -1;
            }
            a->limit_given = 1;
            a->limit_idx = i;
            i++;
        } else if (xadd && arg_is(o, "nomkstream")) {
            a->nomk = 1;
        } else if (xadd) {
            if (id_parse_or_reply(c, o, &a->id, 1, 0, &a->seq_given) < 0)
                return -1;
            a->id_given = 1;
            break;
        } else {
            reply_error(c, ERR_SYNTAX);
            return -1;
        }
    }
    if (a->limit_given && a->limit && a->strategy == ST_TRIM_NONE) {
        reply_error(c, "ERR syntax error, LIMIT cannot be used without specifying a trimming "
                       "strategy");
        return -1;
    }
    if (!xadd && a->strategy == ST_TRIM_NONE) {
        reply_error(c, "ERR syntax error, XTRIM must be called with a trimming strategy");
        return -1;
    }
    if (a->limit_given) {
        if (!a->approx) {
            reply_error(c, "ERR syntax error, LIMIT cannot be used without the special ~ option");
            return -1;
        }
    } else if (a->approx) {
        long long m = (long long)stream_node_max_entries();
        a->limit = 100 * m;
        if (a->limit <= 0 || a->limit > 1000000)
            a->limit = 10000;
    } else {
        a->limit = 0;
    }
    return i;
}

/* Builds the propagated form of an XADD/XTRIM that trimmed approximately
 * (or generated its ID): "~" becomes "=", the threshold becomes what the
 * stream now holds, LIMIT goes, the ID is the one generated. */
static void prop_trim_rewrite(kv_client *c, kv_stream *s, const trim_args *a, int idpos,
                              st_id id)
{
    bk_str *v = kv_malloc((size_t)c->argc * sizeof *v);
    char tb[ST_ID_STR_MAX], ib[ST_ID_STR_MAX];
    int n = 0;
    for (int i = 0; i < c->argc; i++) {
        if (a->approx && a->limit_given && (i == a->limit_idx || i == a->limit_idx + 1))
            continue;
        bk_str x = c->argv[i];
        if (a->approx && i == a->strat_idx - 1 && is_lit(x, "~"))
            x = BK_STR("=");
        else if (a->approx && i == a->strat_idx) {
            if (a->strategy == ST_TRIM_MAXLEN)
                x = (bk_str){ tb, kv_fmt_ll(tb, (long long)s->length) };
            else
                x = fmt_id(tb, stream_edge_id(s, 1));
        } else if (idpos > 0 && i == idpos && (!a->id_given || !a->seq_given))
            x = fmt_id(ib, id);
        v[n++] = x;
    }
    kv_propagate_as(c, n, v);
    kv_free(v);
}

void xadd_command(kv_client *c)
{
    trim_args a;
    int idpos = parse_trim(c, &a, 1);
    if (idpos < 0)
        return;
    int fpos = idpos + 1;
    if (c->argc - fpos < 2 || (c->argc - fpos) % 2 == 1) {
        reply_arity_error(c, "xadd");
        return;
    }
    if (a.id_given && a.seq_given && st_id_zero(a.id)) {
        reply_error(c, "ERR The ID specified in XADD must be greater than 0-0");
        return;
    }
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 1, &err);
    if (err)
        return;
    int created = 0;
    if (!s) {
        if (a.nomk) {
            reply_null(c);
            return;
        }
        s = stream_new();
        created = 1;
    }
    if (s->last_id.ms == UINT64_MAX && s->last_id.seq == UINT64_MAX) {
        reply_error(c, "ERR The stream has exhausted the last possible ID, unable to add more "
                       "items");
        goto fail;
    }
    st_id id;
    if (a.id_given) {
        if (a.seq_given) {
            id = a.id;
        } else if (s->last_id.ms == a.id.ms) {
            if (s->last_id.seq == UINT64_MAX) {
                reply_error(c, ERR_XADD_SMALL);
                goto fail;
            }
            id = s->last_id;
            id.seq++;
        } else {
            id = a.id;
        }
    } else {
        uint64_t ms = (uint64_t)srv.now_ms;
        if (ms > s->last_id.ms) {
            id = (st_id){ ms, 0 };
        } else {
            id = s->last_id;
            id_incr(&id);
        }
    }
    if (st_id_cmp(id, s->last_id) <= 0) {
        reply_error(c, ERR_XADD_SMALL);
        goto fail;
    }
    size_t total = 0;
    for (int i = fpos; i < c->argc; i++)
        total += c->argv[i].len;
    if (total > UINT32_MAX / 4) {
        reply_error(c, "ERR Elements are too large to be stored");
        goto fail;
    }
    if (created)
        db_add_obj(c->db, c->argv[1], KV_STREAM, s);
    stream_append(s, id, c->argv + fpos, (size_t)(c->argc - fpos) / 2);
#if ST_BLOCKING
    blocking_signal(c->db, c->argv[1]);
#endif
    reply_id(c, id);
    kv_notify(c->db, NOTIFY_STREAM, "xadd", c->argv[1]);
    kv_dirty(1);
    if (a.strategy != ST_TRIM_NONE &&
        stream_trim(s, a.strategy, a.maxlen, a.minid, a.approx, a.limit))
        kv_notify(c->db, NOTIFY_STREAM, "xtrim", c->argv[1]);
    /* the original argv goes nowhere either when nothing is fed */
    if ((a.approx || !a.id_given || !a.seq_given) && prop_wanted())
        prop_trim_rewrite(c, s, &a, idpos, id);
    return;
fail:
    if (created)
        stream_free(s);
}

void xtrim_command(kv_client *c)
{
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!s) {
        reply_int(c, 0);
        return;
    }
    trim_args a;
    if (parse_trim(c, &a, 0) < 0)
        return;
    long long n = stream_trim(s, a.strategy, a.maxlen, a.minid, a.approx, a.limit);
    if (n) {
        kv_notify(c->db, NOTIFY_STREAM, "xtrim", c->argv[1]);
        kv_dirty(n);
        if (a.approx)
            prop_trim_rewrite(c, s, &a, -1, ST_ID_MIN);
    }
    reply_int(c, n);
}

void xlen_command(kv_client *c)
{
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 0, &err);
    if (!err)
        reply_int(c, s ? (long long)s->length : 0);
}

static void range_generic(kv_client *c, int rev)
{
    bk_str sa = c->argv[rev ? 3 : 2], ea = c->argv[rev ? 2 : 3];
    st_id start, end;
    int sx, ex;
    long long count = -1;
    if (interval_parse(c, sa, &start, &sx, 0) < 0)
        return;
    if (sx && id_incr(&start) < 0) {
        reply_error(c, "ERR invalid start ID for the interval");
        return;
    }
    if (interval_parse(c, ea, &end, &ex, UINT64_MAX) < 0)
        return;
    if (ex && id_decr(&end) < 0) {
        reply_error(c, "ERR invalid end ID for the interval");
        return;
    }
    for (int j = 4; j < c->argc; j++) {
        if (arg_is(c->argv[j], "count") && j + 1 < c->argc) {
            if (arg_ll(c, c->argv[j + 1], &count) < 0)
                return;
            if (count < 0)
                count = 0;
            j++;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 0, &err);
    if (err)
        return;
    if (!s) {
        reply_empty_array(c);
        return;
    }
    if (count == 0) {
        reply_null_array(c);
        return;
    }
    reply_range(c, s, start, end, count == -1 ? 0 : (size_t)count, rev, NULL, NULL, 0, NULL);
}

void xrange_command(kv_client *c) { range_generic(c, 0); }
void xrevrange_command(kv_client *c) { range_generic(c, 1); }

void xdel_command(kv_client *c)
{
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!s) {
        reply_int(c, 0);
        return;
    }
    size_t n = (size_t)c->argc - 2;
    st_id *ids = kv_malloc(n * sizeof *ids);
    for (size_t j = 0; j < n; j++) {
        if (id_parse_or_reply(c, c->argv[2 + j], &ids[j], 1, 0, NULL) < 0)
            goto done;
    }
    long long deleted = 0;
    for (size_t j = 0; j < n; j++) {
        if (stream_delete(s, ids[j])) {
            if (st_id_cmp(ids[j], s->max_deleted_id) > 0)
                s->max_deleted_id = ids[j];
            deleted++;
        }
    }
    if (deleted) {
        kv_notify(c->db, NOTIFY_STREAM, "xdel", c->argv[1]);
        kv_dirty(deleted);
    }
    reply_int(c, deleted);
done:
    kv_free(ids);
}

void xsetid_command(kv_client *c)
{
    st_id id, maxdel = { 0, 0 };
    long long added = -1;
    if (id_parse_or_reply(c, c->argv[2], &id, 1, 0, NULL) < 0)
        return;
    for (int i = 3; i < c->argc; i++) {
        int more = c->argc - 1 - i;
        if (arg_is(c->argv[i], "entriesadded") && more) {
            if (arg_ll(c, c->argv[i + 1], &added) < 0)
                return;
            if (added < 0) {
                reply_error(c, "ERR entries_added must be positive");
                return;
            }
            i++;
        } else if (arg_is(c->argv[i], "maxdeletedid") && more) {
            if (id_parse_or_reply(c, c->argv[i + 1], &maxdel, 1, 0, NULL) < 0)
                return;
            if (st_id_cmp(id, maxdel) < 0) {
                reply_error(c, "ERR The ID specified in XSETID is smaller than the provided "
                               "max_deleted_entry_id");
                return;
            }
            i++;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!s) {
        reply_error(c, ERR_NO_KEY);
        return;
    }
    if (s->length > 0) {
        if (st_id_cmp(id, stream_edge_id(s, 0)) < 0) {
            reply_error(c, "ERR The ID specified in XSETID is smaller than the target stream top "
                           "item");
            return;
        }
        if (added != -1 && s->length > (uint64_t)added) {
            reply_error(c, "ERR The entries_added specified in XSETID is smaller than the target "
                           "stream length");
            return;
        }
    }
    /* Redis 7.0 does not compare the ID with the stream's current
     * max_deleted_entry_id (only with a MAXDELETEDID given). */
    s->last_id = id;
    if (added != -1)
        s->entries_added = (uint64_t)added;
    if (!st_id_zero(maxdel))
        s->max_deleted_id = maxdel;
    reply_ok(c);
    kv_notify(c->db, NOTIFY_STREAM, "xsetid", c->argv[1]);
    kv_dirty(1);
}

/* ---- XREAD / XREADGROUP ---- */

#if ST_BLOCKING
/* The parked command's argv (a copy the blocking layer owns) holds what the
 * serve needs: param[0] count, [1] noack, [2] streams_arg, [3] nstreams.
 * A "$" ID was replaced by the stream's last ID before parking, so entries
 * added later are what the client gets. */
static int stream_serve(kv_client *c, kv_db *db, bk_str key, kv_entry *e);

static const kv_block_kind stream_kind = { KV_STREAM, stream_serve, reply_null_array };

static int st_park_denied(const kv_client *c) { return blocking_denied(c); }

static void st_park(kv_client *c, int group_mode, int streams_arg, int nstreams,
                     const st_id *ids, long long count, int noack, long long timeout)
{
    /* Pin "$" to the IDs resolved now: the copy blocking_park makes of
     * argv takes these strings; argv is restored right after. */
    char (*bufs)[ST_ID_STR_MAX] = NULL;
    bk_str *saved = NULL;
    if (!group_mode) {
        bufs = kv_malloc((size_t)nstreams * sizeof *bufs);
        saved = kv_malloc((size_t)nstreams * sizeof *saved);
        for (int k = 0; k < nstreams; k++) {
            int at = streams_arg + nstreams + k;
            saved[k] = c->argv[at];
            if (is_lit(c->argv[at], "$"))
                c->argv[at] = fmt_id(bufs[k], ids[k]);
        }
    }
    if (group_mode) {
        for (int k = 0; k < nstreams; k++) {
            int err;
            kv_stream *s = get_stream(c, c->argv[streams_arg + k], 0, &err);
            if (s)
                s->group_waiters = 1;
        }
    }
    kv_bstate *b = blocking_park(c, &stream_kind, streams_arg, nstreams, timeout);
    b->param[0] = count;
    b->param[1] = noack;
    b->param[2] = streams_arg;
    b->param[3] = nstreams;
    if (!group_mode) {
        for (int k = 0; k < nstreams; k++)
            c->argv[streams_arg + nstreams + k] = saved[k];
        kv_free(bufs);
        kv_free(saved);
    }
}

static int stream_serve(kv_client *c, kv_db *db, bk_str key, kv_entry *e)
{
    kv_bstate *b = c->bstate;
    int group_mode = b->cmd->proc == xreadgroup_command;
    int sa = (int)b->param[2], n = (int)b->param[3];
    int k = 0;
    while (k < n && !(b->argv[sa + k].len == key.len && memcmp(b->argv[sa + k].p, key.p,
                                                               key.len) == 0))
        k++;
    if (k == n)
        return 0;
    kv_stream *s = entry_obj(e);
    bk_str ida = b->argv[sa + n + k];
    st_group *g = NULL;
    st_id gt;
    if (group_mode) {
        bk_str gname = { 0 };
        for (int i = 1; i + 2 < b->argc; i++)
            if (arg_is(b->argv[i], "group")) {
                gname = b->argv[i + 1];
                break;
            }
        g = stream_group_find(s, gname);
        if (!g) {
            reply_error(c, "NOGROUP the consumer group this client was blocked on no longer "
                           "exists");
            return 1;
        }
        gt = g->last_id;
    } else if (id_parse(ida, &gt, 1, 0, NULL) < 0) {
        return 0;
    }
    if (s->length == 0 || st_id_cmp(stream_edge_id(s, 0), gt) <= 0)
        return 0;
    kv_db *saved_db = c->db;
    c->db = db;
    st_id start = gt;
    id_incr(&start);
    if (c->resp == 2) {
        reply_array(c, 1);
        reply_array(c, 2);
    } else {
        reply_map(c, 1);
    }
    reply_bulk_str(c, key);
    st_consumer *cons = NULL;
    if (g) {
        bk_str cname = { 0 };
        for (int i = 1; i + 2 < b->argc; i++)
            if (arg_is(b->argv[i], "group")) {
                cname = b->argv[i + 2];
                break;
            }
        cons = group_consumer_find(g, cname);
        if (!cons) {
            cons = consumer_add(db, key, g, cname);
            /* as in XREADGROUP itself: with NOACK no XCLAIM recreates the
             * consumer on replay, so its creation is propagated */
            if (b->param[1]) {
                bk_str gname = { 0 };
                for (int i = 1; i + 2 < b->argc; i++)
                    if (arg_is(b->argv[i], "group")) {
                        gname = b->argv[i + 1];
                        break;
                    }
                bk_str cc[5] = { BK_STR("XGROUP"), BK_STR("CREATECONSUMER"), key, gname, cname };
                prop(c, 5, cc);
            }
        }
        cons->seen_ms = srv.now_ms;
    }
    rwr_prop pi = { key, 1 };
    reply_range(c, s, start, ST_ID_MAX, (size_t)b->param[0], 0, g, cons,
                b->param[1] ? RWR_NOACK : 0, g ? &pi : NULL);
    if (g)
        kv_dirty(1);
    prop_end();
    c->db = saved_db;
    return 1;
}
/* Redis 7.0 unblocks an XREADGROUP whose stream was deleted or replaced by
 * another type (DEL, SET, FLUSHALL, ...) with an error. A stream freed while
 * it had such waiters schedules this check after the batch, when what the
 * command did is final (a RENAME over the key leaves a stream: served). */
static void orphan_check(bk_loop *l, bk_timer *t)
{
    (void)l, (void)t;
    for (kv_client *c = srv.clients; c; c = c->next) {
        kv_bstate *b = c->bstate;
        if (!c->blocked || !b || b->kind != &stream_kind || b->cmd->proc != xreadgroup_command)
            continue;
        int sa = (int)b->param[2], n = (int)b->param[3], gone = 0;
        for (int k = 0; k < n && !gone; k++) {
            kv_entry *e = db_find(b->db, b->argv[sa + k]);
            gone = !e || db_expired(e) || e->type != KV_STREAM;
        }
        if (!gone)
            continue;
        c->cmd = b->cmd;
        reply_error(c, "UNBLOCKED the stream key no longer exists");
        blocking_done(c);
    }
}

void stream_waiters_check_later(void)
{
    if (!srv.blk_nclients || timer_active(&srv.stream_orphan_timer))
        return;
    timer_init(&srv.stream_orphan_timer, orphan_check, NULL);
    timer_start(&srv.loop, &srv.stream_orphan_timer, 0);
}
#else
void stream_waiters_check_later(void) {}

static int st_park_denied(const kv_client *c)
{
    (void)c;
    return 1;
}
static void st_park(kv_client *c, int group_mode, int streams_arg, int nstreams,
                     const st_id *ids, long long count, int noack, long long timeout)
{
    (void)c, (void)group_mode, (void)streams_arg, (void)nstreams, (void)ids, (void)count,
        (void)noack, (void)timeout;
}
#endif


static void read_generic(kv_client *c, int group_mode)
{
    long long count = 0, timeout = -1;
    int streams_arg = 0, nstreams = 0, noack = 0;
    bk_str gname = { 0 }, cname = { 0 };
    int has_group = 0;
    st_id *ids = NULL;
    st_group **groups = NULL;
    for (int i = 1; i < c->argc; i++) {
        int more = c->argc - i - 1;
        bk_str o = c->argv[i];
        if (arg_is(o, "block") && more) {
            if (script_running()) {
                /* the command's own error, as Redis's (the debugger logs
                 * it as a reply) */
                reply_errorf(c, "ERR %s command is not allowed with BLOCK option from scripts",
                             group_mode ? "xreadgroup" : "xread");
                return;
            }
            i++;
#if ST_BLOCKING
            int64_t ms;
            if (blocking_timeout_ms_arg(c, c->argv[i], &ms) < 0)
                return;
            timeout = ms;
#else
            if (kv_parse_ll(c->argv[i].p, c->argv[i].len, &timeout) != 0) {
                reply_error(c, "ERR timeout is not an integer or out of range");
                return;
            }
            if (timeout < 0) {
                reply_error(c, "ERR timeout is negative");
                return;
            }
#endif
        } else if (arg_is(o, "count") && more) {
            i++;
            if (arg_ll(c, c->argv[i], &count) < 0)
                return;
            if (count < 0)
                count = 0;
        } else if (arg_is(o, "streams") && more) {
            streams_arg = i + 1;
            nstreams = c->argc - streams_arg;
            if (nstreams % 2 != 0) {
                /* Redis 7.0 names XREAD here for XREADGROUP too. */
                reply_error(c, "ERR Unbalanced XREAD list of streams: for each stream key an "
                               "ID or '$' must be specified.");
                return;
            }
            nstreams /= 2;
            break;
        } else if (arg_is(o, "group") && more >= 2) {
            if (!group_mode) {
                reply_error(c, "ERR The GROUP option is only supported by XREADGROUP. You "
                               "called XREAD instead.");
                return;
            }
            gname = c->argv[i + 1];
            cname = c->argv[i + 2];
            has_group = 1;
            i += 2;
        } else if (arg_is(o, "noack")) {
            if (!group_mode) {
                reply_error(c, "ERR The NOACK option is only supported by XREADGROUP. You "
                               "called XREAD instead.");
                return;
            }
            noack = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    if (streams_arg == 0) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (group_mode && !has_group) {
        reply_error(c, "ERR Missing GROUP option for XREADGROUP");
        return;
    }
    ids = kv_malloc((size_t)nstreams * sizeof *ids);
    if (has_group)
        groups = kv_calloc((size_t)nstreams * sizeof *groups);
    for (int k = 0; k < nstreams; k++) {
        bk_str key = c->argv[streams_arg + k], ida = c->argv[streams_arg + nstreams + k];
        int err;
        kv_stream *s = get_stream(c, key, 0, &err);
        if (err)
            goto done;
        if (has_group) {
            st_group *g = s ? stream_group_find(s, gname) : NULL;
            if (!g) {
                reply_nogroup(c, key, gname, " in XREADGROUP with GROUP option");
                goto done;
            }
            groups[k] = g;
        }
        if (is_lit(ida, "$")) {
            if (group_mode) {
                reply_error(c, "ERR The $ ID is meaningless in the context of XREADGROUP: you "
                               "want to read the history of this consumer by specifying a "
                               "proper ID, or use the > ID to get new messages. The $ ID would "
                               "just return an empty result set.");
                goto done;
            }
            ids[k] = s ? s->last_id : ST_ID_MIN;
            continue;
        }
        if (is_lit(ida, ">")) {
            if (!group_mode) {
                reply_error(c, "ERR The > ID can be specified only when calling XREADGROUP "
                               "using the GROUP <group> <consumer> option.");
                goto done;
            }
            ids[k] = ST_ID_MAX;
            continue;
        }
        if (id_parse_or_reply(c, ida, &ids[k], 1, 0, NULL) < 0)
            goto done;
    }
    size_t handle = 0, served = 0;
    for (int k = 0; k < nstreams; k++) {
        bk_str key = c->argv[streams_arg + k];
        int err;
        kv_stream *s = get_stream(c, key, 0, &err);
        if (!s)
            continue;
        st_id gt = ids[k];
        int serve = 0, history = 0;
        if (groups) {
            if (gt.ms != UINT64_MAX || gt.seq != UINT64_MAX) {
                serve = history = 1;
            } else if (s->length) {
                st_id maxid = stream_edge_id(s, 0);
                if (st_id_cmp(maxid, groups[k]->last_id) > 0) {
                    serve = 1;
                    gt = groups[k]->last_id;
                }
            }
        } else if (s->length) {
            if (st_id_cmp(stream_edge_id(s, 0), gt) > 0)
                serve = 1;
        }
        if (!serve)
            continue;
        if (served++ == 0)
            handle = reply_defer(c);
        st_id start = gt;
        id_incr(&start);
        if (c->resp == 2)
            reply_array(c, 2);
        reply_bulk_str(c, key);
        st_consumer *cons = NULL;
        if (groups) {
            cons = group_consumer_find(groups[k], cname);
            if (!cons) {
                cons = consumer_add(c->db, key, groups[k], cname);
                /* With NOACK no XCLAIM will recreate the consumer on replay:
                 * Redis 7.0 propagates its creation. */
                if (noack) {
                    bk_str cc[5] = { BK_STR("XGROUP"), BK_STR("CREATECONSUMER"), key, gname, cname };
                    prop(c, 5, cc);
                }
            }
            cons->seen_ms = srv.now_ms;
        }
        rwr_prop pi = { key, 1 };
        int flags = (noack ? RWR_NOACK : 0) | (history ? RWR_HISTORY : 0);
        reply_range(c, s, start, ST_ID_MAX, (size_t)count, 0, groups ? groups[k] : NULL, cons,
                    flags, groups ? &pi : NULL);
        if (groups) {
            kv_dirty(1);
            if (srv.watch_keys)
                kv_touch_key(c->db, key);
        }
    }
    if (served) {
        if (c->resp == 2)
            reply_defer_array(c, handle, (long long)served);
        else
            reply_defer_map(c, handle, (long long)served);
    } else if (timeout != -1 && !st_park_denied(c)) {
        st_park(c, group_mode, streams_arg, nstreams, ids, count, noack, timeout);
    } else {
        /* Nothing to serve now (without the blocking layer, BLOCK behaves
         * like an immediate timeout). */
        reply_null_array(c);
    }
    if (group_mode) {
        prop_end();
        kv_propagate_as(c, 0, NULL); /* only the effects (XCLAIM, SETID) */
    }
done:
    kv_free(ids);
    kv_free(groups);
}

void xread_command(kv_client *c) { read_generic(c, 0); }
void xreadgroup_command(kv_client *c) { read_generic(c, 1); }

/* ---- XGROUP ---- */

static void subcmd_arity_error(kv_client *c, const char *cmd, bk_str sub)
{
    char name[64];
    size_t n = BK_MIN(sub.len, sizeof name - 1);
    for (size_t i = 0; i < n; i++)
        name[i] = (char)((sub.p[i] >= 'A' && sub.p[i] <= 'Z') ? sub.p[i] + 32 : sub.p[i]);
    name[n] = '\0';
    reply_errorf(c, "ERR wrong number of arguments for '%s|%s' command", cmd, name);
}

static void reply_help(kv_client *c, const char *const *lines)
{
    size_t n = 0;
    while (lines[n])
        n++;
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++)
        reply_simple(c, lines[i]);
}

static const char *const xgroup_help[] = {
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
    NULL,
};

static const char *const xinfo_help[] = {
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
    NULL,
};

/* Subcommand arities (Redis's, negative = at least). */
static const struct {
    const char *name;
    int arity;
} xgroup_subs[] = { { "create", -5 }, { "setid", -5 },      { "destroy", 4 },
                    { "createconsumer", 5 }, { "delconsumer", 5 }, { "help", 2 } },
  xinfo_subs[] = { { "stream", -3 }, { "groups", 3 }, { "consumers", 4 }, { "help", 2 } };

/* 0 when argc fits the subcommand's arity; otherwise replies. */
static int check_sub(kv_client *c, const char *cmd, const void *tab, size_t n, int *which)
{
    const struct {
        const char *name;
        int arity;
    } *t = tab;
    bk_str sub = c->argv[1];
    for (size_t i = 0; i < n; i++) {
        if (arg_is(sub, t[i].name)) {
            int ar = t[i].arity;
            if ((ar > 0 && c->argc != ar) || (ar < 0 && c->argc < -ar)) {
                subcmd_arity_error(c, cmd, sub);
                return -1;
            }
            *which = (int)i;
            return 0;
        }
    }
    char up[8];
    snprintf(up, sizeof up, "%s", cmd);
    for (char *p = up; *p; p++)
        *p = (char)(*p - 32);
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)BK_MIN(sub.len, 128),
                 sub.p, up);
    return -1;
}

static void reply_subcmd_syntax(kv_client *c, const char *up)
{
    bk_str sub = c->argv[1];
    reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try %s HELP.",
                 (int)BK_MIN(sub.len, 128), sub.p, up);
}

void xgroup_command(kv_client *c)
{
    int which;
    if (check_sub(c, "xgroup", xgroup_subs, BK_ARRAY_LEN(xgroup_subs), &which) < 0)
        return;
    const char *sub = xgroup_subs[which].name;
    if (strcmp(sub, "help") == 0) {
        reply_help(c, xgroup_help);
        return;
    }
    int mkstream = 0;
    long long entries_read = ST_INVALID_READ;
    if (strcmp(sub, "create") == 0) {
        for (int i = 5; i < c->argc;) {
            if (arg_is(c->argv[i], "mkstream")) {
                mkstream = 1;
                i++;
            } else if (arg_is(c->argv[i], "entriesread") && i + 1 < c->argc) {
                if (arg_ll(c, c->argv[i + 1], &entries_read) < 0)
                    return;
                if (entries_read < 0 && entries_read != ST_INVALID_READ) {
                    reply_error(c, "ERR value for ENTRIESREAD must be positive or -1");
                    return;
                }
                i += 2;
            } else {
                reply_subcmd_syntax(c, "XGROUP");
                return;
            }
        }
    } else if (strcmp(sub, "setid") == 0) {
        /* ENTRIESREAD n pairs in turn (a bad value is reported before a
         * stray argument after it), as Redis parses them */
        for (int i = 5; i < c->argc; i += 2) {
            if (!arg_is(c->argv[i], "entriesread") || i + 1 >= c->argc) {
                reply_subcmd_syntax(c, "XGROUP");
                return;
            }
            if (arg_ll(c, c->argv[i + 1], &entries_read) < 0)
                return;
            if (entries_read < 0 && entries_read != ST_INVALID_READ) {
                reply_error(c, "ERR value for ENTRIESREAD must be positive or -1");
                return;
            }
        }
    }
    bk_str key = c->argv[2], gname = c->argv[3];
    int err;
    kv_stream *s = get_stream(c, key, 1, &err);
    if (err)
        return;
    if (!s && !(strcmp(sub, "create") == 0 && mkstream)) {
        reply_error(c, "ERR The XGROUP subcommand requires the key to exist. Note that for "
                       "CREATE you may want to use the MKSTREAM option to create an empty "
                       "stream automatically.");
        return;
    }
    st_group *g = stream_group_find(s, gname);
    if (!g && (strcmp(sub, "setid") == 0 || strcmp(sub, "createconsumer") == 0 ||
               strcmp(sub, "delconsumer") == 0)) {
        reply_errorf(c, "NOGROUP No such consumer group '%.*s' for key name '%.*s'",
                     (int)gname.len, gname.p, (int)key.len, key.p);
        return;
    }
    /* Options were parsed as pairs; only then are the counts checked (a
     * repeated option is a syntax error here, after key and group), as in
     * Redis. */
    if ((strcmp(sub, "setid") == 0 && c->argc != 5 && c->argc != 7) ||
        (strcmp(sub, "create") == 0 && c->argc > 8)) {
        reply_subcmd_syntax(c, "XGROUP");
        return;
    }
    if (strcmp(sub, "create") == 0) {
        st_id id;
        if (is_lit(c->argv[4], "$"))
            id = s ? s->last_id : ST_ID_MIN;
        else if (id_parse_or_reply(c, c->argv[4], &id, 1, 0, NULL) < 0)
            return;
        if (!s) {
            s = stream_new();
            db_add_obj(c->db, key, KV_STREAM, s);
        }
        if (stream_group_create(s, gname, id, entries_read)) {
            reply_ok(c);
            kv_notify(c->db, NOTIFY_STREAM, "xgroup-create", key);
            kv_dirty(1);
        } else {
            reply_error(c, "BUSYGROUP Consumer Group name already exists");
        }
    } else if (strcmp(sub, "setid") == 0) {
        st_id id;
        if (is_lit(c->argv[4], "$"))
            id = s->last_id;
        else if (id_parse_or_reply(c, c->argv[4], &id, 0, 0, NULL) < 0)
            return;
        g->last_id = id;
        g->entries_read = entries_read;
        reply_ok(c);
        kv_notify(c->db, NOTIFY_STREAM, "xgroup-setid", key);
        kv_dirty(1);
    } else if (strcmp(sub, "destroy") == 0) {
        if (stream_group_destroy(s, gname)) {
            reply_int(c, 1);
            kv_notify(c->db, NOTIFY_STREAM, "xgroup-destroy", key);
            kv_dirty(1);
#if ST_BLOCKING
            blocking_signal(c->db, key); /* its XREADGROUP waiters get NOGROUP */
#endif
        } else {
            reply_int(c, 0);
        }
    } else if (strcmp(sub, "createconsumer") == 0) {
        st_consumer *cons = consumer_add(c->db, key, g, c->argv[4]);
        if (cons)
            kv_dirty(1);
        reply_int(c, cons ? 1 : 0);
    } else { /* delconsumer */
        if (!group_consumer_find(g, c->argv[4])) {
            reply_int(c, 0);
            return;
        }
        reply_int(c, (long long)group_consumer_delete(g, c->argv[4]));
        kv_notify(c->db, NOTIFY_STREAM, "xgroup-delconsumer", key);
        kv_dirty(1);
    }
}

/* ---- XACK / XPENDING / XCLAIM / XAUTOCLAIM ---- */

static void nack_drop(st_group *g, st_nack *x)
{
    pel_remove(&g->pel, x->id);
    if (x->consumer)
        pel_remove(&x->consumer->pel, x->id);
    kv_free(x);
}

void xack_command(kv_client *c)
{
    int err;
    kv_stream *s = get_stream(c, c->argv[1], 0, &err);
    if (err)
        return;
    st_group *g = s ? stream_group_find(s, c->argv[2]) : NULL;
    size_t n = (size_t)c->argc - 3;
    st_id *ids = kv_malloc(n * sizeof *ids);
    for (size_t j = 0; j < n; j++)
        if (id_parse_or_reply(c, c->argv[3 + j], &ids[j], 1, 0, NULL) < 0)
            goto done;
    long long acked = 0;
    if (g) {
        for (size_t j = 0; j < n; j++) {
            st_nack *x = pel_find(&g->pel, ids[j]);
            if (x) {
                nack_drop(g, x);
                acked++;
            }
        }
    }
    if (acked)
        kv_dirty(acked);
    reply_int(c, acked);
done:
    kv_free(ids);
}

void xpending_command(kv_client *c)
{
    int justinfo = c->argc == 3;
    bk_str key = c->argv[1], gname = c->argv[2];
    st_id start = ST_ID_MIN, end = ST_ID_MAX;
    long long count = 0, minidle = 0;
    bk_str cname = { 0 };
    int has_cons = 0;
    if (c->argc != 3 && (c->argc < 6 || c->argc > 9)) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (c->argc >= 6) {
        int si = 3;
        if (arg_is(c->argv[3], "idle")) {
            if (arg_ll(c, c->argv[4], &minidle) < 0)
                return;
            if (c->argc < 8) {
                reply_error(c, ERR_SYNTAX);
                return;
            }
            si += 2;
        }
        if (arg_ll(c, c->argv[si + 2], &count) < 0)
            return;
        if (count < 0)
            count = 0;
        int sx, ex;
        if (interval_parse(c, c->argv[si], &start, &sx, 0) < 0)
            return;
        if (sx && id_incr(&start) < 0) {
            reply_error(c, "ERR invalid start ID for the interval");
            return;
        }
        if (interval_parse(c, c->argv[si + 1], &end, &ex, UINT64_MAX) < 0)
            return;
        if (ex && id_decr(&end) < 0) {
            reply_error(c, "ERR invalid end ID for the interval");
            return;
        }
        if (si + 3 < c->argc) {
            cname = c->argv[si + 3];
            has_cons = 1;
        }
    }
    int err;
    kv_stream *s = get_stream(c, key, 0, &err);
    if (err)
        return;
    st_group *g = s ? stream_group_find(s, gname) : NULL;
    if (!g) {
        reply_nogroup(c, key, gname, "");
        return;
    }
    if (justinfo) {
        reply_array(c, 4);
        reply_int(c, (long long)g->pel.n);
        if (g->pel.n == 0) {
            reply_null(c);
            reply_null(c);
            reply_null_array(c);
            return;
        }
        reply_id(c, g->pel.v[0]->id);
        reply_id(c, g->pel.v[g->pel.n - 1]->id);
        size_t n = 0;
        for (size_t i = 0; i < g->ncons; i++)
            n += g->cons[i]->pel.n > 0;
        reply_array(c, (long long)n);
        for (size_t i = 0; i < g->ncons; i++) {
            st_consumer *k = g->cons[i];
            if (k->pel.n == 0)
                continue;
            reply_array(c, 2);
            reply_bulk(c, k->name, k->nlen);
            reply_bulk_ll(c, (long long)k->pel.n);
        }
        return;
    }
    st_pel *pel = &g->pel;
    if (has_cons) {
        st_consumer *k = group_consumer_find(g, cname);
        if (!k) {
            reply_empty_array(c);
            return;
        }
        pel = &k->pel;
    }
    size_t handle = reply_defer(c), n = 0;
    int64_t now = srv.now_ms;
    for (size_t i = pel_lower(pel, start); count && i < pel->n; i++) {
        st_nack *x = pel->v[i];
        if (st_id_cmp(x->id, end) > 0)
            break;
        if (minidle && now - x->delivery_ms < minidle)
            continue;
        n++;
        count--;
        reply_array(c, 4);
        reply_id(c, x->id);
        reply_bulk(c, x->consumer->name, x->consumer->nlen);
        int64_t el = now - x->delivery_ms;
        reply_int(c, el < 0 ? 0 : el);
        reply_int(c, (long long)x->delivery_count);
    }
    reply_defer_array(c, handle, (long long)n);
}

static st_consumer *claim_consumer(kv_client *c, st_group *g, bk_str name, st_consumer *cons)
{
    if (cons)
        return cons;
    cons = group_consumer_find(g, name);
    if (!cons)
        cons = consumer_add(c->db, c->argv[1], g, name);
    cons->seen_ms = srv.now_ms;
    return cons;
}

static void nack_move(st_nack *x, st_consumer *cons)
{
    if (x->consumer == cons)
        return;
    if (x->consumer)
        pel_remove(&x->consumer->pel, x->id);
    x->consumer = cons;
    pel_insert(&cons->pel, x);
}

static int entry_exists(kv_stream *s, st_id id)
{
    st_iter it;
    st_iter_start(&it, s, id, id, 0);
    int found = st_iter_next(&it);
    st_iter_stop(&it);
    return found;
}

void xclaim_command(kv_client *c)
{
    bk_str key = c->argv[1], gname = c->argv[2];
    int err;
    kv_stream *s = get_stream(c, key, 0, &err);
    if (err)
        return;
    st_group *g = s ? stream_group_find(s, gname) : NULL;
    if (!g) {
        reply_nogroup(c, key, gname, "");
        return;
    }
    long long minidle, retrycount = -1, dtime = -1;
    int force = 0, justid = 0, prop_last = 0;
    if (arg_ll_msg(c, c->argv[4], &minidle, "ERR Invalid min-idle-time argument for XCLAIM") <
        0)
        return;
    if (minidle < 0)
        minidle = 0;
    int j;
    for (j = 5; j < c->argc; j++) {
        st_id tmp;
        if (id_parse(c->argv[j], &tmp, 1, 0, NULL) < 0)
            break;
    }
    int last_id_arg = j - 1;
    int64_t now = srv.now_ms;
    st_id lastid = g->last_id;
    for (; j < c->argc; j++) {
        int more = c->argc - 1 - j;
        bk_str o = c->argv[j];
        if (arg_is(o, "force")) {
            force = 1;
        } else if (arg_is(o, "justid")) {
            justid = 1;
        } else if (arg_is(o, "idle") && more) {
            j++;
            if (arg_ll_msg(c, c->argv[j], &dtime, "ERR Invalid IDLE option argument for XCLAIM") <
                0)
                return;
            /* Wraps like Redis's arithmetic; a result out of [0, now] is
             * clamped below. */
            dtime = (long long)((uint64_t)now - (uint64_t)dtime);
        } else if (arg_is(o, "time") && more) {
            j++;
            if (arg_ll_msg(c, c->argv[j], &dtime, "ERR Invalid TIME option argument for XCLAIM") <
                0)
                return;
        } else if (arg_is(o, "retrycount") && more) {
            j++;
            if (arg_ll_msg(c, c->argv[j], &retrycount,
                           "ERR Invalid RETRYCOUNT option argument for XCLAIM") < 0)
                return;
        } else if (arg_is(o, "lastid") && more) {
            j++;
            st_id l;
            if (id_parse_or_reply(c, c->argv[j], &l, 1, 0, NULL) < 0)
                return;
            if (st_id_cmp(l, lastid) > 0)
                lastid = l;
        } else {
            reply_errorf(c, "ERR Unrecognized XCLAIM option '%.*s'", (int)BK_MIN(o.len, 128), o.p);
            return;
        }
    }
    if (st_id_cmp(lastid, g->last_id) > 0) {
        g->last_id = lastid;
        prop_last = 1;
    }
    if (dtime != -1) {
        if (dtime < 0 || dtime > now)
            dtime = now;
    } else {
        dtime = now;
    }
    st_consumer *cons = NULL;
    size_t handle = reply_defer(c), n = 0;
    for (j = 5; j <= last_id_arg; j++) {
        st_id id;
        id_parse(c->argv[j], &id, 1, 0, NULL);
        st_nack *x = pel_find(&g->pel, id);
        if (!entry_exists(s, id)) {
            if (x) {
                prop_xclaim(c, key, g, id, x);
                prop_last = 0;
                kv_dirty(1);
                nack_drop(g, x);
            }
            continue;
        }
        if (force && !x) {
            x = kv_malloc(sizeof *x);
            x->id = id;
            x->consumer = NULL;
            x->delivery_ms = now;
            x->delivery_count = 1; /* Redis's new NACK; the claim below counts on */
            pel_insert(&g->pel, x);
        }
        if (!x)
            continue;
        if (x->consumer && minidle && now - x->delivery_ms < minidle)
            continue;
        cons = claim_consumer(c, g, c->argv[3], cons);
        nack_move(x, cons);
        x->delivery_ms = dtime;
        if (retrycount >= 0)
            x->delivery_count = (uint64_t)retrycount;
        else if (!justid)
            x->delivery_count++;
        if (justid)
            reply_id(c, id);
        else if (!reply_one(c, s, id))
            reply_null(c);
        n++;
        prop_xclaim(c, key, g, id, x);
        prop_last = 0;
        kv_dirty(1);
    }
    if (prop_last) {
        prop_setid(c, key, g);
        kv_dirty(1);
    }
    reply_defer_array(c, handle, (long long)n);
    prop_end();
    kv_propagate_as(c, 0, NULL);
}

void xautoclaim_command(kv_client *c)
{
    bk_str key = c->argv[1], gname = c->argv[2];
    long long minidle, count = 100;
    int justid = 0;
    st_id start;
    int sx;
    if (arg_ll_msg(c, c->argv[4], &minidle, "ERR Invalid min-idle-time argument for XAUTOCLAIM") <
        0)
        return;
    if (minidle < 0)
        minidle = 0;
    if (interval_parse(c, c->argv[5], &start, &sx, 0) < 0)
        return;
    if (sx && id_incr(&start) < 0) {
        reply_error(c, "ERR invalid start ID for the interval");
        return;
    }
    for (int j = 6; j < c->argc; j++) {
        int more = c->argc - 1 - j;
        if (arg_is(c->argv[j], "count") && more) {
            long long v;
            const long long max_count = LLONG_MAX / 16;
            if (kv_parse_ll(c->argv[j + 1].p, c->argv[j + 1].len, &v) != 0 || v < 1 ||
                v > max_count) {
                reply_error(c, "ERR COUNT must be > 0");
                return;
            }
            count = v;
            j++;
        } else if (arg_is(c->argv[j], "justid")) {
            justid = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    int err;
    kv_stream *s = get_stream(c, key, 0, &err);
    if (err)
        return;
    st_group *g = s ? stream_group_find(s, gname) : NULL;
    if (!g) {
        reply_nogroup(c, key, gname, "");
        return;
    }
    /* Redis allocates count IDs up front and fails on what the allocator
     * refuses (beyond the address space): the same answer past 2^47 bytes. */
    if ((unsigned long long)count > (1ULL << 47) / sizeof(st_id)) {
        reply_error(c, "ERR Insufficient memory, failed allocating transient memory, COUNT too "
                       "high.");
        return;
    }
    long long attempts = count * 10;
    int64_t now = srv.now_ms;
    st_consumer *cons = NULL;
    /* Claimed and deleted IDs are at most count each: bound the scratch by
     * the PEL size too. */
    size_t cap = (size_t)BK_MIN((unsigned long long)count, (unsigned long long)g->pel.n);
    st_id *claimed = kv_malloc((cap ? cap : 1) * sizeof *claimed);
    st_id *deleted = kv_malloc((cap ? cap : 1) * sizeof *deleted);
    size_t ndel = 0, n = 0;
    size_t i = pel_lower(&g->pel, start);
    while (attempts-- && count && i < g->pel.n) {
        st_nack *x = g->pel.v[i];
        st_id id = x->id;
        if (!entry_exists(s, id)) {
            prop_xclaim(c, key, g, id, x);
            kv_dirty(1);
            nack_drop(g, x);
            deleted[ndel++] = id;
            count--;
            continue; /* i now names the next nack */
        }
        i++;
        if (minidle && now - x->delivery_ms < minidle)
            continue;
        cons = claim_consumer(c, g, c->argv[3], cons);
        nack_move(x, cons);
        x->delivery_ms = now;
        if (!justid)
            x->delivery_count++;
        claimed[n++] = id;
        count--;
        prop_xclaim(c, key, g, id, x);
        kv_dirty(1);
    }
    /* The cursor: the next PEL entry after the ones looked at, or 0-0. */
    reply_array(c, 3);
    reply_id(c, i < g->pel.n ? g->pel.v[i]->id : ST_ID_MIN);
    reply_array(c, (long long)n);
    for (size_t k = 0; k < n; k++) {
        if (justid)
            reply_id(c, claimed[k]);
        else if (!reply_one(c, s, claimed[k]))
            reply_null(c);
    }
    reply_array(c, (long long)ndel);
    for (size_t k = 0; k < ndel; k++)
        reply_id(c, deleted[k]);
    kv_free(claimed);
    kv_free(deleted);
    prop_end();
    kv_propagate_as(c, 0, NULL);
}

/* ---- XINFO ---- */

static void reply_lag(kv_client *c, kv_stream *s, st_group *g)
{
    if (!s->entries_added) {
        reply_int(c, 0);
        return;
    }
    if (g->entries_read != ST_INVALID_READ &&
        !stream_range_has_tombstones(s, g->last_id, 0, ST_ID_MAX)) {
        reply_int(c, (long long)s->entries_added - g->entries_read);
        return;
    }
    long long er = stream_estimate_distance(s, g->last_id);
    if (er != ST_INVALID_READ)
        reply_int(c, (long long)s->entries_added - er);
    else
        reply_null(c);
}

static void reply_entries_read(kv_client *c, st_group *g)
{
    if (g->entries_read != ST_INVALID_READ)
        reply_int(c, g->entries_read);
    else
        reply_null(c);
}

static void xinfo_stream(kv_client *c, kv_stream *s)
{
    int full = 0;
    long long count = 10;
    int argc = c->argc - 3;
    bk_str *argv = c->argv + 3;
    if (argc) {
        if (!arg_is(argv[0], "full")) {
            reply_subcmd_syntax(c, "XINFO");
            return;
        }
        if (argc > 1) {
            if (argc != 3 || !arg_is(argv[1], "count")) {
                reply_subcmd_syntax(c, "XINFO");
                return;
            }
            if (arg_ll(c, argv[2], &count) < 0)
                return;
            if (count < 0)
                count = 10;
        }
        full = 1;
    }
    reply_map(c, full ? 9 : 10);
    reply_bulk_cstr(c, "length");
    reply_int(c, (long long)s->length);
    reply_bulk_cstr(c, "radix-tree-keys");
    reply_int(c, (long long)s->nblocks);
    reply_bulk_cstr(c, "radix-tree-nodes");
    reply_int(c, (long long)stream_rax_nodes(s));
    reply_bulk_cstr(c, "last-generated-id");
    reply_id(c, s->last_id);
    reply_bulk_cstr(c, "max-deleted-entry-id");
    reply_id(c, s->max_deleted_id);
    reply_bulk_cstr(c, "entries-added");
    reply_int(c, (long long)s->entries_added);
    reply_bulk_cstr(c, "recorded-first-entry-id");
    reply_id(c, stream_edge_id(s, 1));
    if (!full) {
        reply_bulk_cstr(c, "groups");
        reply_int(c, (long long)s->ngroups);
        reply_bulk_cstr(c, "first-entry");
        if (!reply_range(c, s, ST_ID_MIN, ST_ID_MAX, 1, 0, NULL, NULL, RWR_RAW, NULL))
            reply_null(c);
        reply_bulk_cstr(c, "last-entry");
        if (!reply_range(c, s, ST_ID_MIN, ST_ID_MAX, 1, 1, NULL, NULL, RWR_RAW, NULL))
            reply_null(c);
        return;
    }
    reply_bulk_cstr(c, "entries");
    reply_range(c, s, ST_ID_MIN, ST_ID_MAX, (size_t)count, 0, NULL, NULL, 0, NULL);
    reply_bulk_cstr(c, "groups");
    reply_array(c, (long long)s->ngroups);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        st_group *g = s->groups[gi];
        reply_map(c, 7);
        reply_bulk_cstr(c, "name");
        reply_bulk(c, g->name, g->nlen);
        reply_bulk_cstr(c, "last-delivered-id");
        reply_id(c, g->last_id);
        reply_bulk_cstr(c, "entries-read");
        reply_entries_read(c, g);
        reply_bulk_cstr(c, "lag");
        reply_lag(c, s, g);
        reply_bulk_cstr(c, "pel-count");
        reply_int(c, (long long)g->pel.n);
        reply_bulk_cstr(c, "pending");
        size_t np = g->pel.n;
        if (count && (size_t)count < np)
            np = (size_t)count;
        reply_array(c, (long long)np);
        for (size_t k = 0; k < np; k++) {
            st_nack *x = g->pel.v[k];
            reply_array(c, 4);
            reply_id(c, x->id);
            reply_bulk(c, x->consumer->name, x->consumer->nlen);
            reply_int(c, x->delivery_ms);
            reply_int(c, (long long)x->delivery_count);
        }
        reply_bulk_cstr(c, "consumers");
        reply_array(c, (long long)g->ncons);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            st_consumer *k = g->cons[ci];
            reply_map(c, 4);
            reply_bulk_cstr(c, "name");
            reply_bulk(c, k->name, k->nlen);
            reply_bulk_cstr(c, "seen-time");
            reply_int(c, k->seen_ms);
            reply_bulk_cstr(c, "pel-count");
            reply_int(c, (long long)k->pel.n);
            reply_bulk_cstr(c, "pending");
            size_t nc = k->pel.n;
            if (count && (size_t)count < nc)
                nc = (size_t)count;
            reply_array(c, (long long)nc);
            for (size_t q = 0; q < nc; q++) {
                st_nack *x = k->pel.v[q];
                reply_array(c, 3);
                reply_id(c, x->id);
                reply_int(c, x->delivery_ms);
                reply_int(c, (long long)x->delivery_count);
            }
        }
    }
}

void xinfo_command(kv_client *c)
{
    int which;
    if (check_sub(c, "xinfo", xinfo_subs, BK_ARRAY_LEN(xinfo_subs), &which) < 0)
        return;
    const char *sub = xinfo_subs[which].name;
    if (strcmp(sub, "help") == 0) {
        reply_help(c, xinfo_help);
        return;
    }
    bk_str key = c->argv[2];
    int err;
    kv_stream *s = get_stream(c, key, 0, &err);
    if (err)
        return;
    if (!s) {
        reply_error(c, ERR_NO_KEY);
        return;
    }
    if (strcmp(sub, "consumers") == 0) {
        st_group *g = stream_group_find(s, c->argv[3]);
        if (!g) {
            reply_errorf(c, "NOGROUP No such consumer group '%.*s' for key name '%.*s'",
                         (int)c->argv[3].len, c->argv[3].p, (int)key.len, key.p);
            return;
        }
        reply_array(c, (long long)g->ncons);
        int64_t now = kv_unix_ms();
        for (size_t i = 0; i < g->ncons; i++) {
            st_consumer *k = g->cons[i];
            int64_t idle = now - k->seen_ms;
            reply_map(c, 3);
            reply_bulk_cstr(c, "name");
            reply_bulk(c, k->name, k->nlen);
            reply_bulk_cstr(c, "pending");
            reply_int(c, (long long)k->pel.n);
            reply_bulk_cstr(c, "idle");
            reply_int(c, idle < 0 ? 0 : idle);
        }
    } else if (strcmp(sub, "groups") == 0) {
        reply_array(c, (long long)s->ngroups);
        for (size_t i = 0; i < s->ngroups; i++) {
            st_group *g = s->groups[i];
            reply_map(c, 6);
            reply_bulk_cstr(c, "name");
            reply_bulk(c, g->name, g->nlen);
            reply_bulk_cstr(c, "consumers");
            reply_int(c, (long long)g->ncons);
            reply_bulk_cstr(c, "pending");
            reply_int(c, (long long)g->pel.n);
            reply_bulk_cstr(c, "last-delivered-id");
            reply_id(c, g->last_id);
            reply_bulk_cstr(c, "entries-read");
            reply_entries_read(c, g);
            reply_bulk_cstr(c, "lag");
            reply_lag(c, s, g);
        }
    } else {
        xinfo_stream(c, s);
    }
}

/* ---- AOF rewrite ---- */

typedef void st_emit_fn(void *ud, int argc, const bk_str *argv);

/* Emits the commands that rebuild s under key: one XADD per entry (or the
 * XADD MAXLEN 0 trick for an empty stream), XSETID, then per group XGROUP
 * CREATE and an XCLAIM per pending entry (XGROUP CREATECONSUMER for a
 * consumer with none). */
void stream_rewrite(kv_stream *s, bk_str key, st_emit_fn *emit, void *ud)
{
    char ib[ST_ID_STR_MAX], b2[ST_ID_STR_MAX], b3[ST_ID_STR_MAX], nb[24], nb2[24];
    if (s->length) {
        size_t cap = 16;
        bk_str *argv = kv_malloc(cap * sizeof *argv);
        st_iter it;
        st_iter_start(&it, s, ST_ID_MIN, ST_ID_MAX, 0);
        while (st_iter_next(&it)) {
            size_t need = 3 + 2 * it.nfields;
            if (need > cap) {
                cap = need;
                argv = kv_realloc(argv, cap * sizeof *argv);
            }
            argv[0] = BK_STR("XADD");
            argv[1] = key;
            argv[2] = fmt_id(ib, it.id);
            for (size_t i = 0; i < it.nfields; i++)
                st_iter_field(&it, &argv[3 + 2 * i], &argv[4 + 2 * i]);
            emit(ud, (int)need, argv);
        }
        st_iter_stop(&it);
        kv_free(argv);
    } else {
        bk_str a[7] = { BK_STR("XADD"), key, BK_STR("MAXLEN"), BK_STR("0"), BK_STR("0-1"), BK_STR("x"), BK_STR("y") };
        emit(ud, 7, a);
    }
    bk_str xs[7] = { BK_STR("XSETID"),       key, fmt_id(ib, s->last_id), BK_STR("ENTRIESADDED"),
                  fmt_ll(nb, (long long)s->entries_added), BK_STR("MAXDELETEDID"),
                  fmt_id(b2, s->max_deleted_id) };
    emit(ud, 7, xs);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        st_group *g = s->groups[gi];
        bk_str gn = { g->name, g->nlen };
        bk_str gc[7] = { BK_STR("XGROUP"), BK_STR("CREATE"), key, gn, fmt_id(b3, g->last_id),
                      BK_STR("ENTRIESREAD"), fmt_ll(nb2, g->entries_read) };
        emit(ud, 7, gc);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            st_consumer *k = g->cons[ci];
            bk_str cn = { k->name, k->nlen };
            if (k->pel.n == 0) {
                bk_str cc[5] = { BK_STR("XGROUP"), BK_STR("CREATECONSUMER"), key, gn, cn };
                emit(ud, 5, cc);
                continue;
            }
            for (size_t q = 0; q < k->pel.n; q++) {
                st_nack *x = k->pel.v[q];
                char tb[24], rb[24];
                bk_str xc[12] = { BK_STR("XCLAIM"),      key,
                               gn,                 cn,
                               BK_STR("0"),           fmt_id(ib, x->id),
                               BK_STR("TIME"),        fmt_ll(tb, x->delivery_ms),
                               BK_STR("RETRYCOUNT"),  fmt_ll(rb, (long long)x->delivery_count),
                               BK_STR("JUSTID"),      BK_STR("FORCE") };
                emit(ud, 12, xc);
            }
        }
    }
}
