/* HTTP/2 streams onto exchanges; see h2.h. */
#include "http/h2.h"
#include "http/hpack.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#define SERVER_NAME "brisk/" BRISK_VERSION
#define OUT_HIGH_WATER (256 * 1024) /* stop serializing frames above this */
/* Output a peer that does not read may make us owe while we read its
 * frames (acknowledgements of PING and SETTINGS): over this, it is let go. */
#define OUT_ACKS_MAX (1024 * 1024)
#define LOCAL_MAX_FRAME 16384     /* our SETTINGS_MAX_FRAME_SIZE (the default) */
#define LOCAL_WINDOW 65535        /* our windows, stream and connection (the default) */
#define WINDOW_MAX 0x7fffffff
#define READ_AHEAD (64 * 1024)    /* file bytes read at once for a stream's DATA frames */
#define CONTINUATIONS_MAX 32      /* CONTINUATION frames in one header block */
#define SETTINGS_MAX 32           /* entries in one SETTINGS frame */
#define RESETS_BURST 1000         /* RST_STREAMs a client may send at once (rapid reset) */
#define RESETS_PER_S 33           /* and then per second */
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
    uint8_t queued;       /* on the session's list of streams with DATA to send */
    uint8_t local_ended;  /* END_STREAM sent: the response is complete on the wire */
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
    h2_stream *send_next; /* on the session's send list */
    int64_t send_window;  /* the peer's window for this stream (may go below 0) */
    int64_t recv_window;  /* ours, for its request body */
    uint32_t recv_unacked;/* body bytes not yet given back by WINDOW_UPDATE */
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

/* What is done with the payload of the frame being read. */
enum { M_SKIP, M_DATA, M_BLOCK, M_CTL, M_SETTINGS };

/* The last request head decoded from a header block of indexed fields
 * only: such a block leaves the HPACK decoder's table as it was, so the
 * same bytes, while no other block has changed the table, are the same
 * fields, and the request is taken from here, checked and complete,
 * without decoding them again (a client repeating a request sends the
 * same few bytes). Only a head that was accepted is kept. */
#define MEMO_BLOCK_MAX 128
#define MEMO_HEAD_MAX 1024

typedef struct req_memo {
    uint32_t block_len; /* 0: empty, or being filled (pending) */
    uint32_t hd_gen;    /* the session's hd_gen when it was decoded */
    uint8_t pending;    /* block[] holds the block being decoded now */
    uint8_t end_stream; /* the HEADERS frame ended the stream (the head's checks differ) */
    uint32_t pending_len;
    uint8_t block[MEMO_BLOCK_MAX];
    /* the stream's request head, checked and ended (stream_end_head) */
    uint32_t head_len, cookie_len, hdr_bytes;
    uint16_t bad;
    uint8_t seen;
    h2_span pm, pp, pa;
    uint64_t clen;
    char head[MEMO_HEAD_MAX]; /* head, then cookie */
    http_parser parser;       /* (its fixed part, and nheaders of hdr[]) */
} req_memo;

struct h2_session {
    http_conn *c;
    nghttp2_hd_inflater *inflater; /* the client's header blocks */
    h2_stream *streams;   /* attached ones */
    uint32_t nstreams;
    uint32_t handlers;    /* attached streams whose handler is at work */
    uint8_t goaway;       /* GOAWAY sent: no new streams */
    uint8_t closing;      /* a connection error: GOAWAY sent, nothing more is read */
    uint8_t peer_goaway;  /* the client sent GOAWAY */
    uint8_t progress;     /* request frames in or body bytes out since last asked */
    uint8_t in_input;     /* reading frames */
    uint8_t dead;         /* the session failed: close */
    uint8_t preface_left; /* bytes of the client's connection preface still to come */
    uint8_t settings_seen;/* the client's first SETTINGS has come */
    uint64_t body_bytes;  /* request bodies held by this connection's streams */
    h2_stream *upgraded;  /* Upgrade: h2c: stream 1, until the client's preface */
    int32_t max_id;       /* highest stream the client has opened */
    /* The frame being read (frames are read as they come, in any split). */
    uint8_t in_frame;     /* its header has been read */
    uint8_t fh_have;      /* bytes of fh read */
    uint8_t fh[9];
    uint8_t ftype, fflags, fmode;
    int32_t fid;
    uint32_t flen;
    uint32_t fleft;       /* payload bytes still to come */
    uint32_t body_left;   /* of which content (DATA, header block fragment, skipped) */
    uint8_t pre_need, pre_have; /* the fixed part before the content (pre) */
    uint8_t pre[8];
    h2_stream *fst;       /* the stream of a DATA frame being read */
    /* The header block being read (HEADERS, then CONTINUATIONs). */
    int32_t cont_id;      /* not 0: only a CONTINUATION on this stream may come */
    uint32_t cont_frames;
    h2_stream *hb_st;     /* where its fields go; NULL: decoded (HPACK's state) and dropped */
    uint8_t hb_end_stream, hb_trailers;
    uint8_t hb_indexed;   /* the block is known to hold indexed fields only */
    uint8_t hb_memo;      /* its fields came from the memo: nothing to decode */
    uint32_t frag_len;    /* the frame's content length (after its fixed part) */
    uint32_t hd_gen;      /* blocks that may have changed the HPACK decoder's table */
    struct req_memo *memo;
    /* Flow control: the peer's connection window and settings; what we owe back. */
    int64_t send_window;
    int64_t recv_window;
    uint32_t recv_unacked;
    uint32_t peer_window; /* SETTINGS_INITIAL_WINDOW_SIZE */
    uint32_t peer_max_frame;
    h2_stream *send_first, *send_last; /* streams with DATA to send, in turn */
    /* Rapid reset: a bucket of RST_STREAMs the client may send. */
    uint32_t resets;
    uint64_t resets_ms;
    uint32_t closed_next; /* the oldest of closed[] */
    struct {
        int32_t id;
        uint8_t remote_ended;
    } closed[CLOSED_KEEP]; /* streams closed lately (closed_lookup) */
    http_hpack_enc enc;   /* our header blocks */
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
    st->send_window = s->peer_window;
    st->recv_window = LOCAL_WINDOW;
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
    if (s->hb_st == st)
        s->hb_st = NULL;
    if (s->fst == st)
        s->fst = NULL;
    if (st->queued) { /* off the send list */
        h2_stream **pp = &s->send_first, *prev = NULL;
        while (*pp != st)
            prev = *pp, pp = &(*pp)->send_next;
        *pp = st->send_next;
        if (s->send_last == st)
            s->send_last = prev;
        st->queued = 0;
    }
    if (st->prev)
        st->prev->next = st->next;
    else
        s->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    s->nstreams--;
    if (st->in_handler)
        s->handlers--;
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

/* ---- frames out: written into the connection's output buffer ---- */

static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void frame_head(uint8_t *p, size_t len, uint8_t type, uint8_t flags, int32_t id)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    put32(p + 5, (uint32_t)id);
}

