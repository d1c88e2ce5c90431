/* Introspection: COMMAND, INFO, MEMORY, SLOWLOG and LATENCY (split out of
 * t_server.c; CLIENT and CONFIG stay there). */
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/pubsub.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

static int arg_is(str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static void subcommand_unknown(kv_client *c, const char *cmd)
{
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)MIN(c->argv[1].len, 128),
                 c->argv[1].p, cmd);
}

/* ---- COMMAND ---- */

static const struct {
    unsigned flag;
    const char *name;
} flag_names[] = {
    { CMD_WRITE, "write" },     { CMD_READONLY, "readonly" }, { CMD_DENYOOM, "denyoom" },
    { CMD_ADMIN, "admin" },     { CMD_PUBSUB, "pubsub" },     { CMD_NOSCRIPT, "noscript" },
    { CMD_LOADING, "loading" }, { CMD_STALE, "stale" },       { CMD_FAST, "fast" },
    { CMD_NO_AUTH, "no_auth" }, { CMD_ALLOW_BUSY, "allow_busy" },
};

static void reply_command_info(kv_client *c, const kv_cmd *cmd)
{
    reply_array(c, 10);
    reply_bulk_cstr(c, cmd->name);
    reply_int(c, cmd->arity);
    int nf = 0;
    for (size_t i = 0; i < ARRAY_LEN(flag_names); i++)
        nf += (cmd->flags & flag_names[i].flag) != 0;
    reply_set(c, nf);
    for (size_t i = 0; i < ARRAY_LEN(flag_names); i++)
        if (cmd->flags & flag_names[i].flag)
            reply_simple(c, flag_names[i].name);
    reply_int(c, cmd->first_key);
    reply_int(c, cmd->last_key);
    reply_int(c, cmd->key_step);
    /* ACL categories */
    const char *acl = cmd->acl ? cmd->acl : "";
    int na = 0;
    for (const char *p = acl; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        na++;
        while (*p && *p != ' ')
            p++;
    }
    reply_set(c, na);
    for (const char *p = acl; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *s = p;
        while (*p && *p != ' ')
            p++;
        char tmp[64];
        size_t l = MIN((size_t)(p - s), sizeof tmp - 1);
        memcpy(tmp, s, l);
        tmp[l] = '\0';
        reply_simple(c, tmp);
    }
    reply_empty_array(c); /* tips */
    if (cmd->first_key > 0) {
        /* one key spec: range from first to last */
        reply_array(c, 1);
        reply_map(c, 3);
        reply_bulk_cstr(c, "flags");
        reply_set(c, 1);
        reply_simple(c, (cmd->flags & CMD_WRITE) ? "RW" : "RO");
        reply_bulk_cstr(c, "begin_search");
        reply_map(c, 2);
        reply_bulk_cstr(c, "type");
        reply_bulk_cstr(c, "index");
        reply_bulk_cstr(c, "spec");
        reply_map(c, 1);
        reply_bulk_cstr(c, "index");
        reply_int(c, cmd->first_key);
        reply_bulk_cstr(c, "find_keys");
        reply_map(c, 2);
        reply_bulk_cstr(c, "type");
        reply_bulk_cstr(c, "range");
        reply_bulk_cstr(c, "spec");
        reply_map(c, 3);
        reply_bulk_cstr(c, "lastkey");
        reply_int(c, cmd->last_key < 0 ? cmd->last_key : cmd->last_key - cmd->first_key);
        reply_bulk_cstr(c, "keystep");
        reply_int(c, cmd->key_step);
        reply_bulk_cstr(c, "limit");
        reply_int(c, 0);
    } else {
        reply_empty_array(c);
    }
    reply_empty_array(c); /* subcommands */
}

static void reply_command_docs(kv_client *c, const kv_cmd *cmd)
{
    reply_bulk_cstr(c, cmd->name);
    reply_map(c, 4);
    reply_bulk_cstr(c, "summary");
    reply_bulk_cstr(c, cmd->summary ? cmd->summary : "");
    reply_bulk_cstr(c, "since");
    reply_bulk_cstr(c, cmd->since ? cmd->since : "1.0.0");
    reply_bulk_cstr(c, "group");
    reply_bulk_cstr(c, cmd->group ? cmd->group : "generic");
    reply_bulk_cstr(c, "complexity");
    reply_bulk_cstr(c, cmd->complexity ? cmd->complexity : "O(1)");
}

