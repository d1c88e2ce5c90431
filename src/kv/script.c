/* Lua scripting: EVAL/EVALSHA(_RO), SCRIPT, and what FUNCTION/FCALL share
 * with them: the sandboxed Lua 5.1 states, the redis.* API, RESP <-> Lua
 * conversions, the run of one script (atomic, with a count hook that
 * serves other clients BUSY past busy-reply-threshold and honours SCRIPT
 * KILL / FUNCTION KILL / SHUTDOWN NOSAVE) and the script cache by SHA1.
 *
 * Scripts replicate by effects: every write redis.call runs goes to the
 * AOF and to replicas as itself, the whole script wrapped in MULTI/EXEC
 * when it wrote more than one command (aof_feed), as Redis 7.0.
 *
 * Lua 5.1 rather than LuaJIT (BRISK_LUAJIT): the count hook that serves
 * BUSY and SCRIPT KILL never runs inside JIT-compiled traces, so LuaJIT must
 * run interpreter-only, and so measured slower than Lua 5.1 here (a
 * server-side loop of 1M redis.call('incr'): 0.45-0.60 s vs 0.29-0.41 s;
 * redis-server 7.0.15: 0.34-0.62 s; per EVALSHA of a one-INCR script,
 * callgrind: 5,411 vs 5,017 instructions, Redis 15,752). */
#include "kv/script.h"

#include "core/log.h"
#include "kv/acl.h"
#include "kv/aof.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/script_ldb.h"
#include "kv/types.h"
#include "kv/util.h"

#include <lauxlib.h>
#include <lualib.h>
#ifdef BRISK_LUAJIT
#include <luajit.h>
int luaopen_cjson(lua_State *L); /* lua-cjson's static archive */
#else
#include <lua-bitop.h>
#include <lua-cjson.h>
#endif

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kv/sha1.h"


/* ---- the running script ---- */

typedef struct script_ctx {
    kv_client *caller;
    lua_State *L;
    const char *name;
    unsigned flags;
    int ro, is_func;
    int wrote;    /* ran a write command: SCRIPT KILL refuses */
    int killed;   /* SCRIPT KILL / FUNCTION KILL asked */
    int timedout; /* past busy-reply-threshold: serving others BUSY */
    int resp;     /* redis.setresp */
    uint64_t start_ticks; /* kv_ticks: a TSC read, not a clock call per run */
} script_ctx;

/* Milliseconds the running script has taken. */
static int64_t run_elapsed_ms(const script_ctx *r)
{
    return (int64_t)((double)(kv_ticks() - r->start_ticks) / (kv_ticks_per_us() * 1000.0));
}

static script_ctx *run;           /* NULL when no script runs */
static kv_client *fake;           /* runs redis.call's commands */
static lua_State *eval_L;         /* EVAL's state (functions have their own) */
static dict scripts;              /* sha -> script_entry */
static int scripts_ready;
static bk_str *call_argv;            /* redis.call argv, reused */
static int call_cap;
static char *call_nums;           /* numbers formatted for argv, reused */
static size_t nums_cap;
static uint64_t rand_state;       /* math.random: 48-bit LCG (POSIX drand48) */
static int64_t load_start_ms;     /* FUNCTION LOAD timeout */
static int reply_resp = 2;        /* RESP of the script whose result is converted */

/* Registry slots of every state: the error handler, the real globals. */
enum { REG_ERRH = 1, REG_GLOBALS = 2 };
/* EVAL's state keeps on its stack, between runs, what every run uses: the
 * error handler, the KEYS and ARGV tables reused from run to run, and the
 * function of the script run last (false before one ran). A run's
 * function goes above them. Stack reads instead of registry lookups. */
enum { EVAL_ERRH = 1, EVAL_KEYS = 2, EVAL_ARGV = 3, EVAL_LASTFN = 4 };
static int args_len[2];            /* entries filled in EVAL's KEYS, ARGV */
static const struct script_entry *lastfn_entry; /* whose function is at EVAL_LASTFN */
static unsigned gc_calls;          /* runs since the last GC step */

typedef struct script_entry {
    dict_node node; /* aux = 40 */
    int ref;        /* function in the registry */
    unsigned flags;
    char sha[41];
} script_entry;

/* Scripts EVALSHA ran, found again by a plain compare of the sha as the
 * client sent it (no lowercasing, no dict hash): a direct-mapped cache on
 * three of its characters, so that a client running a few scripts in turn
 * (a job queue's dozen) hits it too. Emptied by SCRIPT FLUSH. */
#define SHA_SLOTS 64
static struct {
    script_entry *e;
    char sent[40];
} sha_seen[SHA_SLOTS];

static unsigned sha_slot(const char *p)
{
    return ((unsigned)(p[0] | 0x20) * 31u + (unsigned)(p[1] | 0x20) * 7u + (unsigned)p[39]) &
           (SHA_SLOTS - 1);
}

/* redis.call's last command, found again by a plain compare of the name as
 * the script spelled it (the table is static: the pointer stays valid). */
static const kv_cmd *last_cmd;
static char last_cmd_name[24];
static size_t last_cmd_len;

static bk_str entry_key_fn(const dict_node *n)
{
    return (bk_str){ ((const script_entry *)(const void *)n)->sha, 40 };
}

/* ---- flags ---- */

static const struct {
    const char *name;
    unsigned flag;
} flag_names[] = {
    { "no-writes", SCRIPT_NO_WRITES },   { "allow-oom", SCRIPT_ALLOW_OOM },
    { "allow-stale", SCRIPT_ALLOW_STALE }, { "no-cluster", SCRIPT_NO_CLUSTER },
    { "allow-cross-slot-keys", SCRIPT_ALLOW_CROSS_SLOT },
};

unsigned script_flag_by_name(const char *p, size_t n)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(flag_names); i++)
        if (strlen(flag_names[i].name) == n && memcmp(flag_names[i].name, p, n) == 0)
            return flag_names[i].flag;
    return 0;
}

/* ---- sandbox ---- */

static int ro_newindex(lua_State *L)
{
    luaL_where(L, 1);
    lua_pushstring(L, "Attempt to modify a readonly table");
    lua_concat(L, 2);
    return lua_error(L);
}

static int global_index(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    luaL_where(L, 1);
    lua_pushfstring(L, "Script attempted to access nonexistent global variable '%s'", k ? k : "?");
    lua_concat(L, 2);
    return lua_error(L);
}

/* Replaces the table at the top with an empty proxy reading through to it
 * and refusing writes: stock Lua 5.1 has no read-only tables. */
void script_make_readonly(lua_State *L, int strict_index)
{
    int real = lua_gettop(L);
    if (strict_index) {
        lua_newtable(L);
        lua_pushcfunction(L, global_index);
        lua_setfield(L, -2, "__index");
        lua_setmetatable(L, real);
    }
    lua_newtable(L);            /* proxy */
    lua_newtable(L);            /* its metatable */
    lua_pushvalue(L, real);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_replace(L, real);
}

