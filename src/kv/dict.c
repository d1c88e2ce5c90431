#include "kv/dict.h"

#include "kv/mem.h"
#include "kv/util.h"

#include <assert.h>
#include <string.h>

static uint64_t seed0 = 0x243f6a8885a308d3ull, seed1 = 0x13198a2e03707344ull;

void dict_set_seed(uint64_t s0, uint64_t s1)
{
    seed0 = s0;
    seed1 = s1;
}

static inline uint64_t mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* A multiply-mix hash: 16 bytes per round, seeded per process. */
uint64_t dict_hash(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = seed0 ^ mix(len ^ 0xa0761d6478bd642full, seed1 ^ 0xe7037ed1a0b428dbull);
    size_t n = len;
    while (n >= 16) {
        h = mix(rd64(p) ^ seed1 ^ 0x8ebc6af09c88c6e3ull, rd64(p + 8) ^ h);
        p += 16;
        n -= 16;
    }
    uint64_t a = 0, b = 0;
    if (n >= 8) {
        a = rd64(p);
        if (n > 8) {
            memcpy(&b, p + n - 8, 8);
        }
    } else if (n > 0) {
        memcpy(&a, p, n);
    }
    h = mix(a ^ seed1 ^ 0x589965cc75374cc3ull, b ^ h);
    return mix(h ^ len, 0x1d8e4e27c47d124full ^ seed0);
}

void dict_init(dict *d, dict_key_fn key)
{
    memset(d, 0, sizeof *d);
    d->rehashidx = -1;
    d->key = key;
}

static void reset_table(dict *d, int t)
{
    d->tab[t] = NULL;
    d->size[t] = 0;
    d->used[t] = 0;
}

void dict_clear(dict *d, void (*free_node)(dict_node *n, void *ud), void *ud)
{
    for (int t = 0; t < 2; t++) {
        if (free_node) {
            for (size_t i = 0; i < d->size[t]; i++) {
                dict_node *n = d->tab[t][i];
                while (n) {
                    dict_node *next = n->next;
                    free_node(n, ud);
                    n = next;
                }
            }
        }
        kv_free(d->tab[t]);
        reset_table(d, t);
    }
    d->rehashidx = -1;
}

size_t dict_buckets(const dict *d)
{
    return d->size[0] + d->size[1];
}

size_t dict_chain_stats(const dict *d, int t, size_t *maxchain, size_t *hist, size_t nhist)
{
    assert(nhist > 0);
    size_t slots = 0;
    *maxchain = 0;
    memset(hist, 0, nhist * sizeof *hist);
    for (size_t i = 0; i < d->size[t]; i++) {
        size_t len = 0;
        for (const dict_node *n = d->tab[t][i]; n; n = n->next)
            len++;
        hist[len < nhist ? len : nhist - 1]++;
        slots += len > 0;
        if (len > *maxchain)
            *maxchain = len;
    }
    return slots;
}

static void start_resize(dict *d, size_t want)
{
    size_t size = 4;
    while (size < want)
        size <<= 1;
    if (size == d->size[0])
        return;
    dict_node **tab = kv_calloc(size * sizeof *tab);
    if (d->size[0] == 0) {
        d->tab[0] = tab;
        d->size[0] = size;
        return;
    }
    d->tab[1] = tab;
    d->size[1] = size;
    d->used[1] = 0;
    d->rehashidx = 0;
}

int dict_rehash(dict *d, int n)
{
    if (d->rehashidx < 0)
        return 0;
    int empty_visits = n * 10;
    size_t mask1 = d->size[1] - 1;
    while (n-- && d->used[0]) {
        while (d->tab[0][d->rehashidx] == NULL) {
            d->rehashidx++;
            if (--empty_visits == 0)
                return 1;
        }
        dict_node *e = d->tab[0][d->rehashidx];
        while (e) {
            dict_node *next = e->next;
            size_t idx = e->hash & mask1;
            e->next = d->tab[1][idx];
            d->tab[1][idx] = e;
            d->used[0]--;
            d->used[1]++;
            e = next;
        }
        d->tab[0][d->rehashidx] = NULL;
        d->rehashidx++;
    }
    if (d->used[0] == 0) {
        kv_free(d->tab[0]);
        d->tab[0] = d->tab[1];
        d->size[0] = d->size[1];
        d->used[0] = d->used[1];
        reset_table(d, 1);
        d->rehashidx = -1;
        return 0;
    }
    return 1;
}

