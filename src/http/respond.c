/* HTTP/1.1 responses: the protocol's side of the exchange (http_h1_ops),
 * writing status lines, header blocks, framing and bodies into the
 * connection's output queue; and the access log. */
#include "http/conn.h"

#include "core/net.h"

#include <stdio.h>

#define SERVER_LINE "Server: brisk/" BRISK_VERSION "\r\n"

static inline char *put(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}
#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

/* Room put_begin needs for a status whose reason is reason_len bytes. */
#define BEGIN_ROOM(reason_len) (64 + (reason_len) + sizeof SERVER_LINE + CLOCK_HTTP_DATE_LEN)
/* Room put_end_headers needs. */
#define END_ROOM 64

/* Status line, Server and Date, at p. */
static char *put_begin(http_conn *c, char *p, int status, bk_str reason)
{
    c->status = status;
    c->resp_open = 1;
    if (status == 200) {
        p = PUT_LIT(p, "HTTP/1.1 200 OK\r\n");
    } else {
        p = PUT_LIT(p, "HTTP/1.1 ");
        *p++ = (char)('0' + status / 100);
        *p++ = (char)('0' + status / 10 % 10);
        *p++ = (char)('0' + status % 10);
        *p++ = ' ';
        p = put(p, reason.p, reason.len);
        p = PUT_LIT(p, "\r\n");
    }
    p = PUT_LIT(p, SERVER_LINE "Date: ");
    p = put(p, c->hw->w.clock.http_date, CLOCK_HTTP_DATE_LEN);
    return PUT_LIT(p, "\r\n");
}

/* Content-Length, Connection and the blank line, at p; decides keep-alive. */
static char *put_end_headers(http_conn *c, char *p, uint64_t content_length)
{
    http_worker *hw = c->hw;
    c->keep_alive = c->b->parser.keep_alive && !c->must_close && !hw->stopping &&
                    c->requests < c->conf->keepalive_requests;
    c->resp_body_len = c->head_only || content_length == UINT64_MAX ? 0 : content_length;
    if (content_length != UINT64_MAX) {
        p = PUT_LIT(p, "Content-Length: ");
        p += num_format_u64(p, content_length);
        p = PUT_LIT(p, "\r\n");
    }
    if (!c->keep_alive)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (c->b->parser.version_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    return PUT_LIT(p, "\r\n");
}

static void out_put(http_conn *c, const void *s, size_t n)
{
    memcpy(http_conn_out_reserve(c, n), s, n);
    http_conn_out_commit(c, n);
}

static void h1_send_head(http_exchange *x, int status, const bk_str *lines, size_t nlines,
                         uint64_t length, const void *body, size_t body_len)
{
    http_conn *c = http_conn_of(x);
    bk_str framing = BK_STR_NULL;
    if (x->close)
        c->must_close = 1;
    if (length == HTTP_LEN_STREAM) {
        length = HTTP_LEN_NONE;
        c->b->streaming = 1;
        if (x->req.version_minor >= 1) {
            c->b->chunked_out = 1;
            framing = BK_STR("Transfer-Encoding: chunked\r\n");
        } else {
            c->must_close = 1; /* HTTP/1.0: the body ends at close */
        }
    }
    bk_str reason = status == 200 ? BK_STR("OK") : http_status_reason(status);
    if (c->head_only)
        body_len = 0;
    size_t room = BEGIN_ROOM(reason.len) + END_ROOM + framing.len + body_len;
    for (size_t i = 0; i < nlines; i++)
        room += lines[i].len;
    char *start = http_conn_out_reserve(c, room);
    char *p = put_begin(c, start, status, reason);
    for (size_t i = 0; i < nlines; i++)
        if (lines[i].len) /* an empty part may have no pointer (memcpy's NULL rule) */
            p = put(p, lines[i].p, lines[i].len);
    if (framing.len)
        p = put(p, framing.p, framing.len);
    p = put_end_headers(c, p, length);
    if (body_len)
        p = put(p, body, body_len);
    http_conn_out_commit(c, (size_t)(p - start));
}

static void h1_send_body(http_exchange *x, const void *data, size_t n)
{
    http_conn *c = http_conn_of(x);
    if (c->head_only || n == 0)
        return;
    if (c->b->chunked_out) {
        char size[24];
        int k = snprintf(size, sizeof size, "%zx\r\n", n);
        out_put(c, size, (size_t)k);
        out_put(c, data, n);
        out_put(c, "\r\n", 2);
    } else {
        out_put(c, data, n);
    }
    if (c->b->streaming) {
        c->resp_body_len += n;
        if (!c->in_dispatch)
            http_conn_queue_flush(c);
    }
}

static void h1_send_ref(http_exchange *x, const char *p, size_t n, http_release_fn release,
                        void *arg)
{
    http_conn *c = http_conn_of(x);
    if (c->head_only || n <= HTTP_COPY_MAX) {
        if (!c->head_only && n)
            out_put(c, p, n);
        if (release)
            release(arg);
        return;
    }
    http_conn_out_seg(c, (out_seg){ .kind = OUT_MEM, .mem = p, .len = n, .release = release,
                                    .arg = arg });
}

static void h1_send_fd(http_exchange *x, int fd, const bk_fmap *map, uint64_t off,
                       uint64_t len, http_release_fn release, void *arg)
{
    http_conn *c = http_conn_of(x);
    if (c->head_only || len == 0) {
        if (release)
            release(arg);
        return;
    }
    http_conn_out_seg(c, (out_seg){ .kind = OUT_FILE, .fd = fd, .map = map, .off = off,
                                    .len = len, .release = release, .arg = arg });
}

static size_t h1_pending(const http_exchange *x)
{
    return http_conn_of(x)->b->out.len;
}

static int h1_local_addr(const http_exchange *x, struct sockaddr_storage *ss, socklen_t *len)
{
    const http_conn *c = http_conn_of(x);
    return c->io.fd >= 0 && getsockname(c->io.fd, (struct sockaddr *)ss, len) == 0 ? 0 : -1;
}

/* ---- access log: nginx's "combined" format ---- */

/* Copies s escaping '"', '\' and non-printable bytes as \xHH, like nginx. */
static char *put_escaped(char *p, bk_str s, size_t max)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!s.p) {
        *p++ = '-';
        return p;
    }
    size_t n = BK_MIN(s.len, max);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        } else {
            *p++ = (char)ch;
        }
    }
    return p;
}

