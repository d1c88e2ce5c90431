#include "core/loop.h"

#include "core/clock.h"
#include "core/common.h"
#include "core/loop_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

static void wake_cb(bk_loop *l, bk_io *io, unsigned events)
{
    uint64_t v;
    while (read(io->fd, &v, sizeof v) > 0) {
    }
    if (l->on_wake)
        l->on_wake(l, l->udata);
}

int loop_init(bk_loop *l, int max_events)
{
    *l = (bk_loop){ .backend_fd = -1, .wake_fd = -1, .max_events = max_events };
    l->wake_io.fd = -1;
    int rc = backend_init(l);
    if (rc < 0)
        return rc;
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wake_fd < 0) {
        rc = -errno;
        backend_free(l);
        return rc;
    }
    rc = loop_io_start(l, &l->wake_io, l->wake_fd, LOOP_READ, wake_cb, NULL);
    if (rc < 0) {
        close(l->wake_fd);
        backend_free(l);
        return rc;
    }
    l->now_ms = clock_mono_ms();
    return 0;
}

void loop_free(bk_loop *l)
{
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    backend_free(l);
    free(l->heap);
    l->heap = NULL;
    l->heap_len = l->heap_cap = 0;
}

void loop_io_init(bk_io *io, int fd, bk_io_cb cb, void *udata)
{
    *io = (bk_io){ .fd = fd, .cb = cb, .udata = udata };
}

int loop_io_start(bk_loop *l, bk_io *io, int fd, unsigned mask, bk_io_cb cb, void *udata)
{
    loop_io_init(io, fd, cb, udata);
    int rc = backend_ctl(l, io, BACKEND_ADD, mask & (LOOP_READ | LOOP_WRITE));
    if (rc < 0) {
        io->fd = -1;
        return rc;
    }
    io->registered = 1;
    io->mask = mask & (LOOP_READ | LOOP_WRITE);
    return 0;
}

int loop_io_set(bk_loop *l, bk_io *io, unsigned mask)
{
    mask &= LOOP_READ | LOOP_WRITE;
    if (io->registered && mask == io->mask)
        return 0;
    /* An empty mask keeps the fd registered with no events, so the next
     * change is one syscall. */
    int rc = backend_ctl(l, io, io->registered ? BACKEND_MOD : BACKEND_ADD, mask);
    if (rc == 0) {
        io->mask = mask;
        io->registered = 1;
    }
    return rc;
}

void loop_io_stop(bk_loop *l, bk_io *io)
{
    if (io->fd < 0)
        return;
    if (io->registered)
        backend_ctl(l, io, BACKEND_DEL, 0);
    io->registered = 0;
    io->mask = 0;
    io->fd = -1;
}

void loop_io_forget(bk_loop *l, bk_io *io)
{
    io->registered = 0;
    io->mask = 0;
    io->fd = -1;
}

/* ---- timers: a binary min-heap on `when` ---- */

static void heap_swap(bk_loop *l, uint32_t a, uint32_t b)
{
    bk_timer *t = l->heap[a];
    l->heap[a] = l->heap[b];
    l->heap[b] = t;
    l->heap[a]->idx = a + 1;
    l->heap[b]->idx = b + 1;
}

static void sift_up(bk_loop *l, uint32_t i)
{
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (l->heap[p]->when <= l->heap[i]->when)
            break;
        heap_swap(l, i, p);
        i = p;
    }
}

static void sift_down(bk_loop *l, uint32_t i)
{
    for (;;) {
        uint32_t c = 2 * i + 1, m = i;
        if (c < l->heap_len && l->heap[c]->when < l->heap[m]->when)
            m = c;
        if (c + 1 < l->heap_len && l->heap[c + 1]->when < l->heap[m]->when)
            m = c + 1;
        if (m == i)
            break;
        heap_swap(l, i, m);
        i = m;
    }
}

void timer_init(bk_timer *t, bk_timer_cb cb, void *udata)
{
    *t = (bk_timer){ .cb = cb, .udata = udata };
}

void timer_start(bk_loop *l, bk_timer *t, uint64_t after_ms)
{
    uint64_t deadline = l->now_ms + after_ms;
    if (t->idx) {
        t->deadline = deadline;
        if (deadline < t->when) {
            t->when = deadline;
            sift_up(l, t->idx - 1);
        }
        return;
    }
    if (l->heap_len == l->heap_cap) {
        uint32_t cap = l->heap_cap ? l->heap_cap * 2 : 64;
        bk_timer **h = realloc(l->heap, cap * sizeof *h);
        if (!h)
            abort(); /* a server binary may stop on OOM */
        l->heap = h;
        l->heap_cap = cap;
    }
    t->when = t->deadline = deadline;
    l->heap[l->heap_len] = t;
    t->idx = ++l->heap_len;
    sift_up(l, l->heap_len - 1);
}

