/* Client-side caching support (CLIENT TRACKING), as Redis 7.0 does it.
 *
 * Default mode: after a read-only command of a tracking client, its keys
 * go in srv.trk_keys (key name -> ids of the clients that read it; the
 * table ignores the db, as Redis's does). When the key changes
 * (kv_touch_key) every such client gets one invalidation message and the
 * key leaves the table: a client must read it again to hear of the next
 * change. Ids, not pointers, so a client that turns tracking off or goes
 * away needs no cleanup of the table (stale ids are skipped).
 *
 * BCAST mode: srv.trk_prefix_d holds the prefixes clients asked for;
 * each changed key is queued on the prefixes it starts with (found by one
 * lookup per distinct prefix length, not a scan of every prefix), and at
 * the end of the loop batch every subscriber gets one message per prefix.
 *
 * Messages are RESP3 pushes (">2 invalidate [keys]"), or, when redirected
 * to a RESP2 client subscribed to anything, a Pub/Sub message of the
 * __redis__:invalidate channel. A message for the client whose command is
 * running is kept in srv.trk_self and written after its reply. */
#include "kv/config.h"
#include "kv/mem.h"
#include "kv/pubsub.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct kv_trk_prefix {
    dict_node node; /* aux = prefix length */
    kv_client **clients;
    int n, cap;
    int pending; /* in srv.trk_pending */
    bk_buf keys;    /* queued changes: [u64 id of the client that made it][u32 len][key] */
    char data[];
} kv_trk_prefix;

bk_str tracking_prefix_str(const kv_trk_prefix *p)
{
    return (bk_str){ p->data, p->node.aux };
}

static bk_str prefix_key_fn(const dict_node *n)
{
    return tracking_prefix_str((const kv_trk_prefix *)(const void *)n);
}

typedef struct kv_trk_key {
    dict_node node; /* aux = key length */
    uint64_t *ids;
    int n, cap;
    char key[];
} kv_trk_key;

static bk_str trk_key_fn(const dict_node *n)
{
    const kv_trk_key *k = (const kv_trk_key *)(const void *)n;
    return (bk_str){ k->key, n->aux };
}

void tracking_init(void)
{
    dict_init(&srv.trk_keys, trk_key_fn);
    dict_init(&srv.trk_prefix_d, prefix_key_fn);
}

static void free_prefix_node(dict_node *n, void *ud)
{
    (void)ud;
    kv_trk_prefix *x = (kv_trk_prefix *)(void *)n;
    kv_free(x->clients);
    buf_free(&x->keys);
    kv_free(x);
}

static void free_key_node(dict_node *n, void *ud)
{
    (void)ud;
    kv_trk_key *k = (kv_trk_key *)(void *)n;
    kv_free(k->ids);
    kv_free(k);
}

void tracking_free(void)
{
    dict_clear(&srv.trk_keys, free_key_node, NULL);
    dict_clear(&srv.trk_prefix_d, free_prefix_node, NULL);
    kv_free(srv.trk_plens);
    kv_free(srv.trk_plen_refs);
    kv_free(srv.trk_pending);
    kv_free(srv.trk_clients);
    buf_free(&srv.trk_self);
}

/* ---- messages ---- */

static void put_bulk(bk_buf *b, bk_str s)
{
    char h[32];
    int n = snprintf(h, sizeof h, "$%zu\r\n", s.len);
    buf_append(b, h, (size_t)n);
    buf_append(b, s.p, s.len);
    buf_append(b, "\r\n", 2);
}

/* Formats the message for target into b; 0 when target cannot receive
 * one (RESP2 and not redirected to a subscribed connection). keys NULL:
 * the flush message (a null). */
static int format_msg(bk_buf *b, const kv_client *target, int redirected, const bk_str *keys, int n)
{
    static const char push[] = ">2\r\n$10\r\ninvalidate\r\n";
    static const char msg[] = "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n";
    if (target->resp >= 3)
        buf_append(b, push, sizeof push - 1);
    else if (redirected && pubsub_count(target) > 0)
        buf_append(b, msg, sizeof msg - 1);
    else
        return 0;
    if (!keys) {
        if (target->resp >= 3)
            buf_append(b, "_\r\n", 3);
        else
            buf_append(b, "*-1\r\n", 5);
        return 1;
    }
    char h[32];
    int hl = snprintf(h, sizeof h, "*%d\r\n", n);
    buf_append(b, h, (size_t)hl);
    for (int i = 0; i < n; i++)
        put_bulk(b, keys[i]);
    return 1;
}