static void frame_out(h2_session *s, uint8_t type, uint8_t flags, int32_t id, const void *payload,
                      size_t len)
{
    uint8_t *p = (uint8_t *)http_conn_out_reserve(s->c, 9 + len);
    frame_head(p, len, type, flags, id);
    if (len)
        memcpy(p + 9, payload, len);
    http_conn_out_commit(s->c, 9 + len);
}

static void send_rst(h2_session *s, int32_t id, uint32_t code)
{
    uint8_t b[4];
    put32(b, code);
    frame_out(s, NGHTTP2_RST_STREAM, 0, id, b, 4);
}

static void send_goaway(h2_session *s, uint32_t code)
{
    uint8_t b[8];
    put32(b, (uint32_t)s->max_id);
    put32(b + 4, code);
    frame_out(s, NGHTTP2_GOAWAY, 0, 0, b, 8);
    s->goaway = 1;
}

static void send_window_update(h2_session *s, int32_t id, uint32_t inc)
{
    uint8_t b[4];
    put32(b, inc);
    frame_out(s, NGHTTP2_WINDOW_UPDATE, 0, id, b, 4);
}

/* A connection error (RFC 9113 5.4.1): GOAWAY, then the connection closes
 * once it is sent; nothing more is read. */
static void conn_error(h2_session *s, uint32_t code)
{
    if (s->closing || s->dead)
        return;
    log_debug("HTTP/2: closing the connection: %s", nghttp2_http2_strerror(code));
    send_goaway(s, code);
    s->closing = 1;
}

/* The stream is over on the wire (both sides ended it, or it was reset):
 * remembered for the frames the client may still send on it. */
static void stream_close(h2_stream *st)
{
    h2_session *s = st->s;
    uint32_t i = s->closed_next++ % CLOSED_KEEP;
    s->closed[i].id = st->id;
    s->closed[i].remote_ended = st->remote_ended;
    stream_gone(st);
}

/* Both sides have ended st, its handler is done: closed. */
static void stream_maybe_close(h2_stream *st)
{
    if (st->s && st->local_ended && st->remote_ended && !st->in_handler)
        stream_close(st);
}

/* A stream error (5.4.2): RST_STREAM, and the stream is closed. */
static void stream_reset(h2_stream *st, uint32_t code)
{
    send_rst(st->s, st->id, code);
    stream_close(st);
}

/* The response's head: its fields HPACK-encoded into a HEADERS frame
 * (and CONTINUATIONs when the block is over the peer's frame size). */
static void send_headers(h2_session *s, int32_t id, const http_hpack_field *f, size_t n,
                         int end_stream)
{
    http_conn *c = s->c;
    uint8_t *p = (uint8_t *)http_conn_out_reserve(c, 9 + http_hpack_bound(f, n));
    size_t len = http_hpack_encode(&s->enc, p + 9, f, n);
    uint8_t flags = end_stream ? NGHTTP2_FLAG_END_STREAM : 0;
    if (len <= s->peer_max_frame) {
        frame_head(p, len, NGHTTP2_HEADERS, flags | NGHTTP2_FLAG_END_HEADERS, id);
        http_conn_out_commit(c, 9 + len);
        return;
    }
    uint8_t *block = malloc(len); /* (rare: a head over 16 KiB) */
    if (!block) {
        log_error("out of memory for an HTTP/2 response head");
        abort();
    }
    memcpy(block, p + 9, len);
    uint8_t type = NGHTTP2_HEADERS;
    for (size_t off = 0; off < len;) {
        size_t k = BK_MIN(len - off, (size_t)s->peer_max_frame);
        uint8_t end = off + k == len ? NGHTTP2_FLAG_END_HEADERS : 0;
        frame_out(s, type, (uint8_t)(flags | end), id, block + off, k);
        off += k;
        type = NGHTTP2_CONTINUATION;
        flags = 0;
    }
    free(block);
}

/* ---- response: the protocol's side of the exchange ---- */

/* Puts st on the send list when it has DATA the windows let go, or the
 * end of its body to say. */
static void send_queue(h2_stream *st)
{
    h2_session *s = st->s;
    if (!s || st->queued || st->local_ended || !st->x.headers_sent)
        return;
    if (st->out_len ? st->send_window <= 0 || s->send_window <= 0 : !st->eof)
        return;
    st->queued = 1;
    st->send_next = NULL;
    if (s->send_last)
        s->send_last->send_next = st;
    else
        s->send_first = st;
    s->send_last = st;
}

static void resume(h2_stream *st)
{
    send_queue(st);
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
    uint64_t gen; /* this thread's fills so far, at this one's: its fields' HPACK keys */
    struct { uint16_t name_off, name_len, val_off, val_len; } f[HEAD_FIELDS_MAX];
    char text[HEAD_TEXT_MAX];    /* as the handler gave it */
    char lowered[HEAD_TEXT_MAX]; /* names lowered */
} head_split;

static _Thread_local head_split *head_cache; /* HEAD_SLOTS, made on first use */
static _Thread_local uint64_t head_gen;

/* HPACK keys (hpack.h) of the fields a response head repeats: a kind in
 * the top bits, what makes the bytes in the rest. */
#define KEY_SERVER ((uint64_t)1 << 60)
#define KEY_DATE(sec) ((uint64_t)2 << 60 | (uint64_t)(sec))                  /* the second's */
#define KEY_SPLIT(gen, i) ((uint64_t)3 << 60 | (uint64_t)(gen) << 5 | (i))   /* < 2^55 fills */
#define KEY_LENGTH(n) ((uint64_t)4 << 60 | (uint64_t)(n))

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
    if (!s || s->closing || s->dead)
        return;
    /* The fields for the HPACK encoder, which takes them at once: on a
     * head cache hit, straight from the split kept; else the parts into
     * one copy in the exchange's arena, names lowered in place. */
    size_t total = 0;
    for (size_t i = 0; i < nlines; i++)
        total += lines[i].len;
    char *t = NULL;
    size_t nmax = 4;
    head_split *hs = head_slot(lines, nlines, total);
    int hit = hs && head_same(hs, lines, nlines, total);
    if (hit) {
        nmax += hs->n;
    } else if ((t = http_exchange_alloc(x, total + 1))) {
        size_t o = 0;
        for (size_t i = 0; i < nlines; i++)
            if (lines[i].len) {
                memcpy(t + o, lines[i].p, lines[i].len);
                o += lines[i].len;
            }
        for (const char *p = t, *end = t + total; (p = memchr(p, '\n', (size_t)(end - p)));)
            nmax++, p++;
    }
    http_hpack_field local[24];
    http_hpack_field *nv = !hit && !t        ? NULL
                           : nmax <= 24 ? local
                                        : http_exchange_alloc(x, nmax * sizeof *nv);
    if (!nv) {
        send_rst(s, st->id, NGHTTP2_INTERNAL_ERROR); /* closed once its handler is done */
        st->local_ended = st->remote_ended = 1;
        return;
    }
    char nums[32];
    char *code = nums, *clen = nums + 4;
    code[0] = (char)('0' + status / 100 % 10);
    code[1] = (char)('0' + status / 10 % 10);
    code[2] = (char)('0' + status % 10);
    size_t n = 0;
