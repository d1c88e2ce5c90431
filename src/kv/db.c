#include "kv/db.h"

#include "core/buf.h"
#include "kv/aof.h"
#include "kv/blocking.h"
#include "kv/config.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/slab.h"
#include "kv/types.h"
#include "kv/util.h"

#include <malloc.h>
#include <math.h>
#include <stdlib.h>

static inline bk_str entry_key_fn(const void *item)
{
    return entry_key_str(item);
}

static inline uint64_t key_hash(bk_str key)
{
    return dict_hash(key.p, key.len);
}

void db_init(kv_db *db, int id)
{
    memset(db, 0, sizeof *db);
    db->id = id;
    keytab_init(&db->keys, entry_key_fn);
    dict_init(&db->watched, kv_watch_key_fn);
}

/* ---- entry memory ---- */

_Static_assert(offsetof(kv_entry, data) == ENTRY_HDR && ENTRY_HDR == 5, "a 5-byte entry header");
_Static_assert(SLAB_NCLASSES <= ENTRY_HEAP_CLASS, "slab class fits in flags, beside the heap mark");

size_t db_entry_bytes(const kv_entry *e)
{
    if (entry_on_heap(e))
        return malloc_usable_size((void *)e);
    return slab_index_size(e->flags >> ENTRY_CLASS_SHIFT);
}

/* Bytes of the value area: vlen varint plus value, or the object pointer. */
static size_t value_area(const kv_entry *e)
{
    if (e->type != KV_STRING)
        return sizeof(void *);
    size_t vlen = entry_vlen(e);
    return kv_varint_len(vlen) + vlen;
}

static size_t layout_size(size_t klen, int type, size_t vlen, int ttl)
{
    size_t v = type == KV_STRING ? kv_varint_len(vlen) + vlen : sizeof(void *);
    return ENTRY_HDR + (ttl ? ENTRY_TTL_BYTES : 0) + kv_varint_len(klen) + klen + v;
}

static kv_entry *entry_mem(size_t need)
{
    kv_entry *e;
    if (need <= SLAB_MAX) {
        e = slab_alloc(need);
        e->flags = (uint8_t)(slab_class_index(need) << ENTRY_CLASS_SHIFT);
    } else {
        e = kv_malloc(need);
        e->flags = (uint8_t)(ENTRY_HEAP_CLASS << ENTRY_CLASS_SHIFT);
    }
    return e;
}

static void entry_mem_free(kv_entry *e)
{
    if (entry_on_heap(e))
        kv_free(e);
    else
        slab_free(e);
}

/* ---- LFU (see db.h) ---- */

enum { LFU_INIT = 5 };

static unsigned lfu_minutes(void)
{
    return (unsigned)(srv.now_ms / 60000) & 0xffff;
}

/* An option of the compatibility table, read as an integer (its storage
 * is stable: the pointer is kept). */
static long long lfu_option(const char **cache, const char *name, long long dflt)
{
    if (!*cache)
        *cache = kv_config_noop_str(name);
    return *cache ? strtoll(*cache, NULL, 10) : dflt;
}

uint32_t kv_lfu_stamp(unsigned counter)
{
    return (lfu_minutes() << 8) | (counter & 0xff);
}

unsigned kv_lfu_counter(const kv_entry *e)
{
    static const char *decay_opt;
    long long decay = lfu_option(&decay_opt, "lfu-decay-time", 1);
    unsigned last = (e->lru >> 8) & 0xffff, now = lfu_minutes(), counter = e->lru & 0xff;
    unsigned elapsed = now >= last ? now - last : 0xffff - last + now; /* (the clock wraps) */
    unsigned long long periods = decay > 0 ? elapsed / (unsigned long long)decay : 0;
    return periods >= counter ? 0 : counter - (unsigned)periods;
}

/* An access: the counter decays, then grows with a chance that falls as it
 * gets bigger (1 / ((counter - 5) * lfu-log-factor + 1)). */
static void lfu_access(kv_entry *e)
{
    static const char *factor_opt;
    unsigned counter = kv_lfu_counter(e);
    if (counter < 255) {
        long long factor = lfu_option(&factor_opt, "lfu-log-factor", 10);
        double base = counter > LFU_INIT ? (double)(counter - LFU_INIT) : 0.0;
        double chance = 1.0 / (base * (double)(factor > 0 ? factor : 0) + 1.0);
        if ((double)(kv_rand64() >> 11) * 0x1p-53 < chance)
            counter++;
    }
    e->lru = kv_lfu_stamp(counter);
}

