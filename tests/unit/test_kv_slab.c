/* Unit tests for the slab of keyspace entries (src/kv/slab.c): size
 * classes, slot reuse, pages given back when empty, accounting. */
#include "kv/mem.h"
#include "kv/slab.h"
#include "kv/util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_classes(void **state)
{
    assert_int_equal(slab_class_size(1), 8);
    assert_int_equal(slab_class_size(8), 8);
    assert_int_equal(slab_class_size(9), 16);
    assert_int_equal(slab_class_size(86), 88);
    assert_int_equal(slab_class_size(128), 128);
    assert_int_equal(slab_class_size(129), 144);
    assert_int_equal(slab_class_size(257), 288);
    assert_int_equal(slab_class_size(1000), 1024);
    assert_int_equal(slab_class_size(SLAB_MAX), SLAB_MAX);
    assert_int_equal(slab_class_index(SLAB_MAX), SLAB_NCLASSES - 1);
    assert_int_equal(slab_class_index(1), 0);
    for (size_t n = 1; n <= SLAB_MAX; n++)
        assert_int_equal(slab_index_size(slab_class_index(n)), slab_class_size(n));
    /* padding stays under 1/8 of the slot past 64 bytes */
    for (size_t n = 64; n <= SLAB_MAX; n++)
        assert_true(slab_class_size(n) - n < slab_class_size(n) / 8);
}

static void test_alloc_free_reuse(void **state)
{
    enum { N = 20000 };
    void **p = calloc(N, sizeof *p);
    size_t mem0 = kv_used_memory();
    slab_stats st0;
    slab_get_stats(&st0);
    kv_rand_seed(7);
    for (int i = 0; i < N; i++) {
        size_t n = 1 + (size_t)(kv_rand64() % SLAB_MAX);
        p[i] = slab_alloc(n);
        assert_true(((uintptr_t)p[i] & 7) == 0);
        assert_true(slab_usable(p[i]) >= n);
        assert_int_equal(slab_usable(p[i]), slab_class_size(n));
        memset(p[i], i & 0xff, slab_usable(p[i]));
    }
    /* no two slots overlap: each still holds its own byte pattern */
    for (int i = 0; i < N; i++) {
        unsigned char *b = p[i];
        for (size_t k = 0; k < slab_usable(b); k++)
            assert_int_equal(b[k], i & 0xff);
    }
    slab_stats st1;
    slab_get_stats(&st1);
    assert_true(st1.pages_in_use > st0.pages_in_use);
    assert_int_equal(kv_used_memory() - mem0, st1.slots_bytes - st0.slots_bytes);
    /* free every other slot, and the next allocations reuse them */
    for (int i = 0; i < N; i += 2) {
        slab_free(p[i]);
        p[i] = NULL;
    }
    slab_stats st2;
    slab_get_stats(&st2);
    for (int i = 0; i < N; i += 2)
        p[i] = slab_alloc(88);
    slab_stats st3;
    slab_get_stats(&st3);
    assert_true(st3.pages_in_use <= st2.pages_in_use + 16);
    for (int i = 0; i < N; i++)
        slab_free(p[i]);
    slab_stats st4;
    slab_get_stats(&st4);
    /* everything freed: at most one page kept per class */
    assert_int_equal(st4.slots_bytes, st0.slots_bytes);
    assert_true(st4.pages_in_use <= st0.pages_in_use + 40);
    assert_int_equal(kv_used_memory(), mem0);
    free(p);
}

static void test_one_class_packs_densely(void **state)
{
    enum { N = 100000 };
    void **p = calloc(N, sizeof *p);
    slab_stats st0;
    slab_get_stats(&st0);
    for (int i = 0; i < N; i++)
        p[i] = slab_alloc(88);
    slab_stats st1;
    slab_get_stats(&st1);
    size_t pages = st1.pages_in_use - st0.pages_in_use;
    size_t per_page = (SLAB_PAGE_SIZE - 64) / 88;
    assert_true(pages <= N / per_page + 2);
    for (int i = 0; i < N; i++)
        slab_free(p[i]);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_alloc_free_reuse),
        cmocka_unit_test(test_one_class_packs_densely),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
