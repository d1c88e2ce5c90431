/* Sorted-set commands over skiplist.c. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/stream.h"
#include "kv/types.h"
#include "kv/util.h"

#include <math.h>

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static zset *get_zset(kv_client *c, bk_str key, int write, int *err)
{
    *err = 0;
    kv_entry *e = lookup_typed(c, key, KV_ZSET, write);
    if (e == KV_WRONGTYPE) {
        *err = 1;
        return NULL;
    }
    return e ? entry_obj(e) : NULL;
}

/* ---- Redis 7.0's encoding (see types.h) ---- */

static size_t max_entries(void)
{
    static const char *v;
    return kv_config_noop_size("zset-max-listpack-entries", &v, 128);
}

static size_t max_value(void)
{
    static const char *v;
    return kv_config_noop_size("zset-max-listpack-value", &v, 64);
}

void zset_enc_added(zset *z, bk_str member)
{
    if (!z->skiplist && (z->length > max_entries() || member.len > max_value()))
        z->skiplist = 1;
}

void zset_enc_fit(zset *z)
{
    size_t vmax = max_value();
    int fits = z->length <= max_entries();
    for (zs_node *n = z->header->lv[0].forward; fits && n; n = n->lv[0].forward)
        fits = zs_member(n).len <= vmax;
    z->skiplist = !fits;
}

void zset_enc_loaded_packed(zset *z)
{
    z->skiplist = z->length > max_entries();
}

static void delete_if_empty(kv_client *c, bk_str key, zset *z)
{
    if (z->length == 0) {
        db_delete(c->db, key);
        kv_notify(c->db, NOTIFY_GENERIC, "del", key);
    }
}

/* The end of the STORE commands: dst (owned) replaces the key, or the key
 * goes when dst is empty; event is the command's notification. */
static void store_result(kv_client *c, bk_str key, zset *dst, const char *event)
{
    kv_entry *old = db_lookup_write(c->db, key);
    if (dst->length) {
        zset_enc_fit(dst);
        db_replace_obj(c->db, key, old, KV_ZSET, dst);
        kv_notify(c->db, NOTIFY_ZSET, event, key);
    } else {
        zset_free(dst);
        if (old) {
            db_delete_entry(c->db, old);
            kv_notify(c->db, NOTIFY_GENERIC, "del", key);
        }
    }
}

enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_CH = 16, Z_INCR = 32 };

/* Adds or updates one member; returns 1 added, 2 updated, 0 nothing,
 * -1 NaN. *out gets the resulting score. */
static int zadd_one(zset *z, double score, bk_str member, int flags, double *out)
{
    zs_node *n = zset_find(z, member);
    if (n) {
        if (flags & Z_NX)
            return 0;
        double cur = n->score, nv = score;
        if (flags & Z_INCR) {
            nv = cur + score;
            if (isnan(nv))
                return -1;
        }
        if (((flags & Z_GT) && nv <= cur) || ((flags & Z_LT) && nv >= cur))
            return 0;
        *out = nv;
        if (nv != cur) {
            zset_update_score(z, n, nv);
            return 2;
        }
        return 3; /* same score: counts for INCR reply, not for CH */
    }
    if (flags & Z_XX)
        return 0;
    zset_insert(z, score, member);
    zset_enc_added(z, member);
    *out = score;
    return 1;
}

