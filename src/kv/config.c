#include "kv/config.h"

#include "core/common.h"
#include "core/log.h"
#include "kv/acl.h"
#include "kv/aof.h"
#include "kv/mem.h"
#include "kv/proctitle.h"
#include "kv/resp.h"
#include "kv/server.h"
#include "kv/util.h"

#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum opt_kind { O_INT, O_SIZE, O_BOOL, O_STR, O_POLICY, O_FSYNC, O_LOGLEVEL, O_BIND, O_NOOP };

typedef struct {
    const char *name;
    enum opt_kind kind;
    size_t off;       /* offset in kv_config */
    long long min, max;
    int immutable;    /* cannot change with CONFIG SET */
} opt;

#define OFF(f) offsetof(kv_config, f)

static const opt opts[] = {
    { "port", O_INT, OFF(port), 0, 65535, 1 },
    { "bind", O_BIND, 0, 0, 0, 1 },
    { "dir", O_STR, OFF(dir), 0, 0, 0 },
    { "appendonly", O_BOOL, OFF(appendonly), 0, 1, 0 },
    { "appendfsync", O_FSYNC, OFF(appendfsync), 0, 0, 0 },
    { "appendfilename", O_STR, OFF(appendfilename), 0, 0, 1 },
    { "appenddirname", O_STR, OFF(appenddirname), 0, 0, 1 },
    { "aof-use-rdb-preamble", O_BOOL, OFF(aof_use_rdb_preamble), 0, 1, 0 },
    { "aof-disable-auto-gc", O_BOOL, OFF(aof_disable_auto_gc), 0, 1, 0 },
    { "aof-timestamp-enabled", O_BOOL, OFF(aof_timestamp_enabled), 0, 1, 0 },
    { "requirepass", O_STR, OFF(requirepass), 0, 0, 0 },
    { "maxclients", O_INT, OFF(maxclients), 1, 1000000, 0 },
    { "maxmemory", O_SIZE, OFF(maxmemory), 0, LLONG_MAX, 0 },
    { "maxmemory-policy", O_POLICY, OFF(maxmemory_policy), 0, 0, 0 },
    { "maxmemory-samples", O_INT, OFF(maxmemory_samples), 1, 64, 0 },
    { "databases", O_INT, OFF(databases), 1, 1024, 1 },
    { "proto-max-bulk-len", O_SIZE, OFF(proto_max_bulk_len), 1024 * 1024, 512ll * 1024 * 1024, 0 },
    { "hll-sparse-max-bytes", O_SIZE, OFF(hll_sparse_max_bytes), 0, LLONG_MAX, 0 },
    { "hz", O_INT, OFF(hz), 1, 500, 0 },
    { "auto-aof-rewrite-percentage", O_INT, OFF(auto_aof_rewrite_pct), 0, INT_MAX, 0 },
    { "auto-aof-rewrite-min-size", O_SIZE, OFF(auto_aof_rewrite_min), 0, LLONG_MAX, 0 },
    { "aof-load-truncated", O_BOOL, OFF(aof_load_truncated), 0, 1, 0 },
    { "loglevel", O_LOGLEVEL, OFF(loglevel), 0, 0, 0 },
    { "logfile", O_STR, OFF(logfile), 0, 0, 1 },
    { "save", O_STR, OFF(save), 0, 0, 0 },
    { "daemonize", O_BOOL, OFF(daemonize), 0, 0, 1 },
    { "timeout", O_INT, OFF(timeout), 0, INT_MAX, 0 },
    { "shutdown-timeout", O_INT, OFF(shutdown_timeout), 0, INT_MAX, 0 },
    { "tcp-backlog", O_INT, OFF(tcp_backlog), 1, 65535, 1 },
    { "active-expire-effort", O_INT, OFF(active_expire_effort), 1, 10, 0 },
    { "protected-mode", O_BOOL, OFF(protected_mode), 0, 1, 0 },
    { "busy-poll-us", O_INT, OFF(busy_poll_us), 0, 10000, 0 },
};

/* Options accepted for compatibility; their value is remembered and
 * reported by CONFIG GET but changes nothing. */
