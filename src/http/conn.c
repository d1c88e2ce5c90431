/* The transport under the HTTP protocols: accepting, reading, writing
 * (plain TCP or TLS, sendfile), the output queue, timers, closing
 * (lingering included), the pools of buffers and request blocks. The
 * protocols on top: HTTP/1.1 (h1.c, respond.c) and HTTP/2 (h2.c). */
#include "http/conn.h"

#include "core/net.h"
#include "http/h2.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define ACCEPT_BATCH 64
#define FREE_CONNS_MAX 1024

static void conn_io(bk_loop *l, bk_io *io, unsigned events);
static void conn_timeout(bk_loop *l, bk_timer *t);
static void conn_after_batch(http_conn *c);
static void conn_read(http_conn *c);
static void conn_tls_start(http_conn *c);
static void conn_handshake(http_conn *c);
static int conn_tls_more(const http_conn *c);

/* ---- transport: every socket call of a connection, in one place ----
 * Plain TCP, or TLS when c->tls is set (a connection accepted on an ssl
 * listener). Everything above (HTTP/1.1 framing, exchanges, handlers) is
 * the same for both; a plain connection pays one pointer test per call. */

/* Small segments (headers, then a body) are gathered into one record of
 * TLS_RECORD bytes; file data that kTLS cannot send is encrypted straight
 * from the file's mapping when the static handler gave one (the open-file
 * cache's: no pread copy), else read TLS_FILE_CHUNK at a time, so that a
 * 1 MiB file costs 16 preads; the records go
 * out 64 KiB at a time (tls_buffer_writes; the rest by tls_flush at the
 * end of http_conn_flush). The bytes of a write that came back short are
 * offered again, unchanged, at the head of the next one (OpenSSL requires
 * it; segments only advance by what was reported taken). */
#define TLS_RECORD (16 * 1024)
#define TLS_FILE_CHUNK (64 * 1024)

/* Not inlined: its buffer stays off the plain path's stack frame. */
__attribute__((noinline)) static ssize_t tls_sock_writev(tls_conn *t, const struct iovec *iov,
                                                         size_t cnt)
{
    char chunk[TLS_RECORD];
    size_t done = 0, i = 0, at = 0; /* at: offset in iov[i] */
    while (i < cnt) {
        const char *p;
        size_t n;
        if (iov[i].iov_len - at >= TLS_RECORD || i + 1 == cnt) {
            p = (const char *)iov[i].iov_base + at; /* large or last: as is */
            n = iov[i].iov_len - at;
        } else {
            n = 0;
            for (size_t j = i, o = at; j < cnt && n < TLS_RECORD; j++, o = 0) {
                size_t k = BK_MIN(iov[j].iov_len - o, TLS_RECORD - n);
                memcpy(chunk + n, (const char *)iov[j].iov_base + o, k);
                n += k;
            }
            p = chunk;
        }
        ssize_t w = n ? tls_write(t, p, n) : 0;
        if (w < 0) /* a full socket after some records: report those */
            return done && errno == EAGAIN ? (ssize_t)done : -1;
        done += (size_t)w;
        for (size_t left = (size_t)w; left;) { /* advance (i, at) by w */
            size_t k = BK_MIN(left, iov[i].iov_len - at);
            at += k;
            left -= k;
            if (at == iov[i].iov_len)
                i++, at = 0;
        }
        if ((size_t)w < n)
            break; /* the socket is full */
        while (i < cnt && iov[i].iov_len == 0)
            i++;
    }
    return (ssize_t)done;
}

/* File bytes encrypted straight from the file's mapping, a record at a
 * time, until n are taken or the socket is full. A record made while the
 * file lost pages (it shrank: the mapping went bad) never leaves: what is
 * unsent is dropped and the connection ends with EIO, as a short pread
 * would end it. So does a file found shorter once all n bytes are in
 * (zeros past its new end, on the page where it ends, read without a
 * fault). */
