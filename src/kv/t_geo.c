/* GEO commands: a geo set is a sorted set whose scores are 52-bit geohashes
 * (geohash.h), so it reads and writes the same as Redis's and every sorted
 * set command works on it. */
#include "kv/notify.h"
#include "kv/db.h"
#include "kv/geohash.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ERR_DECODE_MEMBER "ERR could not decode requested zset member"

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

/* Metres per unit; -1 (after replying) for an unknown unit. */
static double parse_unit(kv_client *c, bk_str u)
{
    static const struct {
        const char *name;
        double metres;
    } units[] = { { "m", 1 }, { "km", 1000 }, { "ft", 0.3048 }, { "mi", 1609.34 } };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (arg_is(u, units[i].name))
            return units[i].metres;
    reply_error(c, "ERR unsupported unit provided. please use M, KM, FT, MI");
    return -1;
}

static int parse_double_msg(kv_client *c, bk_str s, double *v, const char *msg)
{
    if (kv_parse_double(s.p, s.len, v) == 0)
        return 0;
    reply_error(c, msg);
    return -1;
}

/* argv[0], argv[1]: longitude, latitude inside the Mercator limits. */
static int parse_lonlat(kv_client *c, const bk_str *argv, double xy[2])
{
    if (parse_double_msg(c, argv[0], &xy[0], ERR_NOT_FLOAT) < 0 ||
        parse_double_msg(c, argv[1], &xy[1], ERR_NOT_FLOAT) < 0)
        return -1;
    if (xy[0] < GEOHASH_LON_MIN || xy[0] > GEOHASH_LON_MAX || xy[1] < GEOHASH_LAT_MIN ||
        xy[1] > GEOHASH_LAT_MAX) {
        reply_errorf(c, "ERR invalid longitude,latitude pair %f,%f", xy[0], xy[1]);
        return -1;
    }
    return 0;
}

/* argv[0] radius, argv[1] unit. */
static int parse_radius(kv_client *c, const bk_str *argv, geohash_shape *s)
{
    double r;
    if (parse_double_msg(c, argv[0], &r, "ERR need numeric radius") < 0)
        return -1;
    if (r < 0) {
        reply_error(c, "ERR radius cannot be negative");
        return -1;
    }
    double conv = parse_unit(c, argv[1]);
    if (conv < 0)
        return -1;
    s->type = GEOHASH_CIRCLE;
    s->radius = r;
    s->conversion = conv;
    return 0;
}

/* argv[0] width, argv[1] height, argv[2] unit. */
static int parse_box(kv_client *c, const bk_str *argv, geohash_shape *s)
{
    double w, h;
    if (parse_double_msg(c, argv[0], &w, "ERR need numeric width") < 0 ||
        parse_double_msg(c, argv[1], &h, "ERR need numeric height") < 0)
        return -1;
    if (h < 0 || w < 0) {
        reply_error(c, "ERR height or width cannot be negative");
        return -1;
    }
    double conv = parse_unit(c, argv[2]);
    if (conv < 0)
        return -1;
    s->type = GEOHASH_BOX;
    s->width = w;
    s->height = h;
    s->conversion = conv;
    return 0;
}

static int member_lonlat(zset *z, bk_str member, double xy[2])
{
    zs_node *n = z ? zset_find(z, member) : NULL;
    return n && geohash_decode_score(n->score, xy) ? 0 : -1;
}

/* A coordinate as Redis prints it: %.17Lf without trailing zeros, a bulk
 * string in RESP2 and a double in RESP3. */
static void reply_coord(kv_client *c, double v)
{
    char b[KV_DBL_STR_MAX * 2];
    size_t n = kv_fmt_ldouble(b + 1, sizeof b - 3, (long double)v);
    if (c->resp < 3) {
        reply_bulk(c, b + 1, n);
        return;
    }
    b[0] = ',';
    b[n + 1] = '\r';
    b[n + 2] = '\n';
    reply_raw(c, b, n + 3);
}

/* A distance with four decimals, always a bulk string. */
static void reply_distance(kv_client *c, double d)
{
    char b[512];
    int n = snprintf(b, sizeof b, "%.4f", d);
    reply_bulk(c, b, n > 0 && (size_t)n < sizeof b ? (size_t)n : 0);
}

/* ---- GEOADD ---- */

enum { G_NX = 1, G_XX = 2, G_CH = 4 };