static struct {
    const char *name;
    char value[96];
} noops[] = {
    { "hash-max-listpack-entries", "512" }, { "hash-max-listpack-value", "64" },
    { "hash-max-ziplist-entries", "512" },  { "hash-max-ziplist-value", "64" },
    { "list-max-listpack-size", "-2" },     { "list-max-ziplist-size", "-2" },
    { "list-compress-depth", "0" },         { "set-max-intset-entries", "512" },
    { "set-max-listpack-entries", "128" },  { "set-max-listpack-value", "64" },
    { "zset-max-listpack-entries", "128" }, { "zset-max-listpack-value", "64" },
    { "zset-max-ziplist-entries", "128" },  { "zset-max-ziplist-value", "64" },
    { "activerehashing", "yes" },           { "lazyfree-lazy-eviction", "no" },
    { "lazyfree-lazy-expire", "no" },       { "lazyfree-lazy-server-del", "no" },
    { "lazyfree-lazy-user-del", "no" },     { "lazyfree-lazy-user-flush", "no" },
    { "tcp-keepalive", "300" },
    { "supervised", "no" },                 { "pidfile", "" },
    { "rdbcompression", "yes" },            { "rdbchecksum", "yes" },
    { "sanitize-dump-payload", "no" }, /* RESTORE always checks the structure */
    { "dbfilename", "dump.rdb" },           { "stop-writes-on-bgsave-error", "yes" },
    { "lua-time-limit", "5000" },           { "busy-reply-threshold", "5000" },
    { "io-threads", "1" },                  { "io-threads-do-reads", "no" },
    { "always-show-logo", "no" },           { "set-proc-title", "yes" },
    { "no-appendfsync-on-rewrite", "no" },  { "aof-rewrite-incremental-fsync", "yes" },
    { "dynamic-hz", "yes" },
    { "jemalloc-bg-thread", "yes" },        { "activedefrag", "no" },
    { "syslog-enabled", "no" },             
    { "rdb-save-incremental-fsync", "yes" },
    { "stream-node-max-bytes", "4096" },    { "stream-node-max-entries", "100" },
    { "client-query-buffer-limit", "1073741824" }, { "lfu-log-factor", "10" },
    { "lfu-decay-time", "1" },              { "maxmemory-eviction-tenacity", "10" },
    { "proc-title-template", "{title} {listen-addr} {server-mode}" },
    { "bind-source-addr", "" }, /* read by the replica's link (replication.c) */
    { "enable-debug-command", "no" },       { "enable-protected-configs", "no" },
    { "enable-module-command", "no" },      { "unixsocket", "" },
    { "unixsocketperm", "0" },              { "cluster-enabled", "no" },
    { "oom-score-adj", "no" },              { "disable-thp", "yes" },
    { "replica-lazy-flush", "no" },
    { "tracking-table-max-keys", "1000000" }, /* read by tracking.c */
    { "maxmemory-clients", "0" },
    { "oom-score-adj-values", "0 200 800" }, /* t_cevict.c */
};

/* Pairs of names for one option (Redis 7.0 renamed ziplist to listpack):
 * setting either shows in both, and the code reads the newer name. */
static const char *const aliases[][2] = {
    { "lua-time-limit", "busy-reply-threshold" },
    { "hash-max-ziplist-entries", "hash-max-listpack-entries" },
    { "hash-max-ziplist-value", "hash-max-listpack-value" },
    { "zset-max-ziplist-entries", "zset-max-listpack-entries" },
    { "zset-max-ziplist-value", "zset-max-listpack-value" },
    { "list-max-ziplist-size", "list-max-listpack-size" },
};

static void set_alias(const char *name, const char *value)
{
    for (size_t a = 0; a < BK_ARRAY_LEN(aliases); a++) {
        const char *other = strcasecmp(name, aliases[a][0]) == 0   ? aliases[a][1]
                            : strcasecmp(name, aliases[a][1]) == 0 ? aliases[a][0]
                                                                   : NULL;
        for (size_t k = 0; other && k < BK_ARRAY_LEN(noops); k++)
            if (strcasecmp(noops[k].name, other) == 0)
                snprintf(noops[k].value, sizeof noops[k].value, "%s", value);
    }
}

long long kv_busy_reply_ms = 5000;

static const char *policy_names[] = { "noeviction",     "allkeys-lru",     "volatile-lru",
                                      "allkeys-random", "volatile-random", "volatile-ttl",
                                      "allkeys-lfu",    "volatile-lfu" };
static const char *fsync_names[] = { "always", "everysec", "no" };
static const char *loglevel_names[] = { "warning", "notice", "verbose", "debug" };

/* The value string of a compatibility option (stream-node-max-entries and
 * friends, read by the stream code): stable storage that CONFIG SET
 * rewrites in place, so a caller may keep the pointer. NULL if unknown. */
const char *kv_config_noop_str(const char *name)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(noops); i++)
        if (strcasecmp(name, noops[i].name) == 0)
            return noops[i].value;
    return NULL;
}

static const char *protected_action_names[] = { "no", "yes", "local" };

static int is_protected_action_option(const char *name)
{
    return strcasecmp(name, "enable-debug-command") == 0 ||
           strcasecmp(name, "enable-protected-configs") == 0 ||
           strcasecmp(name, "enable-module-command") == 0;
}

int kv_protected_action_allowed(const char *option, const char *addr)
{
    const char *v = kv_config_noop_str(option);
    if (!v || strcmp(v, "no") == 0)
        return 0;
    if (strcmp(v, "yes") == 0)
        return 1;
    /* local: Redis compares the peer address with 127.0.0.1 and ::1 */
    return strncmp(addr, "127.0.0.1:", 10) == 0 || strncmp(addr, "[::1]:", 6) == 0;
}

const char *kv_policy_name(enum kv_policy p) { return policy_names[p]; }
const char *kv_fsync_name(enum kv_fsync f) { return fsync_names[f]; }

static char *xstrdup(const char *s)
{
    return kv_strndup(s, strlen(s));
}

