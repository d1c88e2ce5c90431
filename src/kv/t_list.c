/* Lists: a power-of-two ring of element pointers, O(1) at both ends and
 * for LINDEX. */
#include "kv/aof.h"
#include "kv/blocking.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>

kv_list *list_new(void)
{
    kv_list *l = kv_malloc(sizeof *l);
    l->cap = 8;
    l->ring = kv_malloc(l->cap * sizeof *l->ring);
    l->head = l->len = 0;
    return l;
}

void list_free(kv_list *l)
{
    for (size_t i = 0; i < l->len; i++)
        kv_free(list_at(l, i));
    kv_free(l->ring);
    kv_free(l);
}

kv_lelem *lelem_new(const char *p, size_t n)
{
    kv_lelem *e = kv_malloc(sizeof *e + n);
    e->len = (uint32_t)n;
    memcpy(e->data, p, n);
    return e;
}

kv_list *list_dup(kv_list *l)
{
    kv_list *d = list_new();
    for (size_t i = 0; i < l->len; i++) {
        kv_lelem *e = list_at(l, i);
        list_push(d, 1, lelem_new(e->data, e->len));
    }
    return d;
}

static void grow(kv_list *l)
{
    size_t cap = l->cap * 2;
    kv_lelem **r = kv_malloc(cap * sizeof *r);
    for (size_t i = 0; i < l->len; i++)
        r[i] = list_at(l, i);
    kv_free(l->ring);
    l->ring = r;
    l->cap = cap;
    l->head = 0;
}

static void maybe_shrink(kv_list *l)
{
    if (l->cap > 64 && l->len * 8 < l->cap) {
        size_t cap = l->cap / 2;
        kv_lelem **r = kv_malloc(cap * sizeof *r);
        for (size_t i = 0; i < l->len; i++)
            r[i] = list_at(l, i);
        kv_free(l->ring);
        l->ring = r;
        l->cap = cap;
        l->head = 0;
    }
}

void list_push(kv_list *l, int tail, kv_lelem *e)
{
    if (l->len == l->cap)
        grow(l);
    if (tail) {
        l->ring[(l->head + l->len) & (l->cap - 1)] = e;
    } else {
        l->head = (l->head - 1) & (l->cap - 1);
        l->ring[l->head] = e;
    }
    l->len++;
}

kv_lelem *list_pop(kv_list *l, int tail)
{
    if (l->len == 0)
        return NULL;
    kv_lelem *e;
    if (tail) {
        e = list_at(l, l->len - 1);
    } else {
        e = l->ring[l->head];
        l->head = (l->head + 1) & (l->cap - 1);
    }
    l->len--;
    maybe_shrink(l);
    return e;
}

void list_remove_at(kv_list *l, size_t i)
{
    kv_free(list_at(l, i));
    if (i < l->len / 2) {
        for (size_t k = i; k > 0; k--)
            list_set_at(l, k, list_at(l, k - 1));
        l->head = (l->head + 1) & (l->cap - 1);
    } else {
        for (size_t k = i; k + 1 < l->len; k++)
            list_set_at(l, k, list_at(l, k + 1));
    }
    l->len--;
}

void list_insert_at(kv_list *l, size_t i, kv_lelem *e)
{
    if (l->len == l->cap)
        grow(l);
    l->len++;
    for (size_t k = l->len - 1; k > i; k--)
        list_set_at(l, k, list_at(l, k - 1));
    list_set_at(l, i, e);
}

static kv_list *get_list(kv_client *c, bk_str key, int write, int *err)
{
    *err = 0;
    kv_entry *e = lookup_typed(c, key, KV_LIST, write);
    if (e == KV_WRONGTYPE) {
        *err = 1;
        return NULL;
    }
    return e ? entry_obj(e) : NULL;
}

static void push_generic(kv_client *c, int tail, int only_existing)
{
    int err;
    kv_list *l = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!l) {
        if (only_existing) {
            reply_int(c, 0);
            return;
        }
        l = list_new();
        db_add_obj(c->db, c->argv[1], KV_LIST, l);
    }
    for (int i = 2; i < c->argc; i++)
        list_push(l, tail, lelem_new(c->argv[i].p, c->argv[i].len));
    kv_notify(c->db, NOTIFY_LIST, tail ? "rpush" : "lpush", c->argv[1]);
    kv_dirty(c->argc - 2);
    reply_int(c, (long long)l->len);
}

