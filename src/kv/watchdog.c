/* Redis's software watchdog and crash report, for brisk-kv.
 *
 * watchdog-period (ms, 0 = off): while set, every event-loop iteration
 * runs under a one-shot ITIMER_REAL armed when the iteration starts its
 * work and disarmed when it ends, so the SIGALRM comes only when one
 * iteration (a command, a load, a timer) keeps the thread longer than the
 * period; an idle loop asleep in epoll_wait never counts. The handler logs
 * "--- WATCHDOG TIMER EXPIRED ---" and the stack of the blocked thread,
 * and is installed without SA_RESTART, as Redis's: a blocking call in
 * progress returns EINTR, which the server's blocking I/O must take (it
 * retries). Only the main thread takes SIGALRM (the fsync thread blocks
 * it), so the stack is the one that blocks.
 *
 * Crash report (crash-log-enabled, default yes): SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL and SIGABRT log the signal, where it came from and a stack trace
 * under "------ STACK TRACE ------", then the default action comes back
 * and the signal is raised again: the process still dies by that signal
 * (and dumps core where core dumps are on). The sanitizer build installs
 * none of these: ASan and UBSan report such faults themselves, better.
 *
 * The handlers write with write(2) only, into the log's descriptor, with
 * numbers formatted here (no stdio, no malloc, no localtime). backtrace()
 * is called once at start so that its first call (which may load
 * libgcc_s) does not happen inside a handler. */
#include "kv/server.h"

#include "core/log.h"
#include "kv/util.h"

#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KV_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define KV_SANITIZED 1
#endif
#endif
#ifndef KV_SANITIZED
#define KV_SANITIZED 0
#endif

#define MAX_FRAMES 64

int kv_watchdog_ms; /* the period in force (0: off); server.c arms it per iteration */

static int period_cfg; /* as CONFIG GET shows it: the period after Redis's floor */
static int crash_log = 1, crash_memcheck = 1;
static int started;       /* kv_signals_start ran */
static int crash_installed;
static long gmt_offset;   /* seconds east of UTC, taken at start (for the handlers' stamps) */
static char altstack[64 * 1024]; /* a stack overflow's SIGSEGV still gets its report */

static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

/* ---- async-signal-safe output ---- */

typedef struct {
    char b[512];
    size_t n;
} sbuf;

static void s_str(sbuf *s, const char *p)
{
    while (*p && s->n < sizeof s->b)
        s->b[s->n++] = *p++;
}

