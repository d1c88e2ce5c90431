/* Client eviction (maxmemory-clients, CLIENT NO-EVICT) as Redis 7.0 does it:
 * when the memory of the normal and pubsub clients together passes the
 * limit, the largest evictable clients are closed first until it is back
 * under. Replicas, masters, MONITORs and CLIENT NO-EVICT clients are never
 * evicted; no-evict clients still count toward the total (as in Redis).
 *
 * The check runs once per loop iteration, after replies were written (what
 * the socket took no longer counts) and before closed clients are freed, and
 * only when maxmemory-clients is set: a disabled limit costs one flag test.
 *
 * oom-score-adj lives here too: the other knob of how the server behaves
 * when the machine runs short of memory. */
#include "core/log.h"
#include "kv/mem.h"
#include "kv/pubsub.h"
#include "kv/types.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int kv_cevict_on;
uint64_t kv_cevict_total;
static uint64_t limit_bytes;
static int limit_pct = -1;

static int counted(const kv_client *c);

void kv_cevict_update(kv_client *c)
{
    size_t m = counted(c) ? kv_client_mem(c) : 0;
    kv_cevict_total += m - c->cev_mem; /* (modular: a shrink subtracts) */
    c->cev_mem = m;
}

void kv_cevict_config(uint64_t bytes, int pct)
{
    limit_bytes = pct >= 0 ? 0 : bytes;
    limit_pct = pct;
    kv_cevict_on = pct > 0 || (pct < 0 && bytes > 0);
    /* Turned on: every client counts from now; off: the total is dropped. */
    kv_cevict_total = 0;
    for (kv_client *c = srv.clients; c; c = c->next) {
        c->cev_mem = 0;
        if (kv_cevict_on)
            kv_cevict_update(c);
    }
}

/* The limit in bytes, 0 = off. Never under 128 KiB (as Redis): a tiny value
 * must not cut off every client, the one that could raise it included. */
static uint64_t current_limit(void)
{
    uint64_t v = limit_bytes;
    if (limit_pct >= 0) /* a percentage of maxmemory: none while maxmemory is 0 */
        v = (uint64_t)((double)srv.cfg.maxmemory * limit_pct / 100);
    if (!v)
        return 0;
    return v < 128 * 1024 ? 128 * 1024 : v;
}

/* What one subscription, WATCHed key or tracking prefix costs beyond the
 * pointer arrays counted by capacity: the entry in the shared object's list
 * of clients and its share of the object (close to Redis's list node plus
 * entry). They make a client subscribing without end reach the limit. */
enum { ITEM_COST = 48 };

size_t kv_client_qbuf(const kv_client *c)
{
    size_t pos = c->parser.pos;
    if (c == srv.cl_running || !c->parser.kind || pos > c->rbuf.len)
        return c->rbuf.len;
    return c->rbuf.len - pos;
}

size_t kv_client_pending_argv(const kv_client *c)
{
    size_t n = 0;
    if (c == srv.cl_running || !c->parser.kind)
        return 0;
    for (size_t i = 0; i < c->parser.nargs; i++)
        n += c->parser.args[i].len;
    return n;
}

size_t kv_client_mem(const kv_client *c)
{
    size_t m = sizeof *c + c->wbuf.cap + c->prop_buf.cap;
    /* The query buffer: what it holds, or what the bulk being read has
     * announced, which the next read allocates (Redis allocates it on
     * parsing "$N"): a client announcing a huge argument counts at once. */
    size_t q = c->rbuf.cap, want = resp_parser_want(&c->parser, c->rbuf.len);
    if (want && c->rbuf.len + want > q)
        q = c->rbuf.len + want;
    m += q;
    m += c->argv_cap * sizeof(bk_str) + c->parser.cap * sizeof(resp_arg) +
         (size_t)c->prop_cap * sizeof(bk_str);
    if (c->mcount)
        m += c->cev_multi + (size_t)c->mcap * sizeof(kv_mcmd);
    m += (size_t)c->watched_cap * sizeof(void *) + (size_t)c->nwatched * ITEM_COST;
    if (c->subs) {
        const kv_subs *s = c->subs;
        m += sizeof *s + (size_t)(s->chcap + s->patcap + s->schcap) * sizeof(void *) +
             (size_t)(s->nch + s->npat + s->nsch) * ITEM_COST;
    }
    m += (size_t)c->trk_prefixes_cap * sizeof(void *) + (size_t)c->trk_nprefixes * ITEM_COST;
    return m;
}

