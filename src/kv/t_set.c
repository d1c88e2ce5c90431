/* Sets: a dict of members. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static bk_str member_key(const dict_node *n)
{
    kv_smember *m = (kv_smember *)(void *)n;
    return (bk_str){ m->data, n->aux };
}

dict *set_new(void)
{
    dict *s = dict_new_owned(member_key);
    s->owner = SET_INTSET;
    return s;
}

void set_free(dict *s)
{
    dict_free_owned(s);
}

static kv_smember *member_alloc(bk_str m, uint32_t hash)
{
    kv_smember *x = kv_malloc(sizeof *x + m.len);
    x->node.next = NULL;
    x->node.aux = (uint32_t)m.len;
    x->node.hash = hash;
    memcpy(x->data, m.p, m.len);
    return x;
}

dict *set_dup(dict *s)
{
    dict *d = set_new();
    d->owner = s->owner; /* a copy keeps the encoding (Redis's setTypeDup) */
    dict_expand(d, dict_size(s));
    dict_iter it;
    dict_iter_init(&it, s);
    for (dict_node *n; (n = dict_iter_next(&it));)
        dict_add(d, &member_alloc(smember_str((kv_smember *)(void *)n), n->hash)->node);
    dict_iter_end(&it);
    return d;
}

static int cfg_intset_entries(void)
{
    static const char *v;
    if (!v)
        v = kv_config_noop_str("set-max-intset-entries");
    long long n = 512;
    if (v && kv_parse_ll(v, strlen(v), &n) != 0)
        n = 512;
    return n < 0 ? 0 : n > INT_MAX ? INT_MAX : (int)n;
}

/* The encoding a set made anew of s's members would have. */
static void encoding_from_members(dict *s)
{
    int ints = dict_size(s) <= (size_t)cfg_intset_entries();
    dict_iter it;
    dict_iter_init(&it, s);
    for (dict_node *n; ints && (n = dict_iter_next(&it));) {
        bk_str m = smember_str((kv_smember *)(void *)n);
        long long v;
        ints = kv_parse_ll(m.p, m.len, &v) == 0;
    }
    dict_iter_end(&it);
    s->owner = ints ? SET_INTSET : SET_HASHTABLE;
}

int set_add(dict *s, bk_str m)
{
    uint32_t h = dict_hash32(m.p, m.len);
    if (dict_find(s, m.p, m.len, h))
        return 0;
    dict_add(s, &member_alloc(m, h)->node);
    long long v;
    if (s->owner == SET_INTSET &&
        (kv_parse_ll(m.p, m.len, &v) != 0 || dict_size(s) > (size_t)cfg_intset_entries()))
        s->owner = SET_HASHTABLE;
    return 1;
}

int set_has(dict *s, bk_str m)
{
    return dict_find(s, m.p, m.len, dict_hash32(m.p, m.len)) != NULL;
}

/* After a removal, as Redis's setTypeRemove: a mostly empty table shrinks
 * (not while a child holds a snapshot). */
static void shrink_after_removal(dict *s)
{
    if (!kv_child_running())
        dict_shrink_if_sparse(s);
}

int set_del(dict *s, bk_str m)
{
    dict_node *n = dict_unlink(s, m.p, m.len, dict_hash32(m.p, m.len));
    if (!n)
        return 0;
    kv_free(n);
    shrink_after_removal(s);
    return 1;
}

static dict *get_set(kv_client *c, bk_str key, int write, int *err)
{
    *err = 0;
    kv_entry *e = lookup_typed(c, key, KV_SET, write);
    if (e == KV_WRONGTYPE) {
        *err = 1;
        return NULL;
    }
    return e ? entry_obj(e) : NULL;
}

void sadd_command(kv_client *c)
{
    int err;
    dict *s = get_set(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!s) {
        s = set_new();
        db_add_obj(c->db, c->argv[1], KV_SET, s);
    }
    long long n = 0;
    for (int i = 2; i < c->argc; i++)
        n += set_add(s, c->argv[i]);
    if (n)
        kv_notify(c->db, NOTIFY_SET, "sadd", c->argv[1]);
    kv_dirty(n);
    reply_int(c, n);
}

