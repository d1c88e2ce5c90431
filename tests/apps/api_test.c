/* api_test: a small app that uses every function of include/brisk/brisk.h,
 * driven by tests/integration/test_api.py. Only the public header is used.
 *
 * Environment knobs (read once in main):
 *   API_TEST_CREATE=1     brisk_create_server with one catch-all handler
 *   API_TEST_LISTEN=A,B   brisk_listen(A), brisk_listen(B) before the flags
 *   API_TEST_MAX_BODY=N   brisk_max_body(N) (default 512 KiB)
 *   API_TEST_FILES=1      brisk_server_args_config (the brisk server's flags), an
 *                         own route /hello-api, then brisk_serve_files on the rest
 *
 * Routes (GET unless said otherwise):
 *   /                      exact root            /exact      exact path
 *   /items/:id             {"id": ...}           /items/:id/parts/:part
 *   /files/ + '*'          any method, prefix    /thing      GET and POST
 *   /only-post             POST and PUT only (GET: 405 Allow)
 *   /query /headers /info /remote /alloc /status /error /error-after-write
 *   /body (any method)     echoes the body       /borrowed   end_borrowed
 *   /file?path=P           end_file              /stream     res_write
 *   /stream-timer          writes from a timer   /delay      ends from a timer
 *   /work                  brisk_work            /io         brisk_io on a pipe
 *   /worker                loop data from the worker hook
 *   /stats                 counters              /stop       brisk_stop
 *   /alloc-huge            brisk_req_alloc with impossible sizes
 *   /p/:a/../:i, /nine-rc  a route with nine parameters, and brisk_route's result
 *   /selfcheck             results of the start-up checks
 */
#include <brisk/brisk.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static brisk_server *g_server;
static atomic_int g_releases, g_aborts, g_hook_starts, g_hook_stops, g_hook_bad;
static atomic_int g_work_started, g_work_done;
static char g_selfcheck[512];

#define BIG_MAX (8u << 20)
static unsigned char *g_big; /* BIG_MAX bytes of a known pattern for borrowed bodies */

#define WORKER_MAGIC 0x5eedf00du
typedef struct {
    uint32_t magic;
    int id;
    pthread_t thread;
} worker_data;

/* ---------------------------------------------------------------- output */

typedef struct {
    char *p;
    size_t len, cap;
} out_t;

