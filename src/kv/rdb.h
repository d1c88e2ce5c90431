/* Redis's RDB object encoding, version 10 (Redis 7.0): the value part of
 * a DUMP payload and of an RDB file. The writer picks the encoding Redis
 * 7.0 would hold the same value in (listpack, intset, quicklist of
 * listpacks, skiplist as ZSET_2, ...), so DUMP output matches Redis's byte
 * for byte where the content decides it; the reader accepts every object
 * encoding an RDB of version <= 10 can hold (zipmap, ziplist, intset,
 * quicklist v1/v2, listpack, LZF-compressed strings) and refuses anything
 * malformed without crashing: every read is bounds-checked.
 *
 * The writer appends to a core buf; the reader works on a byte range the
 * caller keeps alive while it runs. SAVE / full sync build on the same
 * calls: rdb_save_len, rdb_save_string, rdb_save_object_type and
 * rdb_save_object for each key, and rdb_load_* on the way in. */
#ifndef BRISK_KV_RDB_H
#define BRISK_KV_RDB_H

#include "core/buf.h"
#include "kv/server.h"
#include "kv/types.h"

#include <stddef.h>
#include <stdint.h>

#define RDB_VERSION 10

/* Object type bytes (rdb.h of Redis's RDB format description). */
enum {
    RDB_TYPE_STRING = 0,
    RDB_TYPE_LIST = 1,
    RDB_TYPE_SET = 2,
    RDB_TYPE_ZSET = 3,
    RDB_TYPE_HASH = 4,
    RDB_TYPE_ZSET_2 = 5,
    RDB_TYPE_HASH_ZIPMAP = 9,
    RDB_TYPE_LIST_ZIPLIST = 10,
    RDB_TYPE_SET_INTSET = 11,
    RDB_TYPE_ZSET_ZIPLIST = 12,
    RDB_TYPE_HASH_ZIPLIST = 13,
    RDB_TYPE_LIST_QUICKLIST = 14,
    RDB_TYPE_STREAM_LISTPACKS = 15,
    RDB_TYPE_HASH_LISTPACK = 16,
    RDB_TYPE_ZSET_LISTPACK = 17,
    RDB_TYPE_LIST_QUICKLIST_2 = 18,
    RDB_TYPE_STREAM_LISTPACKS_2 = 19,
};

/* Opcodes of an RDB file (between keys). */
enum {
    RDB_OPCODE_FUNCTION2 = 245,
    RDB_OPCODE_MODULE_AUX = 247,
    RDB_OPCODE_IDLE = 248,
    RDB_OPCODE_FREQ = 249,
    RDB_OPCODE_AUX = 250,
    RDB_OPCODE_RESIZEDB = 251,
    RDB_OPCODE_EXPIRETIME_MS = 252,
    RDB_OPCODE_EXPIRETIME = 253,
    RDB_OPCODE_SELECTDB = 254,
    RDB_OPCODE_EOF = 255,
};

/* CRC-64/Jones (reflected, poly 0xad93d23594c935a9), as RDB and DUMP use. */
uint64_t rdb_crc64(uint64_t crc, const void *p, size_t n);

/* LZF (the liblzf format). rdb_lzf_compress returns the compressed length,
 * or 0 when the result would not fit in cap bytes; it makes the same
 * choices as liblzf, so the output equals Redis's. rdb_lzf_decompress
 * returns the bytes written, or 0 on malformed input / overflow. */
size_t rdb_lzf_compress(const void *in, size_t n, void *out, size_t cap);
size_t rdb_lzf_decompress(const void *in, size_t n, void *out, size_t cap);

/* ---- writing ---- */

void rdb_save_len(bk_buf *b, uint64_t len);
/* A string as Redis writes one: int-encoded when it is a small canonical
 * integer, LZF-compressed when longer than 20 bytes and that saves at
 * least 4 bytes (rdbcompression yes), else length and bytes. */
