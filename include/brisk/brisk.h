/*
 * brisk: a Node.js-style HTTP server API in C.
 *
 *     #include <brisk/brisk.h>
 *
 *     static void hello(brisk_req *req, brisk_res *res, void *udata)
 *     {
 *         brisk_res_header(res, "Content-Type", "text/plain");
 *         brisk_res_end_str(res, "Hello World");
 *     }
 *
 *     int main(int argc, char **argv)
 *     {
 *         brisk_server *server = brisk_create_server(hello, NULL);
 *         brisk_server_args(server, argc, argv);   // --listen, --workers
 *         return brisk_run(server);
 *     }
 *
 * THREADS. brisk_run starts one worker thread per core (or as set). Each
 * worker has its own event loop; a connection, its requests and every
 * callback about them run on one worker. Handlers must not block: to wait,
 * return without ending the response and end it later from a callback on
 * the same worker (a timer, an fd watcher, or brisk_work's done callback).
 * Nothing here is thread-safe unless it says so.
 *
 * LIFETIMES. brisk_req and brisk_res are valid from the handler call until
 * brisk_res_end (or brisk_res_end_*) returns; every pointer and slice
 * obtained from them too. Memory from brisk_req_alloc lives as long. If the
 * client goes away before the end, the objects stay valid until the handler
 * ends the response, which is then discarded (brisk_res_aborted tells).
 *
 * STRINGS. brisk_str is a (pointer, length) slice, not NUL-terminated unless
 * a function says so. Request data is binary safe.
 */
#ifndef BRISK_BRISK_H
#define BRISK_BRISK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_VERSION_STRING "0.1.0"

typedef struct {
    const char *ptr;
    size_t len;
} brisk_str;

typedef struct brisk_server brisk_server;
typedef struct brisk_req brisk_req;
typedef struct brisk_res brisk_res;
typedef struct brisk_loop brisk_loop;
typedef struct brisk_io brisk_io;
typedef struct brisk_timer brisk_timer;

typedef void (*brisk_handler)(brisk_req *req, brisk_res *res, void *udata);

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

/* A server with no routes, listening on 127.0.0.1:8080 unless told
 * otherwise, one worker per CPU. NULL when out of memory. */
brisk_server *brisk_server_new(void);

/* brisk_server_new plus a route sending every request to handler. */
brisk_server *brisk_create_server(brisk_handler handler, void *udata);

/* Reads the standard flags: --listen ADDR:PORT (repeatable; 127.0.0.1:8080,
 * [::1]:8080; "--listen ADDR:PORT ssl" serves HTTPS there), --ssl-cert FILE
 * and --ssl-key FILE (for the ssl listeners), --workers N|auto, --help,
 * --version. Prints and exits on --help, --version and bad flags. */
void brisk_server_args(brisk_server *s, int argc, char **argv);

/* A few words about the application for its start-up log line, e.g.
 * "database sqlite foods.db": "brisk-foods 0.1.0 started: 2 workers,
 * listening on 127.0.0.1:8080, database sqlite foods.db". The program's
 * name comes from argv[0] (brisk_server_args). The text is copied. */
void brisk_server_describe(brisk_server *s, const char *what);

/* Adds a listen address; the first call replaces the default. 0 or -1.
 * "0.0.0.0:8443 ssl" serves HTTPS (HTTP/1.1 over TLS 1.2/1.3) there, with
 * the certificate of brisk_ssl_certificate. addr must stay valid until
 * brisk_run returns. */
int brisk_listen(brisk_server *s, const char *addr);

/* The certificate chain and private key (PEM files) of the ssl listeners.
 * brisk_run fails with a clear message when they cannot be loaded, the
 * certificate has expired or the key does not match. The names must stay
 * valid until brisk_run returns; SIGHUP loads the files again. */
void brisk_ssl_certificate(brisk_server *s, const char *chain_file, const char *key_file);

/* Worker threads; 0 = one per CPU. */
void brisk_workers(brisk_server *s, int n);

/* Largest request body accepted (413 beyond); default 1 MiB. */
void brisk_max_body(brisk_server *s, size_t bytes);

/* Routes a method ("GET"; NULL = any) and a path pattern to a handler:
 *   "/items"      exactly this path;
 *   "/items/:id"  a parameter per ":name" segment (brisk_req_param);
 *   "/static/" followed by '*': this prefix and everything below it.
 * Routes are tried in the order they were added; a path that matches a
 * route of another method gets 405 with Allow, no match at all 404.
 * udata is passed to the handler as is. Returns 0, or -1 (bad pattern or
 * out of memory). Add routes before brisk_run. */
