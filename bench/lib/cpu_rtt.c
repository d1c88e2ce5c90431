/* How far apart the server's CPU and the load generator's CPU are: the
 * round-trip time of one cache line bounced between a thread on each
 * (the fastest of 9 runs of 20,000 round trips, in ns: a busy CPU can only
 * make a run slower). On the 2-vCPU bench
 * machine it flips between ~100 ns and ~500 ns as the host moves the
 * vCPUs, and every loopback race slows down with it; the harness records it
 * around each run. Usage: cpu_rtt CPU_A CPU_B */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 20000
#define RUNS 9

static _Atomic int ball __attribute__((aligned(64)));
static _Atomic int quit;

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *bounce(void *arg)
{
    pin(*(int *)arg);
    while (!atomic_load(&quit))
        if (atomic_load_explicit(&ball, memory_order_acquire) == 1)
            atomic_store_explicit(&ball, 0, memory_order_release);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cpu_rtt CPU_A CPU_B\n");
        return 2;
    }
    int a = atoi(argv[1]), b = atoi(argv[2]);
    pthread_t t;
    if (pin(a) != 0 || pthread_create(&t, NULL, bounce, &b) != 0)
        return 1;
    double ns[RUNS];
    for (int r = 0; r < RUNS; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < TRIPS; i++) {
            atomic_store_explicit(&ball, 1, memory_order_release);
            while (atomic_load_explicit(&ball, memory_order_acquire) != 0)
                ;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ns[r] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / TRIPS;
    }
    atomic_store(&quit, 1);
    pthread_join(t, NULL);
    qsort(ns, RUNS, sizeof ns[0], cmp);
    printf("%.0f\n", ns[0]);
    return 0;
}
