#include "core/clock.h"

#include <stdio.h>
#include <string.h>

static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

uint64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static char *put2(char *p, int v)
{
    p[0] = (char)('0' + v / 10 % 10);
    p[1] = (char)('0' + v % 10);
    return p + 2;
}

static char *put4(char *p, int v)
{
    p = put2(p, v / 100);
    return put2(p, v % 100);
}

void clock_format_http_date(time_t t, char *out)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    char *p = out;
    memcpy(p, days[tm.tm_wday], 3);
    p[3] = ',';
    p[4] = ' ';
    p = put2(p + 5, tm.tm_mday);
    *p++ = ' ';
    memcpy(p, months[tm.tm_mon], 3);
    p[3] = ' ';
    p = put4(p + 4, tm.tm_year + 1900);
    *p++ = ' ';
    p = put2(p, tm.tm_hour);
    *p++ = ':';
    p = put2(p, tm.tm_min);
    *p++ = ':';
    p = put2(p, tm.tm_sec);
    memcpy(p, " GMT", 5);
}

int clock_cache_update(bk_clock *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec == c->sec)
        return 0;
    c->sec = ts.tv_sec;
    clock_format_http_date(c->sec, c->http_date);

    /* localtime_r does not re-read the zone file (tzset ran at start). */
    struct tm tm;
    localtime_r(&c->sec, &tm);
    long off = tm.tm_gmtoff / 60;
    char sign = off < 0 ? '-' : '+';
    if (off < 0)
        off = -off;
    char *p = put2(c->log_time, tm.tm_mday);
    *p++ = '/';
    memcpy(p, months[tm.tm_mon], 3);
    p[3] = '/';
    p = put4(p + 4, tm.tm_year + 1900);
    *p++ = ':';
    p = put2(p, tm.tm_hour);
    *p++ = ':';
    p = put2(p, tm.tm_min);
    *p++ = ':';
    p = put2(p, tm.tm_sec);
    *p++ = ' ';
    *p++ = sign;
    p = put2(p, (int)(off / 60));
    p = put2(p, (int)(off % 60));
    *p = '\0';
    return 1;
}

static int month_index(const char *p)
{
    for (int i = 0; i < 12; i++)
        if (memcmp(p, months[i], 3) == 0)
            return i;
    return -1;
}

static int digits(const char *p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian), no timezone files. */
static long days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int clock_parse_http_date(const char *p, size_t len, time_t *out)
{
    char s[64];
    if (len >= sizeof s)
        return -1;
    memcpy(s, p, len);
    s[len] = '\0';
    int day, mon, year, hh, mm, ss;
    const char *q;

    if (len == 29 && s[3] == ',') { /* Sun, 06 Nov 1994 08:49:37 GMT */
        q = s + 5;
        if (digits(q, 2, &day) || q[2] != ' ' || (mon = month_index(q + 3)) < 0 ||
            q[6] != ' ' || digits(q + 7, 4, &year) || q[11] != ' ' || digits(q + 12, 2, &hh) ||
            q[14] != ':' || digits(q + 15, 2, &mm) || q[17] != ':' || digits(q + 18, 2, &ss) ||
            memcmp(q + 20, " GMT", 4) != 0)
            return -1;
    } else if (len == 24 && s[3] == ' ') { /* Sun Nov  6 08:49:37 1994 */
        q = s + 4;
        if ((mon = month_index(q)) < 0 || q[3] != ' ')
            return -1;
        char d2[2] = { q[4] == ' ' ? '0' : q[4], q[5] };
        if (digits(d2, 2, &day) || q[6] != ' ' || digits(q + 7, 2, &hh) || q[9] != ':' ||
            digits(q + 10, 2, &mm) || q[12] != ':' || digits(q + 13, 2, &ss) || q[15] != ' ' ||
            digits(q + 16, 4, &year))
            return -1;
    } else { /* Sunday, 06-Nov-94 08:49:37 GMT */
        q = strchr(s, ',');
        if (!q || strlen(q) != 24)
            return -1;
        q += 2;
        if (digits(q, 2, &day) || q[2] != '-' || (mon = month_index(q + 3)) < 0 ||
            q[6] != '-' || digits(q + 7, 2, &year) || q[9] != ' ' || digits(q + 10, 2, &hh) ||
            q[12] != ':' || digits(q + 13, 2, &mm) || q[15] != ':' || digits(q + 16, 2, &ss) ||
            memcmp(q + 18, " GMT", 4) != 0)
            return -1;
        year += year < 70 ? 2000 : 1900;
    }
    if (day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    long d = days_from_civil(year, mon + 1, day);
    *out = (time_t)(d * 86400L + hh * 3600L + mm * 60L + ss);
    return 0;
}
