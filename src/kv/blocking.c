/* The blocking layer (see blocking.h): per-db FIFOs of the clients waiting
 * on a key, the ready-key queue served after each command, timeouts on
 * loop timers, CLIENT UNBLOCK. */
#include "kv/blocking.h"

#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <assert.h>
#include <math.h>

/* One client waiting on one key: a node of the key's FIFO. */
typedef struct kv_bwait {
    struct kv_bwait *prev, *next;
    struct kv_bkey *key;
    kv_client *c;
} kv_bwait;

/* A key some clients wait on, in srv.blk_keys[db]. Freed when its FIFO
 * empties, unless it sits in the ready queue (then when served). */
typedef struct kv_bkey {
    dict_node node; /* aux = key length */
    int dbid;
    int ready; /* BKEY_IDLE, BKEY_QUEUED (in srv.blk_ready) or BKEY_SERVING */
    kv_bwait *head, *tail;
    char key[];
} kv_bkey;

enum { BKEY_IDLE, BKEY_QUEUED, BKEY_SERVING };

static bk_str bkey_key_fn(const dict_node *n)
{
    const kv_bkey *k = (const kv_bkey *)(const void *)n;
    return (bk_str){ k->key, n->aux };
}

static inline bk_str bkey_str(const kv_bkey *k) { return (bk_str){ k->key, k->node.aux }; }

/* ---- timeouts ---- */

int blocking_timeout_arg(kv_client *c, bk_str arg, int64_t *ms)
{
    long double secs;
    if (kv_parse_ldouble(arg.p, arg.len, &secs) < 0) {
        reply_error(c, "ERR timeout is not a float or out of range");
        return -1;
    }
    /* Redis converts seconds * 1000 to a long long after rounding up: a
     * value past LLONG_MAX (inf, 1e300) wraps to a negative one there, so
     * it is "negative" here too; (-1, 0] rounds to 0, no timeout. */
    long double up = ceill(secs * 1000.0L);
    if (!(up < 9223372036854775808.0L) || up <= -1.0L) {
        reply_error(c, "ERR timeout is negative");
        return -1;
    }
    int64_t v = (int64_t)up;
    /* An absolute deadline past INT64_MAX never fires in Redis: forever. */
    if (v > INT64_MAX - srv.now_ms)
        v = 0;
    *ms = v;
    return 0;
}

int blocking_timeout_ms_arg(kv_client *c, bk_str arg, int64_t *ms)
{
    long long v;
    if (kv_parse_ll(arg.p, arg.len, &v) < 0) {
        reply_error(c, "ERR timeout is not an integer or out of range");
        return -1;
    }
    if (v < 0) {
        reply_error(c, "ERR timeout is negative");
        return -1;
    }
    *ms = v > INT64_MAX - srv.now_ms ? 0 : v; /* past the end of time: forever */
    return 0;
}

int blocking_denied(const kv_client *c)
{
    return srv.blk_deny > 0 || (c->flags & CLIENT_FAKE);
}

int blocking_mpop_args(kv_client *c, int numkeys_idx, const char *w0, const char *w1,
                       int *nkeys, int *where, long long *count)
{
    long long n;
    if (kv_parse_ll(c->argv[numkeys_idx].p, c->argv[numkeys_idx].len, &n) < 0 || n <= 0) {
        reply_error(c, "ERR numkeys should be greater than 0");
        return -1;
    }
    if (n > c->argc - numkeys_idx - 2) { /* no room for the keys and the where word */
        reply_error(c, ERR_SYNTAX);
        return -1;
    }
    int wi = numkeys_idx + 1 + (int)n;
    bk_str w = c->argv[wi];
    if (str_ieq_lit(w, w0, strlen(w0)))
        *where = 0;
    else if (str_ieq_lit(w, w1, strlen(w1)))
        *where = 1;
    else {
        reply_error(c, ERR_SYNTAX);
        return -1;
    }
    long long cnt = 0;
    for (int i = wi + 1; i < c->argc; i++) {
        if (!cnt && i + 1 < c->argc && str_ieq_lit(c->argv[i], "count", 5)) {
            i++;
            if (kv_parse_ll(c->argv[i].p, c->argv[i].len, &cnt) < 0 || cnt <= 0) {
                reply_error(c, "ERR count should be greater than 0");
                return -1;
            }
        } else {
            reply_error(c, ERR_SYNTAX);
            return -1;
        }
    }
    *nkeys = (int)n;
    *count = cnt ? cnt : 1;
    return 0;
}