void script_protect_globals(lua_State *L)
{
    static const char *libs[] = { "redis", "string", "math", "table", "cjson", "bit",
                                  "struct", "cmsgpack", "coroutine" };
    for (size_t i = 0; i < BK_ARRAY_LEN(libs); i++) {
        lua_getglobal(L, libs[i]);
        if (lua_istable(L, -1)) {
            script_make_readonly(L, 0);
            lua_setglobal(L, libs[i]);
        } else {
            lua_pop(L, 1);
        }
    }
    /* String methods ("x":upper()) read through the proxy of string, and
     * the string metatable is not handed out: the real string table is
     * not reachable from a script. */
    lua_pushstring(L, "");
    if (lua_getmetatable(L, -1)) {
        lua_getglobal(L, "string");
        lua_setfield(L, -2, "__index");
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    /* The globals: the real table stays in the registry (KEYS and ARGV
     * are set there), scripts see a proxy refusing writes and reads of
     * names that do not exist. */
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_setfield(L, LUA_REGISTRYINDEX, "kv_globals");
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_rawseti(L, LUA_REGISTRYINDEX, REG_GLOBALS);
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    script_make_readonly(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, "kv_globals");
    lua_pushstring(L, "_G");
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    /* getmetatable(_G) shows a read-only table reading through to _G:
     * what it hands out cannot change anything. */
    lua_getmetatable(L, -1);
    lua_newtable(L);
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    script_make_readonly(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    lua_replace(L, LUA_GLOBALSINDEX);
}

/* math.random / math.randomseed: a PRNG of our own so that scripts see
 * the same sequence on every server (Redis's drand48 semantics). */
static int32_t rand48_next(void)
{
    rand_state = (rand_state * 0x5DEECE66DULL + 0xB) & ((1ULL << 48) - 1);
    return (int32_t)(rand_state >> 17);
}

static int math_random(lua_State *L)
{
    lua_Number r = (lua_Number)(rand48_next() % INT32_MAX) / (lua_Number)INT32_MAX;
    switch (lua_gettop(L)) {
    case 0:
        lua_pushnumber(L, r);
        break;
    case 1: {
        int u = luaL_checkint(L, 1);
        luaL_argcheck(L, 1 <= u, 1, "interval is empty");
        lua_pushnumber(L, floor(r * u) + 1);
        break;
    }
    case 2: {
        int l = luaL_checkint(L, 1), u = luaL_checkint(L, 2);
        luaL_argcheck(L, l <= u, 2, "interval is empty");
        lua_pushnumber(L, floor(r * (u - l + 1)) + l);
        break;
    }
    default:
        return luaL_error(L, "wrong number of arguments");
    }
    return 1;
}

static int math_randomseed(lua_State *L)
{
    rand_state = ((uint64_t)(uint32_t)luaL_checkint(L, 1) << 16) | 0x330E;
    return 0;
}

/* ---- conversions: RESP (a command's reply) -> Lua ---- */

static const char *crlf(const char *p, const char *end)
{
    const char *q = memchr(p, '\r', (size_t)(end - p));
    return q ? q : end;
}

static void push_err_table(lua_State *L, const char *p, size_t n)
{
    lua_newtable(L);
    lua_pushstring(L, "err");
    lua_pushlstring(L, p, n);
    lua_rawset(L, -3);
}

/* An error a command already replied (and so counted in the error
 * stats): the script's own error reply built from it is not counted again. */
static void push_err_counted(lua_State *L, const char *p, size_t n)
{
    push_err_table(L, p, n);
    lua_pushstring(L, "ignore_stats");
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
}

/* Pushes the reply at p; returns where the next one starts. */
static const char *resp_to_lua(lua_State *L, const char *p, const char *end)
{
    if (p >= end) {
        lua_pushboolean(L, 0);
        return end;
    }
    luaL_checkstack(L, 4, "reply too deep");
    char t = *p++;
    const char *e = crlf(p, end);
    const char *next = e + 2 <= end ? e + 2 : end;
    long long n = 0;
    switch (t) {
    case '+':
        lua_newtable(L);
        lua_pushstring(L, "ok");
        lua_pushlstring(L, p, (size_t)(e - p));
        lua_rawset(L, -3);
        return next;
    case '-':
        push_err_table(L, p, (size_t)(e - p));
        return next;
    case ':':
        kv_parse_ll(p, (size_t)(e - p), &n);
        lua_pushnumber(L, (lua_Number)n);
        return next;
    case '$':
        kv_parse_ll(p, (size_t)(e - p), &n);
        if (n < 0) {
            lua_pushboolean(L, 0);
            return next;
        }
        lua_pushlstring(L, next, (size_t)n);
        return next + n + 2;
    case '*':
    case '~':
    case '%':
    case '|':
    case '>': {
        kv_parse_ll(p, (size_t)(e - p), &n);
        if (n < 0) {
            lua_pushboolean(L, 0);
            return next;
        }
        if (t == '|') { /* attributes: skipped, the value follows */
            const char *q = next;
            for (long long i = 0; i < 2 * n; i++) {
                q = resp_to_lua(L, q, end);
                lua_pop(L, 1);
            }
            return resp_to_lua(L, q, end);
        }
        const char *q = next;
        if (t == '>') { /* a push: Redis's scripts see nil (the reply after it is dropped) */
            for (long long i = 0; i < n; i++) {
                q = resp_to_lua(L, q, end);
                lua_pop(L, 1);
            }
            lua_pushnil(L);
            return q;
        }
        if (t == '*') {
            lua_createtable(L, (int)BK_MIN(n, 1 << 20), 0);
            for (long long i = 0; i < n; i++) {
                q = resp_to_lua(L, q, end);
                lua_rawseti(L, -2, (int)i + 1);
            }
            return q;
        }
        lua_newtable(L);
        lua_pushstring(L, t == '%' ? "map" : "set");
        lua_newtable(L);
        for (long long i = 0; i < n; i++) {
            q = resp_to_lua(L, q, end);
            if (t == '%')
                q = resp_to_lua(L, q, end);
            else
                lua_pushboolean(L, 1);
            lua_rawset(L, -3);
        }
        lua_rawset(L, -3);
        return q;
    }
    case '_':
        lua_pushnil(L);
        return next;
    case '#':
        lua_pushboolean(L, *p == 't');
        return next;
    case ',': {
        char tmp[128];
        size_t len = BK_MIN((size_t)(e - p), sizeof tmp - 1);
        memcpy(tmp, p, len);
        tmp[len] = '\0';
        lua_newtable(L);
        lua_pushstring(L, "double");
        lua_pushnumber(L, strtod(tmp, NULL));
        lua_rawset(L, -3);
        return next;
    }
    case '(':
        lua_newtable(L);
        lua_pushstring(L, "big_number");
        lua_pushlstring(L, p, (size_t)(e - p));
        lua_rawset(L, -3);
        return next;
    case '=':
    case '!':
        kv_parse_ll(p, (size_t)(e - p), &n);
        if (t == '!') {
            push_err_table(L, next, (size_t)n);
            return next + n + 2;
        }
        lua_newtable(L);
        lua_pushstring(L, "verbatim_string");
        lua_newtable(L);
        lua_pushstring(L, "format");
        lua_pushlstring(L, next, n >= 4 ? 3 : 0);
        lua_rawset(L, -3);
        lua_pushstring(L, "string");
        lua_pushlstring(L, next + (n >= 4 ? 4 : 0), n >= 4 ? (size_t)n - 4 : (size_t)n);
        lua_rawset(L, -3);
        lua_rawset(L, -3);
        return next + n + 2;
    default:
        lua_pushboolean(L, 0);
        return end;
    }
}

/* The commonest replies, an integer or a bulk string, pushed without the
 * general parser (no stack check: a C function has LUA_MINSTACK slots,
 * one is used). Returns 0 to leave any other reply (or an integer of more
 * than 18 digits) to resp_to_lua. */
static int resp_scalar_to_lua(lua_State *L, const char *p, const char *end)
{
    if (end - p < 4 || (p[0] != ':' && p[0] != '$'))
        return 0;
    const char *q = p + 1;
    int neg = *q == '-';
    q += neg;
    long long v = 0;
    const char *digits = q;
    while (q < end && *q >= '0' && *q <= '9' && q - digits < 18)
        v = v * 10 + (*q++ - '0');
    if (q == digits || end - q < 2 || q[0] != '\r' || q[1] != '\n')
        return 0;
    if (p[0] == ':') {
        lua_pushnumber(L, (lua_Number)(neg ? -v : v));
        return 1;
    }
    q += 2;
    if (neg) { /* $-1: nil */
        lua_pushboolean(L, 0);
        return 1;
    }
    if (end - q < v)
        return 0;
    lua_pushlstring(L, q, (size_t)v);
    return 1;
}

/* ---- conversions: Lua (a script's result) -> reply ---- */

/* Error and status text go out on one line. */
static void reply_line(kv_client *c, char type, const char *p, size_t n)
{
    char pre[1] = { type };
    reply_raw(c, pre, 1);
    size_t start = c->wbuf.len;
    reply_raw(c, p, n);
    for (size_t i = start; i < c->wbuf.len; i++)
        if (c->wbuf.data[i] == '\r' || c->wbuf.data[i] == '\n')
            c->wbuf.data[i] = ' ';
    reply_raw(c, "\r\n", 2);
}

static int field(lua_State *L, int idx, const char *name, int type)
{
    lua_pushstring(L, name);
    lua_rawget(L, idx);
    if (lua_type(L, -1) == type)
        return 1;
    lua_pop(L, 1);
    return 0;
}

static void script_lua_to_reply(kv_client *c, lua_State *L, int idx)
{
    if (idx < 0)
        idx = lua_gettop(L) + idx + 1;
    switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        reply_bulk(c, s, n);
        return;
    }
    case LUA_TBOOLEAN:
        /* Redis converts by the script's RESP (redis.setresp), not the
         * client's: false is a null for a RESP2 script, and a RESP3
         * script's booleans reach a RESP2 client as 1 and 0. */
        if (reply_resp >= 3)
            reply_bool(c, lua_toboolean(L, idx));
        else if (lua_toboolean(L, idx))
            reply_int(c, 1);
        else
            reply_null(c);
        return;
    case LUA_TNUMBER:
        reply_int(c, (long long)lua_tonumber(L, idx));
        return;
    case LUA_TTABLE:
        break;
    default:
        reply_null(c);
        return;
    }
    if (!lua_checkstack(L, 4)) {
        reply_error(c, "ERR reached lua stack limit");
        return;
    }
    size_t n;
    if (field(L, idx, "err", LUA_TSTRING)) {
        const char *s = lua_tolstring(L, -1, &n);
        reply_line(c, '-', s, n);
        lua_pop(L, 1);
        return;
    }
    if (field(L, idx, "ok", LUA_TSTRING)) {
        const char *s = lua_tolstring(L, -1, &n);
        reply_line(c, '+', s, n);
        lua_pop(L, 1);
        return;
    }
    if (field(L, idx, "double", LUA_TNUMBER)) {
        /* Redis 7.0 writes a script's double with %.17g (both protocols). */
        char d[64];
        double v = lua_tonumber(L, -1);
        int dn = isinf(v) ? snprintf(d, sizeof d, "%s", v > 0 ? "inf" : "-inf")
                          : snprintf(d, sizeof d, "%.17g", v);
        if (c->resp >= 3)
            reply_line(c, ',', d, (size_t)dn);
        else
            reply_bulk(c, d, (size_t)dn);
        lua_pop(L, 1);
        return;
    }
    if (field(L, idx, "big_number", LUA_TSTRING)) {
        /* CR and LF become spaces (as Redis: the RESP3 line stays one line,
         * and RESP2's bulk says the same) */
        const char *s = lua_tolstring(L, -1, &n);
        char small[128];
        char *v = n <= sizeof small ? small : kv_malloc(n);
        for (size_t i = 0; i < n; i++)
            v[i] = s[i] == '\r' || s[i] == '\n' ? ' ' : s[i];
        if (c->resp >= 3)
            reply_line(c, '(', v, n);
        else
            reply_bulk(c, v, n);
        if (v != small)
            kv_free(v);
        lua_pop(L, 1);
        return;
    }
    if (field(L, idx, "verbatim_string", LUA_TTABLE)) {
        int v = lua_gettop(L);
        if (field(L, v, "format", LUA_TSTRING)) {
            if (field(L, v, "string", LUA_TSTRING)) {
                size_t fl;
                const char *f = lua_tolstring(L, -2, &fl);
                const char *s = lua_tolstring(L, -1, &n);
                char fmt[3] = { ' ', ' ', ' ' };
                memcpy(fmt, f, BK_MIN(fl, 3));
                reply_verbatim(c, s, n, fmt);
                lua_pop(L, 3);
                return;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    if (field(L, idx, "map", LUA_TTABLE)) {
        int m = lua_gettop(L);
        size_t h = reply_defer(c);
        long long cnt = 0;
        lua_pushnil(L);
        while (lua_next(L, m)) {
            lua_pushvalue(L, -2);
            script_lua_to_reply(c, L, -1);
            lua_pop(L, 1);
            script_lua_to_reply(c, L, -1);
            lua_pop(L, 1);
            cnt++;
        }
        reply_defer_map(c, h, cnt);
        lua_pop(L, 1);
        return;
    }
    if (field(L, idx, "set", LUA_TTABLE)) {
        int m = lua_gettop(L);
        size_t h = reply_defer(c);
        long long cnt = 0;
        lua_pushnil(L);
        while (lua_next(L, m)) {
            lua_pop(L, 1);
            lua_pushvalue(L, -1);
            script_lua_to_reply(c, L, -1);
            lua_pop(L, 1);
            cnt++;
        }
        reply_defer_set_type(c, h, cnt);
        lua_pop(L, 1);
        return;
    }
    /* An array, up to the first nil. */
    size_t h = reply_defer(c);
    long long cnt = 0;
    for (;;) {
        lua_rawgeti(L, idx, (int)cnt + 1);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        script_lua_to_reply(c, L, -1);
        lua_pop(L, 1);
        cnt++;
    }
    reply_defer_array(c, h, cnt);
}

/* ---- errors ---- */

/* Raises {err="CODE msg"} from a RESP-style error text: a leading '-' is
 * dropped, and text with no code gets "ERR ". */
int script_raise_err(lua_State *L, const char *p, size_t n)
{
    push_err_table(L, p, n);
    return lua_error(L);
}

/* redis.error_reply's normalisation: "-CODE msg" keeps CODE, "msg" or
 * "-msg" (one word) becomes "ERR msg". */
static void push_error_reply(lua_State *L, const char *s, size_t n)
{
    if (n && s[0] == '-')
        s++, n--;
    if (memchr(s, ' ', n)) {
        lua_pushlstring(L, s, n);
    } else {
        lua_pushstring(L, "ERR ");
        lua_pushlstring(L, s, n);
        lua_concat(L, 2);
    }
    size_t m;
    const char *t = lua_tolstring(L, -1, &m);
    while (m && (t[m - 1] == '\r' || t[m - 1] == '\n'))
        m--;
    lua_pushlstring(L, t, m);
    lua_remove(L, -2);
    lua_newtable(L);
    lua_pushstring(L, "err");
    lua_pushvalue(L, -3);
    lua_rawset(L, -3);
    lua_remove(L, -2);
}

/* The error handler of every run: string errors become {err="ERR ..."},
 * and the table gets the source and line of the script frame. */
static int error_handler(lua_State *L)
{
    if (!lua_istable(L, 1)) {
        /* As tostring() shows it: "nil", "true", "table: 0x..." */
        const char *m = lua_tostring(L, 1);
        lua_newtable(L);
        lua_pushstring(L, "err");
        if (m)
            lua_pushfstring(L, "ERR %s", m);
        else if (lua_isnil(L, 1))
            lua_pushstring(L, "ERR nil");
        else if (lua_isboolean(L, 1))
            lua_pushstring(L, lua_toboolean(L, 1) ? "ERR true" : "ERR false");
        else
            lua_pushfstring(L, "ERR %s: %p", luaL_typename(L, 1), lua_topointer(L, 1));
        lua_rawset(L, -3);
        lua_replace(L, 1);
    }
    lua_Debug ar;
    int level = 1;
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "nSl", &ar) && ar.what &&
        strcmp(ar.what, "C") == 0)
        level = 2;
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "nSl", &ar)) {
        lua_pushstring(L, "source");
        lua_pushstring(L, ar.source);
        lua_rawset(L, 1);
        lua_pushstring(L, "line");
        lua_pushinteger(L, ar.currentline);
        lua_rawset(L, 1);
    }
    lua_settop(L, 1);
    return 1;
}

