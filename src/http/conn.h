/* HTTP/1.1 connections: reading, framing, dispatching requests to a
 * handler, queueing responses and flushing them once per read batch.
 * Everything here runs on the connection's worker thread. */
#ifndef BRISK_HTTP_CONN_H
#define BRISK_HTTP_CONN_H

#include "core/buf.h"
#include "core/log.h"
#include "core/worker.h"
#include "http/config.h"
#include "http/fcache.h"
#include "http/parse.h"

#include <netinet/in.h>
#include <sys/socket.h>

typedef struct http_conn http_conn;
typedef struct http_worker http_worker;
typedef struct start_gate start_gate;

/* The request a handler sees. Every pointer stays valid until the response
 * is finished (http_resp_finish). */
typedef struct {
    enum http_method method;
    int version_minor;
    str method_name;
    str target;   /* as sent */
    str path;     /* target up to '?', still percent-encoded */
    str query;    /* after '?', without it; empty when none */
    str body;     /* decoded request body (Content-Length or chunked) */
    const char *head; /* start of the request head */
    const http_parser *parser;
} http_request;

static inline str http_request_header(const http_request *r, enum http_hdr_id id)
{
    return http_parser_known(r->parser, r->head, id);
}

/* A handler writes a response with the http_resp_* calls below and calls
 * http_resp_finish, now or later from the same worker. */
typedef void (*http_handler)(http_conn *c, const http_request *r, void *udata);

enum out_kind { OUT_BUF, OUT_MEM, OUT_FILE };

/* Releases what an OUT_MEM / OUT_FILE segment borrowed, once sent or
 * dropped. */
typedef void (*out_release_fn)(void *arg);

typedef struct {
    union {
        uint64_t off;      /* OUT_BUF: offset in out; OUT_FILE: file offset */
        const char *mem;   /* OUT_MEM */
    };
    uint64_t len;
    out_release_fn release; /* may be NULL */
    void *arg;
    int fd;                /* OUT_FILE */
    uint8_t kind;
} out_seg;

#define HTTP_MAX_PARAMS 8

/* State of the public handler API (src/http/api.c) for one request. */
typedef struct arena_chunk arena_chunk;
typedef struct {
    const void *route;              /* the matched route */
    struct { const char *name; size_t name_len; str raw; } params[HTTP_MAX_PARAMS];
    uint8_t nparams;
    uint8_t headers_sent;
    uint8_t chunked;                /* body streamed with chunked framing */
    uint8_t until_close;            /* HTTP/1.0 stream: body ends at close */
    uint8_t has_type;               /* a Content-Type header was given */
    uint8_t redirects;              /* CGI local redirects followed */
    int status;
    buf hdrs;                       /* app headers, until the head is sent */
    arena_chunk *arena;             /* per-request memory */
    void (*on_abort)(void *arg);    /* the socket closed while the handler works */
    void *abort_arg;
    char remote[64];                /* formatted on demand */
} http_api_state;

#define HTTP_OUT_SEGS 40

enum conn_state {
    CONN_HEAD,      /* reading a request head (or idle between requests) */
    CONN_BODY,      /* reading a request body */
    CONN_HANDLER,   /* a handler owns the request (async) */
    CONN_LINGER,    /* response sent; draining input before close */
};

/* What one request/response needs while it is under way: the parser, the
 * body, the output queue and the handler API's state. About 3 KiB, so an
 * idle keep-alive connection holds none: the connection takes one from its
 * worker's pool when bytes arrive and gives it back when it goes idle
 * (http_conn.x is NULL in between). */
typedef struct http_exchange http_exchange;
struct http_exchange {
    http_exchange *pool_next;      /* worker's pool of spare exchanges */
    http_parser parser;
    http_chunked chunked;
    uint64_t body_left;            /* Content-Length bytes still to read */
    buf body;
    http_request req;

    buf out;
    out_seg segs[HTTP_OUT_SEGS];
    uint32_t nsegs, seg_head;
    uint8_t header_timer_due;      /* a request ended in a read batch with more input */

    http_api_state api;
};

struct http_conn {
    loop_io io;
    timer tm;
    http_worker *hw;
    http_conf *conf;               /* the generation this connection started with */
    http_conn *prev, *next;        /* worker's list of live connections */
    http_conn *free_next;          /* free / zombie lists */
    http_conn *flush_next;         /* worker's list of connections to flush */
    http_exchange *x;              /* the request under way; NULL when idle */

    char *in;                      /* from the worker's buffer pool; NULL when idle */
    uint32_t in_len, in_cap;
    uint32_t req_start;            /* offset of the current request's head */
    uint32_t head_len;

    uint8_t state;
    uint8_t keep_alive;            /* decided for the current response */
    uint8_t must_close;            /* framing lost: close after this response */
    uint8_t head_only;             /* HEAD: drop body bytes */
    uint8_t resp_open;             /* a response is being written */
    uint8_t closing;
    uint8_t sent_continue;
    uint8_t write_blocked;
    uint8_t in_dispatch;           /* inside conn_process: the batch flush follows */
    uint8_t flush_queued;          /* on the worker's flush list */
    uint8_t orphan;                /* socket closed while a handler owns the request */
    uint8_t in_error_page;         /* the error renderer is running */
    uint32_t requests;             /* served on this connection */
    int status;                    /* of the current response */
    uint64_t resp_body_len;        /* for the access log */

    /* The peer: IPv4 or IPv6 (listeners are IP only); not a
     * sockaddr_storage, whose 128 bytes an idle connection would carry. */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;
    socklen_t peer_len;
};

