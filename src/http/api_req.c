/* The public API's request: accessors over the exchange, percent-decoding
 * into per-request memory. */
#include "http/api.h"

#include <string.h>

void *brisk_req_alloc(brisk_req *req, size_t size)
{
    return http_exchange_alloc(REQ(req), size);
}

brisk_str brisk_req_method(const brisk_req *req) { return BSTR(REQ(req)->req.method_name); }
brisk_str brisk_req_target(const brisk_req *req) { return BSTR(REQ(req)->req.target); }
brisk_str brisk_req_path(const brisk_req *req) { return BSTR(REQ(req)->req.path); }
brisk_str brisk_req_query(const brisk_req *req) { return BSTR(REQ(req)->req.query); }
brisk_str brisk_req_body(const brisk_req *req) { return BSTR(REQ(req)->req.body); }
int brisk_req_http_minor(const brisk_req *req) { return REQ(req)->req.version_minor; }
int brisk_req_http_major(const brisk_req *req) { return REQ(req)->req.version_major; }

brisk_str brisk_req_header(const brisk_req *req, const char *name)
{
    const http_exchange *x = REQ(req);
    bk_str v = http_parser_header(x->req.parser, x->req.head, (bk_str){ name, strlen(name) });
    return BSTR(v);
}

void brisk_req_headers(const brisk_req *req, int (*fn)(brisk_str, brisk_str, void *), void *arg)
{
    const http_exchange *x = REQ(req);
    const http_parser *p = x->req.parser;
    for (uint32_t i = 0; i < p->nheaders; i++) {
        const http_hdr_off *h = &p->hdr[i];
        if (fn((brisk_str){ x->req.head + h->name_off, h->name_len },
               (brisk_str){ x->req.head + h->val_off, h->val_len }, arg))
            return;
    }
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = ascii_lower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Decodes %XX (and '+' when plus) from s into out (room for s.len + 1);
 * bad escapes are kept as they are. Returns the length; out is NUL-ended. */
static size_t url_decode(bk_str s, char *out, int plus)
{
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        char ch = s.p[i];
        if (ch == '%' && i + 2 < s.len && hexval(s.p[i + 1]) >= 0 && hexval(s.p[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s.p[i + 1]) * 16 + hexval(s.p[i + 2]));
            i += 2;
        } else {
            out[o++] = plus && ch == '+' ? ' ' : ch;
        }
    }
    out[o] = '\0';
    return o;
}

static brisk_str decode_into_arena(brisk_req *req, bk_str raw, int plus)
{
    char *out = brisk_req_alloc(req, raw.len + 1);
    if (!out)
        return (brisk_str){ NULL, 0 };
    size_t n = url_decode(raw, out, plus);
    return (brisk_str){ out, n };
}

brisk_str brisk_req_query_param(brisk_req *req, const char *key, unsigned index)
{
    bk_str q = REQ(req)->req.query;
    size_t klen = strlen(key);
    size_t i = 0;
    while (i < q.len) {
        size_t s = i;
        while (i < q.len && q.p[i] != '&')
            i++;
        bk_str pair = { q.p + s, i - s };
        i++;
        const char *eq = memchr(pair.p, '=', pair.len);
        bk_str k = { pair.p, eq ? (size_t)(eq - pair.p) : pair.len };
        bk_str v = eq ? (bk_str){ eq + 1, pair.len - k.len - 1 } : (bk_str){ pair.p + pair.len, 0 };
        /* Compare the decoded key without allocating: keys are short.
         * Decoding never lengthens, so a shorter key cannot match, and one
         * of the same length without '%' decodes to itself ('+' aside). */
        if (k.len < klen)
            continue;
        if (k.len == klen && !memchr(k.p, '%', k.len)) {
            size_t j = 0;
            while (j < klen && (k.p[j] == '+' ? ' ' : k.p[j]) == key[j])
                j++;
            if (j != klen)
                continue;
        } else {
            char kbuf[256];
            if (k.len >= sizeof kbuf)
                continue;
            if (url_decode(k, kbuf, 1) != klen || memcmp(kbuf, key, klen) != 0)
                continue;
        }
        if (index--)
            continue;
        return decode_into_arena(req, v, 1);
    }
    return (brisk_str){ NULL, 0 };
}

brisk_str brisk_req_param(brisk_req *req, const char *name)
{
    http_exchange *x = REQ(req);
    size_t n = strlen(name);
    for (int i = 0; i < x->nparams; i++)
        if (x->params[i].name_len == n && memcmp(x->params[i].name, name, n) == 0)
            return decode_into_arena(req, x->params[i].raw, 0);
    return (brisk_str){ NULL, 0 };
}

const char *brisk_req_remote_addr(brisk_req *req)
{
    return http_exchange_remote_addr(REQ(req));
}

int brisk_req_remote_port(const brisk_req *req)
{
    return http_exchange_remote_port(REQ(req));
}

