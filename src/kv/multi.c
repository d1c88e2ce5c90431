/* MULTI/EXEC/DISCARD and WATCH (optimistic locking). */
#include "kv/aof.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"

typedef struct kv_watch {
    dict_node node; /* aux = key length */
    kv_db *db;
    kv_client **clients;
    /* per client (same index): the key was there but logically expired when
     * it was WATCHed (Redis 7.0): its deletion is then no change, and its
     * expiry no reason to fail EXEC */
    unsigned char *stale;
    int n, cap;
    char key[];
} kv_watch;

bk_str kv_watch_key_fn(const dict_node *n)
{
    kv_watch *w = (kv_watch *)(void *)n;
    return (bk_str){ w->key, n->aux };
}

static void watch_key(kv_client *c, bk_str key)
{
    kv_db *db = c->db;
    uint32_t h = dict_hash32(key.p, key.len);
    kv_watch *w = (kv_watch *)(void *)dict_find(&db->watched, key.p, key.len, h);
    if (w) {
        for (int i = 0; i < w->n; i++)
            if (w->clients[i] == c)
                return;
    } else {
        w = kv_calloc(sizeof *w + key.len);
        w->node.hash = h;
        w->node.aux = (uint32_t)key.len;
        memcpy(w->key, key.p, key.len);
        w->db = db;
        dict_add(&db->watched, &w->node);
        srv.watch_keys++;
    }
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 4;
        w->clients = kv_realloc(w->clients, (size_t)w->cap * sizeof *w->clients);
        w->stale = kv_realloc(w->stale, (size_t)w->cap);
    }
    kv_entry *e = db_find(db, key);
    w->stale[w->n] = e && db_expired(e);
    w->clients[w->n++] = c;
    if (c->nwatched == c->watched_cap) {
        c->watched_cap = c->watched_cap ? c->watched_cap * 2 : 4;
        c->watched = kv_realloc(c->watched, (size_t)c->watched_cap * sizeof *c->watched);
    }
    c->watched[c->nwatched++] = w;
}

void kv_unwatch_all(kv_client *c)
{
    for (int i = 0; i < c->nwatched; i++) {
        kv_watch *w = c->watched[i];
        for (int k = 0; k < w->n; k++) {
            if (w->clients[k] == c) {
                w->clients[k] = w->clients[--w->n];
                w->stale[k] = w->stale[w->n];
                break;
            }
        }
        if (w->n == 0) {
            dict_unlink_node(&w->db->watched, &w->node);
            kv_free(w->clients);
            kv_free(w->stale);
            kv_free(w);
            srv.watch_keys--;
        }
    }
    c->nwatched = 0;
    c->flags &= ~CLIENT_DIRTY_CAS;
}

void kv_touch_key(kv_db *db, bk_str key)
{
    if (BK_UNLIKELY(tracking_active()))
        tracking_invalidate_key(key);
    if (!srv.watch_keys || dict_size(&db->watched) == 0)
        return;
    kv_watch *w = (kv_watch *)(void *)dict_find(&db->watched, key.p, key.len,
                                                 dict_hash32(key.p, key.len));
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        if (w->stale[i]) {
            /* the touch of the expired key's deletion (made before or after
             * it goes): no change; anything later is one */
            kv_entry *e = db_find(db, key);
            if (!e || db_expired(e)) {
                w->stale[i] = 0;
                continue;
            }
        }
        w->clients[i]->flags |= CLIENT_DIRTY_CAS;
    }
}

/* Whether a key c watches expired since its WATCH (Redis 7.0 fails the
 * EXEC then, even if nothing deleted it yet). */
static int watched_key_expired(kv_client *c)
{
    for (int i = 0; i < c->nwatched; i++) {
        kv_watch *w = c->watched[i];
        int k = 0;
        while (k < w->n && w->clients[k] != c)
            k++;
        if (k == w->n || w->stale[k])
            continue;
        kv_entry *e = db_find(w->db, (bk_str){ w->key, w->node.aux });
        if (e && db_expired(e))
            return 1;
    }
    return 0;
}

void kv_touch_db(kv_db *db)
{
    if (!srv.watch_keys || dict_size(&db->watched) == 0)
        return;
    dict_iter it;
    dict_iter_init(&it, &db->watched);
    for (dict_node *n; (n = dict_iter_next(&it));) {
        kv_watch *w = (kv_watch *)(void *)n;
        for (int i = 0; i < w->n; i++)
            w->clients[i]->flags |= CLIENT_DIRTY_CAS;
    }
    dict_iter_end(&it);
}

