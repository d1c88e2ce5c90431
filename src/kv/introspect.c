/* Introspection: COMMAND, INFO, MEMORY, SLOWLOG and LATENCY (split out of
 * t_server.c; CLIENT and CONFIG stay there). */
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
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

