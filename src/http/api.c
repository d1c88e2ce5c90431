/* The public handler API (include/brisk/brisk.h) on top of src/http.
 * brisk_req and brisk_res are the connection itself, seen through two
 * opaque types: no allocation per request. */
#include "brisk/brisk.h"

#include "core/net.h"
#include "core/workpool.h"
#include "http/server.h"
#include "http/cgi.h"
#include "http/static.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define REQ(r) ((http_conn *)(void *)(r))
#define RES(r) ((http_conn *)(void *)(r))
#define LOOP(l) ((http_worker *)(void *)(l))
#define BSTR(s) ((brisk_str){ (s).p, (s).len })

enum seg_kind { SEG_LIT, SEG_PARAM, SEG_REST };

typedef struct {
    uint8_t kind;
    const char *text; /* literal or parameter name */
    size_t len;
} route_seg;

typedef struct {
    char *method; /* NULL = any */
    size_t method_len;
    char *pattern;
    route_seg *segs;
    int nsegs;
    brisk_handler handler;
    void *udata;
} route;

struct brisk_server {
    http_cli cli;
    route *routes;
    int nroutes, cap;
    brisk_worker_hook hook;
    void *hook_udata;
    int listen_set; /* brisk_listen was called: replace, do not add to, the default */
    brisk_error_fn error_fn;
    void *error_udata;
    char workers_text[16];
    char what[256]; /* brisk_server_describe */
};

/* ---- per-request arena ---- */