/* As Redis 7.0: a flush or swap changes a watched key that is in emptied
 * now or will be in it from replaced_with (SWAPDB; NULL for FLUSHDB and
 * FLUSHALL), except that a key already stale when WATCHed is no change
 * when it goes or stays stale, and a missing key replaced by a stale one
 * becomes such a key. Watching a key that does not exist survives a
 * FLUSHALL. */
void kv_touch_flushed_db(kv_db *emptied, kv_db *replaced_with)
{
    if (!srv.watch_keys || dict_size(&emptied->watched) == 0)
        return;
    dict_iter it;
    dict_iter_init(&it, &emptied->watched);
    for (dict_node *n; (n = dict_iter_next(&it));) {
        kv_watch *w = (kv_watch *)(void *)n;
        bk_str key = { w->key, n->aux };
        int was_there = db_find(emptied, key) != NULL;
        kv_entry *next = replaced_with ? db_find(replaced_with, key) : NULL;
        if (!was_there && !next)
            continue;
        for (int i = 0; i < w->n; i++) {
            if (w->stale[i]) {
                if (!next) {
                    w->stale[i] = 0; /* the stale key went: no change */
                    continue;
                }
                if (db_expired(next))
                    continue; /* stale it stays */
            } else if (!was_there && db_expired(next)) {
                w->stale[i] = 1; /* nothing became a stale key */
                continue;
            }
            w->clients[i]->flags |= CLIENT_DIRTY_CAS;
        }
    }
    dict_iter_end(&it);
}

void multi_command(kv_client *c)
{
    if (c->flags & CLIENT_MULTI) {
        reply_error(c, "ERR MULTI calls can not be nested");
        return;
    }
    c->flags |= CLIENT_MULTI;
    reply_ok(c);
}

void kv_discard_transaction(kv_client *c)
{
    for (int i = 0; i < c->mcount; i++)
        kv_free(c->mq[i].argv);
    c->mcount = 0;
    c->flags &= ~(CLIENT_MULTI | CLIENT_DIRTY_EXEC);
    kv_unwatch_all(c);
}

void discard_command(kv_client *c)
{
    if (!(c->flags & CLIENT_MULTI)) {
        reply_error(c, "ERR DISCARD without MULTI");
        return;
    }
    kv_discard_transaction(c);
    reply_ok(c);
}

void exec_command(kv_client *c)
{
    if (!(c->flags & CLIENT_MULTI)) {
        reply_error(c, "ERR EXEC without MULTI");
        return;
    }
    if (c->flags & CLIENT_DIRTY_EXEC) {
        reply_error(c, "EXECABORT Transaction discarded because of previous errors.");
        kv_discard_transaction(c);
        return;
    }
    if (c->nwatched && watched_key_expired(c))
        c->flags |= CLIENT_DIRTY_CAS;
    if (c->flags & CLIENT_DIRTY_CAS) {
        kv_discard_transaction(c);
        reply_null_array(c);
        return;
    }
    kv_unwatch_all(c);
    /* Take the queue: commands run outside MULTI state. */
    kv_mcmd *mq = c->mq;
    int count = c->mcount;
    c->mq = NULL;
    c->mcount = c->mcap = 0;
    c->flags &= ~CLIENT_MULTI;
    reply_array(c, count);
    srv.aof_in_multi = 0;
    int saved = srv.aof_in_multi;
    srv.aof_in_multi = -1; /* armed: the first write emits MULTI */
    srv.blk_deny++; /* queued blocking commands answer at once */
    srv.in_exec++;
    for (int i = 0; i < count; i++) {
        kv_exec_command(c, mq[i].argc, mq[i].argv);
        kv_free(mq[i].argv);
    }
    srv.in_exec--;
    srv.blk_deny--;
    aof_exec_end();
    srv.aof_in_multi = saved;
    kv_free(mq);
}

void watch_command(kv_client *c)
{
    if (c->flags & CLIENT_MULTI) {
        reply_error(c, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    for (int i = 1; i < c->argc; i++)
        watch_key(c, c->argv[i]);
    reply_ok(c);
}

void unwatch_command(kv_client *c)
{
    kv_unwatch_all(c);
    reply_ok(c);
}