void command_command(kv_client *c)
{
    if (c->argc == 1) {
        reply_array(c, (long long)kv_ncommands);
        for (size_t i = 0; i < kv_ncommands; i++)
            reply_command_info(c, &kv_commands[i]);
        return;
    }
    str sub = c->argv[1];
    if (arg_is(sub, "count") && c->argc == 2) {
        reply_int(c, (long long)kv_ncommands);
    } else if (arg_is(sub, "info")) {
        if (c->argc == 2) {
            reply_array(c, (long long)kv_ncommands);
            for (size_t i = 0; i < kv_ncommands; i++)
                reply_command_info(c, &kv_commands[i]);
            return;
        }
        reply_array(c, c->argc - 2);
        for (int i = 2; i < c->argc; i++) {
            const kv_cmd *cmd = kv_cmd_lookup(c->argv[i]);
            if (cmd)
                reply_command_info(c, cmd);
            else
                reply_null_array(c);
        }
    } else if (arg_is(sub, "docs")) {
        if (c->argc == 2) {
            reply_map(c, (long long)kv_ncommands);
            for (size_t i = 0; i < kv_ncommands; i++)
                reply_command_docs(c, &kv_commands[i]);
            return;
        }
        size_t h = reply_defer(c);
        long long n = 0;
        for (int i = 2; i < c->argc; i++) {
            const kv_cmd *cmd = kv_cmd_lookup(c->argv[i]);
            if (cmd) {
                reply_command_docs(c, cmd);
                n++;
            }
        }
        reply_defer_map(c, h, n);
    } else if (arg_is(sub, "list")) {
        reply_array(c, (long long)kv_ncommands);
        for (size_t i = 0; i < kv_ncommands; i++)
            reply_bulk_cstr(c, kv_commands[i].name);
    } else if (arg_is(sub, "getkeys") && c->argc >= 3) {
        str *argv = c->argv + 2;
        int argc = c->argc - 2;
        const kv_cmd *cmd = kv_cmd_lookup(argv[0]);
        if (!cmd) {
            reply_error(c, "ERR Invalid command specified");
            return;
        }
        if ((cmd->arity > 0 && argc != cmd->arity) || (cmd->arity < 0 && argc < -cmd->arity)) {
            reply_error(c, "ERR Invalid number of arguments specified for command");
            return;
        }
        if (cmd->first_key <= 0) {
            reply_error(c, "ERR The command has no key arguments");
            return;
        }
        int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
        int step = cmd->key_step > 0 ? cmd->key_step : 1;
        size_t h = reply_defer(c);
        long long n = 0;
        for (int i = cmd->first_key; i <= last && i < argc; i += step, n++)
            reply_bulk_str(c, argv[i]);
        reply_defer_array(c, h, n);
    } else if (arg_is(sub, "help")) {
        reply_array(c, 2);
        reply_simple(c, "COMMAND [COUNT|DOCS [name...]|INFO [name...]|LIST|GETKEYS cmd...]");
        reply_simple(c, "HELP");
    } else {
        subcommand_unknown(c, "COMMAND");
    }
}

/* ---- INFO ---- */

static size_t peak_memory;

static void human(char *out, size_t n, double v)
{
    if (v < 1024)
        snprintf(out, n, "%.0fB", v);
    else if (v < 1024.0 * 1024)
        snprintf(out, n, "%.2fK", v / 1024);
    else if (v < 1024.0 * 1024 * 1024)
        snprintf(out, n, "%.2fM", v / 1024 / 1024);
    else
        snprintf(out, n, "%.2fG", v / 1024 / 1024 / 1024);
}

static void addf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(buf *b, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        buf_append(b, line, MIN((size_t)n, sizeof line - 1));
}

static int want_section(kv_client *c, const char *name, int is_default)
{
    if (c->argc == 1)
        return is_default;
    for (int i = 1; i < c->argc; i++) {
        str s = c->argv[i];
        if (arg_is(s, name) || arg_is(s, "everything") || arg_is(s, "all"))
            return 1;
        if (arg_is(s, "default") && is_default)
            return 1;
    }
    return 0;
}

static size_t client_buffers(size_t *max_in, size_t *max_out)
{
    size_t total = 0;
    *max_in = *max_out = 0;
    for (kv_client *x = srv.clients; x; x = x->next) {
        total += x->rbuf.cap + x->wbuf.cap + sizeof *x;
        *max_in = MAX(*max_in, x->rbuf.cap);
        *max_out = MAX(*max_out, x->wbuf.len - x->wpos);
    }
    return total;
}

