#include "kv/aof.h"
#include "kv/script.h"

#include "core/log.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/rdb.h"
#include "kv/types.h"
#include "kv/util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { AOF_OFF = 0, AOF_ON = 1, AOF_WAIT_REWRITE = 2 };

static void put_header(bk_buf *b, char type, long long n)
{
    char tmp[32];
    tmp[0] = type;
    size_t k = 1 + kv_fmt_ll(tmp + 1, n);
    tmp[k++] = '\r';
    tmp[k++] = '\n';
    buf_append(b, tmp, k);
}

static void put_bulk(bk_buf *b, const char *p, size_t n)
{
    put_header(b, '$', (long long)n);
    if (buf_reserve(b, n + 2) < 0)
        abort();
    buf_put(b, p, n);
    buf_put(b, "\r\n", 2);
}

static void put_command(bk_buf *b, int argc, const bk_str *argv)
{
    put_header(b, '*', argc);
    for (int i = 0; i < argc; i++)
        put_bulk(b, argv[i].p, argv[i].len);
}

/* A transaction (EXEC, a script, a command with several effects) sets
 * srv.aof_in_multi to -1 before its writes. As Redis 7.0, one that writes a
 * single command goes out as that command alone: the first is written at
 * multi_mark with no MULTI (state 2), and MULTI is put in front of it when
 * a second comes (state 1: EXEC at the end). multi_mark is SIZE_MAX once
 * the buffer was flushed in between (nothing flushes it in the middle of
 * a script or an EXEC: a defence, MULTI then starts at the second). */
static size_t multi_mark = SIZE_MAX;

static void multi_insert(bk_buf *b)
{
    static const char multi[] = "*1\r\n$5\r\nMULTI\r\n";
    size_t n = sizeof multi - 1, at = multi_mark <= b->len ? multi_mark : b->len;
    if (buf_reserve(b, n) < 0)
        abort();
    memmove(b->data + at + n, b->data + at, b->len - at);
    memcpy(b->data + at, multi, n);
    b->len += n;
}

int aof_feed_targets = AOF_TO_FILE | AOF_TO_REPLICAS;

void aof_feed(kv_db *db, int argc, const bk_str *argv)
{
    if (BK_UNLIKELY(repl_feeding) && (aof_feed_targets & AOF_TO_REPLICAS))
        repl_feed(db, argc, argv); /* replicas get the same stream */
    if (srv.aof_state == AOF_OFF || !(aof_feed_targets & AOF_TO_FILE))
        return;
    bk_buf *b = &srv.aof_buf;
    if (BK_UNLIKELY(srv.cfg.aof_timestamp_enabled)) {
        static int64_t last_ts; /* one annotation per second, as Redis */
        int64_t now = srv.now_ms / 1000;
        if (now > last_ts) {
            buf_appendf(b, "#TS:%lld\r\n", (long long)now);
            last_ts = now;
        }
    }
    if (srv.aof_in_multi == 2) {
        multi_insert(b);
        srv.aof_in_multi = 1;
    }
    if (db->id != srv.aof_selected_db) {
        char num[KV_LL_STR_MAX];
        bk_str sel[2] = { { "SELECT", 6 }, { num, kv_fmt_ll(num, db->id) } };
        put_command(b, 2, sel);
        srv.aof_selected_db = db->id;
    }
    if (srv.aof_in_multi == -1) { /* MULTI will go after the first SELECT, as Redis's */
        multi_mark = b->len;
        srv.aof_in_multi = 2;
    }
    put_command(b, argc, argv);
}

void aof_exec_end(void)
{
    if (BK_UNLIKELY(repl_feeding))
        repl_exec_end();
    if (srv.aof_in_multi == 1) {
        static const bk_str exec[] = { { "EXEC", 4 } };
        put_command(&srv.aof_buf, 1, exec);
    }
    srv.aof_in_multi = 0;
}

void kv_propagate_del(kv_db *db, bk_str key)
{
    if (srv.loading)
        return;
    bk_str argv[2] = { { "DEL", 3 }, key };
    aof_feed(db, 2, argv);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

long long aof_flush_sleep_us;

void aof_flush(int force_fsync)
{
    if (srv.aof_fd < 0) {
        srv.aof_buf.len = 0;
        multi_mark = SIZE_MAX;
        return;
    }
    if (srv.aof_buf.len) {
        if (BK_UNLIKELY(aof_flush_sleep_us))
            kv_sleep_us(aof_flush_sleep_us);
        if (write_all(srv.aof_fd, srv.aof_buf.data, srv.aof_buf.len) < 0) {
            int e = errno;
            if (srv.cfg.appendfsync == FSYNC_ALWAYS) {
                log_error("can't write to the AOF with appendfsync always: %s; exiting",
                          strerror(e));
                exit(1);
            }
            if (srv.aof_last_write_ok)
                log_error("error writing to the AOF: %s (will retry)", strerror(e));
            srv.aof_last_write_ok = 0;
            return; /* keep the buffer; retried next batch */
        }
        srv.aof_last_write_ok = 1;
        srv.aof_current_size += srv.aof_buf.len;
        srv.aof_buf.len = 0;
        multi_mark = SIZE_MAX;
        if (srv.aof_buf.cap > 4 * 1024 * 1024)
            buf_free(&srv.aof_buf);
    }
    if (srv.cfg.appendfsync == FSYNC_ALWAYS || force_fsync) {
        if (fdatasync(srv.aof_fd) < 0) {
            log_error("can't fsync the AOF: %s; exiting", strerror(errno));
            exit(1);
        }
        srv.aof_last_fsync_ms = srv.now_ms;
    } else if (srv.cfg.appendfsync == FSYNC_EVERYSEC) {
        __atomic_store_n(&srv.fsync_pending, 1, __ATOMIC_RELEASE);
    }
}

/* appendfsync everysec: fsync off the loop, about once a second. */
static void *fsync_main(void *arg)
{
    pthread_mutex_lock(&srv.fsync_mu);
    while (!srv.fsync_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&srv.fsync_cv, &srv.fsync_mu, &ts);
        if (srv.fsync_stop)
            break;
        if (__atomic_exchange_n(&srv.fsync_pending, 0, __ATOMIC_ACQ_REL) && srv.aof_fd >= 0) {
            /* The lock is held so the loop cannot close the fd under us. */
            fdatasync(srv.aof_fd);
        }
    }
    pthread_mutex_unlock(&srv.fsync_mu);
    return NULL;
}

