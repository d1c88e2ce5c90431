#include "http/status.h"

#include "core/log.h"

#include <netinet/in.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* One worker's figures, taken on its own thread (no locks, no races). */
typedef struct {
    uint64_t active, reading, writing, idle;
    http_stats st;
} snapshot;

typedef struct status_req status_req;
typedef struct {
    status_req *sr;
    http_worker *hw;
    snapshot snap;
} part;

struct status_req {
    http_exchange *x;
    http_worker *origin;
    int json;
    int n;
    atomic_int pending;
    part parts[];
};

int http_status_wanted(const http_exchange *x)
{
    const http_request *r = &x->req;
    const char *p = x->conf->status;
    return p[0] && r->path.len == strlen(p) && memcmp(r->path.p, p, r->path.len) == 0;
}

static int peer_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

static void take_snapshot(http_worker *hw, snapshot *s)
{
    s->st = hw->stats;
    http_census n = { 0 };
    if (hw->census)
        hw->census(hw, &n);
    s->active = n.active;
    s->reading = n.reading;
    s->writing = n.writing;
    s->idle = n.idle;
}

static void respond(void *arg);

/* On each worker's thread; the last one hands the request back. */
static void snap_on_worker(void *arg)
{
    part *pt = arg;
    take_snapshot(pt->hw, &pt->snap);
    status_req *sr = pt->sr;
    if (atomic_fetch_sub(&sr->pending, 1) == 1 && worker_call(&sr->origin->w, respond, sr) < 0)
        log_error("status: cannot hand the snapshot back to worker %d", sr->origin->w.id);
}

static const char *const classes[5] = { "1xx", "2xx", "3xx", "4xx", "5xx" };

static void add(snapshot *t, const snapshot *s)
{
    t->active += s->active;
    t->reading += s->reading;
    t->writing += s->writing;
    t->idle += s->idle;
    t->st.accepted += s->st.accepted;
    t->st.requests += s->st.requests;
    for (int k = 0; k < 5; k++)
        t->st.responses[k] += s->st.responses[k];
    t->st.bytes_in += s->st.bytes_in;
    t->st.bytes_out += s->st.bytes_out;
}

static void json_worker(bk_buf *b, const char *key, const snapshot *s)
{
    char tmp[768];
    int n = snprintf(tmp, sizeof tmp,
                     "%s\"connections\":{\"active\":%llu,\"reading\":%llu,\"writing\":%llu,"
                     "\"idle\":%llu},\"accepted\":%llu,\"requests\":%llu,\"responses\":{",
                     key, (unsigned long long)s->active, (unsigned long long)s->reading,
                     (unsigned long long)s->writing, (unsigned long long)s->idle,
                     (unsigned long long)s->st.accepted, (unsigned long long)s->st.requests);
    buf_append(b, tmp, (size_t)n);
    for (int k = 0; k < 5; k++) {
        n = snprintf(tmp, sizeof tmp, "%s\"%s\":%llu", k ? "," : "", classes[k],
                     (unsigned long long)s->st.responses[k]);
        buf_append(b, tmp, (size_t)n);
    }
    n = snprintf(tmp, sizeof tmp, "},\"bytes\":{\"received\":%llu,\"sent\":%llu}}",
                 (unsigned long long)s->st.bytes_in, (unsigned long long)s->st.bytes_out);
    buf_append(b, tmp, (size_t)n);
}

static void render_json(bk_buf *b, const status_req *sr, const snapshot *total)
{
    json_worker(b, "{\"total\":{", total);
    buf_append(b, ",\"workers\":[", 12);
    for (int i = 0; i < sr->n; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s{\"id\":%d,", i ? "," : "", i);
        json_worker(b, key, &sr->parts[i].snap);
    }
    buf_append(b, "]}\n", 3);
}

/* One Prometheus family: HELP, TYPE, then a sample per worker. */
static void prom_family(bk_buf *b, const status_req *sr, const char *name, const char *type,
                        const char *help, const char *label, size_t field)
{
    char tmp[256];
    int n = snprintf(tmp, sizeof tmp, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    buf_append(b, tmp, (size_t)n);
    for (int i = 0; i < sr->n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&sr->parts[i].snap + field, sizeof v);
        n = snprintf(tmp, sizeof tmp, "%s{worker=\"%d\"%s} %llu\n", name, i, label,
                     (unsigned long long)v);
        buf_append(b, tmp, (size_t)n);
    }
}

#define SNAP_OFF(f) offsetof(snapshot, f)