void info_command(kv_client *c)
{
    buf b = { 0 };
    int64_t uptime = (srv.now_ms - srv.start_ms) / 1000;
    if (want_section(c, "server", 1)) {
        struct utsname un;
        uname(&un);
        addf(&b, "# Server\r\nredis_version:%s\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
                 "redis_build_id:0\r\nredis_mode:standalone\r\nos:%s %s %s\r\narch_bits:%d\r\n"
                 "monotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n"
                 "gcc_version:%d.%d.%d\r\nprocess_id:%d\r\nprocess_supervised:no\r\n"
                 "run_id:%016llx%016llx%08x\r\ntcp_port:%d\r\nserver_time_usec:%lld\r\n"
                 "uptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nhz:%d\r\nconfigured_hz:%d\r\n"
                 "lru_clock:%u\r\nexecutable:%s\r\nconfig_file:%s\r\nio_threads_active:0\r\n"
                 "brisk_kv_version:%s\r\n\r\n",
             KV_VERSION, un.sysname, un.release, un.machine, (int)(sizeof(void *) * 8),
#ifdef __GNUC__
             __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
             0, 0, 0,
#endif
             (int)getpid(), (unsigned long long)srv.start_ms * 2654435761ull,
             (unsigned long long)getpid() * 40503ull, (unsigned)srv.cfg.port, srv.cfg.port,
             (long long)kv_unix_us(), (long long)uptime, (long long)uptime / 86400, srv.cfg.hz,
             srv.cfg.hz, srv.lru_clock, srv.executable ? srv.executable : "",
             srv.config_file ? srv.config_file : "", BRISK_VERSION);
    }
    size_t max_in, max_out;
    size_t cbufs = client_buffers(&max_in, &max_out);
    if (want_section(c, "clients", 1)) {
        addf(&b, "# Clients\r\nconnected_clients:%llu\r\ncluster_connections:0\r\nmaxclients:%llu\r\n"
                 "client_recent_max_input_buffer:%zu\r\nclient_recent_max_output_buffer:%zu\r\n"
                 "blocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n"
                 "total_blocking_keys:0\r\ntotal_blocking_keys_on_nokey:0\r\n\r\n",
             (unsigned long long)srv.nclients, (unsigned long long)srv.cfg.maxclients, max_in,
             max_out);
    }
    if (want_section(c, "memory", 1)) {
        size_t used = kv_used_memory() + cbufs;
        size_t rss = kv_rss_memory();
        if (used > peak_memory)
            peak_memory = used;
        char h1[32], h2[32], h3[32], h4[32];
        human(h1, sizeof h1, (double)used);
        human(h2, sizeof h2, (double)rss);
        human(h3, sizeof h3, (double)peak_memory);
        human(h4, sizeof h4, (double)srv.cfg.maxmemory);
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        addf(&b, "# Memory\r\nused_memory:%zu\r\nused_memory_human:%s\r\nused_memory_rss:%zu\r\n"
                 "used_memory_rss_human:%s\r\nused_memory_peak:%zu\r\nused_memory_peak_human:%s\r\n"
                 "used_memory_dataset:%zu\r\nused_memory_clients:%zu\r\n"
                 "total_system_memory:%lld\r\nmaxmemory:%llu\r\nmaxmemory_human:%s\r\n"
                 "maxmemory_policy:%s\r\nmem_fragmentation_ratio:%.2f\r\nmem_allocator:libc\r\n"
                 "lazyfree_pending_objects:0\r\n\r\n",
             used, h1, rss, h2, peak_memory, h3, kv_used_memory(), cbufs,
             (long long)pages * psz, (unsigned long long)srv.cfg.maxmemory, h4,
             kv_policy_name(srv.cfg.maxmemory_policy), used ? (double)rss / (double)used : 0.0);
    }
    if (want_section(c, "persistence", 1)) {
        addf(&b, "# Persistence\r\nloading:%d\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\n"
                 "rdb_changes_since_last_save:%llu\r\nrdb_bgsave_in_progress:0\r\n"
                 "rdb_last_save_time:%lld\r\nrdb_last_bgsave_status:ok\r\n"
                 "aof_enabled:%d\r\naof_rewrite_in_progress:%d\r\naof_rewrite_scheduled:0\r\n"
                 "aof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:%lld\r\n"
                 "aof_last_bgrewrite_status:%s\r\naof_rewrites:%llu\r\naof_last_write_status:%s\r\n",
             srv.loading, (unsigned long long)srv.dirty, (long long)srv.lastsave,
             srv.aof_state != 0, srv.child_pid > 0,
             srv.child_pid > 0 ? (long long)((srv.now_ms - srv.aof_rewrite_start_ms) / 1000) : -1LL,
             srv.aof_last_bgrewrite_ok ? "ok" : "err", (unsigned long long)srv.aof_rewrites,
             srv.aof_last_write_ok ? "ok" : "err");
        if (srv.aof_state)
            addf(&b, "aof_current_size:%llu\r\naof_base_size:%llu\r\naof_buffer_length:%zu\r\n",
                 (unsigned long long)srv.aof_current_size, (unsigned long long)srv.aof_base_size,
                 srv.aof_buf.len);
        addf(&b, "\r\n");
    }
    if (want_section(c, "stats", 1)) {
        addf(&b, "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                 "instantaneous_ops_per_sec:%llu\r\ntotal_net_input_bytes:%llu\r\n"
                 "total_net_output_bytes:%llu\r\ninstantaneous_input_kbps:%.2f\r\n"
                 "instantaneous_output_kbps:%.2f\r\nrejected_connections:%llu\r\n"
                 "expired_keys:%llu\r\nevicted_keys:%llu\r\nkeyspace_hits:%llu\r\n"
                 "keyspace_misses:%llu\r\npubsub_channels:%zu\r\npubsub_patterns:%zu\r\n"
                 "total_error_replies:%llu\r\ntotal_reads_processed:0\r\n"
                 "total_writes_processed:0\r\n\r\n",
             (unsigned long long)srv.stat_conns, (unsigned long long)srv.stat_cmds,
             (unsigned long long)(kv_instantaneous(0) + 0.5),
             (unsigned long long)srv.stat_net_in, (unsigned long long)srv.stat_net_out,
             kv_instantaneous(1) / 1024, kv_instantaneous(2) / 1024,
             (unsigned long long)srv.stat_rejected_conns, (unsigned long long)srv.stat_expired,
             (unsigned long long)srv.stat_evicted, (unsigned long long)srv.stat_hits,
             (unsigned long long)srv.stat_misses, dict_size(&srv.channels),
             dict_size(&srv.patterns), (unsigned long long)srv.stat_errors);
    }
    if (want_section(c, "replication", 1)) {
        addf(&b, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
                 "master_failover_state:no-failover\r\n"
                 "master_replid:0000000000000000000000000000000000000000\r\n"
                 "master_repl_offset:0\r\nrepl_backlog_active:0\r\n\r\n");
    }
    if (want_section(c, "cpu", 1)) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        addf(&b, "# CPU\r\nused_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\n\r\n",
             (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec, (long)ru.ru_utime.tv_sec,
             (long)ru.ru_utime.tv_usec);
    }
    if (want_section(c, "commandstats", 0)) {
        addf(&b, "# Commandstats\r\n");
        for (size_t i = 0; i < kv_ncommands; i++) {
            kv_cmd_stats *st = &srv.cmd_stats[i];
            if (!st->calls && !st->rejected && !st->failed)
                continue;
            /* the timed calls stand for all of them */
            double usec = st->timed ? (double)st->ticks / kv_ticks_per_us() *
                                          (double)st->calls / (double)st->timed
                                    : 0.0;
            addf(&b, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                     "failed_calls=%llu\r\n",
                 kv_commands[i].name, (unsigned long long)st->calls, (unsigned long long)usec,
                 st->calls ? usec / (double)st->calls : 0.0,
                 (unsigned long long)st->rejected, (unsigned long long)st->failed);
        }
        addf(&b, "\r\n");
    }
    if (want_section(c, "keyspace", 1)) {
        addf(&b, "# Keyspace\r\n");
        for (int i = 0; i < srv.cfg.databases; i++) {
            kv_db *db = &srv.dbs[i];
            if (db_size(db) == 0)
                continue;
            addf(&b, "db%d:keys=%zu,expires=%zu,avg_ttl=0\r\n", i, db_size(db), db->vol_len);
        }
        addf(&b, "\r\n");
    }
    /* no trailing blank line */
    if (b.len >= 2)
        b.len -= 2;
    reply_verbatim(c, b.data ? b.data : "", b.len, "txt");
    buf_free(&b);
}


