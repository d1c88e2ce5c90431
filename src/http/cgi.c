#include "http/cgi.h"

#include "core/fsopen.h"
#include "core/net.h"
#include "http/files.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CGI_HEAD_MAX (16 * 1024)    /* script's header section */
#define CGI_BUFFER_MAX (64 * 1024)  /* body buffered for a Content-Length */
#define CGI_OUT_PAUSE (1024 * 1024) /* stop reading the script above this */
#define CGI_MAX_REDIRECTS 5

typedef struct cgi {
    void *deferred_next; /* first: the worker's deferred-free list */
    struct cgi *prev, *next; /* the worker's scripts */
    http_exchange *x;    /* while the response is open; NULL after */
    http_worker *hw;
    char name[256];      /* script, for logs */
    pid_t pid;
    bk_io in_io, out_io, err_io, pid_io;
    bk_timer tm;            /* the script's deadline */
    bk_timer resume;        /* re-checks a slow client */
    const char *body;
    size_t body_len, body_off;
    bk_buf out;             /* header section, then buffered body */
    bk_buf err;             /* partial stderr line */
    size_t head_len;     /* bytes of out that were the header section */
    uint8_t headers_done, streaming, exited, out_eof, timed_out, aborted, bad_head;
    int status;
    char *location;      /* local redirect target */
} cgi;

static void local_redirect(http_exchange *x, const char *location);
static void cgi_free(cgi *g);

const http_cgi_map *http_cgi_match(const http_conf *conf, const char *rel, size_t len)
{
    for (int i = 0; i < conf->ncgi; i++) {
        const http_cgi_map *m = &conf->cgi[i];
        size_t n = strlen(m->prefix) - 2; /* "/cgi-bin/" -> "cgi-bin" */
        if (len >= n && memcmp(rel, m->prefix + 1, n) == 0 && (len == n || rel[n] == '/'))
            return m;
    }
    return NULL;
}

void http_cgi_shutdown(http_worker *hw)
{
    while (hw->cgis) {
        cgi *g = hw->cgis;
        if (!g->exited) {
            kill(-g->pid, SIGKILL);
            waitpid(g->pid, NULL, 0);
            g->exited = 1;
        }
        if (g->x) { /* cannot happen: the worker ends after its responses */
            g->x->on_abort = NULL;
            g->x = NULL;
        }
        cgi_free(g);
    }
    while (hw->deferred) {
        void **block = hw->deferred;
        hw->deferred = *block;
        free(block);
    }
}

static void close_io(bk_loop *l, bk_io *io)
{
    if (io->fd < 0)
        return;
    int fd = io->fd;
    loop_io_stop(l, io);
    close(fd);
}

static void cgi_log_stderr(cgi *g, int flush)
{
    char *p = g->err.data, *end = p + g->err.len;
    for (;;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl && !(flush && p < end) && (size_t)(end - p) < 2048)
            break;
        char *e = nl ? nl : end;
        log_error("cgi %s: %.*s", g->name, (int)BK_MIN((size_t)(e - p), (size_t)2048), p);
        p = nl ? nl + 1 : e;
        if (p >= end)
            break;
    }
    size_t left = (size_t)(end - p);
    memmove(g->err.data, p, left);
    g->err.len = left;
}

/* Parses the script's header section: Status, Location, Content-Type and
 * the rest passed through. Returns 0, or -1 for a malformed section. */
static int parse_head(cgi *g, const char *p, size_t len)
{
    http_exchange *x = g->x;
    const char *end = p + len;
    bk_str location = BK_STR_NULL;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le > p && le[-1] == '\r')
            le--;
        if (le == p)
            break;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p)
            return -1;
        bk_str name = { p, (size_t)(colon - p) };
        const char *v = colon + 1;
        while (v < le && (*v == ' ' || *v == '\t'))
            v++;
        bk_str val = { v, (size_t)(le - v) };
        for (size_t i = 0; i < name.len; i++)
            if ((unsigned char)name.p[i] <= ' ')
                return -1;
        if (BK_STR_IEQ(name, "status")) {
            uint64_t code;
            if (val.len < 3 || num_parse_u64(val.p, 3, 999, &code) < 0 || code < 100 ||
                (val.len > 3 && val.p[3] != ' '))
                return -1;
            g->status = (int)code;
        } else if (BK_STR_IEQ(name, "location")) {
            location = val;
        } else {
            http_exchange_header(x, name, val);
        }
        p = nl ? nl + 1 : end;
    }
    /* RFC 3875 6.2: a local path without a Status is a local redirect; any
     * other Location goes to the client (302 unless the script says). */
    if (location.len && location.p[0] == '/' && !g->status) {
        g->location = strndup(location.p, location.len);
        return g->location ? 0 : -1;
    }
    if (location.len) {
        http_exchange_header(x, BK_STR("Location"), location);
        if (!g->status)
            g->status = 302;
    }
    http_exchange_status(x, g->status ? g->status : 200);
    return 0;
}

