/* The exchange layer: per-request memory, request accessors, and the
 * response as handlers build it, handed to the protocol through
 * http_proto_ops. Knows no protocol and no handler. */
#include "http/exchange.h"

#include "core/net.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* ---- per-request arena ---- */

struct http_arena_chunk {
    http_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

#define ARENA_CHUNK 4096

void *http_exchange_alloc(http_exchange *x, size_t size)
{
    if (size > ((size_t)1 << 40))
        return NULL; /* no request needs that; also keeps the sums below from wrapping */
    size = (size + 15) & ~(size_t)15;
    http_arena_chunk *a = x->arena;
    if (!a || a->cap - a->used < size) {
        size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
        http_arena_chunk *n = malloc(sizeof *n + cap);
        if (!n)
            return NULL;
        n->used = 0;
        n->cap = cap;
        n->next = a;
        x->arena = a = n;
    }
    void *p = a->data + a->used;
    a->used += size;
    return p;
}

/* ---- lifecycle (the protocol's calls) ---- */

void http_exchange_init(http_exchange *x)
{
    *x = (http_exchange){ .status = 200 };
}

void http_exchange_reset(http_exchange *x, int all)
{
    /* Keep one chunk for the next request unless the storage goes. */
    http_arena_chunk *a = x->arena;
    while (a && (a->next || all || a->cap > ARENA_CHUNK)) {
        http_arena_chunk *next = a->next;
        free(a);
        a = next;
    }
    if (a)
        a->used = 0;
    x->arena = a;
    x->nparams = 0;
    x->headers_sent = x->has_type = x->aborted = x->close = 0;
    x->status = 200;
    x->hdrs.len = 0;
    if (all || x->hdrs.cap > 16384)
        buf_free(&x->hdrs);
    x->remote[0] = '\0';
    x->route = NULL;
    x->on_abort = NULL;
    x->redirects = 0;
}

void http_exchange_abort(http_exchange *x)
{
    x->aborted = 1;
    if (x->on_abort) {
        void (*fn)(void *) = x->on_abort;
        x->on_abort = NULL;
        fn(x->abort_arg);
    }
}

/* ---- request ---- */

const char *http_exchange_remote_addr(http_exchange *x)
{
    if (!x->remote[0])
        net_format_ip(x->peer, x->remote, sizeof x->remote);
    return x->remote;
}

int http_exchange_remote_port(const http_exchange *x)
{
    return net_port(x->peer);
}

void http_exchange_headers(const http_exchange *x, int (*fn)(bk_str, bk_str, void *), void *arg)
{
    const http_parser *p = x->req.parser;
    for (uint32_t i = 0; i < p->nheaders; i++) {
        const http_hdr_off *h = &p->hdr[i];
        if (fn((bk_str){ x->req.head + h->name_off, h->name_len },
               (bk_str){ x->req.head + h->val_off, h->val_len }, arg))
            return;
    }
}

/* ---- response ---- */

/* Headers the protocol writes itself; a handler's copy would contradict them. */
static int managed_header(const char *name, size_t n)
{
    static const struct { const char *name; size_t len; } names[] = {
        { "content-length", 14 }, { "transfer-encoding", 17 }, { "connection", 10 },
        { "date", 4 }, { "server", 6 }, { "keep-alive", 10 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(names); i++)
        if (names[i].len == n && strncasecmp(names[i].name, name, n) == 0)
            return 1;
    return 0;
}

/* No ':', space or control in a header name. */
static int header_name_ok(const char *p, size_t n)
{
    size_t i = 0;
    for (uint64_t w; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        if (bytes8_has_below(w, '!') | bytes8_has(w, ':'))
            break;
    }
    for (; i < n; i++)
        if (p[i] == ':' || (unsigned char)p[i] <= ' ')
            return 0;
    return 1;
}

/* No CR, LF or NUL in a header value. */
static int header_value_ok(const char *p, size_t n)
{
    size_t i = 0;
    for (uint64_t w; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        if (bytes8_has_below(w, '\r' + 1))
            break;
    }
    for (; i < n; i++)
        if (p[i] == '\r' || p[i] == '\n' || p[i] == '\0')
            return 0;
    return 1;
}

void http_exchange_status(http_exchange *x, int status)
{
    if (!x->headers_sent && status >= 100 && status <= 999)
        x->status = status;
}

void http_exchange_header(http_exchange *x, bk_str name, bk_str value)
{
    if (x->headers_sent || x->aborted || !name.len || managed_header(name.p, name.len))
        return;
    if (!header_name_ok(name.p, name.len))
        return; /* not a header name */
    if (!header_value_ok(value.p, value.len))
        return; /* would split the response */
    if (name.len == 12 && strncasecmp(name.p, "content-type", 12) == 0)
        x->has_type = 1;
    /* Kept aside until the status is final and the head goes out. */
    bk_buf *h = &x->hdrs;
    if (buf_reserve(h, name.len + value.len + 4) < 0)
        return;
    buf_put(h, name.p, name.len);
    buf_put(h, ": ", 2);
    buf_put(h, value.p, value.len);
    buf_put(h, "\r\n", 2);
}

void http_exchange_header_lines(http_exchange *x, const char *lines)
{
    while (*lines) {
        const char *eol = strstr(lines, "\r\n");
        const char *colon = strchr(lines, ':');
        if (!eol || !colon || colon > eol)
            return;
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        http_exchange_header(x, (bk_str){ lines, (size_t)(colon - lines) },
                             (bk_str){ v, (size_t)(eol - v) });
        lines = eol + 2;
    }
}

void http_exchange_restart(http_exchange *x)
{
    assert(!x->headers_sent || x->aborted);
    x->headers_sent = 0;
    x->hdrs.len = 0;
    x->status = 200;
    x->has_type = 0;
}

static const char text_plain[] = "text/plain; charset=utf-8";
#define TEXT_PLAIN ((bk_str){ text_plain, sizeof text_plain - 1 })
#define NO_TYPE ((bk_str){ NULL, 0 })

/* The head: the headers the handler added, then a Content-Type when it
 * gave none (default_type, unless empty), then the protocol's framing and
 * body bytes that go with it: one piece of output. */
static void send_head(http_exchange *x, uint64_t length, bk_str default_type, const void *body,
                      size_t body_len)
{
    bk_str lines[4]; /* handler headers, Content-Type (3) */
    size_t n = 0;
    if (x->hdrs.len)
        lines[n++] = (bk_str){ x->hdrs.data, x->hdrs.len };
    if (!x->has_type && default_type.len) {
        lines[n++] = BK_STR("Content-Type: ");
        lines[n++] = default_type;
        lines[n++] = BK_STR("\r\n");
    }
    assert(n <= BK_ARRAY_LEN(lines));
    http_exchange_send_head(x, x->status, lines, n, length, body, body_len);
}

static int no_body_status(int status)
{
    return status == 204 || status == 304 || (status >= 100 && status < 200);
}

void http_exchange_write(http_exchange *x, const void *p, size_t n)
{
    if (x->aborted)
        return;
    if (!x->headers_sent)
        send_head(x, HTTP_LEN_STREAM, TEXT_PLAIN, NULL, 0);
    if (n)
        x->proto->send_body(x, p, n);
}

void http_exchange_end(http_exchange *x, const void *body, size_t n)
{
    if (!x->aborted) {
        if (!x->headers_sent) {
            if (no_body_status(x->status))
                send_head(x, HTTP_LEN_NONE, NO_TYPE, NULL, 0);
            else
                send_head(x, n, TEXT_PLAIN, body, n);
        } else if (n) {
            http_exchange_write(x, body, n);
        }
    }
    x->proto->finish(x, 0);
}

void http_exchange_end_ref(http_exchange *x, const void *body, size_t n,
                           http_release_fn release, void *arg)
{
    if (x->aborted || x->headers_sent) {
        if (!x->aborted)
            http_exchange_write(x, body, n);
        if (release)
            release(arg);
        http_exchange_end(x, NULL, 0);
        return;
    }
    send_head(x, n, TEXT_PLAIN, NULL, 0);
    x->proto->send_ref(x, body, n, release, arg);
    x->proto->finish(x, 0);
}

void http_exchange_end_fd(http_exchange *x, int fd, uint64_t off, uint64_t len,
                          bk_str content_type, http_release_fn release, void *arg)
{
    if (x->aborted || x->headers_sent) {
        if (release)
            release(arg);
        http_exchange_end(x, NULL, 0);
        return;
    }
    if (!x->has_type && content_type.len)
        http_exchange_header(x, BK_STR("Content-Type"), content_type);
    send_head(x, len, NO_TYPE, NULL, 0);
    x->proto->send_fd(x, fd, NULL, off, len, release, arg);
    x->proto->finish(x, 0);
}

void http_exchange_error(http_exchange *x, int status, const char *extra)
{
    if (x->aborted || x->headers_sent) {
        /* Too late for a status: cut the body short. */
        x->proto->finish(x, !x->aborted);
        return;
    }
    http_worker *hw = x->hw;
    if (hw->error_page && !x->in_error_page) {
        x->in_error_page = 1;
        if (extra) /* header lines the status needs: give them to the renderer */
            http_exchange_header_lines(x, extra);
        x->status = status;
        hw->error_page(x, status, hw->error_udata);
        x->in_error_page = 0;
        return;
    }
    char body[256];
    bk_str reason = http_status_reason(status);
    int n = snprintf(body, sizeof body,
                     "<html>\r\n<head><title>%d %.*s</title></head>\r\n<body>\r\n"
                     "<center><h1>%d %.*s</h1></center>\r\n<hr><center>brisk</center>\r\n"
                     "</body>\r\n</html>\r\n",
                     status, (int)reason.len, reason.p, status, (int)reason.len, reason.p);
    bk_str lines[2] = { BK_STR("Content-Type: text/html; charset=utf-8\r\n"),
                     extra ? (bk_str){ extra, strlen(extra) } : BK_STR_NULL };
    http_exchange_send_head(x, status, lines, 2, (uint64_t)n, body, (size_t)n);
    x->proto->finish(x, 0);
}

void http_exchange_fail(http_exchange *x, int status)
{
    if (!x->aborted && !x->headers_sent) {
        x->hdrs.len = 0;
        x->has_type = 0;
    }
    http_exchange_error(x, status, NULL);
}
