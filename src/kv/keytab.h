/* The keyspace index: open addressing with linear probing over one array of
 * 8-byte slots. A slot holds an item pointer (48 bits) and 16 bits of the
 * item's hash, so a probe compares keys only when those bits match, and an
 * item needs no link field and no stored hash: a key costs 8 bytes / load
 * here instead of a bucket pointer plus a chain pointer plus a hash.
 *
 * Items are the owner's (keyspace entries); keytab never allocates or frees
 * them, only its slot arrays, and finds an item's key with the key function.
 *
 * - Home slot: the top bits of the 64-bit hash (dict_hash). A deleted item
 *   leaves a tombstone unless the next slot is empty, so an item never has
 *   an empty slot between its home and itself, and items never move except
 *   when the table is rebuilt.
 * - Resize (grow past 7/8 full counting tombstones, shrink under 1/8) is
 *   incremental like dict's: a second table is allocated, inserts go there,
 *   and every operation moves a few slots of the old one, walking it from an
 *   empty slot so that no probe run straddles the moved and unmoved parts.
 * - SCAN: the cursor is a hash position. Visiting it reports every item
 *   whose home covers that position, in both tables while resizing, so an
 *   item present for the whole scan is reported at least once whatever the
 *   resizes in between (items may be reported more than once).
 *
 * Main thread only. Pointers must fit in 48 bits (x86-64 and arm64 user
 * space without 5-level opt-in). */
#ifndef BRISK_KV_KEYTAB_H
#define BRISK_KV_KEYTAB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/common.h"

typedef bk_str (*keytab_key_fn)(const void *item);

typedef struct keytab {
    uint64_t *slot[2];
    size_t size[2]; /* slots: a power of two >= 8, or 0 */
    size_t used[2]; /* items */
    size_t tomb[2]; /* tombstones */
    uint8_t bits[2]; /* log2(size) */
    size_t move_from; /* old-table slot (empty) where the move started */
    long long moved;  /* old-table slots moved so far; -1 = not resizing */
    int pause;        /* > 0 while an iterator forbids moving items */
    keytab_key_fn key;
} keytab;

typedef struct {
    keytab *kt;
    int table;
    size_t idx;
} keytab_iter;

void keytab_init(keytab *kt, keytab_key_fn key);
/* Calls free_item (if not NULL) on every item, then empties kt. */
void keytab_clear(keytab *kt, void (*free_item)(void *item, void *ud), void *ud);
static inline size_t keytab_size(const keytab *kt) { return kt->used[0] + kt->used[1]; }
static inline size_t keytab_slots(const keytab *kt) { return kt->size[0] + kt->size[1]; }
static inline int keytab_resizing(const keytab *kt) { return kt->moved >= 0; }

/* hash is dict_hash(key) in all calls. */
void *keytab_find(keytab *kt, const char *key, size_t len, uint64_t hash);
/* keytab_find with the key function given at the call site: a caller that
 * passes a constant function gets the whole probe, key function included,
 * inlined (the keyspace's GET and SET path). Defined below. */
static inline void *keytab_lookup(keytab *kt, const char *key, size_t len, uint64_t hash,
                                  keytab_key_fn keyfn);
/* Inserts item, whose key must not be present. */
void keytab_add(keytab *kt, void *item, uint64_t hash);
/* Removes the item with this key and returns it, or NULL. */
void *keytab_remove(keytab *kt, const char *key, size_t len, uint64_t hash);
/* Removes item (which must be in kt; hash is its key's). */
void keytab_remove_item(keytab *kt, void *item, uint64_t hash);
/* Puts new_item in the place of old_item (same key), e.g. when the owner
 * moved the item to a bigger allocation. */
void keytab_replace(keytab *kt, void *old_item, void *new_item, uint64_t hash);
/* A uniformly random item, or NULL when empty. */
void *keytab_random(keytab *kt);
/* One SCAN step: calls fn for the items of one home position (and what it
 * covers in the other table while resizing); returns the next cursor, 0 at
 * the end. Cursor 0 starts. */
