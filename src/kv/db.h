/* The keyspace: one keytab of kv_entry per database, TTLs kept in the entry
 * plus an array of the keys that have one (for sampling), lazy expiry on
 * access, the active expiry cycle and eviction. */
#ifndef BRISK_KV_DB_H
#define BRISK_KV_DB_H

#include "kv/server.h"

void db_init(kv_db *db, int id);
void db_free(kv_db *db);
static inline size_t db_size(kv_db *db) { return keytab_size(&db->keys); }

/* LFU policies (allkeys-lfu, volatile-lfu) keep in an entry's lru field,
 * as Redis, the minute of its last decay (16 bits) and a logarithmic
 * access counter (8 bits, 5 for a new key); other policies an LRU stamp. */
static inline int kv_lfu_on(void) { return srv.cfg.maxmemory_policy >= MM_ALLKEYS_LFU; }
/* The counter after the decay of lfu-decay-time (what OBJECT FREQ shows). */
unsigned kv_lfu_counter(const kv_entry *e);
/* The lru field of an entry whose counter is now counter. */
uint32_t kv_lfu_stamp(unsigned counter);

/* Raw lookup: no expiry check. */
kv_entry *db_find(kv_db *db, bk_str key);
/* Lookups for commands: an expired key is deleted and reported missing;
 * the LRU clock of a found key is refreshed. read counts hits/misses. */
kv_entry *db_lookup_read(kv_db *db, bk_str key);
kv_entry *db_lookup_write(kv_db *db, bk_str key);
/* db_lookup_read without refreshing the LRU clock (TTL, TYPE, EXISTS). */
kv_entry *db_lookup_notouch(kv_db *db, bk_str key);
/* Deletes e if its TTL passed (propagating a DEL). Returns 1 if deleted. */
int db_expire_if_needed(kv_db *db, kv_entry *e);
static inline int db_expired(const kv_entry *e)
{
    return (e->flags & ENTRY_EXPIRES) && entry_expire(e) <= srv.now_ms;
}

/* Sets key to a string value (replacing any value of any type). e is what
 * db_lookup_* or db_find returned for key (NULL: the key is absent). expire
 * is DB_KEEPTTL, 0 (no TTL) or an absolute unix time in ms. Returns the
 * entry, which may have moved. */
#define DB_KEEPTTL (-1)
kv_entry *db_store_string(kv_db *db, bk_str key, kv_entry *e, const char *val, size_t vlen,
                          int64_t expire);
/* Adds a new key (must be absent) holding vlen zero bytes, allocated to
 * size (SETRANGE/SETBIT on a missing key: Redis makes it exact, only
 * growing an existing string takes room ahead). */
kv_entry *db_add_zeroed_string(kv_db *db, bk_str key, size_t vlen);
/* db_store_string after a raw lookup of key. */
kv_entry *db_set_string(kv_db *db, bk_str key, const char *val, size_t vlen, int64_t expire);
/* Adds a new key (must be absent) holding a type object; returns it. */
kv_entry *db_add_obj(kv_db *db, bk_str key, int type, void *obj);
/* Redis's setKey for type objects: key (old is its entry, NULL when
 * absent) now holds obj, without a TTL; only a new key is a "new" event. */
kv_entry *db_replace_obj(kv_db *db, bk_str key, kv_entry *old, int type, void *obj);
/* Sets the length of a string to newlen, keeping the content up to the old
 * length (bytes past it are not initialised); returns the entry, which may
 * have moved. */
kv_entry *db_string_resize(kv_db *db, kv_entry *e, size_t newlen);
int db_delete(kv_db *db, bk_str key);
void db_delete_entry(kv_db *db, kv_entry *e);
/* Moves e (value and TTL) to key in dst (which may be db; key must be
 * absent there). Returns the new entry; e is gone. */
kv_entry *db_rename_entry(kv_db *db, kv_entry *e, kv_db *dst, bk_str key);
/* Adds to dst a copy of e's value and TTL under key (absent there). */
kv_entry *db_copy_entry(kv_db *dst, kv_entry *e, bk_str key);
/* Sets the TTL (absolute ms, > 0); returns the entry, which may have moved. */
kv_entry *db_set_expire(kv_db *db, kv_entry *e, int64_t when_ms);
void db_persist(kv_db *db, kv_entry *e);
/* Bytes the entry occupies (its slot or allocation). */
size_t db_entry_bytes(const kv_entry *e);
kv_entry *db_random(kv_db *db);
void db_flush(kv_db *db);

/* Frees the value object of an entry (not the entry). */
void obj_free(int type, void *obj);
void *obj_dup(int type, void *obj);
const char *obj_type_name(int type);

/* Active expiry: samples keys with a TTL until the time budget is used.
 * Returns the number of keys expired. */
size_t db_active_expire(int64_t budget_us);
/* Evicts keys per maxmemory-policy while the memory counted for eviction
 * (kv_memory_used() less kv_memory_not_counted()) is over maxmemory, for at
 * most the time maxmemory-eviction-tenacity allows (srv.evict_pending then
 * asks the loop to go on). Returns 0 when under the limit or evicting, -1
 * when over it with nothing the policy may evict (deny-oom commands fail). */
int kv_evict_if_needed(void);
/* All the memory the server holds: INFO's used_memory. */
size_t kv_memory_used(void);
/* The part of it eviction leaves out: replicas' output buffers, the AOF
 * buffer (INFO's mem_not_counted_for_evict). */
size_t kv_memory_not_counted(void);

/* Called for every key removed by expiry or eviction. */
void kv_propagate_del(kv_db *db, bk_str key);

#endif
