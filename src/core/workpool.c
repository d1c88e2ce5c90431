#include "core/workpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define POOL_THREADS_MAX 256

typedef struct job {
    struct job *next;
    bk_worker *w;
    void (*work)(void *);
    void (*done)(void *);
    void *arg;
} job;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static job *head, *tail;
static pthread_t threads[POOL_THREADS_MAX];
static int nthreads, stopping, want_threads = 4;

void workpool_set_threads(int n)
{
    pthread_mutex_lock(&mu);
    want_threads = n < 1 ? 1 : n > POOL_THREADS_MAX ? POOL_THREADS_MAX : n;
    pthread_mutex_unlock(&mu);
}

static void *pool_main(void *unused)
{
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!head && !stopping)
            pthread_cond_wait(&cv, &mu);
        job *j = head;
        if (j) {
            head = j->next;
            if (!head)
                tail = NULL;
        }
        pthread_mutex_unlock(&mu);
        if (!j)
            return NULL; /* stopping and drained */
        j->work(j->arg);
        if (worker_call(j->w, j->done, j->arg) < 0)
            abort(); /* the completion cannot be lost: the worker waits for it */
        free(j);
    }
}

int workpool_submit(bk_worker *w, void (*work)(void *), void (*done)(void *), void *arg)
{
    job *j = malloc(sizeof *j);
    if (!j)
        return -ENOMEM;
    *j = (job){ .w = w, .work = work, .done = done, .arg = arg };
    pthread_mutex_lock(&mu);
    if (nthreads == 0) {
        stopping = 0;
        for (; nthreads < want_threads; nthreads++)
            if (pthread_create(&threads[nthreads], NULL, pool_main, NULL) != 0)
                break;
        if (nthreads == 0) {
            pthread_mutex_unlock(&mu);
            free(j);
            return -EAGAIN;
        }
    }
    if (tail)
        tail->next = j;
    else
        head = j;
    tail = j;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return 0;
}

void workpool_shutdown(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&cv);
    int n = nthreads;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_lock(&mu);
    nthreads = 0;
    pthread_mutex_unlock(&mu);
}