#define NVK(nm, nmlen, v, vlen, k) \
    nv[n++] = (http_hpack_field){ (nm), (v), (uint32_t)(nmlen), (uint32_t)(vlen), (k) }
#define NV(nm, nmlen, v, vlen) NVK(nm, nmlen, v, vlen, 0)
    NV(":status", 7, code, 3);
    NVK("server", 6, SERVER_NAME, sizeof SERVER_NAME - 1, KEY_SERVER);
    /* (the worker's clock string: rewritten in place once a second, same length) */
    const bk_clock *clk = &x->hw->w.clock;
    NVK("date", 4, clk->http_date, CLOCK_HTTP_DATE_LEN, KEY_DATE(clk->sec));
    if (hit) {
        const char *lo = hs->lowered;
        for (uint32_t i = 0; i < hs->n; i++)
            NVK(lo + hs->f[i].name_off, hs->f[i].name_len, lo + hs->f[i].val_off, hs->f[i].val_len,
                KEY_SPLIT(hs->gen, i));
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
        hs->gen = ++head_gen;
        hs->n = (uint32_t)(n - first);
        for (uint32_t i = 0; i < hs->n; i++) {
            const http_hpack_field *f = &nv[first + i];
            hs->f[i].name_off = (uint16_t)(f->name - t);
            hs->f[i].name_len = (uint16_t)f->name_len;
            hs->f[i].val_off = (uint16_t)(f->value - t);
            hs->f[i].val_len = (uint16_t)f->value_len;
        }
        for (size_t i = 0, o = 0; i < nlines; o += lines[i].len, i++)
            if (lines[i].len)
                memcpy(hs->text + o, lines[i].p, lines[i].len);
        memcpy(hs->lowered, t, total);
    }
    if (length != HTTP_LEN_NONE && length != HTTP_LEN_STREAM && n < nmax)
        NVK("content-length", 14, clen, (size_t)num_format_u64(clen, length), KEY_LENGTH(length));
#undef NV
#undef NVK
    st->provider = !st->head_only && length != HTTP_LEN_NONE && length != 0;
    st->resp_bytes = length == HTTP_LEN_NONE || length == HTTP_LEN_STREAM ? 0 : length;
    st->counting = length == HTTP_LEN_STREAM;
    if (st->provider && body_len)
        body_copy(st, body, body_len);
    send_headers(s, st->id, nv, n, !st->provider);
    if (!st->provider)
        st->local_ended = 1; /* closed once its handler is done (h2_finish) */
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

