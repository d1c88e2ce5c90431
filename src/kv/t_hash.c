/* Hashes. A small hash is one buffer of entries in insertion order, each
 * (tag, field length, value length, field, value): the tag is the low
 * byte of the field's hash, a length one byte below 0xFF or 0xFF and four
 * bytes; both lengths up front make the walk one load per entry. That is
 * the order Redis 7.0's listpack keeps (replies,
 * DUMP, AOF rewrite) at a fraction of the memory of a dict. Lookups are a
 * linear walk, as a listpack's are, that looks at the field's bytes only
 * when tag and length match (one field in 256 among the others).
 * Past hash-max-listpack-entries fields, or a field or value longer than
 * hash-max-listpack-value, the hash becomes a dict of kv_hfield and stays
 * one. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <string.h>

/* Redis refuses to grow a listpack past 1GB (it converts instead); the
 * same cap keeps every offset of the buffer in 32 bits. */
#define SMALL_MAX_BYTES (1u << 30)
#define LEN_LONG 0xFF

/* ---- limits, read from the config per use so CONFIG SET acts at once ---- */

size_t kv_config_noop_size(const char *name, const char **cache, long long dflt)
{
    if (!*cache)
        *cache = kv_config_noop_str(name);
    long long v = dflt;
    if (*cache && kv_parse_ll(*cache, strlen(*cache), &v) != 0)
        v = dflt;
    return v > 0 ? (size_t)v : 0;
}

static size_t max_entries(void)
{
    static const char *v;
    return kv_config_noop_size("hash-max-listpack-entries", &v, 512);
}

static size_t max_value(void)
{
    static const char *v;
    return kv_config_noop_size("hash-max-listpack-value", &v, 64);
}

/* ---- the small encoding ---- */

static size_t len_size(size_t n) { return n < LEN_LONG ? 1 : 5; }

static char *len_put(char *p, size_t n)
{
    if (n < LEN_LONG) {
        *p++ = (char)n;
        return p;
    }
    uint32_t v = (uint32_t)n;
    *p++ = (char)LEN_LONG;
    memcpy(p, &v, 4);
    return p + 4;
}

static const char *len_get(const char *p, size_t *n)
{
    unsigned char b = (unsigned char)*p++;
    if (b != LEN_LONG) {
        *n = b;
        return p;
    }
    uint32_t v;
    memcpy(&v, p, 4);
    *n = v;
    return p + 4;
}

/* One decoded entry: its bytes [at, end). */
typedef struct {
    char *at, *end;
    bk_str field, value;
} small_entry;

static size_t entry_size(size_t fl, size_t vl) { return 1 + len_size(fl) + len_size(vl) + fl + vl; }

/* The lengths of the entry at p; returns where its field starts. */
static inline const char *entry_lens(const char *p, size_t *fl, size_t *vl)
{
    unsigned char a = (unsigned char)p[1], b = (unsigned char)p[2];
    if (a != LEN_LONG && b != LEN_LONG) { /* the common case: both short */
        *fl = a;
        *vl = b;
        return p + 3;
    }
    return len_get(len_get(p + 1, fl), vl);
}

static uint8_t field_tag(bk_str field) { return (uint8_t)dict_hash32(field.p, field.len); }

static char *small_decode(char *p, small_entry *e)
{
    size_t fl, vl;
    e->at = p;
    const char *q = entry_lens(p, &fl, &vl);
    e->field = (bk_str){ q, fl };
    e->value = (bk_str){ q + fl, vl };
    e->end = (char *)q + fl + vl;
    return e->end;
}

static int small_find(kv_hash *h, bk_str field, uint8_t tag, small_entry *e)
{
    if (!h->used) /* lp may be NULL: no arithmetic on it */
        return 0;
    char *p = h->lp, *end = h->lp + h->used;
    while (p < end) {
        size_t fl, vl;
        const char *q = entry_lens(p, &fl, &vl);
        if ((uint8_t)*p == tag && fl == field.len && memcmp(q, field.p, fl) == 0) {
            small_decode(p, e);
            return 1;
        }
        p = (char *)q + fl + vl;
    }
    return 0;
}

/* Room for extra more bytes (the caller checked SMALL_MAX_BYTES). */
static void small_reserve(kv_hash *h, size_t extra)
{
    size_t need = (size_t)h->used + extra;
    if (h->lp && need <= malloc_usable_size(h->lp))
        return;
    size_t cap = (size_t)h->used + h->used / 2;
    h->lp = kv_realloc(h->lp, cap > need ? cap : need);
}

