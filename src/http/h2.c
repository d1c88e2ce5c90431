/* HTTP/2 streams onto exchanges; see h2.h. */
#include "http/h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#define SERVER_NAME "brisk/" BRISK_VERSION
#define OUT_HIGH_WATER (256 * 1024) /* stop serializing frames above this */
#define LOG_LINE_MAX 2048
/* Request bodies one connection may hold at once (its streams together). */
#define BODIES_MAX(max_body) ((max_body) < (1u << 20) ? (4u << 20) : 4 * (max_body))

typedef struct h2_session h2_session;
typedef struct h2_stream h2_stream;
typedef struct h2_piece h2_piece;

enum { P_COPY, P_REF, P_FD };

typedef struct {
    uint32_t off, len;
} h2_span;

/* A piece of a response body, waiting for the peer's flow-control window. */
struct h2_piece {
    h2_piece *next;
    uint8_t kind;
    uint8_t in_arena;     /* freed with the exchange, not by free() */
    int fd;               /* P_FD */
    const char *mem;      /* P_REF */
    uint64_t off, len;    /* P_COPY: offset in data; P_FD: file offset */
    http_release_fn release;
    void *arg;
    char data[];          /* P_COPY */
};

struct h2_stream {
    void *deferred_next;  /* first: the worker's deferred-free list */
    h2_session *s;        /* NULL once detached (reset, or the connection gone) */
    h2_stream *prev, *next;
    int32_t id;
    uint8_t in_handler;   /* a handler owns x */
    uint8_t dispatched;   /* the request went to a handler (or was refused) */
    uint8_t head_only;    /* HEAD: no body */
    uint8_t too_big;      /* header block over max_header_size */
    uint8_t provider;     /* the response has a body to stream */
    uint8_t deferred;     /* the body's reader waits for data */
    uint8_t eof;          /* the response has ended */
    uint8_t body_over;    /* request body over max_body_size: refused, the rest dropped */
    uint8_t counting;     /* body of unknown length: resp_bytes counts what is written */
    uint8_t malformed;    /* RFC 9113 8.1.1: reset with PROTOCOL_ERROR */
    uint8_t remote_ended; /* the client sent END_STREAM or RST_STREAM */
    uint8_t seen;         /* F_* fields seen */
    uint16_t bad;         /* the status a bad field calls for (the first one) */
    uint32_t hdr_bytes;
    uint64_t clen;        /* content-length, when F_CLEN */
    uint64_t data_len;    /* request body bytes received */
    int status;
    uint64_t resp_bytes;  /* for the access log, as HTTP/1.1 logs it */
    h2_span pm, pp, pa;   /* :method, :path, :authority in head */
    bk_str method, path;  /* in head, once it is complete */
    h2_piece *out, **out_tail;
    uint64_t out_len;
    union {               /* the client, copied: the stream may outlive the connection */
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;
    /* Kept by the worker's pool of streams, their memory with them: */
    bk_buf cookie;           /* cookie fields joined with "; " (RFC 9113 8.2.3) */
    bk_buf head;             /* the decoded fields, which parser points into */
    bk_buf body;
    http_parser parser;
    http_exchange x;      /* reset (one arena chunk kept) */
};

/* Spare streams of this thread (a worker): a request costs no allocation
 * once the pool has warmed up. */
#define STREAM_POOL_MAX 256
#define STREAM_BUF_KEEP 16384
static _Thread_local h2_stream *stream_pool;
static _Thread_local uint32_t stream_pool_n;

#define CLOSED_KEEP 128 /* streams closed lately, remembered (as many as may be open) */

struct h2_session {
    nghttp2_session *ng;
    http_conn *c;
    h2_stream *streams;   /* attached ones */
    uint32_t nstreams;
    uint32_t handlers;    /* attached streams whose handler is at work */
    uint8_t goaway;       /* GOAWAY queued: no new streams */
    uint8_t progress;     /* request frames in or body bytes out since last asked */
    uint8_t in_input;     /* inside nghttp2_session_mem_recv */
    uint8_t dead;         /* the session failed: close */
    uint64_t body_bytes;  /* request bodies held by this connection's streams */
    h2_stream *upgraded;  /* Upgrade: h2c: stream 1, until the client's preface */
    h2_stream *decoding;  /* the stream whose request head is being decoded */
    int32_t max_id;       /* highest stream the client has opened */
    uint32_t closed_next; /* the oldest of closed[] */
    uint32_t scan_skip;   /* input bytes before the next frame header (input_scan) */
    uint8_t scan_have;    /* bytes of scan_hd read */
    uint8_t scan_hd[9];
    struct {
        int32_t id;
        uint8_t remote_ended;
    } closed[CLOSED_KEEP]; /* streams closed lately (closed_lookup) */
};

static const http_proto_ops h2_ops;

static inline h2_session *sess(const http_conn *c)
{
    return c->b ? c->b->h2 : NULL;
}

static inline h2_stream *stream_of(const http_exchange *x)
{
    return BK_CONTAINER_OF(x, h2_stream, x);
}

/* ---- streams ---- */

static h2_stream *stream_new(h2_session *s, int32_t id)
{
    h2_stream *st = stream_pool;
    if (st) {
        stream_pool = st->deferred_next;
        stream_pool_n--;
        memset(st, 0, offsetof(h2_stream, cookie)); /* the rest was reset for reuse */
    } else {
        st = calloc(1, sizeof *st);
        if (!st)
            return NULL;
        http_exchange_init(&st->x);
    }
    http_conn *c = s->c;
    st->s = s;
    st->id = id;
    st->out_tail = &st->out;
    http_parser_reset(&st->parser);
    st->x.proto = &h2_ops;
    st->x.hw = c->hw;
    st->x.conf = http_conf_retain(c->conf); /* a detached stream outlives c */
    memcpy(&st->peer, &c->peer, BK_MIN(sizeof st->peer, sizeof c->peer));
    st->x.peer = &st->peer.sa;
    st->next = s->streams;
    if (s->streams)
        s->streams->prev = st;
    s->streams = st;
    s->nstreams++;
    return st;
}

static void pieces_release(h2_stream *st)
{
    while (st->out) {
        h2_piece *p = st->out;
        st->out = p->next;
        if (p->release)
            p->release(p->arg);
        if (!p->in_arena)
            free(p);
    }
    st->out_tail = &st->out;
    st->out_len = 0;
}

/* Back to the pool (its buffers emptied, large ones freed), or freed at
 * the end of the loop iteration. Either way the memory stays valid while
 * a handler returns through its exchange. */
static void stream_free(h2_stream *st)
{
    pieces_release(st);
    http_conf_release(st->x.conf);
    st->x.conf = NULL;
    int keep = stream_pool_n < STREAM_POOL_MAX;
    bk_buf *bufs[] = { &st->cookie, &st->head, &st->body };
    for (size_t i = 0; i < BK_ARRAY_LEN(bufs); i++) {
        if (!keep || bufs[i]->cap > STREAM_BUF_KEEP)
            buf_free(bufs[i]);
        bufs[i]->len = 0;
    }
    http_exchange_reset(&st->x, !keep);
    if (keep) {
        st->deferred_next = stream_pool;
        stream_pool = st;
        stream_pool_n++;
        return;
    }
    http_worker *hw = st->x.hw;
    st->deferred_next = hw->deferred;
    hw->deferred = st;
}

static void mem_release_spares(void);
static void head_cache_free(void);

void http_h2_release_pools(void)
{
    while (stream_pool) {
        h2_stream *st = stream_pool;
        stream_pool = st->deferred_next;
        bk_buf *bufs[] = { &st->cookie, &st->head, &st->body };
        for (size_t i = 0; i < BK_ARRAY_LEN(bufs); i++)
            buf_free(bufs[i]);
        http_exchange_reset(&st->x, 1);
        free(st);
    }
    stream_pool_n = 0;
    head_cache_free();
    mem_release_spares();
}

/* Takes st off its session: the client will not see more of it. */
static void stream_detach(h2_stream *st)
{
    h2_session *s = st->s;
    if (!s)
        return;
    if (s->upgraded == st)
        s->upgraded = NULL;
    if (s->decoding == st)
        s->decoding = NULL;
    if (st->prev)
        st->prev->next = st->next;
    else
        s->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    s->nstreams--;
    if (st->in_handler)
        s->handlers--;
    nghttp2_session_set_stream_user_data(s->ng, st->id, NULL);
    st->s = NULL;
}

/* The stream is over for the client; its handler may still be at work. */
static void stream_gone(h2_stream *st)
{
    if (st->s)
        st->s->body_bytes -= st->body.len;
    stream_detach(st);
    pieces_release(st);
    if (st->in_handler)
        http_exchange_abort(&st->x); /* its handler ends it, maybe right now */
    else
        stream_free(st);
}

/* ---- response: the protocol's side of the exchange ---- */

static void resume(h2_stream *st)
{
    if (st->deferred && st->s) {
        st->deferred = 0;
        nghttp2_session_resume_data(st->s->ng, st->id);
    }
    if (st->s && !st->s->in_input)
        http_conn_queue_flush(st->s->c);
}

/* A response of known length takes its pieces from the exchange's arena
 * (no malloc; bounded by the response); a streamed one from malloc, each
 * freed once sent, so a long stream does not grow the arena. */
static h2_piece *piece_add(h2_stream *st, uint8_t kind, size_t copy, uint64_t len,
                           http_release_fn release, void *arg)
{
    h2_piece *p = NULL;
    if (!st->counting && copy <= 4096)
        p = http_exchange_alloc(&st->x, sizeof *p + copy);
    int in_arena = p != NULL;
    if (!p)
        p = malloc(sizeof *p + copy);
    if (!p) {
        log_error("out of memory for an HTTP/2 response");
        abort();
    }
    memset(p, 0, sizeof *p);
    p->in_arena = (uint8_t)in_arena;
    p->len = len;
    p->release = release;
    p->arg = arg;
    st->out_len += len;
    p->kind = kind;
    *st->out_tail = p;
    st->out_tail = &p->next;
    return p;
}

static void body_copy(h2_stream *st, const void *data, size_t n)
{
    h2_piece *p = piece_add(st, P_COPY, n, n, NULL, NULL);
    memcpy(p->data, data, n);
}

/* ASCII lower case, for header names (HTTP/2 sends them lowered). */
static inline char lower(char c)
{
    return (unsigned char)(c - 'A') < 26 ? (char)(c + 32) : c;
}

/* 0x20 in each byte of w that is 'A'..'Z', 0 elsewhere: w | upper8(w) is
 * w in lower case. */
static inline uint64_t upper8(uint64_t w)
{
    uint64_t low7 = w & (BK_BYTES8_ONES * 0x7f);
    uint64_t ge_a = low7 + BK_BYTES8_ONES * (0x80 - 'A');     /* high bit: >= 'A' */
    uint64_t gt_z = low7 + BK_BYTES8_ONES * (0x80 - 'Z' - 1); /* high bit: > 'Z' */
    return (ge_a & ~gt_z & ~w & (BK_BYTES8_ONES * 0x80)) >> 2;
}

/* Header fields an HTTP/2 message must not carry (RFC 9113 8.2.2). */
static int connection_specific(const char *n, size_t len)
{
    static const struct { const char *name; size_t len; } names[] = {
        { "connection", 10 }, { "keep-alive", 10 }, { "proxy-connection", 16 },
        { "transfer-encoding", 17 }, { "upgrade", 7 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(names); i++)
        if (names[i].len == len && memcmp(names[i].name, n, len) == 0)
            return 1;
    return 0;
}

static ssize_t body_read(nghttp2_session *ng, int32_t id, uint8_t *b, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud);

/* Response heads split once: a handler's header lines are "Name: value\r\n"
 * text, which HTTP/2 wants as lower-case names and values apart. A static
 * file's head is the same text on every request (its cache entry's), so
 * each thread keeps the split of a few recent heads, found by where the
 * text lives and its length, and used when the text is the same: its
 * lowered copy and its fields' places are taken, no scan. */
#define HEAD_SLOTS 32
#define HEAD_TEXT_MAX 512
#define HEAD_FIELDS_MAX 16

typedef struct {
    uint32_t len; /* of the text; 0: empty slot */
    uint32_t n;
    struct { uint16_t name_off, name_len, val_off, val_len; } f[HEAD_FIELDS_MAX];
    char text[HEAD_TEXT_MAX];    /* as the handler gave it */
    char lowered[HEAD_TEXT_MAX]; /* names lowered */
} head_split;

static _Thread_local head_split *head_cache; /* HEAD_SLOTS, made on first use */

static void head_cache_free(void)
{
    free(head_cache);
    head_cache = NULL;
}

static head_split *head_slot(const bk_str *lines, size_t nlines, size_t total)
{
    if (!nlines || total > HEAD_TEXT_MAX)
        return NULL;
    if (!head_cache && !(head_cache = calloc(HEAD_SLOTS, sizeof *head_cache)))
        return NULL;
    uintptr_t h = (uintptr_t)lines[0].p;
    h = (h >> 4) ^ (h >> 12) ^ total ^ (nlines << 5);
    return &head_cache[h % HEAD_SLOTS];
}

static int head_same(const head_split *hs, const bk_str *lines, size_t nlines, size_t total)
{
    if (hs->len != total)
        return 0;
    for (size_t i = 0, o = 0; i < nlines; o += lines[i].len, i++)
        if (lines[i].len && memcmp(hs->text + o, lines[i].p, lines[i].len) != 0)
            return 0;
    return 1;
}

static void h2_send_head(http_exchange *x, int status, const bk_str *lines, size_t nlines,
                         uint64_t length, const void *body, size_t body_len)
{
    h2_stream *st = stream_of(x);
    h2_session *s = st->s;
    st->status = status;
    if (!s)
        return;
    /* The parts into one copy in the exchange's arena, names lowered in
     * place: nghttp2 takes the fields without copying them again (they
     * live until the stream is over, which is after its HEADERS went). */
    size_t total = 0;
    for (size_t i = 0; i < nlines; i++)
        total += lines[i].len;
    char *t = http_exchange_alloc(x, total + 32);
    size_t nmax = 4;
    head_split *hs = head_slot(lines, nlines, total);
    int hit = t && hs && head_same(hs, lines, nlines, total);
    if (hit) {
        memcpy(t, hs->lowered, total);
        nmax += hs->n;
    } else if (t) {
        size_t o = 0;
        for (size_t i = 0; i < nlines; i++)
            if (lines[i].len) {
                memcpy(t + o, lines[i].p, lines[i].len);
                o += lines[i].len;
            }
        for (const char *p = t, *end = t + total; (p = memchr(p, '\n', (size_t)(end - p)));)
            nmax++, p++;
    }
    nghttp2_nv *nv = t ? http_exchange_alloc(x, nmax * sizeof *nv) : NULL;
    if (!nv) {
        nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    char *code = t + total, *clen = t + total + 4;
    code[0] = (char)('0' + status / 100 % 10);
    code[1] = (char)('0' + status / 10 % 10);
    code[2] = (char)('0' + status % 10);
    size_t n = 0;
#define NV(nm, nmlen, v, vlen)                                                   \
    nv[n++] = (nghttp2_nv){ (uint8_t *)(nm), (uint8_t *)(v), (nmlen), (vlen),   \
                            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE }
    NV(":status", 7, code, 3);
    NV("server", 6, SERVER_NAME, sizeof SERVER_NAME - 1);
    /* (the worker's clock string: rewritten in place once a second, same length) */
    NV("date", 4, x->hw->w.clock.http_date, CLOCK_HTTP_DATE_LEN);
    if (hit) {
        for (uint32_t i = 0; i < hs->n; i++)
            NV(t + hs->f[i].name_off, hs->f[i].name_len, t + hs->f[i].val_off, hs->f[i].val_len);
        hs = NULL; /* nothing to keep */
    }
    size_t first = n;
    for (char *p = t, *end = t + (hit ? 0 : total); p < end && n < nmax;) {
        char *q = p;
        for (uint64_t w; q + 8 <= end; q += 8) { /* eight bytes at a time */
            memcpy(&w, q, 8);
            if (bytes8_has(w, ':') | bytes8_has(w, '\n'))
                break;
            w |= upper8(w);
            memcpy(q, &w, 8);
        }
        while (q < end && *q != ':' && *q != '\n') {
            *q = lower(*q);
            q++;
        }
        char *eol = q < end && *q == ':' ? memchr(q, '\n', (size_t)(end - q)) : q;
        if (!eol)
            break;
        if (*q == ':' && q > p) {
            size_t nl = (size_t)(q - p);
            char *v = q + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (!connection_specific(p, nl))
                NV(p, nl, v, (size_t)(ve - v));
        }
        p = eol + 1;
    }
    if (hs && n - first <= HEAD_FIELDS_MAX) { /* kept for the next time */
        hs->len = (uint32_t)total;
        hs->n = (uint32_t)(n - first);
        for (uint32_t i = 0; i < hs->n; i++) {
            const nghttp2_nv *f = &nv[first + i];
            hs->f[i].name_off = (uint16_t)((const char *)f->name - t);
            hs->f[i].name_len = (uint16_t)f->namelen;
            hs->f[i].val_off = (uint16_t)((const char *)f->value - t);
            hs->f[i].val_len = (uint16_t)f->valuelen;
        }
        for (size_t i = 0, o = 0; i < nlines; o += lines[i].len, i++)
            if (lines[i].len)
                memcpy(hs->text + o, lines[i].p, lines[i].len);
        memcpy(hs->lowered, t, total);
    }
    if (length != HTTP_LEN_NONE && length != HTTP_LEN_STREAM && n < nmax)
        NV("content-length", 14, clen, (size_t)num_format_u64(clen, length));
#undef NV
    st->provider = !st->head_only && length != HTTP_LEN_NONE && length != 0;
    st->resp_bytes = length == HTTP_LEN_NONE || length == HTTP_LEN_STREAM ? 0 : length;
    st->counting = length == HTTP_LEN_STREAM;
    if (st->provider && body_len)
        body_copy(st, body, body_len);
    nghttp2_data_provider prd = { .source.ptr = st, .read_callback = body_read };
    int rc = nghttp2_submit_response(s->ng, st->id, nv, n, st->provider ? &prd : NULL);
    if (rc != 0)
        log_debug("HTTP/2: response on stream %d not submitted: %s", st->id,
                  nghttp2_strerror(rc));
    resume(st);
}

static void h2_send_body(http_exchange *x, const void *p, size_t n)
{
    h2_stream *st = stream_of(x);
    if (!st->s || !st->provider || n == 0)
        return;
    if (st->counting)
        st->resp_bytes += n;
    body_copy(st, p, n);
    resume(st);
}

static void h2_send_ref(http_exchange *x, const char *p, size_t n, http_release_fn release,
                        void *arg)
{
    h2_stream *st = stream_of(x);
    if (!st->s || !st->provider || n <= HTTP_COPY_MAX) {
        if (st->s && st->provider && n)
            body_copy(st, p, n);
        if (release)
            release(arg);
        resume(st);
        return;
    }
    piece_add(st, P_REF, 0, n, release, arg)->mem = p;
    resume(st);
}

static void h2_send_fd(http_exchange *x, int fd, uint64_t off, uint64_t len,
                       http_release_fn release, void *arg)
{
    h2_stream *st = stream_of(x);
    if (!st->s || !st->provider || len == 0) {
        if (release)
            release(arg);
        return;
    }
    h2_piece *pc = piece_add(st, P_FD, 0, len, release, arg);
    pc->fd = fd;
    pc->off = off;
    resume(st);
}

static size_t h2_pending(const http_exchange *x)
{
    return (size_t)stream_of(x)->out_len;
}

static int h2_local_addr(const http_exchange *x, struct sockaddr_storage *ss, socklen_t *len)
{
    const h2_stream *st = stream_of(x);
    if (!st->s || st->s->c->io.fd < 0)
        return -1;
    return getsockname(st->s->c->io.fd, (struct sockaddr *)ss, len) == 0 ? 0 : -1;
}

static void access_log(h2_stream *st)
{
    http_worker *hw = st->x.hw;
    char line[LOG_LINE_MAX];
    int n = snprintf(line, sizeof line, "%.*s %.*s HTTP/2.0", (int)BK_MIN(st->method.len, 64),
                     st->method.p ? st->method.p : "", (int)BK_MIN(st->path.len, 1900),
                     st->path.p ? st->path.p : "");
    const http_parser *p = &st->parser;
    const char *head = st->x.req.head;
    bk_str ref = head ? http_parser_known(p, head, HH_REFERER) : BK_STR_NULL;
    bk_str ua = head ? http_parser_known(p, head, HH_USER_AGENT) : BK_STR_NULL;
    http_access_log(hw, st->x.peer, (bk_str){ line, (size_t)BK_MAX(n, 0) }, st->status,
                    st->head_only ? 0 : st->resp_bytes, ref, ua);
}

static void h2_finish(http_exchange *x, int cut)
{
    h2_stream *st = stream_of(x);
    h2_session *s = st->s;
    if (st->in_handler) {
        st->in_handler = 0;
        if (s)
            s->handlers--;
    }
    http_worker *hw = x->hw;
    if (st->status >= 100 && st->status < 600)
        hw->stats.responses[st->status / 100 - 1]++;
    if (hw->access_on && s)
        access_log(st);
    if (!s) {
        stream_free(st);
        return;
    }
    if (cut) {
        nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    } else if (!st->x.headers_sent) {
        /* (never: every end sends a head) */
        nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    }
    st->eof = 1;
    resume(st);
}

static const http_proto_ops h2_ops = {
    .send_head = h2_send_head,
    .send_body = h2_send_body,
    .send_ref = h2_send_ref,
    .send_fd = h2_send_fd,
    .finish = h2_finish,
    .pending = h2_pending,
    .local_addr = h2_local_addr,
};

/* The body reader: says how much can go (no copy); body_send writes it. */
static ssize_t body_read(nghttp2_session *ng, int32_t id, uint8_t *b, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ng, (void)id, (void)b, (void)ud;
    h2_stream *st = src->ptr;
    if (st->out_len == 0) {
        if (st->eof) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        st->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = (size_t)BK_MIN((uint64_t)length, st->out_len);
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->eof && n == st->out_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int body_send(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                     size_t length, nghttp2_data_source *src, void *ud)
{
    (void)ng, (void)frame;
    h2_session *s = ud;
    http_conn *c = s->c;
    h2_stream *st = src->ptr;
    if (c->b->out.len > OUT_HIGH_WATER || c->b->nsegs + 2 > HTTP_OUT_SEGS)
        return NGHTTP2_ERR_WOULDBLOCK;
    char *out = http_conn_out_reserve(c, 9 + length);
    memcpy(out, framehd, 9);
    size_t done = 0;
    while (done < length && st->out) {
        h2_piece *p = st->out;
        size_t take = (size_t)BK_MIN(p->len, (uint64_t)(length - done));
        char *dst = out + 9 + done;
        if (p->kind == P_COPY) {
            memcpy(dst, p->data + p->off, take);
        } else if (p->kind == P_REF) {
            memcpy(dst, p->mem + p->off, take);
        } else {
            for (size_t got = 0; got < take;) {
                ssize_t r = pread(p->fd, dst + got, take - got, (off_t)(p->off + got));
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0) /* unreadable, or the file shrank: reset the stream */
                    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                got += (size_t)r;
            }
        }
        p->off += take;
        p->len -= take;
        st->out_len -= take;
        done += take;
        if (p->len == 0) {
            st->out = p->next;
            if (!st->out)
                st->out_tail = &st->out;
            if (p->release)
                p->release(p->arg);
            if (!p->in_arena)
                free(p);
        }
    }
    if (done < length)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* (never: body_read said so) */
    http_conn_out_commit(c, 9 + length);
    s->progress = 1;
    return 0;
}

/* ---- requests ---- */

static void stream_respond_error(h2_stream *st, int status)
{
    http_worker *hw = st->x.hw;
    hw->stats.requests++;
    st->dispatched = 1;
    st->in_handler = 1;
    st->s->handlers++;
    st->x.req = (http_request){ .head = st->head.data ? st->head.data : "",
                                .parser = &st->parser,
                                .method_name = st->method,
                                .version_minor = 1 };
    http_parser_reset(&st->parser);
    http_exchange_error(&st->x, status, NULL);
}

static int authority_chars_ok(const char *v, size_t len);

/* The end of a request's header block: the fields were checked as they
 * came (on_header); now the request line's parts, Host from :authority
 * when no host field came, the cookie crumbs as one field, and the rules
 * of a complete head (http_parser_end_fields), as HTTP/1.1 applies them.
 * 0, the status to refuse the request with, or -1 when its :authority is
 * malformed (reset the stream). */
static int stream_end_head(h2_stream *st)
{
    if (st->too_big)
        return 431;
    if (!st->pm.len || !st->pp.len)
        return 400; /* (CONNECT: no path) */
    bk_buf *h = &st->head;
    http_parser *p = &st->parser;
    const http_limits *lim = &st->x.conf->limits;
    int rc = http_parser_set_line(p, h->data, st->pm.off, st->pm.len, st->pp.off, st->pp.len);
    if (rc < 0)
        return -rc;
    if (st->bad)
        return st->bad;
    if (!p->known[HH_HOST] && st->pa.len) {
        if (buf_append(h, "host", 4) < 0)
            return 500;
        rc = http_parser_add_field(p, h->data, (uint32_t)h->len - 4, 4, st->pa.off, st->pa.len, lim);
        if (rc < 0)
            return authority_chars_ok(h->data + st->pa.off, st->pa.len) ? -rc : -1;
    }
    if (st->cookie.len) {
        uint32_t at = (uint32_t)h->len;
        if (buf_append(h, "cookie: ", 8) < 0 || buf_append(h, st->cookie.data, st->cookie.len) < 0 ||
            buf_append(h, "\r\n", 2) < 0)
            return 500;
        st->cookie.len = 0;
        rc = http_parser_add_field(p, h->data, at, 6, at + 8, (uint32_t)h->len - at - 10, lim);
        if (rc < 0)
            return -rc;
    }
    if (h->len > HTTP_MAX_HEAD_SIZE) /* (never: the fields' count keeps it below) */
        return 431;
    rc = http_parser_end_fields(p);
    return rc < 0 ? -rc : 0;
}

static void stream_dispatch(h2_stream *st)
{
    if (st->dispatched)
        return;
    h2_session *s = st->s;
    http_worker *hw = st->x.hw;
    st->dispatched = 1;
    http_exchange_set_request(&st->x, st->head.data, &st->parser,
                              (bk_str){ st->body.data, st->body.len });
    st->x.req.version_major = 2;
    st->head_only = st->x.req.method == HTTP_HEAD;
    st->in_handler = 1;
    s->handlers++;
    hw->stats.requests++;
    hw->handler(&st->x, hw->handler_udata);
}

/* ---- well-formed requests (RFC 9113 8.1.1, 8.2, 8.3) ----
 * nghttp2's HTTP messaging checks are off (nghttp2_option_set_no_http_
 * messaging): they are made here, in the pass over the fields that fills
 * the request anyway. A malformed request's stream is reset with
 * PROTOCOL_ERROR, as nghttp2 did; what is well-formed HTTP/2 but bad HTTP
 * (a '#' in the path, a bad Host, an Expect other than 100-continue, ...)
 * gets the HTTP/1.1 parser's status. */

enum { F_METHOD = 1, F_PATH = 2, F_SCHEME = 4, F_AUTHORITY = 8, F_HOST = 16, F_REGULAR = 32,
       F_CLEN = 64 };

static void stream_malformed(h2_stream *st)
{
    if (st->malformed || !st->s)
        return;
    st->malformed = 1;
    nghttp2_submit_rst_stream(st->s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
}

#define CHAR_IS(cls, ch) (http_char_class[(unsigned char)(ch)] & HTTP_CH_##cls)

/* authority = [ userinfo "@" ] host [ ":" port ] (RFC 3986 3.2): its
 * characters only; Host's syntax is the HTTP/1.1 parser's to check. */
static int authority_chars_ok(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!CHAR_IS(REGNAME, v[i]) && v[i] != ':' && v[i] != '@' && v[i] != '[' && v[i] != ']')
            return 0;
    return 1;
}

/* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) */
static int scheme_ok(const char *v, size_t len)
{
    if (!len || (unsigned char)((v[0] | 0x20) - 'a') >= 26)
        return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((unsigned char)((c | 0x20) - 'a') >= 26 && (unsigned char)(c - '0') >= 10 &&
            c != '+' && c != '-' && c != '.')
            return 0;
    }
    return 1;
}

/* A field value must not hold NUL, CR or LF, nor start or end with a
 * space or a tab (RFC 9113 8.2.1), nor other controls than HTAB (RFC 9110
 * 5.5; nghttp2 reset those too). */
static int value_well_formed(const char *v, size_t len)
{
    if (!len)
        return 1;
    if (v[0] == ' ' || v[0] == '\t' || v[len - 1] == ' ' || v[len - 1] == '\t')
        return 0;
    size_t i = 0;
    for (uint64_t w; i + 8 <= len; i += 8) { /* no control byte at all: the usual case */
        memcpy(&w, v + i, 8);
        if (bytes8_has_below(w, 0x20) | bytes8_has(w, 0x7f))
            break;
    }
    for (; i < len; i++)
        if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
            return 0;
    return 1;
}

static int field_well_formed(h2_stream *st, const char *n, size_t nl, const char *v, size_t vl)
{
    if (!nl)
        return 0;
    if (n[0] == ':') {
        unsigned bit;
        int ok;
        if (st->seen & F_REGULAR)
            return 0; /* pseudo-header fields come first */
        /* (The characters of :method and :path are the HTTP/1.1 checks',
         * those of :authority too when it becomes the Host: 400; see
         * stream_end_head.) */
        if (nl == 7 && memcmp(n, ":method", 7) == 0) {
            bit = F_METHOD;
            ok = vl > 0;
        } else if (nl == 5 && memcmp(n, ":path", 5) == 0) {
            bit = F_PATH;
            ok = vl > 0;
        } else if (nl == 7 && memcmp(n, ":scheme", 7) == 0) {
            bit = F_SCHEME;
            ok = scheme_ok(v, vl);
        } else if (nl == 10 && memcmp(n, ":authority", 10) == 0) {
            bit = F_AUTHORITY;
            ok = 1;
        } else {
            return 0; /* unknown, or a response's (:status), or :protocol (not offered) */
        }
        if (st->seen & bit)
            return 0;
        st->seen |= (uint8_t)bit;
        return ok;
    }
    st->seen |= F_REGULAR;
    for (size_t i = 0; i < nl; i++) /* lower-case token characters */
        if (!CHAR_IS(TOKEN, n[i]) || (unsigned char)(n[i] - 'A') < 26)
            return 0;
    if (!value_well_formed(v, vl) || connection_specific(n, nl))
        return 0;
    switch (nl) {
    case 2:
        if (n[0] == 't' && n[1] == 'e')
            return vl == 8 && strncasecmp(v, "trailers", 8) == 0;
        break;
    case 4:
        if (memcmp(n, "host", 4) == 0) {
            if (st->seen & F_HOST)
                return 0;
            st->seen |= F_HOST;
            return authority_chars_ok(v, vl);
        }
        break;
    case 14:
        if (memcmp(n, "content-length", 14) == 0) {
            if (st->seen & F_CLEN)
                return 0;
            st->seen |= F_CLEN;
            return num_parse_u64(v, vl, (uint64_t)1 << 62, &st->clen) == 0;
        }
        break;
    }
    return 1;
}

/* At the end of a request's header block: the fields a request needs. */
static int request_well_formed(const h2_stream *st, int end_stream)
{
    const char *m = st->pm.len ? st->head.data + st->pm.off : "";
    if (st->pm.len == 7 && memcmp(m, "CONNECT", 7) == 0) {
        if ((st->seen & (F_PATH | F_SCHEME)) || !(st->seen & F_AUTHORITY))
            return 0;
    } else {
        if ((st->seen & (F_METHOD | F_PATH | F_SCHEME)) != (F_METHOD | F_PATH | F_SCHEME) ||
            !(st->seen & (F_AUTHORITY | F_HOST)))
            return 0;
        const char *path = st->head.data + st->pp.off;
        if (path[0] != '/' &&
            !(st->pp.len == 1 && path[0] == '*' && st->pm.len == 7 && memcmp(m, "OPTIONS", 7) == 0))
            return 0;
    }
    if ((st->seen & (F_AUTHORITY | F_HOST)) == (F_AUTHORITY | F_HOST) &&
        !authority_chars_ok(st->head.data + st->pa.off, st->pa.len))
        return 0; /* (not the Host: checked here) */
    return !end_stream || !(st->seen & F_CLEN) || st->clen == 0;
}

/* Streams closed lately, remembered for the frames a client may still send
 * on them: nghttp2 keeps no closed streams (SETTINGS_NO_RFC7540_PRIORITIES,
 * below). 1 when the client had ended id (END_STREAM or RST_STREAM) before
 * it closed, 0 when the server closed it first, -1 when not remembered. */
static int closed_lookup(const h2_session *s, int32_t id)
{
    for (uint32_t i = 0; i < CLOSED_KEEP; i++)
        if (s->closed[i].id == id)
            return s->closed[i].remote_ended;
    return -1;
}

/* Frames on streams nghttp2 no longer has (RFC 9113 5.1):
 * - on a stream closed lately whose client had ended it: a connection
 *   error STREAM_CLOSED (it sent frames after END_STREAM or RST_STREAM);
 *   one the server reset first: ignored (frames may be in flight);
 * - HEADERS below the highest stream opened, not remembered: a skipped
 *   (so implicitly closed, 5.1.1) or long closed stream: PROTOCOL_ERROR;
 * - PRIORITY on stream 0: PROTOCOL_ERROR (6.3; nghttp2 ignores PRIORITY
 *   frames without RFC 7540 priorities). */
static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud)
{
    h2_session *s = ud;
    int32_t id = hd->stream_id;
    if (hd->type == NGHTTP2_PRIORITY && id == 0) {
        nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    if ((hd->type != NGHTTP2_HEADERS && hd->type != NGHTTP2_DATA) || !(id & 1))
        return 0;
    if (id > s->max_id) {
        if (hd->type == NGHTTP2_HEADERS)
            s->max_id = id;
        return 0; /* (DATA on an idle stream: nghttp2's PROTOCOL_ERROR) */
    }
    if ((s->decoding && s->decoding->id == id) || nghttp2_session_find_stream(ng, id))
        return 0;
    int ended = closed_lookup(s, id);
    if (ended == 1)
        nghttp2_session_terminate_session(ng, NGHTTP2_STREAM_CLOSED);
    else if (ended < 0 && hd->type == NGHTTP2_HEADERS && id < s->max_id)
        nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
    return 0;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    h2_session *s = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (s->goaway) { /* (GOAWAY queued, not sent yet) */
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    h2_stream *st = stream_new(s, frame->hd.stream_id);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, st);
    s->decoding = st;
    return 0;
}

/* The stream of a frame: the one being decoded (no lookup), or nghttp2's. */
static inline h2_stream *frame_stream(nghttp2_session *ng, h2_session *s, int32_t id)
{
    if (s->decoding && s->decoding->id == id)
        return s->decoding;
    return nghttp2_session_get_stream_user_data(ng, id);
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    (void)flags;
    h2_stream *st = frame_stream(ng, ud, frame->hd.stream_id);
    const char *n = (const char *)name, *v = (const char *)value;
    if (!st || st->malformed)
        return 0;
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        if (namelen && n[0] == ':') /* (trailers are dropped; no pseudo-header in them) */
            stream_malformed(st);
        return 0;
    }
    if (st->too_big)
        return 0;
    st->hdr_bytes += (uint32_t)(namelen + valuelen + 4);
    if (st->hdr_bytes > st->x.conf->limits.max_head_size) {
        st->too_big = 1; /* decoded on, kept no more: 431 at the end */
        return 0;
    }
    if (!field_well_formed(st, n, namelen, v, valuelen)) {
        stream_malformed(st);
        return 0;
    }
    bk_buf *h = &st->head;
    if (namelen && n[0] == ':') {
        h2_span *slot = NULL;
        if (namelen == 7 && memcmp(n, ":method", 7) == 0)
            slot = &st->pm;
        else if (namelen == 5 && memcmp(n, ":path", 5) == 0)
            slot = &st->pp;
        else if (namelen == 10 && memcmp(n, ":authority", 10) == 0)
            slot = &st->pa;
        if (slot) {
            slot->off = (uint32_t)h->len;
            slot->len = (uint32_t)valuelen;
            if (buf_append(h, v, valuelen) < 0)
                st->too_big = 1; /* out of memory: refused the same way */
        }
    } else if (namelen == 6 && memcmp(n, "cookie", 6) == 0) {
        if ((st->cookie.len && buf_append(&st->cookie, "; ", 2) < 0) ||
            buf_append(&st->cookie, v, valuelen) < 0)
            st->too_big = 1;
    } else if (!st->bad) {
        /* "name: value\r\n" as HTTP/1.1 has it; its characters were
         * checked (field_well_formed), the rest is the HTTP/1.1 parser's. */
        if (buf_reserve(h, namelen + valuelen + 4) < 0) {
            st->too_big = 1;
            return 0;
        }
        uint32_t at = (uint32_t)h->len;
        buf_put(h, n, namelen);
        buf_put(h, ": ", 2);
        buf_put(h, v, valuelen);
        buf_put(h, "\r\n", 2);
        int rc = http_parser_add_checked_field(&st->parser, h->data, at, (uint32_t)namelen,
                                               at + (uint32_t)namelen + 2, (uint32_t)valuelen,
                                               &st->x.conf->limits);
        if (rc < 0)
            st->bad = (uint16_t)-rc;
    }
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)flags;
    h2_session *s = ud;
    h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (!st || st->malformed)
        return 0;
    st->data_len += len;
    if ((st->seen & F_CLEN) && st->data_len > st->clen) {
        stream_malformed(st); /* more than its content-length (RFC 9113 8.1.1) */
        return 0;
    }
    if (st->dispatched || st->body_over)
        return 0;
    s->progress = 1;
    uint64_t max = st->x.conf->max_body_size;
    if (s->body_bytes + len > BODIES_MAX(max)) {
        /* Many streams uploading at once: one connection holds no more
         * than a few bodies' worth; the client may try this one again. */
        st->body_over = 1;
        s->body_bytes -= st->body.len;
        buf_free(&st->body);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    if (st->body.len + len > max || buf_append(&st->body, data, len) < 0) {
        st->body_over = 1;
        s->body_bytes -= st->body.len;
        buf_free(&st->body);
        stream_respond_error(st, 413); /* at once; the rest of the body is dropped */
        return 0;
    }
    s->body_bytes += len;
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    h2_session *s = ud;
    h2_stream *st;
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (st = frame_stream(ng, s, frame->hd.stream_id)))
        st->remote_ended = 1;
    switch (frame->hd.type) {
    case NGHTTP2_RST_STREAM:
        if ((st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id)))
            st->remote_ended = 1;
        return 0;

    case NGHTTP2_HEADERS:
        st = frame_stream(ng, s, frame->hd.stream_id);
        if (!st || st->malformed)
            return 0;
        s->progress = 1;
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            stream_malformed(st); /* trailers end the stream */
            return 0;
        }
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST && !st->too_big &&
            !request_well_formed(st, frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            stream_malformed(st);
            return 0;
        }
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && (st->seen & F_CLEN) &&
            st->data_len != st->clen) {
            stream_malformed(st); /* less than its content-length */
            return 0;
        }
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
            int status = stream_end_head(st);
            const char *hd = st->head.data;
            st->method = st->pm.len ? (bk_str){ hd + st->pm.off, st->pm.len } : BK_STR_NULL;
            st->path = st->pp.len ? (bk_str){ hd + st->pp.off, st->pp.len } : BK_STR_NULL;
            if (status < 0) {
                stream_malformed(st);
                return 0;
            }
            if (status) {
                stream_respond_error(st, status);
                return 0;
            }
            if (st->parser.known[HH_EXPECT] && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
                nghttp2_nv nv = { (uint8_t *)":status", (uint8_t *)"100", 7, 3,
                                  NGHTTP2_NV_FLAG_NONE };
                nghttp2_submit_headers(ng, NGHTTP2_FLAG_NONE, st->id, NULL, &nv, 1, NULL);
            }
        }
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            stream_dispatch(st);
        return 0;
    case NGHTTP2_DATA:
        st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
        if (!st || st->malformed || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            return 0;
        if ((st->seen & F_CLEN) && st->data_len != st->clen) {
            stream_malformed(st); /* less than its content-length */
            return 0;
        }
        stream_dispatch(st);
        return 0;
    case NGHTTP2_SETTINGS:
        if (s->upgraded && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            st = s->upgraded; /* the client's preface: answer the upgraded request */
            s->upgraded = NULL;
            if (st->s)
                stream_dispatch(st);
        }
        return 0;
    default:
        return 0;
    }
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud)
{
    (void)error_code;
    h2_session *s = ud;
    h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (id & 1) {
        uint32_t i = s->closed_next++ % CLOSED_KEEP;
        s->closed[i].id = id;
        s->closed[i].remote_ended = st ? st->remote_ended : 0;
    }
    if (st)
        stream_gone(st);
    return 0;
}