void memory_command(kv_client *c)
{
    str sub = c->argv[1];
    if (arg_is(sub, "usage") && c->argc >= 3) {
        kv_entry *e = db_lookup_read(c->db, c->argv[2]);
        if (!e) {
            reply_null(c);
            return;
        }
        reply_int(c, (long long)db_entry_bytes(e));
    } else if (arg_is(sub, "doctor")) {
        reply_bulk_cstr(c, "Sam, I detected no issues in this instance.");
    } else {
        subcommand_unknown(c, "MEMORY");
    }
}


/* ---- SLOWLOG, LATENCY and the latency histograms ---- */

#define SLOWLOG_MAX_ARGC 32
#define SLOWLOG_MAX_STRING 128
#define LATENCY_SAMPLES 160 /* per event, one per second at most */
#define HIST_BUCKETS 40     /* power-of-two microsecond buckets */

/* One slow command, in one allocation: the entry, its argv, then the
 * bytes of the arguments, address and name. */
typedef struct slowlog_entry {
    long long id;
    int64_t time;      /* unix seconds */
    long long duration; /* microseconds */
    int argc;
    str *argv;
    str addr, name;
} slowlog_entry;

typedef struct latency_event {
    char name[32];
    struct {
        int64_t time;
        uint32_t ms;
    } samples[LATENCY_SAMPLES];
    int next, count;
    uint32_t max;
} latency_event;

