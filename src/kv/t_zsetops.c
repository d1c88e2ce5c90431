/* Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms and
 * ZINTERCARD. One parser and one evaluator serve all seven commands; the
 * sources may be sorted sets or plain sets (a set member scores 1). */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <math.h>
#include <stdlib.h>

enum zop_kind { ZOP_UNION, ZOP_INTER, ZOP_DIFF };
enum zop_agg { AGG_SUM, AGG_MIN, AGG_MAX };

/* What one command asks for; the handlers below only differ by this. */
typedef struct {
    enum zop_kind kind;
    int store; /* argv[1] is the destination, numkeys at argv[2] */
    int card;  /* ZINTERCARD: reply the size only (LIMIT allowed) */
} zop_spec;

typedef struct {
    zset *z;   /* one of these two, or neither (missing key) */
    dict *set;
    double weight;
    size_t pos; /* index in the command, to keep the sort stable */
} zop_src;

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static size_t src_size(const zop_src *s)
{
    return s->z ? s->z->length : s->set ? dict_size(s->set) : 0;
}

static dict *src_dict(const zop_src *s)
{
    return s->z ? &s->z->dict : s->set;
}

/* Score of a node of src_dict(s): zset dict nodes are the skip-list nodes. */
static double src_node_score(const zop_src *s, dict_node *dn)
{
    return s->z ? ((zs_node *)(void *)dn)->score : 1.0;
}

static int src_score(const zop_src *s, bk_str m, double *out)
{
    if (s->z) {
        zs_node *n = zset_find(s->z, m);
        if (!n)
            return 0;
        *out = n->score;
        return 1;
    }
    if (s->set && set_has(s->set, m)) {
        *out = 1.0;
        return 1;
    }
    return 0;
}

/* inf * 0 and inf + -inf count as 0, as in Redis. */
static double weighted(double score, double w)
{
    double r = score * w;
    return isnan(r) ? 0.0 : r;
}

static double aggregate(double acc, double v, enum zop_agg agg)
{
    if (agg == AGG_SUM) {
        double r = acc + v;
        return isnan(r) ? 0.0 : r;
    }
    return agg == AGG_MIN ? (v < acc ? v : acc) : (v > acc ? v : acc);
}

/* Smallest first; equal sizes keep the command's order (the order of a
 * floating-point sum changes its last bits). */
static int by_size(const void *a, const void *b)
{
    const zop_src *x = a, *y = b;
    size_t sx = src_size(x), sy = src_size(y);
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void eval_inter(zop_src *src, long long n, enum zop_agg agg, zset *dst, long long limit,
                       long long *count)
{
    if (src_size(&src[0]) == 0)
        return; /* sorted: every source is empty or the smallest is */
    dict *d = src_dict(&src[0]);
    dict_iter it;
    dict_iter_init(&it, d);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        bk_str m = d->key(dn);
        double acc = weighted(src_node_score(&src[0], dn), src[0].weight);
        long long i = 1;
        for (; i < n; i++) {
            double v;
            if (!src_score(&src[i], m, &v))
                break;
            acc = aggregate(acc, weighted(v, src[i].weight), agg);
        }
        if (i < n)
            continue;
        ++*count;
        if (dst)
            zset_insert(dst, acc, m);
        else if (limit && *count >= limit)
            break;
    }
    dict_iter_end(&it);
}

static void eval_union(zop_src *src, long long n, enum zop_agg agg, zset *dst)
{
    for (long long i = 0; i < n; i++) {
        if (!src_size(&src[i]))
            continue;
        dict *d = src_dict(&src[i]);
        dict_iter it;
        dict_iter_init(&it, d);
        for (dict_node *dn; (dn = dict_iter_next(&it));) {
            bk_str m = d->key(dn);
            double v = weighted(src_node_score(&src[i], dn), src[i].weight);
            zs_node *x = zset_find(dst, m);
            if (x)
                zset_update_score(dst, x, aggregate(x->score, v, agg));
            else
                zset_insert(dst, v, m);
        }
        dict_iter_end(&it);
    }
}

/* Members of the first source found in no other, with their own score. */
static void eval_diff(zop_src *src, long long n, zset *dst)
{
    if (!src_size(&src[0]))
        return;
    dict *d = src_dict(&src[0]);
    dict_iter it;
    dict_iter_init(&it, d);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        bk_str m = d->key(dn);
        double v;
        long long i = 1;
        while (i < n && !src_score(&src[i], m, &v))
            i++;
        if (i == n)
            zset_insert(dst, src_node_score(&src[0], dn), m);
    }
    dict_iter_end(&it);
}

static void reply_zset(kv_client *c, zset *z, int withscores)
{
    long long n = (long long)z->length;
    reply_array(c, withscores && c->resp < 3 ? 2 * n : n);
    for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward) {
        if (withscores && c->resp >= 3)
            reply_array(c, 2);
        reply_bulk_str(c, zs_member(x));
        if (withscores)
            reply_double(c, x->score);
    }
}

/* Stores z at key (taking it) and replies its size; event is the keyspace
 * notification Redis sends ("zunionstore", ...), or "del" when the result is
 * empty and replaced a key. Nothing over nothing is no change. */