/* ---- redis.* ---- */

static const char e_noargs[] = "ERR Please specify at least one argument for this redis lib call";
static const char e_argtype[] = "ERR Lua redis lib command arguments must be strings or integers";

/* Fills call_argv from the argc values on L's stack (strings as they are,
 * numbers as %.17g, as Redis formats them). Returns NULL or the error. The
 * strings stay valid while the values stay on the stack. */
static const char *args_from_lua(lua_State *L, int argc)
{
    if (argc == 0)
        return e_noargs;
    if (argc > call_cap) {
        call_cap = argc < 16 ? 16 : argc;
        kv_free(call_argv);
        call_argv = kv_malloc((size_t)call_cap * sizeof *call_argv);
    }
    /* One pass: strings as they are; numbers formatted into call_nums,
     * grown (before any number is written to it) to room for all. */
    size_t numlen = 0;
    for (int i = 0; i < argc; i++) {
        int t = lua_type(L, i + 1);
        if (t == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, i + 1, &n);
            call_argv[i] = (bk_str){ s, n };
            continue;
        }
        if (t != LUA_TNUMBER)
            return e_argtype;
        if (numlen == 0 && (size_t)argc * 32 > nums_cap) {
            nums_cap = (size_t)argc * 32;
            kv_free(call_nums);
            call_nums = kv_malloc(nums_cap);
        }
        int w = snprintf(call_nums + numlen, 32, "%.17g", (double)lua_tonumber(L, i + 1));
        call_argv[i] = (bk_str){ call_nums + numlen, (size_t)w };
        numlen += 32;
    }
    return NULL;
}

/* A command that writes, checked as Redis checks a script's write against
 * the replication state: a read-only replica (READONLY) or too few good
 * replicas (NOREPLICAS). Replies the error to c and returns 1 when
 * refused. */
static int repl_refuses_write(kv_client *c)
{
    static const kv_cmd probe = { .name = "script-write", .flags = CMD_WRITE };
    /* a script replayed from the AOF writes, even on a read-only replica */
    if (BK_UNLIKELY(srv.loading) && srv.script_caller && (srv.script_caller->flags & CLIENT_FAKE))
        return 0;
    return BK_UNLIKELY(repl_guard) && repl_deny(c, &probe);
}

