/* brisk-kv: shared definitions of the server, its clients, the keyspace
 * and the command table. One thread (the loop's) owns all of it. */
#ifndef BRISK_KV_SERVER_H
#define BRISK_KV_SERVER_H

#include "core/buf.h"
#include "core/common.h"
#include "core/loop.h"
#include "kv/dict.h"
#include "kv/resp.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define KV_VERSION "7.2.0"
#define KV_MAX_BIND 16
#define KV_DEFAULT_DBS 16
#define KV_LRU_MS 10 /* LRU clock tick; 28 bits of it wrap after 31 days */

/* ---- values ---- */

enum kv_type { KV_STRING = 0, KV_LIST = 1, KV_SET = 2, KV_ZSET = 3, KV_HASH = 4 };

/* One key of the keyspace, in one allocation: header, key bytes, value.
 * Strings are stored inline after the key (vlen bytes, room for vcap);
 * other types store a pointer to their object there (memcpy'd). */
typedef struct kv_entry {
    dict_node node;   /* node.aux = key length */
    uint32_t vlen;    /* string length */
    uint32_t vcap;    /* bytes available after the key */
    int64_t expire;   /* unix ms; 0 = none */
    uint32_t vidx;    /* 1 + index in db->vol when expire != 0 */
    uint32_t lru : 28, type : 4;
    char data[];      /* key, then value */
} kv_entry;

static inline char *entry_key(kv_entry *e) { return e->data; }
static inline uint32_t entry_klen(const kv_entry *e) { return e->node.aux; }
static inline char *entry_val(kv_entry *e) { return e->data + e->node.aux; }
static inline str entry_key_str(kv_entry *e) { return (str){ e->data, e->node.aux }; }
static inline void *entry_obj(kv_entry *e)
{
    void *p;
    memcpy(&p, entry_val(e), sizeof p);
    return p;
}
static inline void entry_set_obj(kv_entry *e, void *p) { memcpy(entry_val(e), &p, sizeof p); }

typedef struct kv_db {
    int id;
    dict keys;
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

typedef struct kv_cmd_stats {
    uint64_t calls, usec, rejected, failed;
} kv_cmd_stats;

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
} kv_server;

extern kv_server srv;

/* server.c */
int kv_server_main(int argc, char **argv);
void kv_client_close(kv_client *c);
void kv_call(kv_client *c);
kv_client *kv_client_new_fake(void);
void kv_client_free_fake(kv_client *c);
const kv_cmd *kv_cmd_lookup(str name);
int kv_exec_command(kv_client *c, int argc, str *argv);
void kv_touch_key(kv_db *db, str key);
void kv_touch_db(kv_db *db);
void kv_unwatch_all(kv_client *c);
str kv_watch_key_fn(const dict_node *n);
void kv_client_set_db(kv_client *c, int id);
int kv_client_info(kv_client *c, buf *out);
void kv_flush_clients(void);

/* cmdtable.c */
extern const kv_cmd kv_commands[];
extern const size_t kv_ncommands;

#endif