/* ---- the session ---- */

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

/* ---- nghttp2's memory: per-thread free lists by size class ----
 * nghttp2 allocates and frees a few dozen small blocks per request (frames,
 * header fields, stream state); a session lives on one worker thread, so
 * each thread keeps its own spare blocks: no lock, and a pop instead of
 * malloc's bookkeeping. Blocks carry their class in a 16-byte header
 * (alignment kept); larger ones go to malloc, marked as such. Each list
 * keeps at most a bounded number of spares. */

#define MEM_CLASSES 7 /* 64 B .. 4 KiB */
#define MEM_SPARE_MAX 512
#define MEM_BIG 0xff

typedef union mem_hdr {
    struct {
        union mem_hdr *next; /* on a free list */
        size_t size;         /* MEM_BIG blocks: the size asked */
        uint8_t cls;
    };
    max_align_t align;
} mem_hdr;

static _Thread_local mem_hdr *mem_free[MEM_CLASSES];
static _Thread_local uint32_t mem_nfree[MEM_CLASSES];

static inline int mem_class(size_t n)
{
    if (n > ((size_t)64 << (MEM_CLASSES - 1)))
        return MEM_BIG;
    int c = 0;
    while (((size_t)64 << c) < n)
        c++;
    return c;
}

static inline size_t mem_usable(const mem_hdr *h)
{
    return h->cls == MEM_BIG ? h->size : (size_t)64 << h->cls;
}