/* Sends one invalidation message for the tracking client c (to it or to
 * its redirect target). */
static void send_invalidation(kv_client *c, const bk_str *keys, int n)
{
    kv_client *target = c;
    int redirected = 0;
    if (c->trk_redir) {
        target = c->trk_target;
        if (!target || (target->flags & CLIENT_CLOSED)) {
            c->cl_flags |= CL_TRK_BROKEN;
            if (c->resp >= 3) {
                char m[96];
                int ml = snprintf(m, sizeof m, ">2\r\n$21\r\ntracking-redir-broken\r\n:%llu\r\n",
                                  (unsigned long long)c->trk_redir);
                if (c == srv.cl_running && srv.cl_executing) {
                    buf_append(&srv.trk_self, m, (size_t)ml);
                } else {
                    reply_raw(c, m, (size_t)ml);
                    kv_client_output_added(c);
                }
            }
            return;
        }
        redirected = 1;
    }
    if (target == srv.cl_running && srv.cl_executing) {
        /* After the reply of the running command, not inside it (keys
         * evicted before the command ran are told before its reply). */
        format_msg(&srv.trk_self, target, redirected, keys, n);
        return;
    }
    bk_buf msg = { 0 };
    if (format_msg(&msg, target, redirected, keys, n)) {
        reply_raw(target, msg.data, msg.len);
        kv_client_output_added(target);
    }
    buf_free(&msg);
}

void tracking_send_self(kv_client *c)
{
    if (c == srv.cl_running || !srv.cl_running)
        reply_raw(c, srv.trk_self.data, srv.trk_self.len);
    srv.trk_self.len = 0;
}

/* ---- clients ---- */

static kv_client *tracking_client_by_id(uint64_t id)
{
    for (int i = 0; i < srv.trk_nclients; i++)
        if (srv.trk_clients[i]->id == id)
            return srv.trk_clients[i];
    return NULL;
}

static kv_trk_prefix *prefix_find(bk_str p)
{
    return (kv_trk_prefix *)(void *)dict_find(&srv.trk_prefix_d, p.p, p.len,
                                               dict_hash32(p.p, p.len));
}

static int cmp_bytes(bk_str a, bk_str b)
{
    int r = memcmp(a.p, b.p, BK_MIN(a.len, b.len));
    return r ? r : (a.len > b.len) - (a.len < b.len);
}

