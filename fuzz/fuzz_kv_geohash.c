/* libFuzzer target: geohash encode/decode of brisk-kv (src/kv/geohash.c).
 *
 * The input is read as raw doubles and small integers:
 *   - a longitude/latitude pair, both as raw IEEE doubles (NaN, infinities,
 *     out-of-range values) and mapped into the WGS84 box, a step 1..26;
 *   - a score (raw double) for geohash_decode_score;
 *   - a second point and a radius for the search cover.
 * Checked:
 *   - a point outside the box (or NaN) is refused and *out is untouched;
 *   - a point inside encodes, and decode(encode(x)) is a cell of the
 *     step's size that contains x, inside the box (bar the upper edge,
 *     which keeps its extra bit as Redis does);
 *   - the 52-bit score of a point decodes to the centre of its cell, within
 *     half a cell of the point;
 *   - any score decodes to a point inside the box;
 *   - distances are finite, non-negative and symmetric;
 *   - a point inside a search circle of up to 500 km, centred away from
 *     the poles and the antimeridian, falls in one of the cells the cover
 *     visits (else GEOSEARCH would miss it). */
#include "kv/geohash.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "fuzz_kv_geohash: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

typedef struct {
    const uint8_t *p;
    size_t n;
} input;

static uint64_t take_u64(input *in)
{
    uint64_t v = 0;
    size_t k = in->n < 8 ? in->n : 8;
    memcpy(&v, in->p, k);
    in->p += k;
    in->n -= k;
    return v;
}