/* Finds the blank line that ends the header section. */
static size_t find_head_end(const char *p, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (p[i] != '\n')
            continue;
        if (p[i + 1] == '\n')
            return i + 2;
        if (p[i + 1] == '\r' && i + 2 < len && p[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

static void cgi_free(cgi *g)
{
    bk_loop *l = &g->hw->w.loop;
    close_io(l, &g->in_io);
    close_io(l, &g->out_io);
    close_io(l, &g->err_io);
    close_io(l, &g->pid_io);
    timer_stop(l, &g->tm);
    timer_stop(l, &g->resume);
    if (g->err.len)
        cgi_log_stderr(g, 1);
    buf_free(&g->out);
    buf_free(&g->err);
    free(g->location);
    g->hw->cgi_running--;
    if (g->prev)
        g->prev->next = g->next;
    else
        g->hw->cgis = g->next;
    if (g->next)
        g->next->prev = g->prev;
    /* Events for its descriptors may still be in this batch. */
    g->deferred_next = g->hw->deferred;
    g->hw->deferred = g;
}

/* The script is reaped and the response is over: let go. */
static void maybe_free(cgi *g)
{
    if (!g->x && g->exited)
        cgi_free(g);
}

/* Ends the response: when the output ended, or earlier on a timeout, a
 * dead client or a bad header. The process is reaped separately. */
static void cgi_respond(cgi *g)
{
    http_exchange *x = g->x;
    if (!x)
        return;
    bk_loop *l = &g->hw->w.loop;
    g->x = NULL;
    x->on_abort = NULL;
    close_io(l, &g->in_io); /* the body lives in the request: stop reading it */
    if (g->aborted) {
        http_exchange_end(x, NULL, 0);
    } else if (g->timed_out) {
        log_error("cgi %s: timed out after %llums, killed", g->name,
                  (unsigned long long)x->conf->cgi_timeout);
        http_exchange_fail(x, x->headers_sent ? 500 : 504);
    } else if (!g->headers_done || g->bad_head) {
        log_error("cgi %s: %s", g->name,
                  g->bad_head ? "malformed header section" : "no header section before end of output");
        http_exchange_fail(x, 502);
    } else if (g->location) {
        local_redirect(x, g->location);
    } else if (g->streaming) {
        http_exchange_end(x, NULL, 0);
    } else {
        http_exchange_end(x, g->out.data + g->head_len, g->out.len - g->head_len);
    }
    maybe_free(g);
}

static void kill_script(cgi *g)
{
    if (!g->exited)
        kill(-g->pid, SIGKILL); /* the whole process group */
}

static void on_timeout(bk_loop *l, bk_timer *t)
{
    cgi *g = t->udata;
    g->timed_out = 1;
    kill_script(g);
    cgi_respond(g);
}

static void on_abort(void *arg)
{
    cgi *g = arg;
    g->aborted = 1;
    kill_script(g);
    cgi_respond(g);
}

static void on_stdin(bk_loop *l, bk_io *io, unsigned events)
{
    cgi *g = io->udata;
    while (g->body_off < g->body_len) {
        ssize_t n = write(io->fd, g->body + g->body_off, g->body_len - g->body_off);
        if (n < 0) {
            if (errno == EAGAIN)
                return;
            if (errno == EINTR)
                continue;
            break; /* EPIPE: the script stopped reading */
        }
        g->body_off += (size_t)n;
    }
    close_io(l, io);
}

static void out_pause_check(bk_loop *l, bk_timer *t)
{
    cgi *g = t->udata;
    if (g->out_io.fd < 0)
        return;
    if (g->x && http_exchange_pending(g->x) > CGI_OUT_PAUSE) {
        timer_start(l, &g->resume, 20);
        return;
    }
    loop_io_set(l, &g->out_io, LOOP_READ);
}

static void on_stdout(bk_loop *l, bk_io *io, unsigned events)
{
    cgi *g = io->udata;
    http_exchange *x = g->x;
    char tmp[16384];
    ssize_t n = read(io->fd, tmp, sizeof tmp);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        g->out_eof = 1;
        close_io(l, io);
        cgi_respond(g);
        return;
    }
    if (!x || g->bad_head)
        return; /* drain and drop */
    if (!g->headers_done) {
        if (g->out.len + (size_t)n > CGI_HEAD_MAX + sizeof tmp || buf_append(&g->out, tmp, (size_t)n) < 0) {
            g->bad_head = 1;
            kill_script(g);
            return;
        }
        size_t end = find_head_end(g->out.data, g->out.len);
        if (end > CGI_HEAD_MAX) {
            g->bad_head = 1;
            kill_script(g);
            return;
        }
        if (!end) {
            if (g->out.len > CGI_HEAD_MAX) {
                g->bad_head = 1;
                kill_script(g);
            }
            return;
        }
        g->headers_done = 1;
        g->head_len = end;
        if (parse_head(g, g->out.data, end) < 0) {
            g->bad_head = 1;
            kill_script(g);
        }
        return;
    }
    if (g->location)
        return; /* the body of a local redirect is dropped */
    if (!g->streaming) {
        if (g->out.len + (size_t)n <= g->head_len + CGI_BUFFER_MAX) {
            buf_append(&g->out, tmp, (size_t)n);
            return;
        }
        /* Too big to wait for the end: stream it with chunked framing. */
        g->streaming = 1;
        http_exchange_write(x, g->out.data + g->head_len, g->out.len - g->head_len);
        g->out.len = g->head_len;
    }
    http_exchange_write(x, tmp, (size_t)n);
    if (http_exchange_pending(x) > CGI_OUT_PAUSE) { /* a slow client: stop reading for a while */
        loop_io_set(l, io, 0);
        timer_start(l, &g->resume, 20);
    }
}

static void on_stderr(bk_loop *l, bk_io *io, unsigned events)
{
    cgi *g = io->udata;
    char tmp[4096];
    ssize_t n = read(io->fd, tmp, sizeof tmp);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_io(l, io);
        return;
    }
    if (g->err.len < 65536)
        buf_append(&g->err, tmp, (size_t)n);
    cgi_log_stderr(g, 0);
}

static void on_script_exit(bk_loop *l, bk_io *io, unsigned events)
{
    cgi *g = io->udata;
    siginfo_t si = { 0 };
    if (waitid((idtype_t)P_PIDFD, (id_t)io->fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
        return;
    g->exited = 1;
    if (si.si_code != CLD_EXITED && !g->timed_out && !g->aborted && !g->bad_head)
        log_error("cgi %s: killed by signal %d", g->name, si.si_status);
    else if (si.si_code == CLD_EXITED && si.si_status != 0)
        log_warn("cgi %s: exited with status %d", g->name, si.si_status);
    close_io(l, io);
    kill(-g->pid, SIGKILL); /* leftovers of its process group */
    timer_stop(l, &g->tm);
    maybe_free(g);
}

/* ---- environment ---- */

typedef struct {
    bk_buf strings;
    size_t offs[256];
    int n;
} envb;

static void env_add(envb *e, const char *name, const char *v, size_t vlen)
{
    if (e->n == (int)BK_ARRAY_LEN(e->offs) - 1)
        return;
    size_t nlen = strlen(name);
    if (buf_reserve(&e->strings, nlen + vlen + 2) < 0)
        return;
    e->offs[e->n++] = e->strings.len;
    buf_put(&e->strings, name, nlen);
    buf_put(&e->strings, "=", 1);
    buf_put(&e->strings, v, vlen);
    buf_put(&e->strings, "", 1);
}

static void env_adds(envb *e, const char *name, const char *v)
{
    env_add(e, name, v, strlen(v));
}

static int env_header(bk_str name, bk_str value, void *arg)
{
    envb *e = arg;
    char key[128] = "HTTP_";
    if (name.len + 6 > sizeof key)
        return 0;
    for (size_t i = 0; i < name.len; i++) {
        char ch = name.p[i];
        if (ch == '_')
            return 0; /* "X_Y" would pose as "X-Y": drop it (as nginx does) */
        key[5 + i] = ch == '-' ? '_' : (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
    }
    key[5 + name.len] = '\0';
    /* Their own variables; and HTTP_PROXY would let a request steer the
     * script's outgoing requests ("httpoxy"). */
    if (!strcmp(key, "HTTP_CONTENT_TYPE") || !strcmp(key, "HTTP_CONTENT_LENGTH") ||
        !strcmp(key, "HTTP_PROXY"))
        return 0;
    env_add(e, key, value.p, value.len);
    return 0;
}

static void build_env(envb *e, http_exchange *x, const http_request *r, const http_cgi_map *m,
                      const char *script, size_t script_len, bk_str path_info, const char *filename)
{
    char num[32];
    env_adds(e, "GATEWAY_INTERFACE", "CGI/1.1");
    env_adds(e, "SERVER_SOFTWARE", "brisk/" BRISK_VERSION);
    env_adds(e, "PATH", "/usr/local/bin:/usr/bin:/bin");

    struct sockaddr_storage local;
    socklen_t ll = sizeof local;
    char ip[64] = "";
    int port = 0;
    if (x->proto->local_addr(x, &local, &ll) == 0) {
        net_format_ip((struct sockaddr *)&local, ip, sizeof ip);
        port = net_port((struct sockaddr *)&local);
    }
    bk_str host = http_request_header(r, HH_HOST);
    if (host.len) {
        size_t hl = host.len;
        if (host.p[0] == '[') {
            const char *rb = memchr(host.p, ']', host.len);
            hl = rb ? (size_t)(rb - host.p) + 1 : host.len;
        } else {
            const char *colon = memchr(host.p, ':', host.len);
            if (colon)
                hl = (size_t)(colon - host.p);
        }
        env_add(e, "SERVER_NAME", host.p, hl);
    } else {
        env_adds(e, "SERVER_NAME", ip);
    }
    snprintf(num, sizeof num, "%d", port);
    env_adds(e, "SERVER_PORT", num);
    env_adds(e, "SERVER_PROTOCOL", r->version_major == 2 ? "HTTP/2.0"
                                   : r->version_minor  ? "HTTP/1.1"
                                                       : "HTTP/1.0");
    env_add(e, "REQUEST_METHOD", r->method_name.p, r->method_name.len);
    env_add(e, "REQUEST_URI", r->target.p, r->target.len);

    char sn[512];
    int n = snprintf(sn, sizeof sn, "%s%.*s", m->prefix, (int)script_len, script);
    env_add(e, "SCRIPT_NAME", sn, (size_t)BK_MIN(n, (int)sizeof sn - 1));
    env_adds(e, "SCRIPT_FILENAME", filename);
    env_add(e, "PATH_INFO", path_info.p, path_info.len);
    env_add(e, "QUERY_STRING", r->query.p, r->query.len);
    bk_str ct = http_parser_header(r->parser, r->head, BK_STR("content-type"));
    if (ct.p)
        env_add(e, "CONTENT_TYPE", ct.p, ct.len);
    if (r->parser->body_kind != HTTP_BODY_NONE) {
        snprintf(num, sizeof num, "%zu", r->body.len);
        env_adds(e, "CONTENT_LENGTH", num);
    }
    env_adds(e, "REMOTE_ADDR", http_exchange_remote_addr(x));
    snprintf(num, sizeof num, "%d", http_exchange_remote_port(x));
    env_adds(e, "REMOTE_PORT", num);
    http_exchange_headers(x, env_header, e);
}

/* ---- spawning ---- */

static int spawn(cgi *g, const char *path, char **envp, int fds[3][2])
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, fds[0][0], 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1][1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[2][1], 2);
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    /* Its own process group (so a timeout kills all of it), no signal
     * blocked and none ignored, whatever the server's threads have. */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    char *argv[] = { (char *)path, NULL };
    int rc = posix_spawn(&g->pid, path, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return -rc;
}

void http_cgi_handle(http_exchange *x, const http_request *r, const http_cgi_map *m,
                     const char *rel, size_t len)
{
    http_worker *hw = x->hw;
    /* The script is the first path segment after the prefix; the rest is
     * PATH_INFO. */
    size_t plen = strlen(m->prefix) - 1; /* "/cgi-bin/" -> "cgi-bin/" starts rel */
    if (len <= plen) {
        http_exchange_fail(x, 403); /* the directory itself */
        return;
    }
    const char *script = rel + plen;
    const char *slash = strchr(script, '/');
    size_t script_len = slash ? (size_t)(slash - script) : strlen(script);
    bk_str path_info = slash ? (bk_str){ slash, strlen(slash) } : BK_STR("");
    if (!script_len || script[0] == '.') {
        http_exchange_fail(x, 403);
        return;
    }
    char name[256];
    if (script_len >= sizeof name) {
        http_exchange_fail(x, 414);
        return;
    }
    memcpy(name, script, script_len);
    name[script_len] = '\0';

    int sfd = fs_open_beneath(m->dir_fd, name, O_PATH);
    struct stat st;
    if (sfd < 0) {
        http_exchange_fail(x, sfd == -ENOENT || sfd == -ENOTDIR ? 404 : 403);
        return;
    }
    int ok = fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) &&
             faccessat(sfd, "", X_OK, AT_EMPTY_PATH) == 0;
    close(sfd);
    if (!ok) {
        http_exchange_fail(x, 403); /* not a regular executable file */
        return;
    }
    if (hw->cgi_running >= x->conf->cgi_max_processes) {
        http_exchange_fail(x, 503);
        return;
    }
    char filename[PATH_MAX];
    snprintf(filename, sizeof filename, "%s/%s", m->dir, name);

    cgi *g = calloc(1, sizeof *g);
    if (!g) {
        http_exchange_fail(x, 500);
        return;
    }
    g->x = x;
    g->hw = hw;
    snprintf(g->name, sizeof g->name, "%s%s", m->prefix, name);
    g->in_io.fd = g->out_io.fd = g->err_io.fd = g->pid_io.fd = -1;
    int fds[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
    envb env = { 0 };
    char **envp = NULL;
    int rc = -1;
    for (int i = 0; i < 3; i++)
        if (pipe2(fds[i], O_CLOEXEC) < 0)
            goto fail;
    build_env(&env, x, r, m, name, script_len, path_info, filename);
    envp = calloc((size_t)env.n + 1, sizeof *envp);
    if (!envp || !env.strings.data)
        goto fail;
    for (int i = 0; i < env.n; i++)
        envp[i] = env.strings.data + env.offs[i];
    rc = spawn(g, filename, envp, fds);
    if (rc < 0) {
        log_error("cgi %s: cannot run: %s", g->name, strerror(-rc));
        goto fail;
    }
    hw->cgi_running++;
    g->next = hw->cgis;
    if (hw->cgis)
        hw->cgis->prev = g;
    hw->cgis = g;
    close(fds[0][0]);
    close(fds[1][1]);
    close(fds[2][1]);
    fds[0][0] = fds[1][1] = fds[2][1] = -1;

    bk_loop *l = &hw->w.loop;
    fcntl(fds[0][1], F_SETFL, O_NONBLOCK);
    fcntl(fds[1][0], F_SETFL, O_NONBLOCK);
    fcntl(fds[2][0], F_SETFL, O_NONBLOCK);
    g->body = r->body.p;
    g->body_len = r->body.len;
    if (g->body_len)
        loop_io_start(l, &g->in_io, fds[0][1], LOOP_WRITE, on_stdin, g);
    else
        close(fds[0][1]);
    loop_io_start(l, &g->out_io, fds[1][0], LOOP_READ, on_stdout, g);
    loop_io_start(l, &g->err_io, fds[2][0], LOOP_READ, on_stderr, g);
    int pidfd = (int)syscall(SYS_pidfd_open, g->pid, 0);
    timer_init(&g->tm, on_timeout, g);
    timer_init(&g->resume, out_pause_check, g);
    x->on_abort = on_abort;
    x->abort_arg = g;
    buf_free(&env.strings);
    free(envp);
    if (pidfd < 0 || loop_io_start(l, &g->pid_io, pidfd, LOOP_READ, on_script_exit, g) < 0) {
        log_error("cgi %s: pidfd_open: %s", g->name, strerror(errno));
        if (pidfd >= 0)
            close(pidfd);
        kill(-g->pid, SIGKILL);
        waitpid(g->pid, NULL, 0);
        g->exited = 1;
        g->timed_out = 1;
        cgi_respond(g);
        return;
    }
    timer_start(l, &g->tm, x->conf->cgi_timeout);
    return;
fail:
    for (int i = 0; i < 3; i++) {
        if (fds[i][0] >= 0)
            close(fds[i][0]);
        if (fds[i][1] >= 0)
            close(fds[i][1]);
    }
    buf_free(&env.strings);
    free(envp);
    free(g);
    http_exchange_fail(x, 500);
}

/* RFC 3875 6.2.2: the script named another local resource; serve it as a
 * GET for that path. */
static void local_redirect(http_exchange *x, const char *location)
{
    http_request r = x->req;
    size_t n = strlen(location);
    char *copy = http_exchange_alloc(x, n + 1);
    if (!copy || ++x->redirects > CGI_MAX_REDIRECTS) {
        log_error("cgi: too many local redirects (last to %s)", location);
        http_exchange_fail(x, 500);
        return;
    }
    memcpy(copy, location, n + 1);
    const char *q = strchr(copy, '?');
    r.target = (bk_str){ copy, n };
    r.path = (bk_str){ copy, q ? (size_t)(q - copy) : n };
    r.query = q ? (bk_str){ q + 1, n - r.path.len - 1 } : (bk_str){ copy + n, 0 };
    if (r.method != HTTP_HEAD) {
        r.method = HTTP_GET;
        r.method_name = BK_STR("GET");
    }
    r.body = BK_STR_NULL;
    x->req = r;
    http_exchange_restart(x);
    http_files_handle(x, NULL);
}
