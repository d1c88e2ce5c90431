/* dump.rdb: the whole keyspace as an RDB version 10 file (magic, AUX
 * fields, per database SELECTDB + RESIZEDB, keys with EXPIRETIME_MS, EOF,
 * CRC-64), written by SAVE / BGSAVE and loaded at start-up, with the
 * object codec of rdb.c. */
#include "kv/rdb.h"

#include "core/log.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/script.h"
#include "kv/types.h"
#include "kv/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RDB_FLUSH_AT (64 * 1024)

typedef struct {
    int fd;
    bk_buf b;
    uint64_t crc;
    int failed;
    int err; /* errno of the failed write */
} rdb_out;

static void out_flush(rdb_out *o)
{
    size_t off = 0;
    o->crc = rdb_crc64(o->crc, o->b.data, o->b.len);
    while (!o->failed && off < o->b.len) {
        ssize_t w = write(o->fd, o->b.data + off, o->b.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            o->failed = 1;
            o->err = w < 0 ? errno : ENOSPC;
        } else
            off += (size_t)w;
    }
    o->b.len = 0;
}

static void out_bytes(rdb_out *o, const void *p, size_t n)
{
    if (buf_append(&o->b, p, n) < 0)
        abort();
}

static void out_aux(rdb_out *o, const char *k, const char *v)
{
    unsigned char op = RDB_OPCODE_AUX;
    out_bytes(o, &op, 1);
    rdb_save_string(&o->b, k, strlen(k));
    rdb_save_string(&o->b, v, strlen(v));
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

rdb_repl_aux rdb_loaded_repl;
int rdb_key_save_delay, rdb_key_load_delay;

static void key_delay(int usec)
{
    if (usec < 0)
        usec = rand() % -usec == 0;
    if (usec > 0)
        usleep((useconds_t)usec);
}

static uint64_t keys_written; /* by the last write_keyspace (childinfo) */

/* One function library: its opcode and code (Redis 7.0's FUNCTION2). */
static void out_function(void *ud, const char *code, size_t len)
{
    rdb_out *o = ud;
    unsigned char op = RDB_OPCODE_FUNCTION2;
    out_bytes(o, &op, 1);
    rdb_save_string(&o->b, code, len);
}

static int write_keyspace(rdb_out *o, int with_repl)
{
    char v[64];
    uint64_t nkeys = 0;
    out_bytes(o, "REDIS0010", 9);
    out_aux(o, "redis-ver", KV_VERSION);
    out_aux(o, "redis-bits", sizeof(void *) == 8 ? "64" : "32");
    snprintf(v, sizeof v, "%lld", (long long)(kv_unix_ms() / 1000));
    out_aux(o, "ctime", v);
    snprintf(v, sizeof v, "%zu", kv_memory_used());
    out_aux(o, "used-mem", v);
    rdb_repl_aux ri;
    if (with_repl && repl_rdb_save_info(&ri)) {
        snprintf(v, sizeof v, "%d", ri.stream_db);
        out_aux(o, "repl-stream-db", v);
        out_aux(o, "repl-id", ri.id);
        snprintf(v, sizeof v, "%lld", ri.offset);
        out_aux(o, "repl-offset", v);
    }
    out_aux(o, "aof-base", "0");
    function_rdb_each(out_function, o); /* after the aux fields, as Redis */
    for (int d = 0; d < srv.cfg.databases; d++) {
        kv_db *db = &srv.dbs[d];
        if (db_size(db) == 0)
            continue;
        unsigned char op = RDB_OPCODE_SELECTDB;
        out_bytes(o, &op, 1);
        rdb_save_len(&o->b, (uint64_t)d);
        op = RDB_OPCODE_RESIZEDB;
        out_bytes(o, &op, 1);
        rdb_save_len(&o->b, db_size(db));
        rdb_save_len(&o->b, db->vol_len);
        keytab_iter it;
        keytab_iter_init(&it, &db->keys);
        for (kv_entry *e; (e = keytab_iter_next(&it));) {
            if (e->flags & ENTRY_EXPIRES) {
                unsigned char t[9];
                t[0] = RDB_OPCODE_EXPIRETIME_MS;
                put_le64(t + 1, (uint64_t)entry_expire(e));
                out_bytes(o, t, 9);
            }
            unsigned char type = (unsigned char)rdb_object_type(e);
            out_bytes(o, &type, 1);
            bk_str key = entry_key_str(e);
            rdb_save_string(&o->b, key.p, key.len);
            rdb_save_object(&o->b, e);
            if (o->b.len >= RDB_FLUSH_AT)
                out_flush(o);
            if (BK_UNLIKELY(rdb_key_save_delay)) {
                out_flush(o); /* the bytes go out at the slowed pace */
                key_delay(rdb_key_save_delay);
            }
            childinfo_progress(++nkeys);
            if (o->failed)
                break;
        }
        keytab_iter_end(&it);
    }
    unsigned char eof = RDB_OPCODE_EOF;
    out_bytes(o, &eof, 1);
    out_flush(o);
    unsigned char crc[8];
    put_le64(crc, o->crc);
    out_bytes(o, crc, 8);
    out_flush(o); /* (this flush also folds the CRC into o->crc: unused) */
    keys_written = nkeys;
    return o->failed ? -1 : 0;
}

int rdb_write_snapshot(int fd)
{
    rdb_out o = { .fd = fd };
    int rc = write_keyspace(&o, 0);
    buf_free(&o.b);
    return rc;
}

int rdb_save_file(const char *path)
{
    /* A file size limit (RLIMIT_FSIZE) must fail the write (EFBIG), not
     * kill the server or the BGSAVE child. */
    signal(SIGXFSZ, SIG_IGN);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "temp-%d.rdb", (int)getpid());
    rdb_out o = { .fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) };
    if (o.fd < 0) {
        log_warn("Failed opening the temp RDB file %s (in server root dir %s) for saving: %s", tmp,
                 srv.cfg.dir ? srv.cfg.dir : ".", strerror(errno));
        return -1;
    }
    /* Written to a temp file, flushed to disk, then renamed over the
     * old one: a failed save (disk full, EFBIG) leaves the old file. */
    int rc = write_keyspace(&o, 1);
    int err = o.err;
    buf_free(&o.b);
    if (rc == 0 && fsync(o.fd) < 0)
        rc = -1, err = errno;
    close(o.fd);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -1, err = errno;
    if (rc < 0) {
        log_warn("Write error saving DB on disk: %s (%s removed, %s left as it was)",
                 strerror(err), tmp, path);
        unlink(tmp);
        return -1;
    }
    int dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename itself survives a crash */
        (void)fsync(dfd);
        close(dfd);
    }
    childinfo_final(keys_written); /* a BGSAVE child's last report */
    return 0;
}

