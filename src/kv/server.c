/* The brisk-kv server: listeners, clients, the command dispatcher and the
 * end-of-batch work (AOF flush, then one write per client). */
#include "kv/server.h"
#include "kv/script_ldb.h"

#include "core/log.h"
#include "core/net.h"
#include "kv/acl.h"
#include "kv/aof.h"
#include "kv/blocking.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/proctitle.h"
#include "kv/pubsub.h"
#include "kv/reply.h"
#include "kv/replication.h"
#include "kv/types.h"
#include "kv/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

kv_server srv;

#define READ_CHUNK (16 * 1024)
#define BIG_ARG (32 * 1024) /* bulks this large get a buffer of their size, as in Redis */
#define QUERYBUF_MAX (1024ull * 1024 * 1024)
#define UNAUTH_MAX_MULTIBULK 10
#define UNAUTH_MAX_BULK 16384

/* ---- command lookup: open addressing over lower-case names ---- */

#define CMD_SLOTS 1024
static const kv_cmd *cmd_slots[CMD_SLOTS];
static const char *cmd_slot_name[CMD_SLOTS]; /* the name it answers to (rename-command) */
static uint8_t cmd_slot_len[CMD_SLOTS]; /* strlen of the slot's name: no strlen per lookup */

/* rename-command old new (config file only, read before the table is
 * built): the command answers to new, or to nothing when new is "". */
enum { MAX_RENAMES = 64 };
static struct {
    const kv_cmd *cmd;
    char *to;
} renames[MAX_RENAMES];
static int nrenames;

int kv_cmd_rename(const char *from, const char *to, char *err, size_t errlen)
{
    const kv_cmd *cmd = NULL;
    for (size_t i = 0; i < kv_ncommands && !cmd; i++)
        if (strcasecmp(kv_commands[i].name, from) == 0)
            cmd = &kv_commands[i];
    for (int i = 0; i < nrenames && cmd; i++)
        if (renames[i].cmd == cmd)
            cmd = NULL; /* renamed already: its old name is gone */
    if (!cmd) {
        snprintf(err, errlen, "No such command in rename-command");
        return -1;
    }
    size_t n = strlen(to);
    if (n >= 32 || nrenames == MAX_RENAMES) {
        snprintf(err, errlen, "Target command name is too long or too many renames");
        return -1;
    }
    for (size_t i = 0; n && i < kv_ncommands; i++) {
        int taken = strcasecmp(kv_commands[i].name, to) == 0;
        for (int k = 0; k < nrenames; k++)
            if (renames[k].cmd == &kv_commands[i])
                taken = strcasecmp(renames[k].to, to) == 0;
        if (taken) {
            snprintf(err, errlen, "Target command name already exists");
            return -1;
        }
    }
    char *low = kv_strndup(to, n);
    for (size_t i = 0; i < n; i++)
        low[i] = ascii_lower(low[i]);
    renames[nrenames].cmd = cmd;
    renames[nrenames++].to = low;
    return 0;
}

static uint32_t name_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

void kv_cmd_table_init(void)
{
    memset(cmd_slots, 0, sizeof cmd_slots);
    for (size_t i = 0; i < kv_ncommands; i++) {
        const kv_cmd *cmd = &kv_commands[i];
        const char *name = cmd->name;
        for (int k = 0; k < nrenames; k++)
            if (renames[k].cmd == cmd)
                name = renames[k].to;
        size_t len = strlen(name);
        if (len == 0)
            continue; /* renamed to nothing: gone */
        uint32_t h = name_hash(name, len) & (CMD_SLOTS - 1);
        while (cmd_slots[h])
            h = (h + 1) & (CMD_SLOTS - 1);
        cmd_slots[h] = cmd;
        cmd_slot_name[h] = name;
        cmd_slot_len[h] = (uint8_t)len; /* names are < 32 bytes (kv_cmd_lookup) */
    }
    srv.cmd_stats = kv_calloc(kv_ncommands * sizeof *srv.cmd_stats);
}

/* Once per command: lower-cases and hashes in one pass (the same FNV-1a as
 * name_hash over the lower-case name). */
const kv_cmd *kv_cmd_lookup(bk_str name)
{
    char low[32];
    if (name.len == 0 || name.len >= sizeof low)
        return NULL;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < name.len; i++) {
        low[i] = ascii_lower(name.p[i]);
        h = (h ^ (unsigned char)low[i]) * 16777619u;
    }
    h &= CMD_SLOTS - 1;
    for (const kv_cmd *cmd; (cmd = cmd_slots[h]); h = (h + 1) & (CMD_SLOTS - 1))
        if (cmd_slot_len[h] == name.len && memcmp(cmd_slot_name[h], low, name.len) == 0)
            return cmd;
    return NULL;
}

/* ---- clients ---- */