/* ---- parking and unparking ---- */

static dict *db_table(int dbid)
{
    if (!srv.blk_keys) {
        srv.blk_keys = kv_calloc((size_t)srv.cfg.databases * sizeof *srv.blk_keys);
        for (int i = 0; i < srv.cfg.databases; i++)
            dict_init(&srv.blk_keys[i], bkey_key_fn);
    }
    return &srv.blk_keys[dbid];
}

static void bkey_free(kv_bkey *k)
{
    dict_unlink_node(&srv.blk_keys[k->dbid], &k->node);
    kv_free(k);
    srv.blk_nkeys--;
}

static void timeout_cb(bk_loop *l, bk_timer *t);

kv_bstate *blocking_park(kv_client *c, const kv_block_kind *kind, int first_key, int nkeys,
                         int64_t timeout_ms)
{
    assert(!c->blocked && first_key + nkeys <= c->argc);
    kv_bstate *b = c->bstate;
    if (!b) {
        b = c->bstate = kv_calloc(sizeof *b);
        timer_init(&b->tm, timeout_cb, c);
    }
    b->kind = kind;
    b->cmd = c->cmd;
    b->db = c->db;
    memset(b->param, 0, sizeof b->param);

    /* argv and its bytes in one block, reused when big enough */
    size_t bytes = (size_t)c->argc * sizeof(bk_str);
    for (int i = 0; i < c->argc; i++)
        bytes += c->argv[i].len;
    if (bytes > b->argv_bytes) {
        kv_free(b->argv);
        b->argv = kv_malloc(bytes);
        b->argv_bytes = bytes;
    }
    char *p = (char *)(b->argv + c->argc);
    for (int i = 0; i < c->argc; i++) {
        memcpy(p, c->argv[i].p, c->argv[i].len);
        b->argv[i] = (bk_str){ p, c->argv[i].len };
        p += c->argv[i].len;
    }
    b->argc = c->argc;

    if (nkeys > b->waits_cap) {
        kv_free(b->waits);
        b->waits = kv_malloc((size_t)nkeys * sizeof *b->waits);
        b->waits_cap = nkeys;
    }
    b->nwaits = 0;
    dict *d = nkeys ? db_table(c->db->id) : NULL;
    for (int i = 0; i < nkeys; i++) {
        bk_str key = b->argv[first_key + i];
        uint32_t h = dict_hash32(key.p, key.len);
        kv_bkey *k = (kv_bkey *)(void *)dict_find(d, key.p, key.len, h);
        if (!k) {
            k = kv_calloc(sizeof *k + key.len);
            k->node.hash = h;
            k->node.aux = (uint32_t)key.len;
            k->dbid = c->db->id;
            memcpy(k->key, key.p, key.len);
            dict_add(d, &k->node);
            srv.blk_nkeys++;
        } else if (k->tail && k->tail->c == c) {
            continue; /* the same key twice in one command */
        }
        kv_bwait *w = &b->waits[b->nwaits++];
        *w = (kv_bwait){ .prev = k->tail, .key = k, .c = c };
        if (k->tail)
            k->tail->next = w;
        else
            k->head = w;
        k->tail = w;
    }
    if (timeout_ms > 0) {
        timer_start(&srv.loop, &b->tm, (uint64_t)timeout_ms);
        srv.blk_ntimeout++;
    }
    c->blocked = 1;
    srv.blk_nclients++;
    return b;
}

