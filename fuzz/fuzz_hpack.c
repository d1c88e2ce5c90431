/* libFuzzer target: the HPACK encoder (src/http/hpack.c).
 *
 * The input is a program: each step either changes the table's size limit
 * (the client's SETTINGS_HEADER_TABLE_SIZE, told to both sides, once or
 * twice between two blocks) or encodes a block of fields, which libnghttp2's
 * decoder (the one curl and h2load use) decodes. Properties:
 *   - the decoder accepts every block and gives back the same fields, in
 *     order (so the encoder's table never differs from the decoder's);
 *   - a block is never longer than http_hpack_bound said;
 *   - fields are drawn from a small set (names and values that repeat, with
 *     or without their key: a key always means the same bytes) or made of
 *     input bytes (any length, any byte). */
#include "http/hpack.h"

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_hpack: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                                   \
            abort();                                                             \
        }                                                                        \
    } while (0)

#define FIELDS_MAX 32

static const http_hpack_field known[] = {
    { ":status", "200", 7, 3, 0 }, { ":status", "404", 7, 3, 0 }, { ":status", "302", 7, 3, 0 },
    { "server", "brisk/0.1.0", 6, 11, 1 }, { "date", "Tue, 24 Nov 2026 21:04:40 GMT", 4, 29, 2 },
    { "date", "Tue, 24 Nov 2026 21:04:41 GMT", 4, 29, 3 }, { "content-length", "117", 14, 3, 4 },
    { "content-type", "text/html", 12, 9, 5 }, { "set-cookie", "a=1", 10, 3, 6 },
    { "x-a", "", 3, 0, 7 }, { "etag", "\"1-2\"", 4, 5, 8 }, { "vary", "accept-encoding", 4, 15, 0 },
};

typedef struct {
    const uint8_t *p;
    size_t n;
} input;

static int take(input *in, size_t k, const uint8_t **out)
{
    if (in->n < k)
        return 0;
    *out = in->p;
    in->p += k;
    in->n -= k;
    return 1;
}

static void decode_check(nghttp2_hd_inflater *dec, uint8_t *block, size_t len,
                         const http_hpack_field *f, size_t n)
{
    size_t got = 0;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(dec, &nv, &flags, block, len, 1);
        CHECK(r >= 0);
        block += r;
        len -= (size_t)r;
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            CHECK(got < n);
            CHECK(nv.namelen == f[got].name_len && nv.valuelen == f[got].value_len);
            CHECK(memcmp(nv.name, f[got].name, nv.namelen) == 0);
            CHECK(nv.valuelen == 0 || memcmp(nv.value, f[got].value, nv.valuelen) == 0);
            got++;
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(dec);
            break;
        }
        CHECK((flags & NGHTTP2_HD_INFLATE_EMIT) || len > 0);
    }
    CHECK(got == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static http_hpack_enc enc;
    nghttp2_hd_inflater *dec;
    if (nghttp2_hd_inflate_new(&dec) != 0)
        return 0;
    http_hpack_enc_init(&enc);
    input in = { data, size };
    const uint8_t *op;
    http_hpack_field f[FIELDS_MAX];
    uint8_t *out = NULL;
    while (take(&in, 1, &op)) {
        if ((op[0] & 0xc0) == 0xc0) { /* the client's table size: one or two changes */
            const uint8_t *v;
            int twice = op[0] & 1;
            for (int i = 0; i <= twice && take(&in, 2, &v); i++) {
                uint32_t max = (uint32_t)(v[0] << 8 | v[1]) & 0x1fff; /* 0 .. 8191 */
                CHECK(nghttp2_hd_inflate_change_table_size(dec, max) == 0);
                http_hpack_enc_set_max(&enc, max);
            }
            continue;
        }
        size_t n = (size_t)(op[0] % FIELDS_MAX) + 1;
        size_t nf = 0;
        for (; nf < n; nf++) {
            const uint8_t *k;
            if (!take(&in, 1, &k))
                break;
            if (k[0] < 0xe0) { /* one of the known fields */
                f[nf] = known[k[0] % (sizeof known / sizeof known[0])];
                if (k[0] & 0x80)
                    f[nf].key = 0; /* the same bytes, found by content */
                continue;
            }
            const uint8_t *len, *bytes; /* a field of input bytes */
            if (!take(&in, 2, &len))
                break;
            size_t nl = len[0] % 24 + 1, vl = (size_t)len[1] * (k[0] & 0x10 ? 24 : 1);
            if (!take(&in, nl + vl, &bytes))
                break;
            f[nf] = (http_hpack_field){ (const char *)bytes, (const char *)bytes + nl,
                                        (uint32_t)nl, (uint32_t)vl, 0 };
        }
        size_t bound = http_hpack_bound(f, nf);
        out = realloc(out, bound ? bound : 1);
        CHECK(out != NULL);
        size_t blen = http_hpack_encode(&enc, out, f, nf);
        CHECK(blen <= bound);
        decode_check(dec, out, blen, f, nf);
    }
    free(out);
    nghttp2_hd_inflate_del(dec);
    return 0;
}
