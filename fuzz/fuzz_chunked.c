/* libFuzzer target: http_chunked_decode (src/http/parse.c).
 *
 * The input is a chunked body (and whatever follows it). It is decoded
 *   - whole, from a buffer of exactly its size (ASan sees any over-read),
 *   - in pieces whose sizes come from the input, the way the connection
 *     feeds it: each call gets the unconsumed bytes plus the next piece, in
 *     a buffer of exactly that size, and the decoded bytes are appended to
 *     the body,
 * and both must agree on the outcome, the body and where the body ends.
 * Properties: the decoded output never exceeds the bytes consumed, nothing
 * past `len` is consumed, and a call that is not done consumes everything
 * (the connection relies on it). */
#include "http/parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_chunked: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                                 \
            abort();                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    int failed;      /* -400 seen */
    int done;
    size_t consumed; /* input bytes that belong to the body */
    char *body;
    size_t body_len;
} outcome;

static void decode_whole(const uint8_t *data, size_t len, outcome *o)
{
    http_chunked c;
    http_chunked_reset(&c);
    char *buf = malloc(len ? len : 1);
    memcpy(buf, data, len);
    size_t out = (size_t)-1;
    int done = -1;
    ssize_t rc = http_chunked_decode(&c, buf, len, &out, &done);
    memset(o, 0, sizeof *o);
    if (rc < 0) {
        CHECK(rc == -400);
        o->failed = 1;
        free(buf);
        return;
    }
    CHECK((size_t)rc <= len);
    CHECK(out <= (size_t)rc); /* decoded output never exceeds the input */
    CHECK(done == 0 || done == 1);
    if (!done)
        CHECK((size_t)rc == len);
    o->done = done;
    o->consumed = (size_t)rc;
    o->body = buf; /* decoded in place: the data is at the front */
    o->body_len = out;
}

static void decode_pieces(const uint8_t *data, size_t len, uint64_t seed, outcome *o)
{
    http_chunked c;
    http_chunked_reset(&c);
    memset(o, 0, sizeof *o);
    o->body = malloc(len ? len : 1);
    size_t fed = 0;
    char *pending = NULL; /* bytes given but not consumed */
    size_t npending = 0;
    while (fed < len) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t piece = 1 + (size_t)((seed >> 33) % 17);
        if ((seed >> 20) % 8 == 0)
            piece = 1 + (size_t)((seed >> 40) % 600);
        if (piece > len - fed)
            piece = len - fed;
        size_t n = npending + piece;
        char *buf = malloc(n);
        if (npending)
            memcpy(buf, pending, npending);
        memcpy(buf + npending, data + fed, piece);
        free(pending);
        pending = NULL;
        fed += piece;

        size_t out = (size_t)-1;
        int done = -1;
        ssize_t rc = http_chunked_decode(&c, buf, n, &out, &done);
        if (rc < 0) {
            CHECK(rc == -400);
            o->failed = 1;
            free(buf);
            return;
        }
        CHECK((size_t)rc <= n && out <= (size_t)rc);
        CHECK(o->body_len + out <= len);
        memcpy(o->body + o->body_len, buf, out);
        o->body_len += out;
        o->consumed += (size_t)rc;
        if (done) {
            o->done = 1;
            free(buf);
            return;
        }
        CHECK((size_t)rc == n);
        free(buf);
    }
    /* no input left: a decoder that is not done must still say so */
    size_t out = 1;
    int done = -1;
    char dummy = 0;
    CHECK(http_chunked_decode(&c, &dummy, 0, &out, &done) == 0);
    CHECK(out == 0 && done == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    uint64_t seed = len;
    for (size_t i = 0; i < len && i < 8; i++)
        seed = seed * 257 + data[i];
    outcome whole, pieces;
    decode_whole(data, len, &whole);
    decode_pieces(data, len, seed, &pieces);
    CHECK(whole.failed == pieces.failed);
    if (!whole.failed) {
        CHECK(whole.done == pieces.done);
        CHECK(whole.body_len == pieces.body_len);
        CHECK(whole.body_len == 0 || memcmp(whole.body, pieces.body, whole.body_len) == 0);
        if (whole.done)
            CHECK(whole.consumed == pieces.consumed);
    }
    free(whole.body);
    free(pieces.body);
    return 0;
}
