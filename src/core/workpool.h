/* A small pool of threads for blocking work (file reads, blocking client
 * libraries), shared by every worker. A job's completion runs on the
 * worker that submitted it, through its mailbox. */
#ifndef BRISK_CORE_WORKPOOL_H
#define BRISK_CORE_WORKPOOL_H

#include "core/worker.h"

/* Runs work(arg) on a pool thread, then done(arg) on w's loop. Starts the
 * pool on first use. Returns 0 or negative errno. */
int workpool_submit(bk_worker *w, void (*work)(void *arg), void (*done)(void *arg), void *arg);

/* Threads to start (before the first submit; default 4, at most 256). */
void workpool_set_threads(int n);

/* Waits for queued jobs and stops the threads (at process end). */
void workpool_shutdown(void);

#endif