static inline void entry_access(kv_entry *e)
{
    if (BK_UNLIKELY(kv_lfu_on()))
        lfu_access(e);
    else
        e->lru = srv.lru_clock;
}

/* A new entry for key with room for a value of vroom bytes (strings) or an
 * object pointer; a zeroed TTL block when ttl. The value is not set. */
static kv_entry *entry_new(bk_str key, int type, size_t vroom, int ttl)
{
    kv_entry *e = entry_mem(layout_size(key.len, type, vroom, ttl));
    e->lru = BK_UNLIKELY(kv_lfu_on()) ? kv_lfu_stamp(LFU_INIT) : srv.lru_clock;
    e->type = (uint32_t)type;
    e->raw = 0;
    unsigned char *p = e->data;
    if (ttl) {
        e->flags |= ENTRY_EXPIRES;
        memset(p, 0, ENTRY_TTL_BYTES);
        p += ENTRY_TTL_BYTES;
    }
    p += kv_varint_put(p, key.len);
    memcpy(p, key.p, key.len);
    return e;
}

static void entry_put_str(kv_entry *e, const char *val, size_t vlen)
{
    unsigned char *p = entry_vpos(e);
    p += kv_varint_put(p, vlen);
    memcpy(p, val, vlen);
}

static void entry_put_expire(kv_entry *e, int64_t when)
{
    memcpy(e->data, &when, sizeof when);
}

static void entry_put_vidx(kv_entry *e, uint32_t v)
{
    memcpy(e->data + 8, &v, sizeof v);
}

static void entry_free(kv_entry *e)
{
    if (e->type != KV_STRING)
        obj_free(e->type, entry_obj(e));
    entry_mem_free(e);
}

static void free_entry_cb(void *item, void *ud)
{
    entry_free(item);
}

void db_free(kv_db *db)
{
    keytab_clear(&db->keys, free_entry_cb, NULL);
    kv_free(db->vol);
    db->vol = NULL;
    db->vol_len = db->vol_cap = 0;
}

void db_flush(kv_db *db)
{
    db_free(db);
}

kv_entry *db_find(kv_db *db, bk_str key)
{
    return keytab_lookup(&db->keys, key.p, key.len, key_hash(key), entry_key_fn);
}

/* ---- keys with a TTL: db->vol, each entry knowing its index ---- */

static void vol_add(kv_db *db, kv_entry *e)
{
    if (db->vol_len == db->vol_cap) {
        db->vol_cap = db->vol_cap ? db->vol_cap * 2 : 64;
        db->vol = kv_realloc(db->vol, db->vol_cap * sizeof *db->vol);
    }
    db->vol[db->vol_len++] = e;
    entry_put_vidx(e, (uint32_t)db->vol_len);
}

static void vol_remove(kv_db *db, kv_entry *e)
{
    uint32_t vidx = entry_vidx(e);
    if (!vidx)
        return;
    size_t i = vidx - 1;
    kv_entry *last = db->vol[--db->vol_len];
    db->vol[i] = last;
    entry_put_vidx(last, (uint32_t)(i + 1));
    entry_put_vidx(e, 0);
    if (db->vol_cap > 256 && db->vol_len * 4 < db->vol_cap) {
        db->vol_cap /= 2;
        db->vol = kv_realloc(db->vol, db->vol_cap * sizeof *db->vol);
    }
}

/* Adds or drops the TTL block in place (the allocation must have room):
 * shifts the tail bytes after it (key, and the value area when keep_value)
 * and keeps db->vol in step. */
static void relayout_ttl(kv_db *db, kv_entry *e, int ttl, int keep_value)
{
    unsigned char *k = entry_kpos(e);
    size_t tail = (size_t)(entry_vpos(e) - k) + (keep_value ? value_area(e) : 0);
    if (ttl) {
        memmove(e->data + ENTRY_TTL_BYTES, k, tail);
        e->flags |= ENTRY_EXPIRES;
        memset(e->data, 0, ENTRY_TTL_BYTES);
        vol_add(db, e);
    } else {
        vol_remove(db, e);
        memmove(e->data, k, tail);
        e->flags &= (uint8_t)~ENTRY_EXPIRES;
    }
}