/* Where p goes in c's sorted prefixes (the first not below it). */
static int client_prefix_pos(const kv_client *c, bk_str p)
{
    int lo = 0, hi = c->trk_nprefixes;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_bytes(tracking_prefix_str(c->trk_prefixes[mid]), p) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Counts a prefix length in srv.trk_plens (delta +1 or -1). */
static void plen_ref(uint32_t len, int delta)
{
    int i = 0, hi = srv.trk_nplens;
    while (i < hi) {
        int mid = i + (hi - i) / 2;
        if (srv.trk_plens[mid] < len)
            i = mid + 1;
        else
            hi = mid;
    }
    if (i < srv.trk_nplens && srv.trk_plens[i] == len) {
        srv.trk_plen_refs[i] += (uint32_t)delta;
        if (srv.trk_plen_refs[i] == 0) {
            srv.trk_nplens--;
            memmove(srv.trk_plens + i, srv.trk_plens + i + 1,
                    (size_t)(srv.trk_nplens - i) * sizeof *srv.trk_plens);
            memmove(srv.trk_plen_refs + i, srv.trk_plen_refs + i + 1,
                    (size_t)(srv.trk_nplens - i) * sizeof *srv.trk_plen_refs);
        }
        return;
    }
    assert(delta > 0);
    if (srv.trk_nplens == srv.trk_plens_cap) {
        srv.trk_plens_cap = srv.trk_plens_cap ? srv.trk_plens_cap * 2 : 8;
        srv.trk_plens = kv_realloc(srv.trk_plens, (size_t)srv.trk_plens_cap * sizeof *srv.trk_plens);
        srv.trk_plen_refs = kv_realloc(srv.trk_plen_refs,
                                       (size_t)srv.trk_plens_cap * sizeof *srv.trk_plen_refs);
    }
    memmove(srv.trk_plens + i + 1, srv.trk_plens + i,
            (size_t)(srv.trk_nplens - i) * sizeof *srv.trk_plens);
    memmove(srv.trk_plen_refs + i + 1, srv.trk_plen_refs + i,
            (size_t)(srv.trk_nplens - i) * sizeof *srv.trk_plen_refs);
    srv.trk_plens[i] = len;
    srv.trk_plen_refs[i] = 1;
    srv.trk_nplens++;
}

static void prefix_add_client(kv_client *c, bk_str p)
{
    if (p.len > UINT32_MAX)
        return;
    kv_trk_prefix *x = prefix_find(p);
    if (!x) {
        x = kv_calloc(sizeof *x + p.len + 1);
        memcpy(x->data, p.p, p.len);
        x->node.hash = dict_hash32(p.p, p.len);
        x->node.aux = (uint32_t)p.len;
        dict_add(&srv.trk_prefix_d, &x->node);
        srv.trk_nprefix++;
        plen_ref((uint32_t)p.len, 1);
    }
    for (int i = 0; i < x->n; i++)
        if (x->clients[i] == c)
            return; /* already one of c's (BCAST again without PREFIX: "") */
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 4;
        x->clients = kv_realloc(x->clients, (size_t)x->cap * sizeof *x->clients);
    }
    x->clients[x->n++] = c;
    if (c->trk_nprefixes == c->trk_prefixes_cap) {
        c->trk_prefixes_cap = c->trk_prefixes_cap ? c->trk_prefixes_cap * 2 : 4;
        c->trk_prefixes = kv_realloc(c->trk_prefixes,
                                     (size_t)c->trk_prefixes_cap * sizeof *c->trk_prefixes);
    }
    c->trk_prefixes[c->trk_nprefixes++] = x; /* sorted by tracking_enable */
}

static int cmp_prefix_ptr(const void *a, const void *b)
{
    return cmp_bytes(tracking_prefix_str(*(kv_trk_prefix *const *)a),
                     tracking_prefix_str(*(kv_trk_prefix *const *)b));
}

static void prefix_drop_client(kv_trk_prefix *x, kv_client *c)
{
    for (int i = 0; i < x->n; i++) {
        if (x->clients[i] == c) {
            x->clients[i] = x->clients[--x->n];
            break;
        }
    }
    if (x->n > 0)
        return;
    if (x->pending) {
        for (int i = 0; i < srv.trk_npending; i++) {
            if (srv.trk_pending[i] == x) {
                srv.trk_pending[i] = srv.trk_pending[--srv.trk_npending];
                break;
            }
        }
    }
    plen_ref(x->node.aux, -1);
    dict_unlink_node(&srv.trk_prefix_d, &x->node);
    srv.trk_nprefix--;
    free_prefix_node(&x->node, NULL);
}

static int overlaps(bk_str a, bk_str b)
{
    return memcmp(a.p, b.p, BK_MIN(a.len, b.len)) == 0;
}

typedef struct {
    bk_str s;
    int idx;
} prefix_arg;

static int cmp_prefix_arg(const void *a, const void *b)
{
    const prefix_arg *x = a, *y = b;
    int r = cmp_bytes(x->s, y->s);
    return r ? r : (x->idx > y->idx) - (x->idx < y->idx);
}

#define PREFIX_EXACT_SCAN 2000 /* up to this many, name the pair as Redis does */