void timer_stop(bk_loop *l, bk_timer *t)
{
    if (!t->idx)
        return;
    uint32_t i = t->idx - 1;
    l->heap_len--;
    if (i != l->heap_len) {
        l->heap[i] = l->heap[l->heap_len];
        l->heap[i]->idx = i + 1;
        sift_down(l, i);
        sift_up(l, i);
    }
    t->idx = 0;
}

static void run_timers(bk_loop *l)
{
    while (l->heap_len && l->heap[0]->when <= l->now_ms) {
        bk_timer *t = l->heap[0];
        if (t->deadline > l->now_ms) { /* extended lazily: re-key it */
            t->when = t->deadline;
            sift_down(l, 0);
            continue;
        }
        timer_stop(l, t);
        t->cb(l, t);
    }
}

static int next_timeout(bk_loop *l)
{
    if (!l->heap_len)
        return -1;
    uint64_t when = l->heap[0]->when;
    if (when <= l->now_ms)
        return 0;
    uint64_t d = when - l->now_ms;
    return d > 60000 ? 60000 : (int)d;
}

void loop_set_busy_poll(bk_loop *l, unsigned us)
{
    l->busy_poll_us = us;
    l->busy = 0;
}

/* Whether other threads wait for this one's CPU: more than
 * LOOP_CONTENDED_SWITCHES preemptions per LOOP_CONTENTION_MS since the last
 * look (one getrusage per look). Once they do, the next look is
 * LOOP_CONTENTION_BACKOFF_MS later: a loop that stops spinning is preempted
 * less, and looking again at once would start it again. */
static int cpu_contended(bk_loop *l)
{
    if (l->now_ms < l->contention_check_ms)
        return l->contended;
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) {
        uint64_t span = l->now_ms - l->contention_check_ms + l->contention_span_ms;
        l->contended = (uint64_t)(ru.ru_nivcsw - l->nivcsw) * LOOP_CONTENTION_MS >
                       (uint64_t)LOOP_CONTENDED_SWITCHES * BK_MAX(span, 1);
        l->nivcsw = ru.ru_nivcsw;
    }
    l->contention_span_ms = l->contended ? LOOP_CONTENTION_BACKOFF_MS : LOOP_CONTENTION_MS;
    l->contention_check_ms = l->now_ms + l->contention_span_ms;
    return l->contended;
}

/* Waits for events. With busy polling on, the last idle period short (under
 * twice busy_poll_us: events keep coming) and the CPU not shared, it first
 * looks for up to busy_poll_us without sleeping: a loop that is awake when
 * the next request arrives spares the sender the cost of waking it (an
 * inter-processor interrupt, and on a virtual machine an exit to the
 * hypervisor), and the request its wake-up latency. A spin that finds
 * nothing ends in a sleep, and that long idle period stops the spinning
 * until a short one comes again: a loop whose events are further apart than
 * the spin (an idle or lightly loaded server) sleeps at once. */
static int wait_events(bk_loop *l, int timeout_ms)
{
    if (timeout_ms == 0 || !l->busy_poll_us)
        return backend_wait(l, timeout_ms);
    uint64_t t0 = clock_mono_us(), now = t0;
    if (l->busy && !cpu_contended(l)) {
        /* Not past the next timer, and the sleep after is shorter by the
         * time spun (rounded down: a timer never fires early). */
        uint64_t spin = l->busy_poll_us;
        if (timeout_ms > 0 && (uint64_t)timeout_ms * 1000u < spin)
            spin = (uint64_t)timeout_ms * 1000u;
        do {
            int n = backend_wait(l, 0);
            if (n != 0)
                return n; /* still busy */
            now = clock_mono_us();
        } while (now - t0 < spin);
        if (timeout_ms > 0)
            timeout_ms -= (int)BK_MIN((uint64_t)timeout_ms, (now - t0) / 1000u);
        if (timeout_ms == 0)
            return 0; /* a timer is due */
    }
    int n = backend_wait(l, timeout_ms);
    l->busy = clock_mono_us() - t0 < 2u * l->busy_poll_us;
    return n;
}

int loop_run(bk_loop *l)
{
    while (!l->stopping) {
        int n = wait_events(l, next_timeout(l));
        if (n < 0)
            return n;
        l->now_ms = clock_mono_ms();
        if (l->before_dispatch)
            l->before_dispatch(l, l->udata);
        backend_dispatch(l, n);
        l->now_ms = clock_mono_ms();
        run_timers(l);
        if (l->on_iteration_end)
            l->on_iteration_end(l, l->udata);
    }
    return 0;
}

void loop_stop(bk_loop *l)
{
    l->stopping = 1;
}

void loop_wake(bk_loop *l)
{
    uint64_t one = 1;
    ssize_t n = write(l->wake_fd, &one, sizeof one);
    (void)n; /* EAGAIN means a wakeup is already pending */
}
