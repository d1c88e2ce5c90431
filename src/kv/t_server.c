/* Connection and server commands: PING ECHO QUIT SELECT AUTH HELLO CLIENT
 * INFO CONFIG COMMAND TIME FLUSHDB ... */
#include "core/log.h"
#include "kv/acl.h"
#include "kv/aof.h"
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

static void subcommand_arity(kv_client *c, const char *cmd)
{
    char name[64];
    size_t n = MIN(c->argv[1].len, 40);
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
        reply_bulk_str(c, c->argc == 2 ? c->argv[1] : STR(""));
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

static int flush_args_ok(kv_client *c)
{
    if (c->argc == 1)
        return 1;
    if (c->argc == 2 && (arg_is(c->argv[1], "async") || arg_is(c->argv[1], "sync")))
        return 1;
    reply_error(c, ERR_SYNTAX);
    return 0;
}

void flushdb_command(kv_client *c)
{
    if (!flush_args_ok(c))
        return;
    kv_touch_db(c->db);
    tracking_invalidate_all();
    db_flush(c->db);
    kv_dirty(1);
    reply_ok(c);
}

void flushall_command(kv_client *c)
{
    if (!flush_args_ok(c))
        return;
    tracking_invalidate_all();
    for (int i = 0; i < srv.cfg.databases; i++) {
        kv_touch_db(&srv.dbs[i]);
        db_flush(&srv.dbs[i]);
    }
    kv_dirty(1);
    reply_ok(c);
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
        kv_touch_db(x);
        kv_touch_db(y);
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
    if (aof_rewrite_start(err, sizeof err) < 0) {
        reply_error(c, err);
        return;
    }
    reply_simple(c, "Background append only file rewriting started");
}

void shutdown_command(kv_client *c)
{
    int save = 0, nosave = 0, force = 0;
    for (int i = 1; i < c->argc; i++) {
        save |= arg_is(c->argv[i], "save");
        nosave |= arg_is(c->argv[i], "nosave");
        force |= arg_is(c->argv[i], "force");
        if (!arg_is(c->argv[i], "nosave") && !arg_is(c->argv[i], "save") &&
            !arg_is(c->argv[i], "now") && !arg_is(c->argv[i], "force") &&
            !arg_is(c->argv[i], "abort")) {
            reply_error(c, ERR_SYNTAX);
            return;
        }
        if (arg_is(c->argv[i], "abort")) {
            reply_error(c, "ERR No shutdown in progress.");
            return;
        }
    }
    log_info("User requested shutdown...");
    if ((save || (!nosave && srv.cfg.save && srv.cfg.save[0])) && dump_shutdown_save() < 0 &&
        !force) {
        reply_error(c, "ERR Errors trying to SHUTDOWN. Check logs.");
        return;
    }
    srv.shutdown_asap = -1;
    loop_stop(&srv.loop);
}

void readonly_noop_command(kv_client *c)
{
    reply_error(c, "ERR This instance has cluster support disabled");
}

/* FUNCTION: only FLUSH until scripting exists (Redis's test harness sends
 * FUNCTION FLUSH before every test file; there are no functions to flush). */
void function_command(kv_client *c)
{
    if (arg_is(c->argv[1], "flush")) {
        if (c->argc > 3 || (c->argc == 3 && !arg_is(c->argv[2], "sync") &&
                            !arg_is(c->argv[2], "async"))) {
            reply_error(c, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            return;
        }
        reply_ok(c);
        return;
    }
    subcommand_unknown(c, "FUNCTION");
}

/* ---- AUTH / HELLO / RESET ---- */

static void set_authed(kv_client *c)
{
    c->flags |= CLIENT_AUTHED;
    c->parser.max_multibulk = RESP_MAX_MULTIBULK;
    c->parser.max_bulk = srv.cfg.proto_max_bulk_len;
}

/* Returns 1 when authenticated, 0 after replying with the error. */
static int check_auth(kv_client *c, str user, str pass)
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
    str user = c->argc == 3 ? c->argv[1] : STR("default");
    str pass = c->argv[c->argc - 1];
    if (check_auth(c, user, pass))
        reply_ok(c);
}

static void set_name(kv_client *c, str name)
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
    str setname = STR_NULL, user = STR_NULL, pass = STR_NULL;
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
                         (int)MIN(c->argv[i].len, 128), c->argv[i].p);
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
    set_name(c, STR_NULL);
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
    buf seen; /* names already reported, NUL separated */
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

