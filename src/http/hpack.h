/* HPACK (RFC 7541) encoder for HTTP/2 responses. One per connection: its
 * dynamic table mirrors the client's decoder, so header blocks must reach
 * the client in the order they are encoded.
 *
 * Every field is indexed in the dynamic table (except a few: see
 * hpack.c), so the fields a server repeats on a connection (server, date,
 * a file's type, etag, last-modified, length) cost one byte each from the
 * second response on. Strings are sent as they are (no Huffman coding):
 * they are sent once per connection, and the decoder's work stays small.
 * The client's HPACK decoding is libnghttp2's (h2.c). */
#ifndef BRISK_HTTP_HPACK_H
#define BRISK_HTTP_HPACK_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_HPACK_TABLE_MAX 4096 /* the most of the client's table we use */
#define HTTP_HPACK_ENTRIES_MAX (HTTP_HPACK_TABLE_MAX / 32)
#define HTTP_HPACK_BYTES_CAP (HTTP_HPACK_TABLE_MAX + 1024)
#define HTTP_HPACK_MEMO 128 /* fields found lately, by hash: most lookups are one probe */

/* A header field: name in lower case (HTTP/2 wants it so). key, when not
 * 0, names the field's exact bytes for the caller's whole life (the same
 * key is always the same name and value): a field found by its key is
 * neither hashed nor compared. */
typedef struct {
    const char *name, *value;
    uint32_t name_len, value_len;
    uint64_t key;
} http_hpack_field;

typedef struct {
    uint32_t hash, off; /* off: of name then value in bytes[] */
    uint16_t name_len, value_len;
} http_hpack_entry;

typedef struct {
    uint32_t max;        /* the table's size limit now */
    uint32_t size;       /* of the entries (RFC 7541 4.1: name + value + 32 each) */
    uint32_t update_min; /* the smallest limit since the last block (update_due) */
    uint8_t update_due;  /* the limit changed: the next block says so first */
    uint32_t first, count; /* entries: ent[(first + i) % ENTRIES_MAX], i = 0 the oldest */
    uint32_t inserted;   /* entries ever added (an entry's id: the count after it) */
    uint32_t bytes_len;
    uint32_t memo_hash[HTTP_HPACK_MEMO], memo_id[HTTP_HPACK_MEMO];
    uint64_t key_memo[HTTP_HPACK_MEMO];
    uint32_t key_id[HTTP_HPACK_MEMO];
    http_hpack_entry ent[HTTP_HPACK_ENTRIES_MAX];
    char bytes[HTTP_HPACK_BYTES_CAP]; /* the entries' names and values, oldest first */
} http_hpack_enc;

void http_hpack_enc_init(http_hpack_enc *e);
/* The client's SETTINGS_HEADER_TABLE_SIZE. */
void http_hpack_enc_set_max(http_hpack_enc *e, uint32_t max);
/* The most bytes http_hpack_encode writes for these fields. */
size_t http_hpack_bound(const http_hpack_field *f, size_t n);
/* Encodes one header block into out (http_hpack_bound bytes at least);
 * returns its length. */
size_t http_hpack_encode(http_hpack_enc *e, uint8_t *out, const http_hpack_field *f, size_t n);

#endif
