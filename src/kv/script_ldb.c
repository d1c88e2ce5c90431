/* The Lua debugger of SCRIPT DEBUG YES / SYNC, as Redis 7.0 has it (what
 * redis-cli --ldb drives): the next EVAL of the client runs under a line
 * hook that stops before the first line and at breakpoints, and talks to
 * the client directly on its socket, with blocking I/O, in a protocol of its
 * own: the client sends commands as RESP arrays ("step", "print x", ...),
 * the debugger answers with arrays of status lines (its log). YES runs the
 * session in a forked child (the dataset changes are thrown away, the server
 * goes on serving); SYNC runs it in the server, which serves no one else
 * meanwhile (the changes stay). Either way the connection closes at the
 * end of the session, after the script's reply.
 *
 * The output (messages, value formats, the help) is Redis's, byte for byte:
 * it is the protocol redis-cli and the tests read. */
#include "kv/script_ldb.h"

#include "core/clock.h"
#include "core/log.h"
#include "kv/config.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/util.h"

#include <lauxlib.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#define LDB_BP_MAX 64
#define LDB_MAXLEN_DEFAULT 256
#define LDB_CMD_MAX (1u << 20) /* a debugger command bigger: the script fails */
#define LDB_SEND_TIMEOUT_MS 5000

static struct {
    kv_client *c;
    int forked;
    int luabp;   /* redis.breakpoint() called: stop at the next line */
    int bp[LDB_BP_MAX], nbp;
    int line;    /* the line about to run */
    int maxlen, hinted;
    char **src;  /* the script's lines (not NUL-terminated: src_len) */
    size_t *src_len;
    int lines;
    char *srcbuf;
    bk_buf log;  /* entries, each a size_t length then the bytes (NULs kept) */
    int nlog;
    bk_buf cbuf; /* what the client sent, not yet a whole command */
    uint64_t since_us; /* the timeout counts from here */
    uint64_t eval_since_us; /* the debugger's eval's timeout, from here */
} ldb;

static pid_t *children; /* forked sessions not yet reaped */
static int nchildren, children_cap;

struct ldb_flags ldb_flags;

/* ---- the log ---- */

static void log_add(const char *p, size_t n)
{
    buf_append(&ldb.log, (const char *)&n, sizeof n);
    buf_append(&ldb.log, p, n);
    ldb.nlog++;
}

static void log_str(bk_buf *s)
{
    log_add(s->data ? s->data : "", s->len);
    s->len = 0;
}

static void log_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_fmt(const char *fmt, ...)
{
    /* Whole, however long (a Lua error message, an argument echoed): a %s
     * ends at a NUL, as Redis's formatting does. */
    char b[512], *big = NULL;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    const char *p = b;
    if (n >= (int)sizeof b) {
        big = kv_malloc((size_t)n + 1);
        vsnprintf(big, (size_t)n + 1, fmt, again);
        p = big;
    }
    va_end(again);
    log_add(p, n < 0 ? 0 : (size_t)n);
    kv_free(big);
}

/* A log entry cut at maxlen (" ..." after it), with a hint the first time. */
static void log_trimmed(bk_buf *s)
{
    int cut = ldb.maxlen && s->len > (size_t)ldb.maxlen;
    if (cut) {
        s->len = (size_t)ldb.maxlen;
        buf_append(s, " ...", 4);
    }
    log_str(s);
    if (cut && !ldb.hinted) {
        ldb.hinted = 1;
        log_fmt("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
    }
}

/* ---- blocking I/O on the client's connection ---- */

static ssize_t xfer(int wr, void *p, size_t n)
{
    kv_client *c = ldb.c;
    for (;;) {
        ssize_t r;
        if (c->tls)
            r = wr ? kv_tls_write(c, p, n) : kv_tls_read(c, p, n);
        else
            r = wr ? write(c->fd, p, n) : read(c->fd, p, n);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -1;
        struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
        if (wr && !(c->tls && (kv_tls_events(c) & LOOP_WRITE) == 0))
            pfd.events = POLLOUT;
        int got = poll(&pfd, 1, wr ? LDB_SEND_TIMEOUT_MS : -1);
        if (got == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (got < 0 && errno != EINTR)
            return -1;
    }
}

static void send_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = xfer(1, (void *)(uintptr_t)p, n);
        if (w <= 0)
            return; /* the next read sees the connection gone */
        p += w;
        n -= (size_t)w;
    }
}

