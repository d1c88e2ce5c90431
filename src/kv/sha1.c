/* SHA-1 (FIPS 180-4): script names (EVAL/EVALSHA, redis.sha1hex) and
 * DEBUG DIGEST, which Redis both define by it. */
#include "kv/sha1.h"

#include "core/common.h"

#include <string.h>

static uint32_t rol(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

static void sha1_block(sha1_ctx *s, const unsigned char *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (b & c) | (~b & d), k = 0x5a827999;
        else if (i < 40)
            f = b ^ c ^ d, k = 0x6ed9eba1;
        else if (i < 60)
            f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
        else
            f = b ^ c ^ d, k = 0xca62c1d6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
}

void sha1_init(sha1_ctx *s)
{
    static const uint32_t iv[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->n = 0;
}

void sha1_update(sha1_ctx *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    s->len += len;
    while (len > 0) {
        size_t k = BK_MIN(len, 64 - s->n);
        memcpy(s->blk + s->n, p, k);
        s->n += k;
        p += k;
        len -= k;
        if (s->n == 64) {
            sha1_block(s, s->blk);
            s->n = 0;
        }
    }
}

void sha1_final(sha1_ctx *s, unsigned char out[20])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80, zero = 0;
    sha1_update(s, &pad, 1);
    while (s->n != 56)
        sha1_update(s, &zero, 1);
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha1_update(s, be, 8);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

void sha1_hex(const void *data, size_t len, char out[41])
{
    static const char hex[] = "0123456789abcdef";
    sha1_ctx s;
    unsigned char d[20];
    sha1_init(&s);
    sha1_update(&s, data, len);
    sha1_final(&s, d);
    for (int i = 0; i < 20; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[40] = '\0';
}
