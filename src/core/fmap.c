/* Read-only file mappings that survive the file shrinking (see fmap.h). */
#include "core/fmap.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

_Thread_local const bk_fmap *fmap_reading;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction before; /* SIGBUS's handler before ours */
static uintptr_t page_mask;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    bk_fmap *m = (bk_fmap *)fmap_reading; /* (the owner's, not const) */
    uintptr_t a = (uintptr_t)si->si_addr;
    if (m && m->p && a >= (uintptr_t)m->p && a - (uintptr_t)m->p < m->len) {
        /* The page is gone from the file: zeros in its place, so the read
         * that faulted finishes; the reader sees m->bad. */
        void *pg = (void *)(a & page_mask);
        size_t psz = (size_t)~page_mask + 1;
        if (mmap(pg, psz, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
            m->bad = 1;
            return;
        }
    }
    /* Not ours: the previous disposition, and the fault happens again. */
    sigaction(sig, &before, NULL);
}

/* Ours is SIGBUS's handler, installed now unless it already is (someone
 * may have taken SIGBUS since the last mapping). 0, or -1. */
static int install(void)
{
    int rc = -1;
    pthread_mutex_lock(&lock);
    struct sigaction cur;
    if (!page_mask) {
        long psz = sysconf(_SC_PAGESIZE);
        if (psz > 0)
            page_mask = ~(uintptr_t)(psz - 1);
    }
    if (page_mask && sigaction(SIGBUS, NULL, &cur) == 0) {
        if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus) {
            rc = 0;
        } else {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_sigbus;
            sa.sa_flags = SA_SIGINFO;
            sigemptyset(&sa.sa_mask);
            rc = sigaction(SIGBUS, &sa, &before);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int fmap_map(bk_fmap *m, int fd, size_t len)
{
    if (len == 0) {
        errno = EINVAL;
        return -1;
    }
    if (install() < 0)
        return -1;
    void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    m->p = p;
    m->len = len;
    m->bad = 0;
    return 0;
}

void fmap_unmap(bk_fmap *m)
{
    if (m->p)
        munmap((void *)m->p, m->len);
    m->p = NULL;
    m->len = 0;
    m->bad = 0;
}