/* Moves e to a new allocation of need bytes, with the TTL block iff ttl and
 * the value area copied when keep_value. The keyspace and db->vol point to
 * the new entry; the old one is freed. */
static kv_entry *entry_move(kv_db *db, kv_entry *e, size_t need, int ttl, int keep_value)
{
    bk_str key = entry_key_str(e);
    int had = (e->flags & ENTRY_EXPIRES) != 0;
    kv_entry *n = entry_mem(need);
    n->lru = e->lru;
    n->type = e->type;
    n->raw = e->raw;
    n->flags |= e->flags & ENTRY_EMBSTR;
    unsigned char *p = n->data;
    if (ttl) {
        n->flags |= ENTRY_EXPIRES;
        if (had)
            memcpy(p, e->data, ENTRY_TTL_BYTES);
        else
            memset(p, 0, ENTRY_TTL_BYTES);
        p += ENTRY_TTL_BYTES;
    } else if (had) {
        vol_remove(db, e);
    }
    size_t kbytes = (size_t)(entry_vpos(e) - entry_kpos(e));
    memcpy(p, entry_kpos(e), kbytes + (keep_value ? value_area(e) : 0));
    keytab_replace(&db->keys, e, n, key_hash(key));
    if (ttl && had)
        db->vol[entry_vidx(n) - 1] = n;
    else if (ttl)
        vol_add(db, n);
    entry_mem_free(e);
    return n;
}

kv_entry *db_set_expire(kv_db *db, kv_entry *e, int64_t when_ms)
{
    if (!(e->flags & ENTRY_EXPIRES)) {
        size_t vlen = e->type == KV_STRING ? entry_vlen(e) : 0;
        size_t need = layout_size(entry_klen(e), e->type, vlen, 1);
        if (need <= db_entry_bytes(e))
            relayout_ttl(db, e, 1, 1);
        else
            e = entry_move(db, e, need, 1, 1);
    }
    entry_put_expire(e, when_ms);
    return e;
}

void db_persist(kv_db *db, kv_entry *e)
{
    if (e && (e->flags & ENTRY_EXPIRES))
        relayout_ttl(db, e, 0, 1);
}

void db_delete_entry(kv_db *db, kv_entry *e)
{
    keytab_remove_item(&db->keys, e, key_hash(entry_key_str(e)));
    vol_remove(db, e);
    entry_free(e);
}

int db_delete(kv_db *db, bk_str key)
{
    kv_entry *e = keytab_remove(&db->keys, key.p, key.len, key_hash(key));
    if (!e)
        return 0;
    vol_remove(db, e);
    entry_free(e);
    return 1;
}

int db_expire_if_needed(kv_db *db, kv_entry *e)
{
    if (!db_expired(e) || srv.loading)
        return 0;
    if (BK_UNLIKELY(repl_guard) && repl_from_master())
        return 0; /* the master decides: its DEL follows */
    bk_str key = entry_key_str(e);
    kv_propagate_del(db, key);
    kv_touch_key(db, key);
    srv.stat_expired++;
    kv_notify(db, NOTIFY_EXPIRED, "expired", key);
    db_delete_entry(db, e);
    return 1;
}

static kv_entry *lookup_read(kv_db *db, bk_str key, int touch)
{
    kv_entry *e = db_find(db, key);
    /* CLIENT PAUSE freezes the dataset: an expired key reads as missing
     * but stays until the pause ends (the DEL would be a write). A replica
     * leaves it to its master's DEL. */
    if (e && BK_UNLIKELY(e->flags & ENTRY_EXPIRES) &&
        (BK_UNLIKELY(srv.pause_type || (repl_guard && repl_no_expire())) ? db_expired(e)
                                                                        : db_expire_if_needed(db, e)))
        e = NULL;
    if (e) {
        if (touch)
            entry_access(e);
        srv.stat_hits++;
    } else {
        srv.stat_misses++;
        kv_notify(db, NOTIFY_KEY_MISS, "keymiss", key);
    }
    return e;
}

kv_entry *db_lookup_read(kv_db *db, bk_str key)
{
    return lookup_read(db, key, 1);
}

kv_entry *db_lookup_notouch(kv_db *db, bk_str key)
{
    return lookup_read(db, key, 0);
}

