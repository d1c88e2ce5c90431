/* SHA-1, streaming (sha1_init/update/final) and one-shot hex. */
#ifndef BRISK_KV_SHA1_H
#define BRISK_KV_SHA1_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[5];
    uint64_t len;
    unsigned char blk[64];
    size_t n;
} sha1_ctx;

void sha1_init(sha1_ctx *s);
void sha1_update(sha1_ctx *s, const void *data, size_t len);
void sha1_final(sha1_ctx *s, unsigned char out[20]);
/* 40 lower-case hex digits and a NUL. */
void sha1_hex(const void *data, size_t len, char out[41]);

#endif
