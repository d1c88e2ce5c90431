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

/* srv.script_timedout while the start-up load serves clients. */
#define KV_BUSY_LOADING 2
/* Set while the dataset loads at start-up: the loaders call
 * kv_loading_progress(bytes read) per key or command, and every
 * loading-process-events-interval-bytes the clients are served (PING,
 * INFO, ... answer; the rest get LOADING), as Redis. */
extern int kv_loading_serve;
void kv_loading_progress(size_t done);
/* The size of what a start-up load reads; INFO's loading_* lines. */
void kv_loading_begin(size_t total);
void kv_loading_info(bk_buf *b);
#define KV_VERSION "7.2.0"
#define KV_MAX_BIND 16
#define KV_DEFAULT_DBS 16
#define KV_REPLY_CHUNK (16 * 1024)  /* Redis's reply buffer to start with */
#define KV_RB_PEAK_RESET_MS 5000    /* how often the reply buffer peak restarts */
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
    /* raw: a string changed in place (APPEND, SETRANGE, SETBIT, BITFIELD,
     * BITOP's result, HyperLogLog), which Redis holds as a raw sds whatever
     * its content (OBJECT ENCODING raw) until a SET replaces it. */
    uint32_t lru : 28, type : 3, raw : 1;
    uint8_t flags;
    unsigned char data[];
} kv_entry;

/* flags: ENTRY_EXPIRES, ENTRY_EMBSTR, and in the top six bits the slab
 * class of the slot (so its size is known without the page), or
 * ENTRY_HEAP_CLASS for an entry kv_malloc'd past SLAB_MAX.
 * ENTRY_EMBSTR: a string INCRBYFLOAT wrote, which Redis builds from a long
 * double as an embstr (raw past 44 bytes) even when it reads as an integer
 * ("3"), so OBJECT ENCODING shows embstr, not int, until the value is
 * replaced (entry->raw, set later by APPEND and the like, wins over it). */