static void *mem_alloc(size_t n, void *ud)
{
    (void)ud;
    int c = mem_class(n);
    mem_hdr *h;
    if (c != MEM_BIG && (h = mem_free[c])) {
        mem_free[c] = h->next;
        mem_nfree[c]--;
        return h + 1;
    }
    h = malloc(sizeof *h + (c == MEM_BIG ? n : (size_t)64 << c));
    if (!h)
        return NULL;
    h->cls = (uint8_t)c;
    h->size = n;
    return h + 1;
}

static void mem_release(void *p, void *ud)
{
    (void)ud;
    if (!p)
        return;
    mem_hdr *h = (mem_hdr *)p - 1;
    int c = h->cls;
    if (c == MEM_BIG || mem_nfree[c] >= MEM_SPARE_MAX) {
        free(h);
        return;
    }
    h->next = mem_free[c];
    mem_free[c] = h;
    mem_nfree[c]++;
}

static void *mem_calloc(size_t nmemb, size_t size, void *ud)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    void *p = mem_alloc(nmemb * size, ud);
    if (p)
        memset(p, 0, nmemb * size);
    return p;
}

static void *mem_realloc(void *p, size_t n, void *ud)
{
    if (!p)
        return mem_alloc(n, ud);
    mem_hdr *h = (mem_hdr *)p - 1;
    size_t have = mem_usable(h);
    if (h->cls != MEM_BIG && n <= have)
        return p;
    void *q = mem_alloc(n, ud);
    if (!q)
        return NULL;
    memcpy(q, p, have < n ? have : n);
    mem_release(p, ud);
    return q;
}

