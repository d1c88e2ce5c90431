/* libFuzzer target: http_parse_head (src/http/parse.c).
 *
 * The input is a raw request head (and whatever follows it). It is parsed
 * under three sets of limits, each time
 *   - whole, from a buffer of exactly the input's size (ASan sees any read
 *     past the end),
 *   - split in two at a point derived from the input, the first part in a
 *     buffer of exactly its size and the whole then moved to another buffer
 *     (the parser keeps offsets, so the caller may move the bytes),
 *   - one byte at a time,
 * and every way must give the same answer and the same parser state. A
 * complete head is checked against the invariants the connection code
 * relies on: every offset inside the head, names are tokens, values hold
 * no CR, LF or NUL and no surrounding whitespace, framing is unambiguous. */
#include "http/parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_http_head: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                                   \
            abort();                                                             \
        }                                                                        \
    } while (0)

static const http_limits limits[] = {
    { 8192, HTTP_MAX_HEADERS },            /* the server's defaults */
    { HTTP_MAX_HEAD_SIZE, HTTP_MAX_HEADERS }, /* the largest allowed */
    { 1024, 4 },                           /* the smallest allowed, few headers */
};

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *const known_names[HH__COUNT] = {
    [HH_CONTENT_LENGTH] = "content-length", [HH_TRANSFER_ENCODING] = "transfer-encoding",
    [HH_CONNECTION] = "connection",         [HH_HOST] = "host",
    [HH_EXPECT] = "expect",                 [HH_IF_NONE_MATCH] = "if-none-match",
    [HH_IF_MODIFIED_SINCE] = "if-modified-since", [HH_RANGE] = "range",
    [HH_IF_RANGE] = "if-range",             [HH_ACCEPT_ENCODING] = "accept-encoding",
    [HH_USER_AGENT] = "user-agent",         [HH_REFERER] = "referer",
};

static void check_head(const http_parser *p, const char *buf, size_t len, int rc,
                       const http_limits *lim)
{
    size_t head = (size_t)rc;
    CHECK(head <= len && head <= lim->max_head_size);
    CHECK(buf[head - 1] == '\n');
    /* an unknown method parses (the handler answers it), but it is a token */
    for (uint16_t i = 0; i < p->method_len; i++) {
        unsigned char c = (unsigned char)buf[p->line_off + i];
        CHECK(c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c));
    }
    CHECK(p->version_minor <= 1);
    CHECK((size_t)p->line_off + p->line_len <= head);
    CHECK(p->method_len > 0 && p->method_len < p->line_len);
    CHECK(p->target_len > 0 && (size_t)p->target_off + p->target_len <= head);
    CHECK(p->target_off > p->line_off);
    for (uint16_t i = 0; i < p->target_len; i++) {
        unsigned char c = (unsigned char)buf[p->target_off + i];
        CHECK(c > 0x20 && c != 0x7f && c != '#');
    }
    CHECK(p->nheaders <= lim->max_headers);
    for (uint16_t i = 0; i < p->nheaders; i++) {
        const http_hdr_off *h = &p->hdr[i];
        CHECK(h->name_len > 0 && (size_t)h->name_off + h->name_len <= head);
        CHECK((size_t)h->val_off + h->val_len <= head);
        CHECK(h->val_off >= h->name_off + h->name_len + 1);
        for (uint16_t k = 0; k < h->name_len; k++)
            CHECK(is_tchar((unsigned char)buf[h->name_off + k]));
        CHECK(buf[h->name_off + h->name_len] == ':');
        for (uint16_t k = 0; k < h->val_len; k++) {
            unsigned char c = (unsigned char)buf[h->val_off + k];
            CHECK(c != '\r' && c != '\n' && c != 0 && c != 0x7f);
        }
        if (h->val_len) {
            char a = buf[h->val_off], b = buf[h->val_off + h->val_len - 1];
            CHECK(a != ' ' && a != '\t' && b != ' ' && b != '\t');
        }
    }
    for (int id = 0; id < HH__COUNT; id++) {
        if (!p->known[id])
            continue;
        CHECK(p->known[id] <= p->nheaders);
        const http_hdr_off *h = &p->hdr[p->known[id] - 1];
        bk_str name = { buf + h->name_off, h->name_len };
        CHECK(str_ieq_lit(name, known_names[id], strlen(known_names[id])));
        bk_str v = http_parser_known(p, buf, (enum http_hdr_id)id);
        CHECK(v.p == buf + h->val_off && v.len == h->val_len);
        bk_str first = http_parser_header(p, buf, (bk_str){ known_names[id], strlen(known_names[id]) });
        CHECK(first.p == v.p && first.len == v.len);
    }
    /* framing: exactly one way to find the end of the body */
    switch (p->body_kind) {
    case HTTP_BODY_CHUNKED:
        CHECK(p->known[HH_TRANSFER_ENCODING] && !p->known[HH_CONTENT_LENGTH]);
        CHECK(p->version_minor == 1);
        break;
    case HTTP_BODY_LENGTH:
        CHECK(p->known[HH_CONTENT_LENGTH] && !p->known[HH_TRANSFER_ENCODING]);
        CHECK(p->content_length > 0 && p->content_length <= (uint64_t)1 << 62);
        break;
    case HTTP_BODY_NONE:
        CHECK(!p->known[HH_TRANSFER_ENCODING]);
        CHECK(p->content_length == 0);
        CHECK(!p->expect_continue);
        break;
    default:
        CHECK(0);
    }
    if (p->version_minor == 1)
        CHECK(p->known[HH_HOST]);
}

