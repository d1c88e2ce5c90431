/* The COUNT argument of the random-member commands (SRANDMEMBER,
 * HRANDFIELD, ZRANDMEMBER) and a uniform picker for their negative counts
 * (draws with replacement). */
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>

/* A negative count asks for |count| elements whatever the collection's
 * size: the reply is built in memory before it is sent, so beyond this many
 * elements (a reply of gigabytes) the command is refused, where Redis would
 * grow its output buffer until the machine runs out. */
#define RAND_MAX_DRAWS (1LL << 26)

int arg_rand_count(kv_client *c, str s, long long *count)
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
    if (count < -RAND_MAX_DRAWS) {
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