int kv_peer_is_local(const struct sockaddr *sa)
{
    switch (sa->sa_family) {
    case AF_UNIX:
        return 1;
    case AF_INET: {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    case AF_INET6: {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    default:
        return 0;
    }
}

int kv_protected_refuses(const kv_config *cfg, const struct sockaddr *sa)
{
    int has_password = cfg->requirepass && cfg->requirepass[0];
    return cfg->protected_mode && !has_password && !kv_peer_is_local(sa);
}

static void client_io_cb(bk_loop *l, bk_io *io, unsigned events);

static kv_client *client_alloc(int fd)
{
    kv_client *c = kv_calloc(sizeof *c);
    c->fd = fd;
    c->id = ++srv.next_client_id;
    c->resp = 2;
    c->db = &srv.dbs[0];
    c->io.fd = -1;
    resp_parser_init(&c->parser);
    c->parser.max_bulk = srv.cfg.proto_max_bulk_len;
    c->ctime_ms = c->last_ms = srv.now_ms;
    c->rb_size = KV_REPLY_CHUNK;
    c->rb_peak_reset_ms = srv.now_ms;
    c->user = kv_acl_default_user();
    if (kv_acl_default_nopass())
        c->flags |= CLIENT_AUTHED;
    else {
        c->parser.max_multibulk = UNAUTH_MAX_MULTIBULK;
        c->parser.max_bulk = UNAUTH_MAX_BULK;
    }
    return c;
}

kv_client *kv_client_new_fake(void)
{
    kv_client *c = client_alloc(-1);
    c->flags |= CLIENT_FAKE | CLIENT_AUTHED;
    c->user = NULL;
    c->parser.max_bulk = RESP_MAX_BULK;
    c->parser.max_multibulk = RESP_MAX_MULTIBULK;
    return c;
}

static void client_free_mem(kv_client *c)
{
    buf_free(&c->rbuf);
    buf_free(&c->wbuf);
    buf_free(&c->prop_buf);
    resp_parser_free(&c->parser);
    kv_free(c->argv);
    kv_free(c->prop_argv);
    kv_free(c->name);
    kv_free(c->lib_name);
    kv_free(c->lib_ver);
    for (int i = 0; i < c->mcount; i++)
        kv_free(c->mq[i].argv);
    kv_free(c->mq);
    kv_free(c->watched);
    kv_free(c);
}

void kv_client_free_fake(kv_client *c)
{
    kv_unwatch_all(c);
    client_free_mem(c);
}

static void discard_multi(kv_client *c)
{
    for (int i = 0; i < c->mcount; i++)
        kv_free(c->mq[i].argv);
    c->mcount = 0;
    c->flags &= ~(CLIENT_MULTI | CLIENT_DIRTY_CAS | CLIENT_DIRTY_EXEC);
}

void kv_client_close(kv_client *c)
{
    if (c->flags & CLIENT_CLOSED)
        return;
    c->flags |= CLIENT_CLOSED;
    if (c->fd >= 0) {
        /* Not loop_io_forget: a forked AOF-rewrite child shares the socket,
         * so close() alone would leave it registered in epoll. */
        loop_io_stop(&srv.loop, &c->io);
        if (BK_UNLIKELY(c->tls))
            kv_tls_client_closed(c);
        close(c->fd);
        c->fd = -1;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        srv.clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv.nclients--;
    /* Its unsent output goes now (the rest waits for the end of the
     * iteration): a dropped replica's backlog must not count toward
     * maxmemory in between, when it no longer counts as a replica's. */
    buf_free(&c->wbuf);
    c->wpos = 0;
    if (c->cev_mem) { /* counted by client eviction */
        kv_cevict_total -= c->cev_mem;
        c->cev_mem = 0;
    }
    blocking_client_closed(c);
    if (BK_UNLIKELY(c->repl_flags))
        repl_client_closed(c);
    kv_unwatch_all(c);
    discard_multi(c);
    pubsub_unsubscribe_all(c);
    if (c->cl_flags || srv.trk_nclients)
        kv_client_gone(c);
    c->next_free = srv.to_free;
    srv.to_free = c;
}

static void mark_pending(kv_client *c)
{
    if (!(c->flags & CLIENT_PENDING_WRITE)) {
        c->flags |= CLIENT_PENDING_WRITE;
        c->next_pending = srv.pending;
        srv.pending = c;
    }
}

void kv_client_set_db(kv_client *c, int id)
{
    c->db = &srv.dbs[id];
}

/* Writes what the client has pending: one write() per batch; the rest
 * waits for POLLOUT. */
static void client_write(kv_client *c)
{
    if (BK_UNLIKELY(c->repl_flags & REPL_C_HOLD)) {
        if (c->repl_relay) {
            repl_relay_write(c); /* a TLS replica: its RDB goes through us */
            return;
        }
        loop_io_set(&srv.loop, &c->io, LOOP_READ);
        return; /* the full-sync child writes to this socket */
    }
    /* what Redis's reply buffer would have held before this write */
    if (BK_UNLIKELY(c->wbuf.len > c->rb_peak))
        c->rb_peak = BK_MIN(c->wbuf.len, c->rb_size);
    while (c->wpos < c->wbuf.len) {
        ssize_t n = BK_UNLIKELY(c->tls)
                        ? kv_tls_write(c, c->wbuf.data + c->wpos, c->wbuf.len - c->wpos)
                        : send(c->fd, c->wbuf.data + c->wpos, c->wbuf.len - c->wpos, MSG_NOSIGNAL);
        if (n > 0) {
            c->wpos += (size_t)n;
            srv.stat_net_out += (uint64_t)n;
            if (c->wpos < c->wbuf.len)
                break; /* the socket buffer is full: wait for POLLOUT */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        kv_client_close(c);
        return;
    }
    if (c->wpos == c->wbuf.len) {
        c->wpos = c->wbuf.len = 0;
        /* A big buffer goes once written. Under maxmemory any over 16 KiB
         * does (Redis frees its reply blocks past the 16 KiB buffer every
         * client has): written replies must not count toward eviction. */
        if (c->wbuf.cap > (BK_UNLIKELY(srv.cfg.maxmemory) ? 16 * 1024 : 1024 * 1024))
            buf_free(&c->wbuf);
        c->obuf_soft_since = 0;
        if (c->flags & CLIENT_CLOSE_AFTER_REPLY) {
            kv_client_close(c);
            return;
        }
        loop_io_set(&srv.loop, &c->io, LOOP_READ);
    } else {
        loop_io_set(&srv.loop, &c->io,
                    BK_UNLIKELY(c->tls) ? kv_tls_events(c) : LOOP_READ | LOOP_WRITE);
    }
}

void kv_flush_clients(void)
{
    kv_client *c = srv.pending;
    srv.pending = NULL;
    while (c) {
        kv_client *next = c->next_pending;
        c->flags &= ~CLIENT_PENDING_WRITE;
        if (!(c->flags & CLIENT_CLOSED)) {
            if (c->flags & CLIENT_CLOSE_ASAP)
                kv_client_close(c);
            else
                client_write(c);
            if (BK_UNLIKELY(kv_cevict_on) && !(c->flags & CLIENT_CLOSED))
                kv_cevict_update(c); /* what the socket took no longer counts */
        }
        c = next;
    }
}

static void check_output_limits(kv_client *c)
{
    size_t pending = c->wbuf.len - c->wpos;
    uint64_t hard = srv.cfg.obuf_hard, soft = srv.cfg.obuf_soft, secs = srv.cfg.obuf_soft_secs;
    if (BK_UNLIKELY(c->subs) && pubsub_total(c)) { /* the pubsub class */
        hard = srv.obuf_pubsub.hard;
        soft = srv.obuf_pubsub.soft;
        secs = srv.obuf_pubsub.secs;
    }
    if (hard && pending > hard) {
        log_warn("client id=%llu addr=%s closed: output buffer %zu bytes over the hard limit",
                 (unsigned long long)c->id, c->addr, pending);
        c->flags |= CLIENT_CLOSE_ASAP;
        return;
    }
    if (soft && pending > soft) {
        if (!c->obuf_soft_since)
            c->obuf_soft_since = srv.now_ms;
        else if ((uint64_t)(srv.now_ms - c->obuf_soft_since) > secs * 1000) {
            log_warn("client id=%llu addr=%s closed: output buffer over the soft limit",
                     (unsigned long long)c->id, c->addr);
            c->flags |= CLIENT_CLOSE_ASAP;
        }
    } else {
        c->obuf_soft_since = 0;
    }
}

uint64_t kv_client_obuf_hard(const kv_client *c)
{
    if (BK_UNLIKELY(c->subs) && pubsub_total(c))
        return srv.obuf_pubsub.hard;
    return srv.cfg.obuf_hard;
}

int kv_client_obuf_over(kv_client *c)
{
    check_output_limits(c);
    return (c->flags & CLIENT_CLOSE_ASAP) != 0;
}

void kv_client_output_added(kv_client *c)
{
    check_output_limits(c);
    mark_pending(c);
}

static void process_input(kv_client *c);

void kv_client_resume(kv_client *c)
{
    process_input(c);
}

static void build_argv(kv_client *c)
{
    resp_parser *p = &c->parser;
    if (p->nargs > c->argv_cap) {
        c->argv_cap = p->nargs < 16 ? 16 : p->nargs;
        kv_free(c->argv);
        c->argv = kv_malloc(c->argv_cap * sizeof *c->argv);
    }
    for (size_t i = 0; i < p->nargs; i++) {
        c->argv[i].p = c->rbuf.data + p->args[i].off;
        c->argv[i].len = p->args[i].len;
    }
    c->argc = (int)p->nargs;
}

static void process_input(kv_client *c)
{
    if (BK_UNLIKELY(c->blocked))
        return; /* its input runs when it is served (blocking_resume_clients) */
    while (!(c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_CLOSED))) {
        /* A command CLIENT PAUSE held is parsed already: run it now. */
        int rc = BK_UNLIKELY(c->cl_flags & CL_HELD) ? RESP_CMD
                                                 : resp_parse(&c->parser, c->rbuf.data, c->rbuf.len);
        c->cl_flags &= ~CL_HELD;
        if (rc == RESP_AGAIN)
            break;
        if (rc == RESP_ERROR) {
            log_info("client id=%llu addr=%s: %s", (unsigned long long)c->id, c->addr,
                     c->parser.err);
            c->cmd = NULL;
            reply_errorf(c, "ERR %s", c->parser.err);
            c->flags |= CLIENT_CLOSE_AFTER_REPLY | CLIENT_PROTO_ERROR;
            break;
        }
        build_argv(c);
        if (BK_UNLIKELY(srv.pause_type) && kv_pause_holds(c))
            break; /* run by kv_pause_resume_held when the pause ends */
        /* As Redis: clients over maxmemory-clients go before a command runs
         * (this one too). Not inside another command (a blocked client served). */
        if (BK_UNLIKELY(kv_cevict_on) && !srv.cl_running && !kv_cevict_before_command(c))
            break;
        size_t mark = c->wbuf.len;
        srv.cl_running = c;
        kv_call(c);
        srv.cl_running = NULL;
        if (BK_UNLIKELY(c->cl_flags | srv.trk_self.len))
            kv_client_after_command(c, mark);
        resp_parser_next(&c->parser);
        if (BK_UNLIKELY(c->repl_flags)) {
            if (c->repl_flags & REPL_C_MASTER)
                repl_master_applied(c);
            if (c->repl_flags & REPL_C_WAITING)
                break; /* WAIT blocked: the rest runs once it replies */
        }
        /* Per command, not per read: one 16 KiB read can hold hundreds of
         * GETs of a large value. */
        check_output_limits(c);
        if (BK_UNLIKELY(c->blocked))
            break; /* the command parked c (blocking.h) */
    }
    if (c->flags & CLIENT_CLOSED)
        return;
    /* Drop consumed bytes; keep a partial command at the front. */
    size_t used = resp_parser_consumed(&c->parser);
    if (used > 0) {
        if (BK_UNLIKELY(c->repl_flags & REPL_C_MASTER))
            repl_master_shift(c, used); /* keeps a transaction's bytes until its EXEC */
        size_t rest = c->rbuf.len - used;
        if (rest)
            memmove(c->rbuf.data, c->rbuf.data + used, rest);
        c->rbuf.len = rest;
        resp_parser_shift(&c->parser, used);
    }
    /* Large idle query buffers are shrunk by kv_client_cron. */
    if (c->wbuf.len > c->wpos) {
        check_output_limits(c);
        mark_pending(c);
    }
}

void kv_client_process_input(kv_client *c)
{
    process_input(c);
}

/* Room for exactly extra more bytes: a large bulk's buffer is as big as the
 * bulk (CLIENT LIST and client eviction count what is allocated). */
static int buf_reserve_exact(bk_buf *b, size_t extra)
{
    size_t need = b->len + extra;
    return need < b->len ? -1 : buf_resize(b, need);
}

static void client_read(kv_client *c)
{
    size_t full = resp_parser_want(&c->parser, c->rbuf.len);
    size_t want = full > 64 * 1024 * 1024 ? 64 * 1024 * 1024 : full;
    int rc;
    if (BK_UNLIKELY(c->parser.bulklen >= BIG_ARG && want && full == want)) {
        /* The rest of a large bulk: a buffer of its size, not the next
         * power of two (also after the cron shrank it meanwhile), however
         * little is left: a read that filled the buffer may leave a few
         * bytes of it, which must not double the buffer. Only when the
         * whole rest is asked for: with more than the 64 MB step left, an
         * exact size would be outgrown, and copied, at every read. */
        rc = c->rbuf.cap - c->rbuf.len < want ? buf_reserve_exact(&c->rbuf, want) : 0;
    } else {
        rc = buf_reserve(&c->rbuf, want < READ_CHUNK ? READ_CHUNK : want);
    }
    if (rc < 0) {
        kv_client_close(c);
        return;
    }
    char *at = c->rbuf.data + c->rbuf.len;
    size_t room = c->rbuf.cap - c->rbuf.len;
    ssize_t n = BK_UNLIKELY(c->tls) ? kv_tls_read(c, at, room) : recv(c->fd, at, room, 0);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        kv_client_close(c);
        return;
    }
    c->rbuf.len += (size_t)n;
    if (c->rbuf.len > c->cl_qb_peak)
        c->cl_qb_peak = c->rbuf.len;
    srv.stat_net_in += (uint64_t)n;
    c->last_ms = srv.now_ms;
    if (c->rbuf.len > QUERYBUF_MAX) {
        log_warn("client id=%llu addr=%s closed: query buffer over 1 GB",
                 (unsigned long long)c->id, c->addr);
        kv_client_close(c);
        return;
    }
    if (BK_UNLIKELY(c->cl_flags & CL_HELD) || BK_UNLIKELY(c->repl_flags & REPL_C_WAITING)) {
        if (BK_UNLIKELY(kv_cevict_on))
            kv_cevict_update(c);
        return; /* input waits behind the held command */
    }
    process_input(c);
    if (BK_UNLIKELY(kv_cevict_on) && !(c->flags & CLIENT_CLOSED))
        kv_cevict_update(c); /* its query buffer, replies, subscriptions, ... */
}

static void client_io_cb(bk_loop *l, bk_io *io, unsigned events)
{
    kv_client *c = io->udata;
    if (BK_UNLIKELY(c == srv.script_caller))
        return; /* its script runs: its argv points into rbuf */
    if (events & (LOOP_READ | LOOP_HUP | LOOP_ERR))
        client_read(c);
    if (!(c->flags & CLIENT_CLOSED) && (events & LOOP_WRITE))
        mark_pending(c); /* written at batch end, after the AOF */
}

kv_client *kv_client_attach_fd(int fd)
{
    kv_client *c = client_alloc(fd);
    if (loop_io_start(&srv.loop, &c->io, fd, LOOP_READ, client_io_cb, c) < 0)
        abort();
    c->next = srv.clients;
    if (srv.clients)
        srv.clients->prev = c;
    srv.clients = c;
    srv.nclients++;
    return c;
}

/* A refusal before the client exists: plain, or inside TLS for a TLS one. */
static void refuse(int fd, struct kv_tls_client *t, const char *msg, size_t n)
{
    if (t) {
        kv_tls_refuse(t, msg, n);
    } else {
        ssize_t w = write(fd, msg, n);
        (void)w;
    }
    close(fd);
    srv.stat_rejected_conns++;
}

kv_client *kv_client_accept(int fd, const struct sockaddr_storage *ss, struct kv_tls_client *t)
{
    if (srv.nclients >= srv.cfg.maxclients) {
        static const char msg[] = "-ERR max number of clients reached\r\n";
        refuse(fd, t, msg, sizeof msg - 1);
        return NULL;
    }
    char ip[64];
    net_format_ip((const struct sockaddr *)ss, ip, sizeof ip);
    if (kv_acl_protected_refuses((const struct sockaddr *)ss)) {
        static const char msg[] = "-" ERR_DENIED "\r\n";
        refuse(fd, t, msg, sizeof msg - 1);
        log_info("client from %s refused: protected mode and no password", ip);
        return NULL;
    }
    kv_client *c = client_alloc(fd);
    c->tls = t;
    snprintf(c->addr, sizeof c->addr, ss->ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip,
             net_port((const struct sockaddr *)ss));
    struct sockaddr_storage ls;
    socklen_t ll = sizeof ls;
    if (getsockname(fd, (struct sockaddr *)&ls, &ll) == 0) {
        net_format_ip((struct sockaddr *)&ls, ip, sizeof ip);
        snprintf(c->laddr, sizeof c->laddr, ls.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip,
                 net_port((struct sockaddr *)&ls));
    }
    if (loop_io_start(&srv.loop, &c->io, fd, LOOP_READ, client_io_cb, c) < 0) {
        if (t)
            kv_tls_refuse(t, "", 0);
        close(fd);
        client_free_mem(c);
        return NULL;
    }
    c->next = srv.clients;
    if (srv.clients)
        srv.clients->prev = c;
    srv.clients = c;
    srv.nclients++;
    srv.stat_conns++;
    return c;
}

static void accept_cb(bk_loop *l, bk_io *io, unsigned events)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(io->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            kv_accept_failed(io); /* EMFILE: pauses, not a busy loop */
            return;
        }
        kv_client_accept(fd, &ss, NULL);
    }
}

