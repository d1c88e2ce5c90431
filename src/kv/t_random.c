/* What the random-member commands (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER)
 * share: the range checks of their COUNT, a uniform picker for negative
 * counts (draws with replacement) and distinct picks for small positive
 * counts (without copying the collection). */
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <assert.h>
#include <limits.h>

/* A negative count asks for |count| elements whatever the collection's
 * size: the reply is built in memory before it is sent, so beyond this many
 * elements (a reply of gigabytes) the command is refused, where Redis would
 * grow its output buffer until the machine runs out, unless a hard output
 * buffer limit of at most RAND_OBUF_MAX stops it soon: then it runs until
 * the limit closes the client, as in Redis (brisk-kv's default limit for
 * normal clients, 512 MB, is too much to buffer for one command). */
#define RAND_MAX_DRAWS (1LL << 26)
#define RAND_OBUF_MAX (64ull * 1024 * 1024)

int arg_rand_count(kv_client *c, bk_str s, long long *count)
{
    long long v;
    if (arg_ll(c, s, &v) < 0)
        return -1;
    if (v == LLONG_MIN) {
        reply_errorf(c, "ERR value is out of range, value must between %lld and %lld",
                     -LLONG_MAX, LLONG_MAX);
        return -1;
    }
    *count = v;
    return 0;
}

int rand_pairs_check(kv_client *c, long long count)
{
    if (count < -(LLONG_MAX / 2) || count > LLONG_MAX / 2) {
        reply_error(c, "ERR value is out of range");
        return -1;
    }
    return 0;
}

int rand_draws_check(kv_client *c, long long count)
{
    uint64_t hard = kv_client_obuf_hard(c);
    if (count < -RAND_MAX_DRAWS && (hard == 0 || hard > RAND_OBUF_MAX)) {
        reply_error(c, "ERR value is out of range");
        return -1;
    }
    return 0;
}

void rand_picker_init(rand_picker *p, dict *d, unsigned long long draws)
{
    size_t size = dict_size(d);
    p->d = d;
    p->all = NULL;
    p->n = 0;
    /* Many draws from a small collection: index an array of the nodes
     * (exactly uniform, no rejected draws). Few draws: dict_random. */
    if (draws >= size / 4) {
        p->all = kv_malloc(size * sizeof *p->all);
        dict_iter it;
        dict_iter_init(&it, d);
        for (dict_node *n; (n = dict_iter_next(&it));)
            p->all[p->n++] = n;
        dict_iter_end(&it);
    }
}

dict_node *rand_picker_next(rand_picker *p)
{
    if (p->all)
        return p->all[kv_rand64() % p->n];
    return dict_random(p->d);
}

void rand_picker_end(rand_picker *p)
{
    kv_free(p->all);
    p->all = NULL;
}

/* Values already picked, open addressing (0 marks a free slot, so values
 * are stored + 1). Sized for at most half full. */
typedef struct {
    uint64_t *slot;
    size_t mask;
} picked_set;

static void picked_init(picked_set *s, size_t count)
{
    size_t cap = 8;
    while (cap < 2 * count)
        cap <<= 1;
    s->slot = kv_calloc(cap * sizeof *s->slot);
    s->mask = cap - 1;
}

/* Returns 1 when v was not picked yet (and records it). */
static int picked_add(picked_set *s, uint64_t v)
{
    uint64_t key = v + 1;
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & s->mask;
    while (s->slot[i]) {
        if (s->slot[i] == key)
            return 0;
        i = (i + 1) & s->mask;
    }
    s->slot[i] = key;
    return 1;
}

void rand_distinct_nodes(dict *d, dict_node **out, size_t count)
{
    assert(count * 3 <= dict_size(d));
    picked_set seen;
    picked_init(&seen, count);
    for (size_t n = 0; n < count;) {
        dict_node *x = dict_random(d);
        if (picked_add(&seen, (uint64_t)(uintptr_t)x))
            out[n++] = x;
    }
    kv_free(seen.slot);
}

/* Floyd's sampling: exactly count draws, each subset equally likely. */
void rand_distinct_ranks(size_t size, size_t *out, size_t count)
{
    assert(count <= size);
    picked_set seen;
    picked_init(&seen, count);
    size_t n = 0;
    for (size_t j = size - count; j < size; j++) {
        size_t t = (size_t)(kv_rand64() % (j + 1));
        out[n++] = (picked_add(&seen, t) ? t : (picked_add(&seen, j), j)) + 1;
    }
    kv_free(seen.slot);
}