kv_entry *db_lookup_write(kv_db *db, bk_str key)
{
    kv_entry *e = db_find(db, key);
    if (e && BK_UNLIKELY(e->flags & ENTRY_EXPIRES) && db_expire_if_needed(db, e))
        return NULL;
    if (e)
        entry_access(e);
    return e;
}

static kv_entry *add_string(kv_db *db, bk_str key, uint64_t hash, const char *val, size_t vlen,
                            int64_t expire)
{
    kv_entry *e = entry_new(key, KV_STRING, vlen, expire > 0);
    entry_put_str(e, val, vlen);
    keytab_add(&db->keys, e, hash);
    kv_notify(db, NOTIFY_NEW, "new", key);
    if (expire > 0) {
        entry_put_expire(e, expire);
        vol_add(db, e);
    }
    return e;
}

kv_entry *db_add_zeroed_string(kv_db *db, bk_str key, size_t vlen)
{
    kv_entry *e = entry_new(key, KV_STRING, vlen, 0);
    unsigned char *p = entry_vpos(e);
    p += kv_varint_put(p, vlen);
    memset(p, 0, vlen);
    keytab_add(&db->keys, e, key_hash(key));
    kv_notify(db, NOTIFY_NEW, "new", key);
    return e;
}

kv_entry *db_store_string(kv_db *db, bk_str key, kv_entry *e, const char *val, size_t vlen,
                          int64_t expire)
{
    if (!e)
        return add_string(db, key, key_hash(key), val, vlen, expire);
    if (e->type != KV_STRING) {
        obj_free(e->type, entry_obj(e));
        e->type = KV_STRING;
    }
    int had = (e->flags & ENTRY_EXPIRES) != 0;
    int ttl = expire == DB_KEEPTTL ? had : expire > 0;
    size_t need = layout_size(key.len, KV_STRING, vlen, ttl);
    size_t cap = db_entry_bytes(e);
    /* Overwrite in place when it fits without wasting much. */
    if (need <= cap && cap - need <= BK_MAX(32, need / 2)) {
        if (ttl != had)
            relayout_ttl(db, e, ttl, 0);
    } else {
        e = entry_move(db, e, need, ttl, 0);
    }
    entry_put_str(e, val, vlen);
    e->raw = 0;
    e->flags &= (uint8_t)~ENTRY_EMBSTR;
    if (expire > 0)
        entry_put_expire(e, expire);
    if (!kv_lfu_on()) /* an overwritten key keeps its LFU counter (Redis) */
        e->lru = srv.lru_clock;
    return e;
}

kv_entry *db_set_string(kv_db *db, bk_str key, const char *val, size_t vlen, int64_t expire)
{
    uint64_t h = key_hash(key); /* once, for the lookup and the insert */
    kv_entry *e = keytab_lookup(&db->keys, key.p, key.len, h, entry_key_fn);
    if (!e)
        return add_string(db, key, h, val, vlen, expire);
    return db_store_string(db, key, e, val, vlen, expire);
}

kv_entry *db_add_obj(kv_db *db, bk_str key, int type, void *obj)
{
    kv_entry *e = entry_new(key, type, 0, 0);
    entry_set_obj(e, obj);
    blocking_signal(db, key); /* served after the command */
    keytab_add(&db->keys, e, key_hash(key));
    kv_notify(db, NOTIFY_NEW, "new", key);
    return e;
}

kv_entry *db_replace_obj(kv_db *db, bk_str key, kv_entry *old, int type, void *obj)
{
    if (!old)
        return db_add_obj(db, key, type, obj);
    if (old->type == KV_STRING) {
        /* the value area changes shape: a new entry takes the old one's place */
        kv_entry *e = entry_move(db, old, layout_size(key.len, type, 0, 0), 0, 0);
        e->type = (uint32_t)type;
        e->raw = 0;
        e->flags &= (uint8_t)~ENTRY_EMBSTR;
        entry_set_obj(e, obj);
        return e;
    }
    obj_free(old->type, entry_obj(old));
    old->type = (uint32_t)type;
    entry_set_obj(old, obj);
    db_persist(db, old);
    return old;
}

