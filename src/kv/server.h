/* brisk-kv: shared definitions of the server, its clients, the keyspace
 * and the command table. One thread (the loop's) owns all of it. */
#ifndef BRISK_KV_SERVER_H
#define BRISK_KV_SERVER_H

#include "core/buf.h"
#include "core/common.h"
#include "core/loop.h"
#include "kv/dict.h"
#include "kv/keytab.h"
#include "kv/resp.h"

#include <pthread.h>
#include <sys/socket.h>
#include <stdint.h>
#include <sys/types.h>

#define KV_VERSION "7.2.0"
#define KV_MAX_BIND 16
#define KV_DEFAULT_DBS 16
#define KV_LRU_MS 10 /* LRU clock tick; 28 bits of it wrap after 31 days */

/* ---- values ---- */

enum kv_type { KV_STRING = 0, KV_LIST = 1, KV_SET = 2, KV_ZSET = 3, KV_HASH = 4, KV_STREAM = 5 };

/* One key of the keyspace, in one allocation (a slab slot up to SLAB_MAX
 * bytes, kv_malloc beyond), laid out without padding:
 *
 *   lru:28 type:4 | flags | [expire i64, vidx u32] | klen varint | key |
 *   strings: vlen varint, value bytes;  other types: the object pointer
 *
 * The bracketed TTL block is there only when flags has ENTRY_EXPIRES (the
 * key has a TTL and is in db->vol at vidx - 1). Lengths are LEB128 varints,
 * one byte each below 128. Unaligned fields are read with memcpy. The
 * capacity for a string is what the allocation holds past the key: a SET of
 * a value that fits is a copy, no allocation.
 *
 * Entry pointers are valid until the next change to that key: growing a
 * string or adding a TTL may move the entry (the functions that may move
 * one return the new pointer). */
typedef struct kv_entry {
    uint32_t lru : 28, type : 4;
    uint8_t flags;
    unsigned char data[];
} kv_entry;

/* flags: ENTRY_EXPIRES, ENTRY_HEAP (kv_malloc'd), and in the top six bits
 * the slab class of the slot (so its size is known without the page). */
enum { ENTRY_EXPIRES = 1u << 0, ENTRY_HEAP = 1u << 1 };
#define ENTRY_CLASS_SHIFT 2
#define ENTRY_HDR offsetof(kv_entry, data)
#define ENTRY_TTL_BYTES 12

