/* What a BGSAVE child tells its parent while it runs: keys written so far
 * and its copy-on-write size (its Private_Dirty memory: pages the parent
 * changed since the fork, which the child alone still maps). The child
 * sends a fixed-size record over a pipe at most once a second and once
 * more before it exits; the parent drains the pipe from its cron. INFO
 * persistence shows the result (current_cow_size, current_fork_perc,
 * current_save_keys_processed, rdb_last_cow_size, ...) as Redis does. */
#include "kv/rdb.h"
#include "kv/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    uint64_t keys;
    uint64_t cow;
    uint32_t final;
    uint32_t pad;
} child_msg;

kv_childinfo childinfo;
int childinfo_fd = -1; /* the child's write end (-1 when none) */
static int read_fd = -1; /* the parent's read end */
static int64_t last_sent_ms;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The process's Private_Dirty in bytes, 0 when unknown. smaps_rollup sums
 * every mapping in one line (Linux 4.14+). */
static uint64_t private_dirty(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "Private_Dirty: %llu kB", &v) == 1)
            kb += v;
    }
    fclose(f);
    return kb * 1024;
}

int childinfo_open(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        fds[0] = fds[1] = -1;
        return -1;
    }
    return 0;
}

void childinfo_in_child(int fds[2])
{
    if (fds[0] >= 0)
        close(fds[0]);
    childinfo_fd = fds[1];
    last_sent_ms = mono_ms();
}

void childinfo_in_parent(int fds[2], uint64_t keys_total)
{
    if (fds[1] >= 0)
        close(fds[1]);
    if (read_fd >= 0)
        close(read_fd);
    read_fd = fds[0];
    childinfo.keys_total = keys_total;
    childinfo.keys_done = 0;
    childinfo.cow = childinfo.cow_peak = 0;
    childinfo.cow_at_ms = 0;
}

static void send_msg(uint64_t keys, int final)
{
    child_msg m = { keys, private_dirty(), (uint32_t)final, 0 };
    /* a full pipe drops the record: the next one a second later says more */
    ssize_t w = write(childinfo_fd, &m, sizeof m);
    (void)w;
}

void childinfo_progress_slow(uint64_t keys)
{
    int64_t now = mono_ms();
    if (now - last_sent_ms < 1000)
        return;
    last_sent_ms = now;
    send_msg(keys, 0);
}

void childinfo_final(uint64_t keys)
{
    if (childinfo_fd >= 0)
        send_msg(keys, 1);
}

void childinfo_poll(void)
{
    if (read_fd < 0)
        return;
    child_msg m;
    while (read(read_fd, &m, sizeof m) == (ssize_t)sizeof m) {
        childinfo.keys_done = m.keys;
        if (m.final) {
            childinfo.last_cow = m.cow;
        } else {
            childinfo.cow = m.cow;
            childinfo.cow_at_ms = srv.now_ms;
            if (m.cow > childinfo.cow_peak)
                childinfo.cow_peak = m.cow;
        }
    }
}

void childinfo_child_ended(int ok)
{
    if (read_fd < 0)
        return;
    (void)ok;
    childinfo_poll(); /* the final record: a child that saved sent one */
    close(read_fd);
    read_fd = -1;
    childinfo.keys_done = childinfo.keys_total = 0;
    childinfo.cow = childinfo.cow_peak = 0;
    childinfo.cow_at_ms = 0;
}
