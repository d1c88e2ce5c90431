/* Unit tests for the geohash of the GEO commands (src/kv/geohash.c): the
 * scores, coordinates and distances Redis 7.0 gives for known points. */
#include "kv/geohash.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void test_encode_known_points(void **state)
{
    uint64_t bits;
    /* GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania */
    assert_true(geohash_encode_wgs84(13.361389, 38.115556, &bits));
    assert_true(bits == 3479099956230698ull);
    assert_true(geohash_encode_wgs84(15.087269, 37.502669, &bits));
    assert_true(bits == 3479447370796909ull);
    /* the nyc set of Redis's geo.tcl */
    assert_true(geohash_encode_wgs84(-73.9454966, 40.747533, &bits));
    assert_true(bits == 1791875804419201ull);
    /* outside the Mercator limits */
    assert_false(geohash_encode_wgs84(180.0001, 0, &bits));
    assert_false(geohash_encode_wgs84(0, 85.06, &bits));
    assert_false(geohash_encode_wgs84(0, -85.05112879, &bits));
    assert_true(geohash_encode_wgs84(180, 85.05112878, &bits));
}

static void test_decode_round_trip(void **state)
{
    double xy[2];
    char b[64];
    assert_true(geohash_decode_score(3479099956230698.0, xy));
    /* GEOPOS prints %.17Lf */
    snprintf(b, sizeof b, "%.17Lf", (long double)xy[0]);
    assert_string_equal(b, "13.36138933897018433");
    snprintf(b, sizeof b, "%.17Lf", (long double)xy[1]);
    assert_string_equal(b, "38.11555639549629859");
    /* an out-of-grid score decodes clamped to the limits */
    assert_true(geohash_decode_score(4503599627370495.0, xy));
    assert_true(xy[0] <= GEOHASH_LON_MAX && xy[1] <= GEOHASH_LAT_MAX);
}

static void test_distance(void **state)
{
    double a[2], b[2];
    assert_true(geohash_decode_score(3479099956230698.0, a));
    assert_true(geohash_decode_score(3479447370796909.0, b));
    char s[64];
    snprintf(s, sizeof s, "%.4f", geohash_distance(a[0], a[1], b[0], b[1]));
    assert_string_equal(s, "166274.1516");
    assert_true(geohash_distance(a[0], a[1], a[0], a[1]) == 0.0);
}

static void test_cover_and_cells(void **state)
{
    geohash_shape s = { .type = GEOHASH_CIRCLE, .xy = { 15, 37 }, .conversion = 1000,
                        .radius = 200 };
    geohash_cover cv;
    geohash_cover_shape(&s, &cv);
    assert_true(cv.cell[0].step >= 1 && cv.cell[0].step <= GEOHASH_STEP_MAX);
    uint64_t min, max;
    geohash_cell_scores(cv.cell[0], &min, &max);
    /* the centre's own cell holds the centre's score */
    uint64_t bits;
    assert_true(geohash_encode_wgs84(15, 37, &bits));
    assert_true(bits >= min && bits < max);
    /* a huge radius takes the coarsest step and the whole world */
    s.radius = 1e308;
    geohash_cover_shape(&s, &cv);
    assert_int_equal(cv.cell[0].step, 1);
    /* the point itself is in any circle around it */
    double d;
    s.radius = 0;
    assert_true(geohash_in_shape(&s, 15, 37, &d));
    assert_true(d == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_known_points),
        cmocka_unit_test(test_decode_round_trip),
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_cover_and_cells),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