static nghttp2_mem mem_funcs = { NULL, mem_alloc, mem_release, mem_calloc, mem_realloc };

static void mem_release_spares(void)
{
    for (int c = 0; c < MEM_CLASSES; c++) {
        while (mem_free[c]) {
            mem_hdr *h = mem_free[c];
            mem_free[c] = h->next;
            free(h);
        }
        mem_nfree[c] = 0;
    }
}

static int session_setup(void)
{
    if (callbacks)
        return 0;
    /* Once per process, from the first worker that needs it: workers start
     * one after another (start_gate), so there is no race. */
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -1;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        return -1;
    }
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cb, body_send);
    /* Acknowledgements (SETTINGS, PING) queued for a peer that does not
     * read are capped; RST_STREAM floods (rapid reset) and CONTINUATION
     * floods end the session: nghttp2's defaults. (Closed streams are
     * remembered, a bounded number, so that frames on them get the
     * STREAM_CLOSED error RFC 9113 5.1 asks for.) */
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    /* HTTP messaging's checks are ours (see request_well_formed): made in
     * the pass that fills the request, not in one more of nghttp2's. */
    nghttp2_option_set_no_http_messaging(opt, 1);
    callbacks = cb;
    options = opt;
    return 0;
}

static h2_session *session_new(http_conn *c)
{
    static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&setup_lock);
    int ok = session_setup() == 0;
    pthread_mutex_unlock(&setup_lock);
    if (!ok)
        return NULL;
    h2_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->c = c;
    s->scan_skip = HTTP_H2_PREFACE_LEN;
    if (nghttp2_session_server_new3(&s->ng, callbacks, s, options, &mem_funcs) != 0) {
        free(s);
        return NULL;
    }
    uint32_t streams = c->conf->http2_max_streams ? c->conf->http2_max_streams : 1;
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, streams },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, c->conf->limits.max_head_size },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        /* RFC 9113 deprecates RFC 7540's priorities: nghttp2 keeps no
         * dependency tree, nor closed streams for it (closed_lookup). */
        { NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 },
    };
    nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, BK_ARRAY_LEN(iv));
    c->b->h2 = s;
    return s;
}

