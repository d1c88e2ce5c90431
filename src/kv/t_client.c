/* CLIENT and its subcommands (a dispatch table), MONITOR, CLIENT PAUSE
 * (commands of paused clients are held, not refused, and run when the
 * pause ends) and CLIENT REPLY ON|OFF|SKIP. Tracking (client-side caching)
 * lives in tracking.c; this file parses its options. */
#include "kv/acl.h"
#include "kv/blocking.h"
#include "kv/mem.h"
#include "kv/pubsub.h"
#include "kv/reply.h"
#include "kv/replication.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static int str_eq_cstr(bk_str s, const char *c)
{
    return strlen(c) == s.len && memcmp(c, s.p, s.len) == 0;
}

static void sub_arity_error(kv_client *c)
{
    char name[32];
    size_t n = BK_MIN(c->argv[1].len, sizeof name - 1);
    for (size_t i = 0; i < n; i++)
        name[i] = ascii_lower(c->argv[1].p[i]);
    name[n] = '\0';
    reply_errorf(c, "ERR wrong number of arguments for 'client|%s' command", name);
}

/* A CLIENT subcommand: arity counts "client" and the subcommand; admin
 * ones are hidden from MONITOR. The table is at the end of the file. */
typedef struct {
    const char *name;
    int arity;
    int admin;
    void (*proc)(kv_client *c);
} client_sub;

/* ---- names ---- */

int kv_client_name_valid(bk_str s)
{
    for (size_t i = 0; i < s.len; i++)
        if (s.p[i] < '!' || s.p[i] > '~')
            return 0;
    return 1;
}

void kv_client_set_name(kv_client *c, bk_str name)
{
    kv_free(c->name);
    c->name = name.len ? kv_strndup(name.p, name.len) : NULL;
}

/* ---- last command, as CLIENT LIST's cmd= shows it ---- */

/* Commands whose first argument names a subcommand (Redis prints
 * "container|sub"). Looked up once per command table entry. */
static const char *const containers[] = { "client",  "config", "command", "object",  "memory",
                                          "function", "pubsub", "script",  "xinfo",   "xgroup",
                                          "acl",      "cluster", "latency", "slowlog", "module" };
static unsigned char *container_tab; /* per kv_commands index: 1 container, 2 not */

static int is_container(const kv_cmd *cmd)
{
    if (BK_UNLIKELY(!container_tab))
        container_tab = kv_calloc(kv_ncommands);
    unsigned char *slot = &container_tab[cmd - kv_commands];
    if (BK_UNLIKELY(!*slot)) {
        *slot = 2;
        for (size_t i = 0; i < BK_ARRAY_LEN(containers); i++)
            if (strcmp(cmd->name, containers[i]) == 0)
                *slot = 1;
    }
    return *slot == 1;
}

/* Per kv_commands index: 0 not looked at yet, 1 every key is written,
 * 2 only the first (the destination of *STORE), 3 only the second (COPY). */
static unsigned char *written_tab;

void kv_written_keys(const kv_cmd *cmd, int *first, int *last)
{
    if (BK_UNLIKELY(!written_tab))
        written_tab = kv_calloc(kv_ncommands);
    unsigned char *slot = &written_tab[cmd - kv_commands];
    if (BK_UNLIKELY(!*slot)) {
        size_t n = strlen(cmd->name);
        *slot = 1;
        if (n > 5 && strcmp(cmd->name + n - 5, "store") == 0)
            *slot = 2;
        else if (strcmp(cmd->name, "copy") == 0)
            *slot = 3;
    }
    if (*slot == 2)
        *last = *first;
    else if (*slot == 3)
        *first = *last = *first + 1;
}

void kv_client_tables_free(void)
{
    kv_free(written_tab);
    kv_free(container_tab);
    written_tab = container_tab = NULL;
}

void kv_client_note_cmd(kv_client *c, const kv_cmd *cmd)
{
    c->lastcmd = cmd;
    c->cl_lastsub[0] = '\0';
    if (cmd && c->argc >= 2 && is_container(cmd) && c->argv[1].len < sizeof c->cl_lastsub) {
        for (size_t i = 0; i < c->argv[1].len; i++)
            c->cl_lastsub[i] = ascii_lower(c->argv[1].p[i]);
        c->cl_lastsub[c->argv[1].len] = '\0';
    }
}

/* ---- CLIENT LIST / INFO ---- */

/* Redis 7.0.15's fields in its order, then 7.2's lib-name and lib-ver
 * (clients such as node-redis read back what CLIENT SETINFO set). */