void config_command(kv_client *c)
{
    str sub = c->argv[1];
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
        for (int i = 2; i < c->argc; i += 2) {
            char name[128], *val;
            size_t nl = MIN(c->argv[i].len, sizeof name - 1);
            memcpy(name, c->argv[i].p, nl);
            name[nl] = '\0';
            val = kv_strndup(c->argv[i + 1].p, c->argv[i + 1].len);
            char **argv = &val;
            int argc = 1;
            char **split = NULL;
            if (STR_IEQ(c->argv[i], "client-output-buffer-limit") ||
                STR_IEQ(c->argv[i], "save") || STR_IEQ(c->argv[i], "bind")) {
                argc = kv_split_line(val, &split);
                if (argc < 0)
                    argc = 0;
                argv = split;
            }
            char err[256];
            int rc = argc == 0 && split && !STR_IEQ(c->argv[i], "save")
                         ? -1
                         : kv_config_set(&srv.cfg, name, argc, argv, 1, err, sizeof err);
            if (argc == 0 && STR_IEQ(c->argv[i], "save"))
                rc = 0;
            if (split)
                kv_free_argv(argc, split);
            kv_free(val);
            if (rc == 1) {
                reply_errorf(c, "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
                             name);
                return;
            }
            if (rc < 0) {
                reply_errorf(c, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
                             name, err);
                return;
            }
            if (STR_IEQ(c->argv[i], "maxmemory") && srv.cfg.maxmemory)
                kv_evict_if_needed();
            if (STR_IEQ(c->argv[i], "requirepass")) /* binary safe, unlike the config copy */
                kv_acl_requirepass_changed(c->argv[i + 1].p, c->argv[i + 1].len);
            if (STR_IEQ(c->argv[i], "busy-poll-us"))
                loop_set_busy_poll(&srv.loop, (unsigned)srv.cfg.busy_poll_us);
        }
        reply_ok(c);
    } else if (arg_is(sub, "resetstat") && c->argc == 2) {
        srv.stat_conns = srv.stat_cmds = srv.stat_expired = srv.stat_evicted = 0;
        srv.stat_hits = srv.stat_misses = srv.stat_net_in = srv.stat_net_out = 0;
        srv.stat_errors = srv.stat_rejected_conns = 0;
        memset(srv.cmd_stats, 0, kv_ncommands * sizeof *srv.cmd_stats);
        reply_ok(c);
    } else if (arg_is(sub, "rewrite") && c->argc == 2) {
        char err[256];
        if (repl_config_rewrite(err, sizeof err) < 0)
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
        int pos[3];
        int nk = kv_movable_keys(cmd, argc, argv, pos);
        if (nk >= 0) {
            reply_array(c, nk);
            for (int i = 0; i < nk; i++)
                reply_bulk_str(c, argv[pos[i]]);
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
                 "blocked_clients:%llu\r\ntracking_clients:%d\r\nclients_in_timeout_table:0\r\n"
                 "total_blocking_keys:0\r\ntotal_blocking_keys_on_nokey:0\r\n\r\n",
             (unsigned long long)srv.nclients, (unsigned long long)srv.cfg.maxclients, max_in,
             max_out, (unsigned long long)srv.nheld, srv.trk_nclients);
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
                 "rdb_changes_since_last_save:%llu\r\nrdb_bgsave_in_progress:%d\r\n"
                 "rdb_last_save_time:%lld\r\nrdb_last_bgsave_status:%s\r\n"
                 "rdb_last_bgsave_time_sec:%lld\r\nrdb_current_bgsave_time_sec:%lld\r\n"
                 "rdb_saves:%llu\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:%llu\r\n"
                 "rdb_last_load_keys_loaded:%llu\r\n"
                 "aof_enabled:%d\r\naof_rewrite_in_progress:%d\r\naof_rewrite_scheduled:0\r\n"
                 "aof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:%lld\r\n"
                 "aof_last_bgrewrite_status:%s\r\naof_rewrites:%llu\r\naof_last_write_status:%s\r\n",
             srv.loading, (unsigned long long)(srv.dirty - srv.rdb_dirty_at_save),
             srv.rdb_child_pid > 0, (long long)srv.lastsave,
             srv.rdb_last_bgsave_failed ? "err" : "ok", (long long)srv.rdb_last_bgsave_secs - 1,
             srv.rdb_child_pid > 0 ? (long long)((srv.now_ms - srv.rdb_save_start_ms) / 1000) : -1LL,
             (unsigned long long)srv.rdb_saves, (unsigned long long)srv.rdb_load_expired,
             (unsigned long long)srv.rdb_load_loaded, srv.aof_state != 0, srv.child_pid > 0,
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
                 "migrate_cached_sockets:%zu\r\n"
                 "tracking_total_keys:%zu\r\ntracking_total_items:%llu\r\n"
                 "tracking_total_prefixes:%d\r\n"
                 "total_error_replies:%llu\r\ntotal_reads_processed:0\r\n"
                 "total_writes_processed:0\r\n",
             (unsigned long long)srv.stat_conns, (unsigned long long)srv.stat_cmds,
             (unsigned long long)(kv_instantaneous(0) + 0.5),
             (unsigned long long)srv.stat_net_in, (unsigned long long)srv.stat_net_out,
             kv_instantaneous(1) / 1024, kv_instantaneous(2) / 1024,
             (unsigned long long)srv.stat_rejected_conns, (unsigned long long)srv.stat_expired,
             (unsigned long long)srv.stat_evicted, (unsigned long long)srv.stat_hits,
             (unsigned long long)srv.stat_misses, dict_size(&srv.channels),
             dict_size(&srv.patterns), migrate_cached_sockets(), dict_size(&srv.trk_keys),
             (unsigned long long)srv.trk_items, srv.trk_nprefix, (unsigned long long)srv.stat_errors);
        repl_info_stats(&b);
        addf(&b, "\r\n");
    }
    if (want_section(c, "replication", 1)) {
        repl_info(&b);
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

/* ---- DEBUG / MEMORY ---- */

void debug_command(kv_client *c)
{
    str sub = c->argv[1];
    if (arg_is(sub, "sleep") && c->argc == 3) {
        double secs;
        if (arg_double(c, c->argv[2], &secs) < 0)
            return;
        usleep((useconds_t)(secs * 1e6));
        reply_ok(c);
    } else if (arg_is(sub, "set-active-expire") && c->argc == 3) {
        kv_active_expire_off = c->argv[2].len == 1 && c->argv[2].p[0] == '0';
        reply_ok(c);
    } else if (arg_is(sub, "rehash-steps")) {
        reply_ok(c);
    } else if (arg_is(sub, "reload")) {
        dump_debug_reload(c);
    } else if (arg_is(sub, "object") && c->argc == 3) {
        dump_debug_object(c);
    } else if (arg_is(sub, "digest") && c->argc == 2) {
        repl_debug_digest(c);
    } else if (arg_is(sub, "digest-value") && c->argc >= 2) {
        repl_debug_digest_value(c);
    } else if (arg_is(sub, "populate") && c->argc >= 3 && c->argc <= 5) {
        repl_debug_populate(c);
    } else {
        subcommand_unknown(c, "DEBUG");
    }
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
    kv_touch_key(dst, c->argv[1]);
    kv_dirty(1);
    reply_int(c, 1);
}
