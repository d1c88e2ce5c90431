/* A worker: one thread running one event loop, with a mailbox through which
 * other threads post rare control messages (stop, reload). */
#ifndef BRISK_CORE_WORKER_H
#define BRISK_CORE_WORKER_H

#include "core/clock.h"
#include "core/loop.h"

#include <pthread.h>

typedef struct bk_worker bk_worker;
typedef struct bk_worker_msg bk_worker_msg;

/* Runs on the worker's thread, from its loop. */
typedef void (*bk_worker_msg_cb)(bk_worker *w, int type, void *arg);

struct bk_worker {
    int id;
    pthread_t thread;
    bk_loop loop;
    bk_clock clock;
    bk_worker_msg_cb on_msg;
    void (*run)(bk_worker *w); /* the thread body: set up, loop_run, tear down */
    void *udata;
    pthread_mutex_t mu;
    bk_worker_msg *head, *tail;
};

/* Initialises w and its loop (on the caller's thread) and starts the thread
 * that calls run(w). Returns 0 or negative errno. */
int worker_start(bk_worker *w, int id, void (*run)(bk_worker *), bk_worker_msg_cb on_msg, void *udata);
/* Thread-safe. arg is handed to on_msg as is. type must be >= 0. */
int worker_post(bk_worker *w, int type, void *arg);
/* Thread-safe: runs fn(arg) on the worker's thread, from its loop. */
int worker_call(bk_worker *w, void (*fn)(void *arg), void *arg);
/* Waits for the thread to end and frees the loop. */
void worker_join(bk_worker *w);

/* CPUs this process may run on (for workers = auto). */
int worker_cpu_count(void);

#endif