static ssize_t tls_map_send(tls_conn *t, int fd, const bk_fmap *m, off_t *off, size_t n)
{
    size_t done = 0;
    while (done < n) {
        size_t k = BK_MIN(n - done, TLS_RECORD);
        fmap_enter(m);
        ssize_t w = tls_write(t, m->p + *off, k);
        fmap_leave();
        if (BK_UNLIKELY(fmap_bad(m)))
            goto shrank;
        if (w < 0)
            return done && errno == EAGAIN ? (ssize_t)done : -1;
        done += (size_t)w;
        *off += w;
        if ((size_t)w < k)
            break; /* the socket is full */
    }
    struct stat st;
    if (done == n && fstat(fd, &st) == 0 && st.st_size < *off)
        goto shrank;
    return (ssize_t)done;
shrank:
    tls_abandon(t);
    errno = EIO;
    return -1;
}

/* tls_sendfile under kTLS; else the file's mapping (tls_map_send), or
 * pread into a buffer and tls_write, until n bytes are taken or the
 * socket is full. */
__attribute__((noinline)) static ssize_t tls_sock_sendfile(tls_conn *t, int fd,
                                                           const bk_fmap *map, off_t *off,
                                                           size_t n)
{
    ssize_t w = tls_sendfile(t, fd, *off, n);
    if (w >= 0 || errno != ENOTSUP) {
        if (w > 0)
            *off += w;
        return w;
    }
    if (map && (uint64_t)*off + n <= map->len && tls_coalescing(t))
        return tls_map_send(t, fd, map, off, n);
    char chunk[TLS_FILE_CHUNK];
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, chunk, BK_MIN(n - done, sizeof chunk), *off);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0) /* the file shrank: the response cannot end well */
                errno = EIO;
            return -1;
        }
        w = tls_write(t, chunk, (size_t)r);
        if (w < 0)
            return done && errno == EAGAIN ? (ssize_t)done : -1;
        done += (size_t)w; /* (a short write: the rest is read again) */
        *off += w;
        if (w < r)
            break; /* the socket is full */
    }
    return (ssize_t)done;
}

static inline ssize_t sock_read(http_conn *c, void *p, size_t n)
{
    if (BK_UNLIKELY(c->tls))
        return tls_read(c->tls, p, n);
    return read(c->io.fd, p, n);
}

static inline ssize_t sock_writev(http_conn *c, const struct msghdr *mh, int more)
{
    if (BK_UNLIKELY(c->tls))
        return tls_sock_writev(c->tls, mh->msg_iov, mh->msg_iovlen);
    return sendmsg(c->io.fd, mh, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
}

static inline ssize_t sock_sendfile(http_conn *c, int fd, const bk_fmap *map, off_t *off,
                                    size_t n)
{
    if (BK_UNLIKELY(c->tls))
        return tls_sock_sendfile(c->tls, fd, map, off, n);
    return sendfile(c->io.fd, fd, off, n);
}

/* 1: the write side is shut; 0: TLS records (close_notify) wait to be
 * sent first (c->fin_due: the lingering sends them, then the FIN). */
static inline int sock_shutdown_write(http_conn *c)
{
    if (BK_UNLIKELY(c->tls)) {
        tls_shutdown(c->tls); /* close_notify before the FIN */
        if (tls_unsent(c->tls)) {
            c->fin_due = 1;
            return 0;
        }
    }
    shutdown(c->io.fd, SHUT_WR);
    return 1;
}

/* Sends the ciphertext left in the TLS session (coalesced writes): 1 all
 * sent, 0 the socket is full, -1 error. After the last response of an
 * HTTP/1.1 connection (closing: http_conn_close_after_response follows),
 * the close_notify joins its records, so that they leave in one send. */
static inline int sock_flush(http_conn *c)
{
    if (BK_LIKELY(!c->tls))
        return 1;
    if (c->closing && c->state == CONN_HEAD)
        tls_shutdown(c->tls); /* (once: later calls do nothing) */
    if (tls_flush(c->tls) == 0)
        return 1;
    return errno == EAGAIN ? 0 : -1;
}

/* What a TLS connection waits for after an EAGAIN: a read may need the
 * socket writable and a write may need it readable. */
static inline unsigned sock_want(const http_conn *c, unsigned plain)
{
    if (BK_LIKELY(!c->tls))
        return plain;
    return tls_want(c->tls) == TLS_WANT_WRITE ? LOOP_WRITE : LOOP_READ;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        log_error("out of memory (%zu bytes)", n);
        abort();
    }
    return p;
}

/* ---- input buffer pool: idle connections hold no buffer ---- */

static char *inbuf_get(http_worker *hw)
{
    return hw->nbufpool ? hw->bufpool[--hw->nbufpool] : xmalloc(hw->buf_size);
}