void kv_config_defaults(kv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->port = 6379;
    cfg->bind[0] = xstrdup("127.0.0.1");
    cfg->bind[1] = xstrdup("-::1");
    cfg->nbind = 2;
    cfg->busy_poll_us = 50;
    cfg->appendonly = 0;
    cfg->appendfsync = FSYNC_EVERYSEC;
    cfg->appendfilename = xstrdup("appendonly.aof");
    cfg->appenddirname = xstrdup("appendonlydir");
    cfg->aof_use_rdb_preamble = 1;
    cfg->requirepass = xstrdup("");
    cfg->maxclients = 10000;
    cfg->maxmemory = 0;
    cfg->maxmemory_policy = MM_NOEVICTION;
    cfg->maxmemory_samples = 5;
    cfg->databases = KV_DEFAULT_DBS;
    cfg->proto_max_bulk_len = 512ull * 1024 * 1024;
    cfg->hll_sparse_max_bytes = 3000;
    cfg->obuf_hard = 512ull * 1024 * 1024;
    cfg->obuf_soft = 128ull * 1024 * 1024;
    cfg->obuf_soft_secs = 60;
    cfg->hz = 10;
    cfg->auto_aof_rewrite_pct = 100;
    cfg->auto_aof_rewrite_min = 64ull * 1024 * 1024;
    cfg->aof_load_truncated = 1;
    cfg->loglevel = 2; /* LOG_INFO */
    cfg->loglevel_name = 1; /* notice */
    cfg->logfile = xstrdup("");
    cfg->save = xstrdup("3600 1 300 100 60 10000"); /* Redis 7.0's save points */
    cfg->timeout = 0;
    cfg->shutdown_timeout = 10; /* seconds a shutdown waits for lagging replicas */
    cfg->tcp_backlog = 511;
    cfg->active_expire_effort = 1;
    cfg->protected_mode = 1;
}

void kv_config_free(kv_config *cfg)
{
    for (int i = 0; i < cfg->nbind; i++)
        kv_free(cfg->bind[i]);
    cfg->nbind = 0;
    char **strs[] = { &cfg->dir, &cfg->appendfilename, &cfg->appenddirname, &cfg->requirepass, &cfg->logfile, &cfg->save };
    for (size_t i = 0; i < BK_ARRAY_LEN(strs); i++) {
        kv_free(*strs[i]);
        *strs[i] = NULL;
    }
}

/* Redis memory units: k = 1000, kb = 1024, m, mb, g, gb. */
static int parse_memory(const char *s, uint64_t *out)
{
    size_t n = strlen(s), i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    uint64_t v;
    if (num_parse_u64(s, i, UINT64_MAX, &v) < 0)
        return -1;
    const char *u = s + i;
    static const struct { const char *u; uint64_t mul; } units[] = {
        { "", 1 }, { "b", 1 }, { "k", 1000 }, { "kb", 1024 }, { "m", 1000000 },
        { "mb", 1024 * 1024 }, { "g", 1000000000ull }, { "gb", 1024ull * 1024 * 1024 },
    };
    for (size_t k = 0; k < BK_ARRAY_LEN(units); k++) {
        if (strcasecmp(u, units[k].u) == 0) {
            if (units[k].mul > 1 && v > UINT64_MAX / units[k].mul)
                return -1;
            *out = v * units[k].mul;
            return 0;
        }
    }
    return -1;
}

int kv_config_parse_memory(const char *s, uint64_t *out)
{
    return parse_memory(s, out);
}

