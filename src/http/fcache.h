/* A per-worker open-file cache: path -> (fd, metadata, validators, and the
 * bytes of small files), so a hot file costs no open/fstat/close per
 * request. Entries are revalidated with one stat at most once per
 * `valid_ms`. Misses are cached too (err != 0), so 404 floods stay in
 * memory. Single-threaded: each worker owns its cache. */
#ifndef BRISK_HTTP_FCACHE_H
#define BRISK_HTTP_FCACHE_H

#include "core/common.h"
#include "core/fmap.h"
#include "http/mime.h"

#include <sys/types.h>
#include <time.h>

typedef struct fcache fcache;
typedef struct fcache_entry fcache_entry;

struct fcache_entry {
    fcache_entry *hnext;          /* hash chain */
    fcache_entry *lru_prev, *lru_next;
    uint32_t hash;
    uint32_t refs;                /* the table's own reference + responses in flight */
    int in_table;
    uint64_t checked_ms;          /* last revalidation */

    int err;                      /* 0, or errno from opening (ENOENT, EXDEV, ...) */
    int fd;                       /* -1 when err != 0 */
    int is_dir;
    uint64_t size;
    struct timespec mtime;
    dev_t dev;
    ino_t ino;
    char *content;                /* whole file when size <= memory limit, else NULL */
    bk_fmap map;                  /* a mapping of a larger file (fcache_map), or none */
    bk_str mime;                     /* Content-Type (points into the MIME table) */
    char etag[48];                /* "\"ino-size-mtime\"", quoted */
    uint8_t etag_len;
    char last_modified[32];       /* IMF-fixdate */
    /* Until this time (loop ms) the file is known to have no compressed
     * sibling worth sending (static.c pick_variant); 0 = unknown. Reset
     * whenever the entry is (re)opened. */
    uint64_t no_variant_until;
    /* static.c's header lines for this file (Content-Type to
     * Accept-Ranges), built on first use; freed with the entry and
     * whenever it is (re)opened. NULL = not built. */
    char *head;
    uint32_t head_len;

    uint32_t key_len;
    char key[];                   /* relative path, no leading slash; "" = root */
};

typedef struct {
    int root_fd;
    uint64_t valid_ms;
    uint32_t memory_max;  /* inline files up to this size */
    const mime_table *mime;
} fcache_opts;

fcache *fcache_new(uint32_t max_entries);
/* Drops every entry; those still referenced die at their last release. */
void fcache_clear(fcache *fc);
void fcache_free(fcache *fc);

/* Looks up (or opens) root/path. Always returns an entry with a reference
 * for the caller (check ->err), or NULL when out of memory. */
fcache_entry *fcache_get(fcache *fc, const char *path, size_t len, uint64_t now_ms,
                         const fcache_opts *o);
void fcache_release(fcache_entry *e);

/* A read-only mapping of e's file (made on first use, kept with the
 * entry), for a connection that copies file bytes in user space (TLS
 * without kernel TLS): it reads them there instead of pread'ing them.
 * NULL when e's bytes are in memory already, the file is empty or over
 * FCACHE_MAP_MAX, FCACHE_MAPS_MAX mappings exist, mmap fails, or a page
 * of the mapping was lost (the file shrank): then the file is read. */
#define FCACHE_MAP_MAX ((uint64_t)1 << 30)
#define FCACHE_MAPS_MAX 1024
const bk_fmap *fcache_map(fcache_entry *e);

#endif