/* Takes c out of every FIFO and stops its timer. */
static void unpark(kv_client *c)
{
    kv_bstate *b = c->bstate;
    for (int i = 0; i < b->nwaits; i++) {
        kv_bwait *w = &b->waits[i];
        kv_bkey *k = w->key;
        if (w->prev)
            w->prev->next = w->next;
        else
            k->head = w->next;
        if (w->next)
            w->next->prev = w->prev;
        else
            k->tail = w->prev;
        if (!k->head && k->ready == BKEY_IDLE)
            bkey_free(k);
    }
    b->nwaits = 0;
    if (timer_active(&b->tm)) {
        timer_stop(&srv.loop, &b->tm);
        srv.blk_ntimeout--;
    }
    c->blocked = 0;
    srv.blk_nclients--;
}

static void resume_cb(bk_loop *l, bk_timer *t);

/* c was answered: it leaves the FIFOs; the commands it pipelined run from
 * the resume timer. */
static void unblock(kv_client *c)
{
    unpark(c);
    kv_client_output_added(c);
    if (!c->resume_pending) {
        c->resume_pending = 1;
        c->next_resume = NULL;
        if (srv.blk_resume_tail)
            srv.blk_resume_tail->next_resume = c;
        else
            srv.blk_resume = c;
        srv.blk_resume_tail = c;
        if (!timer_active(&srv.blk_resume_timer)) {
            timer_init(&srv.blk_resume_timer, resume_cb, NULL);
            timer_start(&srv.loop, &srv.blk_resume_timer, 0);
        }
    }
}

void blocking_done(kv_client *c)
{
    assert(c->blocked);
    unblock(c);
}

static void timeout_cb(bk_loop *l, bk_timer *t)
{
    kv_client *c = t->udata;
    srv.blk_ntimeout--; /* the loop stopped the timer */
    c->cmd = c->bstate->cmd;
    c->bstate->kind->timed_out(c);
    unblock(c);
}

void blocking_client_closed(kv_client *c)
{
    if (c->resume_pending) { /* leave the resume list: c is freed at batch end */
        kv_client **pp = &srv.blk_resume, *prev = NULL;
        while (*pp != c) {
            prev = *pp;
            pp = &(*pp)->next_resume;
        }
        *pp = c->next_resume;
        if (srv.blk_resume_tail == c)
            srv.blk_resume_tail = prev;
        c->resume_pending = 0;
    }
    kv_bstate *b = c->bstate;
    if (!b)
        return;
    if (c->blocked)
        unpark(c);
    kv_free(b->argv);
    kv_free(b->waits);
    kv_free(b);
    c->bstate = NULL;
}

/* The loop runs timers after the batch's events and before its end
 * (AOF write, then replies), so what the resumed commands write goes out
 * with this batch. */
static void resume_cb(bk_loop *l, bk_timer *t)
{
    while (srv.blk_resume) {
        kv_client *c = srv.blk_resume;
        srv.blk_resume = c->next_resume;
        if (!srv.blk_resume)
            srv.blk_resume_tail = NULL;
        c->resume_pending = 0;
        if (!(c->flags & CLIENT_CLOSED) && !c->blocked)
            kv_client_resume(c);
    }
}

/* ---- ready keys ---- */

void blocking_signal_key(kv_db *db, bk_str key)
{
    if (!srv.blk_keys)
        return;
    dict *d = &srv.blk_keys[db->id];
    if (dict_size(d) == 0)
        return;
    kv_bkey *k = (kv_bkey *)(void *)dict_find(d, key.p, key.len, dict_hash32(key.p, key.len));
    if (!k || k->ready == BKEY_QUEUED)
        return;
    if (srv.blk_nready == srv.blk_ready_cap) {
        srv.blk_ready_cap = srv.blk_ready_cap ? srv.blk_ready_cap * 2 : 16;
        srv.blk_ready = kv_realloc(srv.blk_ready, srv.blk_ready_cap * sizeof *srv.blk_ready);
    }
    k->ready = BKEY_QUEUED;
    srv.blk_ready[srv.blk_nready++] = k;
}

