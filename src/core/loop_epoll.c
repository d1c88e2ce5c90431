/* epoll backend, level-triggered: a connection reads once per wakeup and
 * comes back if data remains, so no extra read() is spent to see EAGAIN. */
#include "core/loop_backend.h"
#include "core/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

int backend_init(bk_loop *l)
{
    l->backend_fd = epoll_create1(EPOLL_CLOEXEC);
    if (l->backend_fd < 0)
        return -errno;
    l->events = calloc((size_t)l->max_events, sizeof(struct epoll_event));
    if (!l->events) {
        close(l->backend_fd);
        return -ENOMEM;
    }
    return 0;
}

void backend_free(bk_loop *l)
{
    if (l->backend_fd >= 0)
        close(l->backend_fd);
    free(l->events);
    l->events = NULL;
    l->backend_fd = -1;
}

static uint32_t to_epoll(unsigned mask)
{
    uint32_t ev = 0;
    if (mask & LOOP_READ)
        ev |= EPOLLIN | EPOLLRDHUP;
    if (mask & LOOP_WRITE)
        ev |= EPOLLOUT;
    return ev;
}

int backend_ctl(bk_loop *l, bk_io *io, enum backend_op op, unsigned mask)
{
    static const int ops[] = { EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL };
    struct epoll_event ev = { .events = to_epoll(mask), .data.ptr = io };
    if (epoll_ctl(l->backend_fd, ops[op], io->fd, &ev) < 0)
        return -errno;
    return 0;
}

int backend_wait(bk_loop *l, int timeout_ms)
{
    int n = epoll_wait(l->backend_fd, l->events, l->max_events, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    return n;
}

void backend_dispatch(bk_loop *l, int n)
{
    struct epoll_event *evs = l->events;
    for (int i = 0; i < n; i++) {
        bk_io *io = evs[i].data.ptr;
        if (io->fd < 0)
            continue; /* stopped earlier in this batch */
        uint32_t e = evs[i].events;
        unsigned r = 0;
        if (e & EPOLLIN)
            r |= LOOP_READ;
        if (e & EPOLLOUT)
            r |= LOOP_WRITE;
        if (e & (EPOLLHUP | EPOLLRDHUP))
            r |= LOOP_HUP;
        if (e & EPOLLERR)
            r |= LOOP_ERR;
        io->cb(l, io, r);
    }
}

int loop_poll_io(bk_loop *l, int timeout_ms)
{
    /* Its own event array: the outer dispatch still reads l->events. */
    struct epoll_event evs[64];
    void *outer = l->events;
    int outer_max = l->max_events;
    l->events = evs;
    l->max_events = 64;
    int n = backend_wait(l, timeout_ms);
    if (n > 0)
        backend_dispatch(l, n);
    l->events = outer;
    l->max_events = outer_max;
    return n;
}