/* ---- loading ---- */

static int rd_u8(rdb_reader *r, unsigned *v)
{
    if (r->p >= r->end)
        return -1;
    *v = *r->p++;
    return 0;
}

static int rd_le(rdb_reader *r, int n, uint64_t *v)
{
    if (r->end - r->p < n)
        return -1;
    *v = 0;
    for (int i = 0; i < n; i++)
        *v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return 0;
}

/* One AUX field: the replication ones are kept in rdb_loaded_repl. */
static int load_aux(rdb_reader *r, int *have)
{
    char *k = NULL, *v = NULL;
    size_t kl, vl;
    if (rdb_load_string(r, &k, &kl) < 0 || rdb_load_string(r, &v, &vl) < 0) {
        kv_free(k);
        return -1;
    }
    long long n;
    rdb_repl_aux *a = &rdb_loaded_repl;
    if (kl == 7 && memcmp(k, "repl-id", 7) == 0 && vl == 40) {
        memcpy(a->id, v, 40);
        a->id[40] = '\0';
        *have |= 1;
    } else if (kl == 11 && memcmp(k, "repl-offset", 11) == 0 && kv_parse_ll(v, vl, &n) == 0 &&
               n >= 0) {
        a->offset = n;
        *have |= 2;
    } else if (kl == 14 && memcmp(k, "repl-stream-db", 14) == 0 &&
               kv_parse_ll(v, vl, &n) == 0 && n >= 0 && n < srv.cfg.databases) {
        a->stream_db = (int)n;
    }
    kv_free(k);
    kv_free(v);
    return 0;
}

size_t rdb_load_end;

