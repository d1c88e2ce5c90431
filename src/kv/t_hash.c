/* Hashes: a dict of fields, each field and its value in one allocation. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <malloc.h>
#include <math.h>

static str hfield_key(const dict_node *n)
{
    kv_hfield *f = (kv_hfield *)(void *)n;
    return (str){ f->data, n->aux };
}

dict *hash_new(void)
{
    return dict_new_owned(hfield_key);
}

void hash_free(dict *h)
{
    dict_free_owned(h);
}

static kv_hfield *field_alloc(str f, str v)
{
    kv_hfield *x = kv_malloc(sizeof *x + f.len + v.len);
    size_t room = malloc_usable_size(x) - sizeof *x - f.len;
    x->node.next = NULL;
    x->node.aux = (uint32_t)f.len;
    x->node.hash = dict_hash32(f.p, f.len);
    x->vlen = (uint32_t)v.len;
    x->vcap = (uint32_t)MIN(room, (size_t)UINT32_MAX);
    memcpy(x->data, f.p, f.len);
    memcpy(x->data + f.len, v.p, v.len);
    return x;
}

dict *hash_dup(dict *h)
{
    dict *d = hash_new();
    dict_expand(d, dict_size(h));
    dict_iter it;
    dict_iter_init(&it, h);
    for (dict_node *n; (n = dict_iter_next(&it));) {
        kv_hfield *f = (kv_hfield *)(void *)n;
        dict_add(d, &field_alloc(hfield_name(f), hfield_value(f))->node);
    }
    dict_iter_end(&it);
    return d;
}

kv_hfield *hash_get(dict *h, str field)
{
    return (kv_hfield *)(void *)dict_find(h, field.p, field.len, dict_hash32(field.p, field.len));
}

int hash_set(dict *h, str field, str value)
{
    kv_hfield *f = hash_get(h, field);
    if (f) {
        if (value.len <= f->vcap) {
            memcpy(f->data + f->node.aux, value.p, value.len);
            f->vlen = (uint32_t)value.len;
            return 0;
        }
        kv_hfield *n = field_alloc(field, value);
        dict_relink(h, &f->node, &n->node);
        kv_free(f);
        return 0;
    }
    dict_add(h, &field_alloc(field, value)->node);
    return 1;
}

int hash_del(dict *h, str field)
{
    dict_node *n = dict_unlink(h, field.p, field.len, dict_hash32(field.p, field.len));
    if (!n)
        return 0;
    kv_free(n);
    return 1;
}

/* The hash at key, created when create is set. NULL: missing (or error
 * replied when *err is set). */
static dict *get_hash(kv_client *c, str key, int create, int write, int *err)
{
    *err = 0;
    kv_entry *e = lookup_typed(c, key, KV_HASH, write);
    if (e == KV_WRONGTYPE) {
        *err = 1;
        return NULL;
    }
    if (e)
        return entry_obj(e);
    if (!create)
        return NULL;
    dict *h = hash_new();
    db_add_obj(c->db, key, KV_HASH, h);
    return h;
}

static void delete_if_empty(kv_client *c, str key, dict *h)
{
    if (dict_size(h) == 0)
        db_delete(c->db, key);
}

void hset_command(kv_client *c)
{
    if (c->argc % 2 != 0) {
        reply_arity_error(c, c->cmd->name);
        return;
    }
    int err;
    dict *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    long long created = 0;
    for (int i = 2; i < c->argc; i += 2)
        created += hash_set(h, c->argv[i], c->argv[i + 1]);
    kv_dirty(1);
    if (c->cmd->proc == hmset_command)
        reply_ok(c);
    else
        reply_int(c, created);
}

void hmset_command(kv_client *c)
{
    hset_command(c);
}

void hsetnx_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    if (hash_get(h, c->argv[2])) {
        reply_int(c, 0);
        return;
    }
    hash_set(h, c->argv[2], c->argv[3]);
    kv_dirty(1);
    reply_int(c, 1);
}

void hget_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    kv_hfield *f = h ? hash_get(h, c->argv[2]) : NULL;
    if (f)
        reply_bulk_str(c, hfield_value(f));
    else
        reply_null(c);
}

void hmget_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        kv_hfield *f = h ? hash_get(h, c->argv[i]) : NULL;
        if (f)
            reply_bulk_str(c, hfield_value(f));
        else
            reply_null(c);
    }
}

void hdel_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 1, &err);
    if (err)
        return;
    long long n = 0;
    if (h) {
        for (int i = 2; i < c->argc; i++)
            n += hash_del(h, c->argv[i]);
        if (n) {
            delete_if_empty(c, c->argv[1], h);
            kv_dirty(n);
        }
    }
    reply_int(c, n);
}

static void hgetall_generic(kv_client *c, int keys, int vals)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    size_t n = h ? dict_size(h) : 0;
    if (keys && vals)
        reply_map(c, (long long)n);
    else
        reply_array(c, (long long)n);
    if (!h)
        return;
    dict_iter it;
    dict_iter_init(&it, h);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        kv_hfield *f = (kv_hfield *)(void *)dn;
        if (keys)
            reply_bulk_str(c, hfield_name(f));
        if (vals)
            reply_bulk_str(c, hfield_value(f));
    }
    dict_iter_end(&it);
}

void hgetall_command(kv_client *c) { hgetall_generic(c, 1, 1); }
void hkeys_command(kv_client *c) { hgetall_generic(c, 1, 0); }
void hvals_command(kv_client *c) { hgetall_generic(c, 0, 1); }