enum { ENTRY_EXPIRES = 1u << 0, ENTRY_EMBSTR = 1u << 1 };
#define ENTRY_CLASS_SHIFT 2
#define ENTRY_HEAP_CLASS 0x3fu
static inline int entry_on_heap(const kv_entry *e)
{
    return (e->flags >> ENTRY_CLASS_SHIFT) == ENTRY_HEAP_CLASS;
}
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
    if (BK_LIKELY(p[0] < 0x80)) {
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
static inline bk_str entry_key_str(const kv_entry *e)
{
    const unsigned char *p = entry_kpos(e);
    size_t n;
    size_t len = (size_t)kv_varint_get(p, &n);
    return (bk_str){ (const char *)p + n, len };
}
static inline char *entry_key(kv_entry *e) { return (char *)entry_key_str(e).p; }
static inline size_t entry_klen(const kv_entry *e) { return entry_key_str(e).len; }
/* Where the value area starts: the vlen varint of a string, the object
 * pointer of other types. */
static inline unsigned char *entry_vpos(const kv_entry *e)
{
    bk_str k = entry_key_str(e);
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
    bk_str *argv; /* argv and the bytes in one allocation */
} kv_mcmd;

typedef struct kv_client kv_client;
struct kv_client {
    bk_io io;
    uint64_t id;
    int fd;
    unsigned flags;
    int resp;
    kv_db *db;
    bk_buf rbuf;
    resp_parser parser;
    bk_buf wbuf;
    size_t wpos;
    int argc;
    bk_str *argv;
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
    bk_str *prop_argv;
    bk_buf prop_buf;
    struct kv_subs *subs; /* Pub/Sub subscriptions, NULL when none yet */
    /* -- client fields: blocking -- */
    int blocked;                 /* parked by a blocking command (blocking.h) */
    int resume_pending;          /* in srv.blk_resume */
    struct kv_bstate *bstate;    /* NULL until the client first blocks */
    kv_client *next_resume;
    /* -- end blocking -- */
    /* -- client fields: bitops -- */
    /* -- end bitops -- */
    /* -- client fields: geo -- */
    /* -- end geo -- */
    /* -- client fields: dump -- */
    /* -- end dump -- */
    /* -- client fields: client -- */
    unsigned cl_flags;          /* CL_* of t_client.c: REPLY OFF/SKIP, tracking, MONITOR, held */
    char cl_lastsub[24];        /* subcommand of lastcmd when it is a container ("list") */
    uint64_t trk_redir;         /* CLIENT TRACKING REDIRECT id, 0 = none */
    kv_client *trk_target;      /* the client trk_redir names; NULL once it closed */
    struct kv_trk_prefix **trk_prefixes; /* BCAST prefixes of this client, sorted */
    int trk_nprefixes, trk_prefixes_cap;
    kv_client *held_next;       /* in srv.held while CLIENT PAUSE holds its command */
    size_t cl_qb_peak;          /* largest query buffer since the last cron resize */
    /* The reply buffer Redis gives every client (CLIENT LIST rbs/rbp, resized
     * by the cron): the output buffer is cut back to rb_size once idle. */
    size_t rb_size;             /* its size: 16 KiB to start with, 1 KiB at least */
    size_t rb_peak;             /* most bytes of replies waiting at once (<= rb_size) */
    int64_t rb_peak_reset_ms;   /* when rb_peak was last reset */
    /* -- end client -- */
    /* -- client fields: acl -- */
    struct kv_acl_user *user; /* NULL: may run anything (AOF loading) */
    /* -- end acl -- */
    /* -- client fields: tls -- */
    struct kv_tls_client *tls; /* NULL: plain TCP (tls_kv.c) */
    /* -- end tls -- */
    /* -- client fields: misc -- */
    int ldb_mode;              /* SCRIPT DEBUG: LDB_FORK / LDB_SYNC (script_ldb.h), 0 = off */
    /* -- end misc -- */
    /* -- client fields: cevict -- */
    size_t cev_multi;           /* bytes of the queued MULTI commands (valid while mcount) */
    size_t cev_mem;             /* its memory in the clients' total, as last accounted */
    /* -- end cevict -- */
    /* -- client fields: notify -- */
    /* -- end notify -- */
/* -- declarations: stream -- */
/* -- end stream -- */
/* -- declarations: script -- */
/* -- end script -- */
/* -- declarations: repl -- */
/* -- end repl -- */
    /* -- server fields: stream -- */
    /* -- end stream -- */
    /* -- server fields: script -- */
    /* -- end script -- */
/* -- declarations: repl -- */
/* -- end repl -- */
    /* -- server fields: repl -- */
    /* -- end repl -- */
    /* -- client fields: repl -- */
    unsigned repl_flags;        /* REPL_C_* of replication.h; 0 for ordinary clients */
    int repl_state;             /* a replica of ours: wait_bgsave / send_bulk / online */
    int repl_listen_port;       /* REPLCONF listening-port */
    unsigned repl_capa;         /* REPLCONF capa eof / psync2 */
    long long repl_ack_off;     /* last REPLCONF ACK offset */
    int64_t repl_ack_ms;
    int64_t repl_wait_since;    /* WAIT_BGSAVE_START since (diskless delay) */
    size_t repl_mark;           /* master link: consumed input already counted */
    long long repl_wait_off;    /* WAIT: the offset to be acknowledged */
    long long repl_wait_num;
    int64_t repl_wait_deadline; /* 0 = no timeout */
    char repl_ip[46];           /* REPLCONF ip-address, else the peer address */
    int repl_outq;              /* full sync by the child: unsent bytes seen last */
    int64_t repl_outq_ms;       /* and when they last moved */
    struct repl_relay *repl_relay; /* a TLS replica's full sync, through us (replication.c) */
    /* -- end repl -- */
    /* -- client fields: stream -- */
    /* -- end stream -- */
    /* -- client fields: script -- */
    /* -- end script -- */
/* -- declarations: repl -- */
/* -- end repl -- */
    /* -- server fields: repl -- */
    /* -- end repl -- */
    /* -- client fields: repl -- */
    /* -- end repl -- */
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
    CMD_NO_MULTI = 1u << 10, /* refused inside MULTI (Redis no-multi) */
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
    MM_ALLKEYS_LFU, /* the LFU two last: kv_lfu_on() */
    MM_VOLATILE_LFU,
};

typedef struct kv_config {
    int port;
    char *bind[KV_MAX_BIND];
    int nbind;
    char *dir;
    int appendonly;
    enum kv_fsync appendfsync;
    char *appendfilename;
    char *appenddirname; /* under dir: the manifest, base and incr files */
    int aof_use_rdb_preamble;
    int aof_disable_auto_gc; /* keep history files (Redis's test knob) */
    int aof_timestamp_enabled; /* "#TS:unixtime" lines between commands */
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
    int loglevel_name; /* the Redis level set (debug and verbose log alike here) */
    char *logfile;
    char *save;
    int daemonize;
    uint64_t timeout;
    int shutdown_timeout; /* seconds; 0: a shutdown does not wait for replicas */
    int tcp_backlog;
    int active_expire_effort;
    int protected_mode; /* refuse non-loopback clients while no password is set */
    int busy_poll_us;   /* loop_set_busy_poll; 0 = off */
} kv_config;

typedef struct kv_server {
    kv_config cfg;
    bk_loop loop;
    bk_io listen_io[KV_MAX_BIND];
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
    bk_timer cron;
    uint64_t cronloops;
    int shutdown_asap;
    /* A shutdown waiting for lagging replicas (Redis's shutdown-timeout):
     * its deadline (0: none waits) and its KV_SHUTDOWN_* flags. */
    int64_t shutdown_ms;
    int shutdown_flags;
    int loading;
    /* stats */
    uint64_t stat_conns, stat_cmds, stat_expired, stat_evicted, stat_rejected_conns;
    uint64_t stat_hits, stat_misses, stat_net_in, stat_net_out, stat_errors;
    uint64_t stat_expire_cycles_cpu_ms;
    uint64_t stat_lazyfreed; /* INFO lazyfreed_objects: what Redis would have freed lazily */
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
    bk_buf aof_buf;
    bk_buf aof_rewrite_buf;
    int aof_in_multi; /* a transaction runs: -1 nothing written yet, 2 one command, 1 MULTI written */
    pid_t child_pid;
    char *child_tmpfile;
    int64_t aof_rewrite_start_ms;
    uint64_t aof_rewrites, aof_current_size, aof_base_size;
    uint64_t stat_forks, aof_rw_failures; /* total_forks; consecutive failed rewrites */
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
    dict *blk_keys;               /* per db: key -> its FIFO of waiting clients */
    size_t blk_nkeys;             /* keys waited on, all dbs (0: writes skip the signal) */
    uint64_t blk_nclients;        /* blocked clients (INFO blocked_clients) */
    uint64_t blk_ntimeout;        /* of them, with a timeout */
    struct kv_bkey **blk_ready;   /* keys made ready by the running command */
    size_t blk_nready, blk_ready_cap;
    kv_client *blk_resume, *blk_resume_tail; /* served clients with input to run */
    bk_timer blk_resume_timer;       /* runs them: a 0 ms timer, after this batch's events */
    int blk_deny;                 /* > 0 inside EXEC (or a script): commands must not block */
    int in_exec;                  /* EXEC runs its queue: a fork waits for the cron */
    /* -- end blocking -- */
    /* -- server fields: bitops -- */
    /* -- end bitops -- */
    /* -- server fields: geo -- */
    /* -- end geo -- */
    /* -- server fields: dump -- */
    pid_t rdb_child_pid;       /* BGSAVE child, or -1 / 0 */
    int rdb_last_bgsave_failed;
    uint64_t rdb_dirty_at_save; /* srv.dirty at the last successful save */
    uint64_t rdb_dirty_at_fork;
    int64_t rdb_save_start_ms;
    uint64_t rdb_saves;            /* successful SAVE/BGSAVE since start */
    int64_t rdb_last_bgsave_secs;  /* duration of the last BGSAVE + 1; 0 = none yet */
    uint64_t rdb_load_loaded, rdb_load_expired; /* keys of the last dump.rdb load */
    /* -- end dump -- */
    /* -- server fields: client -- */
    kv_client **monitors;       /* MONITOR clients */
    int nmonitors, monitors_cap;
    int pause_type;             /* KV_PAUSE_* of CLIENT PAUSE (0: none) */
    int64_t pause_end_ms;
    kv_client *held;            /* clients whose command waits for the pause to end */
    uint64_t nheld;
    int resume_held;            /* the pause ended: run the held commands at batch end */
    /* tracking.c: clients with tracking on, keys they read, BCAST prefixes */
    kv_client **trk_clients;
    int trk_nclients, trk_clients_cap;
    dict trk_keys;              /* key -> kv_trk_key (ids of clients that read it) */
    uint64_t trk_items;         /* sum of the ids in trk_keys */
    dict trk_prefix_d;          /* BCAST prefix -> kv_trk_prefix (its subscribers) */
    int trk_nprefix;
    uint32_t *trk_plens;        /* the distinct prefix lengths, ascending, and how */
    uint32_t *trk_plen_refs;    /* many prefixes have each (a write looks up only those) */
    int trk_nplens, trk_plens_cap;
    struct kv_trk_prefix **trk_pending; /* prefixes with changed keys to send */
    int trk_npending, trk_pending_cap;
    int trk_bcast_pending;      /* trk_pending is not empty: send at batch end */
    bk_buf trk_self;               /* invalidations for the running client, sent after its reply */
    kv_client *cl_running;      /* the client whose command runs (top level) */
    int cl_executing;           /* inside a command's handler (not eviction before it) */
    /* -- end client -- */
    /* -- server fields: acl -- */
    /* -- end acl -- */
    /* -- server fields: misc -- */
    int cmd_touched_keys; /* the running command signalled its changed keys
                           * itself (kv_touch_key): no touch of all its keys */
    /* -- end misc -- */
    /* -- server fields: cevict -- */
    uint64_t stat_evicted_clients; /* INFO evicted_clients */
    uint64_t stat_rb_shrinks, stat_rb_expands; /* INFO reply_buffer_shrinks/expands */
    long long rb_peak_reset_time;  /* ms, -1 never (DEBUG REPLYBUFFER PEAK-RESET-TIME) */
    int rb_resizing;               /* DEBUG REPLYBUFFER RESIZING */
    int evict_pending;             /* eviction stopped on its time limit or CONFIG SET
                                      maxmemory: evict at the end of the iteration */
    /* -- end cevict -- */
    /* -- server fields: notify -- */
    int notify_flags;     /* notify-keyspace-events, NOTIFY_* of notify.h */
    dict shard_channels;  /* SSUBSCRIBE: name -> kv_chan (pubsub.h) */
    /* client-output-buffer-limit of the replica and pubsub classes (the
     * normal class is cfg.obuf_*) */
    struct kv_obuf_limit {
        uint64_t hard, soft, secs;
    } obuf_replica, obuf_pubsub;
    long long slowlog_slower_than; /* us; < 0 off */
    long long slowlog_max_len;
    long long latency_threshold;   /* ms; 0 off */
    int latency_tracking;          /* latency-tracking: per-command histograms */
    double latency_pcts[16];       /* latency-tracking-info-percentiles */
    int nlatency_pcts;
    /* every call timed (slowlog or latency thresholds a CMD_FAST call
     * can cross); otherwise fast commands are timed one call in 16 */
    int time_every_call;
    struct kv_introspect *introspect; /* slowlog, latency (introspect.c) */
    /* -- end notify -- */
/* -- declarations: stream -- */
/* -- end stream -- */
/* -- declarations: script -- */
/* -- end script -- */
/* -- declarations: repl -- */
/* -- end repl -- */
    /* -- server fields: stream -- */
    bk_timer stream_orphan_timer; /* checks XREADGROUP waiters whose stream went away */
    /* -- end stream -- */
    /* -- server fields: script -- */
    kv_client *script_caller; /* the client whose script is running */
    int script_timedout;      /* past busy-reply-threshold: others get BUSY;
                               * KV_BUSY_LOADING while a start-up load serves
                               * clients (others get LOADING) */
    /* -- end script -- */
/* -- declarations: repl -- */
/* -- end repl -- */
    /* -- server fields: repl -- */
    /* -- end repl -- */
    /* -- client fields: repl -- */
    /* -- end repl -- */
    /* -- client fields: stream -- */
    /* -- end stream -- */
    /* -- client fields: script -- */
    /* -- end script -- */
/* -- declarations: repl -- */
/* -- end repl -- */
    /* -- server fields: repl -- */
    /* -- end repl -- */
    /* -- client fields: repl -- */
    /* -- end repl -- */
} kv_server;

extern kv_server srv;

/* server.c */
int kv_server_main(int argc, char **argv);
void kv_client_close(kv_client *c);
void kv_call(kv_client *c);
kv_client *kv_client_new_fake(void);
void kv_client_free_fake(kv_client *c);
const kv_cmd *kv_cmd_lookup(bk_str name);
/* Fills the name -> command table kv_cmd_lookup reads (once, at start;
 * also for harnesses that run commands without kv_server_main). */
void kv_cmd_table_init(void);
/* rename-command from (a command's name) to (lower-cased; "" removes it):
 * read from the configuration before kv_cmd_table_init. 0, or -1 with err. */
int kv_cmd_rename(const char *from, const char *to, char *err, size_t errlen);
/* Whether a peer address is this host: 127.0.0.0/8, ::1, ::ffff:127.x or
 * a Unix socket (the clients protected mode lets in). */
int kv_peer_is_local(const struct sockaddr *sa);
/* Whether a new client from sa must be refused by protected mode. */
int kv_protected_refuses(const kv_config *cfg, const struct sockaddr *sa);
int kv_exec_command(kv_client *c, int argc, bk_str *argv);
void kv_touch_key(kv_db *db, bk_str key);
void kv_touch_db(kv_db *db); /* every watched key of db */
/* FLUSHDB/FLUSHALL (replaced_with NULL) and SWAPDB: the watched keys whose
 * value changes, as Redis. */
void kv_touch_flushed_db(kv_db *emptied, kv_db *replaced_with);
/* Exchanges the keys (and the index of volatile keys) of two databases. */
void kv_db_swap_contents(kv_db *x, kv_db *y);
void kv_unwatch_all(kv_client *c);
/* Leaves MULTI: the queued commands and WATCHes are dropped (multi.c). */
void kv_discard_transaction(kv_client *c);
bk_str kv_watch_key_fn(const dict_node *n);
void kv_client_set_db(kv_client *c, int id);
int kv_client_info(kv_client *c, bk_buf *out);
void kv_flush_clients(void);
/* Output was added to c by another client's command (a Pub/Sub message):
 * schedules the write and applies the output buffer limits. */
void kv_client_output_added(kv_client *c);
/* Applies the output buffer limits of c's class now (a command replying
 * without end, the cron for a client that stopped reading): 1 when c is
 * over one and will be closed. */
int kv_client_obuf_over(kv_client *c);
/* The hard output buffer limit of c's class (0: none). */
uint64_t kv_client_obuf_hard(const kv_client *c);
/* Per-second rate over the last samples: 0 commands, 1 bytes in, 2 out. */
double kv_instantaneous(int what);

/* -- declarations: tls -- */
struct kv_tls_client;
struct sockaddr_storage;
/* tls_kv.c: the tls-* options, TLS listeners and client I/O. */
int kv_tls_config_set(const char *name, int argc, char **argv, int at_runtime, char *err,
                      size_t errlen);
void kv_tls_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                       void *ud);
int kv_tls_start(void);
void kv_tls_stop(void);
/* Closes the TLS listening sockets (shutdown: new connections are refused at once). */
void kv_tls_close_listeners(void);
/* In a forked child that lives on (a debugging session): closes its copies
 * of the TLS listeners, so that only the server holds the port. */