void srem_command(kv_client *c)
{
    int err;
    dict *s = get_set(c, c->argv[1], 1, &err);
    if (err)
        return;
    long long n = 0;
    if (s) {
        for (int i = 2; i < c->argc; i++)
            n += set_del(s, c->argv[i]);
        if (n)
            kv_notify(c->db, NOTIFY_SET, "srem", c->argv[1]);
        if (dict_size(s) == 0) {
            db_delete(c->db, c->argv[1]);
            kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
        }
    }
    kv_dirty(n);
    reply_int(c, n);
}

typedef struct {
    long long v;
    dict_node *n;
} int_member;

static int int_member_cmp(const void *pa, const void *pb)
{
    const int_member *a = pa, *b = pb;
    return (a->v > b->v) - (a->v < b->v);
}

dict_node **set_intset_nodes(dict *s)
{
    size_t n = dict_size(s);
    if (n == 0 || !set_is_intset(s))
        return NULL;
    int_member *m = kv_malloc(n * sizeof *m);
    size_t k = 0;
    dict_iter it;
    dict_iter_init(&it, s);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        bk_str x = smember_str((kv_smember *)(void *)dn);
        if (kv_parse_ll(x.p, x.len, &m[k].v) != 0)
            break;
        m[k++].n = dn;
    }
    dict_iter_end(&it);
    dict_node **out = NULL;
    if (k == n) {
        qsort(m, n, sizeof *m, int_member_cmp);
        out = kv_malloc(n * sizeof *out);
        for (size_t i = 0; i < n; i++)
            out[i] = m[i].n;
    }
    kv_free(m);
    return out;
}

/* Every member: sorted when Redis would hold s as an intset, else in the
 * dict's order (Redis's hashtable order is as arbitrary). */
static void reply_members_as(kv_client *c, dict *s, int as_set)
{
    long long n = s ? (long long)dict_size(s) : 0;
    if (as_set)
        reply_set(c, n);
    else
        reply_array(c, n);
    if (!s)
        return;
    dict_node **sorted = set_intset_nodes(s);
    if (sorted) {
        for (size_t i = 0; i < dict_size(s); i++)
            reply_bulk_str(c, smember_str((kv_smember *)(void *)sorted[i]));
        kv_free(sorted);
        return;
    }
    dict_iter it;
    dict_iter_init(&it, s);
    for (dict_node *dn; (dn = dict_iter_next(&it));)
        reply_bulk_str(c, smember_str((kv_smember *)(void *)dn));
    dict_iter_end(&it);
}

static void reply_members(kv_client *c, dict *s) { reply_members_as(c, s, 1); }

