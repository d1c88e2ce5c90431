/* The public API's worker loop: per-worker data, fd watchers and timers
 * over core/loop.c. */
#include "http/api.h"

#include <stdlib.h>

int brisk_loop_id(brisk_loop *l) { return LOOP(l)->w.id; }
int brisk_loop_workers(brisk_loop *l) { return LOOP(l)->nworkers; }

void brisk_loop_set_data(brisk_loop *l, void *data) { LOOP(l)->app_data = data; }
void *brisk_loop_data(brisk_loop *l) { return LOOP(l)->app_data; }
uint64_t brisk_loop_now(brisk_loop *l) { return LOOP(l)->w.loop.now_ms; }

struct brisk_io {
    void *deferred_next; /* first: the worker's deferred-free list */
    bk_io io;
    http_worker *hw;
    brisk_io_cb cb;
    void *udata;
};

static void io_cb(bk_loop *l, bk_io *lio, unsigned events)
{
    brisk_io *io = lio->udata;
    unsigned e = 0;
    if (events & (LOOP_READ | LOOP_HUP | LOOP_ERR))
        e |= BRISK_READ;
    if (events & (LOOP_WRITE | LOOP_ERR))
        e |= BRISK_WRITE;
    io->cb(io, e, io->udata);
}

static unsigned to_loop(unsigned events)
{
    return ((events & BRISK_READ) ? LOOP_READ : 0) | ((events & BRISK_WRITE) ? LOOP_WRITE : 0);
}

brisk_io *brisk_io_new(brisk_loop *l, int fd, unsigned events, brisk_io_cb cb, void *udata)
{
    brisk_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->hw = LOOP(l);
    io->cb = cb;
    io->udata = udata;
    if (loop_io_start(&io->hw->w.loop, &io->io, fd, to_loop(events), io_cb, io) < 0) {
        free(io);
        return NULL;
    }
    return io;
}

int brisk_io_set(brisk_io *io, unsigned events)
{
    return loop_io_set(&io->hw->w.loop, &io->io, to_loop(events)) < 0 ? -1 : 0;
}

void brisk_io_free(brisk_io *io)
{
    if (!io)
        return;
    loop_io_stop(&io->hw->w.loop, &io->io);
    /* An event for it may still be in this batch: free after it. */
    io->deferred_next = io->hw->deferred;
    io->hw->deferred = io;
}

struct brisk_timer {
    bk_timer t;
    http_worker *hw;
    brisk_timer_cb cb;
    void *udata;
};

static void timer_fire(bk_loop *l, bk_timer *t)
{
    brisk_timer *bt = t->udata;
    bt->cb(bt, bt->udata);
}

brisk_timer *brisk_timer_new(brisk_loop *l, brisk_timer_cb cb, void *udata)
{
    brisk_timer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->hw = LOOP(l);
    t->cb = cb;
    t->udata = udata;
    timer_init(&t->t, timer_fire, t);
    return t;
}

void brisk_timer_start(brisk_timer *t, uint64_t ms) { timer_start(&t->hw->w.loop, &t->t, ms); }
void brisk_timer_stop(brisk_timer *t) { timer_stop(&t->hw->w.loop, &t->t); }

void brisk_timer_free(brisk_timer *t)
{
    if (!t)
        return;
    timer_stop(&t->hw->w.loop, &t->t);
    free(t);
}