static void s_num(sbuf *s, unsigned long long v, unsigned base, int width)
{
    char t[32];
    int i = 0;
    do {
        t[i++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && i < (int)sizeof t);
    while (i < width && i < (int)sizeof t)
        t[i++] = '0';
    while (i > 0 && s->n < sizeof s->b)
        s->b[s->n++] = t[--i];
}

static void s_flush(sbuf *s)
{
    int fd = log_fd();
    size_t off = 0;
    while (off < s->n) {
        ssize_t w = write(fd, s->b + off, s->n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    s->n = 0;
}

/* The log's "YYYY/MM/DD HH:MM:SS [level] " prefix, from the clock alone
 * (localtime_r is not async-signal-safe: the zone's offset was taken at
 * start). */
static void s_stamp(sbuf *s, const char *level)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long t = (long long)ts.tv_sec + gmt_offset;
    long long days = t / 86400, secs = t % 86400;
    if (secs < 0)
        secs += 86400, days--;
    /* civil date from days since 1970-01-01 (Howard Hinnant's method) */
    long long z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    long long y = yoe + era * 400 + (m <= 2);
    s_num(s, (unsigned long long)y, 10, 4);
    s_str(s, "/");
    s_num(s, (unsigned long long)m, 10, 2);
    s_str(s, "/");
    s_num(s, (unsigned long long)d, 10, 2);
    s_str(s, " ");
    s_num(s, (unsigned long long)(secs / 3600), 10, 2);
    s_str(s, ":");
    s_num(s, (unsigned long long)(secs / 60 % 60), 10, 2);
    s_str(s, ":");
    s_num(s, (unsigned long long)(secs % 60), 10, 2);
    s_str(s, " [");
    s_str(s, level);
    s_str(s, "] ");
}

static void stack_trace(void)
{
    void *frames[MAX_FRAMES];
    sbuf s = { .n = 0 };
    s_str(&s, "\n------ STACK TRACE ------\nBacktrace:\n");
    s_flush(&s);
    int n = backtrace(frames, MAX_FRAMES);
    backtrace_symbols_fd(frames, n, log_fd());
    s_str(&s, "------ END OF STACK TRACE ------\n");
    s_flush(&s);
}

/* ---- the watchdog ---- */

static void watchdog_handler(int sig, siginfo_t *info, void *uc)
{
    (void)sig, (void)info, (void)uc;
    int saved = errno;
    sbuf s = { .n = 0 };
    s_stamp(&s, "warn");
    s_str(&s, "--- WATCHDOG TIMER EXPIRED --- (an event-loop iteration ran longer than ");
    s_num(&s, (unsigned long long)kv_watchdog_ms, 10, 1);
    s_str(&s, " ms)");
    s_flush(&s);
    stack_trace();
    errno = saved;
}

static void set_timer(int ms)
{
    struct itimerval it = { .it_interval = { 0, 0 },
                            .it_value = { ms / 1000, (ms % 1000) * 1000 } };
    setitimer(ITIMER_REAL, &it, NULL);
}

void kv_watchdog_arm(void)
{
    set_timer(kv_watchdog_ms);
}

void kv_watchdog_disarm(void)
{
    set_timer(0);
}

/* Puts period_cfg in force: the handler in place and the timer armed, or
 * both gone. */
static void watchdog_apply(void)
{
    if (!started)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (period_cfg > 0) {
        sa.sa_sigaction = watchdog_handler;
        sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: blocking calls see EINTR, as in Redis */
        sigaction(SIGALRM, &sa, NULL);
        kv_watchdog_ms = period_cfg;
        set_timer(period_cfg); /* this iteration (a CONFIG SET) counts too */
    } else {
        kv_watchdog_ms = 0;
        set_timer(0);
        sa.sa_handler = SIG_IGN; /* one already in flight must not kill us */
        sigaction(SIGALRM, &sa, NULL);
    }
}

/* ---- the crash report ---- */

static void crash_handler(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    kv_watchdog_ms = 0;
    set_timer(0);
    sbuf s = { .n = 0 };
    s_stamp(&s, "error");
    s_str(&s, "=== BRISK-KV BUG REPORT START ===\n");
    s_str(&s, "brisk-kv ");
    s_str(&s, BRISK_VERSION);
    s_str(&s, " crashed by signal: ");
    s_num(&s, (unsigned long long)sig, 10, 1);
    s_str(&s, " (");
    s_str(&s, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    s_str(&s, "), si_code: ");
    s_num(&s, (unsigned long long)(unsigned)info->si_code, 10, 1);
    if (info->si_code <= 0) { /* sent by a process (kill, raise, abort) */
        s_str(&s, "\nKilled by PID: ");
        s_num(&s, (unsigned long long)(unsigned)info->si_pid, 10, 1);
        s_str(&s, ", UID: ");
        s_num(&s, (unsigned long long)info->si_uid, 10, 1);
    } else if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) {
        s_str(&s, "\nAccessing address: 0x");
        s_num(&s, (unsigned long long)(uintptr_t)info->si_addr, 16, 1);
    }
    s_flush(&s);
    stack_trace();
    s_str(&s, "=== BRISK-KV BUG REPORT END ===\n");
    s_flush(&s);
    /* Die by the same signal: SA_RESETHAND put the default action back
     * and SA_NODEFER lets the signal raised again land at once (a fault
     * inside this handler, too, ends the process by the default action). */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void crash_apply(void)
{
    if (!started || KV_SANITIZED || crash_installed == crash_log)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (crash_log) {
        sa.sa_sigaction = crash_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    } else {
        sa.sa_handler = SIG_DFL;
    }
    for (size_t i = 0; i < BK_ARRAY_LEN(crash_signals); i++)
        sigaction(crash_signals[i], &sa, NULL);
    crash_installed = crash_log;
}

void kv_signals_start(void)
{
    void *warm[1];
    (void)backtrace(warm, 1);
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        gmt_offset = tm.tm_gmtoff;
    stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0 };
    sigaltstack(&ss, NULL);
    started = 1;
    crash_apply();
    watchdog_apply();
}

_Noreturn void kv_debug_segfault(void)
{
    log_warn("DEBUG SEGFAULT: writing to a page mapped without access");
    void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    volatile char *bad = p == MAP_FAILED ? (volatile char *)(uintptr_t)8 : (volatile char *)p;
    *bad = 'x';
    abort(); /* not reached */
}

/* ---- helpers for blocking calls ---- */

pid_t kv_waitpid(pid_t pid, int *status, int options)
{
    pid_t r;
    do
        r = waitpid(pid, status, options);
    while (r < 0 && errno == EINTR);
    return r;
}

void kv_sleep_us(long long us)
{
    struct timespec t = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    while (nanosleep(&t, &t) < 0 && errno == EINTR)
        ;
}

/* ---- CONFIG ---- */

static int yesno(const char *v, int *out, char *err, size_t errlen)
{
    if (strcasecmp(v, "yes") == 0 || strcasecmp(v, "no") == 0) {
        *out = strcasecmp(v, "yes") == 0;
        return 0;
    }
    snprintf(err, errlen, "argument must be 'yes' or 'no'");
    return -1;
}

int kv_signals_config_set(const char *name, int argc, char **argv, char *err, size_t errlen)
{
    int which = strcasecmp(name, "watchdog-period") == 0          ? 0
                : strcasecmp(name, "crash-log-enabled") == 0      ? 1
                : strcasecmp(name, "crash-memcheck-enabled") == 0 ? 2
                                                                  : -1;
    if (which < 0)
        return 1;
    if (argc != 1) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    if (which == 1) {
        if (yesno(argv[0], &crash_log, err, errlen) < 0)
            return -1;
        crash_apply();
        return 0;
    }
    if (which == 2) /* accepted: brisk-kv runs no memory test after a crash */
        return yesno(argv[0], &crash_memcheck, err, errlen);
    long long v;
    if (kv_parse_ll(argv[0], strlen(argv[0]), &v) < 0) {
        snprintf(err, errlen, "argument couldn't be parsed into an integer");
        return -1;
    }
    if (v < 0 || v > INT_MAX) {
        snprintf(err, errlen, "argument must be between 0 and %d inclusive", INT_MAX);
        return -1;
    }
    /* Redis's floor: two cron periods (its watchdog is re-armed by the
     * cron); CONFIG GET then shows the floor. */
    int floor_ms = 2000 / (srv.cfg.hz > 0 ? srv.cfg.hz : 10);
    period_cfg = v > 0 && v < floor_ms ? floor_ms : (int)v;
    watchdog_apply();
    return 0;
}

void kv_signals_config_get(bk_str pattern,
                           void (*fn)(void *ud, const char *name, const char *value), void *ud)
{
    char val[32];
    /* hidden in Redis: CONFIG GET shows it by its exact name only */
    if (pattern.len == 15 && strncasecmp(pattern.p, "watchdog-period", 15) == 0) {
        snprintf(val, sizeof val, "%d", period_cfg);
        fn(ud, "watchdog-period", val);
    }
    if (kv_glob_match(pattern.p, pattern.len, "crash-log-enabled", 17, 1))
        fn(ud, "crash-log-enabled", crash_log ? "yes" : "no");
    if (kv_glob_match(pattern.p, pattern.len, "crash-memcheck-enabled", 22, 1))
        fn(ud, "crash-memcheck-enabled", crash_memcheck ? "yes" : "no");
}
