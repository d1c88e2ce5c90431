/* DUMP, RESTORE (and RESTORE-ASKING), MIGRATE: values moved between
 * servers as DUMP payloads (rdb.h), with Redis 7.0's options and errors;
 * SAVE, BGSAVE, save points and the start-up load of dump.rdb. */
#include "core/log.h"
#include "kv/notify.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/rdb.h"
#include "kv/script.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ERR_BUSYKEY "BUSYKEY Target key name already exists."
#define ERR_PAYLOAD "ERR DUMP payload version or checksum are wrong"
#define ERR_BAD_FORMAT "ERR Bad data format"

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

void dump_command(kv_client *c)
{
    kv_entry *e = db_lookup_read(c->db, c->argv[1]);
    if (!e) {
        reply_null(c);
        return;
    }
    bk_buf b = { 0 };
    rdb_dump_payload(&b, e);
    reply_bulk(c, b.data, b.len);
    buf_free(&b);
}

/* The LRU stamp for a key idle for idle_s seconds (IDLETIME), on the
 * 28-bit clock of KV_LRU_MS ticks; idle times past the clock's range wrap
 * to half its range ago, as Redis does. */
static uint32_t lru_for_idle(long long idle_s)
{
    const uint64_t range = 1u << 28;
    uint64_t ticks = (uint64_t)idle_s > UINT64_MAX / 1000 ? UINT64_MAX
                                                          : (uint64_t)idle_s * 1000 / KV_LRU_MS;
    if (ticks > srv.lru_clock)
        return (uint32_t)((srv.lru_clock + range / 2) % range);
    return (uint32_t)(srv.lru_clock - ticks);
}

