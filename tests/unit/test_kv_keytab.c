/* Unit tests for the keyspace index (src/kv/keytab.c): open addressing with
 * tombstones and incremental resize, checked against a plain array model;
 * SCAN's guarantee across growth and shrinking; iteration with removal. */
#include "kv/dict.h"
#include "kv/keytab.h"
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
    int value;
    size_t klen;
    char key[24];
} item;

static bk_str item_key(const void *p)
{
    const item *it = p;
    return (bk_str){ it->key, it->klen };
}

static item *item_new(int k)
{
    item *it = calloc(1, sizeof *it);
    it->klen = (size_t)snprintf(it->key, sizeof it->key, "key:%d", k);
    it->value = k;
    return it;
}

static uint64_t hash_of(int k)
{
    char key[24];
    int n = snprintf(key, sizeof key, "key:%d", k);
    return dict_hash(key, (size_t)n);
}

static item *find(keytab *kt, int k)
{
    char key[24];
    int n = snprintf(key, sizeof key, "key:%d", k);
    return keytab_find(kt, key, (size_t)n, dict_hash(key, (size_t)n));
}

static void add(keytab *kt, item *it)
{
    keytab_add(kt, it, dict_hash(it->key, it->klen));
}

static void free_cb(void *p, void *ud)
{
    (*(int *)ud)++;
    free(p);
}

/* Random adds, removals (by key and by item), replacements, resizes and
 * tidying, each checked against an array of what must be present. */
static void test_matches_model(void **state)
{
    enum { K = 4000 };
    item **model = calloc(K, sizeof *model);
    keytab kt;
    keytab_init(&kt, item_key);
    kv_rand_seed(42);
    size_t present = 0;
    int saw_resize = 0;
    for (int round = 0; round < 300000; round++) {
        /* phases: fill, drain (shrinks), churn (tombstones) */
        int phase = (round / 50000) % 3;
        int k = (int)(kv_rand64() % K);
        unsigned op = (unsigned)(kv_rand64() % 100);
        int want_add = phase == 0 ? op < 70 : phase == 1 ? op < 20 : op < 50;
        if (want_add && !model[k]) {
            model[k] = item_new(k);
            add(&kt, model[k]);
            present++;
        } else if (!want_add && model[k]) {
            if (op % 3 == 0) {
                keytab_remove_item(&kt, model[k], hash_of(k));
            } else {
                char key[24];
                int n = snprintf(key, sizeof key, "key:%d", k);
                item *got = keytab_remove(&kt, key, (size_t)n, hash_of(k));
                assert_ptr_equal(got, model[k]);
            }
            free(model[k]);
            model[k] = NULL;
            present--;
        } else if (model[k] && op % 7 == 0) {
            item *copy = malloc(sizeof *copy);
            memcpy(copy, model[k], sizeof *copy);
            keytab_replace(&kt, model[k], copy, hash_of(k));
            free(model[k]);
            model[k] = copy;
        }
        if (round % 1000 == 0)
            keytab_tidy(&kt);
        saw_resize |= keytab_resizing(&kt);
        assert_int_equal(keytab_size(&kt), present);
        /* spot checks every round, a full check now and then */
        int probe = (int)(kv_rand64() % K);
        assert_ptr_equal(find(&kt, probe), model[probe]);
        if (round % 9973 == 0)
            for (int i = 0; i < K; i++)
                assert_ptr_equal(find(&kt, i), model[i]);
        /* a table never fills: there is always an empty slot */
        if (kt.size[0])
            assert_true(kt.used[0] + kt.tomb[0] < kt.size[0]);
    }
    assert_true(saw_resize);
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal((size_t)freed, present);
    assert_int_equal(keytab_size(&kt), 0);
    free(model);
}

