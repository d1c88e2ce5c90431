/* Cached time. Each worker owns one bk_clock and refreshes it once per
 * loop iteration; the formatted strings are rebuilt at most once a second. */
#ifndef BRISK_CORE_CLOCK_H
#define BRISK_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define CLOCK_HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
#define CLOCK_LOG_TIME_LEN  26 /* "06/Nov/1994:08:49:37 +0000" */

typedef struct {
    time_t sec;                              /* wall clock, seconds */
    char http_date[CLOCK_HTTP_DATE_LEN + 1]; /* IMF-fixdate, for Date: */
    char log_time[CLOCK_LOG_TIME_LEN + 1];   /* local time, for access logs */
} bk_clock;

/* Monotonic milliseconds (vDSO, no syscall). */
uint64_t clock_mono_ms(void);
/* Monotonic microseconds (vDSO, no syscall). */
uint64_t clock_mono_us(void);

/* Refreshes c; returns 1 when the second changed. */
int clock_cache_update(bk_clock *c);

/* Formats t as an IMF-fixdate into out (CLOCK_HTTP_DATE_LEN bytes + NUL). */
void clock_format_http_date(time_t t, char *out);

/* Parses an HTTP-date (IMF-fixdate, RFC 850 or asctime). Returns 0 or -1. */
int clock_parse_http_date(const char *p, size_t len, time_t *out);

#endif
