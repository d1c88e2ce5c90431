/* Unit tests for the loop's timers (src/core/loop.c).
 *
 * The heap is checked directly through the public struct loop fields (heap,
 * heap_len) after timer_start / timer_stop, with now_ms set by hand. Firing
 * goes through a real loop_run with delays of a few milliseconds: run_timers
 * is static and loop_run refreshes now_ms from the monotonic clock, so time
 * cannot be faked there. */
#include "core/clock.h"
#include "core/common.h"
#include "core/loop.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static int setup_loop(void **state)
{
    bk_loop *l = calloc(1, sizeof *l);
    if (!l || loop_init(l, 64) < 0) {
        free(l);
        return -1;
    }
    *state = l;
    return 0;
}

static int teardown_loop(void **state)
{
    bk_loop *l = *state;
    loop_free(l);
    free(l);
    return 0;
}

/* The heap invariant: positions are recorded, parents are not later. */
static void check_heap(const bk_loop *l)
{
    for (uint32_t i = 0; i < l->heap_len; i++) {
        assert_non_null(l->heap[i]);
        if (l->heap[i]->idx != i + 1)
            fail_msg("heap[%u]->idx = %u", i, l->heap[i]->idx);
        assert_true(l->heap[i]->when <= l->heap[i]->deadline);
        if (i > 0 && l->heap[(i - 1) / 2]->when > l->heap[i]->when)
            fail_msg("heap[%u].when %llu < parent %llu", i,
                     (unsigned long long)l->heap[i]->when,
                     (unsigned long long)l->heap[(i - 1) / 2]->when);
    }
}

static void no_cb(bk_loop *l, bk_timer *t)
{
    (void)l;
    (void)t;
    fail_msg("a timer fired in a test that never runs the loop");
}

/* Empties the heap by repeatedly stopping the top, the order a run would
 * pop them in (by heap key). */
static size_t drain(bk_loop *l, bk_timer **order, size_t cap)
{
    size_t n = 0;
    while (l->heap_len) {
        bk_timer *t = l->heap[0];
        assert_true(n < cap);
        order[n++] = t;
        timer_stop(l, t);
        assert_false(timer_active(t));
        check_heap(l);
    }
    return n;
}

/* ---- heap, without running ---- */

static void test_timer_start_stop(void **state)
{
    bk_loop *l = *state;
    l->now_ms = 1000;
    bk_timer a, b;
    timer_init(&a, no_cb, &a);
    timer_init(&b, no_cb, NULL);
    assert_false(timer_active(&a));
    assert_ptr_equal(a.udata, &a);

    timer_start(l, &a, 50);
    assert_true(timer_active(&a));
    assert_int_equal(a.when, 1050);
    assert_int_equal(a.deadline, 1050);
    assert_int_equal(l->heap_len, 1);
    assert_ptr_equal(l->heap[0], &a);

    timer_start(l, &b, 10);
    assert_int_equal(l->heap_len, 2);
    assert_ptr_equal(l->heap[0], &b);
    check_heap(l);

    timer_stop(l, &b);
    assert_false(timer_active(&b));
    assert_int_equal(l->heap_len, 1);
    assert_ptr_equal(l->heap[0], &a);
    timer_stop(l, &b); /* stopping an inactive timer is a no-op */
    assert_int_equal(l->heap_len, 1);

    timer_stop(l, &a);
    assert_int_equal(l->heap_len, 0);
    assert_false(timer_active(&a));

    /* Restart after stop. */
    timer_start(l, &a, 0);
    assert_true(timer_active(&a));
    assert_int_equal(a.when, 1000);
    timer_stop(l, &a);
}

static void test_timer_extend_is_lazy(void **state)
{
    bk_loop *l = *state;
    l->now_ms = 5000;
    bk_timer a, b;
    timer_init(&a, no_cb, NULL);
    timer_init(&b, no_cb, NULL);
    timer_start(l, &a, 10);
    timer_start(l, &b, 20);
    assert_ptr_equal(l->heap[0], &a);

    /* Later: only the deadline moves; the heap key stays. */
    timer_start(l, &a, 100);
    assert_int_equal(a.deadline, 5100);
    assert_int_equal(a.when, 5010);
    assert_ptr_equal(l->heap[0], &a);
    assert_int_equal(l->heap_len, 2);
    check_heap(l);

    /* Earlier than the key: the key follows and the heap is fixed. */
    timer_start(l, &a, 5);
    assert_int_equal(a.deadline, 5005);
    assert_int_equal(a.when, 5005);
    check_heap(l);

    /* Extended then shortened to between key and old deadline. */
    timer_start(l, &a, 200);
    timer_start(l, &a, 50);
    assert_int_equal(a.deadline, 5050);
    assert_int_equal(a.when, 5005);
    check_heap(l);

    timer_stop(l, &a);
    timer_stop(l, &b);
}

