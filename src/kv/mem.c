#include "kv/mem.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t used;

static void oom(size_t n)
{
    fprintf(stderr, "brisk-kv: out of memory allocating %zu bytes\n", n);
    abort();
}

void *kv_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    used += malloc_usable_size(p);
    return p;
}

void *kv_calloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        oom(n);
    used += malloc_usable_size(p);
    return p;
}

void *kv_realloc(void *p, size_t n)
{
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    used += malloc_usable_size(q) - old;
    return q;
}

void kv_free(void *p)
{
    if (!p)
        return;
    used -= malloc_usable_size(p);
    free(p);
}

char *kv_strndup(const char *p, size_t n)
{
    char *s = kv_malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

void kv_mem_account(long long delta)
{
    used += (size_t)delta;
}

size_t kv_used_memory(void)
{
    return used;
}

size_t kv_rss_memory(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char b[128];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0)
        return 0;
    b[n] = '\0';
    unsigned long size, rss;
    if (sscanf(b, "%lu %lu", &size, &rss) != 2)
        return 0;
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}