static void zadd_generic(kv_client *c, int flags)
{
    int i = 2;
    for (; i < c->argc; i++) {
        bk_str o = c->argv[i];
        if (arg_is(o, "nx"))
            flags |= Z_NX;
        else if (arg_is(o, "xx"))
            flags |= Z_XX;
        else if (arg_is(o, "gt"))
            flags |= Z_GT;
        else if (arg_is(o, "lt"))
            flags |= Z_LT;
        else if (arg_is(o, "ch"))
            flags |= Z_CH;
        else if (arg_is(o, "incr"))
            flags |= Z_INCR;
        else
            break;
    }
    int nelem = c->argc - i;
    if (nelem == 0 || nelem % 2 != 0) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    nelem /= 2;
    if ((flags & Z_NX) && (flags & Z_XX)) {
        reply_error(c, "ERR XX and NX options at the same time are not compatible");
        return;
    }
    if (((flags & Z_GT) && (flags & Z_LT)) || ((flags & Z_NX) && (flags & (Z_GT | Z_LT)))) {
        reply_error(c, "ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if ((flags & Z_INCR) && nelem > 1) {
        reply_error(c, "ERR INCR option supports a single increment-element pair");
        return;
    }
    double stack_scores[16];
    double *scores = nelem <= 16 ? stack_scores : kv_malloc((size_t)nelem * sizeof *scores);
    for (int k = 0; k < nelem; k++) {
        bk_str s = c->argv[i + 2 * k];
        if (kv_parse_double(s.p, s.len, &scores[k]) < 0) {
            reply_error(c, ERR_NOT_FLOAT);
            goto cleanup;
        }
    }
    int err;
    zset *z = get_zset(c, c->argv[1], 1, &err);
    if (err)
        goto cleanup;
    if (!z) {
        if (flags & Z_XX) {
            if (flags & Z_INCR)
                reply_null(c);
            else
                reply_int(c, 0);
            goto cleanup;
        }
        z = zset_new();
        db_add_obj(c->db, c->argv[1], KV_ZSET, z);
    }
    long long added = 0, updated = 0;
    double last = 0;
    int last_rc = 0;
    for (int k = 0; k < nelem; k++) {
        int rc = zadd_one(z, scores[k], c->argv[i + 2 * k + 1], flags, &last);
        if (rc < 0) {
            reply_error(c, "ERR resulting score is not a number (NaN)");
            delete_if_empty(c, c->argv[1], z);
            kv_dirty(added + updated);
            goto cleanup;
        }
        last_rc = rc;
        if (rc == 1)
            added++;
        else if (rc == 2)
            updated++;
    }
    if (added || updated)
        kv_notify(c->db, NOTIFY_ZSET, (flags & Z_INCR) ? "zincr" : "zadd", c->argv[1]);
    if (z->length == 0)
        delete_if_empty(c, c->argv[1], z);
    kv_dirty(added + updated);
    if (flags & Z_INCR) {
        if (last_rc)
            reply_double(c, last);
        else
            reply_null(c);
    } else {
        reply_int(c, (flags & Z_CH) ? added + updated : added);
    }
cleanup:
    if (scores != stack_scores)
        kv_free(scores);
}

void zadd_command(kv_client *c)
{
    zadd_generic(c, 0);
}

void zincrby_command(kv_client *c)
{
    double by;
    if (arg_double(c, c->argv[2], &by) < 0)
        return;
    int err;
    zset *z = get_zset(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!z) {
        z = zset_new();
        db_add_obj(c->db, c->argv[1], KV_ZSET, z);
    }
    double out;
    if (zadd_one(z, by, c->argv[3], Z_INCR, &out) < 0) {
        reply_error(c, "ERR resulting score is not a number (NaN)");
        delete_if_empty(c, c->argv[1], z);
        return;
    }
    kv_notify(c->db, NOTIFY_ZSET, "zincr", c->argv[1]);
    kv_dirty(1);
    reply_double(c, out);
}

void zscore_command(kv_client *c)
{
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    zs_node *n = z ? zset_find(z, c->argv[2]) : NULL;
    if (n)
        reply_double(c, n->score);
    else
        reply_null(c);
}

void zmscore_command(kv_client *c)
{
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        zs_node *n = z ? zset_find(z, c->argv[i]) : NULL;
        if (n)
            reply_double(c, n->score);
        else
            reply_null(c);
    }
}

void zcard_command(kv_client *c)
{
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_int(c, z ? (long long)z->length : 0);
}