static void inbuf_put(http_worker *hw, char *b)
{
    assert(b); /* a NULL in the pool would become a connection's buffer */
    if (hw->nbufpool < hw->bufpool_cap)
        hw->bufpool[hw->nbufpool++] = b;
    else
        free(b);
}

/* ---- request blocks: idle connections hold none ---- */

#define XPOOL_MAX 1024

/* Gives c a block, ready for a new request (from the pool, or new). */
static void busy_attach(http_conn *c)
{
    http_worker *hw = c->hw;
    http_conn_busy *b = hw->xpool;
    if (b) {
        hw->xpool = b->pool_next;
        hw->nxpool--;
    } else {
        b = xmalloc(sizeof *b);
        b->body = (bk_buf){ 0 };
        b->out = (bk_buf){ 0 };
        http_exchange_init(&b->x); /* pooled ones were reset by busy_detach */
    }
    b->c = c;
    b->h2 = NULL;
    b->body.len = 0;
    b->out.len = 0;
    b->nsegs = b->seg_head = 0;
    b->header_timer_due = b->streaming = b->chunked_out = 0;
    b->body_left = 0;
    http_parser_reset(&b->parser);
    b->x.proto = &http_h1_ops;
    b->x.hw = hw;
    b->x.conf = c->conf;
    b->x.peer = &c->peer.sa;
    b->x.map_files = c->tls && tls_coalescing(c->tls); /* (coalescing: no kTLS to send) */
    c->b = b;
}

/* Takes c's block back (its output flushed, its request over): large
 * buffers are freed, the rest is kept for the next connection. */
static void busy_detach(http_conn *c, int all)
{
    http_worker *hw = c->hw;
    http_conn_busy *b = c->b;
    if (!b)
        return;
    int keep = !all && hw->nxpool < XPOOL_MAX && !hw->stopping;
    http_exchange_reset(&b->x, !keep);
    c->b = NULL;
    if (b->body.cap > BODY_KEEP_MAX || !keep)
        buf_free(&b->body);
    if (b->out.cap > BODY_KEEP_MAX || !keep)
        buf_free(&b->out);
    if (!keep) {
        free(b);
        return;
    }
    b->pool_next = hw->xpool;
    hw->xpool = b;
    hw->nxpool++;
}

void http_conn_release_pools(http_worker *hw)
{
    while (hw->xpool) {
        http_conn_busy *b = hw->xpool;
        hw->xpool = b->pool_next;
        http_exchange_reset(&b->x, 1);
        buf_free(&b->body);
        buf_free(&b->out);
        free(b);
    }
    hw->nxpool = 0;
    while (hw->nbufpool)
        free(hw->bufpool[--hw->nbufpool]);
    http_h2_release_pools();
}

/* ---- lifecycle ---- */

static void set_accepting(http_worker *hw, int on)
{
    if (hw->accepting == on || hw->stopping)
        return;
    for (int i = 0; i < hw->nlisten; i++)
        if (hw->listen_io[i].fd >= 0)
            loop_io_set(&hw->w.loop, &hw->listen_io[i], on ? LOOP_READ : 0);
    hw->accepting = on;
}

static void conn_new(http_worker *hw, int fd, const struct sockaddr_storage *ss, socklen_t sl,
                     int tls, int h2c)
{
    http_conn *c = hw->free_conns;
    if (c) {
        hw->free_conns = c->free_next;
        hw->nfree--;
    } else {
        c = xmalloc(sizeof *c);
    }
    memset(c, 0, sizeof *c);
    c->hw = hw;
    c->h2c_only = (uint8_t)h2c;
    hw->stats.accepted++;
    c->conf = http_conf_retain(hw->conf);
    memcpy(&c->peer, ss, BK_MIN((size_t)sl, sizeof c->peer));
    c->peer_len = sl;
    timer_init(&c->tm, conn_timeout, c);

    loop_io_init(&c->io, fd, conn_io, c);
    c->next = hw->conns;
    if (hw->conns)
        hw->conns->prev = c;
    hw->conns = c;
    hw->nconns++;
    /* The header timeout covers a TLS handshake too: a client that connects
     * and says nothing costs a timer, then goes. */
    timer_start(&hw->w.loop, &c->tm, c->conf->header_timeout);
    /* Listeners use TCP_DEFER_ACCEPT, so the request (or the ClientHello)
     * is usually here already: read it now. The socket joins epoll only if
     * it has to wait, so a one-request connection costs no epoll_ctl. */
    c->in_dispatch = 1;
    if (BK_UNLIKELY(tls)) {
        conn_tls_start(c);
    } else {
        busy_attach(c);
        conn_read(c);
    }
    c->in_dispatch = 0;
    if (c->io.fd >= 0 && !c->io.registered &&
        loop_io_set(&hw->w.loop, &c->io, c->write_blocked ? LOOP_WRITE : LOOP_READ) < 0)
        http_conn_close(c);
}