void aof_start_fsync_thread(void)
{
    if (srv.fsync_thread_started)
        return;
    srv.fsync_stop = 0;
    /* The thread starts with SIGALRM blocked: the watchdog's signal is for
     * the main thread (the stack it logs is the one that blocks). */
    sigset_t alrm, old;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &old);
    if (pthread_create(&srv.fsync_thread, NULL, fsync_main, NULL) == 0)
        srv.fsync_thread_started = 1;
    else
        log_error("cannot start the AOF fsync thread");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void aof_stop_fsync_thread(void)
{
    if (!srv.fsync_thread_started)
        return;
    pthread_mutex_lock(&srv.fsync_mu);
    srv.fsync_stop = 1;
    pthread_cond_signal(&srv.fsync_cv);
    pthread_mutex_unlock(&srv.fsync_mu);
    pthread_join(srv.fsync_thread, NULL);
    srv.fsync_thread_started = 0;
}

/* ---- loading ---- */

static int truncate_file(const char *path, off_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = ftruncate(fd, len);
    if (rc == 0)
        fsync(fd);
    close(fd);
    return rc;
}

static int is_word(bk_str s, const char *w)
{
    size_t n = strlen(w);
    if (s.len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower(s.p[i]) != w[i])
            return 0;
    return 1;
}

/* --check-aof --truncate-to-timestamp: the limit, and where the first
 * "#TS:" annotation past it starts (-1: none). */
static long long chk_ts_limit;
static off_t chk_ts_cut = -1;

void aof_read(int fd, aof_cmd_fn fn, void *ud, aof_read_result *res)
{
    memset(res, 0, sizeof *res);
    res->bad_at = -1;
    bk_buf b = { 0 };
    resp_parser p;
    resp_parser_init(&p);
    bk_str *argv = NULL;
    size_t argv_cap = 0;
    off_t base = 0;   /* file offset of b.data[0] */
    off_t cmd_at = 0; /* file offset where the next command starts */
    int in_multi = 0, eof = 0;
    for (;;) {
        if (!eof) {
            if (buf_reserve(&b, 1024 * 1024) < 0)
                abort();
            ssize_t n = read(fd, b.data + b.len, b.cap - b.len);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                res->verdict = AOF_IO_ERROR;
                snprintf(res->why, sizeof res->why, "%s", strerror(errno));
                goto out;
            }
            if (n == 0)
                eof = 1;
            b.len += (size_t)n;
        }
        for (;;) {
            /* "#..." lines between commands are annotations (Redis 7's
             * aof-timestamp-enabled writes "#TS:unixtime"): skipped, as
             * Redis's loader does; one cut off by the end of the file ends
             * it. */
            if (!p.kind && p.pos < b.len && b.data[p.pos] == '#') {
                char *nl = memchr(b.data + p.pos, '\n', b.len - p.pos);
                if (!nl && !eof)
                    break;
                if (BK_UNLIKELY(chk_ts_limit) && nl && chk_ts_cut < 0 &&
                    nl - (b.data + p.pos) > 4 && memcmp(b.data + p.pos, "#TS:", 4) == 0 &&
                    strtoll(b.data + p.pos + 4, NULL, 10) > chk_ts_limit)
                    chk_ts_cut = base + (off_t)p.pos;
                p.pos = nl ? (size_t)(nl - b.data) + 1 : b.len;
                cmd_at = base + (off_t)p.pos;
                if (!in_multi)
                    res->good = cmd_at;
                continue;
            }
            /* resp_parse unquotes inline commands in place: keep the
             * byte the command starts with for the message. */
            char first = cmd_at - base < (off_t)b.len ? b.data[cmd_at - base] : 0;
            int r = resp_parse(&p, b.data, b.len);
            off_t start = base + (off_t)p.start;
            /* Every command must start with '*' where the last one ended,
             * as Redis's loader wants. resp_parse skips empty lines and
             * "*0" on its own, and how far it got before stopping depends
             * on how the reads were cut: judge at cmd_at, not after. An
             * inline command gets the same message whether resp_parse
             * finished it (or found it malformed) or not. */
            off_t at = p.kind ? start : base + (off_t)p.pos;
            if (at != cmd_at || p.kind == 'i') {
                char c = first;
                r = RESP_ERROR;
                start = cmd_at;
                if (c == '*')
                    snprintf(p.err, sizeof p.err, "invalid multibulk length");
                else
                    snprintf(p.err, sizeof p.err, "expected '*', got '%c'", c);
            }
            if (r == RESP_AGAIN)
                break;
            if (r == RESP_ERROR) {
                res->verdict = AOF_BAD;
                res->bad_at = start;
                snprintf(res->why, sizeof res->why, "Bad file format (%s)", p.err);
                goto out;
            }
            int argc = (int)p.nargs;
            if ((size_t)argc > argv_cap) {
                kv_free(argv);
                argv_cap = (size_t)argc;
                argv = kv_malloc(argv_cap * sizeof *argv);
            }
            for (int i = 0; i < argc; i++)
                argv[i] = (bk_str){ b.data + p.args[i].off, p.args[i].len };
            const char *refusal = NULL;
            if (!kv_cmd_lookup(argv[0]))
                refusal = "Unknown command";
            else if (is_word(argv[0], "multi") && in_multi)
                refusal = "Unexpected MULTI";
            else if (is_word(argv[0], "exec") && !in_multi)
                refusal = "Unexpected EXEC";
            if (refusal) {
                res->verdict = AOF_BAD;
                res->bad_at = start;
                snprintf(res->why, sizeof res->why, "%s '%.*s'", refusal,
                         (int)BK_MIN(argv[0].len, 64), argv[0].p);
                goto out;
            }
            if (is_word(argv[0], "multi"))
                in_multi = 1;
            else if (is_word(argv[0], "exec"))
                in_multi = 0;
            if (fn)
                fn(ud, argc, argv);
            res->ncmds++;
            resp_parser_next(&p);
            cmd_at = base + (off_t)p.pos;
            if (!in_multi)
                res->good = base + (off_t)p.pos;
        }
        /* keep only the unparsed tail */
        size_t used = resp_parser_consumed(&p);
        if (used) {
            memmove(b.data, b.data + used, b.len - used);
            b.len -= used;
            resp_parser_shift(&p, used);
            base += (off_t)used;
        }
        if (eof)
            break;
    }
    res->in_multi = in_multi;
    if (b.len > 0 || in_multi)
        res->verdict = AOF_TRUNCATED;