void hincrby_command(kv_client *c)
{
    long long by, v = 0;
    if (arg_ll(c, c->argv[3], &by) < 0)
        return;
    int err;
    dict *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    kv_hfield *f = hash_get(h, c->argv[2]);
    if (f) {
        str cur = hfield_value(f);
        if (kv_parse_ll(cur.p, cur.len, &v) < 0) {
            reply_error(c, "ERR hash value is not an integer");
            return;
        }
    }
    if ((by > 0 && v > LLONG_MAX - by) || (by < 0 && v < LLONG_MIN - by)) {
        reply_error(c, ERR_OVERFLOW);
        return;
    }
    v += by;
    char b[KV_LL_STR_MAX];
    hash_set(h, c->argv[2], (str){ b, kv_fmt_ll(b, v) });
    kv_dirty(1);
    reply_int(c, v);
}

void hincrbyfloat_command(kv_client *c)
{
    long double by, v = 0;
    if (kv_parse_ldouble(c->argv[3].p, c->argv[3].len, &by) < 0) {
        reply_error(c, ERR_NOT_FLOAT);
        return;
    }
    if (isinf(by)) { /* before the key is created */
        reply_error(c, "ERR value is NaN or Infinity");
        return;
    }
    int err;
    dict *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    kv_hfield *f = hash_get(h, c->argv[2]);
    if (f) {
        str cur = hfield_value(f);
        if (kv_parse_ldouble(cur.p, cur.len, &v) < 0) {
            reply_error(c, "ERR hash value is not a float");
            return;
        }
    }
    v += by;
    if (isnan(v) || isinf(v)) {
        reply_error(c, "ERR increment would produce NaN or Infinity");
        return;
    }
    char b[KV_LDBL_STR_MAX];
    size_t n = kv_fmt_ldouble(b, sizeof b, v);
    hash_set(h, c->argv[2], (str){ b, n });
    kv_dirty(1);
    str prop[4] = { STR("HSET"), c->argv[1], c->argv[2], { b, n } };
    kv_propagate_as(c, 4, prop);
    reply_bulk(c, b, n);
}

void hexists_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    reply_int(c, h && hash_get(h, c->argv[2]) ? 1 : 0);
}

void hlen_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    reply_int(c, h ? (long long)dict_size(h) : 0);
}

void hstrlen_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    kv_hfield *f = h ? hash_get(h, c->argv[2]) : NULL;
    reply_int(c, f ? f->vlen : 0);
}

void hscan_command(kv_client *c)
{
    int err;
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    if (!h) {
        uint64_t cur;
        if (num_parse_u64(c->argv[2].p, c->argv[2].len, UINT64_MAX, &cur) < 0) {
            reply_error(c, "ERR invalid cursor");
            return;
        }
        reply_array(c, 2);
        reply_bulk(c, "0", 1);
        reply_empty_array(c);
        return;
    }
    scan_generic(c, h, 2, 2);
}

void hrandfield_command(kv_client *c)
{
    int err;
    if (c->argc == 2) {
        dict *h = get_hash(c, c->argv[1], 0, 0, &err);
        if (err)
            return;
        kv_hfield *f = h ? (kv_hfield *)(void *)dict_random(h) : NULL;
        if (f)
            reply_bulk_str(c, hfield_name(f));
        else
            reply_null(c);
        return;
    }
    /* As Redis: the count, then the options, then the key. */
    long long count;
    if (arg_rand_count(c, c->argv[2], &count) < 0)
        return;
    int withvalues = 0;
    if (c->argc == 4) {
        if (!str_ieq_lit(c->argv[3], "withvalues", 10)) {
            reply_error(c, ERR_SYNTAX);
            return;
        }
        withvalues = 1;
        if (rand_pairs_check(c, count) < 0)
            return;
    } else if (c->argc > 4) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    dict *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    if (!h || count == 0) {
        reply_empty_array(c);
        return;
    }
    size_t size = dict_size(h);
    if (count < 0) {
        /* repetitions allowed */
        if (rand_draws_check(c, withvalues ? 2 * count : count) < 0)
            return;
        long long n = -count;
        rand_picker p;
        rand_picker_init(&p, h, (unsigned long long)n);
        reply_array(c, withvalues && c->resp < 3 ? n * 2 : n);
        for (long long i = 0; i < n; i++) {
            kv_hfield *f = (kv_hfield *)(void *)rand_picker_next(&p);
            if (withvalues && c->resp >= 3)
                reply_array(c, 2);
            reply_bulk_str(c, hfield_name(f));
            if (withvalues)
                reply_bulk_str(c, hfield_value(f));
        }
        rand_picker_end(&p);
        return;
    }
    size_t n = (size_t)count < size ? (size_t)count : size;
    dict_node **all;
    if (RAND_FEW_DISTINCT(n, size)) {
        all = kv_malloc(n * sizeof *all);
        rand_distinct_nodes(h, all, n);
    } else {
        /* the first n of a partial Fisher-Yates over every node */
        all = kv_malloc(size * sizeof *all);
        size_t k = 0;
        dict_iter it;
        dict_iter_init(&it, h);
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
    reply_array(c, withvalues && c->resp < 3 ? (long long)n * 2 : (long long)n);
    for (size_t i = 0; i < n; i++) {
        kv_hfield *f = (kv_hfield *)(void *)all[i];
        if (withvalues && c->resp >= 3)
            reply_array(c, 2);
        reply_bulk_str(c, hfield_name(f));
        if (withvalues)
            reply_bulk_str(c, hfield_value(f));
    }
    kv_free(all);
}