static void store_zset(kv_client *c, bk_str key, zset *z, const char *event)
{
    kv_entry *old = db_lookup_write(c->db, key);
    long long n = (long long)z->length;
    if (n) {
        zset_enc_fit(z);
        db_replace_obj(c->db, key, old, KV_ZSET, z);
        kv_notify(c->db, NOTIFY_ZSET, event, key);
        kv_dirty(1);
    } else {
        zset_free(z);
        if (old) {
            db_delete_entry(c->db, old);
            kv_notify(c->db, NOTIFY_GENERIC, "del", key);
            kv_dirty(1);
        }
    }
    reply_int(c, n);
}

/* Order of checks as in Redis: numkeys, then the key types, then options. */
static void zop_generic(kv_client *c, zop_spec spec)
{
    int nk_idx = spec.store ? 2 : 1;
    long long numkeys;
    if (arg_ll(c, c->argv[nk_idx], &numkeys) < 0)
        return;
    if (numkeys < 1) {
        reply_errorf(c, "ERR at least 1 input key is needed for '%s' command", c->cmd->name);
        return;
    }
    if (numkeys > c->argc - (nk_idx + 1)) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    zop_src *src = kv_calloc((size_t)numkeys * sizeof *src);
    zset *dst = NULL;
    for (long long i = 0; i < numkeys; i++) {
        bk_str key = c->argv[nk_idx + 1 + i];
        kv_entry *e = db_lookup_read(c->db, key); /* as Redis: sources count as reads */
        src[i].weight = 1.0;
        src[i].pos = (size_t)i;
        if (!e)
            continue;
        if (e->type == KV_ZSET) {
            src[i].z = entry_obj(e);
        } else if (e->type == KV_SET) {
            src[i].set = entry_obj(e);
        } else {
            reply_error(c, ERR_WRONGTYPE);
            goto out;
        }
    }
    enum zop_agg agg = AGG_SUM;
    int withscores = 0;
    long long limit = 0;
    int algebra = spec.kind != ZOP_DIFF && !spec.card; /* WEIGHTS and AGGREGATE allowed */
    for (int j = nk_idx + 1 + (int)numkeys; j < c->argc; j++) {
        bk_str o = c->argv[j];
        int more = c->argc - j - 1;
        if (algebra && arg_is(o, "weights") && more >= numkeys) {
            for (long long k = 0; k < numkeys; k++) {
                bk_str w = c->argv[++j];
                if (kv_parse_double(w.p, w.len, &src[k].weight) < 0) {
                    reply_error(c, "ERR weight value is not a float");
                    goto out;
                }
            }
        } else if (algebra && arg_is(o, "aggregate") && more >= 1) {
            bk_str a = c->argv[++j];
            if (arg_is(a, "sum"))
                agg = AGG_SUM;
            else if (arg_is(a, "min"))
                agg = AGG_MIN;
            else if (arg_is(a, "max"))
                agg = AGG_MAX;
            else {
                reply_error(c, ERR_SYNTAX);
                goto out;
            }
        } else if (!spec.store && !spec.card && arg_is(o, "withscores")) {
            withscores = 1;
        } else if (spec.card && arg_is(o, "limit") && more >= 1) {
            bk_str l = c->argv[++j];
            if (kv_parse_ll(l.p, l.len, &limit) < 0 || limit < 0) {
                reply_error(c, "ERR LIMIT can't be negative");
                goto out;
            }
        } else {
            reply_error(c, ERR_SYNTAX);
            goto out;
        }
    }
    if (spec.kind != ZOP_DIFF)
        qsort(src, (size_t)numkeys, sizeof *src, by_size);
    long long count = 0;
    if (spec.card) {
        eval_inter(src, numkeys, agg, NULL, limit, &count);
        reply_int(c, count);
        goto out;
    }
    dst = zset_new();
    if (spec.kind == ZOP_INTER)
        eval_inter(src, numkeys, agg, dst, 0, &count);
    else if (spec.kind == ZOP_UNION)
        eval_union(src, numkeys, agg, dst);
    else
        eval_diff(src, numkeys, dst);
    if (spec.store) {
        static const char *const events[] = { [ZOP_UNION] = "zunionstore",
                                              [ZOP_INTER] = "zinterstore",
                                              [ZOP_DIFF] = "zdiffstore" };
        store_zset(c, c->argv[1], dst, events[spec.kind]); /* takes dst */
        dst = NULL;
    } else {
        reply_zset(c, dst, withscores);
    }
out:
    if (dst)
        zset_free(dst);
    kv_free(src);
}

void zunion_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_UNION, 0, 0 }); }
void zinter_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_INTER, 0, 0 }); }
void zdiff_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_DIFF, 0, 0 }); }
void zunionstore_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_UNION, 1, 0 }); }
void zinterstore_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_INTER, 1, 0 }); }
void zdiffstore_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_DIFF, 1, 0 }); }
void zintercard_command(kv_client *c) { zop_generic(c, (zop_spec){ ZOP_INTER, 0, 1 }); }