out:
    res->size = base + (off_t)b.len;
    if (res->verdict == AOF_BAD || res->verdict == AOF_IO_ERROR) {
        /* the rest of the file is not read: its size is what fstat says */
        struct stat st;
        if (fstat(fd, &st) == 0)
            res->size = st.st_size;
    }
    kv_free(argv);
    buf_free(&b);
    resp_parser_free(&p);
}

static void load_command(void *ud, int argc, bk_str *argv)
{
    kv_client *c = ud;
    if ((size_t)argc > c->argv_cap) {
        kv_free(c->argv);
        c->argv_cap = (size_t)argc;
        c->argv = kv_malloc(c->argv_cap * sizeof *c->argv);
    }
    memcpy(c->argv, argv, (size_t)argc * sizeof *argv);
    c->argc = argc;
    kv_call(c);
    c->wbuf.len = 0;
    if (BK_UNLIKELY(kv_loading_serve)) {
        static size_t bytes; /* about the bytes read: what the progress needs */
        for (int i = 0; i < argc; i++)
            bytes += argv[i].len + 8; /* "$len\r\n" and "\r\n" */
        kv_loading_progress(bytes);
    }
}


/* ---- rewrite (child) ---- */

typedef struct {
    int fd;
    bk_buf b;
    int failed;
} rw_out;

static void rw_flush(rw_out *o, int force)
{
    if (o->b.len >= (force ? 1 : 1024 * 1024)) {
        if (write_all(o->fd, o->b.data, o->b.len) < 0)
            o->failed = 1;
        o->b.len = 0;
    }
}

static void rw_cmd(rw_out *o, int argc, const bk_str *argv)
{
    put_command(&o->b, argc, argv);
    rw_flush(o, 0);
}

#define RW_BATCH 64

static void rw_emit(void *ud, int argc, const bk_str *argv) { rw_cmd(ud, argc, argv); }

static void rw_entry(rw_out *o, kv_entry *e)
{
    bk_str key = entry_key_str(e);
    bk_str argv[2 + 2 * RW_BATCH];
    int n;
    switch (e->type) {
    case KV_STRING:
        argv[0] = BK_STR("SET");
        argv[1] = key;
        argv[2] = entry_str(e);
        rw_cmd(o, 3, argv);
        break;
    case KV_LIST: {
        kv_list *l = entry_obj(e);
        argv[0] = BK_STR("RPUSH");
        argv[1] = key;
        n = 2;
        for (size_t i = 0; i < l->len; i++) {
            kv_lelem *le = list_at(l, i);
            argv[n++] = (bk_str){ le->data, le->len };
            if (n == 2 + RW_BATCH) {
                rw_cmd(o, n, argv);
                n = 2;
            }
        }
        if (n > 2)
            rw_cmd(o, n, argv);
        break;
    }
    case KV_SET: {
        dict *s = entry_obj(e);
        argv[0] = BK_STR("SADD");
        argv[1] = key;
        n = 2;
        dict_iter it;
        dict_iter_init(&it, s);
        for (dict_node *dn; (dn = dict_iter_next(&it));) {
            argv[n++] = smember_str((kv_smember *)(void *)dn);
            if (n == 2 + RW_BATCH) {
                rw_cmd(o, n, argv);
                n = 2;
            }
        }
        dict_iter_end(&it);
        if (n > 2)
            rw_cmd(o, n, argv);
        break;
    }
    case KV_HASH: {
        argv[0] = BK_STR("HSET");
        argv[1] = key;
        n = 2;
        hash_iter it;
        hash_iter_init(&it, entry_obj(e));
        for (bk_str f, v; hash_iter_next(&it, &f, &v);) {
            argv[n++] = f;
            argv[n++] = v;
            if (n >= 2 + 2 * (RW_BATCH - 1)) {
                rw_cmd(o, n, argv);
                n = 2;
            }
        }
        hash_iter_end(&it);
        if (n > 2)
            rw_cmd(o, n, argv);
        break;
    }
    case KV_ZSET: {
        zset *z = entry_obj(e);
        char scores[RW_BATCH][40];
        argv[0] = BK_STR("ZADD");
        argv[1] = key;
        n = 2;
        int k = 0;
        for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward) {
            int len;
            if (isinf(x->score))
                len = snprintf(scores[k], sizeof scores[k], "%s", x->score > 0 ? "inf" : "-inf");
            else
                len = snprintf(scores[k], sizeof scores[k], "%.17g", x->score);
            argv[n++] = (bk_str){ scores[k], (size_t)len };
            argv[n++] = zs_member(x);
            k++;
            if (k == RW_BATCH) {
                rw_cmd(o, n, argv);
                n = 2;
                k = 0;
            }
        }
        if (n > 2)
            rw_cmd(o, n, argv);
        break;
    }
    case KV_STREAM:
        stream_rewrite(entry_obj(e), key, rw_emit, o);
        break;
    }
    if (e->flags & ENTRY_EXPIRES) {
        char ms[KV_LL_STR_MAX];
        argv[0] = BK_STR("PEXPIREAT");
        argv[1] = key;
        argv[2] = (bk_str){ ms, kv_fmt_ll(ms, entry_expire(e)) };
        rw_cmd(o, 3, argv);
    }
}

