#include "kv/db.h"

#include "kv/aof.h"
#include "kv/mem.h"
#include "kv/types.h"
#include "kv/util.h"

#include <malloc.h>

static str entry_key_fn(const dict_node *n)
{
    kv_entry *e = (kv_entry *)(void *)n;
    return (str){ e->data, n->aux };
}

void db_init(kv_db *db, int id)
{
    memset(db, 0, sizeof *db);
    db->id = id;
    dict_init(&db->keys, entry_key_fn);
    dict_init(&db->watched, kv_watch_key_fn);
}

static void free_entry_cb(dict_node *n, void *ud)
{
    kv_entry *e = (kv_entry *)(void *)n;
    if (e->type != KV_STRING)
        obj_free(e->type, entry_obj(e));
    kv_free(e);
}

void db_free(kv_db *db)
{
    dict_clear(&db->keys, free_entry_cb, NULL);
    kv_free(db->vol);
    db->vol = NULL;
    db->vol_len = db->vol_cap = 0;
}

void db_flush(kv_db *db)
{
    db_free(db);
}

kv_entry *db_find(kv_db *db, str key)
{
    return (kv_entry *)(void *)dict_find(&db->keys, key.p, key.len, dict_hash32(key.p, key.len));
}

static void vol_add(kv_db *db, kv_entry *e)
{
    if (db->vol_len == db->vol_cap) {
        db->vol_cap = db->vol_cap ? db->vol_cap * 2 : 64;
        db->vol = kv_realloc(db->vol, db->vol_cap * sizeof *db->vol);
    }
    db->vol[db->vol_len++] = e;
    e->vidx = (uint32_t)db->vol_len;
}

static void vol_remove(kv_db *db, kv_entry *e)
{
    if (!e->vidx)
        return;
    size_t i = e->vidx - 1;
    kv_entry *last = db->vol[--db->vol_len];
    db->vol[i] = last;
    last->vidx = (uint32_t)(i + 1);
    e->vidx = 0;
    if (db->vol_cap > 256 && db->vol_len * 4 < db->vol_cap) {
        db->vol_cap /= 2;
        db->vol = kv_realloc(db->vol, db->vol_cap * sizeof *db->vol);
    }
}

void db_set_expire(kv_db *db, kv_entry *e, int64_t when_ms)
{
    if (!e->vidx)
        vol_add(db, e);
    e->expire = when_ms;
}

void db_persist(kv_db *db, kv_entry *e)
{
    vol_remove(db, e);
    e->expire = 0;
}

void db_delete_entry(kv_db *db, kv_entry *e)
{
    dict_unlink_node(&db->keys, &e->node);
    vol_remove(db, e);
    if (e->type != KV_STRING)
        obj_free(e->type, entry_obj(e));
    kv_free(e);
}

int db_delete(kv_db *db, str key)
{
    kv_entry *e = db_find(db, key);
    if (!e)
        return 0;
    db_delete_entry(db, e);
    return 1;
}

int db_expire_if_needed(kv_db *db, kv_entry *e)
{
    if (!db_expired(e) || srv.loading)
        return 0;
    str key = entry_key_str(e);
    kv_propagate_del(db, key);
    kv_touch_key(db, key);
    srv.stat_expired++;
    db_delete_entry(db, e);
    return 1;
}

kv_entry *db_lookup_read(kv_db *db, str key)
{
    kv_entry *e = db_find(db, key);
    if (e && UNLIKELY(e->expire) && db_expire_if_needed(db, e))
        e = NULL;
    if (e) {
        e->lru = srv.lru_clock;
        srv.stat_hits++;
    } else {
        srv.stat_misses++;
    }
    return e;
}

kv_entry *db_lookup_write(kv_db *db, str key)
{
    kv_entry *e = db_find(db, key);
    if (e && UNLIKELY(e->expire) && db_expire_if_needed(db, e))
        return NULL;
    if (e)
        e->lru = srv.lru_clock;
    return e;
}

static kv_entry *entry_alloc(str key, size_t vneed)
{
    size_t want = sizeof(kv_entry) + key.len + vneed;
    kv_entry *e = kv_malloc(want);
    size_t got = malloc_usable_size(e);
    size_t vcap = got - sizeof(kv_entry) - key.len;
    if (vcap > UINT32_MAX)
        vcap = UINT32_MAX;
    e->node.next = NULL;
    e->node.aux = (uint32_t)key.len;
    e->vlen = 0;
    e->vcap = (uint32_t)vcap;
    e->expire = 0;
    e->vidx = 0;
    e->lru = srv.lru_clock;
    e->type = KV_STRING;
    memcpy(e->data, key.p, key.len);
    return e;
}

/* Moves e to a new allocation with room for vneed value bytes. */
static kv_entry *entry_move(kv_db *db, kv_entry *e, size_t vneed, size_t keep)
{
    str key = entry_key_str(e);
    kv_entry *n = entry_alloc(key, vneed);
    n->node.hash = e->node.hash;
    n->expire = e->expire;
    n->vidx = e->vidx;
    n->lru = e->lru;
    n->type = e->type;
    n->vlen = e->vlen;
    memcpy(entry_val(n), entry_val(e), keep);
    dict_relink(&db->keys, &e->node, &n->node);
    if (n->vidx)
        db->vol[n->vidx - 1] = n;
    kv_free(e);
    return n;
}

