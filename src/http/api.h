/* Internal to the public handler API (include/brisk/brisk.h): the pieces
 * its files share. brisk_req and brisk_res are the exchange (exchange.h)
 * seen through two opaque types, brisk_loop is the HTTP worker: no
 * allocation per request. The API sits on the exchange layer only; it
 * never sees a connection or a protocol. */
#ifndef BRISK_HTTP_API_H
#define BRISK_HTTP_API_H

#include "brisk/brisk.h"
#include "http/config.h"
#include "http/exchange.h"
#include "http/worker.h"

#define REQ(r) ((http_exchange *)(void *)(r))
#define RES(r) ((http_exchange *)(void *)(r))
#define LOOP(l) ((http_worker *)(void *)(l))
#define AS_REQ(x) ((brisk_req *)(void *)(x))
#define AS_RES(x) ((brisk_res *)(void *)(x))
#define AS_LOOP(hw) ((brisk_loop *)(void *)(hw))
#define BSTR(s) ((brisk_str){ (s).p, (s).len })
#define XSTR(s) ((bk_str){ (s).ptr, (s).len })

typedef struct api_route api_route;

struct brisk_server {
    http_cli cli;
    api_route *routes;
    int nroutes, cap;
    brisk_worker_hook hook;
    void *hook_udata;
    int listen_set; /* brisk_listen was called: replace, do not add to, the default */
    brisk_error_fn error_fn;
    void *error_udata;
    char workers_text[16];
    char what[256]; /* brisk_server_describe */
};

/* The router (route.c): the handler every request of a brisk_server goes
 * to; udata is the server. */
void api_route_dispatch(http_exchange *x, void *udata);
/* Frees the server's routes. */
void api_routes_free(brisk_server *s);

#endif
