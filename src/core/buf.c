#include "core/buf.h"

#include <stdlib.h>

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
    b->data = d;
    b->cap = cap;
    return 0;
}

int buf_append(bk_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    buf_put(b, p, n);
    return 0;
}

void buf_free(bk_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
