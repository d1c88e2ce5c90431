/* HPACK encoder; see hpack.h. */
#include "http/hpack.h"

#include <stddef.h>
#include <string.h>

#define ENT_MASK (HTTP_HPACK_ENTRIES_MAX - 1)
#define STATIC_COUNT 61
_Static_assert((HTTP_HPACK_ENTRIES_MAX & ENT_MASK) == 0, "a power of two");

/* The static table's names (RFC 7541 Appendix A), index 1 first. */
static const struct {
    const char *name;
    uint8_t len;
} static_names[STATIC_COUNT] = {
#define N(s) { s, sizeof s - 1 }
    N(":authority"), N(":method"), N(":method"), N(":path"), N(":path"), N(":scheme"),
    N(":scheme"), N(":status"), N(":status"), N(":status"), N(":status"), N(":status"),
    N(":status"), N(":status"), N("accept-charset"), N("accept-encoding"), N("accept-language"),
    N("accept-ranges"), N("accept"), N("access-control-allow-origin"), N("age"), N("allow"),
    N("authorization"), N("cache-control"), N("content-disposition"), N("content-encoding"),
    N("content-language"), N("content-length"), N("content-location"), N("content-range"),
    N("content-type"), N("cookie"), N("date"), N("etag"), N("expect"), N("expires"), N("from"),
    N("host"), N("if-match"), N("if-modified-since"), N("if-none-match"), N("if-range"),
    N("if-unmodified-since"), N("last-modified"), N("link"), N("location"), N("max-forwards"),
    N("proxy-authenticate"), N("proxy-authorization"), N("range"), N("referer"), N("refresh"),
    N("retry-after"), N("server"), N("set-cookie"), N("strict-transport-security"),
    N("transfer-encoding"), N("user-agent"), N("vary"), N("via"), N("www-authenticate"),
#undef N
};

/* The static table's :status entries (indices 8-14). */
static const char static_status[][4] = { "200", "204", "206", "304", "400", "404", "500" };

static uint32_t static_name_index(const char *n, size_t len)
{
    for (uint32_t i = 0; i < STATIC_COUNT; i++)
        if (static_names[i].len == len && memcmp(static_names[i].name, n, len) == 0)
            return i + 1;
    return 0;
}

