/* The status endpoint (`status = /PATH` in the configuration; off by
 * default), like nginx's stub_status and h2o's status: connections by state,
 * requests, responses by class and bytes, per worker and in total, as
 * Prometheus text (GET PATH) or JSON (GET PATH?format=json, or Accept:
 * application/json). Only loopback clients get it (403 otherwise). */
#ifndef BRISK_HTTP_STATUS_H
#define BRISK_HTTP_STATUS_H

#include "http/exchange.h"

/* Whether x asks for the status endpoint of its configuration. */
int http_status_wanted(const http_exchange *x);
/* Answers it: collects a snapshot on every worker's own thread (the
 * protocol's census of its connections, the worker's counters), then
 * responds from this one (the handler owns the request meanwhile). */
void http_status_handle(http_exchange *x);

#endif