static void test_grow_and_shrink(void **state)
{
    keytab kt;
    keytab_init(&kt, item_key);
    for (int i = 0; i < 100000; i++) {
        add(&kt, item_new(i));
        if (i % 997 == 0)
            for (int k = 0; k <= i; k += 101)
                assert_non_null(find(&kt, k));
    }
    while (keytab_rehash(&kt, 1000)) {
    }
    /* at most 7/8 full and at least 7/16 after growing */
    assert_int_equal(kt.size[0], 131072);
    for (int i = 0; i < 100000; i++)
        if (i % 100) {
            char key[24];
            int n = snprintf(key, sizeof key, "key:%d", i);
            free(keytab_remove(&kt, key, (size_t)n, hash_of(i)));
        }
    assert_int_equal(keytab_size(&kt), 1000);
    keytab_tidy(&kt);
    assert_true(keytab_resizing(&kt));
    for (int i = 0; i < 100000; i += 100)
        assert_non_null(find(&kt, i));
    while (keytab_rehash(&kt, 1000)) {
    }
    assert_int_equal(kt.size[0], 2048);
    assert_int_equal(kt.tomb[0], 0);
    for (int i = 0; i < 100000; i++)
        assert_true((find(&kt, i) != NULL) == (i % 100 == 0));
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal(freed, 1000);
}

/* Adding and removing fresh keys forever must not fill the table with
 * tombstones: they are dropped when the table is rebuilt. */
static void test_tombstones_stay_bounded(void **state)
{
    keytab kt;
    keytab_init(&kt, item_key);
    for (int i = 0; i < 100; i++)
        add(&kt, item_new(i));
    for (int i = 100; i < 200000; i++) {
        add(&kt, item_new(i));
        char key[24];
        int n = snprintf(key, sizeof key, "key:%d", i - 100);
        free(keytab_remove(&kt, key, (size_t)n, hash_of(i - 100)));
        assert_true(keytab_slots(&kt) <= 1024);
    }
    for (int i = 199900; i < 200000; i++)
        assert_non_null(find(&kt, i));
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal(freed, 100);
}

typedef struct {
    int *count;
    int max;
} scan_state;

static void scan_cb(void *ud, void *p)
{
    scan_state *st = ud;
    int v = ((item *)p)->value;
    assert_true(v >= 0 && v < st->max);
    st->count[v]++;
}

/* Every item present for the whole scan is reported, while the table grows
 * (twice) and then shrinks under it. */
static void test_scan_guarantee_across_resizes(void **state)
{
    enum { STABLE = 2000, EXTRA = 30000 };
    for (int seed = 1; seed <= 5; seed++) {
        keytab kt;
        keytab_init(&kt, item_key);
        kv_rand_seed((uint64_t)seed);
        for (int i = 0; i < STABLE; i++)
            add(&kt, item_new(i));
        int *count = calloc(STABLE + EXTRA, sizeof *count);
        scan_state st = { count, STABLE + EXTRA };
        uint64_t cursor = 0;
        int steps = 0, grown = 0, shrunk = 0, extra = STABLE;
        size_t max_slots = 0, min_slots_after = SIZE_MAX;
        do {
            cursor = keytab_scan(&kt, cursor, scan_cb, &st);
            steps++;
            if (steps > 30 && extra < STABLE + EXTRA) {
                /* grow: a burst of new keys between two SCAN calls */
                for (int j = 0; j < 2000 && extra < STABLE + EXTRA; j++)
                    add(&kt, item_new(extra++));
                grown = 1;
            } else if (extra == STABLE + EXTRA && !shrunk) {
                for (int i = STABLE; i < STABLE + EXTRA; i++) {
                    char key[24];
                    int n = snprintf(key, sizeof key, "key:%d", i);
                    free(keytab_remove(&kt, key, (size_t)n, hash_of(i)));
                }
                shrunk = 1;
            }
            if (shrunk)
                keytab_tidy(&kt);
            keytab_rehash(&kt, 64); /* what the server's cron does */
            if (keytab_slots(&kt) > max_slots)
                max_slots = keytab_slots(&kt);
            if (shrunk && keytab_slots(&kt) < min_slots_after)
                min_slots_after = keytab_slots(&kt);
            assert_true(steps < 1000000);
        } while (cursor != 0);
        assert_true(grown && shrunk);
        assert_true(max_slots >= 32768);
        assert_true(min_slots_after <= 8192);
        for (int i = 0; i < STABLE; i++)
            assert_true(count[i] >= 1);
        free(count);
        int freed = 0;
        keytab_clear(&kt, free_cb, &freed);
        assert_int_equal(freed, STABLE);
    }
}

