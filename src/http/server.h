/* The brisk HTTP server process: configuration generations, one worker
 * thread per core with its own SO_REUSEPORT listeners, and the signals
 * (TERM/INT stop gracefully, HUP reloads, USR1 reopens logs). */
#ifndef BRISK_HTTP_SERVER_H
#define BRISK_HTTP_SERVER_H

#include "http/config.h"
#include "http/conn.h"

/* Runs the server until a stop signal; returns the process exit code.
 * Every request goes to handler(c, req, udata) on a worker thread. */
int http_server_run(const http_cli *cli, http_handler handler, void *udata);

#endif