static void seg_release(out_seg *s)
{
    if (s->release) {
        http_release_fn fn = s->release;
        s->release = NULL;
        fn(s->arg);
    }
}

static void conn_release_output(http_conn *c)
{
    if (!c->b)
        return;
    for (uint32_t i = c->b->seg_head; i < c->b->nsegs; i++)
        seg_release(&c->b->segs[i]);
    c->b->nsegs = c->b->seg_head = 0;
    c->b->out.len = 0;
}

/* Frees everything but the struct, which goes to the zombie list and is
 * recycled at the end of the loop iteration (events for it may still be
 * in the current batch). */
static void conn_free(http_conn *c)
{
    http_worker *hw = c->hw;
    conn_release_output(c);
    if (c->in) {
        inbuf_put(hw, c->in);
        c->in = NULL;
    }
    busy_detach(c, 0);
    http_conf_release(c->conf);
    c->conf = NULL;

    if (c->prev)
        c->prev->next = c->next;
    else
        hw->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    hw->nconns--;
    c->free_next = hw->zombies;
    hw->zombies = c;

    http_worker_stop_if_drained(hw);
    if (!hw->stopping && !hw->accepting && hw->nconns < hw->conf->max_connections)
        set_accepting(hw, 1);
}

/* Closes the socket. While a handler owns the request, the struct lives on
 * as an orphan until the handler ends the response. */
void http_conn_close(http_conn *c)
{
    http_worker *hw = c->hw;
    if (c->io.fd < 0)
        return;
    timer_stop(&hw->w.loop, &c->tm);
    if (BK_UNLIKELY(c->tls)) {
        tls_shutdown(c->tls); /* close_notify, if the handshake was done */
        tls_conn_free(c->tls);
        c->tls = NULL; /* the space is free_next's from here on */
    }
    int fd = c->io.fd;
    /* close() removes a socket from epoll only when its last reference
     * goes: while a CGI script started by another worker is between fork
     * and exec, it holds one, and the closed socket would stay registered
     * with a pointer to a connection struct that the next accept (same fd
     * number, same struct from the free list) reuses; its stale EPOLLRDHUP
     * then closed a live connection. So once CGI is configured, connections
     * leave epoll explicitly. */
    if (http_conf_children_possible())
        loop_io_stop(&hw->w.loop, &c->io);
    else
        loop_io_forget(&hw->w.loop, &c->io);
    close(fd);
    if (BK_UNLIKELY(c->state == CONN_H2))
        http_h2_free(c); /* handlers at work see their exchanges aborted */
    if (c->state == CONN_HANDLER) {
        c->orphan = 1;
        conn_release_output(c);
        http_exchange_abort(&c->b->x);
        return;
    }
    conn_free(c);
}

void http_conn_tick(http_worker *hw)
{
    if (!hw->accepting && hw->nconns < hw->conf->max_connections)
        set_accepting(hw, 1);
}

void http_conn_queue_flush(http_conn *c)
{
    /* Inside a read batch the batch's own flush follows, except for an
     * orphan, which only the flush list frees. */
    if ((c->in_dispatch && !c->orphan) || c->flush_queued)
        return;
    c->flush_queued = 1;
    c->flush_next = c->hw->flush_list;
    c->hw->flush_list = c;
}