static int parse_yesno(const char *s, int *out)
{
    if (strcasecmp(s, "yes") == 0) {
        *out = 1;
        return 0;
    }
    if (strcasecmp(s, "no") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int pick(const char *s, const char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return (int)i;
    return -1;
}

static void set_int(kv_config *cfg, const opt *o, long long v)
{
    char *p = (char *)cfg + o->off;
    if (o->off == OFF(maxclients) || o->off == OFF(auto_aof_rewrite_pct) ||
        o->off == OFF(timeout))
        *(uint64_t *)(void *)p = (uint64_t)v;
    else
        *(int *)(void *)p = (int)v;
}

/* save "secs changes ..." (or "" / no argument: none): pairs of a number
 * of seconds >= 1 and of changes >= 0, given as one argument or several
 * (the command line), kept as one space-joined string. */
/* At start-up the first save directive (config file, then command line)
 * replaces the default and the next ones add their points, as Redis reads
 * them (CONFIG REWRITE writes one 'save' line per point); save "" clears. */
static int save_seen;

static int set_save(kv_config *cfg, int argc, char **argv, int at_runtime, char *err,
                    size_t errlen)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *joined = kv_malloc(len), *w = joined;
    int ntok = 0, bad = 0;
    for (int i = 0; i < argc; i++) {
        for (const char *p = argv[i]; *p;) {
            while (*p == ' ')
                p++;
            const char *t = p;
            while (*p && *p != ' ')
                p++;
            if (p == t)
                break;
            long long v;
            if (kv_parse_ll(t, (size_t)(p - t), &v) < 0 || v < (ntok % 2 ? 0 : 1))
                bad = 1;
            if (ntok++)
                *w++ = ' ';
            memcpy(w, t, (size_t)(p - t));
            w += p - t;
        }
    }
    *w = '\0';
    if (bad || ntok % 2) {
        kv_free(joined);
        snprintf(err, errlen, "Invalid save parameters");
        return -1;
    }
    if (!at_runtime && save_seen && ntok && cfg->save && cfg->save[0]) {
        size_t a = strlen(cfg->save), b = strlen(joined);
        char *both = kv_malloc(a + 1 + b + 1);
        memcpy(both, cfg->save, a);
        both[a] = ' ';
        memcpy(both + a + 1, joined, b + 1);
        kv_free(joined);
        joined = both;
    }
    if (!at_runtime)
        save_seen = 1;
    kv_free(cfg->save);
    cfg->save = joined;
    return 0;
}

/* shutdown-on-sigterm / shutdown-on-sigint: Redis's SHUTDOWN flags for a
 * signal ("default", or save|nosave, now, force). brisk-kv never waits for
 * replicas, so only save/nosave change what happens (dump_at_exit). */
static const char *const shutdown_flag_names[] = { "save", "nosave", "now", "force" };
static int shutdown_on[2]; /* [0] SIGTERM, [1] SIGINT: KV_SHUTDOWN_* bits */

int kv_shutdown_flags(int sig)
{
    return shutdown_on[sig == SIGINT];
}

static int set_shutdown_on(int *out, int argc, char **argv, char *err, size_t errlen)
{
    int flags = 0, words = 0, bad = 0;
    for (int i = 0; i < argc && !bad; i++) {
        char **w = NULL;
        int n = kv_split_line(argv[i], &w); /* CONFIG SET gives "nosave now" as one */
        if (n < 0) {
            bad = 1;
            break;
        }
        for (int k = 0; k < n && !bad; k++, words++) {
            int bit = -1;
            for (int f = 0; f < (int)BK_ARRAY_LEN(shutdown_flag_names); f++)
                if (strcasecmp(w[k], shutdown_flag_names[f]) == 0)
                    bit = f;
            if (bit >= 0)
                flags |= 1 << bit;
            else if (strcasecmp(w[k], "default") != 0)
                bad = 1;
        }
        kv_free_argv(n, w);
    }
    if (bad)
        words = 0;
    if (words == 0) {
        snprintf(err, errlen, "argument(s) must be one of the following: default, save, nosave, "
                              "now, force");
        return -1;
    }
    if ((flags & KV_SHUTDOWN_SAVE) && (flags & KV_SHUTDOWN_NOSAVE)) {
        snprintf(err, errlen, "shutdown options SAVE and NOSAVE can't be used simultaneously");
        return -1;
    }
    *out = flags;
    return 0;
}

static void fmt_shutdown_on(int flags, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (int f = 0; f < (int)BK_ARRAY_LEN(shutdown_flag_names); f++)
        if (flags & (1 << f))
            k += (size_t)snprintf(out + k, n - k, "%s%s", k ? " " : "", shutdown_flag_names[f]);
    if (!k)
        snprintf(out, n, "default");
}

/* Table-only options that are memory values in Redis. */
static int noop_is_memory(const char *name)
{
    static const char *const mem[] = { "client-query-buffer-limit", "stream-node-max-bytes",
                                       "hash-max-listpack-value", "zset-max-listpack-value",
                                       "set-max-listpack-value", "hash-max-ziplist-value",
                                       "zset-max-ziplist-value" };
    for (size_t i = 0; i < BK_ARRAY_LEN(mem); i++)
        if (strcasecmp(name, mem[i]) == 0)
            return 1;
    return 0;
}

/* maxmemory-clients: a memory value, or a percentage of maxmemory ("5%").
 * As Redis 7.0 (its value is one signed number, a percentage negative): a
 * number past LLONG_MAX reads as a percentage, 2^64-1 (what an overflowing
 * number saturates to) as 1%, 2^63 as too large a percentage. */
static int check_maxmemory_clients(const char *v, char *out, size_t outlen, char *err,
                                   size_t errlen)
{
    size_t n = strlen(v), digits = 0;
    uint64_t bytes;
    long long pct;
    if (n > 1 && v[n - 1] == '%' && kv_parse_ll(v, n - 1, &pct) == 0 && pct >= 0) {
        if (pct > 100) {
            snprintf(err, errlen, "percentage argument must be less or equal to 100");
            return -1;
        }
        if (pct == 0)
            snprintf(out, outlen, "0");
        else
            snprintf(out, outlen, "%lld%%", pct);
        kv_cevict_config(0, (int)pct);
        return 0;
    }
    while (digits < n && v[digits] >= '0' && v[digits] <= '9')
        digits++;
    if (n == 0) {
        bytes = 0; /* "" is 0 (off) in Redis */
    } else if (parse_memory(v, &bytes) < 0) {
        if (digits != n) {
            snprintf(err, errlen, "argument must be a memory or percent value");
            return -1;
        }
        bytes = UINT64_MAX; /* digits only: overflowed */
    }
    if (bytes > LLONG_MAX) {
        uint64_t p = 0 - bytes;
        if (p > 100) {
            snprintf(err, errlen, "percentage argument must be less or equal to 100");
            return -1;
        }
        snprintf(out, outlen, "%llu%%", (unsigned long long)p);
        kv_cevict_config(0, (int)p);
        return 0;
    }
    snprintf(out, outlen, "%llu", (unsigned long long)bytes);
    kv_cevict_config(bytes, -1);
    return 0;
}

/* oom-score-adj-values: three integers in -2000..2000 separated by single
 * spaces (Redis splits on each space: "1  2 3" has four). */
static int check_oom_values(int argc, char **argv, char *out, size_t outlen, char *err,
                            size_t errlen)
{
    char buf[128];
    long long x[3];
    int n = 0;
    size_t at = 0;
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]);
        if (at + l + 2 > sizeof buf) {
            n = 4; /* far too long for three numbers */
            break;
        }
        if (i)
            buf[at++] = ' ';
        memcpy(buf + at, argv[i], l);
        at += l;
    }
    buf[at] = '\0';
    const char *tok[8];
    size_t tlen[8];
    if (n == 0) {
        const char *p = buf;
        for (;;) {
            const char *sp = strchr(p, ' ');
            size_t l = sp ? (size_t)(sp - p) : strlen(p);
            if (n < 8) {
                tok[n] = p;
                tlen[n] = l;
            }
            n++;
            if (!sp)
                break;
            p = sp + 1;
        }
    }
    if (n != 3) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        /* strtoll's reading, as Redis: "" is 0, "+5" is 5 */
        char num[32], *end;
        size_t l = BK_MIN(tlen[i], sizeof num - 1);
        memcpy(num, tok[i], l);
        num[l] = '\0';
        errno = 0;
        x[i] = strtoll(num, &end, 10);
        if (*end || tlen[i] != l || errno || x[i] < -2000 || x[i] > 2000) {
            snprintf(err, errlen,
                     "Invalid oom-score-adj-values, elements must be between -2000 and 2000.");
            return -1;
        }
    }
    snprintf(out, outlen, "%lld %lld %lld", x[0], x[1], x[2]);
    return 0;
}

