#include "kv/aof.h"
#include "kv/script.h"

#include "core/log.h"
#include "kv/db.h"
#include "kv/mem.h"
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

void aof_feed(kv_db *db, int argc, const bk_str *argv)
{
    if (BK_UNLIKELY(repl_feeding))
        repl_feed(db, argc, argv); /* replicas get the same stream */
    if (srv.aof_state == AOF_OFF && srv.child_pid <= 0)
        return;
    bk_buf *b = &srv.aof_buf;
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

void aof_flush(int force_fsync)
{
    if (srv.child_pid > 0 && srv.aof_buf.len)
        buf_append(&srv.aof_rewrite_buf, srv.aof_buf.data, srv.aof_buf.len);
    if (srv.aof_fd < 0) {
        srv.aof_buf.len = 0;
        multi_mark = SIZE_MAX;
        return;
    }
    if (srv.aof_buf.len) {
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

int aof_open(void)
{
    int fd = open(srv.aof_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_error("can't open the append-only file %s: %s", srv.aof_path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) == 0)
        srv.aof_current_size = srv.aof_base_size = (uint64_t)st.st_size;
    srv.aof_fd = fd;
    srv.aof_state = AOF_ON;
    srv.aof_selected_db = -1;
    aof_start_fsync_thread();
    return 0;
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

int aof_load(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        log_error("can't open the append-only file %s: %s", path, strerror(errno));
        return -1;
    }
    kv_client *c = kv_client_new_fake();
    srv.loading = 1;
    struct stat st;
    kv_loading_begin(fstat(fd, &st) == 0 ? (size_t)st.st_size : 0);
    aof_read_result res;
    aof_read(fd, load_command, c, &res);
    close(fd);
    int rc = 0;
    switch (res.verdict) {
    case AOF_VALID:
        break;
    case AOF_IO_ERROR:
        log_error("error reading the AOF %s: %s", path, res.why);
        rc = -1;
        break;
    case AOF_BAD:
        log_error("%s reading the append only file %s at offset %lld", res.why, path,
                  (long long)res.bad_at);
        log_error("run 'brisk-kv --check-aof --fix %s' to repair it", path);
        rc = -1;
        break;
    case AOF_TRUNCATED:
        if (!srv.cfg.aof_load_truncated) {
            log_error("the append only file %s is truncated at offset %lld (size %lld); "
                      "set aof-load-truncated yes or run 'brisk-kv --check-aof --fix %s'",
                      path, (long long)res.good, (long long)res.size, path);
            rc = -1;
            break;
        }
        log_warn("!!! Warning: short read while loading the AOF file %s !!! "
                 "truncating it from %lld to %lld bytes (the last complete command); "
                 "AOF loaded anyway because aof-load-truncated is enabled",
                 path, (long long)res.size, (long long)res.good);
        /* An unfinished transaction was queued but never ran. */
        c->flags &= ~CLIENT_MULTI;
        if (truncate_file(path, res.good) < 0) {
            log_error("could not truncate the AOF %s: %s", path, strerror(errno));
            rc = -1;
        }
        break;
    }
    kv_client_free_fake(c);
    srv.loading = 0;
    if (rc == 0)
        log_info("loaded %lld commands from %s", res.ncmds, path);
    return rc;
}

int aof_check_main(const char *path, int fix)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "Cannot open file %s: %s\n", path, strerror(errno));
        return 1;
    }
    aof_read_result res;
    aof_read(fd, NULL, NULL, &res);
    close(fd);
    if (res.verdict == AOF_IO_ERROR) {
        printf("Cannot read file %s: %s\n", path, res.why);
        return 1;
    }
    if (res.verdict == AOF_BAD)
        printf("0x%llx: %s\n", (unsigned long long)res.bad_at, res.why);
    printf("AOF analyzed: filename=%s, size=%lld, ok_up_to=%lld, diff=%lld\n", path,
           (long long)res.size, (long long)res.good, (long long)(res.size - res.good));
    if (res.verdict == AOF_VALID) {
        printf("AOF %s is valid (%lld commands)\n", path, res.ncmds);
        return 0;
    }
    if (!fix) {
        printf("AOF %s is %s: run with --fix to truncate it to %lld bytes\n", path,
               res.verdict == AOF_BAD ? "corrupted" : "truncated", (long long)res.good);
        return 1;
    }
    if (truncate_file(path, res.good) < 0) {
        printf("Failed to truncate AOF %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("Successfully truncated AOF %s to %lld bytes\n", path, (long long)res.good);
    return 0;
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

int aof_rewrite_start(char *err, size_t errlen)
{
    if (srv.child_pid > 0) {
        snprintf(err, errlen, "ERR Background append only file rewriting already in progress");
        return -1;
    }
    /* Everything applied so far goes to the old file now, so the rewrite
     * buffer holds exactly the writes made after the snapshot. */
    aof_flush(0);
    srv.aof_rewrite_buf.len = 0;
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "ERR Can't rewrite append only file in background: fork: %s",
                 strerror(errno));
        return -1;
    }
    if (pid == 0) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "temp-rewriteaof-bg-%d.aof", (int)getpid());
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        _exit(rewrite_to(tmp) == 0 ? 0 : 1);
    }
    srv.child_pid = pid;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "temp-rewriteaof-bg-%d.aof", (int)pid);
    kv_free(srv.child_tmpfile);
    srv.child_tmpfile = kv_strndup(tmp, strlen(tmp));
    srv.aof_selected_db = -1;
    srv.aof_rewrite_start_ms = srv.now_ms;
    log_info("Background append only file rewriting started by pid %d", (int)pid);
    return 0;
}