struct arena_chunk {
    arena_chunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

#define ARENA_CHUNK 4096

void *brisk_req_alloc(brisk_req *req, size_t size)
{
    http_conn *c = REQ(req);
    if (size > ((size_t)1 << 40))
        return NULL; /* no request needs that; also keeps the sums below from wrapping */
    size = (size + 15) & ~(size_t)15;
    arena_chunk *a = c->x->api.arena;
    if (!a || a->cap - a->used < size) {
        size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
        arena_chunk *n = malloc(sizeof *n + cap);
        if (!n)
            return NULL;
        n->used = 0;
        n->cap = cap;
        n->next = a;
        c->x->api.arena = a = n;
    }
    void *p = a->data + a->used;
    a->used += size;
    return p;
}

void http_api_reset(http_api_state *api, int all)
{
    /* Keep one chunk for the next request unless the connection ends. */
    arena_chunk *a = api->arena;
    while (a && (a->next || all || a->cap > ARENA_CHUNK)) {
        arena_chunk *next = a->next;
        free(a);
        a = next;
    }
    if (a)
        a->used = 0;
    api->arena = a;
    api->nparams = 0;
    api->headers_sent = api->chunked = api->until_close = api->has_type = 0;
    api->status = 200;
    api->hdrs.len = 0;
    if (all || api->hdrs.cap > 16384)
        buf_free(&api->hdrs);
    api->remote[0] = '\0';
    api->route = NULL;
    api->on_abort = NULL;
    api->redirects = 0;
}

/* ---- server and routes ---- */

brisk_server *brisk_server_new(void)
{
    brisk_server *s = calloc(1, sizeof *s);
    return s;
}

brisk_server *brisk_create_server(brisk_handler handler, void *udata)
{
    brisk_server *s = brisk_server_new();
    if (s && brisk_route(s, NULL, "/*", handler, udata) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

int brisk_listen(brisk_server *s, const char *addr)
{
    if (s->cli.nlisten == HTTP_MAX_LISTEN)
        return -1;
    net_addr a;
    char err[128];
    if (net_parse_addr(addr, &a, err, sizeof err) < 0)
        return -1;
    s->cli.listen[s->cli.nlisten++] = addr;
    s->listen_set = 1;
    return 0;
}

void brisk_workers(brisk_server *s, int n)
{
    snprintf(s->workers_text, sizeof s->workers_text, "%d", n > 0 ? n : 0);
    s->cli.workers = n > 0 ? s->workers_text : "auto";
}

void brisk_max_body(brisk_server *s, size_t bytes)
{
    s->cli.max_body = bytes ? (uint64_t)bytes : 1;
}

void brisk_on_worker(brisk_server *s, brisk_worker_hook hook, void *udata)
{
    s->hook = hook;
    s->hook_udata = udata;
}

int brisk_route(brisk_server *s, const char *method, const char *pattern, brisk_handler handler,
                void *udata)
{
    if (!pattern || pattern[0] != '/' || !handler)
        return -1;
    if (s->nroutes == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        route *r = realloc(s->routes, (size_t)cap * sizeof *r);
        if (!r)
            return -1;
        s->routes = r;
        s->cap = cap;
    }
    route *r = &s->routes[s->nroutes];
    memset(r, 0, sizeof *r);
    r->pattern = strdup(pattern);
    r->method = method ? strdup(method) : NULL;
    size_t n = 1;
    for (const char *p = pattern; *p; p++)
        n += *p == '/';
    r->segs = calloc(n, sizeof *r->segs);
    if (!r->pattern || (method && !r->method) || !r->segs)
        goto fail;
    r->method_len = method ? strlen(method) : 0;
    /* "/a/:b/" + "*" -> LIT a, PARAM b, REST */
    const char *p = r->pattern + 1;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        route_seg *g = &r->segs[r->nsegs++];
        if (len == 1 && p[0] == '*') {
            if (e && e[1])
                goto fail; /* '*' only at the end */
            g->kind = SEG_REST;
        } else if (p[0] == ':' && len > 1) {
            int params = 0;
            for (int k = 0; k < r->nsegs - 1; k++)
                params += r->segs[k].kind == SEG_PARAM;
            if (params == HTTP_MAX_PARAMS)
                goto fail; /* could never match */
            g->kind = SEG_PARAM;
            g->text = p + 1;
            g->len = len - 1;
        } else {
            g->kind = SEG_LIT;
            g->text = p;
            g->len = len;
        }
        if (!e)
            break;
        p = e + 1;
        if (!*p) { /* trailing slash: an empty literal segment */
            r->segs[r->nsegs++] = (route_seg){ SEG_LIT, p, 0 };
        }
    }
    r->handler = handler;
    r->udata = udata;
    s->nroutes++;
    return 0;
fail:
    free(r->pattern);
    free(r->method);
    free(r->segs);
    return -1;
}

/* Matches the raw path against a route, filling c->x->api.params. */
static int route_match(const route *rt, str path, http_conn *c)
{
    const char *p = path.p + 1, *end = path.p + path.len;
    uint8_t np = 0;
    if (rt->nsegs == 0)
        return path.len == 1;
    for (int i = 0; i < rt->nsegs; i++) {
        const route_seg *g = &rt->segs[i];
        if (g->kind == SEG_REST)
            break;
        if (p > end)
            return 0;
        const char *e = memchr(p, '/', (size_t)(end - p));
        if (!e)
            e = end;
        size_t len = (size_t)(e - p);
        if (g->kind == SEG_LIT) {
            if (len != g->len || memcmp(p, g->text, len) != 0)
                return 0;
        } else {
            if (len == 0 || np == HTTP_MAX_PARAMS)
                return 0;
            c->x->api.params[np].name = g->text;
            c->x->api.params[np].name_len = g->len;
            c->x->api.params[np].raw = (str){ p, len };
            np++;
        }
        p = e + 1;
        if (i == rt->nsegs - 1 && e != end)
            return 0; /* path has more segments than the route */
    }
    if (rt->segs[rt->nsegs - 1].kind != SEG_REST && p <= end)
        return 0;
    c->x->api.nparams = np;
    return 1;
}

static void api_dispatch(http_conn *c, const http_request *r, void *udata)
{
    brisk_server *s = udata;
    char allow[128];
    size_t allow_len = 0;
    for (int i = 0; i < s->nroutes; i++) {
        const route *rt = &s->routes[i];
        if (!route_match(rt, r->path, c))
            continue;
        int method_ok = !rt->method ||
                        (rt->method_len == r->method_name.len &&
                         memcmp(rt->method, r->method_name.p, rt->method_len) == 0) ||
                        (r->method == HTTP_HEAD && strcmp(rt->method, "GET") == 0);
        if (!method_ok) {
            if (allow_len + rt->method_len + 2 < sizeof allow) {
                if (allow_len) {
                    memcpy(allow + allow_len, ", ", 2);
                    allow_len += 2;
                }
                memcpy(allow + allow_len, rt->method, rt->method_len);
                allow_len += rt->method_len;
            }
            continue;
        }
        c->x->api.route = rt;
        rt->handler((brisk_req *)(void *)c, (brisk_res *)(void *)c, rt->udata);
        return;
    }
    c->x->api.nparams = 0;
    if (allow_len) {
        char extra[160];
        snprintf(extra, sizeof extra, "Allow: %.*s\r\n", (int)allow_len, allow);
        http_resp_error(c, 405, extra);
    } else {
        http_resp_error(c, 404, NULL);
    }
}

static void api_worker_hook(http_worker *hw, int start, void *udata)
{
    brisk_server *s = udata;
    if (s->hook)
        s->hook((brisk_loop *)(void *)hw, start, s->hook_udata);
}

void brisk_on_error(brisk_server *s, brisk_error_fn fn, void *udata)
{
    s->error_fn = fn;
    s->error_udata = udata;
}

void brisk_work_threads(brisk_server *s, int n)
{
    (void)s;
    workpool_set_threads(n);
}

static void api_error_page(http_conn *c, int status, void *udata)
{
    brisk_server *s = udata;
    c->x->api.status = status;
    s->error_fn((brisk_req *)(void *)c, (brisk_res *)(void *)c, status, s->error_udata);
}

void http_api_extra_headers(http_conn *c, const char *lines)
{
    while (*lines) {
        const char *eol = strstr(lines, "\r\n");
        const char *colon = strchr(lines, ':');
        if (!eol || !colon || colon > eol)
            return;
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        brisk_res_header_n((brisk_res *)(void *)c, (brisk_str){ lines, (size_t)(colon - lines) },
                           (brisk_str){ v, (size_t)(eol - v) });
        lines = eol + 2;
    }
}

void brisk_server_free(brisk_server *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nroutes; i++) {
        free(s->routes[i].pattern);
        free(s->routes[i].method);
        free(s->routes[i].segs);
    }
    free(s->routes);
    free(s);
}

void brisk_server_describe(brisk_server *s, const char *what)
{
    snprintf(s->what, sizeof s->what, "%s", what ? what : "");
    s->cli.what = s->what[0] ? s->what : NULL;
}

int brisk_run(brisk_server *s)
{
    http_app app = {
        .handler = api_dispatch,
        .udata = s,
        .worker_hook = api_worker_hook,
        .hook_udata = s,
        .api = s,
        .error_page = s->error_fn ? api_error_page : NULL,
        .error_udata = s,
    };
    int rc = http_server_run(&s->cli, &app);
    brisk_server_free(s);
    return rc;
}

void brisk_stop(brisk_server *s)
{
    (void)s;
    http_server_stop();
}

/* ---- request ---- */

brisk_str brisk_req_method(const brisk_req *req) { return BSTR(REQ(req)->x->req.method_name); }
brisk_str brisk_req_target(const brisk_req *req) { return BSTR(REQ(req)->x->req.target); }
brisk_str brisk_req_path(const brisk_req *req) { return BSTR(REQ(req)->x->req.path); }
brisk_str brisk_req_query(const brisk_req *req) { return BSTR(REQ(req)->x->req.query); }
brisk_str brisk_req_body(const brisk_req *req) { return BSTR(REQ(req)->x->req.body); }
int brisk_req_http_minor(const brisk_req *req) { return REQ(req)->x->req.version_minor; }

brisk_str brisk_req_header(const brisk_req *req, const char *name)
{
    const http_conn *c = REQ(req);
    str v = http_parser_header(&c->x->parser, c->x->req.head, (str){ name, strlen(name) });
    return BSTR(v);
}

void brisk_req_headers(const brisk_req *req, int (*fn)(brisk_str, brisk_str, void *), void *arg)
{
    const http_conn *c = REQ(req);
    for (uint32_t i = 0; i < c->x->parser.nheaders; i++) {
        const http_hdr_off *h = &c->x->parser.hdr[i];
        if (fn((brisk_str){ c->x->req.head + h->name_off, h->name_len },
               (brisk_str){ c->x->req.head + h->val_off, h->val_len }, arg))
            return;
    }
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = ascii_lower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Decodes %XX (and '+' when plus) from s into out (room for s.len + 1);
 * bad escapes are kept as they are. Returns the length; out is NUL-ended. */
static size_t url_decode(str s, char *out, int plus)
{
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        char ch = s.p[i];
        if (ch == '%' && i + 2 < s.len && hexval(s.p[i + 1]) >= 0 && hexval(s.p[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s.p[i + 1]) * 16 + hexval(s.p[i + 2]));
            i += 2;
        } else {
            out[o++] = plus && ch == '+' ? ' ' : ch;
        }
    }
    out[o] = '\0';
    return o;
}

static brisk_str decode_into_arena(brisk_req *req, str raw, int plus)
{
    char *out = brisk_req_alloc(req, raw.len + 1);
    if (!out)
        return (brisk_str){ NULL, 0 };
    size_t n = url_decode(raw, out, plus);
    return (brisk_str){ out, n };
}

brisk_str brisk_req_query_param(brisk_req *req, const char *key, unsigned index)
{
    str q = REQ(req)->x->req.query;
    size_t klen = strlen(key);
    size_t i = 0;
    while (i < q.len) {
        size_t s = i;
        while (i < q.len && q.p[i] != '&')
            i++;
        str pair = { q.p + s, i - s };
        i++;
        const char *eq = memchr(pair.p, '=', pair.len);
        str k = { pair.p, eq ? (size_t)(eq - pair.p) : pair.len };
        str v = eq ? (str){ eq + 1, pair.len - k.len - 1 } : (str){ pair.p + pair.len, 0 };
        /* Compare the decoded key without allocating: keys are short. */
        char kbuf[256];
        if (k.len >= sizeof kbuf)
            continue;
        if (url_decode(k, kbuf, 1) != klen || memcmp(kbuf, key, klen) != 0)
            continue;
        if (index--)
            continue;
        return decode_into_arena(req, v, 1);
    }
    return (brisk_str){ NULL, 0 };
}

brisk_str brisk_req_param(brisk_req *req, const char *name)
{
    http_conn *c = REQ(req);
    size_t n = strlen(name);
    for (int i = 0; i < c->x->api.nparams; i++)
        if (c->x->api.params[i].name_len == n && memcmp(c->x->api.params[i].name, name, n) == 0)
            return decode_into_arena(req, c->x->api.params[i].raw, 0);
    return (brisk_str){ NULL, 0 };
}

const char *brisk_req_remote_addr(brisk_req *req)
{
    http_conn *c = REQ(req);
    if (!c->x->api.remote[0])
        net_format_ip((const struct sockaddr *)&c->peer, c->x->api.remote, sizeof c->x->api.remote);
    return c->x->api.remote;
}

int brisk_req_remote_port(const brisk_req *req)
{
    return net_port((const struct sockaddr *)&REQ(req)->peer);
}

/* ---- response ---- */

static int managed_header(const char *name, size_t n)
{
    static const char *names[] = { "content-length", "transfer-encoding", "connection", "date",
                                   "server", "keep-alive" };
    for (size_t i = 0; i < ARRAY_LEN(names); i++)
        if (strlen(names[i]) == n && strncasecmp(names[i], name, n) == 0)
            return 1;
    return 0;
}

void brisk_res_status(brisk_res *res, int status)
{
    http_conn *c = RES(res);
    if (!c->x->api.headers_sent && status >= 100 && status <= 999)
        c->x->api.status = status;
}

void brisk_res_header_n(brisk_res *res, brisk_str name, brisk_str value)
{
    http_conn *c = RES(res);
    if (c->x->api.headers_sent || c->orphan || !name.len || managed_header(name.ptr, name.len))
        return;
    for (size_t i = 0; i < name.len; i++)
        if (name.ptr[i] == ':' || (unsigned char)name.ptr[i] <= ' ')
            return; /* not a header name */
    for (size_t i = 0; i < value.len; i++)
        if (value.ptr[i] == '\r' || value.ptr[i] == '\n' || value.ptr[i] == '\0')
            return; /* would split the response */
    if (name.len == 12 && strncasecmp(name.ptr, "content-type", 12) == 0)
        c->x->api.has_type = 1;
    /* Kept aside until the status is final and the head goes out. */
    buf *h = &c->x->api.hdrs;
    if (buf_reserve(h, name.len + value.len + 4) < 0)
        return;
    buf_put(h, name.ptr, name.len);
    buf_put(h, ": ", 2);
    buf_put(h, value.ptr, value.len);
    buf_put(h, "\r\n", 2);
}

void brisk_res_header(brisk_res *res, const char *name, const char *value)
{
    brisk_res_header_n(res, (brisk_str){ name, strlen(name) }, (brisk_str){ value, strlen(value) });
}

#define LEN_CHUNKED (UINT64_MAX - 1)

/* Puts the status line in front of the headers the app has added, then
 * the framing headers. */
static void send_head(http_conn *c, uint64_t content_length, const char *default_type)
{
    c->x->api.headers_sent = 1;
    http_resp_begin(c, c->x->api.status);
    if (c->x->api.hdrs.len)
        http_resp_raw(c, c->x->api.hdrs.data, c->x->api.hdrs.len);
    if (!c->x->api.has_type && default_type)
        http_resp_header(c, STR("Content-Type"), (str){ default_type, strlen(default_type) });
    if (content_length == LEN_CHUNKED) {
        if (c->x->req.version_minor >= 1) {
            c->x->api.chunked = 1;
            http_resp_raw(c, "Transfer-Encoding: chunked\r\n", 28);
            http_resp_end_headers(c, UINT64_MAX);
        } else {
            c->x->api.until_close = 1;
            c->must_close = 1;
            http_resp_end_headers(c, UINT64_MAX);
        }
    } else {
        http_resp_end_headers(c, content_length);
    }
}

static const char text_plain[] = "text/plain; charset=utf-8";

static int no_body_status(int status)
{
    return status == 204 || status == 304 || (status >= 100 && status < 200);
}

static void finish(http_conn *c)
{
    if (c->orphan) {
        c->state = CONN_HEAD; /* lets the flush list free it */
        http_conn_queue_flush(c);
        return;
    }
    http_resp_finish(c);
}

void brisk_res_write(brisk_res *res, const void *data, size_t len)
{
    http_conn *c = RES(res);
    if (c->orphan)
        return;
    if (!c->x->api.headers_sent)
        send_head(c, LEN_CHUNKED, text_plain);
    if (!len || c->head_only)
        return;
    if (c->x->api.chunked) {
        char size[24];
        int n = snprintf(size, sizeof size, "%zx\r\n", len);
        http_resp_raw(c, size, (size_t)n);
        http_resp_raw(c, data, len);
        http_resp_raw(c, "\r\n", 2);
    } else {
        http_resp_raw(c, data, len);
    }
    c->resp_body_len += len;
    if (!c->in_dispatch)
        http_conn_queue_flush(c);
}

void brisk_res_end(brisk_res *res, const void *body, size_t len)
{
    http_conn *c = RES(res);
    if (!c->orphan) {
        if (!c->x->api.headers_sent) {
            if (no_body_status(c->x->api.status)) {
                send_head(c, UINT64_MAX, NULL);
            } else {
                send_head(c, len, text_plain);
                http_resp_body(c, body, len);
            }
        } else {
            if (len)
                brisk_res_write(res, body, len);
            if (c->x->api.chunked && !c->head_only)
                http_resp_raw(c, "0\r\n\r\n", 5);
        }
    }
    finish(c);
}

void brisk_res_end_str(brisk_res *res, const char *body)
{
    brisk_res_end(res, body, body ? strlen(body) : 0);
}

void brisk_res_end_borrowed(brisk_res *res, const void *body, size_t len,
                            void (*release)(void *arg), void *arg)
{
    http_conn *c = RES(res);
    if (c->orphan || c->x->api.headers_sent) {
        if (!c->orphan)
            brisk_res_write(res, body, len);
        if (release)
            release(arg);
        brisk_res_end(res, NULL, 0);
        return;
    }
    send_head(c, len, text_plain);
    http_resp_body_ref(c, body, len, release, arg);
    finish(c);
}

static void close_fd(void *arg)
{
    close((int)(intptr_t)arg);
}

void brisk_res_end_file(brisk_res *res, const char *path)
{
    http_conn *c = RES(res);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        brisk_res_error(res, errno == EACCES ? 403 : 404);
        return;
    }
    if (c->orphan || c->x->api.headers_sent) {
        close(fd);
        brisk_res_end(res, NULL, 0);
        return;
    }
    if (!c->x->api.has_type) {
        str type = mime_lookup(c->conf->mime, (str){ path, strlen(path) });
        brisk_res_header_n(res, (brisk_str){ "Content-Type", 12 }, BSTR(type));
    }
    send_head(c, (uint64_t)st.st_size, NULL);
    http_resp_body_fd(c, fd, 0, (uint64_t)st.st_size, close_fd, (void *)(intptr_t)fd);
    finish(c);
}

