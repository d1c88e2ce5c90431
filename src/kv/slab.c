#include "kv/slab.h"

#include "core/common.h"
#include "kv/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CHUNK_PAGES 64 /* 4 MiB of address space per mmap */
#define NCLASSES SLAB_NCLASSES

/* The header at the start of every page. slot_size comes first: slab_usable
 * reads it without knowing the struct. */
typedef struct slab_page {
    uint32_t slot_size;
    uint32_t nslots;
    uint32_t used;   /* slots handed out and not freed */
    uint32_t carved; /* slots ever handed out (the rest were never touched) */
    void *free;      /* freed slots of this page, linked through their first word */
    struct slab_page *prev, *next; /* the class's list of pages with room */
    uint8_t cls;
    uint8_t has_room; /* on the class list */
} slab_page;

#define FIRST_SLOT ((sizeof(slab_page) + 15) & ~(size_t)15)

typedef struct {
    slab_page *room; /* pages with at least one free slot; allocation takes the first */
    size_t npages;
} slab_class;

static slab_class classes[NCLASSES];
static uint8_t class_of[SLAB_MAX / 8 + 1]; /* (n + 7) / 8 -> class */
static uint32_t class_size[NCLASSES];
static slab_page *free_pages;         /* released pages, ready for reuse */
static char *chunk_next, *chunk_end;  /* pages not yet carved from the last chunk */
static slab_stats stats;

/* 8-byte steps to 128, 16 to 256, 32 to 512, 64 to 1024: at most ~6% of a
 * slot is padding past 128 bytes. */
static void init_classes(void)
{
    int c = 0;
    for (uint32_t s = 8; s <= SLAB_MAX;) {
        class_size[c++] = s;
        s += s < 128 ? 8 : s < 256 ? 16 : s < 512 ? 32 : 64;
    }
    c = 0;
    for (size_t i = 1; i <= SLAB_MAX / 8; i++) {
        while (class_size[c] < i * 8)
            c++;
        class_of[i] = (uint8_t)c;
    }
    class_of[0] = 0;
}

size_t slab_class_size(size_t n)
{
    return slab_index_size(slab_class_index(n));
}

unsigned slab_class_index(size_t n)
{
    if (BK_UNLIKELY(!class_size[0]))
        init_classes();
    return class_of[(n + 7) / 8];
}

size_t slab_index_size(unsigned idx)
{
    if (BK_UNLIKELY(!class_size[0]))
        init_classes();
    return class_size[idx];
}

static void oom(const char *what)
{
    fprintf(stderr, "brisk-kv: out of memory (%s)\n", what);
    abort();
}

static slab_page *page_get(void)
{
    if (free_pages) {
        slab_page *p = free_pages;
        UNPOISON(p, sizeof *p);
        free_pages = p->next;
        return p;
    }
    if (chunk_next == chunk_end) {
        size_t want = CHUNK_PAGES * SLAB_PAGE_SIZE;
        size_t map = want + SLAB_PAGE_SIZE;
        char *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            oom("slab chunk");
        uintptr_t align = SLAB_PAGE_SIZE - 1;
        char *start = (char *)(((uintptr_t)m + align) & ~align);
        if (start > m)
            munmap(m, (size_t)(start - m));
        if (start + want < m + map)
            munmap(start + want, (size_t)(m + map - (start + want)));
        chunk_next = start;
        chunk_end = start + want;
        stats.chunks_bytes += want;
        POISON(start, want);
#if defined(__SANITIZE_ADDRESS__)
        /* Entries hold the only pointers to their value objects: let the
         * leak checker see them. */
        __lsan_register_root_region(start, want);
#endif
    }
    slab_page *p = (slab_page *)(void *)chunk_next;
    chunk_next += SLAB_PAGE_SIZE;
    UNPOISON(p, sizeof *p);
    return p;
}

static void page_release(slab_page *p)
{
    madvise(p, SLAB_PAGE_SIZE, MADV_DONTNEED);
    POISON((char *)p + sizeof *p, SLAB_PAGE_SIZE - sizeof *p);
    p->next = free_pages;
    free_pages = p;
}

static void room_push(slab_class *k, slab_page *p)
{
    p->prev = NULL;
    p->next = k->room;
    if (k->room)
        k->room->prev = p;
    k->room = p;
    p->has_room = 1;
}

static void room_remove(slab_class *k, slab_page *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        k->room = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
    p->has_room = 0;
}

void *slab_alloc(size_t n)
{
    if (BK_UNLIKELY(!class_size[0]))
        init_classes();
    int c = class_of[(n + 7) / 8];
    slab_class *k = &classes[c];
    slab_page *p = k->room;
    if (!p) {
        p = page_get();
        p->slot_size = class_size[c];
        p->nslots = (uint32_t)((SLAB_PAGE_SIZE - FIRST_SLOT) / p->slot_size);
        p->used = p->carved = 0;
        p->free = NULL;
        p->cls = (uint8_t)c;
        k->npages++;
        stats.pages_in_use++;
        room_push(k, p);
    }
    void *s;
    if (p->free) {
        s = p->free;
        UNPOISON(s, p->slot_size);
        memcpy(&p->free, s, sizeof(void *));
    } else {
        s = (char *)p + FIRST_SLOT + (size_t)p->carved * p->slot_size;
        p->carved++;
        UNPOISON(s, p->slot_size);
    }
    if (++p->used == p->nslots)
        room_remove(k, p);
    stats.slots_bytes += p->slot_size;
    kv_mem_account((long long)p->slot_size);
    return s;
}

void slab_free(void *s)
{
    if (!s)
        return;
    slab_page *p = (slab_page *)((uintptr_t)s & ~(uintptr_t)(SLAB_PAGE_SIZE - 1));
    slab_class *k = &classes[p->cls];
#if defined(__SANITIZE_ADDRESS__)
    memset(s, 0, p->slot_size); /* no stale pointers for the leak checker */
#endif
    memcpy(s, &p->free, sizeof(void *));
    p->free = s;
    POISON(s, p->slot_size);
    stats.slots_bytes -= p->slot_size;
    kv_mem_account(-(long long)p->slot_size);
    if (!p->has_room)
        room_push(k, p);
    /* An empty page goes back to the kernel unless it is the class's only
     * page with room: keeping that one avoids a map/unmap flip-flop for a
     * key set and deleted in a loop. */
    if (--p->used == 0 && (k->room != p || p->next)) {
        room_remove(k, p);
        k->npages--;
        stats.pages_in_use--;
        page_release(p);
    }
}

void slab_get_stats(slab_stats *st)
{
    *st = stats;
}
