/* LD_PRELOAD shim for running brisk under valgrind 3.19 (Debian 12), which
 * does not know openat2(2) (syscall 437) and fails it with ENOSYS: brisk's
 * open-file cache then answers 500. This wraps libc's syscall() and serves
 * SYS_openat2 with openat(2), dropping the RESOLVE_* flags (the benchmark
 * serves its own temp dir, so nothing is lost there). Used only by
 * bench/lib/costs.py for the callgrind counts; built on first use. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>

long syscall(long nr, ...)
{
    static long (*real)(long, ...);
    long a[6];
    va_list ap;

    va_start(ap, nr);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_openat2) {
        const struct open_how *how = (const struct open_how *)a[2];
        return openat((int)a[0], (const char *)a[1], (int)how->flags, (mode_t)how->mode);
    }
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