void brisk_res_error(brisk_res *res, int status)
{
    http_conn *c = RES(res);
    if (c->orphan || c->x->api.headers_sent) {
        if (!c->orphan)
            c->must_close = 1; /* too late for a status: cut the body short */
        finish(c);
        return;
    }
    c->x->api.hdrs.len = 0; /* drop the headers set so far */
    c->x->api.has_type = 0;
    /* The same page as the errors brisk makes itself: the application's
     * renderer (brisk_on_error) when it has one, else the default page. */
    http_resp_error(c, status, NULL);
}

int brisk_res_aborted(const brisk_res *res)
{
    return RES(res)->orphan;
}

brisk_loop *brisk_res_loop(brisk_res *res)
{
    return (brisk_loop *)(void *)RES(res)->hw;
}

/* ---- blocking work ---- */

typedef struct {
    http_conn *c;
    void (*work)(void *);
    void (*done)(brisk_res *, void *);
    void *arg;
} work_job;

static void job_work(void *p)
{
    work_job *j = p;
    j->work(j->arg);
}

static void job_done(void *p)
{
    work_job *j = p;
    http_worker *hw = j->c->hw;
    hw->jobs--;
    j->done((brisk_res *)(void *)j->c, j->arg);
    free(j);
    if (hw->stopping && hw->nconns == 0 && hw->jobs == 0)
        loop_stop(&hw->w.loop);
}