/* oom-score-adj and its values at run time: the new value applies to this
 * process at once; when the kernel refuses, the old value stays. */
static int set_oom(int i, int argc, char **argv, int at_runtime, char *err, size_t errlen)
{
    static const char *const modes[] = { "no", "yes", "relative", "absolute" };
    char old[sizeof noops[i].value];
    snprintf(old, sizeof old, "%s", noops[i].value);
    if (strcasecmp(noops[i].name, "oom-score-adj") == 0) {
        int k = argc == 1 ? pick(argv[0], (const char **)modes, BK_ARRAY_LEN(modes)) : -1;
        if (k < 0) {
            snprintf(err, errlen, argc == 1 ? "argument(s) must be one of the following: no, "
                                              "yes, relative, absolute"
                                            : "wrong number of arguments");
            return -1;
        }
        /* relative is yes (its other name), as CONFIG GET shows it */
        snprintf(noops[i].value, sizeof noops[i].value, "%s", modes[k == 2 ? 1 : k]);
    } else if (check_oom_values(argc, argv, noops[i].value, sizeof noops[i].value, err,
                                errlen) < 0) {
        return -1;
    }
    if (!at_runtime)
        return 0; /* applied once the configuration is read (kv_server_main) */
    int role = repl_is_replica() ? KV_OOM_REPLICA : KV_OOM_MASTER;
    if (strcasecmp(noops[i].name, "oom-score-adj-values") == 0 &&
        strcasecmp(kv_config_noop_str("oom-score-adj"), "no") == 0)
        return 0; /* off: /proc is not touched */
    if (kv_oom_apply(role) < 0) {
        log_warn("oom-score-adj: cannot write /proc/self/oom_score_adj: %s", strerror(errno));
        snprintf(noops[i].value, sizeof noops[i].value, "%s", old);
        snprintf(err, errlen, "Failed to set current oom_score_adj. Check server logs.");
        return -1;
    }
    return 0;
}

/* CONFIG SET port/bind to the value they have (what CONFIG GET * then SET
 * of each, as clients and Redis's own tests do, sends): accepted, nothing
 * to change. Another value needs a rebind, which is not supported. */
static int same_listen_value(const kv_config *cfg, const opt *o, int argc, char **argv)
{
    if (o->off == OFF(port) && o->kind == O_INT) {
        long long v;
        return argc == 1 && kv_parse_ll(argv[0], strlen(argv[0]), &v) == 0 && v == cfg->port;
    }
    if (o->kind != O_BIND || argc != cfg->nbind)
        return 0;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], cfg->bind[i]) != 0)
            return 0;
    return 1;
}

/* bind: 1 to KV_MAX_BIND addresses, stored (the listeners are the caller's). */
static int set_bind(kv_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
    if (argc < 1 || argc > KV_MAX_BIND) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    for (int i = 0; i < cfg->nbind; i++)
        kv_free(cfg->bind[i]);
    for (int i = 0; i < argc; i++)
        cfg->bind[i] = xstrdup(argv[i]);
    cfg->nbind = argc;
    return 0;
}