kv_entry *db_string_resize(kv_db *db, kv_entry *e, size_t newlen)
{
    size_t old = entry_vlen(e);
    int ttl = (e->flags & ENTRY_EXPIRES) != 0;
    size_t klen = entry_klen(e);
    if (layout_size(klen, KV_STRING, newlen, ttl) > db_entry_bytes(e)) {
        size_t room = newlen < 1024 * 1024 ? newlen * 2 : newlen + 1024 * 1024;
        e = entry_move(db, e, layout_size(klen, KV_STRING, room, ttl), ttl, 1);
    }
    unsigned char *p = entry_vpos(e);
    size_t w_old = kv_varint_len(old), w_new = kv_varint_len(newlen);
    if (w_old != w_new)
        memmove(p + w_new, p + w_old, BK_MIN(old, newlen));
    kv_varint_put(p, newlen);
    return e;
}

kv_entry *db_rename_entry(kv_db *db, kv_entry *e, kv_db *dst, bk_str key)
{
    int64_t exp = entry_expire(e);
    size_t vlen = e->type == KV_STRING ? entry_vlen(e) : 0;
    kv_entry *n = entry_new(key, e->type, vlen, exp != 0);
    n->lru = e->lru;
    n->raw = e->raw;
    n->flags |= e->flags & ENTRY_EMBSTR;
    memcpy(entry_vpos(n), entry_vpos(e), value_area(e));
    /* The value object now belongs to n: free only the old memory. */
    keytab_remove_item(&db->keys, e, key_hash(entry_key_str(e)));
    vol_remove(db, e);
    entry_mem_free(e);
    keytab_add(&dst->keys, n, key_hash(key));
    blocking_signal(dst, key);
    if (exp) {
        entry_put_expire(n, exp);
        vol_add(dst, n);
    }
    kv_notify(dst, NOTIFY_NEW, "new", key);
    return n;
}

kv_entry *db_copy_entry(kv_db *dst, kv_entry *e, bk_str key)
{
    int64_t exp = entry_expire(e);
    kv_entry *n;
    if (e->type == KV_STRING) {
        size_t vlen = entry_vlen(e);
        n = entry_new(key, KV_STRING, vlen, exp != 0);
        entry_put_str(n, entry_val(e), vlen);
        n->raw = e->raw; /* Redis's dupStringObject keeps the encoding */
        n->flags |= e->flags & ENTRY_EMBSTR;
    } else {
        n = entry_new(key, e->type, 0, exp != 0);
        entry_set_obj(n, obj_dup(e->type, entry_obj(e)));
    }
    keytab_add(&dst->keys, n, key_hash(key));
    blocking_signal(dst, key);
    if (exp) {
        entry_put_expire(n, exp);
        vol_add(dst, n);
    }
    kv_notify(dst, NOTIFY_NEW, "new", key);
    return n;
}

kv_entry *db_random(kv_db *db)
{
    for (int tries = 0; tries < 100; tries++) {
        kv_entry *e = keytab_random(&db->keys);
        if (!e)
            return NULL;
        if (!db_expired(e))
            return e;
        if (tries > 50 && db->vol_len == db_size(db))
            return e; /* everything is volatile: give up looking */
        db_expire_if_needed(db, e);
    }
    return NULL;
}

const char *obj_type_name(int type)
{
    static const char *names[] = { "string", "list", "set", "zset", "hash", "stream" };
    return names[type];
}

size_t db_active_expire(int64_t budget_us)
{
    int64_t start = kv_unix_us();
    size_t expired = 0;
    int effort = srv.cfg.active_expire_effort;
    int per_loop = 20 + 5 * (effort - 1);
    for (int d = 0; d < srv.cfg.databases; d++) {
        kv_db *db = &srv.dbs[d];
        for (int round = 0; db->vol_len > 0; round++) {
            int sampled = 0, hit = 0;
            for (int i = 0; i < per_loop && db->vol_len > 0; i++) {
                kv_entry *e = db->vol[kv_rand64() % db->vol_len];
                sampled++;
                if (db_expired(e)) {
                    db_expire_if_needed(db, e);
                    hit++;
                    expired++;
                }
            }
            /* Stay while more than a quarter of the samples were stale. */
            if (hit * 4 <= sampled)
                break;
            if ((round & 15) == 15 && kv_unix_us() - start > budget_us)
                return expired;
        }
        if (kv_unix_us() - start > budget_us)
            break;
    }
    return expired;
}

size_t kv_memory_used(void)
{
    /* what went through kv_malloc plus the buffers (clients', AOF's, ...) */
    return kv_used_memory() + buf_held_bytes();
}