static void test_timer_shorten_moves_to_top(void **state)
{
    bk_loop *l = *state;
    l->now_ms = 0;
    bk_timer t[16];
    for (int i = 0; i < 16; i++) {
        timer_init(&t[i], no_cb, NULL);
        timer_start(l, &t[i], 100 + (uint64_t)i * 10);
    }
    check_heap(l);
    assert_ptr_equal(l->heap[0], &t[0]);
    timer_start(l, &t[15], 1); /* the last becomes the first */
    assert_ptr_equal(l->heap[0], &t[15]);
    assert_int_equal(t[15].when, 1);
    check_heap(l);
    bk_timer *order[16];
    assert_int_equal(drain(l, order, 16), 16);
    assert_ptr_equal(order[0], &t[15]);
    for (int i = 1; i < 16; i++)
        assert_ptr_equal(order[i], &t[i - 1]);
}

static void test_timer_stop_in_middle(void **state)
{
    bk_loop *l = *state;
    l->now_ms = 0;
    enum { N = 31 };
    bk_timer t[N];
    for (int i = 0; i < N; i++) {
        timer_init(&t[i], no_cb, NULL);
        /* 0, 17, 34, ... mod 31: a scrambled start order, distinct keys */
        timer_start(l, &t[i], (uint64_t)((i * 17) % N) * 3 + 1);
    }
    check_heap(l);
    /* Stop interior nodes, a leaf, and the top. */
    int stopped[] = { 5, 12, 30, 0, 20 };
    for (size_t k = 0; k < BK_ARRAY_LEN(stopped); k++) {
        timer_stop(l, &t[stopped[k]]);
        assert_false(timer_active(&t[stopped[k]]));
        check_heap(l);
    }
    assert_int_equal(l->heap_len, N - BK_ARRAY_LEN(stopped));
    bk_timer *order[N];
    size_t n = drain(l, order, N);
    assert_int_equal(n, N - BK_ARRAY_LEN(stopped));
    for (size_t i = 1; i < n; i++)
        assert_true(order[i - 1]->when < order[i]->when);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < BK_ARRAY_LEN(stopped); k++)
            assert_ptr_not_equal(order[i], &t[stopped[k]]);
}

static void test_timer_many_random(void **state)
{
    bk_loop *l = *state;
    l->now_ms = 777;
    enum { N = 1000 };
    bk_timer *t = calloc(N, sizeof *t);
    bk_timer **order = calloc(N, sizeof *order);
    assert_non_null(t);
    assert_non_null(order);
    uint32_t x = 2463534242u;
    for (int i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        timer_init(&t[i], no_cb, NULL);
        timer_start(l, &t[i], x % 5000); /* duplicates on purpose */
    }
    check_heap(l);
    assert_int_equal(l->heap_len, N);
    /* Restart a third of them, some later (lazy), some earlier. */
    for (int i = 0; i < N; i += 3) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        timer_start(l, &t[i], x % 5000);
    }
    check_heap(l);
    /* And stop a fifth. */
    for (int i = 1; i < N; i += 5)
        timer_stop(l, &t[i]);
    check_heap(l);
    size_t n = drain(l, order, N);
    assert_int_equal(n, N - N / 5);
    for (size_t i = 1; i < n; i++)
        assert_true(order[i - 1]->when <= order[i]->when);
    free(order);
    free(t);
}

/* ---- firing, with a real loop ---- */

typedef struct rec_timer {
    bk_timer t;
    int id;
    uint64_t started;  /* l->now_ms at the last timer_start */
    uint64_t fired_at; /* l->now_ms in the callback */
    uint64_t deadline; /* t->deadline in the callback */
    int fired;
    struct rec_timer *other; /* for callbacks that act on another timer */
} rec_timer;

