/* The public API's server: brisk_server settings, brisk_run and the hooks
 * it hands to the HTTP server (worker start/stop, error pages). */
#include "http/api.h"

#include "core/net.h"
#include "core/workpool.h"
#include "http/server.h"

#include <stdio.h>
#include <stdlib.h>

brisk_server *brisk_server_new(void)
{
    brisk_server *s = calloc(1, sizeof *s);
    return s;
}

brisk_server *brisk_create_server(brisk_handler handler, void *udata)
{
    brisk_server *s = brisk_server_new();
    if (s && brisk_route(s, NULL, "/*", handler, udata) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

int brisk_listen(brisk_server *s, const char *addr)
{
    if (s->cli.nlisten == HTTP_MAX_LISTEN)
        return -1;
    net_addr a;
    char err[128];
    int tls, h2c;
    if (http_listen_parse(addr, &a, &tls, &h2c, err, sizeof err) < 0)
        return -1;
    s->cli.listen[s->cli.nlisten++] = addr;
    s->listen_set = 1;
    return 0;
}

void brisk_ssl_certificate(brisk_server *s, const char *chain_file, const char *key_file)
{
    s->cli.ssl_cert = chain_file;
    s->cli.ssl_key = key_file;
}

void brisk_workers(brisk_server *s, int n)
{
    snprintf(s->workers_text, sizeof s->workers_text, "%d", n > 0 ? n : 0);
    s->cli.workers = n > 0 ? s->workers_text : "auto";
}

void brisk_max_body(brisk_server *s, size_t bytes)
{
    s->cli.max_body = bytes ? (uint64_t)bytes : 1;
}

void brisk_on_worker(brisk_server *s, brisk_worker_hook hook, void *udata)
{
    s->hook = hook;
    s->hook_udata = udata;
}

static void api_worker_hook(http_worker *hw, int start, void *udata)
{
    brisk_server *s = udata;
    if (s->hook)
        s->hook(AS_LOOP(hw), start, s->hook_udata);
}

void brisk_on_error(brisk_server *s, brisk_error_fn fn, void *udata)
{
    s->error_fn = fn;
    s->error_udata = udata;
}

void brisk_work_threads(brisk_server *s, int n)
{
    (void)s;
    workpool_set_threads(n);
}

static void api_error_page(http_exchange *x, int status, void *udata)
{
    brisk_server *s = udata;
    s->error_fn(AS_REQ(x), AS_RES(x), status, s->error_udata);
}

void brisk_server_free(brisk_server *s)
{
    if (!s)
        return;
    api_routes_free(s);
    free(s);
}

void brisk_server_describe(brisk_server *s, const char *what)
{
    snprintf(s->what, sizeof s->what, "%s", what ? what : "");
    s->cli.what = s->what[0] ? s->what : NULL;
}

int brisk_run(brisk_server *s)
{
    http_app app = {
        .handler = api_route_dispatch,
        .udata = s,
        .worker_hook = api_worker_hook,
        .hook_udata = s,
        .error_page = s->error_fn ? api_error_page : NULL,
        .error_udata = s,
    };
    int rc = http_server_run(&s->cli, &app);
    brisk_server_free(s);
    return rc;
}

void brisk_stop(brisk_server *s)
{
    (void)s;
    http_server_stop();
}