int brisk_work(brisk_res *res, void (*work)(void *), void (*done)(brisk_res *, void *), void *arg)
{
    http_conn *c = RES(res);
    work_job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (work_job){ .c = c, .work = work, .done = done, .arg = arg };
    if (workpool_submit(&c->hw->w, job_work, job_done, j) < 0) {
        free(j);
        return -1;
    }
    c->hw->jobs++;
    return 0;
}

/* ---- loop: data, fds, timers ---- */

int brisk_loop_id(brisk_loop *l) { return LOOP(l)->w.id; }
int brisk_loop_workers(brisk_loop *l) { return LOOP(l)->nworkers; }

typedef struct {
    http_worker *hw;
    void (*work)(void *);
    void (*done)(void *);
    void *arg;
} loop_job;

static void loop_job_work(void *p)
{
    loop_job *j = p;
    j->work(j->arg);
}

static void loop_job_done(void *p)
{
    loop_job *j = p;
    http_worker *hw = j->hw;
    hw->jobs--;
    j->done(j->arg);
    free(j);
    if (hw->stopping && hw->nconns == 0 && hw->jobs == 0)
        loop_stop(&hw->w.loop);
}

int brisk_loop_work(brisk_loop *l, void (*work)(void *), void (*done)(void *), void *arg)
{
    loop_job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (loop_job){ .hw = LOOP(l), .work = work, .done = done, .arg = arg };
    if (workpool_submit(&j->hw->w, loop_job_work, loop_job_done, j) < 0) {
        free(j);
        return -1;
    }
    j->hw->jobs++;
    return 0;
}

