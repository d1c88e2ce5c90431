/* Geohash encoding, decoding, neighbours and the search cover (geohash.h).
 * Every floating-point step follows the order of operations Redis uses, so
 * scores, decoded coordinates and distances agree to the last bit. */
#include "kv/geohash.h"

#include <math.h>
#include <stddef.h>

static const geohash_range wgs_lon = { GEOHASH_LON_MIN, GEOHASH_LON_MAX };
static const geohash_range wgs_lat = { GEOHASH_LAT_MIN, GEOHASH_LAT_MAX };

/* Degrees per radian factor, as one constant so every conversion rounds
 * the same way. */
static const double deg_to_rad = M_PI / 180.0;

/* Greatest distance (metres) the Mercator projection spans; a search wider
 * than this needs the coarsest step. */
#define MERCATOR_MAX 20037726.37

/* The bits of v spread to the even positions of a 64-bit word. */
static uint64_t spread_bits(uint32_t v)
{
    uint64_t x = v;
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    x = (x | (x << 1)) & 0x5555555555555555ull;
    return x;
}

/* The inverse of spread_bits: the even bits of x packed together. */
static uint32_t gather_bits(uint64_t x)
{
    x &= 0x5555555555555555ull;
    x = (x | (x >> 1)) & 0x3333333333333333ull;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFull;
    return (uint32_t)x;
}

/* Latitude on the even bits, longitude on the odd ones. */
static uint64_t interleave(uint32_t lat, uint32_t lon)
{
    return spread_bits(lat) | (spread_bits(lon) << 1);
}

int geohash_encode(geohash_range lon_r, geohash_range lat_r, double lon, double lat, int step,
                   geohash_bits *out)
{
    if (lon > GEOHASH_LON_MAX || lon < GEOHASH_LON_MIN || lat > GEOHASH_LAT_MAX ||
        lat < GEOHASH_LAT_MIN)
        return 0;
    if (lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max)
        return 0;
    double lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min);
    double lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min);
    lat_off *= (double)(1ull << step);
    lon_off *= (double)(1ull << step);
    /* At the upper limit the offset is exactly 2^step: it keeps that bit,
     * past the cell grid, as Redis's scores do. */
    out->bits = interleave((uint32_t)lat_off, (uint32_t)lon_off);
    out->step = (uint8_t)step;
    return 1;
}

int geohash_encode_wgs84(double lon, double lat, uint64_t *bits52)
{
    geohash_bits h;
    if (!geohash_encode(wgs_lon, wgs_lat, lon, lat, GEOHASH_STEP_MAX, &h))
        return 0;
    *bits52 = h.bits << (52 - 2 * GEOHASH_STEP_MAX);
    return 1;
}

int geohash_decode(geohash_range lon_r, geohash_range lat_r, geohash_bits h, geohash_area *area)
{
    if (h.bits == 0 && h.step == 0)
        return 0;
    uint32_t ilat = gather_bits(h.bits);
    uint32_t ilon = gather_bits(h.bits >> 1);
    double cells = (double)(1ull << h.step);
    double lat_scale = lat_r.max - lat_r.min;
    double lon_scale = lon_r.max - lon_r.min;
    area->lat.min = lat_r.min + (ilat * 1.0 / cells) * lat_scale;
    area->lat.max = lat_r.min + ((uint32_t)(ilat + 1) * 1.0 / cells) * lat_scale;
    area->lon.min = lon_r.min + (ilon * 1.0 / cells) * lon_scale;
    area->lon.max = lon_r.min + ((uint32_t)(ilon + 1) * 1.0 / cells) * lon_scale;
    return 1;
}

/* A score's double as the integer it stands for. Scores a geo command did
 * not write may be negative or huge: convert them the way an x86-64 cast
 * does (Redis casts directly) without the undefined behaviour. */
static uint64_t score_to_bits(double score)
{
    if (score >= 0 && score < 18446744073709551616.0)
        return (uint64_t)score;
    if (score < 0 && score > -9223372036854775808.0)
        return (uint64_t)(int64_t)score;
    return score >= 18446744073709551616.0 ? 0 : 0x8000000000000000ull;
}