static int script_call_impl(lua_State *L, int raise)
{
    int argc = lua_gettop(L);
    if (!run) {
        push_err_table(L, "ERR redis.call can only be called inside a script invocation",
                       strlen("ERR redis.call can only be called inside a script invocation"));
        return lua_error(L);
    }
    static char acl_err[160];
    int refused = 0; /* a write refused (READONLY, MISCONF, ...): no command ran */
    const char *err = args_from_lua(L, argc);
    const kv_cmd *cmd = NULL;
    if (err)
        goto fail;
    if (BK_UNLIKELY(ldb_logging()))
        ldb_log_command(argc, call_argv);
    if (call_argv[0].len == last_cmd_len && last_cmd &&
        memcmp(call_argv[0].p, last_cmd_name, last_cmd_len) == 0) {
        cmd = last_cmd;
    } else if ((cmd = kv_cmd_lookup(call_argv[0])) && call_argv[0].len <= sizeof last_cmd_name) {
        last_cmd = cmd;
        last_cmd_len = call_argv[0].len;
        memcpy(last_cmd_name, call_argv[0].p, last_cmd_len);
    }
    if (!cmd) {
        /* Redis's noscript commands brisk-kv may lack answer as Redis's do. */
        static const char *noscript[] = { "cluster", "blpop", "brpop", "brpoplpush", "blmove",
                                          "bzpopmin", "bzpopmax", "blmpop", "bzmpop" };
        err = "ERR Unknown Redis command called from script";
        for (size_t i = 0; i < BK_ARRAY_LEN(noscript); i++)
            if (str_ieq_lit(call_argv[0], noscript[i], strlen(noscript[i])))
                err = "ERR This Redis command is not allowed from script";
        goto fail;
    }
    if ((cmd->arity > 0 && argc != cmd->arity) || (cmd->arity < 0 && argc < -cmd->arity)) {
        err = "ERR Wrong number of args calling Redis command from script";
        goto fail;
    }
    unsigned cflags = kv_cmd_flags(cmd, argc, call_argv); /* a subcommand's own */
    /* Only an allow-stale script runs on a stale replica (repl_deny):
     * the commands it calls must be stale-safe too. */
    if (BK_UNLIKELY(repl_guard) && !(cflags & CMD_STALE) && repl_stale_refuses()) {
        err = "ERR Can not execute the command on a stale replica";
        goto fail;
    }
    if ((cflags & CMD_NOSCRIPT) && !kv_debug_allow_noscript) {
        err = "ERR This Redis command is not allowed from script";
        goto fail;
    }
    if (BK_UNLIKELY(run->caller->user && !run->caller->user->open)) {
        const char *deny = kv_acl_script_deny(run->caller, cmd, argc, call_argv);
        if (deny) {
            snprintf(acl_err, sizeof acl_err, "ERR %s", deny);
            err = acl_err;
            goto fail;
        }
    }
    /* (suite) Redis's may-replicate commands count as writes here. */
    if ((run->ro || (run->flags & SCRIPT_NO_WRITES)) &&
        (cmd->proc == publish_command || cmd->proc == spublish_command ||
         cmd->proc == pfcount_command)) {
        err = "ERR Write commands are not allowed from read-only scripts.";
        goto fail;
    }
    fake->wbuf.len = 0;
    if (cflags & CMD_WRITE) {
        if (run->ro || (run->flags & SCRIPT_NO_WRITES)) {
            err = "ERR Write commands are not allowed from read-only scripts.";
            goto fail;
        }
        fake->cmd = NULL;
        /* Once the script has written it may go on writing (as Redis:
         * replicas dropping mid-script cannot leave it half done). */
        if (!run->wrote && repl_refuses_write(fake)) {
            /* the error is in fake's reply, as a command's own */
            if (srv.cmd_stats)
                srv.cmd_stats[cmd - kv_commands].rejected++;
            lua_settop(L, 0);
            refused = 1;
            goto replied;
        }
    }
    if ((cflags & CMD_DENYOOM) && srv.cfg.maxmemory && !(run->flags & SCRIPT_ALLOW_OOM) &&
        !run->wrote && kv_evict_if_needed() < 0) {
        err = ERR_OOM;
        goto fail;
    }
    if (cflags & CMD_WRITE)
        run->wrote = 1;
    fake->argc = argc;
    fake->argv = call_argv;
    fake->resp = run->resp;
    fake->wbuf.len = 0;
    kv_call_proc(fake, cmd);
    fake->argv = NULL;
    fake->argc = 0;
    lua_settop(L, 0); /* the arguments are done with: room for the reply */
replied:;
    const char *p = fake->wbuf.data, *end = p + fake->wbuf.len;
    if (BK_UNLIKELY(ldb_logging()))
        (refused ? ldb_log_refusal : ldb_log_reply)(p, fake->wbuf.len);
    if (fake->wbuf.len && p[0] == '-') {
        const char *e = crlf(p + 1, end);
        push_err_counted(L, p + 1, (size_t)(e - p - 1));
        return raise ? lua_error(L) : 1;
    }
    if (!resp_scalar_to_lua(L, p, end))
        resp_to_lua(L, p, end);
    return 1;
fail:
    /* A refused call counts as the command's error reply would. */
    fake->cmd = NULL;
    fake->wbuf.len = 0;
    reply_error(fake, err);
    if (cmd && srv.cmd_stats)
        srv.cmd_stats[cmd - kv_commands].rejected++;
    if (BK_UNLIKELY(ldb_logging()))
        ldb_log_error(err);
    push_err_counted(L, err, strlen(err));
    return raise ? lua_error(L) : 1;
}

/* Errors of the redis.* API: {err="ERR msg"}, raised or returned. */
static int api_err_table(lua_State *L, const char *msg)
{
    lua_newtable(L);
    lua_pushstring(L, "err");
    lua_pushfstring(L, "ERR %s", msg);
    lua_rawset(L, -3);
    return 1;
}

static int api_error(lua_State *L, const char *msg)
{
    api_err_table(L, msg);
    return lua_error(L);
}

/* pcall as Redis 7.0 has it: an error table with a string err comes back
 * as that string (so pcall(redis.call, ...) gives "ERR ..."). */
static int l_pcall_lua(lua_State *L)
{
    int argc = lua_gettop(L);
    luaL_checkany(L, 1);
    if (lua_pcall(L, argc - 1, LUA_MULTRET, 0) == 0) {
        lua_pushboolean(L, 1);
        lua_insert(L, 1);
        return lua_gettop(L);
    }
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "err");
        if (lua_isstring(L, -1))
            lua_replace(L, -2);
        else
            lua_pop(L, 1);
    }
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
}

static int l_call(lua_State *L) { return script_call_impl(L, 1); }
static int l_pcall(lua_State *L) { return script_call_impl(L, 0); }

static int l_sha1hex(lua_State *L)
{
    if (lua_gettop(L) != 1)
        return api_error(L, "wrong number of arguments");
    size_t n;
    const char *s = lua_tolstring(L, 1, &n);
    char hex[41];
    sha1_hex(s ? s : "", s ? n : 0, hex);
    lua_pushstring(L, hex);
    return 1;
}

static int l_error_reply(lua_State *L)
{
    if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
        return api_err_table(L, "wrong number or type of arguments");
    size_t n;
    const char *s = lua_tolstring(L, 1, &n);
    push_error_reply(L, s, n);
    return 1;
}

static int l_status_reply(lua_State *L)
{
    if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING)
        return api_err_table(L, "wrong number or type of arguments");
    lua_newtable(L);
    lua_pushstring(L, "ok");
    lua_pushvalue(L, 1);
    lua_rawset(L, -3);
    return 1;
}

static int l_log(lua_State *L)
{
    int argc = lua_gettop(L);
    if (argc < 2)
        return api_error(L, "redis.log() requires two arguments or more.");
    if (!lua_isnumber(L, 1))
        return api_error(L, "First argument must be a number (log level).");
    int level = (int)lua_tonumber(L, 1);
    if (level < 0 || level > 3)
        return api_error(L, "Invalid debug level.");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 2; i <= argc; i++) {
        size_t n;
        const char *s = lua_tolstring(L, i, &n);
        if (s) {
            if (i > 2)
                luaL_addchar(&b, ' ');
            luaL_addlstring(&b, s, n);
        }
    }
    luaL_pushresult(&b);
    if (level >= 2)
        log_warn("%s", lua_tostring(L, -1));
    else
        log_info("%s", lua_tostring(L, -1));
    return 0;
}

static int l_setresp(lua_State *L)
{
    if (!run)
        return api_error(L, "redis.setresp can only be called inside a script invocation");
    if (lua_gettop(L) != 1)
        return api_error(L, "redis.setresp() requires one argument.");
    int v = (int)lua_tonumber(L, 1);
    if (v != 2 && v != 3)
        return api_error(L, "RESP version must be 2 or 3.");
    run->resp = v;
    return 0;
}

static int l_set_repl(lua_State *L)
{
    if (!run)
        return api_error(L, "redis.set_repl can only be called inside a script invocation");
    if (lua_gettop(L) != 1)
        return api_error(L, "redis.set_repl() requires two arguments.");
    int v = (int)lua_tonumber(L, 1);
    if (v < 0 || v > 3)
        return api_error(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
    /* REPL_AOF = 1, REPL_REPLICA = 2 (Redis's values = aof_feed's targets) */
    if (v)
        fake->flags &= ~CLIENT_NO_PROPAGATE;
    else
        fake->flags |= CLIENT_NO_PROPAGATE;
    aof_feed_targets = v ? v : AOF_TO_FILE | AOF_TO_REPLICAS;
    return 0;
}

static int l_true(lua_State *L)
{
    lua_pushboolean(L, 1);
    return 1;
}


/* redis.acl_check_cmd(cmd, args...): whether the script's caller may run
 * the command (its ACL, keys included), as a boolean; nothing is logged. */
static int l_acl_check_cmd(lua_State *L)
{
    if (!run)
        return api_error(L, "redis.acl_check_cmd can only be called inside a script invocation");
    int argc = lua_gettop(L);
    const char *err = args_from_lua(L, argc);
    if (err) {
        push_err_table(L, err, strlen(err));
        return lua_error(L);
    }
    const kv_cmd *cmd = kv_cmd_lookup(call_argv[0]);
    int ok = cmd ? kv_acl_script_check(run->caller, cmd, argc, call_argv) : -1;
    if (ok == -2)
        return api_error(L, "Wrong number of args for redis.acl_check_cmd()");
    if (ok < 0)
        return api_error(L, "Invalid command passed to redis.acl_check_cmd()");
    lua_pushboolean(L, ok);
    return 1;
}

/* The count hook: every 100k instructions while a script runs. */
static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (!run) {
        /* A FUNCTION LOAD: bounded to 500 ms. */
        if (load_start_ms && kv_unix_ms() - load_start_ms > 500)
            luaL_error(L, "FUNCTION LOAD timeout");
        return;
    }
    int64_t now = kv_unix_ms();
    if (!run->timedout) {
        int64_t took = run_elapsed_ms(run);
        if (took <= kv_busy_reply_ms)
            return;
        run->timedout = 1;
        srv.script_timedout = srv.loading ? KV_BUSY_LOADING : 1; /* an AOF script: LOADING */
        log_warn("Slow script detected: still in execution after %lld milliseconds. You can try "
                 "killing the script using the %s command.",
                 (long long)took, run->is_func ? "FUNCTION KILL" : "SCRIPT KILL");
    }
    /* The script keeps the time it started with (keys do not expire in
     * its middle); the clients served meanwhile see the real one. */
    int64_t script_now = srv.now_ms;
    srv.now_ms = now;
    loop_poll_io(&srv.loop, 0);
    kv_flush_clients();
    srv.now_ms = script_now;
    if (srv.shutdown_asap)
        run->killed = 1;
    if (run->killed) {
        /* Every line from now on raises again: a pcall cannot swallow it. */
        lua_sethook(L, count_hook, LUA_MASKLINE, 0);
        const char *m = "ERR Script killed by user with SCRIPT KILL...";
        push_err_table(L, m, strlen(m));
        lua_error(L);
    }
}