void http_conn_reap(http_worker *hw)
{
    while (hw->flush_list) {
        http_conn *c = hw->flush_list;
        hw->flush_list = c->flush_next;
        c->flush_queued = 0;
        if (c->orphan) {
            if (c->state != CONN_HANDLER) /* its handler has ended: let it go */
                conn_free(c);
            continue;
        }
        if (c->io.fd < 0)
            continue; /* closed since it was queued */
        c->in_dispatch = 1;
        conn_after_batch(c);
        if (BK_UNLIKELY(c->tls) && conn_tls_more(c))
            conn_read(c);
        c->in_dispatch = 0;
    }
    while (hw->deferred) {
        void **block = hw->deferred;
        hw->deferred = *block;
        free(block);
    }
    while (hw->zombies) {
        http_conn *c = hw->zombies;
        hw->zombies = c->free_next;
        if (hw->nfree < FREE_CONNS_MAX && !hw->stopping) {
            c->free_next = hw->free_conns;
            hw->free_conns = c;
            hw->nfree++;
        } else {
            free(c);
        }
    }
}

void http_conn_census(http_worker *hw, http_census *out)
{
    out->active = hw->nconns;
    for (http_conn *c = hw->conns; c; c = c->next) {
        if (c->orphan)
            out->active--; /* socket already closed, a handler still running */
        else if (c->state == CONN_H2)
            *(http_h2_idle(c) && !c->write_blocked ? &out->idle : &out->writing) += 1;
        else if (c->state == CONN_HANDLER || c->state == CONN_LINGER || c->write_blocked)
            out->writing++;
        else if (c->in_len > c->req_start || c->state == CONN_BODY ||
                 c->state == CONN_TLS_HANDSHAKE)
            out->reading++;
        else
            out->idle++;
    }
}

/* TLS records still unsent are a response's last ones (not idle), or,
 * before the first request, the session ticket held for the first
 * response's send: that connection is idle, and http_conn_close sends the
 * ticket, then close_notify, in one send (the client has read the whole
 * server flight, so the socket takes the few hundred bytes). */
static int conn_is_idle(const http_conn *c)
{
    return c->state == CONN_HEAD && c->in_len == c->req_start &&
           (!c->b || c->b->nsegs == c->b->seg_head) && !c->resp_open &&
           (!c->tls || !tls_unsent(c->tls) || c->requests == 0);
}

void http_conn_close_idle(http_worker *hw)
{
    http_conn *c = hw->conns, *next;
    for (; c; c = next) {
        next = c->next;
        if (c->state == CONN_H2) { /* GOAWAY; closes once its streams are done */
            http_h2_shutdown(c);
            continue;
        }
        /* Busy ones answer "Connection: close" (hw->stopping) and close. */
        if (conn_is_idle(c) || c->state == CONN_LINGER || c->state == CONN_TLS_HANDSHAKE)
            http_conn_close(c);
    }
}

void http_conn_close_all(http_worker *hw)
{
    http_conn *c = hw->conns, *next;
    for (; c; c = next) {
        next = c->next;
        http_conn_close(c); /* orphans stay listed until their handler ends */
    }
}

void http_conn_accept(bk_loop *l, bk_io *io, unsigned events)
{
    http_worker *hw = io->udata;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        if (hw->nconns >= hw->conf->max_connections) {
            set_accepting(hw, 0);
            return;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(io->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                log_warn("accept: %s; pausing accepts for a second", strerror(errno));
                set_accepting(hw, 0); /* the tick timer turns it back on */
            } else if (errno == ECONNABORTED || errno == EINTR) {
                continue;
            }
            return;
        }
        int k = (int)(io - hw->listen_io);
        conn_new(hw, fd, &ss, sl, (int)(hw->listen_tls >> k) & 1, (int)(hw->listen_h2c >> k) & 1);
    }
}

/* ---- output ---- */

/* Returns 1 when everything was sent, 0 when the socket is full, -1 on
 * error. A short write is taken as "full": the next attempt would only
 * return EAGAIN. */
