/* An intrusive chained hash table with incremental rehash. The owner embeds
 * a dict_node at the start of its own struct (one allocation holds node,
 * key and value) and tells the dict how to find a node's key. The dict
 * never allocates or frees nodes; it allocates only its bucket arrays.
 *
 * Growing (load factor 1) and shrinking (dict_shrink_if_sparse) move one
 * bucket per operation from the old table to the new one, so no call pays
 * for a whole rehash. */
#ifndef BRISK_KV_DICT_H
#define BRISK_KV_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef struct dict_node {
    struct dict_node *next;
    uint32_t hash; /* low 32 bits of dict_hash(key); picks the bucket */
    uint32_t aux;  /* free for the owner (often the key length) */
} dict_node;

typedef bk_str (*dict_key_fn)(const dict_node *n);

typedef struct dict {
    dict_node **tab[2];
    size_t size[2]; /* power of two, or 0 */
    size_t used[2];
    long long rehashidx; /* next bucket of tab[0] to move; -1 = not rehashing */
    int pause;           /* > 0 while an iterator forbids moving buckets */
    int owner;           /* free for the owner (sets: the encoding Redis shows) */
    dict_key_fn key;
} dict;

typedef struct {
    dict *d;
    int table;
    size_t idx;
    dict_node *next;
} dict_iter;

void dict_set_seed(uint64_t s0, uint64_t s1);
uint64_t dict_hash(const void *p, size_t len);
static inline uint32_t dict_hash32(const void *p, size_t len) { return (uint32_t)dict_hash(p, len); }

void dict_init(dict *d, dict_key_fn key);
/* Calls free_node (if not NULL) on every node, then empties d. */
void dict_clear(dict *d, void (*free_node)(dict_node *n, void *ud), void *ud);

/* A heap-allocated dict whose nodes are single kv_malloc blocks (hash
 * fields, set members): dict_new_owned makes one, dict_free_owned frees it
 * with every node. */
dict *dict_new_owned(dict_key_fn key);
void dict_clear_owned(dict *d); /* empties it, freeing the nodes */
void dict_free_owned(dict *d);
static inline size_t dict_size(const dict *d) { return d->used[0] + d->used[1]; }
static inline int dict_rehashing(const dict *d) { return d->rehashidx >= 0; }

dict_node *dict_find(dict *d, const char *key, size_t len, uint32_t hash);
/* Inserts n (n->hash set, key not present). */
void dict_add(dict *d, dict_node *n);
/* Removes and returns the node with this key, or NULL. */
dict_node *dict_unlink(dict *d, const char *key, size_t len, uint32_t hash);
/* Removes the node n, which must be in d. */
void dict_unlink_node(dict *d, dict_node *n);
/* Puts new_n in the place of old_n (same key and hash), e.g. when the
 * owner moves a node to a bigger allocation. old_n must still be valid
 * (free it after this call). */
void dict_relink(dict *d, dict_node *old_n, dict_node *new_n);
/* A uniformly random node, or NULL when empty. */
dict_node *dict_random(dict *d);
/* Reverse-binary cursor scan (SCAN semantics: every node present for the
 * whole scan is reported at least once). Returns the next cursor, 0 at end. */
size_t dict_scan(dict *d, size_t cursor, void (*fn)(void *ud, dict_node *n), void *ud);
/* Moves up to n buckets; returns 1 while rehashing remains. */
int dict_rehash(dict *d, int n);
/* Starts shrinking when less than a tenth of the table is used (Redis's
 * htNeedsResize + dictResize): to the power of two that holds the nodes. */
void dict_shrink_if_sparse(dict *d);
/* Reserves room for n nodes (starts a rehash if needed). */
void dict_expand(dict *d, size_t n);
size_t dict_buckets(const dict *d);
/* Chains of table t (0 main, 1 rehashing target): the number of non-empty
 * buckets, the longest chain, and in hist[len] how many buckets have a chain
 * of len nodes (the last slot, nhist - 1, counts every longer one too). */
size_t dict_chain_stats(const dict *d, int t, size_t *maxchain, size_t *hist, size_t nhist);

/* Iteration visits every node once; the current node may be unlinked and
 * freed. Rehash is paused until dict_iter_end. */
void dict_iter_init(dict_iter *it, dict *d);
dict_node *dict_iter_next(dict_iter *it);
void dict_iter_end(dict_iter *it);

#endif