/* The parts of the parser state that describe the result. */
static void check_same(const http_parser *a, const http_parser *b, int rc)
{
    CHECK(a->method == b->method && a->version_minor == b->version_minor);
    if (rc <= 0)
        return; /* on errors only the status has to agree */
    CHECK(a->body_kind == b->body_kind && a->keep_alive == b->keep_alive);
    CHECK(a->expect_continue == b->expect_continue);
    CHECK(a->line_off == b->line_off && a->line_len == b->line_len);
    CHECK(a->method_len == b->method_len);
    CHECK(a->target_off == b->target_off && a->target_len == b->target_len);
    CHECK(a->nheaders == b->nheaders && a->content_length == b->content_length);
    CHECK(memcmp(a->known, b->known, sizeof a->known) == 0);
    CHECK(memcmp(a->hdr, b->hdr, a->nheaders * sizeof a->hdr[0]) == 0);
}

static int parse_whole(http_parser *p, const uint8_t *data, size_t len, const http_limits *lim)
{
    char *buf = malloc(len ? len : 1);
    memcpy(buf, data, len);
    http_parser_reset(p);
    int rc = http_parse_head(p, buf, len, lim);
    CHECK(rc == 0 || rc > 0 || rc == -400 || rc == -414 || rc == -431 || rc == -501 ||
          rc == -505 || rc == -417);
    if (rc == 0)
        CHECK(len < lim->max_head_size);
    if (rc > 0)
        check_head(p, buf, len, rc, lim);
    free(buf);
    return rc;
}

/* First `cut` bytes in a buffer of that size, then all of it elsewhere. */
static int parse_split(http_parser *p, const uint8_t *data, size_t len, size_t cut,
                       const http_limits *lim)
{
    http_parser_reset(p);
    char *a = malloc(cut ? cut : 1);
    memcpy(a, data, cut);
    int rc = http_parse_head(p, a, cut, lim);
    free(a);
    if (rc != 0)
        return rc;
    char *b = malloc(len ? len : 1);
    memcpy(b, data, len);
    rc = http_parse_head(p, b, len, lim);
    free(b);
    return rc;
}

static int parse_bytewise(http_parser *p, const uint8_t *data, size_t len, const http_limits *lim)
{
    http_parser_reset(p);
    int rc = 0;
    /* Short inputs get an exact-size buffer at every step; longer ones
     * share one (the parser must not look past the length it is given). */
    if (len <= 512) {
        for (size_t n = 1; n <= len && rc == 0; n++) {
            char *b = malloc(n);
            memcpy(b, data, n);
            rc = http_parse_head(p, b, n, lim);
            free(b);
        }
    } else {
        for (size_t n = 1; n <= len && rc == 0; n++)
            rc = http_parse_head(p, (const char *)data, n, lim);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static http_parser whole, split, bytes;
    size_t h = len;
    for (size_t i = 0; i < len && i < 16; i++)
        h = h * 131 + data[i];
    for (size_t l = 0; l < sizeof limits / sizeof limits[0]; l++) {
        const http_limits *lim = &limits[l];
        int rc = parse_whole(&whole, data, len, lim);
        size_t cut = len ? h % (len + 1) : 0;
        int rc2 = parse_split(&split, data, len, cut, lim);
        CHECK(rc2 == rc);
        check_same(&whole, &split, rc);
        /* A request whose end was found may stop parsing early when fed
         * bytewise (at the end of its head): same result either way. */
        int rc3 = parse_bytewise(&bytes, data, len, lim);
        CHECK(rc3 == rc);
        check_same(&whole, &bytes, rc);
    }
    return 0;
}
