#include "kv/keytab.h"

#include "kv/dict.h"
#include "kv/mem.h"
#include "kv/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIN_SIZE 8

static inline uint64_t item_hash(const keytab *kt, const void *item)
{
    bk_str k = kt->key(item);
    return dict_hash(k.p, k.len);
}

/* Big slot arrays are mapped directly, so that freeing one after a resize
 * or a FLUSHALL returns it to the kernel at once (from malloc, a freed 8 MB
 * array raises glibc's mmap threshold and the next ones stay in the heap
 * as holes). Under ASan they stay on the heap, where the leak checker
 * looks for the entries they point to. */
#define MAP_MIN_BYTES ((size_t)256 * 1024)

static uint64_t *slots_alloc(size_t n)
{
    size_t bytes = n * sizeof(uint64_t);
#if !defined(__SANITIZE_ADDRESS__)
    if (bytes >= MAP_MIN_BYTES) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "brisk-kv: out of memory mapping a %zu-byte key table\n", bytes);
            abort();
        }
        kv_mem_account((long long)bytes);
        return p;
    }
#endif
    return kv_calloc(bytes);
}

static void slots_free(uint64_t *p, size_t n)
{
#if !defined(__SANITIZE_ADDRESS__)
    size_t bytes = n * sizeof(uint64_t);
    if (p && bytes >= MAP_MIN_BYTES) {
        munmap(p, bytes);
        kv_mem_account(-(long long)bytes);
        return;
    }
#endif
    kv_free(p);
}

void keytab_init(keytab *kt, keytab_key_fn key)
{
    memset(kt, 0, sizeof *kt);
    kt->moved = -1;
    kt->key = key;
}

static void reset_table(keytab *kt, int t)
{
    kt->slot[t] = NULL;
    kt->size[t] = kt->used[t] = kt->tomb[t] = 0;
    kt->bits[t] = 0;
}

void keytab_clear(keytab *kt, void (*free_item)(void *item, void *ud), void *ud)
{
    for (int t = 0; t < 2; t++) {
        if (free_item)
            for (size_t i = 0; i < kt->size[t]; i++)
                if (kt->slot[t][i] > KEYTAB_TOMB)
                    free_item(keytab_item(kt->slot[t][i]), ud);
        slots_free(kt->slot[t], kt->size[t]);
        reset_table(kt, t);
    }
    kt->moved = -1;
}

static uint64_t *find_slot(keytab *kt, int t, const char *key, size_t len, uint64_t h)
{
    return keytab_probe(kt, t, key, len, h, kt->key);
}

static uint64_t *find_item_slot(keytab *kt, const void *item, uint64_t h, int *table)
{
    uint64_t want = keytab_tag(h) | (uint64_t)(uintptr_t)item;
    for (int t = 0; t < 2 && kt->size[t]; t++) {
        uint64_t *s = kt->slot[t];
        size_t mask = kt->size[t] - 1;
        size_t i = keytab_probe_start(kt, t, keytab_home(kt, t, h));
        for (; s[i] != KEYTAB_EMPTY; i = (i + 1) & mask) {
            if (s[i] == want) {
                *table = t;
                return &s[i];
            }
        }
    }
    return NULL;
}

/* Places item in table t at the first free slot from its home (t is the
 * new table while resizing, so no moved part to skip). */
static void insert_at(keytab *kt, int t, void *item, uint64_t h)
{
    uint64_t *s = kt->slot[t];
    size_t mask = kt->size[t] - 1;
    for (size_t i = keytab_home(kt, t, h);; i = (i + 1) & mask) {
        if (s[i] <= KEYTAB_TOMB) {
            if (s[i] == KEYTAB_TOMB)
                kt->tomb[t]--;
            s[i] = keytab_tag(h) | (uint64_t)(uintptr_t)item;
            kt->used[t]++;
            return;
        }
    }
}

/* Empties slot p of table t: a tombstone if the next slot is taken (a probe
 * may pass here), else empty, and then the tombstones just before it can be
 * emptied as well. */
static void erase_slot(keytab *kt, int t, uint64_t *p)
{
    uint64_t *s = kt->slot[t];
    size_t mask = kt->size[t] - 1;
    size_t i = (size_t)(p - s);
    kt->used[t]--;
    if (s[(i + 1) & mask] != KEYTAB_EMPTY) {
        s[i] = KEYTAB_TOMB;
        kt->tomb[t]++;
        return;
    }
    s[i] = KEYTAB_EMPTY;
    for (size_t j = (i - 1) & mask; s[j] == KEYTAB_TOMB; j = (j - 1) & mask) {
        s[j] = KEYTAB_EMPTY;
        kt->tomb[t]--;
    }
}