static void h2_send_fd(http_exchange *x, int fd, const bk_fmap *map, uint64_t off,
                       uint64_t len, http_release_fn release, void *arg)
{
    (void)map; /* (map_files is never set on a stream: DATA frames are preadv'd) */
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
    st->eof = 1;
    if (cut || !st->x.headers_sent) { /* (a head always goes first: never uncut) */
        if (st->local_ended && st->remote_ended)
            stream_close(st);
        else
            stream_reset(st, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    stream_maybe_close(st);
    if (st->s)
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
 * Made in the pass over the fields that fills the request anyway. A
 * malformed request's stream is reset with PROTOCOL_ERROR; what is
 * well-formed HTTP/2 but bad HTTP
 * (a '#' in the path, a bad Host, an Expect other than 100-continue, ...)
 * gets the HTTP/1.1 parser's status. */

enum { F_METHOD = 1, F_PATH = 2, F_SCHEME = 4, F_AUTHORITY = 8, F_HOST = 16, F_REGULAR = 32,
       F_CLEN = 64 };

/* Resets st, which is then gone: the caller must not use it after. */
static void stream_malformed(h2_stream *st)
{
    if (st->malformed || !st->s)
        return;
    st->malformed = 1;
    stream_reset(st, NGHTTP2_PROTOCOL_ERROR);
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
 * on them (RFC 9113 5.1): 1 when the client had ended id (END_STREAM or
 * RST_STREAM) before it closed, 0 when the server closed it first (or
 * refused it), -1 when not remembered. */
static int closed_lookup(const h2_session *s, int32_t id)
{
    for (uint32_t i = 0; i < CLOSED_KEEP; i++)
        if (s->closed[i].id == id)
            return s->closed[i].remote_ended;
    return -1;
}

/* ---- frames in ----
 * The input is read frame by frame as it comes, split anywhere: a frame's
 * header (9 bytes), then its fixed part (a padding length, a priority, a
 * control frame's payload: up to 8 bytes, kept in s->pre), then its
 * content (a DATA frame's body bytes, a header block's fragment: passed on
 * as they come, no copy), then its padding. */

static h2_stream *stream_find(const h2_session *s, int32_t id)
{
    for (h2_stream *st = s->streams; st; st = st->next)
        if (st->id == id)
            return st;
    return NULL;
}

/* A stream error on a stream that may not be open (5.4.2). */
static void stream_error(h2_session *s, int32_t id, uint32_t code)
{
    h2_stream *st = stream_find(s, id);
    if (st)
        stream_reset(st, code);
    else
        send_rst(s, id, code);
}

/* One field of the header block being read (HPACK-decoded). */
static void on_header(h2_session *s, const char *n, size_t namelen, const char *v, size_t valuelen)
{
    h2_stream *st = s->hb_st;
    if (!st || st->malformed)
        return;
    if (s->hb_trailers) {
        if (namelen && n[0] == ':') /* (trailers are dropped; no pseudo-header in them) */
            stream_malformed(st);
        return;
    }
    if (st->too_big)
        return;
    st->hdr_bytes += (uint32_t)(namelen + valuelen + 4);
    if (st->hdr_bytes > st->x.conf->limits.max_head_size) {
        st->too_big = 1; /* decoded on, kept no more: 431 at the end */
        return;
    }
    if (!field_well_formed(st, n, namelen, v, valuelen)) {
        stream_malformed(st);
        return;
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
            return;
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
}

/* Bytes of the header block being read, through the HPACK decoder (whose
 * state every block changes, whether its stream is wanted or not). */
static void block_feed(h2_session *s, const uint8_t *in, size_t n, int final)
{
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(s->inflater, &nv, &flags, in, n, final);
        if (r < 0) {
            conn_error(s, NGHTTP2_COMPRESSION_ERROR);
            return;
        }
        in += r;
        n -= (size_t)r;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            on_header(s, (const char *)nv.name, nv.namelen, (const char *)nv.value, nv.valuelen);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(s->inflater);
            return;
        }
        if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && n == 0)
            return;
    }
}

/* Indexed field representations only (RFC 7541 6.1): decoding them
 * changes no table. */
static int block_indexed_only(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (!(p[i] & 0x80))
            return 0;
        if ((p[i++] & 0x7f) == 0x7f) /* the index goes on in more bytes */
            while (i < n && (p[i++] & 0x80))
                ;
    }
    return 1;
}

/* The whole fragment of a HEADERS frame that ends its block is in[0, n),
 * for a new request: 1 when the memo gave the stream its fields (the
 * bytes need no decoding), 0 when they are to be decoded (and maybe kept). */
static int memo_take(h2_session *s, h2_stream *st, const uint8_t *in, size_t n)
{
    s->hb_indexed = n <= MEMO_BLOCK_MAX && block_indexed_only(in, n);
    if (!s->hb_indexed)
        return 0;
    req_memo *m = s->memo;
    if (m && m->block_len == n && m->hd_gen == s->hd_gen && m->end_stream == s->hb_end_stream &&
        memcmp(m->block, in, n) == 0) {
        size_t fixed = offsetof(http_parser, hdr);
        if ((m->head_len && buf_append(&st->head, m->head, m->head_len) < 0) ||
            (m->cookie_len && buf_append(&st->cookie, m->head + m->head_len, m->cookie_len) < 0)) {
            st->head.len = st->cookie.len = 0; /* (out of memory: decoded instead) */
            return 0;
        }
        memcpy(&st->parser, &m->parser, fixed + m->parser.nheaders * sizeof m->parser.hdr[0]);
        st->hdr_bytes = m->hdr_bytes;
        st->bad = m->bad;
        st->seen = m->seen;
        st->pm = m->pm, st->pp = m->pp, st->pa = m->pa;
        st->clen = m->clen;
        return 1;
    }
    if (!m && !(m = s->memo = malloc(sizeof *m)))
        return 0;
    m->block_len = 0;
    m->pending = 1; /* kept at the block's end (block_done), if all went well */
    m->hd_gen = s->hd_gen;
    memcpy(m->block, in, n);
    m->pending_len = (uint32_t)n;
    return 0;
}

static void memo_store(req_memo *m, const h2_stream *st, int end_stream)
{
    if (st->too_big || st->head.len + st->cookie.len > MEMO_HEAD_MAX)
        return;
    memcpy(m->head, st->head.data, st->head.len);
    if (st->cookie.len)
        memcpy(m->head + st->head.len, st->cookie.data, st->cookie.len);
    m->head_len = (uint32_t)st->head.len;
    m->cookie_len = (uint32_t)st->cookie.len;
    memcpy(&m->parser, &st->parser,
           offsetof(http_parser, hdr) + st->parser.nheaders * sizeof st->parser.hdr[0]);
    m->hdr_bytes = st->hdr_bytes;
    m->bad = st->bad;
    m->seen = st->seen;
    m->pm = st->pm, m->pp = st->pp, m->pa = st->pa;
    m->clen = st->clen;
    m->end_stream = (uint8_t)end_stream;
    m->block_len = m->pending_len;
}

/* The header block is complete: a request's head, or trailers. */
static void block_done(h2_session *s)
{
    static const uint8_t none[1];
    int from_memo = s->hb_memo;
    if (!from_memo)
        block_feed(s, none, 0, 1);
    s->hb_memo = 0;
    h2_stream *st = s->hb_st;
    s->hb_st = NULL;
    s->cont_id = 0;
    if (!s->hb_indexed)
        s->hd_gen++;
    req_memo *m = s->memo;
    int keep = m && m->pending;
    if (keep)
        m->pending = 0;
    if (!st || st->malformed || s->closing)
        return;
    s->progress = 1;
    int end_stream = s->hb_end_stream;
    if (end_stream)
        st->remote_ended = 1;
    if (s->hb_trailers) {
        if (!end_stream) {
            stream_malformed(st); /* trailers end the stream */
            return;
        }
    } else {
        /* (a head from the memo was checked and ended when it was kept) */
        if (!from_memo && !st->too_big && !request_well_formed(st, end_stream)) {
            stream_malformed(st);
            return;
        }
        int status = from_memo ? 0 : stream_end_head(st);
        if (keep && status == 0)
            memo_store(m, st, end_stream);
        const char *hd = st->head.data;
        st->method = st->pm.len ? (bk_str){ hd + st->pm.off, st->pm.len } : BK_STR_NULL;
        st->path = st->pp.len ? (bk_str){ hd + st->pp.off, st->pp.len } : BK_STR_NULL;
        if (status < 0) {
            stream_malformed(st);
            return;
        }
        if (status) {
            stream_respond_error(st, status);
            stream_maybe_close(st);
            return;
        }
        if (st->parser.known[HH_EXPECT] && !end_stream) {
            static const http_hpack_field cont = { ":status", "100", 7, 3, 0 };
            send_headers(s, st->id, &cont, 1, 0);
        }
    }
    if (end_stream) {
        if ((st->seen & F_CLEN) && st->data_len != st->clen) {
            stream_malformed(st); /* less than its content-length */
            return;
        }
        stream_dispatch(st);
        stream_maybe_close(st);
    }
}

/* Request body bytes of st. */
static void on_data(h2_session *s, h2_stream *st, const uint8_t *data, size_t len)
{
    if (st->malformed)
        return;
    st->data_len += len;
    if ((st->seen & F_CLEN) && st->data_len > st->clen) {
        stream_malformed(st); /* more than its content-length (RFC 9113 8.1.1) */
        return;
    }
    if (st->dispatched || st->body_over)
        return;
    s->progress = 1;
    uint64_t max = st->x.conf->max_body_size;
    if (s->body_bytes + len > BODIES_MAX(max)) {
        /* Many streams uploading at once: one connection holds no more
         * than a few bodies' worth; the client may try this one again. */
        st->body_over = 1;
        s->body_bytes -= st->body.len;
        buf_free(&st->body);
        stream_reset(st, NGHTTP2_REFUSED_STREAM);
        return;
    }
    if (st->body.len + len > max || buf_append(&st->body, data, len) < 0) {
        st->body_over = 1;
        s->body_bytes -= st->body.len;
        buf_free(&st->body);
        stream_respond_error(st, 413); /* at once; the rest of the body is dropped */
        return;
    }
    s->body_bytes += len;
}

/* A DATA frame is over: its bytes count against the windows; given back
 * (WINDOW_UPDATE) once half a window has come, as a body is read at once. */
static void data_done(h2_session *s)
{
    uint32_t len = s->flen;
    s->recv_unacked += len;
    if (s->recv_unacked >= LOCAL_WINDOW / 2) {
        send_window_update(s, 0, s->recv_unacked);
        s->recv_window += s->recv_unacked;
        s->recv_unacked = 0;
    }
    h2_stream *st = s->fst;
    s->fst = NULL;
    if (!st)
        return;
    if (s->fflags & NGHTTP2_FLAG_END_STREAM) {
        st->remote_ended = 1;
        if (st->malformed)
            return;
        if ((st->seen & F_CLEN) && st->data_len != st->clen) {
            stream_malformed(st); /* less than its content-length */
            return;
        }
        if (!st->dispatched)
            stream_dispatch(st);
        stream_maybe_close(st);
        return;
    }
    st->recv_unacked += len;
    if (st->recv_unacked >= LOCAL_WINDOW / 2) {
        send_window_update(s, st->id, st->recv_unacked);
        st->recv_window += st->recv_unacked;
        st->recv_unacked = 0;
    }
}

/* A SETTINGS entry from the client (6.5.2). */
static void setting_apply(h2_session *s, uint16_t id, uint32_t v)
{
    switch (id) {
    case NGHTTP2_SETTINGS_HEADER_TABLE_SIZE:
        http_hpack_enc_set_max(&s->enc, v);
        break;
    case NGHTTP2_SETTINGS_ENABLE_PUSH:
        if (v > 1)
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
        break;
    case NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE: {
        if (v > WINDOW_MAX) {
            conn_error(s, NGHTTP2_FLOW_CONTROL_ERROR);
            break;
        }
        int64_t delta = (int64_t)v - s->peer_window;
        s->peer_window = v;
        for (h2_stream *st = s->streams; st; st = st->next) {
            st->send_window += delta;
            if (st->send_window > WINDOW_MAX) {
                conn_error(s, NGHTTP2_FLOW_CONTROL_ERROR);
                return;
            }
            send_queue(st);
        }
        break;
    }
    case NGHTTP2_SETTINGS_MAX_FRAME_SIZE:
        if (v < 16384 || v > 16777215)
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
        else
            s->peer_max_frame = BK_MIN(v, (uint32_t)READ_AHEAD);
        break;
    case NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL:
    case NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES:
        if (v > 1)
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
        break;
    default: /* (MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE: nothing to do; unknown: ignored) */
        break;
    }
}

/* Rapid reset (CVE-2023-44487): a bucket of RST_STREAMs, refilled with
 * time; 0 when the client has sent more than it holds. */
static int reset_allowed(h2_session *s)
{
    uint64_t now = s->c->hw->w.loop.now_ms;
    if (now > s->resets_ms) {
        uint64_t add = (now - s->resets_ms) * RESETS_PER_S / 1000;
        if (add) {
            s->resets = (uint32_t)BK_MIN((uint64_t)RESETS_BURST, s->resets + add);
            s->resets_ms = now;
        }
    }
    if (!s->resets)
        return 0;
    s->resets--;
    return 1;
}

/* A new frame's header: what it may be, and what to do with its payload.
 * Checks that need only the header are made here (RFC 9113 4-6). */
/* A control frame's checks in RFC 9113's order: its stream id (else a
 * connection error PROTOCOL_ERROR), then its length (FRAME_SIZE_ERROR);
 * when both hold, its first `need` bytes are read as the fixed part. */
static void ctl_frame(h2_session *s, int id_ok, int len_ok, uint8_t need)
{
    if (!id_ok)
        conn_error(s, NGHTTP2_PROTOCOL_ERROR);
    else if (!len_ok)
        conn_error(s, NGHTTP2_FRAME_SIZE_ERROR);
    else
        s->fmode = M_CTL, s->pre_need = need;
}

static void frame_begin(h2_session *s)
{
    const uint8_t *h = s->fh;
    uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
    uint8_t type = h[3], flags = h[4];
    int32_t id = (int32_t)(get32(h + 5) & 0x7fffffff);
    s->ftype = type;
    s->fflags = flags;
    s->fid = id;
    s->flen = s->fleft = s->body_left = s->frag_len = len;
    s->pre_need = s->pre_have = 0;
    s->fmode = M_SKIP;
    s->in_frame = 1;
    if (s->cont_id && (type != NGHTTP2_CONTINUATION || id != s->cont_id)) {
        conn_error(s, NGHTTP2_PROTOCOL_ERROR); /* a header block is cut (6.10) */
        return;
    }
    if (!s->settings_seen && (type != NGHTTP2_SETTINGS || (flags & NGHTTP2_FLAG_ACK))) {
        conn_error(s, NGHTTP2_PROTOCOL_ERROR); /* the preface is a SETTINGS frame (3.4) */
        return;
    }
    if (len > LOCAL_MAX_FRAME) {
        conn_error(s, NGHTTP2_FRAME_SIZE_ERROR);
        return;
    }
    switch (type) {
    case NGHTTP2_DATA: {
        if (id == 0) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
            return;
        }
        if (len > s->recv_window) {
            conn_error(s, NGHTTP2_FLOW_CONTROL_ERROR);
            return;
        }
        s->recv_window -= len;
        if (flags & NGHTTP2_FLAG_PADDED) {
            if (len < 1) {
                conn_error(s, NGHTTP2_FRAME_SIZE_ERROR);
                return;
            }
            s->pre_need = 1;
        }
        s->fmode = M_DATA;
        h2_stream *st = stream_find(s, id);
        if (!st) {
            if (id > s->max_id || !(id & 1)) {
                conn_error(s, NGHTTP2_PROTOCOL_ERROR); /* an idle stream (5.1) */
                return;
            }
            if (closed_lookup(s, id) == 1) /* the client had ended it */
                conn_error(s, NGHTTP2_STREAM_CLOSED);
            return; /* (one the server reset: frames may be in flight) */
        }
        if (st->remote_ended) {
            stream_reset(st, NGHTTP2_STREAM_CLOSED); /* half-closed (remote) */
            return;
        }
        if (len > st->recv_window) {
            stream_reset(st, NGHTTP2_FLOW_CONTROL_ERROR);
            return;
        }
        st->recv_window -= len;
        s->fst = st;
        s->progress = 1;
        return;
    }
    case NGHTTP2_HEADERS: {
        if (id == 0 || !(id & 1)) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
            return;
        }
        s->pre_need = (uint8_t)(((flags & NGHTTP2_FLAG_PADDED) ? 1 : 0) +
                                ((flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0));
        if (len < s->pre_need) {
            conn_error(s, NGHTTP2_FRAME_SIZE_ERROR);
            return;
        }
        s->fmode = M_BLOCK;
        s->hb_st = NULL;
        s->hb_trailers = 0;
        s->hb_end_stream = (flags & NGHTTP2_FLAG_END_STREAM) != 0;
        s->hb_indexed = s->hb_memo = 0;
        s->cont_frames = 0;
        s->cont_id = (flags & NGHTTP2_FLAG_END_HEADERS) ? 0 : id;
        h2_stream *st = stream_find(s, id);
        if (st) {
            if (st->remote_ended)
                stream_reset(st, NGHTTP2_STREAM_CLOSED); /* (its block is decoded and dropped) */
            else
                s->hb_st = st, s->hb_trailers = 1;
            return;
        }
        if (id <= s->max_id) {
            int ended = closed_lookup(s, id);
            if (ended == 1)
                conn_error(s, NGHTTP2_STREAM_CLOSED);
            else if (ended < 0)
                conn_error(s, NGHTTP2_PROTOCOL_ERROR); /* skipped, so closed (5.1.1), or long closed */
            return;
        }
        s->max_id = id;
        uint32_t max = s->c->conf->http2_max_streams ? s->c->conf->http2_max_streams : 1;
        if (s->goaway || s->nstreams >= max) {
            send_rst(s, id, NGHTTP2_REFUSED_STREAM);
            uint32_t i = s->closed_next++ % CLOSED_KEEP;
            s->closed[i].id = id;
            s->closed[i].remote_ended = 0;
            return;
        }
        st = stream_new(s, id);
        if (!st) {
            s->dead = 1;
            return;
        }
        s->hb_st = st;
        s->progress = 1;
        return;
    }
    case NGHTTP2_CONTINUATION:
        if (!s->cont_id) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
            return;
        }
        if (++s->cont_frames > CONTINUATIONS_MAX) {
            conn_error(s, NGHTTP2_ENHANCE_YOUR_CALM); /* CONTINUATION flood */
            return;
        }
        if (flags & NGHTTP2_FLAG_END_HEADERS)
            s->cont_id = 0;
        s->fmode = M_BLOCK;
        return;
    case NGHTTP2_PRIORITY:
        if (id == 0) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
            return;
        }
        if (len != 5) {
            stream_error(s, id, NGHTTP2_FRAME_SIZE_ERROR);
            return;
        }
        s->fmode = M_CTL;
        s->pre_need = 5;
        return;
    case NGHTTP2_RST_STREAM: /* (not on an idle stream: 5.1) */
        ctl_frame(s, id != 0 && id <= s->max_id && (id & 1), len == 4, 4);
        return;
    case NGHTTP2_SETTINGS:
        if (id != 0) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR);
            return;
        }
        if ((flags & NGHTTP2_FLAG_ACK) ? len != 0 : len % 6 != 0) {
            conn_error(s, NGHTTP2_FRAME_SIZE_ERROR);
            return;
        }
        if (len / 6 > SETTINGS_MAX) {
            conn_error(s, NGHTTP2_ENHANCE_YOUR_CALM);
            return;
        }
        s->fmode = M_SETTINGS;
        s->pre_need = len ? 6 : 0;
        return;
    case NGHTTP2_PUSH_PROMISE: /* (clients do not push: 8.4) */
        conn_error(s, NGHTTP2_PROTOCOL_ERROR);
        return;
    case NGHTTP2_PING:
        ctl_frame(s, id == 0, len == 8, 8);
        return;
    case NGHTTP2_GOAWAY: /* (its debug data is skipped) */
        ctl_frame(s, id == 0, len >= 8, 8);
        return;
    case NGHTTP2_WINDOW_UPDATE:
        if (len != 4) {
            conn_error(s, NGHTTP2_FRAME_SIZE_ERROR);
            return;
        }
        if (id && (id > s->max_id || !(id & 1))) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR); /* an idle stream */
            return;
        }
        s->fmode = M_CTL;
        s->pre_need = 4;
        return;
    default: /* unknown types are ignored (5.5) */
        return;
    }
}