void rdb_save_string(bk_buf *b, const char *p, size_t n);
/* The type byte the value of e is written with. */
int rdb_object_type(kv_entry *e);
/* The value of e (no type byte). */
void rdb_save_object(bk_buf *b, kv_entry *e);
/* A DUMP payload: type, value, RDB version (2 bytes LE), CRC-64 (8 LE). */
void rdb_dump_payload(bk_buf *b, kv_entry *e);
/* The quicklist Redis 7.0 would hold the list in: node count and the
 * listpack bytes of all nodes (DEBUG OBJECT). Returns the fill option
 * (list-max-listpack-size) it was split by. */
int rdb_list_shape(kv_list *l, size_t *nodes, size_t *bytes);
/* Listpack building and walking, for the stream codec (stream_rdb.c):
 * begin resets b, append adds a string (integers get int encodings), end
 * closes it with count elements; walk calls fn per element (integers as
 * text) and returns the count or -1 when malformed. */
void rdb_lp_begin(bk_buf *b);
void rdb_lp_append(bk_buf *b, const char *p, size_t n);
void rdb_lp_end(bk_buf *b, size_t count);
long long rdb_lp_walk(const unsigned char *lp, size_t size,
                      int (*fn)(void *ud, const char *p, size_t n), void *ud);
/* Redis 7.0's OBJECT ENCODING name for the value of e. */
const char *rdb_encoding_name(kv_entry *e);

/* ---- reading ---- */

typedef struct rdb_reader {
    const unsigned char *p, *end;
} rdb_reader;

/* A loaded value: strings in s (kv_malloc'd, s_len bytes), other types in
 * obj (kv_list, dict of hfields or members, zset). The caller owns it:
 * store it with rdb_value_store or free it with rdb_value_free. */
typedef struct rdb_value {
    int type; /* enum kv_type */
    void *obj;
    char *s;
    size_t s_len;
} rdb_value;

/* Reads a length (not a special encoding). Returns 0 or -1. */
int rdb_load_len(rdb_reader *r, uint64_t *len);
/* Reads a string of any encoding into a kv_malloc'd buffer (NUL added
 * after the bytes). Returns 0 or -1. */
int rdb_load_string(rdb_reader *r, char **s, size_t *n);
/* Reads a value of the given type byte. Returns 0, or -1 (malformed,
 * unsupported type, empty collection, duplicate members). */
int rdb_load_object(rdb_reader *r, int rdbtype, rdb_value *v);
void rdb_value_free(rdb_value *v);
/* Adds the value under key (absent from db) and returns the entry; v is
 * consumed. */
kv_entry *rdb_value_store(kv_db *db, bk_str key, rdb_value *v);

/* Checks the footer of a DUMP payload: version <= RDB_VERSION and the
 * CRC-64. Returns 0 or -1. */
int rdb_verify_payload(const char *p, size_t n);
/* Decodes a DUMP payload (already verified): one object, then the footer.
 * Returns 0 or -1. */
int rdb_load_payload(const char *p, size_t n, rdb_value *v);

/* ---- dump.rdb (rdb_file.c) ---- */

/* Writes the whole keyspace as an RDB file image to fd (a file, a pipe or
 * a replica's socket: blocking writes). Returns 0 or -1 (write error). */
int rdb_write_snapshot(int fd);
/* Loads an RDB file image (e.g. received from a master) into the
 * databases; expired keys are dropped. A key already present is an error,
 * or with merge replaced by the loaded one. Returns 0, or -1 with a message
 * in err (the databases then hold what was loaded before the error). */
int rdb_load_image(const unsigned char *img, size_t size, int merge, char *err, size_t errlen);
/* Where the last image rdb_load_image read without error ended (past the
 * checksum): an AOF base with an RDB preamble goes on with commands there. */
extern size_t rdb_load_end;
/* Writes every database to path through a temp file renamed over it.
 * Returns 0, or -1 (logged). */
int rdb_save_file(const char *path);
/* Loads path into the databases (see rdb_load_image; on an error without
 * merge every database is flushed). Returns 1 when loaded, 0 when there is
 * no such file, -1 with a message in err. */