static size_t size_for(size_t n)
{
    size_t size = MIN_SIZE;
    while (size < n * 2)
        size <<= 1;
    return size;
}

static uint8_t log2_of(size_t size)
{
    uint8_t b = 0;
    while (((size_t)1 << b) < size)
        b++;
    return b;
}

/* Allocates a table sized for n items: the only one when kt is empty, else
 * the target of an incremental move. */
static void start_resize(keytab *kt, size_t n)
{
    size_t size = size_for(n);
    int t = kt->size[0] ? 1 : 0;
    kt->slot[t] = slots_alloc(size);
    kt->size[t] = size;
    kt->bits[t] = log2_of(size);
    kt->used[t] = kt->tomb[t] = 0;
    if (t == 0)
        return;
    /* The old table always has an empty slot (at most 7/8 is in use). */
    size_t i = 0;
    while (kt->slot[0][i] != KEYTAB_EMPTY)
        i++;
    kt->move_from = i;
    kt->moved = 0;
}

static void finish_resize(keytab *kt)
{
    slots_free(kt->slot[0], kt->size[0]);
    kt->slot[0] = kt->slot[1];
    kt->size[0] = kt->size[1];
    kt->used[0] = kt->used[1];
    kt->tomb[0] = kt->tomb[1];
    kt->bits[0] = kt->bits[1];
    reset_table(kt, 1);
    kt->moved = -1;
}

int keytab_rehash(keytab *kt, size_t n)
{
    if (kt->moved < 0)
        return 0;
    uint64_t *s = kt->slot[0];
    size_t mask = kt->size[0] - 1;
    while (n-- && kt->used[0] > 0) {
        size_t i = (kt->move_from + (size_t)kt->moved) & mask;
        uint64_t w = s[i];
        if (w > KEYTAB_TOMB) {
            void *item = keytab_item(w);
            insert_at(kt, 1, item, item_hash(kt, item));
            kt->used[0]--;
        } else if (w == KEYTAB_TOMB) {
            kt->tomb[0]--;
        }
        s[i] = KEYTAB_EMPTY;
        kt->moved++;
    }
    if (kt->used[0] == 0) {
        finish_resize(kt);
        return 0;
    }
    return 1;
}

static inline void step(keytab *kt)
{
    if (kt->moved >= 0 && kt->pause == 0)
        keytab_rehash(kt, KEYTAB_STEP_SLOTS);
}

static inline int over_full(const keytab *kt, int t)
{
    return (kt->used[t] + kt->tomb[t] + 1) * 8 > kt->size[t] * 7;
}

/* Makes sure the next insert leaves the table it goes to at most 7/8 full. */
static void make_room(keytab *kt)
{
    if (kt->size[0] == 0) {
        start_resize(kt, MIN_SIZE / 2);
        return;
    }
    if (kt->moved < 0) {
        if (over_full(kt, 0))
            start_resize(kt, kt->used[0] + 1);
        return;
    }
    if (!over_full(kt, 1))
        return;
    if (!kt->pause) {
        /* Inserts outran the move: finish it now, then grow again. */
        keytab_rehash(kt, SIZE_MAX);
        make_room(kt);
        return;
    }
    if (kt->used[1] + kt->tomb[1] + 2 > kt->size[1]) {
        fprintf(stderr, "brisk-kv: key table full while an iterator runs\n");
        abort();
    }
}

void *keytab_find(keytab *kt, const char *key, size_t len, uint64_t hash)
{
    return keytab_lookup(kt, key, len, hash, kt->key);
}

void keytab_add(keytab *kt, void *item, uint64_t hash)
{
    if ((uintptr_t)item & ~(uintptr_t)KEYTAB_PTR_MASK) {
        fprintf(stderr, "brisk-kv: pointer %p does not fit in 48 bits\n", item);
        abort();
    }
    step(kt);
    make_room(kt);
    insert_at(kt, kt->moved >= 0 ? 1 : 0, item, hash);
}

void *keytab_remove(keytab *kt, const char *key, size_t len, uint64_t hash)
{
    if (keytab_size(kt) == 0)
        return NULL;
    step(kt);
    for (int t = 0; t < 2 && kt->size[t]; t++) {
        uint64_t *p = find_slot(kt, t, key, len, hash);
        if (p) {
            void *item = keytab_item(*p);
            erase_slot(kt, t, p);
            return item;
        }
    }
    return NULL;
}

