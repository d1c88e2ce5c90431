/* Keyspace notifications (Redis's notify-keyspace-events).
 *
 * A command that changed a key calls, once, after the change:
 *
 *     kv_notify(db, NOTIFY_LIST, "lpush", key);
 *
 * which publishes, when the class is enabled, "__keyspace@<db>__:<key>"
 * with the event name as message (K) and "__keyevent@<db>__:<event>" with
 * the key as message (E), in that order, to channel and pattern
 * subscribers. When notifications are off (the default) the call is one
 * test of srv.notify_flags, inlined at the call site.
 *
 * Classes (the letters of notify-keyspace-events):
 *   NOTIFY_GENERIC  g  del, expire, persist, rename_from/_to, move_from/_to,
 *                      copy_to, restore, ...
 *   NOTIFY_STRING   $  set, setrange, append, incrby, incrbyfloat, ...
 *   NOTIFY_LIST     l  lpush, rpush, lpop, rpop, linsert, lset, lrem, ltrim
 *   NOTIFY_SET      s  sadd, srem, spop, sinterstore, sunionstore, ...
 *   NOTIFY_HASH     h  hset, hdel, hincrby, hincrbyfloat
 *   NOTIFY_ZSET     z  zadd, zincr, zrem, zrembyscore, zunionstore, ...
 *   NOTIFY_EXPIRED  x  expired (a key deleted because its TTL passed)
 *   NOTIFY_EVICTED  e  evicted (a key deleted by maxmemory)
 *   NOTIFY_STREAM   t  (streams)
 *   NOTIFY_KEY_MISS m  keymiss (a read lookup found no key; not part of A)
 *   NOTIFY_MODULE   d  (modules)
 *   NOTIFY_NEW      n  new (a key was added to the keyspace; not part of A)
 * plus NOTIFY_KEYSPACE (K) and NOTIFY_KEYEVENT (E) choosing the channels.
 * Event names are Redis's exact strings: clients match on them.
 *
 * The event string must stay valid for the call; key may point into the
 * entry (it is copied before kv_notify returns). Main thread only. */
#ifndef BRISK_KV_NOTIFY_H
#define BRISK_KV_NOTIFY_H

#include "kv/server.h"

#include <stddef.h>

enum {
    NOTIFY_KEYSPACE = 1 << 0, /* K */
    NOTIFY_KEYEVENT = 1 << 1, /* E */
    NOTIFY_GENERIC = 1 << 2,  /* g */
    NOTIFY_STRING = 1 << 3,   /* $ */
    NOTIFY_LIST = 1 << 4,     /* l */
    NOTIFY_SET = 1 << 5,      /* s */
    NOTIFY_HASH = 1 << 6,     /* h */
    NOTIFY_ZSET = 1 << 7,     /* z */
    NOTIFY_EXPIRED = 1 << 8,  /* x */
    NOTIFY_EVICTED = 1 << 9,  /* e */
    NOTIFY_STREAM = 1 << 10,  /* t */
    NOTIFY_KEY_MISS = 1 << 11, /* m */
    NOTIFY_LOADED = 1 << 12,  /* modules only, no letter */
    NOTIFY_MODULE = 1 << 13,  /* d */
    NOTIFY_NEW = 1 << 14,     /* n */
    /* A: every class but m and n */
    NOTIFY_ALL = NOTIFY_GENERIC | NOTIFY_STRING | NOTIFY_LIST | NOTIFY_SET | NOTIFY_HASH |
                 NOTIFY_ZSET | NOTIFY_EXPIRED | NOTIFY_EVICTED | NOTIFY_STREAM | NOTIFY_MODULE,
};

void kv_notify_publish(kv_db *db, int cls, const char *event, bk_str key);

static inline void kv_notify(kv_db *db, int cls, const char *event, bk_str key)
{
    if (BK_UNLIKELY(srv.notify_flags & cls))
        kv_notify_publish(db, cls, event, key);
}

/* CONFIG SET/GET of notify-keyspace-events: parses the letters (-1 on an
 * unknown one), and writes Redis's normalised form (A for all, then K, E,
 * m) into out. */
int kv_notify_parse(const char *s, size_t len);
void kv_notify_format(int flags, char *out, size_t n);

#endif