size_t kv_memory_not_counted(void)
{
    /* Like Redis: the replicas' output and the AOF buffer grow with every
     * DEL an eviction propagates; counting them would evict without end. */
    size_t n = repl_replica_obufs();
    if (srv.aof_state)
        n += srv.aof_buf.cap;
    return n;
}

/* Picks a victim for the configured policy: the least recently used of a
 * few random samples, or a random key. */
static kv_entry *pick_victim(kv_db **vdb)
{
    int policy = srv.cfg.maxmemory_policy;
    int volatile_only = policy == MM_VOLATILE_LRU || policy == MM_VOLATILE_RANDOM ||
                        policy == MM_VOLATILE_TTL || policy == MM_VOLATILE_LFU;
    kv_entry *best = NULL;
    kv_db *best_db = NULL;
    int samples = srv.cfg.maxmemory_samples > 0 ? srv.cfg.maxmemory_samples : 5;
    for (int d = 0; d < srv.cfg.databases; d++) {
        kv_db *db = &srv.dbs[d];
        size_t n = volatile_only ? db->vol_len : db_size(db);
        if (n == 0)
            continue;
        for (int i = 0; i < samples; i++) {
            kv_entry *e = volatile_only ? db->vol[kv_rand64() % db->vol_len]
                                        : (kv_entry *)keytab_random(&db->keys);
            if (!e)
                break;
            if (policy == MM_ALLKEYS_RANDOM || policy == MM_VOLATILE_RANDOM) {
                *vdb = db;
                return e;
            }
            int better;
            if (!best)
                better = 1;
            else if (policy == MM_VOLATILE_TTL)
                better = entry_expire(e) < entry_expire(best);
            else if (policy >= MM_ALLKEYS_LFU) /* the least frequently used */
                better = kv_lfu_counter(e) < kv_lfu_counter(best);
            else /* older LRU stamp wins; the clock wraps at 2^28 s */
                better = ((srv.lru_clock - e->lru) & 0xfffffff) >
                         ((srv.lru_clock - best->lru) & 0xfffffff);
            if (better) {
                best = e;
                best_db = db;
            }
        }
    }
    *vdb = best_db;
    return best;
}

/* How long one round may evict (maxmemory-eviction-tenacity 0..100, as
 * Redis): 50 us a step up to 10, then 15% more a step, 100 = no limit. */
static int64_t eviction_budget_us(void)
{
    const char *v = kv_config_noop_str("maxmemory-eviction-tenacity");
    int t = v ? atoi(v) : 10;
    if (t <= 10)
        return 50 * (int64_t)(t < 0 ? 0 : t);
    if (t >= 100)
        return INT64_MAX;
    return (int64_t)(500.0 * pow(1.15, t - 10.0));
}

int kv_evict_if_needed(void)
{
    srv.evict_pending = 0;
    if (!srv.cfg.maxmemory || srv.loading || repl_ignores_maxmemory() || srv.pause_type)
        return 0;
    size_t used = kv_memory_used();
    if (used <= srv.cfg.maxmemory)
        return 0;
    size_t not_counted = kv_memory_not_counted();
    used = used > not_counted ? used - not_counted : 0;
    if (used <= srv.cfg.maxmemory)
        return 0;
    if (srv.cfg.maxmemory_policy == MM_NOEVICTION)
        return -1;
    /* The amount to free is fixed up front and only what the deletions give
     * back counts (what went through kv_malloc): the DELs propagated and the
     * invalidations sent to tracking clients grow buffers, and counting them
     * would feed the loop (Redis's behaviour; later commands evict more). */
    size_t tofree = used - srv.cfg.maxmemory, freed = 0;
    int64_t budget = eviction_budget_us(), start = kv_unix_us();
    unsigned n = 0;
    while (freed < tofree) {
        kv_db *db = NULL;
        kv_entry *e = pick_victim(&db);
        if (!e)
            return -1; /* nothing left that the policy may evict */
        size_t before = kv_used_memory();
        bk_str key = entry_key_str(e);
        kv_propagate_del(db, key);
        kv_touch_key(db, key);
        kv_notify(db, NOTIFY_EVICTED, "evicted", key);
        db_delete_entry(db, e);
        size_t after = kv_used_memory();
        freed += before > after ? before - after : 0;
        srv.stat_evicted++;
        if (++n % 16 == 0 && kv_unix_us() - start > budget) {
            srv.evict_pending = 1; /* the loop goes on at the end of the iteration */
            break;
        }
    }
    return 0;
}