void geoadd_command(kv_client *c)
{
    int flags = 0, i = 2;
    for (; i < c->argc; i++) {
        if (arg_is(c->argv[i], "nx"))
            flags |= G_NX;
        else if (arg_is(c->argv[i], "xx"))
            flags |= G_XX;
        else if (arg_is(c->argv[i], "ch"))
            flags |= G_CH;
        else
            break;
    }
    int first = i;
    if ((c->argc - first) % 3 != 0 || c->argc == first || (flags & G_NX && flags & G_XX)) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    int n = (c->argc - first) / 3;
    /* Everything is checked before the set changes. */
    uint64_t stack[16];
    uint64_t *bits = n <= 16 ? stack : kv_malloc((size_t)n * sizeof *bits);
    bk_str *prop = NULL;
    char *digits = NULL;
    for (int k = 0; k < n; k++) {
        double xy[2];
        if (parse_lonlat(c, c->argv + first + 3 * k, xy) < 0)
            goto cleanup;
        geohash_encode_wgs84(xy[0], xy[1], &bits[k]);
    }
    kv_entry *e = lookup_typed(c, c->argv[1], KV_ZSET, 1);
    if (e == KV_WRONGTYPE)
        goto cleanup;
    if (!e && (flags & G_XX)) {
        reply_int(c, 0);
        goto cleanup;
    }
    zset *z = e ? entry_obj(e) : NULL;
    if (!z) {
        z = zset_new();
        db_add_obj(c->db, c->argv[1], KV_ZSET, z);
    }
    long long added = 0, changed = 0;
    for (int k = 0; k < n; k++) {
        bk_str member = c->argv[first + 3 * k + 2];
        double score = (double)bits[k];
        zs_node *x = zset_find(z, member);
        if (x) {
            if (!(flags & G_NX) && x->score != score) {
                zset_update_score(z, x, score);
                changed++;
            }
        } else if (!(flags & G_XX)) {
            zset_insert(z, score, member);
            zset_enc_added(z, member);
            added++;
        }
    }
    if (z->length == 0)
        db_delete(c->db, c->argv[1]);
    if (added + changed) {
        kv_notify(c->db, NOTIFY_ZSET, "zadd", c->argv[1]);
        kv_dirty(added + changed);
        /* Replicas and the AOF get the ZADD this stands for. */
        int pargc = first + 2 * n;
        prop = kv_malloc((size_t)pargc * sizeof *prop);
        digits = kv_malloc((size_t)n * KV_LL_STR_MAX);
        prop[0] = (bk_str){ "ZADD", 4 };
        for (int k = 1; k < first; k++)
            prop[k] = c->argv[k];
        for (int k = 0; k < n; k++) {
            char *d = digits + (size_t)k * KV_LL_STR_MAX;
            prop[first + 2 * k] = (bk_str){ d, kv_fmt_ll(d, (long long)bits[k]) };
            prop[first + 2 * k + 1] = c->argv[first + 3 * k + 2];
        }
        kv_propagate_as(c, pargc, prop);
    }
    reply_int(c, (flags & G_CH) ? added + changed : added);
cleanup:
    if (bits != stack)
        kv_free(bits);
    kv_free(prop);
    kv_free(digits);
}

/* ---- GEOPOS / GEOHASH / GEODIST ---- */

static zset *read_zset(kv_client *c, bk_str key, int *err)
{
    kv_entry *e = lookup_typed(c, key, KV_ZSET, 0);
    *err = e == KV_WRONGTYPE;
    return e && e != KV_WRONGTYPE ? entry_obj(e) : NULL;
}

void geopos_command(kv_client *c)
{
    int err;
    zset *z = read_zset(c, c->argv[1], &err);
    if (err)
        return;
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        double xy[2];
        if (member_lonlat(z, c->argv[i], xy) < 0) {
            reply_null_array(c);
            continue;
        }
        reply_array(c, 2);
        reply_coord(c, xy[0]);
        reply_coord(c, xy[1]);
    }
}

