#include "core/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* per thread: a thread's own buffers cost no shared counter */
static _Thread_local size_t held;

int buf_reserve(bk_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t need = b->len + extra;
    if (need < b->len)
        return -1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > ((size_t)-1) / 2)
            return -1;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d)
        return -1;
    held += cap - b->cap;
    b->data = d;
    b->cap = cap;
    return 0;
}

int buf_append(bk_buf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0; /* (an empty buffer has no data to copy to: memcpy(NULL, p, 0)) */
    if (buf_reserve(b, n) < 0)
        return -1;
    buf_put(b, p, n);
    return 0;
}

void buf_free(bk_buf *b)
{
    held -= b->cap;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int buf_resize(bk_buf *b, size_t cap)
{
    if (cap < b->len)
        cap = b->len;
    if (cap == b->cap)
        return 0;
    if (cap == 0) {
        buf_free(b);
        return 0;
    }
    char *d = realloc(b->data, cap);
    if (!d)
        return -1;
    held = held - b->cap + cap;
    b->data = d;
    b->cap = cap;
    return 0;
}

size_t buf_held_bytes(void)
{
    return held;
}

int buf_appendf(bk_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n >= (b->data ? b->cap - b->len : 0)) { /* did not fit: make room, again */
        if (buf_reserve(b, (size_t)n + 1) < 0)
            return -1;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
    return 0;
}
