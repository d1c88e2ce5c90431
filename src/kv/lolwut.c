/* LOLWUT [VERSION n [args ...]]: some computer art and the Redis version, as
 * Redis 7.0 answers it. Without VERSION, or for a version other than 5 and
 * 6, just "Redis ver. 7.0.15". VERSION 5 draws a picture after Georg Nees's
 * "Schotter" (squares that get more disordered row by row) in Braille
 * characters; VERSION 6 a night skyline in ANSI colours. The pictures are
 * brisk-kv's own drawings (random, as Redis's are), not copies of Redis's. */
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/server.h"
#include "kv/types.h"
#include "kv/util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* A canvas stays below this many pixels whatever the arguments: Redis sizes
 * it from them alone (VERSION 5 1000 1 200 would be 800 MB there). */
#define MAX_PIXELS (4u << 20)

static double rand01(void)
{
    return (double)(kv_rand64() >> 11) / (double)(1ull << 53);
}

typedef struct {
    int w, h;
    uint8_t *px;
} canvas;

static void plot(canvas *cv, int x, int y)
{
    if (x >= 0 && y >= 0 && x < cv->w && y < cv->h)
        cv->px[(size_t)y * (size_t)cv->w + (size_t)x] = 1;
}

/* A straight line, one pixel per step along its longer axis. */
static void line(canvas *cv, double x0, double y0, double x1, double y1)
{
    double dx = x1 - x0, dy = y1 - y0;
    int steps = (int)ceil(fmax(fabs(dx), fabs(dy)));
    if (steps < 1)
        steps = 1;
    for (int i = 0; i <= steps; i++) {
        double t = (double)i / steps;
        plot(cv, (int)lround(x0 + dx * t), (int)lround(y0 + dy * t));
    }
}

/* Each Braille character shows a 2x4 block of pixels; bit of dot (x, y). */
static const uint8_t braille_bit[4][2] = { { 0x01, 0x08 }, { 0x02, 0x10 }, { 0x04, 0x20 },
                                           { 0x40, 0x80 } };

static void render_braille(const canvas *cv, bk_buf *out)
{
    for (int y = 0; y < cv->h; y += 4) {
        for (int x = 0; x < cv->w; x += 2) {
            unsigned bits = 0;
            for (int dy = 0; dy < 4 && y + dy < cv->h; dy++)
                for (int dx = 0; dx < 2 && x + dx < cv->w; dx++)
                    if (cv->px[(size_t)(y + dy) * (size_t)cv->w + (size_t)(x + dx)])
                        bits |= braille_bit[dy][dx];
            unsigned cp = 0x2800 + bits; /* three UTF-8 bytes */
            char u[3] = { (char)(0xE0 | (cp >> 12)), (char)(0x80 | ((cp >> 6) & 0x3F)),
                          (char)(0x80 | (cp & 0x3F)) };
            buf_append(out, u, 3);
        }
        buf_append(out, "\n", 1);
    }
}

/* Schotter: rows of squares, each turned and shifted by a random amount
 * that grows from the first row to the last. */