struct kv_introspect {
    /* slowlog: a ring of entries, newest at start */
    slowlog_entry **log;
    size_t start, len, cap; /* cap is a power of two */
    long long next_id;
    latency_event *events;
    int nevents;
    /* per command: calls by power-of-two duration, for LATENCY HISTOGRAM */
    uint64_t (*hist)[HIST_BUCKETS];
};

void kv_introspect_init(void)
{
    srv.introspect = kv_calloc(sizeof *srv.introspect);
    srv.introspect->hist = kv_calloc(kv_ncommands * sizeof *srv.introspect->hist);
    kv_notify_config_defaults(); /* when no option was given */
}

static slowlog_entry *slowlog_at(struct kv_introspect *in, size_t i)
{
    return in->log[(in->start + i) & (in->cap - 1)];
}

static void slowlog_trim(struct kv_introspect *in, size_t max)
{
    while (in->len > max) {
        kv_free(slowlog_at(in, in->len - 1));
        in->len--;
    }
}

void kv_introspect_free(void)
{
    struct kv_introspect *in = srv.introspect;
    if (!in)
        return;
    slowlog_trim(in, 0);
    kv_free(in->log);
    kv_free(in->events);
    kv_free(in->hist);
    kv_free(in);
    srv.introspect = NULL;
}

/* Arguments whose value must not reach the log (Redis redacts them). */
static int redacted(kv_client *c, int i)
{
    const char *name = c->cmd ? c->cmd->name : "";
    if (strcmp(name, "auth") == 0)
        return 1;
    if (strcmp(name, "hello") == 0)
        return i >= 3 && str_ieq_lit(c->argv[i - 2], "auth", 4) ? 1
               : i >= 2 && str_ieq_lit(c->argv[i - 1], "auth", 4);
    if (strcmp(name, "config") == 0 && c->argc >= 4 && arg_is(c->argv[1], "set") && i >= 3 &&
        (i - 2) % 2 == 1)
        return arg_is(c->argv[i - 1], "requirepass") || arg_is(c->argv[i - 1], "masterauth");
    return 0;
}

static void slowlog_add(kv_client *c, long long us)
{
    struct kv_introspect *in = srv.introspect;
    if (srv.slowlog_max_len == 0)
        return;
    int argc = MIN(c->argc, SLOWLOG_MAX_ARGC);
    char more[64];
    size_t bytes = sizeof(slowlog_entry) + (size_t)argc * sizeof(str);
    for (int i = 0; i < argc; i++)
        bytes += MIN(c->argv[i].len, (size_t)SLOWLOG_MAX_STRING) + sizeof more;
    size_t alen = strlen(c->addr), nlen = c->name ? strlen(c->name) : 0;
    bytes += alen + nlen;
    slowlog_entry *e = kv_malloc(bytes);
    e->id = in->next_id++;
    e->time = srv.now_ms / 1000;
    e->duration = us;
    e->argc = argc;
    e->argv = (str *)(e + 1);
    char *p = (char *)(e->argv + argc);
    for (int i = 0; i < argc; i++) {
        str a = c->argv[i];
        size_t n;
        if (argc == SLOWLOG_MAX_ARGC && i == argc - 1 && c->argc > argc) {
            n = (size_t)snprintf(p, sizeof more, "... (%d more arguments)", c->argc - argc + 1);
        } else if (redacted(c, i)) {
            n = (size_t)snprintf(p, sizeof more, "(redacted)");
        } else if (a.len > SLOWLOG_MAX_STRING) {
            memcpy(p, a.p, SLOWLOG_MAX_STRING);
            n = SLOWLOG_MAX_STRING + (size_t)snprintf(p + SLOWLOG_MAX_STRING, sizeof more,
                                                      "... (%zu more bytes)",
                                                      a.len - SLOWLOG_MAX_STRING);
        } else {
            memcpy(p, a.p, a.len);
            n = a.len;
        }
        e->argv[i] = (str){ p, n };
        p += n;
    }
    memcpy(p, c->addr, alen);
    e->addr = (str){ p, alen };
    p += alen;
    if (nlen)
        memcpy(p, c->name, nlen);
    e->name = (str){ p, nlen };
    if (in->len == in->cap) {
        size_t ncap = in->cap ? in->cap * 2 : 16;
        slowlog_entry **nl = kv_malloc(ncap * sizeof *nl);
        for (size_t i = 0; i < in->len; i++)
            nl[i + 1] = slowlog_at(in, i);
        kv_free(in->log);
        in->log = nl;
        in->cap = ncap;
        in->start = 1;
    }
    in->start = (in->start - 1) & (in->cap - 1);
    in->log[in->start] = e;
    in->len++;
    slowlog_trim(in, (size_t)srv.slowlog_max_len);
}