/* The fixed part of the frame has come (s->pre): 0, or -1 after an error. */
static int frame_pre(h2_session *s)
{
    const uint8_t *p = s->pre;
    int32_t id = s->fid;
    switch (s->ftype) {
    case NGHTTP2_DATA:
    case NGHTTP2_HEADERS: {
        uint32_t pad = 0;
        if (s->fflags & NGHTTP2_FLAG_PADDED) {
            pad = p[0];
            p++;
        }
        if (pad > s->fleft) {
            conn_error(s, NGHTTP2_PROTOCOL_ERROR); /* padding longer than the payload (6.1, 6.2) */
            return -1;
        }
        s->body_left = s->frag_len = s->fleft - pad;
        if (s->ftype == NGHTTP2_HEADERS && (s->fflags & NGHTTP2_FLAG_PRIORITY) &&
            (int32_t)(get32(p) & 0x7fffffff) == id) {
            if (s->hb_st)                          /* it depends on itself (5.3.1): its */
                stream_malformed(s->hb_st);        /* block is decoded and dropped */
            else
                send_rst(s, id, NGHTTP2_PROTOCOL_ERROR);
        }
        return 0;
    }
    case NGHTTP2_PRIORITY:
        if ((int32_t)(get32(p) & 0x7fffffff) == id)
            stream_error(s, id, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    case NGHTTP2_RST_STREAM: {
        h2_stream *st = stream_find(s, id);
        if (!reset_allowed(s)) {
            conn_error(s, NGHTTP2_ENHANCE_YOUR_CALM);
            return -1;
        }
        if (st) {
            st->remote_ended = 1;
            stream_close(st);
        }
        return 0;
    }
    case NGHTTP2_SETTINGS:
        setting_apply(s, (uint16_t)(p[0] << 8 | p[1]), get32(p + 2));
        if (s->fleft) /* the next entry */
            s->pre_have = 0;
        return s->closing || s->dead ? -1 : 0;
    case NGHTTP2_PING:
        if (!(s->fflags & NGHTTP2_FLAG_ACK))
            frame_out(s, NGHTTP2_PING, NGHTTP2_FLAG_ACK, 0, p, 8);
        return 0;
    case NGHTTP2_GOAWAY:
        s->peer_goaway = 1;
        return 0;
    case NGHTTP2_WINDOW_UPDATE: {
        uint32_t inc = get32(p) & 0x7fffffff;
        if (!id) {
            if (!inc || s->send_window + inc > WINDOW_MAX) {
                conn_error(s, inc ? NGHTTP2_FLOW_CONTROL_ERROR : NGHTTP2_PROTOCOL_ERROR);
                return -1;
            }
            int was_shut = s->send_window <= 0;
            s->send_window += inc;
            if (was_shut && s->send_window > 0) /* streams waiting for the connection's window */
                for (h2_stream *st = s->streams; st; st = st->next)
                    send_queue(st);
            return 0;
        }
        h2_stream *st = stream_find(s, id);
        if (!st)
            return 0; /* (closed) */
        if (!inc || st->send_window + inc > WINDOW_MAX) {
            stream_reset(st, inc ? NGHTTP2_FLOW_CONTROL_ERROR : NGHTTP2_PROTOCOL_ERROR);
            return 0;
        }
        st->send_window += inc;
        send_queue(st);
        return 0;
    }
    default:
        return 0;
    }
}

/* The frame's payload has all come. */
static void frame_end(h2_session *s)
{
    s->in_frame = 0;
    switch (s->ftype) {
    case NGHTTP2_DATA:
        data_done(s);
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_CONTINUATION:
        if (s->fflags & NGHTTP2_FLAG_END_HEADERS)
            block_done(s);
        break;
    case NGHTTP2_SETTINGS:
        if (s->fflags & NGHTTP2_FLAG_ACK)
            break;
        s->settings_seen = 1;
        frame_out(s, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
        if (s->upgraded) {
            h2_stream *st = s->upgraded; /* the client's preface: answer the upgraded request */
            s->upgraded = NULL;
            stream_dispatch(st);
            stream_maybe_close(st);
        }
        break;
    default:
        break;
    }
    if (s->c->b->out.len > OUT_ACKS_MAX) {
        log_debug("HTTP/2: closing the connection: the client does not read what it asks for");
        s->dead = 1;
    }
}

/* Reads the frames in in[0, n). */
static void frames_read(h2_session *s, const uint8_t *in, size_t n)
{
    size_t pos = 0;
    while (pos < n && !s->closing && !s->dead) {
        if (s->preface_left) {
            size_t at = HTTP_H2_PREFACE_LEN - s->preface_left;
            size_t k = BK_MIN((size_t)s->preface_left, n - pos);
            if (memcmp(in + pos, &HTTP_H2_PREFACE[at], k) != 0) {
                log_debug("HTTP/2: closing the connection: not the client's preface");
                s->dead = 1;
                return;
            }
            s->preface_left -= (uint8_t)k;
            pos += k;
            continue;
        }
        if (!s->in_frame) {
            size_t k = BK_MIN((size_t)(9 - s->fh_have), n - pos);
            memcpy(s->fh + s->fh_have, in + pos, k);
            s->fh_have += (uint8_t)k;
            pos += k;
            if (s->fh_have < 9)
                return;
            s->fh_have = 0;
            frame_begin(s);
            if (s->closing || s->dead)
                return;
        } else if (s->pre_have < s->pre_need) {
            size_t k = BK_MIN((size_t)(s->pre_need - s->pre_have), n - pos);
            memcpy(s->pre + s->pre_have, in + pos, k);
            s->pre_have += (uint8_t)k;
            pos += k;
            s->fleft -= (uint32_t)k;
            s->body_left = s->fleft;
            if (s->pre_have < s->pre_need)
                return;
            if (frame_pre(s) < 0)
                return;
        } else if (s->body_left) {
            size_t k = BK_MIN((size_t)s->body_left, n - pos);
            if (s->fmode == M_DATA && s->fst)
                on_data(s, s->fst, in + pos, k);
            else if (s->fmode == M_BLOCK && !s->hb_memo) {
                /* a request's whole block in one frame and in this input */
                if (s->ftype == NGHTTP2_HEADERS && (s->fflags & NGHTTP2_FLAG_END_HEADERS) &&
                    s->hb_st && !s->hb_trailers && s->body_left == s->frag_len && k == s->body_left &&
                    memo_take(s, s->hb_st, in + pos, k))
                    s->hb_memo = 1;
                else
                    block_feed(s, in + pos, k, 0);
            }
            pos += k;
            s->fleft -= (uint32_t)k;
            s->body_left -= (uint32_t)k;
        } else { /* padding */
            size_t k = BK_MIN((size_t)s->fleft, n - pos);
            pos += k;
            s->fleft -= (uint32_t)k;
        }
        if (s->in_frame && !s->fleft && s->pre_have == s->pre_need)
            frame_end(s);
    }
}

/* ---- the session ---- */


/* ---- nghttp2's memory: per-thread free lists by size class ----
 * nghttp2's HPACK decoder and encoder allocate and free small blocks per
 * header field (table entries, buffers); a session lives on one worker thread, so
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

/* Our SETTINGS, the server's connection preface (3.4). */
static void send_settings(h2_session *s)
{
    const http_conf *conf = s->c->conf;
    uint32_t streams = conf->http2_max_streams ? conf->http2_max_streams : 1;
    const struct { uint16_t id; uint32_t v; } iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, streams },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, conf->limits.max_head_size },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        /* RFC 9113 deprecates RFC 7540's priorities: none are kept. */
        { NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 },
    };
    uint8_t b[6 * BK_ARRAY_LEN(iv)];
    for (size_t i = 0; i < BK_ARRAY_LEN(iv); i++) {
        b[6 * i] = (uint8_t)(iv[i].id >> 8);
        b[6 * i + 1] = (uint8_t)iv[i].id;
        put32(b + 6 * i + 2, iv[i].v);
    }
    frame_out(s, NGHTTP2_SETTINGS, 0, 0, b, sizeof b);
}