int rdb_load_image(const unsigned char *img, size_t size, int merge, char *err, size_t errlen)
{
    if (size < 9 || memcmp(img, "REDIS", 5) != 0) {
        snprintf(err, errlen, "Wrong signature trying to load DB from file");
        return -1;
    }
    int ver = 0;
    for (int i = 5; i < 9; i++) {
        if (img[i] < '0' || img[i] > '9') {
            snprintf(err, errlen, "Wrong signature trying to load DB from file");
            return -1;
        }
        ver = ver * 10 + (img[i] - '0');
    }
    if (ver < 1 || ver > RDB_VERSION) {
        snprintf(err, errlen, "Can't handle RDB format version %d", ver);
        return -1;
    }
    rdb_reader r = { img + 9, img + size };
    kv_db *db = &srv.dbs[0];
    int have_repl = 0;
    memset(&rdb_loaded_repl, 0, sizeof rdb_loaded_repl);
    int64_t expire = -1;
    size_t loaded = 0, expired = 0;
    for (;;) {
        unsigned type;
        if (rd_u8(&r, &type) < 0)
            goto short_read;
        uint64_t a, b;
        switch (type) {
        case RDB_OPCODE_EXPIRETIME_MS:
            if (rd_le(&r, 8, &a) < 0)
                goto short_read;
            expire = (int64_t)a;
            continue;
        case RDB_OPCODE_EXPIRETIME:
            if (rd_le(&r, 4, &a) < 0)
                goto short_read;
            expire = (int64_t)a * 1000;
            continue;
        case RDB_OPCODE_FREQ:
            if (rd_u8(&r, &type) < 0)
                goto short_read;
            continue;
        case RDB_OPCODE_IDLE:
        case RDB_OPCODE_SELECTDB:
            if (rdb_load_len(&r, &a) < 0)
                goto short_read;
            if (type == RDB_OPCODE_SELECTDB) {
                if (a >= (uint64_t)srv.cfg.databases) {
                    snprintf(err, errlen, "FATAL: Data file was created with a Redis server "
                                          "configured to handle more than %d databases.",
                             srv.cfg.databases);
                    return -1;
                }
                db = &srv.dbs[a];
            }
            continue;
        case RDB_OPCODE_RESIZEDB:
            if (rdb_load_len(&r, &a) < 0 || rdb_load_len(&r, &b) < 0)
                goto short_read;
            continue;
        case RDB_OPCODE_AUX:
            if (load_aux(&r, &have_repl) < 0)
                goto short_read;
            continue;
        case RDB_OPCODE_FUNCTION2: {
            /* A library's code: loaded (a library of its name replaced
             * only when merging, as Redis's RDBFLAGS_ALLOW_DUP). */
            char *code;
            size_t clen;
            if (rdb_load_string(&r, &code, &clen) < 0)
                goto short_read;
            char ferr[256];
            int frc = function_rdb_load(code, clen, merge, ferr, sizeof ferr);
            kv_free(code);
            if (frc < 0) {
                snprintf(err, errlen, "Failed loading library: %s", ferr);
                return -1;
            }
            continue;
        }
        case RDB_OPCODE_MODULE_AUX:
            snprintf(err, errlen, "The RDB file contains module AUX data, not supported");
            return -1;
        case RDB_OPCODE_EOF:
            goto eof;
        default:
            break;
        }
        char *key;
        size_t klen;
        rdb_value v;
        if (rdb_load_string(&r, &key, &klen) < 0)
            goto short_read;
        if (rdb_load_object(&r, (int)type, &v) < 0) {
            kv_free(key);
            snprintf(err, errlen,
                     "Bad data format (type %u) loading key at offset %zu of %zu: truncated or "
                     "corrupt RDB",
                     type, (size_t)(r.p - img), size);
            return -1;
        }
        bk_str k = { key, klen };
        kv_entry *old = db_find(db, k);
        if (old && merge) {
            db_delete_entry(db, old); /* the loaded value wins */
        } else if (old) {
            rdb_value_free(&v);
            snprintf(err, errlen, "RDB has duplicated key '%.*s' in DB %d", (int)BK_MIN(klen, 128),
                     key, db->id);
            kv_free(key);
            return -1;
        }
        if (expire != -1 && expire <= srv.now_ms && !repl_is_replica()) {
            rdb_value_free(&v); /* already expired: a master drops it */
            expired++;
        } else {
            kv_entry *e = rdb_value_store(db, k, &v);
            if (expire != -1)
                db_set_expire(db, e, expire);
            loaded++;
        }
        kv_free(key);
        expire = -1;
        if (BK_UNLIKELY(rdb_key_load_delay))
            key_delay(rdb_key_load_delay);
        if (BK_UNLIKELY(kv_loading_serve))
            kv_loading_progress((size_t)(r.p - img));
    }
eof:
    if (ver >= 5) {
        uint64_t want;
        const unsigned char *crc_at = r.p;
        if (rd_le(&r, 8, &want) < 0)
            goto short_read;
        uint64_t got = want ? rdb_crc64(0, img, (size_t)(crc_at - img)) : 0;
        if (want != 0 && got != want) {
            log_warn("Wrong RDB checksum expected: (%016llx) got (%016llx). Aborting now.",
                     (unsigned long long)want, (unsigned long long)got);
            snprintf(err, errlen, "Internal error in RDB reading offset %zu -> RDB CRC error",
                     (size_t)(crc_at - img));
            return -1;
        }
    }
    rdb_loaded_repl.valid = have_repl == 3;
    rdb_load_end = (size_t)(r.p - img);
    srv.rdb_load_loaded = loaded;
    srv.rdb_load_expired = expired;
    log_info("Done loading RDB, keys loaded: %zu, keys expired: %zu.", loaded, expired);
    return 0;
short_read:
    snprintf(err, errlen,
             "Short read or OOM loading DB (%zu bytes: truncated or corrupt RDB). Unrecoverable "
             "error, aborting now.",
             size);
    return -1;
}