/* Per-worker HTTP state. */
/* Counters a worker keeps for the status endpoint (status.c). Written by
 * the worker only, read by a snapshot that runs on the worker's thread. */
typedef struct {
    uint64_t accepted;             /* connections */
    uint64_t requests;             /* heads parsed (refused ones too) */
    uint64_t responses[5];         /* by class: 1xx .. 5xx */
    uint64_t bytes_in, bytes_out;  /* socket bytes */
} http_stats;

struct http_worker {
    worker w;
    http_worker *peers;            /* every worker of the server (peers[0..nworkers)) */
    http_stats stats;
    http_conf *conf;               /* current generation */
    http_handler handler;
    void *handler_udata;

    int listen_fd[HTTP_MAX_LISTEN];
    loop_io listen_io[HTTP_MAX_LISTEN];
    int nlisten;
    int accepting;

    http_conn *conns;              /* live connections */
    uint32_t nconns;
    http_conn *free_conns, *zombies;
    http_exchange *xpool;          /* spare exchanges */
    uint32_t nxpool;
    http_conn *flush_list;         /* written to outside a read batch */
    uint32_t nfree;

    char **bufpool;                /* spare connection input buffers */
    uint32_t nbufpool, bufpool_cap, buf_size;

    fcache *files;
    logbuf access;
    int access_on;
    timer tick;                    /* once a second: log flush */
    timer deadline;                /* graceful stop deadline */
    int stopping;
    uint32_t jobs;                 /* brisk_work jobs in flight */
    uint32_t cgi_running;          /* CGI processes of this worker */
    struct cgi *cgis;              /* and their states */
    void *app_data;                /* brisk_loop_set_data */
    void (*hook)(http_worker *hw, int start, void *udata);
    void *hook_udata;
    void *deferred;                /* blocks to free at the end of the iteration */
    struct brisk_server *app;      /* the public API server, if any */
    struct start_gate *ready;      /* all workers set up before any serves */
    int nworkers;
    /* renders errors the server makes itself (brisk_on_error); NULL = default */
    void (*error_page)(http_conn *c, int status, void *udata);
    void *error_udata;
};

/* Accept handler for listening sockets; udata is the http_worker. */
void http_conn_accept(loop *l, loop_io *io, unsigned events);
/* Closes idle connections and marks busy ones to close after their
 * response (graceful stop). */
void http_conn_close_idle(http_worker *hw);
void http_conn_close_all(http_worker *hw);
/* Flushes connections written to from callbacks, then frees zombies;
 * called at the end of each loop iteration. */
void http_conn_reap(http_worker *hw);
void http_worker_release_buffers(http_worker *hw);
/* Once a second: resumes accepting after a pause for lack of descriptors. */
void http_conn_tick(http_worker *hw);

/* Internal to src/http: the output queue and request completion. */
char *http_conn_out_reserve(http_conn *c, size_t n);
void http_conn_out_commit(http_conn *c, size_t n);
void http_conn_out_seg(http_conn *c, out_seg s);
void http_conn_finish_request(http_conn *c);
/* Output was added outside a read batch: flush at the end of the loop
 * iteration. */
void http_conn_queue_flush(http_conn *c);

/* Resets the handler API state after a request (api.c); all = 1 also
 * frees the arena's first chunk. */
void http_api_reset(http_api_state *api, int all);
/* Frees the worker's spare exchanges (at worker exit). */
void http_worker_release_exchanges(http_worker *hw);
/* Adds pre-formatted "Name: value\r\n" lines to the app's pending headers. */
void http_api_extra_headers(http_conn *c, const char *lines);

/* ---- responses (respond.c) ---- */

/* Status line, Server and Date. */
void http_resp_begin(http_conn *c, int status);
/* One header line; name and value must not contain CR or LF. */
void http_resp_header(http_conn *c, str name, str value);
/* Pre-formatted "Name: value\r\n" lines. */
void http_resp_raw(http_conn *c, const char *p, size_t n);
/* A whole response head and a small body with one reservation in the
 * output: the same bytes as http_resp_begin, http_resp_raw of each part
 * (pre-formatted "Name: value\r\n" text, split anywhere), then
 * http_resp_end_headers(content_length) and http_resp_body(body). */
void http_resp_head(http_conn *c, int status, const str *parts, size_t nparts,
                    uint64_t content_length, const void *body, size_t body_len);
/* Bodies up to this size are copied into the output rather than queued
 * as their own segment: cheaper than one more iovec. */
#define HTTP_COPY_MAX 1024
/* Content-Length, Connection, and the blank line. */
void http_resp_end_headers(http_conn *c, uint64_t content_length);
/* Body bytes, copied (skipped for HEAD). */
void http_resp_body(http_conn *c, const void *p, size_t n);
/* Body bytes owned by someone else: release(arg) runs once they are sent
 * or dropped (also for HEAD, right away). */
void http_resp_body_ref(http_conn *c, const char *p, size_t n, out_release_fn release, void *arg);
/* A file range sent with sendfile; release(arg) as above. */
void http_resp_body_fd(http_conn *c, int fd, uint64_t off, uint64_t len, out_release_fn release,
                       void *arg);
/* Ends the response: access log, then the connection moves on. */
void http_resp_finish(http_conn *c);
/* A complete short HTML error page; extra is pre-formatted header lines. */
void http_resp_error(http_conn *c, int status, const char *extra);

#endif