static bk_str hfield_key(const dict_node *n)
{
    kv_hfield *f = (kv_hfield *)(void *)n;
    return (bk_str){ f->data, n->aux };
}

static kv_hfield *field_alloc(bk_str f, bk_str v)
{
    kv_hfield *x = kv_malloc(sizeof *x + f.len + v.len);
    size_t room = malloc_usable_size(x) - sizeof *x - f.len;
    x->node.next = NULL;
    x->node.aux = (uint32_t)f.len;
    x->node.hash = dict_hash32(f.p, f.len);
    x->vlen = (uint32_t)v.len;
    x->vcap = (uint32_t)BK_MIN(room, (size_t)UINT32_MAX);
    memcpy(x->data, f.p, f.len);
    memcpy(x->data + f.len, v.p, v.len);
    return x;
}

/* To the hashtable encoding, keeping every field (a one-way move). */
static void convert(kv_hash *h)
{
    dict *d = dict_new_owned(hfield_key);
    dict_expand(d, h->n);
    small_entry e;
    for (char *p = h->lp, *end = h->used ? h->lp + h->used : h->lp; p < end;) {
        p = small_decode(p, &e);
        dict_add(d, &field_alloc(e.field, e.value)->node);
    }
    kv_free(h->lp);
    h->lp = NULL;
    h->n = h->used = 0;
    h->d = d;
}

kv_hash *hash_new(void)
{
    kv_hash *h = kv_malloc(sizeof *h);
    *h = (kv_hash){ 0 };
    return h;
}

void hash_free(kv_hash *h)
{
    if (h->d)
        dict_free_owned(h->d);
    kv_free(h->lp);
    kv_free(h);
}

kv_hash *hash_dup(kv_hash *h)
{
    kv_hash *c = hash_new();
    if (!h->d) {
        if (h->used) {
            c->lp = kv_malloc(h->used);
            memcpy(c->lp, h->lp, h->used);
        }
        c->n = h->n;
        c->used = h->used;
        return c;
    }
    c->d = dict_new_owned(hfield_key);
    dict_expand(c->d, dict_size(h->d));
    dict_iter it;
    dict_iter_init(&it, h->d);
    for (dict_node *n; (n = dict_iter_next(&it));) {
        kv_hfield *f = (kv_hfield *)(void *)n;
        dict_add(c->d, &field_alloc(hfield_name(f), hfield_value(f))->node);
    }
    dict_iter_end(&it);
    return c;
}

int hash_get(kv_hash *h, bk_str field, bk_str *value)
{
    if (h->d) {
        kv_hfield *f = (kv_hfield *)(void *)dict_find(h->d, field.p, field.len,
                                                       dict_hash32(field.p, field.len));
        if (f && value)
            *value = hfield_value(f);
        return f != NULL;
    }
    small_entry e;
    if (!small_find(h, field, field_tag(field), &e))
        return 0;
    if (value)
        *value = e.value;
    return 1;
}

static int dict_set(dict *d, bk_str field, bk_str value)
{
    kv_hfield *f = (kv_hfield *)(void *)dict_find(d, field.p, field.len,
                                                   dict_hash32(field.p, field.len));
    if (f) {
        if (value.len <= f->vcap) {
            memcpy(f->data + f->node.aux, value.p, value.len);
            f->vlen = (uint32_t)value.len;
            return 0;
        }
        kv_hfield *n = field_alloc(field, value);
        dict_relink(d, &f->node, &n->node);
        kv_free(f);
        return 0;
    }
    dict_add(d, &field_alloc(field, value)->node);
    return 1;
}