int http_h2_start(http_conn *c)
{
    if (!session_new(c))
        return -1;
    c->state = CONN_H2;
    return 0;
}

/* base64url without padding (RFC 9113 3.2 / RFC 7540 3.2.1), into out;
 * -1 when not valid. */
static ssize_t b64url_decode(bk_str in, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (size_t i = 0; i < in.len; i++) {
        unsigned char ch = (unsigned char)in.p[i];
        int v = ch >= 'A' && ch <= 'Z'   ? ch - 'A'
                : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                : ch >= '0' && ch <= '9' ? ch - '0' + 52
                : ch == '-'              ? 62
                : ch == '_'              ? 63
                : ch == '='              ? -2
                                         : -1;
        if (v == -2)
            break; /* padding: tolerated at the end */
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)n;
}

static int has_token(bk_str v, const char *tok)
{
    size_t tl = strlen(tok);
    for (size_t i = 0; i < v.len;) {
        while (i < v.len && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ','))
            i++;
        size_t j = i;
        while (j < v.len && v.p[j] != ',' && v.p[j] != ' ' && v.p[j] != '\t')
            j++;
        if (j - i == tl && strncasecmp(v.p + i, tok, tl) == 0)
            return 1;
        i = j;
    }
    return 0;
}

int http_h2_upgrade(http_conn *c)
{
    const http_parser *p = &c->b->parser;
    const char *head = c->in + c->req_start;
    if (!c->conf->http2 || c->tls || p->body_kind != HTTP_BODY_NONE || !p->version_minor)
        return 0;
    bk_str up = http_parser_header(p, head, BK_STR("upgrade"));
    bk_str conn = http_parser_known(p, head, HH_CONNECTION);
    bk_str set = http_parser_header(p, head, BK_STR("http2-settings"));
    if (!up.p || !set.p || !has_token(up, "h2c") || !has_token(conn, "upgrade") ||
        !has_token(conn, "http2-settings"))
        return 0;
    uint8_t payload[256];
    ssize_t plen = b64url_decode(set, payload, sizeof payload);
    if (plen < 0 || plen % 6)
        return 0; /* not settings: HTTP/1.1 it stays */
    h2_session *s = session_new(c);
    if (!s)
        return -1;
    int rc = nghttp2_session_upgrade2(s->ng, payload, (size_t)plen, p->method == HTTP_HEAD, NULL);
    if (rc != 0) { /* settings nghttp2 refuses: HTTP/1.1 it stays */
        nghttp2_session_del(s->ng);
        free(s);
        c->b->h2 = NULL;
        return 0;
    }
    c->state = CONN_H2; /* from here on, closing c frees the session */
    h2_stream *st = stream_new(s, 1);
    if (!st)
        return -1;
    nghttp2_session_set_stream_user_data(s->ng, 1, st);
    static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                             "Upgrade: h2c\r\n\r\n";
    memcpy(http_conn_out_reserve(c, sizeof sw - 1), sw, sizeof sw - 1);
    http_conn_out_commit(c, sizeof sw - 1);
    /* The request moves to stream 1: its head is copied (the parser's
     * offsets are relative to it), and leaves the input buffer. */
    if (buf_append(&st->head, head, c->head_len) < 0)
        return -1;
    st->parser = *p;
    c->req_start += c->head_len;
    c->head_len = 0;
    c->requests++;
    http_exchange_set_request(&st->x, st->head.data, &st->parser, BK_STR(""));
    st->x.req.version_major = 2;
    st->method = st->x.req.method_name;
    st->path = st->x.req.target;
    /* Answered once the client's preface has come: a response sent along
     * with the 101 can overflow what a client keeps of the bytes after it
     * (curl: "connection buffer size is too small"). */
    s->upgraded = st;
    return 1;
}

