#include "http/parse.h"

#include <string.h>

/* Character classes of the request head, one table lookup per byte:
 *   TOKEN      RFC 9110 tchar: method and field names
 *   VALUE      field values: HTAB, SP, VCHAR, obs-text (no NUL, CR, LF,
 *              other controls, DEL)
 *   TARGET     request targets: visible ASCII and obs-text; no controls, no
 *              spaces, and no '#': a fragment is never sent (RFC 9112 3.2),
 *              so one on the wire is an error, not part of a file name
 *   REGNAME    reg-name and IPv4address characters of a uri-host:
 *              unreserved, pct-encoded ('%' and hex digits) and sub-delims
 *              (RFC 3986 3.2.2): the token characters less "#^`|", plus
 *              "(),;="
 * The numbers are those definitions evaluated for every byte;
 * tests/unit/test_parse.c checks each entry against them. */
const uint8_t http_char_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 15, 6, 3, 15, 15, 15, 15, 14, 14, 15, 15, 14, 15, 15, 6,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 6, 14, 6, 14, 6, 6,
    6, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 6, 6, 6, 7, 15,
    7, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 6, 7, 6, 15, 0,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
};

#define IS(cls, ch) (http_char_class[(unsigned char)(ch)] & HTTP_CH_##cls)

/* Checks shared by the HTTP/1.1 parser and the decoded-field entry points
 * (HTTP/2): inlined in both, as when the parser was their only caller (out
 * of line, an HTTP/1.1 request cost ~30 instructions more). */
#define SHARED static inline __attribute__((always_inline))

/* Host = uri-host [ ":" port ] (RFC 9112 3.2, RFC 3986 3.2.2): an IP
 * literal in brackets (hex digits, ':' and '.'; "v" for IPvFuture) or a
 * reg-name, then at most one ':' followed by digits only. "t:80:80",
 * "t:abc" and "[::1" are refused. */
SHARED int host_valid(const char *v, uint32_t len)
{
    uint32_t i = 0;
    if (len && v[0] == '[') {
        for (i = 1; i < len && v[i] != ']'; i++) {
            unsigned char ch = (unsigned char)v[i];
            if (!(ch == ':' || ch == '.' || (ch >= '0' && ch <= '9') ||
                  ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') || (ch | 0x20) == 'v' ||
                  IS(REGNAME, ch)))
                return 0;
        }
        if (i == len || i == 1)
            return 0; /* no closing bracket, or "[]" */
        i++;
    } else {
        while (i < len && IS(REGNAME, v[i]))
            i++;
    }
    if (i == len)
        return 1;
    if (v[i++] != ':')
        return 0;
    for (; i < len; i++)
        if (v[i] < '0' || v[i] > '9')
            return 0;
    return 1;
}

static const struct {
    const char *name;
    uint8_t len;
    uint8_t id;
} methods[] = {
#define X(id, s) { s, sizeof(s) - 1, HTTP_##id },
    HTTP_METHODS(X)
#undef X
};

/* The headers the server acts on, by name length (at most two share one):
 * a field's name is compared with these only. */
#define KNOWN_NAME_MAX 17
static const struct {
    const char *lower;
    uint8_t id;
} known_by_len[KNOWN_NAME_MAX + 1][2] = {
    [4] = { { "host", HH_HOST } },
    [5] = { { "range", HH_RANGE } },
    [6] = { { "expect", HH_EXPECT } },
    [7] = { { "referer", HH_REFERER } },
    [8] = { { "if-range", HH_IF_RANGE } },
    [10] = { { "connection", HH_CONNECTION }, { "user-agent", HH_USER_AGENT } },
    [13] = { { "if-none-match", HH_IF_NONE_MATCH } },
    [14] = { { "content-length", HH_CONTENT_LENGTH } },
    [15] = { { "accept-encoding", HH_ACCEPT_ENCODING } },
    [17] = { { "transfer-encoding", HH_TRANSFER_ENCODING },
             { "if-modified-since", HH_IF_MODIFIED_SINCE } },
};