static inline uint64_t hash_mix(uint64_t h, const char *p, size_t n)
{
    uint64_t w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    if (n) {
        w = 0;
        for (size_t i = 0; i < n; i++)
            w = w << 8 | (unsigned char)p[i];
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h;
}

static uint32_t field_hash(const http_hpack_field *f)
{
    uint64_t h = ((uint64_t)f->name_len << 32 | f->value_len) * 0xff51afd7ed558ccdull;
    h = hash_mix(hash_mix(h, f->name, f->name_len), f->value, f->value_len);
    return (uint32_t)(h ^ h >> 32);
}

static inline uint32_t entry_size(const http_hpack_entry *x)
{
    return (uint32_t)x->name_len + x->value_len + 32;
}

static void evict_oldest(http_hpack_enc *e)
{
    e->size -= entry_size(&e->ent[e->first]);
    e->first = (e->first + 1) & ENT_MASK;
    if (--e->count == 0)
        e->bytes_len = 0;
}

void http_hpack_enc_init(http_hpack_enc *e)
{
    memset(e, 0, offsetof(http_hpack_enc, ent));
    e->max = HTTP_HPACK_TABLE_MAX; /* (the decoder's default: no update to say) */
}

void http_hpack_enc_set_max(http_hpack_enc *e, uint32_t max)
{
    if (max > HTTP_HPACK_TABLE_MAX)
        max = HTTP_HPACK_TABLE_MAX; /* (a larger table is the decoder's to allow, ours to use) */
    if (max == e->max)
        return;
    e->max = max;
    while (e->size > max)
        evict_oldest(e);
    /* RFC 7541 4.2: the smallest limit since the last block, then the last */
    e->update_min = e->update_due && e->update_min < max ? e->update_min : max;
    e->update_due = 1;
}

static inline int entry_equal(const http_hpack_enc *e, const http_hpack_entry *x,
                               const http_hpack_field *f, uint32_t hash)
{
    return x->hash == hash && x->name_len == f->name_len && x->value_len == f->value_len &&
           memcmp(e->bytes + x->off, f->name, f->name_len) == 0 &&
           memcmp(e->bytes + x->off + f->name_len, f->value, f->value_len) == 0;
}

/* A dynamic table entry equal to f: its index (62 the newest), or 0. The
 * memo (by hash) remembers where each field was found or added. */
static uint32_t dynamic_find(http_hpack_enc *e, const http_hpack_field *f, uint32_t hash)
{
    uint32_t slot = hash & (HTTP_HPACK_MEMO - 1);
    if (e->memo_hash[slot] == hash) {
        uint32_t age = e->inserted - e->memo_id[slot] + 1; /* 1: the newest */
        if (age >= 1 && age <= e->count &&
            entry_equal(e, &e->ent[(e->first + e->count - age) & ENT_MASK], f, hash))
            return STATIC_COUNT + age;
    }
    for (uint32_t i = e->count; i-- > 0;) {
        if (entry_equal(e, &e->ent[(e->first + i) & ENT_MASK], f, hash)) {
            uint32_t age = e->count - i;
            e->memo_hash[slot] = hash;
            e->memo_id[slot] = e->inserted + 1 - age;
            return STATIC_COUNT + age;
        }
    }
    return 0;
}

/* Adds f as the newest entry (its size fits the limit: the caller checks). */
static void dynamic_add(http_hpack_enc *e, const http_hpack_field *f, uint32_t hash)
{
    uint32_t size = f->name_len + f->value_len + 32;
    while (e->size + size > e->max)
        evict_oldest(e);
    size_t len = (size_t)f->name_len + f->value_len;
    if (e->bytes_len + len > HTTP_HPACK_BYTES_CAP) { /* the live bytes to the front */
        uint32_t start = e->ent[e->first].off; /* (count > 0: the bytes are not all free) */
        memmove(e->bytes, e->bytes + start, e->bytes_len - start);
        for (uint32_t i = 0; i < e->count; i++)
            e->ent[(e->first + i) & ENT_MASK].off -= start;
        e->bytes_len -= start;
    }
    http_hpack_entry *x = &e->ent[(e->first + e->count) & ENT_MASK];
    x->hash = hash;
    x->off = e->bytes_len;
    x->name_len = (uint16_t)f->name_len;
    x->value_len = (uint16_t)f->value_len;
    memcpy(e->bytes + e->bytes_len, f->name, f->name_len);
    memcpy(e->bytes + e->bytes_len + f->name_len, f->value, f->value_len);
    e->bytes_len += (uint32_t)len;
    e->size += size;
    e->count++;
    e->inserted++;
    e->memo_hash[hash & (HTTP_HPACK_MEMO - 1)] = hash;
    e->memo_id[hash & (HTTP_HPACK_MEMO - 1)] = e->inserted;
}

/* An integer with an N-bit prefix (RFC 7541 5.1). */
static uint8_t *put_int(uint8_t *p, uint8_t first, unsigned bits, uint32_t v)
{
    uint32_t lim = (1u << bits) - 1;
    if (v < lim) {
        *p++ = (uint8_t)(first | v);
        return p;
    }
    *p++ = (uint8_t)(first | lim);
    for (v -= lim; v >= 128; v >>= 7)
        *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

/* A string literal, not Huffman-coded (5.2). */
static uint8_t *put_str(uint8_t *p, const char *s, uint32_t len)
{
    p = put_int(p, 0, 7, len);
    memcpy(p, s, len);
    return p + len;
}

size_t http_hpack_bound(const http_hpack_field *f, size_t n)
{
    size_t b = 12; /* two table size updates */
    for (size_t i = 0; i < n; i++)
        b += (size_t)f[i].name_len + f[i].value_len + 18;
    return b;
}

size_t http_hpack_encode(http_hpack_enc *e, uint8_t *out, const http_hpack_field *f, size_t n)
{
    uint8_t *p = out;
    if (e->update_due) { /* dynamic table size updates (6.3) */
        if (e->update_min < e->max)
            p = put_int(p, 0x20, 5, e->update_min);
        p = put_int(p, 0x20, 5, e->max);
        e->update_due = 0;
    }
    for (size_t i = 0; i < n; i++, f++) {
        if (f->name_len == 7 && f->value_len == 3 && memcmp(f->name, ":status", 7) == 0) {
            uint32_t k = 0;
            while (k < 7 && memcmp(static_status[k], f->value, 3) != 0)
                k++;
            if (k < 7) {
                *p++ = (uint8_t)(0x80 | (8 + k)); /* indexed, static (6.1) */
                continue;
            }
        }
        uint32_t ks = (uint32_t)((f->key * 0x9e3779b97f4a7c15ull) >> 57) & (HTTP_HPACK_MEMO - 1);
        if (f->key && e->key_memo[ks] == f->key) {
            uint32_t age = e->inserted - e->key_id[ks] + 1;
            if (age >= 1 && age <= e->count) {
                p = put_int(p, 0x80, 7, STATIC_COUNT + age); /* indexed, dynamic */
                continue;
            }
        }
        uint32_t hash = field_hash(f);
        uint32_t idx = dynamic_find(e, f, hash);
        if (idx) {
            p = put_int(p, 0x80, 7, idx); /* indexed, dynamic */
            if (f->key) {
                e->key_memo[ks] = f->key;
                e->key_id[ks] = e->inserted + 1 - (idx - STATIC_COUNT);
            }
            continue;
        }
        uint32_t name_idx = static_name_index(f->name, f->name_len);
        /* Indexed unless too big for the table (over half of it: it would
         * push out most of the rest), or a set-cookie: each one differs. */
        int add = f->name_len + f->value_len + 32 <= e->max / 2 && f->name_len <= UINT16_MAX &&
                  f->value_len <= UINT16_MAX && name_idx != 55;
        if (add)
            p = put_int(p, 0x40, 6, name_idx); /* with incremental indexing (6.2.1) */
        else
            p = put_int(p, 0x00, 4, name_idx); /* without indexing (6.2.2) */
        if (!name_idx)
            p = put_str(p, f->name, f->name_len);
        p = put_str(p, f->value, f->value_len);
        if (add) {
            dynamic_add(e, f, hash);
            if (f->key) {
                e->key_memo[ks] = f->key;
                e->key_id[ks] = e->inserted;
            }
        }
    }
    return (size_t)(p - out);
}