/* ---- command dispatch ---- */

static void unknown_command(kv_client *c)
{
    char args[256];
    size_t n = 0;
    args[0] = '\0';
    for (int i = 1; i < c->argc && n < 128; i++) {
        int room = (int)(128 - n);
        int len = (int)BK_MIN(c->argv[i].len, (size_t)room);
        int w = snprintf(args + n, sizeof args - n, "'%.*s' ", len, c->argv[i].p);
        if (w < 0)
            break;
        n += (size_t)w;
        if (n >= sizeof args)
            n = sizeof args - 1;
    }
    reply_errorf(c, "ERR unknown command '%.*s', with args beginning with: %s",
                 (int)BK_MIN(c->argv[0].len, 128), c->argv[0].p, args);
}

static void touch_command_keys(kv_client *c, const kv_cmd *cmd)
{
    if (cmd->first_key <= 0)
        return;
    int first = cmd->first_key;
    int last = cmd->last_key < 0 ? c->argc + cmd->last_key : cmd->last_key;
    int step = cmd->key_step > 0 ? cmd->key_step : 1;
    kv_written_keys(cmd, &first, &last);
    for (int i = first; i <= last && i < c->argc; i += step)
        kv_touch_key(c->db, c->argv[i]);
}

/* Runs cmd for c with c->argv and propagates it when it changed data. */
/* A RESP2 client with subscriptions ran another command. Redis checks the
 * subcommand (known, arity) before and names it in the error. */