typedef struct {
    rec_timer *order[256];
    size_t n;
    size_t stop_after;
    int timed_out;
} run_log;

static void rec_cb(bk_loop *l, bk_timer *t)
{
    rec_timer *r = BK_CONTAINER_OF(t, rec_timer, t);
    run_log *lg = t->udata;
    assert_false(timer_active(t)); /* stopped before its callback */
    r->fired_at = l->now_ms;
    r->deadline = t->deadline;
    r->fired++;
    assert_true(lg->n < BK_ARRAY_LEN(lg->order));
    lg->order[lg->n++] = r;
    if (lg->n == lg->stop_after)
        loop_stop(l);
}

static void guard_cb(bk_loop *l, bk_timer *t)
{
    run_log *lg = t->udata;
    lg->timed_out = 1;
    loop_stop(l);
}

static void rec_init(rec_timer *r, int id, run_log *lg, bk_timer_cb cb)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    timer_init(&r->t, cb ? cb : rec_cb, lg);
}

static void rec_start(bk_loop *l, rec_timer *r, uint64_t ms)
{
    r->started = l->now_ms;
    timer_start(l, &r->t, ms);
}

/* Runs the loop until lg->stop_after callbacks ran (or 3 s passed). */
static void run(bk_loop *l, run_log *lg)
{
    bk_timer guard;
    timer_init(&guard, guard_cb, lg);
    timer_start(l, &guard, 3000);
    l->stopping = 0;
    assert_int_equal(loop_run(l), 0);
    timer_stop(l, &guard);
    if (lg->timed_out)
        fail_msg("the loop ran 3 s; %zu of %zu callbacks ran", lg->n, lg->stop_after);
}

static void check_fired(const rec_timer *r)
{
    assert_int_equal(r->fired, 1);
    if (r->fired_at < r->deadline)
        fail_msg("timer %d fired early: now %llu < deadline %llu", r->id,
                 (unsigned long long)r->fired_at, (unsigned long long)r->deadline);
}

/* Fired in deadline order. One exception is allowed: when the loop is late
 * (a stalled test machine), timers that were all overdue in the same pass
 * may run in heap-key order, and a lazily extended timer keeps its earlier
 * key until it reaches the top. So an inversion is accepted only between two
 * timers that fired in the same pass and were both already due. */
static void check_order(const run_log *lg)
{
    for (size_t i = 1; i < lg->n; i++) {
        const rec_timer *p = lg->order[i - 1], *q = lg->order[i];
        if (p->deadline <= q->deadline)
            continue;
        if (p->fired_at == q->fired_at && q->deadline <= p->fired_at)
            continue;
        fail_msg("timer %d (deadline %llu) fired after timer %d (deadline %llu)", q->id,
                 (unsigned long long)q->deadline, p->id, (unsigned long long)p->deadline);
    }
}

static void test_timer_fire_order(void **state)
{
    bk_loop *l = *state;
    run_log lg = { .stop_after = 7 };
    rec_timer b, t10, t20, a, t40, c, t60, last;
    rec_init(&b, 1, &lg, NULL);
    rec_init(&t10, 2, &lg, NULL);
    rec_init(&t20, 3, &lg, NULL);
    rec_init(&a, 4, &lg, NULL);
    rec_init(&t40, 5, &lg, NULL);
    rec_init(&c, 6, &lg, NULL);
    rec_init(&t60, 7, &lg, NULL);
    rec_init(&last, 8, &lg, NULL);

    l->now_ms = clock_mono_ms();
    uint64_t base = l->now_ms;
    rec_start(l, &b, 120);
    rec_start(l, &b, 1);   /* shortened */
    rec_start(l, &t10, 10);
    rec_start(l, &t20, 20);
    rec_start(l, &a, 30);
    rec_start(l, &a, 80);  /* extended lazily: must not fire at 30 */
    rec_start(l, &t40, 40);
    rec_start(l, &c, 50);
    rec_start(l, &t60, 60);
    rec_start(l, &last, 100);
    timer_stop(l, &c.t);   /* stopped in the middle of the heap */
    check_heap(l);

    run(l, &lg);
    const rec_timer *want[] = { &b, &t10, &t20, &t40, &t60, &a, &last };
    assert_int_equal(lg.n, BK_ARRAY_LEN(want));
    for (size_t i = 0; i < BK_ARRAY_LEN(want); i++)
        check_fired(want[i]);
    check_order(&lg);
    assert_int_equal(b.deadline, base + 1);
    assert_int_equal(t10.deadline, base + 10);
    assert_int_equal(a.deadline, base + 80);
    assert_true(a.fired_at >= base + 80);
    assert_int_equal(c.fired, 0);
    assert_false(timer_active(&c.t));
    assert_int_equal(l->heap_len, 0);
}