void kv_tls_child_close_listeners(void);
ssize_t kv_tls_read(kv_client *c, void *p, size_t n);
ssize_t kv_tls_write(kv_client *c, const void *p, size_t n);
unsigned kv_tls_events(kv_client *c);
void kv_tls_client_closed(kv_client *c);
void kv_tls_client_handed_off(kv_client *c);
void kv_tls_refuse(struct kv_tls_client *t, const char *msg, size_t n);
/* tls-replication yes: our link to a master is TLS. kv_tls_link_conn makes
 * its client side over a connected fd (NULL with err: the options do not
 * make a context); kv_tls_attach gives a link turned client its TLS. */
struct tls_conn;
int kv_tls_replication(void);
/* tls-port (0: none). */
int kv_tls_port(void);
struct tls_conn *kv_tls_link_conn(int fd, const char *host, char *err, size_t errlen);
void kv_tls_attach(kv_client *c, struct tls_conn *conn);
/* server.c: an accepted (TLS: handshaken) connection becomes a client, or
 * is refused (maxclients, protected mode) and closed: NULL. Takes fd and t. */
kv_client *kv_client_accept(int fd, const struct sockaddr_storage *ss, struct kv_tls_client *t);
int kv_open_listeners(int port, char *const *bind, int nbind, int *fds, char *err,
                      size_t errlen);
