#include "http/fcache.h"

#include "core/clock.h"
#include "core/fsopen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct fcache {
    fcache_entry **buckets;
    uint32_t mask;
    uint32_t count, max;
    fcache_entry lru; /* sentinel: lru.lru_next is the most recent */
};

static uint32_t hash_path(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

fcache *fcache_new(uint32_t max_entries)
{
    fcache *fc = calloc(1, sizeof *fc);
    if (!fc)
        return NULL;
    uint32_t size = 64;
    while (size < max_entries && size < (1u << 20))
        size *= 2;
    fc->buckets = calloc(size, sizeof *fc->buckets);
    if (!fc->buckets) {
        free(fc);
        return NULL;
    }
    fc->mask = size - 1;
    fc->max = max_entries ? max_entries : 1;
    fc->lru.lru_next = fc->lru.lru_prev = &fc->lru;
    return fc;
}

/* Mappings that exist, in every worker: each is a VMA, and the kernel
 * allows a process about 65,000 of them. */
static _Atomic unsigned nmaps;

static void entry_unmap(fcache_entry *e)
{
    if (!e->map.p)
        return;
    fmap_unmap(&e->map);
    nmaps--;
}

const bk_fmap *fcache_map(fcache_entry *e)
{
    if (!e->map.p) {
        if (e->err || e->is_dir || e->content || e->size == 0 || e->size > FCACHE_MAP_MAX ||
            nmaps >= FCACHE_MAPS_MAX)
            return NULL;
        if (++nmaps > FCACHE_MAPS_MAX || fmap_map(&e->map, e->fd, (size_t)e->size) < 0) {
            nmaps--;
            return NULL;
        }
    }
    return fmap_bad(&e->map) ? NULL : &e->map;
}

static void entry_free(fcache_entry *e)
{
    entry_unmap(e);
    if (e->fd >= 0)
        close(e->fd);
    free(e->content);
    free(e->head);
    free(e);
}

void fcache_release(fcache_entry *e)
{
    if (e && --e->refs == 0)
        entry_free(e);
}

static void lru_unlink(fcache_entry *e)
{
    e->lru_prev->lru_next = e->lru_next;
    e->lru_next->lru_prev = e->lru_prev;
}

static void lru_push_front(fcache *fc, fcache_entry *e)
{
    e->lru_next = fc->lru.lru_next;
    e->lru_prev = &fc->lru;
    fc->lru.lru_next->lru_prev = e;
    fc->lru.lru_next = e;
}

static void table_remove(fcache *fc, fcache_entry *e)
{
    fcache_entry **pp = &fc->buckets[e->hash & fc->mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(e);
    e->in_table = 0;
    fc->count--;
    fcache_release(e);
}

void fcache_clear(fcache *fc)
{
    while (fc->lru.lru_next != &fc->lru)
        table_remove(fc, fc->lru.lru_next);
}

void fcache_free(fcache *fc)
{
    if (!fc)
        return;
    fcache_clear(fc);
    free(fc->buckets);
    free(fc);
}

static void fill_validators(fcache_entry *e)
{
    int n = snprintf(e->etag, sizeof e->etag, "\"%lx-%llx-%llx\"", (unsigned long)e->ino,
                     (unsigned long long)e->size,
                     (unsigned long long)e->mtime.tv_sec * 1000000000ull +
                         (unsigned long long)e->mtime.tv_nsec);
    e->etag_len = (uint8_t)BK_MIN(n, (int)sizeof e->etag - 1);
    clock_format_http_date(e->mtime.tv_sec, e->last_modified);
}

/* (Re)opens the file behind e and reads its metadata. */
static void entry_open(fcache_entry *e, const fcache_opts *o)
{
    entry_unmap(e);
    if (e->fd >= 0)
        close(e->fd);
    free(e->content);
    e->content = NULL;
    e->fd = -1;
    e->err = 0;
    e->is_dir = 0;
    e->no_variant_until = 0;
    free(e->head);
    e->head = NULL;
    e->head_len = 0;

    int fd = fs_open_beneath(o->root_fd, e->key, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        e->err = -fd;
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        e->err = errno;
        close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        e->err = EACCES; /* devices, FIFOs, sockets are never served */
        close(fd);
        return;
    }
    e->fd = fd;
    e->is_dir = S_ISDIR(st.st_mode);
    e->size = (uint64_t)st.st_size;
    e->mtime = st.st_mtim;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->mime = mime_lookup(o->mime, (bk_str){ e->key, e->key_len });
    fill_validators(e);
    if (!e->is_dir && e->size <= o->memory_max && e->size > 0) {
        e->content = malloc(e->size);
        if (e->content && pread(fd, e->content, e->size, 0) != (ssize_t)e->size) {
            free(e->content); /* changed under us: serve it with sendfile */
            e->content = NULL;
        }
    }
}

/* True when the path still names the same file, unchanged. */
static int entry_still_valid(const fcache_entry *e, const fcache_opts *o)
{
    struct stat st;
    int rc = fstatat(o->root_fd, e->key[0] ? e->key : ".", &st, 0);
    if (e->err)
        return rc < 0 && errno == e->err;
    return rc == 0 && st.st_ino == e->ino && st.st_dev == e->dev &&
           (uint64_t)st.st_size == e->size && st.st_mtim.tv_sec == e->mtime.tv_sec &&
           st.st_mtim.tv_nsec == e->mtime.tv_nsec;
}

fcache_entry *fcache_get(fcache *fc, const char *path, size_t len, uint64_t now_ms,
                         const fcache_opts *o)
{
    uint32_t h = hash_path(path, len);
    fcache_entry *e = fc->buckets[h & fc->mask];
    while (e && !(e->hash == h && e->key_len == len && memcmp(e->key, path, len) == 0))
        e = e->hnext;

    if (e) {
        if (now_ms - e->checked_ms >= o->valid_ms) {
            e->checked_ms = now_ms;
            if (!entry_still_valid(e, o)) {
                if (e->refs > 1) { /* in flight: keep the old one alive for them */
                    table_remove(fc, e);
                    return fcache_get(fc, path, len, now_ms, o);
                }
                entry_open(e, o);
            }
        }
        if (fc->lru.lru_next != e) {
            lru_unlink(e);
            lru_push_front(fc, e);
        }
        e->refs++;
        return e;
    }

    e = malloc(sizeof *e + len + 1);
    if (!e)
        return NULL;
    memset(e, 0, sizeof *e);
    e->fd = -1;
    memcpy(e->key, path, len);
    e->key[len] = '\0';
    e->key_len = (uint32_t)len;
    e->hash = h;
    e->checked_ms = now_ms;
    entry_open(e, o);

    if (fc->count >= fc->max)
        table_remove(fc, fc->lru.lru_prev); /* least recently used */
    e->hnext = fc->buckets[h & fc->mask];
    fc->buckets[h & fc->mask] = e;
    lru_push_front(fc, e);
    e->in_table = 1;
    fc->count++;
    e->refs = 2; /* the table's and the caller's */
    return e;
}