/* Feeds in[0, n) to nghttp2; 0, or -1 when the session failed. */
static int feed(h2_session *s, const char *in, size_t n)
{
    if (!n || s->dead)
        return s->dead ? -1 : 0;
    ssize_t r = nghttp2_session_mem_recv(s->ng, (const uint8_t *)in, n);
    if (r < 0) {
        log_debug("HTTP/2: closing the connection: %s", nghttp2_strerror((int)r));
        s->dead = 1;
        return -1;
    }
    return 0;
}

/* The frames nghttp2 drops without a word now that it keeps no closed
 * streams and no priorities (SETTINGS_NO_RFC7540_PRIORITIES): DATA on a
 * stream it no longer has, and PRIORITY. The input's frame headers are
 * followed; before a DATA or PRIORITY frame, what precedes it is fed, so
 * that the check sees the streams as nghttp2 will:
 * - DATA on a stream closed lately whose client had ended it: a connection
 *   error STREAM_CLOSED (RFC 9113 5.1), as nghttp2 gave when it kept them;
 * - PRIORITY making a stream depend on itself: a stream error
 *   PROTOCOL_ERROR (5.3.1; checked when its payload is in one read).
 * Returns the bytes fed so far; the caller feeds the rest. */
static size_t input_scan(h2_session *s, const char *in, size_t n)
{
    size_t pos = 0, fed = 0;
    while (pos < n && !s->dead) {
        if (s->scan_skip) {
            size_t k = BK_MIN((size_t)s->scan_skip, n - pos);
            pos += k;
            s->scan_skip -= (uint32_t)k;
            continue;
        }
        size_t k = BK_MIN((size_t)(9 - s->scan_have), n - pos);
        memcpy(s->scan_hd + s->scan_have, in + pos, k);
        s->scan_have += (uint8_t)k;
        pos += k;
        if (s->scan_have < 9)
            break;
        s->scan_have = 0;
        const uint8_t *h = s->scan_hd;
        uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
        int32_t id = (int32_t)(((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 |
                                h[8]) & 0x7fffffff);
        s->scan_skip = len;
        if (h[3] == NGHTTP2_PRIORITY) {
            if (len == 5 && n - pos >= 5) {
                const uint8_t *d = (const uint8_t *)in + pos;
                uint32_t dep = ((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 |
                                (uint32_t)d[2] << 8 | d[3]) & 0x7fffffff;
                if ((int32_t)dep == id) /* (nghttp2 made it a connection error) */
                    nghttp2_session_terminate_session(s->ng, NGHTTP2_PROTOCOL_ERROR);
            }
            continue;
        }
        if (h[3] != NGHTTP2_DATA || !(id & 1))
            continue;
        /* nghttp2 first sees what comes before this frame (its header may
         * have begun in an earlier read, fed then) */
        size_t start = pos >= 9 ? pos - 9 : 0;
        if (start > fed) {
            if (feed(s, in + fed, start - fed) < 0)
                break;
            fed = start;
        }
        if (id <= s->max_id && closed_lookup(s, id) == 1) /* (closed: ids are not reused) */
            nghttp2_session_terminate_session(s->ng, NGHTTP2_STREAM_CLOSED);
    }
    return fed;
}

int http_h2_input(http_conn *c)
{
    h2_session *s = sess(c);
    size_t avail = c->in_len - c->req_start;
    if (!s || s->dead)
        return -1;
    if (avail) {
        const char *in = c->in + c->req_start;
        s->in_input = 1;
        size_t fed = input_scan(s, in, avail);
        feed(s, in + fed, avail - fed);
        s->in_input = 0;
    }
    c->in_len = c->req_start = 0;
    return s->dead ? -1 : 0;
}

int http_h2_output(http_conn *c)
{
    h2_session *s = sess(c);
    if (!s || s->dead)
        return 0;
    while (c->b->out.len <= OUT_HIGH_WATER && c->b->nsegs + 2 <= HTTP_OUT_SEGS) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(s->ng, &data);
        if (n < 0) {
            log_debug("HTTP/2: closing the connection: %s", nghttp2_strerror((int)n));
            s->dead = 1;
            return 0;
        }
        if (n == 0) /* done, or a DATA frame refused by body_send for lack of room */
            return c->b->out.len > OUT_HIGH_WATER || c->b->nsegs + 2 > HTTP_OUT_SEGS;
        memcpy(http_conn_out_reserve(c, (size_t)n), data, (size_t)n);
        http_conn_out_commit(c, (size_t)n);
    }
    return 1; /* stopped at the high-water mark: more after a flush */
}

int http_h2_done(const http_conn *c)
{
    const h2_session *s = sess(c);
    if (!s || s->dead)
        return 1;
    if (s->goaway && s->nstreams == 0)
        return !nghttp2_session_want_write(s->ng);
    return !nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng);
}

