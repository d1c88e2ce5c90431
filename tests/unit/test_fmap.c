/* Unit tests for src/core/fmap.c: a mapping read between fmap_enter and
 * fmap_leave survives its file shrinking (lost pages read as zeros, the
 * mapping marked bad); a SIGBUS anywhere else still ends the process. */
#include "core/common.h"
#include "core/fmap.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define PAGES 16

static size_t psz;

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 7 + i / 4096) | 1); /* never 0 */
}

/* A file of PAGES pages of pattern(), already unlinked. */
static int make_file(void)
{
    char path[] = "/tmp/brisk-fmap-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    unsigned char *b = malloc(PAGES * psz);
    assert_non_null(b);
    for (size_t i = 0; i < PAGES * psz; i++)
        b[i] = pattern(i);
    assert_int_equal(write(fd, b, PAGES * psz), (ssize_t)(PAGES * psz));
    free(b);
    return fd;
}

static void test_reads_the_file(void **state)
{
    (void)state;
    int fd = make_file();
    bk_fmap m = { 0 };
    assert_int_equal(fmap_map(&m, fd, PAGES * psz), 0);
    for (size_t i = 0; i < PAGES * psz; i += 1009)
        assert_int_equal((unsigned char)m.p[i], pattern(i));
    assert_false(fmap_bad(&m));
    fmap_unmap(&m);
    assert_null(m.p);
    close(fd);
}

static void test_shrunk_file_reads_zeros_and_goes_bad(void **state)
{
    (void)state;
    int fd = make_file();
    bk_fmap m = { 0 };
    assert_int_equal(fmap_map(&m, fd, PAGES * psz), 0);
    size_t keep = psz + 904; /* ends inside the second page */
    assert_int_equal(ftruncate(fd, (off_t)keep), 0);
    unsigned char *copy = malloc(PAGES * psz);
    assert_non_null(copy);
    fmap_enter(&m);
    memcpy(copy, m.p, PAGES * psz); /* pages 3..16 are gone: SIGBUS, caught */
    fmap_leave();
    assert_true(fmap_bad(&m));
    for (size_t i = 0; i < keep; i++)
        assert_int_equal(copy[i], pattern(i));
    for (size_t i = keep; i < PAGES * psz; i++)
        assert_int_equal(copy[i], 0);
    /* Read again: no fault now, still bad until unmapped. */
    fmap_enter(&m);
    assert_int_equal((unsigned char)m.p[5 * psz], 0);
    fmap_leave();
    assert_true(fmap_bad(&m));
    fmap_unmap(&m);
    assert_false(fmap_bad(&m));
    /* Mapped again at the new size: good. */
    assert_int_equal(fmap_map(&m, fd, keep), 0);
    assert_false(fmap_bad(&m));
    assert_int_equal((unsigned char)m.p[keep - 1], pattern(keep - 1));
    fmap_unmap(&m);
    free(copy);
    close(fd);
}

/* Runs fn in a child; returns its wait status. */
static int in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static volatile unsigned char sink;

/* (cmocka catches SIGBUS in its tests: a child has the default back before
 * it maps, so that "not ours" means killed.) */
static void read_lost_page_outside(void)
{
    signal(SIGBUS, SIG_DFL);
    int fd = make_file();
    bk_fmap m = { 0 };
    if (fmap_map(&m, fd, PAGES * psz) < 0 || ftruncate(fd, 10) < 0)
        _exit(3);
    sink = (unsigned char)m.p[8 * psz]; /* not entered: SIGBUS */
}

static void read_other_mapping_while_entered(void)
{
    signal(SIGBUS, SIG_DFL);
    int fd = make_file(), fd2 = make_file();
    bk_fmap m = { 0 }, other = { 0 };
    if (fmap_map(&m, fd, PAGES * psz) < 0 || fmap_map(&other, fd2, PAGES * psz) < 0 ||
        ftruncate(fd2, 10) < 0)
        _exit(3);
    fmap_enter(&m);
    sink = (unsigned char)other.p[8 * psz]; /* m is entered, not other */
    fmap_leave();
}

static void assert_killed(int st)
{
    /* Killed by SIGBUS (or, under AddressSanitizer, its report's exit):
     * never a normal exit after the read. */
    assert_false(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3));
    if (WIFSIGNALED(st))
        assert_int_equal(WTERMSIG(st), SIGBUS);
}

static void test_sigbus_elsewhere_still_kills(void **state)
{
    (void)state;
    int fd = make_file(); /* the handler is installed in this process first */
    bk_fmap m = { 0 };
    assert_int_equal(fmap_map(&m, fd, PAGES * psz), 0);
    assert_killed(in_child(read_lost_page_outside));
    assert_killed(in_child(read_other_mapping_while_entered));
    fmap_unmap(&m);
    close(fd);
}

static void test_empty_length_refused(void **state)
{
    (void)state;
    int fd = make_file();
    bk_fmap m = { 0 };
    assert_int_equal(fmap_map(&m, fd, 0), -1);
    assert_null(m.p);
    fmap_unmap(&m); /* harmless */
    close(fd);
}

int main(void)
{
    psz = (size_t)sysconf(_SC_PAGESIZE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_the_file),
        cmocka_unit_test(test_shrunk_file_reads_zeros_and_goes_bad),
        cmocka_unit_test(test_sigbus_elsewhere_still_kills),
        cmocka_unit_test(test_empty_length_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