int rdb_load_file(const char *path, int merge, char *err, size_t errlen);

/* The replication aux fields of the last RDB rdb_load_image read
 * ("repl-id", "repl-offset", "repl-stream-db"; valid when both the id and
 * the offset were there). A file saved by SAVE/BGSAVE/SHUTDOWN carries
 * them (repl_rdb_save_info) so a restarted node can PSYNC. */
typedef struct rdb_repl_aux {
    int valid;
    char id[41];
    long long offset;
    int stream_db;
} rdb_repl_aux;
extern rdb_repl_aux rdb_loaded_repl;
/* rdb-key-save-delay / key-load-delay (Redis's test knobs): microseconds
 * slept per key written / loaded; negative -N sleeps 1 us every N keys. */
extern int rdb_key_save_delay, rdb_key_load_delay;

/* A load that takes the RDB as it arrives (a replica's diskless load):
 * keys go into dbs[0..ndbs) (a replica's spare set, swapped in when the
 * load is done); function libraries are kept until rdb_stream_functions
 * installs them in place of the current ones. rdb_stream_feed parses the
 * whole items in p[0..n) (stopping past max_bytes, so the event loop gets
 * a turn) and says in *used how many bytes it took: 1 when the EOF opcode
 * and checksum were read, 0 for more, -1 with err (final: no more bytes
 * come, so an item cut short is an error). */
typedef struct rdb_stream {
    kv_db *dbs;
    int ndbs, header, ver, db, have_repl;
    int64_t expire;
    uint64_t crc;
    size_t loaded;
    struct {
        char *code;
        size_t len;
    } *funcs;
    int nfuncs;
} rdb_stream;
void rdb_stream_init(rdb_stream *s, kv_db *dbs, int ndbs);
int rdb_stream_feed(rdb_stream *s, const unsigned char *p, size_t n, int final, size_t max_bytes,
                    size_t *used, char *err, size_t errlen);
int rdb_stream_functions(rdb_stream *s, char *err, size_t errlen);
void rdb_stream_free(rdb_stream *s);

/* childinfo.c: a BGSAVE child's progress and copy-on-write size, sent to
 * the parent over a pipe (INFO persistence's current_* fields). The parent
 * calls childinfo_open before fork, then childinfo_in_child (child) or
 * childinfo_in_parent; the child's writer calls childinfo_progress per key
 * and childinfo_final when the save worked; the parent's cron calls
 * childinfo_poll, and childinfo_child_ended once the child is reaped. */
typedef struct {
    uint64_t keys_done, keys_total;
    uint64_t cow, cow_peak; /* bytes, while a child runs */
    int64_t cow_at_ms;      /* when cow was last reported (0: never) */
    uint64_t last_cow;      /* rdb_last_cow_size: what the last good save reported */
} kv_childinfo;
extern kv_childinfo childinfo;
extern int childinfo_fd;
int childinfo_open(int fds[2]);
void childinfo_in_child(int fds[2]);
void childinfo_in_parent(int fds[2], uint64_t keys_total);
void childinfo_progress_slow(uint64_t keys);
/* Cheap per key: looks at the clock once per 64 keys (every key when
 * rdb-key-save-delay slows the save down). */
static inline void childinfo_progress(uint64_t keys)
{
    if (BK_UNLIKELY(childinfo_fd >= 0) && ((keys & 63) == 0 || rdb_key_save_delay))
        childinfo_progress_slow(keys);
}
void childinfo_final(uint64_t keys);
void childinfo_poll(void);
void childinfo_child_ended(int ok);
/* replication.c: the fields a file saved now carries. Returns 0 when it
 * carries none (a master without backlog, a replica that never synced). */
int repl_rdb_save_info(rdb_repl_aux *out);
/* replication.c: start-up loaded dump.rdb: its replication fields become
 * our history (a replica's cached master, a master's replid2). */
void repl_rdb_loaded(void);

#endif