/* CONFIG SET port or bind to a new value: the listeners move first; the
 * option changes only when that worked (Redis's errors otherwise). */
static int relisten(kv_config *cfg, const opt *o, int argc, char **argv, char *err,
                    size_t errlen)
{
    if (o->kind == O_BIND) {
        if (argc < 1 || argc > KV_MAX_BIND)
            return set_bind(cfg, argc, argv, err, errlen); /* its error */
        if (kv_relisten(cfg->port, argv, argc) < 0) {
            snprintf(err, errlen, "Failed to bind to specified addresses.");
            return -1;
        }
        return set_bind(cfg, argc, argv, err, errlen);
    }
    long long v;
    if (argc != 1 || kv_parse_ll(argv[0], strlen(argv[0]), &v) < 0) {
        snprintf(err, errlen, argc != 1 ? "wrong number of arguments"
                                        : "argument couldn't be parsed into an integer");
        return -1;
    }
    if (v < o->min || v > o->max) {
        snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min, o->max);
        return -1;
    }
    if (kv_relisten((int)v, cfg->bind, cfg->nbind) < 0) {
        snprintf(err, errlen, "Unable to listen on this port. Check server logs.");
        return -1;
    }
    cfg->port = (int)v;
    return 0;
}

int kv_config_set(kv_config *cfg, const char *name, int argc, char **argv, int at_runtime,
                  char *err, size_t errlen)
{
    int acl_rc = kv_acl_config_set(name, argc, argv, at_runtime, err, errlen);
    if (acl_rc != 1)
        return acl_rc;
    /* notify-keyspace-events, slowlog-*, latency-monitor-threshold and
     * client-output-buffer-limit live in srv with the code that uses them */
    if (strcasecmp(name, "shutdown-on-sigterm") == 0 || strcasecmp(name, "shutdown-on-sigint") == 0)
        return set_shutdown_on(&shutdown_on[strcasecmp(name, "shutdown-on-sigint") == 0], argc,
                               argv, err, errlen);
    int ext = kv_notify_config_set(name, argc, argv, err, errlen);
    if (ext != 1)
        return ext;
    if (!at_runtime && strcasecmp(name, "rename-command") == 0) {
        if (argc != 2) {
            snprintf(err, errlen, "wrong number of arguments");
            return -1;
        }
        return kv_cmd_rename(argv[0], argv[1], err, errlen);
    }
    int repl_rc = repl_config_set(name, argc, argv, at_runtime, err, errlen);
    if (repl_rc != 1)
        return repl_rc;
    int tls_rc = kv_tls_config_set(name, argc, argv, at_runtime, err, errlen);
    if (tls_rc != 1)
        return tls_rc;
    int sig_rc = kv_signals_config_set(name, argc, argv, err, errlen);
    if (sig_rc != 1)
        return sig_rc;
    const opt *o = NULL;
    for (size_t i = 0; i < BK_ARRAY_LEN(opts); i++)
        if (strcasecmp(name, opts[i].name) == 0)
            o = &opts[i];
    if (!o) {
        for (size_t i = 0; i < BK_ARRAY_LEN(noops); i++) {
            if (strcasecmp(name, noops[i].name) == 0) {
                if (strcasecmp(name, "oom-score-adj") == 0 ||
                    strcasecmp(name, "oom-score-adj-values") == 0)
                    return set_oom((int)i, argc, argv, at_runtime, err, errlen);
                if (argc != 1) {
                    snprintf(err, errlen, "wrong number of arguments");
                    return -1;
                }
                if (is_protected_action_option(name)) {
                    /* security switches: the config file or command line only */
                    int k = at_runtime ? -1
                                       : pick(argv[0], protected_action_names,
                                              BK_ARRAY_LEN(protected_action_names));
                    if (at_runtime)
                        snprintf(err, errlen, "can't set immutable config");
                    else if (k < 0)
                        snprintf(err, errlen,
                                 "argument(s) must be one of the following: no, yes, local");
                    else
                        snprintf(noops[i].value, sizeof noops[i].value, "%s",
                                 protected_action_names[k]);
                    return k < 0 ? -1 : 0;
                }
                if (strcasecmp(name, "proc-title-template") == 0) {
                    if (!kv_proctitle_valid(argv[0])) {
                        snprintf(err, errlen,
                                 "template format is invalid or contains unknown variables");
                        return -1;
                    }
                    snprintf(noops[i].value, sizeof noops[i].value, "%s", argv[0]);
                    if (at_runtime)
                        kv_proctitle_update();
                    return 0;
                }
                if (strcasecmp(name, "maxmemory-clients") == 0)
                    return check_maxmemory_clients(argv[0], noops[i].value,
                                                   sizeof noops[i].value, err, errlen);
                if (noop_is_memory(name)) {
                    /* "4kb" is 4096, as Redis stores and shows it (readers
                     * of these values take a plain number) */
                    uint64_t bytes;
                    if (parse_memory(argv[0], &bytes) < 0 || bytes > LLONG_MAX) {
                        snprintf(err, errlen, "argument must be a memory value");
                        return -1;
                    }
                    snprintf(noops[i].value, sizeof noops[i].value, "%llu",
                             (unsigned long long)bytes);
                    set_alias(name, noops[i].value);
                    return 0;
                }
                snprintf(noops[i].value, sizeof noops[i].value, "%s", argv[0]);
                if (strcasecmp(name, "lua-time-limit") == 0 ||
                    strcasecmp(name, "busy-reply-threshold") == 0)
                    kv_busy_reply_ms = strtoll(argv[0], NULL, 10);
                set_alias(name, argv[0]);
                return 0;
            }
        }
        snprintf(err, errlen, "Bad directive or wrong number of arguments");
        return 1; /* unknown */
    }
    if (at_runtime && (o->kind == O_BIND || o->off == OFF(port)) && cfg == &srv.cfg &&
        !same_listen_value(cfg, o, argc, argv))
        return relisten(cfg, o, argc, argv, err, errlen);
    if (at_runtime && o->immutable && !same_listen_value(cfg, o, argc, argv)) {
        snprintf(err, errlen, "can't set immutable config");
        return -1;
    }
    if (o->kind == O_BIND)
        return set_bind(cfg, argc, argv, err, errlen);
    if (o->kind == O_STR && o->off == OFF(save))
        return set_save(cfg, argc, argv, at_runtime, err, errlen);
    if (argc != 1) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    const char *v = argv[0];
    char *p = (char *)cfg + o->off;
    switch (o->kind) {
    case O_INT: {
        long long n;
        if (kv_parse_ll(v, strlen(v), &n) < 0) {
            snprintf(err, errlen, "argument couldn't be parsed into an integer");
            return -1;
        }
        if (n < o->min || n > o->max) {
            snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min,
                     o->max);
            return -1;
        }
        set_int(cfg, o, n);
        return 0;
    }
    case O_SIZE: {
        uint64_t n;
        if (parse_memory(v, &n) < 0) {
            snprintf(err, errlen, "argument must be a memory value");
            return -1;
        }
        if (n < (uint64_t)o->min || n > (uint64_t)o->max) {
            snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min,
                     o->max);
            return -1;
        }
        *(uint64_t *)(void *)p = n;
        return 0;
    }
    case O_BOOL: {
        int b;
        if (parse_yesno(v, &b) < 0) {
            snprintf(err, errlen, "argument must be 'yes' or 'no'");
            return -1;
        }
        if (o->off == OFF(daemonize) && b) {
            snprintf(err, errlen, "daemonize is not supported (run under a supervisor)");
            return -1;
        }
        if (o->off == OFF(appendonly) && at_runtime && b != cfg->appendonly) {
            if (aof_set_enabled(b) < 0) {
                snprintf(err, errlen, "could not switch the AOF (see the log)");
                return -1;
            }
        }
        *(int *)(void *)p = b;
        if (o->off == OFF(aof_disable_auto_gc) && at_runtime && !b)
            aof_delete_history(); /* what the knob kept goes now */
        return 0;
    }
    case O_STR: {
        /* As Redis 7: both name something inside dir. */
        if ((o->off == OFF(appendfilename) || o->off == OFF(appenddirname)) && strchr(v, '/')) {
            snprintf(err, errlen, "%s can't be a path, just a %s", o->name,
                     o->off == OFF(appendfilename) ? "filename" : "dirname");
            return -1;
        }
        if (o->off == OFF(dir) && at_runtime && chdir(v) < 0) {
            snprintf(err, errlen, "No such file or directory");
            return -1;
        }
        char **sp = (char **)(void *)p;
        kv_free(*sp);
        *sp = xstrdup(v);
        return 0;
    }
    case O_POLICY: {
        int k = pick(v, policy_names, BK_ARRAY_LEN(policy_names));
        if (k < 0) {
            snprintf(err, errlen, "argument(s) must be one of the following: volatile-lru, "
                                  "volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, "
                                  "allkeys-lfu, allkeys-random, noeviction");
            return -1;
        }
        cfg->maxmemory_policy = (enum kv_policy)k;
        return 0;
    }
    case O_FSYNC: {
        int k = pick(v, fsync_names, BK_ARRAY_LEN(fsync_names));
        if (k < 0) {
            snprintf(err, errlen, "argument(s) must be one of the following: always, everysec, no");
            return -1;
        }
        cfg->appendfsync = (enum kv_fsync)k;
        if (at_runtime) {
            if (k == FSYNC_EVERYSEC)
                aof_start_fsync_thread();
        }
        return 0;
    }
    case O_LOGLEVEL: {
        int k = pick(v, loglevel_names, BK_ARRAY_LEN(loglevel_names));
        if (k < 0) {
            snprintf(err, errlen, "argument(s) must be one of the following: debug, verbose, notice, warning");
            return -1;
        }
        /* warning -> LOG_WARN, notice -> LOG_INFO, verbose/debug -> LOG_DEBUG */
        static const int map[] = { 1, 2, 3, 3 };
        cfg->loglevel = map[k];
        cfg->loglevel_name = k;
        if (at_runtime)
            log_set_level((enum log_level)cfg->loglevel); /* CONFIG SET takes effect now */
        return 0;
    }
    default:
        return -1;
    }
}

