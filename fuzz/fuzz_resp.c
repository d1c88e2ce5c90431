/* libFuzzer target: the RESP request parser of brisk-kv (src/kv/resp.c).
 *
 * The input is what a client sends (multibulk and inline commands). It is
 * parsed
 *   - whole, from a buffer of exactly its size,
 *   - the way the server reads a socket: pieces whose sizes come from the
 *     input are appended to a buffer, commands are taken as they complete,
 *     and consumed bytes are dropped from the front (resp_parser_shift),
 * and both must give the same commands and the same final state (error
 * or not). Every argument must lie inside the buffer; an error carries a
 * "Protocol error: " message. Limits are lowered (64 KiB bulks, 1,000
 * arguments) so the fuzzer reaches them. */
#include "kv/resp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_resp: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                              \
            abort();                                                        \
        }                                                                   \
    } while (0)

/* The commands seen, flattened: per command "argc" then per arg "len bytes". */
typedef struct {
    unsigned char *p;
    size_t len, cap;
    int ncmds;
    int error;
} trace;

static void put(trace *t, const void *p, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2 + 64;
        t->p = realloc(t->p, t->cap);
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
}

static void record(trace *t, const resp_parser *p, const char *buf, size_t len)
{
    CHECK(p->nargs > 0);
    put(t, &p->nargs, sizeof p->nargs);
    for (size_t i = 0; i < p->nargs; i++) {
        CHECK(p->args[i].off <= len && p->args[i].len <= len - p->args[i].off);
        put(t, &p->args[i].len, sizeof p->args[i].len);
        put(t, buf + p->args[i].off, p->args[i].len);
    }
    t->ncmds++;
}

static void setup(resp_parser *p)
{
    resp_parser_init(p);
    p->max_bulk = 64 * 1024;
    p->max_multibulk = 1000;
}

static void on_error(const resp_parser *p, trace *t)
{
    CHECK(strncmp(p->err, "Protocol error: ", 16) == 0);
    t->error = 1;
}

static void parse_whole(const uint8_t *data, size_t len, trace *t)
{
    resp_parser p;
    setup(&p);
    char *buf = malloc(len ? len : 1);
    memcpy(buf, data, len);
    for (;;) {
        int rc = resp_parse(&p, buf, len);
        CHECK(rc == RESP_CMD || rc == RESP_AGAIN || rc == RESP_ERROR);
        CHECK(p.pos <= len);
        if (rc == RESP_AGAIN)
            break;
        if (rc == RESP_ERROR) {
            on_error(&p, t);
            break;
        }
        record(t, &p, buf, len);
        resp_parser_next(&p);
    }
    resp_parser_free(&p);
    free(buf);
}

static void parse_pieces(const uint8_t *data, size_t len, uint64_t seed, trace *t)
{
    resp_parser p;
    setup(&p);
    char *buf = NULL;
    size_t have = 0, fed = 0;
    while (fed < len) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t piece = 1 + (size_t)((seed >> 33) % 13);
        if ((seed >> 20) % 6 == 0)
            piece = 1 + (size_t)((seed >> 40) % 1000);
        if (piece > len - fed)
            piece = len - fed;
        /* a buffer of exactly the bytes held, re-allocated each round */
        char *nb = malloc(have + piece);
        if (have)
            memcpy(nb, buf, have);
        memcpy(nb + have, data + fed, piece);
        free(buf);
        buf = nb;
        have += piece;
        fed += piece;
        for (;;) {
            size_t want = resp_parser_want(&p, have);
            (void)want;
            int rc = resp_parse(&p, buf, have);
            CHECK(p.pos <= have);
            if (rc == RESP_AGAIN)
                break;
            if (rc == RESP_ERROR) {
                on_error(&p, t);
                goto out;
            }
            record(t, &p, buf, have);
            resp_parser_next(&p);
        }
        size_t used = resp_parser_consumed(&p);
        CHECK(used <= have);
        if (used) {
            memmove(buf, buf + used, have - used);
            have -= used;
            resp_parser_shift(&p, used);
        }
    }
out:
    resp_parser_free(&p);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    /* Past RESP_INLINE_MAX without a line end the server refuses what a
     * whole-buffer parse would accept: compare only below it. */
    if (len > RESP_INLINE_MAX)
        return 0;
    uint64_t seed = len;
    for (size_t i = 0; i < len && i < 8; i++)
        seed = seed * 257 + data[i];
    trace a = { 0 }, b = { 0 };
    parse_whole(data, len, &a);
    parse_pieces(data, len, seed, &b);
    CHECK(a.error == b.error);
    CHECK(a.ncmds == b.ncmds);
    CHECK(a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0));
    free(a.p);
    free(b.p);
    return 0;
}
