#include "http/server.h"

#include "http/cgi.h"
#include "http/conn.h"
#include "http/status.h"

#include "core/workpool.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum { MSG_STOP, MSG_CONF, MSG_FLUSH_LOG };

/* Workers that flushed their access log buffers for a reopen (SIGUSR1). */
static atomic_int flushed_for_reopen;

#define ACCESS_LOG_BUF (64 * 1024)
#define BUFPOOL_MAX 1024

/* Holds every worker until all are set up, or until opened. */
struct start_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, target, open;
};

static void gate_wait(start_gate *g)
{
    pthread_mutex_lock(&g->mu);
    if (++g->arrived >= g->target)
        g->open = 1;
    if (g->open)
        pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(start_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static http_worker *worker_of(bk_loop *l)
{
    return BK_CONTAINER_OF((bk_worker *)l->udata, http_worker, w);
}

static void refresh_clock(bk_loop *l, void *udata)
{
    clock_cache_update(&worker_of(l)->w.clock);
}

static void end_iteration(bk_loop *l, void *udata)
{
    http_conn_reap(worker_of(l));
}

static void on_tick(bk_loop *l, bk_timer *t)
{
    http_worker *hw = t->udata;
    if (hw->access_on && hw->access.len)
        logbuf_flush(&hw->access);
    http_conn_tick(hw);
    timer_start(l, t, 1000);
}

static void on_deadline(bk_loop *l, bk_timer *t)
{
    http_worker *hw = t->udata;
    log_warn("worker %d: shutdown_timeout reached, closing %u connections", hw->w.id,
             hw->nconns);
    http_conn_close_all(hw);
    if (hw->nconns == 0 && hw->jobs == 0)
        loop_stop(l);
    else
        log_warn("worker %d: waiting for %u handlers to end their responses", hw->w.id,
                 hw->nconns);
}

static void use_conf(http_worker *hw, http_conf *conf)
{
    if (hw->access_on)
        logbuf_flush(&hw->access);
    if (hw->conf && hw->conf != conf) {
        http_conf_release(hw->conf); /* the first call passes the reference it already has */
        http_conn_conf_changed(hw);  /* (a reload) */
    }
    hw->conf = conf;
    loop_set_busy_poll(&hw->w.loop, conf->busy_poll_us);
    if (hw->files)
        fcache_clear(hw->files); /* entries name files under the old root */
    hw->access_on = conf->access_fd >= 0 && hw->access.data;
    hw->access.fd = conf->access_fd;
}

static void stop_worker(http_worker *hw)
{
    for (int i = 0; i < hw->nlisten; i++) {
        if (hw->listen_io[i].fd >= 0)
            loop_io_stop(&hw->w.loop, &hw->listen_io[i]);
        if (hw->listen_fd[i] >= 0)
            close(hw->listen_fd[i]);
        hw->listen_fd[i] = -1;
    }
    hw->stopping = 1;
    http_conn_close_idle(hw);
    if (hw->nconns == 0)
        loop_stop(&hw->w.loop);
    else
        timer_start(&hw->w.loop, &hw->deadline, hw->conf->shutdown_timeout);
}

static void on_msg(bk_worker *w, int type, void *arg)
{
    http_worker *hw = BK_CONTAINER_OF(w, http_worker, w);
    if (type == MSG_STOP && !hw->stopping)
        stop_worker(hw);
    else if (type == MSG_CONF)
        use_conf(hw, arg);
    else if (type == MSG_FLUSH_LOG) {
        if (hw->access_on)
            logbuf_flush(&hw->access);
        atomic_fetch_add(&flushed_for_reopen, 1);
    }
}

static void worker_run(bk_worker *w)
{
    http_worker *hw = BK_CONTAINER_OF(w, http_worker, w);
    bk_loop *l = &w->loop;
    l->before_dispatch = refresh_clock;
    l->on_iteration_end = end_iteration;

    hw->files = fcache_new(hw->conf->open_file_cache_max);
    hw->bufpool_cap = BUFPOOL_MAX;
    hw->bufpool = calloc(hw->bufpool_cap, sizeof *hw->bufpool);
    if (!hw->files || !hw->bufpool || logbuf_init(&hw->access, -1, ACCESS_LOG_BUF) < 0) {
        log_error("worker %d: out of memory", w->id);
        abort();
    }
    use_conf(hw, hw->conf);
    timer_init(&hw->tick, on_tick, hw);
    timer_init(&hw->deadline, on_deadline, hw);
    timer_start(l, &hw->tick, 1000);
    for (int i = 0; i < hw->nlisten; i++)
        if (loop_io_start(l, &hw->listen_io[i], hw->listen_fd[i], LOOP_READ, http_conn_accept,
                          hw) < 0)
            log_error("worker %d: cannot watch listener: %s", w->id, strerror(errno));
    hw->accepting = 1;
    if (hw->hook)
        hw->hook(hw, 1, hw->hook_udata);
    /* No worker serves before every worker is set up (hooks included). */
    gate_wait(hw->ready);

    int rc = loop_run(l);
    if (rc < 0)
        log_error("worker %d: event loop failed: %s", w->id, strerror(-rc));

    if (hw->hook)
        hw->hook(hw, 0, hw->hook_udata);
    http_conn_close_all(hw);
    http_cgi_shutdown(hw);
    http_conn_reap(hw);
    while (hw->free_conns) {
        http_conn *c = hw->free_conns;
        hw->free_conns = c->free_next;
        free(c);
    }
    for (int i = 0; i < hw->nlisten; i++)
        if (hw->listen_fd[i] >= 0)
            close(hw->listen_fd[i]);
    logbuf_free(&hw->access);
    fcache_free(hw->files);
    http_conn_release_pools(hw);
    free(hw->bufpool);
    http_conf_release(hw->conf);
    hw->conf = NULL;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int same_listen(const http_conf *a, const http_conf *b)
{
    if (a->nlisten != b->nlisten)
        return 0;
    for (int i = 0; i < a->nlisten; i++)
        if (strcmp(a->listen[i].text, b->listen[i].text) != 0 ||
            a->listen_tls[i] != b->listen_tls[i] || a->listen_h2c[i] != b->listen_h2c[i])
            return 0;
    return 1;
}

static int apply_logging(const http_conf *conf)
{
    log_set_level(conf->log_level);
    int rc = log_open(conf->error_log);
    if (rc < 0)
        log_error("error_log \"%s\": %s", conf->error_log, strerror(-rc));
    return rc;
}

/* Started as root with `user = NAME`: become that user once the listeners
 * are bound and the files opened, before any worker thread exists. */
static int drop_privileges(const http_conf *conf)
{
    if (geteuid() != 0) {
        if (conf->user[0])
            log_info("user \"%s\" ignored: not started as root", conf->user);
        return 0;
    }
    if (!conf->user[0]) {
        log_warn("running as root; set user = NAME to drop privileges");
        return 0;
    }
    struct passwd *pw = getpwnam(conf->user);
    if (!pw) {
        log_error("user \"%s\": no such user", conf->user);
        return -1;
    }
    if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
        setuid(pw->pw_uid) < 0) {
        log_error("cannot become user \"%s\": %s", conf->user, strerror(errno));
        return -1;
    }
    if (setuid(0) == 0) { /* must be impossible now */
        log_error("privileges could not be dropped");
        return -1;
    }
    log_info("running as user %s (uid %d)", pw->pw_name, (int)pw->pw_uid);
    return 0;
}

static void log_tls(const http_conf *conf, const char *what)
{
    char desc[256];
    if (!conf->tls)
        return;
    tls_ctx_describe(conf->tls, desc, sizeof desc);
    log_info("%s: %s", what, desc);
}

/* The listeners stay those of the start; the new generation's TLS context
 * (built with the old one's ticket keys) serves their new connections,
 * while open ones finish on the context they started with. */
static http_conf *reload(const http_cli *cli, http_conf *old, http_worker *hws, int n)
{
    char err[CONF_ERR_MAX];
    http_conf *conf = http_conf_reload(cli, old, err);
    if (!conf) {
        log_error("reload failed, keeping the running configuration: %s", err);
        return old;
    }
    if (n > 0 && hws[0].listen_tls && !conf->tls) {
        log_error("reload failed, keeping the running configuration: the ssl listeners need "
                  "ssl_certificate and ssl_certificate_key until a restart");
        http_conf_release(conf);
        return old;
    }
    if (!same_listen(old, conf))
        log_warn("reload: listen addresses changed; they take effect at restart");
    if (conf->workers != old->workers)
        log_warn("reload: workers changed; it takes effect at restart");
    apply_logging(conf);
    for (int i = 0; i < n; i++)
        worker_post(&hws[i].w, MSG_CONF, http_conf_retain(conf));
    http_conf_release(old);
    log_info("configuration reloaded");
    log_tls(conf, "TLS certificate");
    return conf;
}

void http_server_stop(void)
{
    kill(getpid(), SIGTERM); /* the main thread waits for it in sigwaitinfo */
}

/* Every request: the status endpoint when configured, else the app. */
static void serve(http_exchange *x, void *udata)
{
    const http_app *app = udata;
    /* The endpoint is off unless configured: test that before the call. */
    if (BK_UNLIKELY(x->conf->status[0]) && http_status_wanted(x))
        http_status_handle(x);
    else
        app->handler(x, app->udata);
}

int http_server_run(const http_cli *cli, const http_app *app)
{
    char err[CONF_ERR_MAX];
    http_conf *conf = http_conf_load(cli, err);
    if (!conf) {
        fprintf(stderr, "%s: %s\n", program_invocation_short_name, err);
        return 1;
    }
    if (apply_logging(conf) < 0) {
        http_conf_release(conf);
        return 1;
    }
    tzset();
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGQUIT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* workers inherit the mask */

    int n = conf->workers ? conf->workers : worker_cpu_count();
    http_worker *hws = calloc((size_t)n, sizeof *hws);
    if (!hws) {
        http_conf_release(conf);
        return 1;
    }
    uint32_t bufsize = BK_MAX(16384u, conf->limits.max_head_size + 4096u);
    int rc = 0, started = 0;
    start_gate ready = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
                         .target = n };
    /* Every address first: another server there must not be joined (and
     * overlapping addresses of this config must not fail this check). */
    for (int k = 0; k < conf->nlisten && rc == 0; k++) {
        int e = net_check_free(&conf->listen[k]);
        if (e < 0) {
            log_error("listen %s: %s", conf->listen[k].text, strerror(-e));
            rc = 1;
        }
    }
    for (int i = 0; i < n && rc == 0; i++) {
        http_worker *hw = &hws[i];
        hw->peers = hws;
        hw->ready = &ready;
        hw->handler = serve;
        hw->handler_udata = (void *)app;
        hw->census = http_conn_census;
        hw->hook = app->worker_hook;
        hw->hook_udata = app->hook_udata;
        hw->error_page = app->error_page;
        hw->error_udata = app->error_udata;
        hw->nworkers = n;
        hw->conf = http_conf_retain(conf);
        hw->buf_size = bufsize;
        hw->nlisten = conf->nlisten;
        for (int k = 0; k < conf->nlisten; k++) {
            hw->listen_io[k].fd = -1;
            if (conf->listen_tls[k])
                hw->listen_tls |= 1u << k;
            if (conf->listen_h2c[k])
                hw->listen_h2c |= 1u << k;
            hw->listen_fd[k] = net_listen(&conf->listen[k], 4096, NET_REUSEPORT | NET_DEFER_ACCEPT);
            if (hw->listen_fd[k] < 0) {
                log_error("listen %s: %s", conf->listen[k].text, strerror(-hw->listen_fd[k]));
                rc = 1;
                hw->nlisten = k;
                break;
            }
        }
    }
    if (rc == 0 && drop_privileges(conf) < 0)
        rc = 1;
    for (int i = 0; i < n && rc == 0; i++) {
        int e = worker_start(&hws[i].w, i, worker_run, on_msg, NULL);
        if (e < 0) {
            log_error("cannot start worker %d: %s", i, strerror(-e));
            rc = 1;
            break;
        }
        started++;
    }
    if (started < n)
        gate_open(&ready); /* release the workers waiting for the others */
    if (rc == 0) {
        char addrs[HTTP_MAX_LISTEN * 64] = "";
        for (int k = 0; k < conf->nlisten; k++) {
            strcat(addrs, k ? " " : "");
            strcat(addrs, conf->listen[k].text);
            strcat(addrs, conf->listen_tls[k] ? " (ssl)" : conf->listen_h2c[k] ? " (h2c)" : "");
        }
        log_info("%s %s started: %d worker%s, listening on %s%s%s%s%s",
                 cli->prog ? cli->prog : "brisk", BRISK_VERSION, n, n == 1 ? "" : "s", addrs,
                 conf->root[0] ? ", root " : "", conf->root, cli->what ? ", " : "",
                 cli->what ? cli->what : "");
        log_tls(conf, "TLS certificate");
    }

    while (rc == 0) {
        siginfo_t si;
        int sig = sigwaitinfo(&sigs, &si);
        if (sig < 0)
            continue;
        if (sig == SIGHUP) {
            conf = reload(cli, conf, hws, started);
        } else if (sig == SIGUSR1) {
            /* Lines buffered before the rotation belong to the old file:
             * let every worker flush first (bounded wait). */
            atomic_store(&flushed_for_reopen, 0);
            for (int i = 0; i < started; i++)
                worker_post(&hws[i].w, MSG_FLUSH_LOG, NULL);
            for (int t = 0; t < 200 && atomic_load(&flushed_for_reopen) < started; t++)
                usleep(5000);
            log_reopen();
            if (conf->access_fd >= 0 && strcmp(conf->access_log, "stderr") != 0)
                log_reopen_fd(conf->access_fd, conf->access_log);
            log_info("log files reopened");
        } else {
            log_info("received %s, stopping gracefully", strsignal(sig));
            break;
        }
    }

    for (int i = 0; i < started; i++)
        worker_post(&hws[i].w, MSG_STOP, NULL);
    for (int i = 0; i < started; i++)
        worker_join(&hws[i].w);
    for (int i = started; i < n; i++) { /* never started: close what they held */
        for (int k = 0; k < hws[i].nlisten; k++)
            close(hws[i].listen_fd[k]);
        http_conf_release(hws[i].conf);
    }
    free(hws);
    workpool_shutdown();
    if (rc == 0)
        log_info("stopped");
    http_conf_release(conf);
    log_close();
    return rc;
}
