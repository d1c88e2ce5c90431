/* libFuzzer target: the AOF reader of brisk-kv (aof_read in src/kv/aof.c),
 * the one reader behind the loader (aof_load, which runs each command) and
 * --check-aof (which only counts them).
 *
 * The input is the file. It is read from a memfd
 *   - the checker's way (no callback), in one read,
 *   - the loader's way (a callback), with every read() cut to 1 byte,
 *   - the loader's way, with reads cut to sizes from a PRNG seeded by the
 *     input (read is wrapped at link time: -Wl,--wrap=read),
 * and all three must give the same result: verdict, size, offset of the
 * last good command, offset of the bad one, in_multi, command count and
 * message; the two loader runs the same commands. Then:
 *   - VALID means good == size; TRUNCATED and BAD mean good < size, and a
 *     bad command starts at or after good, inside the file;
 *   - the first `good` bytes (what --fix and aof-load-truncated keep) read
 *     as VALID, and their commands are the first ones of the whole file;
 *   - the commands read re-encoded as canonical RESP read back the same. */
#include "kv_fuzz.h"

#include "kv/aof.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- read() cut into pieces ---- */

ssize_t __real_read(int fd, void *p, size_t n);

static int cut_fd = -1;
static uint64_t cut_rng;
static int cut_one;

ssize_t __wrap_read(int fd, void *p, size_t n)
{
    if (fd == cut_fd && n > 1) {
        if (cut_one) {
            n = 1;
        } else {
            cut_rng ^= cut_rng << 13;
            cut_rng ^= cut_rng >> 7;
            cut_rng ^= cut_rng << 17;
            size_t k = 1 + (size_t)(cut_rng % 97);
            if (cut_rng & (1ull << 40))
                k = 1 + (size_t)(cut_rng % 4096);
            n = k < n ? k : n;
        }
    }
    return __real_read(fd, p, n);
}

/* ---- the commands seen ---- */

typedef struct {
    bk_buf b; /* per command: argc, then per arg: len, bytes */
    long long n;
} trace;

static void record(void *ud, int argc, bk_str *argv)
{
    trace *t = ud;
    CHECK(argc > 0);
    buf_append(&t->b, &argc, sizeof argc);
    for (int i = 0; i < argc; i++) {
        buf_append(&t->b, &argv[i].len, sizeof argv[i].len);
        buf_append(&t->b, argv[i].p, argv[i].len);
    }
    t->n++;
}

static int same_bytes(const bk_buf *a, const bk_buf *b, int prefix)
{
    if (prefix ? a->len > b->len : a->len != b->len)
        return 0;
    return a->len == 0 || memcmp(a->data, b->data, a->len) == 0;
}

static int make_file(const void *p, size_t n)
{
    int fd = memfd_create("aof", MFD_CLOEXEC);
    CHECK(fd >= 0);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        CHECK(w > 0);
        off += (size_t)w;
    }
    return fd;
}

static void read_file(int fd, int mode, uint64_t seed, trace *t, aof_read_result *r)
{
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    cut_fd = mode ? fd : -1;
    cut_one = mode == 1;
    cut_rng = seed | 1;
    aof_read(fd, t ? record : NULL, t, r);
    cut_fd = -1;
}

static void same_result(const aof_read_result *a, const aof_read_result *b)
{
    CHECK(a->verdict == b->verdict);
    CHECK(a->size == b->size);
    CHECK(a->good == b->good);
    CHECK(a->bad_at == b->bad_at);
    CHECK(a->in_multi == b->in_multi);
    CHECK(a->ncmds == b->ncmds);
    if (strcmp(a->why, b->why) != 0)
        fprintf(stderr, "why: \"%s\" vs \"%s\"\n", a->why, b->why);
    CHECK(strcmp(a->why, b->why) == 0);
}

static void canonical(const trace *t, bk_buf *out)
{
    if (t->b.len == 0)
        return;
    const unsigned char *p = (const unsigned char *)t->b.data, *end = p + t->b.len;
    while (p < end) {
        int argc;
        memcpy(&argc, p, sizeof argc);
        p += sizeof argc;
        char h[32];
        buf_append(out, h, (size_t)snprintf(h, sizeof h, "*%d\r\n", argc));
        for (int i = 0; i < argc; i++) {
            size_t len;
            memcpy(&len, p, sizeof len);
            p += sizeof len;
            buf_append(out, h, (size_t)snprintf(h, sizeof h, "$%zu\r\n", len));
            buf_append(out, p, len);
            buf_append(out, "\r\n", 2);
            p += len;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvf_init();
    uint64_t seed = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 1099511628211ull;

    int fd = make_file(data, size);
    aof_read_result checker, bytewise, pieces;
    trace t1 = { 0 }, t2 = { 0 };
    read_file(fd, 0, seed, NULL, &checker);
    read_file(fd, 1, seed, &t1, &bytewise);
    read_file(fd, 2, seed, &t2, &pieces);
    close(fd);
    if (checker.verdict != bytewise.verdict || checker.good != bytewise.good ||
        checker.bad_at != bytewise.bad_at || checker.ncmds != bytewise.ncmds)
        fprintf(stderr, "checker %d good %lld bad_at %lld n %lld why %s / bytewise %d good %lld "
                        "bad_at %lld n %lld why %s\n",
                checker.verdict, (long long)checker.good, (long long)checker.bad_at,
                checker.ncmds, checker.why, bytewise.verdict, (long long)bytewise.good,
                (long long)bytewise.bad_at, bytewise.ncmds, bytewise.why);
    same_result(&checker, &bytewise);
    same_result(&checker, &pieces);
    CHECK(t1.n == checker.ncmds && t2.n == checker.ncmds);
    CHECK(same_bytes(&t1.b, &t2.b, 0));

    aof_read_result *r = &checker;
    CHECK(r->verdict != AOF_IO_ERROR);
    CHECK(r->size == (off_t)size);
    CHECK(r->good >= 0 && r->good <= r->size);
    if (r->verdict == AOF_VALID)
        CHECK(r->good == r->size && !r->in_multi && r->bad_at == -1);
    else
        CHECK(r->good < r->size);
    if (r->verdict == AOF_BAD)
        CHECK(r->bad_at >= r->good && r->bad_at < r->size);

    /* What --fix keeps is a valid file holding the first commands. */
    if (r->verdict != AOF_VALID) {
        int pfd = make_file(data, (size_t)r->good);
        aof_read_result pr;
        trace tp = { 0 };
        read_file(pfd, 2, seed, &tp, &pr);
        close(pfd);
        CHECK(pr.verdict == AOF_VALID && pr.size == r->good && pr.good == r->good);
        CHECK(pr.ncmds <= r->ncmds);
        CHECK(same_bytes(&tp.b, &t1.b, 1));
        buf_free(&tp.b);
    }

    /* The commands, written canonically, read back the same. */
    bk_buf c = { 0 };
    canonical(&t1, &c);
    int cfd = make_file(c.data, c.len);
    aof_read_result cr;
    trace tc = { 0 };
    read_file(cfd, 2, seed, &tc, &cr);
    close(cfd);
    CHECK(cr.ncmds == r->ncmds);
    CHECK(same_bytes(&tc.b, &t1.b, 0));
    /* A file ending inside MULTI stays that way. */
    CHECK(cr.verdict == (r->in_multi ? AOF_TRUNCATED : AOF_VALID) ||
          (r->verdict == AOF_BAD && cr.verdict != AOF_BAD));
    buf_free(&c);
    buf_free(&tc.b);
    buf_free(&t1.b);
    buf_free(&t2.b);
    return 0;
}