/* tls_kv.c: after a failed accept (errno): logs, and on EMFILE/ENFILE pauses
 * every listener for 100 ms instead of spinning on a readable one. */
void kv_accept_failed(bk_io *io);
/* -- end tls -- */
/* -- declarations: blocking -- */
/* Runs the commands a client sent while it was blocked (server.c). */
void kv_client_resume(kv_client *c);
/* -- end blocking -- */
/* -- declarations: bitops -- */
/* -- end bitops -- */
/* -- declarations: geo -- */
/* Key positions (argv indexes, into pos[3]) of the commands whose keys
 * depend on their options: SORT's STORE, GEORADIUS's STORE/STOREDIST.
 * Returns the number of keys, or -1 when cmd has fixed key positions. */
int kv_movable_keys(const kv_cmd *cmd, int argc, const bk_str *argv, int *pos);
/* Sorts base[0..n) (elements of es bytes) enough that [first, last] holds
 * what a full sort puts there, with Redis's partial quicksort (sort.c):
 * equal elements end up where Redis puts them. */
typedef int kv_cmp_fn(const void *a, const void *b, void *ud);
void kv_pqsort(void *base, size_t n, size_t es, kv_cmp_fn *cmp, void *ud, size_t first,
               size_t last);
/* -- end geo -- */
/* -- declarations: dump -- */
/* t_dump.c: MIGRATE's cached connections (INFO), closed after 10 s idle
 * by migrate_cron (called from the server cron). */