void brisk_loop_set_data(brisk_loop *l, void *data) { LOOP(l)->app_data = data; }
void *brisk_loop_data(brisk_loop *l) { return LOOP(l)->app_data; }
uint64_t brisk_loop_now(brisk_loop *l) { return LOOP(l)->w.loop.now_ms; }

struct brisk_io {
    void *deferred_next; /* first: the worker's deferred-free list */
    loop_io io;
    http_worker *hw;
    brisk_io_cb cb;
    void *udata;
};

static void io_cb(loop *l, loop_io *lio, unsigned events)
{
    brisk_io *io = lio->udata;
    unsigned e = 0;
    if (events & (LOOP_READ | LOOP_HUP | LOOP_ERR))
        e |= BRISK_READ;
    if (events & (LOOP_WRITE | LOOP_ERR))
        e |= BRISK_WRITE;
    io->cb(io, e, io->udata);
}

static unsigned to_loop(unsigned events)
{
    return ((events & BRISK_READ) ? LOOP_READ : 0) | ((events & BRISK_WRITE) ? LOOP_WRITE : 0);
}

brisk_io *brisk_io_new(brisk_loop *l, int fd, unsigned events, brisk_io_cb cb, void *udata)
{
    brisk_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->hw = LOOP(l);
    io->cb = cb;
    io->udata = udata;
    if (loop_io_start(&io->hw->w.loop, &io->io, fd, to_loop(events), io_cb, io) < 0) {
        free(io);
        return NULL;
    }
    return io;
}

