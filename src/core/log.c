#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int err_fd = 2;
static char err_path[4096]; /* empty for stderr */
static enum log_level err_level = LOG_INFO;

static const char *level_names[] = { "error", "warn", "info", "debug" };

int log_open_append(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return fd < 0 ? -errno : fd;
}

int log_reopen_fd(int fd, const char *path)
{
    int nfd = log_open_append(path);
    if (nfd < 0)
        return nfd;
    if (nfd != fd) {
        if (dup3(nfd, fd, O_CLOEXEC) < 0) {
            int e = errno;
            close(nfd);
            return -e;
        }
        close(nfd);
    }
    return 0;
}

int log_open(const char *path)
{
    if (!path || strcmp(path, "stderr") == 0) {
        log_close();
        err_path[0] = '\0';
        err_fd = 2;
        return 0;
    }
    if (strlen(path) >= sizeof err_path)
        return -ENAMETOOLONG;
    if (err_fd > 2) { /* already a file: swap it in place */
        int rc = log_reopen_fd(err_fd, path);
        if (rc < 0)
            return rc;
        strcpy(err_path, path);
        return 0;
    }
    int fd = log_open_append(path);
    if (fd < 0)
        return fd;
    strcpy(err_path, path);
    err_fd = fd;
    return 0;
}

int log_reopen(void)
{
    if (!err_path[0])
        return 0;
    return log_reopen_fd(err_fd, err_path);
}

void log_close(void)
{
    if (err_fd > 2)
        close(err_fd);
    err_fd = 2;
}

void log_set_level(enum log_level level) { err_level = level; }
int log_enabled(enum log_level level) { return level <= err_level; }

int log_fd(void) { return err_fd; }

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > err_level)
        return;
    char line[2048];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t n = strftime(line, sizeof line, "%Y/%m/%d %H:%M:%S ", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, "[%s] ", level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += (size_t)m;
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(err_fd, line, n);
    (void)w;
}

int logbuf_init(bk_logbuf *lb, int fd, size_t cap)
{
    lb->fd = fd;
    lb->len = 0;
    lb->cap = cap;
    lb->data = malloc(cap);
    return lb->data ? 0 : -ENOMEM;
}

void logbuf_free(bk_logbuf *lb)
{
    logbuf_flush(lb);
    free(lb->data);
    lb->data = NULL;
}

char *logbuf_reserve(bk_logbuf *lb, size_t n)
{
    if (n > lb->cap)
        return NULL;
    if (lb->cap - lb->len < n)
        logbuf_flush(lb);
    return lb->data + lb->len;
}

void logbuf_commit(bk_logbuf *lb, size_t n) { lb->len += n; }

void logbuf_flush(bk_logbuf *lb)
{
    size_t off = 0;
    while (off < lb->len) {
        ssize_t w = write(lb->fd, lb->data + off, lb->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* disk full or closed: drop rather than block the loop */
        off += (size_t)w;
    }
    lb->len = 0;
}
