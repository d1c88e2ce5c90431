/* HTTP/2 (RFC 9113) on a connection: this module reads the client's frames
 * as they come (stream states, flow control, SETTINGS, PING, GOAWAY,
 * RST_STREAM, CONTINUATION), maps streams onto exchanges (exchange.h) for
 * the worker's handler, and writes its frames straight into the
 * connection's output buffer (conn.h); libnghttp2's HPACK decoder and
 * encoder do the header compression. The transport (TCP or TLS, reading,
 * flushing, timers) stays conn.c's.
 *
 * A connection becomes HTTP/2 by ALPN "h2" after a TLS handshake, by the
 * client's connection preface on a plain listener (prior knowledge), or by
 * an HTTP/1.1 request with "Upgrade: h2c" (answered 101, then served as
 * stream 1). Requests are dispatched once complete (END_STREAM), each on
 * its own exchange; a handler may answer later, and a stream whose client
 * has gone (RST_STREAM, or the connection closed) lives on detached until
 * its handler ends it.
 *
 * Refused: header blocks larger than max_header_size (431, decoded without
 * being kept: HPACK bombs), more than http2_max_concurrent_streams streams
 * (REFUSED_STREAM), rapid resets (RST_STREAMs beyond a burst of 1000 and
 * 33/s: ENHANCE_YOUR_CALM), CONTINUATION floods (over 32 in one block),
 * SETTINGS/PING floods (SETTINGS over 32 entries; acknowledgements owed
 * over 1 MiB to a peer that does not read: closed), and peers that stop
 * reading or keep a window at zero (send_timeout). */
#ifndef BRISK_HTTP_H2_H
#define BRISK_HTTP_H2_H

#include "http/conn.h"

/* The 24 bytes a client sends first (prior knowledge). */
#define HTTP_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define HTTP_H2_PREFACE_LEN 24

/* Makes c an HTTP/2 connection; its input (c->in from req_start) is fed
 * to the session next. 0, or -1 when out of memory (close c). */
int http_h2_start(http_conn *c);
/* The HTTP/1.1 request in c->b (parsed, no body) asks for "Upgrade: h2c"
 * with HTTP2-Settings: 1 when c is now HTTP/2 (101 queued, the request
 * dispatched as stream 1), 0 when the upgrade is declined (serve it as
 * HTTP/1.1), -1 on failure (close c). */
int http_h2_upgrade(http_conn *c);
/* Feeds the input buffer to the session (all of it is consumed) and runs
 * the handlers of completed requests. -1: the session is over (close c
 * after flushing). */
int http_h2_input(http_conn *c);
/* Serializes what the session has to send into the connection's output
 * queue, as far as the high-water mark allows: 1 when it stopped there
 * (flush, then call again). */
int http_h2_output(http_conn *c);
/* 1 when the session is over: nothing left to read or write. */
int http_h2_done(const http_conn *c);
/* Nothing is under way: no stream open, no output. */
int http_h2_idle(const http_conn *c);
/* Streams whose handlers are at work. */
uint32_t http_h2_handlers(const http_conn *c);
/* Graceful stop or reload: GOAWAY; open streams finish. */
void http_h2_shutdown(http_conn *c);
/* The socket is gone: handlers still at work see their exchanges aborted;
 * the session is freed. */
void http_h2_free(http_conn *c);
/* After a read batch (or output added from a callback): serialize, flush,
 * close a finished session or set the timer. */
void http_h2_after_batch(http_conn *c);
/* Frees this thread's spare streams (a worker at exit). */
void http_h2_release_pools(void);
/* Progress since the last call (frames with data in, or bytes out):
 * for the stall timer. */
int http_h2_progress(http_conn *c);

#endif