static void latency_add(const char *event, uint32_t ms)
{
    struct kv_introspect *in = srv.introspect;
    latency_event *ev = NULL;
    for (int i = 0; i < in->nevents; i++)
        if (strcmp(in->events[i].name, event) == 0)
            ev = &in->events[i];
    if (!ev) {
        in->events = kv_realloc(in->events, (size_t)(in->nevents + 1) * sizeof *in->events);
        ev = &in->events[in->nevents++];
        memset(ev, 0, sizeof *ev);
        snprintf(ev->name, sizeof ev->name, "%s", event);
    }
    int64_t now = srv.now_ms / 1000;
    if (ms > ev->max)
        ev->max = ms;
    int last = (ev->next + LATENCY_SAMPLES - 1) % LATENCY_SAMPLES;
    if (ev->count && ev->samples[last].time == now) { /* one sample a second: the worst */
        if (ms > ev->samples[last].ms)
            ev->samples[last].ms = ms;
        return;
    }
    ev->samples[ev->next].time = now;
    ev->samples[ev->next].ms = ms;
    ev->next = (ev->next + 1) % LATENCY_SAMPLES;
    if (ev->count < LATENCY_SAMPLES)
        ev->count++;
}

void kv_introspect_after_call(kv_client *c, const kv_cmd *cmd, uint64_t ticks)
{
    long long us = (long long)((double)ticks / kv_ticks_per_us());
    unsigned b = 0;
    while (b < HIST_BUCKETS - 1 && (1ull << b) < (unsigned long long)us)
        b++;
    srv.introspect->hist[cmd - kv_commands][b]++;
    if (cmd->proc == exec_command) /* its commands are logged one by one */
        return;
    if (srv.slowlog_slower_than >= 0 && us >= srv.slowlog_slower_than)
        slowlog_add(c, us);
    if (srv.latency_threshold > 0 && us / 1000 >= srv.latency_threshold)
        latency_add((cmd->flags & CMD_FAST) ? "fast-command" : "command", (uint32_t)(us / 1000));
}

/* The subcommand's own arity error, Redis's "'slowlog|len'" form. */
static int sub_arity(kv_client *c, const char *cmd, int ok)
{
    if (ok)
        return 1;
    char name[48];
    size_t n = MIN(c->argv[1].len, sizeof name - 1);
    for (size_t i = 0; i < n; i++)
        name[i] = ascii_lower(c->argv[1].p[i]);
    name[n] = '\0';
    reply_errorf(c, "ERR wrong number of arguments for '%s|%s' command", cmd, name);
    return 0;
}

static void reply_lines(kv_client *c, const char *const *lines, size_t n)
{
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++)
        reply_simple(c, lines[i]);
}

static const char *const slowlog_help[] = {
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
};