uint64_t keytab_scan(keytab *kt, uint64_t cursor, void (*fn)(void *ud, void *item), void *ud);
/* Moves up to n old-table slots; returns 1 while a resize remains. */
int keytab_rehash(keytab *kt, size_t n);
/* Starts a resize when the table is mostly empty or mostly tombstones. */
void keytab_tidy(keytab *kt);
/* Reserves room for n items (starts a resize if needed). */
void keytab_expand(keytab *kt, size_t n);

/* Iteration visits every item once; the current item may be removed (and
 * freed). Items are not moved until keytab_iter_end. */
void keytab_iter_init(keytab_iter *it, keytab *kt);
void *keytab_iter_next(keytab_iter *it);
void keytab_iter_end(keytab_iter *it);

/* ---- the probe, inline (see keytab_lookup); keytab.c uses it too ---- */

#define KEYTAB_EMPTY 0ull
#define KEYTAB_TOMB 1ull
#define KEYTAB_PTR_MASK ((1ull << 48) - 1)
#define KEYTAB_STEP_SLOTS 4 /* old-table slots moved per operation while resizing */

static inline uint64_t keytab_tag(uint64_t h) { return (h & 0xffff) << 48; }
static inline void *keytab_item(uint64_t w) { return (void *)(uintptr_t)(w & KEYTAB_PTR_MASK); }
static inline size_t keytab_home(const keytab *kt, int t, uint64_t h)
{
    return (size_t)(h >> (64 - kt->bits[t]));
}

/* In the old table, the slots already moved are empty but probe runs may
 * have crossed them: a probe whose home is in the moved part starts at the
 * first unmoved slot. The move started at an empty slot, so no run wraps
 * from the unmoved part into the moved one. */
static inline size_t keytab_probe_start(const keytab *kt, int t, size_t i)
{
    if (t == 0 && kt->moved > 0) {
        size_t mask = kt->size[0] - 1;
        if (((i - kt->move_from) & mask) < (size_t)kt->moved)
            i = (kt->move_from + (size_t)kt->moved) & mask;
    }
    return i;
}

static inline int keytab_key_eq(const char *a, const char *b, size_t len)
{
    if (len >= 8 && len <= 16) { /* two overlapping words: no call */
        uint64_t a1, a2, b1, b2;
        memcpy(&a1, a, 8);
        memcpy(&b1, b, 8);
        memcpy(&a2, a + len - 8, 8);
        memcpy(&b2, b + len - 8, 8);
        return a1 == b1 && a2 == b2;
    }
    return memcmp(a, b, len) == 0;
}

/* The slot of table t holding key, or NULL. */
static inline uint64_t *keytab_probe(keytab *kt, int t, const char *key, size_t len, uint64_t h,
                                     keytab_key_fn keyfn)
{
    uint64_t *s = kt->slot[t];
    size_t mask = kt->size[t] - 1;
    uint64_t tag = keytab_tag(h);
    for (size_t i = keytab_probe_start(kt, t, keytab_home(kt, t, h));; i = (i + 1) & mask) {
        uint64_t w = s[i];
        if (w == KEYTAB_EMPTY)
            return NULL;
        if ((w & ~KEYTAB_PTR_MASK) == tag && w != KEYTAB_TOMB) {
            bk_str k = keyfn(keytab_item(w));
            if (k.len == len && keytab_key_eq(k.p, key, len))
                return &s[i];
        }
    }
}

static inline void *keytab_lookup(keytab *kt, const char *key, size_t len, uint64_t hash,
                                  keytab_key_fn keyfn)
{
    if (kt->used[0] + kt->used[1] == 0)
        return NULL;
    if (BK_UNLIKELY(kt->moved >= 0) && kt->pause == 0)
        keytab_rehash(kt, KEYTAB_STEP_SLOTS);
    uint64_t *p = keytab_probe(kt, 0, key, len, hash, keyfn);
    if (!p && kt->moved >= 0)
        p = keytab_probe(kt, 1, key, len, hash, keyfn);
    return p ? keytab_item(*p) : NULL;
}

#endif