void zcount_command(kv_client *c)
{
    zrange_score r;
    if (zset_parse_score_range(c->argv[2], c->argv[3], &r) < 0) {
        reply_error(c, "ERR min or max is not a float");
        return;
    }
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    zs_node *first = z ? zset_first_in_score(z, &r) : NULL;
    if (!first) {
        reply_int(c, 0);
        return;
    }
    zs_node *last = zset_last_in_score(z, &r);
    reply_int(c, (long long)(zset_rank(z, last) - zset_rank(z, first) + 1));
}

void zlexcount_command(kv_client *c)
{
    zrange_lex r;
    if (zset_parse_lex_range(c->argv[2], c->argv[3], &r) < 0) {
        reply_error(c, "ERR min or max not valid string range item");
        return;
    }
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    zs_node *first = z ? zset_first_in_lex(z, &r) : NULL;
    if (!first) {
        reply_int(c, 0);
        return;
    }
    zs_node *last = zset_last_in_lex(z, &r);
    reply_int(c, (long long)(zset_rank(z, last) - zset_rank(z, first) + 1));
}

static void rank_generic(kv_client *c, int rev)
{
    int withscore = 0;
    if (c->argc == 4) {
        if (!arg_is(c->argv[3], "withscore")) {
            reply_error(c, ERR_SYNTAX);
            return;
        }
        withscore = 1;
    } else if (c->argc > 4) {
        reply_arity_error(c, c->cmd->name);
        return;
    }
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    zs_node *n = z ? zset_find(z, c->argv[2]) : NULL;
    if (!n) {
        if (withscore)
            reply_null_array(c);
        else
            reply_null(c);
        return;
    }
    size_t r = zset_rank(z, n);
    long long rank = rev ? (long long)(z->length - r) : (long long)r - 1;
    if (withscore) {
        reply_array(c, 2);
        reply_int(c, rank);
        reply_double(c, n->score);
    } else {
        reply_int(c, rank);
    }
}

void zrank_command(kv_client *c) { rank_generic(c, 0); }
void zrevrank_command(kv_client *c) { rank_generic(c, 1); }

/* ---- ranges ---- */

enum { BY_RANK, BY_SCORE, BY_LEX };

typedef struct {
    kv_client *c;
    zset *store; /* ZRANGESTORE target, or NULL to reply */
    int withscores;
    long long n;
} zsink;

static void sink_emit(zsink *s, zs_node *x)
{
    s->n++;
    if (s->store) {
        zset_insert(s->store, x->score, zs_member(x));
        return;
    }
    if (s->withscores && s->c->resp >= 3)
        reply_array(s->c, 2);
    reply_bulk_str(s->c, zs_member(x));
    if (s->withscores)
        reply_double(s->c, x->score);
}

static long long header_count(zsink *s, long long n)
{
    return s->withscores && s->c->resp < 3 ? 2 * n : n;
}

static void range_rank(zsink *s, zset *z, long long start, long long end, int rev)
{
    long long len = z ? (long long)z->length : 0;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len) {
        if (!s->store)
            reply_empty_array(s->c);
        return;
    }
    if (end >= len)
        end = len - 1;
    long long count = end - start + 1;
    if (!s->store)
        reply_array(s->c, header_count(s, count));
    zs_node *x = rev ? zset_at_rank(z, (size_t)(len - start)) : zset_at_rank(z, (size_t)start + 1);
    for (long long i = 0; i < count && x; i++) {
        sink_emit(s, x);
        x = rev ? x->backward : x->lv[0].forward;
    }
}

static void range_by(zsink *s, zset *z, int by, const zrange_score *rs, const zrange_lex *rl,
                     int rev, long long offset, long long limit)
{
    size_t h = 0;
    if (!s->store)
        h = reply_defer(s->c);
    long long emitted = 0;
    zs_node *x = NULL;
    if (z) {
        if (by == BY_SCORE)
            x = rev ? zset_last_in_score(z, rs) : zset_first_in_score(z, rs);
        else
            x = rev ? zset_last_in_lex(z, rl) : zset_first_in_lex(z, rl);
    }
    /* A negative offset selects nothing (as in Redis); never decrement
     * past it, it may be LLONG_MIN. */
    if (offset < 0)
        x = NULL;
    for (; x && offset > 0; offset--)
        x = rev ? x->backward : x->lv[0].forward;
    while (x && limit != 0) {
        int in = by == BY_SCORE
                     ? (rev ? zset_score_gte_min(x->score, rs) : zset_score_lte_max(x->score, rs))
                     : (rev ? zset_lex_gte_min(zs_member(x), rl) : zset_lex_lte_max(zs_member(x), rl));
        if (!in)
            break;
        sink_emit(s, x);
        emitted++;
        if (limit > 0)
            limit--;
        x = rev ? x->backward : x->lv[0].forward;
    }
    if (!s->store)
        reply_defer_array(s->c, h, header_count(s, emitted));
}

