/* Unit tests for the intrusive dict with incremental rehash
 * (src/kv/dict.c), checked against a plain array model. */
#include "kv/dict.h"
#include "kv/mem.h"
#include "kv/util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct {
    dict_node node; /* aux = key length */
    int value;
    char key[24];
} item;

static bk_str item_key(const dict_node *n)
{
    const item *it = (const item *)(const void *)n;
    return (bk_str){ it->key, n->aux };
}

static item *item_new(int k)
{
    item *it = calloc(1, sizeof *it);
    it->node.aux = (uint32_t)snprintf(it->key, sizeof it->key, "key:%d", k);
    it->node.hash = dict_hash32(it->key, it->node.aux);
    it->value = k;
    return it;
}

static item *find(dict *d, int k)
{
    char key[24];
    int n = snprintf(key, sizeof key, "key:%d", k);
    return (item *)(void *)dict_find(d, key, (size_t)n, dict_hash32(key, (size_t)n));
}

static void free_item(dict_node *n, void *ud)
{
    (*(int *)ud)++;
    free(n);
}

static void test_add_find_delete_through_rehash(void **state)
{
    dict d;
    dict_init(&d, item_key);
    int seen_rehash = 0;
    for (int i = 0; i < 5000; i++) {
        dict_add(&d, &item_new(i)->node);
        seen_rehash |= dict_rehashing(&d);
        /* every key stays findable in the middle of a rehash */
        if (i % 97 == 0)
            for (int k = 0; k <= i; k += 13)
                assert_non_null(find(&d, k));
    }
    assert_true(seen_rehash);
    assert_int_equal(dict_size(&d), 5000);
    for (int i = 0; i < 5000; i++) {
        item *it = find(&d, i);
        assert_non_null(it);
        assert_int_equal(it->value, i);
    }
    assert_null(find(&d, 5000));
    /* delete the even keys */
    for (int i = 0; i < 5000; i += 2) {
        char key[24];
        int n = snprintf(key, sizeof key, "key:%d", i);
        dict_node *x = dict_unlink(&d, key, (size_t)n, dict_hash32(key, (size_t)n));
        assert_non_null(x);
        free(x);
    }
    assert_int_equal(dict_size(&d), 2500);
    for (int i = 0; i < 5000; i++)
        assert_true((find(&d, i) != NULL) == (i % 2 == 1));
    /* shrink with an incremental rehash, keys stay reachable */
    for (int i = 1; i < 5000; i += 2)
        if (i % 10 != 1) {
            item *it = find(&d, i);
            dict_unlink_node(&d, &it->node);
            free(it);
        }
    dict_shrink_if_sparse(&d);
    assert_true(dict_rehashing(&d));
    for (int i = 1; i < 5000; i += 10)
        assert_non_null(find(&d, i));
    while (dict_rehash(&d, 10)) {
    }
    assert_int_equal(dict_size(&d), 500);
    assert_true(dict_buckets(&d) <= 1024);
    int freed = 0;
    dict_clear(&d, free_item, &freed);
    assert_int_equal(freed, 500);
    assert_int_equal(dict_size(&d), 0);
}

static void test_relink(void **state)
{
    dict d;
    dict_init(&d, item_key);
    for (int i = 0; i < 100; i++)
        dict_add(&d, &item_new(i)->node);
    /* relink every node (chained ones included) and keep all reachable */
    for (int i = 0; i < 100; i++) {
        item *old = find(&d, i);
        item *copy = malloc(sizeof *copy);
        memcpy(copy, old, sizeof *copy);
        copy->node.next = NULL; /* the dict must restore the chain */
        copy->value = -i;
        dict_relink(&d, &old->node, &copy->node);
        free(old);
        for (int k = 0; k < 100; k++)
            assert_non_null(find(&d, k));
    }
    assert_int_equal(find(&d, 42)->value, -42);
    assert_int_equal(dict_size(&d), 100);
    int freed = 0;
    dict_clear(&d, free_item, &freed);
    assert_int_equal(freed, 100);
}

typedef struct {
    int *count;
    int max;
} scan_state;

static void scan_cb(void *ud, dict_node *n)
{
    scan_state *st = ud;
    int v = ((item *)(void *)n)->value;
    assert_true(v >= 0 && v < st->max);
    st->count[v]++;
}

static void test_scan_reports_everything_across_resize(void **state)
{
    dict d;
    dict_init(&d, item_key);
    enum { N = 3000 };
    for (int i = 0; i < N; i++)
        dict_add(&d, &item_new(i)->node);
    int *count = calloc(N + 2000, sizeof *count);
    scan_state st = { count, N + 2000 };
    size_t cursor = 0;
    int steps = 0;
    do {
        cursor = dict_scan(&d, cursor, scan_cb, &st);
        /* grow the table in the middle of the scan */
        if (steps == 20)
            for (int i = N; i < N + 2000; i++)
                dict_add(&d, &item_new(i)->node);
        steps++;
    } while (cursor != 0);
    /* every element present for the whole scan was reported at least once */
    for (int i = 0; i < N; i++)
        assert_true(count[i] >= 1);
    free(count);
    int freed = 0;
    dict_clear(&d, free_item, &freed);
    assert_int_equal(freed, N + 2000);
}

static void test_iterator_and_random(void **state)
{
    dict d;
    dict_init(&d, item_key);
    assert_null(dict_random(&d));
    for (int i = 0; i < 1000; i++)
        dict_add(&d, &item_new(i)->node);
    int hits[1000] = { 0 };
    dict_iter it;
    dict_iter_init(&it, &d);
    int n = 0;
    for (dict_node *x; (x = dict_iter_next(&it));) {
        hits[((item *)(void *)x)->value]++;
        n++;
    }
    dict_iter_end(&it);
    assert_int_equal(n, 1000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(hits[i], 1);
    /* iteration may free the current node */
    dict_iter_init(&it, &d);
    for (dict_node *x; (x = dict_iter_next(&it));) {
        if (((item *)(void *)x)->value % 2) {
            dict_unlink_node(&d, x);
            free(x);
        }
    }
    dict_iter_end(&it);
    assert_int_equal(dict_size(&d), 500);
    for (int i = 0; i < 200; i++) {
        item *r = (item *)(void *)dict_random(&d);
        assert_non_null(r);
        assert_int_equal(r->value % 2, 0);
    }
    int freed = 0;
    dict_clear(&d, free_item, &freed);
    assert_int_equal(freed, 500);
}

static void test_hash_spread(void **state)
{
    /* similar keys land in different buckets */
    uint32_t h1 = dict_hash32("key:1", 5), h2 = dict_hash32("key:2", 5);
    assert_true(h1 != h2);
    assert_true((h1 & 1023) != (h2 & 1023) || (h1 >> 10) != (h2 >> 10));
    assert_int_equal(dict_hash("abc", 3), dict_hash("abc", 3));
    assert_true(dict_hash("", 0) != dict_hash("a", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find_delete_through_rehash),
        cmocka_unit_test(test_relink),
        cmocka_unit_test(test_scan_reports_everything_across_resize),
        cmocka_unit_test(test_iterator_and_random),
        cmocka_unit_test(test_hash_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