void smembers_command(kv_client *c)
{
    int err;
    dict *s = get_set(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_members(c, s);
}

void sismember_command(kv_client *c)
{
    int err;
    dict *s = get_set(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_int(c, s && set_has(s, c->argv[2]));
}

void smismember_command(kv_client *c)
{
    int err;
    dict *s = get_set(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++)
        reply_int(c, s && set_has(s, c->argv[i]));
}

void scard_command(kv_client *c)
{
    int err;
    dict *s = get_set(c, c->argv[1], 0, &err);
    if (err)
        return;
    reply_int(c, s ? (long long)dict_size(s) : 0);
}

void spop_command(kv_client *c)
{
    long long count = -1;
    if (c->argc > 3) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (c->argc == 3) {
        if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &count) < 0 || count < 0) {
            reply_error(c, ERR_POSITIVE);
            return;
        }
    }
    int err;
    dict *s = get_set(c, c->argv[1], 1, &err);
    if (err)
        return;
    if (!s) {
        if (count >= 0)
            reply_set(c, 0);
        else
            reply_null(c);
        return;
    }
    long long n = count < 0 ? 1 : BK_MIN(count, (long long)dict_size(s));
    if (count >= 0)
        reply_set(c, n);
    /* SPOP is random: the AOF gets SREM of the chosen members. */
    bk_str *prop = kv_malloc(((size_t)n + 2) * sizeof *prop);
    kv_smember **popped = kv_malloc(((size_t)n + 1) * sizeof *popped);
    prop[0] = BK_STR("SREM");
    prop[1] = c->argv[1];
    for (long long i = 0; i < n; i++) {
        kv_smember *m = (kv_smember *)(void *)dict_random(s);
        dict_unlink_node(s, &m->node);
        shrink_after_removal(s);
        reply_bulk_str(c, smember_str(m));
        prop[2 + i] = smember_str(m);
        popped[i] = m;
    }
    if (n > 0) {
        kv_propagate_as(c, (int)n + 2, prop);
        kv_notify(c->db, NOTIFY_SET, "spop", c->argv[1]);
        kv_dirty(n);
    }
    for (long long i = 0; i < n; i++)
        kv_free(popped[i]);
    kv_free(prop);
    kv_free(popped);
    if (dict_size(s) == 0) {
        db_delete(c->db, c->argv[1]);
        kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
    } else if (count >= 0 && (unsigned long long)dict_size(s) * 5 <= (unsigned long long)n) {
        /* Redis pops most of a set by moving the few members left to a new
         * set, made as SADD makes one: its encoding follows those members. */
        encoding_from_members(s);
    }
}

void srandmember_command(kv_client *c)
{
    int err;
    if (c->argc == 2) {
        dict *s = get_set(c, c->argv[1], 0, &err);
        if (err)
            return;
        if (!s)
            reply_null(c);
        else
            reply_bulk_str(c, smember_str((kv_smember *)(void *)dict_random(s)));
        return;
    }
    if (c->argc > 3) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    long long count;
    if (arg_rand_count(c, c->argv[2], &count) < 0)
        return;
    dict *s = get_set(c, c->argv[1], 0, &err);
    if (err)
        return;
    if (!s || count == 0) {
        reply_empty_array(c);
        return;
    }
    if (count < 0) {
        if (rand_draws_check(c, count) < 0)
            return;
        rand_picker p;
        rand_picker_init(&p, s, (unsigned long long)-count);
        reply_array(c, -count);
        for (long long i = 0; i < -count && !rand_draws_stop(c, i); i++)
            reply_bulk_str(c, smember_str((kv_smember *)(void *)rand_picker_next(&p)));
        rand_picker_end(&p);
        return;
    }
    size_t size = dict_size(s), n = BK_MIN((size_t)count, size);
    if (n == size) {
        /* the whole set, in the order SMEMBERS lists it (as Redis) */
        reply_members_as(c, s, 0);
        return;
    }
    dict_node **all;
    if (RAND_FEW_DISTINCT(n, size)) {
        all = kv_malloc(n * sizeof *all);
        rand_distinct_nodes(s, all, n);
    } else {
        /* the first n of a partial Fisher-Yates over every node */
        all = kv_malloc(size * sizeof *all);
        size_t k = 0;
        dict_iter it;
        dict_iter_init(&it, s);
        for (dict_node *dn; (dn = dict_iter_next(&it));)
            all[k++] = dn;
        dict_iter_end(&it);
        for (size_t i = 0; i < n; i++) {
            size_t j = i + kv_rand64() % (size - i);
            dict_node *t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
    }
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++)
        reply_bulk_str(c, smember_str((kv_smember *)(void *)all[i]));
    kv_free(all);
}

enum { OP_INTER, OP_UNION, OP_DIFF };

/* Redis's choice of SDIFF algorithm, which shows in the result's encoding:
 * 1 = look each member of the first set up in the others (the result is an
 * intset when its members allow), 0 = copy the first set, then remove the
 * others' members (a hashtable when the first set's members made it one). */
