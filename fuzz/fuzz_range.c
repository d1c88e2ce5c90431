/* libFuzzer target: static_parse_range (src/http/static.c).
 *
 * Input: 8 bytes (little-endian) that give the representation's size,
 * then the Range header value. Properties:
 *   - the result is 1, 0 or -416, and *first / *last are written only
 *     with 1;
 *   - with 1: first <= last < size, so 1 <= last - first + 1 <= size;
 *   - with 1 or -416 the value starts with "bytes=" (any case);
 *   - a well-formed single range built from the same numbers
 *     ("bytes=A-B", "bytes=A-", "bytes=-N") gets exactly RFC 9110's answer.
 * The value is copied to a buffer of its exact size (over-reads show). */
#include "http/static.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_range: check failed: %s (line %d)\n", #cond, \
                    __LINE__);                                               \
            abort();                                                         \
        }                                                                    \
    } while (0)

#define NUM_MAX ((uint64_t)1 << 62) /* the parser's bound on each number */

static int parse(const char *v, size_t len, uint64_t size, uint64_t *first, uint64_t *last)
{
    char *copy = malloc(len ? len : 1);
    memcpy(copy, v, len);
    const uint64_t poison = 0xdeadbeefcafef00dull;
    *first = *last = poison;
    int rc = static_parse_range((bk_str){ copy, len }, size, first, last);
    CHECK(rc == 1 || rc == 0 || rc == -416);
    if (rc == 1) {
        CHECK(size > 0);
        CHECK(*first <= *last && *last < size);
        CHECK(len >= 6 && strncasecmp(copy, "bytes=", 6) == 0);
    } else {
        CHECK(*first == poison && *last == poison);
        if (rc == -416)
            CHECK(len >= 6 && strncasecmp(copy, "bytes=", 6) == 0);
    }
    free(copy);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 8)
        return 0;
    uint64_t size = 0;
    for (int i = 7; i >= 0; i--)
        size = size << 8 | data[i];
    if (data[7] & 0x80)
        size &= 0xffff; /* keep small sizes frequent */
    uint64_t first, last;
    parse((const char *)data + 8, len - 8, size, &first, &last);

    /* Well-formed ranges from numbers in the input. */
    uint64_t a = 0, b = 0;
    for (size_t i = 8; i < len && i < 16; i++)
        a = a << 8 | data[i];
    for (size_t i = 16; i < len && i < 24; i++)
        b = b << 8 | data[i];
    a %= (data[8 % len] & 1) ? 100 : NUM_MAX + 1;
    b %= (data[9 % len] & 1) ? 100 : NUM_MAX + 1;
    char v[80];
    int n;

    n = snprintf(v, sizeof v, "bytes=%" PRIu64 "-%" PRIu64, a, b);
    int rc = parse(v, (size_t)n, size, &first, &last);
    if (b < a)
        CHECK(rc == 0); /* invalid: ignored */
    else if (a >= size)
        CHECK(rc == -416);
    else
        CHECK(rc == 1 && first == a && last == (b < size ? b : size - 1));

    n = snprintf(v, sizeof v, "bytes=%" PRIu64 "-", a);
    rc = parse(v, (size_t)n, size, &first, &last);
    if (a >= size)
        CHECK(rc == -416);
    else
        CHECK(rc == 1 && first == a && last == size - 1);

    n = snprintf(v, sizeof v, "bytes=-%" PRIu64, b);
    rc = parse(v, (size_t)n, size, &first, &last);
    if (b == 0 || size == 0)
        CHECK(rc == -416);
    else
        CHECK(rc == 1 && first == (b >= size ? 0 : size - b) && last == size - 1);

    /* several ranges are never honoured (brisk sends 200) */
    n = snprintf(v, sizeof v, "bytes=%" PRIu64 "-%" PRIu64 ",0-0", a, b);
    CHECK(parse(v, (size_t)n, size, &first, &last) == 0);
    return 0;
}