void geohash_command(kv_client *c)
{
    static const char alphabet[] = "0123456789bcdefghjkmnpqrstuvwxyz";
    /* The standard geohash covers latitudes -90..90, not Mercator's. */
    static const geohash_range lon_r = { -180, 180 }, lat_r = { -90, 90 };
    int err;
    zset *z = read_zset(c, c->argv[1], &err);
    if (err)
        return;
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        double xy[2];
        geohash_bits h = { 0, 0 };
        if (member_lonlat(z, c->argv[i], xy) < 0 ||
            !geohash_encode(lon_r, lat_r, xy[0], xy[1], GEOHASH_STEP_MAX, &h)) {
            reply_null(c);
            continue;
        }
        /* 11 characters of 5 bits: 52 bits of hash, then a '0' pad. */
        char out[11];
        for (int k = 0; k < 10; k++)
            out[k] = alphabet[(h.bits >> (52 - (k + 1) * 5)) & 0x1f];
        out[10] = alphabet[0];
        reply_bulk(c, out, sizeof out);
    }
}

void geodist_command(kv_client *c)
{
    double conv = 1;
    if (c->argc == 5) {
        conv = parse_unit(c, c->argv[4]);
        if (conv < 0)
            return;
    } else if (c->argc > 5) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    int err;
    zset *z = read_zset(c, c->argv[1], &err);
    if (err)
        return;
    double a[2], b[2];
    if (member_lonlat(z, c->argv[2], a) < 0 || member_lonlat(z, c->argv[3], b) < 0) {
        reply_null(c);
        return;
    }
    reply_distance(c, geohash_distance(a[0], a[1], b[0], b[1]) / conv);
}

/* ---- GEORADIUS* / GEOSEARCH* ---- */

enum {
    GR_COORDS = 1,    /* GEORADIUS: centre from argv */
    GR_MEMBER = 2,    /* GEORADIUSBYMEMBER: centre from a member */
    GR_NOSTORE = 4,   /* the _RO variants */
    GR_SEARCH = 8,    /* GEOSEARCH syntax */
    GR_SEARCHSTORE = 16,
};

enum { SORT_NONE, SORT_ASC, SORT_DESC };

typedef struct {
    double lon, lat, dist, score;
    bk_str member; /* points into the source set: valid until it changes */
} geo_point;

typedef struct {
    geo_point *p;
    size_t len, cap;
} geo_points;

static void points_add(geo_points *a, const geo_point *p)
{
    if (a->len == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->p = kv_realloc(a->p, a->cap * sizeof *a->p);
    }
    a->p[a->len++] = *p;
}

/* The members of cell h that lie in the shape, in score order. */
static void points_in_cell(zset *z, geohash_bits h, const geohash_shape *s, geo_points *out,
                           size_t limit)
{
    uint64_t min, max;
    geohash_cell_scores(h, &min, &max);
    zrange_score r = { (double)min, (double)max, 0, 1 };
    for (zs_node *x = zset_first_in_score(z, &r); x; x = x->lv[0].forward) {
        if (!zset_score_lte_max(x->score, &r))
            break;
        geo_point p = { .score = x->score, .member = zs_member(x) };
        double xy[2];
        if (geohash_decode_score(x->score, xy) && geohash_in_shape(s, xy[0], xy[1], &p.dist)) {
            p.lon = xy[0];
            p.lat = xy[1];
            points_add(out, &p);
        }
        if (limit && out->len >= limit)
            break;
    }
}

/* Visits the centre cell and its neighbours. A huge radius can make
 * neighbours equal: a cell equal to the one visited just before is skipped
 * (the comparison never looks back at the centre, as in Redis, so those
 * results can hold a member twice). */
static void points_in_cover(zset *z, const geohash_cover *cv, const geohash_shape *s,
                            geo_points *out, size_t limit)
{
    int last = 0;
    for (int i = 0; i < 9; i++) {
        geohash_bits h = cv->cell[i];
        if (h.bits == 0 && h.step == 0)
            continue;
        if (last && h.bits == cv->cell[last].bits && h.step == cv->cell[last].step)
            continue;
        if (limit && out->len >= limit)
            break;
        points_in_cell(z, h, s, out, limit);
        last = i;
    }
}

/* ud: non-NULL for descending order. */
static int cmp_dist(const void *a, const void *b, void *ud)
{
    double x = ((const geo_point *)a)->dist, y = ((const geo_point *)b)->dist;
    int r = x > y ? 1 : x == y ? 0 : -1;
    return ud ? -r : r;
}

