/* The status endpoint (`status = /PATH` in the configuration; off by
 * default), like nginx's stub_status and h2o's status: connections by state,
 * requests, responses by class and bytes, per worker and in total, as
 * Prometheus text (GET PATH) or JSON (GET PATH?format=json, or Accept:
 * application/json). Only loopback clients get it (403 otherwise). */
#ifndef BRISK_HTTP_STATUS_H
#define BRISK_HTTP_STATUS_H

#include "http/conn.h"

/* Whether r asks for the status endpoint of c's configuration. */
int http_status_wanted(const http_conn *c, const http_request *r);
/* Answers it: collects a snapshot on every worker's own thread, then
 * responds from this one (the request stays in CONN_HANDLER meanwhile). */
void http_status_handle(http_conn *c, const http_request *r);

#endif
