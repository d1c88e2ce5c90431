#include "core/fsopen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
    WALK_MAX_DEPTH = 128, /* directories held open at once */
    WALK_MAX_LINKS = 40,  /* symlinks followed per open, as the kernel's ELOOP limit */
};

/* Set once openat2 answered ENOSYS: the process never asks again. */
static atomic_int no_openat2;

int fs_open_beneath(int dirfd, const char *path, int flags)
{
    if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
        struct open_how how = {
            .flags = (unsigned)(flags | O_CLOEXEC),
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int)syscall(SYS_openat2, dirfd, path[0] ? path : ".", &how, sizeof how);
        if (fd >= 0)
            return fd;
        /* EPERM: a seccomp filter that predates openat2 (Docker < 20.10's
         * default profile); none of our flags can cause it otherwise. */
        if (errno != ENOSYS && errno != EPERM)
            return -errno;
        if (errno == ENOSYS)
            atomic_store_explicit(&no_openat2, 1, memory_order_relaxed);
    }
    return fs_open_beneath_walk(dirfd, path, flags);
}

static int open_final(int dirfd, const char *name, int flags)
{
    int fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW);
    return fd < 0 ? -errno : fd;
}

/* Puts a symlink's target in front of what is left to resolve: rest
 * becomes target + ("/" when the link was followed by one) + tail. */
static int splice_link(char *rest, size_t cap, const char *target, size_t tl, const char *tail,
                       int slash)
{
    size_t after = strlen(tail);
    if (tl + (size_t)slash + after + 1 > cap)
        return -ENAMETOOLONG;
    memmove(rest + tl + slash, tail, after + 1);
    memcpy(rest, target, tl);
    if (slash)
        rest[tl] = '/';
    return 0;
}

int fs_open_beneath_walk(int dirfd, const char *path, int flags)
{
    char rest[2 * PATH_MAX]; /* what is left to resolve, from p */
    size_t n = strlen(path);
    if (n >= sizeof rest)
        return -ENAMETOOLONG;
    if (path[0] == '/')
        return -EXDEV;
    memcpy(rest, path, n + 1);

    int dirs[WALK_MAX_DEPTH]; /* O_PATH fds of the directories walked into */
    int depth = 0, links = 0, ret;
    char *p = rest;
    for (;;) {
        while (*p == '/')
            p++;
        int cur = depth ? dirs[depth - 1] : dirfd;
        if (!*p) {
            ret = open_final(cur, ".", flags);
            break;
        }
        char *end = strchrnul(p, '/');
        size_t len = (size_t)(end - p);
        char name[NAME_MAX + 1];
        if (len > NAME_MAX) {
            ret = -ENAMETOOLONG;
            break;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        int slash = *end == '/';
        for (p = end; *p == '/'; p++)
            ;
        int last = !*p;
        if (!strcmp(name, "."))
            continue;
        if (!strcmp(name, "..")) {
            if (!depth) {
                ret = -EXDEV;
                break;
            }
            close(dirs[--depth]);
            continue;
        }
        int fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            ret = -errno;
            if (fd >= 0)
                close(fd);
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t tl = readlinkat(fd, "", target, sizeof target);
            close(fd);
            if (tl < 0) {
                ret = -errno;
                break;
            }
            if (++links > WALK_MAX_LINKS) {
                ret = -ELOOP;
                break;
            }
            if ((size_t)tl == sizeof target) {
                ret = -ENAMETOOLONG;
                break;
            }
            if (tl == 0 || target[0] == '/') {
                ret = tl ? -EXDEV : -ENOENT;
                break;
            }
            if ((ret = splice_link(rest, sizeof rest, target, (size_t)tl, p, slash)) < 0)
                break;
            p = rest;
            continue;
        }
        if (last) {
            close(fd);
            /* O_NOFOLLOW: a name swapped for a symlink since the fstat fails
             * with ELOOP rather than being followed. */
            ret = open_final(cur, name, flags | (slash ? O_DIRECTORY : 0));
            break;
        }
        if (!S_ISDIR(st.st_mode) || depth == WALK_MAX_DEPTH) {
            ret = S_ISDIR(st.st_mode) ? -ENAMETOOLONG : -ENOTDIR;
            close(fd);
            break;
        }
        dirs[depth++] = fd;
    }
    while (depth)
        close(dirs[--depth]);
    return ret;
}
