/* libFuzzer target: static_normalize_path (src/http/static.c).
 *
 * The input is a URL path as sent ("/a/%2e%2e/b"). Properties of every
 * accepted path:
 *   - it never starts with '/', never ends with '/', has no empty segment,
 *     no "." or ".." segment, no NUL, and is NUL-terminated at `len`,
 *   - it fits the buffer (which is exactly `cap` bytes, so ASan sees any
 *     write past it),
 *   - it is what a simple model computes (split on '/', decode each
 *     segment, then resolve dot segments), and normalising it again gives
 *     itself (idempotence).
 * The model also decides which inputs must be refused and with which
 * status; only -414 (the output buffer ran out) is the function's own. */
#include "http/static.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_path: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                              \
            abort();                                                        \
        }                                                                   \
    } while (0)

static int hexv(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The model: returns the length written to out (unbounded: out holds
 * 2 * len + 1 bytes), or -400 / -404. */
static int model(const char *p, size_t len, char *out, int *dir_form)
{
    if (!len || p[0] != '/')
        return -400;
    size_t o = 0;
    size_t i = 1;
    char *seg = malloc(len + 1);
    for (;;) {
        /* one raw segment: p[i, j) */
        size_t j = i;
        while (j < len && p[j] != '/')
            j++;
        size_t n = 0;
        for (size_t k = i; k < j; k++) {
            unsigned char c = (unsigned char)p[k];
            if (c == '%') {
                if (k + 2 >= len) /* like the original: the escape must fit */
                    goto bad400;
                int h = hexv((unsigned char)p[k + 1]), l = hexv((unsigned char)p[k + 2]);
                if (h < 0 || l < 0)
                    goto bad400;
                c = (unsigned char)(h * 16 + l);
                if (c == '/' || c == 0)
                    goto bad404;
                k += 2;
            } else if (c == 0) {
                goto bad404;
            }
            seg[n++] = (char)c;
        }
        if (n == 0 || (n == 1 && seg[0] == '.')) {
            /* nothing */
        } else if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            if (o == 0)
                goto bad404;
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* the separator before the dropped segment */
        } else {
            if (o)
                out[o++] = '/';
            memcpy(out + o, seg, n);
            o += n;
        }
        if (j >= len)
            break;
        i = j + 1;
    }
    free(seg);
    *dir_form = p[len - 1] == '/' || o == 0;
    out[o] = 0;
    return (int)o;
bad400:
    free(seg);
    return -400;
bad404:
    free(seg);
    return -404;
}

static void check_output(const char *out, int n, size_t cap)
{
    CHECK((size_t)n < cap);
    CHECK(out[n] == '\0');
    CHECK(memchr(out, '\0', (size_t)n) == NULL);
    if (n == 0)
        return;
    CHECK(out[0] != '/' && out[n - 1] != '/');
    size_t s = 0;
    for (size_t i = 0; i <= (size_t)n; i++) {
        if (i < (size_t)n && out[i] != '/')
            continue;
        size_t sl = i - s;
        CHECK(sl > 0); /* no empty segment */
        CHECK(!(sl == 1 && out[s] == '.'));
        CHECK(!(sl == 2 && out[s] == '.' && out[s + 1] == '.'));
        s = i + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len > 3 * STATIC_PATH_MAX)
        return 0;
    /* An exact-size copy of the input, so reads past it are caught. */
    char *path = malloc(len ? len : 1);
    memcpy(path, data, len);

    /* The server's buffer size, and a small one that makes -414 likely. */
    size_t caps[2] = { STATIC_PATH_MAX, 1 + (len ? data[len - 1] % 64 : 0) };
    char *ref = malloc(2 * len + 2);
    int ref_dir = -1;
    int want = model(path, len, ref, &ref_dir);
    for (int k = 0; k < 2; k++) {
        size_t cap = caps[k];
        char *out = malloc(cap);
        int dir = -1;
        int n = static_normalize_path((bk_str){ path, len }, out, cap, &dir);
        if (n == -414) {
            /* the output (or an intermediate state of it) did not fit:
             * each input byte yields at most one output byte */
            CHECK(len >= cap);
        } else if (n < 0) {
            CHECK(n == -400 || n == -404);
            CHECK(n == want);
        } else {
            check_output(out, n, cap);
            CHECK(n == want);
            CHECK(memcmp(out, ref, (size_t)n) == 0);
            CHECK(dir == ref_dir);
            /* idempotence: "/" + the output, with '%' escaped, maps to itself */
            size_t elen = 1;
            char *again = malloc(3 * (size_t)n + 1);
            again[0] = '/';
            for (int i = 0; i < n; i++) {
                if (out[i] == '%') {
                    memcpy(again + elen, "%25", 3);
                    elen += 3;
                } else {
                    again[elen++] = out[i];
                }
            }
            char *out2 = malloc(STATIC_PATH_MAX);
            int d2;
            int n2 = static_normalize_path((bk_str){ again, elen }, out2, STATIC_PATH_MAX, &d2);
            if (n2 != -414) {
                CHECK(n2 == n);
                CHECK(memcmp(out2, out, (size_t)n) == 0);
            }
            free(out2);
            free(again);
        }
        free(out);
    }
    free(ref);
    free(path);
    return 0;
}