int hash_set(kv_hash *h, bk_str field, bk_str value)
{
    size_t vmax = max_value();
    if (!h->d && (field.len > vmax || value.len > vmax))
        convert(h);
    if (h->d)
        return dict_set(h->d, field, value);
    small_entry e;
    uint8_t tag = field_tag(field);
    int found = small_find(h, field, tag, &e);
    size_t old = found ? (size_t)(e.end - e.at) : 0, need = entry_size(field.len, value.len);
    if ((size_t)h->used - old + need > SMALL_MAX_BYTES) {
        convert(h);
        return dict_set(h->d, field, value);
    }
    /* an update rewrites its entry in place (the entries after it shift
     * when the size changes); a new field goes at the end */
    size_t at = found ? (size_t)(e.at - h->lp) : h->used;
    size_t tail = found ? (size_t)(e.end - h->lp) : h->used;
    if (need > old)
        small_reserve(h, need - old);
    if (tail < h->used)
        memmove(h->lp + at + need, h->lp + tail, h->used - tail);
    h->used = (uint32_t)(h->used - old + need);
    h->n += !found;
    char *p = h->lp + at;
    *p++ = (char)tag;
    p = len_put(p, field.len);
    p = len_put(p, value.len);
    memcpy(p, field.p, field.len);
    memcpy(p + field.len, value.p, value.len);
    /* as Redis: checked after every write, an update included */
    if (h->n > max_entries())
        convert(h);
    return !found;
}

int hash_del(kv_hash *h, bk_str field)
{
    if (h->d) {
        dict_node *n = dict_unlink(h->d, field.p, field.len, dict_hash32(field.p, field.len));
        if (!n)
            return 0;
        kv_free(n);
        return 1;
    }
    small_entry e;
    if (!small_find(h, field, field_tag(field), &e))
        return 0;
    size_t at = (size_t)(e.at - h->lp), tail = (size_t)(e.end - h->lp);
    memmove(h->lp + at, h->lp + tail, h->used - tail);
    h->used = (uint32_t)(h->used - (tail - at));
    h->n--;
    /* give back room left by big deletions (an emptied hash is freed
     * with its key) */
    if (h->used && malloc_usable_size(h->lp) > 2 * (size_t)h->used + 64)
        h->lp = kv_realloc(h->lp, h->used);
    return 1;
}

size_t hash_mem_bytes(kv_hash *h, long long samples)
{
    size_t total = malloc_usable_size(h);
    if (!h->d)
        return total + (h->lp ? malloc_usable_size(h->lp) : 0);
    total += sizeof *h->d + dict_buckets(h->d) * sizeof(void *);
    size_t seen = 0, part = 0;
    dict_iter it;
    dict_iter_init(&it, h->d);
    for (dict_node *dn; (samples <= 0 || seen < (size_t)samples) && (dn = dict_iter_next(&it));
         seen++)
        part += sizeof(kv_hfield) + dn->aux + ((kv_hfield *)(void *)dn)->vcap + 8;
    dict_iter_end(&it);
    if (seen)
        total += (size_t)((double)part / (double)seen * (double)dict_size(h->d));
    return total;
}

void hash_iter_init(hash_iter *it, kv_hash *h)
{
    it->h = h;
    if (h->d) {
        dict_iter_init(&it->di, h->d);
        return;
    }
    it->p = h->lp;
    it->end = h->used ? h->lp + h->used : h->lp;
}

int hash_iter_next(hash_iter *it, bk_str *field, bk_str *value)
{
    if (it->h->d) {
        kv_hfield *f = (kv_hfield *)(void *)dict_iter_next(&it->di);
        if (!f)
            return 0;
        *field = hfield_name(f);
        *value = hfield_value(f);
        return 1;
    }
    if (it->p >= it->end)
        return 0;
    small_entry e;
    it->p = small_decode((char *)it->p, &e);
    *field = e.field;
    *value = e.value;
    return 1;
}

void hash_iter_end(hash_iter *it)
{
    if (it->h->d)
        dict_iter_end(&it->di);
}

/* The hash at key, created when create is set. NULL: missing (or error
 * replied when *err is set). */
static kv_hash *get_hash(kv_client *c, bk_str key, int create, int write, int *err)
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
    kv_hash *h = hash_new();
    db_add_obj(c->db, key, KV_HASH, h);
    return h;
}

static void delete_if_empty(kv_client *c, bk_str key, kv_hash *h)
{
    if (hash_size(h) == 0) {
        db_delete(c->db, key);
        kv_notify(c->db, NOTIFY_GENERIC, "del", key);
    }
}

