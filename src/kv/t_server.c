/* Connection and server commands: PING ECHO QUIT SELECT AUTH HELLO CLIENT
 * CONFIG TIME FLUSHDB ... (COMMAND, INFO, MEMORY: introspect.c) */
#include "core/log.h"
#include "kv/acl.h"
#include "kv/aof.h"
#include "kv/blocking.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/pubsub.h"
#include "kv/reply.h"
#include "kv/script.h"
#include "kv/stream.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static void subcommand_unknown(kv_client *c, const char *cmd)
{
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)BK_MIN(c->argv[1].len, 128),
                 c->argv[1].p, cmd);
}

static void subcommand_arity(kv_client *c, const char *cmd)
{
    char name[64];
    size_t n = BK_MIN(c->argv[1].len, 40);
    for (size_t i = 0; i < n; i++)
        name[i] = ascii_lower(c->argv[1].p[i]);
    name[n] = '\0';
    reply_errorf(c, "ERR wrong number of arguments for '%s|%s' command", cmd, name);
}

void ping_command(kv_client *c)
{
    if (c->argc > 2) {
        reply_arity_error(c, "ping");
        return;
    }
    if (pubsub_restricted(c)) {
        /* RESP2 subscribers get the pong as an array, like messages */
        reply_array(c, 2);
        reply_bulk(c, "pong", 4);
        reply_bulk_str(c, c->argc == 2 ? c->argv[1] : BK_STR(""));
    } else if (c->argc == 2) {
        reply_bulk_str(c, c->argv[1]);
    } else {
        reply_raw(c, "+PONG\r\n", 7);
    }
}

void echo_command(kv_client *c)
{
    reply_bulk_str(c, c->argv[1]);
}

void quit_command(kv_client *c)
{
    reply_ok(c);
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}

void select_command(kv_client *c)
{
    long long id;
    if (kv_parse_ll(c->argv[1].p, c->argv[1].len, &id) < 0) {
        reply_error(c, ERR_NOT_INT);
        return;
    }
    if (id < INT_MIN || id > INT_MAX) {
        reply_error(c, "ERR value is out of range, value must between -2147483648 and 2147483647");
        return;
    }
    if (id < 0 || id >= srv.cfg.databases) {
        reply_error(c, ERR_DB_RANGE);
        return;
    }
    kv_client_set_db(c, (int)id);
    reply_ok(c);
}

void dbsize_command(kv_client *c)
{
    reply_int(c, (long long)db_size(c->db));
}

/* 1 for an ASYNC flush (or none said and lazyfree-lazy-user-flush yes), 0
 * for a SYNC one, -1 after replying a syntax error. */
static int flush_args_async(kv_client *c)
{
    if (c->argc == 1) {
        static const char *opt;
        if (!opt)
            opt = kv_config_noop_str("lazyfree-lazy-user-flush");
        return opt && strcmp(opt, "yes") == 0;
    }
    if (c->argc == 2 && arg_is(c->argv[1], "async"))
        return 1;
    if (c->argc == 2 && arg_is(c->argv[1], "sync"))
        return 0;
    reply_error(c, ERR_SYNTAX);
    return -1;
}

/* Redis frees an async flush's keys in a background thread and counts
 * them all in lazyfreed_objects; brisk-kv frees them at once, counted so. */
static void flush_db(kv_db *db, int async)
{
    if (async)
        srv.stat_lazyfreed += db_size(db);
    db_flush(db);
}

void flushdb_command(kv_client *c)
{
    int async = flush_args_async(c);
    if (async < 0)
        return;
    kv_touch_flushed_db(c->db, NULL);
    tracking_invalidate_all();
    flush_db(c->db, async);
    kv_dirty(1);
    reply_ok(c);
}

void flushall_command(kv_client *c)
{
    int async = flush_args_async(c);
    if (async < 0)
        return;
    tracking_invalidate_all();
    for (int i = 0; i < srv.cfg.databases; i++) {
        kv_touch_flushed_db(&srv.dbs[i], NULL);
        flush_db(&srv.dbs[i], async);
    }
    kv_dirty(1);
    dump_flushall();
    repl_flushall();
    reply_ok(c);
}

