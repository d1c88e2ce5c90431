#include "kv/resp.h"

#include "kv/mem.h"
#include "kv/util.h"

#include <stdio.h>
#include <string.h>

void resp_parser_init(resp_parser *p)
{
    memset(p, 0, sizeof *p);
    p->bulklen = -1;
    p->max_bulk = RESP_MAX_BULK;
    p->max_multibulk = RESP_MAX_MULTIBULK;
}

void resp_parser_free(resp_parser *p)
{
    kv_free(p->args);
    p->args = NULL;
    p->cap = p->nargs = 0;
}

void resp_parser_shrink(resp_parser *p, size_t keep)
{
    if (keep < p->nargs)
        keep = p->nargs;
    if (p->cap <= keep)
        return;
    if (keep == 0) {
        resp_parser_free(p);
        return;
    }
    p->args = kv_realloc(p->args, keep * sizeof *p->args);
    p->cap = keep;
}

void resp_parser_next(resp_parser *p)
{
    p->nargs = 0;
    p->kind = 0;
    p->multibulk = 0;
    p->bulklen = -1;
}

void resp_parser_shift(resp_parser *p, size_t n)
{
    p->pos -= n;
    p->start = p->start >= n ? p->start - n : 0;
    for (size_t i = 0; i < p->nargs; i++)
        p->args[i].off -= n;
}

size_t resp_parser_want(const resp_parser *p, size_t len)
{
    if (p->kind != '*' || p->bulklen < 0)
        return 0;
    size_t end = p->pos + (size_t)p->bulklen + 2;
    return end > len ? end - len : 0;
}

static void push_arg(resp_parser *p, size_t off, size_t len)
{
    if (p->nargs == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        p->args = kv_realloc(p->args, cap * sizeof *p->args);
        p->cap = cap;
    }
    p->args[p->nargs].off = off;
    p->args[p->nargs].len = len;
    p->nargs++;
}

static int fail(resp_parser *p, const char *msg)
{
    snprintf(p->err, sizeof p->err, "Protocol error: %s", msg);
    return RESP_ERROR;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Splits line[0..n) into arguments like a shell would (quotes, escapes),
 * writing unescaped bytes in place. Returns -1 on unbalanced quotes. */
static int split_inline(resp_parser *p, char *buf, size_t start, size_t n)
{
    char *s = buf + start;
    size_t i = 0;
    for (;;) {
        while (i < n && is_space(s[i]))
            i++;
        if (i == n)
            return 0;
        size_t out = i; /* write position, never ahead of i */
        size_t arg_start = i;
        int inq = 0, insq = 0;
        for (;;) {
            if (inq) {
                if (i == n)
                    return -1;
                if (s[i] == '\\' && i + 3 < n + 0 && s[i + 1] == 'x' && hex_val(s[i + 2]) >= 0 &&
                    hex_val(s[i + 3]) >= 0) {
                    s[out++] = (char)(hex_val(s[i + 2]) * 16 + hex_val(s[i + 3]));
                    i += 4;
                } else if (s[i] == '\\' && i + 1 < n) {
                    char c = s[i + 1];
                    switch (c) {
                    case 'n': c = '\n'; break;
                    case 'r': c = '\r'; break;
                    case 't': c = '\t'; break;
                    case 'b': c = '\b'; break;
                    case 'a': c = '\a'; break;
                    default: break;
                    }
                    s[out++] = c;
                    i += 2;
                } else if (s[i] == '"') {
                    if (i + 1 < n && !is_space(s[i + 1]))
                        return -1;
                    i++;
                    break;
                } else {
                    s[out++] = s[i++];
                }
            } else if (insq) {
                if (i == n)
                    return -1;
                if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\'') {
                    s[out++] = '\'';
                    i += 2;
                } else if (s[i] == '\'') {
                    if (i + 1 < n && !is_space(s[i + 1]))
                        return -1;
                    i++;
                    break;
                } else {
                    s[out++] = s[i++];
                }
            } else {
                if (i == n || is_space(s[i]))
                    break;
                if (s[i] == '"') {
                    inq = 1;
                    i++;
                } else if (s[i] == '\'') {
                    insq = 1;
                    i++;
                } else {
                    s[out++] = s[i++];
                }
            }
        }
        push_arg(p, start + arg_start, out - arg_start);
    }
}

static int parse_inline(resp_parser *p, char *buf, size_t len)
{
    char *start = buf + p->pos;
    char *nl = memchr(start, '\n', len - p->pos);
    if (!nl) {
        if (len - p->pos > RESP_INLINE_MAX)
            return fail(p, "too big inline request");
        return RESP_AGAIN;
    }
    size_t n = (size_t)(nl - start);
    if (n > 0 && start[n - 1] == '\r')
        n--;
    size_t line_start = p->pos;
    p->pos = (size_t)(nl - buf) + 1;
    if (split_inline(p, buf, line_start, n) < 0) {
        p->nargs = 0;
        return fail(p, "unbalanced quotes in request");
    }
    return RESP_CMD;
}