/* loadstring: source text only; a precompiled (binary) chunk gets nil. */
static int l_loadstring(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    if (n && s[0] == '\033') {
        lua_pushnil(L);
        lua_pushstring(L, "binary chunks are not allowed");
        return 2;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* setmetatable and rawset on a read-only table are writes to it: they
 * call the original (upvalue 1) only for other tables. */
static int l_guarded_write(lua_State *L)
{
    if (lua_istable(L, 1) && lua_getmetatable(L, 1)) {
        lua_pushstring(L, "__newindex");
        lua_rawget(L, -2);
        int ro = lua_tocfunction(L, -1) == ro_newindex;
        lua_pop(L, 2);
        if (ro) /* raised in C, as Redis's: no script position */
            return lua_error((lua_pushstring(L, "Attempt to modify a readonly table"), L));
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static void wrap_global(lua_State *L, const char *name, lua_CFunction f)
{
    lua_getglobal(L, name);
    lua_pushcclosure(L, f, 1);
    lua_setglobal(L, name);
}

/* ---- states ---- */

static void set_fn(lua_State *L, const char *name, lua_CFunction f)
{
    lua_pushcfunction(L, f);
    lua_setfield(L, -2, name);
}

static void open_lib(lua_State *L, const char *name, lua_CFunction f)
{
    lua_pushcfunction(L, f);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (name[0] && lua_istable(L, -1))
        lua_setglobal(L, name);
    else
        lua_pop(L, 1);
}

static void init_once(void);

/* A script that allocates without bound gets "not enough memory" (a Lua
 * error, its reply an error) instead of taking the host's memory. */
#define SCRIPT_MEM_MAX ((size_t)512 << 20)

/* A state's heap account (the allocator's ud). */
typedef struct lua_heap {
    size_t used;       /* bytes held */
    size_t grown;      /* bytes ever allocated: garbage may exist once it moves */
    size_t grown_seen; /* grown at the last periodic GC step */
} lua_heap;

static void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    lua_heap *h = ud;
    if (ptr == NULL)
        osize = 0;
    if (nsize == 0) {
        if (ptr) {
            free(ptr);
            h->used -= osize;
        }
        return NULL;
    }
    if (nsize > osize && h->used + (nsize - osize) > SCRIPT_MEM_MAX)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p) {
        h->used = h->used - osize + nsize;
        h->grown += nsize;
    }
    return p;
}

lua_State *script_state_new(int functions)
{
    init_once();
    lua_heap *heap = calloc(1, sizeof *heap);
    lua_State *L = heap ? lua_newstate(lua_alloc, heap) : NULL;
    if (!L)
        abort();
    /* Fixed registry slots, taken before any luaL_ref: integer lookups
     * on the per-call path instead of string keys. */
    lua_pushboolean(L, 0);
    lua_rawseti(L, LUA_REGISTRYINDEX, REG_ERRH);
    for (int slot = REG_GLOBALS; slot <= REG_GLOBALS; slot++) {
        lua_pushboolean(L, 0);
        lua_rawseti(L, LUA_REGISTRYINDEX, slot);
    }
    open_lib(L, "", luaopen_base);
    open_lib(L, LUA_TABLIBNAME, luaopen_table);
    open_lib(L, LUA_STRLIBNAME, luaopen_string);
    open_lib(L, LUA_MATHLIBNAME, luaopen_math);
    open_lib(L, "cjson", luaopen_cjson);
    open_lib(L, "bit", luaopen_bit);
#ifdef BRISK_LUAJIT
    /* The count hook (busy scripts, SCRIPT KILL) never runs in compiled
     * traces: interpreter only. */
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
#endif
    open_lib(L, "struct", luaopen_kv_struct);
    open_lib(L, "cmsgpack", luaopen_kv_cmsgpack);
    /* What the sandbox must not expose. */
    static const char *drop[] = { "loadfile", "dofile", "print", "module", "require",
                                  "package", "os", "io", "debug", "newproxy", "getfenv", "setfenv" };
    for (size_t i = 0; i < BK_ARRAY_LEN(drop); i++) {
        lua_pushnil(L);
        lua_setglobal(L, drop[i]);
    }
    wrap_global(L, "loadstring", l_loadstring);
    lua_pushcfunction(L, l_pcall_lua);
    lua_setglobal(L, "pcall");
    wrap_global(L, "setmetatable", l_guarded_write);
    wrap_global(L, "rawset", l_guarded_write);
    lua_getglobal(L, "math");
    set_fn(L, "random", math_random);
    set_fn(L, "randomseed", math_randomseed);
    lua_pop(L, 1);

    lua_newtable(L);
    set_fn(L, "call", l_call);
    set_fn(L, "pcall", l_pcall);
    set_fn(L, "sha1hex", l_sha1hex);
    set_fn(L, "error_reply", l_error_reply);
    set_fn(L, "status_reply", l_status_reply);
    set_fn(L, "log", l_log);
    set_fn(L, "setresp", l_setresp);
    set_fn(L, "set_repl", l_set_repl);
    set_fn(L, "replicate_commands", l_true);
    set_fn(L, "breakpoint", l_ldb_breakpoint);
    set_fn(L, "debug", l_ldb_debug);
    set_fn(L, "acl_check_cmd", l_acl_check_cmd);
    static const struct {
        const char *n;
        int v;
    } consts[] = { { "LOG_DEBUG", 0 },   { "LOG_VERBOSE", 1 }, { "LOG_NOTICE", 2 },
                   { "LOG_WARNING", 3 }, { "REPL_NONE", 0 },   { "REPL_AOF", 1 },
                   { "REPL_SLAVE", 2 },  { "REPL_REPLICA", 2 }, { "REPL_ALL", 3 } };
    for (size_t i = 0; i < BK_ARRAY_LEN(consts); i++) {
        lua_pushinteger(L, consts[i].v);
        lua_setfield(L, -2, consts[i].n);
    }
    lua_pushstring(L, "7.0.15");
    lua_setfield(L, -2, "REDIS_VERSION");
    lua_pushinteger(L, 0x07000f);
    lua_setfield(L, -2, "REDIS_VERSION_NUM");
    lua_setglobal(L, "redis");

    lua_pushcfunction(L, error_handler);
    lua_pushvalue(L, -1);
    lua_rawseti(L, LUA_REGISTRYINDEX, REG_ERRH);
    lua_setfield(L, LUA_REGISTRYINDEX, "kv_err_handler");
    return L;
}

void script_state_free(lua_State *L)
{
    if (!L)
        return;
    void *used;
    lua_getallocf(L, &used);
    lua_close(L);
    free(used);
}

/* ---- running ---- */

const char script_e_args_mem[] =
    "ERR not enough memory for the script's keys and arguments (the Lua heap is capped at 512 MB)";

int script_args_fit(lua_State *L, const bk_str *argv, int n)
{
    size_t bytes = (size_t)1 << 20; /* the run's own small allocations */
    for (int i = 0; i < n; i++)
        bytes += argv[i].len + 64; /* a string's header, a table slot */
    void *ud;
    lua_getallocf(L, &ud);
    const lua_heap *heap = ud;
    if (BK_LIKELY(heap->used + bytes <= SCRIPT_MEM_MAX))
        return 1;
    lua_gc(L, LUA_GCCOLLECT, 0);
    return heap->used + bytes <= SCRIPT_MEM_MAX;
}

void script_push_args(lua_State *L, const bk_str *argv, int n)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushlstring(L, argv[i].p, argv[i].len);
        lua_rawseti(L, -2, i + 1);
    }
}