static inline void step(dict *d)
{
    if (d->rehashidx >= 0 && d->pause == 0)
        dict_rehash(d, 1);
}

void dict_expand(dict *d, size_t n)
{
    if (d->rehashidx >= 0 || n <= d->size[0])
        return;
    start_resize(d, n);
}

void dict_shrink_if_sparse(dict *d)
{
    if (d->rehashidx >= 0 || d->pause || d->size[0] <= 4)
        return;
    size_t used = d->used[0];
    if (used * 100 / d->size[0] < 10)
        start_resize(d, used < 4 ? 4 : used);
}

dict_node *dict_find(dict *d, const char *key, size_t len, uint32_t hash)
{
    if (dict_size(d) == 0)
        return NULL;
    step(d);
    for (int t = 0; t < 2; t++) {
        if (d->size[t] == 0)
            break;
        size_t idx = hash & (d->size[t] - 1);
        if (t == 0 && d->rehashidx >= 0 && (long long)idx < d->rehashidx)
            continue; /* already moved */
        for (dict_node *n = d->tab[t][idx]; n; n = n->next) {
            if (n->hash != hash)
                continue;
            bk_str k = d->key(n);
            if (k.len == len && memcmp(k.p, key, len) == 0)
                return n;
        }
        if (d->rehashidx < 0)
            break;
    }
    return NULL;
}

void dict_add(dict *d, dict_node *n)
{
    step(d);
    if (d->size[0] == 0)
        start_resize(d, 4);
    else if (d->rehashidx < 0 && d->used[0] >= d->size[0])
        start_resize(d, d->used[0] * 2);
    int t = d->rehashidx >= 0 ? 1 : 0;
    size_t idx = n->hash & (d->size[t] - 1);
    n->next = d->tab[t][idx];
    d->tab[t][idx] = n;
    d->used[t]++;
}

/* Finds the link pointing at a node that satisfies the match. */
static dict_node **find_link(dict *d, uint32_t hash, const char *key, size_t len,
                             const dict_node *target, int *table)
{
    for (int t = 0; t < 2; t++) {
        if (d->size[t] == 0)
            break;
        size_t idx = hash & (d->size[t] - 1);
        if (t == 0 && d->rehashidx >= 0 && (long long)idx < d->rehashidx)
            continue;
        for (dict_node **link = &d->tab[t][idx]; *link; link = &(*link)->next) {
            dict_node *n = *link;
            if (target) {
                if (n == target) {
                    *table = t;
                    return link;
                }
                continue;
            }
            if (n->hash != hash)
                continue;
            bk_str k = d->key(n);
            if (k.len == len && memcmp(k.p, key, len) == 0) {
                *table = t;
                return link;
            }
        }
        if (d->rehashidx < 0)
            break;
    }
    return NULL;
}

dict_node *dict_unlink(dict *d, const char *key, size_t len, uint32_t hash)
{
    if (dict_size(d) == 0)
        return NULL;
    step(d);
    int t;
    dict_node **link = find_link(d, hash, key, len, NULL, &t);
    if (!link)
        return NULL;
    dict_node *n = *link;
    *link = n->next;
    d->used[t]--;
    return n;
}

void dict_unlink_node(dict *d, dict_node *n)
{
    int t;
    dict_node **link = find_link(d, n->hash, NULL, 0, n, &t);
    if (!link)
        return;
    *link = n->next;
    d->used[t]--;
}

void dict_relink(dict *d, dict_node *old_n, dict_node *new_n)
{
    int t;
    dict_node **link = find_link(d, new_n->hash, NULL, 0, old_n, &t);
    if (link) {
        new_n->next = old_n->next;
        *link = new_n;
    }
}

