/* Replication (see replication.h): backlog, PSYNC/SYNC, full sync in a
 * forked child, the replica's handshake and master link, REPLCONF, WAIT,
 * ROLE, REPLICAOF and INFO replication. */
#include "kv/replication.h"

#include "core/log.h"
#include "core/tls.h"
#include "kv/aof.h"
#include "kv/blocking.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/rdb.h"
#include "kv/reply.h"
#include "kv/script.h"
#include "kv/types.h"
#include "kv/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

int repl_feeding;
int repl_guard;
int kv_active_expire_off;

static void wait_check(int timeouts);
static void expire_local_keys(void);
static void failover_abort(const char *why);
static void failover_done(void);
static void failover_cron(void);
static void unset_master(void);
static int misconf(void);
static const char *replica_ip(kv_client *c, char *out, size_t n);

enum { FO_NONE, FO_WAIT_SYNC, FO_IN_PROGRESS };
static const char *const fo_names[] = { "no-failover", "waiting-for-sync", "failover-in-progress" };

static int arg_is(bk_str s, const char *lower)
{
    return s.len == strlen(lower) && strncasecmp(s.p, lower, s.len) == 0;
}

/* A replica of ours, by where its full sync stands. */
enum { RS_WAIT_BGSAVE_START = 1, RS_WAIT_BGSAVE_END, RS_ONLINE };
static const char *rs_names[] = { "none", "wait_bgsave", "wait_bgsave", "online" };

/* Our link to a master. The handshake states answer ROLE as "handshake". */
enum {
    LS_NONE,
    LS_CONNECT,    /* to connect (cron) */
    LS_CONNECTING, /* connect() in progress */
    LS_TLS,        /* tls-replication: the TLS handshake */
    LS_PONG,       /* waiting for the reply to PING */
    LS_AUTH,
    LS_PORT,
    LS_CAPA,
    LS_PSYNC,
    LS_TRANSFER, /* receiving the RDB */
    LS_CONNECTED,
};

enum { CAPA_EOF = 1, CAPA_PSYNC2 = 2 };

#define EOF_MARK_LEN 40
#define MAX_FORK_REPLICAS 8 /* their outcome travels in the exit status */
#define ZERO_ID "0000000000000000000000000000000000000000"

static struct {
    /* configuration */
    int diskless_sync, diskless_delay, diskless_max;
    long long backlog_size;
    int timeout, ping_period;
    int read_only, serve_stale;
    int min_to_write, min_max_lag;
    char *masterauth, *masteruser;
    size_t masterauth_len; /* masterauth is binary (CONFIG SET may put a NUL in it) */
    int priority, announced;
    char *announce_ip;
    int announce_port;
    char diskless_load[16];
    int backlog_ttl, no_tcp_nodelay, ignore_maxmemory;
    int noop_load_events;
    char *noop_prop_err;
    /* replication ids and offsets */
    char replid[41], replid2[41];
    long long offset, second_offset;
    /* backlog: a ring of size bytes, histlen of them valid, the next write at idx */
    char *backlog;
    long long bl_size, bl_histlen, bl_idx, bl_off;
    int seldb, in_multi;
    int tx_cmds;  /* commands of the running transaction so far (2: MULTI sent) */
    bk_buf held;  /* its first command, streamed alone if no second comes */
    size_t held_sel; /* bytes of held that are a SELECT (MULTI goes after them) */
    /* our replicas */
    kv_client **replicas;
    int nreplicas, cap;
    pid_t child;
    kv_client *child_set[MAX_FORK_REPLICAS];
    int child_n;
    int child_diskless;
    int *child_sending; /* shared with the child: its RDB file is whole, it sends */
    char child_tmp[64];
    int good;
    uint64_t sync_full, sync_partial_ok, sync_partial_err;
    int64_t last_ping_ms;
    int64_t no_replicas_since; /* for repl-backlog-ttl */
    /* our master */
    char *host;
    int port;
    int state;
    int fd;
    bk_io io;
    tls_conn *tls;       /* tls-replication: the link's TLS, until it becomes a client */
    bk_timer tls_kick;   /* reads what the TLS layer holds (no socket event announces it) */
    bk_buf in;           /* handshake lines, then the RDB */
    long long xfer_size; /* -1: EOF-mark framing */
    size_t xfer_scanned; /* bytes of R.in searched for the EOF mark */
    int xfer_header;
    /* a diskless load (repl-diskless-load) in progress: loading (clients
     * get LOADING) or async loading (swapdb with the master's replid: the
     * old data is served until the new replaces it) */
    int xfer_loading, async_loading;
    /* that load, key by key as the RDB comes, into a spare set of dbs
     * swapped in at the end (the old data stays until then) */
    int streaming, read_held;
    rdb_stream stream;
    kv_db *spare;
    size_t xfer_fed;   /* RDB bytes parsed and dropped from R.in */
    size_t feed_retry; /* parse again once this many bytes wait (an item cut short) */
    int64_t retry_at_ms; /* no reconnection before (a broken full sync) */
    bk_timer feed_timer;
    char eofmark[EOF_MARK_LEN];
    int64_t last_io_ms, down_since_ms, handshake_start_ms;
    kv_client *master;
    int cached; /* replid/offset describe data we hold: PSYNC with them */
    int master_db; /* the db the master's stream has selected at our offset */
    char master_replid[41];
    long long master_offset;
    int ack_pending;
    bk_buf mpend; /* applied bytes of a transaction from the master, until its EXEC */
    /* clients blocked in WAIT, and those unblocked with input to run */
    kv_client **waiting;
    int nwaiting, wcap;
    kv_client **resume;
    int nresume, rcap;
    /* keys written by clients of a writable replica: they expire here */
    struct local_key {
        int db;
        size_t len;
        char *key;
    } *lk;
    int nlk, lkcap;
    bk_timer resume_timer;
    /* FAILOVER: writes paused while a replica catches up (FO_WAIT_SYNC),
     * then we PSYNC it with FAILOVER as its replica (FO_IN_PROGRESS) */
    int fo_state, fo_force, fo_port;
    char fo_host[256]; /* "" = any replica */
    int64_t fo_end_ms; /* 0 = no timeout */
} R = { .diskless_sync = 1, .diskless_delay = 5, .backlog_size = 1024 * 1024, .timeout = 60,
        .ping_period = 10, .read_only = 1, .serve_stale = 1, .min_max_lag = 10, .priority = 100,
        .announced = 1, .diskless_load = "disabled", .backlog_ttl = 3600, .noop_load_events = 2097152, .ignore_maxmemory = 1, .second_offset = -1, .seldb = -1, .fd = -1,
        .io = { .fd = -1 } };

static void random_id(char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[20];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(rand() ^ (int)(srv.now_ms >> (i % 8)));
    }
    if (fd >= 0)
        close(fd);
    for (int i = 0; i < 20; i++) {
        out[2 * i] = hex[rnd[i] >> 4];
        out[2 * i + 1] = hex[rnd[i] & 15];
    }
    out[40] = '\0';
}

static void update_flags(void)
{
    repl_feeding = R.backlog != NULL && !R.host;
    repl_guard = R.host != NULL || R.min_to_write > 0 || misconf();
}

static void stream_discard(void);
static void relays_free_dead(void);

static void repl_at_exit(void)
{
    stream_discard(); /* a diskless load in progress: its spare dbs */
    relays_free_dead();
    if (R.child > 0) {
        kill(R.child, SIGKILL);
        kv_waitpid(R.child, NULL, 0);
        R.child = 0;
    }
    if (R.child_tmp[0])
        unlink(R.child_tmp);
}

void repl_init(void)
{
    atexit(repl_at_exit);
    random_id(R.replid);
    memcpy(R.replid2, ZERO_ID, 41);
    update_flags();
    /* Pings every repl-ping-replica-period counted from the start, as
     * Redis's cron loops: a first replica does not get one at once. */
    R.last_ping_ms = kv_unix_ms();
    void *m = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    R.child_sending = m == MAP_FAILED ? NULL : m;
}

/* ---- the backlog and the stream ---- */

static void backlog_create(void)
{
    R.bl_size = R.backlog_size;
    R.backlog = kv_malloc((size_t)R.bl_size);
    R.bl_histlen = 0;
    R.bl_idx = 0;
    R.bl_off = R.offset + 1;
    update_flags();
}

static void backlog_resize(long long size)
{
    if (!R.backlog || size == R.bl_size)
        return;
    /* Like Redis: a new size starts an empty backlog at the current offset. */
    kv_free(R.backlog);
    R.backlog_size = size;
    backlog_create();
}

static void backlog_append(const char *p, size_t n)
{
    R.offset += (long long)n;
    if (!R.backlog)
        return;
    while (n > 0) {
        size_t room = (size_t)(R.bl_size - R.bl_idx);
        size_t k = n < room ? n : room;
        memcpy(R.backlog + R.bl_idx, p, k);
        R.bl_idx += (long long)k;
        if (R.bl_idx == R.bl_size)
            R.bl_idx = 0;
        R.bl_histlen += (long long)k;
        p += k;
        n -= k;
    }
    if (R.bl_histlen > R.bl_size)
        R.bl_histlen = R.bl_size;
    R.bl_off = R.offset - R.bl_histlen + 1;
}

/* Appends stream bytes to the backlog and to every replica past the
 * start of its full sync. */
static void stream_append(const char *p, size_t n)
{
    backlog_append(p, n);
    for (int i = 0; i < R.nreplicas; i++) {
        kv_client *c = R.replicas[i];
        if (c->repl_state == RS_WAIT_BGSAVE_START)
            continue;
        if (buf_append(&c->wbuf, p, n) < 0)
            abort();
        kv_client_output_added(c);
    }
}

static void put_header(bk_buf *b, char type, long long n)
{
    char tmp[32];
    tmp[0] = type;
    size_t k = 1 + kv_fmt_ll(tmp + 1, n);
    tmp[k++] = '\r';
    tmp[k++] = '\n';
    if (buf_append(b, tmp, k) < 0)
        abort();
}

static void put_command(bk_buf *b, int argc, const bk_str *argv)
{
    put_header(b, '*', argc);
    for (int i = 0; i < argc; i++) {
        put_header(b, '$', (long long)argv[i].len);
        if (buf_append(b, argv[i].p, argv[i].len) < 0 || buf_append(b, "\r\n", 2) < 0)
            abort();
    }
}

static bk_buf scratch;

static void stream_command(int argc, const bk_str *argv)
{
    scratch.len = 0;
    put_command(&scratch, argc, argv);
    stream_append(scratch.data, scratch.len);
}

void repl_feed(kv_db *db, int argc, const bk_str *argv)
{
    if (R.host || !R.backlog)
        return; /* a replica proxies its master's stream instead */
    /* A transaction (srv.aof_in_multi set) that writes one command
     * streams it alone, as Redis 7.0: the first is held, MULTI goes out
     * with it when a second comes (see aof_feed). */
    bk_buf *b = &scratch;
    scratch.len = 0;
    if (srv.aof_in_multi != 0) {
        if (R.tx_cmds == 0) {
            b = &R.held;
            R.held.len = 0;
        } else if (R.tx_cmds == 1) {
            /* as Redis: the SELECT of the first command, then MULTI */
            static const bk_str multi[] = { { "MULTI", 5 } };
            if (buf_append(&scratch, R.held.data, R.held_sel) < 0)
                abort();
            put_command(&scratch, 1, multi);
            if (buf_append(&scratch, R.held.data + R.held_sel, R.held.len - R.held_sel) < 0)
                abort();
            R.in_multi = 1;
        }
        R.tx_cmds++;
    } else if (BK_UNLIKELY(R.tx_cmds)) {
        repl_exec_end(); /* a transaction whose end was not seen */
    }
    if (db->id != R.seldb) {
        char num[KV_LL_STR_MAX];
        bk_str sel[2] = { { "SELECT", 6 }, { num, kv_fmt_ll(num, db->id) } };
        put_command(b, 2, sel);
        R.seldb = db->id;
    }
    if (b == &R.held)
        R.held_sel = R.held.len;
    put_command(b, argc, argv);
    if (b == &scratch)
        stream_append(scratch.data, scratch.len);
}

void repl_exec_end(void)
{
    if (R.tx_cmds == 1)
        stream_append(R.held.data, R.held.len);
    R.tx_cmds = 0;
    if (R.in_multi) {
        static const bk_str exec[] = { { "EXEC", 4 } };
        stream_command(1, exec);
    }
    R.in_multi = 0;
}

void repl_master_applied(kv_client *c)
{
    /* A transaction counts at its EXEC, as in Redis: a link lost inside
     * it discards it, and the PSYNC offset must ask for it again. */
    if (c->flags & CLIENT_MULTI)
        return;
    size_t done = resp_parser_consumed(&c->parser);
    if (done > c->repl_mark) {
        const char *p = c->rbuf.data + c->repl_mark;
        size_t n = done - c->repl_mark;
        c->repl_mark = done;
        if (R.mpend.len) {
            buf_append(&R.mpend, p, n);
            stream_append(R.mpend.data, R.mpend.len);
            R.mpend.len = 0;
        } else {
            stream_append(p, n);
        }
    }
    if (R.ack_pending) {
        R.ack_pending = 0;
        char num[KV_LL_STR_MAX];
        bk_str ack[3] = { { "REPLCONF", 8 }, { "ACK", 3 }, { num, kv_fmt_ll(num, R.offset) } };
        put_command(&c->wbuf, 3, ack);
        kv_client_output_added(c);
    }
}

void repl_master_shift(kv_client *c, size_t used)
{
    if (used > c->repl_mark) {
        if (buf_append(&R.mpend, c->rbuf.data + c->repl_mark, used - c->repl_mark) < 0)
            abort();
        c->repl_mark = used;
    }
    c->repl_mark -= used;
}

/* ---- replicas of ours ---- */

static void replicas_add(kv_client *c)
{
    if (R.nreplicas == R.cap) {
        R.cap = R.cap ? R.cap * 2 : 4;
        R.replicas = kv_realloc(R.replicas, (size_t)R.cap * sizeof *R.replicas);
    }
    R.replicas[R.nreplicas++] = c;
}

static void replicas_remove(kv_client *c)
{
    for (int i = 0; i < R.nreplicas; i++) {
        if (R.replicas[i] == c) {
            memmove(R.replicas + i, R.replicas + i + 1,
                    (size_t)(R.nreplicas - i - 1) * sizeof *R.replicas);
            R.nreplicas--;
            if (R.nreplicas == 0)
                R.no_replicas_since = srv.now_ms;
            return;
        }
    }
}