/* The log as an array of status lines (CR and LF become spaces); emptied. */
static void send_log(void)
{
    bk_buf out = { 0 };
    buf_appendf(&out, "*%d\r\n", ldb.nlog);
    const char *p = ldb.log.data;
    for (int i = 0; i < ldb.nlog; i++) {
        size_t n;
        memcpy(&n, p, sizeof n);
        p += sizeof n;
        size_t at = out.len;
        buf_append(&out, "+", 1);
        buf_append(&out, p, n);
        for (size_t k = at + 1; k < out.len; k++)
            if (out.data[k] == '\r' || out.data[k] == '\n')
                out.data[k] = ' ';
        buf_append(&out, "\r\n", 2);
        p += n;
    }
    send_all(out.data, out.len);
    buf_free(&out);
    ldb.log.len = 0;
    ldb.nlog = 0;
}

/* The client's pending output, before the session writes around it. */
static void send_pending(kv_client *c)
{
    if (c->wbuf.len > c->wpos)
        send_all(c->wbuf.data + c->wpos, c->wbuf.len - c->wpos);
    c->wbuf.len = 0;
    c->wpos = 0;
}

/* ---- values ---- */

/* s += the quoted, escaped form of p (Redis's sdscatrepr). */
static void cat_repr(bk_buf *s, const char *p, size_t n)
{
    buf_append(s, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        switch (ch) {
        case '\\': buf_append(s, "\\\\", 2); break;
        case '"': buf_append(s, "\\\"", 2); break;
        case '\n': buf_append(s, "\\n", 2); break;
        case '\r': buf_append(s, "\\r", 2); break;
        case '\t': buf_append(s, "\\t", 2); break;
        case '\a': buf_append(s, "\\a", 2); break;
        case '\b': buf_append(s, "\\b", 2); break;
        default:
            if (ch >= 32 && ch < 127)
                buf_append(s, p + i, 1);
            else
                buf_appendf(s, "\\x%02x", ch);
        }
    }
    buf_append(s, "\"", 1);
}

#define VALUE_DEPTH_MAX (LUA_MINSTACK / 2)
/* A value's text past this is cut (" ..." after it) even with maxlen 0:
 * a table holding itself k times is k^10 long (Redis renders it until the
 * machine runs out of memory). */
#define VALUE_TEXT_MAX (32u << 20)

/* Is the table at idx an array (keys 1..n, in lua_next's order)? */
static int table_is_array(lua_State *L, int idx)
{
    double want = 1;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TNUMBER || lua_tonumber(L, -1) != want) {
            lua_pop(L, 1);
            return 0;
        }
        want++;
    }
    return 1;
}

/* s += the value's text (Redis's form), rendered no further than s->len
 * past limit: what is past it is cut anyway. */
static void cat_value(bk_buf *s, lua_State *L, int idx, int level, size_t limit)
{
    if (s->len > limit)
        return;
    if (level++ == VALUE_DEPTH_MAX) {
        buf_appendf(s, "<max recursion level reached! Nested table?>");
        return;
    }
    int t = lua_type(L, idx);
    switch (t) {
    case LUA_TSTRING: {
        size_t n;
        const char *p = lua_tolstring(L, idx, &n);
        cat_repr(s, p, n);
        break;
    }
    case LUA_TBOOLEAN:
        buf_appendf(s, "%s", lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TNUMBER:
        buf_appendf(s, "%g", (double)lua_tonumber(L, idx));
        break;
    case LUA_TNIL:
        buf_append(s, "nil", 3);
        break;
    case LUA_TTABLE: {
        /* {a; b} if the keys are 1..n in order, else {[k]=v; ...}: decided
         * first, then only that form is made (Redis makes both at every
         * level, 2^depth the work). */
        if (idx < 0)
            idx = lua_gettop(L) + idx + 1;
        if (!lua_checkstack(L, 3)) {
            buf_appendf(s, "<max recursion level reached! Nested table?>");
            return;
        }
        int is_array = table_is_array(L, idx), first = 1;
        buf_append(s, "{", 1);
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            if (s->len > limit) {
                lua_pop(L, 2);
                return;
            }
            if (!first)
                buf_append(s, "; ", 2);
            first = 0;
            if (!is_array) {
                buf_append(s, "[", 1);
                cat_value(s, L, -2, level, limit);
                buf_append(s, "]=", 2);
            }
            cat_value(s, L, -1, level, limit);
            lua_pop(L, 1);
        }
        buf_append(s, "}", 1);
        break;
    }
    case LUA_TFUNCTION:
    case LUA_TUSERDATA:
    case LUA_TTHREAD:
    case LUA_TLIGHTUSERDATA: {
        const char *name = t == LUA_TFUNCTION   ? "function"
                           : t == LUA_TUSERDATA ? "userdata"
                           : t == LUA_TTHREAD   ? "thread"
                                                : "light-userdata";
        buf_appendf(s, "\"%s@%p\"", name, lua_topointer(L, idx));
        break;
    }
    default:
        buf_appendf(s, "\"<unknown-lua-type>\"");
    }
}