int http_conn_flush(http_conn *c)
{
    while (c->b->seg_head < c->b->nsegs) {
        out_seg *s = &c->b->segs[c->b->seg_head];
        if (s->kind == OUT_FILE) {
            off_t off = (off_t)s->off;
            size_t want = (size_t)BK_MIN(s->len, (uint64_t)1 << 30);
            ssize_t n = sock_sendfile(c, s->fd, s->map, &off, want);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return errno == EAGAIN ? 0 : -1;
            }
            if (n == 0)
                return -1; /* the file shrank under us */
            c->hw->stats.bytes_out += (uint64_t)n;
            s->off += (uint64_t)n;
            s->len -= (uint64_t)n;
            if (s->len == 0) {
                seg_release(s);
                c->b->seg_head++;
            } else if ((size_t)n < want) {
                return 0;
            }
            continue;
        }

        struct iovec iov[HTTP_OUT_SEGS];
        int cnt = 0;
        size_t total = 0;
        uint32_t i = c->b->seg_head;
        for (; i < c->b->nsegs && c->b->segs[i].kind != OUT_FILE; i++, cnt++) {
            out_seg *b = &c->b->segs[i];
            iov[cnt].iov_base = b->kind == OUT_BUF ? c->b->out.data + b->off : (void *)b->mem;
            iov[cnt].iov_len = b->len;
            total += b->len;
        }
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
        /* MSG_MORE keeps headers and the sendfile body in the same packets. */
        ssize_t n = sock_writev(c, &mh, i < c->b->nsegs);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? 0 : -1;
        }
        c->hw->stats.bytes_out += (uint64_t)n;
        size_t left = (size_t)n;
        while (left) {
            out_seg *b = &c->b->segs[c->b->seg_head];
            if (left >= b->len) {
                left -= b->len;
                seg_release(b);
                c->b->seg_head++;
            } else {
                if (b->kind == OUT_BUF)
                    b->off += left;
                else
                    b->mem += left;
                b->len -= left;
                left = 0;
            }
        }
        if ((size_t)n < total)
            return 0;
    }
    int rc = sock_flush(c); /* the last records, coalesced */
    if (rc <= 0)
        return rc;
    c->b->nsegs = c->b->seg_head = 0;
    c->b->out.len = 0;
    return 1;
}

char *http_conn_out_reserve(http_conn *c, size_t n)
{
    if (buf_reserve(&c->b->out, n) < 0) {
        log_error("out of memory for a response");
        abort();
    }
    return c->b->out.data + c->b->out.len;
}

void http_conn_out_commit(http_conn *c, size_t n)
{
    out_seg *last = c->b->nsegs > c->b->seg_head ? &c->b->segs[c->b->nsegs - 1] : NULL;
    if (last && last->kind == OUT_BUF && last->off + last->len == c->b->out.len)
        last->len += n;
    else
        http_conn_out_seg(c, (out_seg){ .kind = OUT_BUF, .off = c->b->out.len, .len = n });
    c->b->out.len += n;
}

void http_conn_out_seg(http_conn *c, out_seg s)
{
    if (c->b->nsegs == HTTP_OUT_SEGS) {
        /* Callers leave room (see http_h1_process, http_h2_output); reaching here is a bug. */
        log_error("output segment queue overflow");
        abort();
    }
    c->b->segs[c->b->nsegs++] = s;
}

/* ---- timers ---- */

static void conn_timeout(bk_loop *l, bk_timer *t)
{
    http_conn *c = t->udata;
    log_debug("closing connection: %s timeout",
              c->state == CONN_LINGER ? "lingering" : c->write_blocked ? "send"
              : c->state == CONN_BODY ? "body"
              : c->state == CONN_TLS_HANDSHAKE ? "TLS handshake"
              : c->state == CONN_H2 ? "HTTP/2 idle or stalled" : "header/keep-alive");
    http_conn_close(c);
}

void http_conn_arm(http_conn *c, uint64_t ms)
{
    timer_start(&c->hw->w.loop, &c->tm, ms);
}

/* ---- closing ---- */

/* Closes after the last response. When the client may still be sending
 * (an error cut the request short), the write side is shut first and the
 * input drained for a while, so the kernel does not answer the unread
 * bytes with a reset that could destroy the response in flight. */
void http_conn_close_after_response(http_conn *c)
{
    if (c->state == CONN_LINGER) {
        http_conn_close(c);
        return;
    }
    /* TLS: a close_notify that the full socket cannot take now is sent by
     * lingering, the FIN after it, rather than lost. */
    if (!c->must_close && (BK_LIKELY(!c->tls) || (tls_shutdown(c->tls), !tls_unsent(c->tls)))) {
        http_conn_close(c);
        return;
    }
    int shut = sock_shutdown_write(c);
    c->state = CONN_LINGER;
    if (c->in) {
        inbuf_put(c->hw, c->in);
        c->in = NULL;
    }
    c->in_len = c->req_start = 0;
    loop_io_set(&c->hw->w.loop, &c->io, shut ? LOOP_READ : LOOP_READ | LOOP_WRITE);
    http_conn_arm(c, c->conf->linger_timeout);
}