static int rewrite_to(const char *tmp)
{
    rw_out o = { .fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) };
    if (o.fd < 0)
        return -1;
    if (srv.cfg.aof_timestamp_enabled)
        buf_appendf(&o.b, "#TS:%lld\r\n", (long long)(kv_unix_ms() / 1000));
    function_rewrite(rw_emit, &o); /* libraries first: keys do not need them */
    int64_t now = kv_unix_ms();
    for (int d = 0; d < srv.cfg.databases; d++) {
        kv_db *db = &srv.dbs[d];
        if (db_size(db) == 0)
            continue;
        char num[KV_LL_STR_MAX];
        bk_str sel[2] = { BK_STR("SELECT"), { num, kv_fmt_ll(num, d) } };
        rw_cmd(&o, 2, sel);
        keytab_iter it;
        keytab_iter_init(&it, &db->keys);
        for (kv_entry *e; (e = keytab_iter_next(&it));) {
            if ((e->flags & ENTRY_EXPIRES) && entry_expire(e) <= now)
                continue;
            rw_entry(&o, e);
        }
        keytab_iter_end(&it);
    }
    rw_flush(&o, 1);
    if (o.failed || fsync(o.fd) < 0) {
        close(o.fd);
        return -1;
    }
    close(o.fd);
    return 0;
}

/* ---- the multi-part AOF ---- */

static aof_manifest man; /* what appenddirname's manifest says now */
static int rw_rdb;        /* the running rewrite writes an RDB base */

static void in_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", srv.cfg.appenddirname, name);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* A regular file (Redis's fileExist): a manifest that is a directory, a
 * FIFO or a device counts as none (no open that blocks for ever). */
static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int make_dir(void)
{
    if (mkdir(srv.cfg.appenddirname, 0755) < 0 && errno != EEXIST) {
        log_error("Can't open or create append-only dir %s: %s", srv.cfg.appenddirname,
                  strerror(errno));
        return -1;
    }
    return 0;
}

