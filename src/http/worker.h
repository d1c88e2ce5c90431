/* One HTTP worker thread's state: its event loop, configuration, caches,
 * counters and the pools of the protocol above it. Every layer of src/http
 * reaches its worker through this header; the protocol's own types appear
 * here only as opaque pointers. Everything runs on the worker's thread. */
#ifndef BRISK_HTTP_WORKER_H
#define BRISK_HTTP_WORKER_H

#include "core/log.h"
#include "core/worker.h"
#include "http/config.h"
#include "http/fcache.h"

typedef struct http_worker http_worker;
typedef struct http_exchange http_exchange;

_Static_assert(HTTP_MAX_LISTEN <= 32, "http_worker.listen_tls is a 32-bit mask");

/* A request handler: it answers x with the http_exchange_* calls, now or
 * later from the same worker (exchange.h). */
typedef void (*http_handler)(http_exchange *x, void *udata);

/* Counters a worker keeps for the status endpoint (status.c). Written by
 * the worker only, read by a snapshot that runs on the worker's thread. */
typedef struct {
    uint64_t accepted;             /* connections */
    uint64_t requests;             /* heads parsed (refused ones too) */
    uint64_t responses[5];         /* by class: 1xx .. 5xx */
    uint64_t bytes_in, bytes_out;  /* socket bytes */
} http_stats;

/* The protocol's count of its connections by state (status endpoint). */
typedef struct {
    uint64_t active, reading, writing, idle;
} http_census;

struct http_worker {
    bk_worker w;
    http_worker *peers;            /* every worker of the server (peers[0..nworkers)) */
    http_stats stats;
    http_conf *conf;               /* current generation */
    http_handler handler;          /* every request goes here */
    void *handler_udata;

    int listen_fd[HTTP_MAX_LISTEN];
    bk_io listen_io[HTTP_MAX_LISTEN];
    int nlisten;
    uint32_t listen_tls;           /* bit k: listen_fd[k] speaks TLS */
    uint32_t listen_h2c;           /* bit k: listen_fd[k] speaks HTTP/2 only (prior knowledge) */
    int accepting;

    /* the protocol's (conn.c): connections, their pools */
    struct http_conn *conns;       /* live connections */
    uint32_t nconns;
    struct http_conn *free_conns, *zombies;
    struct http_conn_busy *xpool;  /* spare per-request blocks */
    uint32_t nxpool;
    struct http_conn *flush_list;  /* written to outside a read batch */
    uint32_t nfree;
    char **bufpool;                /* spare connection input buffers */
    uint32_t nbufpool, bufpool_cap, buf_size;
    /* counts connections by state; set by the server (status endpoint) */
    void (*census)(http_worker *hw, http_census *out);

    fcache *files;
    bk_logbuf access;
    int access_on;
    bk_timer tick;                    /* once a second: log flush */
    bk_timer deadline;                /* graceful stop deadline */
    int stopping;
    uint32_t jobs;                 /* brisk_work jobs in flight */
    uint32_t cgi_running;          /* CGI processes of this worker */
    struct cgi *cgis;              /* and their states */
    void *app_data;                /* brisk_loop_set_data */
    void (*hook)(http_worker *hw, int start, void *udata);
    void *hook_udata;
    void *deferred;                /* blocks to free at the end of the iteration */
    struct start_gate *ready;      /* all workers set up before any serves */
    int nworkers;
    /* renders errors the server makes itself (brisk_on_error); NULL = default */
    void (*error_page)(http_exchange *x, int status, void *udata);
    void *error_udata;
};

/* A graceful stop is over when no connection and no job is left. */
static inline void http_worker_stop_if_drained(http_worker *hw)
{
    if (hw->stopping && hw->nconns == 0 && hw->jobs == 0)
        loop_stop(&hw->w.loop);
}

#endif
