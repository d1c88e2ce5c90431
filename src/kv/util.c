#include "kv/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int kv_parse_ll(const char *p, size_t len, long long *out)
{
    if (len == 0 || len > 20)
        return -1;
    size_t i = 0;
    int neg = 0;
    if (p[0] == '-') {
        neg = 1;
        i = 1;
        if (len == 1)
            return -1;
    }
    if (len == 1 && p[0] == '0') {
        *out = 0;
        return 0;
    }
    if (p[i] < '1' || p[i] > '9')
        return -1;
    unsigned long long v = 0;
    for (; i < len; i++) {
        unsigned d = (unsigned char)p[i] - '0';
        if (d > 9)
            return -1;
        if (v > ~0ull / 10)
            return -1;
        v = v * 10;
        if (v > ~0ull - d)
            return -1;
        v += d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1)
            return -1;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX)
            return -1;
        *out = (long long)v;
    }
    return 0;
}

static int valid_float_text(const char *p, size_t len, char *tmp, size_t tmpcap)
{
    if (len == 0 || len >= tmpcap)
        return -1;
    unsigned char c0 = (unsigned char)p[0];
    if (c0 == ' ' || (c0 >= '\t' && c0 <= '\r'))
        return -1;
    memcpy(tmp, p, len);
    tmp[len] = '\0';
    if (memchr(p, '\0', len))
        return -1;
    return 0;
}

int kv_parse_double(const char *p, size_t len, double *out)
{
    /* Fast path: small integers are exact as doubles. */
    if (len > 0 && len <= 15) {
        size_t i = p[0] == '-' ? 1 : 0;
        if (i < len) {
            long long v = 0;
            size_t j = i;
            for (; j < len; j++) {
                unsigned d = (unsigned char)p[j] - '0';
                if (d > 9)
                    break;
                v = v * 10 + d;
            }
            if (j == len) {
                *out = i ? -(double)v : (double)v;
                return 0;
            }
        }
    }
    /* strtod wants a terminated copy; Redis sets no length limit (DBL_MAX
     * in full is 309 digits), so long texts get a heap copy. */
    char stack[KV_DBL_STR_MAX * 4];
    char *tmp = len < sizeof stack ? stack : malloc(len + 1);
    if (!tmp)
        abort();
    int rc = -1;
    if (valid_float_text(p, len, tmp, len < sizeof stack ? sizeof stack : len + 1) < 0)
        goto out;
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (end != tmp + len || isnan(v))
        goto out;
    if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || fpclassify(v) == FP_ZERO))
        goto out;
    *out = v;
    rc = 0;
out:
    if (tmp != stack)
        free(tmp);
    return rc;
}

int kv_parse_ldouble(const char *p, size_t len, long double *out)
{
    char tmp[KV_LDBL_STR_MAX];
    if (valid_float_text(p, len, tmp, sizeof tmp) < 0)
        return -1;
    char *end;
    errno = 0;
    long double v = strtold(tmp, &end);
    if (end != tmp + len || isnan(v) || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

/* Two digits per step from a 200-byte table, written backwards from the
 * end once the digit count is known: every bulk reply's length, every
 * integer reply and INCR's value go through here. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

size_t kv_fmt_ll(char *out, long long v)
{
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    size_t k = v < 0;
    if (k)
        out[0] = '-';
    if (u < 10) {
        out[k] = (char)('0' + u);
        return k + 1;
    }
    size_t n = 2;
    for (unsigned long long t = u / 100; t; t /= 10)
        n++;
    char *w = out + k + n;
    while (u >= 100) {
        unsigned i = (unsigned)(u % 100) * 2;
        u /= 100;
        *--w = digit_pairs[i + 1];
        *--w = digit_pairs[i];
    }
    if (u >= 10) {
        *--w = digit_pairs[u * 2 + 1];
        *--w = digit_pairs[u * 2];
    } else {
        *--w = (char)('0' + u);
    }
    return k + n;
}

size_t kv_fmt_double(char *out, double v)
{
    if (isinf(v)) {
        if (v > 0) {
            memcpy(out, "inf", 3);
            return 3;
        }
        memcpy(out, "-inf", 4);
        return 4;
    }
    if (v == 0) { /* -0 prints as "-0", as a skip-list score in Redis */
        if (signbit(v)) {
            memcpy(out, "-0", 2);
            return 2;
        }
        out[0] = '0';
        return 1;
    }
    /* Redis 7.0 replies doubles as %.17g: 0.1 is 0.10000000000000001 (the
     * shortest round-trip form came with 7.2). */
    return (size_t)snprintf(out, KV_DBL_STR_MAX, "%.17g", v);
}