int kv_client_info(kv_client *c, bk_buf *out)
{
    char flags[16];
    size_t nf = 0;
    if (c->cl_flags & CL_MONITOR)
        flags[nf++] = 'O';
    if (pubsub_total(c))
        flags[nf++] = 'P';
    if (c->flags & CLIENT_MULTI)
        flags[nf++] = 'x';
    if (c->repl_flags & REPL_C_MASTER)
        flags[nf++] = 'M';
    if (c->repl_flags & REPL_C_REPLICA)
        flags[nf++] = 'S';
    if ((c->cl_flags & CL_HELD) || c->blocked || (c->repl_flags & REPL_C_WAITING))
        flags[nf++] = 'b';
    if (c->cl_flags & CL_TRACKING)
        flags[nf++] = 't';
    if (c->cl_flags & CL_TRK_BROKEN)
        flags[nf++] = 'R';
    if (c->cl_flags & CL_TRK_BCAST)
        flags[nf++] = 'B';
    if (c->flags & CLIENT_DIRTY_CAS)
        flags[nf++] = 'd';
    if (c->flags & CLIENT_CLOSE_AFTER_REPLY)
        flags[nf++] = 'c';
    if (c->flags & CLIENT_CLOSE_ASAP)
        flags[nf++] = 'A';
    if (c->cl_flags & CL_NO_EVICT)
        flags[nf++] = 'e';
    if (nf == 0)
        flags[nf++] = 'N';
    flags[nf] = '\0';
    char cmd[64];
    if (!c->lastcmd)
        snprintf(cmd, sizeof cmd, "NULL");
    else if (c->cl_lastsub[0])
        snprintf(cmd, sizeof cmd, "%s|%s", c->lastcmd->name, c->cl_lastsub);
    else
        snprintf(cmd, sizeof cmd, "%s", c->lastcmd->name);
    size_t argv_mem = kv_client_pending_argv(c);
    if (c == srv.cl_running)
        for (int i = 0; i < c->argc; i++)
            argv_mem += c->argv[i].len;
    size_t multi_mem = 0;
    for (int i = 0; i < c->mcount; i++) {
        multi_mem += sizeof(kv_mcmd) + (size_t)c->mq[i].argc * sizeof(bk_str);
        for (int j = 0; j < c->mq[i].argc; j++)
            multi_mem += c->mq[i].argv[j].len;
    }
    /* obl and omem: the bytes waiting to be sent, what the output buffer
     * limits are checked against (Redis splits them between its 16 KiB buffer
     * and a list of blocks; brisk-kv has one buffer) */
    size_t obl = c->wbuf.len - c->wpos;
    /* Names and library strings have any length: appended, not formatted. */
    char line[512];
    int n = snprintf(line, sizeof line, "id=%llu addr=%s laddr=%s fd=%d name=",
                     (unsigned long long)c->id, c->addr, c->laddr, c->fd);
    if (n < 0 || buf_append(out, line, (size_t)n) < 0 ||
        (c->name && buf_append(out, c->name, strlen(c->name)) < 0))
        return -1;
    n = snprintf(
        line, sizeof line,
        " age=%lld idle=%lld flags=%s db=%d sub=%d psub=%d ssub=%d multi=%d qbuf=%zu "
        "qbuf-free=%zu argv-mem=%zu multi-mem=%zu rbs=%zu rbp=%zu obl=%zu oll=0 omem=%zu "
        "tot-mem=%zu events=r%s cmd=%s user=%s redir=%lld resp=%d lib-name=",
        (long long)((srv.now_ms - c->ctime_ms) / 1000),
        (long long)((srv.now_ms - c->last_ms) / 1000), flags, c->db->id,
        c->subs ? c->subs->nch : 0, c->subs ? c->subs->npat : 0, c->subs ? c->subs->nsch : 0,
        (c->flags & CLIENT_MULTI) ? c->mcount : -1, kv_client_qbuf(c), c->rbuf.cap - c->rbuf.len,
        argv_mem, multi_mem, c->rb_size, c->rb_peak, obl, obl,
        kv_client_mem(c), obl ? "w" : "", cmd,
        kv_acl_client_user(c), (c->cl_flags & CL_TRACKING) ? (long long)c->trk_redir : -1LL, c->resp);
    if (n < 0 || (size_t)n >= sizeof line || buf_append(out, line, (size_t)n) < 0 ||
        (c->lib_name && buf_append(out, c->lib_name, strlen(c->lib_name)) < 0) ||
        buf_append(out, " lib-ver=", 9) < 0 ||
        (c->lib_ver && buf_append(out, c->lib_ver, strlen(c->lib_ver)) < 0))
        return -1;
    return buf_append(out, "\n", 1);
}

/* Client types of CLIENT LIST TYPE / CLIENT KILL TYPE: 0 unknown. */
enum { TYPE_NORMAL = 1, TYPE_REPLICA, TYPE_MASTER, TYPE_PUBSUB };

static int parse_type(bk_str t)
{
    static const struct {
        const char *name;
        int type;
    } types[] = { { "normal", TYPE_NORMAL }, { "slave", TYPE_REPLICA }, { "replica", TYPE_REPLICA },
                  { "master", TYPE_MASTER }, { "pubsub", TYPE_PUBSUB } };
    for (size_t i = 0; i < BK_ARRAY_LEN(types); i++)
        if (arg_is(t, types[i].name))
            return types[i].type;
    return 0;
}

static int client_type(const kv_client *x)
{
    /* Monitors are replicas inside Redis but listed as normal clients. */
    if (x->repl_flags & REPL_C_MASTER)
        return TYPE_MASTER;
    if (x->repl_flags & REPL_C_REPLICA)
        return TYPE_REPLICA;
    return pubsub_total(x) ? TYPE_PUBSUB : TYPE_NORMAL;
}