static void subscribed_refuse(kv_client *c, const kv_cmd *cmd)
{
    int arity = 0, has_subs = 0;
    const char *full =
        c->argc >= 2 ? kv_acl_subcommand(cmd, c->argv[1], &arity, &has_subs) : NULL;
    if (has_subs && !full) {
        char up[32];
        size_t n = BK_MIN(strlen(cmd->name), sizeof up - 1);
        for (size_t i = 0; i < n; i++)
            up[i] = (char)toupper((unsigned char)cmd->name[i]);
        up[n] = '\0';
        reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.",
                     (int)BK_MIN(c->argv[1].len, (size_t)128), c->argv[1].p, up);
    } else if (full && ((arity > 0 && c->argc != arity) || (arity < 0 && c->argc < -arity))) {
        reply_errorf(c, "ERR wrong number of arguments for '%s' command", full);
    } else {
        reply_errorf(c, ERR_SUBSCRIBED_FMT, full ? full : cmd->name);
    }
}

static int is_script_call(const kv_cmd *cmd)
{
    return cmd->proc == eval_command || cmd->proc == evalsha_command ||
           cmd->proc == eval_ro_command || cmd->proc == evalsha_ro_command ||
           cmd->proc == fcall_command || cmd->proc == fcall_ro_command;
}

static void call_proc(kv_client *c, const kv_cmd *cmd)
{
    uint64_t dirty = srv.dirty;
    c->prop_argc = 0;
    srv.cmd_touched_keys = 0;
    c->cmd = cmd;
    kv_cmd_stats *st = &srv.cmd_stats[cmd - kv_commands];
    int executing = srv.cl_executing;
    srv.cl_executing = 1;
    /* MONITOR shows a script call before the commands it runs (Redis 7). */
    int monitor_first = BK_UNLIKELY(srv.nmonitors) && is_script_call(cmd);
    if (monitor_first)
        kv_monitor_feed(c, cmd, c->argc, c->argv);
    if (!(cmd->flags & CMD_FAST) || (st->calls & 15) == 0 || srv.time_every_call) {
        uint64_t t0 = kv_ticks();
        cmd->proc(c);
        uint64_t dt = kv_ticks() - t0;
        st->ticks += dt;
        st->timed++;
        kv_introspect_after_call(c, cmd, dt);
    } else {
        cmd->proc(c);
    }
    srv.cl_executing = executing;
    st->calls++;
    srv.stat_cmds++;
    if (BK_UNLIKELY(srv.nmonitors) && !monitor_first)
        kv_monitor_feed(c, cmd, c->argc, c->argv);
    if (BK_UNLIKELY(c->cl_flags & CL_TRACKING) && (cmd->flags & CMD_READONLY))
        tracking_remember(c, cmd, c->argc, c->argv);
    else if (BK_UNLIKELY(srv.script_caller) && c != srv.script_caller &&
             (cmd->flags & CMD_READONLY) && (srv.script_caller->cl_flags & CL_TRACKING))
        tracking_remember_script(srv.script_caller);
    /* PUBLISH reaches replicas (their subscribers), not the AOF. */
    if (BK_UNLIKELY(repl_feeding) && cmd->proc == publish_command)
        repl_feed(c->db, c->argc, c->argv);
    if (srv.dirty != dirty && (cmd->flags & CMD_WRITE)) {
        if (!(c->flags & CLIENT_NO_PROPAGATE) && !srv.loading) {
            if (c->prop_argc > 0)
                aof_feed(c->db, c->prop_argc, c->prop_argv);
            else if (c->prop_argc == 0)
                aof_feed(c->db, c->argc, c->argv);
        }
        if ((srv.watch_keys || BK_UNLIKELY(tracking_active())) && !srv.cmd_touched_keys)
            touch_command_keys(c, cmd);
    }
}

void kv_call_proc(kv_client *c, const kv_cmd *cmd)
{
    call_proc(c, cmd);
}

void kv_propagate_as(kv_client *c, int argc, const bk_str *argv)
{
    /* Copy: argv may point into a scratch buffer of the handler. */
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += argv[i].len;
    c->prop_buf.len = 0;
    if (buf_reserve(&c->prop_buf, bytes + 1) < 0)
        abort();
    if (argc > c->prop_cap) {
        kv_free(c->prop_argv);
        c->prop_argv = kv_malloc((size_t)argc * sizeof *c->prop_argv);
        c->prop_cap = argc;
    }
    for (int i = 0; i < argc; i++) {
        c->prop_argv[i].p = c->prop_buf.data + c->prop_buf.len;
        c->prop_argv[i].len = argv[i].len;
        buf_put(&c->prop_buf, argv[i].p, argv[i].len);
    }
    c->prop_argc = argc > 0 ? argc : -1; /* -1: propagate nothing */
}

static int is_multi_control(const kv_cmd *cmd)
{
    return cmd->proc == exec_command || cmd->proc == discard_command ||
           cmd->proc == multi_command || cmd->proc == watch_command ||
           cmd->proc == quit_command || cmd->proc == reset_command;
}

static void queue_multi(kv_client *c, const kv_cmd *cmd)
{
    if (c->mcount == c->mcap) {
        c->mcap = c->mcap ? c->mcap * 2 : 8;
        c->mq = kv_realloc(c->mq, (size_t)c->mcap * sizeof *c->mq);
    }
    size_t bytes = (size_t)c->argc * sizeof(bk_str);
    for (int i = 0; i < c->argc; i++)
        bytes += c->argv[i].len;
    c->cev_multi = (c->mcount ? c->cev_multi : 0) + bytes; /* for client eviction */
    bk_str *argv = kv_malloc(bytes);
    char *p = (char *)(argv + c->argc);
    for (int i = 0; i < c->argc; i++) {
        memcpy(p, c->argv[i].p, c->argv[i].len);
        argv[i].p = p;
        argv[i].len = c->argv[i].len;
        p += c->argv[i].len;
    }
    c->mq[c->mcount++] = (kv_mcmd){ .cmd = cmd, .argc = c->argc, .argv = argv };
    reply_raw(c, "+QUEUED\r\n", 9);
}

/* A client served while the dataset loads: only the commands Redis flags
 * "loading" run (PING, INFO, CONFIG, ...). */