static int diff_by_lookups(dict **sets, int nsets)
{
    unsigned long long lookups = 0, copies = 0;
    for (int i = 0; i < nsets; i++) {
        if (!sets[i])
            continue;
        lookups += dict_size(sets[0]);
        copies += dict_size(sets[i]);
    }
    return lookups / 2 <= copies;
}

/* Computes the set operation over keys argv[first..argc); returns a new
 * set (caller owns) or NULL after replying WRONGTYPE. */
static dict *set_op(kv_client *c, int first, int argc, int op, int write)
{
    int nsets = argc - first;
    dict **sets = kv_malloc((size_t)nsets * sizeof *sets);
    for (int i = 0; i < nsets; i++) {
        int err;
        sets[i] = get_set(c, c->argv[first + i], write, &err);
        if (err) {
            kv_free(sets);
            return NULL;
        }
    }
    dict *out = set_new();
    if (op == OP_INTER) {
        /* iterate the smallest; an empty or missing set empties the result */
        int smallest = 0;
        for (int i = 0; i < nsets; i++) {
            if (!sets[i] || dict_size(sets[i]) == 0) {
                smallest = -1;
                break;
            }
            if (dict_size(sets[i]) < dict_size(sets[smallest]))
                smallest = i;
        }
        if (smallest >= 0) {
            dict_iter it;
            dict_iter_init(&it, sets[smallest]);
            for (dict_node *n; (n = dict_iter_next(&it));) {
                bk_str m = smember_str((kv_smember *)(void *)n);
                int all = 1;
                for (int i = 0; i < nsets && all; i++)
                    if (i != smallest && !set_has(sets[i], m))
                        all = 0;
                if (all)
                    set_add(out, m);
            }
            dict_iter_end(&it);
        }
    } else if (op == OP_DIFF && sets[0] && diff_by_lookups(sets, nsets)) {
        dict_iter it;
        dict_iter_init(&it, sets[0]);
        for (dict_node *n; (n = dict_iter_next(&it));) {
            bk_str m = smember_str((kv_smember *)(void *)n);
            int keep = 1;
            for (int i = 1; i < nsets && keep; i++)
                if (sets[i] && (sets[i] == sets[0] || set_has(sets[i], m)))
                    keep = 0;
            if (keep)
                set_add(out, m);
        }
        dict_iter_end(&it);
    } else {
        for (int i = 0; i < nsets; i++) {
            if (!sets[i])
                continue;
            if (op == OP_DIFF && i > 0) {
                dict_iter it;
                dict_iter_init(&it, sets[i]);
                for (dict_node *n; (n = dict_iter_next(&it));)
                    set_del(out, smember_str((kv_smember *)(void *)n));
                dict_iter_end(&it);
                continue;
            }
            if (op == OP_DIFF && i == 0) {
                dict_iter it;
                dict_iter_init(&it, sets[i]);
                for (dict_node *n; (n = dict_iter_next(&it));)
                    set_add(out, smember_str((kv_smember *)(void *)n));
                dict_iter_end(&it);
                continue;
            }
            dict_iter it;
            dict_iter_init(&it, sets[i]);
            for (dict_node *n; (n = dict_iter_next(&it));)
                set_add(out, smember_str((kv_smember *)(void *)n));
            dict_iter_end(&it);
        }
        if (op == OP_DIFF && !sets[0]) {
            dict_clear_owned(out);
        }
    }
    kv_free(sets);
    return out;
}

static void setop_reply(kv_client *c, int op)
{
    dict *r = set_op(c, 1, c->argc, op, 0);
    if (!r)
        return;
    reply_members(c, r);
    set_free(r);
}

void sinter_command(kv_client *c) { setop_reply(c, OP_INTER); }
void sunion_command(kv_client *c) { setop_reply(c, OP_UNION); }
void sdiff_command(kv_client *c) { setop_reply(c, OP_DIFF); }