static void fsync_dir(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    int fd = open(dirname(tmp), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void rewrite_done(int ok)
{
    const char *tmp = srv.child_tmpfile;
    srv.child_pid = -1;
    if (!ok) {
        unlink(tmp);
        srv.aof_last_bgrewrite_ok = 0;
        log_warn("Background AOF rewrite failed");
        if (srv.aof_state == AOF_WAIT_REWRITE) {
            srv.aof_state = AOF_OFF;
            srv.cfg.appendonly = 0;
        }
        srv.aof_rewrite_buf.len = 0;
        return;
    }
    /* Writes since the fork: into the old file (if any) and the new one. */
    srv.child_pid = 1; /* so aof_flush copies into the rewrite buffer */
    aof_flush(0);
    srv.child_pid = -1;
    int fd = open(tmp, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || write_all(fd, srv.aof_rewrite_buf.data, srv.aof_rewrite_buf.len) < 0 ||
        fsync(fd) < 0) {
        log_warn("Background AOF rewrite: can't finish %s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        srv.aof_last_bgrewrite_ok = 0;
        srv.aof_rewrite_buf.len = 0;
        return;
    }
    if (rename(tmp, srv.aof_path) < 0) {
        log_warn("Background AOF rewrite: rename %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        srv.aof_last_bgrewrite_ok = 0;
        srv.aof_rewrite_buf.len = 0;
        return;
    }
    fsync_dir(srv.aof_path);
    struct stat st;
    uint64_t size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (srv.aof_state != AOF_OFF) {
        pthread_mutex_lock(&srv.fsync_mu);
        int old = srv.aof_fd;
        srv.aof_fd = fd;
        pthread_mutex_unlock(&srv.fsync_mu);
        if (old >= 0)
            close(old);
        if (srv.aof_state == AOF_WAIT_REWRITE) {
            srv.aof_state = AOF_ON;
            aof_start_fsync_thread();
        }
    } else {
        close(fd);
    }
    srv.aof_current_size = srv.aof_base_size = size;
    srv.aof_rewrite_buf.len = 0;
    if (srv.aof_rewrite_buf.cap > 4 * 1024 * 1024)
        buf_free(&srv.aof_rewrite_buf);
    srv.aof_rewrites++;
    srv.aof_last_bgrewrite_ok = 1;
    srv.lastsave = srv.now_ms / 1000;
    log_info("Background AOF rewrite finished successfully (%llu bytes)",
             (unsigned long long)size);
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

void aof_cron(void)
{
    aof_check_child();
    if (srv.aof_state == AOF_ON && srv.child_pid <= 0 && srv.cfg.auto_aof_rewrite_pct &&
        srv.aof_current_size > srv.cfg.auto_aof_rewrite_min) {
        uint64_t base = srv.aof_base_size ? srv.aof_base_size : 1;
        uint64_t growth = (srv.aof_current_size * 100 / base) - 100;
        if (growth >= srv.cfg.auto_aof_rewrite_pct) {
            char err[256];
            log_info("Starting automatic rewriting of AOF on %llu%% growth",
                     (unsigned long long)growth);
            if (aof_rewrite_start(err, sizeof err) < 0)
                log_warn("%s", err);
        }
    }
    if (srv.aof_state == AOF_ON && srv.aof_buf.len && !srv.aof_last_write_ok)
        aof_flush(0);
}

int aof_set_enabled(int on)
{
    if (on) {
        if (srv.aof_state != AOF_OFF)
            return 0;
        srv.aof_state = AOF_WAIT_REWRITE;
        char err[256];
        if (srv.child_pid > 0) {
            /* a rewrite is already running: its result becomes the AOF */
            return 0;
        }
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
    pthread_mutex_lock(&srv.fsync_mu);
    int old = srv.aof_fd;
    srv.aof_fd = -1;
    pthread_mutex_unlock(&srv.fsync_mu);
    if (old >= 0)
        close(old);
    srv.aof_state = AOF_OFF;
    return 0;
}