kv_entry *db_set_string(kv_db *db, str key, const char *val, size_t vlen, int keep_ttl)
{
    uint32_t h = dict_hash32(key.p, key.len);
    kv_entry *e = (kv_entry *)(void *)dict_find(&db->keys, key.p, key.len, h);
    if (e) {
        if (e->type != KV_STRING) {
            obj_free(e->type, entry_obj(e));
            e->type = KV_STRING;
            e->vlen = 0;
        }
        /* Overwrite in place when it fits and does not waste much. */
        if (vlen > e->vcap || (e->vcap > 64 && vlen < e->vcap / 4))
            e = entry_move(db, e, vlen, 0);
        memcpy(entry_val(e), val, vlen);
        e->vlen = (uint32_t)vlen;
        e->lru = srv.lru_clock;
        if (!keep_ttl && e->expire)
            db_persist(db, e);
        return e;
    }
    e = entry_alloc(key, vlen);
    e->node.hash = h;
    memcpy(entry_val(e), val, vlen);
    e->vlen = (uint32_t)vlen;
    dict_add(&db->keys, &e->node);
    return e;
}

kv_entry *db_add_obj(kv_db *db, str key, int type, void *obj)
{
    kv_entry *e = entry_alloc(key, sizeof obj);
    e->node.hash = dict_hash32(key.p, key.len);
    e->type = (uint32_t)type;
    entry_set_obj(e, obj);
    dict_add(&db->keys, &e->node);
    return e;
}

kv_entry *db_string_resize(kv_db *db, kv_entry *e, size_t newlen)
{
    if (newlen > e->vcap) {
        size_t want = newlen < 1024 * 1024 ? newlen * 2 : newlen + 1024 * 1024;
        e = entry_move(db, e, want, e->vlen);
    }
    e->vlen = (uint32_t)newlen;
    return e;
}

void db_detach_entry(kv_db *db, kv_entry *e)
{
    dict_unlink_node(&db->keys, &e->node);
    vol_remove(db, e);
}

kv_entry *db_attach_entry(kv_db *db, kv_entry *e, str key)
{
    kv_entry *n = e;
    int64_t exp = e->expire;
    if (key.len != entry_klen(e) || memcmp(key.p, entry_key(e), key.len) != 0) {
        size_t vbytes = e->type == KV_STRING ? e->vlen : sizeof(void *);
        n = entry_alloc(key, vbytes);
        n->type = e->type;
        n->vlen = e->vlen;
        n->lru = e->lru;
        memcpy(entry_val(n), entry_val(e), vbytes);
        kv_free(e);
    }
    n->expire = 0;
    n->vidx = 0;
    n->node.hash = dict_hash32(key.p, key.len);
    dict_add(&db->keys, &n->node);
    if (exp)
        db_set_expire(db, n, exp);
    return n;
}

kv_entry *db_dup_entry(kv_entry *e, str key)
{
    size_t vbytes = e->type == KV_STRING ? e->vlen : sizeof(void *);
    kv_entry *n = entry_alloc(key, vbytes);
    n->type = e->type;
    n->vlen = e->vlen;
    if (e->type == KV_STRING)
        memcpy(entry_val(n), entry_val(e), e->vlen);
    else
        entry_set_obj(n, obj_dup(e->type, entry_obj(e)));
    n->node.hash = dict_hash32(key.p, key.len);
    return n;
}

kv_entry *db_random(kv_db *db)
{
    for (int tries = 0; tries < 100; tries++) {
        kv_entry *e = (kv_entry *)(void *)dict_random(&db->keys);
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
    static const char *names[] = { "string", "list", "set", "zset", "hash" };
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
    return kv_used_memory();
}

/* Picks a victim for the configured policy: the least recently used of a
 * few random samples, or a random key. */
static kv_entry *pick_victim(kv_db **vdb)
{
    int policy = srv.cfg.maxmemory_policy;
    int volatile_only = policy == MM_VOLATILE_LRU || policy == MM_VOLATILE_RANDOM ||
                        policy == MM_VOLATILE_TTL;
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
                                        : (kv_entry *)(void *)dict_random(&db->keys);
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
                better = e->expire < best->expire;
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

int kv_evict_if_needed(void)
{
    if (!srv.cfg.maxmemory || srv.loading)
        return 0;
    if (kv_memory_used() <= srv.cfg.maxmemory)
        return 0;
    if (srv.cfg.maxmemory_policy == MM_NOEVICTION)
        return -1;
    int guard = 0;
    while (kv_memory_used() > srv.cfg.maxmemory) {
        kv_db *db = NULL;
        kv_entry *e = pick_victim(&db);
        if (!e)
            return -1;
        str key = entry_key_str(e);
        kv_propagate_del(db, key);
        kv_touch_key(db, key);
        db_delete_entry(db, e);
        srv.stat_evicted++;
        if (++guard > 100000)
            break;
    }
    return kv_memory_used() <= srv.cfg.maxmemory ? 0 : -1;
}