/* Finds the "\r\n"-terminated line at p->pos; returns its length (without
 * the terminator) or -1 when incomplete. */
static long long find_line(const char *buf, size_t pos, size_t len)
{
    const char *s = buf + pos;
    const char *cr = memchr(s, '\r', len - pos);
    if (!cr || (size_t)(cr - buf) + 1 >= len)
        return -1;
    return cr - s;
}

/* The usual length line ("*3\r\n", "$64\r\n"): up to 18 digits, no sign,
 * no leading zero, then '\r' with a byte after it, read in one pass instead
 * of memchr + kv_parse_ll. Returns the line length as find_line does, or -1
 * when the line is anything else (incomplete, negative, too long, bad): the
 * general path then decides, with its own errors. */
static inline long long short_line(const char *buf, size_t pos, size_t len, long long *val)
{
    size_t i = pos + 1, end = len - 1; /* the '\r' must have a byte after it */
    if (end > pos + 19)
        end = pos + 19;
    long long v = 0;
    for (; i < end; i++) {
        unsigned d = (unsigned char)buf[i] - '0';
        if (d > 9)
            break;
        v = v * 10 + d;
    }
    if (i >= end || buf[i] != '\r' || i == pos + 1 || (buf[pos + 1] == '0' && i > pos + 2))
        return -1;
    *val = v;
    return (long long)(i - pos);
}

int resp_parse(resp_parser *p, char *buf, size_t len)
{
    for (;;) {
        if (p->pos >= len)
            return RESP_AGAIN;
        if (p->kind == 0) {
            p->kind = buf[p->pos] == '*' ? '*' : 'i';
            p->nargs = 0;
            p->start = p->pos;
        }
        if (p->kind == 'i') {
            int rc = parse_inline(p, buf, len);
            if (rc == RESP_CMD && p->nargs == 0) { /* empty line */
                resp_parser_next(p);
                continue;
            }
            return rc;
        }
        if (p->multibulk == 0) {
            long long count;
            long long n = short_line(buf, p->pos, len, &count);
            if (n < 0) {
                n = find_line(buf, p->pos, len);
                if (n < 0) {
                    if (len - p->pos > RESP_INLINE_MAX)
                        return fail(p, "too big mbulk count string");
                    return RESP_AGAIN;
                }
                if (kv_parse_ll(buf + p->pos + 1, (size_t)n - 1, &count) < 0)
                    return fail(p, "invalid multibulk length");
            }
            if (count > RESP_MAX_MULTIBULK)
                return fail(p, "invalid multibulk length");
            /* lower limits mean the client has not authenticated yet */
            if (count > p->max_multibulk)
                return fail(p, "unauthenticated multibulk length");
            p->pos += (size_t)n + 2;
            if (count <= 0) {
                resp_parser_next(p);
                continue;
            }
            p->multibulk = count;
            p->bulklen = -1;
        }
        while (p->multibulk > 0) {
            if (p->bulklen < 0) {
                if (p->pos >= len)
                    return RESP_AGAIN;
                long long bl;
                long long n = buf[p->pos] == '$' ? short_line(buf, p->pos, len, &bl) : -1;
                if (n < 0) {
                    n = find_line(buf, p->pos, len);
                    if (n < 0) {
                        if (len - p->pos > RESP_INLINE_MAX)
                            return fail(p, "too big bulk count string");
                        return RESP_AGAIN;
                    }
                    if (buf[p->pos] != '$') {
                        snprintf(p->err, sizeof p->err, "Protocol error: expected '$', got '%c'",
                                 buf[p->pos]);
                        return RESP_ERROR;
                    }
                    if (kv_parse_ll(buf + p->pos + 1, (size_t)n - 1, &bl) < 0)
                        bl = -1;
                }
                if (bl < 0 || (uint64_t)bl > p->max_bulk)
                    return fail(p, p->max_multibulk < RESP_MAX_MULTIBULK && bl >= 0 &&
                                           (uint64_t)bl <= RESP_MAX_BULK
                                       ? "unauthenticated bulk length"
                                       : "invalid bulk length");
                p->pos += (size_t)n + 2;
                p->bulklen = bl;
            }
            if (len - p->pos < (size_t)p->bulklen + 2)
                return RESP_AGAIN;
            push_arg(p, p->pos, (size_t)p->bulklen);
            p->pos += (size_t)p->bulklen + 2;
            p->bulklen = -1;
            p->multibulk--;
        }
        return RESP_CMD;
    }
}