static void test_timer_fire_many_random(void **state)
{
    bk_loop *l = *state;
    enum { N = 40 };
    run_log lg = { .stop_after = N };
    rec_timer r[N];
    uint64_t delay[N];
    for (int i = 0; i < N; i++)
        delay[i] = (uint64_t)i + 1;
    uint32_t x = 12345;
    for (int i = N - 1; i > 0; i--) { /* Fisher-Yates with a fixed seed */
        x = x * 1103515245u + 12345u;
        int j = (int)((x >> 16) % (uint32_t)(i + 1));
        uint64_t tmp = delay[i];
        delay[i] = delay[j];
        delay[j] = tmp;
    }
    l->now_ms = clock_mono_ms();
    for (int i = 0; i < N; i++) {
        rec_init(&r[i], i, &lg, NULL);
        rec_start(l, &r[i], delay[i]);
    }
    /* Push a quarter of them later, lazily: 41..80 stay distinct. */
    for (int i = 0; i < N; i += 4) {
        delay[i] += N;
        timer_start(l, &r[i].t, delay[i]);
    }
    check_heap(l);

    run(l, &lg);
    assert_int_equal(lg.n, N);
    for (size_t i = 0; i < lg.n; i++)
        check_fired(lg.order[i]);
    check_order(&lg);
    for (int i = 0; i < N; i++)
        assert_int_equal(r[i].deadline, r[i].started + delay[i]);
}

/* A callback may restart its own timer. */
static void rearm_cb(bk_loop *l, bk_timer *t)
{
    rec_timer *r = BK_CONTAINER_OF(t, rec_timer, t);
    run_log *lg = t->udata;
    r->fired++;
    lg->order[lg->n++] = r;
    if (r->fired < 5)
        timer_start(l, t, 1);
    else
        loop_stop(l);
}

static void test_timer_rearm_from_callback(void **state)
{
    bk_loop *l = *state;
    run_log lg = { .stop_after = 0 };
    rec_timer r;
    rec_init(&r, 1, &lg, rearm_cb);
    l->now_ms = clock_mono_ms();
    rec_start(l, &r, 1);
    run(l, &lg);
    assert_int_equal(r.fired, 5);
    assert_false(timer_active(&r.t));
}

/* A callback may stop another timer due at the same time: it then does not
 * fire. */
static void stop_other_cb(bk_loop *l, bk_timer *t)
{
    rec_timer *r = BK_CONTAINER_OF(t, rec_timer, t);
    timer_stop(l, &r->other->t);
    rec_cb(l, t);
}

/* A callback may start another timer with no delay. */
static void start_other_cb(bk_loop *l, bk_timer *t)
{
    rec_timer *r = BK_CONTAINER_OF(t, rec_timer, t);
    rec_start(l, r->other, 0);
    rec_cb(l, t);
}

static void test_timer_callbacks_change_heap(void **state)
{
    bk_loop *l = *state;
    run_log lg = { .stop_after = 4 };
    rec_timer x, y, s, z, last;
    rec_init(&x, 1, &lg, stop_other_cb);
    rec_init(&y, 2, &lg, stop_other_cb);
    rec_init(&s, 3, &lg, start_other_cb);
    rec_init(&z, 4, &lg, NULL);
    rec_init(&last, 5, &lg, NULL);
    x.other = &y;
    y.other = &x;
    s.other = &z;
    l->now_ms = clock_mono_ms();
    rec_start(l, &x, 5);
    rec_start(l, &y, 5);
    rec_start(l, &s, 10);
    rec_start(l, &last, 200);
    run(l, &lg);
    assert_int_equal(lg.n, 4);
    assert_int_equal(x.fired + y.fired, 1); /* whichever ran first stopped the other */
    assert_false(timer_active(&x.t));
    assert_false(timer_active(&y.t));
    assert_ptr_equal(lg.order[1], &s);
    assert_ptr_equal(lg.order[2], &z);
    assert_ptr_equal(lg.order[3], &last);
    check_fired(&z);
}