int tracking_prefix_error(kv_client *c, const bk_str *prefixes, int n, char *err, size_t errlen)
{
    static const char tail[] = "Prefixes for a single client must not overlap.";
    /* Against c's own, which never overlap each other: only the one just
     * below p (a prefix of p) and the one at p (starting with p) can. */
    for (int i = 0; i < n; i++) {
        int pos = client_prefix_pos(c, prefixes[i]);
        for (int k = pos - 1; k <= pos; k++) {
            if (k < 0 || k >= c->trk_nprefixes)
                continue;
            bk_str old = tracking_prefix_str(c->trk_prefixes[k]);
            if (overlaps(prefixes[i], old)) {
                snprintf(err, errlen,
                         "ERR Prefix '%.*s' overlaps with an existing prefix '%.*s'. %s",
                         (int)BK_MIN(prefixes[i].len, 128), prefixes[i].p, (int)BK_MIN(old.len, 128),
                         old.p, tail);
                return 1;
            }
        }
    }
    if (n < 2)
        return 0;
    /* Among themselves: sorted, an overlap shows between neighbours. */
    prefix_arg *v = kv_malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++)
        v[i] = (prefix_arg){ prefixes[i], i };
    qsort(v, (size_t)n, sizeof *v, cmp_prefix_arg);
    int a = -1, b = -1;
    for (int i = 0; i + 1 < n && a < 0; i++) {
        if (overlaps(v[i].s, v[i + 1].s)) {
            a = BK_MIN(v[i].idx, v[i + 1].idx);
            b = BK_MAX(v[i].idx, v[i + 1].idx);
        }
    }
    kv_free(v);
    if (a < 0)
        return 0;
    if (n <= PREFIX_EXACT_SCAN) { /* the first pair in argument order */
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            for (int j = i + 1; j < n && !found; j++)
                if (overlaps(prefixes[i], prefixes[j]))
                    a = i, b = j, found = 1;
    }
    snprintf(err, errlen, "ERR Prefix '%.*s' overlaps with another provided prefix '%.*s'. %s",
             (int)BK_MIN(prefixes[a].len, 128), prefixes[a].p, (int)BK_MIN(prefixes[b].len, 128),
             prefixes[b].p, tail);
    return 1;
}

void tracking_enable(kv_client *c, uint64_t redir, kv_client *target, unsigned opts,
                     const bk_str *prefixes, int nprefixes)
{
    if (!(c->cl_flags & CL_TRACKING)) {
        if (srv.trk_nclients == srv.trk_clients_cap) {
            srv.trk_clients_cap = srv.trk_clients_cap ? srv.trk_clients_cap * 2 : 8;
            srv.trk_clients = kv_realloc(srv.trk_clients,
                                         (size_t)srv.trk_clients_cap * sizeof *srv.trk_clients);
        }
        srv.trk_clients[srv.trk_nclients++] = c;
    }
    c->cl_flags |= CL_TRACKING;
    c->cl_flags &= ~(CL_TRK_BROKEN | CL_TRK_BCAST | CL_TRK_OPTIN | CL_TRK_OPTOUT | CL_TRK_NOLOOP);
    c->trk_redir = redir;
    c->trk_target = target;
    if (opts & CL_TRK_BCAST) {
        c->cl_flags |= CL_TRK_BCAST;
        if (nprefixes == 0)
            prefix_add_client(c, BK_STR(""));
        for (int i = 0; i < nprefixes; i++)
            prefix_add_client(c, prefixes[i]);
        qsort(c->trk_prefixes, (size_t)c->trk_nprefixes, sizeof *c->trk_prefixes,
              cmp_prefix_ptr);
    }
    c->cl_flags |= opts & (CL_TRK_OPTIN | CL_TRK_OPTOUT | CL_TRK_NOLOOP);
}

void tracking_disable(kv_client *c)
{
    if (!(c->cl_flags & CL_TRACKING))
        return;
    for (int i = 0; i < c->trk_nprefixes; i++)
        prefix_drop_client(c->trk_prefixes[i], c);
    kv_free(c->trk_prefixes);
    c->trk_prefixes = NULL;
    c->trk_nprefixes = c->trk_prefixes_cap = 0;
    for (int i = 0; i < srv.trk_nclients; i++) {
        if (srv.trk_clients[i] == c) {
            srv.trk_clients[i] = srv.trk_clients[--srv.trk_nclients];
            break;
        }
    }
    c->cl_flags &= ~(CL_TRACKING | CL_TRK_BROKEN | CL_TRK_BCAST | CL_TRK_OPTIN | CL_TRK_OPTOUT |
                     CL_TRK_NOLOOP | CL_TRK_CACHING);
    c->trk_redir = 0;
    c->trk_target = NULL;
}

