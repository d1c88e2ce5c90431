/* An HTTP connection: the transport (conn.c: TCP or TLS, reading,
 * flushing, timers, closing) and the protocol on it, HTTP/1.1 (h1.c,
 * respond.c: framing, keep-alive, pipelining; one exchange per request) or
 * HTTP/2 (h2.c). Responses are queued by the exchanges through the
 * protocol's http_proto_ops and flushed once per read batch. Knows no
 * handler. Everything here runs on the connection's worker thread. */
#ifndef BRISK_HTTP_CONN_H
#define BRISK_HTTP_CONN_H

#include "core/buf.h"
#include "core/tls.h"
#include "http/exchange.h"
#include "http/parse.h"
#include "http/worker.h"

#include <netinet/in.h>
#include <sys/socket.h>

typedef struct http_conn http_conn;
typedef struct start_gate start_gate;

enum out_kind { OUT_BUF, OUT_MEM, OUT_FILE };

typedef struct {
    union {
        uint64_t off;      /* OUT_BUF: offset in out; OUT_FILE: file offset */
        const char *mem;   /* OUT_MEM */
    };
    uint64_t len;
    http_release_fn release; /* may be NULL */
    void *arg;
    const bk_fmap *map;    /* OUT_FILE: the file mapped, or NULL (see send_fd) */
    int fd;                /* OUT_FILE */
    uint8_t kind;
} out_seg;

#define HTTP_OUT_SEGS 40

enum conn_state {
    CONN_HEAD,      /* reading a request head (or idle between requests) */
    CONN_BODY,      /* reading a request body */
    CONN_HANDLER,   /* a handler owns the request (async) */
    CONN_LINGER,    /* response sent; draining input before close */
    CONN_TLS_HANDSHAKE, /* accepted on an ssl listener, handshake under way */
    CONN_H2,        /* HTTP/2 (h2.c): streams, not a request at a time */
};

/* What a busy connection needs while one request/response is under way:
 * the parser, the body, the output queue and the exchange handed to the
 * handler. About 3 KiB, so an idle keep-alive connection holds none: the
 * connection takes one from its worker's pool when bytes arrive and gives
 * it back when it goes idle (http_conn.b is NULL in between). */
typedef struct http_conn_busy http_conn_busy;
struct http_conn_busy {
    http_conn_busy *pool_next;     /* worker's pool of spare blocks */
    http_conn *c;                  /* the connection it serves now */
    http_parser parser;
    http_chunked chunked;
    uint64_t body_left;            /* Content-Length bytes still to read */
    bk_buf body;

    bk_buf out;
    out_seg segs[HTTP_OUT_SEGS];
    uint32_t nsegs, seg_head;
    uint8_t header_timer_due;      /* a request ended in a read batch with more input */
    uint8_t streaming;             /* response body of unknown length */
    uint8_t chunked_out;           /* ... sent with chunked framing */

    http_exchange x;               /* the request and response, for the handler */
    struct h2_session *h2;         /* HTTP/2 connections: the session (kept while open) */
};

struct http_conn {
    bk_io io;
    bk_timer tm;
    http_worker *hw;
    http_conf *conf;               /* the generation this connection started with */
    http_conn *prev, *next;        /* worker's list of live connections */
    /* A connection is on the free or zombie list only once its socket is
     * closed, and its TLS session is freed with the socket: the two share
     * the space, so a plain connection stays as small as before. */
    union {
        http_conn *free_next;      /* free / zombie lists (socket closed) */
        tls_conn *tls;             /* socket open: its TLS session; NULL for plain TCP */
    };
    http_conn *flush_next;         /* worker's list of connections to flush */
    http_conn_busy *b;             /* the request under way; NULL when idle */

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
    uint8_t h2c_only;              /* accepted on an h2c listener: the preface or nothing */
    uint8_t fin_due;               /* lingering: TLS records to send before the FIN */
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

/* Accept handler for listening sockets; udata is the http_worker. */
void http_conn_accept(bk_loop *l, bk_io *io, unsigned events);
/* Closes idle connections and marks busy ones to close after their
 * response (graceful stop). */
void http_conn_close_idle(http_worker *hw);
void http_conn_close_all(http_worker *hw);
/* A new configuration: HTTP/2 connections get a GOAWAY. */
void http_conn_conf_changed(http_worker *hw);
/* Flushes connections written to from callbacks, then frees zombies;
 * called at the end of each loop iteration. */
void http_conn_reap(http_worker *hw);
/* Frees the worker's spare input buffers and request blocks (at exit). */
void http_conn_release_pools(http_worker *hw);
/* Once a second: resumes accepting after a pause for lack of descriptors. */
void http_conn_tick(http_worker *hw);
/* Counts the worker's connections by state (status endpoint). */
void http_conn_census(http_worker *hw, http_census *out);

/* ---- the transport (conn.c), for the protocols ---- */

#define BODY_KEEP_MAX (64 * 1024) /* larger body buffers are freed after use */

/* The output queue: bytes copied into it, or segments (memory, file). */
char *http_conn_out_reserve(http_conn *c, size_t n);
void http_conn_out_commit(http_conn *c, size_t n);
void http_conn_out_seg(http_conn *c, out_seg s);
/* Writes the queue: 1 when all is sent, 0 when the socket is full, -1 on
 * error (close). */
int http_conn_flush(http_conn *c);
/* Flushes and waits for what the socket says: 1 all sent (waiting for
 * input again), 0 the socket is full (waiting to write), -1 c is closed. */
int http_conn_flush_step(http_conn *c);
/* Closes the socket (a handler still at work keeps the struct). */
void http_conn_close(http_conn *c);
/* After the last response: close, lingering when the client may still
 * be sending. */
void http_conn_close_after_response(http_conn *c);
void http_conn_arm(http_conn *c, uint64_t ms);
/* Moves the unparsed input to the start of the buffer. */
void http_conn_compact(http_conn *c);
/* Gives the input buffer back (nothing unparsed in it). */
void http_conn_release_input(http_conn *c);
/* Idle between requests: the input buffer and the request block go back. */
void http_conn_release_idle(http_conn *c);

/* ---- HTTP/1.1 (h1.c, respond.c) ---- */

/* Handles every complete request in the input buffer, in order. */
void http_h1_process(http_conn *c);
/* After a batch: flush, then decide what to wait for. */
void http_h1_after_batch(http_conn *c);
/* The response has been written: the next request may start. */
void http_h1_finish_request(http_conn *c);
/* HTTP/1.1's side of the exchange (respond.c). */
extern const http_proto_ops http_h1_ops;
/* One access-log line (nginx's "combined" format). */
void http_access_log(http_worker *hw, const struct sockaddr *peer, bk_str line, int status,
                     uint64_t bytes, bk_str ref, bk_str ua);
/* Output was added outside a read batch: flush at the end of the loop
 * iteration. */
void http_conn_queue_flush(http_conn *c);

static inline http_conn *http_conn_of(const http_exchange *x)
{
    return BK_CONTAINER_OF(x, http_conn_busy, x)->c;
}

#endif