bk_str http_status_reason(int status)
{
    switch (status) {
#define X(code, s) case code: return BK_STR(s);
        HTTP_STATUSES(X)
#undef X
    }
    return BK_STR("Unknown");
}

bk_str http_method_name(enum http_method m)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(methods); i++)
        if (methods[i].id == m)
            return (bk_str){ methods[i].name, methods[i].len };
    return BK_STR("UNKNOWN");
}

void http_parser_reset(http_parser *p)
{
    /* Only the fixed part; hdr[] entries are written before they are read. */
    memset(p, 0, offsetof(http_parser, hdr));
}

SHARED uint8_t method_id(const char *m, uint32_t len)
{
    if (len == 3 && memcmp(m, "GET", 3) == 0) /* nearly every request */
        return HTTP_GET;
    for (size_t i = 0; i < BK_ARRAY_LEN(methods); i++)
        if (methods[i].len == len && memcmp(methods[i].name, m, len) == 0)
            return methods[i].id;
    return HTTP_METHOD_UNKNOWN;
}

/* The request target's form, once its characters are checked: origin-form,
 * "*" for OPTIONS, or absolute-form. An unknown method (a token) parses:
 * the handler decides (brisk's files answer 501, an application's router
 * 405 with Allow). */
SHARED int target_form_ok(const http_parser *p, const char *t, uint32_t len)
{
    return t[0] == '/' || (p->method == HTTP_OPTIONS && len == 1 && t[0] == '*') ||
           (len > 7 && (memcmp(t, "http://", 7) == 0 || memcmp(t, "https://", 8) == 0));
}

static int parse_request_line(http_parser *p, const char *line, uint32_t off, uint32_t len)
{
    uint32_t i = 0;
    while (i < len && IS(TOKEN, line[i]))
        i++;
    if (i == 0 || i == len || line[i] != ' ')
        return -400;
    p->method_len = (uint16_t)i;
    p->method = method_id(line, i);

    uint32_t t = ++i;
    while (i < len && IS(TARGET, line[i]))
        i++;
    if (i == t || i == len || line[i] != ' ')
        return -400;
    p->target_off = (uint16_t)(off + t);
    p->target_len = (uint16_t)(i - t);
    i++;

    /* HTTP-version = "HTTP/" DIGIT "." DIGIT */
    if (len - i != 8 || memcmp(line + i, "HTTP/", 5) != 0 || line[i + 6] != '.')
        return -400;
    char major = line[i + 5], minor = line[i + 7];
    if (major < '0' || major > '9' || minor < '0' || minor > '9')
        return -400;
    if (major != '1')
        return -505;
    p->version_minor = minor == '0' ? 0 : 1;

    if (!target_form_ok(p, line + t, p->target_len))
        return -400;
    p->line_off = (uint16_t)off;
    p->line_len = (uint16_t)len;
    return 0;
}

static inline int trim_ows(const char *v, uint32_t *start, uint32_t *end)
{
    while (*start < *end && (v[*start] == ' ' || v[*start] == '\t'))
        (*start)++;
    while (*end > *start && (v[*end - 1] == ' ' || v[*end - 1] == '\t'))
        (*end)--;
    return 0;
}

/* Connection: a comma-separated token list. */
static void parse_connection(http_parser *p, const char *v, uint32_t len)
{
    uint32_t i = 0;
    while (i < len) {
        uint32_t s = i;
        while (i < len && v[i] != ',')
            i++;
        uint32_t e = i;
        trim_ows(v, &s, &e);
        bk_str tok = { v + s, e - s };
        if (BK_STR_IEQ(tok, "close"))
            p->conn_close = 1;
        else if (BK_STR_IEQ(tok, "keep-alive"))
            p->conn_keep_alive = 1;
        i++;
    }
}

/* Applies the meaning of a header that affects framing or connection
 * handling; returns 0 or a negative status. */