static void client_list(kv_client *c)
{
    bk_buf out = { 0 };
    long long *ids = NULL;
    int nids = 0, type = 0;
    if (c->argc == 4 && arg_is(c->argv[2], "type")) {
        type = parse_type(c->argv[3]);
        if (!type) {
            reply_errorf(c, "ERR Unknown client type '%.*s'", (int)BK_MIN(c->argv[3].len, 64),
                         c->argv[3].p);
            return;
        }
    } else if (c->argc > 3 && arg_is(c->argv[2], "id")) {
        ids = kv_malloc((size_t)c->argc * sizeof *ids);
        for (int i = 3; i < c->argc; i++) {
            long long id;
            if (kv_parse_ll(c->argv[i].p, c->argv[i].len, &id) < 0) {
                reply_error(c, "ERR Invalid client ID");
                goto done;
            }
            ids[nids++] = id;
        }
    } else if (c->argc != 2) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    /* Oldest first, as Redis lists them: srv.clients holds the newest first. */
    kv_client *last = srv.clients;
    while (last && last->next)
        last = last->next;
    for (kv_client *x = last; x; x = x->prev) {
        if (type && client_type(x) != type)
            continue;
        if (ids) {
            int found = 0;
            for (int k = 0; k < nids && !found; k++)
                found = ids[k] > 0 && (uint64_t)ids[k] == x->id;
            if (!found)
                continue;
        }
        kv_client_info(x, &out);
    }
    reply_verbatim(c, out.data ? out.data : "", out.len, "txt");
done:
    buf_free(&out);
    kv_free(ids);
}

static void client_info(kv_client *c)
{
    bk_buf out = { 0 };
    kv_client_info(c, &out);
    reply_verbatim(c, out.data ? out.data : "", out.len, "txt");
    buf_free(&out);
}

/* ---- CLIENT KILL ---- */

static void kill_one(kv_client *c, kv_client *x)
{
    if (x == c)
        c->flags |= CLIENT_CLOSE_AFTER_REPLY;
    else
        kv_client_close(x);
}

static void client_kill(kv_client *c)
{
    if (c->argc == 3) { /* old form: CLIENT KILL addr:port */
        for (kv_client *x = srv.clients; x; x = x->next) {
            if (str_eq_cstr(c->argv[2], x->addr)) {
                kill_one(c, x);
                reply_ok(c);
                return;
            }
        }
        reply_error(c, "ERR No such client");
        return;
    }
    if ((c->argc - 2) % 2 != 0) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    long long id = 0;
    int type = 0, skipme = 1;
    bk_str addr = BK_STR_NULL, laddr = BK_STR_NULL, user = BK_STR_NULL;
    for (int i = 2; i < c->argc; i += 2) {
        bk_str k = c->argv[i], v = c->argv[i + 1];
        if (arg_is(k, "id")) {
            if (kv_parse_ll(v.p, v.len, &id) < 0 || id <= 0) {
                reply_error(c, "ERR client-id should be greater than 0");
                return;
            }
        } else if (arg_is(k, "type")) {
            type = parse_type(v);
            if (!type) {
                reply_errorf(c, "ERR Unknown client type '%.*s'", (int)BK_MIN(v.len, 64), v.p);
                return;
            }
        } else if (arg_is(k, "addr")) {
            addr = v;
        } else if (arg_is(k, "laddr")) {
            laddr = v;
        } else if (arg_is(k, "user")) {
            if (!kv_acl_user_exists(v)) {
                reply_errorf(c, "ERR No such user '%.*s'", (int)BK_MIN(v.len, 64), v.p);
                return;
            }
            user = v;
        } else if (arg_is(k, "skipme")) {
            if (arg_is(v, "yes"))
                skipme = 1;
            else if (arg_is(v, "no"))
                skipme = 0;
            else {
                reply_error(c, ERR_SYNTAX);
                return;
            }
        } else {
            /* Redis 7.0 has no MAXAGE: a syntax error, as there. */
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    long long killed = 0;
    for (kv_client *x = srv.clients, *next; x; x = next) {
        next = x->next;
        if ((id && x->id != (uint64_t)id) || (type && client_type(x) != type) ||
            (addr.p && !str_eq_cstr(addr, x->addr)) ||
            (laddr.p && !str_eq_cstr(laddr, x->laddr)) || (user.p && !kv_acl_client_is(x, user)) ||
            (x == c && skipme))
            continue;
        kill_one(c, x);
        killed++;
    }
    reply_int(c, killed);
}

/* ---- small subcommands ---- */

static void client_id(kv_client *c) { reply_int(c, (long long)c->id); }

static void client_getname(kv_client *c) { reply_bulk_cstr(c, c->name); }

static void client_setname(kv_client *c)
{
    if (!kv_client_name_valid(c->argv[2])) {
        reply_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
        return;
    }
    kv_client_set_name(c, c->argv[2]);
    reply_ok(c);
}

/* Redis 7.2's SETINFO, kept for clients that send it on connect. */
static void client_setinfo(kv_client *c)
{
    bk_str attr = c->argv[2], v = c->argv[3];
    char **slot;
    const char *label;
    if (arg_is(attr, "lib-name")) {
        slot = &c->lib_name;
        label = "lib-name";
    } else if (arg_is(attr, "lib-ver")) {
        slot = &c->lib_ver;
        label = "lib-ver";
    } else {
        reply_errorf(c, "ERR Unrecognized option '%.*s'", (int)BK_MIN(attr.len, 64), attr.p);
        return;
    }
    if (!kv_client_name_valid(v)) {
        reply_errorf(c, "ERR %s cannot contain spaces, newlines or special characters.", label);
        return;
    }
    kv_free(*slot);
    *slot = v.len ? kv_strndup(v.p, v.len) : NULL;
    reply_ok(c);
}

static void client_reply(kv_client *c)
{
    bk_str v = c->argv[2];
    if (arg_is(v, "on")) {
        c->cl_flags &= ~(CL_REPLY_OFF | CL_REPLY_SKIP | CL_REPLY_SKIP_NEXT);
        reply_ok(c);
    } else if (arg_is(v, "off")) {
        c->cl_flags |= CL_REPLY_OFF;
    } else if (arg_is(v, "skip")) {
        if (!(c->cl_flags & CL_REPLY_OFF))
            c->cl_flags |= CL_REPLY_SKIP_NEXT;
    } else {
        reply_error(c, ERR_SYNTAX);
    }
}

static void client_no_evict(kv_client *c)
{
    if (arg_is(c->argv[2], "on")) {
        c->cl_flags |= CL_NO_EVICT;
    } else if (arg_is(c->argv[2], "off")) {
        c->cl_flags &= ~CL_NO_EVICT;
    } else {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    reply_ok(c);
}

/* ---- CLIENT PAUSE / UNPAUSE ---- */

static void client_pause(kv_client *c)
{
    long long ms;
    if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &ms) < 0) {
        reply_error(c, "ERR timeout is not an integer or out of range");
        return;
    }
    if (ms < 0) {
        reply_error(c, "ERR timeout is negative");
        return;
    }
    int type = KV_PAUSE_ALL;
    if (c->argc == 4) {
        if (arg_is(c->argv[3], "write"))
            type = KV_PAUSE_WRITE;
        else if (!arg_is(c->argv[3], "all")) {
            reply_error(c, "ERR CLIENT PAUSE mode must be WRITE or ALL");
            return;
        }
    } else if (c->argc > 4) {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                        "CLIENT HELP.", (int)BK_MIN(c->argv[1].len, 128), c->argv[1].p);
        return;
    }
    int64_t end = ms > INT64_MAX - srv.now_ms ? INT64_MAX : srv.now_ms + ms;
    /* A stronger or longer pause is never shortened by a new one. */
    if (srv.pause_type != KV_PAUSE_ALL || type == KV_PAUSE_ALL)
        srv.pause_type = type;
    if (end > srv.pause_end_ms)
        srv.pause_end_ms = end;
    reply_ok(c);
}

