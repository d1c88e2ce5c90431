/* Unit tests for the sorted set (src/kv/skiplist.c): random inserts,
 * score updates and deletes checked against a sorted-array model, plus
 * ranks and score/lex ranges. */
#include "kv/skiplist.h"
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
    double score;
    char member[16];
    int live;
} ref;

#define NMEM 400

static int ref_cmp(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return strcmp(x->member, y->member);
}

/* Sorted live entries of the model. */
static int model_sorted(const ref *m, ref *out)
{
    int n = 0;
    for (int i = 0; i < NMEM; i++)
        if (m[i].live)
            out[n++] = m[i];
    qsort(out, (size_t)n, sizeof *out, ref_cmp);
    return n;
}

static bk_str S(const char *s)
{
    return (bk_str){ s, strlen(s) };
}

static void check_against_model(zset *z, const ref *m)
{
    ref sorted[NMEM];
    int n = model_sorted(m, sorted);
    assert_int_equal(zset_check(z), 0);
    assert_int_equal(z->length, (size_t)n);
    int i = 0;
    for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward, i++) {
        bk_str mem = zs_member(x);
        assert_int_equal(mem.len, strlen(sorted[i].member));
        assert_memory_equal(mem.p, sorted[i].member, mem.len);
        assert_true(x->score == sorted[i].score);
        assert_int_equal(zset_rank(z, x), (size_t)i + 1);
        assert_ptr_equal(zset_at_rank(z, (size_t)i + 1), x);
    }
    assert_int_equal(i, n);
}

static void test_random_ops_vs_model(void **state)
{
    kv_rand_seed(12345);
    srand(7);
    zset *z = zset_new();
    ref m[NMEM];
    memset(m, 0, sizeof m);
    for (int i = 0; i < NMEM; i++)
        snprintf(m[i].member, sizeof m[i].member, "m%03d", i);
    for (int step = 0; step < 20000; step++) {
        int i = rand() % NMEM;
        int op = rand() % 4;
        /* few distinct scores so ties (ordered by member) are common */
        double score = (double)(rand() % 50) - 10;
        if (op <= 1) { /* insert or update */
            zs_node *x = zset_find(z, S(m[i].member));
            if (m[i].live) {
                assert_non_null(x);
                zset_update_score(z, x, score);
            } else {
                assert_null(x);
                zset_insert(z, score, S(m[i].member));
            }
            m[i].live = 1;
            m[i].score = score;
        } else if (op == 2 && m[i].live) {
            zs_node *x = zset_find(z, S(m[i].member));
            assert_non_null(x);
            zset_delete(z, x);
            m[i].live = 0;
        } else {
            zs_node *x = zset_find(z, S(m[i].member));
            assert_true((x != NULL) == (m[i].live != 0));
            if (x)
                assert_true(x->score == m[i].score);
        }
        if (step % 1000 == 0)
            check_against_model(z, m);
    }
    check_against_model(z, m);

    /* score ranges against the model */
    ref sorted[NMEM];
    int n = model_sorted(m, sorted);
    for (int t = 0; t < 200; t++) {
        zrange_score r = { .min = (double)(rand() % 60) - 15, .max = (double)(rand() % 60) - 15,
                           .minex = rand() % 2, .maxex = rand() % 2 };
        int first = -1, last = -1;
        for (int k = 0; k < n; k++) {
            if (zset_score_gte_min(sorted[k].score, &r) && zset_score_lte_max(sorted[k].score, &r)) {
                if (first < 0)
                    first = k;
                last = k;
            }
        }
        zs_node *f = zset_first_in_score(z, &r), *l = zset_last_in_score(z, &r);
        if (first < 0) {
            assert_null(f);
            assert_null(l);
        } else {
            assert_non_null(f);
            assert_non_null(l);
            assert_int_equal(zset_rank(z, f), (size_t)first + 1);
            assert_int_equal(zset_rank(z, l), (size_t)last + 1);
        }
    }
    zset_free(z);
}

static void test_lex_ranges(void **state)
{
    zset *z = zset_new();
    const char *names[] = { "a", "b", "c", "d", "e", "f", "g" };
    for (size_t i = 0; i < 7; i++)
        zset_insert(z, 0, S(names[i]));
    zrange_lex r;
    assert_int_equal(zset_parse_lex_range(S("[b"), S("(e"), &r), 0);
    zs_node *f = zset_first_in_lex(z, &r), *l = zset_last_in_lex(z, &r);
    assert_memory_equal(zs_member(f).p, "b", 1);
    assert_memory_equal(zs_member(l).p, "d", 1);
    assert_int_equal(zset_parse_lex_range(S("-"), S("+"), &r), 0);
    assert_int_equal(zset_rank(z, zset_last_in_lex(z, &r)), 7);
    assert_int_equal(zset_parse_lex_range(S("(g"), S("+"), &r), 0);
    assert_null(zset_first_in_lex(z, &r));
    assert_int_equal(zset_parse_lex_range(S("b"), S("+"), &r), -1);
    assert_int_equal(zset_parse_lex_range(S("+"), S("-"), &r), 0);
    assert_null(zset_first_in_lex(z, &r));
    zset_free(z);
}

static void test_score_range_parse(void **state)
{
    zrange_score r;
    assert_int_equal(zset_parse_score_range(S("(1.5"), S("+inf"), &r), 0);
    assert_true(r.minex && !r.maxex && r.min == 1.5 && r.max > 1e308);
    assert_int_equal(zset_parse_score_range(S("-inf"), S("(3"), &r), 0);
    assert_true(r.maxex && r.max == 3 && r.min < -1e308);
    assert_int_equal(zset_parse_score_range(S("abc"), S("1"), &r), -1);
    assert_int_equal(zset_parse_score_range(S("1"), S("nan"), &r), -1);
}

static void test_dup_and_big(void **state)
{
    zset *z = zset_new();
    char b[32];
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(b, sizeof b, "element:%d", i);
        zset_insert(z, (double)(i % 100), (bk_str){ b, (size_t)n });
    }
    assert_int_equal(zset_check(z), 0);
    zset *d = zset_dup(z);
    assert_int_equal(zset_check(d), 0);
    assert_int_equal(d->length, 20000);
    zs_node *x = z->header->lv[0].forward, *y = d->header->lv[0].forward;
    for (; x && y; x = x->lv[0].forward, y = y->lv[0].forward) {
        assert_true(x->score == y->score);
        assert_true(str_eq(zs_member(x), zs_member(y)));
    }
    assert_null(x);
    assert_null(y);
    zset_free(z);
    zset_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_ops_vs_model),
        cmocka_unit_test(test_lex_ranges),
        cmocka_unit_test(test_score_range_parse),
        cmocka_unit_test(test_dup_and_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