static void conn_linger_read(http_conn *c, unsigned events)
{
    if (BK_UNLIKELY(c->fin_due) && (events & (LOOP_WRITE | LOOP_ERR | LOOP_HUP))) {
        /* TLS: the close_notify the socket could not take, then the FIN */
        int rc = sock_flush(c);
        if (rc < 0) {
            http_conn_close(c);
            return;
        }
        if (rc > 0) {
            c->fin_due = 0;
            shutdown(c->io.fd, SHUT_WR);
            loop_io_set(&c->hw->w.loop, &c->io, LOOP_READ);
        }
    }
    /* Raw bytes, TLS or not: they are thrown away, and the TLS session,
     * its close_notify sent, has nothing more to do. */
    char sink[4096];
    ssize_t n = read(c->io.fd, sink, sizeof sink);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        http_conn_close(c);
}

void http_conn_compact(http_conn *c)
{
    if (c->req_start == 0)
        return;
    uint32_t left = c->in_len - c->req_start;
    if (left)
        memmove(c->in, c->in + c->req_start, left);
    c->in_len = left;
    c->req_start = 0;
}

static void conn_read(http_conn *c)
{
    http_worker *hw = c->hw;
    for (;;) {
        if (!c->b)
            busy_attach(c);
        if (!c->in) {
            c->in = inbuf_get(hw);
            c->in_cap = hw->buf_size;
            c->in_len = c->req_start = 0;
            if (c->state == CONN_HEAD && c->requests) /* a keep-alive request starts */
                http_conn_arm(c, c->conf->header_timeout);
        }
        if (c->in_len == c->in_cap)
            http_conn_compact(c);
        ssize_t n = sock_read(c, c->in + c->in_len, c->in_cap - c->in_len);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                /* TLS: a read may need the socket writable first */
                if (BK_UNLIKELY(c->tls) &&
                    loop_io_set(&hw->w.loop, &c->io, sock_want(c, LOOP_READ)) < 0)
                    http_conn_close(c);
                return;
            }
            http_conn_close(c); /* EOF or reset: nothing more will come */
            return;
        }
        c->in_len += (uint32_t)n;
        hw->stats.bytes_in += (uint64_t)n;
        if (BK_LIKELY(c->state != CONN_H2))
            http_h1_process(c); /* (may turn the connection into HTTP/2) */
        if (BK_UNLIKELY(c->state == CONN_H2) && c->io.fd >= 0)
            http_h2_input(c);
        if (c->io.fd >= 0)
            conn_after_batch(c);
        if (BK_LIKELY(!c->tls) || !conn_tls_more(c))
            return;
    }
}

/* After a batch of input (or output added from a callback): the
 * protocol flushes and decides what to wait for. */
static void conn_after_batch(http_conn *c)
{
    if (!c->b)
        return; /* idle already (queued for a flush, then went idle) */
    if (BK_UNLIKELY(c->state == CONN_H2))
        http_h2_after_batch(c);
    else
        http_h1_after_batch(c);
}

static void conn_wait_writable(http_conn *c)
{
    /* TLS may need the socket readable to go on writing */
    unsigned want = sock_want(c, LOOP_WRITE);
    if (!c->write_blocked || BK_UNLIKELY(c->io.mask != want)) {
        c->write_blocked = 1;
        loop_io_set(&c->hw->w.loop, &c->io, want);
    }
    http_conn_arm(c, c->conf->send_timeout);
}

static void conn_writable_again(http_conn *c)
{
    c->write_blocked = 0;
    loop_io_set(&c->hw->w.loop, &c->io, LOOP_READ);
}

int http_conn_flush_step(http_conn *c)
{
    int rc = http_conn_flush(c);
    if (rc < 0)
        http_conn_close(c);
    else if (rc == 0)
        conn_wait_writable(c);
    else if (c->write_blocked)
        conn_writable_again(c);
    return rc;
}

void http_conn_release_input(http_conn *c)
{
    if (c->in)
        inbuf_put(c->hw, c->in);
    c->in = NULL;
    c->in_len = c->req_start = 0;
}