static void disconnect_replicas(void)
{
    while (R.nreplicas > 0)
        kv_client_close(R.replicas[R.nreplicas - 1]);
}

static void waiting_remove(kv_client *c)
{
    for (int i = 0; i < R.nwaiting; i++) {
        if (R.waiting[i] == c) {
            R.waiting[i] = R.waiting[--R.nwaiting];
            return;
        }
    }
}

/* The full-sync child serves no replica any more: a diskless one is
 * killed at once; a disk one too unless save points make its snapshot
 * useful (Redis's rules). */
static void child_useless(void)
{
    if (R.child <= 0 || (!R.child_diskless && srv.cfg.save && srv.cfg.save[0]))
        return;
    if (R.child_diskless)
        log_warn("Diskless rdb transfer, last replica dropped, killing fork child.");
    else
        log_info("Killing the RDB child of a full sync: no replica waits for it any more");
    kill(R.child, SIGKILL);
    kv_waitpid(R.child, NULL, 0);
    R.child = 0;
    R.child_n = 0;
    if (R.child_tmp[0])
        unlink(R.child_tmp);
}

static void child_done(int status);
static void relay_free(kv_client *c);

void repl_flushall(void)
{
    if (R.child <= 0)
        return;
    /* A child still writing its RDB file has a stale snapshot: it stops and
     * its replicas start over (Redis kills any RDB child on FLUSHALL). One
     * that is sending a whole file goes on, as Redis's parent goes on
     * sending a finished file: the FLUSHALL follows in the stream held
     * behind it, and a replica may already have the last byte (killing the
     * child then would fail a transfer that succeeded). A diskless transfer
     * is not done before the child exits, as in Redis. */
    if (!R.child_diskless && R.child_sending &&
        __atomic_load_n(R.child_sending, __ATOMIC_SEQ_CST))
        return;
    int status;
    if (waitpid(R.child, &status, WNOHANG) != R.child) {
        log_warn("Background RDB transfer terminated by FLUSHALL: its replicas resync");
        kill(R.child, SIGKILL);
        kv_waitpid(R.child, &status, 0);
        if (R.child_tmp[0])
            unlink(R.child_tmp);
    }
    child_done(status); /* a child that had finished still counts */
}

void repl_client_closed(kv_client *c)
{
    if (c->repl_flags & REPL_C_WAITING)
        waiting_remove(c);
    for (int i = 0; (c->repl_flags & REPL_C_RESUME) && i < R.nresume; i++)
        if (R.resume[i] == c)
            R.resume[i] = R.resume[--R.nresume];
    if (c->repl_flags & REPL_C_REPLICA) {
        relay_free(c);
        replicas_remove(c);
        int was_waiting = 0, others = 0;
        for (int i = 0; i < R.child_n; i++) {
            if (R.child_set[i] == c) {
                R.child_set[i] = NULL;
                was_waiting = 1;
            }
            others += R.child_set[i] != NULL;
        }
        log_info("Connection with replica %s lost.", c->addr);
        if (was_waiting && !others)
            child_useless();
    }
    if (c->repl_flags & REPL_C_MASTER && c == R.master) {
        /* Keep what we have: the next PSYNC continues from it. */
        memcpy(R.replid, R.master_replid, 41);
        R.master = NULL;
        R.mpend.len = 0; /* the transaction is discarded with the link */
        /* The stream continues after +CONTINUE without a new SELECT (a
         * SELECT queued in a lost MULTI never ran, so c->db is the db at
         * our offset). */
        R.master_db = c->db ? c->db->id : 0;
        R.fd = -1;
        R.cached = 1;
        R.state = LS_CONNECT;
        R.down_since_ms = srv.now_ms;
        log_info("Connection with master lost.");
    }
    c->repl_flags = 0;
}

/* Writes all of c's pending output now (before the fork; a few bytes). */
static int flush_now(kv_client *c)
{
    int64_t start = srv.now_ms;
    while (c->wpos < c->wbuf.len) {
        ssize_t n = c->tls ? kv_tls_write(c, c->wbuf.data + c->wpos, c->wbuf.len - c->wpos)
                           : write(c->fd, c->wbuf.data + c->wpos, c->wbuf.len - c->wpos);
        if (n > 0) {
            c->wpos += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            /* (TLS may want to read to write: either wakes us) */
            struct pollfd pfd = { .fd = c->fd, .events = c->tls ? POLLIN | POLLOUT : POLLOUT };
            poll(&pfd, 1, 100);
            if (kv_unix_ms() - start > 5000)
                return -1;
            continue;
        }
        return -1;
    }
    c->wpos = c->wbuf.len = 0;
    return 0;
}

static int write_fully(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The handshake's few bytes into the link's TLS (the socket has room: a
 * short wait covers what TLS itself may need first). */
static int tls_write_fully(tls_conn *t, int fd, const char *p, size_t n)
{
    int waits = 0;
    while (n > 0) {
        ssize_t w = tls_write(t, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EINTR || errno == EAGAIN) && waits++ < 50) {
            struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT };
            poll(&pfd, 1, 20);
            continue;
        }
        return -1;
    }
    return 0;
}

/* The snapshot as the replicas get it: the RDB with a "repl-stream-db"
 * aux field after the header (the db the stream that follows has
 * selected; a replica feeding its own replicas sends no SELECT first),
 * and the checksum recomputed. Returns 0 or -1. */
static int snapshot_image(int stream_db, bk_buf *img)
{
    int fd = memfd_create("brisk-repl-rdb", MFD_CLOEXEC);
    if (fd < 0 || rdb_write_snapshot(fd) < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 9 + 1 + 8)
        return -1;
    size_t size = (size_t)st.st_size;
    char *raw = kv_malloc(size);
    if (pread(fd, raw, size, 0) != (ssize_t)size)
        return -1;
    close(fd);
    buf_append(img, raw, 9);
    if (stream_db >= 0) {
        char num[KV_LL_STR_MAX];
        size_t k = kv_fmt_ll(num, stream_db);
        unsigned char op = RDB_OPCODE_AUX;
        buf_append(img, &op, 1);
        rdb_save_string(img, "repl-stream-db", 14);
        rdb_save_string(img, num, k);
    }
    buf_append(img, raw + 9, size - 9 - 8);
    uint64_t crc = rdb_crc64(0, img->data, img->len);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(crc >> (8 * i));
    buf_append(img, le, 8);
    kv_free(raw);
    return 0;
}

/* The forked child: the RDB to each replica's socket. Bit i of the exit
 * status is set when replica i failed. */
static int child_send(int *fds, int n, int diskless, const char *tmp, int stream_db)
{
    int failed = 0;
    /* Hold nothing but the replicas' sockets: a child that outlives the
     * server must not keep its listening port. */
    long maxfd = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? (int)maxfd : 65536); fd++) {
        int keep = 0;
        for (int i = 0; i < n; i++)
            keep |= fds[i] == fd;
        if (!keep)
            close(fd);
    }
    struct timeval tv = { .tv_sec = R.timeout };
    for (int i = 0; i < n; i++) {
        int fl = fcntl(fds[i], F_GETFL);
        if (fl >= 0)
            fcntl(fds[i], F_SETFL, fl & ~O_NONBLOCK);
        /* a replica that stops reading fails its transfer, not the child */
        setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    bk_buf img = { 0 };
    char mark[EOF_MARK_LEN + 1];
    if (diskless) {
        /* The header first, as Redis: the replicas know at once that the
         * transfer started (a diskless load shows loading from here). */
        random_id(mark);
        char hdr[64];
        int k = snprintf(hdr, sizeof hdr, "$EOF:%s\r\n", mark);
        for (int i = 0; i < n; i++)
            if (write_fully(fds[i], hdr, (size_t)k) < 0)
                failed |= 1 << i;
    }
    if (snapshot_image(stream_db, &img) < 0)
        return (1 << n) - 1;
    if (diskless) {
        for (int i = 0; i < n; i++)
            if (!(failed & (1 << i)) && (write_fully(fds[i], img.data, img.len) < 0 ||
                                         write_fully(fds[i], mark, EOF_MARK_LEN) < 0))
                failed |= 1 << i;
        return failed;
    }
    int fd = open(tmp, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0 || write_fully(fd, img.data, img.len) < 0) {
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return (1 << n) - 1;
    }
    struct stat st;
    fstat(fd, &st);
    /* Before the first byte reaches a replica: from here the parent lets a
     * FLUSHALL pass (see repl_flushall). */
    if (R.child_sending)
        __atomic_store_n(R.child_sending, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n; i++) {
        char hdr[32];
        int k = snprintf(hdr, sizeof hdr, "$%lld\r\n", (long long)st.st_size);
        if (write_fully(fds[i], hdr, (size_t)k) < 0) {
            failed |= 1 << i;
            continue;
        }
        off_t off = 0;
        while (off < st.st_size) {
            ssize_t w = sendfile(fds[i], fd, &off, (size_t)(st.st_size - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                failed |= 1 << i;
                break;
            }
        }
    }
    close(fd);
    unlink(tmp);
    return failed;
}

/* ---- full sync to a TLS replica: the relay ----
 *
 * The child cannot write into a TLS connection (its records and sequence
 * numbers belong to the parent's OpenSSL state), so a TLS replica's share
 * of the transfer goes into a pipe, byte for byte what a plain replica's
 * socket gets (the "$len" or "$EOF:" header, the RDB, the mark), and the
 * parent encrypts it to the replica as the socket takes it: the pipe is
 * read only while nothing waits for the socket, so a slow replica paces
 * the child as it would through its own socket. The sync is done when the
 * child exited having written everything (its exit status) and the relay
 * has sent the last byte; the client stays REPL_C_HOLD until then, its
 * stream queued behind. Plain replicas do not come here. */

#define RELAY_BUF (64 * 1024)
#define RELAY_TURN (1024 * 1024) /* bytes per turn before other clients get theirs */

struct repl_relay {
    bk_io io;     /* the pipe's read end */
    char *buf;    /* [off, len): read from the pipe, not yet taken by TLS */
    size_t off, len;
    int eof;      /* the child closed the pipe */
    int child_ok; /* -1: the child runs; 1: it sent everything; 0: it failed */
    int diskless;
    int64_t moved_ms; /* the last time bytes went to the replica */
    struct repl_relay *next_dead;
};

static void replica_synced(kv_client *c, int diskless);

/* Relays whose pipe event may still be in the loop's current batch: freed
 * by a timer, after it. */
static struct repl_relay *relays_dead;
static bk_timer relay_reaper;

static void relays_free_dead(void)
{
    while (relays_dead) {
        struct repl_relay *r = relays_dead;
        relays_dead = r->next_dead;
        kv_free(r->buf);
        kv_free(r);
    }
}

static void relay_reaper_cb(bk_loop *l, bk_timer *t)
{
    relays_free_dead();
}

static void relay_close_pipe(struct repl_relay *r)
{
    int fd = r->io.fd;
    if (fd < 0)
        return;
    loop_io_stop(&srv.loop, &r->io); /* (sets io.fd to -1) */
    close(fd); /* a child still writing gets EPIPE for this replica */
}

static void relay_free(kv_client *c)
{
    struct repl_relay *r = c->repl_relay;
    if (!r)
        return;
    relay_close_pipe(r);
    c->repl_relay = NULL;
    r->next_dead = relays_dead;
    relays_dead = r;
    if (!timer_active(&relay_reaper)) {
        timer_init(&relay_reaper, relay_reaper_cb, NULL);
        timer_start(&srv.loop, &relay_reaper, 0);
    }
}

static void relay_pipe_cb(bk_loop *l, bk_io *io, unsigned events)
{
    (void)l;
    (void)events;
    repl_relay_write(io->udata);
}

/* Makes c's relay; returns the pipe's write end for the child, or -1. */
static int relay_start(kv_client *c, int diskless)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    fcntl(p[0], F_SETPIPE_SZ, 1024 * 1024); /* fewer wake-ups (best effort) */
    struct repl_relay *r = kv_calloc(sizeof *r);
    r->buf = kv_malloc(RELAY_BUF);
    r->child_ok = -1;
    r->diskless = diskless;
    r->moved_ms = srv.now_ms;
    r->io.fd = -1;
    if (loop_io_start(&srv.loop, &r->io, p[0], LOOP_READ, relay_pipe_cb, c) < 0) {
        close(p[0]);
        close(p[1]);
        kv_free(r->buf);
        kv_free(r);
        return -1;
    }
    c->repl_relay = r;
    return p[1];
}

/* The relay's end: both the child and the pipe are done with c. */
static void relay_check_done(kv_client *c)
{
    struct repl_relay *r = c->repl_relay;
    if (!r->eof || r->off < r->len || r->child_ok < 0)
        return;
    int ok = r->child_ok, diskless = r->diskless;
    relay_free(c);
    if (!ok) {
        log_warn("Full sync to replica %s failed", c->addr);
        kv_client_close(c);
        return;
    }
    loop_io_set(&srv.loop, &c->io, LOOP_READ);
    replica_synced(c, diskless);
}

