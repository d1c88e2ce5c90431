/* Read-only mappings of files that may shrink while they are read.
 *
 * Reading a mapping of a file that another process truncates raises
 * SIGBUS on the pages it no longer has. A thread reads a mapping between
 * fmap_enter and fmap_leave; a SIGBUS on that mapping meanwhile puts a
 * page of zeros where the lost page was, marks the mapping bad and lets
 * the read go on. The reader checks fmap_bad afterwards and throws away
 * what it made from the bytes (zeros that are not the file's). A SIGBUS
 * anywhere else gets the handler that was there before (or the default:
 * the process dies as it would have).
 *
 * A bad mapping stays bad: its owner maps the file again once it has
 * reopened it. */
#ifndef BRISK_CORE_FMAP_H
#define BRISK_CORE_FMAP_H

#include <signal.h>
#include <stddef.h>

typedef struct {
    const char *p;              /* NULL: not mapped */
    size_t len;
    volatile sig_atomic_t bad;  /* a page was lost while it was read */
} bk_fmap;

/* Maps len bytes (> 0) of fd from offset 0 (and makes sure the SIGBUS
 * handler is installed). 0, or -1 with errno. */
int fmap_map(bk_fmap *m, int fd, size_t len);
void fmap_unmap(bk_fmap *m);

/* The mapping this thread is reading (NULL: none). */
extern _Thread_local const bk_fmap *fmap_reading;

static inline void fmap_enter(const bk_fmap *m)
{
    fmap_reading = m;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void fmap_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    fmap_reading = NULL;
}

static inline int fmap_bad(const bk_fmap *m)
{
    return m->bad != 0;
}

#endif