void hset_command(kv_client *c)
{
    if (c->argc % 2 != 0) {
        reply_arity_error(c, c->cmd->name);
        return;
    }
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    long long created = 0;
    for (int i = 2; i < c->argc; i += 2)
        created += hash_set(h, c->argv[i], c->argv[i + 1]);
    kv_notify(c->db, NOTIFY_HASH, "hset", c->argv[1]);
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
    kv_hash *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    if (hash_get(h, c->argv[2], NULL)) {
        reply_int(c, 0);
        return;
    }
    hash_set(h, c->argv[2], c->argv[3]);
    kv_notify(c->db, NOTIFY_HASH, "hset", c->argv[1]);
    kv_dirty(1);
    reply_int(c, 1);
}

void hget_command(kv_client *c)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    bk_str v;
    if (h && hash_get(h, c->argv[2], &v))
        reply_bulk_str(c, v);
    else
        reply_null(c);
}

void hmget_command(kv_client *c)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        bk_str v;
        if (h && hash_get(h, c->argv[i], &v))
            reply_bulk_str(c, v);
        else
            reply_null(c);
    }
}

void hdel_command(kv_client *c)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 1, &err);
    if (err)
        return;
    long long n = 0;
    if (h) {
        for (int i = 2; i < c->argc; i++)
            n += hash_del(h, c->argv[i]);
        if (n) {
            kv_notify(c->db, NOTIFY_HASH, "hdel", c->argv[1]);
            delete_if_empty(c, c->argv[1], h);
            kv_dirty(n);
        }
    }
    reply_int(c, n);
}

static void hgetall_generic(kv_client *c, int keys, int vals)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    size_t n = h ? hash_size(h) : 0;
    if (keys && vals)
        reply_map(c, (long long)n);
    else
        reply_array(c, (long long)n);
    if (!h)
        return;
    hash_iter it;
    hash_iter_init(&it, h);
    for (bk_str f, v; hash_iter_next(&it, &f, &v);) {
        if (keys)
            reply_bulk_str(c, f);
        if (vals)
            reply_bulk_str(c, v);
    }
    hash_iter_end(&it);
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
    kv_hash *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    bk_str cur;
    if (hash_get(h, c->argv[2], &cur)) {
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
    hash_set(h, c->argv[2], (bk_str){ b, kv_fmt_ll(b, v) });
    kv_notify(c->db, NOTIFY_HASH, "hincrby", c->argv[1]);
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
    kv_hash *h = get_hash(c, c->argv[1], 1, 1, &err);
    if (err)
        return;
    bk_str cur;
    if (hash_get(h, c->argv[2], &cur)) {
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
    hash_set(h, c->argv[2], (bk_str){ b, n });
    kv_notify(c->db, NOTIFY_HASH, "hincrbyfloat", c->argv[1]);
    kv_dirty(1);
    bk_str prop[4] = { BK_STR("HSET"), c->argv[1], c->argv[2], { b, n } };
    kv_propagate_as(c, 4, prop);
    reply_bulk(c, b, n);
}

void hexists_command(kv_client *c)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    reply_int(c, h && hash_get(h, c->argv[2], NULL) ? 1 : 0);
}

void hlen_command(kv_client *c)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    reply_int(c, h ? (long long)hash_size(h) : 0);
}

void hstrlen_command(kv_client *c)
{
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    bk_str v = { "", 0 };
    if (h)
        hash_get(h, c->argv[2], &v);
    reply_int(c, (long long)v.len);
}

/* HSCAN of a small hash: everything in one reply with cursor 0, as Redis
 * answers a listpack; the options are checked as SCAN checks them. */