int brisk_io_set(brisk_io *io, unsigned events)
{
    return loop_io_set(&io->hw->w.loop, &io->io, to_loop(events)) < 0 ? -1 : 0;
}

void brisk_io_free(brisk_io *io)
{
    if (!io)
        return;
    loop_io_stop(&io->hw->w.loop, &io->io);
    /* An event for it may still be in this batch: free after it. */
    io->deferred_next = io->hw->deferred;
    io->hw->deferred = io;
}

struct brisk_timer {
    timer t;
    http_worker *hw;
    brisk_timer_cb cb;
    void *udata;
};

static void timer_fire(loop *l, timer *t)
{
    brisk_timer *bt = t->udata;
    bt->cb(bt, bt->udata);
}

brisk_timer *brisk_timer_new(brisk_loop *l, brisk_timer_cb cb, void *udata)
{
    brisk_timer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->hw = LOOP(l);
    t->cb = cb;
    t->udata = udata;
    timer_init(&t->t, timer_fire, t);
    return t;
}

void brisk_timer_start(brisk_timer *t, uint64_t ms) { timer_start(&t->hw->w.loop, &t->t, ms); }
void brisk_timer_stop(brisk_timer *t) { timer_stop(&t->hw->w.loop, &t->t); }

void brisk_timer_free(brisk_timer *t)
{
    if (!t)
        return;
    timer_stop(&t->hw->w.loop, &t->t);
    free(t);
}