static int busy_refuses(kv_client *c, const kv_cmd *cmd)
{
    if (srv.script_timedout != KV_BUSY_LOADING)
        return script_busy_refuses(c, cmd);
    if (cmd->flags & CMD_LOADING)
        return 0;
    /* Redis flags these subcommands, not their containers: every LATENCY
     * and SLOWLOG one, and the HELP of any container. */
    if (c->argc >= 2 && (cmd->proc == latency_command || cmd->proc == slowlog_command))
        return 0;
    int arity = 0, has_subs = 0;
    if (c->argc >= 2 && BK_STR_IEQ(c->argv[1], "help") &&
        kv_acl_subcommand(cmd, c->argv[1], &arity, &has_subs))
        return 0;
    srv.cmd_stats[cmd - kv_commands].rejected++;
    reply_error(c, "LOADING Redis is loading the dataset in memory");
    return 1;
}

int kv_loading_serve;
static struct {
    int64_t start; /* unix seconds */
    size_t total, loaded;
} ld;

static void update_time(void);

void kv_loading_begin(size_t total)
{
    ld.start = kv_unix_ms() / 1000;
    ld.total = total;
    ld.loaded = 0;
}

void kv_loading_info(bk_buf *b)
{
    if (!srv.loading || !kv_loading_serve)
        return;
    int64_t elapsed = kv_unix_ms() / 1000 - ld.start;
    size_t left = ld.total > ld.loaded ? ld.total - ld.loaded : 0;
    long long eta = elapsed == 0 ? 1 : (long long)((double)elapsed * (double)left /
                                                   (double)(ld.loaded + 1));
    char t[512];
    int n = snprintf(t, sizeof t,
                     "loading_start_time:%lld\r\nloading_total_bytes:%zu\r\n"
                     "loading_rdb_used_mem:0\r\nloading_loaded_bytes:%zu\r\n"
                     "loading_loaded_perc:%.2f\r\nloading_eta_seconds:%lld\r\n",
                     (long long)ld.start, ld.total, ld.loaded,
                     ld.total ? (double)ld.loaded * 100 / (double)ld.total : 0.0, eta);
    buf_append(b, t, (size_t)n);
}

void kv_loading_progress(size_t done)
{
    static size_t next;
    ld.loaded = ld.total && done > ld.total ? ld.total : done; /* the AOF's is an estimate */
    if (done < next && next - done <= (size_t)repl_loading_events_interval())
        return;
    next = done + (size_t)repl_loading_events_interval();
    int saved = srv.script_timedout;
    srv.script_timedout = KV_BUSY_LOADING;
    update_time();
    loop_poll_io(&srv.loop, 0);
    kv_flush_clients();
    srv.script_timedout = saved;
    if (srv.shutdown_asap) {
        /* SHUTDOWN or SIGTERM while loading: Redis exits at once, without
         * saving the half-loaded dataset; nothing else is open yet. */
        log_info("%s while loading the dataset: exiting without saving",
                 srv.shutdown_asap > 0 ? strsignal(srv.shutdown_asap) : "SHUTDOWN");
        log_info("brisk-kv is now ready to exit, bye bye...");
        _exit(0);
    }
}

void kv_call(kv_client *c)
{
    const kv_cmd *cmd = kv_cmd_lookup(c->argv[0]);
    c->cmd = NULL;
    kv_client_note_cmd(c, cmd);
    if (BK_UNLIKELY(!cmd)) {
        unknown_command(c);
        if (c->flags & CLIENT_MULTI)
            c->flags |= CLIENT_DIRTY_EXEC;
        return;
    }
    if (BK_UNLIKELY((cmd->arity > 0 && c->argc != cmd->arity) ||
                 (cmd->arity < 0 && c->argc < -cmd->arity))) {
        /* rejected, not failed: c->cmd stays NULL for reply_error */
        srv.cmd_stats[cmd - kv_commands].rejected++;
        reply_arity_error(c, cmd->name);
        if (c->flags & CLIENT_MULTI)
            c->flags |= CLIENT_DIRTY_EXEC;
        return;
    }
    /* DEBUG only where enable-debug-command lets it (Redis checks this
     * before authentication); MODULE LOAD/UNLOAD refuse in suite.c. */
    if (BK_UNLIKELY(cmd->proc == debug_command) &&
        !kv_protected_action_allowed("enable-debug-command", c->addr)) {
        srv.cmd_stats[cmd - kv_commands].rejected++;
        reply_error(c, "ERR DEBUG command not allowed. If the enable-debug-command option is set "
                       "to \"local\", you can run it from a local connection, otherwise you need "
                       "to set this option in the configuration file, and then restart the server.");
        if (c->flags & CLIENT_MULTI)
            c->flags |= CLIENT_DIRTY_EXEC;
        return;
    }
    /* Not authenticated: refused unless the default user became nopass. */
    if (BK_UNLIKELY(!(c->flags & CLIENT_AUTHED)) && !(cmd->flags & CMD_NO_AUTH) &&
        !kv_acl_default_nopass()) {
        reply_error(c, ERR_NOAUTH);
        if (c->flags & CLIENT_MULTI)
            c->flags |= CLIENT_DIRTY_EXEC;
        return;
    }
    if (BK_UNLIKELY(c->user && !c->user->open) && kv_acl_deny(c, cmd)) {
        srv.cmd_stats[cmd - kv_commands].rejected++;
        c->cmd = NULL;
        if (c->flags & CLIENT_MULTI)
            c->flags |= CLIENT_DIRTY_EXEC;
        return;
    }
    if (BK_UNLIKELY(c->subs) && pubsub_restricted(c) && !pubsub_allowed_when_subscribed(cmd)) {
        subscribed_refuse(c, cmd);
        return;
    }
    if (BK_UNLIKELY(srv.script_timedout) && busy_refuses(c, cmd)) {
        if (c->flags & CLIENT_MULTI)
            c->flags |= CLIENT_DIRTY_EXEC;
        return;
    }
    /* A replica's link carries the stream: it may not read or write keys
     * (Redis's rejection; the error is logged and the replica dropped). */
    if (BK_UNLIKELY(c->repl_flags & REPL_C_REPLICA) && (cmd->flags & (CMD_READONLY | CMD_WRITE))) {
        srv.cmd_stats[cmd - kv_commands].rejected++;
        reply_error(c, "ERR Replica can't interact with the keyspace");
        return;
    }
    if (BK_UNLIKELY(repl_guard) && repl_deny(c, cmd))
        return;
    /* Every command frees memory when over maxmemory, as Redis (a read's
     * tracking client hears of the evicted keys before its reply); only
     * the ones that may grow memory are refused when that is not enough,
     * and inside MULTI every one but EXEC, DISCARD, QUIT and RESET (a
     * queue grows memory too), which fails the transaction. */
    if (BK_UNLIKELY(srv.cfg.maxmemory) && !srv.loading) {
        int in_multi = (c->flags & CLIENT_MULTI) && cmd->proc != exec_command &&
                       cmd->proc != discard_command && cmd->proc != quit_command &&
                       cmd->proc != reset_command;
        int denyoom = (kv_cmd_flags(cmd, c->argc, c->argv) & CMD_DENYOOM) != 0; /* FUNCTION LOAD */
        /* EXEC has the flags of its queue (Redis): a deny-oom command in
         * it aborts the whole transaction */
        int exec = cmd->proc == exec_command && (c->flags & CLIENT_MULTI) &&
                   !(c->flags & CLIENT_DIRTY_EXEC);
        for (int i = 0; exec && !denyoom && i < c->mcount; i++)
            denyoom = (kv_cmd_flags(c->mq[i].cmd, c->mq[i].argc, c->mq[i].argv) & CMD_DENYOOM) != 0;
        int oom = kv_evict_if_needed() < 0;
        if (oom && exec && denyoom) {
            srv.cmd_stats[cmd - kv_commands].rejected++;
            kv_discard_transaction(c);
            reply_errorf(c, "EXECABORT Transaction discarded because of: %s", ERR_OOM);
            return;
        }
        if (oom && (denyoom || in_multi)) {
            srv.cmd_stats[cmd - kv_commands].rejected++;
            reply_error(c, ERR_OOM);
            if (in_multi)
                c->flags |= CLIENT_DIRTY_EXEC;
            return;
        }
    }
    /* As Redis, the tracking table is held to its limit before each
     * command (queued ones too: Redis #11715). */
    if (BK_UNLIKELY(srv.trk_nclients))
        tracking_limit_keys();
    if ((c->flags & CLIENT_MULTI) && !is_multi_control(cmd)) {
        if (BK_UNLIKELY(cmd->flags & CMD_NO_MULTI)) {
            reply_error(c, "ERR Command not allowed inside a transaction");
            c->flags |= CLIENT_DIRTY_EXEC;
            return;
        }
        queue_multi(c, cmd);
        return;
    }
    call_proc(c, cmd);
    blocking_after_command();
}

