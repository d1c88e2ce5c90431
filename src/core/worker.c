#include "core/worker.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

struct bk_worker_msg {
    bk_worker_msg *next;
    int type; /* WORKER_CALL or the owner's type */
    void *arg;
    void (*fn)(void *arg);
};

#define WORKER_CALL (-1)

static void drain_mailbox(bk_loop *l, void *udata)
{
    bk_worker *w = udata;
    pthread_mutex_lock(&w->mu);
    bk_worker_msg *m = w->head;
    w->head = w->tail = NULL;
    pthread_mutex_unlock(&w->mu);
    while (m) {
        bk_worker_msg *next = m->next;
        if (m->type == WORKER_CALL)
            m->fn(m->arg);
        else if (w->on_msg)
            w->on_msg(w, m->type, m->arg);
        free(m);
        m = next;
    }
}

static void *thread_main(void *arg)
{
    bk_worker *w = arg;
    w->run(w);
    return NULL;
}

int worker_start(bk_worker *w, int id, void (*run)(bk_worker *), bk_worker_msg_cb on_msg, void *udata)
{
    w->id = id;
    w->run = run;
    w->on_msg = on_msg;
    w->udata = udata;
    w->head = w->tail = NULL;
    w->clock.sec = 0;
    clock_cache_update(&w->clock);
    pthread_mutex_init(&w->mu, NULL);
    int rc = loop_init(&w->loop, 512);
    if (rc < 0)
        return rc;
    w->loop.on_wake = drain_mailbox;
    w->loop.udata = w;
    rc = pthread_create(&w->thread, NULL, thread_main, w);
    if (rc != 0) {
        loop_free(&w->loop);
        return -rc;
    }
    return 0;
}

static int post(bk_worker *w, int type, void (*fn)(void *), void *arg)
{
    bk_worker_msg *m = malloc(sizeof *m);
    if (!m)
        return -ENOMEM;
    *m = (bk_worker_msg){ .type = type, .arg = arg, .fn = fn };
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = m;
    else
        w->head = m;
    w->tail = m;
    pthread_mutex_unlock(&w->mu);
    loop_wake(&w->loop);
    return 0;
}

int worker_post(bk_worker *w, int type, void *arg)
{
    return post(w, type, NULL, arg);
}

int worker_call(bk_worker *w, void (*fn)(void *arg), void *arg)
{
    return post(w, WORKER_CALL, fn, arg);
}

void worker_join(bk_worker *w)
{
    pthread_join(w->thread, NULL);
    drain_mailbox(&w->loop, w); /* free anything posted after the loop ended */
    loop_free(&w->loop);
    pthread_mutex_destroy(&w->mu);
}

int worker_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    return 1;
}