/* Busy polling: events written by another thread every 200 us keep the
 * loop "busy" (its sleeps are short), so it spins between them; every event
 * is still dispatched and a timer due meanwhile still fires, not early. */
typedef struct {
    int wfd;
    int count;
} feeder;

static void *feed(void *arg)
{
    feeder *f = arg;
    for (int i = 0; i < f->count; i++) {
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
        ssize_t w = write(f->wfd, "x", 1);
        assert_int_equal(w, 1);
    }
    return NULL;
}

typedef struct {
    int got, want, saw_busy, saw_contended;
} pipe_log;

static void pipe_cb(bk_loop *l, bk_io *io, unsigned events)
{
    pipe_log *pl = io->udata;
    char b[64];
    ssize_t n = read(io->fd, b, sizeof b);
    assert_true(n > 0);
    pl->got += (int)n;
    pl->saw_busy |= l->busy;
    pl->saw_contended |= l->contended;
    if (pl->got == pl->want)
        loop_stop(l);
}

static void test_busy_poll(void **state)
{
    bk_loop *l = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    loop_set_busy_poll(l, 500);
    pipe_log pl = { .want = 200 };
    bk_io io;
    assert_int_equal(loop_io_start(l, &io, p[0], LOOP_READ, pipe_cb, &pl), 0);
    run_log lg = { .stop_after = 1000 };
    rec_timer r;
    rec_init(&r, 1, &lg, NULL);
    rec_start(l, &r, 5);
    feeder f = { p[1], pl.want };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, feed, &f), 0);
    l->stopping = 0;
    assert_int_equal(loop_run(l), 0);
    pthread_join(th, NULL);
    assert_int_equal(pl.got, pl.want);
    assert_true(pl.saw_busy);
    check_fired(&r);
    loop_io_stop(l, &io);
    close(p[0]);
    close(p[1]);
    loop_set_busy_poll(l, 0);
}

static void *hog(void *arg)
{
    const volatile int *stop = arg;
    while (!*stop) {
    }
    return NULL;
}

/* A loop that shares its CPU with a thread that wants all of it stops
 * spinning (the other thread gets the time back). */
static void test_busy_poll_yields_shared_cpu(void **state)
{
    bk_loop *l = *state;
    cpu_set_t old, one;
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof old, &old), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    volatile int stop = 0;
    pthread_attr_t a;
    pthread_attr_init(&a);
    assert_int_equal(pthread_attr_setaffinity_np(&a, sizeof one, &one), 0);
    pthread_t h;
    assert_int_equal(pthread_create(&h, &a, hog, (void *)&stop), 0);
    pthread_attr_destroy(&a);

    int p[2];
    assert_int_equal(pipe(p), 0);
    loop_set_busy_poll(l, 500);
    pipe_log pl = { .want = 1500 };
    bk_io io;
    assert_int_equal(loop_io_start(l, &io, p[0], LOOP_READ, pipe_cb, &pl), 0);
    feeder f = { p[1], pl.want };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, feed, &f), 0);
    l->stopping = 0;
    assert_int_equal(loop_run(l), 0);
    pthread_join(th, NULL);
    stop = 1;
    pthread_join(h, NULL);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof old, &old), 0);
    assert_int_equal(pl.got, pl.want);
    assert_true(pl.saw_contended);
    loop_io_stop(l, &io);
    close(p[0]);
    close(p[1]);
    loop_set_busy_poll(l, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_timer_start_stop, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_extend_is_lazy, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_shorten_moves_to_top, setup_loop,
                                        teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_stop_in_middle, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_many_random, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_fire_order, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_fire_many_random, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_rearm_from_callback, setup_loop,
                                        teardown_loop),
        cmocka_unit_test_setup_teardown(test_timer_callbacks_change_heap, setup_loop,
                                        teardown_loop),
        cmocka_unit_test_setup_teardown(test_busy_poll, setup_loop, teardown_loop),
        cmocka_unit_test_setup_teardown(test_busy_poll_yields_shared_cpu, setup_loop,
                                        teardown_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