/* Cuts a value's text that went past VALUE_TEXT_MAX. */
static void cut_value_text(bk_buf *s)
{
    if (s->len > VALUE_TEXT_MAX) {
        s->len = VALUE_TEXT_MAX;
        buf_append(s, " ...", 4);
    }
}

static void log_value(lua_State *L, const char *prefix)
{
    bk_buf s = { 0 };
    buf_appendf(&s, "%s", prefix);
    size_t limit = VALUE_TEXT_MAX;
    if (ldb.maxlen > 0 && (size_t)ldb.maxlen < limit)
        limit = (size_t)ldb.maxlen;
    cat_value(&s, L, -1, 0, limit);
    cut_value_text(&s);
    log_trimmed(&s);
    buf_free(&s);
}

/* A RESP reply in the debugger's human form; returns the end of it, or
 * NULL on a malformed one. */
static const char *cat_reply(bk_buf *s, const char *p, const char *end)
{
    if (p >= end)
        return NULL;
    const char *e = memchr(p, '\r', (size_t)(end - p));
    if (!e || e + 1 >= end)
        return NULL;
    long long n = 0;
    switch (*p) {
    case ':':
        buf_append(s, p + 1, (size_t)(e - p - 1));
        return e + 2;
    case '+':
    case '-':
        cat_repr(s, p, (size_t)(e - p));
        return e + 2;
    case '$':
        if (kv_parse_ll(p + 1, (size_t)(e - p - 1), &n) < 0)
            return NULL;
        if (n < 0) {
            buf_append(s, "NULL", 4);
            return e + 2;
        }
        if ((size_t)(end - (e + 2)) < (size_t)n + 2)
            return NULL;
        cat_repr(s, e + 2, (size_t)n);
        return e + 2 + n + 2;
    case '_':
        buf_append(s, "(null)", 6);
        return e + 2;
    case '#':
        buf_appendf(s, "%s", p[1] == 't' ? "#true" : "#false");
        return e + 2;
    case ',':
        buf_append(s, "(double) ", 9);
        buf_append(s, p + 1, (size_t)(e - p - 1));
        return e + 2;
    case '*':
    case '~':
    case '%': {
        char kind = *p;
        if (kv_parse_ll(p + 1, (size_t)(e - p - 1), &n) < 0)
            return NULL;
        p = e + 2;
        if (n < 0) {
            buf_append(s, "NULL", 4);
            return p;
        }
        buf_appendf(s, "%s", kind == '*' ? "[" : kind == '~' ? "~(" : "{");
        for (long long i = 0; i < n && p; i++) {
            p = cat_reply(s, p, end);
            if (p && kind == '%') {
                buf_append(s, " => ", 4);
                p = cat_reply(s, p, end);
            }
            if (p && i != n - 1)
                buf_append(s, ",", 1);
        }
        buf_appendf(s, "%s", kind == '*' ? "]" : kind == '~' ? ")" : "}");
        return p;
    }
    default:
        /* RESP3 types Redis's debugger does not render (verbatim, big
         * number, attribute, push): the first line as it is. */
        buf_append(s, p, (size_t)(e - p));
        return e + 2;
    }
}

void ldb_log_command(int argc, const bk_str *argv)
{
    bk_buf s = { 0 };
    buf_append(&s, "<redis>", 7);
    for (int i = 0; i < argc; i++) {
        if (i == 10) {
            buf_appendf(&s, " ... (%d more)", argc - i - 1);
            break;
        }
        buf_append(&s, " ", 1);
        buf_append(&s, argv[i].p, argv[i].len);
    }
    log_str(&s);
    buf_free(&s);
}

void ldb_log_reply(const char *p, size_t n)
{
    if (n && p[0] == '-') {
        /* An error reply is logged as the error, then as the reply. */
        const char *e = memchr(p, '\r', n);
        log_fmt("<error> %.*s", (int)BK_MIN(e ? (size_t)(e - p) : n, 400), p);
    }
    bk_buf s = { 0 };
    buf_append(&s, "<reply> ", 8);
    cat_reply(&s, p, p + n);
    log_trimmed(&s);
    buf_free(&s);
}

void ldb_log_error(const char *err)
{
    if (strncmp(err, "OOM ", 4) == 0) {
        log_fmt("<error> -%s\r\n", err); /* Redis's shared OOM error, as it is */
        return;
    }
    if (strncmp(err, "ERR ", 4) == 0)
        err += 4;
    log_fmt("<error> %s", err);
}

void ldb_log_refusal(const char *p, size_t n)
{
    static const char aof[] = "-MISCONF Errors writing to the AOF file";
    if (n >= 2 && strncmp(p, aof, sizeof aof - 1) == 0)
        n -= 2; /* the one Redis formats without a line end */
    bk_buf s = { 0 };
    buf_append(&s, "<error> ", 8);
    buf_append(&s, p, n);
    log_str(&s);
    buf_free(&s);
}

