/* Allocation wrappers for brisk-kv that keep the used_memory figure that
 * INFO reports and maxmemory enforces. Out of memory aborts the server with
 * a message (server binaries may stop on OOM). Main thread only. */
#ifndef BRISK_KV_MEM_H
#define BRISK_KV_MEM_H

#include <stddef.h>

void *kv_malloc(size_t n);
void *kv_calloc(size_t n);
void *kv_realloc(void *p, size_t n);
void kv_free(void *p);
char *kv_strndup(const char *p, size_t n);
/* Adds delta to the used-memory figure (allocators of their own, like the
 * slab of keyspace entries, report what they hand out). */
void kv_mem_account(long long delta);
/* Bytes currently allocated through these wrappers. */
size_t kv_used_memory(void);
/* Resident set size of the process, from /proc (0 when unknown). */
size_t kv_rss_memory(void);

#endif