/* argv layout: [cmd] [dst] key min max opts... ; key_idx is the source key. */
static void zrange_generic(kv_client *c, int key_idx, int by, int rev, int opts_from,
                           int allow_by_opts, int store)
{
    int withscores = 0, has_limit = 0;
    long long offset = 0, limit = -1;
    for (int i = opts_from; i < c->argc; i++) {
        bk_str o = c->argv[i];
        int more = c->argc - i - 1;
        if (arg_is(o, "withscores") && !store) {
            withscores = 1;
        } else if (arg_is(o, "limit") && more >= 2) {
            if (arg_ll(c, c->argv[i + 1], &offset) < 0 || arg_ll(c, c->argv[i + 2], &limit) < 0)
                return;
            has_limit = 1;
            i += 2;
        } else if (allow_by_opts && arg_is(o, "byscore")) {
            by = BY_SCORE;
        } else if (allow_by_opts && arg_is(o, "bylex")) {
            by = BY_LEX;
        } else if (allow_by_opts && arg_is(o, "rev")) {
            rev = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    if (has_limit && by == BY_RANK) {
        reply_error(c, "ERR syntax error, LIMIT is only supported in combination with either "
                       "BYSCORE or BYLEX");
        return;
    }
    if (withscores && by == BY_LEX) {
        reply_error(c, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    bk_str a = c->argv[key_idx + 1], b = c->argv[key_idx + 2];
    /* REV with BYSCORE/BYLEX takes max first */
    if (rev && by != BY_RANK) {
        bk_str t = a;
        a = b;
        b = t;
    }
    long long start = 0, end = 0;
    zrange_score rs;
    zrange_lex rl;
    if (by == BY_RANK) {
        if (arg_ll(c, a, &start) < 0 || arg_ll(c, b, &end) < 0)
            return;
    } else if (by == BY_SCORE) {
        if (zset_parse_score_range(a, b, &rs) < 0) {
            reply_error(c, "ERR min or max is not a float");
            return;
        }
    } else if (zset_parse_lex_range(a, b, &rl) < 0) {
        reply_error(c, "ERR min or max not valid string range item");
        return;
    }
    int err;
    zset *z = get_zset(c, c->argv[key_idx], 0, &err);
    if (err)
        return;
    zsink s = { .c = c, .withscores = withscores };
    if (store)
        s.store = zset_new();
    if (by == BY_RANK)
        range_rank(&s, z, start, end, rev);
    else
        range_by(&s, z, by, &rs, &rl, rev, offset, limit);
    if (store) {
        int had = db_lookup_write(c->db, c->argv[1]) != NULL;
        store_result(c, c->argv[1], s.store, "zrangestore");
        if (s.n || had) /* as Redis: nothing over nothing is no change */
            kv_dirty(1);
        reply_int(c, s.n);
    }
}

void zrange_command(kv_client *c) { zrange_generic(c, 1, BY_RANK, 0, 4, 1, 0); }
void zrangestore_command(kv_client *c) { zrange_generic(c, 2, BY_RANK, 0, 5, 1, 1); }
void zrevrange_command(kv_client *c) { zrange_generic(c, 1, BY_RANK, 1, 4, 0, 0); }
void zrangebyscore_command(kv_client *c) { zrange_generic(c, 1, BY_SCORE, 0, 4, 0, 0); }
void zrevrangebyscore_command(kv_client *c) { zrange_generic(c, 1, BY_SCORE, 1, 4, 0, 0); }
void zrangebylex_command(kv_client *c) { zrange_generic(c, 1, BY_LEX, 0, 4, 0, 0); }
void zrevrangebylex_command(kv_client *c) { zrange_generic(c, 1, BY_LEX, 1, 4, 0, 0); }

void zrem_command(kv_client *c)
{
    int err;
    zset *z = get_zset(c, c->argv[1], 1, &err);
    if (err)
        return;
    long long n = 0;
    if (z) {
        for (int i = 2; i < c->argc; i++) {
            zs_node *x = zset_find(z, c->argv[i]);
            if (x) {
                zset_delete(z, x);
                n++;
            }
        }
        if (n)
            kv_notify(c->db, NOTIFY_ZSET, "zrem", c->argv[1]);
        delete_if_empty(c, c->argv[1], z);
    }
    kv_dirty(n);
    reply_int(c, n);
}

static void zremrange_generic(kv_client *c, int by)
{
    long long start = 0, end = 0;
    zrange_score rs;
    zrange_lex rl;
    if (by == BY_RANK) {
        if (arg_ll(c, c->argv[2], &start) < 0 || arg_ll(c, c->argv[3], &end) < 0)
            return;
    } else if (by == BY_SCORE) {
        if (zset_parse_score_range(c->argv[2], c->argv[3], &rs) < 0) {
            reply_error(c, "ERR min or max is not a float");
            return;
        }
    } else if (zset_parse_lex_range(c->argv[2], c->argv[3], &rl) < 0) {
        reply_error(c, "ERR min or max not valid string range item");
        return;
    }
    int err;
    zset *z = get_zset(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!z) {
        reply_int(c, 0);
        return;
    }
    zs_node *x = NULL;
    long long count = -1; /* for rank */
    if (by == BY_RANK) {
        long long len = (long long)z->length;
        if (start < 0)
            start += len;
        if (end < 0)
            end += len;
        if (start < 0)
            start = 0;
        if (start > end || start >= len) {
            reply_int(c, 0);
            return;
        }
        if (end >= len)
            end = len - 1;
        count = end - start + 1;
        x = zset_at_rank(z, (size_t)start + 1);
    } else if (by == BY_SCORE) {
        x = zset_first_in_score(z, &rs);
    } else {
        x = zset_first_in_lex(z, &rl);
    }
    long long removed = 0;
    while (x) {
        if (by == BY_RANK && removed == count)
            break;
        if (by == BY_SCORE && !zset_score_lte_max(x->score, &rs))
            break;
        if (by == BY_LEX && !zset_lex_lte_max(zs_member(x), &rl))
            break;
        zs_node *next = x->lv[0].forward;
        zset_delete(z, x);
        removed++;
        x = next;
    }
    static const char *const ev[] = { [BY_RANK] = "zremrangebyrank",
                                       [BY_SCORE] = "zremrangebyscore",
                                       [BY_LEX] = "zremrangebylex" };
    if (removed)
        kv_notify(c->db, NOTIFY_ZSET, ev[by], c->argv[1]);
    delete_if_empty(c, c->argv[1], z);
    kv_dirty(removed);
    reply_int(c, removed);
}

void zremrangebyrank_command(kv_client *c) { zremrange_generic(c, BY_RANK); }
void zremrangebyscore_command(kv_client *c) { zremrange_generic(c, BY_SCORE); }
void zremrangebylex_command(kv_client *c) { zremrange_generic(c, BY_LEX); }

static void pop_generic(kv_client *c, int max)
{
    long long count = 1;
    int has_count = 0;
    if (c->argc > 3) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (c->argc == 3) {
        if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &count) < 0 || count < 0) {
            reply_error(c, ERR_POSITIVE);
            return;
        }
        has_count = 1;
    }
    int err;
    zset *z = get_zset(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!z || count == 0) {
        reply_empty_array(c);
        return;
    }
    long long n = BK_MIN(count, (long long)z->length);
    int nested = has_count && c->resp >= 3;
    reply_array(c, nested ? n : 2 * n);
    for (long long i = 0; i < n; i++) {
        zs_node *x = max ? z->tail : z->header->lv[0].forward;
        if (nested)
            reply_array(c, 2);
        reply_bulk_str(c, zs_member(x));
        reply_double(c, x->score);
        zset_delete(z, x);
    }
    kv_notify(c->db, NOTIFY_ZSET, max ? "zpopmax" : "zpopmin", c->argv[1]);
    delete_if_empty(c, c->argv[1], z);
    kv_dirty(n);
}

void zpopmin_command(kv_client *c) { pop_generic(c, 0); }
void zpopmax_command(kv_client *c) { pop_generic(c, 1); }

void zrandmember_command(kv_client *c)
{
    int err;
    if (c->argc == 2) {
        zset *z = get_zset(c, c->argv[1], 0, &err);
        if (err)
            return;
        if (!z)
            reply_null(c);
        else
            reply_bulk_str(c, zs_member(zset_at_rank(z, 1 + kv_rand64() % z->length)));
        return;
    }
    /* As Redis: the count, then the options, then the key. */
    long long count;
    if (arg_rand_count(c, c->argv[2], &count) < 0)
        return;
    int withscores = 0;
    if (c->argc == 4 && arg_is(c->argv[3], "withscores")) {
        withscores = 1;
        if (rand_pairs_check(c, count) < 0)
            return;
    } else if (c->argc >= 4) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    if (!z || count == 0) {
        reply_empty_array(c);
        return;
    }
    if (count < 0 && rand_draws_check(c, withscores ? 2 * count : count) < 0)
        return;
    zsink s = { .c = c, .withscores = withscores };
    if (count < 0) {
        reply_array(c, header_count(&s, -count));
        for (long long i = 0; i < -count && !rand_draws_stop(c, i); i++)
            sink_emit(&s, zset_at_rank(z, 1 + kv_rand64() % z->length));
        return;
    }
    size_t size = z->length, n = BK_MIN((size_t)count, size);
    if (RAND_FEW_DISTINCT(n, size)) {
        size_t *ranks = kv_malloc(n * sizeof *ranks);
        rand_distinct_ranks(size, ranks, n);
        reply_array(c, header_count(&s, (long long)n));
        for (size_t i = 0; i < n; i++)
            sink_emit(&s, zset_at_rank(z, ranks[i]));
        kv_free(ranks);
        return;
    }
    zs_node **all = kv_malloc(size * sizeof *all);
    size_t k = 0;
    for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward)
        all[k++] = x;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + kv_rand64() % (size - i);
        zs_node *t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    reply_array(c, header_count(&s, (long long)n));
    for (size_t i = 0; i < n; i++)
        sink_emit(&s, all[i]);
    kv_free(all);
}

void zscan_command(kv_client *c)
{
    uint64_t cur; /* checked before the key, as Redis */
    if (scan_parse_cursor(c, c->argv[2], &cur) < 0)
        return;
    int err;
    zset *z = get_zset(c, c->argv[1], 0, &err);
    if (err)
        return;
    if (!z) {
        reply_array(c, 2);
        reply_bulk(c, "0", 1);
        reply_empty_array(c);
        return;
    }
    scan_generic(c, &z->dict, 2, 3);
}

/* ---- object free/dup for every type ---- */

void obj_free(int type, void *obj)
{
    switch (type) {
    case KV_LIST: list_free(obj); break;
    case KV_SET: set_free(obj); break;
    case KV_HASH: hash_free(obj); break;
    case KV_ZSET: zset_free(obj); break;
    case KV_STREAM: stream_free(obj); break;
    default: break;
    }
}

void *obj_dup(int type, void *obj)
{
    switch (type) {
    case KV_LIST: return list_dup(obj);
    case KV_SET: return set_dup(obj);
    case KV_HASH: return hash_dup(obj);
    case KV_ZSET: return zset_dup(obj);
    case KV_STREAM: return stream_dup(obj);
    default: return NULL;
    }
}