/* Uniform: a bucket is drawn among the non-empty ones, then a position in
 * [0, bound); a position past the chain's end draws again. Every node has
 * the same chance as long as no chain is longer than bound, so a longer
 * chain raises the bound (at load <= 1 chains past 8 are very rare). Picking
 * a node of the drawn chain directly would favour short chains. */
dict_node *dict_random(dict *d)
{
    size_t total = dict_size(d);
    if (total == 0)
        return NULL;
    step(d);
    size_t bound = 8;
    for (;;) {
        dict_node *head = NULL;
        if (d->rehashidx >= 0) {
            size_t s0 = d->size[0], s1 = d->size[1];
            size_t lo = (size_t)d->rehashidx;
            while (!head) {
                size_t r = lo + kv_rand64() % (s0 + s1 - lo);
                head = r >= s0 ? d->tab[1][r - s0] : d->tab[0][r];
            }
        } else {
            size_t mask = d->size[0] - 1;
            while (!head)
                head = d->tab[0][kv_rand64() & mask];
        }
        size_t len = 0;
        for (dict_node *n = head; n; n = n->next)
            len++;
        if (len > bound) {
            bound = len;
            continue;
        }
        size_t pick = kv_rand64() % bound;
        if (pick >= len)
            continue;
        while (pick--)
            head = head->next;
        return head;
    }
}

static size_t rev_bits(size_t v)
{
    size_t s = 8 * sizeof v, mask = ~(size_t)0;
    while ((s >>= 1) > 0) {
        mask ^= mask << s;
        v = ((v >> s) & mask) | ((v << s) & ~mask);
    }
    return v;
}

static void emit_bucket(dict_node *n, void (*fn)(void *, dict_node *), void *ud)
{
    while (n) {
        dict_node *next = n->next;
        fn(ud, n);
        n = next;
    }
}

size_t dict_scan(dict *d, size_t v, void (*fn)(void *ud, dict_node *n), void *ud)
{
    if (dict_size(d) == 0)
        return 0;
    d->pause++;
    if (d->rehashidx < 0) {
        size_t m0 = d->size[0] - 1;
        emit_bucket(d->tab[0][v & m0], fn, ud);
        v |= ~m0;
        v = rev_bits(v);
        v++;
        v = rev_bits(v);
    } else {
        int small = d->size[0] <= d->size[1] ? 0 : 1, large = 1 - small;
        size_t m0 = d->size[small] - 1, m1 = d->size[large] - 1;
        emit_bucket(d->tab[small][v & m0], fn, ud);
        do {
            emit_bucket(d->tab[large][v & m1], fn, ud);
            v |= ~m1;
            v = rev_bits(v);
            v++;
            v = rev_bits(v);
        } while (v & (m0 ^ m1));
    }
    d->pause--;
    return v;
}

void dict_iter_init(dict_iter *it, dict *d)
{
    it->d = d;
    it->table = 0;
    it->idx = 0;
    it->next = NULL;
    d->pause++;
}

dict_node *dict_iter_next(dict_iter *it)
{
    dict *d = it->d;
    for (;;) {
        if (it->next) {
            dict_node *n = it->next;
            it->next = n->next;
            return n;
        }
        if (it->table > 1)
            return NULL;
        if (it->idx >= d->size[it->table]) {
            it->table++;
            it->idx = 0;
            if (it->table > 1)
                return NULL;
            continue;
        }
        it->next = d->tab[it->table][it->idx++];
    }
}

void dict_iter_end(dict_iter *it)
{
    it->d->pause--;
}

dict *dict_new_owned(dict_key_fn key)
{
    dict *d = kv_malloc(sizeof *d);
    dict_init(d, key);
    return d;
}

static void free_owned_node(dict_node *n, void *ud)
{
    kv_free(n);
}

void dict_clear_owned(dict *d)
{
    dict_clear(d, free_owned_node, NULL);
}

void dict_free_owned(dict *d)
{
    dict_clear_owned(d);
    kv_free(d);
}