int brisk_route(brisk_server *s, const char *method, const char *pattern,
                brisk_handler handler, void *udata);

/* Called on each worker thread before it serves, and after it stopped
 * (start = 0): the place to open per-worker resources such as database
 * connections. */
typedef void (*brisk_worker_hook)(brisk_loop *loop, int start, void *udata);
void brisk_on_worker(brisk_server *s, brisk_worker_hook hook, void *udata);

/* Renders the error responses brisk makes itself (400 for a malformed
 * request, 404/405 for no route, 413 for a body over the limit, ...) instead
 * of the default HTML page: fn must end the response (e.g. with a JSON
 * body). Headers brisk needs (Allow, Location, Content-Range) are already
 * set. For a request that could not be parsed, method and path are empty. */
typedef void (*brisk_error_fn)(brisk_req *req, brisk_res *res, int status, void *udata);
void brisk_on_error(brisk_server *s, brisk_error_fn fn, void *udata);

/* Threads of the pool behind brisk_work, shared by all workers (default 4;
 * set before brisk_run). */
void brisk_work_threads(brisk_server *s, int n);

/* Serves until SIGTERM or SIGINT (graceful stop), or brisk_stop. Returns
 * the process exit status (0 after a clean stop) and frees the server. */
int brisk_run(brisk_server *s);

/* Frees a server that will not run (brisk_run frees its own). */
void brisk_server_free(brisk_server *s);

/* Asks a running server to stop gracefully. Thread-safe. */
void brisk_stop(brisk_server *s);

/* ------------------------------------------------------------------ */
/* Request                                                             */
/* ------------------------------------------------------------------ */

brisk_str brisk_req_method(const brisk_req *req);  /* "GET" */
brisk_str brisk_req_target(const brisk_req *req);  /* "/a%20b?x=1" as sent */
brisk_str brisk_req_path(const brisk_req *req);    /* "/a%20b", still encoded */
brisk_str brisk_req_query(const brisk_req *req);   /* "x=1", without '?' */
int brisk_req_http_minor(const brisk_req *req);    /* 0 for HTTP/1.0, 1 for 1.1 (and HTTP/2) */
int brisk_req_http_major(const brisk_req *req);    /* 1, or 2 for HTTP/2 */

/* The first value of a header, case-insensitive name; ptr NULL if absent. */
brisk_str brisk_req_header(const brisk_req *req, const char *name);

/* Calls fn for every header in order (repeated ones included); stops when
 * fn returns nonzero. */
void brisk_req_headers(const brisk_req *req,
                       int (*fn)(brisk_str name, brisk_str value, void *arg), void *arg);

/* A query parameter, percent-decoded ('+' as space), NUL-terminated.
 * index picks among repeated keys (0 = first). ptr NULL if absent. */
brisk_str brisk_req_query_param(brisk_req *req, const char *key, unsigned index);

/* A path parameter of the matched route (":id" -> "id"), percent-decoded,
 * NUL-terminated; ptr NULL if absent. */
brisk_str brisk_req_param(brisk_req *req, const char *name);

/* The request body (Content-Length or chunked, decoded); len 0 if none. */
brisk_str brisk_req_body(const brisk_req *req);

/* The client's address as text ("127.0.0.1", "::1") and port. */
const char *brisk_req_remote_addr(brisk_req *req);
int brisk_req_remote_port(const brisk_req *req);

/* Per-request memory, 16-byte aligned, freed when the response ends.
 * NULL when out of memory. */
void *brisk_req_alloc(brisk_req *req, size_t size);

/* ------------------------------------------------------------------ */
/* Response                                                            */
/* ------------------------------------------------------------------ */

/* Status code (default 200). Before the first write or end. */
void brisk_res_status(brisk_res *res, int status);

/* Adds a header (copied). Content-Length, Transfer-Encoding, Connection,
 * Date and Server are managed by brisk and ignored here. Before the first
 * write or end. */
void brisk_res_header(brisk_res *res, const char *name, const char *value);
void brisk_res_header_n(brisk_res *res, brisk_str name, brisk_str value);

/* Ends the response with body (copied; may be NULL with len 0). The
 * headers, a Content-Length and the body leave together. */