static void out_put(out_t *o, const void *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p)
            abort();
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void out_s(out_t *o, const char *s) { out_put(o, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void out_fmt(out_t *o, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    out_put(o, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string; bytes >= 0x80 and controls become \u00XX (so the client
 * gets the exact bytes back with .encode("latin-1")); ptr NULL -> null. */
static void out_json(out_t *o, brisk_str s)
{
    if (!s.ptr) {
        out_s(o, "null");
        return;
    }
    out_s(o, "\"");
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = { '\\', (char)ch };
            out_put(o, e, 2);
        } else if (ch < 0x20 || ch >= 0x7f) {
            out_fmt(o, "\\u%04x", ch);
        } else {
            out_put(o, &s.ptr[i], 1);
        }
    }
    out_s(o, "\"");
}

static brisk_str cstr(const char *s) { return (brisk_str){ s, s ? strlen(s) : 0 }; }

static void end_json(brisk_res *res, out_t *o)
{
    brisk_res_header(res, "Content-Type", "application/json");
    brisk_res_end(res, o->p, o->len);
    free(o->p);
}

/* Integer query parameter, or def. */
static long qint(brisk_req *req, const char *key, long def)
{
    brisk_str v = brisk_req_query_param(req, key, 0);
    if (!v.ptr || !v.len)
        return def;
    return strtol(v.ptr, NULL, 10);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- routes */

static void h_text(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_end_str(res, udata);
}

static void h_items(brisk_req *req, brisk_res *res, void *udata)
{
    out_t o = { 0 };
    out_s(&o, "{\"id\": ");
    out_json(&o, brisk_req_param(req, "id"));
    out_s(&o, ", \"part\": ");
    out_json(&o, brisk_req_param(req, "part"));
    out_s(&o, ", \"nope\": ");
    out_json(&o, brisk_req_param(req, "nope"));
    out_s(&o, "}");
    end_json(res, &o);
}

static void h_files(brisk_req *req, brisk_res *res, void *udata)
{
    out_t o = { 0 };
    out_s(&o, "{\"method\": ");
    out_json(&o, brisk_req_method(req));
    out_s(&o, ", \"path\": ");
    out_json(&o, brisk_req_path(req));
    out_s(&o, "}");
    end_json(res, &o);
}

static void h_thing_post(brisk_req *req, brisk_res *res, void *udata)
{
    char msg[64];
    snprintf(msg, sizeof msg, "POST thing %zu", brisk_req_body(req).len);
    brisk_res_end_str(res, msg);
}

static void h_info(brisk_req *req, brisk_res *res, void *udata)
{
    out_t o = { 0 };
    out_s(&o, "{\"method\": ");
    out_json(&o, brisk_req_method(req));
    out_s(&o, ", \"target\": ");
    out_json(&o, brisk_req_target(req));
    out_s(&o, ", \"path\": ");
    out_json(&o, brisk_req_path(req));
    out_s(&o, ", \"query\": ");
    out_json(&o, brisk_req_query(req));
    out_fmt(&o, ", \"major\": %d, \"minor\": %d, \"version\": \"%s\"}",
            brisk_req_http_major(req), brisk_req_http_minor(req), BRISK_VERSION_STRING);
    end_json(res, &o);
}

/* Every value of a fixed set of keys, by index until absent. */
static void h_query(brisk_req *req, brisk_res *res, void *udata)
{
    static const char *keys[] = { "a", "b", "sp", "enc", "empty", "flag", "missing", "k y", "x&y",
                                  "value", "bad" };
    out_t o = { 0 };
    int nul_ok = 1;
    out_s(&o, "{\"query\": ");
    out_json(&o, brisk_req_query(req));
    out_s(&o, ", \"params\": {");
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        out_s(&o, k ? ", " : "");
        out_json(&o, cstr(keys[k]));
        out_s(&o, ": [");
        for (unsigned i = 0;; i++) {
            brisk_str v = brisk_req_query_param(req, keys[k], i);
            if (!v.ptr)
                break;
            if (v.ptr[v.len] != '\0')
                nul_ok = 0;
            out_s(&o, i ? ", " : "");
            out_json(&o, v);
        }
        out_s(&o, "]");
    }
    out_fmt(&o, "}, \"nul_terminated\": %s}", nul_ok ? "true" : "false");
    end_json(res, &o);
}

typedef struct {
    out_t *o;
    int n, stop;
} hdr_walk;

static int walk_header(brisk_str name, brisk_str value, void *arg)
{
    hdr_walk *w = arg;
    out_s(w->o, w->n ? ", [" : "[");
    out_json(w->o, name);
    out_s(w->o, ", ");
    out_json(w->o, value);
    out_s(w->o, "]");
    w->n++;
    return w->stop && w->n >= w->stop;
}

/* /headers?h=NAME&h=NAME2&stop=N: lookups of the named headers and the
 * list of all headers (stopping after N when stop is given). */
static void h_headers(brisk_req *req, brisk_res *res, void *udata)
{
    out_t o = { 0 };
    out_s(&o, "{\"lookup\": [");
    for (unsigned i = 0;; i++) {
        brisk_str name = brisk_req_query_param(req, "h", i);
        if (!name.ptr)
            break;
        out_s(&o, i ? ", [" : "[");
        out_json(&o, name);
        out_s(&o, ", ");
        out_json(&o, brisk_req_header(req, name.ptr));
        out_s(&o, "]");
    }
    out_s(&o, "], \"all\": [");
    hdr_walk w = { &o, 0, (int)qint(req, "stop", 0) };
    brisk_req_headers(req, walk_header, &w);
    out_fmt(&o, "], \"walked\": %d}", w.n);
    end_json(res, &o);
}

static void h_body(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_str body = brisk_req_body(req);
    char n[32];
    snprintf(n, sizeof n, "%zu", body.len);
    brisk_res_header(res, "X-Body-Length", n);
    brisk_res_header_n(res, cstr("X-Method"), brisk_req_method(req));
    brisk_str ct = brisk_req_header(req, "content-type");
    if (ct.ptr)
        brisk_res_header_n(res, cstr("X-Request-Content-Type"), ct);
    brisk_res_header(res, "Content-Type", "application/octet-stream");
    brisk_res_end(res, body.ptr, body.len);
}

static void h_remote(brisk_req *req, brisk_res *res, void *udata)
{
    out_t o = { 0 };
    out_s(&o, "{\"addr\": ");
    out_json(&o, cstr(brisk_req_remote_addr(req)));
    out_fmt(&o, ", \"port\": %d}", brisk_req_remote_port(req));
    end_json(res, &o);
}

/* Arena: several allocations, aligned, disjoint, surviving each other. */
static void h_alloc(brisk_req *req, brisk_res *res, void *udata)
{
    static const size_t sizes[] = { 1, 7, 16, 33, 100, 4000, 5000, 100000, 3, 1 << 20 };
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *p[N];
    int aligned = 1, intact = 1;
    for (int i = 0; i < N; i++) {
        p[i] = brisk_req_alloc(req, sizes[i]);
        if (!p[i]) {
            brisk_res_error(res, 500);
            return;
        }
        if ((uintptr_t)p[i] % 16)
            aligned = 0;
        memset(p[i], 'a' + i, sizes[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t k = 0; k < sizes[i]; k++)
            if (p[i][k] != (unsigned char)('a' + i))
                intact = 0;
    char msg[64];
    snprintf(msg, sizeof msg, "alloc n=%d aligned=%d intact=%d", N, aligned, intact);
    brisk_res_end_str(res, msg);
}

/* Impossible sizes must give NULL (the memory is never touched here). */
static void h_alloc_huge(brisk_req *req, brisk_res *res, void *udata)
{
    static const size_t sizes[] = { SIZE_MAX, SIZE_MAX - 8, SIZE_MAX - 40, SIZE_MAX / 2 + 1 };
    out_t o = { 0 };
    out_s(&o, "{\"null\": [");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        out_fmt(&o, "%s%s", i ? ", " : "", brisk_req_alloc(req, sizes[i]) ? "false" : "true");
    unsigned char *p = brisk_req_alloc(req, 64); /* still usable afterwards */
    if (p)
        memset(p, 1, 64);
    out_fmt(&o, "], \"after\": %s}", p ? "true" : "false");
    end_json(res, &o);
}

static int g_nine_rc;

static void h_nine(brisk_req *req, brisk_res *res, void *udata)
{
    out_t o = { 0 };
    out_s(&o, "{\"a\": ");
    out_json(&o, brisk_req_param(req, "a"));
    out_s(&o, ", \"i\": ");
    out_json(&o, brisk_req_param(req, "i"));
    out_s(&o, "}");
    end_json(res, &o);
}

static void h_nine_rc(brisk_req *req, brisk_res *res, void *udata)
{
    char msg[32];
    snprintf(msg, sizeof msg, "%d", g_nine_rc);
    brisk_res_end_str(res, msg);
}

/* /status?code=N&h=Name:Value...&body=B */
static void h_status(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_status(res, (int)qint(req, "code", 200));
    for (unsigned i = 0;; i++) {
        brisk_str h = brisk_req_query_param(req, "h", i);
        if (!h.ptr)
            break;
        const char *colon = memchr(h.ptr, ':', h.len);
        if (!colon)
            continue;
        brisk_str name = { h.ptr, (size_t)(colon - h.ptr) };
        brisk_str value = { colon + 1, h.len - name.len - 1 };
        if (i % 2) {
            brisk_res_header_n(res, name, value);
        } else {
            char n[128], v[512];
            snprintf(n, sizeof n, "%.*s", (int)name.len, name.ptr);
            snprintf(v, sizeof v, "%.*s", (int)value.len, value.ptr);
            brisk_res_header(res, n, v);
        }
    }
    brisk_str body = brisk_req_query_param(req, "body", 0);
    if (body.ptr)
        brisk_res_end(res, body.ptr, body.len);
    else
        brisk_res_end_str(res, "status body");
}

static void h_error(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_header(res, "X-Dropped", "1");
    brisk_res_header(res, "Content-Type", "application/x-dropped");
    brisk_res_error(res, (int)qint(req, "code", 500));
}

static void h_error_after_write(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_write(res, "partial", 7);
    brisk_res_error(res, 500);
}

static void on_release(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_releases, 1);
}

static void on_release_free(void *arg)
{
    free(arg);
    atomic_fetch_add(&g_releases, 1);
}

/* /borrowed?size=N: N bytes of g_big (default: a short string). */
static void h_borrowed(brisk_req *req, brisk_res *res, void *udata)
{
    long size = qint(req, "size", -1);
    brisk_res_header(res, "X-Borrowed", "yes");
    if (size < 0) {
        static const char msg[] = "borrowed body";
        brisk_res_end_borrowed(res, msg, sizeof msg - 1, on_release, NULL);
    } else {
        if (size > (long)BIG_MAX)
            size = BIG_MAX;
        brisk_res_header(res, "Content-Type", "application/octet-stream");
        brisk_res_end_borrowed(res, g_big, (size_t)size, on_release, NULL);
    }
}

/* /file?path=P[&ct=TYPE] */
static void h_file(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_str path = brisk_req_query_param(req, "path", 0);
    brisk_str ct = brisk_req_query_param(req, "ct", 0);
    brisk_res_header(res, "X-File", "yes");
    if (ct.ptr)
        brisk_res_header(res, "Content-Type", ct.ptr);
    brisk_res_end_file(res, path.ptr ? path.ptr : "");
}

/* /stream?n=N&size=S&last=L: N chunks (of S bytes of g_big, or
 * "chunk i\n"), then brisk_res_end with L (or nothing). */
static void h_stream(brisk_req *req, brisk_res *res, void *udata)
{
    long n = qint(req, "n", 3), size = qint(req, "size", 0);
    brisk_res_header(res, "X-Stream", "yes");
    for (long i = 0; i < n; i++) {
        if (size > 0 && size <= (long)BIG_MAX) {
            brisk_res_write(res, g_big, (size_t)size);
        } else {
            char c[32];
            int k = snprintf(c, sizeof c, "chunk %ld\n", i);
            brisk_res_write(res, c, (size_t)k);
        }
    }
    brisk_res_write(res, "", 0); /* an empty write sends nothing */
    brisk_str last = brisk_req_query_param(req, "last", 0);
    if (last.ptr)
        brisk_res_end(res, last.ptr, last.len);
    else
        brisk_res_end(res, NULL, 0);
}

/* ---- async: timers ---- */

typedef struct {
    brisk_res *res;
    brisk_timer *t, *never;
    uint64_t t0, t0_loop;
    int ticks, n, borrow, never_fired;
} delay_state;

static void never_cb(brisk_timer *t, void *udata)
{
    delay_state *st = udata;
    st->never_fired = 1;
}

static void delay_cb(brisk_timer *t, void *udata)
{
    delay_state *st = udata; /* in the request arena: gone after the end */
    brisk_res *res = st->res;
    uint64_t waited = mono_ms() - st->t0;
    uint64_t waited_loop = brisk_loop_now(brisk_res_loop(res)) - st->t0_loop;
    int never = st->never_fired, borrow = st->borrow;
    brisk_timer_free(st->never);
    brisk_timer_free(t); /* from its own callback */
    if (brisk_res_aborted(res)) {
        atomic_fetch_add(&g_aborts, 1);
        /* still ends the response (and a borrowed body is still released) */
        if (borrow)
            brisk_res_end_borrowed(res, "x", 1, on_release, NULL);
        else
            brisk_res_end_str(res, "aborted");
        return;
    }
    char msg[128];
    snprintf(msg, sizeof msg, "delayed waited=%llu loop=%llu never=%d",
             (unsigned long long)waited, (unsigned long long)waited_loop, never);
    brisk_res_header(res, "X-Async", "timer");
    if (borrow) {
        char *copy = malloc(strlen(msg) + 1);
        strcpy(copy, msg);
        brisk_res_end_borrowed(res, copy, strlen(copy), on_release_free, copy);
    } else {
        brisk_res_end_str(res, msg);
    }
}

/* /delay?ms=N[&borrow=1]: returns without ending; a timer ends it. */
static void h_delay(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_loop *loop = brisk_res_loop(res);
    delay_state *st = brisk_req_alloc(req, sizeof *st);
    memset(st, 0, sizeof *st);
    st->res = res;
    st->borrow = (int)qint(req, "borrow", 0);
    st->t0 = mono_ms();
    st->t0_loop = brisk_loop_now(loop);
    st->t = brisk_timer_new(loop, delay_cb, st);
    st->never = brisk_timer_new(loop, never_cb, st);
    long ms = qint(req, "ms", 200);
    brisk_timer_start(st->never, (uint64_t)ms / 2);
    brisk_timer_stop(st->never); /* stopped: must never fire */
    brisk_timer_start(st->t, (uint64_t)ms);
}

static void tick_cb(brisk_timer *t, void *udata)
{
    delay_state *st = udata;
    brisk_res *res = st->res;
    if (brisk_res_aborted(res)) {
        atomic_fetch_add(&g_aborts, 1);
        brisk_timer_free(t);
        brisk_res_end(res, NULL, 0);
        return;
    }
    char line[32];
    int k = snprintf(line, sizeof line, "tick %d\n", st->ticks);
    brisk_res_write(res, line, (size_t)k);
    if (++st->ticks < st->n) {
        brisk_timer_start(t, 30); /* restart from the callback */
        return;
    }
    brisk_timer_free(t);
    brisk_res_end_str(res, "done\n");
}

/* /stream-timer?n=N: one chunk per 30 ms, written from a timer. */
static void h_stream_timer(brisk_req *req, brisk_res *res, void *udata)
{
    delay_state *st = brisk_req_alloc(req, sizeof *st);
    memset(st, 0, sizeof *st);
    st->res = res;
    st->n = (int)qint(req, "n", 5);
    brisk_res_header(res, "Content-Type", "text/x-ticks");
    st->t = brisk_timer_new(brisk_res_loop(res), tick_cb, st);
    brisk_timer_start(st->t, 30);
}

/* ---- async: the work pool ---- */

typedef struct {
    long ms;
    pthread_t loop_thread;
    int off_loop;
    uint64_t t0;
} work_state;

static void work_fn(void *arg)
{
    work_state *w = arg;
    atomic_fetch_add(&g_work_started, 1);
    w->off_loop = !pthread_equal(pthread_self(), w->loop_thread);
    struct timespec ts = { w->ms / 1000, (w->ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void work_done(brisk_res *res, void *arg)
{
    work_state *w = arg;
    atomic_fetch_add(&g_work_done, 1);
    if (brisk_res_aborted(res)) {
        atomic_fetch_add(&g_aborts, 1);
        brisk_res_end(res, NULL, 0);
        return;
    }
    int on_loop = pthread_equal(pthread_self(), w->loop_thread);
    char msg[128];
    snprintf(msg, sizeof msg, "work done off_loop=%d done_on_loop=%d waited=%llu", w->off_loop,
             on_loop, (unsigned long long)(mono_ms() - w->t0));
    brisk_res_end_str(res, msg);
}

static void h_work(brisk_req *req, brisk_res *res, void *udata)
{
    work_state *w = brisk_req_alloc(req, sizeof *w);
    w->ms = qint(req, "ms", 200);
    w->loop_thread = pthread_self();
    w->off_loop = -1;
    w->t0 = mono_ms();
    if (brisk_work(res, work_fn, work_done, w) < 0)
        brisk_res_error(res, 500);
}

/* ---- async: an fd watcher on a pipe ---- */

typedef struct {
    brisk_res *res;
    brisk_io *r, *w;
    brisk_timer *t;
    int fds[2];
    uint64_t t0;
    int wrote;
} io_state;

static void io_timer_cb(brisk_timer *t, void *udata)
{
    io_state *st = udata;
    brisk_io_set(st->w, BRISK_WRITE); /* now the write end may fire */
}

static void io_write_cb(brisk_io *io, unsigned events, void *udata)
{
    io_state *st = udata;
    if (!(events & BRISK_WRITE))
        return;
    if (write(st->fds[1], "ping", 4) == 4)
        st->wrote++;
    brisk_io_set(io, 0);
}

static void io_read_cb(brisk_io *io, unsigned events, void *udata)
{
    io_state *st = udata;
    char buf[64];
    if (!(events & BRISK_READ))
        return;
    ssize_t n = read(st->fds[0], buf, sizeof buf - 1);
    if (n < 0 && errno == EAGAIN)
        return;
    brisk_res *res = st->res;
    brisk_io_free(st->r);
    brisk_io_free(st->w);
    brisk_timer_free(st->t);
    close(st->fds[0]);
    close(st->fds[1]);
    char msg[160];
    snprintf(msg, sizeof msg, "io got=%.*s writes=%d waited=%llu", n > 0 ? (int)n : 0, buf,
             st->wrote, (unsigned long long)(mono_ms() - st->t0));
    if (brisk_res_aborted(res))
        atomic_fetch_add(&g_aborts, 1);
    brisk_res_end_str(res, msg);
}

static void h_io(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_loop *loop = brisk_res_loop(res);
    io_state *st = brisk_req_alloc(req, sizeof *st);
    memset(st, 0, sizeof *st);
    st->res = res;
    st->t0 = mono_ms();
    if (pipe2(st->fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        brisk_res_error(res, 500);
        return;
    }
    st->r = brisk_io_new(loop, st->fds[0], BRISK_READ, io_read_cb, st);
    st->w = brisk_io_new(loop, st->fds[1], 0, io_write_cb, st);
    st->t = brisk_timer_new(loop, io_timer_cb, st);
    if (!st->r || !st->w || !st->t) {
        brisk_res_error(res, 500);
        return;
    }
    brisk_timer_start(st->t, (uint64_t)qint(req, "ms", 100));
}

/* ---- per-worker data ---- */

static void worker_hook(brisk_loop *loop, int start, void *udata)
{
    if (udata != (void *)&g_server) {
        atomic_fetch_add(&g_hook_bad, 1);
        return;
    }
    if (start) {
        worker_data *d = calloc(1, sizeof *d);
        d->magic = WORKER_MAGIC;
        d->id = atomic_fetch_add(&g_hook_starts, 1);
        d->thread = pthread_self();
        brisk_loop_set_data(loop, d);
    } else {
        worker_data *d = brisk_loop_data(loop);
        if (!d || d->magic != WORKER_MAGIC)
            atomic_fetch_add(&g_hook_bad, 1);
        else
            printf("hook stop worker=%d\n", d->id);
        fflush(stdout);
        brisk_loop_set_data(loop, NULL);
        free(d);
        atomic_fetch_add(&g_hook_stops, 1);
    }
}

static void h_worker(brisk_req *req, brisk_res *res, void *udata)
{
    worker_data *d = brisk_loop_data(brisk_res_loop(res));
    char msg[128];
    snprintf(msg, sizeof msg, "{\"id\": %d, \"magic_ok\": %s, \"same_thread\": %s}", d ? d->id : -1,
             d && d->magic == WORKER_MAGIC ? "true" : "false",
             d && pthread_equal(d->thread, pthread_self()) ? "true" : "false");
    brisk_res_header(res, "Content-Type", "application/json");
    brisk_res_end_str(res, msg);
}

static void h_stats(brisk_req *req, brisk_res *res, void *udata)
{
    char msg[256];
    snprintf(msg, sizeof msg,
             "{\"releases\": %d, \"aborts\": %d, \"hook_starts\": %d, \"hook_stops\": %d, "
             "\"hook_bad\": %d, \"work_started\": %d, \"work_done\": %d}",
             atomic_load(&g_releases), atomic_load(&g_aborts), atomic_load(&g_hook_starts),
             atomic_load(&g_hook_stops), atomic_load(&g_hook_bad), atomic_load(&g_work_started),
             atomic_load(&g_work_done));
    brisk_res_header(res, "Content-Type", "application/json");
    brisk_res_end_str(res, msg);
}

static void h_stop(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_end_str(res, "stopping");
    brisk_stop(g_server);
}

static void h_selfcheck(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_end_str(res, g_selfcheck);
}

static void h_create(brisk_req *req, brisk_res *res, void *udata)
{
    char msg[256];
    brisk_str m = brisk_req_method(req), p = brisk_req_path(req);
    snprintf(msg, sizeof msg, "create %.*s %.*s udata=%s", (int)m.len, m.ptr, (int)p.len, p.ptr,
             (const char *)udata);
    brisk_res_end_str(res, msg);
}

/* ---------------------------------------------------------------- main */

static void selfcheck(brisk_server *s)
{
    int ok = 1;
    char *p = g_selfcheck;
    size_t left = sizeof g_selfcheck;
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        int c_ = (cond);                                                                 \
        ok &= c_;                                                                        \
        int n_ = snprintf(p, left, "%s %s\n", c_ ? "ok" : "FAIL", #cond);                \
        if (n_ > 0 && (size_t)n_ < left) {                                               \
            p += n_;                                                                     \
            left -= (size_t)n_;                                                          \
        }                                                                                \
    } while (0)
    CHECK(brisk_route(s, "GET", "no-slash", h_text, "x") == -1);
    CHECK(brisk_route(s, "GET", "/a/*/b", h_text, "x") == -1);
    CHECK(brisk_route(s, "GET", "/nohandler", NULL, NULL) == -1);
    CHECK(brisk_listen(s, "not an address") == -1);
    snprintf(p, left, "%s\n", ok ? "ALL OK" : "SOME FAILED");
#undef CHECK
}

/* API_TEST_JSON_ERRORS=1: errors the server makes itself come out as JSON. */
static void json_error(brisk_req *req, brisk_res *res, int status, void *udata)
{
    char body[256];
    brisk_str m = brisk_req_method(req);
    int n = snprintf(body, sizeof body, "{\"error\": %d, \"method\": \"%.*s\", \"tag\": \"%s\"}",
                     status, (int)m.len, m.ptr ? m.ptr : "", (const char *)udata);
    brisk_res_header(res, "Content-Type", "application/json");
    brisk_res_end(res, body, (size_t)n);
}

/* GET /loopinfo: brisk_loop_id / brisk_loop_workers, and brisk_loop_work. */
typedef struct {
    brisk_res *res;
    int ran_off_loop;
} loop_work_ctx;

static void lw_work(void *arg)
{
    ((loop_work_ctx *)arg)->ran_off_loop = 1;
}

static void lw_done(void *arg)
{
    loop_work_ctx *x = arg;
    brisk_loop *l = brisk_res_loop(x->res);
    char body[128];
    int n = snprintf(body, sizeof body, "id=%d workers=%d loop_work=%d", brisk_loop_id(l),
                     brisk_loop_workers(l), x->ran_off_loop);
    brisk_res_end(x->res, body, (size_t)n);
}

static void h_loopinfo(brisk_req *req, brisk_res *res, void *udata)
{
    loop_work_ctx *x = brisk_req_alloc(req, sizeof *x);
    x->res = res;
    x->ran_off_loop = 0;
    if (brisk_loop_work(brisk_res_loop(res), lw_work, lw_done, x) < 0)
        brisk_res_error(res, 500);
}

int main(int argc, char **argv)
{
    g_big = malloc(BIG_MAX);
    if (!g_big)
        return 1;
    for (size_t i = 0; i < BIG_MAX; i++)
        g_big[i] = (unsigned char)((i * 7 + i / 251) & 0xff);

    const char *create = getenv("API_TEST_CREATE");
    if (create && *create == '1') {
        brisk_server *s = brisk_create_server(h_create, "created");
        brisk_server_args(s, argc, argv);
        int rc = brisk_run(s);
        free(g_big);
        return rc;
    }

    const char *files = getenv("API_TEST_FILES");
    if (files && *files == '1') {
        brisk_server *s = brisk_server_new();
        brisk_server_args_config(s, argc, argv);
        brisk_route(s, "GET", "/hello-api", h_text, "hello from the api");
        brisk_route(s, NULL, "/*", brisk_serve_files, NULL);
        int rc = brisk_run(s);
        free(g_big);
        return rc;
    }

    brisk_server *unused = brisk_server_new(); /* brisk_server_free for one never run */
    brisk_route(unused, "GET", "/x", h_text, "x");
    brisk_server_free(unused);

    brisk_server *s = brisk_server_new();
    if (!s)
        return 1;
    g_server = s;
    selfcheck(s);
    const char *je = getenv("API_TEST_JSON_ERRORS");
    if (je && *je == '1')
        brisk_on_error(s, json_error, "json");
    brisk_work_threads(s, 2);
    brisk_workers(s, 1); /* --workers overrides */
    const char *mb = getenv("API_TEST_MAX_BODY");
    brisk_max_body(s, mb ? (size_t)strtoull(mb, NULL, 10) : 512 * 1024);
    const char *listen = getenv("API_TEST_LISTEN");
    char *listen_copy = NULL; /* kept until brisk_run returns: the server refers to it */
    if (listen && *listen) {
        char *save = NULL;
        listen_copy = strdup(listen);
        for (char *a = strtok_r(listen_copy, ",", &save); a; a = strtok_r(NULL, ",", &save))
            if (brisk_listen(s, a) < 0) {
                fprintf(stderr, "api_test: bad listen address %s\n", a);
                return 2;
            }
    }
    brisk_server_args(s, argc, argv);
    brisk_on_worker(s, worker_hook, &g_server);

    int bad = 0;
    bad |= brisk_route(s, "GET", "/", h_text, "api_test root");
    bad |= brisk_route(s, "GET", "/exact", h_text, "exact");
    bad |= brisk_route(s, "GET", "/items/:id", h_items, NULL);
    bad |= brisk_route(s, "GET", "/items/:id/parts/:part", h_items, NULL);
    bad |= brisk_route(s, NULL, "/files/*", h_files, NULL);
    bad |= brisk_route(s, "GET", "/thing", h_text, "GET thing");
    bad |= brisk_route(s, "POST", "/thing", h_thing_post, NULL);
    bad |= brisk_route(s, "POST", "/only-post", h_text, "posted");
    bad |= brisk_route(s, "PUT", "/only-post", h_text, "put");
    bad |= brisk_route(s, "GET", "/info", h_info, NULL);
    bad |= brisk_route(s, "GET", "/loopinfo", h_loopinfo, NULL);
    bad |= brisk_route(s, "GET", "/query", h_query, NULL);
    bad |= brisk_route(s, "GET", "/headers", h_headers, NULL);
    bad |= brisk_route(s, NULL, "/body", h_body, NULL);
    bad |= brisk_route(s, "GET", "/remote", h_remote, NULL);
    bad |= brisk_route(s, "GET", "/alloc", h_alloc, NULL);
    bad |= brisk_route(s, "GET", "/status", h_status, NULL);
    bad |= brisk_route(s, "GET", "/error", h_error, NULL);
    bad |= brisk_route(s, "GET", "/error-after-write", h_error_after_write, NULL);
    bad |= brisk_route(s, "GET", "/borrowed", h_borrowed, NULL);
    bad |= brisk_route(s, "HEAD", "/borrowed", h_borrowed, NULL);
    bad |= brisk_route(s, "GET", "/file", h_file, NULL);
    bad |= brisk_route(s, "HEAD", "/file", h_file, NULL);
    bad |= brisk_route(s, "GET", "/stream", h_stream, NULL);
    bad |= brisk_route(s, "HEAD", "/stream", h_stream, NULL);
    bad |= brisk_route(s, "GET", "/stream-timer", h_stream_timer, NULL);
    bad |= brisk_route(s, "GET", "/delay", h_delay, NULL);
    bad |= brisk_route(s, "GET", "/work", h_work, NULL);
    bad |= brisk_route(s, "GET", "/io", h_io, NULL);
    bad |= brisk_route(s, "GET", "/worker", h_worker, NULL);
    bad |= brisk_route(s, "GET", "/stats", h_stats, NULL);
    bad |= brisk_route(s, "GET", "/stop", h_stop, NULL);
    bad |= brisk_route(s, "GET", "/selfcheck", h_selfcheck, NULL);
    bad |= brisk_route(s, "GET", "/dir/", h_text, "dir with slash");
    bad |= brisk_route(s, "GET", "/alloc-huge", h_alloc_huge, NULL);
    bad |= brisk_route(s, "GET", "/nine-rc", h_nine_rc, NULL);
    /* nine parameters: either refused (-1) or matched; reported by /nine-rc */
    g_nine_rc = brisk_route(s, "GET", "/p/:a/:b/:c/:d/:e/:f/:g/:h/:i", h_nine, NULL);
    if (bad) {
        fprintf(stderr, "api_test: brisk_route failed\n");
        return 2;
    }
    int rc = brisk_run(s);
    printf("brisk_run returned %d hook_starts=%d hook_stops=%d hook_bad=%d\n", rc,
           atomic_load(&g_hook_starts), atomic_load(&g_hook_stops), atomic_load(&g_hook_bad));
    fflush(stdout);
    free(listen_copy);
    free(g_big);
    return rc;
}