SHARED int on_known_header(http_parser *p, int id, const char *v, uint32_t len)
{
    bk_str val = { v, len };
    switch (id) {
    case HH_CONTENT_LENGTH:
        if (p->known[id]) /* duplicates, even equal ones, are refused */
            return -400;
        if (num_parse_u64(v, len, (uint64_t)1 << 62, &p->content_length) < 0)
            return -400;
        break;
    case HH_TRANSFER_ENCODING:
        if (p->known[id])
            return -400; /* stacked codings across lines */
        if (BK_STR_IEQ(val, "chunked"))
            break;
        if (memchr(v, ',', len))
            return -400; /* stacked codings: only "chunked" alone is accepted */
        return len ? -501 : -400;
    case HH_HOST:
        if (p->known[id])
            return -400;
        if (!host_valid(v, len))
            return -400;
        break;
    case HH_CONNECTION:
        parse_connection(p, v, len);
        break;
    case HH_EXPECT:
        if (BK_STR_IEQ(val, "100-continue"))
            p->expect_continue = 1;
        else
            return -417;
        break;
    }
    return 0;
}

/* A field value's characters (HTAB, SP, VCHAR, obs-text); 0 when bad. */
SHARED int value_ok(const char *v, uint32_t len)
{
    uint32_t i = 0;
    for (uint64_t w; i + 8 <= len; i += 8) { /* clean words first, then byte by byte */
        memcpy(&w, v + i, 8);
        if (bytes8_has_below(w, 0x20) | bytes8_has(w, 0x7f))
            break;
    }
    for (; i < len; i++)
        if (!IS(VALUE, v[i]))
            return 0;
    return 1;
}

/* Records a checked field (offsets from base, value trimmed) and applies
 * the meaning of a known one. */
SHARED int add_field(http_parser *p, const char *base, uint32_t name_off, uint32_t name_len,
                     uint32_t val_off, uint32_t val_len, const http_limits *lim)
{
    if (p->nheaders >= lim->max_headers)
        return -431;
    http_hdr_off *h = &p->hdr[p->nheaders];
    h->name_off = (uint16_t)name_off;
    h->name_len = (uint16_t)name_len;
    h->val_off = (uint16_t)val_off;
    h->val_len = (uint16_t)val_len;
    p->nheaders++;

    if (name_len > KNOWN_NAME_MAX)
        return 0;
    bk_str name = { base + name_off, name_len };
    for (size_t k = 0; k < 2 && known_by_len[name_len][k].lower; k++) {
        if (!str_ieq_lit(name, known_by_len[name_len][k].lower, name_len))
            continue;
        int id = known_by_len[name_len][k].id;
        int rc = on_known_header(p, id, base + val_off, val_len);
        if (rc < 0)
            return rc;
        if (!p->known[id])
            p->known[id] = (uint8_t)p->nheaders;
        break;
    }
    return 0;
}

static int parse_header_line(http_parser *p, const char *line, uint32_t off, uint32_t len,
                             const http_limits *lim)
{
    if (line[0] == ' ' || line[0] == '\t')
        return -400; /* obs-fold */
    uint32_t i = 0;
    while (i < len && IS(TOKEN, line[i]))
        i++;
    if (i == 0 || i == len || line[i] != ':')
        return -400; /* empty name, no colon, or whitespace before it */
    uint32_t name_len = i;
    uint32_t vs = i + 1, ve = len;
    if (!value_ok(line + vs, ve - vs))
        return -400;
    trim_ows(line, &vs, &ve);
    return add_field(p, line - off, off, name_len, off + vs, ve - vs, lim);
}

static int finish_head(http_parser *p)
{
    if (p->version_minor == 1 && !p->known[HH_HOST])
        return -400;
    if (p->known[HH_TRANSFER_ENCODING]) {
        if (p->known[HH_CONTENT_LENGTH] || p->version_minor == 0)
            return -400;
        p->body_kind = HTTP_BODY_CHUNKED;
    } else if (p->known[HH_CONTENT_LENGTH] && p->content_length > 0) {
        p->body_kind = HTTP_BODY_LENGTH;
    } else {
        p->body_kind = HTTP_BODY_NONE;
    }
    if (p->version_minor == 1)
        p->keep_alive = !p->conn_close;
    else
        p->keep_alive = p->conn_keep_alive && !p->conn_close;
    if (p->body_kind == HTTP_BODY_NONE)
        p->expect_continue = 0;
    return 0;
}

