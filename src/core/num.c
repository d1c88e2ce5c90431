#include "core/common.h"

int num_parse_u64(const char *p, size_t len, uint64_t max, uint64_t *out)
{
    if (len == 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)p[i] - '0';
        if (d > 9)
            return -1;
        if (d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

size_t num_format_u64(char *out, uint64_t v)
{
    /* Count the digits first, then write them from the end: no reversal
     * (Content-Length on every response goes through here). */
    size_t n = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        n++;
    char *p = out + n;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return n;
}