void lpush_command(kv_client *c) { push_generic(c, 0, 0); }
void rpush_command(kv_client *c) { push_generic(c, 1, 0); }
void lpushx_command(kv_client *c) { push_generic(c, 0, 1); }
void rpushx_command(kv_client *c) { push_generic(c, 1, 1); }

static void pop_generic(kv_client *c, int tail)
{
    long long count = -1;
    if (c->argc > 3) {
        reply_arity_error(c, c->cmd->name);
        return;
    }
    if (c->argc == 3) {
        if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &count) < 0 || count < 0) {
            reply_error(c, ERR_POSITIVE);
            return;
        }
    }
    int err;
    kv_list *l = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!l) {
        if (count >= 0)
            reply_null_array(c);
        else
            reply_null(c);
        return;
    }
    if (count < 0) {
        kv_lelem *e = list_pop(l, tail);
        reply_bulk(c, e->data, e->len);
        kv_free(e);
    } else {
        long long n = BK_MIN((long long)l->len, count);
        reply_array(c, n);
        for (long long i = 0; i < n; i++) {
            kv_lelem *e = list_pop(l, tail);
            reply_bulk(c, e->data, e->len);
            kv_free(e);
        }
    }
    if (count != 0)
        kv_notify(c->db, NOTIFY_LIST, tail ? "rpop" : "lpop", c->argv[1]);
    if (l->len == 0) {
        db_delete(c->db, c->argv[1]);
        kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
    }
    kv_dirty(1);
}

void lpop_command(kv_client *c) { pop_generic(c, 0); }
void rpop_command(kv_client *c) { pop_generic(c, 1); }

void lrange_command(kv_client *c)
{
    long long start, end;
    if (arg_ll(c, c->argv[2], &start) < 0 || arg_ll(c, c->argv[3], &end) < 0)
        return;
    int err;
    kv_list *l = get_list(c, c->argv[1], 0, &err);
    if (err)
        return;
    long long len = l ? (long long)l->len : 0;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (!l || start > end || start >= len) {
        reply_empty_array(c);
        return;
    }
    if (end >= len)
        end = len - 1;
    reply_array(c, end - start + 1);
    for (long long i = start; i <= end; i++) {
        kv_lelem *e = list_at(l, (size_t)i);
        reply_bulk(c, e->data, e->len);
    }
}

void llen_command(kv_client *c)
{
    int err;
    kv_list *l = get_list(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_int(c, l ? (long long)l->len : 0);
}

void lindex_command(kv_client *c)
{
    long long idx;
    if (arg_ll(c, c->argv[2], &idx) < 0)
        return;
    int err;
    kv_list *l = get_list(c, c->argv[1], 0, &err);
    if (err)
        return;
    if (l && idx < 0)
        idx += (long long)l->len;
    if (!l || idx < 0 || idx >= (long long)l->len) {
        reply_null(c);
        return;
    }
    kv_lelem *e = list_at(l, (size_t)idx);
    reply_bulk(c, e->data, e->len);
}

void lset_command(kv_client *c)
{
    long long idx;
    if (arg_ll(c, c->argv[2], &idx) < 0)
        return;
    int err;
    kv_list *l = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!l) {
        reply_error(c, ERR_NO_KEY);
        return;
    }
    if (idx < 0)
        idx += (long long)l->len;
    if (idx < 0 || idx >= (long long)l->len) {
        reply_error(c, ERR_OUT_OF_RANGE);
        return;
    }
    kv_free(list_at(l, (size_t)idx));
    list_set_at(l, (size_t)idx, lelem_new(c->argv[3].p, c->argv[3].len));
    kv_notify(c->db, NOTIFY_LIST, "lset", c->argv[1]);
    kv_dirty(1);
    reply_ok(c);
}

static int elem_eq(kv_lelem *e, bk_str s)
{
    return e->len == s.len && memcmp(e->data, s.p, s.len) == 0;
}

void lrem_command(kv_client *c)
{
    long long count;
    if (arg_ll(c, c->argv[2], &count) < 0)
        return;
    int err;
    kv_list *l = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!l) {
        reply_int(c, 0);
        return;
    }
    bk_str v = c->argv[3];
    long long removed = 0;
    /* Compact in one pass: keep[] written in place. */
    size_t n = l->len;
    if (count >= 0) {
        size_t w = 0;
        for (size_t r = 0; r < n; r++) {
            kv_lelem *e = list_at(l, r);
            if ((count == 0 || removed < count) && elem_eq(e, v)) {
                kv_free(e);
                removed++;
            } else {
                list_set_at(l, w++, e);
            }
        }
        l->len = w;
    } else {
        size_t w = n;
        for (size_t r = n; r-- > 0;) {
            kv_lelem *e = list_at(l, r);
            if (removed < -count && elem_eq(e, v)) {
                kv_free(e);
                removed++;
            } else {
                list_set_at(l, --w, e);
            }
        }
        l->head = (l->head + w) & (l->cap - 1);
        l->len = n - w;
    }
    if (removed) {
        kv_notify(c->db, NOTIFY_LIST, "lrem", c->argv[1]);
        if (l->len == 0) {
            db_delete(c->db, c->argv[1]);
            kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
        }
        kv_dirty(removed);
    }
    reply_int(c, removed);
}

