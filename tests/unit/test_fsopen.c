/* Unit tests for src/core/fsopen.c: the component walk that stands in for
 * openat2(RESOLVE_BENEATH) where the kernel or a seccomp filter refuses it
 * must give the same answer as openat2 for every path of a tree with
 * symlinks that stay inside, climb out, loop or dangle. */
#include "core/common.h"
#include "core/fsopen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char top[PATH_MAX]; /* holds outside.txt and root/ */
static int root_fd = -1;

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void dir(const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void link_(const char *target, const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/brisk-fsopen-XXXXXX");
    assert_non_null(mkdtemp(top));
    put("outside.txt", "out");
    dir("root");
    dir("root/dir");
    dir("root/dir/sub");
    put("root/a.txt", "a");
    put("root/dir/b.txt", "b");
    put("root/dir/sub/c.txt", "c");
    link_("dir/b.txt", "root/link_in");
    link_("dir", "root/link_dir");
    link_("../a.txt", "root/dir/link_back");
    link_("sub/../../a.txt", "root/dir/link_zigzag");
    link_("../outside.txt", "root/link_up");
    link_("../../outside.txt", "root/dir/link_up2");
    link_("/etc/hostname", "root/link_abs");
    link_("loop2", "root/loop1");
    link_("loop1", "root/loop2");
    link_("nothing-here", "root/dangling");
    link_("link_dir/sub", "root/link_chain");
    link_("/proc/self/fd/0", "root/link_magic");
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/root", top);
    root_fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(root_fd >= 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close(root_fd);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    return system(cmd) == 0 ? 0 : -1;
}

/* The inode behind fd, or the negative errno itself. */
static long long what(int fd)
{
    if (fd < 0)
        return fd;
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    close(fd);
    return (long long)st.st_ino;
}

static long long by_path(const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", top, rel);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return (long long)st.st_ino;
}

static const char *const paths[] = {
    "", ".", "a.txt", "./a.txt", "dir", "dir/", "dir//b.txt", "dir/sub/c.txt", "dir/../a.txt",
    "dir/sub/../b.txt", "a.txt/", "nosuch", "dir/nosuch/x", "a.txt/x", "..", "../outside.txt",
    "dir/../../outside.txt", "/etc/hostname", "link_in", "link_dir", "link_dir/", "link_dir/b.txt",
    "link_dir/sub/c.txt", "dir/link_back", "dir/link_zigzag", "link_up", "dir/link_up2",
    "link_abs", "loop1", "dangling", "link_chain/c.txt", "link_chain/../b.txt", "link_magic",
    "link_in/", "dir/sub/../../a.txt",
};

static void test_walk_matches_openat2(void **state)
{
    (void)state;
    static const int flag_sets[] = { O_RDONLY | O_NONBLOCK, O_PATH };
    for (size_t f = 0; f < BK_ARRAY_LEN(flag_sets); f++) {
        for (size_t i = 0; i < BK_ARRAY_LEN(paths); i++) {
            long long a = what(fs_open_beneath(root_fd, paths[i], flag_sets[f]));
            long long b = what(fs_open_beneath_walk(root_fd, paths[i], flag_sets[f]));
            if (a != b)
                fail_msg("%s (flags %#x): openat2 %lld, walk %lld", paths[i], flag_sets[f], a, b);
        }
    }
}

static void test_walk_answers(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        const char *file; /* under top, or NULL for an error */
        int err;
    } cases[] = {
        { "link_dir/sub/c.txt", "root/dir/sub/c.txt", 0 },
        { "dir/link_back", "root/a.txt", 0 },
        { "dir/link_zigzag", "root/a.txt", 0 },
        { "", "root", 0 },
        { "link_up", NULL, EXDEV },
        { "dir/link_up2", NULL, EXDEV },
        { "link_abs", NULL, EXDEV },
        { "../outside.txt", NULL, EXDEV },
        { "/etc/hostname", NULL, EXDEV },
        { "loop1", NULL, ELOOP },
        { "dangling", NULL, ENOENT },
        { "a.txt/", NULL, ENOTDIR },
        { "a.txt/x", NULL, ENOTDIR },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(cases); i++) {
        long long got = what(fs_open_beneath_walk(root_fd, cases[i].path, O_RDONLY));
        long long want = cases[i].file ? by_path(cases[i].file) : -cases[i].err;
        if (got != want)
            fail_msg("%s: got %lld, want %lld", cases[i].path, got, want);
    }
}

static void test_walk_long_paths(void **state)
{
    (void)state;
    static char big[3 * PATH_MAX];
    memset(big, 'a', sizeof big - 1);
    assert_int_equal(fs_open_beneath_walk(root_fd, big, O_RDONLY), -ENAMETOOLONG);
    big[NAME_MAX + 1] = '\0'; /* one name too long */
    assert_int_equal(fs_open_beneath_walk(root_fd, big, O_RDONLY), -ENAMETOOLONG);
    /* Many levels of "dir/.." stay inside and end at a.txt. */
    size_t n = 0;
    while (n + 16 < PATH_MAX) {
        memcpy(big + n, "dir/sub/../../", 14);
        n += 14;
    }
    strcpy(big + n, "a.txt");
    assert_int_equal(what(fs_open_beneath_walk(root_fd, big, O_RDONLY)), by_path("root/a.txt"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_matches_openat2),
        cmocka_unit_test(test_walk_answers),
        cmocka_unit_test(test_walk_long_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
