/* The brisk HTTP server process: configuration generations, one worker
 * thread per core with its own SO_REUSEPORT listeners, and the signals
 * (TERM/INT stop gracefully, HUP reloads, USR1 reopens logs). */
#ifndef BRISK_HTTP_SERVER_H
#define BRISK_HTTP_SERVER_H

#include "http/config.h"
#include "http/exchange.h"
#include "http/worker.h"

typedef struct {
    http_handler handler;   /* every request goes here, on a worker thread */
    void *udata;
    /* optional: called on each worker thread after it is set up (start = 1)
     * and before it is torn down (start = 0) */
    void (*worker_hook)(http_worker *hw, int start, void *udata);
    void *hook_udata;
    /* optional: renders the errors the server makes itself */
    void (*error_page)(http_exchange *x, int status, void *udata);
    void *error_udata;
} http_app;

/* Runs the server until a stop signal; returns the process exit code. app
 * must stay valid until then. */
int http_server_run(const http_cli *cli, const http_app *app);

/* Asks the running server to stop gracefully. Thread-safe. */
void http_server_stop(void);

#endif