void http_conn_release_idle(http_conn *c)
{
    http_conn_release_input(c);
    busy_detach(c, 0);
}

static void conn_io(bk_loop *l, bk_io *io, unsigned events)
{
    http_conn *c = io->udata;
    c->in_dispatch = 1;
    if (c->state == CONN_LINGER) {
        conn_linger_read(c, events);
    } else if (c->write_blocked) {
        /* (a TLS write may wait for the socket to be readable) */
        if ((events & (LOOP_WRITE | LOOP_ERR | LOOP_HUP)) || BK_UNLIKELY(c->tls)) {
            conn_after_batch(c);
            if (BK_UNLIKELY(c->tls) && conn_tls_more(c))
                conn_read(c);
        }
    } else if (c->state == CONN_HANDLER) {
        /* A handler is working. Pipelined input is read into the free end
         * of the buffer (never moving what the request points into) and
         * waits; end of input means the client has gone. A full buffer
         * stops the reading until the response ends. */
        if (events & (LOOP_ERR | LOOP_HUP)) {
            http_conn_close(c);
        } else if (c->in && c->in_len < c->in_cap) {
            ssize_t n = sock_read(c, c->in + c->in_len, c->in_cap - c->in_len);
            if (n > 0)
                c->in_len += (uint32_t)n;
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                http_conn_close(c);
            else if (BK_UNLIKELY(c->tls) && tls_want(c->tls) == TLS_WANT_WRITE)
                loop_io_set(l, io, 0); /* resumes when the response ends */
        } else {
            loop_io_set(l, io, 0);
        }
    } else if (BK_UNLIKELY(c->state == CONN_TLS_HANDSHAKE)) {
        conn_handshake(c);
    } else if (events & (LOOP_READ | LOOP_HUP | LOOP_ERR | LOOP_WRITE)) {
        conn_read(c); /* (WRITE: a TLS read waiting for the socket to drain) */
    }
    c->in_dispatch = 0;
}

/* ---- TLS: the handshake, and data left inside the session ---- */

static void conn_tls_start(http_conn *c)
{
    tls_ctx *ctx = c->conf->tls;
    c->tls = ctx ? tls_conn_new(ctx, c->io.fd) : NULL;
    if (!c->tls) {
        log_warn("closing a connection on an ssl listener: %s",
                 ctx ? "out of memory for its TLS session" : "no TLS context");
        http_conn_close(c);
        return;
    }
    tls_buffer_writes(c->tls); /* unless kTLS sends: see tls_sock_writev */
    c->state = CONN_TLS_HANDSHAKE;
    conn_handshake(c);
}

static void conn_handshake(http_conn *c)
{
    if (tls_handshake(c->tls) == 1) {
        c->state = CONN_HEAD;
        size_t alen = 0;
        const char *alpn = tls_alpn(c->tls, &alen);
        if (alpn && alen == 2 && memcmp(alpn, "h2", 2) == 0) {
            if (!c->b)
                busy_attach(c);
            if (http_h2_start(c) < 0) {
                http_conn_close(c);
                return;
            }
        }
        conn_read(c); /* the request may have come with the client's Finished */
        return;
    }
    if (errno != EAGAIN) {
        char why[160];
        const char *e = tls_last_error(why, sizeof why);
        log_debug("TLS handshake failed: %s", e[0] ? e : strerror(errno));
        http_conn_close(c);
        return;
    }
    if (loop_io_set(&c->hw->w.loop, &c->io, sock_want(c, LOOP_READ)) < 0)
        http_conn_close(c);
}

/* Bytes can wait inside the TLS session while the socket stays quiet:
 * records read ahead, or the rest of a record larger than the free end of
 * the input buffer. No event will come for them, so the reader goes on at
 * once (also after a response ended outside a read batch). */
static int conn_tls_more(const http_conn *c)
{
    return c->io.fd >= 0 &&
           (c->state == CONN_HEAD || c->state == CONN_BODY || c->state == CONN_H2) &&
           !c->write_blocked && !c->closing && !c->must_close && tls_pending(c->tls) > 0;
}

void http_conn_conf_changed(http_worker *hw)
{
    for (http_conn *c = hw->conns; c; c = c->next)
        if (c->state == CONN_H2 && c->io.fd >= 0)
            http_h2_shutdown(c); /* clients reconnect to the new configuration */
}