static void hscan_small(kv_client *c, kv_hash *h)
{
    long long count;
    bk_str pat = BK_STR_NULL;
    int use_pat = 0, novalues = 0;
    for (int i = 3; i < c->argc; i++) {
        int more = c->argc - i - 1;
        if (str_ieq_lit(c->argv[i], "count", 5) && more >= 1) {
            if (arg_ll(c, c->argv[i + 1], &count) < 0)
                return;
            if (count < 1) {
                reply_error(c, ERR_SYNTAX);
                return;
            }
            i++;
        } else if (str_ieq_lit(c->argv[i], "match", 5) && more >= 1) {
            pat = c->argv[++i];
            use_pat = !(pat.len == 1 && pat.p[0] == '*');
        } else if (str_ieq_lit(c->argv[i], "novalues", 8)) {
            novalues = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    reply_array(c, 2);
    reply_bulk(c, "0", 1);
    size_t d = reply_defer(c);
    long long n = 0;
    hash_iter it;
    hash_iter_init(&it, h);
    for (bk_str f, v; hash_iter_next(&it, &f, &v);) {
        if (use_pat && !kv_glob_match(pat.p, pat.len, f.p, f.len, 0))
            continue;
        reply_bulk_str(c, f);
        n++;
        if (!novalues) {
            reply_bulk_str(c, v);
            n++;
        }
    }
    hash_iter_end(&it);
    reply_defer_array(c, d, n);
}

void hscan_command(kv_client *c)
{
    uint64_t cur; /* checked before the key, as Redis */
    if (scan_parse_cursor(c, c->argv[2], &cur) < 0)
        return;
    int err;
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    if (!h) {
        reply_array(c, 2);
        reply_bulk(c, "0", 1);
        reply_empty_array(c);
        return;
    }
    if (hash_is_small(h))
        hscan_small(c, h);
    else
        scan_generic(c, hash_dict(h), 2, 2);
}

static void reply_pick(kv_client *c, bk_str f, bk_str v, int withvalues)
{
    if (withvalues && c->resp >= 3)
        reply_array(c, 2);
    reply_bulk_str(c, f);
    if (withvalues)
        reply_bulk_str(c, v);
}

/* Every (field, value) of a small hash, in order, into a new array. */
static bk_str *small_pairs(kv_hash *h)
{
    bk_str *all = kv_malloc(2 * (size_t)h->n * sizeof *all);
    size_t k = 0;
    hash_iter it;
    hash_iter_init(&it, h);
    while (hash_iter_next(&it, &all[k], &all[k + 1]))
        k += 2;
    hash_iter_end(&it);
    return all;
}

/* HRANDFIELD of a small hash with a count; as Redis's listpack: a count
 * of at least the size is the whole hash in order, a smaller one distinct
 * fields in order (selection sampling), a negative one independent draws. */
static void hrandfield_small(kv_client *c, kv_hash *h, long long count, int withvalues)
{
    size_t size = h->n;
    long long per = withvalues && c->resp < 3 ? 2 : 1;
    bk_str *all = small_pairs(h);
    if (count < 0) {
        long long n = -count;
        reply_array(c, n * per);
        for (long long i = 0; i < n && !rand_draws_stop(c, i); i++) {
            size_t k = (size_t)(kv_rand64() % size);
            reply_pick(c, all[2 * k], all[2 * k + 1], withvalues);
        }
    } else {
        size_t want = (size_t)count < size ? (size_t)count : size;
        reply_array(c, (long long)want * per);
        for (size_t k = 0, left = size; want > 0; k++, left--) {
            if (kv_rand64() % left < want) {
                reply_pick(c, all[2 * k], all[2 * k + 1], withvalues);
                want--;
            }
        }
    }
    kv_free(all);
}

static void hrandfield_dict(kv_client *c, dict *h, long long count, int withvalues)
{
    size_t size = dict_size(h);
    if (count < 0) {
        /* repetitions allowed */
        long long n = -count;
        rand_picker p;
        rand_picker_init(&p, h, (unsigned long long)n);
        reply_array(c, withvalues && c->resp < 3 ? n * 2 : n);
        for (long long i = 0; i < n && !rand_draws_stop(c, i); i++) {
            kv_hfield *f = (kv_hfield *)(void *)rand_picker_next(&p);
            reply_pick(c, hfield_name(f), hfield_value(f), withvalues);
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
        reply_pick(c, hfield_name(f), hfield_value(f), withvalues);
    }
    kv_free(all);
}

void hrandfield_command(kv_client *c)
{
    int err;
    if (c->argc == 2) {
        kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
        if (err)
            return;
        if (!h) {
            reply_null(c);
        } else if (hash_dict(h)) {
            reply_bulk_str(c, hfield_name((kv_hfield *)(void *)dict_random(hash_dict(h))));
        } else {
            bk_str *all = small_pairs(h);
            reply_bulk_str(c, all[2 * (kv_rand64() % h->n)]);
            kv_free(all);
        }
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
    kv_hash *h = get_hash(c, c->argv[1], 0, 0, &err);
    if (err)
        return;
    if (!h || count == 0) {
        reply_empty_array(c);
        return;
    }
    if (count < 0 && rand_draws_check(c, withvalues ? 2 * count : count) < 0)
        return;
    if (hash_dict(h))
        hrandfield_dict(c, hash_dict(h), count, withvalues);
    else
        hrandfield_small(c, h, count, withvalues);
}