/* ---- command-line flags ---- */

static void usage(FILE *f, const char *prog, int full)
{
    fprintf(f, "usage: %s [options]\n\n", prog);
    if (full)
        fprintf(f,
                "  -c, --config FILE      read the configuration from FILE (INI)\n"
                "  -t, --test             check the configuration and exit\n"
                "      --root DIR         document root\n"
                "      --cgi PREFIX=DIR   run CGI scripts of DIR under PREFIX (repeatable)\n"
                "      --access-log PATH|off\n"
                "      --error-log PATH|stderr\n");
    fprintf(f,
            "      --listen ADDR:PORT listen address, repeatable (127.0.0.1:8080, [::1]:8080)\n"
            "      --workers N|auto   worker threads (auto: one per CPU)\n"
            "  -h, --help             show this help\n"
            "  -v, --version          show the version\n");
    if (full)
        fprintf(f, "\nCommand-line options override the configuration file.\n"
                   "Signals: TERM/INT stop gracefully, HUP reloads, USR1 reopens log files.\n");
}

static void parse_args(brisk_server *s, int argc, char **argv, int full)
{
    enum { OPT_LISTEN = 256, OPT_ROOT, OPT_WORKERS, OPT_ACCESS_LOG, OPT_ERROR_LOG, OPT_CGI };
    static const struct option all[] = {
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "workers", required_argument, NULL, OPT_WORKERS },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "root", required_argument, NULL, OPT_ROOT },
        { "access-log", required_argument, NULL, OPT_ACCESS_LOG },
        { "error-log", required_argument, NULL, OPT_ERROR_LOG },
        { "cgi", required_argument, NULL, OPT_CGI },
        { NULL, 0, NULL, 0 },
    };
    static const struct option basic[] = {
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "workers", required_argument, NULL, OPT_WORKERS },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { NULL, 0, NULL, 0 },
    };
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    http_cli *cli = &s->cli;
    cli->prog = prog; /* argv outlives the server */
    int test_only = 0, ch;
    while ((ch = getopt_long(argc, argv, full ? "c:thv" : "hv", full ? all : basic, NULL)) != -1) {
        switch (ch) {
        case 'c': cli->conf_path = optarg; break;
        case 't': test_only = 1; break;
        case OPT_LISTEN:
            if (cli->nlisten == HTTP_MAX_LISTEN) {
                fprintf(stderr, "%s: too many --listen (max %d)\n", prog, HTTP_MAX_LISTEN);
                exit(2);
            }
            cli->listen[cli->nlisten++] = optarg;
            break;
        case OPT_ROOT: cli->root = optarg; break;
        case OPT_WORKERS: cli->workers = optarg; break;
        case OPT_ACCESS_LOG: cli->access_log = optarg; break;
        case OPT_ERROR_LOG: cli->error_log = optarg; break;
        case OPT_CGI:
            if (cli->ncgi == HTTP_MAX_CGI) {
                fprintf(stderr, "%s: too many --cgi (max %d)\n", prog, HTTP_MAX_CGI);
                exit(2);
            }
            cli->cgi[cli->ncgi++] = optarg;
            break;
        case 'h': usage(stdout, prog, full); exit(0);
        case 'v': printf("%s %s\n", prog, BRISK_VERSION); exit(0);
        default: usage(stderr, prog, full); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog, argv[optind]);
        usage(stderr, prog, full);
        exit(2);
    }
    if (test_only) {
        char err[CONF_ERR_MAX];
        http_conf *conf = http_conf_load(cli, err);
        if (!conf) {
            fprintf(stderr, "%s: %s\n%s: configuration test failed\n", prog, err, prog);
            exit(1);
        }
        fprintf(stderr, "%s: configuration %s%s%stest is successful\n", prog,
                cli->conf_path ? "file " : "", cli->conf_path ? cli->conf_path : "",
                cli->conf_path ? " " : "");
        http_conf_release(conf);
        exit(0);
    }
}

void brisk_server_args(brisk_server *s, int argc, char **argv)
{
    parse_args(s, argc, argv, 0);
}

void brisk_server_args_config(brisk_server *s, int argc, char **argv)
{
    s->cli.default_root = "www";
    parse_args(s, argc, argv, 1);
}

void brisk_serve_files(brisk_req *req, brisk_res *res, void *udata)
{
    http_conn *c = REQ(req);
    http_files_handle(c, &c->x->req);
}
