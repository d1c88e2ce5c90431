/* One request/response exchange: the waist between the protocols and the
 * handlers.
 *
 *   protocol (conn.c: HTTP/1.1; HTTP/2 next)  --drives-->  exchange  <--answer--  handlers
 *
 * A protocol owns framing, flow control and keep-alive. For each request it
 * fills an exchange (http_exchange_start), calls the worker's handler, and
 * implements http_proto_ops, through which the exchange hands it the
 * response. Handlers (static files, CGI, the public API) see only this
 * header: they never learn which protocol carried the request. Neither side
 * includes the other's headers.
 *
 * Lifetime: the protocol owns the exchange's storage; it is valid from the
 * handler call until the response is finished (http_exchange_finish, or an
 * _end / _error call), and every pointer in req too. */
#ifndef BRISK_HTTP_EXCHANGE_H
#define BRISK_HTTP_EXCHANGE_H

#include "core/buf.h"
#include "core/fmap.h"
#include "http/parse.h"
#include "http/worker.h"

#include <sys/socket.h>

/* The request a handler sees. */
typedef struct {
    enum http_method method;
    int version_minor;
    int version_major;  /* 1, or 2 for HTTP/2 (whose version_minor is 1 for handlers
                           that ask "1.1 or 1.0?") */
    bk_str method_name;
    bk_str target;   /* as sent */
    bk_str path;     /* target up to '?', still percent-encoded */
    bk_str query;    /* after '?', without it; empty when none */
    bk_str body;     /* decoded request body (Content-Length or chunked) */
    const char *head; /* start of the request head */
    const http_parser *parser;
} http_request;

static inline bk_str http_request_header(const http_request *r, enum http_hdr_id id)
{
    return http_parser_known(r->parser, r->head, id);
}

/* Releases what a borrowed body (memory or a file) held, once sent or
 * dropped. */
typedef void (*http_release_fn)(void *arg);

/* Body lengths for the head, besides a byte count: */
#define HTTP_LEN_NONE UINT64_MAX         /* no body, no length (204, 304, 1xx) */
#define HTTP_LEN_STREAM (UINT64_MAX - 1) /* unknown: the protocol frames the body */

/* Bodies up to this size are copied into the output rather than queued
 * as their own segment: cheaper than one more iovec. */
#define HTTP_COPY_MAX 1024

/* What the protocol carrying an exchange does for it. Header lines are
 * "Name: value\r\n" text, checked (no CR, LF or NUL in a value): HTTP/1.1
 * copies them, HTTP/2 would split them for HPACK. */
typedef struct {
    /* The head: status, the parts of the header block in order, the body
     * length (or HTTP_LEN_*), and body bytes that go with it (copied). */
    void (*send_head)(http_exchange *x, int status, const bk_str *lines, size_t nlines,
                      uint64_t length, const void *body, size_t body_len);
    /* Body bytes, copied; framed by the protocol for HTTP_LEN_STREAM. */
    void (*send_body)(http_exchange *x, const void *p, size_t n);
    /* Body bytes / a file range owned by someone else: release(arg) runs
     * once they are sent or dropped. */
    void (*send_ref)(http_exchange *x, const char *p, size_t n, http_release_fn release,
                     void *arg);
    /* map: NULL, or a mapping of the whole file behind fd that a
     * protocol copying file bytes in user space may read instead (see
     * http_exchange.map_files); its reader checks fmap_bad. */
    void (*send_fd)(http_exchange *x, int fd, const bk_fmap *map, uint64_t off, uint64_t len,
                    http_release_fn release, void *arg);
    /* The response is over (cut: its body was cut short, the peer must not
     * take it as complete). The exchange is the protocol's again. */
    void (*finish)(http_exchange *x, int cut);
    /* Response bytes queued and not yet sent (for backpressure). */
    size_t (*pending)(const http_exchange *x);
    /* The local address of the transport; 0 or -1. */
    int (*local_addr)(const http_exchange *x, struct sockaddr_storage *ss, socklen_t *len);
} http_proto_ops;

#define HTTP_MAX_PARAMS 8

typedef struct http_arena_chunk http_arena_chunk;

struct http_exchange {
    const http_proto_ops *proto;
    http_worker *hw;
    http_conf *conf;                /* the generation the connection started with */
    const struct sockaddr *peer;    /* the client (IPv4 or IPv6) */
    http_request req;

    /* the response, as handlers build it */
    int status;                     /* default 200 */
    uint8_t headers_sent;           /* the head has gone to the protocol */
    uint8_t has_type;               /* a Content-Type header was given */
    uint8_t aborted;                /* the client has gone: output is dropped */
    uint8_t close;                  /* ask the protocol to close after this response */
    uint8_t in_error_page;          /* the error renderer is running */
    uint8_t map_files;              /* the protocol encrypts file bytes in user space: a
                                       mapping (send_fd's map) saves it a copy */
    uint8_t redirects;              /* CGI local redirects followed */
    bk_buf hdrs;                       /* header lines, until the head is sent */
    http_arena_chunk *arena;        /* per-request memory */
    void (*on_abort)(void *arg);    /* the client has gone while a handler works */
    void *abort_arg;

    /* the public API's router (route.c) */
    const void *route;              /* the matched route */
    uint8_t nparams;
    struct { const char *name; size_t name_len; bk_str raw; } params[HTTP_MAX_PARAMS];
    char remote[64];                /* the client's address, formatted on demand */
};

/* ---- for protocols ---- */

