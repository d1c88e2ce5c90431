/* The public API's blocking work: brisk_work and brisk_loop_work run a
 * function on the shared pool (core/workpool.c), then its completion on
 * the worker. A job in flight keeps a stopping worker alive. */
#include "http/api.h"

#include "core/workpool.h"

#include <stdlib.h>

typedef struct {
    http_exchange *x;
    void (*work)(void *);
    void (*done)(brisk_res *, void *);
    void *arg;
} work_job;

static void job_work(void *p)
{
    work_job *j = p;
    j->work(j->arg);
}

static void job_done(void *p)
{
    work_job *j = p;
    http_worker *hw = j->x->hw;
    hw->jobs--;
    j->done(AS_RES(j->x), j->arg);
    free(j);
    http_worker_stop_if_drained(hw);
}

int brisk_work(brisk_res *res, void (*work)(void *), void (*done)(brisk_res *, void *), void *arg)
{
    http_exchange *x = RES(res);
    work_job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (work_job){ .x = x, .work = work, .done = done, .arg = arg };
    if (workpool_submit(&x->hw->w, job_work, job_done, j) < 0) {
        free(j);
        return -1;
    }
    x->hw->jobs++;
    return 0;
}

typedef struct {
    http_worker *hw;
    void (*work)(void *);
    void (*done)(void *);
    void *arg;
} loop_job;

static void loop_job_work(void *p)
{
    loop_job *j = p;
    j->work(j->arg);
}

static void loop_job_done(void *p)
{
    loop_job *j = p;
    http_worker *hw = j->hw;
    hw->jobs--;
    j->done(j->arg);
    free(j);
    http_worker_stop_if_drained(hw);
}

int brisk_loop_work(brisk_loop *l, void (*work)(void *), void (*done)(void *), void *arg)
{
    loop_job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (loop_job){ .hw = LOOP(l), .work = work, .done = done, .arg = arg };
    if (workpool_submit(&j->hw->w, loop_job_work, loop_job_done, j) < 0) {
        free(j);
        return -1;
    }
    j->hw->jobs++;
    return 0;
}