static void pause_end(void)
{
    srv.pause_type = 0;
    srv.pause_end_ms = 0;
    if (srv.held)
        srv.resume_held = 1;
}

static void client_unpause(kv_client *c)
{
    pause_end();
    reply_ok(c);
}

/* Commands that may replicate without the write flag (Redis's
 * may-replicate): a WRITE pause holds them too. */
static int may_replicate(const kv_cmd *cmd)
{
    static const char *const names[] = { "publish", "pfcount", "eval", "evalsha", "fcall",
                                         "spublish" };
    for (size_t i = 0; i < BK_ARRAY_LEN(names); i++)
        if (strcmp(cmd->name, names[i]) == 0)
            return 1;
    return 0;
}

static int is_write_like(const kv_cmd *cmd, int argc, const bk_str *argv)
{
    if (kv_cmd_flags(cmd, argc, argv) & CMD_WRITE) /* FUNCTION LOAD, ... */
        return 1;
    if (cmd->proc == function_command)
        return 0;
    if (!may_replicate(cmd))
        return 0;
    /* a script flagged no-writes is a read, as Redis */
    if (cmd->proc == eval_command || cmd->proc == evalsha_command)
        return !script_call_no_writes(cmd->proc == evalsha_command, argc, argv);
    if (cmd->proc == fcall_command)
        return !function_call_no_writes(argc, argv);
    return 1;
}

int kv_pause_holds(kv_client *c)
{
    if (srv.pause_end_ms <= srv.now_ms) {
        pause_end();
        return 0;
    }
    const kv_cmd *cmd = kv_cmd_lookup(c->argv[0]);
    if (!cmd)
        return 0; /* errors are answered at once */
    if ((cmd->arity > 0 && c->argc != cmd->arity) || (cmd->arity < 0 && c->argc < -cmd->arity))
        return 0;
    int hold = srv.pause_type == KV_PAUSE_ALL;
    if (!hold) {
        if (cmd->proc == exec_command && (c->flags & CLIENT_MULTI)) {
            for (int i = 0; i < c->mcount && !hold; i++)
                hold = is_write_like(c->mq[i].cmd, c->mq[i].argc, c->mq[i].argv);
        } else {
            hold = is_write_like(cmd, c->argc, c->argv);
        }
    }
    if (!hold)
        return 0;
    if (!(c->cl_flags & CL_HELD)) {
        c->cl_flags |= CL_HELD;
        c->held_next = srv.held;
        srv.held = c;
        srv.nheld++;
    }
    return 1;
}

#define QB_BASE (16 * 1024)        /* what a read reserves */
#define QB_RESIZE_MIN (32 * 1024)  /* smaller buffers are left alone while in use */