int kv_split_line(const char *line, char ***argvp)
{
    resp_parser p;
    resp_parser_init(&p);
    size_t n = strlen(line);
    char *b = kv_malloc(n + 2);
    memcpy(b, line, n);
    b[n] = '\n';
    b[n + 1] = '\0';
    p.kind = 'i'; /* force inline even for a leading '*' */
    int rc = resp_parse(&p, b, n + 1);
    int argc = -1;
    if (rc == RESP_CMD || (rc == RESP_AGAIN && p.nargs == 0)) {
        argc = (int)p.nargs;
        char **argv = kv_malloc(((size_t)argc + 1) * sizeof *argv);
        for (int i = 0; i < argc; i++)
            argv[i] = kv_strndup(b + p.args[i].off, p.args[i].len);
        argv[argc] = NULL;
        *argvp = argv;
    }
    kv_free(b);
    resp_parser_free(&p);
    return argc;
}

void kv_free_argv(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        kv_free(argv[i]);
    kv_free(argv);
}

int kv_config_load_file(kv_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
                     line[n - 1] == '\t'))
            line[--n] = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '#')
            continue;
        char **argv;
        int argc = kv_split_line(s, &argv);
        if (argc < 0) {
            snprintf(err, errlen, "%s:%d: unbalanced quotes in configuration line", path, lineno);
            rc = -1;
            break;
        }
        if (argc == 0) {
            kv_free_argv(argc, argv);
            continue;
        }
        char msg[256];
        int r = kv_config_set(cfg, argv[0], argc - 1, argv + 1, 0, msg, sizeof msg);
        if (r == 1) {
            fprintf(stderr, "brisk-kv: %s:%d: ignoring unsupported directive '%s'\n", path,
                    lineno, argv[0]);
        } else if (r < 0) {
            snprintf(err, errlen, "%s:%d: '%s': %s", path, lineno, argv[0], msg);
            kv_free_argv(argc, argv);
            rc = -1;
            break;
        }
        kv_free_argv(argc, argv);
    }
    fclose(f);
    return rc;
}