void repl_relay_write(kv_client *c)
{
    struct repl_relay *r = c->repl_relay;
    size_t turn = 0;
    while (turn < RELAY_TURN) {
        if (r->off < r->len) {
            ssize_t n = kv_tls_write(c, r->buf + r->off, r->len - r->off);
            if (n > 0) {
                r->off += (size_t)n;
                turn += (size_t)n;
                srv.stat_net_out += (uint64_t)n;
                r->moved_ms = srv.now_ms;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                /* the socket is full: the pipe waits with it */
                loop_io_set(&srv.loop, &r->io, 0);
                loop_io_set(&srv.loop, &c->io, kv_tls_events(c));
                return;
            }
            log_warn("Full sync to replica %s failed: %s", c->addr,
                     n == 0 ? "connection closed" : strerror(errno));
            kv_client_close(c);
            return;
        }
        if (r->eof)
            break;
        ssize_t n = read(r->io.fd, r->buf, RELAY_BUF);
        if (n > 0) {
            r->off = 0;
            r->len = (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            loop_io_set(&srv.loop, &r->io, LOOP_READ);
            loop_io_set(&srv.loop, &c->io, LOOP_READ);
            return;
        }
        /* the child closed the pipe (it exited; its status says how it went) */
        r->eof = 1;
        r->off = r->len = 0;
        relay_close_pipe(r);
        break;
    }
    if (!r->eof) { /* the turn's budget spent: the pipe's next event continues */
        loop_io_set(&srv.loop, &r->io, LOOP_READ);
        return;
    }
    relay_check_done(c);
}

/* Starts the child for the replicas waiting for a full sync. */
static void start_full_sync(void)
{
    if (R.child > 0 || srv.child_pid > 0 || srv.rdb_child_pid > 0)
        return;
    int diskless = R.diskless_sync;
    int n = 0;
    for (int i = 0; i < R.nreplicas && n < MAX_FORK_REPLICAS; i++) {
        kv_client *c = R.replicas[i];
        if (c->repl_state != RS_WAIT_BGSAVE_START)
            continue;
        if (!(c->repl_capa & CAPA_EOF))
            diskless = 0; /* an old replica cannot read the EOF framing */
        R.child_set[n++] = c;
    }
    if (n == 0)
        return;
    if (!R.backlog)
        backlog_create();
    int fds[MAX_FORK_REPLICAS];
    char line[128];
    int k = snprintf(line, sizeof line, "+FULLRESYNC %s %lld\r\n", R.replid, R.offset);
    int live = 0;
    for (int i = 0; i < n; i++) {
        kv_client *c = R.child_set[i];
        if (!(c->repl_flags & REPL_C_HOLD)) /* SYNC (not PSYNC) gets no +FULLRESYNC */
            buf_append(&c->wbuf, line, (size_t)k);
        c->repl_flags |= REPL_C_HOLD;
        if (flush_now(c) < 0) {
            c->flags |= CLIENT_CLOSE_ASAP;
            R.child_set[i] = NULL;
            continue;
        }
        fds[live] = c->tls ? relay_start(c, diskless) : c->fd;
        if (fds[live] < 0) {
            log_warn("Can't make the relay pipe for TLS replica %s: %s", c->addr, strerror(errno));
            c->flags |= CLIENT_CLOSE_ASAP;
            R.child_set[i] = NULL;
            continue;
        }
        c->repl_state = RS_WAIT_BGSAVE_END;
        R.child_set[live++] = c;
    }
    R.child_n = live;
    if (live == 0)
        return;
    /* The stream after the snapshot starts with a SELECT; a replica's
     * proxied stream cannot, so the RDB names the db it has selected. */
    R.seldb = -1;
    int stream_db = R.host && R.master ? R.master->db->id : -1;
    snprintf(R.child_tmp, sizeof R.child_tmp, "temp-%d.%lld.rdb", (int)getpid(),
             (long long)srv.now_ms);
    R.sync_full += (uint64_t)live;
    pid_t parent = getpid();
    if (R.child_sending)
        *R.child_sending = 0;
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        kv_oom_apply(KV_OOM_CHILD);
        /* A server killed (kill -9, OOM killer) takes its sync child along. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0xff);
        _exit(child_send(fds, live, diskless, R.child_tmp, stream_db));
    }
    if (pid > 0)
        srv.stat_forks++;
    for (int i = 0; i < live; i++)
        if (R.child_set[i]->repl_relay)
            close(fds[i]); /* the child's end of a relay pipe */
    if (pid < 0) {
        log_error("Can't fork for the replicas' full sync: %s", strerror(errno));
        for (int i = 0; i < live; i++)
            R.child_set[i]->flags |= CLIENT_CLOSE_ASAP;
        R.child_n = 0;
        return;
    }
    R.child = pid;
    R.child_diskless = diskless;
    log_info("Starting BGSAVE for SYNC with target: %s (pid %d, %d replica(s))",
             diskless ? "replicas sockets" : "disk", (int)pid, live);
    if (diskless)
        log_info("Background RDB transfer started by pid %d", (int)pid);
}

static void child_done(int status)
{
    int failed = WIFEXITED(status) ? WEXITSTATUS(status) : 0xff;
    R.child = 0; /* reaped: closing a failed replica below must not kill it again */
    if (R.child_diskless) {
        int up = 0;
        for (int i = 0; i < R.child_n; i++)
            up += R.child_set[i] && !(failed & (1 << i));
        if (up)
            log_info("Diskless rdb transfer, done reading from pipe, %d replicas still up.", up);
    }
    for (int i = 0; i < R.child_n; i++) {
        kv_client *c = R.child_set[i];
        if (!c)
            continue;
        if (c->fd >= 0) {
            int fl = fcntl(c->fd, F_GETFL);
            if (fl >= 0)
                fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
        }
        if (c->repl_relay && !(failed & (1 << i))) {
            /* a TLS replica is done when the relay has sent the rest */
            c->repl_relay->child_ok = 1;
            relay_check_done(c);
            continue;
        }
        c->repl_flags &= ~REPL_C_HOLD;
        if (failed & (1 << i)) {
            log_warn("Full sync to replica %s failed", c->addr);
            kv_client_close(c);
            continue;
        }
        replica_synced(c, R.child_diskless);
    }
    R.child_n = 0;
    R.child = 0;
}

/* The whole RDB went to replica c: the stream follows. */
static void replica_synced(kv_client *c, int diskless)
{
    c->repl_flags &= ~REPL_C_HOLD;
    c->repl_state = RS_ONLINE;
    c->repl_ack_ms = srv.now_ms;
    log_info("Synchronization with replica %s succeeded", c->addr);
    if (diskless) {
        /* The replica finds the EOF mark at the end of what it read:
         * the stream waits for its first ACK (Redis does the same). */
        c->repl_flags |= REPL_C_HOLD | REPL_C_ACKWAIT;
        return;
    }
    kv_client_output_added(c);
}

static kv_client *replica_for(kv_client *c)
{
    if (!(c->repl_flags & REPL_C_REPLICA)) {
        c->repl_flags |= REPL_C_REPLICA;
        replicas_add(c);
    }
    c->repl_ack_ms = srv.now_ms;
    return c;
}

static int try_partial(kv_client *c, bk_str id, long long off)
{
    if (!R.backlog)
        return -1;
    int ours = id.len == 40 && strncasecmp(id.p, R.replid, 40) == 0;
    int old = id.len == 40 && strncasecmp(id.p, R.replid2, 40) == 0 && off <= R.second_offset;
    if (!ours && !old)
        return -1;
    if (off < R.bl_off || off > R.offset + 1)
        return -1;
    char line[80];
    int k = (c->repl_capa & CAPA_PSYNC2) ? snprintf(line, sizeof line, "+CONTINUE %s\r\n", R.replid)
                                         : snprintf(line, sizeof line, "+CONTINUE\r\n");
    reply_raw(c, line, (size_t)k);
    long long skip = off - R.bl_off;
    long long len = R.bl_histlen - skip;
    long long start = (R.bl_idx - R.bl_histlen + skip + 2 * R.bl_size) % R.bl_size;
    while (len > 0) {
        long long chunk = BK_MIN(len, R.bl_size - start);
        reply_raw(c, R.backlog + start, (size_t)chunk);
        len -= chunk;
        start = (start + chunk) % R.bl_size;
    }
    replica_for(c)->repl_state = RS_ONLINE;
    R.sync_partial_ok++;
    log_info("Partial resynchronization request from %s accepted. Sending %lld bytes of backlog "
             "starting from offset %lld.",
             c->addr, R.offset + 1 - off, off);
    return 0;
}

void sync_command(kv_client *c)
{
    if (c->repl_flags & REPL_C_REPLICA)
        return; /* already one */
    if (R.host && R.state != LS_CONNECTED && !(c->argc == 4 && arg_is(c->argv[3], "failover"))) {
        reply_error(c, "NOMASTERLINK Can't SYNC while not connected with my master");
        return;
    }
    if (c->wbuf.len > c->wpos) {
        reply_error(c, "ERR SYNC and PSYNC are invalid with pending output");
        return;
    }
    if (c->argc == 4 && arg_is(c->argv[0], "psync") && arg_is(c->argv[3], "failover")) {
        /* Our master hands over (FAILOVER): we become a master, and it
         * continues as our replica with the rest of this PSYNC. */
        if (!(R.host && c->argv[1].len == 40 && strncasecmp(c->argv[1].p, R.replid, 40) == 0)) {
            reply_error(c, "ERR PSYNC FAILOVER replid must match my replid.");
            return;
        }
        log_info("Failover request received for replid %s.", R.replid);
        unset_master();
    }
    int is_psync = c->argc >= 3 && arg_is(c->argv[0], "psync");
    if (is_psync) {
        long long off;
        if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &off) < 0) {
            log_warn("Replica %s asks for synchronization but with a wrong offset", c->addr);
            reply_error(c, "ERR value is not an integer or out of range");
            return;
        }
        if (try_partial(c, c->argv[1], off) == 0)
            return;
        if (!(c->argv[1].len == 1 && c->argv[1].p[0] == '?'))
            R.sync_partial_err++;
    } else {
        c->repl_flags |= REPL_C_HOLD; /* old SYNC: no +FULLRESYNC line */
    }
    if (!R.backlog && R.nreplicas == 0 && !R.host) {
        /* A backlog made from scratch starts a new history. */
        random_id(R.replid);
        memcpy(R.replid2, ZERO_ID, 41);
        R.second_offset = -1;
    }
    if (!R.backlog)
        backlog_create();
    kv_client *r = replica_for(c);
    r->repl_state = RS_WAIT_BGSAVE_START;
    r->repl_wait_since = srv.now_ms;
    log_info("Replica %s asks for synchronization; full resync.", c->addr);
    /* The delay gathers replicas for one diskless transfer; one that cannot
     * read it (no EOF capa: SYNC, old PSYNC) gets a disk sync at once, as
     * Redis. */
    if (!R.diskless_sync || R.diskless_delay == 0 || !(r->repl_capa & CAPA_EOF))
        start_full_sync();
}

void replconf_command(kv_client *c)
{
    if (c->argc % 2 == 0) {
        reply_error(c, "ERR syntax error");
        return;
    }
    for (int i = 1; i < c->argc; i += 2) {
        bk_str k = c->argv[i], v = c->argv[i + 1];
        long long n;
        if (arg_is(k, "listening-port")) {
            if (arg_ll(c, v, &n) < 0)
                return;
            c->repl_listen_port = (int)n;
        } else if (arg_is(k, "ip-address")) {
            size_t len = BK_MIN(v.len, sizeof c->repl_ip - 1);
            memcpy(c->repl_ip, v.p, len);
            c->repl_ip[len] = '\0';
        } else if (arg_is(k, "capa")) {
            if (arg_is(v, "eof"))
                c->repl_capa |= CAPA_EOF;
            else if (arg_is(v, "psync2"))
                c->repl_capa |= CAPA_PSYNC2;
        } else if (arg_is(k, "ack") || arg_is(k, "fack")) {
            /* No reply: this comes from a replica on the stream's socket. */
            if (!(c->repl_flags & REPL_C_REPLICA) || kv_parse_ll(v.p, v.len, &n) < 0)
                return;
            if (arg_is(k, "ack")) {
                if (n > c->repl_ack_off)
                    c->repl_ack_off = n;
                c->repl_ack_ms = srv.now_ms;
                if (c->repl_flags & REPL_C_ACKWAIT) {
                    c->repl_flags &= ~(REPL_C_HOLD | REPL_C_ACKWAIT);
                    kv_client_output_added(c);
                }
                if (R.nwaiting)
                    wait_check(0);
            }
            continue;
        } else if (arg_is(k, "getack")) {
            if (c->repl_flags & REPL_C_MASTER)
                R.ack_pending = 1;
            return;
        } else if (arg_is(k, "rdb-only") || arg_is(k, "rdb-filter-only")) {
            /* accepted, no effect */
        } else {
            reply_errorf(c, "ERR Unrecognized REPLCONF option: %.*s", (int)BK_MIN(k.len, 128), k.p);
            return;
        }
    }
    if (!(c->repl_flags & REPL_C_REPLICA))
        reply_ok(c);
}

/* ---- WAIT ---- */

static void resume_cb(bk_loop *l, bk_timer *t)
{
    while (R.nresume > 0) {
        kv_client *c = R.resume[--R.nresume];
        c->repl_flags &= ~REPL_C_RESUME;
        if (!(c->flags & CLIENT_CLOSED) && !(c->repl_flags & REPL_C_WAITING))
            kv_client_process_input(c);
    }
}

static long long acked_replicas(long long off)
{
    long long n = 0;
    for (int i = 0; i < R.nreplicas; i++)
        if (R.replicas[i]->repl_state == RS_ONLINE && R.replicas[i]->repl_ack_off >= off)
            n++;
    return n;
}

static void send_getack(void)
{
    static const bk_str getack[] = { { "REPLCONF", 8 }, { "GETACK", 6 }, { "*", 1 } };
    stream_command(3, getack);
}

int repl_shutdown_ready(void)
{
    for (int i = 0; i < R.nreplicas; i++)
        if (R.replicas[i]->repl_ack_off != R.offset)
            return 0;
    return 1;
}

int repl_replica_count(void)
{
    return R.nreplicas;
}

void repl_shutdown_getack(void)
{
    send_getack();
}

void repl_shutdown_report(void)
{
    int lagging = 0;
    for (int i = 0; i < R.nreplicas; i++) {
        kv_client *r = R.replicas[i];
        if (r->repl_ack_off == R.offset)
            continue;
        lagging++;
        char ip[64];
        long long lag = r->repl_state == RS_ONLINE ? (srv.now_ms - r->repl_ack_ms) / 1000 : 0;
        log_warn("Lagging replica %s:%d reported offset %lld behind master, lag=%lld, state=%s.",
                 replica_ip(r, ip, sizeof ip), r->repl_listen_port, R.offset - r->repl_ack_off,
                 lag, rs_names[r->repl_state < 0 || r->repl_state > RS_ONLINE ? 0 : r->repl_state]);
    }
    if (R.nreplicas)
        log_info("%d of %d replicas are in sync when shutting down.", R.nreplicas - lagging,
                 R.nreplicas);
}