static void store_points(kv_client *c, bk_str dst, geo_points *pts, size_t n, int storedist,
                         double conv, const char *event)
{
    if (n == 0) {
        if (db_delete(c->db, dst)) {
            kv_touch_key(c->db, dst);
            kv_notify(c->db, NOTIFY_GENERIC, "del", dst);
            kv_dirty(1);
        }
        reply_int(c, 0);
        return;
    }
    zset *out = zset_new();
    for (size_t i = 0; i < n; i++) {
        geo_point *p = &pts->p[i];
        double score = storedist ? p->dist / conv : p->score;
        zs_node *x = zset_find(out, p->member);
        /* A duplicate (see points_in_cover) keeps its last score. */
        if (x)
            zset_update_score(out, x, score);
        else
            zset_insert(out, score, p->member);
    }
    zset_enc_fit(out);
    /* The source may be dst: its members were copied before it goes. */
    kv_entry *old = db_lookup_write(c->db, dst);
    if (old)
        db_delete_entry(c->db, old);
    db_add_obj(c->db, dst, KV_ZSET, out);
    kv_touch_key(c->db, dst);
    kv_notify(c->db, NOTIFY_ZSET, event, dst);
    kv_dirty((long long)n);
    reply_int(c, (long long)n);
}

static void georadius_generic(kv_client *c, int src_idx, int flags)
{
    bk_str storekey = { NULL, 0 };
    int has_store = 0, storedist = 0;
    int err;
    zset *z = read_zset(c, c->argv[src_idx], &err);
    if (err)
        return;

    geohash_shape shape = { .type = GEOHASH_CIRCLE, .conversion = 1 };
    int base;
    if (flags & GR_COORDS) {
        base = 6;
        if (parse_lonlat(c, c->argv + 2, shape.xy) < 0 || parse_radius(c, c->argv + 4, &shape) < 0)
            return;
    } else if (flags & GR_MEMBER) {
        base = 5;
        /* A missing key still parses the options: the reply depends on
         * STORE. */
        if (z) {
            if (member_lonlat(z, c->argv[2], shape.xy) < 0) {
                reply_error(c, ERR_DECODE_MEMBER);
                return;
            }
            if (parse_radius(c, c->argv + 3, &shape) < 0)
                return;
        }
    } else {
        base = 2;
        if (flags & GR_SEARCHSTORE) {
            base = 3;
            storekey = c->argv[1];
            has_store = 1;
        }
    }

    int withdist = 0, withhash = 0, withcoord = 0, any = 0, sort = SORT_NONE;
    int frommember = 0, fromloc = 0, byradius = 0, bybox = 0;
    long long count = 0;
    int remaining = c->argc - base;
    for (int i = 0; i < remaining; i++) {
        bk_str a = c->argv[base + i];
        const bk_str *next = c->argv + base + i + 1;
        int left = remaining - i - 1; /* arguments after this one */
        if (arg_is(a, "withdist")) {
            withdist = 1;
        } else if (arg_is(a, "withhash")) {
            withhash = 1;
        } else if (arg_is(a, "withcoord")) {
            withcoord = 1;
        } else if (arg_is(a, "any")) {
            any = 1;
        } else if (arg_is(a, "asc")) {
            sort = SORT_ASC;
        } else if (arg_is(a, "desc")) {
            sort = SORT_DESC;
        } else if (arg_is(a, "count") && left >= 1) {
            if (arg_ll(c, next[0], &count) < 0)
                return;
            if (count <= 0) {
                reply_error(c, "ERR COUNT must be > 0");
                return;
            }
            i++;
        } else if ((arg_is(a, "store") || arg_is(a, "storedist")) && left >= 1 &&
                   !(flags & (GR_NOSTORE | GR_SEARCH))) {
            storekey = next[0];
            has_store = 1;
            storedist = arg_is(a, "storedist");
            i++;
        } else if (arg_is(a, "storedist") && (flags & GR_SEARCHSTORE)) {
            storedist = 1;
        } else if (arg_is(a, "frommember") && left >= 1 && (flags & GR_SEARCH) && !fromloc) {
            if (z && member_lonlat(z, next[0], shape.xy) < 0) {
                reply_error(c, ERR_DECODE_MEMBER);
                return;
            }
            frommember = 1;
            i++;
        } else if (arg_is(a, "fromlonlat") && left >= 2 && (flags & GR_SEARCH) && !frommember) {
            if (parse_lonlat(c, next, shape.xy) < 0)
                return;
            fromloc = 1;
            i += 2;
        } else if (arg_is(a, "byradius") && left >= 2 && (flags & GR_SEARCH) && !bybox) {
            if (parse_radius(c, next, &shape) < 0)
                return;
            byradius = 1;
            i += 2;
        } else if (arg_is(a, "bybox") && left >= 3 && (flags & GR_SEARCH) && !byradius) {
            if (parse_box(c, next, &shape) < 0)
                return;
            bybox = 1;
            i += 3;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }

    if (has_store && (withdist || withhash || withcoord)) {
        reply_errorf(c, "ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                     (flags & GR_SEARCHSTORE) ? "GEOSEARCHSTORE" : "STORE option in GEORADIUS");
        return;
    }
    if ((flags & GR_SEARCH) && !(frommember || fromloc)) {
        reply_errorf(c, "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %.*s",
                     (int)c->argv[0].len, c->argv[0].p);
        return;
    }
    if ((flags & GR_SEARCH) && !(byradius || bybox)) {
        reply_errorf(c, "ERR exactly one of BYRADIUS and BYBOX can be specified for %.*s",
                     (int)c->argv[0].len, c->argv[0].p);
        return;
    }
    if (any && !count) {
        reply_error(c, "ERR the ANY argument requires COUNT argument");
        return;
    }
    if (!z) {
        if (has_store) {
            if (db_delete(c->db, storekey)) {
                kv_touch_key(c->db, storekey);
                kv_notify(c->db, NOTIFY_GENERIC, "del", storekey);
                kv_dirty(1);
            }
            reply_int(c, 0);
        } else {
            reply_empty_array(c);
        }
        return;
    }
    /* The N nearest need sorting; ANY takes the first N found. */
    if (count && sort == SORT_NONE && !any)
        sort = SORT_ASC;

    geohash_cover cover;
    geohash_cover_shape(&shape, &cover);
    geo_points pts = { 0 };
    points_in_cover(z, &cover, &shape, &pts, any ? (size_t)count : 0);

    size_t n = pts.len;
    if (count && (unsigned long long)count < n)
        n = (size_t)count;
    /* All of them: a full sort (glibc's, stable, as Redis's qsort call);
     * the first N: Redis's partial quicksort, for the same order among
     * equal distances. */
    static int desc_flag;
    void *ud = sort == SORT_DESC ? &desc_flag : NULL;
    if (sort != SORT_NONE && pts.len > 1 && n == pts.len)
        qsort_r(pts.p, pts.len, sizeof *pts.p, cmp_dist, ud);
    else if (sort != SORT_NONE && pts.len > 1 && n > 0)
        kv_pqsort(pts.p, pts.len, sizeof *pts.p, cmp_dist, ud, 0, n - 1);

    if (has_store) {
        store_points(c, storekey, &pts, n, storedist, shape.conversion,
                     (flags & GR_SEARCHSTORE) ? "geosearchstore" : "georadiusstore");
    } else if (n == 0) {
        reply_empty_array(c);
    } else {
        int opts = withdist + withhash + withcoord;
        reply_array(c, (long long)n);
        for (size_t i = 0; i < n; i++) {
            geo_point *p = &pts.p[i];
            if (opts)
                reply_array(c, opts + 1);
            reply_bulk_str(c, p->member);
            if (withdist)
                reply_distance(c, p->dist / shape.conversion);
            if (withhash)
                reply_int(c, (long long)p->score);
            if (withcoord) {
                reply_array(c, 2);
                reply_coord(c, p->lon);
                reply_coord(c, p->lat);
            }
        }
    }
    kv_free(pts.p);
}

void georadius_command(kv_client *c) { georadius_generic(c, 1, GR_COORDS); }
void georadius_ro_command(kv_client *c) { georadius_generic(c, 1, GR_COORDS | GR_NOSTORE); }
void georadiusbymember_command(kv_client *c) { georadius_generic(c, 1, GR_MEMBER); }
void georadiusbymember_ro_command(kv_client *c)
{
    georadius_generic(c, 1, GR_MEMBER | GR_NOSTORE);
}
void geosearch_command(kv_client *c) { georadius_generic(c, 1, GR_SEARCH); }
void geosearchstore_command(kv_client *c)
{
    georadius_generic(c, 2, GR_SEARCH | GR_SEARCHSTORE);
}