void brisk_res_end(brisk_res *res, const void *body, size_t len);
void brisk_res_end_str(brisk_res *res, const char *body);

/* Ends the response with a body brisk does not copy: release(arg) is called
 * once the bytes are sent or dropped (on this worker). */
void brisk_res_end_borrowed(brisk_res *res, const void *body, size_t len,
                            void (*release)(void *arg), void *arg);

/* Ends the response with the file at path (relative paths: to the working
 * directory); Content-Type from the extension unless set. 404 if it cannot
 * be opened. Sent with sendfile. */
void brisk_res_end_file(brisk_res *res, const char *path);

/* Streams the body: the first call sends the headers with
 * Transfer-Encoding: chunked (HTTP/1.1; HTTP/1.0 clients get a body that
 * ends when the connection closes); each call sends one chunk. Finish with
 * brisk_res_end (its body, if any, is the last chunk). */
void brisk_res_write(brisk_res *res, const void *data, size_t len);

/* Ends the response with the error page for status: the one brisk_on_error
 * renders when the application set a renderer, else brisk's default short
 * HTML page (the same as for the errors brisk makes itself). Headers set so
 * far are dropped. */
void brisk_res_error(brisk_res *res, int status);

/* 1 when the client has gone; output is then dropped. */
int brisk_res_aborted(const brisk_res *res);

/* The worker loop this request belongs to (for timers and fd watchers). */
brisk_loop *brisk_res_loop(brisk_res *res);

/* Runs work(arg) on a thread of a small shared pool (blocking calls are
 * fine there), then done(res, arg) on the request's worker. The handler
 * returns without ending the response; done ends it. */
int brisk_work(brisk_res *res, void (*work)(void *arg),
               void (*done)(brisk_res *res, void *arg), void *arg);

/* ------------------------------------------------------------------ */
/* The worker loop: file descriptors and timers                        */
/* ------------------------------------------------------------------ */

enum { BRISK_READ = 1, BRISK_WRITE = 2 };

/* Per-worker user data (e.g. a database pool), set from the worker hook. */
void brisk_loop_set_data(brisk_loop *loop, void *data);
void *brisk_loop_data(brisk_loop *loop);

/* Milliseconds of a monotonic clock, cached per loop iteration. */
uint64_t brisk_loop_now(brisk_loop *loop);

/* This worker's index (0 .. count - 1) and the number of workers. */
int brisk_loop_id(brisk_loop *loop);
int brisk_loop_workers(brisk_loop *loop);

/* brisk_work without a request: work(arg) on the pool, then done(arg) on
 * this worker (e.g. a reconnect or a health probe). 0 or -1. */
int brisk_loop_work(brisk_loop *loop, void (*work)(void *arg), void (*done)(void *arg), void *arg);

/* Watches fd for BRISK_READ and/or BRISK_WRITE; cb gets the ready events
 * (level-triggered). The fd stays the caller's to close, after
 * brisk_io_free. */
typedef void (*brisk_io_cb)(brisk_io *io, unsigned events, void *udata);
brisk_io *brisk_io_new(brisk_loop *loop, int fd, unsigned events, brisk_io_cb cb, void *udata);
int brisk_io_set(brisk_io *io, unsigned events);
void brisk_io_free(brisk_io *io);

/* One-shot timers; restart from the callback to repeat. */
typedef void (*brisk_timer_cb)(brisk_timer *t, void *udata);
brisk_timer *brisk_timer_new(brisk_loop *loop, brisk_timer_cb cb, void *udata);
void brisk_timer_start(brisk_timer *t, uint64_t ms);
void brisk_timer_stop(brisk_timer *t);
void brisk_timer_free(brisk_timer *t);

/* ------------------------------------------------------------------ */
/* The brisk server's own pieces                                       */
/* ------------------------------------------------------------------ */

/* brisk_server_args plus the brisk server's flags: -c FILE (INI config),
 * -t (test it and exit), --root DIR, --cgi PREFIX=DIR, --access-log,
 * --error-log. Without any root setting, "www" is served. */
void brisk_server_args_config(brisk_server *s, int argc, char **argv);

/* Serves static files from the configured root, and CGI scripts under the
 * configured prefixes (cgi = PREFIX DIR). Follows configuration reloads. */
void brisk_serve_files(brisk_req *req, brisk_res *res, void *udata);

#ifdef __cplusplus
}
#endif

#endif
