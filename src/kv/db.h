/* The keyspace: one dict of kv_entry per database, TTLs kept in the entry
 * plus an array of the keys that have one (for sampling), lazy expiry on
 * access, the active expiry cycle and eviction. */
#ifndef BRISK_KV_DB_H
#define BRISK_KV_DB_H

#include "kv/server.h"

void db_init(kv_db *db, int id);
void db_free(kv_db *db);
static inline size_t db_size(kv_db *db) { return dict_size(&db->keys); }

/* Raw lookup: no expiry check. */
kv_entry *db_find(kv_db *db, str key);
/* Lookups for commands: an expired key is deleted and reported missing;
 * the LRU clock of a found key is refreshed. read counts hits/misses. */
kv_entry *db_lookup_read(kv_db *db, str key);
kv_entry *db_lookup_write(kv_db *db, str key);
/* Deletes e if its TTL passed (propagating a DEL). Returns 1 if deleted. */
int db_expire_if_needed(kv_db *db, kv_entry *e);
static inline int db_expired(const kv_entry *e) { return e->expire && e->expire <= srv.now_ms; }

/* Sets key to a string value (replacing any value of any type). The TTL is
 * kept when keep_ttl, removed otherwise. Returns the entry. */
kv_entry *db_set_string(kv_db *db, str key, const char *val, size_t vlen, int keep_ttl);
/* Adds a new key (must be absent) holding a type object; returns it. */
kv_entry *db_add_obj(kv_db *db, str key, int type, void *obj);
/* Makes room for a string of newlen bytes (content kept up to the old
 * length); returns the entry, which may have moved. */
kv_entry *db_string_resize(kv_db *db, kv_entry *e, size_t newlen);
int db_delete(kv_db *db, str key);
void db_delete_entry(kv_db *db, kv_entry *e);
/* Unlinks e from the keyspace without freeing it (RENAME/MOVE). */
void db_detach_entry(kv_db *db, kv_entry *e);
/* Links a detached entry under a new key; returns the new entry (the old
 * pointer is freed when the key differs). */
kv_entry *db_attach_entry(kv_db *db, kv_entry *e, str key);
void db_set_expire(kv_db *db, kv_entry *e, int64_t when_ms);
void db_persist(kv_db *db, kv_entry *e);
kv_entry *db_random(kv_db *db);
void db_flush(kv_db *db);
/* Copy of the value of e under another key (COPY). */
kv_entry *db_dup_entry(kv_entry *e, str key);

/* Frees the value object of an entry (not the entry). */
void obj_free(int type, void *obj);
void *obj_dup(int type, void *obj);
const char *obj_type_name(int type);
const char *obj_encoding(kv_entry *e);

/* Active expiry: samples keys with a TTL until the time budget is used.
 * Returns the number of keys expired. */
size_t db_active_expire(int64_t budget_us);
/* Evicts keys per maxmemory-policy until used memory is under maxmemory.
 * Returns 0 when under the limit, -1 when it cannot free enough. */
int kv_evict_if_needed(void);
size_t kv_memory_used(void);

/* Called for every key removed by expiry or eviction. */
void kv_propagate_del(kv_db *db, str key);

#endif