void wait_command(kv_client *c)
{
    long long num, timeout;
    if (R.host) {
        reply_error(c, "ERR WAIT cannot be used with replica instances. Please also note that "
                       "since Redis 4.0 if a replica is configured to be writable (which is not "
                       "the default) writes to replicas are just local and are not propagated.");
        return;
    }
    if (arg_ll(c, c->argv[1], &num) < 0)
        return;
    if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &timeout) < 0) {
        reply_error(c, "ERR timeout is not an integer or out of range");
        return;
    }
    if (timeout < 0) {
        reply_error(c, "ERR timeout is negative");
        return;
    }
    long long target = R.offset;
    long long have = acked_replicas(target);
    if (have >= num || (c->flags & CLIENT_MULTI) || srv.loading || !R.backlog ||
        (c->flags & CLIENT_FAKE) || c->fd < 0) {
        reply_int(c, have);
        return;
    }
    c->repl_wait_off = target;
    c->repl_wait_num = num;
    c->repl_wait_deadline = timeout ? srv.now_ms + (timeout > LLONG_MAX / 2 ? LLONG_MAX / 2 : timeout) : 0;
    c->repl_flags |= REPL_C_WAITING;
    if (R.nwaiting == R.wcap) {
        R.wcap = R.wcap ? R.wcap * 2 : 8;
        R.waiting = kv_realloc(R.waiting, (size_t)R.wcap * sizeof *R.waiting);
    }
    R.waiting[R.nwaiting++] = c;
    send_getack();
}

static void wait_check(int timeouts)
{
    for (int i = 0; i < R.nwaiting;) {
        kv_client *c = R.waiting[i];
        long long have = acked_replicas(c->repl_wait_off);
        int expired = timeouts && c->repl_wait_deadline && srv.now_ms >= c->repl_wait_deadline;
        if (have < c->repl_wait_num && !expired) {
            i++;
            continue;
        }
        R.waiting[i] = R.waiting[--R.nwaiting];
        c->repl_flags &= ~REPL_C_WAITING;
        reply_int(c, have);
        kv_client_output_added(c);
        /* Commands that arrived behind WAIT run from a timer: not inside
         * the command (a replica's ACK) that unblocked this client. */
        if (c->rbuf.len > 0) {
            if (R.nresume == R.rcap) {
                R.rcap = R.rcap ? R.rcap * 2 : 8;
                R.resume = kv_realloc(R.resume, (size_t)R.rcap * sizeof *R.resume);
            }
            R.resume[R.nresume++] = c;
            c->repl_flags |= REPL_C_RESUME;
            if (!timer_active(&R.resume_timer)) {
                timer_init(&R.resume_timer, resume_cb, NULL);
                timer_start(&srv.loop, &R.resume_timer, 0);
            }
        }
    }
}

/* ---- our master: the handshake ---- */

/* Whether the RDB about to come loads "from the socket" as Redis's
 * repl-diskless-load decides: swapdb always, on-empty-db when we hold no
 * key. (brisk-kv buffers the RDB either way; this decides what clients
 * see meanwhile.) */
static int diskless_load(void)
{
    if (strcasecmp(R.diskless_load, "swapdb") == 0)
        return 1;
    if (strcasecmp(R.diskless_load, "on-empty-db") != 0)
        return 0;
    for (int d = 0; d < srv.cfg.databases; d++)
        if (db_size(&srv.dbs[d]))
            return 0;
    return 1;
}

static void xfer_loading_begin(void)
{
    if (!diskless_load())
        return;
    log_info("MASTER <-> REPLICA sync: Loading DB in memory");
    R.spare = kv_malloc((size_t)srv.cfg.databases * sizeof *R.spare);
    for (int d = 0; d < srv.cfg.databases; d++)
        db_init(&R.spare[d], d);
    rdb_stream_init(&R.stream, R.spare, srv.cfg.databases);
    R.streaming = 1;
    R.feed_retry = 0;
    if (strcasecmp(R.diskless_load, "swapdb") == 0 && memcmp(R.replid, R.master_replid, 40) == 0) {
        R.async_loading = 1; /* the old data is the same history: keep serving it */
        return;
    }
    R.xfer_loading = 1;
    srv.loading = 1;
    srv.script_timedout = KV_BUSY_LOADING; /* clients get LOADING, as during a load */
}

static void stream_discard(void)
{
    if (!R.streaming)
        return;
    R.streaming = 0;
    rdb_stream_free(&R.stream);
    for (int d = 0; d < srv.cfg.databases; d++)
        db_free(&R.spare[d]);
    kv_free(R.spare);
    R.spare = NULL;
    if (timer_active(&R.feed_timer))
        timer_stop(&srv.loop, &R.feed_timer);
    R.read_held = 0;
}

static void xfer_loading_end(void)
{
    stream_discard();
    R.async_loading = 0;
    if (!R.xfer_loading)
        return;
    R.xfer_loading = 0;
    srv.loading = 0;
    srv.script_timedout = 0;
}

int repl_async_loading(void)
{
    return R.async_loading;
}

static void link_close(void)
{
    xfer_loading_end();
    if (timer_active(&R.tls_kick))
        timer_stop(&srv.loop, &R.tls_kick);
    if (R.tls) {
        tls_shutdown(R.tls);
        tls_conn_free(R.tls);
        R.tls = NULL;
    }
    if (R.fd >= 0) {
        loop_io_stop(&srv.loop, &R.io);
        close(R.fd);
        R.fd = -1;
    }
    R.in.len = 0;
    if (R.in.cap > 1024 * 1024)
        buf_free(&R.in);
}

static void link_fail(const char *why)
{
    log_warn("Master link to %s:%d: %s", R.host, R.port, why);
    /* A full sync that broke off is retried on the next second's cron, as
     * Redis's replica does (not at once: the master just lost a child) */
    if (R.state == LS_TRANSFER)
        R.retry_at_ms = srv.now_ms + 1000;
    link_close();
    R.state = LS_CONNECT;
    if (R.fo_state == FO_IN_PROGRESS)
        failover_abort("Failover target link failed before the PSYNC reply");
}

static int link_send_str(int argc, const bk_str *a)
{
    bk_buf b = { 0 };
    put_command(&b, argc, a);
    int rc = R.tls ? tls_write_fully(R.tls, R.fd, b.data, b.len) : write_fully(R.fd, b.data, b.len);
    buf_free(&b);
    return rc;
}

static int link_send(int argc, const char **argv)
{
    bk_str a[8];
    for (int i = 0; i < argc; i++)
        a[i] = (bk_str){ argv[i], strlen(argv[i]) };
    return link_send_str(argc, a);
}

/* Sends the command of the state we enter. */
static void link_step(int state)
{
    R.state = state;
    char port[16];
    switch (state) {
    case LS_PONG: {
        const char *a[] = { "PING" };
        link_send(1, a);
        return;
    }
    case LS_AUTH:
        if (!R.masterauth_len) {
            link_step(LS_PORT);
            return;
        }
        if (R.masteruser && R.masteruser[0]) {
            bk_str a[] = { BK_STR("AUTH"), { R.masteruser, strlen(R.masteruser) },
                           { R.masterauth, R.masterauth_len } };
            link_send_str(3, a);
        } else {
            bk_str a[] = { BK_STR("AUTH"), { R.masterauth, R.masterauth_len } };
            link_send_str(2, a);
        }
        return;
    case LS_PORT: {
        /* Redis's: the announced port, else the TLS port when replicating
         * over TLS (where the master, after a FAILOVER, connects back), else
         * the plain one. */
        int p = R.announce_port                              ? R.announce_port
                : kv_tls_replication() && kv_tls_port() != 0 ? kv_tls_port()
                                                             : srv.cfg.port;
        snprintf(port, sizeof port, "%d", p);
        const char *a[] = { "REPLCONF", "listening-port", port };
        link_send(3, a);
        return;
    }
    case LS_CAPA: {
        const char *a[] = { "REPLCONF", "capa", "eof", "capa", "psync2" };
        link_send(5, a);
        return;
    }
    case LS_PSYNC: {
        char off[32];
        if (R.cached) {
            snprintf(off, sizeof off, "%lld", R.offset + 1);
            /* FAILOVER asks the target to become our master first */
            const char *a[] = { "PSYNC", R.replid, off, "FAILOVER" };
            link_send(R.fo_state == FO_IN_PROGRESS ? 4 : 3, a);
        } else {
            const char *a[] = { "PSYNC", "?", "-1" };
            link_send(3, a);
        }
        return;
    }
    default:
        return;
    }
}

static void become_connected(int full)
{
    /* The socket moves from the handshake's watcher to a client's. */
    loop_io_stop(&srv.loop, &R.io);
    kv_client *m = kv_client_attach_fd(R.fd);
    if (R.tls) {
        if (timer_active(&R.tls_kick))
            timer_stop(&srv.loop, &R.tls_kick);
        kv_tls_attach(m, R.tls); /* the client's reads and writes go through it now */
        R.tls = NULL;
    }
    m->repl_flags = REPL_C_MASTER;
    m->flags |= CLIENT_AUTHED;
    m->user = NULL;
    m->cl_flags |= CL_REPLY_OFF;
    m->parser.max_bulk = RESP_MAX_BULK;
    m->parser.max_multibulk = RESP_MAX_MULTIBULK;
    snprintf(m->addr, sizeof m->addr, "%s:%d", R.host, R.port);
    R.master = m;
    R.state = LS_CONNECTED;
    R.cached = 1;
    R.last_io_ms = srv.now_ms;
    if (!R.backlog)
        backlog_create();
    /* A partial resync continues the stream in the db it had selected;
     * a full sync's stream starts with SELECT (or the RDB names the db). */
    if (!full && R.master_db > 0 && R.master_db < srv.cfg.databases)
        kv_client_set_db(m, R.master_db);
    /* Bytes of the stream read with the handshake's last reply. */
    if (R.in.len) {
        if (buf_append(&m->rbuf, R.in.data, R.in.len) < 0)
            abort();
        R.in.len = 0;
        kv_client_process_input(m);
    }
    buf_free(&R.in);
}

/* The "repl-stream-db" aux field of an RDB from a master (a replica
 * feeding us sends it: its stream does not start with SELECT), or -1. */
static int rdb_stream_db(const char *data, size_t n)
{
    if (n < 9)
        return -1;
    rdb_reader r = { (const unsigned char *)data + 9, (const unsigned char *)data + n };
    int db = -1;
    while (r.p < r.end && *r.p == RDB_OPCODE_AUX) {
        r.p++;
        char *k = NULL, *v = NULL;
        size_t kl, vl;
        if (rdb_load_string(&r, &k, &kl) < 0 || rdb_load_string(&r, &v, &vl) < 0) {
            kv_free(k);
            break;
        }
        long long x;
        if (kl == 14 && memcmp(k, "repl-stream-db", 14) == 0 && kv_parse_ll(v, vl, &x) == 0 &&
            x >= 0 && x < INT_MAX)
            db = (int)x;
        kv_free(k);
        kv_free(v);
    }
    return db;
}

static void transfer_loaded(int stream_db);

static void load_transfer(const char *data, size_t n)
{
    log_info(R.xfer_loading || R.async_loading
                 ? "MASTER <-> REPLICA sync: loading the RDB received (diskless load)"
                 : "MASTER <-> REPLICA sync: Loading DB in memory");
    xfer_loading_end();
    /* A damaged image is refused before the dataset is emptied: the
     * replica keeps serving what it had (Redis empties it first). */
    if (n >= 9 + 8) {
        uint64_t want = 0;
        for (int i = 0; i < 8; i++)
            want |= (uint64_t)(unsigned char)data[n - 8 + i] << (8 * i);
        uint64_t got = want ? rdb_crc64(0, data, n - 8) : 0;
        if (want && got != want) {
            log_error("MASTER <-> REPLICA sync: the RDB from the master is corrupt (CRC64 "
                      "%016llx, expected %016llx): dataset kept, retrying",
                      (unsigned long long)got, (unsigned long long)want);
            link_fail("corrupt RDB");
            return;
        }
    }
    int stream_db = rdb_stream_db(data, n);
    for (int d = 0; d < srv.cfg.databases; d++) {
        db_flush(&srv.dbs[d]);
        kv_touch_db(&srv.dbs[d]);
    }
    tracking_invalidate_all();
    function_rdb_flush(); /* the master's libraries replace ours */
    char err[256] = "";
    srv.loading = 1;
    int rc = rdb_load_image((const unsigned char *)data, n, 1, err, sizeof err);
    srv.loading = 0;
    if (rc < 0) {
        log_error("Failed trying to load the MASTER synchronization DB from socket: %s", err);
        for (int d = 0; d < srv.cfg.databases; d++)
            db_flush(&srv.dbs[d]);
        link_fail("bad RDB");
        R.cached = 0;
        return;
    }
    log_info("MASTER <-> REPLICA sync: Finished with success");
    transfer_loaded(stream_db);
}

/* After a full sync's load: the master's history becomes ours. */
static void transfer_loaded(int stream_db)
{
    memcpy(R.replid, R.master_replid, 41);
    memcpy(R.replid2, ZERO_ID, 41);
    R.second_offset = -1;
    R.offset = R.master_offset;
    /* A fresh history: replicas of ours must resync from us. */
    if (R.backlog) {
        kv_free(R.backlog);
        R.backlog = NULL;
    }
    disconnect_replicas();
    backlog_create();
    R.in.len = 0;
    become_connected(1);
    if (R.master && stream_db >= 0 && stream_db < srv.cfg.databases)
        kv_client_set_db(R.master, stream_db);
    if (R.master) {
        /* The first ACK at once: a master that sent a diskless RDB holds
         * the stream until it (as Redis's replica does). */
        char num[KV_LL_STR_MAX];
        bk_str ack[3] = { { "REPLCONF", 8 }, { "ACK", 3 }, { num, kv_fmt_ll(num, R.offset) } };
        put_command(&R.master->wbuf, 3, ack);
        kv_client_output_added(R.master);
    }
    if (srv.aof_state)
        aof_set_enabled(0), aof_set_enabled(1);
}

static void stream_progress(void);
static void tls_link_kick(void);

/* The RDB bytes so far are in R.in (after the header). */
static void transfer_progress(void)
{
    if (R.streaming) {
        stream_progress();
        return;
    }
    if (R.xfer_size >= 0) {
        if ((long long)R.in.len < R.xfer_size)
            return;
        size_t extra = R.in.len - (size_t)R.xfer_size;
        bk_buf rest = { 0 };
        if (extra)
            buf_append(&rest, R.in.data + R.xfer_size, extra);
        load_transfer(R.in.data, (size_t)R.xfer_size);
        if (extra && R.master) {
            buf_append(&R.master->rbuf, rest.data, rest.len);
            kv_client_process_input(R.master);
        }
        buf_free(&rest);
        return;
    }
    /* The mark may be followed by the first bytes of the stream. */
    size_t from = R.xfer_scanned > EOF_MARK_LEN ? R.xfer_scanned - EOF_MARK_LEN : 0;
    R.xfer_scanned = R.in.len;
    char *m = memmem(R.in.data + from, R.in.len - from, R.eofmark, EOF_MARK_LEN);
    if (!m)
        return;
    size_t rdb_len = (size_t)(m - R.in.data);
    size_t after = rdb_len + EOF_MARK_LEN;
    bk_buf rest = { 0 };
    if (R.in.len > after)
        buf_append(&rest, R.in.data + after, R.in.len - after);
    load_transfer(R.in.data, rdb_len);
    if (rest.len && R.master) {
        buf_append(&R.master->rbuf, rest.data, rest.len);
        kv_client_process_input(R.master);
    }
    buf_free(&rest);
}

