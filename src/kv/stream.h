/* Streams: entries packed in blocks, blocks kept in an ordered vector on
 * their first ID, plus the consumer groups with their pending lists.
 *
 * Block layout (one allocation, bytes in data[]):
 *   master fields:  varint n, then n x (varint len, bytes)
 *   entries:        varint ms-delta, varint seq, varint nf, then
 *                   nf == 0: the master's fields, values only (varint len, bytes)
 *                   nf  > 0: nf x (field, value)
 * An entry's ID is (first.ms + ms-delta, seq). first is the ID of the
 * block's first entry ever (its "master" ID), which stays even when that
 * entry is deleted, so the block index never has to change on XDEL.
 * Deleting an entry removes its bytes (blocks are at most a few KB), so
 * no tombstones are kept; `added` counts every entry the block ever took,
 * as Redis counts deleted entries toward a node's fill, so that MAXLEN ~
 * and node splits match Redis's. */
#ifndef BRISK_KV_STREAM_H
#define BRISK_KV_STREAM_H

#include "kv/server.h"

#include <stdint.h>

typedef struct st_id {
    uint64_t ms, seq;
} st_id;

static inline int st_id_cmp(st_id a, st_id b)
{
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    if (a.seq != b.seq)
        return a.seq < b.seq ? -1 : 1;
    return 0;
}
static inline int st_id_zero(st_id a) { return a.ms == 0 && a.seq == 0; }
#define ST_ID_MAX ((st_id){ UINT64_MAX, UINT64_MAX })
#define ST_ID_MIN ((st_id){ 0, 0 })
#define ST_ID_STR_MAX 42
/* Formats "ms-seq" into out (ST_ID_STR_MAX bytes); returns its length. */
size_t st_id_fmt(char *out, st_id id);

typedef struct st_block {
    st_id first;
    /* The last ID appended, deleted or not: Redis drops a whole node on a
     * MINID trim by the last ID its listpack holds, deleted ones included,
     * so a block whose tail entries were XDELed stays (maybe empty) as the
     * node does in Redis. */
    st_id tail;
    uint32_t len, cap;    /* bytes used / allocated in data */
    uint32_t mf_len;      /* bytes of the master fields at the start of data */
    uint32_t live, added; /* entries present; entries ever appended */
    /* The bytes Redis's listpack for this node would take, but for the
     * live and deleted counts of its master entry (their encoded size
     * changes as they change): Redis opens a new node when these bytes plus
     * the new entry's field and value bytes reach stream-node-max-bytes. */
    uint32_t lpb;
    unsigned char data[];
} st_block;

struct st_consumer;

/* A pending entry: delivered to a consumer, not acknowledged yet. It is in
 * its group's PEL and in its consumer's PEL (the same object). */
typedef struct st_nack {
    st_id id;
    int64_t delivery_ms;
    uint64_t delivery_count;
    struct st_consumer *consumer;
} st_nack;

/* A sorted vector of nack pointers (by ID). */
typedef struct st_pel {
    st_nack **v;
    size_t n, cap;
} st_pel;

typedef struct st_consumer {
    int64_t seen_ms;
    st_pel pel;
    size_t nlen;
    char name[];
} st_consumer;

#define ST_INVALID_READ (-1LL)
typedef struct st_group {
    st_id last_id;
    long long entries_read; /* ST_INVALID_READ when unknown */
    st_pel pel;
    st_consumer **cons; /* sorted by name (bytes) */
    size_t ncons, ccap;
    size_t nlen;
    char name[];
} st_group;

typedef struct kv_stream {
    st_block **blocks; /* blocks[head .. head+nblocks), ordered by first */
    size_t head, nblocks, cap;
    uint64_t length;
    uint64_t entries_added;
    st_id last_id, max_deleted_id;
    /* The ID of the last entry present (last_id is the last ever added, or
     * what XSETID set): kept by appends, dropped by a removal and worked
     * out again on demand, as every XREAD/XREADGROUP asks for it. */
    st_id last_entry;
    int last_entry_ok;
    st_group **groups; /* sorted by name (bytes) */
    size_t ngroups, gcap;
    int group_waiters; /* an XREADGROUP blocked on it once (never cleared) */
} kv_stream;

