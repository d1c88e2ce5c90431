/* A small streaming JSON writer: values are appended to one growing buffer
 * (reused per worker), commas are placed by the writer, and every string is
 * escaped: '"', '\\' and control characters (U+0000..U+001F, U+007F) are
 * escaped, other UTF-8 passes through as is, and bytes that are not valid
 * UTF-8 become U+FFFD, so the output is always valid JSON in UTF-8. */
#ifndef BRISK_FOODS_JSONW_H
#define BRISK_FOODS_JSONW_H

#include <stddef.h>
#include <stdint.h>

#define JW_MAX_DEPTH 64

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;       /* an allocation failed: the output is incomplete */
    int depth;
    int after_key; /* the next value follows "key": (no comma) */
    uint64_t nonempty; /* bit d: the container at depth d has a member */
} jw;

void jw_init(jw *w);
void jw_reset(jw *w); /* empties it, keeping (moderate) capacity */
void jw_free(jw *w);

void jw_obj_open(jw *w);
void jw_obj_close(jw *w);
void jw_arr_open(jw *w);
void jw_arr_close(jw *w);
void jw_key(jw *w, const char *key); /* key is escaped like any string */
void jw_str(jw *w, const char *p, size_t len);
void jw_cstr(jw *w, const char *s); /* NULL writes null */
void jw_int(jw *w, int64_t v);
void jw_double(jw *w, double v); /* shortest round-trip form; NaN and infinities as null */
void jw_bool(jw *w, int v);
void jw_null(jw *w);

/* Escapes p[0..len) into out (room for 6 * len bytes) without quotes;
 * returns the bytes written. */
size_t jw_escape(char *out, const char *p, size_t len);

/* Formats v as a JSON number into out (room for 32 bytes); returns the
 * length. Integral values keep a ".0"; NaN and infinities give "null". */
size_t jw_format_double(char *out, double v);

/* x rounded to the nearest integer, halves away from zero (|x| < 2^52). */
int64_t jw_round_int(double x);
/* v rounded to two decimals (unchanged beyond 1e13). */
double jw_round2(double v);

/* The length of the valid UTF-8 prefix of p (== len when all valid):
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t utf8_valid_prefix(const char *p, size_t len);
/* Code points in valid UTF-8. */
size_t utf8_count(const char *p, size_t len);

#endif
