/* Unit tests for src/http/fcache.c's mappings (fcache_map): made for files
 * over the in-memory limit only, kept with the entry, refused once a page
 * was lost (the file shrank) until the entry is reopened, and bounded in
 * number (FCACHE_MAPS_MAX) across the process. */
#include "core/common.h"
#include "core/fmap.h"
#include "http/fcache.h"
#include "http/mime.h"

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

static char dir[PATH_MAX];
static int root_fd = -1;
static mime_table *mimes;

static void put(const char *name, size_t size)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    for (size_t i = 0; i < size; i++)
        fputc('a' + (int)(i % 26), f);
    fclose(f);
}

static fcache_opts opts(uint64_t valid_ms)
{
    return (fcache_opts){ .root_fd = root_fd, .valid_ms = valid_ms, .memory_max = 1024,
                          .mime = mimes };
}

static fcache_entry *get(fcache *fc, const char *name, uint64_t now, uint64_t valid_ms)
{
    fcache_opts o = opts(valid_ms);
    fcache_entry *e = fcache_get(fc, name, strlen(name), now, &o);
    assert_non_null(e);
    assert_int_equal(e->err, 0);
    return e;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/brisk-fcache-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    mimes = mime_load(NULL, "application/octet-stream");
    return root_fd >= 0 && mimes ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return -1;
    close(root_fd);
    mime_free(mimes);
    return 0;
}

static void test_big_files_only_kept_with_the_entry(void **state)
{
    (void)state;
    put("big.bin", 100000);
    put("small.txt", 100);
    put("empty", 0);
    fcache *fc = fcache_new(16);
    fcache_entry *big = get(fc, "big.bin", 0, 1000);
    const bk_fmap *m = fcache_map(big);
    assert_non_null(m);
    assert_int_equal(m->len, 100000);
    assert_memory_equal(m->p + 26 * 100, "abcdef", 6);
    assert_ptr_equal(fcache_map(big), m); /* kept */
    fcache_entry *small = get(fc, "small.txt", 0, 1000);
    assert_non_null(small->content);
    assert_null(fcache_map(small)); /* in memory already */
    fcache_entry *empty = get(fc, "empty", 0, 1000);
    assert_null(fcache_map(empty));
    fcache_release(big);
    fcache_release(small);
    fcache_release(empty);
    fcache_free(fc);
}

static void test_lost_pages_refuse_the_map_until_reopened(void **state)
{
    (void)state;
    put("shrinks.bin", 64 * 1024);
    fcache *fc = fcache_new(16);
    fcache_entry *e = get(fc, "shrinks.bin", 0, 1000);
    const bk_fmap *m = fcache_map(e);
    assert_non_null(m);
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/shrinks.bin", dir);
    assert_int_equal(truncate(p, 5000), 0);
    volatile char sink = 0;
    fmap_enter(m);
    sink = m->p[40000]; /* a lost page: zeros and bad, no SIGBUS */
    fmap_leave();
    assert_int_equal(sink, 0);
    assert_true(fmap_bad(m));
    assert_null(fcache_map(e)); /* (the file is read with pread meanwhile) */
    fcache_release(e);
    /* the next look finds a changed file: reopened, mapped again */
    e = get(fc, "shrinks.bin", 2000, 1000);
    assert_int_equal(e->size, 5000);
    m = fcache_map(e);
    assert_non_null(m);
    assert_false(fmap_bad(m));
    assert_int_equal(m->len, 5000);
    fcache_release(e);
    fcache_free(fc);
}

static void test_mappings_are_bounded(void **state)
{
    (void)state;
    enum { N = FCACHE_MAPS_MAX + 8 };
    fcache *fc = fcache_new(N);
    fcache_entry **es = calloc(N, sizeof *es);
    assert_non_null(es);
    int mapped = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%04d", i);
        put(name, 2000);
        es[i] = get(fc, name, 0, 1000);
        mapped += fcache_map(es[i]) != NULL;
    }
    assert_int_equal(mapped, FCACHE_MAPS_MAX);
    for (int i = 0; i < N; i++)
        fcache_release(es[i]);
    fcache_free(fc); /* every entry goes, and its mapping */
    fc = fcache_new(16);
    fcache_entry *e = get(fc, "f0000", 0, 1000);
    assert_non_null(fcache_map(e)); /* room again */
    fcache_release(e);
    fcache_free(fc);
    free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_files_only_kept_with_the_entry),
        cmocka_unit_test(test_lost_pages_refuse_the_map_until_reopened),
        cmocka_unit_test(test_mappings_are_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