static void test_scan_without_changes_reports_each_once(void **state)
{
    keytab kt;
    keytab_init(&kt, item_key);
    enum { N = 5000 };
    for (int i = 0; i < N; i++)
        add(&kt, item_new(i));
    while (keytab_rehash(&kt, 1000)) {
    }
    int *count = calloc(N, sizeof *count);
    scan_state st = { count, N };
    uint64_t cursor = 0;
    do {
        cursor = keytab_scan(&kt, cursor, scan_cb, &st);
    } while (cursor != 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(count[i], 1);
    free(count);
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal(freed, N);
}

/* A full table (long probe runs) moved one slot at a time: at every step
 * each item is found and a full scan reports it, including the items whose
 * probe run crosses the boundary between moved and unmoved slots. */
static void test_every_step_of_a_move(void **state)
{
    enum { N = 440 };
    keytab kt;
    keytab_init(&kt, item_key);
    for (int i = 0; i < N; i++)
        add(&kt, item_new(i));
    assert_int_equal(keytab_slots(&kt), 512);
    keytab_expand(&kt, 2000);
    assert_true(keytab_resizing(&kt));
    int *count = calloc(N, sizeof *count);
    scan_state st = { count, N };
    int steps = 0;
    do {
        memset(count, 0, N * sizeof *count);
        uint64_t cursor = 0;
        do {
            cursor = keytab_scan(&kt, cursor, scan_cb, &st);
        } while (cursor != 0);
        for (int i = 0; i < N; i++)
            assert_true(count[i] >= 1);
        kt.pause++; /* no extra steps from the lookups */
        for (int i = 0; i < N; i++)
            assert_non_null(find(&kt, i));
        kt.pause--;
        steps++;
    } while (keytab_rehash(&kt, 1));
    assert_true(steps > 400);
    free(count);
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal(freed, N);
}

static void test_iterator_and_random(void **state)
{
    keytab kt;
    keytab_init(&kt, item_key);
    assert_null(keytab_random(&kt));
    for (int i = 0; i < 1000; i++)
        add(&kt, item_new(i));
    int hits[1000] = { 0 };
    keytab_iter it;
    keytab_iter_init(&it, &kt);
    int n = 0;
    for (item *x; (x = keytab_iter_next(&it));) {
        hits[x->value]++;
        n++;
    }
    keytab_iter_end(&it);
    assert_int_equal(n, 1000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(hits[i], 1);
    /* iteration may remove and free the current item */
    keytab_iter_init(&it, &kt);
    for (item *x; (x = keytab_iter_next(&it));) {
        if (x->value % 2) {
            keytab_remove_item(&kt, x, dict_hash(x->key, x->klen));
            free(x);
        }
    }
    keytab_iter_end(&it);
    assert_int_equal(keytab_size(&kt), 500);
    int seen[1000] = { 0 };
    for (int i = 0; i < 20000; i++) {
        item *r = keytab_random(&kt);
        assert_non_null(r);
        assert_int_equal(r->value % 2, 0);
        seen[r->value] = 1;
    }
    int distinct = 0;
    for (int i = 0; i < 1000; i++)
        distinct += seen[i];
    assert_int_equal(distinct, 500); /* uniform: all of them show up */
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal(freed, 500);
}

static void test_expand_reserves(void **state)
{
    keytab kt;
    keytab_init(&kt, item_key);
    keytab_expand(&kt, 10000);
    size_t slots = keytab_slots(&kt);
    assert_true(slots * 7 >= 10000 * 8);
    for (int i = 0; i < 10000; i++)
        add(&kt, item_new(i));
    assert_int_equal(keytab_slots(&kt), slots);
    assert_false(keytab_resizing(&kt));
    int freed = 0;
    keytab_clear(&kt, free_cb, &freed);
    assert_int_equal(freed, 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_model),
        cmocka_unit_test(test_grow_and_shrink),
        cmocka_unit_test(test_tombstones_stay_bounded),
        cmocka_unit_test(test_scan_guarantee_across_resizes),
        cmocka_unit_test(test_scan_without_changes_reports_each_once),
        cmocka_unit_test(test_every_step_of_a_move),
        cmocka_unit_test(test_iterator_and_random),
        cmocka_unit_test(test_expand_reserves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
