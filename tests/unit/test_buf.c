/* Unit tests for the growable buffer (src/core/buf.c): growth, exact
 * resizing and the per-thread count of the bytes buffers hold, which
 * brisk-kv's used_memory and maxmemory rely on. */
#include "core/buf.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_held_follows_growth_and_free(void **state)
{
    (void)state;
    size_t base = buf_held_bytes();
    bk_buf a = { 0 }, b = { 0 };
    assert_int_equal(buf_append(&a, "hello", 5), 0);
    assert_int_equal(buf_held_bytes(), base + a.cap);
    char big[5000];
    memset(big, 'x', sizeof big);
    assert_int_equal(buf_append(&a, big, sizeof big), 0);
    assert_true(a.cap >= 5005);
    assert_int_equal(buf_appendf(&b, "%s-%d", "n", 42), 0);
    assert_memory_equal(b.data, "n-42", 4);
    assert_int_equal(buf_held_bytes(), base + a.cap + b.cap);
    buf_free(&a);
    assert_int_equal(buf_held_bytes(), base + b.cap);
    buf_free(&b);
    buf_free(&b); /* twice: nothing held, nothing counted */
    assert_int_equal(buf_held_bytes(), base);
}

static void test_resize(void **state)
{
    (void)state;
    size_t base = buf_held_bytes();
    bk_buf a = { 0 };
    assert_int_equal(buf_append(&a, "0123456789", 10), 0);
    assert_int_equal(buf_resize(&a, 100000), 0);
    assert_int_equal(a.cap, 100000);
    assert_int_equal(buf_held_bytes(), base + 100000);
    assert_memory_equal(a.data, "0123456789", 10);
    /* never under what it holds */
    assert_int_equal(buf_resize(&a, 3), 0);
    assert_int_equal(a.cap, 10);
    assert_int_equal(buf_held_bytes(), base + 10);
    assert_memory_equal(a.data, "0123456789", 10);
    a.len = 0;
    assert_int_equal(buf_resize(&a, 0), 0); /* 0 frees */
    assert_null(a.data);
    assert_int_equal(a.cap, 0);
    assert_int_equal(buf_held_bytes(), base);
    assert_int_equal(buf_resize(&a, 64), 0); /* from nothing */
    assert_int_equal(a.cap, 64);
    assert_int_equal(buf_held_bytes(), base + 64);
    buf_free(&a);
    assert_int_equal(buf_held_bytes(), base);
}

static void *other_thread(void *arg)
{
    bk_buf *b = arg;
    size_t before = buf_held_bytes();
    buf_append(b, "abc", 3);
    return (void *)(uintptr_t)(buf_held_bytes() - before);
}

static void test_held_is_per_thread(void **state)
{
    (void)state;
    size_t base = buf_held_bytes();
    bk_buf b = { 0 };
    pthread_t t;
    void *grew;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &b), 0);
    assert_int_equal(pthread_join(t, &grew), 0);
    assert_int_equal((size_t)(uintptr_t)grew, b.cap);
    assert_int_equal(buf_held_bytes(), base); /* not this thread's */
    b.cap = 0; /* (so that freeing it here does not count it off this thread) */
    buf_free(&b);
    assert_int_equal(buf_held_bytes(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_follows_growth_and_free),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_held_is_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