void tracking_client_closed(kv_client *c)
{
    tracking_disable(c);
    for (int i = 0; i < srv.trk_nclients; i++)
        if (srv.trk_clients[i]->trk_target == c)
            srv.trk_clients[i]->trk_target = NULL;
    if (c == srv.cl_running)
        srv.trk_self.len = 0;
}

/* ---- the keys clients read ---- */

static void remember_key(kv_client *c, bk_str key)
{
    uint32_t h = dict_hash32(key.p, key.len);
    kv_trk_key *k = (kv_trk_key *)(void *)dict_find(&srv.trk_keys, key.p, key.len, h);
    if (!k) {
        k = kv_calloc(sizeof *k + key.len);
        memcpy(k->key, key.p, key.len);
        k->node.hash = h;
        k->node.aux = (uint32_t)key.len;
        dict_add(&srv.trk_keys, &k->node);
    }
    for (int i = 0; i < k->n; i++)
        if (k->ids[i] == c->id)
            return;
    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 2;
        k->ids = kv_realloc(k->ids, (size_t)k->cap * sizeof *k->ids);
    }
    k->ids[k->n++] = c->id;
    srv.trk_items++;
}

/* Whether c's reads are remembered now (not BCAST, OPTIN/OPTOUT). */
static int tracking_remembers(const kv_client *c)
{
    unsigned f = c->cl_flags;
    return !((f & CL_TRK_BCAST) || ((f & CL_TRK_OPTIN) && !(f & CL_TRK_CACHING)) ||
             ((f & CL_TRK_OPTOUT) && (f & CL_TRK_CACHING)));
}

void tracking_remember_script(kv_client *caller)
{
    /* EVAL*, FCALL*: script numkeys key...; the script checked numkeys */
    long long nk;
    if (caller->argc < 3 || !tracking_remembers(caller) ||
        kv_parse_ll(caller->argv[2].p, caller->argv[2].len, &nk) < 0 || nk < 0 ||
        nk > caller->argc - 3)
        return;
    for (int i = 3; i < 3 + nk; i++)
        if (caller->argv[i].len <= UINT32_MAX)
            remember_key(caller, caller->argv[i]);
}

void tracking_remember(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv)
{
    if (!tracking_remembers(c) || cmd->first_key <= 0)
        return;
    int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
    int step = cmd->key_step > 0 ? cmd->key_step : 1;
    for (int i = cmd->first_key; i <= last && i < argc; i += step)
        if (argv[i].len <= UINT32_MAX)
            remember_key(c, argv[i]);
}

static void drop_key(kv_trk_key *k)
{
    dict_unlink_node(&srv.trk_keys, &k->node);
    srv.trk_items -= (uint64_t)k->n;
    kv_free(k->ids);
    kv_free(k);
}

/* Sends the invalidation of table entry k and drops it. noloop_client:
 * the client that made the change (NOLOOP clients skip their own). */
static void invalidate_entry(kv_trk_key *k, const kv_client *changer)
{
    bk_str key = { k->key, k->node.aux };
    for (int i = 0; i < k->n; i++) {
        kv_client *t = tracking_client_by_id(k->ids[i]);
        if (!t || (t->cl_flags & CL_TRK_BCAST))
            continue;
        if ((t->cl_flags & CL_TRK_NOLOOP) && t == changer)
            continue;
        send_invalidation(t, &key, 1);
    }
    drop_key(k);
}