void kv_db_swap_contents(kv_db *x, kv_db *y)
{
    keytab tk = x->keys;
    x->keys = y->keys;
    y->keys = tk;
    kv_entry **tv = x->vol;
    size_t tl = x->vol_len, tc = x->vol_cap;
    x->vol = y->vol;
    x->vol_len = y->vol_len;
    x->vol_cap = y->vol_cap;
    y->vol = tv;
    y->vol_len = tl;
    y->vol_cap = tc;
}

void swapdb_command(kv_client *c)
{
    long long a, b;
    if (kv_parse_ll(c->argv[1].p, c->argv[1].len, &a) < 0) {
        reply_error(c, "ERR invalid first DB index");
        return;
    }
    if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &b) < 0) {
        reply_error(c, "ERR invalid second DB index");
        return;
    }
    if (a < 0 || a >= srv.cfg.databases || b < 0 || b >= srv.cfg.databases) {
        reply_error(c, ERR_DB_RANGE);
        return;
    }
    kv_db *x = &srv.dbs[a], *y = &srv.dbs[b];
    if (x != y) {
        kv_touch_flushed_db(x, y);
        kv_touch_flushed_db(y, x);
        kv_db_swap_contents(x, y);
        blocking_signal_db(x); /* clients blocked in x or y may be served now */
        blocking_signal_db(y);
        stream_waiters_check_later(); /* an XREADGROUP whose stream moved away fails */
    }
    kv_dirty(1);
    reply_ok(c);
}

void time_command(kv_client *c)
{
    int64_t us = kv_unix_us();
    reply_array(c, 2);
    reply_bulk_ll(c, us / 1000000);
    reply_bulk_ll(c, us % 1000000);
}

void lastsave_command(kv_client *c)
{
    reply_int(c, srv.lastsave);
}

void bgrewriteaof_command(kv_client *c)
{
    char err[256];
    int rc = aof_rewrite_start(err, sizeof err);
    if (rc < 0) {
        reply_error(c, err);
        return;
    }
    reply_simple(c, rc ? "Background append only file rewriting scheduled"
                       : "Background append only file rewriting started");
}

/* ---- SHUTDOWN ---- */

#define SHUTDOWN_FAILED "ERR Errors trying to SHUTDOWN. Check logs."

/* A client blocked in SHUTDOWN waits on no key and for no time: it gets
 * an error when the shutdown fails or is aborted, nothing when it ends. */
static int shutdown_serve(kv_client *c, kv_db *db, bk_str key, kv_entry *e)
{
    (void)c, (void)db, (void)key, (void)e;
    return 0;
}

static void shutdown_failed_reply(kv_client *c)
{
    reply_error(c, SHUTDOWN_FAILED);
}

static const kv_block_kind shutdown_kind = { -1, shutdown_serve, shutdown_failed_reply };

static void shutdown_cancel(void)
{
    srv.shutdown_asap = 0;
    srv.shutdown_flags = 0;
    srv.shutdown_ms = 0;
    kv_pause_writes_internal(0);
    for (kv_client *c = srv.clients; c; c = c->next)
        if (c->blocked && c->bstate && c->bstate->kind == &shutdown_kind) {
            shutdown_failed_reply(c);
            blocking_done(c);
        }
}

/* After the wait (or without one): the save, then the loop stops. */
static int shutdown_finish(void)
{
    int flags = srv.shutdown_flags;
    repl_shutdown_report();
    if (srv.aof_state == 2 && srv.child_pid > 0) { /* the first AOF is not written yet */
        if (!(flags & KV_SHUTDOWN_FORCE)) {
            log_warn("Writing initial AOF, can't exit.");
            goto error;
        }
        log_warn("Writing initial AOF. Exit anyway.");
    }
    if (((flags & KV_SHUTDOWN_SAVE) ||
         (!(flags & KV_SHUTDOWN_NOSAVE) && srv.cfg.save && srv.cfg.save[0])) &&
        dump_shutdown_save(flags & KV_SHUTDOWN_FORCE) < 0)
        goto error;
    srv.shutdown_asap = -1;
    loop_stop(&srv.loop);
    return 1;
error:
    log_warn("Errors trying to shut down the server. Check the logs for more information.");
    shutdown_cancel();
    return -1;
}

