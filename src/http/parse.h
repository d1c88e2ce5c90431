/* A resumable, in-place HTTP/1.1 request-head parser and a chunked body
 * decoder. Nothing is allocated: the parser records offsets into the
 * caller's buffer (relative to the request start, so the caller may move
 * the bytes between calls), and resumes where the last call stopped. */
#ifndef BRISK_HTTP_PARSE_H
#define BRISK_HTTP_PARSE_H

#include "http/http.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_MAX_HEADERS 100
#define HTTP_MAX_HEAD_SIZE 65535 /* offsets are 16-bit */

/* Headers the server acts on, found once while parsing. */
enum http_hdr_id {
    HH_CONTENT_LENGTH,
    HH_TRANSFER_ENCODING,
    HH_CONNECTION,
    HH_HOST,
    HH_EXPECT,
    HH_IF_NONE_MATCH,
    HH_IF_MODIFIED_SINCE,
    HH_RANGE,
    HH_IF_RANGE,
    HH_ACCEPT_ENCODING,
    HH_USER_AGENT,
    HH_REFERER,
    HH__COUNT
};

/* Byte classes of the request head (see parse.c), one lookup per byte. */
enum { HTTP_CH_TOKEN = 1, HTTP_CH_VALUE = 2, HTTP_CH_TARGET = 4, HTTP_CH_REGNAME = 8 };
extern const uint8_t http_char_class[256];

enum http_body_kind { HTTP_BODY_NONE, HTTP_BODY_LENGTH, HTTP_BODY_CHUNKED };

typedef struct {
    uint16_t name_off, name_len, val_off, val_len;
} http_hdr_off;

typedef struct {
    /* progress */
    uint32_t pos;  /* start of the next unparsed line */
    uint32_t scan; /* where the search for LF resumes */
    uint8_t in_headers;

    /* results: valid once http_parse_head() returned > 0 */
    uint8_t method;        /* enum http_method */
    uint8_t version_minor; /* 0 or 1 */
    uint8_t body_kind;     /* enum http_body_kind */
    uint8_t keep_alive;
    uint8_t expect_continue;
    uint16_t line_len;     /* request line without CRLF, from offset line_off */
    uint16_t line_off;
    uint16_t method_len;
    uint16_t target_off, target_len;
    uint16_t nheaders;
    uint8_t known[HH__COUNT]; /* index + 1 into hdr, 0 = absent */
    uint8_t conn_close, conn_keep_alive;
    uint64_t content_length;
    http_hdr_off hdr[HTTP_MAX_HEADERS];
} http_parser;

typedef struct {
    uint32_t max_head_size; /* request line + headers, <= HTTP_MAX_HEAD_SIZE */
    uint32_t max_headers;   /* <= HTTP_MAX_HEADERS */
} http_limits;

void http_parser_reset(http_parser *p);

/* Parses the request head in buf[0, len), where buf is the request start.
 * Returns the head length (> 0) when complete, 0 when more bytes are needed,
 * or a negative HTTP status (-400, -414, -431, -501, -505, -417) for a bad
 * request, after which the connection must be closed. */
int http_parse_head(http_parser *p, const char *buf, size_t len, const http_limits *lim);

/* The same checks for a request whose fields a protocol has decoded
 * itself (HTTP/2): it copies them into one buffer (base, at most
 * HTTP_MAX_HEAD_SIZE bytes: offsets are 16-bit) and passes their offsets.
 * The method and target (checked as in a request line; version 1.1), then
 * each field (name: token characters; value: field characters, trimmed of
 * spaces), then the end: each returns 0 or a negative status, as
 * http_parse_head does (Host, Content-Length, Expect, ... included). */
int http_parser_set_line(http_parser *p, const char *base, uint32_t method_off,
                         uint32_t method_len, uint32_t target_off, uint32_t target_len);
int http_parser_add_field(http_parser *p, const char *base, uint32_t name_off, uint32_t name_len,
                          uint32_t val_off, uint32_t val_len, const http_limits *lim);
/* The same for a field the caller has checked as http_parser_add_field
 * would (name: token characters; value: field characters without spaces
 * at either end): only the count, the place and the meaning (Host's
 * syntax, Content-Length, ...) remain. */
int http_parser_add_checked_field(http_parser *p, const char *base, uint32_t name_off,
                                  uint32_t name_len, uint32_t val_off, uint32_t val_len,
                                  const http_limits *lim);
int http_parser_end_fields(http_parser *p);

static inline bk_str http_parser_slice(const char *base, uint16_t off, uint16_t len)
{
    return (bk_str){ base + off, len };
}

/* The value of a known header, or STR_NULL. */
static inline bk_str http_parser_known(const http_parser *p, const char *base, enum http_hdr_id id)
{
    if (!p->known[id])
        return BK_STR_NULL;
    const http_hdr_off *h = &p->hdr[p->known[id] - 1];
    return (bk_str){ base + h->val_off, h->val_len };
}

/* The first header named name (case-insensitive), or STR_NULL. */
bk_str http_parser_header(const http_parser *p, const char *base, bk_str name);

/* ---- chunked transfer coding ---- */

typedef struct {
    uint8_t state;
    uint8_t digits;
    uint16_t trailer_len;
    uint64_t remaining; /* bytes left in the current chunk */
} http_chunked;

void http_chunked_reset(http_chunked *c);

/* Decodes buf[0, len) in place: the data bytes are moved to the front of
 * buf and their count stored in *out_len. Returns the number of input
 * bytes consumed (>= 0), or -400 on malformed framing. *done is set once the
 * last chunk and the trailer section have been read. */
ssize_t http_chunked_decode(http_chunked *c, char *buf, size_t len, size_t *out_len, int *done);

#endif
