#include "jsonw.h"

#include <math.h> /* isfinite, signbit: macros, no libm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEP_CAP (256 * 1024) /* a worker keeps at most this much between responses */

void jw_init(jw *w)
{
    memset(w, 0, sizeof *w);
}

void jw_reset(jw *w)
{
    if (w->cap > KEEP_CAP) {
        free(w->buf);
        w->buf = NULL;
        w->cap = 0;
    }
    w->len = 0;
    w->oom = 0;
    w->depth = 0;
    w->after_key = 0;
    w->nonempty = 0;
}

void jw_free(jw *w)
{
    free(w->buf);
    jw_init(w);
}

/* Room for n more bytes, or NULL (w->oom set). */
static char *reserve(jw *w, size_t n)
{
    if (w->oom)
        return NULL;
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap - w->len < n)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->oom = 1;
            return NULL;
        }
        w->buf = b;
        w->cap = cap;
    }
    return w->buf + w->len;
}

static void put(jw *w, const char *p, size_t n)
{
    char *o = reserve(w, n);
    if (o) {
        memcpy(o, p, n);
        w->len += n;
    }
}

static void put_ch(jw *w, char ch)
{
    char *o = reserve(w, 1);
    if (o) {
        *o = ch;
        w->len++;
    }
}

/* Comma before a value or key, when it is not the first member. */
static void before_value(jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth > 0) {
        uint64_t bit = (uint64_t)1 << (w->depth - 1);
        if (w->nonempty & bit)
            put_ch(w, ',');
        w->nonempty |= bit;
    }
}

static void open_container(jw *w, char ch)
{
    before_value(w);
    put_ch(w, ch);
    if (w->depth < JW_MAX_DEPTH) {
        w->depth++;
        w->nonempty &= ~((uint64_t)1 << (w->depth - 1));
    } else {
        w->oom = 1; /* deeper than the writer tracks: a programming error */
    }
}

static void close_container(jw *w, char ch)
{
    put_ch(w, ch);
    if (w->depth > 0)
        w->depth--;
}

void jw_obj_open(jw *w) { open_container(w, '{'); }
void jw_obj_close(jw *w) { close_container(w, '}'); }
void jw_arr_open(jw *w) { open_container(w, '['); }
void jw_arr_close(jw *w) { close_container(w, ']'); }

size_t utf8_valid_prefix(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0)
                lo = 0xA0; /* overlong */
            else if (c == 0xED)
                hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0)
                lo = 0x90; /* overlong */
            else if (c == 0xF4)
                hi = 0x8F; /* above U+10FFFF */
        } else {
            return i;
        }
        if (len - i < n || p[i + 1] < lo || p[i + 1] > hi)
            return i;
        for (size_t k = 2; k < n; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return i;
        i += n;
    }
    return len;
}

size_t utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

size_t jw_escape(char *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    char *o = out;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7f) {
            *o++ = (char)c;
            i++;
            continue;
        }
        if (c >= 0x80) {
            /* One sequence at a time keeps this linear. */
            size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (n <= len - i && utf8_valid_prefix(s + i, n) == n) {
                memcpy(o, s + i, n);
                o += n;
                i += n;
            } else {
                memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD for one bad byte */
                o += 3;
                i++;
            }
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
        i++;
    }
    return (size_t)(o - out);
}

void jw_str(jw *w, const char *p, size_t len)
{
    before_value(w);
    char *o = reserve(w, len * 6 + 2);
    if (!o)
        return;
    o[0] = '"';
    size_t n = jw_escape(o + 1, p, len);
    o[n + 1] = '"';
    w->len += n + 2;
}

void jw_cstr(jw *w, const char *s)
{
    if (s)
        jw_str(w, s, strlen(s));
    else
        jw_null(w);
}

void jw_key(jw *w, const char *key)
{
    jw_str(w, key, strlen(key));
    put_ch(w, ':');
    w->after_key = 1;
}

void jw_int(jw *w, int64_t v)
{
    before_value(w);
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    put(w, tmp, (size_t)n);
}

int64_t jw_round_int(double x)
{
    int64_t t = (int64_t)x; /* toward zero; exact below 2^52 */
    double rest = x - (double)t;
    if (rest >= 0.5)
        t++;
    else if (rest <= -0.5)
        t--;
    return t;
}

double jw_round2(double v)
{
    if (!(v > -1e13 && v < 1e13))
        return v;
    return (double)jw_round_int(v * 100.0) / 100.0;
}

size_t jw_format_double(char *out, double v)
{
    if (!isfinite(v)) {
        memcpy(out, "null", 5);
        return 4;
    }
    /* Fast path: values with at most two decimals (nutrients, grams). The
     * test is exact: r / 100.0 is the double nearest to the decimal r/100,
     * which is what a reader parses back. */
    if (v > -1e13 && v < 1e13) {
        double r = (double)jw_round_int(v * 100.0);
        if (r / 100.0 == v) {
            long long ir = (long long)r;
            unsigned long long a = (unsigned long long)(ir < 0 ? -ir : ir);
            int neg = ir < 0 || (ir == 0 && signbit(v));
            unsigned long long ip = a / 100, frac = a % 100;
            int n;
            if (frac == 0)
                n = sprintf(out, "%s%llu.0", neg ? "-" : "", ip);
            else if (frac % 10 == 0)
                n = sprintf(out, "%s%llu.%llu", neg ? "-" : "", ip, frac / 10);
            else
                n = sprintf(out, "%s%llu.%02llu", neg ? "-" : "", ip, frac);
            return (size_t)n;
        }
    }
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return (size_t)n;
}

void jw_double(jw *w, double v)
{
    before_value(w);
    char tmp[32];
    size_t n = jw_format_double(tmp, v);
    put(w, tmp, n);
}

void jw_bool(jw *w, int v)
{
    before_value(w);
    if (v)
        put(w, "true", 4);
    else
        put(w, "false", 5);
}

void jw_null(jw *w)
{
    before_value(w);
    put(w, "null", 4);
}