int kv_shutdown_prepare(int flags)
{
    if (srv.shutdown_ms)
        return 0; /* one waits already: its end answers this one too */
    if (srv.loading) /* a half-loaded dataset is never saved (Redis neither) */
        flags = (flags & ~KV_SHUTDOWN_SAVE) | KV_SHUTDOWN_NOSAVE;
    srv.shutdown_flags = flags;
    log_info("User requested shutdown...");
    if (!(flags & KV_SHUTDOWN_NOW) && srv.cfg.shutdown_timeout && !srv.loading &&
        !repl_shutdown_ready()) {
        srv.shutdown_ms = srv.now_ms + (int64_t)srv.cfg.shutdown_timeout * 1000;
        if (!srv.pause_type)
            repl_shutdown_getack();
        kv_pause_writes_internal(1);
        log_info("Waiting for replicas before shutting down.");
        return 0;
    }
    return shutdown_finish();
}

void kv_shutdown_cron(void)
{
    if (srv.shutdown_ms) {
        if (srv.now_ms >= srv.shutdown_ms || repl_shutdown_ready())
            shutdown_finish();
    } else if (srv.shutdown_asap > 0) {
        log_info("received %s, shutting down", strsignal(srv.shutdown_asap));
        kv_shutdown_prepare(kv_shutdown_flags(srv.shutdown_asap)); /* shutdown-on-sig* */
    }
}

void shutdown_command(kv_client *c)
{
    static const char *const words[] = { "save", "nosave", "now", "force", "abort" };
    static const int bits[] = { KV_SHUTDOWN_SAVE, KV_SHUTDOWN_NOSAVE, KV_SHUTDOWN_NOW,
                                KV_SHUTDOWN_FORCE, 0 };
    int flags = 0, abort = 0;
    for (int i = 1; i < c->argc; i++) {
        int k = 0;
        while (k < (int)BK_ARRAY_LEN(words) && !arg_is(c->argv[i], words[k]))
            k++;
        if (k == (int)BK_ARRAY_LEN(words)) {
            reply_error(c, ERR_SYNTAX);
            return;
        }
        flags |= bits[k];
        abort |= !bits[k];
    }
    if ((abort && flags) ||
        ((flags & KV_SHUTDOWN_SAVE) && (flags & KV_SHUTDOWN_NOSAVE))) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (abort) {
        if (srv.shutdown_ms) {
            shutdown_cancel();
        } else if (srv.shutdown_asap > 0) {
            srv.shutdown_asap = 0; /* a signal not acted on yet (DEBUG PAUSE-CRON holds it) */
        } else {
            reply_error(c, "ERR No shutdown in progress.");
            return;
        }
        log_info("Shutdown manually aborted.");
        reply_ok(c);
        return;
    }
    /* c waits for the end (no reply: the connection closes) or an error */
    blocking_park(c, &shutdown_kind, 0, 0, 0);
    kv_shutdown_prepare(flags);
}

void readonly_noop_command(kv_client *c)
{
    reply_error(c, "ERR This instance has cluster support disabled");
}


/* ---- AUTH / HELLO / RESET ---- */

static void set_authed(kv_client *c)
{
    c->flags |= CLIENT_AUTHED;
    c->parser.max_multibulk = RESP_MAX_MULTIBULK;
    c->parser.max_bulk = srv.cfg.proto_max_bulk_len;
}

/* Returns 1 when authenticated, 0 after replying with the error. */
static int check_auth(kv_client *c, bk_str user, bk_str pass)
{
    if (kv_acl_authenticate(c, user, pass) == 0) {
        set_authed(c);
        return 1;
    }
    reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
    return 0;
}

void auth_command(kv_client *c)
{
    if (c->argc > 3) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (c->argc == 2 && kv_acl_default_nopass()) {
        reply_error(c, "ERR AUTH <password> called without any password configured for the "
                       "default user. Are you sure your configuration is correct?");
        return;
    }
    bk_str user = c->argc == 3 ? c->argv[1] : BK_STR("default");
    bk_str pass = c->argv[c->argc - 1];
    if (check_auth(c, user, pass))
        reply_ok(c);
}