kv_stream *stream_new(void);
void stream_free(kv_stream *s);
kv_stream *stream_dup(kv_stream *s);
/* A stream with XREADGROUP waiters is going away (t_stream.c): after this
 * batch, the waiters whose key no longer holds a stream get an error. */
void stream_waiters_check_later(void);

/* Appends an entry with id (> last_id, checked by the caller) and
 * nfields field/value pairs at fv[0..2*nfields). */
void stream_append(kv_stream *s, st_id id, const bk_str *fv, size_t nfields);
/* The RDB loader keeps Redis's node boundaries: opens a block with the
 * listpack's master ID and fields (fv as field/value pairs, values
 * unused), appends to it whatever its fill, and counts its deleted entries
 * toward the fill and the tail as Redis does. */
void stream_block_open(kv_stream *s, st_id master, const bk_str *fv, size_t nfields,
                       size_t lp_bytes, uint64_t count, uint64_t deleted);
void stream_append_tail(kv_stream *s, st_id id, const bk_str *fv, size_t nfields);
void stream_block_note_deleted(kv_stream *s, st_id id);

/* ---- iteration ---- */
typedef struct st_iter {
    kv_stream *s;
    st_id start, end;
    int rev;
    size_t bi;         /* block index (relative to head); SIZE_MAX: done */
    size_t pos;        /* byte offset in the block of the next entry (forward) */
    size_t *offs;      /* reverse: entry offsets of the current block */
    size_t noffs, offs_cap, oi;
    /* the current entry */
    st_id id;
    size_t nfields;
    size_t epos;       /* offset of the entry in its block */
    const unsigned char *mf, *fp; /* master fields cursor, entry cursor */
    int same;
} st_iter;

void st_iter_start(st_iter *it, kv_stream *s, st_id start, st_id end, int rev);
/* Next entry in range: 1 (it->id, it->nfields set), 0 at the end. */
int st_iter_next(st_iter *it);
/* Field/value of the current entry, nfields times after st_iter_next. */
void st_iter_field(st_iter *it, bk_str *field, bk_str *value);
/* Removes the current entry; the iteration goes on after it. */
void st_iter_remove(st_iter *it);
void st_iter_stop(st_iter *it);

/* First (first != 0) or last entry ID; 0-0 (first) / 0-0 (last) when empty. */
st_id stream_edge_id(kv_stream *s, int first);
int stream_delete(kv_stream *s, st_id id);

/* Trimming: strategy 0 none, 1 MAXLEN, 2 MINID. limit 0 = none. Returns
 * the number of entries removed. */
enum { ST_TRIM_NONE, ST_TRIM_MAXLEN, ST_TRIM_MINID };
long long stream_trim(kv_stream *s, int strategy, long long maxlen, st_id minid, int approx,
                      long long limit);
size_t stream_node_max_entries(void);
size_t stream_node_max_bytes(void);

/* ---- groups ---- */
st_group *stream_group_find(kv_stream *s, bk_str name);
st_group *stream_group_create(kv_stream *s, bk_str name, st_id id, long long entries_read);
int stream_group_destroy(kv_stream *s, bk_str name);
st_consumer *group_consumer_find(st_group *g, bk_str name);
st_consumer *group_consumer_create(st_group *g, bk_str name);
/* Deletes a consumer and its pending entries; returns how many were pending. */
size_t group_consumer_delete(st_group *g, bk_str name);

st_nack *pel_find(st_pel *p, st_id id);
/* Index of the first nack with id >= id. */
size_t pel_lower(const st_pel *p, st_id id);
void pel_insert(st_pel *p, st_nack *n);
void pel_remove(st_pel *p, st_id id);

long long stream_estimate_distance(kv_stream *s, st_id id);

/* RDB form (stream_rdb.c): writes the value of RDB_TYPE_STREAM_LISTPACKS_2;
 * reads it (v2) or the 5.0-6.2 form. NULL when malformed. */
struct rdb_reader;
void stream_rdb_save(bk_buf *b, kv_stream *s);
kv_stream *stream_rdb_load(struct rdb_reader *r, int v2);
int stream_range_has_tombstones(kv_stream *s, st_id start, int has_end, st_id end);
size_t stream_mem_bytes(const kv_stream *s);
/* XINFO STREAM's radix-tree-nodes: the node count of the radix tree Redis
 * keys its blocks with, worked out from the block keys. */
size_t stream_rax_nodes(const kv_stream *s);

#endif