static void render_prometheus(bk_buf *b, const status_req *sr)
{
    static const struct { const char *label; size_t off; } states[] = {
        { ",state=\"reading\"", SNAP_OFF(reading) },
        { ",state=\"writing\"", SNAP_OFF(writing) },
        { ",state=\"idle\"", SNAP_OFF(idle) },
    };
    char tmp[256];
    int n = snprintf(tmp, sizeof tmp,
                     "# HELP brisk_connections Open connections, by state.\n"
                     "# TYPE brisk_connections gauge\n");
    buf_append(b, tmp, (size_t)n);
    for (size_t s = 0; s < BK_ARRAY_LEN(states); s++)
        for (int i = 0; i < sr->n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)&sr->parts[i].snap + states[s].off, sizeof v);
            n = snprintf(tmp, sizeof tmp, "brisk_connections{worker=\"%d\"%s} %llu\n", i,
                         states[s].label, (unsigned long long)v);
            buf_append(b, tmp, (size_t)n);
        }
    prom_family(b, sr, "brisk_connections_active", "gauge", "Open connections.", "",
                SNAP_OFF(active));
    prom_family(b, sr, "brisk_connections_accepted_total", "counter", "Accepted connections.",
                "", SNAP_OFF(st.accepted));
    prom_family(b, sr, "brisk_requests_total", "counter", "Request heads read.", "",
                SNAP_OFF(st.requests));
    n = snprintf(tmp, sizeof tmp, "# HELP brisk_responses_total Responses, by status class.\n"
                                  "# TYPE brisk_responses_total counter\n");
    buf_append(b, tmp, (size_t)n);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < sr->n; i++) {
            n = snprintf(tmp, sizeof tmp, "brisk_responses_total{worker=\"%d\",class=\"%s\"} %llu\n",
                         i, classes[k], (unsigned long long)sr->parts[i].snap.st.responses[k]);
            buf_append(b, tmp, (size_t)n);
        }
    prom_family(b, sr, "brisk_received_bytes_total", "counter", "Bytes read from clients.", "",
                SNAP_OFF(st.bytes_in));
    prom_family(b, sr, "brisk_sent_bytes_total", "counter", "Bytes written to clients.", "",
                SNAP_OFF(st.bytes_out));
}

/* Back on the worker that took the request. */
static void respond(void *arg)
{
    status_req *sr = arg;
    http_exchange *x = sr->x;
    if (x->aborted) { /* the client left: let the exchange go */
        http_exchange_finish(x);
        free(sr);
        return;
    }
    snapshot total = { 0 };
    for (int i = 0; i < sr->n; i++)
        add(&total, &sr->parts[i].snap);
    bk_buf b = { 0 };
    if (sr->json)
        render_json(&b, sr, &total);
    else
        render_prometheus(&b, sr);
    bk_str lines[] = {
        BK_STR("Content-Type: "),
        sr->json ? BK_STR("application/json") : BK_STR("text/plain; version=0.0.4; charset=utf-8"),
        BK_STR("\r\nCache-Control: no-store\r\n"),
    };
    http_exchange_send_head(x, 200, lines, BK_ARRAY_LEN(lines), b.len, b.data, b.len);
    http_exchange_finish(x);
    buf_free(&b);
    free(sr);
}

static int wants_json(const http_request *r)
{
    bk_str q = r->query;
    for (size_t i = 0; i + 11 <= q.len; i++)
        if ((i == 0 || q.p[i - 1] == '&') && memcmp(q.p + i, "format=json", 11) == 0 &&
            (i + 11 == q.len || q.p[i + 11] == '&'))
            return 1;
    bk_str accept = http_parser_header(r->parser, r->head, BK_STR("accept"));
    for (size_t i = 0; accept.p && i + 16 <= accept.len; i++)
        if (memcmp(accept.p + i, "application/json", 16) == 0)
            return 1;
    return 0;
}

void http_status_handle(http_exchange *x)
{
    const http_request *r = &x->req;
    http_worker *hw = x->hw;
    if (!peer_is_loopback(x->peer)) {
        http_exchange_error(x, 403, NULL);
        return;
    }
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
        http_exchange_error(x, 405, "Allow: GET, HEAD\r\n");
        return;
    }
    int n = hw->nworkers > 0 && hw->peers ? hw->nworkers : 1;
    status_req *sr = calloc(1, sizeof *sr + (size_t)n * sizeof(part));
    if (!sr) {
        http_exchange_error(x, 503, NULL);
        return;
    }
    sr->x = x;
    sr->origin = hw;
    sr->json = wants_json(r);
    sr->n = n;
    atomic_init(&sr->pending, n);
    for (int i = 0; i < n; i++) {
        part *pt = &sr->parts[i];
        pt->sr = sr;
        pt->hw = hw->peers ? &hw->peers[i] : hw;
        if (pt->hw == hw) {
            snap_on_worker(pt); /* our own: here and now */
        } else if (worker_call(&pt->hw->w, snap_on_worker, pt) < 0) {
            pt->snap = (snapshot){ 0 }; /* a worker that has gone: nothing to count */
            if (atomic_fetch_sub(&sr->pending, 1) == 1)
                worker_call(&hw->w, respond, sr);
        }
    }
}
