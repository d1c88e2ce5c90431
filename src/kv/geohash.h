/* Geohash for the GEO commands: a point is a 52-bit integer whose bits
 * interleave 26 bits of longitude (odd bits) and 26 bits of latitude (even
 * bits) over the Web-Mercator box (longitude -180..180, latitude
 * -85.05112878..85.05112878). That integer, as a double, is the member's
 * score in the sorted set, so a geo set is bit-identical to Redis's.
 *
 * A search covers the shape (circle or box) with the cell of the centre at
 * a coarse enough step plus its eight neighbours; each cell is one score
 * range of the sorted set, and every candidate is then filtered by its
 * real distance (haversine, Redis's earth radius). */
#ifndef BRISK_KV_GEOHASH_H
#define BRISK_KV_GEOHASH_H

#include <stdint.h>

#define GEOHASH_STEP_MAX 26
#define GEOHASH_LAT_MIN (-85.05112878)
#define GEOHASH_LAT_MAX 85.05112878
#define GEOHASH_LON_MIN (-180.0)
#define GEOHASH_LON_MAX 180.0
#define GEOHASH_EARTH_RADIUS_M 6372797.560856

typedef struct {
    uint64_t bits;
    uint8_t step; /* bits per coordinate; 0 with bits 0 marks "no cell" */
} geohash_bits;

typedef struct {
    double min, max;
} geohash_range;

typedef struct {
    geohash_range lon, lat;
} geohash_area;

/* The cells a search visits: the centre's cell and its neighbours, in the
 * order north, south, east, west, north-east, north-west, south-east,
 * south-west. A neighbour the shape cannot reach is zeroed. */
typedef struct {
    geohash_bits cell[9];
    geohash_area area; /* of the centre cell */
} geohash_cover;

enum geohash_shape_type { GEOHASH_CIRCLE, GEOHASH_BOX };

typedef struct {
    enum geohash_shape_type type;
    double xy[2];       /* centre: longitude, latitude */
    double conversion;  /* metres per unit of radius/width/height */
    double radius;      /* GEOHASH_CIRCLE, in units */
    double width, height; /* GEOHASH_BOX, in units */
} geohash_shape;

/* Encodes lon/lat at step bits per coordinate over the given ranges.
 * Returns 0 (and leaves *out untouched) outside the Mercator limits or the
 * ranges. */
int geohash_encode(geohash_range lon_r, geohash_range lat_r, double lon, double lat, int step,
                   geohash_bits *out);
/* The WGS84 ranges above, at GEOHASH_STEP_MAX: the score of a point. */
int geohash_encode_wgs84(double lon, double lat, uint64_t *bits52);
/* The cell a hash stands for. Returns 0 for a zeroed hash. */
int geohash_decode(geohash_range lon_r, geohash_range lat_r, geohash_bits h, geohash_area *area);
/* The centre of the cell a score stands for (clamped to the limits).
 * Returns 0 when it cannot be decoded. */
int geohash_decode_score(double score, double xy[2]);
/* Great-circle distance in metres between two lon/lat points. */
double geohash_distance(double lon1, double lat1, double lon2, double lat2);
/* Whether the point (x2, y2) lies in the shape; *dist gets its distance
 * in metres from the centre when it does. */
int geohash_in_shape(const geohash_shape *s, double x2, double y2, double *dist);
/* The cells to visit for a search of shape s. */
void geohash_cover_shape(const geohash_shape *s, geohash_cover *out);
/* [min, max) of the scores inside cell h. */
void geohash_cell_scores(geohash_bits h, uint64_t *min, uint64_t *max);

#endif