int http_parse_head(http_parser *p, const char *buf, size_t len, const http_limits *lim)
{
    size_t limit = BK_MIN(len, (size_t)lim->max_head_size);
    for (;;) {
        const char *nl = p->scan < limit ? memchr(buf + p->scan, '\n', limit - p->scan) : NULL;
        if (!nl) {
            p->scan = (uint32_t)limit;
            if (len >= lim->max_head_size)
                return p->in_headers ? -431 : -414;
            return 0;
        }
        uint32_t end = (uint32_t)(nl - buf); /* index of LF */
        uint32_t start = p->pos;
        uint32_t line_end = end;
        if (line_end > start && buf[line_end - 1] == '\r')
            line_end--;
        uint32_t line_len = line_end - start;
        p->pos = p->scan = end + 1;

        int rc;
        if (!p->in_headers) {
            if (line_len == 0 && start < 4)
                continue; /* tolerate one leading empty line (RFC 9112 2.2) */
            rc = parse_request_line(p, buf + start, start, line_len);
            if (rc < 0)
                return rc;
            p->in_headers = 1;
            continue;
        }
        if (line_len == 0) {
            rc = finish_head(p);
            return rc < 0 ? rc : (int)p->pos;
        }
        rc = parse_header_line(p, buf + start, start, line_len, lim);
        if (rc < 0)
            return rc;
    }
}

/* ---- requests whose fields come decoded (HTTP/2) ---- */

int http_parser_set_line(http_parser *p, const char *base, uint32_t method_off,
                         uint32_t method_len, uint32_t target_off, uint32_t target_len)
{
    const char *m = base + method_off, *t = base + target_off;
    if (!method_len || !target_len)
        return -400;
    for (uint32_t i = 0; i < method_len; i++)
        if (!IS(TOKEN, m[i]))
            return -400;
    for (uint32_t i = 0; i < target_len; i++)
        if (!IS(TARGET, t[i]))
            return -400;
    p->method = method_id(m, method_len);
    p->method_len = (uint16_t)method_len;
    p->line_off = (uint16_t)method_off;
    p->line_len = 0; /* no request line */
    p->target_off = (uint16_t)target_off;
    p->target_len = (uint16_t)target_len;
    p->version_minor = 1;
    return target_form_ok(p, t, target_len) ? 0 : -400;
}

int http_parser_add_field(http_parser *p, const char *base, uint32_t name_off, uint32_t name_len,
                          uint32_t val_off, uint32_t val_len, const http_limits *lim)
{
    const char *n = base + name_off;
    if (!name_len)
        return -400;
    for (uint32_t i = 0; i < name_len; i++)
        if (!IS(TOKEN, n[i]))
            return -400;
    if (!value_ok(base + val_off, val_len))
        return -400;
    uint32_t vs = val_off, ve = val_off + val_len;
    trim_ows(base, &vs, &ve);
    return add_field(p, base, name_off, name_len, vs, ve - vs, lim);
}

int http_parser_add_checked_field(http_parser *p, const char *base, uint32_t name_off,
                                  uint32_t name_len, uint32_t val_off, uint32_t val_len,
                                  const http_limits *lim)
{
    return add_field(p, base, name_off, name_len, val_off, val_len, lim);
}

int http_parser_end_fields(http_parser *p)
{
    p->in_headers = 1;
    return finish_head(p);
}

bk_str http_parser_header(const http_parser *p, const char *base, bk_str name)
{
    for (uint32_t i = 0; i < p->nheaders; i++) {
        const http_hdr_off *h = &p->hdr[i];
        if (h->name_len != name.len)
            continue;
        uint32_t k = 0;
        while (k < name.len && ascii_lower(base[h->name_off + k]) == ascii_lower(name.p[k]))
            k++;
        if (k == name.len)
            return (bk_str){ base + h->val_off, h->val_len };
    }
    return BK_STR_NULL;
}

/* ---- chunked ---- */