static void setop_store(kv_client *c, int op)
{
    dict *r = set_op(c, 2, c->argc, op, 0); /* read lookups, as Redis (stats, keymiss) */
    if (!r)
        return;
    kv_entry *old = db_lookup_write(c->db, c->argv[1]);
    long long n = (long long)dict_size(r);
    if (n > 0) {
        db_replace_obj(c->db, c->argv[1], old, KV_SET, r);
        static const char *const ev[] = { "sinterstore", "sunionstore", "sdiffstore" };
        kv_notify(c->db, NOTIFY_SET, ev[op], c->argv[1]);
    } else {
        set_free(r);
        if (old) {
            db_delete_entry(c->db, old);
            kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
        }
    }
    /* As Redis: an empty result over a missing destination changes nothing
     * (no WATCH invalidation, nothing to propagate). */
    if (n > 0 || old)
        kv_dirty(1);
    reply_int(c, n);
}

void sinterstore_command(kv_client *c) { setop_store(c, OP_INTER); }
void sunionstore_command(kv_client *c) { setop_store(c, OP_UNION); }
void sdiffstore_command(kv_client *c) { setop_store(c, OP_DIFF); }

void sintercard_command(kv_client *c)
{
    long long numkeys, limit = 0;
    if (kv_parse_ll(c->argv[1].p, c->argv[1].len, &numkeys) < 0 || numkeys <= 0) {
        reply_error(c, "ERR numkeys should be greater than 0");
        return;
    }
    if (numkeys > c->argc - 2) {
        reply_error(c, "ERR Number of keys can't be greater than number of args");
        return;
    }
    for (int i = 2 + (int)numkeys; i < c->argc; i++) {
        if (str_ieq_lit(c->argv[i], "limit", 5) && i + 1 < c->argc) {
            if (kv_parse_ll(c->argv[i + 1].p, c->argv[i + 1].len, &limit) < 0 || limit < 0) {
                reply_error(c, "ERR LIMIT can't be negative");
                return;
            }
            i++;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    dict *r = set_op(c, 2, 2 + (int)numkeys, OP_INTER, 0);
    if (!r)
        return;
    long long n = (long long)dict_size(r);
    if (limit && n > limit)
        n = limit;
    set_free(r);
    reply_int(c, n);
}

void smove_command(kv_client *c)
{
    int err;
    dict *src = get_set(c, c->argv[1], 1, &err);
    if (err)
        return;
    dict *dst = get_set(c, c->argv[2], 1, &err);
    if (err)
        return;
    if (!src || !set_has(src, c->argv[3])) {
        reply_int(c, 0);
        return;
    }
    if (src == dst) {
        reply_int(c, 1);
        return;
    }
    set_del(src, c->argv[3]);
    kv_notify(c->db, NOTIFY_SET, "srem", c->argv[1]);
    if (dict_size(src) == 0) {
        db_delete(c->db, c->argv[1]);
        kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
    }
    if (!dst) {
        dst = set_new();
        db_add_obj(c->db, c->argv[2], KV_SET, dst);
    }
    /* As Redis: a member already in the destination leaves it unchanged,
     * so a WATCH of the destination stays valid. */
    kv_touch_key(c->db, c->argv[1]);
    if (set_add(dst, c->argv[3])) {
        kv_touch_key(c->db, c->argv[2]);
        kv_notify(c->db, NOTIFY_SET, "sadd", c->argv[2]);
    }
    srv.cmd_touched_keys = 1;
    kv_dirty(1);
    reply_int(c, 1);
}

void sscan_command(kv_client *c)
{
    uint64_t cur; /* checked before the key, as Redis */
    if (scan_parse_cursor(c, c->argv[2], &cur) < 0)
        return;
    int err;
    dict *s = get_set(c, c->argv[1], 0, &err);
    if (err)
        return;
    if (!s) {
        reply_array(c, 2);
        reply_bulk(c, "0", 1);
        reply_empty_array(c);
        return;
    }
    scan_generic(c, s, 2, 1);
}