int script_check_flags(kv_client *c, unsigned flags, int ro)
{
    if (flags & SCRIPT_LEGACY)
        return 0;
    if (ro && !(flags & SCRIPT_NO_WRITES)) {
        reply_error(c, "ERR Can not execute a script with write flag using *_ro command.");
        return -1;
    }
    if (!(flags & SCRIPT_NO_WRITES) && !ro && repl_refuses_write(c))
        return -1;
    if (!(flags & SCRIPT_NO_WRITES) && !(flags & SCRIPT_ALLOW_OOM) && !ro && srv.cfg.maxmemory &&
        kv_evict_if_needed() < 0) {
        reply_error(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return -1;
    }
    return 0;
}

/* The script's error reply: counted in the error stats unless the error
 * table (at index t) came from a command's own, already counted, reply;
 * the script's command fails either way. */
static void reply_script_error(kv_client *c, lua_State *L, int t, const char *s, size_t n)
{
    int counted = field(L, t, "ignore_stats", LUA_TBOOLEAN);
    if (counted)
        lua_pop(L, 1);
    if (counted || memchr(s, '\0', n)) {
        reply_line(c, '-', s, n);
        if (c->cmd && srv.cmd_stats)
            srv.cmd_stats[c->cmd - kv_commands].failed++;
    } else {
        lua_pushlstring(L, s, n); /* NUL-terminated copy */
        reply_error(c, lua_tostring(L, -1));
        lua_pop(L, 1);
    }
}

static void reply_run_error(kv_client *c, lua_State *L, const char *name)
{
    if (!lua_istable(L, -1)) {
        const char *m = lua_tostring(L, -1);
        reply_errorf(c, "ERR Error running script %s, %.100s", name, m ? m : "execution failure");
        return;
    }
    int t = lua_gettop(L);
    const char *msg = "ERR unknown error";
    size_t mlen = strlen(msg);
    if (field(L, t, "err", LUA_TSTRING) || field(L, t, "err", LUA_TNUMBER))
        msg = lua_tolstring(L, -1, &mlen);
    else
        lua_pushnil(L);
    /* The text, then " script: NAME, on SOURCE:LINE." when known. */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, msg, mlen);
    if (field(L, t, "source", LUA_TSTRING)) {
        const char *src = lua_tostring(L, -1);
        lua_pop(L, 1);
        if (field(L, t, "line", LUA_TNUMBER)) {
            char tail[256];
            snprintf(tail, sizeof tail, " script: %s, on %s:%d.", name, src,
                     (int)lua_tonumber(L, -1));
            lua_pop(L, 1);
            luaL_addstring(&b, tail);
        }
    }
    luaL_pushresult(&b);
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    /* A leading '-' is the wire marker, not part of the text. */
    if (n && s[0] == '-')
        s++, n--;
    reply_script_error(c, L, t, s, n);
    lua_settop(L, t);
}

void script_run(kv_client *c, lua_State *L, int nargs, const char *name, unsigned flags, int ro,
                int is_func)
{
    script_ctx ctx = { .caller = c, .L = L, .name = name, .flags = flags, .ro = ro,
                       .is_func = is_func, .resp = 2, .start_ticks = kv_ticks() };
    int base = lua_gettop(L) - nargs; /* the function's slot */
    int errh = EVAL_ERRH; /* EVAL's state keeps it on its stack */
    if (L != eval_L) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, REG_ERRH);
        lua_insert(L, base);
        errh = base;
    }
    fake->db = c->db;
    fake->flags &= ~CLIENT_NO_PROPAGATE;
    aof_feed_targets = AOF_TO_FILE | AOF_TO_REPLICAS;
    /* Effects replication: the script is a transaction, wrapped in
     * MULTI/EXEC only when it wrote more than one command (aof_feed). */
    int outer = srv.aof_in_multi;
    if (outer == 0)
        srv.aof_in_multi = -1;
    run = &ctx;
    srv.script_caller = c;
    /* EVAL's state keeps its count hook installed (it returns at once
     * when no script runs); a killed script's line hook is undone. */
    if (L != eval_L)
        lua_sethook(L, count_hook, LUA_MASKCOUNT, 100000);
    int rc = lua_pcall(L, nargs, 1, errh);
    if (L != eval_L)
        lua_sethook(L, count_hook, 0, 0);
    else if (BK_UNLIKELY(ctx.killed))
        lua_sethook(L, count_hook, LUA_MASKCOUNT, 100000);
    run = NULL;
    srv.script_caller = NULL;
    srv.script_timedout = 0;
    aof_feed_targets = AOF_TO_FILE | AOF_TO_REPLICAS;
    if (outer == 0)
        aof_exec_end();
    if (rc != 0)
        reply_run_error(c, L, name);
    else if (lua_istable(L, -1) && field(L, lua_gettop(L), "err", LUA_TSTRING)) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        if (n && s[0] == '-')
            s++, n--;
        reply_script_error(c, L, lua_gettop(L) - 1, s, n);
        lua_pop(L, 1);
    } else {
        reply_resp = ctx.resp;
        script_lua_to_reply(c, L, -1);
        reply_resp = 2;
    }
    lua_settop(L, base - 1);
    /* Garbage: Lua's incremental collector runs as scripts allocate; a
     * larger step every 50 runs keeps small scripts' garbage from piling
     * up without a cost on every call, and is skipped when nothing was
     * allocated since the last one (a script that allocates nothing: the
     * step would only re-mark the live heap, ~1000 instructions a run). */
    void *ud;
    lua_getallocf(L, &ud);
    lua_heap *heap = ud;
    if (++gc_calls >= 50) {
        gc_calls = 0;
        if (heap->grown != heap->grown_seen) {
            lua_gc(L, LUA_GCSTEP, 50);
            heap->grown_seen = heap->grown;
        }
    }
    /* Lua 5.1 has no emergency collection: after a script that filled
     * the heap, collect now so that the next one has room. */
    if (rc == LUA_ERRMEM || heap->used > SCRIPT_MEM_MAX / 2)
        lua_gc(L, LUA_GCCOLLECT, 0);
}

int script_running(void) { return run != NULL; }
int script_running_is_func(void) { return run && run->is_func; }

void script_kill(kv_client *c, int is_func)
{
    if (!run) {
        reply_error(c, "NOTBUSY No scripts in execution right now.");
        return;
    }
    if (run->is_func != is_func) {
        reply_error(c, run->is_func ? "BUSY Redis is busy running a script. You can only call "
                                      "FUNCTION KILL or SHUTDOWN NOSAVE."
                                    : "BUSY Redis is busy running a script. You can only call "
                                      "SCRIPT KILL or SHUTDOWN NOSAVE.");
        return;
    }
    if (run->wrote) {
        reply_error(c, "UNKILLABLE Sorry the script already executed write commands against the "
                       "dataset. You can either wait the script termination or kill the server in "
                       "a hard way using the SHUTDOWN NOSAVE command.");
        return;
    }
    run->killed = 1;
    reply_ok(c);
}

void script_reply_running(kv_client *c)
{
    if (!run || !run->is_func) {
        reply_null(c);
        return;
    }
    kv_client *k = run->caller;
    reply_map(c, 3);
    reply_bulk_cstr(c, "name");
    reply_bulk_cstr(c, run->name);
    reply_bulk_cstr(c, "command");
    reply_array(c, k->argc);
    for (int i = 0; i < k->argc; i++)
        reply_bulk_str(c, k->argv[i]);
    reply_bulk_cstr(c, "duration_ms");
    reply_int(c, run_elapsed_ms(run));
}

int script_load_timeout_hook_install(lua_State *L)
{
    load_start_ms = kv_unix_ms();
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 100000);
    return 0;
}

void script_load_timeout_hook_remove(lua_State *L)
{
    lua_sethook(L, count_hook, 0, 0);
    load_start_ms = 0;
}

int script_busy_refuses(kv_client *c, const kv_cmd *cmd)
{
    if (c == srv.script_caller || (cmd->flags & CMD_ALLOW_BUSY))
        return 0; /* REPLCONF (a replica's ACK must not cost it its link), QUIT, RESET */
    if (cmd->proc == shutdown_command) {
        for (int i = 1; i < c->argc; i++)
            if (BK_STR_IEQ(c->argv[i], "nosave"))
                return 0;
    } else if ((cmd->proc == script_command || cmd->proc == function_command) && c->argc >= 2 &&
               (BK_STR_IEQ(c->argv[1], "kill") ||
                (cmd->proc == function_command && BK_STR_IEQ(c->argv[1], "stats")))) {
        return 0;
    } else if (cmd->proc == auth_command || cmd->proc == hello_command ||
               cmd->proc == multi_command || cmd->proc == discard_command ||
               cmd->proc == watch_command || cmd->proc == unwatch_command) {
        return 0; /* Redis 7.0's allow-busy commands (MULTI: a transaction pipelined
                   * across the timeout is flagged, not half-accepted) */
    }
    const char *msg = run && run->is_func
                          ? "BUSY Redis is busy running a script. You can only call FUNCTION KILL "
                            "or SHUTDOWN NOSAVE."
                          : "BUSY Redis is busy running a script. You can only call SCRIPT KILL "
                            "or SHUTDOWN NOSAVE.";
    if (cmd->proc == exec_command && (c->flags & CLIENT_MULTI)) {
        /* as Redis's execCommandAbort: the transaction is gone, with the reason */
        kv_discard_transaction(c);
        reply_errorf(c, "EXECABORT Transaction discarded because of: %s", msg);
        return 1;
    }
    reply_error(c, msg);
    return 1;
}

/* ---- the EVAL cache ---- */

static void init_once(void)
{
    if (scripts_ready)
        return;
    scripts_ready = 1;
    dict_init(&scripts, entry_key_fn);
    fake = kv_client_new_fake();
    fake->flags &= ~CLIENT_FAKE;
    rand_state = 0x1234ABCD330EULL; /* drand48 before any seeding */
}