#define LOG_FIELD_MAX 2048

void http_access_log(http_worker *hw, const struct sockaddr *peer, bk_str line, int status,
                     uint64_t bytes, bk_str ref, bk_str ua)
{
    char *start = logbuf_reserve(&hw->access, 128 + CLOCK_LOG_TIME_LEN + 3 * 4 * LOG_FIELD_MAX);
    if (!start)
        return;
    char *p = start;
    char ip[64];
    p = put(p, ip, net_format_ip(peer, ip, sizeof ip));
    p = PUT_LIT(p, " - - [");
    p = put(p, hw->w.clock.log_time, CLOCK_LOG_TIME_LEN);
    p = PUT_LIT(p, "] \"");
    p = put_escaped(p, line, LOG_FIELD_MAX);
    p += snprintf(p, 32, "\" %d %llu \"", status, (unsigned long long)bytes);
    p = put_escaped(p, ref, LOG_FIELD_MAX);
    p = PUT_LIT(p, "\" \"");
    p = put_escaped(p, ua, LOG_FIELD_MAX);
    p = PUT_LIT(p, "\"\n");
    logbuf_commit(&hw->access, (size_t)(p - start));
}

static void access_log_write(http_conn *c)
{
    const http_parser *ps = &c->b->parser;
    const char *head = c->b->x.req.head;
    bk_str line = ps->line_len && head ? http_parser_slice(head, ps->line_off, ps->line_len) : BK_STR_NULL;
    bk_str ref = head ? http_parser_known(ps, head, HH_REFERER) : BK_STR_NULL;
    bk_str ua = head ? http_parser_known(ps, head, HH_USER_AGENT) : BK_STR_NULL;
    http_access_log(c->hw, &c->peer.sa, line, c->status, c->resp_body_len, ref, ua);
}

static void h1_finish(http_exchange *x, int cut)
{
    http_conn *c = http_conn_of(x);
    if (c->orphan) {
        c->state = CONN_HEAD; /* lets the flush list free it */
        http_conn_queue_flush(c);
        return;
    }
    if (cut)
        c->must_close = 1; /* the body is cut short: only a close tells */
    else if (c->b->chunked_out && !c->head_only)
        out_put(c, "0\r\n\r\n", 5);
    if (c->status >= 100 && c->status < 600)
        c->hw->stats.responses[c->status / 100 - 1]++;
    if (c->hw->access_on)
        access_log_write(c);
    http_h1_finish_request(c);
}

const http_proto_ops http_h1_ops = {
    .send_head = h1_send_head,
    .send_body = h1_send_body,
    .send_ref = h1_send_ref,
    .send_fd = h1_send_fd,
    .finish = h1_finish,
    .pending = h1_pending,
    .local_addr = h1_local_addr,
};