void ltrim_command(kv_client *c)
{
    long long start, end;
    if (arg_ll(c, c->argv[2], &start) < 0 || arg_ll(c, c->argv[3], &end) < 0)
        return;
    int err;
    kv_list *l = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!l) {
        reply_ok(c);
        return;
    }
    long long len = (long long)l->len;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    long long ltrim, rtrim;
    if (start > end || start >= len) {
        ltrim = len;
        rtrim = 0;
    } else {
        if (end >= len)
            end = len - 1;
        ltrim = start;
        rtrim = len - end - 1;
    }
    for (long long i = 0; i < ltrim; i++)
        kv_free(list_pop(l, 0));
    for (long long i = 0; i < rtrim; i++)
        kv_free(list_pop(l, 1));
    kv_notify(c->db, NOTIFY_LIST, "ltrim", c->argv[1]);
    if (l->len == 0) {
        db_delete(c->db, c->argv[1]);
        kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
    }
    kv_dirty(1);
    reply_ok(c);
}

void linsert_command(kv_client *c)
{
    int after;
    if (str_ieq_lit(c->argv[2], "after", 5))
        after = 1;
    else if (str_ieq_lit(c->argv[2], "before", 6))
        after = 0;
    else {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    int err;
    kv_list *l = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!l) {
        reply_int(c, 0);
        return;
    }
    for (size_t i = 0; i < l->len; i++) {
        if (elem_eq(list_at(l, i), c->argv[3])) {
            list_insert_at(l, i + (size_t)after, lelem_new(c->argv[4].p, c->argv[4].len));
            kv_notify(c->db, NOTIFY_LIST, "linsert", c->argv[1]);
            kv_dirty(1);
            reply_int(c, (long long)l->len);
            return;
        }
    }
    reply_int(c, -1);
}

