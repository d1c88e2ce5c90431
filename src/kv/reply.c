#include "kv/reply.h"

#include "kv/replication.h"

#include "kv/util.h"

#include <stdio.h>
#include <stdlib.h>

static void oom(void)
{
    fprintf(stderr, "brisk-kv: out of memory growing a reply buffer\n");
    abort();
}

static inline char *room(kv_client *c, size_t n)
{
    if (BK_UNLIKELY(c->repl_flags & REPL_C_REPLICA))
        repl_replica_replied(c); /* a reply would corrupt its stream */
    if (BK_UNLIKELY(c->wbuf.cap - c->wbuf.len < n) && buf_reserve(&c->wbuf, n) < 0)
        oom();
    return c->wbuf.data + c->wbuf.len;
}

void reply_raw(kv_client *c, const char *p, size_t n)
{
    char *w = room(c, n);
    memcpy(w, p, n);
    c->wbuf.len += n;
}

void reply_ok(kv_client *c)
{
    reply_raw(c, "+OK\r\n", 5);
}

void reply_simple(kv_client *c, const char *s)
{
    size_t n = strlen(s);
    char *w = room(c, n + 3);
    w[0] = '+';
    memcpy(w + 1, s, n);
    w[n + 1] = '\r';
    w[n + 2] = '\n';
    c->wbuf.len += n + 3;
}

void reply_error(kv_client *c, const char *msg)
{
    size_t n = strlen(msg);
    char *w = room(c, n + 3);
    w[0] = '-';
    /* An error must stay on one line. */
    for (size_t i = 0; i < n; i++)
        w[i + 1] = (msg[i] == '\r' || msg[i] == '\n') ? ' ' : msg[i];
    w[n + 1] = '\r';
    w[n + 2] = '\n';
    c->wbuf.len += n + 3;
    srv.stat_errors++;
    kv_errorstat_add(msg);
    if (BK_UNLIKELY(c->repl_flags))
        repl_master_error(c, msg);
    if (c->cmd && srv.cmd_stats)
        srv.cmd_stats[c->cmd - kv_commands].failed++;
}

void reply_errorf(kv_client *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_error(c, msg);
}

void reply_arity_error(kv_client *c, const char *name)
{
    reply_errorf(c, "ERR wrong number of arguments for '%s' command", name);
}

static inline void header(kv_client *c, char type, long long v)
{
    char *w = room(c, 32);
    w[0] = type;
    size_t n = 1 + kv_fmt_ll(w + 1, v);
    w[n] = '\r';
    w[n + 1] = '\n';
    c->wbuf.len += n + 2;
}

void reply_int(kv_client *c, long long v)
{
    if (v >= 0 && v <= 9) {
        char *w = room(c, 4);
        w[0] = ':';
        w[1] = (char)('0' + v);
        w[2] = '\r';
        w[3] = '\n';
        c->wbuf.len += 4;
        return;
    }
    header(c, ':', v);
}

void reply_bulk(kv_client *c, const char *p, size_t n)
{
    char *w = room(c, n + 32);
    char *s = w;
    *w++ = '$';
    w += kv_fmt_ll(w, (long long)n);
    *w++ = '\r';
    *w++ = '\n';
    memcpy(w, p, n);
    w += n;
    *w++ = '\r';
    *w++ = '\n';
    c->wbuf.len += (size_t)(w - s);
}

void reply_bulk_cstr(kv_client *c, const char *s)
{
    if (!s)
        reply_null(c);
    else
        reply_bulk(c, s, strlen(s));
}

void reply_bulk_ll(kv_client *c, long long v)
{
    char b[KV_LL_STR_MAX];
    reply_bulk(c, b, kv_fmt_ll(b, v));
}

void reply_null(kv_client *c)
{
    if (c->resp >= 3)
        reply_raw(c, "_\r\n", 3);
    else
        reply_raw(c, "$-1\r\n", 5);
}

void reply_null_array(kv_client *c)
{
    if (c->resp >= 3)
        reply_raw(c, "_\r\n", 3);
    else
        reply_raw(c, "*-1\r\n", 5);
}

void reply_array(kv_client *c, long long n)
{
    header(c, '*', n);
}

void reply_empty_array(kv_client *c)
{
    reply_raw(c, "*0\r\n", 4);
}

void reply_map(kv_client *c, long long n)
{
    if (c->resp >= 3)
        header(c, '%', n);
    else
        header(c, '*', 2 * n);
}

void reply_set(kv_client *c, long long n)
{
    header(c, c->resp >= 3 ? '~' : '*', n);
}

void reply_double(kv_client *c, double v)
{
    char b[KV_DBL_STR_MAX];
    size_t n = kv_fmt_double(b, v);
    if (c->resp >= 3) {
        char *w = room(c, n + 3);
        w[0] = ',';
        memcpy(w + 1, b, n);
        w[n + 1] = '\r';
        w[n + 2] = '\n';
        c->wbuf.len += n + 3;
    } else {
        reply_bulk(c, b, n);
    }
}

void reply_bool(kv_client *c, int v)
{
    if (c->resp >= 3)
        reply_raw(c, v ? "#t\r\n" : "#f\r\n", 4);
    else
        reply_int(c, v ? 1 : 0);
}

void reply_verbatim(kv_client *c, const char *p, size_t n, const char *fmt3)
{
    if (c->resp < 3) {
        reply_bulk(c, p, n);
        return;
    }
    header(c, '=', (long long)n + 4);
    char *w = room(c, n + 6);
    memcpy(w, fmt3, 3);
    w[3] = ':';
    memcpy(w + 4, p, n);
    w[n + 4] = '\r';
    w[n + 5] = '\n';
    c->wbuf.len += n + 6;
}

size_t reply_defer(kv_client *c)
{
    return c->wbuf.len;
}

void reply_defer_set(kv_client *c, size_t handle, char type, long long n)
{
    char h[32];
    h[0] = type;
    size_t hl = 1 + kv_fmt_ll(h + 1, n);
    h[hl++] = '\r';
    h[hl++] = '\n';
    room(c, hl);
    memmove(c->wbuf.data + handle + hl, c->wbuf.data + handle, c->wbuf.len - handle);
    memcpy(c->wbuf.data + handle, h, hl);
    c->wbuf.len += hl;
}

void reply_defer_array(kv_client *c, size_t handle, long long n)
{
    reply_defer_set(c, handle, '*', n);
}

void reply_defer_map(kv_client *c, size_t handle, long long n)
{
    if (c->resp >= 3)
        reply_defer_set(c, handle, '%', n);
    else
        reply_defer_set(c, handle, '*', 2 * n);
}

void reply_defer_set_type(kv_client *c, size_t handle, long long n)
{
    reply_defer_set(c, handle, c->resp >= 3 ? '~' : '*', n);
}