enum {
    CH_SIZE,       /* hex digits */
    CH_SIZE_WS,    /* whitespace after the size: only ';' may follow */
    CH_EXT,        /* after ';' until CR */
    CH_SIZE_LF,    /* CR seen after the size line */
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER,    /* at the start of a trailer line */
    CH_TRAILER_NAME,
    CH_TRAILER_LINE, /* the value */
    CH_TRAILER_LF, /* CR seen in the trailer */
    CH_DONE,
};

#define CHUNK_MAX_DIGITS 15  /* < 2^60: no overflow, far above any limit */
#define CHUNK_MAX_TRAILER 8192

void http_chunked_reset(http_chunked *c)
{
    memset(c, 0, sizeof *c);
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch |= 0x20;
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

ssize_t http_chunked_decode(http_chunked *c, char *buf, size_t len, size_t *out_len, int *done)
{
    size_t i = 0, out = 0;
    *done = 0;
    while (i < len) {
        unsigned char ch = (unsigned char)buf[i];
        switch (c->state) {
        case CH_SIZE: {
            int h = hexval(ch);
            if (h >= 0) {
                if (++c->digits > CHUNK_MAX_DIGITS)
                    return -400;
                c->remaining = c->remaining * 16 + (uint64_t)h;
                i++;
                break;
            }
            if (c->digits == 0)
                return -400; /* no digits: "-1", "x10", "" */
            if (ch == ';') {
                c->state = CH_EXT;
            } else if (ch == '\r') {
                c->state = CH_SIZE_LF;
            } else if (ch == ' ' || ch == '\t') {
                c->state = CH_SIZE_WS; /* BWS before ';' (RFC 9112 7.1.1) */
            } else {
                return -400; /* "1_0", "0x10" */
            }
            i++;
            break;
        }
        case CH_SIZE_WS:
            if (ch == ';')
                c->state = CH_EXT;
            else if (ch != ' ' && ch != '\t')
                return -400; /* "5 x": junk after the size */
            i++;
            break;
        case CH_EXT:
            if (ch == '\r')
                c->state = CH_SIZE_LF;
            else if (!IS(VALUE, ch))
                return -400;
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n')
                return -400;
            i++;
            c->digits = 0;
            c->state = c->remaining ? CH_DATA : CH_TRAILER;
            break;
        case CH_DATA: {
            size_t n = BK_MIN((uint64_t)(len - i), c->remaining);
            if (out != i)
                memmove(buf + out, buf + i, n);
            out += n;
            i += n;
            c->remaining -= n;
            if (!c->remaining)
                c->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (ch != '\r')
                return -400;
            c->state = CH_DATA_LF;
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n')
                return -400;
            c->state = CH_SIZE;
            i++;
            break;
        case CH_TRAILER:
            if (ch == '\r') {
                c->state = CH_TRAILER_LF;
                c->remaining = 1; /* marks the final CRLF */
                i++;
                break;
            }
            if (!IS(TOKEN, ch))
                return -400; /* obs-fold or junk */
            c->state = CH_TRAILER_NAME;
            break;
        case CH_TRAILER_NAME: /* a field line, as in the head: token ':' value */
            if (++c->trailer_len > CHUNK_MAX_TRAILER)
                return -400;
            if (ch == ':')
                c->state = CH_TRAILER_LINE;
            else if (!IS(TOKEN, ch))
                return -400;
            i++;
            break;
        case CH_TRAILER_LINE:
            if (++c->trailer_len > CHUNK_MAX_TRAILER)
                return -400;
            if (ch == '\r') {
                c->state = CH_TRAILER_LF;
                c->remaining = 0;
            } else if (!IS(VALUE, ch)) {
                return -400;
            }
            i++;
            break;
        case CH_TRAILER_LF:
            if (ch != '\n')
                return -400;
            i++;
            if (c->remaining) {
                c->state = CH_DONE;
                *done = 1;
                *out_len = out;
                return (ssize_t)i;
            }
            c->state = CH_TRAILER;
            break;
        case CH_DONE:
            *done = 1;
            *out_len = out;
            return (ssize_t)i;
        }
    }
    *out_len = out;
    *done = c->state == CH_DONE;
    return (ssize_t)i;
}