size_t migrate_cached_sockets(void);
/* Server cron: closes idle MIGRATE sockets, reaps the BGSAVE child. */
void dump_cron(void);
/* Loads dbfilename at start-up when the AOF is off. Returns 0 or -1. */
int dump_load_at_start(void);
/* The save of a shutdown: stops a BGSAVE child and saves dbfilename. 0,
 * or -1 when that failed and force is 0: the shutdown is off and the
 * server goes on (kv_shutdown_prepare; Redis's log lines). */
int dump_shutdown_save(int force);
/* Shutdown (t_server.c), Redis 7.0's: without NOW, and while replicas lag
 * and shutdown-timeout is not 0, writes pause and the server waits for
 * their acks; then the save, and the loop stops. 1 when the loop stops,
 * 0 while waiting (kv_shutdown_cron finishes it), -1 when it failed (the
 * clients blocked in SHUTDOWN got the error, writes run again). */
int kv_shutdown_prepare(int flags);
/* Cron: a signal's shutdown starts; a waiting one ends when the replicas
 * acked or its time is up. */
void kv_shutdown_cron(void);
/* At exit: stops a BGSAVE child. */
void dump_at_exit(void);
/* DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE] and DEBUG OBJECT key. */
void dump_debug_reload(kv_client *c);
void dump_debug_object(kv_client *c);
/* -- end dump -- */
/* -- declarations: client -- */
/* suite: CLIENT PAUSE WRITE leaves scripts flagged no-writes alone
 * (script.c: EVAL/EVALSHA argv, t_function.c: FCALL argv). */
int script_call_no_writes(int evalsha, int argc, const bk_str *argv);
int function_call_no_writes(int argc, const bk_str *argv);
/* t_client.c: CLIENT, MONITOR, CLIENT PAUSE and REPLY OFF/SKIP */
enum {
    CL_REPLY_OFF = 1u << 0,
    CL_REPLY_SKIP = 1u << 1,      /* drop the reply of this command */
    CL_REPLY_SKIP_NEXT = 1u << 2, /* ... of the next one (set by CLIENT REPLY SKIP) */
    CL_TRACKING = 1u << 3,
    CL_TRK_BCAST = 1u << 4,
    CL_TRK_OPTIN = 1u << 5,
    CL_TRK_OPTOUT = 1u << 6,
    CL_TRK_CACHING = 1u << 7,     /* CLIENT CACHING yes (optin) / no (optout) */
    CL_TRK_NOLOOP = 1u << 8,
    CL_TRK_BROKEN = 1u << 9,      /* the redirect target closed */
    CL_MONITOR = 1u << 10,
    CL_HELD = 1u << 11,           /* argv holds a command CLIENT PAUSE keeps waiting */
    CL_NO_EVICT = 1u << 12,
};
enum { KV_PAUSE_WRITE = 1, KV_PAUSE_ALL = 2 };
int kv_client_name_valid(bk_str s);
void kv_client_set_name(kv_client *c, bk_str name);
/* RESET: tracking, MONITOR, REPLY OFF and NO-EVICT back to their defaults. */
void kv_client_reset(kv_client *c);
/* Narrows [first, last] of a write command's keys to those it changes
 * (SINTERSTORE dst src...: dst only; COPY src dst: dst), for WATCH and
 * tracking. */
