/* Lists: a power-of-two ring of element pointers, O(1) at both ends and
 * for LINDEX. */
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

static kv_list *get_list(kv_client *c, str key, int write, int *err)
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
        long long n = MIN((long long)l->len, count);
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

static int elem_eq(kv_lelem *e, str s)
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
    str v = c->argv[3];
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
    for (int i = 3; i < c->argc; i++) {
        if (i + 1 >= c->argc) {
            reply_error(c, ERR_SYNTAX);
            return;
        }
        str o = c->argv[i];
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
        i++;
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

static void move_generic(kv_client *c, str src, str dst, int from_tail, int to_tail)
{
    int err;
    kv_list *s = get_list(c, src, 1, &err);
    if (err)
        return;
    kv_list *d = get_list(c, dst, 1, &err);
    if (err)
        return;
    if (!s) {
        reply_null(c);
        return;
    }
    kv_lelem *e = list_pop(s, from_tail);
    reply_bulk(c, e->data, e->len);
    int src_gone = s->len == 0 && s != d; /* onto itself: pushed back at once */
    if (src_gone)
        db_delete(c->db, src);
    if (!d) {
        d = list_new();
        db_add_obj(c->db, dst, KV_LIST, d);
    }
    list_push(d, to_tail, e);
    /* Redis's order: the push, then the pop, then the source's deletion */
    kv_notify(c->db, NOTIFY_LIST, to_tail ? "rpush" : "lpush", dst);
    kv_notify(c->db, NOTIFY_LIST, from_tail ? "rpop" : "lpop", src);
    if (src_gone)
        kv_notify(c->db, NOTIFY_GENERIC, "del", src);
    kv_dirty(1);
}

void rpoplpush_command(kv_client *c)
{
    move_generic(c, c->argv[1], c->argv[2], 1, 0);
}

void lmove_command(kv_client *c)
{
    int w[2];
    for (int i = 0; i < 2; i++) {
        str o = c->argv[3 + i];
        if (str_ieq_lit(o, "left", 4))
            w[i] = 0;
        else if (str_ieq_lit(o, "right", 5))
            w[i] = 1;
        else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    move_generic(c, c->argv[1], c->argv[2], w[0], w[1]);
}
