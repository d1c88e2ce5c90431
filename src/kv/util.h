/* Number parsing and formatting with Redis's rules, glob matching, a fast
 * PRNG. Every number read from a command argument goes through these. */
#ifndef BRISK_KV_UTIL_H
#define BRISK_KV_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define KV_LL_STR_MAX 21
#define KV_DBL_STR_MAX 64
/* Long doubles reach 1.2e4932: %.17Lf of one needs ~4950 bytes. Texts up to
 * this length are accepted and produced (Redis's MAX_LONG_DOUBLE_CHARS). */
#define KV_LDBL_STR_MAX (5 * 1024)

/* Strict signed decimal: optional '-', no '+', no leading zeros, no spaces,
 * no overflow. Returns 0 or -1. */
int kv_parse_ll(const char *p, size_t len, long long *out);
/* A double: integers fast, decimals exactly (strtod), "inf"/"-inf"
 * accepted, NaN, spaces and junk refused. Returns 0 or -1. */
int kv_parse_double(const char *p, size_t len, double *out);
int kv_parse_ldouble(const char *p, size_t len, long double *out);

/* Format into out; return the length (no NUL terminator counted). */
size_t kv_fmt_ll(char *out, long long v);
/* Redis 7.0's double replies: %.17g, "inf", "-inf". */
size_t kv_fmt_double(char *out, double v);
/* INCRBYFLOAT style: %.17Lf with trailing zeros removed; cap should be
 * KV_LDBL_STR_MAX (0 is returned when the text does not fit). */
size_t kv_fmt_ldouble(char *out, size_t cap, long double v);

/* Glob match (* ? [a-z] [^x] \x), optionally ASCII case-insensitive. */
int kv_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase);

uint64_t kv_rand64(void);
void kv_rand_seed(uint64_t seed);
/* A cheap monotonic tick counter for timing commands: the TSC on x86-64
 * (invariant on the machines brisk targets), nanoseconds elsewhere.
 * kv_ticks_calibrate measures ticks per microsecond against the monotonic
 * clock; call it once at start (it waits ~2 ms) and then now and then (it
 * refines the figure over the whole run). */
uint64_t kv_ticks(void);
void kv_ticks_calibrate(void);
double kv_ticks_per_us(void);
/* Wall clock in milliseconds and microseconds. */
int64_t kv_unix_ms(void);
int64_t kv_unix_us(void);

#endif