int http_h2_idle(const http_conn *c)
{
    const h2_session *s = sess(c);
    return !s || s->nstreams == 0;
}

uint32_t http_h2_handlers(const http_conn *c)
{
    const h2_session *s = sess(c);
    return s ? s->handlers : 0;
}

int http_h2_progress(http_conn *c)
{
    h2_session *s = sess(c);
    if (!s)
        return 0;
    int p = s->progress;
    s->progress = 0;
    return p;
}

void http_h2_shutdown(http_conn *c)
{
    h2_session *s = sess(c);
    if (!s || s->goaway)
        return;
    s->goaway = 1;
    nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    http_conn_queue_flush(c);
}

void http_h2_free(http_conn *c)
{
    h2_session *s = sess(c);
    if (!s)
        return;
    while (s->streams)
        stream_gone(s->streams);
    nghttp2_session_del(s->ng);
    c->b->h2 = NULL;
    free(s);
}

/* ---- after a read batch ---- */

/* After a batch: serialize and flush until done or the socket is full,
 * then close a finished session, or set the timer: none while a handler
 * works, the keep-alive timeout when no stream is open, else the send
 * timeout, renewed only by progress (request frames in, body bytes out:
 * not PINGs or window updates, so a peer that keeps a window at zero or
 * stops reading is let go). */