static uint64_t file_size(const char *name)
{
    char path[4096];
    in_dir(path, sizeof path, name);
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* An appendfilename left in dir by Redis < 7 (or brisk-kv before the
 * multi-part AOF) becomes the base of a new manifest and moves into the
 * directory. A crash in between is harmless: the next start does it again. */
static int upgrade_old_file(void)
{
    if (make_dir() < 0)
        return -1;
    aof_manifest_free(&man);
    const char *name = srv.cfg.appendfilename;
    aof_info ai = { kv_strndup(name, strlen(name)), 1, AOF_TYPE_BASE };
    man.f = kv_malloc(sizeof ai);
    man.f[0] = ai;
    man.n = man.cap = 1;
    man.base_seq = 1;
    if (aof_manifest_persist(&man) < 0)
        return -1;
    char to[4096];
    in_dir(to, sizeof to, name);
    if (rename(name, to) < 0) {
        log_error("Error trying to move the old AOF file %s into dir %s: %s", name,
                  srv.cfg.appenddirname, strerror(errno));
        return -1;
    }
    log_info("Successfully migrated an old-style AOF file (%s) into the AOF directory (%s).", name,
             srv.cfg.appenddirname);
    return 0;
}

enum { LOAD_OK, LOAD_TRUNCATED, LOAD_FAILED };

/* The RDB part of a base file (an RDB base, or an old file with an RDB
 * preamble): returns where the AOF tail starts, or -1. */
static off_t load_rdb_part(int fd, const char *name, off_t size)
{
    unsigned char *img = kv_malloc((size_t)size + 1);
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t n = pread(fd, img + got, (size_t)size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    int old_style = strcmp(name, srv.cfg.appendfilename) == 0;
    log_info(old_style ? "Reading RDB preamble from AOF file..."
                       : "Reading RDB base file on AOF loading...");
    char err[256] = "short read";
    int rc = got == (size_t)size ? rdb_load_image(img, got, 0, err, sizeof err) : -1;
    kv_free(img);
    if (rc < 0) {
        log_error("%s", err);
        log_error(old_style ? "Error reading the RDB preamble of the AOF file %s, AOF loading aborted"
                            : "Error reading the RDB base file %s, AOF loading aborted",
                  name);
        return -1;
    }
    if (old_style)
        log_info("Reading the remaining AOF tail...");
    return (off_t)rdb_load_end;
}

static int load_one(const char *name, int last)
{
    char path[4096];
    in_dir(path, sizeof path, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("Fatal error: can't open the append log file %s for reading: %s", name,
                  strerror(errno));
        return LOAD_FAILED;
    }
    struct stat st;
    off_t size = fstat(fd, &st) == 0 ? st.st_size : 0;
    char sig[5];
    off_t start = 0;
    if (size >= 5 && pread(fd, sig, 5, 0) == 5 && memcmp(sig, "REDIS", 5) == 0) {
        srv.loading = 1;
        start = load_rdb_part(fd, name, size);
        srv.loading = 0;
        if (start < 0) {
            close(fd);
            return LOAD_FAILED;
        }
    }
    kv_client *c = kv_client_new_fake();
    aof_read_result res;
    lseek(fd, start, SEEK_SET);
    srv.loading = 1;
    aof_read(fd, load_command, c, &res);
    close(fd);
    int rc = LOAD_OK;
    switch (res.verdict) {
    case AOF_VALID:
        break;
    case AOF_IO_ERROR:
        log_error("Unrecoverable error reading the append only file %s: %s", name, res.why);
        rc = LOAD_FAILED;
        break;
    case AOF_BAD:
        if (strncmp(res.why, "Unknown command", 15) == 0)
            log_error("%s reading the append only file %s (at offset %lld)", res.why, name,
                      (long long)(start + res.bad_at));
        else
            log_error("Bad file format reading the append only file %s: make a backup of your AOF "
                      "file, then use ./redis-check-aof --fix <filename.manifest> (%s at offset "
                      "%lld)",
                      name, res.why, (long long)(start + res.bad_at));
        rc = LOAD_FAILED;
        break;
    case AOF_TRUNCATED: {
        off_t good = start + res.good;
        if (res.in_multi)
            log_warn("Revert incomplete MULTI/EXEC transaction in AOF file %s", name);
        if (!srv.cfg.aof_load_truncated) {
            log_error("Unexpected end of file reading the append only file %s. You can: 1) Make a "
                      "backup of your AOF file, then use ./redis-check-aof --fix "
                      "<filename.manifest>. 2) Alternatively you can set the "
                      "'aof-load-truncated' configuration option to yes and restart the server.",
                      name);
            rc = LOAD_FAILED;
            break;
        }
        log_warn("!!! Warning: short read while loading the AOF file %s!!!", name);
        log_warn("!!! Truncating the AOF %s at offset %llu !!!", name, (unsigned long long)good);
        c->flags &= ~CLIENT_MULTI; /* an unfinished transaction was queued, never ran */
        if (truncate_file(path, good) < 0) {
            log_error("Error truncating the AOF file %s: %s", name, strerror(errno));
            rc = LOAD_FAILED;
            break;
        }
        log_warn("AOF %s loaded anyway because aof-load-truncated is enabled", name);
        rc = LOAD_TRUNCATED;
        break;
    }
    }
    kv_client_free_fake(c);
    srv.loading = 0;
    if (rc == LOAD_TRUNCATED && !last) {
        log_error("Fatal error: the truncated file is not the last file");
        rc = LOAD_FAILED;
    }
    return rc;
}

void aof_read_manifest(void)
{
    aof_manifest_free(&man);
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/%s.manifest", srv.cfg.appenddirname,
             srv.cfg.appendfilename);
    if (is_dir(srv.cfg.appenddirname) && is_file(mpath))
        aof_manifest_load(mpath, &man);
}

int aof_load_files(void)
{
    aof_read_manifest();
    aof_info *base = aof_manifest_base(&man);
    int nincr = aof_manifest_count(&man, AOF_TYPE_INCR);
    if (exists(srv.cfg.appendfilename)) {
        char moved[4096];
        in_dir(moved, sizeof moved, srv.cfg.appendfilename);
        if (!is_dir(srv.cfg.appenddirname) || (!base && !nincr) ||
            (base && !nincr && !strcmp(base->name, srv.cfg.appendfilename) && !exists(moved))) {
            if (upgrade_old_file() < 0)
                return -1;
            base = aof_manifest_base(&man);
        }
    }
    if (!base && !nincr)
        return 0;
    /* Every file the manifest names must be there before anything loads. */
    uint64_t total = 0;
    for (int i = 0; i < man.n; i++) {
        if (man.f[i].type == AOF_TYPE_HIST)
            continue;
        char path[4096];
        in_dir(path, sizeof path, man.f[i].name);
        struct stat st;
        if (stat(path, &st) < 0) {
            log_error("Unable to obtain the AOF file %s length. stat: %s", man.f[i].name,
                      strerror(errno));
            return -1;
        }
        total += (uint64_t)st.st_size;
    }
    if (total == 0)
        return 0;
    kv_loading_begin((size_t)total);
    int left = (base != NULL) + nincr;
    int64_t t0 = kv_unix_ms();
    if (base) {
        if (load_one(base->name, --left == 0) == LOAD_FAILED)
            return -1;
        log_info("DB loaded from base file %s: %.3f seconds", base->name,
                 (double)(kv_unix_ms() - t0) / 1000.0);
    }
    for (int i = 0; i < man.n; i++) {
        if (man.f[i].type != AOF_TYPE_INCR)
            continue;
        t0 = kv_unix_ms();
        if (load_one(man.f[i].name, --left == 0) == LOAD_FAILED)
            return -1;
        log_info("DB loaded from incr file %s: %.3f seconds", man.f[i].name,
                 (double)(kv_unix_ms() - t0) / 1000.0);
    }
    return 0;
}

/* Writes the keyspace to path (in dir) as an RDB or as commands. */
static int write_base(const char *path, int rdb)
{
    if (!rdb)
        return rewrite_to(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = rdb_write_snapshot(fd) == 0 && fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

static void sizes_from_manifest(void)
{
    aof_info *base = aof_manifest_base(&man);
    srv.aof_base_size = base ? file_size(base->name) : 0;
    srv.aof_current_size = srv.aof_base_size;
    for (int i = 0; i < man.n; i++)
        if (man.f[i].type == AOF_TYPE_INCR)
            srv.aof_current_size += file_size(man.f[i].name);
}

static int open_incr(const char *name, int flags)
{
    char path[4096];
    in_dir(path, sizeof path, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
    if (fd < 0)
        log_error("Can't open the append-only file %s: %s", name, strerror(errno));
    return fd;
}

int aof_open(void)
{
    if (make_dir() < 0)
        return -1;
    int nincr = aof_manifest_count(&man, AOF_TYPE_INCR);
    if (!aof_manifest_base(&man) && !nincr) {
        /* An empty start: a base first, so the incr file has something to
         * follow (Redis 7 does the same). */
        int rdb = srv.cfg.aof_use_rdb_preamble;
        const char *name = aof_manifest_new_base(&man, rdb);
        char tmp[64], path[4096];
        snprintf(tmp, sizeof tmp, "temp-rewriteaof-%d.aof", (int)getpid());
        in_dir(path, sizeof path, name);
        if (write_base(tmp, rdb) < 0 || rename(tmp, path) < 0) {
            log_error("Can't write the AOF base file %s: %s", name, strerror(errno));
            unlink(tmp);
            return -1;
        }
        log_info("Creating AOF base file %s on server start", name);
    }
    const char *name = nincr ? aof_manifest_last_incr(&man)->name : aof_manifest_new_incr(&man);
    int fd = open_incr(name, O_APPEND);
    if (fd < 0 || aof_manifest_persist(&man) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    log_info("%s AOF incr file %s on server start", nincr ? "Opening" : "Creating", name);
    sizes_from_manifest();
    srv.aof_fd = fd;
    srv.aof_state = AOF_ON;
    srv.aof_selected_db = -1;
    aof_start_fsync_thread();
    return 0;
}

/* ---- rewrite ---- */

#define TEMP_INCR_FMT "temp-%s.incr"

/* Swaps the fd the loop appends to; the old one is synced and closed (the
 * fsync thread holds the lock while it syncs). */
static void swap_fd(int fd)
{
    pthread_mutex_lock(&srv.fsync_mu);
    int old = srv.aof_fd;
    srv.aof_fd = fd;
    pthread_mutex_unlock(&srv.fsync_mu);
    if (old >= 0) {
        fdatasync(old);
        close(old);
    }
}

static void temp_incr_name(char *out, size_t n)
{
    snprintf(out, n, TEMP_INCR_FMT, srv.cfg.appendfilename);
}

static void remove_temp_incr(void)
{
    char name[4096], path[4200];
    temp_incr_name(name, sizeof name);
    in_dir(path, sizeof path, name);
    log_info("Removing the temp incr aof file %s in the background", name);
    unlink(path);
}

static int other_child_running(void)
{
    return srv.rdb_child_pid > 0 || repl_rdb_child_running();
}

static const char rw_failed_msg[] =
    "ERR Can't execute an AOF background rewriting. Please check the server logs for more "
    "information.";

int aof_rewrite_start(char *err, size_t errlen)
{
    if (srv.child_pid > 0) {
        snprintf(err, errlen, "ERR Background append only file rewriting already in progress");
        return -1;
    }
    /* Started by the cron once that child is gone, or after the EXEC (a
     * fork inside a transaction would snapshot half of it, as Redis). */
    if (other_child_running() || srv.in_exec) {
        srv.aof_rewrite_scheduled = 1;
        return 1;
    }
    srv.aof_rewrite_scheduled = 0;
    if (make_dir() < 0) {
        srv.aof_last_bgrewrite_ok = 0;
        snprintf(err, errlen, "%s", rw_failed_msg);
        return -1;
    }
    aof_flush(1);
    if (srv.aof_state == AOF_ON) {
        /* The writes from now on go to a new incr file, named in the
         * manifest before the fork: the child's base plus that file are
         * the whole dataset, whenever the server stops. */
        aof_manifest tm;
        aof_manifest_dup(&tm, &man);
        const char *name = aof_manifest_new_incr(&tm);
        int fd = open_incr(name, O_TRUNC);
        if (fd < 0 || aof_manifest_persist(&tm) < 0) {
            if (fd >= 0)
                close(fd);
            aof_manifest_free(&tm);
            srv.aof_last_bgrewrite_ok = 0;
            snprintf(err, errlen, "%s", rw_failed_msg);
            return -1;
        }
        log_info("Creating AOF incr file %s on background rewrite", name);
        swap_fd(fd);
        aof_manifest_free(&man);
        man = tm;
    } else if (srv.aof_state == AOF_WAIT_REWRITE) {
        /* AOF being turned on: the writes made while the first base is
         * written go to a temp incr file, named in the manifest only once
         * the base is in (a failed start leaves the old manifest alone). */
        char name[4096];
        temp_incr_name(name, sizeof name);
        int fd = open_incr(name, O_TRUNC | O_APPEND);
        if (fd < 0) {
            srv.aof_last_bgrewrite_ok = 0;
            snprintf(err, errlen, "%s", rw_failed_msg);
            return -1;
        }
        log_info("Creating AOF incr file %s on background rewrite", name);
        swap_fd(fd);
    }
    srv.aof_selected_db = -1; /* the new incr file starts with a SELECT */
    rw_rdb = srv.cfg.aof_use_rdb_preamble;
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "ERR Can't rewrite append only file in background: fork: %s",
                 strerror(errno));
        return -1;
    }
    if (pid == 0) {
        kv_oom_apply(KV_OOM_CHILD);
        char tmp[64];
        snprintf(tmp, sizeof tmp, "temp-rewriteaof-bg-%d.aof", (int)getpid());
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        _exit(write_base(tmp, rw_rdb) == 0 ? 0 : 1);
    }
    srv.child_pid = pid;
    srv.stat_forks++;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "temp-rewriteaof-bg-%d.aof", (int)pid);
    kv_free(srv.child_tmpfile);
    srv.child_tmpfile = kv_strndup(tmp, strlen(tmp));
    srv.aof_rewrite_start_ms = srv.now_ms;
    log_info("Background append only file rewriting started by pid %d", (int)pid);
    return 0;
}

/* History files: deleted, then left out of the manifest (unless
 * aof-disable-auto-gc, Redis's knob for its tests, keeps them). */
void aof_delete_history(void)
{
    if (srv.cfg.aof_disable_auto_gc || !aof_manifest_count(&man, AOF_TYPE_HIST))
        return;
    for (int i = 0; i < man.n; i++) {
        if (man.f[i].type != AOF_TYPE_HIST)
            continue;
        char hp[4200];
        in_dir(hp, sizeof hp, man.f[i].name);
        log_info("Removing the history file %s in the background", man.f[i].name);
        unlink(hp);
    }
    aof_manifest_drop_history(&man);
    aof_manifest_persist(&man);
}

static void rewrite_failed(const char *tmp)
{
    unlink(tmp);
    srv.aof_last_bgrewrite_ok = 0;
    srv.aof_rw_failures++;
    if (srv.aof_state == AOF_WAIT_REWRITE) {
        /* still turning on: the temp incr file goes, a new try follows */
        swap_fd(-1);
        remove_temp_incr();
        srv.aof_rewrite_scheduled = 1;
    }
}

/* The child wrote a new base: it goes into the directory under the next
 * base name, the incr files it covers become history, the manifest is
 * replaced in one rename, then the history files are deleted. */
static void rewrite_done(int ok)
{
    const char *tmp = srv.child_tmpfile;
    srv.child_pid = -1;
    if (!ok) {
        log_warn("Background AOF rewrite terminated with error");
        rewrite_failed(tmp);
        return;
    }
    log_info("Background AOF rewrite terminated with success");
    aof_manifest tm;
    aof_manifest_dup(&tm, &man);
    const char *base = aof_manifest_new_base(&tm, rw_rdb);
    char path[4200], tpath[4200] = "", incr_path[4200] = "";
    in_dir(path, sizeof path, base);
    if (srv.aof_state == AOF_WAIT_REWRITE) {
        aof_flush(1);
        char tname[4096];
        temp_incr_name(tname, sizeof tname);
        in_dir(tpath, sizeof tpath, tname);
        const char *name = aof_manifest_new_incr(&tm);
        in_dir(incr_path, sizeof incr_path, name);
        /* the fd stays open across the rename: it is the same file */
        if (rename(tpath, incr_path) < 0) {
            log_warn("Error trying to rename the temporary AOF incr file %s into %s: %s", tname,
                     name, strerror(errno));
            goto fail;
        }
    }
    if (rename(tmp, path) < 0) {
        log_warn("Error trying to rename the temporary AOF file %s into %s: %s", tmp, base,
                 strerror(errno));
        goto fail;
    }
    log_info("Successfully renamed the temporary AOF base file %s into %s", tmp, base);
    aof_manifest_incr_to_history(&tm, srv.aof_state != AOF_OFF);
    if (aof_manifest_persist(&tm) < 0) {
        unlink(path);
        goto fail;
    }
    aof_manifest_free(&man);
    man = tm;
    if (srv.aof_state == AOF_WAIT_REWRITE) {
        srv.aof_state = AOF_ON;
        aof_start_fsync_thread();
    }
    aof_delete_history();
    sizes_from_manifest();
    srv.aof_rewrites++;
    srv.aof_rw_failures = 0;
    srv.aof_last_bgrewrite_ok = 1;
    srv.lastsave = srv.now_ms / 1000;
    log_info("Background AOF rewrite finished successfully");
    return;
fail:
    if (srv.aof_state == AOF_WAIT_REWRITE && incr_path[0])
        rename(incr_path, tpath); /* (back, if it had moved) */
    aof_manifest_free(&tm);
    rewrite_failed(tmp);
}

void aof_check_child(void)
{
    if (srv.child_pid <= 0)
        return;
    int status;
    pid_t pid = waitpid(srv.child_pid, &status, WNOHANG);
    if (pid == 0)
        return;
    if (pid < 0) {
        rewrite_done(0);
        return;
    }
    rewrite_done(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* After 3 failed rewrites in a row, automatic ones wait 1, 2, 4, ... up to
 * 60 minutes (a BGREWRITEAOF still runs at once), as Redis 7. */
static int rewrite_limited(void)
{
    static int delay_min;
    static int64_t next_at;
    if (srv.aof_rw_failures < 3) {
        delay_min = 0;
        next_at = 0;
        return 0;
    }
    int64_t now = srv.now_ms / 1000;
    if (next_at) {
        if (now < next_at)
            return 1;
        next_at = 0;
        return 0;
    }
    delay_min = delay_min ? BK_MIN(delay_min * 2, 60) : 1;
    next_at = now + delay_min * 60;
    log_warn("Background AOF rewrite has repeatedly failed and triggered the limit, will retry "
             "in %d minutes",
             delay_min);
    return 1;
}

void aof_cron(void)
{
    aof_check_child();
    char err[256];
    if (srv.aof_rewrite_scheduled && srv.child_pid <= 0 && !other_child_running()) {
        if (aof_rewrite_start(err, sizeof err) < 0)
            log_warn("%s", err);
    }
    if (srv.aof_state == AOF_ON && srv.child_pid <= 0 && !other_child_running() &&
        srv.cfg.auto_aof_rewrite_pct && srv.aof_current_size > srv.cfg.auto_aof_rewrite_min) {
        uint64_t base = srv.aof_base_size ? srv.aof_base_size : 1;
        uint64_t growth = (srv.aof_current_size * 100 / base) - 100;
        if (growth >= srv.cfg.auto_aof_rewrite_pct && !rewrite_limited()) {
            log_info("Starting automatic rewriting of AOF on %llu%% growth",
                     (unsigned long long)growth);
            if (aof_rewrite_start(err, sizeof err) < 0)
                log_warn("%s", err);
        }
    }
    if (srv.aof_state == AOF_ON && srv.aof_buf.len && !srv.aof_last_write_ok)
        aof_flush(0);
}

static void kill_rewrite_child(void)
{
    if (srv.child_pid <= 0)
        return;
    log_info("Killing running AOF rewrite child: %d", (int)srv.child_pid);
    kill(srv.child_pid, SIGKILL);
    waitpid(srv.child_pid, NULL, 0);
    unlink(srv.child_tmpfile);
    srv.child_pid = -1;
}

int aof_set_enabled(int on)
{
    if (on) {
        if (srv.aof_state != AOF_OFF)
            return 0;
        srv.aof_state = AOF_WAIT_REWRITE;
        /* A rewrite started with AOF off keeps no writes made since its
         * fork: start over, as Redis does. */
        kill_rewrite_child();
        if (other_child_running()) {
            srv.aof_rewrite_scheduled = 1;
            log_warn("AOF was enabled but there is already another background operation. An AOF "
                     "background was scheduled to start when possible.");
            return 0;
        }
        if (srv.in_exec) {
            srv.aof_rewrite_scheduled = 1;
            log_warn("AOF was enabled during a transaction. An AOF background was scheduled to "
                     "start when possible.");
            return 0;
        }
        char err[256];
        if (aof_rewrite_start(err, sizeof err) < 0) {
            log_warn("%s", err);
            srv.aof_state = AOF_OFF;
            return -1;
        }
        return 0;
    }
    if (srv.aof_state == AOF_OFF)
        return 0;
    aof_flush(1);
    int waiting = srv.aof_state == AOF_WAIT_REWRITE;
    kill_rewrite_child();
    swap_fd(-1);
    if (waiting)
        remove_temp_incr();
    srv.aof_rewrite_scheduled = 0;
    srv.aof_state = AOF_OFF;
    return 0;
}

/* ---- brisk-kv --check-aof (Redis 7's redis-check-aof) ---- */

/* Where an RDB image at the start of fd ends (past its EOF opcode and
 * CRC-64), found without loading it: the first 0xFF byte the CRC of
 * everything before it (itself included) matches. Returns -1 if none. */
static off_t rdb_image_end(int fd, off_t size)
{
    unsigned char *img = kv_malloc((size_t)size + 1);
    off_t end = -1;
    if (pread(fd, img, (size_t)size, 0) != (ssize_t)size)
        goto out;
    uint64_t crc = 0; /* of img[0, done) */
    off_t done = 0;
    for (off_t i = 9; i + 8 < size; i++) {
        if (img[i] != RDB_OPCODE_EOF)
            continue;
        crc = rdb_crc64(crc, img + done, (size_t)(i + 1 - done));
        done = i + 1;
        uint64_t want = 0;
        for (int k = 7; k >= 0; k--)
            want = want << 8 | img[i + 1 + k];
        if (crc == want) {
            end = i + 9;
            break;
        }
    }
out:
    kv_free(img);
    return end;
}

static long long count_lines(int fd, off_t from, off_t to)
{
    char b[65536];
    long long n = 0;
    while (from < to) {
        ssize_t r = pread(fd, b, (size_t)BK_MIN((off_t)sizeof b, to - from), from);
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            n += b[i] == '\n';
        from += r;
    }
    return n;
}

enum { CHK_OLD, CHK_BASE, CHK_INCR };

/* Checks one file; returns 0 valid, 1 not valid (or could not fix). */
static int check_one(const char *path, const char *name, int kind, int last, int fix,
                     long long *line)
{
    chk_ts_cut = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        printf("Cannot open file %s: %s, aborting...\n", path, strerror(errno));
        return 1;
    }
    struct stat st;
    off_t size = fstat(fd, &st) == 0 ? st.st_size : 0;
    char sig[5];
    off_t start = 0;
    int rdb = size >= 5 && pread(fd, sig, 5, 0) == 5 && memcmp(sig, "REDIS", 5) == 0;
    if (kind == CHK_BASE)
        printf("Start to check BASE AOF (%s format).\n", rdb ? "RDB" : "RESP");
    if (rdb) {
        start = rdb_image_end(fd, size);
        if (start < 0) {
            printf("RDB preamble of AOF file is not sane, aborting.\n");
            close(fd);
            return 1;
        }
        printf("RDB preamble is OK, proceeding with AOF tail...\n");
    }
    aof_read_result res;
    lseek(fd, start, SEEK_SET);
    aof_read(fd, NULL, NULL, &res);
    off_t good = start + res.good, at = res.verdict == AOF_BAD ? start + res.bad_at : size;
    size = start + res.size;
    *line += count_lines(fd, start, res.verdict == AOF_VALID ? size : at);
    close(fd);
    if (res.verdict == AOF_IO_ERROR) {
        printf("Cannot read file %s: %s\n", path, res.why);
        return 1;
    }
    if (res.verdict == AOF_BAD)
        printf("0x%16llx: %s\n", (unsigned long long)at, res.why);
    if (res.verdict != AOF_VALID || !chk_ts_limit)
        printf("AOF analyzed: filename=%s, size=%lld, ok_up_to=%lld, ok_up_to_line=%lld, "
               "diff=%lld\n",
               name, (long long)size, (long long)good, *line, (long long)(size - good));
    if (res.verdict == AOF_VALID && chk_ts_limit) {
        if (chk_ts_cut < 0) {
            printf("Truncate nothing in AOF %s to timestamp %lld\n", name, chk_ts_limit);
            printf("%sAOF %s is valid\n",
                   kind == CHK_BASE ? "BASE " : kind == CHK_INCR ? "INCR " : "", name);
            return 0;
        }
        if (!last) {
            printf("Failed to truncate AOF %s to timestamp %lld to offset %lld because it is not "
                   "the last file.\n",
                   path, chk_ts_limit, (long long)(start + chk_ts_cut));
            return 1;
        }
        if (start + chk_ts_cut == 0) {
            printf("AOF %s has nothing before timestamp %lld, aborting...\n", path, chk_ts_limit);
            return 1;
        }
        if (truncate_file(path, start + chk_ts_cut) < 0) {
            printf("Failed to truncate AOF %s to timestamp %lld: %s\n", name, chk_ts_limit,
                   strerror(errno));
            return 1;
        }
        printf("Successfully truncated AOF %s to timestamp %lld\n", name, chk_ts_limit);
        return 0;
    }
    if (res.verdict == AOF_VALID) {
        printf("%sAOF %s is valid\n", kind == CHK_BASE ? "BASE " : kind == CHK_INCR ? "INCR " : "",
               name);
        return 0;
    }
    if (!fix) {
        printf("AOF %s is not valid. Use the --fix option to try fixing it.\n", name);
        return 1;
    }
    if (!last) {
        printf("Failed to truncate AOF %s because it is not the last file\n", name);
        return 1;
    }
    if (truncate_file(path, good) < 0) {
        printf("Failed to truncate AOF %s: %s\n", name, strerror(errno));
        return 1;
    }
    printf("Successfully truncated AOF %s to %lld bytes\n", name, (long long)good);
    return 0;
}

int aof_check_main(const char *path, int fix, long long truncate_to)
{
    long long line = 1;
    chk_ts_limit = truncate_to;
    size_t n = strlen(path), sl = strlen(".manifest");
    if (n < sl || strcmp(path + n - sl, ".manifest") != 0) {
        printf("Start checking Old-Style AOF\n");
        return check_one(path, path, CHK_OLD, 1, fix, &line);
    }
    printf("Start checking Multi Part AOF\n");
    aof_manifest am;
    aof_manifest_load(path, &am); /* (a bad one: Redis's message, exit 1) */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = 0;
    else
        snprintf(dir, sizeof dir, "./");
    aof_info *base = aof_manifest_base(&am);
    int nincr = aof_manifest_count(&am, AOF_TYPE_INCR), rc = 0, left = (base != NULL) + nincr;
    char fp[8192];
    if (base) {
        snprintf(fp, sizeof fp, "%s%s", dir, base->name);
        rc = check_one(fp, base->name, CHK_BASE, --left == 0, fix, &line);
    }
    if (!rc && nincr)
        printf("Start to check INCR files.\n");
    for (int i = 0; !rc && i < am.n; i++) {
        if (am.f[i].type != AOF_TYPE_INCR)
            continue;
        snprintf(fp, sizeof fp, "%s%s", dir, am.f[i].name);
        rc = check_one(fp, am.f[i].name, CHK_INCR, --left == 0, fix, &line);
    }
    if (!rc)
        printf("All AOF files and manifest are valid\n");
    aof_manifest_free(&am);
    return rc;
}
