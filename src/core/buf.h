/* Growable byte buffer. The owner frees it with buf_free(); data may move on
 * growth, so never keep pointers into it across an append. */
#ifndef BRISK_CORE_BUF_H
#define BRISK_CORE_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} bk_buf;

/* Makes room for extra more bytes. Returns 0, or -1 when out of memory. */
int buf_reserve(bk_buf *b, size_t extra);
int buf_append(bk_buf *b, const void *p, size_t n);
void buf_free(bk_buf *b);
/* Sets the capacity to exactly cap (not under len; 0 frees the data).
 * Returns 0, or -1 when out of memory (the buffer is left as it was). */
int buf_resize(bk_buf *b, size_t cap);
/* Bytes the buffers of the calling thread hold: their capacities added up.
 * A server that reports or limits its memory adds this to what it counts
 * itself (a buffer freed by another thread than the one that grew it
 * leaves the figures of both off). */
size_t buf_held_bytes(void);
/* Appends printf-style text (whole, however long). Returns 0, or -1 when
 * out of memory or the format fails. */
int buf_appendf(bk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends without a capacity check: the caller reserved the room. */
static inline void buf_put(bk_buf *b, const void *p, size_t n)
{
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

#endif