int geohash_decode_score(double score, double xy[2])
{
    geohash_bits h = { score_to_bits(score), GEOHASH_STEP_MAX };
    geohash_area a;
    if (!geohash_decode(wgs_lon, wgs_lat, h, &a))
        return 0;
    double lon = (a.lon.min + a.lon.max) / 2;
    double lat = (a.lat.min + a.lat.max) / 2;
    xy[0] = lon > GEOHASH_LON_MAX ? GEOHASH_LON_MAX : lon < GEOHASH_LON_MIN ? GEOHASH_LON_MIN : lon;
    xy[1] = lat > GEOHASH_LAT_MAX ? GEOHASH_LAT_MAX : lat < GEOHASH_LAT_MIN ? GEOHASH_LAT_MIN : lat;
    return 1;
}

static double lat_distance(double lat1, double lat2)
{
    return GEOHASH_EARTH_RADIUS_M * fabs(lat2 * deg_to_rad - lat1 * deg_to_rad);
}

double geohash_distance(double lon1, double lat1, double lon2, double lat2)
{
    double lon1r = lon1 * deg_to_rad, lon2r = lon2 * deg_to_rad;
    double v = sin((lon2r - lon1r) / 2);
    /* Same meridian: the distance is the latitude difference alone. */
    if (v == 0.0)
        return lat_distance(lat1, lat2);
    double lat1r = lat1 * deg_to_rad, lat2r = lat2 * deg_to_rad;
    double u = sin((lat2r - lat1r) / 2);
    double a = u * u + cos(lat1r) * cos(lat2r) * v * v;
    return 2.0 * GEOHASH_EARTH_RADIUS_M * asin(sqrt(a));
}

int geohash_in_shape(const geohash_shape *s, double x2, double y2, double *dist)
{
    double x1 = s->xy[0], y1 = s->xy[1];
    if (s->type == GEOHASH_CIRCLE) {
        double d = geohash_distance(x1, y1, x2, y2);
        if (d > s->radius * s->conversion)
            return 0;
        *dist = d;
        return 1;
    }
    double width_m = s->width * s->conversion, height_m = s->height * s->conversion;
    /* The latitude test is the cheaper one: it goes first. */
    if (lat_distance(y2, y1) > height_m / 2)
        return 0;
    if (geohash_distance(x2, y2, x1, y2) > width_m / 2)
        return 0;
    *dist = geohash_distance(x1, y1, x2, y2);
    return 1;
}

/* The coarsest step whose cells (with the neighbours) still cover a search
 * of range_m metres around latitude lat. */
static int steps_for_range(double range_m, double lat)
{
    if (range_m == 0)
        return GEOHASH_STEP_MAX;
    int step = 1;
    while (range_m < MERCATOR_MAX) {
        range_m *= 2;
        step++;
    }
    step -= 2; /* keep the range inside the 3x3 cells in most cases */
    /* Meridians converge towards the poles: cells get narrower. */
    if (lat > 66 || lat < -66) {
        step--;
        if (lat > 80 || lat < -80)
            step--;
    }
    if (step < 1)
        step = 1;
    if (step > GEOHASH_STEP_MAX)
        step = GEOHASH_STEP_MAX;
    return step;
}

/* Moves one coordinate of h by d cells (wrapping within the step); odd = 1
 * moves the longitude, 0 the latitude. The other coordinate keeps all its
 * bits. */
static geohash_bits cell_move(geohash_bits h, int odd, int d)
{
    if (d == 0)
        return h;
    uint64_t keep = h.bits & (odd ? 0x5555555555555555ull : 0xAAAAAAAAAAAAAAAAull);
    uint32_t v = gather_bits(odd ? h.bits >> 1 : h.bits);
    uint32_t mask = (uint32_t)((1ull << h.step) - 1);
    v = (uint32_t)(v + (uint32_t)d) & mask;
    h.bits = keep | (spread_bits(v) << (odd ? 1 : 0));
    return h;
}

static geohash_bits cell_neighbour(geohash_bits h, int dlon, int dlat)
{
    return cell_move(cell_move(h, 1, dlon), 0, dlat);
}