void blocking_signal_db(kv_db *db)
{
    if (!srv.blk_nkeys || dict_size(&srv.blk_keys[db->id]) == 0)
        return;
    dict_iter it;
    dict_iter_init(&it, &srv.blk_keys[db->id]);
    for (dict_node *n; (n = dict_iter_next(&it));) {
        bk_str key = bkey_str((kv_bkey *)(void *)n);
        if (db_find(db, key))
            blocking_signal_key(db, key);
    }
    dict_iter_end(&it);
}

/* Serves the clients waiting on k, FIFO, while the key can serve them. */
static void serve_key(kv_bkey *k)
{
    kv_db *db = &srv.dbs[k->dbid];
    bk_str key = bkey_str(k);
    kv_entry *e = db_lookup_write(db, key);
    for (kv_bwait *w = k->head, *next; w && e; w = next) {
        next = w->next; /* serving w->c unlinks only w->c's nodes */
        kv_client *c = w->c;
        kv_bstate *b = c->bstate;
        if (b->kind->value_type != (int)e->type)
            continue;
        const kv_cmd *saved = c->cmd;
        c->cmd = b->cmd;
        int timed = srv.slowlog_slower_than >= 0;
        uint64_t t0 = timed ? kv_ticks() : 0;
        if (b->kind->serve(c, db, key, e)) {
            if (timed) /* the served command reaches the slowlog, as Redis */
                kv_introspect_served(c, b->argc, b->argv, kv_ticks() - t0);
            unblock(c);
        } else {
            c->cmd = saved;
        }
        e = db_find(db, key); /* emptied (deleted) or moved by the serve */
    }
}

void blocking_serve_ready(void)
{
    /* Not while a script runs (a command allowed during BUSY, such as
     * HELLO, ends here too): its clients would see it half done. The keys
     * stay ready for after its EVAL. */
    if (BK_UNLIKELY(srv.script_caller))
        return;
    /* As Redis: keys expire against the time of the serving, not of the
     * command that signalled them (a transaction with DEBUG SLEEP, a long
     * script: an expired key then serves nobody and is deleted). */
    if (srv.blk_nready)
        srv.now_ms = kv_unix_ms();
    /* Serving may append (a BLMOVE's push creates its target): index, as
     * the array may move. */
    for (size_t i = 0; i < srv.blk_nready; i++) {
        kv_bkey *k = srv.blk_ready[i];
        /* SERVING keeps k alive while its last client leaves; a signal
         * meanwhile queues it again */
        k->ready = BKEY_SERVING;
        serve_key(k);
        if (k->ready == BKEY_SERVING)
            k->ready = BKEY_IDLE;
        if (!k->head && k->ready == BKEY_IDLE)
            bkey_free(k);
    }
    srv.blk_nready = 0;
}

/* ---- CLIENT UNBLOCK ---- */

void blocking_client_unblock_command(kv_client *c)
{
    if (c->argc > 4) {
        reply_errorf(c,
                     "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                     "CLIENT HELP.",
                     (int)BK_MIN(c->argv[1].len, 128), c->argv[1].p);
        return;
    }
    long long id;
    if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &id) < 0) {
        reply_error(c, ERR_NOT_INT);
        return;
    }
    int error = 0;
    if (c->argc == 4) {
        if (str_ieq_lit(c->argv[3], "error", 5))
            error = 1;
        else if (!str_ieq_lit(c->argv[3], "timeout", 7)) {
            reply_error(c, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return;
        }
    }
    kv_client *t = srv.clients;
    while (t && t->id != (uint64_t)id)
        t = t->next;
    if (!t || !t->blocked) {
        reply_int(c, 0);
        return;
    }
    t->cmd = t->bstate->cmd;
    if (error)
        reply_error(t, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
    else
        t->bstate->kind->timed_out(t);
    unblock(t);
    reply_int(c, 1);
}