/* Unparsed RDB bytes a streaming load lets wait before it stops reading
 * the socket (the master then waits: its transfer goes at our pace). */
#define STREAM_HOLD (4u << 20)

static void feed_cb(bk_loop *l, bk_timer *t)
{
    (void)l;
    (void)t;
    if (R.streaming)
        stream_progress();
}

/* The streamed load is complete: the spare dbs take the place of ours. */
static void stream_commit(void)
{
    char err[256];
    for (int d = 0; d < srv.cfg.databases; d++) {
        kv_db *x = &srv.dbs[d], *y = &R.spare[d];
        kv_touch_flushed_db(x, y);
        kv_db_swap_contents(x, y);
        blocking_signal_db(x);
    }
    tracking_invalidate_all();
    if (rdb_stream_functions(&R.stream, err, sizeof err) < 0)
        log_warn("MASTER <-> REPLICA sync: a function library of the master did not load: %s",
                 err);
    int stream_db = rdb_loaded_repl.stream_db;
    xfer_loading_end(); /* frees the spare set, now holding the old data */
    log_info("MASTER <-> REPLICA sync: Finished with success");
    bk_buf rest = { 0 };
    if (R.in.len)
        buf_append(&rest, R.in.data, R.in.len);
    transfer_loaded(stream_db);
    if (rest.len && R.master) {
        buf_append(&R.master->rbuf, rest.data, rest.len);
        kv_client_process_input(R.master);
    }
    buf_free(&rest);
}

static void stream_consume(size_t n)
{
    memmove(R.in.data, R.in.data + n, R.in.len - n);
    R.in.len -= n;
    R.xfer_scanned = R.xfer_scanned > n ? R.xfer_scanned - n : 0;
}

/* One turn of a streaming load: parses what came of the RDB, at most
 * loading-process-events-interval-bytes. Returns 1 when more is waiting to
 * be parsed, 0 when it waits for bytes, -1 when the load ended (done or
 * failed). */
static int stream_step(void)
{
    size_t avail, end = 0;
    int final = 0;
    if (R.xfer_size >= 0) {
        size_t left = (size_t)R.xfer_size - R.xfer_fed;
        final = R.in.len >= left;
        avail = final ? left : R.in.len;
        end = left;
    } else {
        size_t from = R.xfer_scanned > EOF_MARK_LEN ? R.xfer_scanned - EOF_MARK_LEN : 0;
        R.xfer_scanned = R.in.len;
        char *m = R.in.len > from ? memmem(R.in.data + from, R.in.len - from, R.eofmark,
                                           EOF_MARK_LEN)
                                  : NULL;
        final = m != NULL;
        avail = m ? (size_t)(m - R.in.data) : R.in.len > EOF_MARK_LEN ? R.in.len - EOF_MARK_LEN : 0;
        end = avail + EOF_MARK_LEN;
    }
    if (!final && avail < R.feed_retry)
        return 0;
    long long turn = repl_loading_events_interval();
    if (turn <= 0)
        turn = 2097152;
    size_t used;
    char err[256] = "";
    int rc = rdb_stream_feed(&R.stream, (const unsigned char *)R.in.data, avail, final,
                             (size_t)turn, &used, err, sizeof err);
    if (rc < 0) {
        log_warn("Internal error in RDB reading from the master's socket: %s (diskless load); "
                 "the old dataset is kept", err);
        link_fail("bad RDB");
        return -1;
    }
    if (rc == 1) {
        stream_consume(R.xfer_size >= 0 ? used : end); /* and the EOF mark */
        stream_commit();
        return -1;
    }
    R.xfer_fed += used;
    stream_consume(used);
    avail -= used;
    /* Stopped for the turn's budget: more to parse. Else an item is cut
     * short: parse again when twice its bytes are here. */
    int budget = used >= (size_t)turn;
    R.feed_retry = budget ? 0 : avail * 2 + 1;
    return budget;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Turns of the streaming load for up to 5 ms, then the event loop runs
 * (clients get their LOADING / async-loading answers); a timer continues.
 * Reading the socket waits while STREAM_HOLD bytes are unparsed. */
static void stream_progress(void)
{
    int64_t t0 = mono_ms();
    int more;
    while ((more = stream_step()) == 1 && mono_ms() - t0 < 5)
        ;
    if (more < 0 || !R.streaming)
        return;
    if (more && !timer_active(&R.feed_timer)) {
        timer_init(&R.feed_timer, feed_cb, NULL);
        timer_start(&srv.loop, &R.feed_timer, 1); /* 1: after the I/O of the next turn */
    }
    int hold = more && R.in.len >= STREAM_HOLD;
    if (hold != R.read_held && R.fd >= 0) {
        R.read_held = hold;
        loop_io_set(&srv.loop, &R.io, hold ? 0 : LOOP_READ);
        if (!hold)
            tls_link_kick();
    }
}

/* One reply line of the handshake (without CRLF). */
static void handshake_line(const char *l, size_t n)
{
    int err = n > 0 && l[0] == '-';
    switch (R.state) {
    case LS_PONG:
        /* An error about authentication still proves the master is there. */
        if (err && strncmp(l, "-NOAUTH", 7) && strncmp(l, "-NOPERM", 7) &&
            strncmp(l, "-ERR operation not permitted", 28)) {
            link_fail("error reply to PING");
            return;
        }
        link_step(LS_AUTH);
        return;
    case LS_AUTH:
        if (err) {
            link_fail("Unable to AUTH to MASTER" /* (as Redis logs it: the suite matches it) */);
            return;
        }
        link_step(LS_PORT);
        return;
    case LS_PORT:
        link_step(LS_CAPA);
        return;
    case LS_CAPA:
        link_step(LS_PSYNC);
        return;
    case LS_PSYNC:
        if (n > 12 && strncmp(l, "+FULLRESYNC ", 12) == 0) {
            char id[64];
            long long off = 0;
            if (n - 12 >= sizeof id || sscanf(l + 12, "%40s %lld", id, &off) != 2 ||
                strlen(id) != 40) {
                link_fail("bad +FULLRESYNC");
                return;
            }
            memcpy(R.master_replid, id, 41);
            R.master_offset = off;
            R.state = LS_TRANSFER;
            R.xfer_header = 1;
            log_info("Full resync from master: %s:%lld", id, off);
            if (R.fo_state == FO_IN_PROGRESS)
                failover_done();
            return;
        }
        if (n >= 9 && strncmp(l, "+CONTINUE", 9) == 0) {
            const char *id = l + 9;
            while (*id == ' ')
                id++;
            if (n - (size_t)(id - l) == 40 && strncmp(id, R.replid, 40) != 0) {
                /* The master changed history: our id becomes the old one. */
                memcpy(R.replid2, R.replid, 41);
                R.second_offset = R.offset + 1;
                memcpy(R.replid, id, 40);
                R.replid[40] = '\0';
                disconnect_replicas();
            }
            memcpy(R.master_replid, R.replid, 41);
            R.sync_partial_ok += 0;
            log_info("Successful partial resynchronization with master.");
            if (R.fo_state == FO_IN_PROGRESS)
                failover_done();
            become_connected(0);
            return;
        }
        if (R.fo_state == FO_IN_PROGRESS) {
            log_warn("Failover target rejected the PSYNC FAILOVER request: %s", l);
            failover_abort("Failover target rejected psync request");
            return;
        }
        link_fail(err ? "error reply to PSYNC" : "unexpected reply to PSYNC");
        return;
    default:
        return;
    }
}

static void link_read(void)
{
    if (buf_reserve(&R.in, 64 * 1024) < 0)
        abort();
    ssize_t n = R.tls ? tls_read(R.tls, R.in.data + R.in.len, R.in.cap - R.in.len)
                      : read(R.fd, R.in.data + R.in.len, R.in.cap - R.in.len);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (R.tls && tls_want(R.tls) == TLS_WANT_WRITE)
                loop_io_set(&srv.loop, &R.io, LOOP_READ | LOOP_WRITE);
            return;
        }
        if (R.state == LS_TRANSFER && (R.xfer_loading || R.async_loading))
            log_warn("Internal error in RDB reading from the master's socket: unexpected EOF "
                     "after %zu bytes (diskless load); the old dataset is kept", R.in.len);
        else if (R.state == LS_TRANSFER)
            log_warn("I/O error trying to sync with MASTER: connection lost after %zu bytes of "
                     "the RDB; the dataset is kept", R.in.len);
        int no_pong = R.state == LS_PONG;
        link_fail(n == 0 ? "connection closed" : strerror(errno));
        /* Closed before answering PING: not a Redis port for us (TLS on a
         * plain one, or the other way round): again in a second, Redis's
         * pace, not at every cron tick. */
        if (no_pong)
            R.retry_at_ms = srv.now_ms + 1000;
        return;
    }
    R.in.len += (size_t)n;
    srv.stat_net_in += (uint64_t)n;
    R.last_io_ms = srv.now_ms;
    while (R.state >= LS_PONG && R.state <= LS_PSYNC) {
        char *nl = memchr(R.in.data, '\n', R.in.len);
        if (!nl)
            return;
        size_t len = (size_t)(nl - R.in.data);
        size_t linelen = len && R.in.data[len - 1] == '\r' ? len - 1 : len;
        char line[256];
        size_t keep = BK_MIN(linelen, sizeof line - 1);
        memcpy(line, R.in.data, keep);
        line[keep] = '\0';
        memmove(R.in.data, nl + 1, R.in.len - len - 1);
        R.in.len -= len + 1;
        if (linelen == 0)
            continue; /* keepalive newline */
        handshake_line(line, keep);
        if (R.fd < 0 || R.state == LS_CONNECTED)
            return;
    }
    if (R.state == LS_TRANSFER && R.xfer_header) {
        size_t skip = 0;
        while (skip < R.in.len && R.in.data[skip] == '\n')
            skip++; /* the master's keepalives while it prepares the RDB */
        char *nl = memchr(R.in.data + skip, '\n', R.in.len - skip);
        if (!nl) {
            if (skip) {
                memmove(R.in.data, R.in.data + skip, R.in.len - skip);
                R.in.len -= skip;
            }
            return;
        }
        const char *h = R.in.data + skip;
        size_t hl = (size_t)(nl - h);
        if (hl && h[hl - 1] == '\r')
            hl--;
        if (hl == 0 || h[0] != '$') {
            link_fail("bad bulk header from master");
            return;
        }
        if (hl == 5 + EOF_MARK_LEN && strncmp(h, "$EOF:", 5) == 0) {
            memcpy(R.eofmark, h + 5, EOF_MARK_LEN);
            R.xfer_size = -1;
            R.xfer_scanned = 0;
        } else {
            long long sz;
            if (kv_parse_ll(h + 1, hl - 1, &sz) < 0 || sz < 0) {
                link_fail("bad bulk length from master");
                return;
            }
            R.xfer_size = sz;
        }
        size_t used = (size_t)(nl + 1 - R.in.data);
        memmove(R.in.data, nl + 1, R.in.len - used);
        R.in.len -= used;
        R.xfer_header = 0;
        R.xfer_fed = 0;
        log_info("MASTER <-> REPLICA sync: receiving %s",
                 R.xfer_size < 0 ? "streamed RDB" : "bulk RDB");
        xfer_loading_begin();
    }
    if (R.state == LS_TRANSFER && !R.xfer_header)
        transfer_progress();
}

/* A TLS link that failed: at Redis's pace, a new attempt a second later
 * (the replica cron's period), not at once and forever. */
static void tls_link_failed(void)
{
    link_fail("TLS");
    R.retry_at_ms = srv.now_ms + 1000;
}

static void tls_link_handshake(void)
{
    int rc = tls_handshake(R.tls);
    if (rc < 0 && errno == EAGAIN) {
        loop_io_set(&srv.loop, &R.io, tls_want(R.tls) == TLS_WANT_WRITE ? LOOP_WRITE : LOOP_READ);
        return;
    }
    if (rc < 0) {
        char e[256];
        const char *verify = tls_verify_error(R.tls);
        tls_last_error(e, sizeof e);
        log_warn("MASTER <-> REPLICA sync: TLS handshake with master %s:%d failed: %s%s%s%s",
                 R.host, R.port, e[0] ? e : errno == EPROTO ? "protocol error" : strerror(errno),
                 verify ? " (" : "", verify ? verify : "", verify ? ")" : "");
        tls_link_failed();
        return;
    }
    R.last_io_ms = srv.now_ms;
    log_info("MASTER <-> REPLICA sync: TLS connection with master established (%s, %s)",
             tls_version(R.tls), tls_cipher(R.tls));
    loop_io_set(&srv.loop, &R.io, LOOP_READ);
    link_step(LS_PONG);
}

static void tls_kick_cb(bk_loop *l, bk_timer *t)
{
    (void)l;
    (void)t;
    if (R.tls && R.fd >= 0 && !R.read_held && R.state >= LS_PONG && R.state <= LS_TRANSFER)
        link_read();
    tls_link_kick();
}

/* What the TLS layer holds decrypted or read ahead is read after this
 * turn: the socket will not wake us for it. */
static void tls_link_kick(void)
{
    if (R.tls && R.fd >= 0 && !R.read_held && R.state >= LS_PONG && R.state <= LS_TRANSFER &&
        tls_pending(R.tls) && !timer_active(&R.tls_kick)) {
        timer_init(&R.tls_kick, tls_kick_cb, NULL);
        timer_start(&srv.loop, &R.tls_kick, 0);
    }
}

