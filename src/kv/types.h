/* Value types other than strings (which live inline in kv_entry) and the
 * command handlers of every type. */
#ifndef BRISK_KV_TYPES_H
#define BRISK_KV_TYPES_H

#include "kv/server.h"
#include "kv/skiplist.h"

/* ---- list: a ring of element pointers (O(1) push/pop/index at both ends) */
typedef struct kv_lelem {
    uint32_t len;
    char data[];
} kv_lelem;

typedef struct kv_list {
    kv_lelem **ring;
    size_t head, len, cap; /* cap is a power of two */
} kv_list;

kv_list *list_new(void);
void list_free(kv_list *l);
kv_list *list_dup(kv_list *l);
kv_lelem *lelem_new(const char *p, size_t n);
void list_push(kv_list *l, int tail, kv_lelem *e);
kv_lelem *list_pop(kv_list *l, int tail); /* caller frees with kv_free */
static inline kv_lelem *list_at(kv_list *l, size_t i) { return l->ring[(l->head + i) & (l->cap - 1)]; }
static inline void list_set_at(kv_list *l, size_t i, kv_lelem *e) { l->ring[(l->head + i) & (l->cap - 1)] = e; }
void list_remove_at(kv_list *l, size_t i); /* frees the element */
void list_insert_at(kv_list *l, size_t i, kv_lelem *e);

/* ---- hash: small hashes (within hash-max-listpack-entries/-value) keep
 * their fields and values in one buffer in insertion order, as Redis 7.0's
 * listpack; past a limit they move to a dict of fields (field and value in
 * one allocation) for good, in no particular order. */
typedef struct kv_hfield {
    dict_node node; /* aux = field length */
    uint32_t vlen, vcap;
    char data[]; /* field, then value */
} kv_hfield;

static inline bk_str hfield_name(kv_hfield *f) { return (bk_str){ f->data, f->node.aux }; }
static inline bk_str hfield_value(kv_hfield *f) { return (bk_str){ f->data + f->node.aux, f->vlen }; }

typedef struct kv_hash {
    dict *d;       /* the hashtable encoding; NULL while small */
    char *lp;      /* small: entries (tag, len, field, len, value) in order */
    uint32_t n;    /* small: number of fields */
    uint32_t used; /* small: bytes of lp in use */
} kv_hash;

kv_hash *hash_new(void);
void hash_free(kv_hash *h);
kv_hash *hash_dup(kv_hash *h); /* same encoding, same order */
static inline size_t hash_size(const kv_hash *h) { return h->d ? dict_size(h->d) : h->n; }
/* Whether Redis would hold it as a listpack (OBJECT ENCODING, DUMP). */
static inline int hash_is_small(const kv_hash *h) { return h->d == NULL; }
/* The dict of a hashtable-encoded hash, NULL while small. */
static inline dict *hash_dict(kv_hash *h) { return h->d; }
/* 1 and the value (valid until the hash changes; value may be NULL) when
 * the field is present, else 0. */
int hash_get(kv_hash *h, bk_str field, bk_str *value);
/* Returns 1 when the field is new, 0 when updated. May convert the hash
 * to a hashtable (limits read from the config at that moment). */
int hash_set(kv_hash *h, bk_str field, bk_str value);
int hash_del(kv_hash *h, bk_str field);
/* Bytes the hash holds (MEMORY USAGE), sampling samples fields (0: all). */
size_t hash_mem_bytes(kv_hash *h, long long samples);

/* Visits every field in order (insertion order while small). The hash
 * must not change during the walk. */
typedef struct {
    kv_hash *h;
    const char *p, *end;
    dict_iter di;
} hash_iter;
void hash_iter_init(hash_iter *it, kv_hash *h);
int hash_iter_next(hash_iter *it, bk_str *field, bk_str *value);
void hash_iter_end(hash_iter *it);

/* ---- set: dict of members. The dict's owner field keeps the encoding
 * Redis 7.0 would show: a set starts as an intset; adding a member that is
 * not a canonical integer, or growing past set-max-intset-entries, makes it
 * a hashtable for good (removing members never turns it back), as Redis's
 * setTypeAdd. */
enum { SET_HASHTABLE = 0, SET_INTSET = 1 };
typedef struct kv_smember {
    dict_node node; /* aux = length */
    char data[];
} kv_smember;

static inline bk_str smember_str(kv_smember *m) { return (bk_str){ m->data, m->node.aux }; }

dict *set_new(void);
void set_free(dict *s);
dict *set_dup(dict *s);
int set_add(dict *s, bk_str m);
int set_has(dict *s, bk_str m);
int set_del(dict *s, bk_str m);
static inline int set_is_intset(const dict *s) { return s->owner == SET_INTSET; }
/* The members of s sorted by value when s is an intset: a kv_malloc'd
 * array of dict_size(s) nodes, or NULL when s is a hashtable (or empty). */
dict_node **set_intset_nodes(dict *s);

/* ---- zset encoding (see zset.skiplist in skiplist.h), with the limits
 * zset-max-listpack-entries/-value read at the call */