void kv_written_keys(const kv_cmd *cmd, int *first, int *last);
/* Called by kv_call once the command is known (NULL: unknown). */
void kv_client_note_cmd(kv_client *c, const kv_cmd *cmd);
/* After a top-level command of c ran (its reply starts at wbuf offset
 * mark): REPLY OFF/SKIP, CLIENT CACHING reset, deferred invalidations. */
void kv_client_after_command(kv_client *c, size_t mark);
/* Whether CLIENT PAUSE holds the command in c->argv (then marks c held). */
int kv_pause_holds(kv_client *c);
/* Cron: ends an expired pause; frees or shrinks the query
 * buffers of idle clients (as Redis's clientsCronResizeQueryBuffer). */
void kv_client_cron(void);
/* Runs the held commands once the pause ended (batch end). */
void kv_pause_resume_held(void);
/* MONITOR: feeds one executed command to the monitors. */
void kv_monitor_feed(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv);
/* A client closes: drops it from MONITOR, held and tracking state. */
void kv_client_gone(kv_client *c);
/* -- declarations: cevict -- */
/* maxmemory-clients (t_cevict.c): a byte count, or pct >= 0 = a percentage of
 * maxmemory. kv_cevict_on is set when either is non-zero: the loop's only cost. */
extern int kv_cevict_on;
extern uint64_t kv_cevict_total; /* the counted clients' memory (kept while kv_cevict_on) */
void kv_cevict_config(uint64_t bytes, int pct);
/* Accounts c's memory afresh (after it read, wrote or ran a command). */
void kv_cevict_update(kv_client *c);
/* Evicts the largest clients while the clients' memory is over
 * maxmemory-clients (at the end of a loop iteration, before a command). */
void kv_cevict_run(void);
/* Before a top-level command of c: evicts while over the limit; 0 when c
 * itself was evicted. */
static inline int kv_cevict_before_command(kv_client *c)
{
    kv_cevict_update(c);
    kv_cevict_run();
    return !(c->flags & CLIENT_CLOSED);
}
/* The memory CLIENT LIST shows as tot-mem and client eviction counts. */
size_t kv_client_mem(const kv_client *c);
/* Query buffer bytes not parsed into arguments yet, and the bytes of the
 * arguments parsed so far of a command still arriving (qbuf, argv-mem). */
size_t kv_client_qbuf(const kv_client *c);
size_t kv_client_pending_argv(const kv_client *c);
/* oom-score-adj (t_cevict.c): writes /proc/self/oom_score_adj for the role. */
enum { KV_OOM_MASTER, KV_OOM_REPLICA, KV_OOM_CHILD };
int kv_oom_apply(int role);
/* -- end cevict -- */
/* server.c: runs the parsed input of c (used to resume held clients). */
void kv_client_process_input(kv_client *c);
/* tracking.c */
void tracking_init(void);
void tracking_free(void);
void kv_client_tables_free(void);
void tracking_enable(kv_client *c, uint64_t redir, kv_client *target, unsigned opts,
                     const bk_str *prefixes, int nprefixes);
void tracking_disable(kv_client *c);
/* Error text when a prefix collides with another of c's, or NULL. */
int tracking_prefix_error(kv_client *c, const bk_str *prefixes, int n, char *err, size_t errlen);
/* c ran a read-only command: remember its keys for invalidation. */
void tracking_remember(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv);
/* A script's read-only command ran: its caller (EVAL*, FCALL*) tracks the
 * keys it declared, as Redis. */
void tracking_remember_script(kv_client *caller);
/* key changed in the keyspace (cheap when no client tracks). */
void tracking_invalidate_key(bk_str key);
void tracking_invalidate_all(void); /* FLUSHDB / FLUSHALL (once per command) */
void tracking_broadcast(void);      /* batch end: BCAST messages */
void tracking_send_self(kv_client *c);
void tracking_cron(void);
void tracking_limit_keys(void); /* before each command while trk_nclients */
void tracking_client_closed(kv_client *c);
bk_str tracking_prefix_str(const struct kv_trk_prefix *p);
static inline int tracking_active(void) { return dict_size(&srv.trk_keys) || srv.trk_nprefix; }
/* -- end client -- */
/* suite: cmd's subcommand sub ("config|get") and its arity; NULL when it
 * is not one (*has_subs: whether cmd is a container at all). acl.c. */
const char *kv_acl_subcommand(const kv_cmd *cmd, bk_str sub, int *arity, int *has_subs);
/* The flags Redis gives the command: a container's subcommand has its own
 * (FUNCTION LOAD writes, SCRIPT LOAD runs on a stale replica); others, and
 * unknown subcommands, the row's. */