static void set_name(kv_client *c, bk_str name)
{
    kv_client_set_name(c, name);
}

void hello_command(kv_client *c)
{
    long long ver = 0;
    int i = 1;
    if (c->argc >= 2) {
        if (kv_parse_ll(c->argv[1].p, c->argv[1].len, &ver) < 0) {
            reply_error(c, "ERR Protocol version is not an integer or out of range");
            return;
        }
        i = 2;
        if (ver < 2 || ver > 3) {
            reply_error(c, "NOPROTO unsupported protocol version");
            return;
        }
    }
    bk_str setname = BK_STR_NULL, user = BK_STR_NULL, pass = BK_STR_NULL;
    int has_name = 0, has_auth = 0;
    for (; i < c->argc; i++) {
        int more = c->argc - i - 1;
        if (arg_is(c->argv[i], "auth") && more >= 2) {
            user = c->argv[i + 1];
            pass = c->argv[i + 2];
            has_auth = 1;
            i += 2;
        } else if (arg_is(c->argv[i], "setname") && more >= 1) {
            setname = c->argv[i + 1];
            has_name = 1;
            i++;
        } else {
            reply_errorf(c, "ERR Syntax error in HELLO option '%.*s'",
                         (int)BK_MIN(c->argv[i].len, 128), c->argv[i].p);
            return;
        }
    }
    if (has_auth && !check_auth(c, user, pass))
        return;
    if (!(c->flags & CLIENT_AUTHED)) {
        reply_error(c, "NOAUTH HELLO must be called with the client already authenticated, "
                       "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                       "authenticate the client and select the RESP protocol version at the "
                       "same time");
        return;
    }
    if (has_name) {
        if (!kv_client_name_valid(setname)) {
            reply_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        set_name(c, setname);
    }
    if (ver)
        c->resp = (int)ver;
    reply_map(c, 7);
    reply_bulk_cstr(c, "server");
    reply_bulk_cstr(c, "redis");
    reply_bulk_cstr(c, "version");
    reply_bulk_cstr(c, KV_VERSION);
    reply_bulk_cstr(c, "proto");
    reply_int(c, c->resp);
    reply_bulk_cstr(c, "id");
    reply_int(c, (long long)c->id);
    reply_bulk_cstr(c, "mode");
    reply_bulk_cstr(c, "standalone");
    reply_bulk_cstr(c, "role");
    reply_bulk_cstr(c, "master");
    reply_bulk_cstr(c, "modules");
    reply_empty_array(c);
}

void reset_command(kv_client *c)
{
    if (c->flags & CLIENT_MULTI) {
        for (int i = 0; i < c->mcount; i++)
            kv_free(c->mq[i].argv);
        c->mcount = 0;
        c->flags &= ~(CLIENT_MULTI | CLIENT_DIRTY_EXEC);
    }
    kv_unwatch_all(c);
    pubsub_unsubscribe_all(c);
    kv_client_reset(c);
    kv_client_set_db(c, 0);
    c->resp = 2;
    set_name(c, BK_STR_NULL);
    if (kv_acl_client_reset(c)) {
        set_authed(c);
    } else {
        c->flags &= ~CLIENT_AUTHED;
        c->parser.max_multibulk = 10;
        c->parser.max_bulk = 16384;
    }
    reply_simple(c, "RESET");
}

/* ---- CONFIG ---- */

typedef struct {
    kv_client *c;
    long long n;
    bk_buf seen; /* names already reported, NUL separated */
} cfg_get_state;

static void config_get_cb(void *ud, const char *name, const char *value)
{
    cfg_get_state *st = ud;
    size_t nl = strlen(name);
    for (size_t off = 0; off < st->seen.len;) {
        size_t l = strlen(st->seen.data + off);
        if (l == nl && memcmp(st->seen.data + off, name, nl) == 0)
            return;
        off += l + 1;
    }
    buf_append(&st->seen, name, nl + 1);
    reply_bulk_cstr(st->c, name);
    reply_bulk_cstr(st->c, value);
    st->n++;
}

/* Sets one option from CONFIG SET's (name, value) strings: 0, 1 when the
 * option is unknown, -1 with err filled when the value is refused. */
static int config_set_one(kv_client *c, const char *name, bk_str value, char *err, size_t errlen)
{
    if ((strcasecmp(name, "dir") == 0 || strcasecmp(name, "dbfilename") == 0) &&
        !kv_protected_action_allowed("enable-protected-configs", c->addr)) {
        snprintf(err, errlen, "can't set protected config");
        return -1;
    }
    char *val = kv_strndup(value.p, value.len);
    char **argv = &val;
    int argc = 1;
    char **split = NULL;
    if (strcasecmp(name, "client-output-buffer-limit") == 0 || strcasecmp(name, "save") == 0 ||
        strcasecmp(name, "bind") == 0) {
        argc = kv_split_line(val, &split);
        if (argc < 0)
            argc = 0;
        argv = split;
    }
    int rc;
    if (argc == 0 && split && strcasecmp(name, "save") != 0) {
        snprintf(err, errlen, "wrong number of arguments");
        rc = -1;
    } else {
        rc = kv_config_set(&srv.cfg, name, argc, argv, 1, err, errlen);
    }
    if (split)
        kv_free_argv(argc, split);
    kv_free(val);
    if (rc != 0)
        return rc;
    if (strcasecmp(name, "maxmemory") == 0 && srv.cfg.maxmemory) {
        /* Evicted at the end of the iteration, not here: CONFIG SET may run
         * inside EXEC, whose stream the DELs must not split (Redis). */
        size_t used = kv_memory_used(), not_counted = kv_memory_not_counted();
        used = used > not_counted ? used - not_counted : 0;
        if (srv.cfg.maxmemory < used)
            log_warn("WARNING: the new maxmemory value set via CONFIG SET (%llu) is smaller than "
                     "the current memory usage (%zu). This will result in key eviction and/or "
                     "the inability to accept new write commands depending on the "
                     "maxmemory-policy.",
                     (unsigned long long)srv.cfg.maxmemory, used);
        srv.evict_pending = 1;
    }
    if (strcasecmp(name, "requirepass") == 0) /* binary safe, unlike the config copy */
        kv_acl_requirepass_changed(value.p, value.len);
    if (strcasecmp(name, "masterauth") == 0) /* binary too */
        repl_masterauth_set(value.p, value.len);
    if (strcasecmp(name, "busy-poll-us") == 0)
        loop_set_busy_poll(&srv.loop, (unsigned)srv.cfg.busy_poll_us);
    return 0;
}

/* The value CONFIG GET shows for exactly name (NULL when none). */
typedef struct {
    const char *name;
    char *value;
} cfg_exact;

static void config_exact_cb(void *ud, const char *name, const char *value)
{
    cfg_exact *e = ud;
    if (!e->value && strcasecmp(name, e->name) == 0)
        e->value = kv_strndup(value, strlen(value));
}

/* CONFIG SET name value [name value ...]: all or nothing, as Redis: a
 * repeated name is refused up front, and when one value is refused the
 * options set before it get their previous values back. */
static void config_set_many(kv_client *c)
{
    int n = (c->argc - 2) / 2;
    /* appendonly and dir wait for a load to end (Redis's deny-loading) */
    for (int i = 0; (srv.loading || repl_async_loading()) && i < n; i++) {
        bk_str a = c->argv[2 + 2 * i];
        if (BK_STR_IEQ(a, "appendonly") || BK_STR_IEQ(a, "dir")) {
            reply_error(c, "LOADING Redis is loading the dataset in memory");
            return;
        }
    }
    for (int i = 0; i < n; i++) {
        bk_str a = c->argv[2 + 2 * i];
        for (int k = 0; k < i; k++) {
            bk_str b = c->argv[2 + 2 * k];
            if (a.len == b.len && strncasecmp(a.p, b.p, a.len) == 0) {
                reply_errorf(c, "ERR CONFIG SET failed (possibly related to argument '%.*s') "
                                "- duplicate parameter", (int)BK_MIN(a.len, (size_t)128), a.p);
                return;
            }
        }
    }
    char **old = kv_calloc((size_t)n * sizeof *old);
    char name[128], err[256];
    int i;
    for (i = 0; i < n; i++) {
        bk_str a = c->argv[2 + 2 * i];
        size_t nl = BK_MIN(a.len, sizeof name - 1);
        memcpy(name, a.p, nl);
        name[nl] = '\0';
        cfg_exact e = { name, NULL };
        if (n > 1)
            kv_config_get(&srv.cfg, a, config_exact_cb, &e);
        old[i] = e.value;
        int rc = config_set_one(c, name, c->argv[3 + 2 * i], err, sizeof err);
        if (rc == 1)
            reply_errorf(c, "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
                         name);
        else if (rc < 0)
            reply_errorf(c, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
                         name, err);
        if (rc != 0)
            break;
    }
    if (i < n) {
        for (int k = i - 1; k >= 0; k--) {
            if (!old[k])
                continue;
            bk_str a = c->argv[2 + 2 * k];
            size_t nl = BK_MIN(a.len, sizeof name - 1);
            memcpy(name, a.p, nl);
            name[nl] = '\0';
            config_set_one(c, name, (bk_str){ old[k], strlen(old[k]) }, err, sizeof err);
        }
    } else {
        reply_ok(c);
    }
    for (int k = 0; k < n; k++)
        kv_free(old[k]);
    kv_free(old);
}

void config_command(kv_client *c)
{
    bk_str sub = c->argv[1];
    if (arg_is(sub, "get")) {
        if (c->argc < 3) {
            subcommand_arity(c, "config");
            return;
        }
        cfg_get_state st = { .c = c };
        size_t h = reply_defer(c);
        for (int i = 2; i < c->argc; i++)
            kv_config_get(&srv.cfg, c->argv[i], config_get_cb, &st);
        reply_defer_map(c, h, st.n);
        buf_free(&st.seen);
    } else if (arg_is(sub, "set")) {
        if (c->argc < 4 || (c->argc - 2) % 2 != 0) {
            subcommand_arity(c, "config");
            return;
        }
        config_set_many(c);
    } else if (arg_is(sub, "resetstat") && c->argc == 2) {
        srv.stat_conns = srv.stat_cmds = srv.stat_expired = srv.stat_evicted = 0;
        srv.stat_evicted_clients = 0;
        srv.stat_rb_shrinks = srv.stat_rb_expands = 0;
        srv.stat_hits = srv.stat_misses = srv.stat_net_in = srv.stat_net_out = 0;
        srv.stat_errors = srv.stat_rejected_conns = 0;
        srv.stat_lazyfreed = 0;
        memset(srv.cmd_stats, 0, kv_ncommands * sizeof *srv.cmd_stats);
        kv_introspect_resetstat();
        reply_ok(c);
    } else if (arg_is(sub, "rewrite") && c->argc == 2) {
        char err[256];
        if (kv_config_rewrite(0, err, sizeof err) < 0)
            reply_error(c, err);
        else
            reply_ok(c);
    } else if (arg_is(sub, "help")) {
        reply_array(c, 4);
        reply_simple(c, "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
        reply_simple(c, "GET <pattern> / SET <directive> <value>");
        reply_simple(c, "RESETSTAT / REWRITE");
        reply_simple(c, "HELP");
    } else {
        subcommand_unknown(c, "CONFIG");
    }
}

/* ---- DEBUG ---- */

/* DEBUG LOADAOF: the AOF written so far replaces the dataset and the
 * functions, as a restart would load them (Redis's suite compares the
 * DEBUG DIGEST before and after). */
static void debug_loadaof(kv_client *c)
{
    if (srv.cfg.appendonly)
        aof_flush(1);
    for (int d = 0; d < srv.cfg.databases; d++) {
        kv_touch_db(&srv.dbs[d]);
        db_flush(&srv.dbs[d]);
    }
    function_rdb_flush();
    if (aof_load_files() < 0) {
        reply_error(c, "ERR Error trying to load the AOF, check server logs.");
        return;
    }
    srv.rdb_dirty_at_save = srv.dirty; /* what was loaded is no change (Redis: dirty = 0) */
    log_info("Append Only File loaded by DEBUG LOADAOF");
    reply_ok(c);
}

void debug_command(kv_client *c)
{
    bk_str sub = c->argv[1];
    if (arg_is(sub, "sleep") && c->argc == 3) {
        double secs;
        if (arg_double(c, c->argv[2], &secs) < 0)
            return;
        double us = secs * 1e6; /* (a NaN or a negative sleeps 0, a huge one "forever") */
        kv_sleep_us(!(us > 0) ? 0 : us >= 9e18 ? (long long)9e18 : (long long)us);
        reply_ok(c);
    } else if (arg_is(sub, "aof-flush-sleep") && c->argc == 3) {
        long long us;
        if (arg_ll(c, c->argv[2], &us) < 0)
            return;
        aof_flush_sleep_us = us < 0 ? 0 : us > 10000000 ? 10000000 : us;
        reply_ok(c);
    } else if (arg_is(sub, "set-active-expire") && c->argc == 3) {
        kv_active_expire_off = c->argv[2].len == 1 && c->argv[2].p[0] == '0';
        reply_ok(c);
    } else if (arg_is(sub, "rehash-steps")) {
        reply_ok(c);
    } else if (arg_is(sub, "reload")) {
        dump_debug_reload(c);
    } else if (arg_is(sub, "loadaof")) { /* (Redis ignores further arguments) */
        debug_loadaof(c);
    } else if (arg_is(sub, "object") && c->argc == 3) {
        dump_debug_object(c);
    } else if (arg_is(sub, "config-rewrite-force-all") && c->argc == 2) {
        char err[256];
        if (kv_config_rewrite(1, err, sizeof err) < 0)
            reply_errorf(c, "ERR CONFIG-REWRITE-FORCE-ALL failed: %s",
                         err + (strncmp(err, "ERR ", 4) == 0 ? 4 : 0));
        else
            reply_ok(c);
    } else if (arg_is(sub, "digest") && c->argc == 2) {
        repl_debug_digest(c);
    } else if (arg_is(sub, "digest-value") && c->argc >= 2) {
        repl_debug_digest_value(c);
    } else if (arg_is(sub, "populate") && c->argc >= 3 && c->argc <= 5) {
        repl_debug_populate(c);
    } else if (arg_is(sub, "replicate") && c->argc >= 3) {
        repl_debug_replicate(c);
    } else if (arg_is(sub, "log") && c->argc == 3) {
        /* a marker in the log, as the suite uses it */
        log_warn("DEBUG LOG: %.*s", (int)BK_MIN(c->argv[2].len, (size_t)INT_MAX), c->argv[2].p);
        reply_ok(c);
    } else if (arg_is(sub, "segfault") && c->argc == 2) {
        kv_debug_segfault(); /* does not return: the crash report's test */
    } else if (!kv_debug_suite_subcommand(c)) {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                        "DEBUG HELP.", (int)BK_MIN(sub.len, (size_t)128), sub.p);
    }
}

void move_command(kv_client *c)
{
    long long id;
    if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &id) < 0) {
        reply_error(c, ERR_NOT_INT);
        return;
    }
    if (id < 0 || id >= srv.cfg.databases) {
        reply_error(c, ERR_DB_RANGE);
        return;
    }
    kv_db *dst = &srv.dbs[id];
    if (dst == c->db) {
        reply_error(c, "ERR source and destination objects are the same");
        return;
    }
    kv_entry *e = db_lookup_write(c->db, c->argv[1]);
    if (!e || db_lookup_write(dst, c->argv[1])) {
        reply_int(c, 0);
        return;
    }
    db_rename_entry(c->db, e, dst, c->argv[1]);
    kv_notify(c->db, NOTIFY_GENERIC, "move_from", c->argv[1]);
    kv_notify(dst, NOTIFY_GENERIC, "move_to", c->argv[1]);
    kv_touch_key(dst, c->argv[1]);
    kv_dirty(1);
    reply_int(c, 1);
}