static void eval_state_reset(void)
{
    init_once();
    script_state_free(eval_L);
    eval_L = script_state_new(0);
    script_protect_globals(eval_L);
    /* The stack slots EVAL_*: the error handler, no KEYS, ARGV or last
     * function yet. */
    lua_settop(eval_L, 0);
    lua_rawgeti(eval_L, LUA_REGISTRYINDEX, REG_ERRH);
    for (int slot = EVAL_KEYS; slot <= EVAL_LASTFN; slot++)
        lua_pushboolean(eval_L, 0);
    lua_sethook(eval_L, count_hook, LUA_MASKCOUNT, 100000);
    args_len[0] = args_len[1] = 0;
    lastfn_entry = NULL;
}

static void free_entry(dict_node *n, void *ud)
{
    (void)ud;
    kv_free(n);
}

static void eval_flush(void)
{
    init_once();
    dict_clear(&scripts, free_entry, NULL);
    memset(sha_seen, 0, sizeof sha_seen);
    lastfn_entry = NULL;
    script_state_free(eval_L);
    eval_L = NULL;
}

static lua_State *eval_state(void)
{
    if (!eval_L)
        eval_state_reset();
    return eval_L;
}

/* Parses "#!lua flags=a,b" (the first line). Returns the flags, or
 * (unsigned)-1 after replying the error. *skip is where the code starts
 * (at the newline, so line numbers stay right). */
static unsigned parse_shebang(kv_client *c, bk_str body, size_t *skip)
{
    *skip = 0;
    if (body.len < 2 || body.p[0] != '#' || body.p[1] != '!')
        return SCRIPT_LEGACY;
    const char *nl = memchr(body.p, '\n', body.len);
    size_t ll = nl ? (size_t)(nl - body.p) : body.len;
    *skip = ll;
    unsigned flags = 0;
    size_t i = 0;
    int first = 1;
    while (i < ll) {
        while (i < ll && body.p[i] == ' ')
            i++;
        size_t s = i;
        while (i < ll && body.p[i] != ' ')
            i++;
        if (i == s)
            break;
        const char *w = body.p + s;
        size_t wl = i - s;
        if (first) {
            first = 0;
            if (!(wl == 5 && memcmp(w, "#!lua", 5) == 0)) {
                if (c)
                    reply_errorf(c, "ERR Unexpected engine in script shebang: %.*s", (int)wl, w);
                return (unsigned)-1;
            }
            continue;
        }
        if (wl >= 6 && memcmp(w, "flags=", 6) == 0) {
            const char *f = w + 6, *fe = w + wl;
            while (f < fe) {
                const char *comma = memchr(f, ',', (size_t)(fe - f));
                size_t fl = comma ? (size_t)(comma - f) : (size_t)(fe - f);
                if (fl) {
                    unsigned bit = script_flag_by_name(f, fl);
                    if (!bit) {
                        if (c)
                            reply_errorf(c, "ERR Unexpected flag in script shebang: %.*s", (int)fl, f);
                        return (unsigned)-1;
                    }
                    flags |= bit;
                }
                f += fl + (comma ? 1 : 0);
            }
            continue;
        }
        if (c)
            reply_errorf(c, "ERR Unknown lua shebang option: %.*s", (int)wl, w);
        return (unsigned)-1;
    }
    return flags;
}

/* Compiles body into the cache (sha given). Returns the entry, or NULL
 * after replying the error. */
static script_entry *eval_compile(kv_client *c, bk_str body, const char *sha)
{
    size_t skip;
    unsigned flags = parse_shebang(c, body, &skip);
    if (flags == (unsigned)-1)
        return NULL;
    lua_State *L = eval_state();
    if (luaL_loadbuffer(L, body.p + skip, body.len - skip, "@user_script")) {
        reply_errorf(c, "ERR Error compiling script (new function): %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return NULL;
    }
    script_entry *e = kv_calloc(sizeof *e);
    e->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    e->flags = flags;
    memcpy(e->sha, sha, 41);
    e->node.aux = 40;
    e->node.hash = dict_hash32(sha, 40);
    dict_add(&scripts, &e->node);
    return e;
}

static script_entry *eval_find(const char *sha40)
{
    if (!scripts_ready)
        return NULL;
    return (script_entry *)(void *)dict_find(&scripts, sha40, 40, dict_hash32(sha40, 40));
}

/* Sets EVAL's global KEYS (which 0) or ARGV (1) to the strings argv[0..n).
 * The table of the previous run is kept when the script left it as it was
 * given: no metatable and no key outside 1..old (old: the entries the
 * previous run put in it). One traversal checks that and, on the way,
 * rewrites only the entries that differ from this run's (the same keys
 * run after run, as job queues and locks send them, cost a compare) and
 * clears those past n. Otherwise, or when it grew large and this run
 * needs far less, a new table replaces it. No table and no string is
 * created when the arguments repeat; scripts never see a previous run's
 * entries. */
static void eval_set_args(lua_State *L, int which, const bk_str *argv, int n)
{
    int old = args_len[which];
    int t = EVAL_KEYS + which;
    int reuse = lua_istable(L, t) && !(old > 256 && n < old / 2);
    if (reuse && lua_getmetatable(L, t)) {
        lua_pop(L, 1);
        reuse = 0;
    }
    int found = 0; /* keys 1..n met in the table with the right value */
    if (reuse) {
        lua_pushnil(L);
        while (lua_next(L, t)) {
            lua_Number kn = lua_type(L, -2) == LUA_TNUMBER ? lua_tonumber(L, -2) : 0;
            int k = (int)kn;
            if (!(kn >= 1 && kn <= old && kn == (lua_Number)k)) {
                lua_pop(L, 2);
                reuse = 0;
                break;
            }
            /* Assigning an existing key during the traversal is allowed. */
            if (k <= n) {
                size_t len;
                const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
                if (!s || len != argv[k - 1].len || memcmp(s, argv[k - 1].p, len) != 0) {
                    lua_pushlstring(L, argv[k - 1].p, argv[k - 1].len);
                    lua_rawseti(L, t, k);
                }
                found++;
            } else {
                lua_pushnil(L);
                lua_rawseti(L, t, k);
            }
            lua_pop(L, 1);
        }
    }
    if (!reuse) {
        lua_createtable(L, n, 0);
        /* a raw global: the proxy scripts see refuses writes */
        lua_rawgeti(L, LUA_REGISTRYINDEX, REG_GLOBALS);
        lua_pushstring(L, which ? "ARGV" : "KEYS");
        lua_pushvalue(L, -3);
        lua_rawset(L, -3);
        lua_pop(L, 1);
        lua_replace(L, t);
        found = 0;
    }
    if (found < n) /* a new table, or entries the script removed */
        for (int i = 0; i < n; i++) {
            lua_pushlstring(L, argv[i].p, argv[i].len);
            lua_rawseti(L, t, i + 1);
        }
    args_len[which] = n;
}

/* (suite) CLIENT PAUSE WRITE: whether EVAL/EVALSHA argv runs a script
 * flagged no-writes: the cached script's flags, else (EVAL of a new body)
 * "no-writes" among the shebang's flags=. Such calls are not held. */
int script_call_no_writes(int evalsha, int argc, const bk_str *argv)
{
    if (argc < 2)
        return 0;
    char sha[41];
    bk_str body = argv[1];
    if (evalsha) {
        if (body.len != 40)
            return 0;
        for (int i = 0; i < 40; i++)
            sha[i] = (char)tolower((unsigned char)body.p[i]);
        sha[40] = '\0';
    } else {
        sha1_hex(body.p, body.len, sha);
    }
    const script_entry *e = eval_find(sha);
    if (e || evalsha)
        return e && !(e->flags & SCRIPT_LEGACY) && (e->flags & SCRIPT_NO_WRITES);
    if (body.len < 2 || body.p[0] != '#' || body.p[1] != '!')
        return 0;
    const char *nl = memchr(body.p, '\n', body.len);
    size_t ll = nl ? (size_t)(nl - body.p) : body.len;
    for (size_t i = 0; i + 6 <= ll; i++) {
        if (memcmp(body.p + i, "flags=", 6) != 0 || (i && body.p[i - 1] != ' '))
            continue;
        size_t f = i + 6;
        while (f < ll && body.p[f] != ' ') {
            size_t e2 = f;
            while (e2 < ll && body.p[e2] != ',' && body.p[e2] != ' ')
                e2++;
            if (e2 - f == 9 && memcmp(body.p + f, "no-writes", 9) == 0)
                return 1;
            f = e2 < ll && body.p[e2] == ',' ? e2 + 1 : e2;
        }
    }
    return 0;
}

static void eval_generic(kv_client *c, int evalsha, int ro)
{
    long long numkeys;
    if (arg_ll(c, c->argv[2], &numkeys) < 0)
        return;
    if (numkeys > c->argc - 3) {
        reply_error(c, "ERR Number of keys can't be greater than number of args");
        return;
    }
    if (numkeys < 0) {
        reply_error(c, "ERR Number of keys can't be negative");
        return;
    }
    char sha[41];
    script_entry *e = NULL;
    init_once();
    if (evalsha) {
        unsigned slot = c->argv[1].len == 40 ? sha_slot(c->argv[1].p) : 0;
        if (c->argv[1].len == 40 && sha_seen[slot].e &&
            memcmp(c->argv[1].p, sha_seen[slot].sent, 40) == 0) {
            e = sha_seen[slot].e;
        } else if (c->argv[1].len == 40) {
            for (int i = 0; i < 40; i++)
                sha[i] = (char)tolower((unsigned char)c->argv[1].p[i]);
            sha[40] = '\0';
            if ((e = eval_find(sha))) {
                sha_seen[slot].e = e;
                memcpy(sha_seen[slot].sent, c->argv[1].p, 40);
            }
        }
        if (!e) {
            reply_error(c, "NOSCRIPT No matching script. Please use EVAL.");
            return;
        }
    } else {
        sha1_hex(c->argv[1].p, c->argv[1].len, sha);
        e = eval_find(sha);
        if (!e && !(e = eval_compile(c, c->argv[1], sha)))
            return;
    }
    if (script_check_flags(c, e->flags, ro) < 0)
        return;
    lua_State *L = eval_L;
    int nk = (int)numkeys;
    if (BK_UNLIKELY(!script_args_fit(L, c->argv + 3, c->argc - 3))) {
        /* The previous run's KEYS and ARGV may be what fills the heap:
         * dropped (the next run makes new ones), then measured again. */
        lua_rawgeti(L, LUA_REGISTRYINDEX, REG_GLOBALS);
        for (int which = 0; which < 2; which++) {
            lua_pushboolean(L, 0);
            lua_replace(L, EVAL_KEYS + which);
            lua_pushstring(L, which ? "ARGV" : "KEYS");
            lua_pushnil(L);
            lua_rawset(L, -3);
            args_len[which] = 0;
        }
        lua_pop(L, 1);
        if (!script_args_fit(L, c->argv + 3, c->argc - 3)) {
            reply_error(c, script_e_args_mem);
            return;
        }
    }
    eval_set_args(L, 0, c->argv + 3, nk);
    eval_set_args(L, 1, c->argv + 3 + nk, c->argc - 3 - nk);
    if (e != lastfn_entry) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, e->ref);
        lua_replace(L, EVAL_LASTFN);
        lastfn_entry = e;
    }
    lua_pushvalue(L, EVAL_LASTFN);
    script_run(c, L, 0, e->sha, e->flags, ro, 0);
}

