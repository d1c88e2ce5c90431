/* Writing responses into a connection's output queue, and the access log. */
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

void http_resp_begin(http_conn *c, int status)
{
    str reason = http_status_reason(status);
    char *start = http_conn_out_reserve(c, 64 + reason.len + sizeof SERVER_LINE + CLOCK_HTTP_DATE_LEN);
    char *p = start;
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
    p = PUT_LIT(p, "\r\n");
    http_conn_out_commit(c, (size_t)(p - start));
}

void http_resp_header(http_conn *c, str name, str value)
{
    char *start = http_conn_out_reserve(c, name.len + value.len + 4);
    char *p = put(start, name.p, name.len);
    p = PUT_LIT(p, ": ");
    p = put(p, value.p, value.len);
    p = PUT_LIT(p, "\r\n");
    http_conn_out_commit(c, (size_t)(p - start));
}

void http_resp_raw(http_conn *c, const char *s, size_t n)
{
    memcpy(http_conn_out_reserve(c, n), s, n);
    http_conn_out_commit(c, n);
}

void http_resp_end_headers(http_conn *c, uint64_t content_length)
{
    http_worker *hw = c->hw;
    c->keep_alive = c->x->parser.keep_alive && !c->must_close && !hw->stopping &&
                    c->requests < c->conf->keepalive_requests;
    c->resp_body_len = c->head_only || content_length == UINT64_MAX ? 0 : content_length;
    char *start = http_conn_out_reserve(c, 64);
    char *p = start;
    if (content_length != UINT64_MAX) {
        p = PUT_LIT(p, "Content-Length: ");
        p += num_format_u64(p, content_length);
        p = PUT_LIT(p, "\r\n");
    }
    if (!c->keep_alive)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (c->x->parser.version_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    http_conn_out_commit(c, (size_t)(p - start));
}

void http_resp_body(http_conn *c, const void *data, size_t n)
{
    if (c->head_only || n == 0)
        return;
    memcpy(http_conn_out_reserve(c, n), data, n);
    http_conn_out_commit(c, n);
}

void http_resp_body_ref(http_conn *c, const char *p, size_t n, out_release_fn release, void *arg)
{
    if (c->head_only || n <= 1024) { /* small: cheaper to copy than to add an iovec */
        http_resp_body(c, p, n);
        if (release)
            release(arg);
        return;
    }
    http_conn_out_seg(c, (out_seg){ .kind = OUT_MEM, .mem = p, .len = n, .release = release,
                                    .arg = arg });
}

void http_resp_body_fd(http_conn *c, int fd, uint64_t off, uint64_t len, out_release_fn release,
                       void *arg)
{
    if (c->head_only || len == 0) {
        if (release)
            release(arg);
        return;
    }
    http_conn_out_seg(c, (out_seg){ .kind = OUT_FILE, .fd = fd, .off = off, .len = len,
                                    .release = release, .arg = arg });
}

void http_resp_error(http_conn *c, int status, const char *extra)
{
    if (c->hw->error_page && !c->in_error_page) {
        c->in_error_page = 1;
        if (extra) /* header lines the status needs: give them to the renderer */
            http_api_extra_headers(c, extra);
        c->hw->error_page(c, status, c->hw->error_udata);
        c->in_error_page = 0;
        return;
    }
    char body[256];
    str reason = http_status_reason(status);
    int n = snprintf(body, sizeof body,
                     "<html>\r\n<head><title>%d %.*s</title></head>\r\n<body>\r\n"
                     "<center><h1>%d %.*s</h1></center>\r\n<hr><center>brisk</center>\r\n"
                     "</body>\r\n</html>\r\n",
                     status, (int)reason.len, reason.p, status, (int)reason.len, reason.p);
    http_resp_begin(c, status);
    static const char ct[] = "Content-Type: text/html; charset=utf-8\r\n";
    http_resp_raw(c, ct, sizeof ct - 1);
    if (extra)
        http_resp_raw(c, extra, strlen(extra));
    http_resp_end_headers(c, (uint64_t)n);
    http_resp_body(c, body, (size_t)n);
    http_resp_finish(c);
}

/* ---- access log: nginx's "combined" format ---- */

/* Copies s escaping '"', '\' and non-printable bytes as \xHH, like nginx. */
static char *put_escaped(char *p, str s, size_t max)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!s.p) {
        *p++ = '-';
        return p;
    }
    size_t n = MIN(s.len, max);
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

static void access_log_write(http_conn *c)
{
    http_worker *hw = c->hw;
    const http_parser *ps = &c->x->parser;
    const char *head = c->x->req.head;
    str line = ps->line_len && head ? http_parser_slice(head, ps->line_off, ps->line_len) : STR_NULL;
    str ref = head ? http_parser_known(ps, head, HH_REFERER) : STR_NULL;
    str ua = head ? http_parser_known(ps, head, HH_USER_AGENT) : STR_NULL;

    char *start = logbuf_reserve(&hw->access, 128 + CLOCK_LOG_TIME_LEN + 3 * 4 * LOG_FIELD_MAX);
    if (!start)
        return;
    char *p = start;
    char ip[64];
    p = put(p, ip, net_format_ip((const struct sockaddr *)&c->peer, ip, sizeof ip));
    p = PUT_LIT(p, " - - [");
    p = put(p, hw->w.clock.log_time, CLOCK_LOG_TIME_LEN);
    p = PUT_LIT(p, "] \"");
    p = put_escaped(p, line, LOG_FIELD_MAX);
    p += snprintf(p, 32, "\" %d %llu \"", c->status, (unsigned long long)c->resp_body_len);
    p = put_escaped(p, ref, LOG_FIELD_MAX);
    p = PUT_LIT(p, "\" \"");
    p = put_escaped(p, ua, LOG_FIELD_MAX);
    p = PUT_LIT(p, "\"\n");
    logbuf_commit(&hw->access, (size_t)(p - start));
}

void http_resp_finish(http_conn *c)
{
    if (c->status >= 100 && c->status < 600)
        c->hw->stats.responses[c->status / 100 - 1]++;
    if (c->hw->access_on)
        access_log_write(c);
    http_conn_finish_request(c);
}