typedef struct {
    kv_client *c;
    size_t mem;
} cand;

static int by_mem_desc(const void *a, const void *b)
{
    size_t x = ((const cand *)a)->mem, y = ((const cand *)b)->mem;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int counted(const kv_client *c)
{
    /* closing anyway (an output buffer limit): not evicted, not counted */
    return !(c->flags & (CLIENT_CLOSED | CLIENT_CLOSE_ASAP | CLIENT_FAKE)) && !c->repl_flags &&
           !(c->cl_flags & CL_MONITOR);
}

void kv_cevict_run(void)
{
    uint64_t limit = current_limit();
    if (!limit || kv_cevict_total <= limit)
        return;
    /* Over: account every client afresh (some were last seen before their
     * latest output), then close the largest evictable ones first (Redis's
     * buckets give the same order between sizes twice apart). */
    int n = 0;
    for (kv_client *c = srv.clients; c; c = c->next) {
        kv_cevict_update(c);
        n += c->cev_mem && !(c->cl_flags & CL_NO_EVICT) && c != srv.cl_running;
    }
    if (kv_cevict_total <= limit || n == 0)
        return;
    cand *v = kv_malloc((size_t)n * sizeof *v);
    int k = 0;
    for (kv_client *c = srv.clients; c && k < n; c = c->next)
        if (c->cev_mem && !(c->cl_flags & CL_NO_EVICT) && c != srv.cl_running)
            v[k++] = (cand){ c, c->cev_mem };
    qsort(v, (size_t)k, sizeof *v, by_mem_desc);
    for (int i = 0; i < k && kv_cevict_total > limit; i++) {
        log_info("client id=%llu addr=%s evicted: clients use %llu bytes, maxmemory-clients is "
                 "%llu",
                 (unsigned long long)v[i].c->id, v[i].c->addr,
                 (unsigned long long)kv_cevict_total, (unsigned long long)limit);
        srv.stat_evicted_clients++;
        kv_client_close(v[i].c); /* takes its memory out of the total */
    }
    kv_free(v);
}

/* ---- oom-score-adj ---- */

/* The oom_score_adj the process had before the server changed it: relative
 * values add to it, and turning the option off restores it. -1001 = not
 * read yet (the kernel's range is -1000..1000). */
static int oom_base = -1001;

static int read_oom(int *out)
{
    char b[32];
    int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0)
        return -1;
    b[n] = '\0';
    *out = atoi(b);
    return 0;
}

static int write_oom(int v)
{
    char b[16];
    int len = snprintf(b, sizeof b, "%d\n", v);
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, b, (size_t)len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == len ? 0 : -1;
}

/* Sets the score for role from the config ("no" restores the score from
 * before). -1 with errno when the kernel refuses (lowering the score needs
 * CAP_SYS_RESOURCE). */
int kv_oom_apply(int role)
{
    const char *mode = kv_config_noop_str("oom-score-adj");
    const char *vals = kv_config_noop_str("oom-score-adj-values");
    if (!mode || !vals)
        return 0;
    if (strcasecmp(mode, "no") == 0) {
        if (oom_base == -1001)
            return 0; /* never changed: nothing to restore */
        int base = oom_base;
        oom_base = -1001; /* read afresh when turned on again */
        return write_oom(base);
    }
    if (oom_base == -1001 && read_oom(&oom_base) < 0)
        return -1;
    long x[3] = { 0, 0, 0 };
    char *end = (char *)vals;
    for (int i = 0; i < 3; i++)
        x[i] = strtol(end, &end, 10);
    long v = x[role];
    if (strcasecmp(mode, "absolute") != 0)
        v += oom_base; /* yes = relative */
    v = v < -1000 ? -1000 : v > 1000 ? 1000 : v;
    int cur;
    if (read_oom(&cur) == 0 && cur == v)
        return 0;
    return write_oom((int)v);
}
