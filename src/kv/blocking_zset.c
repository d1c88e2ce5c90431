/* The sorted-set pops of the blocking family: ZMPOP, BZPOPMIN, BZPOPMAX,
 * BZMPOP (ZPOPMIN/ZPOPMAX themselves are in t_zset.c). Kept apart from
 * t_zset.c so the two evolve without touching each other. */
#include "kv/aof.h"
#include "kv/blocking.h"
#include "kv/db.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

static const bk_str zpop_word[2] = { { "ZPOPMIN", 7 }, { "ZPOPMAX", 7 } };

/* Pops from the sorted set z at key, lowest scores first (highest with
 * max): one member with a flat [key, member, score] reply (BZPOPMIN,
 * count < 0) or up to count with [key, [[member, score], ...]] (ZMPOP).
 * Deletes the emptied key; propagates ZPOPMIN/ZPOPMAX key [n], from the
 * command (served = 0) or as a record of its own for a client that was
 * parked. */
static void zpop_reply(kv_client *c, kv_db *db, bk_str key, zset *z, int max, long long count,
                       int served)
{
    long long n = count < 0 ? 1 : BK_MIN(count, (long long)z->length);
    reply_array(c, count < 0 ? 3 : 2);
    reply_bulk_str(c, key);
    if (count >= 0)
        reply_array(c, n);
    for (long long i = 0; i < n; i++) {
        zs_node *x = max ? z->tail : z->header->lv[0].forward;
        if (count >= 0)
            reply_array(c, 2);
        reply_bulk_str(c, zs_member(x));
        reply_double(c, x->score);
        zset_delete(z, x);
    }
    char num[KV_LL_STR_MAX];
    bk_str argv[3] = { zpop_word[max], key, { num, kv_fmt_ll(num, n) } };
    int argc = count < 0 ? 2 : 3;
    if (served)
        aof_feed(db, argc, argv);
    else
        kv_propagate_as(c, argc, argv);
    kv_touch_key(db, key);
    kv_notify(db, NOTIFY_ZSET, max ? "zpopmax" : "zpopmin", key);
    if (z->length == 0) {
        db_delete(db, key);
        kv_notify(db, NOTIFY_GENERIC, "del", key);
    }
    kv_dirty(n);
}

/* bstate param[0]: max; param[1]: count, -1 for BZPOPMIN/BZPOPMAX. */
static int zset_serve(kv_client *c, kv_db *db, bk_str key, kv_entry *e)
{
    zpop_reply(c, db, key, entry_obj(e), (int)c->bstate->param[0], c->bstate->param[1], 1);
    return 1;
}

static const kv_block_kind zset_kind = { KV_ZSET, zset_serve, reply_null_array };

/* Pops from the first non-empty sorted set of argv[first...]: 1 when it
 * replied (popped or WRONGTYPE), 0 when all are empty. */
static int zpop_first(kv_client *c, int first, int nkeys, int max, long long count)
{
    for (int i = first; i < first + nkeys; i++) {
        kv_entry *e = lookup_typed(c, c->argv[i], KV_ZSET, 1);
        if (e == KV_WRONGTYPE)
            return 1;
        if (e) {
            zpop_reply(c, c->db, c->argv[i], entry_obj(e), max, count, 0);
            return 1;
        }
    }
    return 0;
}

static void park(kv_client *c, int first, int nkeys, int64_t ms, int max, long long count)
{
    kv_bstate *b = blocking_park(c, &zset_kind, first, nkeys, ms);
    b->param[0] = max;
    b->param[1] = count;
}

static void bzpop_generic(kv_client *c, int max)
{
    int64_t ms;
    if (blocking_timeout_arg(c, c->argv[c->argc - 1], &ms) < 0)
        return;
    if (zpop_first(c, 1, c->argc - 2, max, -1))
        return;
    if (blocking_denied(c))
        reply_null_array(c);
    else
        park(c, 1, c->argc - 2, ms, max, -1);
}

void bzpopmin_command(kv_client *c) { bzpop_generic(c, 0); }
void bzpopmax_command(kv_client *c) { bzpop_generic(c, 1); }

/* ZMPOP numkeys key... MIN|MAX [COUNT n]; BZMPOP timeout numkeys ... */
static void zmpop_generic(kv_client *c, int numkeys_idx, int block)
{
    int nkeys, max;
    long long count;
    int64_t ms = 0;
    if (blocking_mpop_args(c, numkeys_idx, "min", "max", &nkeys, &max, &count) < 0)
        return;
    if (block && blocking_timeout_arg(c, c->argv[1], &ms) < 0)
        return;
    if (zpop_first(c, numkeys_idx + 1, nkeys, max, count))
        return;
    if (!block || blocking_denied(c))
        reply_null_array(c);
    else
        park(c, numkeys_idx + 1, nkeys, ms, max, count);
}

void zmpop_command(kv_client *c) { zmpop_generic(c, 1, 0); }
void bzmpop_command(kv_client *c) { zmpop_generic(c, 2, 1); }
