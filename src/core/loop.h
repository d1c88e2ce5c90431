/* The event loop: one per worker thread, never shared. I/O readiness comes
 * from a backend behind loop_backend.h (epoll today); timers live in a
 * binary heap owned by the loop. */
#ifndef BRISK_CORE_LOOP_H
#define BRISK_CORE_LOOP_H

#include <stdint.h>

typedef struct bk_loop bk_loop;
typedef struct bk_io bk_io;
typedef struct bk_timer bk_timer;

enum {
    LOOP_READ = 1u << 0,
    LOOP_WRITE = 1u << 1,
    LOOP_HUP = 1u << 2, /* reported only, never requested */
    LOOP_ERR = 1u << 3, /* reported only, never requested */
};

typedef void (*bk_io_cb)(bk_loop *l, bk_io *io, unsigned events);
typedef void (*bk_timer_cb)(bk_loop *l, bk_timer *t);
typedef void (*bk_loop_hook)(bk_loop *l, void *udata);

/* A watched file descriptor. Embed it in the owner's struct; it must stay
 * at the same address while started. */
struct bk_io {
    int fd;         /* -1 when stopped */
    unsigned mask;  /* LOOP_READ | LOOP_WRITE as registered */
    int registered; /* known to the backend */
    bk_io_cb cb;
    void *udata;
};

/* A one-shot timer. Re-starting an active timer further in the future costs
 * O(1): the heap key is only corrected when the timer reaches the top. */
struct bk_timer {
    uint64_t when;     /* heap key, ms (monotonic) */
    uint64_t deadline; /* when it really fires; >= when */
    uint32_t idx;      /* position in the heap + 1; 0 = inactive */
    bk_timer_cb cb;
    void *udata;
};

struct bk_loop {
    int backend_fd;
    void *events;      /* backend's event array */
    int max_events;
    uint64_t now_ms;   /* refreshed before each dispatch */
    int stopping;
    unsigned busy_poll_us; /* see loop_set_busy_poll; 0 = off */
    int busy;              /* the last sleep was short */
    int contended;         /* others wait for this thread's CPU: no spinning */
    long nivcsw;           /* involuntary switches at the last check */
    uint64_t contention_check_ms; /* when to look at them again */
    uint64_t contention_span_ms;  /* the time between the last two looks */
    bk_timer **heap;
    uint32_t heap_len, heap_cap;
    int wake_fd;       /* eventfd for loop_wake() */
    bk_io wake_io;
    bk_loop_hook on_wake;          /* called in the loop after loop_wake() */
    bk_loop_hook before_dispatch;  /* called when the wait returns, before callbacks */
    bk_loop_hook on_iteration_end; /* called after each batch of events and timers */
    void *udata;
};

int loop_init(bk_loop *l, int max_events);
void loop_free(bk_loop *l);

/* Registers fd with the interest mask; cb gets (loop, io, events). */
int loop_io_start(bk_loop *l, bk_io *io, int fd, unsigned mask, bk_io_cb cb, void *udata);
/* Prepares io without telling the backend (no syscall); the first
 * loop_io_set registers it. For an fd that may be done with before it
 * ever needs to wait. */
void loop_io_init(bk_io *io, int fd, bk_io_cb cb, void *udata);
/* Changes the interest mask; a no-op (no syscall) when it is unchanged. */
int loop_io_set(bk_loop *l, bk_io *io, unsigned mask);
/* Unregisters; io->fd becomes -1 and no further events are dispatched to it,
 * even later in the current batch. Does not close the fd. The memory of io
 * must stay valid (and not be restarted) until the batch ends: owners free
 * from on_iteration_end. */
void loop_io_stop(bk_loop *l, bk_io *io);
/* Like loop_io_stop without the syscall, for an fd the caller closes right
 * away (close() removes it from the backend). */
void loop_io_forget(bk_loop *l, bk_io *io);

void timer_init(bk_timer *t, bk_timer_cb cb, void *udata);
void timer_start(bk_loop *l, bk_timer *t, uint64_t after_ms);
void timer_stop(bk_loop *l, bk_timer *t);
static inline int timer_active(const bk_timer *t) { return t->idx != 0; }

/* Busy polling: when events keep arriving (the last idle period was shorter
 * than twice us), the loop looks for new events for up to us microseconds
 * before it sleeps; it stops as soon as a spin finds nothing, and while
 * other threads wait for its CPU (LOOP_CONTENDED_SWITCHES preemptions in
 * LOOP_CONTENTION_MS; then it looks again LOOP_CONTENTION_BACKOFF_MS later). Costs at most us of CPU per burst of work and nothing
 * on an idle loop. 0 turns it off (the default). */
#define LOOP_CONTENTION_MS 100u
#define LOOP_CONTENDED_SWITCHES 50
#define LOOP_CONTENTION_BACKOFF_MS 1000u
void loop_set_busy_poll(bk_loop *l, unsigned us);

/* Runs until loop_stop(). Returns 0, or negative errno on a backend error. */
int loop_run(bk_loop *l);
void loop_stop(bk_loop *l);
/* Waits up to timeout_ms for I/O and dispatches it: no timers, no hooks.
 * For a long task that must keep serving clients from inside a callback
 * (a busy script); its events do not disturb the batch being dispatched. */
int loop_poll_io(bk_loop *l, int timeout_ms);
/* Thread-safe: makes the loop call l->on_wake soon. */
void loop_wake(bk_loop *l);

#endif
