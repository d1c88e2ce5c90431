/* Small shared definitions: (pointer, length) strings and helpers. */
#ifndef BRISK_CORE_COMMON_H
#define BRISK_CORE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A string slice: not NUL-terminated, binary safe, owned by someone else. */
typedef struct {
    const char *p;
    size_t len;
} bk_str;

#define BK_STR(lit) ((bk_str){ (lit), sizeof(lit) - 1 })
#define BK_STR_NULL ((bk_str){ NULL, 0 })

#define BK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define BK_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#define BK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define BK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define BK_MAX(a, b) ((a) > (b) ? (a) : (b))

static inline int str_eq(bk_str a, bk_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static inline char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
}

/* Case-insensitive ASCII comparison of a slice with a lower-case literal. */
static inline int str_ieq_lit(bk_str a, const char *lower, size_t n)
{
    if (a.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(a.p[i]) != lower[i])
            return 0;
    return 1;
}
#define BK_STR_IEQ(s, lit) str_ieq_lit((s), (lit), sizeof(lit) - 1)

/* Eight bytes at a time (a word loaded with memcpy): nonzero when some
 * byte of w is below n (n <= 128), or equal to b. Never a false negative;
 * callers recheck a flagged word byte by byte, so a rare false positive
 * costs only time. */
#define BK_BYTES8_ONES 0x0101010101010101ull
static inline uint64_t bytes8_has_below(uint64_t w, unsigned n)
{
    return (w - BK_BYTES8_ONES * n) & ~w & (BK_BYTES8_ONES * 0x80);
}

static inline uint64_t bytes8_has(uint64_t w, unsigned char b)
{
    return bytes8_has_below(w ^ (BK_BYTES8_ONES * b), 1);
}

/* Strict unsigned decimal: digits only, no sign, no spaces, no overflow past
 * max. Returns 0 on success, -1 otherwise. Used for every number from the
 * wire and from config files. */
int num_parse_u64(const char *p, size_t len, uint64_t max, uint64_t *out);

/* Writes v in decimal to out (at least 20 bytes); returns the length. */
size_t num_format_u64(char *out, uint64_t v);

#endif