/* EVAL under SCRIPT DEBUG YES / SYNC (inside EXEC too, as Redis): a
 * debugging session around the run (script_ldb.c). */
static void eval_debugged(kv_client *c)
{
    init_once();
    lua_State *L = eval_state();
    if (!ldb_start(c, c->argv[1]))
        return;
    lua_sethook(L, ldb_hook, LUA_MASKLINE | LUA_MASKCOUNT, 100000);
    eval_generic(c, 0, 0);
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 100000);
    ldb_end(c);
}

int script_cmd_guard(const kv_cmd *cmd, int argc, const bk_str *argv, int *stale_ok, int *write)
{
    long flags;
    int ro = cmd->proc == eval_ro_command || cmd->proc == evalsha_ro_command ||
             cmd->proc == fcall_ro_command;
    if (argc < 2)
        return 0;
    if (cmd->proc == eval_command || cmd->proc == eval_ro_command) {
        size_t skip;
        unsigned f = parse_shebang(NULL, argv[1], &skip);
        if (f == (unsigned)-1)
            return 0;
        flags = (long)f;
    } else if (cmd->proc == evalsha_command || cmd->proc == evalsha_ro_command) {
        char sha[41];
        if (argv[1].len != 40)
            return 0;
        for (int i = 0; i < 40; i++)
            sha[i] = (char)tolower((unsigned char)argv[1].p[i]);
        sha[40] = '\0';
        init_once();
        script_entry *e = eval_find(sha);
        if (!e)
            return 0;
        flags = (long)e->flags;
    } else if (cmd->proc == fcall_command || cmd->proc == fcall_ro_command) {
        if ((flags = function_flags(argv[1])) < 0)
            return 0;
    } else {
        return 0;
    }
    *stale_ok = (flags & SCRIPT_ALLOW_STALE) != 0;
    *write = !(flags & (SCRIPT_LEGACY | SCRIPT_NO_WRITES)) && !ro;
    return 1;
}

void eval_command(kv_client *c)
{
    if (BK_UNLIKELY(c->ldb_mode))
        eval_debugged(c);
    else
        eval_generic(c, 0, 0);
}

void evalsha_command(kv_client *c)
{
    if (BK_UNLIKELY(c->ldb_mode))
        reply_error(c, "ERR Please use EVAL instead of EVALSHA for debugging");
    else
        eval_generic(c, 1, 0);
}
void eval_ro_command(kv_client *c) { eval_generic(c, 0, 1); }
void evalsha_ro_command(kv_client *c) { eval_generic(c, 1, 1); }

static const char *script_help[] = {
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
};

int script_subcommand_check(kv_client *c, const char *cmd, const char *upper,
                            const script_subcmd *t, size_t n)
{
    bk_str sub = c->argv[1];
    for (size_t i = 0; i < n; i++) {
        if (!str_ieq_lit(sub, t[i].name, strlen(t[i].name)))
            continue;
        if ((t[i].arity > 0 && c->argc != t[i].arity) ||
            (t[i].arity < 0 && c->argc < -t[i].arity)) {
            reply_errorf(c, "ERR wrong number of arguments for '%s|%s' command", cmd, t[i].name);
            return -1;
        }
        return 0;
    }
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)BK_MIN(sub.len, 128), sub.p,
                 upper);
    return -1;
}

void script_command(kv_client *c)
{
    static const script_subcmd subs[] = { { "exists", -3 }, { "load", 3 }, { "flush", -2 },
                                          { "kill", 2 },    { "help", 2 }, { "debug", 3 } };
    bk_str sub = c->argv[1];
    init_once();
    if (script_subcommand_check(c, "script", "SCRIPT", subs, BK_ARRAY_LEN(subs)) < 0)
        return;
    if (BK_STR_IEQ(sub, "help") && c->argc == 2) {
        reply_array(c, (long long)BK_ARRAY_LEN(script_help));
        for (size_t i = 0; i < BK_ARRAY_LEN(script_help); i++)
            reply_simple(c, script_help[i]);
    } else if (BK_STR_IEQ(sub, "flush")) {
        if (c->argc > 3 ||
            (c->argc == 3 && !BK_STR_IEQ(c->argv[2], "sync") && !BK_STR_IEQ(c->argv[2], "async"))) {
            reply_error(c, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        eval_flush();
        reply_ok(c);
    } else if (BK_STR_IEQ(sub, "exists") && c->argc >= 3) {
        reply_array(c, c->argc - 2);
        for (int i = 2; i < c->argc; i++) {
            char sha[41];
            int found = 0;
            if (c->argv[i].len == 40) {
                for (int k = 0; k < 40; k++)
                    sha[k] = (char)tolower((unsigned char)c->argv[i].p[k]);
                found = eval_find(sha) != NULL;
            }
            reply_int(c, found);
        }
    } else if (BK_STR_IEQ(sub, "load") && c->argc == 3) {
        char sha[41];
        sha1_hex(c->argv[2].p, c->argv[2].len, sha);
        if (!eval_find(sha) && !eval_compile(c, c->argv[2], sha))
            return;
        reply_bulk(c, sha, 40);
    } else if (BK_STR_IEQ(sub, "kill") && c->argc == 2) {
        script_kill(c, 0);
    } else if (BK_STR_IEQ(sub, "debug") && c->argc == 3) {
        /* The Lua debugger (script_ldb.c) for this client's next EVALs. */
        /* Replies still to send (a pipeline, an EXEC's): Redis refuses. */
        if (srv.blk_deny > 0 || c->wbuf.len > c->wpos)
            reply_error(c, "ERR SCRIPT DEBUG must be called outside a pipeline");
        else if (BK_STR_IEQ(c->argv[2], "no"))
            c->ldb_mode = 0, reply_ok(c);
        else if (BK_STR_IEQ(c->argv[2], "yes"))
            c->ldb_mode = LDB_FORK, reply_ok(c);
        else if (BK_STR_IEQ(c->argv[2], "sync"))
            c->ldb_mode = LDB_SYNC, reply_ok(c);
        else
            reply_error(c, "ERR Use SCRIPT DEBUG YES/SYNC/NO");
    } else {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                        "SCRIPT HELP.",
                     (int)BK_MIN(sub.len, 128), sub.p);
    }
}

/* Number of cached scripts and the Lua memory, for INFO. */
size_t script_cached_count(void) { return scripts_ready ? dict_size(&scripts) : 0; }
size_t script_lua_memory(void) { return eval_L ? (size_t)lua_gc(eval_L, LUA_GCCOUNT, 0) * 1024 : 0; }

int script_getkeys(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv)
{
    if (cmd->proc != eval_command && cmd->proc != evalsha_command && cmd->proc != eval_ro_command &&
        cmd->proc != evalsha_ro_command && cmd->proc != fcall_command &&
        cmd->proc != fcall_ro_command)
        return 0;
    long long nk;
    if (argc < 3 || kv_parse_ll(argv[2].p, argv[2].len, &nk) < 0 || nk < 0 || nk > argc - 3) {
        reply_error(c, "ERR Invalid arguments specified for command");
        return 1;
    }
    if (nk == 0) {
        reply_error(c, "ERR The command has no key arguments");
        return 1;
    }
    reply_array(c, nk);
    for (int i = 0; i < nk; i++)
        reply_bulk_str(c, argv[3 + i]);
    return 1;
}