void lpos_command(kv_client *c)
{
    long long rank = 1, count = -1, maxlen = 0;
    for (int i = 3; i < c->argc; i += 2) { /* OPTION value pairs */
        if (i + 1 >= c->argc) {
            reply_error(c, ERR_SYNTAX);
            return;
        }
        bk_str o = c->argv[i];
        long long v;
        if (arg_ll(c, c->argv[i + 1], &v) < 0)
            return;
        if (str_ieq_lit(o, "rank", 4)) {
            if (v == 0 || v == LLONG_MIN) {
                reply_error(c, "ERR RANK can't be zero: use 1 to start from the first match, 2 "
                               "from the second ... or use negative to start from the end of "
                               "the list");
                return;
            }
            rank = v;
        } else if (str_ieq_lit(o, "count", 5)) {
            if (v < 0) {
                reply_error(c, "ERR COUNT can't be negative");
                return;
            }
            count = v;
        } else if (str_ieq_lit(o, "maxlen", 6)) {
            if (v < 0) {
                reply_error(c, "ERR MAXLEN can't be negative");
                return;
            }
            maxlen = v;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    int err;
    kv_list *l = get_list(c, c->argv[1], 0, &err);
    if (err)
        return;
    size_t h = reply_defer(c);
    long long found = 0, skip = (rank > 0 ? rank : -rank) - 1;
    if (l) {
        long long len = (long long)l->len;
        for (long long k = 0; k < len && (!maxlen || k < maxlen); k++) {
            long long idx = rank > 0 ? k : len - 1 - k;
            if (!elem_eq(list_at(l, (size_t)idx), c->argv[2]))
                continue;
            if (skip > 0) {
                skip--;
                continue;
            }
            if (count < 0) {
                reply_int(c, idx);
                return;
            }
            reply_int(c, idx);
            found++;
            if (count > 0 && found == count)
                break;
        }
    }
    if (count < 0) {
        reply_null(c);
        return;
    }
    reply_defer_array(c, h, found);
}

/* ---- moves and blocking pops ---- */

/* What a list pop propagates as, and what a client parked by a blocking
 * list command does when served (bstate param[0]). */
enum { LP_POP, LP_MPOP, LP_LMOVE, LP_RPOPLPUSH, LP_ASIS };

static const bk_str where_word[2] = { { "LEFT", 4 }, { "RIGHT", 5 } };
static const bk_str pop_word[2] = { { "LPOP", 4 }, { "RPOP", 4 } };

/* A served client (one that blocked) writes its own AOF record; a command
 * that did not block replaces the argv its call propagates. */
static void propagate(kv_client *c, kv_db *db, int served, int argc, const bk_str *argv)
{
    if (served)
        aof_feed(db, argc, argv);
    else
        kv_propagate_as(c, argc, argv);
}

/* Pops from the list l at key: one element with a [key, value] reply
 * (BLPOP, count < 0) or up to count with [key, [values]] (LMPOP). Deletes
 * the emptied key; propagates [LR]POP key [n]. */
static void pop_reply(kv_client *c, kv_db *db, bk_str key, kv_list *l, int tail, long long count,
                      int served)
{
    long long n = count < 0 ? 1 : BK_MIN(count, (long long)l->len);
    reply_array(c, 2);
    reply_bulk_str(c, key);
    if (count >= 0)
        reply_array(c, n);
    for (long long i = 0; i < n; i++) {
        kv_lelem *e = list_pop(l, tail);
        reply_bulk(c, e->data, e->len);
        kv_free(e);
    }
    char num[KV_LL_STR_MAX];
    bk_str argv[3] = { pop_word[tail], key, { num, kv_fmt_ll(num, n) } };
    propagate(c, db, served, count < 0 ? 2 : 3, argv);
    kv_touch_key(db, key);
    kv_notify(db, NOTIFY_LIST, tail ? "rpop" : "lpop", key);
    if (l->len == 0) {
        db_delete(db, key);
        kv_notify(db, NOTIFY_GENERIC, "del", key);
    }
    kv_dirty(n);
}

/* LMOVE of one element from the list l at src to dst (created when
 * missing; WRONGTYPE when it holds another type, nothing moved). The
 * element goes back into the same list when src is dst, so the key never
 * disappears and reappears. as: LP_ASIS (LMOVE, RPOPLPUSH) or the command
 * to propagate for a blocking one. */
static void move_reply(kv_client *c, kv_db *db, bk_str src, kv_list *l, bk_str dst, int from, int to,
                       int as, int served)
{
    kv_entry *de = db_lookup_write(db, dst);
    if (de && de->type != KV_LIST) {
        reply_error(c, ERR_WRONGTYPE);
        return;
    }
    kv_lelem *e = list_pop(l, from);
    reply_bulk(c, e->data, e->len);
    kv_list *d = de ? entry_obj(de) : NULL;
    if (!d) {
        d = list_new();
        db_add_obj(db, dst, KV_LIST, d);
    }
    list_push(d, to, e);
    if (as == LP_LMOVE) {
        bk_str argv[5] = { BK_STR("LMOVE"), src, dst, where_word[from], where_word[to] };
        propagate(c, db, served, 5, argv);
    } else if (as == LP_RPOPLPUSH) {
        bk_str argv[3] = { BK_STR("RPOPLPUSH"), src, dst };
        propagate(c, db, served, 3, argv);
    }
    kv_touch_key(db, src);
    kv_touch_key(db, dst);
    /* Redis's order: the push, then the pop, then the source's deletion */
    kv_notify(db, NOTIFY_LIST, to ? "rpush" : "lpush", dst);
    kv_notify(db, NOTIFY_LIST, from ? "rpop" : "lpop", src);
    if (l->len == 0) {
        db_delete(db, src);
        kv_notify(db, NOTIFY_GENERIC, "del", src);
    }
    kv_dirty(1);
}

static void move_generic(kv_client *c, bk_str src, bk_str dst, int from_tail, int to_tail)
{
    int err;
    kv_list *s = get_list(c, src, 1, &err);
    if (err)
        return;
    if (!s) {
        reply_null(c);
        return;
    }
    move_reply(c, c->db, src, s, dst, from_tail, to_tail, LP_ASIS, 0);
}

void rpoplpush_command(kv_client *c)
{
    move_generic(c, c->argv[1], c->argv[2], 1, 0);
}

/* LEFT / RIGHT at argv[i]: 0 / 1, or -1 after a syntax error reply. */
static int where_arg(kv_client *c, int i)
{
    if (str_ieq_lit(c->argv[i], "left", 4))
        return 0;
    if (str_ieq_lit(c->argv[i], "right", 5))
        return 1;
    reply_error(c, ERR_SYNTAX);
    return -1;
}

void lmove_command(kv_client *c)
{
    int from = where_arg(c, 3), to = from < 0 ? -1 : where_arg(c, 4);
    if (to < 0)
        return;
    move_generic(c, c->argv[1], c->argv[2], from, to);
}

/* A parked client's list is ready: bstate param[0] is the LP_ mode,
 * param[1] where from, param[2] where to, param[3] the count. */
static int list_serve(kv_client *c, kv_db *db, bk_str key, kv_entry *e)
{
    const kv_bstate *b = c->bstate;
    kv_list *l = entry_obj(e);
    int from = (int)b->param[1];
    switch (b->param[0]) {
    case LP_POP:
        pop_reply(c, db, key, l, from, -1, 1);
        break;
    case LP_MPOP:
        pop_reply(c, db, key, l, from, b->param[3], 1);
        break;
    default:
        move_reply(c, db, key, l, b->argv[2], from, (int)b->param[2], (int)b->param[0], 1);
        break;
    }
    return 1;
}

static const kv_block_kind list_kind = { KV_LIST, list_serve, reply_null_array };

/* Pops from the first non-empty list of keys argv[first...]: 1 when it
 * replied (popped or WRONGTYPE), 0 when all are empty. */
static int pop_first(kv_client *c, int first, int nkeys, int tail, long long count)
{
    for (int i = first; i < first + nkeys; i++) {
        int err;
        kv_list *l = get_list(c, c->argv[i], 1, &err);
        if (err)
            return 1;
        if (l) {
            pop_reply(c, c->db, c->argv[i], l, tail, count, 0);
            return 1;
        }
    }
    return 0;
}

static void bpop_generic(kv_client *c, int tail)
{
    int64_t ms;
    if (blocking_timeout_arg(c, c->argv[c->argc - 1], &ms) < 0)
        return;
    if (pop_first(c, 1, c->argc - 2, tail, -1))
        return;
    if (blocking_denied(c)) {
        reply_null_array(c);
        return;
    }
    kv_bstate *b = blocking_park(c, &list_kind, 1, c->argc - 2, ms);
    b->param[0] = LP_POP;
    b->param[1] = tail;
}

void blpop_command(kv_client *c) { bpop_generic(c, 0); }
void brpop_command(kv_client *c) { bpop_generic(c, 1); }

/* LMPOP numkeys key... LEFT|RIGHT [COUNT n]; BLMPOP timeout numkeys ... */
static void mpop_generic(kv_client *c, int numkeys_idx, int block)
{
    int nkeys, where;
    long long count;
    int64_t ms = 0;
    if (blocking_mpop_args(c, numkeys_idx, "left", "right", &nkeys, &where, &count) < 0)
        return;
    if (block && blocking_timeout_arg(c, c->argv[1], &ms) < 0)
        return;
    if (pop_first(c, numkeys_idx + 1, nkeys, where, count))
        return;
    if (!block || blocking_denied(c)) {
        reply_null_array(c);
        return;
    }
    kv_bstate *b = blocking_park(c, &list_kind, numkeys_idx + 1, nkeys, ms);
    b->param[0] = LP_MPOP;
    b->param[1] = where;
    b->param[3] = count;
}

void lmpop_command(kv_client *c) { mpop_generic(c, 1, 0); }
void blmpop_command(kv_client *c) { mpop_generic(c, 2, 1); }

static void bmove_generic(kv_client *c, int from, int to, int timeout_idx, int as)
{
    int64_t ms;
    if (blocking_timeout_arg(c, c->argv[timeout_idx], &ms) < 0)
        return;
    int err;
    kv_list *s = get_list(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (s) {
        move_reply(c, c->db, c->argv[1], s, c->argv[2], from, to, as, 0);
        return;
    }
    if (blocking_denied(c)) {
        reply_null(c);
        return;
    }
    kv_bstate *b = blocking_park(c, &list_kind, 1, 1, ms);
    b->param[0] = as;
    b->param[1] = from;
    b->param[2] = to;
}

void blmove_command(kv_client *c)
{
    int from = where_arg(c, 3), to = from < 0 ? -1 : where_arg(c, 4);
    if (to < 0)
        return;
    bmove_generic(c, from, to, 5, LP_LMOVE);
}

void brpoplpush_command(kv_client *c) { bmove_generic(c, 1, 0, 3, LP_RPOPLPUSH); }