/* After member was added as a new one (ZADD, ZINCRBY, GEOADD): skiplist
 * for good once the zset outgrows the limits. */
void zset_enc_added(zset *z, bk_str member);
/* A zset made afresh (results of the STORE commands): listpack iff within
 * the limits. */
void zset_enc_fit(zset *z);
/* A zset loaded from a listpack or ziplist: skiplist iff it has more
 * entries than the limit (the member lengths are not checked). */
void zset_enc_loaded_packed(zset *z);

/* OBJECT REFCOUNT's answer for e (INT_MAX for Redis's shared integers). */
long long object_refcount(kv_entry *e);

/* ---- command handlers ---- */
#define CMD(name) void name##_command(kv_client *c)
/* connection / server */
CMD(ping); CMD(echo); CMD(quit); CMD(select); CMD(dbsize); CMD(flushdb); CMD(flushall);
CMD(command); CMD(client); CMD(hello); CMD(auth); CMD(info); CMD(config); CMD(time);
CMD(lastsave); CMD(bgrewriteaof); CMD(shutdown); CMD(reset); CMD(debug); CMD(memory);
CMD(save); CMD(bgsave); CMD(swapdb); CMD(move); CMD(role); CMD(readonly_noop);
CMD(wait); CMD(function); CMD(sync); CMD(replicaof);
/* pub/sub */
CMD(subscribe); CMD(unsubscribe); CMD(psubscribe); CMD(punsubscribe); CMD(publish); CMD(pubsub);
/* transactions */
CMD(multi); CMD(exec); CMD(discard); CMD(watch); CMD(unwatch);
/* keys */
CMD(del); CMD(unlink); CMD(exists); CMD(type); CMD(expire); CMD(pexpire); CMD(expireat); CMD(pexpireat);
CMD(ttl); CMD(pttl); CMD(expiretime); CMD(pexpiretime); CMD(persist); CMD(keys); CMD(scan);
CMD(rename); CMD(renamenx); CMD(randomkey); CMD(copy); CMD(object); CMD(touch);
/* strings */
CMD(get); CMD(set); CMD(setnx); CMD(setex); CMD(psetex); CMD(getset); CMD(getdel); CMD(getex);
CMD(mget); CMD(mset); CMD(msetnx); CMD(incr); CMD(decr); CMD(incrby); CMD(decrby);
CMD(incrbyfloat); CMD(append); CMD(strlen); CMD(getrange); CMD(setrange); CMD(substr);
/* hashes */
CMD(hset); CMD(hsetnx); CMD(hget); CMD(hmget); CMD(hdel); CMD(hgetall); CMD(hincrby);
CMD(hincrbyfloat); CMD(hexists); CMD(hlen); CMD(hkeys); CMD(hvals); CMD(hscan); CMD(hstrlen);
CMD(hrandfield); CMD(hmset);
/* lists */
CMD(lpush); CMD(rpush); CMD(lpushx); CMD(rpushx); CMD(lpop); CMD(rpop); CMD(lrange);
CMD(llen); CMD(lindex); CMD(lset); CMD(lrem); CMD(ltrim); CMD(linsert); CMD(lpos);
CMD(rpoplpush); CMD(lmove);
/* sets */
CMD(sadd); CMD(srem); CMD(smembers); CMD(sismember); CMD(smismember); CMD(scard); CMD(spop);
CMD(srandmember); CMD(sinter); CMD(sunion); CMD(sdiff); CMD(sinterstore); CMD(sunionstore);
CMD(sdiffstore); CMD(smove); CMD(sscan); CMD(sintercard);
/* sorted sets */
CMD(zadd); CMD(zincrby); CMD(zscore); CMD(zmscore); CMD(zcard); CMD(zcount); CMD(zlexcount);
CMD(zrank); CMD(zrevrank); CMD(zrange); CMD(zrangebyscore); CMD(zrevrangebyscore);
CMD(zrangebylex); CMD(zrevrangebylex); CMD(zrevrange); CMD(zrem); CMD(zremrangebyrank);
CMD(zremrangebyscore); CMD(zremrangebylex); CMD(zpopmin); CMD(zpopmax); CMD(zrandmember);
CMD(zunionstore); CMD(zinterstore); CMD(zscan); CMD(zrangestore);
/* -- handlers: blocking -- */
CMD(blpop); CMD(brpop); CMD(blmove); CMD(brpoplpush); CMD(blmpop); CMD(lmpop);
CMD(bzpopmin); CMD(bzpopmax); CMD(bzmpop); CMD(zmpop);
/* -- end blocking -- */
/* -- handlers: bitops -- */
CMD(setbit); CMD(getbit); CMD(bitcount); CMD(bitpos); CMD(bitop); CMD(bitfield);
CMD(bitfield_ro); CMD(pfadd); CMD(pfcount); CMD(pfmerge); CMD(pfdebug); CMD(pfselftest);
/* -- end bitops -- */
/* -- handlers: geo -- */
CMD(geoadd); CMD(geopos); CMD(geohash); CMD(geodist); CMD(georadius); CMD(georadius_ro);
CMD(georadiusbymember); CMD(georadiusbymember_ro); CMD(geosearch); CMD(geosearchstore);
CMD(sort); CMD(sort_ro);
/* -- end geo -- */
/* -- handlers: dump -- */
CMD(dump); CMD(restore); CMD(migrate);
/* -- end dump -- */
/* -- handlers: client -- */
CMD(monitor);
/* -- end client -- */
/* -- handlers: acl -- */
CMD(acl);
/* -- end acl -- */
/* -- handlers: misc -- */
CMD(zunion); CMD(zinter); CMD(zdiff); CMD(zdiffstore); CMD(zintercard); CMD(lcs);
/* The COUNT of SRANDMEMBER/HRANDFIELD/ZRANDMEMBER, in the range Redis
 * accepts; replies the error and returns -1. */