static void session_del(h2_session *s)
{
    if (s->inflater)
        nghttp2_hd_inflate_del(s->inflater);
    free(s->memo);
    free(s);
}

static h2_session *session_new(http_conn *c)
{
    h2_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->c = c;
    s->preface_left = HTTP_H2_PREFACE_LEN;
    s->send_window = s->recv_window = LOCAL_WINDOW;
    s->peer_window = LOCAL_WINDOW;
    s->peer_max_frame = LOCAL_MAX_FRAME;
    s->resets = RESETS_BURST;
    s->resets_ms = c->hw->w.loop.now_ms;
    http_hpack_enc_init(&s->enc);
    if (nghttp2_hd_inflate_new2(&s->inflater, &mem_funcs) != 0) {
        session_del(s);
        return NULL;
    }
    c->b->h2 = s;
    return s;
}

int http_h2_start(http_conn *c)
{
    h2_session *s = session_new(c);
    if (!s)
        return -1;
    c->state = CONN_H2;
    send_settings(s);
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
    for (ssize_t i = 0; i < plen; i += 6) { /* settings that would be an error: declined */
        uint16_t id = (uint16_t)(payload[i] << 8 | payload[i + 1]);
        uint32_t v = get32(payload + i + 2);
        if (((id == NGHTTP2_SETTINGS_ENABLE_PUSH || id == NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES ||
              id == NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL) && v > 1) ||
            (id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE && v > WINDOW_MAX) ||
            (id == NGHTTP2_SETTINGS_MAX_FRAME_SIZE && (v < 16384 || v > 16777215)))
            return 0;
    }
    h2_session *s = session_new(c);
    if (!s)
        return -1;
    c->state = CONN_H2; /* from here on, closing c frees the session */
    /* (acknowledged by the 101: RFC 7540 3.2.1) */
    for (ssize_t i = 0; i < plen; i += 6)
        setting_apply(s, (uint16_t)(payload[i] << 8 | payload[i + 1]), get32(payload + i + 2));
    h2_stream *st = stream_new(s, 1);
    if (!st || s->dead)
        return -1;
    st->remote_ended = 1;
    s->max_id = 1;
    static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                             "Upgrade: h2c\r\n\r\n";
    memcpy(http_conn_out_reserve(c, sizeof sw - 1), sw, sizeof sw - 1);
    http_conn_out_commit(c, sizeof sw - 1);
    send_settings(s);
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

int http_h2_input(http_conn *c)
{
    h2_session *s = sess(c);
    size_t avail = c->in_len - c->req_start;
    if (!s || s->dead)
        return -1;
    if (avail && !s->closing) {
        s->in_input = 1;
        frames_read(s, (const uint8_t *)c->in + c->req_start, avail);
        s->in_input = 0;
    }
    c->in_len = c->req_start = 0;
    return s->dead ? -1 : 0;
}

/* Takes n bytes of st's body into dst: 0, or -1 when a file cannot give
 * them (unreadable, or shrunk). */
static int body_take(h2_stream *st, char *dst, size_t n)
{
    for (size_t done = 0; done < n;) {
        h2_piece *p = st->out;
        size_t take = (size_t)BK_MIN(p->len, (uint64_t)(n - done));
        if (p->kind == P_COPY) {
            memcpy(dst + done, p->data + p->off, take);
        } else if (p->kind == P_REF) {
            memcpy(dst + done, p->mem + p->off, take);
        } else {
            for (size_t got = 0; got < take;) {
                ssize_t r = pread(p->fd, dst + done + got, take - got, (off_t)(p->off + got));
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0)
                    return -1;
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
    return 0;
}

/* A file piece over several frames: read at once (preadv straight into
 * the frames' payloads), up to READ_AHEAD. Returns the bytes written, 0
 * when not this case, -1 when the file cannot give them. */
static ssize_t data_file_frames(h2_session *s, h2_stream *st, uint64_t room)
{
    h2_piece *p = st->out;
    size_t maxf = s->peer_max_frame;
    if (p->kind != P_FD || p->len <= maxf || room <= maxf)
        return 0;
    size_t total = (size_t)BK_MIN(BK_MIN(p->len, room), (uint64_t)READ_AHEAD);
    size_t frames = (total + maxf - 1) / maxf;
    struct iovec iov[READ_AHEAD / 16384 + 1];
    if (frames > BK_ARRAY_LEN(iov))
        return 0;
    char *base = http_conn_out_reserve(s->c, total + 9 * frames);
    for (size_t i = 0, off = 0; i < frames; i++) {
        size_t k = BK_MIN(maxf, total - off);
        iov[i] = (struct iovec){ base + i * (9 + maxf) + 9, k };
        off += k;
    }
    size_t got = 0;
    for (size_t i = 0; got < total;) {
        ssize_t r = preadv(p->fd, iov + i, (int)(frames - i), (off_t)(p->off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
        for (size_t k = (size_t)r; k;) { /* (a short read: on from where it stopped) */
            size_t use = BK_MIN(k, iov[i].iov_len);
            iov[i].iov_base = (char *)iov[i].iov_base + use;
            iov[i].iov_len -= use;
            k -= use;
            if (!iov[i].iov_len)
                i++;
        }
    }
    p->off += total;
    p->len -= total;
    st->out_len -= total;
    int end = st->eof && st->out_len == 0;
    for (size_t i = 0, off = 0; i < frames; i++) {
        size_t k = BK_MIN(maxf, total - off);
        frame_head((uint8_t *)base + i * (9 + maxf), k, NGHTTP2_DATA,
                   end && i + 1 == frames ? NGHTTP2_FLAG_END_STREAM : 0, st->id);
        off += k;
    }
    http_conn_out_commit(s->c, total + 9 * frames);
    if (p->len == 0) {
        st->out = p->next;
        if (!st->out)
            st->out_tail = &st->out;
        if (p->release)
            p->release(p->arg);
        if (!p->in_arena)
            free(p);
    }
    return (ssize_t)total;
}

/* st's next DATA frame(s), as far as the windows let them go; its body
 * ended (END_STREAM) when all of it has gone. 0, or -1 when st was reset. */
static int data_write(h2_session *s, h2_stream *st)
{
    http_conn *c = s->c;
    if (st->out_len == 0) { /* (queued with eof: the end, on its own) */
        frame_out(s, NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, st->id, NULL, 0);
        st->local_ended = 1;
        return 0;
    }
    int64_t win = BK_MIN(st->send_window, s->send_window);
    if (win <= 0)
        return 0;
    uint64_t room = BK_MIN((uint64_t)win, st->out_len);
    ssize_t n = data_file_frames(s, st, room);
    if (n == 0) {
        n = (ssize_t)BK_MIN(room, (uint64_t)s->peer_max_frame);
        char *out = http_conn_out_reserve(c, 9 + (size_t)n);
        if (body_take(st, out + 9, (size_t)n) < 0)
            n = -1;
        else
            frame_head((uint8_t *)out, (size_t)n, NGHTTP2_DATA,
                       st->eof && st->out_len == 0 ? NGHTTP2_FLAG_END_STREAM : 0, st->id);
        if (n > 0)
            http_conn_out_commit(c, 9 + (size_t)n);
    }
    if (n < 0) { /* unreadable, or the file shrank: reset the stream */
        stream_reset(st, NGHTTP2_INTERNAL_ERROR);
        return -1;
    }
    st->send_window -= n;
    s->send_window -= n;
    s->progress = 1;
    if (st->eof && st->out_len == 0)
        st->local_ended = 1;
    return 0;
}

int http_h2_output(http_conn *c)
{
    h2_session *s = sess(c);
    if (!s || s->dead || s->closing) /* (nothing goes after a GOAWAY for an error) */
        return 0;
    while (s->send_first) {
        if (c->b->out.len > OUT_HIGH_WATER || c->b->nsegs + 2 > HTTP_OUT_SEGS)
            return 1; /* more after a flush */
        h2_stream *st = s->send_first;
        s->send_first = st->send_next;
        if (!s->send_first)
            s->send_last = NULL;
        st->queued = 0;
        if (data_write(s, st) < 0)
            continue;
        if (st->local_ended)
            stream_maybe_close(st);
        else
            send_queue(st); /* its turn again, after the others' */
    }
    return 0;
}

int http_h2_done(const http_conn *c)
{
    const h2_session *s = sess(c);
    if (!s || s->dead || s->closing)
        return 1;
    return (s->goaway || s->peer_goaway) && s->nstreams == 0;
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
    if (!s || s->goaway || s->dead)
        return;
    send_goaway(s, NGHTTP2_NO_ERROR);
    http_conn_queue_flush(c);
}

void http_h2_free(http_conn *c)
{
    h2_session *s = sess(c);
    if (!s)
        return;
    while (s->streams)
        stream_gone(s->streams);
    c->b->h2 = NULL;
    session_del(s);
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
        http_conn_release_input(c); /* the session keeps what it needs */
    int progress = http_h2_progress(c);
    if (http_h2_handlers(c))
        timer_stop(&hw->w.loop, &c->tm);
    else if (progress || !timer_active(&c->tm))
        http_conn_arm(c, http_h2_idle(c) ? c->conf->keepalive_timeout : c->conf->send_timeout);
}