int rdb_load_file(const char *path, int merge, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "Fatal error loading the DB: %s. Exiting.", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        snprintf(err, errlen, "Fatal error loading the DB: %s. Exiting.", strerror(errno));
        return -1;
    }
    size_t size = (size_t)st.st_size;
    unsigned char *img = kv_malloc(size + 1);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, img + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    int rc = -1;
    if (got != size) {
        snprintf(err, errlen, "Short read loading DB");
    } else {
        srv.loading = 1;
        kv_loading_begin(size);
        rc = rdb_load_image(img, size, merge, err, errlen);
        srv.loading = 0;
        if (rc < 0 && !merge)
            for (int d = 0; d < srv.cfg.databases; d++)
                db_flush(&srv.dbs[d]);
    }
    kv_free(img);
    return rc < 0 ? -1 : 1;
}

/* ---- streaming load (a replica's diskless load) ---- */

void rdb_stream_init(rdb_stream *s, kv_db *dbs, int ndbs)
{
    memset(s, 0, sizeof *s);
    s->dbs = dbs;
    s->ndbs = ndbs;
    s->expire = -1;
    memset(&rdb_loaded_repl, 0, sizeof rdb_loaded_repl);
    rdb_loaded_repl.stream_db = -1;
}

void rdb_stream_free(rdb_stream *s)
{
    for (int i = 0; i < s->nfuncs; i++)
        kv_free(s->funcs[i].code);
    kv_free(s->funcs);
    s->funcs = NULL;
    s->nfuncs = 0;
}

int rdb_stream_functions(rdb_stream *s, char *err, size_t errlen)
{
    function_rdb_flush();
    for (int i = 0; i < s->nfuncs; i++)
        if (function_rdb_load(s->funcs[i].code, s->funcs[i].len, 1, err, errlen) < 0)
            return -1;
    return 0;
}

/* One item (an opcode and what follows it, or a key and its value) from r:
 * 1 done, 2 the EOF opcode and checksum, 0 not all there yet, -1 corrupt
 * (or cut short: the caller tells the two apart by whether more comes). */