static void resize_query_buffer(kv_client *c)
{
    if (c->cl_flags & CL_HELD)
        return; /* the parser points into the buffer */
    if (c->rbuf.len == 0 && srv.now_ms - c->last_ms >= 2000) {
        buf_free(&c->rbuf);
    } else if (c->rbuf.cap > QB_RESIZE_MIN && c->cl_qb_peak < c->rbuf.cap / 2) {
        size_t want = BK_MAX(c->cl_qb_peak, (size_t)QB_BASE);
        if (want >= c->rbuf.len && want < c->rbuf.cap)
            buf_resize(&c->rbuf, want); /* (failing leaves it as it was) */
    }
    c->cl_qb_peak = c->rbuf.len;
}

#define RB_MIN 1024 /* the smallest reply buffer (Redis's PROTO_REPLY_MIN_BYTES) */

/* Redis's reply buffer resizing: halved toward its peak when the peak
 * stays under half of it, doubled (up to 16 KiB) when the peak filled it.
 * The peak restarts every peak-reset-time. An idle output buffer is cut
 * back to the size, so an idle client holds no more than Redis's does. */
static void resize_reply_buffer(kv_client *c)
{
    if (srv.rb_resizing) {
        size_t size = c->rb_size, to = 0;
        if (size / 2 >= RB_MIN && c->rb_peak < size / 2) {
            to = BK_MAX((size_t)RB_MIN, c->rb_peak + 1);
            srv.stat_rb_shrinks++;
        } else if (size * 2 < 2 * KV_REPLY_CHUNK && c->rb_peak == size) {
            to = BK_MIN((size_t)KV_REPLY_CHUNK, size * 2);
            srv.stat_rb_expands++;
        }
        if (to)
            c->rb_size = to;
    }
    if (srv.rb_peak_reset_time >= 0 &&
        srv.now_ms - c->rb_peak_reset_ms >= srv.rb_peak_reset_time) {
        c->rb_peak = BK_MIN(c->wbuf.len - c->wpos, c->rb_size);
        c->rb_peak_reset_ms = srv.now_ms;
    }
    if (c->wbuf.len == 0 && c->wbuf.cap > c->rb_size && !(c->flags & CLIENT_CLOSED))
        buf_resize(&c->wbuf, c->rb_size);
}

#define ARGS_KEEP 1024 /* argument slots a client keeps between commands */

/* A command with many arguments leaves big argument arrays behind (Redis
 * frees its argv after every command): between commands they go. Not for
 * a client whose argv is still in use (running, blocked, held, waiting). */
static void shrink_arg_arrays(kv_client *c)
{
    if (c->blocked || (c->cl_flags & CL_HELD) || c == srv.cl_running ||
        (c->repl_flags & REPL_C_WAITING))
        return;
    if (c->argv_cap > ARGS_KEEP) {
        kv_free(c->argv);
        c->argv = NULL;
        c->argv_cap = 0;
        c->argc = 0;
    }
    if (c->parser.cap > ARGS_KEEP)
        resp_parser_shrink(&c->parser, 16);
}

void kv_client_cron(void)
{
    if (srv.pause_type && srv.pause_end_ms <= srv.now_ms)
        pause_end();
    for (kv_client *c = srv.clients, *next; c; c = next) {
        next = c->next;
        resize_query_buffer(c);
        resize_reply_buffer(c);
        shrink_arg_arrays(c);
        /* A soft limit also runs out while nothing more is sent (Redis). */
        if (c->wbuf.len > c->wpos && !c->repl_flags && kv_client_obuf_over(c))
            kv_client_close(c);
    }
}

static void held_unlink(kv_client *c)
{
    for (kv_client **p = &srv.held; *p; p = &(*p)->held_next) {
        if (*p == c) {
            *p = c->held_next;
            srv.nheld--;
            break;
        }
    }
    c->held_next = NULL;
}

void kv_pause_resume_held(void)
{
    srv.resume_held = 0;
    /* Oldest held first: the list is newest first, so reverse it. */
    kv_client *list = NULL;
    while (srv.held) {
        kv_client *c = srv.held;
        srv.held = c->held_next;
        c->held_next = list;
        list = c;
    }
    srv.nheld = 0;
    while (list) {
        kv_client *c = list;
        list = c->held_next;
        c->held_next = NULL;
        if (c->flags & CLIENT_CLOSED)
            continue;
        kv_client_process_input(c); /* may hold c again if a new pause began */
    }
}

/* ---- MONITOR ---- */

void monitor_command(kv_client *c)
{
    if (c->flags & CLIENT_MULTI) {
        reply_error(c, "ERR MONITOR isn't allowed for DENY BLOCKING client");
        return;
    }
    if (c->cl_flags & CL_MONITOR) {
        reply_ok(c);
        return;
    }
    if (srv.nmonitors == srv.monitors_cap) {
        srv.monitors_cap = srv.monitors_cap ? srv.monitors_cap * 2 : 4;
        srv.monitors = kv_realloc(srv.monitors, (size_t)srv.monitors_cap * sizeof *srv.monitors);
    }
    srv.monitors[srv.nmonitors++] = c;
    c->cl_flags |= CL_MONITOR;
    reply_ok(c);
}