void tracking_invalidate_key(bk_str key)
{
    uint64_t changer_id = srv.cl_running ? srv.cl_running->id : 0;
    for (int i = 0; i < srv.trk_nplens && srv.trk_plens[i] <= key.len; i++) {
        kv_trk_prefix *x = prefix_find((bk_str){ key.p, srv.trk_plens[i] });
        if (!x)
            continue;
        uint32_t len = (uint32_t)BK_MIN(key.len, (size_t)UINT32_MAX);
        buf_append(&x->keys, &changer_id, sizeof changer_id);
        buf_append(&x->keys, &len, sizeof len);
        buf_append(&x->keys, key.p, len);
        if (!x->pending) {
            if (srv.trk_npending == srv.trk_pending_cap) {
                srv.trk_pending_cap = srv.trk_pending_cap ? srv.trk_pending_cap * 2 : 8;
                srv.trk_pending = kv_realloc(srv.trk_pending, (size_t)srv.trk_pending_cap *
                                                                  sizeof *srv.trk_pending);
            }
            srv.trk_pending[srv.trk_npending++] = x;
            x->pending = 1;
        }
        srv.trk_bcast_pending = 1;
    }
    if (!dict_size(&srv.trk_keys))
        return;
    kv_trk_key *k = (kv_trk_key *)(void *)dict_find(&srv.trk_keys, key.p, key.len,
                                                     dict_hash32(key.p, key.len));
    if (k)
        invalidate_entry(k, srv.cl_running);
}

void tracking_invalidate_all(void)
{
    if (!srv.trk_nclients && !dict_size(&srv.trk_keys))
        return;
    for (int i = 0; i < srv.trk_nclients; i++)
        send_invalidation(srv.trk_clients[i], NULL, 0);
    dict_clear(&srv.trk_keys, free_key_node, NULL);
    srv.trk_items = 0;
}

void tracking_broadcast(void)
{
    srv.trk_bcast_pending = 0;
    bk_str *keys = NULL;
    size_t cap = 0;
    for (int i = 0; i < srv.trk_npending; i++) {
        kv_trk_prefix *x = srv.trk_pending[i];
        x->pending = 0;
        for (int j = 0; j < x->n; j++) {
            kv_client *t = x->clients[j];
            int n = 0;
            for (size_t off = 0; off < x->keys.len;) {
                uint64_t id;
                uint32_t len;
                memcpy(&id, x->keys.data + off, sizeof id);
                memcpy(&len, x->keys.data + off + sizeof id, sizeof len);
                const char *p = x->keys.data + off + sizeof id + sizeof len;
                off += sizeof id + sizeof len + len;
                if ((t->cl_flags & CL_TRK_NOLOOP) && id == t->id)
                    continue;
                if ((size_t)n == cap) {
                    cap = cap ? cap * 2 : 16;
                    keys = kv_realloc(keys, cap * sizeof *keys);
                }
                keys[n++] = (bk_str){ p, len };
            }
            if (n)
                send_invalidation(t, keys, n);
        }
        x->keys.len = 0;
        if (x->keys.cap > 64 * 1024)
            buf_free(&x->keys);
    }
    srv.trk_npending = 0;
    kv_free(keys);
}

/* ---- tracking-table-max-keys ---- */

/* Redis's trackingLimitUsedSlots: over tracking-table-max-keys (0: no
 * limit), random keys are invalidated until the table is back at the
 * limit, at most 100 per call, then 200, ... while it stays over. Runs
 * before every command (while a client tracks) and from the cron, so a
 * CONFIG SET that lowers the limit acts even on an idle server. */
void tracking_limit_keys(void)
{
    static unsigned misses; /* calls in a row that ended over the limit */
    static const char *opt;
    if (!opt)
        opt = kv_config_noop_str("tracking-table-max-keys");
    long long max = 1000000;
    if (opt)
        kv_parse_ll(opt, strlen(opt), &max);
    if (max <= 0 || dict_size(&srv.trk_keys) <= (size_t)max) {
        misses = 0;
        return;
    }
    for (unsigned long long effort = 100ull * (misses + 1); effort > 0; effort--) {
        kv_trk_key *k = (kv_trk_key *)(void *)dict_random(&srv.trk_keys);
        if (!k)
            break;
        invalidate_entry(k, NULL);
        if (dict_size(&srv.trk_keys) <= (size_t)max) {
            misses = 0;
            return;
        }
    }
    misses++;
}

void tracking_cron(void)
{
    if (srv.trk_nclients)
        tracking_limit_keys();
}