void restore_command(kv_client *c)
{
    int replace = 0, absttl = 0;
    long long idle = -1, freq = -1, ttl;
    for (int j = 4; j < c->argc; j++) {
        int more = c->argc - j - 1;
        bk_str o = c->argv[j];
        if (arg_is(o, "replace")) {
            replace = 1;
        } else if (arg_is(o, "absttl")) {
            absttl = 1;
        } else if (arg_is(o, "idletime") && more >= 1 && freq == -1) {
            if (arg_ll(c, c->argv[++j], &idle) < 0)
                return;
            if (idle < 0) {
                reply_error(c, "ERR Invalid IDLETIME value, must be >= 0");
                return;
            }
        } else if (arg_is(o, "freq") && more >= 1 && idle == -1) {
            if (arg_ll(c, c->argv[++j], &freq) < 0)
                return;
            if (freq < 0 || freq > 255) {
                reply_error(c, "ERR Invalid FREQ value, must be >= 0 and <= 255");
                return;
            }
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    bk_str key = c->argv[1];
    if (!replace && db_lookup_write(c->db, key)) {
        reply_error(c, ERR_BUSYKEY);
        return;
    }
    if (arg_ll(c, c->argv[2], &ttl) < 0)
        return;
    if (ttl < 0) {
        reply_error(c, "ERR Invalid TTL value, must be >= 0");
        return;
    }
    bk_str payload = c->argv[3];
    if (rdb_verify_payload(payload.p, payload.len) < 0) {
        reply_error(c, ERR_PAYLOAD);
        return;
    }
    rdb_value v;
    if (rdb_load_payload(payload.p, payload.len, &v) < 0) {
        reply_error(c, ERR_BAD_FORMAT);
        return;
    }
    int deleted = 0;
    if (replace) {
        kv_entry *old = db_lookup_write(c->db, key);
        if (old) {
            db_delete_entry(c->db, old);
            deleted = 1;
        }
    }
    /* A relative TTL past the end of time wraps negative in Redis, which
     * then finds the key already expired: the same outcome here, without
     * the overflow. */
    int expired = 0;
    if (ttl && !absttl) {
        if (ttl > LLONG_MAX - srv.now_ms)
            expired = 1;
        else
            ttl += srv.now_ms;
    }
    if (ttl && ttl <= srv.now_ms && !srv.loading && !repl_is_replica())
        expired = 1;
    if (expired) {
        rdb_value_free(&v);
        if (deleted) {
            bk_str del[2] = { BK_STR("DEL"), key };
            kv_touch_key(c->db, key);
            kv_notify(c->db, NOTIFY_GENERIC, "del", key);
            kv_dirty(1);
            kv_propagate_as(c, 2, del);
        }
        reply_ok(c);
        return;
    }
    kv_entry *e = rdb_value_store(c->db, key, &v);
    if (ttl) {
        e = db_set_expire(c->db, e, ttl);
        if (!absttl) {
            /* The AOF gets the absolute time, as Redis propagates it. */
            char ms[KV_LL_STR_MAX];
            bk_str *prop = kv_malloc(((size_t)c->argc + 1) * sizeof *prop);
            for (int i = 0; i < c->argc; i++)
                prop[i] = c->argv[i];
            prop[2] = (bk_str){ ms, kv_fmt_ll(ms, ttl) };
            prop[c->argc] = BK_STR("ABSTTL");
            kv_propagate_as(c, c->argc + 1, prop);
            kv_free(prop);
        }
    }
    /* As Redis: FREQ counts under an LFU policy, IDLETIME under another. */
    if (kv_lfu_on() && freq >= 0)
        e->lru = kv_lfu_stamp((unsigned)freq);
    else if (!kv_lfu_on() && idle >= 0)
        e->lru = lru_for_idle(idle) & 0xfffffff;
    kv_touch_key(c->db, key);
    kv_notify(c->db, NOTIFY_GENERIC, "restore", key);
    kv_dirty(1);
    reply_ok(c);
}

/* ---- MIGRATE ----
 * A blocking client, as Redis's: the server waits for the target (at most
 * the timeout per step) while it sends RESTORE commands and reads the
 * replies. Connections are cached per host:port for 10 s of idleness. */

#define MIGRATE_CACHE_MAX 64
#define MIGRATE_CACHE_TTL_MS 10000

typedef struct mig_sock {
    char name[300]; /* "host:port" */
    int fd;
    long long last_db;
    int64_t last_use_ms;
    char rbuf[1024];
    size_t rlen;
} mig_sock;

static mig_sock *mig_cache[MIGRATE_CACHE_MAX];
static size_t mig_n;

size_t migrate_cached_sockets(void)
{
    return mig_n;
}

static void mig_close_at(size_t i)
{
    close(mig_cache[i]->fd);
    kv_free(mig_cache[i]);
    mig_cache[i] = mig_cache[--mig_n];
}

static void mig_close_name(const char *name)
{
    for (size_t i = 0; i < mig_n; i++) {
        if (strcmp(mig_cache[i]->name, name) == 0) {
            mig_close_at(i);
            return;
        }
    }
}

static void bgsave_check_child(void);
static int bgsave_start(void);
static int bgsave_scheduled;

/* Whether a save point of the "save" option ("secs changes ..." pairs) is
 * reached: that many changes since the last save and that many seconds. */
static int save_point_reached(void)
{
    const char *p = srv.cfg.save;
    uint64_t changes = srv.dirty - srv.rdb_dirty_at_save;
    if (!p || !*p || changes == 0)
        return 0;
    int64_t since = srv.now_ms / 1000 - srv.lastsave;
    while (*p) {
        char *end;
        long long secs = strtoll(p, &end, 10);
        if (end == p)
            return 0;
        p = end;
        long long min_changes = strtoll(p, &end, 10);
        if (end == p)
            return 0;
        p = end;
        if ((long long)changes >= min_changes && since > secs)
            return 1;
        while (*p == ' ')
            p++;
    }
    return 0;
}

void dump_cron(void)
{
    bgsave_check_child();
    if (srv.child_pid <= 0 && srv.rdb_child_pid <= 0) {
        /* After a failed BGSAVE, save points wait 5 s before a retry. */
        int retry_ok = !srv.rdb_last_bgsave_failed || srv.now_ms - srv.rdb_save_start_ms > 5000;
        if (bgsave_scheduled || (retry_ok && save_point_reached())) {
            bgsave_scheduled = 0;
            bgsave_start();
        }
    }
    for (size_t i = 0; i < mig_n;) {
        if (srv.now_ms - mig_cache[i]->last_use_ms > MIGRATE_CACHE_TTL_MS)
            mig_close_at(i);
        else
            i++;
    }
}

/* Waits until fd is ready for ev or the deadline passes; -1 with errno
 * ETIMEDOUT then. */
static int mig_wait(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - kv_unix_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = { .fd = fd, .events = ev };
        int rc = poll(&p, 1, (int)BK_MIN(left, INT_MAX));
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

static int mig_connect(const char *host, const char *port, long long timeout)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    int64_t deadline = kv_unix_ms() + timeout;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        /* Like Redis, a refused connection shows at the first write
         * ("error writing"); only a timeout fails here. */
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 &&
            (errno != EINPROGRESS || mig_wait(fd, POLLOUT, deadline) < 0)) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

static mig_sock *mig_get(kv_client *c, const char *name, bk_str host, bk_str port, long long timeout)
{
    for (size_t i = 0; i < mig_n; i++) {
        if (strcmp(mig_cache[i]->name, name) == 0) {
            mig_cache[i]->last_use_ms = srv.now_ms;
            return mig_cache[i];
        }
    }
    if (mig_n == MIGRATE_CACHE_MAX)
        mig_close_at((size_t)(kv_rand64() % mig_n));
    char h[256], p[32];
    snprintf(h, sizeof h, "%.*s", (int)BK_MIN(host.len, sizeof h - 1), host.p);
    snprintf(p, sizeof p, "%.*s", (int)BK_MIN(port.len, sizeof p - 1), port.p);
    int fd = mig_connect(h, p, timeout);
    if (fd < 0) {
        reply_error(c, "IOERR error or timeout connecting to the client");
        return NULL;
    }
    mig_sock *s = kv_calloc(sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->fd = fd;
    s->last_db = -1;
    s->last_use_ms = srv.now_ms;
    mig_cache[mig_n++] = s;
    return s;
}

static int mig_write(mig_sock *s, const char *p, size_t n, long long timeout)
{
    int64_t deadline = kv_unix_ms() + timeout;
    while (n > 0) {
        ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        } else if (mig_wait(s->fd, POLLOUT, deadline) < 0) {
            return -1;
        }
    }
    return 0;
}

/* One reply line (without CRLF) into out. Returns 0 or -1. */
static int mig_read_line(mig_sock *s, char *out, size_t cap, long long timeout)
{
    int64_t deadline = kv_unix_ms() + timeout;
    for (;;) {
        char *nl = memchr(s->rbuf, '\n', s->rlen);
        if (nl) {
            size_t n = (size_t)(nl - s->rbuf) + 1, l = n - 1;
            if (l > 0 && s->rbuf[l - 1] == '\r')
                l--;
            l = BK_MIN(l, cap - 1);
            memcpy(out, s->rbuf, l);
            out[l] = '\0';
            memmove(s->rbuf, s->rbuf + n, s->rlen - n);
            s->rlen -= n;
            return 0;
        }
        if (s->rlen == sizeof s->rbuf)
            s->rlen = 0; /* an over-long line: keep its tail only */
        ssize_t r = recv(s->fd, s->rbuf + s->rlen, sizeof s->rbuf - s->rlen, 0);
        if (r > 0) {
            s->rlen += (size_t)r;
        } else if (r == 0) {
            errno = ECONNRESET;
            return -1;
        } else if (errno != EAGAIN && errno != EINTR) {
            return -1;
        } else if (mig_wait(s->fd, POLLIN, deadline) < 0) {
            return -1;
        }
    }
}

static void resp_bulk(bk_buf *b, const char *p, size_t n)
{
    char h[32];
    int hn = snprintf(h, sizeof h, "$%zu\r\n", n);
    if (buf_append(b, h, (size_t)hn) < 0 || buf_append(b, p, n) < 0 || buf_append(b, "\r\n", 2) < 0)
        abort();
}

static void resp_count(bk_buf *b, int n)
{
    char h[32];
    int hn = snprintf(h, sizeof h, "*%d\r\n", n);
    if (buf_append(b, h, (size_t)hn) < 0)
        abort();
}

void migrate_command(kv_client *c)
{
    int copy = 0, replace = 0, first_key = 3, num_keys = 1;
    bk_str *user = NULL, *pass = NULL;
    for (int j = 6; j < c->argc; j++) {
        int more = c->argc - j - 1;
        bk_str o = c->argv[j];
        if (arg_is(o, "copy")) {
            copy = 1;
        } else if (arg_is(o, "replace")) {
            replace = 1;
        } else if (arg_is(o, "auth") && more >= 1) {
            pass = &c->argv[++j];
        } else if (arg_is(o, "auth2") && more >= 2) {
            user = &c->argv[++j];
            pass = &c->argv[++j];
        } else if (arg_is(o, "keys")) {
            if (c->argv[3].len != 0) {
                reply_error(c, "ERR When using MIGRATE KEYS option, the key argument must be set "
                               "to the empty string");
                return;
            }
            first_key = j + 1;
            num_keys = c->argc - j - 1;
            break;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    long long timeout, dbid;
    if (arg_ll(c, c->argv[5], &timeout) < 0 || arg_ll(c, c->argv[4], &dbid) < 0)
        return;
    if (timeout <= 0)
        timeout = 1000;
    if (timeout > INT_MAX) /* deadlines are now + timeout: keep them finite */
        timeout = INT_MAX;

    /* The keys that exist, with their payloads, made before any I/O. */
    bk_str *keys = kv_malloc(((size_t)num_keys + 1) * sizeof *keys);
    int nk = 0;
    bk_buf cmd = { 0 };
    char name[300];
    snprintf(name, sizeof name, "%.*s:%.*s", (int)BK_MIN(c->argv[1].len, 256), c->argv[1].p,
             (int)BK_MIN(c->argv[2].len, 32), c->argv[2].p);
    int may_retry = 1, write_error = 0;
    int nlookup = 0;
    for (int j = 0; j < num_keys; j++)
        nlookup += db_lookup_read(c->db, c->argv[first_key + j]) != NULL;
    if (nlookup == 0) {
        reply_simple(c, "NOKEY");
        goto done;
    }
try_again:
    write_error = 0;
    nk = 0;
    cmd.len = 0;
    mig_sock *s = mig_get(c, name, c->argv[1], c->argv[2], timeout);
    if (!s)
        goto done;
    if (pass) {
        resp_count(&cmd, user ? 3 : 2);
        resp_bulk(&cmd, "AUTH", 4);
        if (user)
            resp_bulk(&cmd, user->p, user->len);
        resp_bulk(&cmd, pass->p, pass->len);
    }
    int select = s->last_db != dbid;
    if (select) {
        char d[KV_LL_STR_MAX];
        resp_count(&cmd, 2);
        resp_bulk(&cmd, "SELECT", 6);
        resp_bulk(&cmd, d, kv_fmt_ll(d, dbid));
    }
    for (int j = 0; j < num_keys; j++) {
        bk_str key = c->argv[first_key + j];
        kv_entry *e = db_find(c->db, key);
        if (!e || db_expired(e))
            continue;
        long long ttl = 0;
        if (e->flags & ENTRY_EXPIRES) {
            ttl = entry_expire(e) - srv.now_ms;
            if (ttl < 1)
                ttl = 1;
        }
        keys[nk++] = key;
        bk_buf payload = { 0 };
        rdb_dump_payload(&payload, e);
        char t[KV_LL_STR_MAX];
        resp_count(&cmd, replace ? 5 : 4);
        resp_bulk(&cmd, "RESTORE", 7);
        resp_bulk(&cmd, key.p, key.len);
        resp_bulk(&cmd, t, kv_fmt_ll(t, ttl));
        resp_bulk(&cmd, payload.data, payload.len);
        if (replace)
            resp_bulk(&cmd, "REPLACE", 7);
        buf_free(&payload);
    }
    if (mig_write(s, cmd.data, cmd.len, timeout) < 0) {
        write_error = 1;
        goto socket_err;
    }
    char line0[1024] = "", line1[1024] = "", line2[1024] = "";
    if (pass && mig_read_line(s, line0, sizeof line0, timeout) < 0)
        goto socket_err;
    if (select && mig_read_line(s, line1, sizeof line1, timeout) < 0)
        goto socket_err;
    int target_error = 0, socket_error = 0, ndel = 0, j;
    for (j = 0; j < nk; j++) {
        if (mig_read_line(s, line2, sizeof line2, timeout) < 0) {
            socket_error = 1;
            break;
        }
        if ((pass && line0[0] == '-') || (select && line1[0] == '-') || line2[0] == '-') {
            if (!target_error) {
                const char *err = (pass && line0[0] == '-')     ? line0
                                  : (select && line1[0] == '-') ? line1
                                                                : line2;
                s->last_db = -1;
                target_error = 1;
                reply_errorf(c, "ERR Target instance replied with error: %s", err + 1);
            }
        } else if (!copy) {
            /* Acknowledged: the local key goes (by name: a key may repeat). */
            if (db_delete(c->db, keys[j])) {
                kv_touch_key(c->db, keys[j]);
                kv_notify(c->db, NOTIFY_GENERIC, "del", keys[j]);
                kv_dirty(1);
            }
            keys[ndel++] = keys[j];
        }
    }
    if (!target_error && socket_error && j == 0 && may_retry && errno != ETIMEDOUT)
        goto socket_err;
    if (socket_error)
        mig_close_name(name);
    if (!copy && ndel > 0) {
        /* The AOF gets a DEL of the keys the target acknowledged. */
        bk_str *del = kv_malloc(((size_t)ndel + 1) * sizeof *del);
        del[0] = BK_STR("DEL");
        memcpy(del + 1, keys, (size_t)ndel * sizeof *del);
        kv_propagate_as(c, ndel + 1, del);
        kv_free(del);
    }
    if (!target_error && socket_error) {
        may_retry = 0;
        goto socket_err;
    }
    if (!target_error) {
        s->last_db = dbid;
        reply_ok(c);
    }
    goto done;

socket_err:
    mig_close_name(name);
    if (errno != ETIMEDOUT && may_retry) {
        may_retry = 0;
        goto try_again;
    }
    reply_errorf(c, "IOERR error or timeout %s to target instance",
                 write_error ? "writing" : "reading");
done:
    buf_free(&cmd);
    kv_free(keys);
}

/* ---- SAVE / BGSAVE (dump.rdb) ---- */

static void cfg_str_cb(void *ud, const char *name, const char *value)
{
    (void)name;
    snprintf(ud, 256, "%s", value);
}

/* The configured dbfilename (relative to dir, the working directory). */
static void rdb_filename(char out[256])
{
    snprintf(out, 256, "dump.rdb");
    kv_config_get(&srv.cfg, BK_STR("dbfilename"), cfg_str_cb, out);
}

static void saved(void)
{
    srv.lastsave = srv.now_ms / 1000;
    srv.rdb_saves++;
    /* Any successful save clears a failed BGSAVE's status (and MISCONF), as
     * Redis's rdbSave. */
    if (srv.rdb_last_bgsave_failed) {
        srv.rdb_last_bgsave_failed = 0;
        repl_persist_status_changed();
    }
}

void save_command(kv_client *c)
{
    if (srv.rdb_child_pid > 0) {
        reply_error(c, "ERR Background save already in progress");
        return;
    }
    char path[256];
    rdb_filename(path);
    uint64_t dirty = srv.dirty;
    if (rdb_save_file(path) < 0) {
        reply_error(c, "ERR");
        return;
    }
    srv.rdb_dirty_at_save = dirty;
    saved();
    log_info("DB saved on disk");
    reply_ok(c);
}

static int bgsave_start(void)
{
    char path[256];
    rdb_filename(path);
    int info_fds[2];
    childinfo_open(info_fds);
    pid_t pid = fork();
    if (pid < 0) {
        for (int i = 0; i < 2; i++)
            if (info_fds[i] >= 0)
                close(info_fds[i]);
        srv.rdb_last_bgsave_failed = 1;
        srv.rdb_save_start_ms = srv.now_ms;
        log_warn("Can't save in background: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        kv_oom_apply(KV_OOM_CHILD); /* oom-score-adj: the background child's value */
        childinfo_in_child(info_fds);
        _exit(rdb_save_file(path) == 0 ? 0 : 1);
    }
    uint64_t keys = 0;
    for (int d = 0; d < srv.cfg.databases; d++)
        keys += db_size(&srv.dbs[d]);
    childinfo_in_parent(info_fds, keys);
    srv.rdb_child_pid = pid;
    srv.stat_forks++;
    srv.rdb_dirty_at_fork = srv.dirty;
    srv.rdb_save_start_ms = srv.now_ms;
    log_info("Background saving started by pid %d", (int)pid);
    return 0;
}

static void bgsave_check_child(void)
{
    if (srv.rdb_child_pid <= 0)
        return;
    int status;
    pid_t pid = waitpid(srv.rdb_child_pid, &status, WNOHANG);
    if (pid == 0) {
        childinfo_poll();
        return;
    }
    int ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    childinfo_child_ended(ok);
    if (!ok) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "temp-%d.rdb", (int)srv.rdb_child_pid);
        unlink(tmp);
    }
    srv.rdb_child_pid = -1;
    srv.rdb_last_bgsave_failed = !ok;
    repl_persist_status_changed(); /* MISCONF starts or ends */
    srv.rdb_last_bgsave_secs = (srv.now_ms - srv.rdb_save_start_ms) / 1000 + 1;
    if (ok) {
        srv.rdb_dirty_at_save = srv.rdb_dirty_at_fork;
        saved();
        log_info("Background saving terminated with success");
    } else {
        log_warn("Background saving error");
    }
}

void bgsave_command(kv_client *c)
{
    int schedule = 0;
    if (c->argc > 1) {
        if (c->argc == 2 && arg_is(c->argv[1], "schedule")) {
            schedule = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    if (srv.rdb_child_pid > 0) {
        reply_error(c, "ERR Background save already in progress");
    } else if (srv.child_pid > 0 || srv.in_exec) {
        if (schedule || srv.in_exec) {
            bgsave_scheduled = 1;
            reply_simple(c, "Background saving scheduled");
        } else {
            reply_error(c, "ERR Another child process is active (AOF?): can't BGSAVE right now. "
                           "Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
        }
    } else if (bgsave_start() == 0) {
        reply_simple(c, "Background saving started");
    } else {
        reply_error(c, "ERR");
    }
}

static void bgsave_kill_child(void)
{
    if (srv.rdb_child_pid <= 0)
        return;
    char tmp[64];
    kill(srv.rdb_child_pid, SIGKILL);
    kv_waitpid(srv.rdb_child_pid, NULL, 0);
    childinfo_child_ended(0);
    snprintf(tmp, sizeof tmp, "temp-%d.rdb", (int)srv.rdb_child_pid);
    unlink(tmp);
    srv.rdb_child_pid = -1;
}

void dump_at_exit(void)
{
    bgsave_kill_child();
}

void dump_flushall(void)
{
    if (srv.rdb_child_pid > 0) {
        bgsave_kill_child(); /* on purpose: not a failed save (no MISCONF) */
        log_warn("Background saving terminated by FLUSHALL");
    }
    if (srv.cfg.save && srv.cfg.save[0] && !srv.loading) {
        char path[256];
        rdb_filename(path);
        uint64_t dirty = srv.dirty;
        if (rdb_save_file(path) == 0) {
            srv.rdb_dirty_at_save = dirty;
            saved();
        }
    }
}

int dump_shutdown_save(int force)
{
    bgsave_kill_child();
    char path[256];
    rdb_filename(path);
    log_info("Saving the final RDB snapshot before exiting.");
    if (rdb_save_file(path) < 0) {
        if (force) {
            log_warn("Error trying to save the DB. Exit anyway.");
            return 0;
        }
        log_warn("Error trying to save the DB, can't exit.");
        return -1;
    }
    log_info("DB saved on disk");
    return 0;
}

int dump_load_at_start(void)
{
    char path[256], err[256];
    rdb_filename(path);
    int64_t t0 = kv_unix_ms();
    int rc = rdb_load_file(path, 0, err, sizeof err);
    if (rc < 0) {
        log_warn("%s", err);
        return -1;
    }
    if (rc > 0) {
        log_info("DB loaded from disk: %.3f seconds", (double)(kv_unix_ms() - t0) / 1000.0);
        srv.rdb_dirty_at_save = srv.dirty;
        repl_rdb_loaded(); /* its repl-id/repl-offset: PSYNC after a restart */
    }
    return 0;
}

/* ---- DEBUG RELOAD / DEBUG OBJECT ---- */

void dump_debug_reload(kv_client *c)
{
    int merge = 0, noflush = 0, nosave = 0;
    for (int i = 2; i < c->argc; i++) {
        if (arg_is(c->argv[i], "merge")) {
            merge = 1;
        } else if (arg_is(c->argv[i], "noflush")) {
            noflush = 1;
        } else if (arg_is(c->argv[i], "nosave")) {
            nosave = 1;
        } else {
            reply_error(c, "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
            return;
        }
    }
    char path[256], err[256];
    rdb_filename(path);
    if (!nosave) {
        uint64_t dirty = srv.dirty;
        if (rdb_save_file(path) < 0) {
            reply_error(c, "ERR");
            return;
        }
        srv.rdb_dirty_at_save = dirty;
        saved();
    }
    /* As Redis: MERGE alone still empties first (it only lets the file's
     * keys and libraries replace those present); NOFLUSH keeps them, and a
     * library or key in both then fails the load. */
    if (!noflush) {
        for (int d = 0; d < srv.cfg.databases; d++) {
            kv_touch_db(&srv.dbs[d]);
            db_flush(&srv.dbs[d]);
        }
        function_rdb_flush();
    }
    if (rdb_load_file(path, merge, err, sizeof err) < 0) {
        log_warn("%s", err);
        reply_error(c, "ERR Error trying to load the RDB dump");
        return;
    }
    log_info("DB reloaded by DEBUG RELOAD");
    reply_ok(c);
}

void dump_debug_object(kv_client *c)
{
    kv_entry *e = db_find(c->db, c->argv[2]); /* stored, even if logically expired (Redis) */
    if (!e) {
        reply_error(c, ERR_NO_KEY);
        return;
    }
    bk_buf b = { 0 };
    rdb_save_object(&b, e);
    char extra[200] = "", line[512];
    if (e->type == KV_LIST) {
        size_t nodes, bytes;
        kv_list *l = entry_obj(e);
        int fill = rdb_list_shape(l, &nodes, &bytes);
        /* ql_compressed is whether the quicklist has a compress depth */
        const char *depth = kv_config_noop_str("list-compress-depth");
        int compressed = depth && strcmp(depth, "0") != 0;
        snprintf(extra, sizeof extra,
                 " ql_nodes:%zu ql_avg_node:%.2f ql_listpack_max:%d ql_compressed:%d "
                 "ql_uncompressed_size:%zu",
                 nodes, nodes ? (double)l->len / (double)nodes : 0.0, fill, compressed, bytes);
    }
    long long idle = (long long)((srv.lru_clock - e->lru) & 0xfffffff) * KV_LRU_MS / 1000;
    snprintf(line, sizeof line,
             "Value at:%p refcount:%lld encoding:%s serializedlength:%zu lru:%u "
             "lru_seconds_idle:%lld%s",
             (void *)e, object_refcount(e), rdb_encoding_name(e), b.len,
             (unsigned)((uint64_t)e->lru * KV_LRU_MS / 1000 & 0xffffff), idle, extra);
    reply_simple(c, line);
    buf_free(&b);
}