static inline size_t kv_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline size_t kv_varint_put(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

static inline uint64_t kv_varint_get(const unsigned char *p, size_t *n)
{
    if (LIKELY(p[0] < 0x80)) {
        *n = 1;
        return p[0];
    }
    uint64_t v = 0;
    size_t i = 0;
    unsigned shift = 0;
    do {
        v |= (uint64_t)(p[i] & 0x7f) << shift;
        shift += 7;
    } while (p[i++] & 0x80);
    *n = i;
    return v;
}

static inline unsigned char *entry_kpos(const kv_entry *e)
{
    return (unsigned char *)e->data + ((e->flags & ENTRY_EXPIRES) ? ENTRY_TTL_BYTES : 0);
}
static inline str entry_key_str(const kv_entry *e)
{
    const unsigned char *p = entry_kpos(e);
    size_t n;
    size_t len = (size_t)kv_varint_get(p, &n);
    return (str){ (const char *)p + n, len };
}
static inline char *entry_key(kv_entry *e) { return (char *)entry_key_str(e).p; }
static inline size_t entry_klen(const kv_entry *e) { return entry_key_str(e).len; }
/* Where the value area starts: the vlen varint of a string, the object
 * pointer of other types. */
static inline unsigned char *entry_vpos(const kv_entry *e)
{
    str k = entry_key_str(e);
    return (unsigned char *)k.p + k.len;
}
static inline size_t entry_vlen(const kv_entry *e)
{
    size_t n;
    return (size_t)kv_varint_get(entry_vpos(e), &n);
}
static inline char *entry_val(const kv_entry *e)
{
    unsigned char *p = entry_vpos(e);
    size_t n;
    kv_varint_get(p, &n);
    return (char *)p + n;
}
static inline void *entry_obj(const kv_entry *e)
{
    void *p;
    memcpy(&p, entry_vpos(e), sizeof p);
    return p;
}
static inline void entry_set_obj(kv_entry *e, void *p) { memcpy(entry_vpos(e), &p, sizeof p); }
static inline int64_t entry_expire(const kv_entry *e)
{
    int64_t v = 0;
    if (e->flags & ENTRY_EXPIRES)
        memcpy(&v, e->data, sizeof v);
    return v;
}
static inline uint32_t entry_vidx(const kv_entry *e)
{
    uint32_t v = 0;
    if (e->flags & ENTRY_EXPIRES)
        memcpy(&v, e->data + 8, sizeof v);
    return v;
}

typedef struct kv_db {
    int id;
    keytab keys;    /* kv_entry items */
    kv_entry **vol; /* keys with a TTL, for sampling */
    size_t vol_len, vol_cap;
    dict watched;   /* key -> clients WATCHing it */
} kv_db;

/* ---- clients ---- */

enum {
    CLIENT_CLOSE_AFTER_REPLY = 1u << 0,
    CLIENT_CLOSE_ASAP = 1u << 1,
    CLIENT_PENDING_WRITE = 1u << 2,
    CLIENT_MULTI = 1u << 3,
    CLIENT_DIRTY_CAS = 1u << 4,
    CLIENT_DIRTY_EXEC = 1u << 5,
    CLIENT_FAKE = 1u << 6, /* AOF loading: replies are dropped */
    CLIENT_AUTHED = 1u << 7,
    CLIENT_CLOSED = 1u << 8,
    CLIENT_PROTO_ERROR = 1u << 9,
    CLIENT_NO_PROPAGATE = 1u << 10,
};

typedef struct kv_mcmd {
    const struct kv_cmd *cmd;
    int argc;
    str *argv; /* argv and the bytes in one allocation */
} kv_mcmd;

typedef struct kv_client kv_client;
struct kv_client {
    loop_io io;
    uint64_t id;
    int fd;
    unsigned flags;
    int resp;
    kv_db *db;
    buf rbuf;
    resp_parser parser;
    buf wbuf;
    size_t wpos;
    int argc;
    str *argv;
    size_t argv_cap;
    const struct kv_cmd *cmd, *lastcmd;
    kv_client *next_pending;
    kv_client *prev, *next;
    kv_client *next_free;
    char *name, *lib_name, *lib_ver;
    char addr[64], laddr[64];
    int64_t ctime_ms, last_ms;
    kv_mcmd *mq;
    int mcount, mcap;
    struct kv_watch **watched;
    int nwatched, watched_cap;
    int64_t obuf_soft_since;
    /* replacement argv for the AOF (set by a handler, NULL = as received) */
    int prop_argc, prop_cap;
    str *prop_argv;
    buf prop_buf;
    struct kv_subs *subs; /* Pub/Sub subscriptions, NULL when none yet */
    /* -- client fields: blocking -- */
    /* -- end blocking -- */
    /* -- client fields: bitops -- */
    /* -- end bitops -- */
    /* -- client fields: geo -- */
    /* -- end geo -- */
    /* -- client fields: dump -- */
    /* -- end dump -- */
    /* -- client fields: client -- */
    /* -- end client -- */
    /* -- client fields: acl -- */
    /* -- end acl -- */
    /* -- client fields: misc -- */
    /* -- end misc -- */
    /* -- client fields: notify -- */
    /* -- end notify -- */
/* -- declarations: stream -- */
/* -- end stream -- */
/* -- declarations: script -- */
/* -- end script -- */
    /* -- server fields: stream -- */
    /* -- end stream -- */
    /* -- server fields: script -- */
    /* -- end script -- */
    /* -- client fields: stream -- */
    /* -- end stream -- */
    /* -- client fields: script -- */
    /* -- end script -- */
};

/* ---- commands ---- */

enum {
    CMD_WRITE = 1u << 0,
    CMD_READONLY = 1u << 1,
    CMD_DENYOOM = 1u << 2,
    CMD_ADMIN = 1u << 3,
    CMD_PUBSUB = 1u << 4,
    CMD_NOSCRIPT = 1u << 5,
    CMD_LOADING = 1u << 6,
    CMD_STALE = 1u << 7,
    CMD_FAST = 1u << 8,
    CMD_NO_AUTH = 1u << 9,
    CMD_NO_MULTI = 1u << 10, /* runs at once even inside MULTI */
    CMD_ALLOW_BUSY = 1u << 11,
};

typedef void (*kv_cmd_proc)(kv_client *c);

typedef struct kv_cmd {
    const char *name; /* lower case */
    int arity;        /* > 0 exact, < 0 at least -arity */
    unsigned flags;
    kv_cmd_proc proc;
    int first_key, last_key, key_step;
    const char *group;
    const char *summary;
    const char *since;
    const char *complexity;
    const char *acl; /* "@keyspace @read @fast" style */
} kv_cmd;

/* Per command. Commands flagged CMD_FAST are timed one call in 16 (two
 * clock reads, ~40 ns on the test VM, cost more than a GET's own work);
 * the others every time. INFO scales the timed ticks to all calls. */
typedef struct kv_cmd_stats {
    uint64_t calls, rejected, failed;
    uint64_t ticks, timed; /* kv_ticks spent in the timed calls, and their number */
} kv_cmd_stats;

#define KV_OPS_SAMPLES 16

/* ---- server ---- */

enum kv_fsync { FSYNC_ALWAYS, FSYNC_EVERYSEC, FSYNC_NO };
enum kv_policy {
    MM_NOEVICTION,
    MM_ALLKEYS_LRU,
    MM_VOLATILE_LRU,
    MM_ALLKEYS_RANDOM,
    MM_VOLATILE_RANDOM,
    MM_VOLATILE_TTL,
};

typedef struct kv_config {
    int port;
    char *bind[KV_MAX_BIND];
    int nbind;
    char *dir;
    int appendonly;
    enum kv_fsync appendfsync;
    char *appendfilename;
    char *requirepass;
    uint64_t maxclients;
    uint64_t maxmemory;
    enum kv_policy maxmemory_policy;
    int maxmemory_samples;
    int databases;
    uint64_t proto_max_bulk_len;
    uint64_t hll_sparse_max_bytes; /* a sparse HyperLogLog larger turns dense */
    uint64_t obuf_hard, obuf_soft, obuf_soft_secs;
    int hz;
    uint64_t auto_aof_rewrite_pct, auto_aof_rewrite_min;
    int aof_load_truncated;
    int loglevel;
    char *logfile;
    char *save;
    int daemonize;
    uint64_t timeout;
    int tcp_backlog;
    int active_expire_effort;
    int protected_mode; /* refuse non-loopback clients while no password is set */
    int busy_poll_us;   /* loop_set_busy_poll; 0 = off */
} kv_config;

typedef struct kv_server {
    kv_config cfg;
    loop loop;
    loop_io listen_io[KV_MAX_BIND];
    int nlisten;
    kv_db *dbs;
    kv_client *clients; /* all connected clients */
    uint64_t nclients;
    uint64_t next_client_id;
    kv_client *pending;  /* clients with output to flush at batch end */
    kv_client *to_free;  /* closed clients freed at batch end */
    kv_client *current;  /* client running a command */
    int64_t now_ms;      /* cached wall clock for this batch */
    uint32_t lru_clock;  /* KV_LRU_MS ticks, for LRU */
    int64_t start_ms;
    uint64_t dirty;      /* changes since start (for AOF propagation) */
    uint64_t watch_keys; /* WATCHed keys across dbs */
    timer cron;
    uint64_t cronloops;
    int shutdown_asap;
    int loading;
    /* stats */
    uint64_t stat_conns, stat_cmds, stat_expired, stat_evicted, stat_rejected_conns;
    uint64_t stat_hits, stat_misses, stat_net_in, stat_net_out, stat_errors;
    uint64_t stat_expire_cycles_cpu_ms;
    kv_cmd_stats *cmd_stats;
    /* instantaneous_*: per-second rates over the last KV_OPS_SAMPLES cron
     * ticks (commands, bytes in, bytes out) */
    struct {
        int64_t last_ms;
        uint64_t last[3];
        double rate[3][KV_OPS_SAMPLES];
        int idx;
    } inst;
    dict channels, patterns; /* Pub/Sub: name -> kv_chan (pubsub.h) */
    /* AOF */
    int aof_fd;
    int aof_state; /* 0 off, 1 on, 2 waiting for the first rewrite */
    int aof_selected_db;
    buf aof_buf;
    buf aof_rewrite_buf;
    int aof_in_multi; /* MULTI already written for the running EXEC */
    pid_t child_pid;
    char *child_tmpfile;
    int64_t aof_rewrite_start_ms;
    uint64_t aof_rewrites, aof_current_size, aof_base_size;
    int aof_last_write_ok;
    int aof_rewrite_scheduled;
    int64_t lastsave;
    int aof_last_bgrewrite_ok;
    pthread_t fsync_thread;
    int fsync_thread_started;
    pthread_mutex_t fsync_mu;
    pthread_cond_t fsync_cv;
    int fsync_stop;
    int fsync_pending;
    int64_t aof_last_fsync_ms;
    char *aof_path;
    char *executable;
    char *config_file;
    /* -- server fields: blocking -- */
    /* -- end blocking -- */
    /* -- server fields: bitops -- */
    /* -- end bitops -- */
    /* -- server fields: geo -- */
    /* -- end geo -- */
    /* -- server fields: dump -- */
    /* -- end dump -- */
    /* -- server fields: client -- */
    /* -- end client -- */
    /* -- server fields: acl -- */
    /* -- end acl -- */
    /* -- server fields: misc -- */
    /* -- end misc -- */
    /* -- server fields: notify -- */
    /* -- end notify -- */
/* -- declarations: stream -- */
/* -- end stream -- */
/* -- declarations: script -- */
/* -- end script -- */
    /* -- server fields: stream -- */
    timer stream_orphan_timer; /* checks XREADGROUP waiters whose stream went away */
    /* -- end stream -- */
    /* -- server fields: script -- */
    /* -- end script -- */
    /* -- client fields: stream -- */
    /* -- end stream -- */
    /* -- client fields: script -- */
    /* -- end script -- */
} kv_server;

extern kv_server srv;

/* server.c */
int kv_server_main(int argc, char **argv);
void kv_client_close(kv_client *c);
void kv_call(kv_client *c);
kv_client *kv_client_new_fake(void);
void kv_client_free_fake(kv_client *c);
const kv_cmd *kv_cmd_lookup(str name);
/* Whether a peer address is this host: 127.0.0.0/8, ::1, ::ffff:127.x or
 * a Unix socket (the clients protected mode lets in). */
int kv_peer_is_local(const struct sockaddr *sa);
/* Whether a new client from sa must be refused by protected mode. */
int kv_protected_refuses(const kv_config *cfg, const struct sockaddr *sa);
int kv_exec_command(kv_client *c, int argc, str *argv);
void kv_touch_key(kv_db *db, str key);
void kv_touch_db(kv_db *db);
void kv_unwatch_all(kv_client *c);
str kv_watch_key_fn(const dict_node *n);
void kv_client_set_db(kv_client *c, int id);
int kv_client_info(kv_client *c, buf *out);
void kv_flush_clients(void);
/* Output was added to c by another client's command (a Pub/Sub message):
 * schedules the write and applies the output buffer limits. */
void kv_client_output_added(kv_client *c);
/* Per-second rate over the last samples: 0 commands, 1 bytes in, 2 out. */
double kv_instantaneous(int what);

/* -- declarations: blocking -- */
/* -- end blocking -- */
/* -- declarations: bitops -- */
/* -- end bitops -- */
/* -- declarations: geo -- */
/* Key positions (argv indexes, into pos[3]) of the commands whose keys
 * depend on their options: SORT's STORE, GEORADIUS's STORE/STOREDIST.
 * Returns the number of keys, or -1 when cmd has fixed key positions. */
int kv_movable_keys(const kv_cmd *cmd, int argc, const str *argv, int *pos);
/* Sorts base[0..n) (elements of es bytes) enough that [first, last] holds
 * what a full sort puts there, with Redis's partial quicksort (sort.c):
 * equal elements end up where Redis puts them. */
typedef int kv_cmp_fn(const void *a, const void *b, void *ud);
void kv_pqsort(void *base, size_t n, size_t es, kv_cmp_fn *cmp, void *ud, size_t first,
               size_t last);
/* -- end geo -- */
/* -- declarations: dump -- */
/* -- end dump -- */
/* -- declarations: client -- */
/* -- end client -- */
/* -- declarations: acl -- */
/* -- end acl -- */
/* -- declarations: misc -- */
/* -- end misc -- */
/* -- declarations: notify -- */
/* -- end notify -- */
/* -- declarations: stream -- */
/* The numeric value of a compatibility option (config.c), or dflt. */
long long kv_config_noop_ll(const char *name, long long dflt);
struct kv_stream;
/* Emits the commands that rebuild a stream (AOF rewrite, t_stream.c). */
void stream_rewrite(struct kv_stream *s, str key, void (*emit)(void *ud, int argc, const str *argv),
                    void *ud);
/* -- end stream -- */
/* -- declarations: script -- */
/* -- end script -- */

/* cmdtable.c */
extern const kv_cmd kv_commands[];
extern const size_t kv_ncommands;

#endif