/* Appends s quoted as Redis's sdscatrepr does. */
static void put_repr(bk_buf *b, bk_str s)
{
    buf_reserve(b, s.len * 4 + 3);
    char *w = b->data + b->len;
    *w++ = '"';
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        static const char esc[] = { '\n', 'n', '\r', 'r', '\t', 't', '\a', 'a', '\b', 'b' };
        int done = 0;
        if (ch == '\\' || ch == '"') {
            *w++ = '\\';
            *w++ = (char)ch;
            continue;
        }
        for (size_t k = 0; k < sizeof esc; k += 2) {
            if (ch == (unsigned char)esc[k]) {
                *w++ = '\\';
                *w++ = esc[k + 1];
                done = 1;
                break;
            }
        }
        if (done)
            continue;
        if (ch >= 0x20 && ch < 0x7f) {
            *w++ = (char)ch;
        } else {
            static const char hex[] = "0123456789abcdef";
            *w++ = '\\';
            *w++ = 'x';
            *w++ = hex[ch >> 4];
            *w++ = hex[ch & 15];
        }
    }
    *w++ = '"';
    b->len = (size_t)(w - b->data);
}

/* Which arguments MONITOR and SLOWLOG show as "(redacted)": AUTH's,
 * HELLO's AUTH pair, MIGRATE's AUTH / AUTH2 credentials, and (SLOWLOG only:
 * MONITOR hides the commands) CONFIG SET's requirepass and masterauth
 * values and every argument of ACL SETUSER after the subcommand. */
int kv_arg_redacted(const kv_cmd *cmd, int argc, const bk_str *argv, int i)
{
    if (strcmp(cmd->name, "acl") == 0)
        return i >= 2 && BK_STR_IEQ(argv[1], "setuser");
    if (strcmp(cmd->name, "config") == 0)
        return argc >= 4 && BK_STR_IEQ(argv[1], "set") && i >= 3 && (i - 2) % 2 == 1 &&
               (BK_STR_IEQ(argv[i - 1], "requirepass") || BK_STR_IEQ(argv[i - 1], "masterauth"));
    if (strcmp(cmd->name, "auth") == 0)
        return i >= 1;
    if (strcmp(cmd->name, "hello") == 0) {
        for (int k = 2; k < argc; k++) {
            if (BK_STR_IEQ(argv[k], "auth") && k + 2 < argc) {
                if (i == k + 1 || i == k + 2)
                    return 1;
                k += 2;
            } else if (BK_STR_IEQ(argv[k], "setname") && k + 1 < argc) {
                k++;
            }
        }
        return 0;
    }
    if (strcmp(cmd->name, "migrate") == 0) {
        for (int k = 6; k < argc; k++) {
            if (BK_STR_IEQ(argv[k], "auth") && i == k + 1)
                return 1;
            if (BK_STR_IEQ(argv[k], "auth2") && (i == k + 1 || i == k + 2))
                return 1;
        }
    }
    return 0;
}

static const client_sub *find_sub(bk_str name);

/* Redis 7.0's admin subcommands of containers (MONITOR hides them; HELP
 * and the harmless ones show). CLIENT's come from client_subs. */
static const struct {
    const char *container;
    const char *const subs[10];
} admin_subs[] = {
    { "config", { "get", "set", "rewrite", "resetstat" } },
    { "slowlog", { "get", "len", "reset" } },
    { "latency", { "doctor", "graph", "histogram", "history", "latest", "reset" } },
    { "acl", { "deluser", "dryrun", "getuser", "list", "load", "log", "save", "setuser", "users" } },
    { "module", { "list", "load", "loadex", "unload" } },
};

static int hidden_from_monitor(const kv_cmd *cmd, int argc, const bk_str *argv)
{
    if (cmd->proc == client_command) {
        const client_sub *s = argc >= 2 ? find_sub(argv[1]) : NULL;
        return s && s->admin;
    }
    for (size_t i = 0; i < BK_ARRAY_LEN(admin_subs); i++) {
        if (strcmp(cmd->name, admin_subs[i].container) != 0)
            continue;
        for (size_t k = 0; argc >= 2 && k < BK_ARRAY_LEN(admin_subs[i].subs) && admin_subs[i].subs[k]; k++)
            if (arg_is(argv[1], admin_subs[i].subs[k]))
                return 1;
        return 0;
    }
    return (cmd->flags & CMD_ADMIN) != 0;
}

void kv_monitor_feed(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv)
{
    /* A fake client outside AOF loading runs a script's commands: Redis
     * shows them as from "lua". */
    if ((c->flags & CLIENT_FAKE) && srv.loading)
        return;
    if (hidden_from_monitor(cmd, argc, argv))
        return;
    const char *addr =
        (c->flags & CLIENT_FAKE) || (srv.script_caller && c != srv.script_caller) ? "lua"
                                                                                  : c->addr;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    bk_buf line = { 0 };
    char head[128];
    int n = snprintf(head, sizeof head, "+%ld.%06ld [%d %s]", (long)tv.tv_sec, (long)tv.tv_usec,
                     c->db->id, addr);
    buf_append(&line, head, (size_t)n);
    for (int i = 0; i < argc; i++) {
        buf_append(&line, " ", 1);
        put_repr(&line, kv_arg_redacted(cmd, argc, argv, i) ? BK_STR("(redacted)") : argv[i]);
    }
    buf_append(&line, "\r\n", 2);
    for (int i = 0; i < srv.nmonitors; i++) {
        kv_client *m = srv.monitors[i];
        if (m->flags & CLIENT_CLOSED)
            continue;
        reply_raw(m, line.data, line.len);
        if (m != c)
            kv_client_output_added(m);
    }
    buf_free(&line);
}

