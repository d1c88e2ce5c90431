/* HTTP/1.1 on a connection: request heads and bodies (Content-Length or
 * chunked), pipelining, keep-alive, Expect: 100-continue, and the hand-off
 * to HTTP/2 (prior knowledge, Upgrade: h2c). One exchange at a time; its
 * responses are written by respond.c. The transport (conn.c) reads the
 * bytes and flushes the output. */
#include "http/conn.h"

#include "http/h2.h"

#include <stdlib.h>

#define OUT_HIGH_WATER (256 * 1024) /* stop reading pipelined requests above this */

static void h1_dispatch(http_conn *c)
{
    /* Upgrade: h2c, asked with the first request of a plain connection. */
    if (BK_UNLIKELY(c->requests == 0 && c->b->parser.known[HH_CONNECTION]) && c->conf->http2 &&
        !c->tls) {
        int rc = http_h2_upgrade(c);
        if (rc != 0) {
            if (rc < 0)
                http_conn_close(c);
            return;
        }
    }
    http_exchange_set_request(&c->b->x, c->in + c->req_start, &c->b->parser,
                              (bk_str){ c->b->body.data, c->b->body.len });
    c->state = CONN_HANDLER;
    c->head_only = c->b->x.req.method == HTTP_HEAD;
    c->requests++;
    c->hw->stats.requests++;
    c->hw->handler(&c->b->x, c->hw->handler_udata);
    /* Only a handler still at work must not be timed out. One that has
     * answered leaves the timer as it was (no timer runs before this
     * returns), and conn_after_batch sets the next deadline (keep-alive,
     * header, body or send): one lazy re-arm instead of a stop and a
     * fresh insertion per request. */
    if (c->state == CONN_HANDLER)
        timer_stop(&c->hw->w.loop, &c->tm);
}

/* Answers a request that cannot be parsed or framed, then closes. */
static void h1_reject(http_conn *c, int status)
{
    c->hw->stats.requests++;
    c->must_close = 1;
    c->state = CONN_HANDLER;
    c->head_only = 0;
    c->b->x.req = (http_request){ .head = c->in + c->req_start, .parser = &c->b->parser };
    http_exchange_error(&c->b->x, status, NULL);
}

static void h1_start_body(http_conn *c)
{
    http_parser *p = &c->b->parser;
    c->b->body.len = 0;
    if (p->body_kind == HTTP_BODY_LENGTH) {
        if (p->content_length > c->conf->max_body_size) {
            h1_reject(c, 413);
            return;
        }
        c->b->body_left = p->content_length;
    } else {
        http_chunked_reset(&c->b->chunked);
    }
    c->state = CONN_BODY;
    if (p->expect_continue && c->in_len == c->req_start + c->head_len && p->version_minor) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        memcpy(http_conn_out_reserve(c, sizeof cont - 1), cont, sizeof cont - 1);
        http_conn_out_commit(c, sizeof cont - 1);
    }
    http_conn_arm(c, c->conf->body_timeout);
}

/* Moves body bytes from the input buffer into c->b->body. Returns 1 when the
 * body is complete, 0 when more is needed, -1 after rejecting it. */
static int h1_read_body(http_conn *c)
{
    uint32_t start = c->req_start + c->head_len;
    char *p = c->in + start;
    size_t avail = c->in_len - start, consumed, data;
    int done;
    if (c->b->parser.body_kind == HTTP_BODY_LENGTH) {
        data = consumed = (size_t)BK_MIN((uint64_t)avail, c->b->body_left);
        c->b->body_left -= consumed;
        done = c->b->body_left == 0;
    } else {
        ssize_t used = http_chunked_decode(&c->b->chunked, p, avail, &data, &done);
        if (used < 0) {
            h1_reject(c, 400);
            return -1;
        }
        consumed = (size_t)used;
        if (c->b->body.len + data > c->conf->max_body_size) {
            h1_reject(c, 413);
            return -1;
        }
    }
    if (data && buf_append(&c->b->body, p, data) < 0) {
        h1_reject(c, 500);
        return -1;
    }
    memmove(p, p + consumed, avail - consumed);
    c->in_len -= (uint32_t)consumed;
    if (!done) {
        http_conn_arm(c, c->conf->body_timeout);
        return 0;
    }
    return 1;
}

