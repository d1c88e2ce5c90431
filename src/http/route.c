/* The public API's router: brisk_route compiles a pattern into segments;
 * every request is matched against the routes in order. A handler of the
 * exchange layer. */
#include "http/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum seg_kind { SEG_LIT, SEG_PARAM, SEG_REST };

typedef struct {
    uint8_t kind;
    const char *text; /* literal or parameter name */
    size_t len;
} route_seg;

struct api_route {
    char *method; /* NULL = any */
    size_t method_len;
    char *pattern;
    route_seg *segs;
    int nsegs;
    brisk_handler handler;
    void *udata;
};

int brisk_route(brisk_server *s, const char *method, const char *pattern, brisk_handler handler,
                void *udata)
{
    if (!pattern || pattern[0] != '/' || !handler)
        return -1;
    if (s->nroutes == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        api_route *r = realloc(s->routes, (size_t)cap * sizeof *r);
        if (!r)
            return -1;
        s->routes = r;
        s->cap = cap;
    }
    api_route *r = &s->routes[s->nroutes];
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


void api_routes_free(brisk_server *s)
{
    for (int i = 0; i < s->nroutes; i++) {
        free(s->routes[i].pattern);
        free(s->routes[i].method);
        free(s->routes[i].segs);
    }
    free(s->routes);
    s->routes = NULL;
    s->nroutes = s->cap = 0;
}

/* Matches the raw path against a route, filling x->params. */
static int route_match(const api_route *rt, bk_str path, http_exchange *x)
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
            x->params[np].name = g->text;
            x->params[np].name_len = g->len;
            x->params[np].raw = (bk_str){ p, len };
            np++;
        }
        p = e + 1;
        if (i == rt->nsegs - 1 && e != end)
            return 0; /* path has more segments than the route */
    }
    if (rt->segs[rt->nsegs - 1].kind != SEG_REST && p <= end)
        return 0;
    x->nparams = np;
    return 1;
}

void api_route_dispatch(http_exchange *x, void *udata)
{
    const http_request *r = &x->req;
    brisk_server *s = udata;
    char allow[128];
    size_t allow_len = 0;
    for (int i = 0; i < s->nroutes; i++) {
        const api_route *rt = &s->routes[i];
        if (!route_match(rt, r->path, x))
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
        x->route = rt;
        rt->handler(AS_REQ(x), AS_RES(x), rt->udata);
        return;
    }
    x->nparams = 0;
    if (allow_len) {
        char extra[160];
        snprintf(extra, sizeof extra, "Allow: %.*s\r\n", (int)allow_len, allow);
        http_exchange_error(x, 405, extra);
    } else {
        http_exchange_error(x, 404, NULL);
    }
}
