/* Logging. The error log is written one line per event with one write().
 * Access-style logs use a bk_logbuf per worker, flushed when full, once a
 * second and at stop. Files are reopened in place (dup2 onto the same fd
 * number), so workers never see a changing descriptor. */
#ifndef BRISK_CORE_LOG_H
#define BRISK_CORE_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Opens path (or "stderr") as the error log. Returns 0 or negative errno. */
int log_open(const char *path);
/* Reopens the error log file in place (SIGUSR1). */
int log_reopen(void);
void log_set_level(enum log_level level);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_close(void);
/* The error log's descriptor (for async-signal-safe writers: crash reports). */
int log_fd(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  do { if (log_enabled(LOG_INFO)) log_msg(LOG_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

/* Opens path for appending (O_APPEND | O_CLOEXEC). Negative errno. */
int log_open_append(const char *path);
/* Reopens path onto the existing fd number. Negative errno. */
int log_reopen_fd(int fd, const char *path);

/* A per-thread line buffer in front of a shared O_APPEND fd. */
typedef struct {
    int fd;
    char *data;
    size_t len, cap;
} bk_logbuf;

int logbuf_init(bk_logbuf *lb, int fd, size_t cap);
void logbuf_free(bk_logbuf *lb);
/* Room for n more bytes, flushing first if needed; NULL if n > cap. */
char *logbuf_reserve(bk_logbuf *lb, size_t n);
void logbuf_commit(bk_logbuf *lb, size_t n);
void logbuf_flush(bk_logbuf *lb);

#endif