unsigned kv_cmd_flags(const kv_cmd *cmd, int argc, const bk_str *argv);
/* -- declarations: acl -- */
typedef struct kv_acl_user kv_acl_user; /* acl.h */
/* -- end acl -- */
/* -- declarations: misc -- */
/* -- end misc -- */
/* -- declarations: notify -- */
/* introspect.c: after a timed call (ticks of kv_ticks), for SLOWLOG,
 * LATENCY and the latency histograms. */
void kv_introspect_after_call(kv_client *c, const kv_cmd *cmd, uint64_t ticks);
/* CONFIG SET port / bind at run time (suite): listens on the new port and
 * addresses, then closes the old listeners. -1 (old ones kept) when the
 * new sockets cannot all be opened. */
int kv_relisten(int port, char *const *bind, int nbind);
/* In a forked child that lives on (a debugging session), as Redis's: its
 * copies of the listening sockets closed, so that a server that dies (or
 * restarts on the port) leaves no socket accepting connections no one
 * serves. */
void kv_child_close_listeners(void);
/* A blocked command was served (blocking.c): the slowlog gets it with the
 * argv it was called with (suite). */
void kv_introspect_served(kv_client *c, int argc, bk_str *argv, uint64_t ticks);
void kv_introspect_init(void);
/* SLOWLOG for a command run outside call_proc (a blocked command served
 * later): logs c->argv (c->cmd set) when us reaches the threshold. */
void kv_slowlog_log(kv_client *c, long long us);
/* A latency sample of event (LATENCY LATEST/HISTORY), kept when ms reaches
 * latency-monitor-threshold (callers skip the clock reads when it is 0). */
void kv_latency_sample(const char *event, int64_t ms);
/* An error reply was sent: counted by its code for INFO errorstats. */
void kv_errorstat_add(const char *msg);
/* CONFIG RESETSTAT: errorstats and the latency histograms. */
void kv_introspect_resetstat(void);
void kv_introspect_free(void);
/* CONFIG SET/GET of the options introspect.c, notify.c and pubsub.c own
 * (notify-keyspace-events, slowlog-*, latency-monitor-threshold, the
 * replica and pubsub classes of client-output-buffer-limit). set returns
 * 0, -1 with err filled, or 1 when name is not one of them. */
int kv_notify_config_set(const char *name, int argc, char **argv, char *err, size_t errlen);
void kv_notify_config_defaults(void); /* once, before the first set */
/* Calls fn for each of them matching the glob pattern. */
void kv_notify_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                          void *ud);
/* -- end notify -- */
/* -- declarations: stream -- */
/* The value string of a compatibility option (config.c); the pointer stays
 * valid and follows CONFIG SET. NULL if unknown. */
const char *kv_config_noop_str(const char *name);
/* Writes paused (on) or not (off) for a failover or a shutdown's wait for
 * its replicas (replication.c). */
void kv_pause_writes_internal(int on);
/* Such an option read as a size limit (t_hash.c): dflt when unknown or not
 * an integer, 0 for negatives; *cache keeps the option's stable pointer. */
size_t kv_config_noop_size(const char *name, const char **cache, long long dflt);
struct kv_stream;
/* Emits the commands that rebuild a stream (AOF rewrite, t_stream.c). */
void stream_rewrite(struct kv_stream *s, bk_str key, void (*emit)(void *ud, int argc, const bk_str *argv),
                    void *ud);
/* -- end stream -- */
/* -- declarations: script -- */
/* Runs cmd for c with c->argv (no checks), as a command from the network. */
void kv_call_proc(kv_client *c, const kv_cmd *cmd);
/* A script is past busy-reply-threshold: replies BUSY to c unless cmd may
 * run meanwhile. Returns 1 when refused. */
int script_busy_refuses(kv_client *c, const kv_cmd *cmd);
size_t script_cached_count(void);
/* COMMAND GETKEYS of EVAL/FCALL and their variants: replies and returns
 * 1, or returns 0 for other commands. */
int script_getkeys(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv);
size_t script_lua_memory(void);
/* -- end script -- */
/* -- declarations: repl -- */
/* watchdog.c: watchdog-period (server.c arms it around each loop
 * iteration's work while kv_watchdog_ms > 0), the crash report, and
 * blocking calls that retry on EINTR (the watchdog's SIGALRM has no
 * SA_RESTART). */
extern int kv_watchdog_ms;
void kv_watchdog_arm(void);
void kv_watchdog_disarm(void);
void kv_signals_start(void);
int kv_signals_config_set(const char *name, int argc, char **argv, char *err, size_t errlen);
void kv_signals_config_get(bk_str pattern,
                           void (*fn)(void *ud, const char *name, const char *value), void *ud);
