/* A worker: one thread running one event loop, with a mailbox through which
 * other threads post rare control messages (stop, reload). */
#ifndef BRISK_CORE_WORKER_H
#define BRISK_CORE_WORKER_H

#include "core/clock.h"
#include "core/loop.h"

#include <pthread.h>

typedef struct worker worker;
typedef struct worker_msg worker_msg;

/* Runs on the worker's thread, from its loop. */
typedef void (*worker_msg_cb)(worker *w, int type, void *arg);

struct worker {
    int id;
    pthread_t thread;
    loop loop;
    clock_cache clock;
    worker_msg_cb on_msg;
    void (*run)(worker *w); /* the thread body: set up, loop_run, tear down */
    void *udata;
    pthread_mutex_t mu;
    worker_msg *head, *tail;
};

/* Initialises w and its loop (on the caller's thread) and starts the thread
 * that calls run(w). Returns 0 or negative errno. */
int worker_start(worker *w, int id, void (*run)(worker *), worker_msg_cb on_msg, void *udata);
/* Thread-safe. arg is handed to on_msg as is. type must be >= 0. */
int worker_post(worker *w, int type, void *arg);
/* Thread-safe: runs fn(arg) on the worker's thread, from its loop. */
int worker_call(worker *w, void (*fn)(void *arg), void *arg);
/* Waits for the thread to end and frees the loop. */
void worker_join(worker *w);

/* CPUs this process may run on (for workers = auto). */
int worker_cpu_count(void);

#endif