static double take_raw(input *in)
{
    uint64_t u = take_u64(in);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* A value in [lo, hi] from 64 input bits (both ends reachable). */
static double take_in(input *in, double lo, double hi)
{
    uint64_t u = take_u64(in);
    if (u == UINT64_MAX)
        return hi;
    return lo + (hi - lo) * ((double)(u >> 11) / 9007199254740992.0);
}

static const geohash_range wlon = { GEOHASH_LON_MIN, GEOHASH_LON_MAX };
static const geohash_range wlat = { GEOHASH_LAT_MIN, GEOHASH_LAT_MAX };

static int in_box(double lon, double lat)
{
    return lon >= GEOHASH_LON_MIN && lon <= GEOHASH_LON_MAX && lat >= GEOHASH_LAT_MIN &&
           lat <= GEOHASH_LAT_MAX;
}

static void check_point(double lon, double lat, int step)
{
    geohash_bits h = { 0x1234, 77 };
    int ok = geohash_encode(wlon, wlat, lon, lat, step, &h);
    if (!in_box(lon, lat)) {
        CHECK(!ok);
        CHECK(h.bits == 0x1234 && h.step == 77);
        uint64_t b = 42;
        CHECK(!geohash_encode_wgs84(lon, lat, &b) && b == 42);
        return;
    }
    CHECK(ok);
    CHECK(h.step == step);
    CHECK(h.bits >> (2 * step) <= 3); /* only the upper edges carry a bit past the grid */
    geohash_area a;
    CHECK(geohash_decode(wlon, wlat, h, &a) || (h.bits == 0 && step == 0));
    double cw = 360.0 / (double)(1ull << step), chh = (GEOHASH_LAT_MAX - GEOHASH_LAT_MIN) / (double)(1ull << step);
    double eps = 1e-9;
    CHECK(a.lon.min <= lon + eps && lon <= a.lon.max + eps);
    CHECK(a.lat.min <= lat + eps && lat <= a.lat.max + eps);
    CHECK(fabs((a.lon.max - a.lon.min) - cw) <= eps && fabs((a.lat.max - a.lat.min) - chh) <= eps);
    /* A point at the upper edge, or close enough that the offset rounds to
     * 2^step, gets the cell past the grid (Redis computes the same). */
    if (a.lon.min < GEOHASH_LON_MAX - eps)
        CHECK(a.lon.max <= GEOHASH_LON_MAX + eps);
    else
        CHECK(lon >= GEOHASH_LON_MAX - 1e-9);
    if (a.lat.min < GEOHASH_LAT_MAX - eps)
        CHECK(a.lat.max <= GEOHASH_LAT_MAX + eps);
    else
        CHECK(lat >= GEOHASH_LAT_MAX - 1e-9);
    CHECK(a.lon.min >= GEOHASH_LON_MIN - eps && a.lat.min >= GEOHASH_LAT_MIN - eps);

    /* The score: centre of the step-26 cell, within half a cell. */
    uint64_t bits52;
    CHECK(geohash_encode_wgs84(lon, lat, &bits52));
    double xy[2];
    CHECK(geohash_decode_score((double)bits52, xy) || bits52 == 0);
    if (bits52 != 0 && lon < GEOHASH_LON_MAX - 1e-9 && lat < GEOHASH_LAT_MAX - 1e-9) {
        CHECK(fabs(xy[0] - lon) <= 360.0 / (1 << 26) / 2 + eps);
        CHECK(fabs(xy[1] - lat) <= (GEOHASH_LAT_MAX - GEOHASH_LAT_MIN) / (1 << 26) / 2 + eps);
        /* The score's double is exact (52 bits) and re-encodes the same. */
        uint64_t again;
        CHECK((uint64_t)(double)bits52 == bits52);
        CHECK(geohash_encode_wgs84(xy[0], xy[1], &again) && again == bits52);
    }
}

static void check_cover(double lon, double lat, double lon2, double lat2, double radius)
{
    geohash_shape s = { .type = GEOHASH_CIRCLE, .xy = { lon, lat }, .conversion = 1,
                        .radius = radius };
    double d;
    if (!geohash_in_shape(&s, lon2, lat2, &d))
        return;
    CHECK(d <= radius && d >= 0);
    geohash_cover cv;
    geohash_cover_shape(&s, &cv);
    uint64_t score;
    CHECK(geohash_encode_wgs84(lon2, lat2, &score));
    int found = 0;
    for (int i = 0; i < 9 && !found; i++) {
        if (cv.cell[i].bits == 0 && cv.cell[i].step == 0)
            continue;
        uint64_t mn, mx;
        geohash_cell_scores(cv.cell[i], &mn, &mx);
        found = score >= mn && score < mx;
    }
    if (!found)
        fprintf(stderr, "centre %.17g,%.17g point %.17g,%.17g radius %.17g dist %.17g\n", lon,
                lat, lon2, lat2, radius, d);
    CHECK(found);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = { data, size };
    unsigned mode = in.n ? in.p[0] : 0;
    if (in.n) {
        in.p++;
        in.n--;
    }
    int step = 1 + (int)((mode >> 2) % GEOHASH_STEP_MAX);
    double lon, lat;
    if (mode & 1) { /* raw doubles: NaN, infinities, anything */
        lon = take_raw(&in);
        lat = take_raw(&in);
    } else { /* a bit past the box on every side */
        lon = take_in(&in, -181, 181);
        lat = take_in(&in, -86, 86);
    }
    check_point(lon, lat, step);

    double score = take_raw(&in), xy[2];
    if (geohash_decode_score(score, xy))
        CHECK(in_box(xy[0], xy[1]));

    if (!in_box(lon, lat))
        return 0;
    double lon2 = take_in(&in, GEOHASH_LON_MIN, GEOHASH_LON_MAX);
    double lat2 = take_in(&in, GEOHASH_LAT_MIN, GEOHASH_LAT_MAX);
    double d1 = geohash_distance(lon, lat, lon2, lat2), d2 = geohash_distance(lon2, lat2, lon, lat);
    CHECK(isfinite(d1) && d1 >= 0 && fabs(d1 - d2) <= 1e-6 * (1 + d1));
    CHECK(d1 <= M_PI * GEOHASH_EARTH_RADIUS_M * (1 + 1e-9));
    if (mode & 2) { /* the second point near the first */
        lon2 = lon + take_in(&in, -5, 5);
        lat2 = lat + take_in(&in, -5, 5);
        if (!in_box(lon2, lat2))
            return 0;
    }
    double radius = take_in(&in, 0, 500000);
    if (fabs(lat) < 70 && fabs(lon) < 170)
        check_cover(lon, lat, lon2, lat2, radius);
    return 0;
}