/* Runs the queued commands of a transaction (from EXEC). */
int kv_exec_command(kv_client *c, int argc, bk_str *argv)
{
    const kv_cmd *cmd = kv_cmd_lookup(argv[0]);
    if (!cmd)
        return -1;
    int sargc = c->argc;
    bk_str *sargv = c->argv;
    c->argc = argc;
    c->argv = argv;
    /* (no maxmemory check: EXEC passed it for the whole queue, as Redis) */
    if (kv_acl_exec_deny(c, cmd) < 0) {
        /* replied: the rules changed since the command was queued */
    } else {
        call_proc(c, cmd);
    }
    c->argc = sargc;
    c->argv = sargv;
    return 0;
}

/* ---- the loop hooks ---- */

static void update_time(void)
{
    srv.now_ms = kv_unix_ms();
    srv.lru_clock = (uint32_t)((srv.now_ms / KV_LRU_MS) & 0xfffffff);
}

static void before_dispatch(bk_loop *l, void *ud)
{
    update_time();
    if (BK_UNLIKELY(kv_watchdog_ms))
        kv_watchdog_arm(); /* this iteration's work, not the wait before it */
}

static void free_closed(void)
{
    while (srv.to_free) {
        kv_client *c = srv.to_free;
        srv.to_free = c->next_free;
        client_free_mem(c);
    }
}

static void on_iteration_end(bk_loop *l, void *ud)
{
    if (BK_UNLIKELY(srv.evict_pending))
        kv_evict_if_needed(); /* before the flushes: its DELs go out now */
    if (BK_UNLIKELY(srv.resume_held))
        kv_pause_resume_held();
    if (BK_UNLIKELY(srv.trk_bcast_pending))
        tracking_broadcast();
    if (srv.aof_buf.len)
        aof_flush(0);
    if (srv.pending)
        kv_flush_clients();
    if (BK_UNLIKELY(kv_cevict_on))
        kv_cevict_run(); /* after the writes: what the sockets took is gone */
    if (srv.to_free)
        free_closed();
    if (BK_UNLIKELY(kv_watchdog_ms))
        kv_watchdog_disarm();
}

static void on_wake(bk_loop *l, void *ud)
{
    (void)l;
    if (srv.shutdown_asap > 0 && !kv_debug_cron_paused)
        kv_shutdown_cron();
}

/* One sample per cron tick of the rates INFO reports as instantaneous_*. */
static void sample_rates(void)
{
    uint64_t now[3] = { srv.stat_cmds, srv.stat_net_in, srv.stat_net_out };
    int64_t dt = srv.now_ms - srv.inst.last_ms;
    if (srv.inst.last_ms && dt > 0) {
        for (int k = 0; k < 3; k++)
            srv.inst.rate[k][srv.inst.idx] =
                (double)(now[k] - srv.inst.last[k]) * 1000.0 / (double)dt;
        srv.inst.idx = (srv.inst.idx + 1) % KV_OPS_SAMPLES;
    }
    srv.inst.last_ms = srv.now_ms;
    memcpy(srv.inst.last, now, sizeof now);
}

double kv_instantaneous(int what)
{
    double sum = 0;
    for (int i = 0; i < KV_OPS_SAMPLES; i++)
        sum += srv.inst.rate[what][i];
    return sum / KV_OPS_SAMPLES;
}

static void cron_cb(bk_loop *l, bk_timer *t)
{
    if (BK_UNLIKELY(kv_debug_cron_paused)) { /* DEBUG PAUSE-CRON: signals wait too */
        timer_start(l, t, (uint64_t)(1000 / srv.cfg.hz));
        return;
    }
    update_time();
    srv.cronloops++;
    sample_rates();
    if (srv.cronloops % 64 == 0)
        kv_ticks_calibrate();
    int64_t budget_us = 25000 * (int64_t)srv.cfg.active_expire_effort / 10 * 10 / srv.cfg.hz;
    if (budget_us < 1000)
        budget_us = 1000;
    kv_client_cron();
    ldb_cron();
    tracking_cron();
    /* A pause freezes the dataset; a replica waits for its master's DELs. */
    if (!srv.pause_type && !kv_active_expire_off && !(repl_guard && repl_no_expire())) {
        int64_t expire_t0 = srv.latency_threshold ? kv_unix_us() : 0;
        db_active_expire(budget_us);
        if (srv.latency_threshold) /* LATENCY's expire-cycle event */
            kv_latency_sample("expire-cycle", (kv_unix_us() - expire_t0) / 1000);
    }
    /* Incremental rehash of idle tables: at most ~1 ms. */
    int64_t start = kv_unix_us();
    for (int i = 0; i < srv.cfg.databases; i++) {
        kv_db *db = &srv.dbs[i];
        keytab_tidy(&db->keys);
        while (keytab_resizing(&db->keys) && keytab_rehash(&db->keys, 256))
            if (kv_unix_us() - start > 1000)
                break;
    }
    aof_cron();
    dump_cron();
    repl_cron();
    if (srv.cfg.timeout && srv.cronloops % (uint64_t)srv.cfg.hz == 0) {
        for (kv_client *c = srv.clients; c; c = c->next)
            if (!(c->flags & CLIENT_MULTI) && !(c->cl_flags & CL_HELD) && !c->blocked &&
                !c->repl_flags &&
                (uint64_t)(srv.now_ms - c->last_ms) > srv.cfg.timeout * 1000)
                c->flags |= CLIENT_CLOSE_ASAP, mark_pending(c);
    }
    if (BK_UNLIKELY(srv.shutdown_asap > 0 || srv.shutdown_ms))
        kv_shutdown_cron();
    timer_start(l, t, (uint64_t)(1000 / srv.cfg.hz));
}

/* temp-<pid>.rdb, named at start: a second SIGINT removes it from the
 * signal handler (no formatting there). */
static char temp_rdb_name[32];

static void on_signal(int sig)
{
    /* A second Ctrl+C while the shutdown saves: the user wants out now,
     * without the file (Redis's "You insist... exiting now."). */
    if (srv.shutdown_asap && sig == SIGINT) {
        static const char msg[] = "You insist... exiting now.\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        unlink(temp_rdb_name);
        _exit(1);
    }
    srv.shutdown_asap = sig;
    loop_wake(&srv.loop);
}

/* ---- start and stop ---- */

/* Opens a listening socket per bind address on port into fds (not yet in
 * the loop). Returns how many, or -1 (none left open) with err set. */