size_t kv_fmt_ldouble(char *out, size_t cap, long double v)
{
    if (isinf(v)) {
        return (size_t)snprintf(out, cap, "%s", v > 0 ? "inf" : "-inf");
    }
    int n = snprintf(out, cap, "%.17Lf", v);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    if (memchr(out, '.', (size_t)n)) {
        while (n > 0 && out[n - 1] == '0')
            n--;
        if (n > 0 && out[n - 1] == '.')
            n--;
    }
    if (n == 2 && out[0] == '-' && out[1] == '0')
        n = 1, out[0] = '0';
    out[n] = '\0';
    return (size_t)n;
}

static char fold(char c, int nocase)
{
    return nocase && c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
}

int kv_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase)
{
    /* Iterative with one backtrack point for '*': linear for most patterns. */
    size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;
    while (si < slen) {
        if (pi < plen) {
            char pc = pat[pi];
            if (pc == '*') {
                while (pi < plen && pat[pi] == '*')
                    pi++;
                if (pi == plen)
                    return 1;
                star_p = pi;
                star_s = si;
                continue;
            }
            if (pc == '?') {
                pi++;
                si++;
                continue;
            }
            if (pc == '[') {
                size_t k = pi + 1;
                int neg = 0, match = 0;
                if (k < plen && pat[k] == '^') {
                    neg = 1;
                    k++;
                }
                char c = fold(s[si], nocase);
                for (; k < plen && pat[k] != ']'; k++) {
                    if (pat[k] == '\\' && k + 1 < plen) {
                        k++;
                        if (fold(pat[k], nocase) == c)
                            match = 1;
                    } else if (k + 2 < plen && pat[k + 1] == '-' && pat[k + 2] != ']') {
                        char lo = fold(pat[k], nocase), hi = fold(pat[k + 2], nocase);
                        if (lo > hi) {
                            char t = lo;
                            lo = hi;
                            hi = t;
                        }
                        if (c >= lo && c <= hi)
                            match = 1;
                        k += 2;
                    } else if (fold(pat[k], nocase) == c) {
                        match = 1;
                    }
                }
                if (neg)
                    match = !match;
                if (match) {
                    pi = k < plen ? k + 1 : k;
                    si++;
                    continue;
                }
            } else {
                if (pc == '\\' && pi + 1 < plen)
                    pc = pat[++pi];
                if (fold(pc, nocase) == fold(s[si], nocase)) {
                    pi++;
                    si++;
                    continue;
                }
            }
        }
        if (star_p == (size_t)-1)
            return 0;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < plen && pat[pi] == '*')
        pi++;
    return pi == plen;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

void kv_rand_seed(uint64_t seed)
{
    rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

uint64_t kv_rand64(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t kv_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#if defined(__x86_64__)
#include <x86intrin.h>
uint64_t kv_ticks(void)
{
    return __rdtsc();
}
#else
uint64_t kv_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cal_ticks0, cal_ns0;
static double ticks_per_us = 1000.0;

void kv_ticks_calibrate(void)
{
    if (!cal_ns0) {
        cal_ns0 = mono_ns();
        cal_ticks0 = kv_ticks();
        struct timespec pause = { 0, 2000000 };
        nanosleep(&pause, NULL);
    }
    uint64_t ns = mono_ns(), t = kv_ticks();
    if (ns > cal_ns0 && t > cal_ticks0)
        ticks_per_us = (double)(t - cal_ticks0) * 1000.0 / (double)(ns - cal_ns0);
}

double kv_ticks_per_us(void)
{
    return ticks_per_us;
}

int64_t kv_unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