/* ---- the source ---- */

static const char *source_line(int line, size_t *n)
{
    if (line < 1 || line > ldb.lines) {
        static const char out[] = "<out of range source code line>";
        *n = sizeof out - 1;
        return out;
    }
    *n = ldb.src_len[line - 1];
    return ldb.src[line - 1];
}

static int is_bp(int line)
{
    for (int i = 0; i < ldb.nbp; i++)
        if (ldb.bp[i] == line)
            return 1;
    return 0;
}

static void log_source_line(int line)
{
    size_t n;
    const char *p = source_line(line, &n);
    int cur = line == ldb.line, bp = is_bp(line);
    bk_buf s = { 0 };
    buf_appendf(&s, "%s%-3d ", cur && bp ? "->#" : cur ? "-> " : bp ? "  #" : "   ", line);
    const char *nul = memchr(p, '\0', n); /* Redis prints the line as a C string */
    buf_append(&s, p, nul ? (size_t)(nul - p) : n);
    log_str(&s);
    buf_free(&s);
}

static void list_source(int around, int context)
{
    for (int j = 1; j <= ldb.lines; j++)
        if (around == 0 || abs(around - j) <= context)
            log_source_line(j);
}

static void split_source(const char *p, size_t n)
{
    while (n && (p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    ldb.srcbuf = kv_malloc(n + 1);
    memcpy(ldb.srcbuf, p, n);
    int cap = 16;
    ldb.src = kv_malloc((size_t)cap * sizeof *ldb.src);
    ldb.src_len = kv_malloc((size_t)cap * sizeof *ldb.src_len);
    ldb.lines = 0;
    size_t at = 0;
    for (;;) {
        const char *nl = memchr(ldb.srcbuf + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - ldb.srcbuf) : n;
        if (ldb.lines == cap) {
            cap *= 2;
            ldb.src = kv_realloc(ldb.src, (size_t)cap * sizeof *ldb.src);
            ldb.src_len = kv_realloc(ldb.src_len, (size_t)cap * sizeof *ldb.src_len);
        }
        ldb.src[ldb.lines] = ldb.srcbuf + at;
        ldb.src_len[ldb.lines++] = end - at;
        if (!nl)
            break;
        at = end + 1;
    }
}

/* ---- the commands ---- */

typedef struct {
    int argc;
    char *argv[1024];
    size_t len[1024];
} ldb_cmd;

/* atoi() of the n bytes at p (they end at a "\r\n", or a NUL). */
static int atoi_n(const char *p, size_t n)
{
    char *b = kv_malloc(n + 1);
    memcpy(b, p, n);
    b[n] = '\0';
    int v = atoi(b);
    kv_free(b);
    return v;
}

/* Where the C string at p ends: its NUL, or the buffer's end. */
static const char *cstr_end(const char *p, const char *end)
{
    const char *z = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
    return z ? z : end;
}

/* Where "\r\n" starts in p..end, or NULL. */
static const char *find_crlf(const char *p, const char *end)
{
    while (p + 1 < end) {
        const char *r = memchr(p, '\r', (size_t)(end - p - 1));
        if (!r)
            return NULL;
        if (r[1] == '\n')
            return r;
        p = r + 1;
    }
    return NULL;
}

/* A whole command from cbuf: 1, 0 = read more, -1 = a protocol error.
 * Redis's parser, forgiving as it is: an array of 1..1024 bulk strings of
 * 1..1024 bytes; what it searches (the '*', each "\r\n") it searches as C
 * strings, so a NUL in the buffer ends the text it looks at. */
static int parse_command(ldb_cmd *cmd, size_t *used)
{
    const char *base = ldb.cbuf.data, *end = base + ldb.cbuf.len;
    if (ldb.cbuf.len == 0)
        return 0;
    const char *p = memchr(base, '*', (size_t)(cstr_end(base, end) - base));
    if (!p)
        return -1;
    const char *e = find_crlf(p, cstr_end(p, end));
    if (!e)
        return 0;
    int argc = atoi_n(p + 1, (size_t)(e - p - 1));
    if (argc <= 0 || argc > 1024)
        return -1;
    p = e + 2;
    cmd->argc = 0;
    while (cmd->argc < argc) {
        if (p >= end || *p == '\0')
            return 0; /* the end, or a NUL: read on */
        if (*p != '$')
            return -1;
        e = find_crlf(p, cstr_end(p, end));
        if (!e)
            return 0;
        int n = atoi_n(p + 1, (size_t)(e - p - 1));
        if (n <= 0 || n > 1024)
            return -1;
        p = e + 2;
        if ((size_t)(end - p) < (size_t)n + 2)
            return 0;
        cmd->argv[cmd->argc] = (char *)(uintptr_t)p;
        cmd->len[cmd->argc++] = (size_t)n;
        p += n;
        if (p[0] != '\r' || p[1] != '\n')
            return -1;
        p += 2;
    }
    *used = (size_t)(p - base);
    return 1;
}

static int is_cmd(const ldb_cmd *cmd, const char *shortname, const char *name)
{
    size_t n = cmd->len[0];
    return (n == strlen(shortname) && strncasecmp(cmd->argv[0], shortname, n) == 0) ||
           (n == strlen(name) && strncasecmp(cmd->argv[0], name, n) == 0);
}

/* The argument as a C string (copied: the buffer holds no NULs). */
static const char *arg(const ldb_cmd *cmd, int i, char *b, size_t cap)
{
    size_t n = BK_MIN(cmd->len[i], cap - 1);
    memcpy(b, cmd->argv[i], n);
    b[n] = '\0';
    return b;
}

static void cmd_help(void)
{
    static const char *const help[] = {
        "Redis Lua debugger help:",
        "[h]elp               Show this help.",
        "[s]tep               Run current line and stop again.",
        "[n]ext               Alias for step.",
        "[c]ontinue           Run till next breakpoint.",
        "[l]ist               List source code around current line.",
        "[l]ist [line]        List source code around [line].",
        "                     line = 0 means: current position.",
        "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
        "                     to show before/after [line].",
        "[w]hole              List all source code. Alias for 'list 1 1000000'.",
        "[p]rint              Show all the local variables.",
        "[p]rint <var>        Show the value of the specified variable.",
        "                     Can also show global vars KEYS and ARGV.",
        "[b]reak              Show all breakpoints.",
        "[b]reak <line>       Add a breakpoint to the specified line.",
        "[b]reak -<line>      Remove breakpoint from the specified line.",
        "[b]reak 0            Remove all breakpoints.",
        "[t]race              Show a backtrace.",
        "[e]val <code>        Execute some Lua code (in a different callframe).",
        "[r]edis <cmd>        Execute a Redis command.",
        "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
        "                     Specifying zero as <len> means unlimited.",
        "[a]bort              Stop the execution of the script. In sync",
        "                     mode dataset changes will be retained.",
        "",
        "Debugger functions you can call from Lua scripts:",
        "redis.debug()        Produce logs in the debugger console.",
        "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
        "                     next line of code.",
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(help); i++)
        log_add(help[i], strlen(help[i]));
}

static void cmd_print(lua_State *L, const ldb_cmd *cmd)
{
    lua_Debug ar;
    if (cmd->argc != 2) {
        int vars = 0;
        if (lua_getstack(L, 0, &ar)) {
            const char *name;
            for (int i = 1; (name = lua_getlocal(L, &ar, i)); i++) {
                if (!strstr(name, "(*temporary)")) {
                    bk_buf prefix = { 0 };
                    buf_appendf(&prefix, "<value> %s = ", name);
                    buf_append(&prefix, "", 1);
                    log_value(L, prefix.data);
                    buf_free(&prefix);
                    vars++;
                }
                lua_pop(L, 1);
            }
        }
        if (!vars)
            log_fmt("No local variables in the current context.");
        return;
    }
    char want[1025];
    arg(cmd, 1, want, sizeof want);
    for (int level = 0; lua_getstack(L, level, &ar); level++) {
        const char *name;
        for (int i = 1; (name = lua_getlocal(L, &ar, i)); i++) {
            int hit = strcmp(name, want) == 0;
            if (hit)
                log_value(L, "<value> ");
            lua_pop(L, 1);
            if (hit)
                return;
        }
    }
    if (strcmp(want, "ARGV") == 0 || strcmp(want, "KEYS") == 0) {
        lua_getglobal(L, want);
        log_value(L, "<value> ");
        lua_pop(L, 1);
    } else {
        log_fmt("No such variable.");
    }
}

static void cmd_break(const ldb_cmd *cmd)
{
    if (cmd->argc == 1) {
        if (ldb.nbp == 0) {
            log_fmt("No breakpoints set. Use 'b <line>' to add one.");
            return;
        }
        log_fmt("%d breakpoints set:", ldb.nbp);
        for (int i = 0; i < ldb.nbp; i++)
            log_source_line(ldb.bp[i]);
        return;
    }
    for (int j = 1; j < cmd->argc; j++) {
        char b[1025];
        const char *a = arg(cmd, j, b, sizeof b);
        long long line;
        /* Any 64-bit number is taken, then used as a C int, as Redis does:
         * 4294967299 is line 3, 2^63-1 is -1 (a wrong line). */
        if (kv_parse_ll(cmd->argv[j], cmd->len[j], &line) < 0) {
            log_fmt("Invalid argument:'%s'", a);
        } else if (line == 0) {
            ldb.nbp = 0;
            log_fmt("All breakpoints removed.");
        } else if (line > 0) {
            int at = (int)(uint32_t)(uint64_t)line;
            if (ldb.nbp == LDB_BP_MAX) {
                log_fmt("Too many breakpoints set.");
            } else if (at > 0 && at <= ldb.lines && !is_bp(at)) {
                ldb.bp[ldb.nbp++] = at;
                list_source(at, 1);
            } else {
                log_fmt("Wrong line number.");
            }
        } else {
            int at = (int)(uint32_t)(0 - (uint64_t)line), found = 0;
            for (int i = 0; i < ldb.nbp && !found; i++)
                if (ldb.bp[i] == at) {
                    memmove(ldb.bp + i, ldb.bp + i + 1, (size_t)(ldb.nbp - i - 1) * sizeof *ldb.bp);
                    ldb.nbp--;
                    found = 1;
                }
            log_fmt("%s", found ? "Breakpoint removed." : "No breakpoint in the specified line.");
        }
    }
}

/* The count hook of the debugger's eval: past the time limit it fails. */
static void eval_hook(lua_State *T, lua_Debug *ar)
{
    (void)ar;
    long long limit = kv_busy_reply_ms ? kv_busy_reply_ms : 5000;
    if ((long long)((clock_mono_us() - ldb.eval_since_us) / 1000) >= limit) {
        lua_pushfstring(T, "timeout reached running the debugger's eval (%d ms), infinite loop?",
                        (int)limit);
        lua_error(T);
    }
}

/* The text of the error at the top of T (an error table's err field). */
static const char *error_text(lua_State *T)
{
    if (lua_type(T, -1) == LUA_TTABLE) {
        lua_getfield(T, -1, "err");
        lua_replace(T, -2);
    }
    const char *m = lua_isstring(T, -1) ? lua_tostring(T, -1) : NULL;
    return m ? m : "(error object is not a string)";
}

/* The code runs in a thread of its own: the script is stopped inside a
 * hook, where Lua calls no hooks, and a thread has its own, with a time
 * limit (Redis runs it in the hook: an endless loop hangs the session, in
 * SYNC mode the whole server). */
static void cmd_eval(lua_State *L, const ldb_cmd *cmd)
{
    bk_buf code = { 0 }, expr = { 0 };
    for (int i = 1; i < cmd->argc; i++) {
        if (i > 1)
            buf_append(&code, " ", 1);
        buf_append(&code, cmd->argv[i], cmd->len[i]);
    }
    buf_append(&expr, "return ", 7);
    buf_append(&expr, code.data, code.len);
    if (!lua_checkstack(L, 1)) {
        log_fmt("<error> max lua stack reached");
        goto done;
    }
    lua_State *T = lua_newthread(L); /* anchored on L's stack until done */
    lua_sethook(T, eval_hook, LUA_MASKCOUNT, 100000);
    /* As an expression first, then as a statement. */
    if (luaL_loadbuffer(T, expr.data, expr.len, "@ldb_eval")) {
        lua_pop(T, 1);
        if (luaL_loadbuffer(T, code.data ? code.data : "", code.len, "@ldb_eval")) {
            log_fmt("<error> %s", lua_tostring(T, -1));
            goto pop;
        }
    }
    ldb.eval_since_us = clock_mono_us();
    if (lua_pcall(T, 0, 1, 0)) {
        log_fmt("<error> %s", error_text(T));
        goto pop;
    }
    log_value(T, "<retval> ");
pop:
    lua_pop(L, 1);
done:
    buf_free(&code);
    buf_free(&expr);
}

/* redis.call with the step flag up: the command and its reply are logged. */
static void cmd_redis(lua_State *L, const ldb_cmd *cmd)
{
    if (!lua_checkstack(L, cmd->argc + 1)) {
        log_fmt("<reply> \"max lua stack reached\"");
        return;
    }
    lua_getglobal(L, "redis");
    lua_getfield(L, -1, "call");
    for (int i = 1; i < cmd->argc; i++)
        lua_pushlstring(L, cmd->argv[i], cmd->len[i]);
    ldb_flags.step = 1;
    lua_pcall(L, cmd->argc - 1, 1, 0);
    ldb_flags.step = 0;
    lua_pop(L, 2);
}

static void cmd_trace(lua_State *L)
{
    lua_Debug ar;
    int level = 0;
    for (; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Snl", &ar);
        if (strstr(ar.short_src, "user_script")) {
            log_fmt("%s %s:", level == 0 ? "In" : "From", ar.name ? ar.name : "top level");
            log_source_line(ar.currentline);
        }
    }
    if (level == 0)
        log_fmt("<error> Can't retrieve Lua stack.");
}

static void cmd_maxlen(const ldb_cmd *cmd)
{
    if (cmd->argc == 2) {
        char b[1025];
        int v = atoi(arg(cmd, 1, b, sizeof b));
        ldb.hinted = 1;
        if (v != 0 && v <= 60)
            v = 60;
        ldb.maxlen = v;
    }
    if (ldb.maxlen)
        log_fmt("<value> replies are truncated at %d bytes.", ldb.maxlen);
    else
        log_fmt("<value> replies are unlimited.");
}

/* Reads and runs debugger commands until one resumes the script: 0, or -1
 * when the client is gone. Raises a Lua error for abort and bad input. */
static int repl(lua_State *L)
{
    for (;;) {
        ldb_cmd cmd;
        cmd.argc = 0;
        size_t used = 0;
        int r;
        while ((r = parse_command(&cmd, &used)) == 0) {
            char b[1024];
            ssize_t n = xfer(0, b, sizeof b);
            if (n <= 0) {
                /* Gone: the script runs on without stops. */
                ldb_flags.step = 0;
                ldb.nbp = 0;
                return -1;
            }
            buf_append(&ldb.cbuf, b, (size_t)n);
            if (ldb.cbuf.len > LDB_CMD_MAX) {
                ldb.cbuf.len = 0;
                lua_pushstring(L, "max client buffer reached");
                lua_error(L);
            }
        }
        if (r < 0) {
            ldb.cbuf.len = 0;
            lua_pushstring(L, "protocol error");
            lua_error(L);
        }
        /* Redis drops whatever else the buffer held with the command. */
        (void)used;
        bk_buf keep = ldb.cbuf;
        ldb.cbuf = (bk_buf){ 0 };
        if (is_cmd(&cmd, "s", "step") || is_cmd(&cmd, "n", "next")) {
            ldb_flags.step = 1;
            buf_free(&keep);
            return 0;
        } else if (is_cmd(&cmd, "c", "continue")) {
            buf_free(&keep);
            return 0;
        } else if (is_cmd(&cmd, "a", "abort")) {
            buf_free(&keep);
            lua_pushstring(L, "script aborted for user request");
            lua_error(L);
        } else if (is_cmd(&cmd, "h", "help")) {
            cmd_help();
        } else if (is_cmd(&cmd, "t", "trace")) {
            cmd_trace(L);
        } else if (is_cmd(&cmd, "m", "maxlen")) {
            cmd_maxlen(&cmd);
        } else if (is_cmd(&cmd, "b", "break")) {
            cmd_break(&cmd);
        } else if (is_cmd(&cmd, "e", "eval")) {
            cmd_eval(L, &cmd);
        } else if (cmd.argc > 1 && is_cmd(&cmd, "r", "redis")) {
            cmd_redis(L, &cmd);
        } else if (is_cmd(&cmd, "p", "print")) {
            cmd_print(L, &cmd);
        } else if (is_cmd(&cmd, "l", "list")) {
            char b[1025];
            int around = ldb.line, ctx = 5;
            if (cmd.argc > 1) {
                int num = atoi(arg(&cmd, 1, b, sizeof b));
                if (num > 0)
                    around = num;
            }
            if (cmd.argc > 2)
                ctx = atoi(arg(&cmd, 2, b, sizeof b));
            list_source(around, ctx);
        } else if (is_cmd(&cmd, "w", "whole")) {
            list_source(1, 1000000);
        } else {
            log_fmt("<error> Unknown Redis Lua debugger command or wrong number of arguments.");
        }
        buf_free(&keep);
        send_log();
    }
}

/* ---- the hook and the session ---- */

void ldb_hook(lua_State *L, lua_Debug *ar)
{
    lua_getstack(L, 0, ar);
    lua_getinfo(L, "Sl", ar);
    ldb.line = ar->currentline;
    int bp = is_bp(ldb.line) || ldb.luabp;
    int timeout = 0;
    long long limit = kv_busy_reply_ms ? kv_busy_reply_ms : 5000;
    if (!strstr(ar->short_src, "user_script")) {
        /* Code the debugger's eval made (run by eval, or called by the
         * script) has no lines to stop at: past the time limit it fails,
         * where Redis loops for ever (in SYNC mode, the whole server). */
        if (ar->event == LUA_HOOKCOUNT &&
            (long long)((clock_mono_us() - ldb.since_us) / 1000) >= limit) {
            ldb.since_us = clock_mono_us();
            lua_pushfstring(L, "timeout reached running code outside the script (%s), "
                               "infinite loop?", ar->short_src);
            lua_error(L);
        }
        return;
    }
    if (ar->event == LUA_HOOKCOUNT && !ldb_flags.step && !bp) {
        if ((long long)((clock_mono_us() - ldb.since_us) / 1000) < limit)
            return;
        timeout = 1;
        ldb_flags.step = 1;
    }
    if (!ldb_flags.step && !bp)
        return;
    const char *reason = bp ? (ldb.luabp ? "redis.breakpoint() called" : "break point")
                         : timeout ? "timeout reached, infinite loop?"
                                   : "step over";
    ldb_flags.step = 0;
    ldb.luabp = 0;
    log_fmt("* Stopped at %d, stop reason = %s", ldb.line, reason);
    log_source_line(ldb.line);
    send_log();
    if (repl(L) < 0 && timeout) {
        lua_pushstring(L, "timeout during Lua debugging with client closing connection");
        lua_error(L);
    }
    ldb.since_us = clock_mono_us();
}

int l_ldb_debug(lua_State *L)
{
    if (!ldb_flags.active)
        return 0;
    int argc = lua_gettop(L);
    bk_buf s = { 0 };
    buf_appendf(&s, "<debug> line %d: ", ldb.line);
    if (!lua_checkstack(L, 1))
        argc = 0;
    for (int i = 1; i <= argc && s.len <= VALUE_TEXT_MAX; i++) {
        lua_pushvalue(L, i);
        cat_value(&s, L, -1, 0, VALUE_TEXT_MAX);
        lua_pop(L, 1);
        if (i != argc)
            buf_append(&s, ", ", 2);
    }
    cut_value_text(&s);
    log_str(&s);
    buf_free(&s);
    return 0;
}

int l_ldb_breakpoint(lua_State *L)
{
    if (ldb_flags.active)
        ldb.luabp = 1;
    lua_pushboolean(L, ldb_flags.active);
    return 1;
}

int ldb_start(kv_client *c, bk_str body)
{
    int forked = c->ldb_mode == LDB_FORK;
    if (forked) {
        pid_t pid = fork();
        if (pid < 0) {
            reply_errorf(c, "ERR Fork() failed: can't run EVAL in debugging mode: %s",
                         strerror(errno));
            return 0;
        }
        if (pid > 0) {
            if (nchildren == children_cap) {
                children_cap = children_cap ? children_cap * 2 : 4;
                children = kv_realloc(children, (size_t)children_cap * sizeof *children);
            }
            children[nchildren++] = pid;
            c->ldb_mode = 0;
            if (c->tls)
                kv_tls_client_handed_off(c);
            c->flags |= CLIENT_CLOSE_ASAP; /* the child answers it */
            kv_client_output_added(c);     /* closed at the next flush */
            return 0;
        }
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        kv_child_close_listeners();
        log_warn("Redis forked for debugging eval");
    } else {
        log_warn("Redis synchronous debugging eval session started");
    }
    ldb.c = c;
    ldb_flags.active = 1;
    ldb.forked = forked;
    ldb_flags.step = 1;
    ldb.luabp = 0;
    ldb.nbp = 0;
    ldb.maxlen = LDB_MAXLEN_DEFAULT;
    ldb.hinted = 0;
    ldb.log.len = 0;
    ldb.nlog = 0;
    ldb.cbuf.len = 0;
    ldb.line = 0;
    ldb.since_us = clock_mono_us();
    split_source(body.p, body.len);
    /* Output c already has (an EXEC's array header, a pipelined reply)
     * stays in its buffer: the session writes around it, as Redis's. */
    return 1;
}

void ldb_end(kv_client *c)
{
    log_fmt("<endsession>");
    send_log();
    if (ldb.forked) {
        send_pending(c); /* the script's reply */
        log_warn("Lua debugging session child exiting");
        kv_client_close(c); /* over TLS: what is left, then close_notify */
        _exit(0);
    }
    log_warn("Redis synchronous debugging eval session ended");
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
    c->ldb_mode = 0;
    kv_free(ldb.src);
    kv_free(ldb.src_len);
    kv_free(ldb.srcbuf);
    ldb.src = NULL;
    ldb.src_len = NULL;
    ldb.srcbuf = NULL;
    ldb.lines = 0;
    ldb_flags.active = 0;
    ldb_flags.step = 0;
    ldb.c = NULL;
    buf_free(&ldb.cbuf);
    buf_free(&ldb.log);
    ldb.nlog = 0;
}

void ldb_cron(void)
{
    for (int i = 0; i < nchildren;) {
        if (waitpid(children[i], NULL, WNOHANG) != 0) {
            children[i] = children[--nchildren];
            continue;
        }
        i++;
    }
}

void ldb_kill_sessions(void)
{
    for (int i = 0; i < nchildren; i++) {
        log_warn("Killing debugging session %ld", (long)children[i]);
        kill(children[i], SIGKILL);
        kv_waitpid(children[i], NULL, 0);
    }
    nchildren = 0;
}