static int open_listeners(int port, char *const *bind, int nbind, int *fds, char *err,
                          size_t errlen)
{
    int n = 0;
    for (int i = 0; i < nbind; i++) {
        const char *a = bind[i];
        int optional = a[0] == '-';
        if (optional)
            a++;
        char spec[128];
        if (strchr(a, ':'))
            snprintf(spec, sizeof spec, "[%s]:%d", a, port);
        else
            snprintf(spec, sizeof spec, "%s:%d", strcmp(a, "*") == 0 ? "0.0.0.0" : a, port);
        if (strcmp(a, "::*") == 0)
            snprintf(spec, sizeof spec, "[::]:%d", port);
        net_addr na;
        char perr[200];
        if (net_parse_addr(spec, &na, perr, sizeof perr) < 0) {
            snprintf(err, errlen, "bind %s: %s", a, perr);
            goto fail;
        }
        int fd = net_listen(&na, srv.cfg.tcp_backlog, 0);
        if (fd < 0) {
            if (optional || ((fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT) && i > 0 &&
                             na.ss.ss_family == AF_INET6)) {
                log_info("skipping bind %s: %s", na.text, strerror(-fd));
                continue;
            }
            /* Redis's words: its test suite retries another port on them */
            snprintf(err, errlen, "Failed listening on port %d (tcp), aborting. (%s: %s)", port,
                     na.text, strerror(-fd));
            goto fail;
        }
        fds[n++] = fd;
        log_info("listening on %s", na.text);
    }
    if (n > 0)
        return n;
    snprintf(err, errlen, "no address to listen on");
fail:
    while (n > 0)
        close(fds[--n]);
    return -1;
}

int kv_open_listeners(int port, char *const *bind, int nbind, int *fds, char *err,
                      size_t errlen)
{
    return open_listeners(port, bind, nbind, fds, err, errlen);
}

static int listen_all(void)
{
    if (srv.cfg.port == 0)
        return 0; /* TLS only (kv_tls_start checked that something listens) */
    int fds[KV_MAX_BIND];
    char err[256];
    int n = open_listeners(srv.cfg.port, srv.cfg.bind, srv.cfg.nbind, fds, err, sizeof err);
    if (n < 0) {
        log_error("%s", err);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (loop_io_start(&srv.loop, &srv.listen_io[srv.nlisten], fds[i], LOOP_READ, accept_cb,
                          NULL) < 0) {
            while (i < n)
                close(fds[i++]);
            return -1;
        }
        srv.nlisten++;
    }
    return 0;
}

static void close_listeners(void)
{
    for (int i = 0; i < srv.nlisten; i++) {
        int fd = srv.listen_io[i].fd;
        if (fd >= 0) {
            loop_io_forget(&srv.loop, &srv.listen_io[i]);
            close(fd);
        }
    }
    srv.nlisten = 0;
}

int kv_relisten(int port, char *const *bind, int nbind)
{
    if (port <= 0) {
        log_warn("CONFIG SET: port 0 (no TCP listener) is not supported");
        return -1;
    }
    /* The old sockets close first (the new set may share an address and
     * port with them) and come back when the new set fails, as Redis. An
     * event of an old one still queued in this batch finds the new fd in
     * the same bk_io, where accept() just says EAGAIN. */
    close_listeners();
    int fds[KV_MAX_BIND];
    char err[256];
    int rc = 0;
    int n = open_listeners(port, bind, nbind, fds, err, sizeof err);
    if (n < 0) {
        log_warn("CONFIG SET: %s", err);
        rc = -1;
        n = open_listeners(srv.cfg.port, srv.cfg.bind, srv.cfg.nbind, fds, err, sizeof err);
        if (n < 0)
            log_error("CONFIG SET: the old listeners did not come back: %s", err);
    }
    for (int i = 0; i < n; i++) {
        if (loop_io_start(&srv.loop, &srv.listen_io[srv.nlisten], fds[i], LOOP_READ, accept_cb,
                          NULL) < 0) {
            close(fds[i]);
            continue;
        }
        srv.nlisten++;
    }
    return rc;
}

void kv_child_close_listeners(void)
{
    for (int i = 0; i < srv.nlisten; i++)
        if (srv.listen_io[i].fd >= 0)
            close(srv.listen_io[i].fd); /* the parent's epoll keeps its own */
    kv_tls_child_close_listeners();
}

/* Frees everything, so leak checkers see a clean exit. */
static void teardown(void)
{
    while (srv.clients)
        kv_client_close(srv.clients);
    free_closed();
    kv_tls_stop();
    for (int i = 0; i < srv.nlisten; i++)
        if (srv.listen_io[i].fd >= 0)
            close(srv.listen_io[i].fd);
    for (int i = 0; i < srv.cfg.databases; i++) {
        db_free(&srv.dbs[i]);
        dict_clear(&srv.dbs[i].watched, NULL, NULL);
    }
    kv_free(srv.dbs);
    pubsub_free();
    kv_acl_free();
    kv_introspect_free();
    kv_free(srv.cmd_stats);
    kv_free(srv.aof_path);
    kv_free(srv.child_tmpfile);
    tracking_free();
    kv_client_tables_free();
    kv_free(srv.monitors);
    buf_free(&srv.aof_buf);
    buf_free(&srv.aof_rewrite_buf);
    if (srv.aof_fd >= 0)
        close(srv.aof_fd);
    loop_free(&srv.loop);
    kv_config_free(&srv.cfg);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: brisk-kv [config-file] [--option value ...]\n"
            "       brisk-kv --check-aof [--fix | --truncate-to-timestamp T] FILE|MANIFEST\n"
            "\n"
            "  --port N                 TCP port (6379)\n"
            "  --bind ADDR ...          addresses (127.0.0.1 ::1)\n"
            "  --dir DIR                working directory for the AOF\n"
            "  --appendonly yes|no\n"
            "  --appendfsync always|everysec|no\n"
            "  --requirepass PASSWORD\n"
            "  --protected-mode yes|no  refuse non-loopback clients without a password (yes)\n"
            "  --maxclients N\n"
            "  --maxmemory BYTES\n"
            "  --maxmemory-policy noeviction|allkeys-lru|volatile-lru|allkeys-random|...\n"
            "  --busy-poll-us N         look for work N microseconds before sleeping while\n"
            "                           busy (50; 0 = off)\n"
            "Any redis.conf option brisk-kv knows may be given as --name value.\n");
}

/* A value as Redis writes it into its command-line config text: quoted,
 * with \\, \" and the non-printable bytes escaped. */
static void cli_put_quoted(bk_buf *b, const char *v)
{
    buf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        char esc[8];
        int n;
        if (*p == '\\' || *p == '"')
            n = snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p == '\n' || *p == '\r' || *p == '\t')
            n = snprintf(esc, sizeof esc, "\\%c", *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't');
        else if (*p < 0x20 || *p >= 0x7f)
            n = snprintf(esc, sizeof esc, "\\x%02x", *p);
        else
            n = snprintf(esc, sizeof esc, "%c", *p);
        buf_append(b, esc, (size_t)n);
    }
    buf_append(b, "\" ", 2);
}

/* Applies one line of the command-line config text; prints Redis's
 * fatal-config report (the line, then why) on error. */
static int cli_apply_line(bk_buf *line)
{
    while (line->len && line->data[line->len - 1] == ' ')
        line->len--;
    buf_append(line, "", 1); /* NUL */
    if (line->data[0] == '\0')
        return 0;
    char **av = NULL, err[512];
    int ac = kv_split_line(line->data, &av), rc = 0;
    if (ac < 0) {
        snprintf(err, sizeof err, "Unbalanced quotes in configuration line");
        rc = -1;
    } else if (ac > 0 && kv_config_set(&srv.cfg, av[0], ac - 1, av + 1, 0, err, sizeof err) != 0) {
        rc = -1;
    }
    if (rc < 0)
        fprintf(stderr, "\n*** FATAL CONFIG FILE ERROR (brisk-kv %s) ***\n>>> '%s'\n%s\n",
                BRISK_VERSION, line->data, err);
    if (ac > 0)
        kv_free_argv(ac, av);
    return rc;
}

