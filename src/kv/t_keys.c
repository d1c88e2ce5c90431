/* Generic key commands: DEL EXISTS TYPE EXPIRE* TTL* PERSIST KEYS SCAN
 * RENAME* RANDOMKEY COPY OBJECT TOUCH, and the shared argument helpers. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/config.h"
#include "kv/rdb.h"
#include "kv/stream.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

int arg_ll(kv_client *c, bk_str s, long long *v)
{
    return arg_ll_msg(c, s, v, ERR_NOT_INT);
}

int arg_ll_msg(kv_client *c, bk_str s, long long *v, const char *msg)
{
    if (kv_parse_ll(s.p, s.len, v) < 0) {
        reply_error(c, msg);
        return -1;
    }
    return 0;
}

int arg_double(kv_client *c, bk_str s, double *v)
{
    if (kv_parse_double(s.p, s.len, v) < 0) {
        reply_error(c, ERR_NOT_FLOAT);
        return -1;
    }
    return 0;
}

kv_entry *lookup_typed(kv_client *c, bk_str key, int type, int write)
{
    kv_entry *e = write ? db_lookup_write(c->db, key) : db_lookup_read(c->db, key);
    if (e && e->type != (uint32_t)type) {
        reply_error(c, ERR_WRONGTYPE);
        return KV_WRONGTYPE;
    }
    return e;
}

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

/* Redis's lazyfreeGetFreeEffort: the allocations freeing a value takes
 * (quicklist nodes, hashtable or skiplist entries, stream radix-tree nodes
 * and groups; 1 for everything held in one block). */
static size_t free_effort(kv_entry *e)
{
    const char *enc = rdb_encoding_name(e);
    switch (e->type) {
    case KV_LIST: {
        size_t nodes, bytes;
        rdb_list_shape(entry_obj(e), &nodes, &bytes);
        return nodes;
    }
    case KV_SET:
        return strcmp(enc, "hashtable") == 0 ? dict_size((dict *)entry_obj(e)) : 1;
    case KV_HASH:
        return strcmp(enc, "hashtable") == 0 ? hash_size(entry_obj(e)) : 1;
    case KV_ZSET:
        return strcmp(enc, "skiplist") == 0 ? ((zset *)entry_obj(e))->length : 1;
    case KV_STREAM: {
        /* a radix tree of n blocks has about 2n + 1 nodes (measured on
         * Redis 7.0); each group costs 1 + the first group's PEL */
        kv_stream *s = entry_obj(e);
        size_t effort = 2 * s->nblocks + 1;
        if (s->ngroups)
            effort += s->ngroups * (1 + s->groups[0]->pel.n);
        return effort;
    }
    }
    return 1;
}

/* Redis frees a value lazily (in a background thread) when freeing it
 * would take more than 64 allocations; brisk-kv frees it at once but
 * counts it as Redis would (INFO lazyfreed_objects). */
static void count_lazy_free(kv_entry *e)
{
    if (free_effort(e) > 64)
        srv.stat_lazyfreed++;
}

static void del_generic(kv_client *c, int lazy)
{
    long long n = 0;
    for (int i = 1; i < c->argc; i++) {
        kv_entry *e = db_lookup_write(c->db, c->argv[i]);
        if (e) {
            if (lazy)
                count_lazy_free(e);
            db_delete_entry(c->db, e);
            kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[i]);
            n++;
        }
    }
    kv_dirty(n);
    reply_int(c, n);
}

void del_command(kv_client *c)
{
    static const char *lazy_opt;
    if (!lazy_opt)
        lazy_opt = kv_config_noop_str("lazyfree-lazy-user-del");
    del_generic(c, lazy_opt && strcmp(lazy_opt, "yes") == 0);
}

void unlink_command(kv_client *c)
{
    del_generic(c, 1);
}

/* EXISTS leaves the access time alone (Redis's LOOKUP_NOTOUCH); TOUCH
 * refreshes it. */
static void exists_generic(kv_client *c, kv_entry *(*lookup)(kv_db *, bk_str))
{
    long long n = 0;
    for (int i = 1; i < c->argc; i++)
        n += lookup(c->db, c->argv[i]) != NULL;
    reply_int(c, n);
}

void exists_command(kv_client *c)
{
    exists_generic(c, db_lookup_notouch);
}