static void monitor_remove(kv_client *c)
{
    for (int i = 0; i < srv.nmonitors; i++) {
        if (srv.monitors[i] == c) {
            srv.monitors[i] = srv.monitors[--srv.nmonitors];
            break;
        }
    }
    c->cl_flags &= ~CL_MONITOR;
    if (!srv.nmonitors) {
        kv_free(srv.monitors);
        srv.monitors = NULL;
        srv.monitors_cap = 0;
    }
}

void kv_client_reset(kv_client *c)
{
    if (c->cl_flags & CL_MONITOR)
        monitor_remove(c);
    tracking_disable(c);
    c->cl_flags &= ~(CL_REPLY_OFF | CL_REPLY_SKIP | CL_REPLY_SKIP_NEXT | CL_NO_EVICT);
}

void kv_client_gone(kv_client *c)
{
    if (c->cl_flags & CL_MONITOR)
        monitor_remove(c);
    if (c->cl_flags & CL_HELD) {
        held_unlink(c);
        c->cl_flags &= ~CL_HELD;
    }
    tracking_client_closed(c);
}

/* ---- after each command: REPLY OFF/SKIP and CLIENT CACHING ---- */

void kv_client_after_command(kv_client *c, size_t mark)
{
    if (c->cl_flags & CL_HELD)
        return; /* not run yet */
    if (c->cl_flags & (CL_REPLY_OFF | CL_REPLY_SKIP)) {
        /* Drop what this command wrote: its reply (and nothing else:
         * invalidations for c are queued until after this point). */
        if (c->wbuf.len > mark && mark >= c->wpos)
            c->wbuf.len = mark;
    }
    c->cl_flags &= ~CL_REPLY_SKIP;
    if (c->cl_flags & CL_REPLY_SKIP_NEXT)
        c->cl_flags = (c->cl_flags & ~CL_REPLY_SKIP_NEXT) | CL_REPLY_SKIP;
    /* CLIENT CACHING lasts for the next command (a whole transaction). */
    if ((c->cl_flags & CL_TRK_CACHING) && !(c->flags & CLIENT_MULTI) &&
        (!c->lastcmd || c->lastcmd->proc != client_command))
        c->cl_flags &= ~CL_TRK_CACHING;
    if (srv.trk_self.len)
        tracking_send_self(c);
}

/* ---- CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO ---- */