/* Command-line options, read as Redis 7.0 reads them: each "--name" starts
 * a line of config text and the arguments after it are its values, except
 * that an option still without a value takes the next argument even when
 * it starts with "--" (--proc-title-template --x); "--name value" in one
 * argument is a whole line; a bare --save (last, or before another --x) is
 * save "". Arguments before any --name make a line of their own
 * (loglevel verbose). */
static int parse_cli(int argc, char **argv)
{
    int i = 1;
    char err[512];
    if (i < argc && strncmp(argv[i], "--", 2) != 0) {
        /* absolute: CONFIG REWRITE runs after the chdir to dir */
        char *abs = realpath(argv[i], NULL);
        srv.config_file = abs ? abs : argv[i];
        if (kv_config_load_file(&srv.cfg, argv[i], err, sizeof err) < 0) {
            fprintf(stderr, "brisk-kv: %s\n", err);
            return -1;
        }
        i++;
    }
    bk_buf line = { 0 };
    int has_value = 1, rc = 0;
    for (; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (has_value && a[0] == '-' && a[1] == '-') {
            rc = cli_apply_line(&line);
            line.len = 0;
            buf_append(&line, a + 2, strlen(a + 2));
            buf_append(&line, " ", 1);
            has_value = strchr(a + 2, ' ') != NULL; /* "--port 6380" in one */
            if (!has_value && strcmp(a, "--save") == 0 &&
                (i + 1 == argc || strncmp(argv[i + 1], "--", 2) == 0)) {
                buf_append(&line, "\"\"", 2);
                has_value = 1;
            }
        } else {
            cli_put_quoted(&line, a);
            has_value = 1;
        }
    }
    if (rc == 0)
        rc = cli_apply_line(&line);
    buf_free(&line);
    return rc;
}

int kv_server_main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("brisk-kv %s (redis_version %s)\n", BRISK_VERSION, KV_VERSION);
        return 0;
    }
    argv = kv_proctitle_init(argc, argv); /* the title takes the original strings' memory */
    if (argc >= 2 && strcmp(argv[1], "--check-aof") == 0) {
        int fix = argc >= 3 && strcmp(argv[2], "--fix") == 0;
        int ts = argc >= 4 && strcmp(argv[2], "--truncate-to-timestamp") == 0;
        long long to = ts ? strtoll(argv[3], NULL, 10) : 0;
        if (argc != 3 + fix + 2 * ts || (ts && to <= 0)) {
            usage(stderr);
            return 2;
        }
        kv_cmd_table_init(); /* the checker refuses unknown commands, as the loader */
        return aof_check_main(argv[argc - 1], fix, to);
    }
    srv.executable = argv[0];
    kv_config_defaults(&srv.cfg);
    kv_config_snapshot_defaults(); /* what CONFIG REWRITE leaves out */
    if (parse_cli(argc, argv) < 0)
        return 2;
    if (srv.cfg.logfile && srv.cfg.logfile[0] && log_open(srv.cfg.logfile) < 0) {
        fprintf(stderr, "brisk-kv: cannot open log file %s\n", srv.cfg.logfile);
        return 1;
    }
    /* logfile "" is standard output, as in Redis (Redis's test suite reads
     * the log there); stderr stays when stdout cannot be opened. */
    if (!srv.cfg.logfile || !srv.cfg.logfile[0])
        (void)log_open("/dev/stdout");
    log_set_level((enum log_level)srv.cfg.loglevel);
    if (srv.cfg.dir && chdir(srv.cfg.dir) < 0) {
        log_error("cannot use dir %s: %s", srv.cfg.dir, strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    snprintf(temp_rdb_name, sizeof temp_rdb_name, "temp-%d.rdb", (int)getpid());
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    kv_signals_start(); /* crash report; the watchdog when watchdog-period is set */

    uint64_t seed = (uint64_t)kv_unix_us() ^ ((uint64_t)getpid() << 32);
    int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    uint64_t rnd[3] = { seed, seed * 31, seed * 131 };
    if (rfd >= 0) {
        ssize_t r = read(rfd, rnd, sizeof rnd);
        (void)r;
        close(rfd);
    }
    kv_rand_seed(rnd[0]);
    dict_set_seed(rnd[1], rnd[2]);

    if (loop_init(&srv.loop, 1024) < 0) {
        log_error("cannot create the event loop");
        return 1;
    }
    srv.loop.before_dispatch = before_dispatch;
    srv.loop.on_iteration_end = on_iteration_end;
    srv.loop.on_wake = on_wake;
    loop_set_busy_poll(&srv.loop, (unsigned)srv.cfg.busy_poll_us);
    update_time();
    srv.start_ms = srv.now_ms;
    srv.rb_peak_reset_time = KV_RB_PEAK_RESET_MS;
    srv.rb_resizing = 1;
    srv.lastsave = srv.now_ms / 1000;
    srv.aof_fd = -1;
    srv.aof_selected_db = -1;
    srv.aof_last_write_ok = 1;
    srv.aof_last_bgrewrite_ok = 1;
    pthread_mutex_init(&srv.fsync_mu, NULL);
    pthread_cond_init(&srv.fsync_cv, NULL);
    kv_cmd_table_init();
    if (kv_acl_init() < 0)
        return 1;
    kv_ticks_calibrate();
    srv.dbs = kv_calloc((size_t)srv.cfg.databases * sizeof *srv.dbs);
    for (int i = 0; i < srv.cfg.databases; i++)
        db_init(&srv.dbs[i], i);
    pubsub_init();
    tracking_init();
    kv_introspect_init();
    repl_init();
    if (kv_oom_apply(repl_is_replica() ? KV_OOM_REPLICA : KV_OOM_MASTER) < 0)
        log_warn("oom-score-adj: cannot write /proc/self/oom_score_adj: %s", strerror(errno));
    /* Listening before the load: a client connecting meanwhile waits for
     * the dataset instead of being refused (Redis answers LOADING). */
    if (kv_tls_start() < 0 || listen_all() < 0)
        return 1;
    /* After listening and before loading, as Redis: a busy port is logged
     * first, a server that fails to load has logged its pid (Redis's test
     * suite waits for " PID: N"). */
    log_info("brisk-kv %s (redis_version=%s) Port: %d PID: %d", BRISK_VERSION, KV_VERSION,
             srv.cfg.port, (int)getpid());

    size_t plen = strlen(srv.cfg.appendfilename);
    srv.aof_path = kv_strndup(srv.cfg.appendfilename, plen);
    kv_loading_serve = 1;
    aof_read_manifest();
    if (srv.cfg.appendonly) {
        int64_t t0 = kv_unix_ms();
        if (aof_load_files() < 0)
            return 1;
        update_time();
        log_info("DB loaded from append only file: %.3f seconds",
                 (double)(kv_unix_ms() - t0) / 1000.0);
        if (aof_open() < 0)
            return 1;
    } else if (dump_load_at_start() < 0) {
        return 1;
    }
    kv_loading_serve = 0;
    kv_proctitle_update();
    log_info("Ready to accept connections"); /* Redis's words: tools wait for them */
    timer_init(&srv.cron, cron_cb, NULL);
    timer_start(&srv.loop, &srv.cron, (uint64_t)(1000 / srv.cfg.hz));
    int rc = loop_run(&srv.loop);
    /* From here a new connection is refused: a client that saw SHUTDOWN
     * close its connection must not reach a server on its way out (Redis's
     * sockets all close at its exit; ours close one by one below). */
    close_listeners();
    kv_tls_close_listeners();
    dump_at_exit();
    on_iteration_end(&srv.loop, NULL);
    if (srv.aof_state) {
        aof_flush(1);
    }
    aof_stop_fsync_thread();
    if (srv.child_pid > 0)
        kill(srv.child_pid, SIGKILL);
    ldb_kill_sessions();
    teardown();
    log_info("brisk-kv is now ready to exit, bye bye...");
    return rc < 0 ? 1 : 0;
}