static void link_io_cb(bk_loop *l, bk_io *io, unsigned events)
{
    (void)l;
    (void)io;
    if (R.state == LS_CONNECTING) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(R.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            link_fail(soerr ? strerror(soerr) : "connect failed");
            return;
        }
        log_info("MASTER <-> REPLICA sync started");
        if (kv_tls_replication()) {
            char err[512];
            R.tls = kv_tls_link_conn(R.fd, R.host, err, sizeof err);
            if (!R.tls) {
                log_warn("MASTER <-> REPLICA sync: cannot set up TLS to the master: %s", err);
                tls_link_failed();
                return;
            }
            R.state = LS_TLS;
            tls_link_handshake();
            return;
        }
        loop_io_set(&srv.loop, &R.io, LOOP_READ);
        link_step(LS_PONG);
        return;
    }
    if (R.state == LS_TLS) {
        tls_link_handshake();
        return;
    }
    if (events & (LOOP_READ | LOOP_WRITE | LOOP_HUP | LOOP_ERR)) {
        if (R.tls)
            loop_io_set(&srv.loop, &R.io, R.read_held ? 0 : LOOP_READ);
        link_read();
    }
    tls_link_kick();
}

static void link_connect(void)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", R.port);
    if (getaddrinfo(R.host, port, &hints, &res) != 0 || !res) {
        log_warn("Unable to resolve master %s", R.host);
        return;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* bind-source-addr: the link leaves from that address */
    const char *src = kv_config_noop_str("bind-source-addr");
    if (src && *src) {
        struct addrinfo sh = { .ai_family = res->ai_family, .ai_socktype = SOCK_STREAM,
                               .ai_flags = AI_PASSIVE },
                        *sres = NULL;
        int bad = getaddrinfo(src, NULL, &sh, &sres) != 0 || !sres ||
                  bind(fd, sres->ai_addr, sres->ai_addrlen) < 0;
        if (sres)
            freeaddrinfo(sres);
        if (bad) {
            log_warn("Unable to connect to MASTER: can't bind to %s: %s", src, strerror(errno));
            freeaddrinfo(res);
            close(fd);
            return;
        }
    }
    int rc = connect(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (rc < 0 && errno != EINPROGRESS) {
        log_warn("Error condition on socket for SYNC: %s", strerror(errno));
        close(fd);
        return;
    }
    R.fd = fd;
    R.state = LS_CONNECTING;
    R.handshake_start_ms = srv.now_ms;
    R.last_io_ms = srv.now_ms;
    R.in.len = 0;
    if (loop_io_start(&srv.loop, &R.io, fd, LOOP_WRITE, link_io_cb, NULL) < 0) {
        close(fd);
        R.fd = -1;
        R.state = LS_CONNECT;
        return;
    }
    log_info("Connecting to MASTER %s:%d", R.host, R.port);
}

/* ---- REPLICAOF ---- */

/* A master turned replica: clients blocked on its keys would wait for
 * writes that now come from elsewhere (Redis disconnects them likewise). */
static void unblock_all_clients(void)
{
    for (kv_client *c = srv.clients; c; c = c->next) {
        if (!c->blocked || !c->bstate)
            continue;
        c->cmd = c->bstate->cmd;
        reply_error(c, "UNBLOCKED force unblock from blocking operation, instance state changed "
                       "(master -> replica?)");
        blocking_done(c);
        kv_client_output_added(c);
    }
}

static void set_master(const char *host, int port)
{
    int was_master = R.host == NULL;
    kv_free(R.host);
    R.host = kv_strndup(host, strlen(host));
    R.port = port;
    if (R.master)
        kv_client_close(R.master);
    link_close();
    if (was_master)
        unblock_all_clients();
    /* Our replicas stay (Redis 7.0): they follow the new master's stream
     * through us if it continues our history (+CONTINUE), and are dropped
     * when the history changes (a new id, or a full sync once loaded). */
    for (int i = R.nwaiting - 1; i >= 0; i--) {
        kv_client *c = R.waiting[i];
        c->repl_wait_num = 0;
    }
    wait_check(0);
    if (was_master) {
        R.cached = 1; /* PSYNC with our own id and offset */
        R.master_db = R.seldb > 0 ? R.seldb : 0;
    }
    R.state = LS_CONNECT;
    R.down_since_ms = 0;
    update_flags();
    kv_oom_apply(KV_OOM_REPLICA); /* oom-score-adj: the replica's value */
    link_connect();
}

static void unset_master(void)
{
    if (!R.host)
        return;
    if (R.master)
        kv_client_close(R.master);
    link_close();
    kv_free(R.host);
    R.host = NULL;
    R.state = LS_NONE;
    /* The new history keeps the old one as replid2 so replicas that
     * followed the same master continue from here. */
    memcpy(R.replid2, R.replid, 41);
    R.second_offset = R.offset + 1;
    random_id(R.replid);
    disconnect_replicas();
    R.seldb = -1;
    R.in_multi = 0;
    R.tx_cmds = 0;
    if (!R.backlog)
        backlog_create();
    update_flags();
    kv_oom_apply(KV_OOM_MASTER);
    log_info("MASTER MODE enabled");
}

void replicaof_command(kv_client *c)
{
    if (arg_is(c->argv[1], "no") && arg_is(c->argv[2], "one")) {
        unset_master();
        reply_ok(c);
        return;
    }
    long long port;
    if (arg_ll(c, c->argv[2], &port) < 0)
        return;
    if (port < 0 || port > 65535) {
        reply_error(c, "ERR Invalid master port");
        return;
    }
    char host[256];
    size_t hl = BK_MIN(c->argv[1].len, sizeof host - 1);
    memcpy(host, c->argv[1].p, hl);
    host[hl] = '\0';
    if (R.host && strcasecmp(R.host, host) == 0 && R.port == port) {
        log_info("REPLICAOF would result into synchronization with the master we are already "
                 "connected with. No operation performed.");
        reply_simple(c, "OK Already connected to specified master");
        return;
    }
    set_master(host, (int)port);
    log_info("REPLICAOF %s:%d enabled (user request from '%s')", host, (int)port, c->addr);
    reply_ok(c);
}

/* ---- FAILOVER ---- */

/* Writes wait (as CLIENT PAUSE WRITE) for a whole failover or a shutdown's
 * wait for its replicas; off is as CLIENT UNPAUSE: held clients run again.
 * (One pause state: a CLIENT UNPAUSE meanwhile ends it too.) */
void kv_pause_writes_internal(int on)
{
    if (on) {
        if (srv.pause_type != KV_PAUSE_ALL)
            srv.pause_type = KV_PAUSE_WRITE;
        srv.pause_end_ms = INT64_MAX;
        return;
    }
    srv.pause_type = 0;
    srv.pause_end_ms = 0;
    if (srv.held)
        srv.resume_held = 1;
}

static void failover_clear(void)
{
    R.fo_state = FO_NONE;
    R.fo_force = 0;
    R.fo_host[0] = '\0';
    R.fo_port = 0;
    R.fo_end_ms = 0;
    kv_pause_writes_internal(0);
}

static void failover_abort(const char *why)
{
    log_warn("FAILOVER aborted: %s", why);
    int demoted = R.fo_state == FO_IN_PROGRESS;
    R.fo_state = FO_NONE; /* before unset_master: no recursion through link_fail */
    if (demoted)
        unset_master(); /* back to master of our replicas */
    failover_clear();
}

static void failover_done(void)
{
    log_info("Failover target %s:%d accepted the PSYNC: failover complete.", R.host, R.port);
    failover_clear();
}

static kv_client *replica_at(const char *host, int port)
{
    for (int i = 0; i < R.nreplicas; i++) {
        kv_client *r = R.replicas[i];
        char ip[64];
        if (r->repl_listen_port == port && strcasecmp(replica_ip(r, ip, sizeof ip), host) == 0)
            return r;
    }
    return NULL;
}

/* Waiting for a replica at our offset: then we become its replica and
 * PSYNC it with FAILOVER. */
static void failover_cron(void)
{
    kv_client *target = NULL;
    if (R.fo_host[0]) {
        kv_client *r = replica_at(R.fo_host, R.fo_port);
        if (r && r->repl_state == RS_ONLINE && r->repl_ack_off == R.offset)
            target = r;
    } else {
        for (int i = 0; i < R.nreplicas && !target; i++) {
            kv_client *r = R.replicas[i];
            if (r->repl_state == RS_ONLINE && r->repl_ack_off == R.offset)
                target = r;
        }
    }
    if (!target && R.fo_end_ms && srv.now_ms >= R.fo_end_ms) {
        if (!R.fo_force) {
            failover_abort("Replica never caught up before timeout");
            return;
        }
        log_warn("FAILOVER to %s:%d time out exceeded, failing over.", R.fo_host, R.fo_port);
    } else if (!target) {
        if (srv.now_ms - R.last_ping_ms >= 1000) {
            R.last_ping_ms = srv.now_ms;
            send_getack();
        }
        return;
    } else {
        char ip[64];
        snprintf(R.fo_host, sizeof R.fo_host, "%s", replica_ip(target, ip, sizeof ip));
        R.fo_port = target->repl_listen_port;
        log_info("Failover target %s:%d is synced, failing over.", R.fo_host, R.fo_port);
    }
    R.fo_state = FO_IN_PROGRESS;
    char host[256];
    snprintf(host, sizeof host, "%s", R.fo_host);
    set_master(host, R.fo_port);
}

void failover_command(kv_client *c)
{
    bk_str host = { NULL, 0 };
    long long port = 0, timeout = 0;
    int have_to = 0, have_timeout = 0, force = 0, abort_ = 0;
    for (int i = 1; i < c->argc; i++) {
        bk_str a = c->argv[i];
        if (arg_is(a, "to") && !have_to && i + 2 < c->argc) {
            host = c->argv[i + 1];
            if (arg_ll(c, c->argv[i + 2], &port) < 0)
                return;
            have_to = 1;
            i += 2;
        } else if (arg_is(a, "timeout") && !have_timeout && i + 1 < c->argc) {
            if (arg_ll(c, c->argv[i + 1], &timeout) < 0)
                return;
            have_timeout = 1;
            i++;
        } else if (arg_is(a, "force") && !force) {
            force = 1;
        } else if (arg_is(a, "abort") && !abort_) {
            abort_ = 1;
        } else {
            reply_error(c, "ERR syntax error");
            return;
        }
    }
    if (abort_) {
        if (have_to || have_timeout || force)
            reply_error(c, "ERR syntax error");
        else if (R.fo_state == FO_NONE)
            reply_error(c, "ERR No failover in progress.");
        else {
            failover_abort("Failover manually aborted");
            reply_ok(c);
        }
        return;
    }
    const char *err = NULL;
    kv_client *r = NULL;
    char target[256] = "";
    if (have_to) {
        size_t n = BK_MIN(host.len, sizeof target - 1);
        memcpy(target, host.p, n);
        target[n] = '\0';
    }
    if (have_timeout && timeout <= 0)
        err = "ERR FAILOVER timeout must be greater than 0";
    else if (R.host)
        err = "ERR FAILOVER is not valid when server is a replica.";
    else if (R.fo_state != FO_NONE)
        err = "ERR FAILOVER already in progress.";
    else if (R.nreplicas == 0)
        err = "ERR FAILOVER requires connected replicas.";
    else if (force && (!have_timeout || !have_to))
        err = "ERR FAILOVER with force option requires both a timeout and target HOST and IP.";
    else if (have_to && !(port > 0 && port <= 65535 && host.len < sizeof target &&
                          (r = replica_at(target, (int)port))))
        err = "ERR FAILOVER target HOST and PORT is not a replica.";
    else if (have_to && r->repl_state != RS_ONLINE)
        err = "ERR FAILOVER target replica is not online.";
    if (err) {
        reply_error(c, err);
        return;
    }
    if (have_to)
        log_info("FAILOVER requested to %s:%d.", target, (int)port);
    else
        log_info("FAILOVER requested to any replica.");
    memcpy(R.fo_host, target, sizeof target);
    R.fo_port = (int)port;
    R.fo_force = force;
    R.fo_end_ms = have_timeout ? srv.now_ms + (timeout > INT64_MAX / 4 ? INT64_MAX / 4 : timeout) : 0;
    R.fo_state = FO_WAIT_SYNC;
    kv_pause_writes_internal(1);
    R.last_ping_ms = srv.now_ms;
    send_getack();
    reply_ok(c);
}

/* ---- the replication fields of dump.rdb ---- */

int repl_rdb_save_info(rdb_repl_aux *out)
{
    memset(out, 0, sizeof *out);
    if (R.host && R.master) {
        out->stream_db = R.master->db ? R.master->db->id : 0;
    } else if (R.host && R.cached) {
        out->stream_db = R.master_db;
    } else if (!R.host && R.backlog) {
        /* A master's stream selects again after a restart (seldb -1). */
        out->stream_db = R.seldb > 0 ? R.seldb : 0;
    } else {
        return 0;
    }
    memcpy(out->id, R.replid, 41);
    out->offset = R.offset;
    out->valid = 1;
    return 1;
}

void repl_rdb_loaded(void)
{
    const rdb_repl_aux *a = &rdb_loaded_repl;
    if (!a->valid)
        return;
    memcpy(R.replid, a->id, 41);
    R.offset = a->offset;
    if (R.host) {
        /* Our data is the master's history up to this offset: PSYNC it. */
        memcpy(R.master_replid, a->id, 41);
        R.cached = 1;
        R.master_db = a->stream_db;
        backlog_create();
        log_info("Using the replication ID %s and offset %lld of the RDB to PSYNC with the master",
                 R.replid, R.offset);
        return;
    }
    /* A master restarts with a new history that continues the saved one:
     * its replicas PSYNC with the old id (replid2). */
    backlog_create();
    memcpy(R.replid2, a->id, 41);
    R.second_offset = R.offset + 1;
    random_id(R.replid);
    update_flags();
    log_info("Restored the replication history %s up to offset %lld from the RDB (new id %s)",
             R.replid2, R.offset, R.replid);
}

/* ---- cron ---- */

static void refresh_good(void)
{
    int good = 0;
    for (int i = 0; i < R.nreplicas; i++) {
        kv_client *c = R.replicas[i];
        if (c->repl_state == RS_ONLINE && (srv.now_ms - c->repl_ack_ms) / 1000 <= R.min_max_lag)
            good++;
    }
    R.good = good;
}

/* The sync child writes the RDB to the replicas' sockets itself: a replica
 * whose socket has unsent bytes that did not move for repl-timeout is cut
 * (shutdown reaches the child's copy of the socket too, so the child goes
 * on with the others), as Redis drops a replica that stops reading. */
static void child_replica_timeouts(void)
{
    for (int i = 0; i < R.child_n; i++) {
        kv_client *c = R.child_set[i];
        int outq = 0;
        if (!c || c->fd < 0 || ioctl(c->fd, SIOCOUTQ, &outq) < 0)
            continue;
        if (outq != c->repl_outq || outq == 0 || !c->repl_outq_ms) {
            c->repl_outq = outq;
            c->repl_outq_ms = srv.now_ms;
        } else if (srv.now_ms - c->repl_outq_ms > (int64_t)R.timeout * 1000) {
            log_warn("Disconnecting timedout replica (full sync): %s", c->addr);
            shutdown(c->fd, SHUT_RDWR);
            kv_client_close(c);
        }
    }
}

void repl_cron(void)
{
    if (R.child > 0) {
        int status;
        pid_t pid = waitpid(R.child, &status, WNOHANG);
        if (pid == R.child)
            child_done(status);
        else
            child_replica_timeouts();
    }
    /* Diskless: wait repl-diskless-sync-delay for more replicas to arrive. */
    int waiting = 0;
    int64_t oldest = srv.now_ms;
    for (int i = 0; i < R.nreplicas; i++) {
        if (R.replicas[i]->repl_state == RS_WAIT_BGSAVE_START) {
            waiting++;
            if (R.replicas[i]->repl_wait_since < oldest)
                oldest = R.replicas[i]->repl_wait_since;
        }
    }
    if (waiting && (!R.diskless_sync || srv.now_ms - oldest >= (int64_t)R.diskless_delay * 1000 ||
                    (R.diskless_max && waiting >= R.diskless_max)))
        start_full_sync();
    if (R.host) {
        if (R.state == LS_CONNECT && srv.now_ms >= R.retry_at_ms)
            link_connect();
        else if (R.state != LS_CONNECTED && R.state != LS_NONE &&
                 srv.now_ms - R.last_io_ms > (int64_t)R.timeout * 1000)
            link_fail(R.state == LS_TRANSFER
                          ? "Timeout receiving bulk data from MASTER... If the problem persists "
                            "try to set the 'repl-timeout' parameter in redis.conf to a larger "
                            "value."
                          : "Timeout connecting to the MASTER...");
        if (R.master && srv.now_ms - R.master->last_ms > (int64_t)R.timeout * 1000) {
            log_warn("MASTER timeout: no data nor PING received...");
            kv_client_close(R.master);
        }
    }
    /* Once a second: ACK to our master, PING to our replicas. */
    static int64_t last_sec;
    if (srv.now_ms - last_sec >= 1000) {
        last_sec = srv.now_ms;
        if (R.master && !(R.master->flags & CLIENT_CLOSED)) {
            char num[KV_LL_STR_MAX];
            bk_str ack[3] = { { "REPLCONF", 8 }, { "ACK", 3 }, { num, kv_fmt_ll(num, R.offset) } };
            put_command(&R.master->wbuf, 3, ack);
            kv_client_output_added(R.master);
        }
        if (!R.host && R.nreplicas &&
            srv.now_ms - R.last_ping_ms >= (int64_t)R.ping_period * 1000) {
            R.last_ping_ms = srv.now_ms;
            static const bk_str ping[] = { { "PING", 4 } };
            stream_command(1, ping);
        }
        /* Keepalive newlines to replicas waiting for their RDB. */
        for (int i = 0; i < R.nreplicas; i++) {
            kv_client *c = R.replicas[i];
            if (c->repl_state == RS_WAIT_BGSAVE_START && c->fd >= 0) {
                ssize_t w = c->tls ? kv_tls_write(c, "\n", 1) : write(c->fd, "\n", 1);
                (void)w;
            }
            /* a TLS replica whose full sync stopped moving through the relay */
            if (c->repl_relay && c->repl_relay->off < c->repl_relay->len &&
                srv.now_ms - c->repl_relay->moved_ms > (int64_t)R.timeout * 1000) {
                log_warn("Disconnecting timedout replica (full sync): %s", c->addr);
                c->flags |= CLIENT_CLOSE_ASAP;
                kv_client_output_added(c);
                continue;
            }
            if (c->repl_state == RS_ONLINE && srv.now_ms - c->repl_ack_ms > (int64_t)R.timeout * 1000) {
                log_warn("Disconnecting timedout replica: %s", c->addr);
                c->flags |= CLIENT_CLOSE_ASAP;
                kv_client_output_added(c);
            }
        }
        refresh_good();
    }
    if (R.nlk && !srv.pause_type)
        expire_local_keys();
    /* repl-backlog-ttl: a master without replicas drops its backlog, and
     * with it the history a replica could continue (a new id). */
    if (!R.host && R.backlog && R.nreplicas == 0 && R.backlog_ttl && R.no_replicas_since &&
        srv.now_ms - R.no_replicas_since > (int64_t)R.backlog_ttl * 1000) {
        kv_free(R.backlog);
        R.backlog = NULL;
        random_id(R.replid);
        memcpy(R.replid2, ZERO_ID, 41);
        R.second_offset = -1;
        update_flags();
        log_info("Replication backlog freed after %d seconds without connected replicas.",
                 R.backlog_ttl);
    }
    if (R.nwaiting)
        wait_check(1);
    if (R.fo_state == FO_WAIT_SYNC)
        failover_cron();
}

int repl_no_expire(void)
{
    return R.host != NULL && (!srv.cl_running || srv.cl_running != R.master);
}

void repl_master_error(kv_client *c, const char *msg)
{
    const kv_cmd *cmd = c->cmd ? c->cmd : c->lastcmd;
    if (c->repl_flags & REPL_C_MASTER)
        log_warn("== CRITICAL == This replica is sending an error to its master: '%s' after "
                 "processing the command '%s'", msg, cmd ? cmd->name : "<unknown>");
    else if (c->repl_flags & REPL_C_REPLICA)
        log_warn("== CRITICAL == This master is sending an error to its replica: '%s' after "
                 "processing the command '%s'", msg, cmd ? cmd->name : "<unknown>");
}

void repl_replica_replied(kv_client *c)
{
    if (c->flags & CLIENT_CLOSE_ASAP)
        return;
    static const char *const containers[] = { "xinfo", "xgroup", "config", "client", "object",
                                              "memory", "script", "function", "command", "acl",
                                              "slowlog", "latency", "pubsub", "cluster", "module" };
    char name[96] = "<unknown>";
    const kv_cmd *cmd = c->cmd ? c->cmd : c->lastcmd; /* a rejected command has no c->cmd */
    if (cmd) {
        snprintf(name, sizeof name, "%s", cmd->name);
        for (size_t i = 0; i < BK_ARRAY_LEN(containers) && c->argc > 1; i++) {
            if (strcmp(cmd->name, containers[i]) == 0) {
                size_t k = strlen(name);
                int n = (int)BK_MIN(c->argv[1].len, sizeof name - k - 2);
                snprintf(name + k, sizeof name - k, "|%.*s", n, c->argv[1].p);
                for (char *p = name + k; *p; p++)
                    *p = (char)tolower((unsigned char)*p);
            }
        }
    }
    log_warn("Replica generated a reply to command '%s', disconnecting it: %s", name, c->addr);
    c->flags |= CLIENT_CLOSE_ASAP;
    kv_client_output_added(c);
}

void repl_debug_replicate(kv_client *c)
{
    repl_feed(c->db, c->argc - 2, c->argv + 2);
    reply_ok(c);
}

static const char misconf_err[] =
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to "
    "disk. Commands that may modify the data set are disabled, because this instance is "
    "configured to report errors during writes if RDB snapshotting fails "
    "(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB "
    "error.";

static int misconf(void)
{
    const char *stop = kv_config_noop_str("stop-writes-on-bgsave-error");
    return srv.rdb_last_bgsave_failed && srv.cfg.save && srv.cfg.save[0] && stop &&
           strcasecmp(stop, "yes") == 0;
}

void repl_persist_status_changed(void)
{
    update_flags();
}

const char *repl_write_refusal(void)
{
    if (R.host)
        return NULL;
    if (misconf())
        return misconf_err;
    if (!R.min_to_write)
        return NULL;
    refresh_good();
    return R.good < R.min_to_write ? "NOREPLICAS Not enough good replicas to write." : NULL;
}

int repl_rdb_child_running(void)
{
    return R.child > 0;
}

int repl_is_replica(void)
{
    return R.host != NULL;
}

long long repl_loading_events_interval(void)
{
    return R.noop_load_events;
}

size_t repl_replica_obufs(void)
{
    size_t n = 0;
    for (int i = 0; i < R.nreplicas; i++)
        n += R.replicas[i]->wbuf.cap;
    return n;
}

int repl_ignores_maxmemory(void)
{
    return R.host != NULL && R.ignore_maxmemory;
}

int repl_from_master(void)
{
    return R.master != NULL && srv.cl_running == R.master;
}

/* A client wrote to a writable replica: remember its keys, so they
 * expire here (the master sends no DEL for them). */
static void note_local_keys(kv_client *c, const kv_cmd *cmd)
{
    int last = cmd->last_key < 0 ? c->argc + cmd->last_key : cmd->last_key;
    int step = cmd->key_step > 0 ? cmd->key_step : 1;
    for (int i = cmd->first_key; i <= last && i < c->argc && R.nlk < 1000000; i += step) {
        if (R.nlk == R.lkcap) {
            R.lkcap = R.lkcap ? R.lkcap * 2 : 64;
            R.lk = kv_realloc(R.lk, (size_t)R.lkcap * sizeof *R.lk);
        }
        R.lk[R.nlk++] = (struct local_key){ c->db->id, c->argv[i].len,
                                            kv_strndup(c->argv[i].p, c->argv[i].len) };
    }
}

static void expire_local_keys(void)
{
    for (int i = 0; i < R.nlk;) {
        struct local_key *k = &R.lk[i];
        kv_db *db = k->db < srv.cfg.databases ? &srv.dbs[k->db] : NULL;
        kv_entry *e = db ? db_find(db, (bk_str){ k->key, k->len }) : NULL;
        if (e && (e->flags & ENTRY_EXPIRES) && !db_expired(e)) {
            i++;
            continue;
        }
        if (e && (e->flags & ENTRY_EXPIRES))
            db_expire_if_needed(db, e);
        kv_free(k->key);
        R.lk[i] = R.lk[--R.nlk];
    }
}

int repl_stale_refuses(void)
{
    return R.host && R.state != LS_CONNECTED && !R.serve_stale;
}

int repl_deny(kv_client *c, const kv_cmd *cmd)
{
    /* the master's stream, and the AOF being loaded (DEBUG LOADAOF on a replica) */
    if ((c->repl_flags & REPL_C_MASTER) || ((c->flags & CLIENT_FAKE) && srv.loading))
        return 0;
    const char *err = NULL;
    unsigned flags = kv_cmd_flags(cmd, c->argc, c->argv); /* FUNCTION LOAD writes, ... */
    int write = (flags & CMD_WRITE) != 0;
    /* EXEC writes when a queued command does (Redis's flags of EXEC are
     * those of its transaction): refused writes now abort it */
    int exec = cmd->proc == exec_command && (c->flags & CLIENT_MULTI) &&
               !(c->flags & CLIENT_DIRTY_EXEC);
    int stale_ok = (flags & CMD_STALE) != 0;
    int sw, ss;
    if (BK_UNLIKELY(script_cmd_guard(cmd, c->argc, c->argv, &ss, &sw)))
        stale_ok = ss, write |= sw;
    for (int i = 0; exec && i < c->mcount; i++) {
        const kv_mcmd *m = &c->mq[i];
        if (script_cmd_guard(m->cmd, m->argc, m->argv, &ss, &sw)) {
            write |= sw;
            stale_ok &= ss;
            continue;
        }
        unsigned mf = kv_cmd_flags(m->cmd, m->argc, m->argv);
        write |= (mf & CMD_WRITE) != 0;
        stale_ok &= (mf & CMD_STALE) != 0;
    }
    if (BK_UNLIKELY(R.async_loading) &&
        (cmd->proc == replicaof_command || cmd->proc == sync_command ||
         cmd->proc == save_command || cmd->proc == bgsave_command ||
         cmd->proc == bgrewriteaof_command))
        err = "LOADING Redis is loading the dataset in memory"; /* Redis's no-async-loading */
    else if (R.host && R.read_only && write) /* Redis checks this one first */
        err = "READONLY You can't write against a read only replica.";
    else if (R.host && R.state != LS_CONNECTED && !R.serve_stale && !stale_ok)
        err = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
    else if (!R.host && write)
        err = repl_write_refusal();
    if (!err) {
        if (R.host && (cmd->flags & CMD_WRITE) && cmd->first_key > 0)
            note_local_keys(c, cmd);
        return 0;
    }
    if (exec) {
        kv_discard_transaction(c);
        reply_errorf(c, "EXECABORT Transaction discarded because of: %s", err);
        return 1;
    }
    reply_error(c, err);
    if (c->flags & CLIENT_MULTI)
        c->flags |= CLIENT_DIRTY_EXEC;
    return 1;
}

/* ---- ROLE, INFO ---- */

static const char *link_state_name(void)
{
    switch (R.state) {
    case LS_CONNECT:
        return "connect";
    case LS_CONNECTING:
        return "connecting";
    case LS_TRANSFER:
        return "sync";
    case LS_CONNECTED:
        return "connected";
    case LS_NONE:
        return "none";
    default:
        return "handshake";
    }
}

static const char *replica_ip(kv_client *c, char *out, size_t n)
{
    if (c->repl_ip[0])
        return c->repl_ip;
    snprintf(out, n, "%s", c->addr);
    char *colon = strrchr(out, ':');
    if (colon)
        *colon = '\0';
    if (out[0] == '[') {
        memmove(out, out + 1, strlen(out));
        char *br = strchr(out, ']');
        if (br)
            *br = '\0';
    }
    return out;
}

void role_command(kv_client *c)
{
    if (R.host) {
        reply_array(c, 5);
        reply_bulk_cstr(c, "slave");
        reply_bulk_cstr(c, R.host);
        reply_int(c, R.port);
        reply_bulk_cstr(c, link_state_name());
        reply_int(c, R.master ? R.offset : -1);
        return;
    }
    reply_array(c, 3);
    reply_bulk_cstr(c, "master");
    reply_int(c, R.offset);
    int n = 0;
    for (int i = 0; i < R.nreplicas; i++)
        n += R.replicas[i]->repl_state == RS_ONLINE;
    reply_array(c, n);
    for (int i = 0; i < R.nreplicas; i++) {
        kv_client *r = R.replicas[i];
        if (r->repl_state != RS_ONLINE)
            continue;
        char ip[64];
        reply_array(c, 3);
        reply_bulk_cstr(c, replica_ip(r, ip, sizeof ip));
        reply_bulk_ll(c, r->repl_listen_port);
        reply_bulk_ll(c, r->repl_ack_off);
    }
}

/* Redis's slave_read_repl_offset: what was read from the master, applied
 * or not (a paused replica reads on but applies nothing): the applied
 * offset plus the bytes waiting in the master client's buffer and in
 * R.mpend (a transaction's first part). */
static long long read_offset(void)
{
    long long off = R.offset;
    if (R.state == LS_CONNECTED && R.master) {
        kv_client *c = R.master;
        off += (long long)R.mpend.len;
        if (c->rbuf.len > c->repl_mark)
            off += (long long)(c->rbuf.len - c->repl_mark);
    }
    return off;
}

void repl_info(bk_buf *b)
{
    buf_appendf(b, "# Replication\r\nrole:%s\r\n", R.host ? "slave" : "master");
    if (R.host) {
        long long last_io = R.master ? (srv.now_ms - R.master->last_ms) / 1000
                                     : (srv.now_ms - R.last_io_ms) / 1000;
        buf_appendf(b,
             "master_host:%s\r\nmaster_port:%d\r\nmaster_link_status:%s\r\n"
             "master_last_io_seconds_ago:%lld\r\nmaster_sync_in_progress:%d\r\n"
             "slave_read_repl_offset:%lld\r\nslave_repl_offset:%lld\r\n",
             R.host, R.port, R.state == LS_CONNECTED ? "up" : "down",
             R.state == LS_CONNECTED ? last_io : -1LL, R.state == LS_TRANSFER, read_offset(),
             R.offset);
        if (R.state == LS_TRANSFER) {
            long long total = R.xfer_size;
            long long read = (long long)R.in.len;
            buf_appendf(b,
                 "master_sync_total_bytes:%lld\r\nmaster_sync_read_bytes:%lld\r\n"
                 "master_sync_left_bytes:%lld\r\nmaster_sync_perc:%.2f\r\n"
                 "master_sync_last_io_seconds_ago:%lld\r\n",
                 total, read, total < 0 ? -1LL : total - read,
                 total > 0 ? (double)read * 100 / (double)total : 0.0,
                 (long long)((srv.now_ms - R.last_io_ms) / 1000));
        }
        if (R.state != LS_CONNECTED)
            buf_appendf(b, "master_link_down_since_seconds:%lld\r\n",
                 R.down_since_ms ? (long long)((srv.now_ms - R.down_since_ms) / 1000) : -1LL);
        buf_appendf(b, "slave_priority:%d\r\nslave_read_only:%d\r\nreplica_announced:%d\r\n",
             R.priority, R.read_only, R.announced);
    }
    buf_appendf(b, "connected_slaves:%d\r\n", R.nreplicas);
    if (!R.host || 1) {
        if (R.min_to_write)
            buf_appendf(b, "min_slaves_good_slaves:%d\r\n", R.good);
    }
    for (int i = 0; i < R.nreplicas; i++) {
        kv_client *r = R.replicas[i];
        char ip[64];
        long long lag = (srv.now_ms - r->repl_ack_ms) / 1000;
        buf_appendf(b, "slave%d:ip=%s,port=%d,state=%s,offset=%lld,lag=%lld\r\n", i,
             replica_ip(r, ip, sizeof ip), r->repl_listen_port,
             rs_names[r->repl_state < 0 || r->repl_state > RS_ONLINE ? 0 : r->repl_state],
             r->repl_ack_off, lag);
    }
    buf_appendf(b,
         "master_failover_state:%s\r\nmaster_replid:%s\r\nmaster_replid2:%s\r\n"
         "master_repl_offset:%lld\r\nsecond_repl_offset:%lld\r\nrepl_backlog_active:%d\r\n"
         "repl_backlog_size:%lld\r\nrepl_backlog_first_byte_offset:%lld\r\n"
         "repl_backlog_histlen:%lld\r\n\r\n",
         fo_names[R.fo_state], R.replid, R.replid2, R.offset, R.second_offset, R.backlog != NULL,
         R.backlog ? R.bl_size : R.backlog_size, R.backlog ? R.bl_off : 0LL,
         R.backlog ? R.bl_histlen : 0LL);
}

void repl_sync_counts(unsigned long long out[3])
{
    out[0] = (unsigned long long)R.sync_full;
    out[1] = (unsigned long long)R.sync_partial_ok;
    out[2] = (unsigned long long)R.sync_partial_err;
}

void repl_info_stats(bk_buf *b)
{
    buf_appendf(b, "sync_full:%llu\r\nsync_partial_ok:%llu\r\nsync_partial_err:%llu\r\n",
         (unsigned long long)R.sync_full, (unsigned long long)R.sync_partial_ok,
         (unsigned long long)R.sync_partial_err);
}

/* ---- configuration ---- */

enum { C_BOOL, C_INT, C_MEM, C_STR, C_ENUM };

typedef struct {
    const char *name;
    int kind;
    void *p;
    long long min, max;
} repl_opt;

static const repl_opt ropts[] = {
    { "repl-diskless-sync", C_BOOL, &R.diskless_sync, 0, 1 },
    { "repl-diskless-sync-delay", C_INT, &R.diskless_delay, 0, INT_MAX },
    { "repl-diskless-sync-max-replicas", C_INT, &R.diskless_max, 0, INT_MAX },
    { "repl-backlog-size", C_MEM, &R.backlog_size, 1, LLONG_MAX },
    { "repl-timeout", C_INT, &R.timeout, 1, INT_MAX },
    { "repl-ping-replica-period", C_INT, &R.ping_period, 1, INT_MAX },
    { "replica-read-only", C_BOOL, &R.read_only, 0, 1 },
    { "slave-read-only", C_BOOL, &R.read_only, 0, 1 },
    { "replica-serve-stale-data", C_BOOL, &R.serve_stale, 0, 1 },
    { "slave-serve-stale-data", C_BOOL, &R.serve_stale, 0, 1 },
    { "min-replicas-to-write", C_INT, &R.min_to_write, 0, INT_MAX },
    { "min-slaves-to-write", C_INT, &R.min_to_write, 0, INT_MAX },
    { "min-replicas-max-lag", C_INT, &R.min_max_lag, 0, INT_MAX },
    { "min-slaves-max-lag", C_INT, &R.min_max_lag, 0, INT_MAX },
    { "masterauth", C_STR, &R.masterauth, 0, 0 },
    { "masteruser", C_STR, &R.masteruser, 0, 0 },
    { "replica-priority", C_INT, &R.priority, 0, INT_MAX },
    { "slave-priority", C_INT, &R.priority, 0, INT_MAX },
    { "replica-announced", C_BOOL, &R.announced, 0, 1 },
    { "replica-announce-ip", C_STR, &R.announce_ip, 0, 0 },
    { "slave-announce-ip", C_STR, &R.announce_ip, 0, 0 },
    { "replica-announce-port", C_INT, &R.announce_port, 0, 65535 },
    { "slave-announce-port", C_INT, &R.announce_port, 0, 65535 },
    { "repl-diskless-load", C_ENUM, R.diskless_load, 0, 0 },
    { "repl-backlog-ttl", C_INT, &R.backlog_ttl, 0, INT_MAX },
    { "repl-disable-tcp-nodelay", C_BOOL, &R.no_tcp_nodelay, 0, 1 },
    { "repl-ping-slave-period", C_INT, &R.ping_period, 1, INT_MAX },
    { "replica-ignore-maxmemory", C_BOOL, &R.ignore_maxmemory, 0, 1 },
    /* Redis's test knobs: microseconds per key saving / loading an RDB */
    { "rdb-key-save-delay", C_INT, &rdb_key_save_delay, INT_MIN, INT_MAX },
    { "key-load-delay", C_INT, &rdb_key_load_delay, INT_MIN, INT_MAX },
    /* how often a start-up load serves clients (kv_loading_progress) */
    { "loading-process-events-interval-bytes", C_INT, &R.noop_load_events, 1024, INT_MAX },
    /* accepted, no effect */
    { "propagation-error-behavior", C_STR, &R.noop_prop_err, 0, 0 },
    { "slave-ignore-maxmemory", C_BOOL, &R.ignore_maxmemory, 0, 1 },
};

static int yesno(const char *s)
{
    if (strcasecmp(s, "yes") == 0)
        return 1;
    if (strcasecmp(s, "no") == 0)
        return 0;
    return -1;
}

static int parse_mem(const char *s, long long *out)
{
    size_t n = strlen(s);
    long long mul = 1;
    static const struct {
        const char *suf;
        long long mul;
    } units[] = { { "kb", 1024 }, { "mb", 1024 * 1024 }, { "gb", 1024LL * 1024 * 1024 },
                  { "k", 1000 }, { "m", 1000000 }, { "g", 1000000000 }, { "b", 1 } };
    for (size_t i = 0; i < BK_ARRAY_LEN(units); i++) {
        size_t k = strlen(units[i].suf);
        if (n > k && strcasecmp(s + n - k, units[i].suf) == 0) {
            mul = units[i].mul;
            n -= k;
            break;
        }
    }
    long long v;
    if (kv_parse_ll(s, n, &v) < 0 || v < 0 || (v && mul > LLONG_MAX / v))
        return -1;
    *out = v * mul;
    return 0;
}

void repl_masterauth_set(const char *p, size_t n)
{
    kv_free(R.masterauth);
    R.masterauth = n ? kv_strndup(p, n) : NULL;
    R.masterauth_len = n;
}

int repl_config_set(const char *name, int argc, char **argv, int at_runtime, char *err,
                    size_t errlen)
{
    if (strcasecmp(name, "replicaof") == 0 || strcasecmp(name, "slaveof") == 0) {
        if (at_runtime) {
            snprintf(err, errlen, "can't set immutable config");
            return -1;
        }
        long long port;
        if (argc != 2) {
            snprintf(err, errlen, "wrong number of arguments");
            return -1;
        }
        if (kv_parse_ll(argv[1], strlen(argv[1]), &port) < 0 || port < 0 ||
            port > 65535) {
            snprintf(err, errlen, "Invalid master port");
            return -1;
        }
        kv_free(R.host);
        R.host = kv_strndup(argv[0], strlen(argv[0]));
        R.port = (int)port;
        R.state = LS_CONNECT;
        update_flags();
        return 0;
    }
    const repl_opt *o = NULL;
    for (size_t i = 0; i < BK_ARRAY_LEN(ropts); i++)
        if (strcasecmp(name, ropts[i].name) == 0)
            o = &ropts[i];
    if (!o)
        return 1;
    if (argc != 1) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    const char *v = argv[0];
    long long n;
    switch (o->kind) {
    case C_BOOL:
        if ((n = yesno(v)) < 0) {
            snprintf(err, errlen, "argument must be 'yes' or 'no'");
            return -1;
        }
        *(int *)o->p = (int)n;
        break;
    case C_INT:
        if (kv_parse_ll(v, strlen(v), &n) < 0) {
            snprintf(err, errlen, "argument couldn't be parsed into an integer");
            return -1;
        }
        if (n < o->min || n > o->max) {
            snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min,
                     o->max);
            return -1;
        }
        *(int *)o->p = (int)n;
        break;
    case C_MEM:
        if (parse_mem(v, &n) < 0) {
            snprintf(err, errlen, "argument must be a memory value");
            return -1;
        }
        if (n < 16 * 1024)
            n = 16 * 1024; /* Redis's floor for the backlog */
        if (R.backlog)
            backlog_resize(n);
        else
            R.backlog_size = n;
        break;
    case C_STR: {
        char **s = o->p;
        kv_free(*s);
        *s = v[0] ? kv_strndup(v, strlen(v)) : NULL;
        if (s == &R.masterauth)
            R.masterauth_len = *s ? strlen(*s) : 0;
        break;
    }
    case C_ENUM:
        if (strcasecmp(v, "disabled") && strcasecmp(v, "on-empty-db") && strcasecmp(v, "swapdb")) {
            snprintf(err, errlen, "argument(s) must be one of the following: disabled, "
                                  "on-empty-db, swapdb");
            return -1;
        }
        snprintf(o->p, sizeof R.diskless_load, "%s", v);
        break;
    }
    update_flags();
    return 0;
}