/* A fresh exchange's state (once per storage). */
void http_exchange_init(http_exchange *x);
/* After a response: ready for the next request; all = 1 frees everything
 * (the storage is going away), else one arena chunk is kept. */
void http_exchange_reset(http_exchange *x, int all);
/* Fills x->req from a parsed head (offsets relative to head) and a body.
 * (Inline: it is on every request's path.) */
static inline void http_exchange_set_request(http_exchange *x, const char *head,
                                             const http_parser *p, bk_str body)
{
    http_request *r = &x->req;
    r->head = head;
    r->parser = p;
    r->method = (enum http_method)p->method;
    r->version_minor = p->version_minor;
    r->version_major = 1;
    r->method_name = http_parser_slice(head, p->line_off, p->method_len);
    r->target = http_parser_slice(head, p->target_off, p->target_len);
    const char *q = memchr(r->target.p, '?', r->target.len);
    if (q) {
        r->path = (bk_str){ r->target.p, (size_t)(q - r->target.p) };
        r->query = (bk_str){ q + 1, r->target.len - r->path.len - 1 };
    } else {
        r->path = r->target;
        r->query = (bk_str){ r->target.p + r->target.len, 0 };
    }
    /* absolute-form: keep only the path */
    if (r->path.len && r->path.p[0] != '/' && r->path.p[0] != '*') {
        const char *s = memchr(r->path.p, '/', r->path.len);
        s = s ? memchr(s + 2, '/', r->path.len - (size_t)(s + 2 - r->path.p)) : NULL;
        r->path = s ? (bk_str){ s, r->path.len - (size_t)(s - r->path.p) } : BK_STR("/");
    }
    r->body = body;
}
/* The client has gone while a handler owns x: output is dropped from now
 * on and the handler's abort callback (if any) runs. */
void http_exchange_abort(http_exchange *x);

/* ---- for handlers: the request ---- */

/* Per-request memory, 16-byte aligned, freed with the exchange; NULL when
 * out of memory. */
void *http_exchange_alloc(http_exchange *x, size_t size);
/* The client's address as text ("127.0.0.1"), and its port. */
const char *http_exchange_remote_addr(http_exchange *x);
int http_exchange_remote_port(const http_exchange *x);
/* fn for every request header in order; stops when fn returns nonzero. */
void http_exchange_headers(const http_exchange *x, int (*fn)(bk_str name, bk_str value, void *arg),
                           void *arg);
/* Response bytes not yet sent (backpressure for a producer). */
static inline size_t http_exchange_pending(const http_exchange *x)
{
    return x->proto->pending(x);
}

/* ---- for handlers: a response built step by step ---- */

/* Status (100..999) until the head is sent. */
void http_exchange_status(http_exchange *x, int status);
/* A header, checked: managed ones (Content-Length, Connection, Date, ...)
 * are ignored, a bad name or a value with CR/LF dropped. Until the head is
 * sent. */
void http_exchange_header(http_exchange *x, bk_str name, bk_str value);
/* Pre-formatted "Name: value\r\n" lines, each through http_exchange_header. */
void http_exchange_header_lines(http_exchange *x, const char *lines);
/* Streams body bytes: the first call sends the head (length unknown). */
void http_exchange_write(http_exchange *x, const void *p, size_t n);
/* Ends the response with body (copied): head, length and body together
 * unless the head has gone already. */
void http_exchange_end(http_exchange *x, const void *body, size_t n);
/* The same with a body owned by someone else (release(arg) once sent). */
void http_exchange_end_ref(http_exchange *x, const void *body, size_t n,
                           http_release_fn release, void *arg);
/* Ends the response with a file range (sendfile); content_type applies
 * when no Content-Type was set (empty: none). */
void http_exchange_end_fd(http_exchange *x, int fd, uint64_t off, uint64_t len,
                          bk_str content_type, http_release_fn release, void *arg);
/* Ends the response with the error page for status: the worker's renderer
 * (brisk_on_error) when it has one, else a short HTML page. extra: header
 * lines the status needs (Allow, Location, ...), or NULL. After the head
 * has gone, the body is cut short instead. */
void http_exchange_error(http_exchange *x, int status, const char *extra);
/* The same, dropping the headers set so far (brisk_res_error). */
void http_exchange_fail(http_exchange *x, int status);
/* Forgets the response begun so far (status, headers); not after the head
 * has gone. */
void http_exchange_restart(http_exchange *x);

/* ---- for handlers: a response in one go (they build the header lines) ---- */

/* Sends the head; lines are "Name: value\r\n" text (see http_proto_ops). */
static inline void http_exchange_send_head(http_exchange *x, int status, const bk_str *lines,
                                           size_t nlines, uint64_t length, const void *body,
                                           size_t body_len)
{
    x->headers_sent = 1;
    x->proto->send_head(x, status, lines, nlines, length, body, body_len);
}
static inline void http_exchange_send_ref(http_exchange *x, const char *p, size_t n,
                                          http_release_fn release, void *arg)
{
    x->proto->send_ref(x, p, n, release, arg);
}
static inline void http_exchange_send_fd(http_exchange *x, int fd, const bk_fmap *map,
                                         uint64_t off, uint64_t len, http_release_fn release,
                                         void *arg)
{
    x->proto->send_fd(x, fd, map, off, len, release, arg);
}
/* The response is complete. */
static inline void http_exchange_finish(http_exchange *x)
{
    x->proto->finish(x, 0);
}

#endif