void slowlog_command(kv_client *c)
{
    struct kv_introspect *in = srv.introspect;
    str sub = c->argv[1];
    if (arg_is(sub, "get")) {
        if (c->argc > 3) {
            reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                            "Try SLOWLOG HELP.", (int)sub.len, sub.p);
            return;
        }
        long long count = 10;
        if (c->argc == 3) {
            if (arg_ll(c, c->argv[2], &count) < 0)
                return;
            if (count < -1) {
                reply_error(c, "ERR count should be greater than or equal to -1");
                return;
            }
            if (count == -1)
                count = LLONG_MAX;
        }
        size_t n = (size_t)MIN((unsigned long long)count, (unsigned long long)in->len);
        reply_array(c, (long long)n);
        for (size_t i = 0; i < n; i++) {
            slowlog_entry *e = slowlog_at(in, i);
            reply_array(c, 6);
            reply_int(c, e->id);
            reply_int(c, e->time);
            reply_int(c, e->duration);
            reply_array(c, e->argc);
            for (int k = 0; k < e->argc; k++)
                reply_bulk_str(c, e->argv[k]);
            reply_bulk_str(c, e->addr);
            reply_bulk_str(c, e->name);
        }
    } else if (arg_is(sub, "len")) {
        if (sub_arity(c, "slowlog", c->argc == 2))
            reply_int(c, (long long)in->len);
    } else if (arg_is(sub, "reset")) {
        if (sub_arity(c, "slowlog", c->argc == 2)) {
            slowlog_trim(in, 0);
            reply_ok(c);
        }
    } else if (arg_is(sub, "help")) {
        if (sub_arity(c, "slowlog", c->argc == 2))
            reply_lines(c, slowlog_help, ARRAY_LEN(slowlog_help));
    } else {
        subcommand_unknown(c, "SLOWLOG");
    }
}

static const char *const latency_help[] = {
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the "
    "specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
};

static latency_event *latency_find(str name)
{
    struct kv_introspect *in = srv.introspect;
    for (int i = 0; i < in->nevents; i++)
        if (strlen(in->events[i].name) == name.len &&
            memcmp(in->events[i].name, name.p, name.len) == 0)
            return &in->events[i];
    return NULL;
}

/* Sample k of ev, oldest first. */
static int sample_at(const latency_event *ev, int k)
{
    return (ev->next - ev->count + k + 2 * LATENCY_SAMPLES) % LATENCY_SAMPLES;
}

static void reply_histogram(kv_client *c, size_t i)
{
    const uint64_t *h = srv.introspect->hist[i];
    reply_bulk_cstr(c, kv_commands[i].name);
    reply_map(c, 2);
    reply_bulk_cstr(c, "calls");
    reply_int(c, (long long)srv.cmd_stats[i].calls);
    reply_bulk_cstr(c, "histogram_usec");
    int n = 0;
    for (int b = 0; b < HIST_BUCKETS; b++)
        n += h[b] != 0;
    reply_map(c, n);
    uint64_t sum = 0;
    for (int b = 0; b < HIST_BUCKETS; b++) {
        if (!h[b])
            continue;
        sum += h[b];
        reply_int(c, 1ll << b);
        reply_int(c, (long long)sum);
    }
}

static void latency_histogram(kv_client *c)
{
    size_t h = reply_defer(c);
    long long n = 0;
    if (c->argc == 2) {
        for (size_t i = 0; i < kv_ncommands; i++) {
            if (!srv.cmd_stats[i].calls)
                continue;
            reply_histogram(c, i);
            n++;
        }
    } else {
        for (int a = 2; a < c->argc; a++) {
            const kv_cmd *cmd = kv_cmd_lookup(c->argv[a]);
            if (!cmd || !srv.cmd_stats[cmd - kv_commands].calls)
                continue;
            reply_histogram(c, (size_t)(cmd - kv_commands));
            n++;
        }
    }
    reply_defer_map(c, h, n);
}

static void latency_graph(kv_client *c, const latency_event *ev)
{
    /* A column per sample, oldest first, scaled to the event's max. */
    enum { ROWS = 4 };
    buf b = { 0 };
    char line[256];
    uint32_t hi = 0, lo = UINT32_MAX;
    for (int k = 0; k < ev->count; k++) {
        uint32_t v = ev->samples[sample_at(ev, k)].ms;
        hi = MAX(hi, v);
        lo = MIN(lo, v);
    }
    int n = snprintf(line, sizeof line, "%s - high %lu ms, low %lu ms (all time high %lu ms)\n",
                     ev->name, (unsigned long)hi, (unsigned long)lo, (unsigned long)ev->max);
    buf_append(&b, line, (size_t)n);
    for (int k = 0; k < 80; k++)
        buf_append(&b, "-", 1);
    buf_append(&b, "\n", 1);
    for (int r = ROWS; r >= 1; r--) {
        for (int k = 0; k < ev->count; k++) {
            uint32_t v = ev->samples[sample_at(ev, k)].ms;
            int level = hi ? (int)((v * (uint64_t)ROWS + hi - 1) / hi) : 0;
            buf_append(&b, level >= r ? (r == level ? "#" : "|") : " ", 1);
        }
        buf_append(&b, "\n", 1);
    }
    reply_verbatim(c, b.data ? b.data : "", b.len, "txt");
    buf_free(&b);
}