void repl_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                     void *ud)
{
    char val[512];
    /* Redis's hidden options: CONFIG GET shows them by their exact name only. */
    static const char *hidden[] = { "rdb-key-save-delay", "key-load-delay",
                                    "loading-process-events-interval-bytes" };
    for (size_t i = 0; i < BK_ARRAY_LEN(ropts); i++) {
        const repl_opt *o = &ropts[i];
        size_t nl = strlen(o->name);
        int is_hidden = 0;
        for (size_t h = 0; h < BK_ARRAY_LEN(hidden); h++)
            is_hidden |= strcmp(o->name, hidden[h]) == 0;
        if (is_hidden ? !(pattern.len == nl && strncasecmp(pattern.p, o->name, nl) == 0)
                      : !kv_glob_match(pattern.p, pattern.len, o->name, nl, 1))
            continue;
        switch (o->kind) {
        case C_BOOL:
            snprintf(val, sizeof val, "%s", *(int *)o->p ? "yes" : "no");
            break;
        case C_INT:
            snprintf(val, sizeof val, "%d", *(int *)o->p);
            break;
        case C_MEM:
            snprintf(val, sizeof val, "%lld", *(long long *)o->p);
            break;
        case C_STR: {
            char *s = *(char **)o->p;
            /* propagation-error-behavior is an enum in Redis, "ignore" by default */
            const char *def = o->p == &R.noop_prop_err ? "ignore" : "";
            snprintf(val, sizeof val, "%s", s ? s : def);
            break;
        }
        default:
            snprintf(val, sizeof val, "%s", (char *)o->p);
            break;
        }
        fn(ud, o->name, val);
    }
    static const char *mo[] = { "replicaof", "slaveof" };
    for (size_t i = 0; i < BK_ARRAY_LEN(mo); i++) {
        if (!kv_glob_match(pattern.p, pattern.len, mo[i], strlen(mo[i]), 1))
            continue;
        if (R.host)
            snprintf(val, sizeof val, "%s %d", R.host, R.port);
        else
            val[0] = '\0';
        fn(ud, mo[i], val);
    }
}