static int stream_item(rdb_stream *s, rdb_reader *r, char *err, size_t errlen)
{
    unsigned type;
    uint64_t a, b;
    if (rd_u8(r, &type) < 0)
        return 0;
    switch (type) {
    case RDB_OPCODE_EXPIRETIME_MS:
        if (rd_le(r, 8, &a) < 0)
            return 0;
        s->expire = (int64_t)a;
        return 1;
    case RDB_OPCODE_EXPIRETIME:
        if (rd_le(r, 4, &a) < 0)
            return 0;
        s->expire = (int64_t)a * 1000;
        return 1;
    case RDB_OPCODE_FREQ:
        return rd_u8(r, &type) < 0 ? 0 : 1;
    case RDB_OPCODE_IDLE:
        return rdb_load_len(r, &a) < 0 ? 0 : 1;
    case RDB_OPCODE_SELECTDB:
        if (rdb_load_len(r, &a) < 0)
            return 0;
        if (a >= (uint64_t)s->ndbs) {
            snprintf(err, errlen, "the master's RDB selects DB %llu (we have %d)",
                     (unsigned long long)a, s->ndbs);
            return -1;
        }
        s->db = (int)a;
        return 1;
    case RDB_OPCODE_RESIZEDB:
        return rdb_load_len(r, &a) < 0 || rdb_load_len(r, &b) < 0 ? 0 : 1;
    case RDB_OPCODE_AUX:
        return load_aux(r, &s->have_repl) < 0 ? 0 : 1;
    case RDB_OPCODE_FUNCTION2: {
        char *code;
        size_t clen;
        if (rdb_load_string(r, &code, &clen) < 0)
            return 0;
        s->funcs = kv_realloc(s->funcs, (size_t)(s->nfuncs + 1) * sizeof *s->funcs);
        s->funcs[s->nfuncs].code = code;
        s->funcs[s->nfuncs++].len = clen;
        return 1;
    }
    case RDB_OPCODE_MODULE_AUX:
        snprintf(err, errlen, "The RDB file contains module AUX data, not supported");
        return -1;
    case RDB_OPCODE_EOF:
        return 2;
    default:
        break;
    }
    char *key;
    size_t klen;
    rdb_value v;
    if (rdb_load_string(r, &key, &klen) < 0)
        return 0;
    if (rdb_load_object(r, (int)type, &v) < 0) {
        kv_free(key);
        snprintf(err, errlen, "Bad data format (type %u) loading a key: truncated or corrupt RDB",
                 type);
        return -1;
    }
    kv_db *db = &s->dbs[s->db];
    bk_str k = { key, klen };
    if (db_find(db, k)) {
        rdb_value_free(&v);
        snprintf(err, errlen, "RDB has duplicated key '%.*s' in DB %d", (int)BK_MIN(klen, 128),
                 key, s->db);
        kv_free(key);
        return -1;
    }
    kv_entry *e = rdb_value_store(db, k, &v); /* a replica keeps expired keys: the master deletes */
    if (s->expire != -1)
        db_set_expire(db, e, s->expire);
    s->loaded++;
    kv_free(key);
    s->expire = -1;
    if (BK_UNLIKELY(rdb_key_load_delay))
        key_delay(rdb_key_load_delay);
    return 1;
}

int rdb_stream_feed(rdb_stream *s, const unsigned char *p, size_t n, int final, size_t max_bytes,
                    size_t *used, char *err, size_t errlen)
{
    *used = 0;
    rdb_reader r = { p, p + n };
    if (!s->header) {
        if (n < 9)
            goto need_more;
        if (memcmp(p, "REDIS", 5) != 0) {
            snprintf(err, errlen, "Wrong signature trying to load DB from the master");
            return -1;
        }
        int ver = 0;
        for (int i = 5; i < 9; i++)
            ver = ver * 10 + (p[i] >= '0' && p[i] <= '9' ? p[i] - '0' : 100);
        if (ver < 1 || ver > RDB_VERSION) {
            snprintf(err, errlen, "Can't handle RDB format version %d", ver);
            return -1;
        }
        s->ver = ver;
        s->header = 1;
        s->crc = rdb_crc64(s->crc, p, 9);
        r.p += 9;
    }
    while ((size_t)(r.p - p) < max_bytes) {
        const unsigned char *start = r.p;
        int rc = stream_item(s, &r, err, errlen);
        if (rc == 2) {
            s->crc = rdb_crc64(s->crc, start, 1);
            uint64_t want = 0;
            if (s->ver >= 5 && rd_le(&r, 8, &want) < 0) {
                r.p = start;
                goto need_more;
            }
            if (want && want != s->crc) {
                snprintf(err, errlen, "Wrong RDB checksum expected: (%016llx) got (%016llx)",
                         (unsigned long long)want, (unsigned long long)s->crc);
                return -1;
            }
            *used = (size_t)(r.p - p);
            rdb_loaded_repl.valid = s->have_repl == 3;
            srv.rdb_load_loaded = s->loaded;
            srv.rdb_load_expired = 0;
            log_info("Done loading RDB, keys loaded: %zu, keys expired: 0.", s->loaded);
            return 1;
        }
        if (rc == 0 || (rc < 0 && !final)) {
            r.p = start; /* the rest of this item is still on its way */
            goto need_more;
        }
        if (rc < 0)
            return -1;
        s->crc = rdb_crc64(s->crc, start, (size_t)(r.p - start));
    }
    *used = (size_t)(r.p - p);
    return 0;
need_more:
    *used = (size_t)(r.p - p);
    if (final) {
        snprintf(err, errlen, "Unexpected EOF reading RDB file (%zu bytes in)", n);
        return -1;
    }
    return 0;
}