pid_t kv_waitpid(pid_t pid, int *status, int options);
/* DEBUG SEGFAULT: a real invalid write (the crash report shows its address). */
_Noreturn void kv_debug_segfault(void);
void kv_sleep_us(long long us);
/* replication.c */
/* A TLS replica held for its full sync can write: the relay goes on. */
void repl_relay_write(kv_client *c);
extern int repl_feeding; /* the stream goes to a backlog: aof_feed calls repl_feed */
extern int repl_guard;   /* kv_call asks repl_deny (replica or min-replicas-to-write) */
extern int kv_active_expire_off; /* DEBUG SET-ACTIVE-EXPIRE 0 (replication tests use it) */
/* t_debug.c: DEBUG subcommands of Redis's suite; 1 when sub was one */
int kv_debug_suite_subcommand(kv_client *c);
/* t_client.c: whether MONITOR and SLOWLOG show argument i as "(redacted)" */
int kv_arg_redacted(const kv_cmd *cmd, int argc, const bk_str *argv, int i);
extern int kv_debug_allow_noscript; /* DEBUG SET-DISABLE-DENY-SCRIPTS 1 */
extern int kv_debug_cron_paused;    /* DEBUG PAUSE-CRON 1 */
void repl_init(void);
void repl_feed(kv_db *db, int argc, const bk_str *argv);
void repl_exec_end(void);
/* Replies and returns 1 when cmd must not run here (READONLY, MASTERDOWN, NOREPLICAS). */
int repl_deny(kv_client *c, const kv_cmd *cmd);
/* The master link ran a command: count its bytes, proxy them. */
void repl_master_applied(kv_client *c);
/* The master link's first used bytes leave its rbuf. */
void repl_master_shift(kv_client *c, size_t used);
void repl_client_closed(kv_client *c);
void repl_cron(void);
/* Our replicas (INFO's connected_clients leaves them out, as Redis). */
int repl_replica_count(void);
/* Shutdown: 1 when every replica acked our offset (or there are none). */
int repl_shutdown_ready(void);
/* Shutdown: REPLCONF GETACK * to the replicas. */
void repl_shutdown_getack(void);
/* Shutdown: logs each lagging replica and how many are in sync. */
void repl_shutdown_report(void);
/* Whether keys must not expire here (a replica: the master sends DEL). */
int repl_no_expire(void);
int repl_from_master(void); /* the running command came from our master */
/* We replicate a master: a deadline already past keeps the key (its DEL
 * comes from the master), as Redis's checkAlreadyExpired. */
int repl_is_replica(void);
/* A replica without its master and replica-serve-stale-data no. */
int repl_stale_refuses(void);
/* A replica with replica-ignore-maxmemory (the default): it neither evicts
 * nor refuses writes for maxmemory; its master's DELs keep it in bounds. */
int repl_ignores_maxmemory(void);
/* Bytes the output buffers of our replicas hold (not counted for eviction). */
size_t repl_replica_obufs(void);
/* loading-process-events-interval-bytes */
long long repl_loading_events_interval(void);
/* Why writes are refused now (MISCONF after a failed BGSAVE with
 * stop-writes-on-bgsave-error, NOREPLICAS below min-replicas-to-write):
 * the error reply, or NULL. Scripts ask it too. */
const char *repl_write_refusal(void);
/* t_dump.c: a save succeeded or failed (MISCONF may start or end). */
void repl_persist_status_changed(void);
/* Config options of replication: 1 when name is not one of them. */
/* CONFIG SET masterauth's value as sent (binary: a NUL stays in it). */
void repl_masterauth_set(const char *p, size_t n);
int repl_config_set(const char *name, int argc, char **argv, int at_runtime, char *err,
                    size_t errlen);
void repl_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                     void *ud);
void repl_info(bk_buf *b);       /* the # Replication section */
void repl_info_stats(bk_buf *b); /* sync_full / sync_partial_ok / sync_partial_err lines */
void repl_sync_counts(unsigned long long out[3]); /* the same three counters */
/* repl_debug.c: DEBUG DIGEST / DIGEST-VALUE / POPULATE. */
void repl_debug_digest(kv_client *c);
void repl_debug_digest_value(kv_client *c);
void repl_debug_populate(kv_client *c);
void repl_debug_replicate(kv_client *c); /* DEBUG REPLICATE cmd args...: stream only */
/* t_dump.c: FLUSHALL stops a BGSAVE (its snapshot is stale) and, with save
 * points, saves the empty dataset, as Redis. */
void dump_flushall(void);
/* A full-sync RDB child runs (INFO rdb_bgsave_in_progress counts it, as Redis). */
int repl_rdb_child_running(void);
/* A forked child (BGSAVE, AOF rewrite, full sync) holds a copy-on-write
 * snapshot: tables do not shrink meanwhile, as Redis's dict_can_resize. */
static inline int kv_child_running(void)
{
    return srv.child_pid > 0 || srv.rdb_child_pid > 0 || repl_rdb_child_running();
}
/* A swapdb diskless load keeps serving the old data (INFO async_loading). */
int repl_async_loading(void);
/* FLUSHALL: a full-sync child's snapshot is stale: it stops, its replicas resync. */
void repl_flushall(void);
/* An error reply to our master (its replies are dropped): logged as
 * Redis's "== CRITICAL ==" line, so a diverging replica shows in the log. */
void repl_master_error(kv_client *c, const char *msg);
/* A replica of ours ran a command that replies: logged and closed (its
 * socket carries the RDB and the stream), as Redis. */
void repl_replica_replied(kv_client *c);
/* server.c: a client on an fd we connected (the master link). */
kv_client *kv_client_attach_fd(int fd);
/* -- end repl -- */

/* cmdtable.c */
extern const kv_cmd kv_commands[];
extern const size_t kv_ncommands;

#endif