/* The 3x3 cells around h in the visiting order of geohash_cover. */
static void cells_around(geohash_bits h, geohash_bits cell[9])
{
    static const int8_t dirs[8][2] = {
        { 0, 1 }, { 0, -1 }, { 1, 0 }, { -1, 0 }, /* N S E W */
        { 1, 1 }, { -1, 1 }, { 1, -1 }, { -1, -1 }, /* NE NW SE SW */
    };
    cell[0] = h;
    for (int i = 0; i < 8; i++)
        cell[i + 1] = cell_neighbour(h, dirs[i][0], dirs[i][1]);
}

enum { C_CENTRE, C_N, C_S, C_E, C_W, C_NE, C_NW, C_SE, C_SW };

static void cell_zero(geohash_cover *c, int a, int b, int d)
{
    geohash_bits z = { 0, 0 };
    c->cell[a] = z;
    c->cell[b] = z;
    c->cell[d] = z;
}

void geohash_cover_shape(const geohash_shape *s, geohash_cover *out)
{
    double lon = s->xy[0], lat = s->xy[1];
    /* The shape's bounding box in degrees. */
    double half_h = s->conversion * (s->type == GEOHASH_CIRCLE ? s->radius : s->height / 2);
    double half_w = s->conversion * (s->type == GEOHASH_CIRCLE ? s->radius : s->width / 2);
    double lat_delta = half_h / GEOHASH_EARTH_RADIUS_M / deg_to_rad;
    double lon_delta_top =
        half_w / GEOHASH_EARTH_RADIUS_M / cos((lat + lat_delta) * deg_to_rad) / deg_to_rad;
    double lon_delta_bottom =
        half_w / GEOHASH_EARTH_RADIUS_M / cos((lat - lat_delta) * deg_to_rad) / deg_to_rad;
    /* The widest edge is the one nearer the equator. */
    int south = lat < 0;
    double min_lon = south ? lon - lon_delta_bottom : lon - lon_delta_top;
    double max_lon = south ? lon + lon_delta_bottom : lon + lon_delta_top;
    double min_lat = lat - lat_delta, max_lat = lat + lat_delta;

    double range_m = s->type == GEOHASH_CIRCLE
                         ? s->radius
                         : sqrt((s->width / 2) * (s->width / 2) + (s->height / 2) * (s->height / 2));
    range_m *= s->conversion;
    int steps = steps_for_range(range_m, lat);

    geohash_bits h = { 0, 0 };
    geohash_encode(wgs_lon, wgs_lat, lon, lat, steps, &h);
    cells_around(h, out->cell);
    geohash_decode(wgs_lon, wgs_lat, h, &out->area);

    /* Near a cell edge the neighbours may still not reach the whole
     * shape: then go one step coarser. */
    geohash_area n, so, e, w;
    geohash_decode(wgs_lon, wgs_lat, out->cell[C_N], &n);
    geohash_decode(wgs_lon, wgs_lat, out->cell[C_S], &so);
    geohash_decode(wgs_lon, wgs_lat, out->cell[C_E], &e);
    geohash_decode(wgs_lon, wgs_lat, out->cell[C_W], &w);
    int coarser = n.lat.max < max_lat || so.lat.min > min_lat || e.lon.max < max_lon ||
                  w.lon.min > min_lon;
    if (steps > 1 && coarser) {
        steps--;
        geohash_encode(wgs_lon, wgs_lat, lon, lat, steps, &h);
        cells_around(h, out->cell);
        geohash_decode(wgs_lon, wgs_lat, h, &out->area);
    }

    /* Drop the neighbours on a side the shape does not reach. */
    if (steps >= 2) {
        if (out->area.lat.min < min_lat)
            cell_zero(out, C_S, C_SW, C_SE);
        if (out->area.lat.max > max_lat)
            cell_zero(out, C_N, C_NE, C_NW);
        if (out->area.lon.min < min_lon)
            cell_zero(out, C_W, C_SW, C_NW);
        if (out->area.lon.max > max_lon)
            cell_zero(out, C_E, C_SE, C_NE);
    }
}

void geohash_cell_scores(geohash_bits h, uint64_t *min, uint64_t *max)
{
    int shift = 52 - 2 * h.step;
    *min = h.bits << shift;
    *max = (h.bits + 1) << shift;
}