static void draw_schotter(bk_buf *out, long long cols, long long per_row, long long per_col)
{
    int w = (int)cols * 2;
    int pad = w > 4 ? 2 : 0;
    double side = (double)(w - 2 * pad) / (double)per_row;
    double h = side * (double)per_col + 2 * pad;
    if ((double)w * h > MAX_PIXELS) {
        side = ((double)MAX_PIXELS / w - 2 * pad) / (double)per_col;
        h = side * (double)per_col + 2 * pad;
    }
    canvas cv = { w, (int)h, NULL };
    cv.px = kv_calloc((size_t)cv.w * (size_t)(cv.h > 0 ? cv.h : 1));
    for (long long r = 0; r < per_col; r++) {
        double disorder = (double)r / (double)per_col; /* 0 at the top, near 1 at the bottom */
        for (long long k = 0; k < per_row; k++) {
            double cx = pad + side * ((double)k + 0.5), cy = pad + side * ((double)r + 0.5);
            double turn = (rand01() - 0.5) * disorder * M_PI / 2;
            cx += (rand01() - 0.5) * disorder * side * 0.5;
            cy += (rand01() - 0.5) * disorder * side * 0.5;
            double half = side / 2, px[4], py[4];
            for (int c = 0; c < 4; c++) {
                double a = turn + M_PI / 4 + c * M_PI / 2;
                px[c] = cx + cos(a) * half * M_SQRT2;
                py[c] = cy + sin(a) * half * M_SQRT2;
            }
            for (int c = 0; c < 4; c++)
                line(&cv, px[c], py[c], px[(c + 1) % 4], py[(c + 1) % 4]);
        }
    }
    render_braille(&cv, out);
    kv_free(cv.px);
    buf_appendf(out, "\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. %s\n", KV_VERSION);
}

/* A skyline at night: a dark sky with a few stars, buildings of random
 * heights with lit windows, one coloured cell per column and row. */
static void draw_skyline(bk_buf *out, long long cols, long long rows)
{
    enum { SKY, STAR, WALL, WINDOW };
    /* background colours: black, white, dark grey, yellow */
    static const char *const cell[] = { "\033[0;30;40m \033[0m", "\033[0;97;107m \033[0m",
                                        "\033[0;90;100m \033[0m", "\033[0;93;103m \033[0m" };
    int *top = kv_malloc((size_t)cols * sizeof *top);
    for (long long x = 0; x < cols;) {
        long long width = 3 + (long long)(rand01() * 6);
        int height = (int)((double)rows * (0.2 + rand01() * 0.6));
        for (long long k = 0; k < width && x < cols; k++, x++)
            top[x] = (int)rows - height;
        if (x < cols)
            top[x++] = (int)rows; /* a gap between buildings */
    }
    for (long long y = 0; y < rows; y++) {
        for (long long x = 0; x < cols; x++) {
            int kind = y < top[x] ? (rand01() < 0.03 ? STAR : SKY)
                                  : (x % 2 && y % 2 && rand01() < 0.5 ? WINDOW : WALL);
            buf_append(out, cell[kind], strlen(cell[kind]));
        }
        buf_append(out, "\n", 1);
    }
    kv_free(top);
    buf_appendf(out, "\nDedicated to the 8 bit game developers of past and present.\n"
                     "A city at night. Redis ver. %s\n", KV_VERSION);
}

/* Integer arguments from argv[from]; fills v[0..n) where given. */
static int int_args(kv_client *c, int from, long long *v, int n)
{
    for (int i = 0; i < n && from + i < c->argc; i++)
        if (arg_ll(c, c->argv[from + i], &v[i]) < 0)
            return -1;
    return 0;
}

static long long clamp(long long v, long long lo, long long hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void lolwut_command(kv_client *c)
{
    long long version = 7;
    if (c->argc >= 3 && c->argv[1].len == 7 && strncasecmp(c->argv[1].p, "version", 7) == 0 &&
        arg_ll(c, c->argv[2], &version) < 0)
        return;
    bk_buf out = { 0 };
    if (version == 5) {
        long long v[3] = { 66, 8, 12 }; /* columns, squares per row, squares per column */
        if (int_args(c, 3, v, 3) < 0)
            return;
        draw_schotter(&out, clamp(v[0], 1, 1000), clamp(v[1], 1, 200), clamp(v[2], 1, 200));
    } else if (version == 6) {
        long long v[2] = { 80, 20 }; /* columns, rows */
        if (int_args(c, 3, v, 2) < 0)
            return;
        draw_skyline(&out, clamp(v[0], 1, 1000), clamp(v[1], 1, 1000));
    } else {
        buf_appendf(&out, "Redis ver. %s\n", KV_VERSION);
    }
    reply_verbatim(c, out.data ? out.data : "", out.len, "txt");
    buf_free(&out);
}