static void fmt_value(const kv_config *cfg, const opt *o, char *out, size_t n)
{
    const char *p = (const char *)cfg + o->off;
    switch (o->kind) {
    case O_INT:
        if (o->off == OFF(maxclients) || o->off == OFF(auto_aof_rewrite_pct) ||
            o->off == OFF(timeout))
            snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)(const void *)p);
        else
            snprintf(out, n, "%d", *(const int *)(const void *)p);
        break;
    case O_SIZE:
        snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)(const void *)p);
        break;
    case O_BOOL:
        snprintf(out, n, "%s", *(const int *)(const void *)p ? "yes" : "no");
        break;
    case O_STR: {
        const char *s = *(char *const *)(const void *)p;
        if (o->off == OFF(dir)) {
            if (!getcwd(out, n))
                out[0] = '\0';
            return;
        }
        snprintf(out, n, "%s", s ? s : "");
        break;
    }
    case O_POLICY: snprintf(out, n, "%s", policy_names[cfg->maxmemory_policy]); break;
    case O_FSYNC: snprintf(out, n, "%s", fsync_names[cfg->appendfsync]); break;
    case O_LOGLEVEL: snprintf(out, n, "%s", loglevel_names[cfg->loglevel_name & 3]); break;
    case O_BIND: {
        size_t k = 0;
        out[0] = '\0';
        for (int i = 0; i < cfg->nbind && k < n; i++)
            k += (size_t)snprintf(out + k, n - k, "%s%s", i ? " " : "", cfg->bind[i]);
        break;
    }
    default:
        out[0] = '\0';
    }
}

void kv_config_get(const kv_config *cfg, bk_str pattern,
                   void (*fn)(void *ud, const char *name, const char *value), void *ud)
{
    char val[PATH_MAX + 64];
    kv_notify_config_get(pattern, fn, ud);
    static const char *const sig_opts[] = { "shutdown-on-sigterm", "shutdown-on-sigint" };
    for (int i = 0; i < 2; i++) {
        if (!kv_glob_match(pattern.p, pattern.len, sig_opts[i], strlen(sig_opts[i]), 1))
            continue;
        fmt_shutdown_on(shutdown_on[i], val, sizeof val);
        fn(ud, sig_opts[i], val);
    }
    for (size_t i = 0; i < BK_ARRAY_LEN(opts); i++) {
        const char *name = opts[i].name;
        if (!kv_glob_match(pattern.p, pattern.len, name, strlen(name), 1))
            continue;
        fmt_value(cfg, &opts[i], val, sizeof val);
        fn(ud, name, val);
    }
    for (size_t i = 0; i < BK_ARRAY_LEN(noops); i++) {
        const char *name = noops[i].name;
        size_t nl = strlen(name);
        if (kv_glob_match(pattern.p, pattern.len, name, nl, 1))
            fn(ud, name, noops[i].value);
    }
    kv_acl_config_get(pattern, fn, ud);
    repl_config_get(pattern, fn, ud);
    kv_tls_config_get(pattern, fn, ud);
    kv_signals_config_get(pattern, fn, ud);
}