void keytab_remove_item(keytab *kt, void *item, uint64_t hash)
{
    int t;
    uint64_t *p = find_item_slot(kt, item, hash, &t);
    if (p)
        erase_slot(kt, t, p);
}

void keytab_replace(keytab *kt, void *old_item, void *new_item, uint64_t hash)
{
    int t;
    uint64_t *p = find_item_slot(kt, old_item, hash, &t);
    if (p)
        *p = keytab_tag(hash) | (uint64_t)(uintptr_t)new_item;
}

void *keytab_random(keytab *kt)
{
    if (keytab_size(kt) == 0)
        return NULL;
    step(kt);
    size_t total = kt->size[0] + kt->size[1];
    for (int tries = 0; tries < 64; tries++) {
        size_t r = (size_t)(kv_rand64() % total);
        uint64_t w = r < kt->size[0] ? kt->slot[0][r] : kt->slot[1][r - kt->size[0]];
        if (w > KEYTAB_TOMB)
            return keytab_item(w);
    }
    /* Sparse (many deletions since the last resize): the k-th item for a
     * uniform k. Walking from a random slot to the next item instead would
     * favour the items that follow long empty runs. */
    size_t k = (size_t)(kv_rand64() % keytab_size(kt));
    for (size_t i = 0; i < total; i++) {
        uint64_t w = i < kt->size[0] ? kt->slot[0][i] : kt->slot[1][i - kt->size[0]];
        if (w > KEYTAB_TOMB && k-- == 0)
            return keytab_item(w);
    }
    return NULL;
}

/* Reports the items of table t whose home is g: they sit in the run that
 * starts there (items never have an empty slot between home and them). */
static void emit_home(keytab *kt, int t, size_t g, void (*fn)(void *, void *), void *ud)
{
    uint64_t *s = kt->slot[t];
    size_t mask = kt->size[t] - 1;
    for (size_t i = keytab_probe_start(kt, t, g); s[i] != KEYTAB_EMPTY; i = (i + 1) & mask) {
        if (s[i] == KEYTAB_TOMB)
            continue;
        void *item = keytab_item(s[i]);
        if (keytab_home(kt, t, item_hash(kt, item)) == g)
            fn(ud, item);
    }
}

uint64_t keytab_scan(keytab *kt, uint64_t cursor, void (*fn)(void *ud, void *item), void *ud)
{
    if (keytab_size(kt) == 0)
        return 0;
    kt->pause++;
    /* Visit the home of the cursor in the smaller table and every home of
     * the larger one that the same hash range covers. */
    int small = 0, large = 0;
    if (kt->moved >= 0)
        small = kt->bits[0] <= kt->bits[1] ? 0 : 1, large = 1 - small;
    unsigned bs = kt->bits[small], bl = kt->bits[large];
    size_t g = (size_t)(cursor >> (64 - bs));
    emit_home(kt, small, g, fn, ud);
    if (large != small) {
        size_t first = g << (bl - bs), last = ((g + 1) << (bl - bs)) - 1;
        for (size_t h = first; h <= last; h++)
            emit_home(kt, large, h, fn, ud);
    }
    kt->pause--;
    if (g + 1 == kt->size[small])
        return 0;
    return (uint64_t)(g + 1) << (64 - bs);
}

void keytab_tidy(keytab *kt)
{
    if (kt->moved >= 0 || kt->pause || kt->size[0] == 0)
        return;
    if ((kt->size[0] > MIN_SIZE && kt->used[0] * 8 < kt->size[0]) || kt->tomb[0] * 4 > kt->size[0])
        start_resize(kt, kt->used[0]);
}

void keytab_expand(keytab *kt, size_t n)
{
    if (kt->moved >= 0 || n * 8 <= kt->size[0] * 7)
        return;
    start_resize(kt, n);
}

void keytab_iter_init(keytab_iter *it, keytab *kt)
{
    it->kt = kt;
    it->table = 0;
    it->idx = 0;
    kt->pause++;
}

void *keytab_iter_next(keytab_iter *it)
{
    keytab *kt = it->kt;
    while (it->table < 2) {
        if (it->idx >= kt->size[it->table]) {
            it->table++;
            it->idx = 0;
            continue;
        }
        uint64_t w = kt->slot[it->table][it->idx++];
        if (w > KEYTAB_TOMB)
            return keytab_item(w);
    }
    return NULL;
}

void keytab_iter_end(keytab_iter *it)
{
    it->kt->pause--;
}