void http_h2_after_batch(http_conn *c)
{
    http_worker *hw = c->hw;
    for (;;) {
        int more = http_h2_output(c);
        if (http_conn_flush_step(c) <= 0)
            return;
        if (!more)
            break;
    }
    if (sess(c) && sess(c)->dead) { /* flooded, or out of memory: no courtesy */
        http_conn_close(c);
        return;
    }
    if (http_h2_done(c)) {
        /* Everything is sent (a GOAWAY too): shut the write side and drain
         * what the peer still sends for a while, so that unread input does
         * not turn the close into a reset that could destroy the last
         * frames in flight. */
        http_h2_free(c);
        c->state = CONN_HEAD;
        c->must_close = 1;
        http_conn_close_after_response(c);
        return;
    }
    if (c->io.registered && c->io.mask != LOOP_READ)
        loop_io_set(&hw->w.loop, &c->io, LOOP_READ);
    if (c->in && c->in_len == c->req_start)
        http_conn_release_input(c); /* nghttp2 keeps what it needs */
    int progress = http_h2_progress(c);
    if (http_h2_handlers(c))
        timer_stop(&hw->w.loop, &c->tm);
    else if (progress || !timer_active(&c->tm))
        http_conn_arm(c, http_h2_idle(c) ? c->conf->keepalive_timeout : c->conf->send_timeout);
}