int arg_rand_count(kv_client *c, bk_str s, long long *count);
/* WITHVALUES/WITHSCORES: Redis halves the range (two replies each). */
int rand_pairs_check(kv_client *c, long long count);
/* Refuses (replies, returns -1) a negative count too large to answer,
 * unless a small hard output buffer limit of c's class stops the reply. */
int rand_draws_check(kv_client *c, long long count);
/* Asked at every draw i of a negative count: 1 when the reply went over an
 * output buffer limit and the loop stops (c is closed), as Redis stops. */
static inline int rand_draws_stop(kv_client *c, long long i)
{
    return (i & 1023) == 1023 && kv_client_obuf_over(c);
}
/* Uniform draws with replacement from a dict that must not change while
 * the picker is in use. */
typedef struct {
    dict *d;
    dict_node **all; /* every node, when many draws make it worth it */
    size_t n;
} rand_picker;
void rand_picker_init(rand_picker *p, dict *d, unsigned long long draws);
dict_node *rand_picker_next(rand_picker *p);
void rand_picker_end(rand_picker *p);
/* Distinct uniform picks without copying the collection, for counts of at
 * most a third of its size (RAND_FEW_DISTINCT): count nodes of d, or count
 * ranks in 1..size. Cheaper than a shuffle of every element beyond that. */
#define RAND_FEW_DISTINCT(count, size) ((count) * 3 <= (size))
void rand_distinct_nodes(dict *d, dict_node **out, size_t count);
void rand_distinct_ranks(size_t size, size_t *out, size_t count);
/* -- end misc -- */
/* -- handlers: notify -- */
CMD(ssubscribe); CMD(sunsubscribe); CMD(spublish); CMD(slowlog); CMD(latency);
/* -- end notify -- */
/* -- handlers: stream -- */
CMD(xadd); CMD(xlen); CMD(xrange); CMD(xrevrange); CMD(xdel); CMD(xtrim); CMD(xread);
CMD(xreadgroup); CMD(xsetid); CMD(xinfo); CMD(xgroup); CMD(xack); CMD(xpending); CMD(xclaim);
CMD(xautoclaim);
/* -- end stream -- */
/* -- handlers: script -- */
CMD(eval); CMD(evalsha); CMD(eval_ro); CMD(evalsha_ro); CMD(script); CMD(fcall); CMD(fcall_ro);
/* -- end script -- */
/* -- handlers: suite -- */
CMD(cluster); CMD(asking); CMD(readwrite); CMD(module);
/* -- end suite -- */
/* -- handlers: repl -- */
CMD(replconf); CMD(lolwut);
CMD(failover);
/* -- end repl -- */
#undef CMD

/* Helpers shared by command files. */
int arg_ll(kv_client *c, bk_str s, long long *v);           /* replies on error */
int arg_ll_msg(kv_client *c, bk_str s, long long *v, const char *msg);
int arg_double(kv_client *c, bk_str s, double *v);          /* replies on error */
/* Looks up a key that must hold `type`: NULL when missing, KV_WRONGTYPE
 * (after replying the error) when it holds another type. */
#define KV_WRONGTYPE ((kv_entry *)(uintptr_t)1)
kv_entry *lookup_typed(kv_client *c, bk_str key, int type, int write);
/* Generic SCAN over a dict with MATCH/COUNT/(TYPE), cursor at argv[cur]. */
void scan_generic(kv_client *c, dict *d, int cur, int kind);
int scan_parse_cursor(kv_client *c, bk_str s, uint64_t *out);
void reply_scan_cursor_kv(kv_client *c, size_t cursor);
/* The value of the key as a string, for STRING entries. */
static inline bk_str entry_str(kv_entry *e) { return (bk_str){ entry_val(e), entry_vlen(e) }; }
/* A write to the keyspace happened: counts it for AOF propagation. */
static inline void kv_dirty(long long n) { srv.dirty += (uint64_t)n; }
/* Replaces the argv that will be written to the AOF for this command. */
void kv_propagate_as(kv_client *c, int argc, const bk_str *argv);

#endif