static void latency_doctor(kv_client *c)
{
    struct kv_introspect *in = srv.introspect;
    buf b = { 0 };
    char line[512];
    int n;
    if (srv.latency_threshold == 0 && in->nevents == 0) {
        n = snprintf(line, sizeof line,
                     "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this "
                     "Redis instance. You may use \"CONFIG SET latency-monitor-threshold "
                     "<milliseconds>.\" in order to enable it. If we weren't in a deep space "
                     "mission I'd suggest to take a look at "
                     "https://redis.io/topics/latency-monitor.\n");
        buf_append(&b, line, (size_t)n);
    } else if (in->nevents == 0) {
        n = snprintf(line, sizeof line,
                     "Dave, no latency spike was observed during the lifetime of this Redis "
                     "instance, not in the slightest bit. I honestly think you ought to sit down "
                     "calmly, take a stress pill, and think things over.\n");
        buf_append(&b, line, (size_t)n);
    } else {
        n = snprintf(line, sizeof line,
                     "Dave, I have observed latency spikes in this Redis instance. You don't mind "
                     "talking about it, do you Dave?\n\n");
        buf_append(&b, line, (size_t)n);
        for (int i = 0; i < in->nevents; i++) {
            latency_event *ev = &in->events[i];
            uint64_t sum = 0;
            for (int k = 0; k < ev->count; k++)
                sum += ev->samples[sample_at(ev, k)].ms;
            n = snprintf(line, sizeof line,
                         "%d. %s: %d latency spikes (average %llums, mean deviation 0ms, "
                         "period 0 sec). Worst all time event %ums.\n",
                         i + 1, ev->name, ev->count,
                         ev->count ? (unsigned long long)(sum / (uint64_t)ev->count) : 0ull,
                         ev->max);
            buf_append(&b, line, (size_t)n);
        }
        n = snprintf(line, sizeof line,
                     "\nI have a few advices for you:\n\n- Check your system for processes or "
                     "commands that take a long time (SLOWLOG GET).\n");
        buf_append(&b, line, (size_t)n);
    }
    reply_verbatim(c, b.data, b.len, "txt");
    buf_free(&b);
}

void latency_command(kv_client *c)
{
    struct kv_introspect *in = srv.introspect;
    str sub = c->argv[1];
    if (arg_is(sub, "latest")) {
        if (!sub_arity(c, "latency", c->argc == 2))
            return;
        reply_array(c, in->nevents);
        for (int i = 0; i < in->nevents; i++) {
            latency_event *ev = &in->events[i];
            int last = sample_at(ev, ev->count - 1);
            reply_array(c, 4);
            reply_bulk_cstr(c, ev->name);
            reply_int(c, ev->samples[last].time);
            reply_int(c, ev->samples[last].ms);
            reply_int(c, ev->max);
        }
    } else if (arg_is(sub, "history")) {
        if (!sub_arity(c, "latency", c->argc == 3))
            return;
        latency_event *ev = latency_find(c->argv[2]);
        int n = ev ? ev->count : 0;
        reply_array(c, n);
        for (int k = 0; k < n; k++) {
            int s = sample_at(ev, k);
            reply_array(c, 2);
            reply_int(c, ev->samples[s].time);
            reply_int(c, ev->samples[s].ms);
        }
    } else if (arg_is(sub, "reset")) {
        long long resets = 0;
        if (c->argc == 2) {
            resets = in->nevents;
            in->nevents = 0;
        } else {
            for (int a = 2; a < c->argc; a++) {
                latency_event *ev = latency_find(c->argv[a]);
                if (!ev)
                    continue;
                *ev = in->events[--in->nevents];
                resets++;
            }
        }
        reply_int(c, resets);
    } else if (arg_is(sub, "graph")) {
        if (!sub_arity(c, "latency", c->argc == 3))
            return;
        latency_event *ev = latency_find(c->argv[2]);
        if (!ev) {
            reply_errorf(c, "ERR No samples available for event '%.*s'",
                         (int)MIN(c->argv[2].len, 128), c->argv[2].p);
            return;
        }
        latency_graph(c, ev);
    } else if (arg_is(sub, "doctor")) {
        if (sub_arity(c, "latency", c->argc == 2))
            latency_doctor(c);
    } else if (arg_is(sub, "histogram")) {
        latency_histogram(c);
    } else if (arg_is(sub, "help")) {
        if (sub_arity(c, "latency", c->argc == 2))
            reply_lines(c, latency_help, ARRAY_LEN(latency_help));
    } else {
        subcommand_unknown(c, "LATENCY");
    }
}