/* Handles every complete request in the input buffer, in order. */
void http_h1_process(http_conn *c)
{
    while (c->io.fd >= 0 && !c->closing && !c->write_blocked && !c->must_close) {
        if (c->b->nsegs + 4 > HTTP_OUT_SEGS || c->b->out.len > OUT_HIGH_WATER) {
            int rc = http_conn_flush(c);
            if (rc < 0) {
                http_conn_close(c);
                return;
            }
            if (rc == 0)
                return; /* conn_after_batch waits for the socket */
        }
        if (c->state == CONN_HEAD) {
            size_t avail = c->in_len - c->req_start;
            if (!avail)
                return;
            /* HTTP/2 with prior knowledge: the connection preface first. */
            if (BK_UNLIKELY(c->requests == 0) && !c->tls &&
                ((c->in[c->req_start] == 'P' && c->conf->http2) || c->h2c_only)) {
                size_t k = BK_MIN(avail, (size_t)HTTP_H2_PREFACE_LEN);
                if (memcmp(c->in + c->req_start, HTTP_H2_PREFACE, k) == 0) {
                    if (k < HTTP_H2_PREFACE_LEN)
                        return; /* the rest of it is on its way */
                    if (http_h2_start(c) < 0)
                        http_conn_close(c);
                    return;
                }
                if (c->h2c_only || (k >= 16 && memcmp(c->in + c->req_start, HTTP_H2_PREFACE, 16) == 0)) {
                    http_conn_close(c); /* not HTTP/2, or "PRI * HTTP/2.0" and a broken preface */
                    return;
                }
            }
            int rc = http_parse_head(&c->b->parser, c->in + c->req_start, avail, &c->conf->limits);
            if (rc == 0)
                return;
            if (rc < 0) {
                h1_reject(c, -rc);
                return;
            }
            c->head_len = (uint32_t)rc;
            if (c->b->parser.body_kind != HTTP_BODY_NONE) {
                h1_start_body(c);
                continue;
            }
            h1_dispatch(c);
        } else if (c->state == CONN_BODY) {
            int rc = h1_read_body(c);
            if (rc <= 0)
                return;
            h1_dispatch(c);
        } else {
            return; /* a handler or lingering owns the connection */
        }
    }
}

/* Called when a response is complete: the request is over, the next may start. */
void http_h1_finish_request(http_conn *c)
{
    c->req_start += c->head_len;
    c->head_len = 0;
    c->resp_open = 0;
    c->state = CONN_HEAD;
    http_parser_reset(&c->b->parser);
    c->b->streaming = c->b->chunked_out = 0;
    if (c->b->body.cap > BODY_KEEP_MAX)
        buf_free(&c->b->body);
    c->b->body.len = 0;
    if (!c->keep_alive) {
        c->closing = 1;
    } else if (c->in_len > c->req_start && c->io.fd >= 0) {
        /* A pipelined request is under way. Inside a read batch the next
         * one is usually complete and answered at once, so the header
         * timer is not armed per request: conn_after_batch arms it if the
         * batch ends on a partial head. */
        if (c->in_dispatch)
            c->b->header_timer_due = 1;
        else
            http_conn_arm(c, c->conf->header_timeout);
    }
    http_exchange_reset(&c->b->x, 0);
    if (!c->in_dispatch)
        http_conn_queue_flush(c); /* ended from a callback: flush and go on */
}

/* After a batch of requests: flush once, then decide what to wait for. */
void http_h1_after_batch(http_conn *c)
{
    http_worker *hw = c->hw;
    if (!c->b)
        return; /* idle already (queued for a flush, then went idle) */
    for (;;) {
        if (http_conn_flush_step(c) <= 0)
            return;
        if (c->closing || (c->must_close && c->state != CONN_HANDLER)) {
            http_conn_close_after_response(c);
            return;
        }
        if (c->state != CONN_HEAD || c->in_len == c->req_start)
            break;
        /* Requests left unparsed by the output limit, or one half read. */
        size_t before = c->in_len - c->req_start;
        http_h1_process(c);
        if (c->io.fd < 0)
            return;
        if (c->b->nsegs == c->b->seg_head && c->in_len - c->req_start == before)
            break; /* nothing new: need more input */
    }
    if (c->state != CONN_HANDLER && c->io.registered && c->io.mask != LOOP_READ)
        loop_io_set(&hw->w.loop, &c->io, LOOP_READ);
    if (c->b->header_timer_due) {
        c->b->header_timer_due = 0;
        if (c->state == CONN_HEAD && c->in_len > c->req_start)
            http_conn_arm(c, c->conf->header_timeout);
    }
    if (c->state == CONN_HEAD) {
        if (c->in_len == c->req_start && hw->stopping) {
            http_conn_close(c);
        } else if (c->in_len == c->req_start) {
            /* Idle: give the buffer back (if a call before this one has not:
             * a response ended from a callback while the socket was full
             * gets here from the flush list and from the writable event)
             * and wait with the keep-alive timer. */
            http_conn_release_idle(c);
            http_conn_arm(c, c->conf->keepalive_timeout);
        } else if (c->in_len == c->in_cap) {
            http_conn_compact(c);
        } else if (c->req_start > c->in_cap / 2) {
            http_conn_compact(c);
        }
    }
}