void touch_command(kv_client *c)
{
    exists_generic(c, db_lookup_read);
}

void type_command(kv_client *c)
{
    kv_entry *e = db_lookup_notouch(c->db, c->argv[1]);
    reply_simple(c, e ? obj_type_name(e->type) : "none");
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT. */
static void expire_generic(kv_client *c, int64_t base_ms, int unit_ms)
{
    long long when;
    if (arg_ll(c, c->argv[2], &when) < 0)
        return;
    int nx = 0, xx = 0, gt = 0, lt = 0;
    for (int i = 3; i < c->argc; i++) {
        bk_str o = c->argv[i];
        if (arg_is(o, "nx"))
            nx = 1;
        else if (arg_is(o, "xx"))
            xx = 1;
        else if (arg_is(o, "gt"))
            gt = 1;
        else if (arg_is(o, "lt"))
            lt = 1;
        else {
            reply_errorf(c, "ERR Unsupported option %.*s", (int)BK_MIN(o.len, 64), o.p);
            return;
        }
    }
    if (nx && (xx || gt || lt)) {
        reply_error(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if (gt && lt) {
        reply_error(c, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    if (unit_ms == 1000) {
        if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000) {
            reply_errorf(c, "ERR invalid expire time in '%s' command", c->cmd->name);
            return;
        }
        when *= 1000;
    }
    if ((base_ms > 0 && when > LLONG_MAX - base_ms)) {
        reply_errorf(c, "ERR invalid expire time in '%s' command", c->cmd->name);
        return;
    }
    when += base_ms;
    kv_entry *e = db_lookup_write(c->db, c->argv[1]);
    if (!e) {
        reply_int(c, 0);
        return;
    }
    int64_t cur = entry_expire(e);
    if ((nx && cur) || (xx && !cur) || (gt && (!cur || when <= cur)) ||
        (lt && cur && when >= cur)) {
        reply_int(c, 0);
        return;
    }
    if (when <= srv.now_ms && !srv.loading && !repl_is_replica()) {
        bk_str del[2] = { BK_STR("DEL"), c->argv[1] };
        db_delete_entry(c->db, e);
        kv_dirty(1);
        kv_propagate_as(c, 2, del);
        kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
        reply_int(c, 1);
        return;
    }
    e = db_set_expire(c->db, e, when);
    kv_dirty(1);
    char ms[KV_LL_STR_MAX];
    bk_str prop[3] = { BK_STR("PEXPIREAT"), c->argv[1], { ms, kv_fmt_ll(ms, when) } };
    kv_propagate_as(c, 3, prop);
    kv_notify(c->db, NOTIFY_GENERIC, "expire", c->argv[1]);
    reply_int(c, 1);
}

void expire_command(kv_client *c) { expire_generic(c, srv.now_ms, 1000); }
void pexpire_command(kv_client *c) { expire_generic(c, srv.now_ms, 1); }
void expireat_command(kv_client *c) { expire_generic(c, 0, 1000); }
void pexpireat_command(kv_client *c) { expire_generic(c, 0, 1); }

static void ttl_generic(kv_client *c, int ms, int absolute)
{
    kv_entry *e = db_lookup_notouch(c->db, c->argv[1]);
    if (!e) {
        reply_int(c, -2);
        return;
    }
    int64_t exp = entry_expire(e);
    if (!exp) {
        reply_int(c, -1);
        return;
    }
    if (absolute) {
        reply_int(c, ms ? exp : exp / 1000);
        return;
    }
    int64_t left = exp - srv.now_ms;
    if (left < 0)
        left = 0;
    reply_int(c, ms ? left : (left + 500) / 1000);
}

void ttl_command(kv_client *c) { ttl_generic(c, 0, 0); }
void pttl_command(kv_client *c) { ttl_generic(c, 1, 0); }
void expiretime_command(kv_client *c) { ttl_generic(c, 0, 1); }
void pexpiretime_command(kv_client *c) { ttl_generic(c, 1, 1); }

void persist_command(kv_client *c)
{
    kv_entry *e = db_lookup_write(c->db, c->argv[1]);
    if (!e || !(e->flags & ENTRY_EXPIRES)) {
        reply_int(c, 0);
        return;
    }
    db_persist(c->db, e);
    kv_notify(c->db, NOTIFY_GENERIC, "persist", c->argv[1]);
    kv_dirty(1);
    reply_int(c, 1);
}

void keys_command(kv_client *c)
{
    bk_str pat = c->argv[1];
    int all = pat.len == 1 && pat.p[0] == '*';
    size_t h = reply_defer(c);
    long long n = 0;
    keytab_iter it;
    keytab_iter_init(&it, &c->db->keys);
    for (kv_entry *e; (e = keytab_iter_next(&it));) {
        if (db_expired(e))
            continue;
        bk_str key = entry_key_str(e);
        if (!all && !kv_glob_match(pat.p, pat.len, key.p, key.len, 0))
            continue;
        reply_bulk_str(c, key);
        n++;
    }
    keytab_iter_end(&it);
    reply_defer_array(c, h, n);
}

/* ---- SCAN family ---- */

typedef struct {
    void **items;
    size_t n, cap;
} scan_acc;

static void scan_collect(void *ud, void *item)
{
    scan_acc *a = ud;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->items = kv_realloc(a->items, a->cap * sizeof *a->items);
    }
    a->items[a->n++] = item;
}

static void scan_collect_node(void *ud, dict_node *dn)
{
    scan_collect(ud, dn);
}

void reply_scan_cursor_kv(kv_client *c, size_t cursor)
{
    char b[32];
    reply_bulk(c, b, (size_t)snprintf(b, sizeof b, "%zu", cursor));
}

/* A SCAN-family cursor, read as Redis reads it: C strtoul in base 10 up to
 * the first NUL, refused only for a leading space, trailing junk or a value
 * past 2^64-1. So "" and "+5" are accepted, and "-N" wraps to 2^64-N (HSCAN
 * k -1 is legal). Replies "ERR invalid cursor" and returns -1 otherwise. */
int scan_parse_cursor(kv_client *c, bk_str s, uint64_t *out)
{
    const char *p = s.p, *e = s.p + s.len;
    const char *nul = memchr(p, '\0', s.len);
    if (nul)
        e = nul;
    *out = 0;
    if (p == e)
        return 0; /* strtoul("") is 0 with nothing left over */
    if (strchr(" \t\n\v\f\r", *p))
        goto bad;
    int neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (p == e)
        goto bad; /* a lone sign: no digits, strtoul consumes nothing */
    uint64_t v = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9')
            goto bad;
        unsigned dgt = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            goto bad; /* ERANGE */
        v = v * 10 + dgt;
    }
    *out = neg ? 0 - v : v;
    return 0;
bad:
    reply_error(c, "ERR invalid cursor");
    return -1;
}

/* kind: 0 keys (of c->db; d is NULL), 1 set members, 2 hash fields+values,
 * 3 zset members+scores */
void scan_generic(kv_client *c, dict *d, int cur, int kind)
{
    uint64_t cursor;
    if (scan_parse_cursor(c, c->argv[cur], &cursor) < 0)
        return;
    long long count = 10;
    bk_str pat = BK_STR_NULL;
    int use_pat = 0, type = -1, novalues = 0;
    for (int i = cur + 1; i < c->argc; i++) {
        int more = c->argc - i - 1;
        if (arg_is(c->argv[i], "count") && more >= 1) {
            if (arg_ll(c, c->argv[i + 1], &count) < 0)
                return;
            if (count < 1) {
                reply_error(c, ERR_SYNTAX);
                return;
            }
            i++;
        } else if (arg_is(c->argv[i], "match") && more >= 1) {
            pat = c->argv[++i];
            use_pat = !(pat.len == 1 && pat.p[0] == '*');
        } else if (kind == 0 && arg_is(c->argv[i], "type") && more >= 1) {
            bk_str t = c->argv[++i];
            type = 99;
            for (int k = 0; k <= KV_STREAM; k++)
                if (arg_is(t, obj_type_name(k)))
                    type = k;
        } else if (kind == 2 && arg_is(c->argv[i], "novalues")) {
            novalues = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    scan_acc acc = { 0 };
    uint64_t v = cursor;
    /* Ten empty buckets per wanted element at most; COUNT may be LLONG_MAX. */
    long long maxiter = count > LLONG_MAX / 10 ? LLONG_MAX : count * 10;
    dict_node **sorted = kind == 1 ? set_intset_nodes(d) : NULL;
    if (sorted) {
        /* what Redis holds as an intset it answers in full, sorted */
        acc.items = (void **)sorted;
        acc.n = acc.cap = dict_size(d);
        v = 0;
    } else if (kind == 0) {
        do {
            v = keytab_scan(&c->db->keys, v, scan_collect, &acc);
        } while (v && maxiter-- && (long long)acc.n < count);
    } else if (dict_buckets(d) <= 8) {
        /* Small collections: one pass from the start, whatever the cursor
         * (Redis answers an intset or listpack in full with cursor 0). */
        v = 0;
        do {
            v = dict_scan(d, (size_t)v, scan_collect_node, &acc);
        } while (v);
    } else {
        do {
            v = dict_scan(d, (size_t)v, scan_collect_node, &acc);
        } while (v && maxiter-- && (long long)acc.n < count);
    }
    reply_array(c, 2);
    reply_scan_cursor_kv(c, (size_t)v);
    size_t h = reply_defer(c);
    long long n = 0;
    for (size_t i = 0; i < acc.n; i++) {
        dict_node *dn = acc.items[i];
        bk_str key;
        if (kind == 0) {
            kv_entry *e = acc.items[i];
            key = entry_key_str(e);
            if (use_pat && !kv_glob_match(pat.p, pat.len, key.p, key.len, 0))
                continue;
            if (db_expired(e)) {
                /* As Redis, SCAN deletes the expired keys it passes that
                 * match (each DEL propagated alone); not while paused. */
                if (!srv.pause_type)
                    db_expire_if_needed(c->db, e);
                continue;
            }
            if (type >= 0 && e->type != (uint32_t)type)
                continue;
        } else {
            key = d->key(dn);
            if (use_pat && !kv_glob_match(pat.p, pat.len, key.p, key.len, 0))
                continue;
        }
        reply_bulk_str(c, key);
        n++;
        if (kind == 2 && !novalues) {
            reply_bulk_str(c, hfield_value((kv_hfield *)(void *)dn));
            n++;
        } else if (kind == 3) {
            char b[KV_DBL_STR_MAX];
            reply_bulk(c, b, kv_fmt_double(b, ((zs_node *)(void *)dn)->score));
            n++;
        }
    }
    reply_defer_array(c, h, n);
    kv_free(acc.items);
}

void scan_command(kv_client *c)
{
    scan_generic(c, NULL, 1, 0);
}

static void rename_generic(kv_client *c, int nx)
{
    bk_str src = c->argv[1], dst = c->argv[2];
    kv_entry *e = db_lookup_write(c->db, src);
    if (!e) {
        reply_error(c, ERR_NO_KEY);
        return;
    }
    if (str_eq(src, dst)) {
        if (nx)
            reply_int(c, 0);
        else
            reply_ok(c);
        return;
    }
    kv_entry *d = db_lookup_write(c->db, dst);
    if (d) {
        if (nx) {
            reply_int(c, 0);
            return;
        }
        db_delete_entry(c->db, d);
    }
    db_rename_entry(c->db, e, c->db, dst);
    kv_notify(c->db, NOTIFY_GENERIC, "rename_from", src);
    kv_notify(c->db, NOTIFY_GENERIC, "rename_to", dst);
    kv_dirty(1);
    if (nx)
        reply_int(c, 1);
    else
        reply_ok(c);
}

void rename_command(kv_client *c) { rename_generic(c, 0); }
void renamenx_command(kv_client *c) { rename_generic(c, 1); }

void randomkey_command(kv_client *c)
{
    kv_entry *e = db_random(c->db);
    if (e)
        reply_bulk(c, entry_key(e), entry_klen(e));
    else
        reply_null(c);
}

void copy_command(kv_client *c)
{
    kv_db *dst_db = c->db;
    int replace = 0;
    for (int i = 3; i < c->argc; i++) {
        if (arg_is(c->argv[i], "replace")) {
            replace = 1;
        } else if (arg_is(c->argv[i], "db") && i + 1 < c->argc) {
            long long id;
            if (arg_ll(c, c->argv[++i], &id) < 0)
                return;
            if (id < 0 || id >= srv.cfg.databases) {
                reply_error(c, ERR_DB_RANGE);
                return;
            }
            dst_db = &srv.dbs[id];
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    bk_str src = c->argv[1], dst = c->argv[2];
    if (dst_db == c->db && str_eq(src, dst)) {
        reply_error(c, "ERR source and destination objects are the same");
        return;
    }
    kv_entry *e = db_lookup_read(c->db, src); /* as Redis: stats, keymiss */
    if (!e) {
        reply_int(c, 0);
        return;
    }
    kv_entry *d = db_lookup_write(dst_db, dst);
    if (d) {
        if (!replace) {
            reply_int(c, 0);
            return;
        }
        db_delete_entry(dst_db, d);
    }
    db_copy_entry(dst_db, e, dst);
    kv_notify(dst_db, NOTIFY_GENERIC, "copy_to", dst);
    kv_touch_key(dst_db, dst);
    kv_dirty(1);
    reply_int(c, 1);
}

static const char *const object_help[] = {
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
};

/* Redis shares the objects of the integers 0..9999 (refcount INT_MAX)
 * unless an LRU policy with a maxmemory needs per-key stamps; a string
 * held raw or embstr (kv_entry) is an object of its own. */
long long object_refcount(kv_entry *e)
{
    long long v;
    bk_str s;
    if (e->type != KV_STRING || e->raw || (e->flags & ENTRY_EMBSTR))
        return 1;
    s = entry_str(e);
    int lru = srv.cfg.maxmemory_policy == MM_ALLKEYS_LRU ||
              srv.cfg.maxmemory_policy == MM_VOLATILE_LRU || kv_lfu_on();
    if ((srv.cfg.maxmemory == 0 || !lru) && s.len <= 4 && kv_parse_ll(s.p, s.len, &v) == 0 && v >= 0 &&
        v < 10000)
        return INT_MAX;
    return 1;
}

void object_command(kv_client *c)
{
    bk_str sub = c->argv[1];
    if (arg_is(sub, "help") && c->argc != 2) {
        reply_error(c, "ERR wrong number of arguments for 'object|help' command");
        return;
    }
    if (arg_is(sub, "help")) {
        reply_array(c, (long long)BK_ARRAY_LEN(object_help));
        for (size_t i = 0; i < BK_ARRAY_LEN(object_help); i++)
            reply_simple(c, object_help[i]);
        return;
    }
    int known = arg_is(sub, "encoding") || arg_is(sub, "refcount") || arg_is(sub, "idletime") ||
                arg_is(sub, "freq") || arg_is(sub, "help");
    if (!known) {
        reply_errorf(c, "ERR unknown subcommand '%.*s'. Try OBJECT HELP.",
                     (int)BK_MIN(sub.len, 128), sub.p);
        return;
    }
    if (c->argc != 3) {
        char name[32];
        size_t n = BK_MIN(sub.len, sizeof name - 1);
        for (size_t i = 0; i < n; i++)
            name[i] = ascii_lower(sub.p[i]);
        name[n] = '\0';
        reply_errorf(c, "ERR wrong number of arguments for 'object|%s' command", name);
        return;
    }
    /* Looking does not count as an access: the LRU stamp stays. */
    kv_entry *e = db_find(c->db, c->argv[2]);
    if (e && db_expire_if_needed(c->db, e))
        e = NULL;
    if (!e) {
        srv.stat_misses++;
        reply_null(c);
        return;
    }
    srv.stat_hits++;
    if (arg_is(sub, "encoding"))
        reply_bulk_cstr(c, rdb_encoding_name(e)); /* Redis 7.0's names (rdb.c) */
    else if (arg_is(sub, "refcount"))
        reply_int(c, object_refcount(e));
    else if (arg_is(sub, "idletime") && kv_lfu_on())
        reply_error(c, "ERR An LFU maxmemory policy is selected, idle time not tracked. Please "
                       "note that when switching between policies at runtime LRU and LFU data "
                       "will take some time to adjust.");
    else if (arg_is(sub, "idletime"))
        reply_int(c, (long long)((srv.lru_clock - e->lru) & 0xfffffff) * KV_LRU_MS / 1000);
    else if (kv_lfu_on())
        reply_int(c, kv_lfu_counter(e));
    else
        reply_error(c, "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
                       "Please note that when switching between policies at runtime LRU and LFU "
                       "data will take some time to adjust.");
}