static void client_tracking(kv_client *c)
{
    int on;
    if (arg_is(c->argv[2], "on"))
        on = 1;
    else if (arg_is(c->argv[2], "off"))
        on = 0;
    else {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    unsigned opts = 0;
    long long redir = 0;
    kv_client *target = NULL;
    bk_str *prefixes = kv_malloc((size_t)c->argc * sizeof *prefixes);
    int np = 0;
    for (int i = 3; i < c->argc; i++) {
        int more = c->argc - i - 1;
        bk_str a = c->argv[i];
        if (arg_is(a, "redirect") && more) {
            i++;
            if (redir) {
                reply_error(c, "ERR A client can only redirect to a single other client");
                goto done;
            }
            if (arg_ll(c, c->argv[i], &redir) < 0)
                goto done;
            for (kv_client *x = srv.clients; x; x = x->next)
                if (x->id == (uint64_t)redir && redir > 0)
                    target = x;
            if (!target) {
                reply_error(c, "ERR The client ID you want redirect to does not exist");
                goto done;
            }
        } else if (arg_is(a, "bcast")) {
            opts |= CL_TRK_BCAST;
        } else if (arg_is(a, "optin")) {
            opts |= CL_TRK_OPTIN;
        } else if (arg_is(a, "optout")) {
            opts |= CL_TRK_OPTOUT;
        } else if (arg_is(a, "noloop")) {
            opts |= CL_TRK_NOLOOP;
        } else if (arg_is(a, "prefix") && more) {
            prefixes[np++] = c->argv[++i];
        } else {
            reply_error(c, ERR_SYNTAX);
            goto done;
        }
    }
    if (on) {
        if (!(opts & CL_TRK_BCAST) && np) {
            reply_error(c, "ERR PREFIX option requires BCAST mode to be enabled");
            goto done;
        }
        if ((c->cl_flags & CL_TRACKING) &&
            !!(c->cl_flags & CL_TRK_BCAST) != !!(opts & CL_TRK_BCAST)) {
            reply_error(c, "ERR You can't switch BCAST mode on/off before disabling tracking for "
                           "this client, and then re-enabling it with a different mode.");
            goto done;
        }
        if ((opts & CL_TRK_BCAST) && (opts & (CL_TRK_OPTIN | CL_TRK_OPTOUT))) {
            reply_error(c, "ERR OPTIN and OPTOUT are not compatible with BCAST");
            goto done;
        }
        if ((opts & CL_TRK_OPTIN) && (opts & CL_TRK_OPTOUT)) {
            reply_error(c, "ERR You can't specify both OPTIN mode and OPTOUT mode");
            goto done;
        }
        if (((opts & CL_TRK_OPTIN) && (c->cl_flags & CL_TRK_OPTOUT)) ||
            ((opts & CL_TRK_OPTOUT) && (c->cl_flags & CL_TRK_OPTIN))) {
            reply_error(c, "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking "
                           "for this client, and then re-enabling it with a different mode.");
            goto done;
        }
        char err[512];
        if ((opts & CL_TRK_BCAST) && tracking_prefix_error(c, prefixes, np, err, sizeof err)) {
            reply_error(c, err);
            goto done;
        }
        tracking_enable(c, (uint64_t)redir, target, opts, prefixes, np);
    } else {
        tracking_disable(c);
    }
    reply_ok(c);
done:
    kv_free(prefixes);
}

static void client_caching(kv_client *c)
{
    if (!(c->cl_flags & CL_TRACKING) || !(c->cl_flags & (CL_TRK_OPTIN | CL_TRK_OPTOUT))) {
        reply_error(c, "ERR CLIENT CACHING can be called only when the client is in tracking "
                       "mode with OPTIN or OPTOUT mode enabled");
        return;
    }
    bk_str v = c->argv[2];
    if (arg_is(v, "yes")) {
        if (!(c->cl_flags & CL_TRK_OPTIN)) {
            reply_error(c, "ERR CLIENT CACHING YES is only valid when tracking is enabled in "
                           "OPTIN mode.");
            return;
        }
    } else if (arg_is(v, "no")) {
        if (!(c->cl_flags & CL_TRK_OPTOUT)) {
            reply_error(c, "ERR CLIENT CACHING NO is only valid when tracking is enabled in "
                           "OPTOUT mode.");
            return;
        }
    } else {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    c->cl_flags |= CL_TRK_CACHING;
    reply_ok(c);
}

static void client_getredir(kv_client *c)
{
    reply_int(c, (c->cl_flags & CL_TRACKING) ? (long long)c->trk_redir : -1);
}

static void client_trackinginfo(kv_client *c)
{
    static const struct {
        unsigned need, absent;
        const char *name;
    } names[] = {
        { CL_TRK_BCAST, 0, "bcast" },
        { CL_TRK_OPTIN, 0, "optin" },
        { CL_TRK_OPTIN | CL_TRK_CACHING, 0, "caching-yes" },
        { CL_TRK_OPTOUT, 0, "optout" },
        { CL_TRK_OPTOUT | CL_TRK_CACHING, 0, "caching-no" },
        { CL_TRK_NOLOOP, 0, "noloop" },
        { CL_TRK_BROKEN, 0, "broken_redirect" },
    };
    reply_map(c, 3);
    reply_bulk_cstr(c, "flags");
    if (!(c->cl_flags & CL_TRACKING)) {
        reply_set(c, 1);
        reply_bulk_cstr(c, "off");
    } else {
        const char *out[BK_ARRAY_LEN(names) + 1];
        int n = 0;
        out[n++] = "on";
        for (size_t i = 0; i < BK_ARRAY_LEN(names); i++)
            if ((c->cl_flags & names[i].need) == names[i].need)
                out[n++] = names[i].name;
        reply_set(c, n);
        for (int i = 0; i < n; i++)
            reply_bulk_cstr(c, out[i]);
    }
    reply_bulk_cstr(c, "redirect");
    reply_int(c, (c->cl_flags & CL_TRACKING) ? (long long)c->trk_redir : -1);
    reply_bulk_cstr(c, "prefixes");
    reply_array(c, c->trk_nprefixes);
    for (int i = 0; i < c->trk_nprefixes; i++) {
        reply_bulk_str(c, tracking_prefix_str(c->trk_prefixes[i]));
    }
}

/* ---- HELP and the dispatch table ---- */

static void client_help(kv_client *c)
{
    static const char *const lines[] = {
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "HELP",
        "    Prints this help.",
    };
    reply_array(c, (long long)BK_ARRAY_LEN(lines));
    for (size_t i = 0; i < BK_ARRAY_LEN(lines); i++)
        reply_simple(c, lines[i]);
}

/* Redis 7.0's CLIENT subcommands. UNBLOCK is added by the blocking family
 * (its row goes in the marked spot). */

static const client_sub client_subs[] = {
    { "id", 2, 0, client_id },
    { "getname", 2, 0, client_getname },
    { "setname", 3, 0, client_setname },
    { "setinfo", 4, 0, client_setinfo },
    { "info", 2, 0, client_info },
    { "list", -2, 1, client_list },
    { "kill", -3, 1, client_kill },
    { "reply", 3, 0, client_reply },
    { "no-evict", 3, 1, client_no_evict },
    { "pause", -3, 1, client_pause },
    { "unpause", 2, 1, client_unpause },
    { "tracking", -3, 0, client_tracking },
    { "caching", 3, 0, client_caching },
    { "getredir", 2, 0, client_getredir },
    { "trackinginfo", 2, 0, client_trackinginfo },
    { "help", 2, 0, client_help },
    /* -- client subcommands: blocking (UNBLOCK) -- */
    { "unblock", -3, 1, blocking_client_unblock_command },
    /* -- end blocking -- */
};

static const client_sub *find_sub(bk_str name)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(client_subs); i++)
        if (arg_is(name, client_subs[i].name))
            return &client_subs[i];
    return NULL;
}

void client_command(kv_client *c)
{
    const client_sub *s = find_sub(c->argv[1]);
    if (!s) {
        reply_errorf(c, "ERR unknown subcommand '%.*s'. Try CLIENT HELP.",
                     (int)BK_MIN(c->argv[1].len, 128), c->argv[1].p);
        return;
    }
    if ((s->arity > 0 && c->argc != s->arity) || (s->arity < 0 && c->argc < -s->arity)) {
        sub_arity_error(c);
        return;
    }
    s->proc(c);
}
