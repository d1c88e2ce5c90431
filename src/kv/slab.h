/* Fixed-size slots for the keyspace entries, so that a key costs its bytes
 * rounded up to 8 and nothing else: no malloc header, no per-entry size
 * field. Slots come from 64 KiB pages of one size class each (8-byte steps
 * up to 128 bytes, then coarser up to SLAB_MAX); a page is found from any of
 * its slots by masking the address, and its header knows the slot size.
 * Pages are carved from 4 MiB mmap'd chunks; a page whose slots are all
 * free is given back to the kernel (MADV_DONTNEED) and reused.
 *
 * Main thread only (the keyspace is). Allocations bigger than SLAB_MAX are
 * the caller's business (kv_malloc). Out of memory aborts, like kv_malloc.
 * Under AddressSanitizer free slots are poisoned. */
#ifndef BRISK_KV_SLAB_H
#define BRISK_KV_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define SLAB_PAGE_SIZE ((size_t)64 * 1024)
#define SLAB_MAX 1024

/* A slot of at least n bytes (1 <= n <= SLAB_MAX), 8-byte aligned, not
 * zeroed. Valid until slab_free. */
void *slab_alloc(size_t n);
void slab_free(void *p);
/* The usable size of the slot p (its size class). */
static inline size_t slab_usable(const void *p)
{
    const uint32_t *page = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)(SLAB_PAGE_SIZE - 1));
    return page[0]; /* slab_page.slot_size is the first member */
}
/* The size class a request of n bytes gets (n <= SLAB_MAX): its slot size,
 * and its index (< SLAB_NCLASSES), which lets an owner that keeps the index
 * know a slot's size without touching the page header. */
#define SLAB_NCLASSES 40
size_t slab_class_size(size_t n);
unsigned slab_class_index(size_t n);
size_t slab_index_size(unsigned idx);

typedef struct slab_stats {
    size_t chunks_bytes;  /* mapped from the kernel */
    size_t pages_in_use;  /* pages holding at least one slot */
    size_t slots_bytes;   /* bytes of the slots handed out */
} slab_stats;
void slab_get_stats(slab_stats *st);

#endif
