/* libFuzzer target: the HyperLogLog string decoder of brisk-kv
 * (src/kv/hyperloglog.c), through the commands a client can send on any
 * string: SET h <bytes>, then PFCOUNT, PFADD, PFMERGE and PFDEBUG.
 *
 * Input: byte 0 chooses the value's shape (bit 0: the bytes are prefixed
 * with a valid header, bit 1: dense, padded or cut to the exact dense size,
 * else sparse; bits 2..5: how many elements to add), the rest is the value.
 * Checked, besides ASan/UBSan finding no out-of-bounds access:
 *   - PFCOUNT, PFADD and PFDEBUG TODENSE agree on whether the value is valid:
 *     a value PFCOUNT accepts is not refused as corrupt by PFADD or GETREG;
 *   - after PFADD the registers (read from the dense form) are the register-wise maximum of
 *     the registers before and those of a fresh HLL given the same
 *     elements, and the value is still valid (PFCOUNT, DECODE when sparse)
 *     and no longer than hll-sparse-max-bytes when it stayed sparse;
 *   - PFCOUNT of a valid value equals PFCOUNT of its dense copy, and
 *     PFMERGE of it into an empty key counts the same. */
#include "kv_fuzz.h"

#include <stdint.h>

#define REGS 16384
#define HDR 16
#define DENSE_BYTES (HDR + REGS * 6 / 8)

static int reply_int(bk_str r, long long *v)
{
    if (r.len < 3 || r.p[0] != ':')
        return -1;
    *v = strtoll(r.p + 1, NULL, 10);
    return 0;
}

static int is_corrupt(bk_str r) { return r.len > 11 && memcmp(r.p, "-INVALIDOBJ", 11) == 0; }

static void set_value(const char *key, const char *p, size_t n)
{
    bk_str argv[3] = { BK_STR("SET"), { key, strlen(key) }, { p, n } };
    bk_str r = kvf_run(3, argv);
    CHECK(r.len == 5 && memcmp(r.p, "+OK\r\n", 5) == 0);
}

static bk_str get_value(const char *key, char **copy)
{
    bk_str argv[2] = { BK_STR("GET"), { key, strlen(key) } };
    bk_str r = kvf_run(2, argv);
    CHECK(r.len >= 4 && r.p[0] == '$');
    char *e;
    long n = strtol(r.p + 1, &e, 10);
    CHECK(n >= 0 && e + 2 + n + 2 == r.p + r.len);
    *copy = malloc((size_t)n + 1);
    memcpy(*copy, e + 2, (size_t)n);
    return (bk_str){ *copy, (size_t)n };
}

/* The registers of key, after PFDEBUG TODENSE (GETREG's conversion without
 * its 16384-element reply), unpacked here from the dense bytes. Returns 0,
 * or -1 (error reply: corrupt). */
/* The harness's own loops over 16384 registers are kept out of the
 * coverage instrumentation: they are most of an execution's time. */
#define NO_COV __attribute__((no_sanitize("coverage")))

static NO_COV void unpack(const unsigned char *d, uint8_t *regs)
{
    for (int i = 0; i < REGS; i++) {
        unsigned bit = (unsigned)i * 6, byte = bit / 8, sh = bit % 8;
        unsigned w = d[byte] | (byte + 1 < REGS * 6 / 8 ? (unsigned)d[byte + 1] << 8 : 0u);
        regs[i] = (uint8_t)((w >> sh) & 63);
    }
}

static NO_COV int max_of(const uint8_t *before, const uint8_t *elems, const uint8_t *after)
{
    for (int i = 0; i < REGS; i++) {
        uint8_t want = before[i] > elems[i] ? before[i] : elems[i];
        if (after[i] != want) {
            fprintf(stderr, "register %d: before %u, elements %u, after %u\n", i, before[i],
                    elems[i], after[i]);
            return 0;
        }
    }
    return 1;
}

static int getreg(const char *key, uint8_t *regs)
{
    bk_str r = kvf_cmd("PFDEBUG", "TODENSE", key, NULL);
    if (r.len == 0 || r.p[0] != ':')
        return -1;
    char *copy;
    bk_str v = get_value(key, &copy);
    CHECK(v.len == DENSE_BYTES && memcmp(v.p, "HYLL", 4) == 0 && v.p[4] == 0);
    unpack((const unsigned char *)v.p + HDR, regs);
    free(copy);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvf_init();
    if (size == 0)
        return 0;
    unsigned mode = data[0];
    data++;
    size--;

    /* The value. */
    size_t n = size;
    char *v;
    if (mode & 1) {
        n = (mode & 2) ? DENSE_BYTES : HDR + size;
        v = calloc(1, n);
        memcpy(v, "HYLL", 4);
        v[4] = (mode & 2) ? 0 : 1;
        memcpy(v + HDR, data, BK_MIN(size, n - HDR));
    } else {
        v = malloc(n ? n : 1);
        memcpy(v, data, n);
    }
    set_value("h", v, n);

    /* The elements. */
    int nel = (int)((mode >> 2) & 15);
    char names[16][24];
    bk_str add[2 + 16] = { BK_STR("PFADD"), BK_STR("h") }, fresh[2 + 16] = { BK_STR("PFADD"), BK_STR("f") };
    for (int i = 0; i < nel; i++) {
        size_t k = (size_t)snprintf(names[i], sizeof names[i], "e%d-%u", i,
                                    size > (size_t)i ? data[size - 1 - (size_t)i] : 0u);
        add[2 + i] = fresh[2 + i] = (bk_str){ names[i], k };
    }

    /* PFCOUNT answers a fresh cached estimate without decoding: the
     * verdict comes from a copy whose cache is marked stale. */
    long long c1 = -1, c2;
    kvf_cmd("PFCOUNT", "h", NULL);
    char *stale = malloc(n ? n : 1);
    memcpy(stale, v, n);
    if (n >= HDR)
        stale[15] |= (char)0x80;
    set_value("s", stale, n);
    bk_str r = kvf_cmd("PFCOUNT", "s", NULL);
    int valid = reply_int(r, &c1) == 0;
    if (!valid)
        CHECK(r.len > 0 && r.p[0] == '-');

    static uint8_t before[REGS], after[REGS], elems[REGS];
    if (valid) {
        /* TODENSE converts in place: on a copy. It counts the same dense,
         * and so does a merge into an empty key. */
        set_value("g", stale, n);
        CHECK(getreg("g", before) == 0);
        long long cm, cg;
        CHECK(reply_int(kvf_cmd("PFCOUNT", "g", NULL), &cg) == 0);
        r = kvf_cmd("PFMERGE", "m", "h", NULL);
        CHECK(r.len == 5 && memcmp(r.p, "+OK\r\n", 5) == 0);
        CHECK(reply_int(kvf_cmd("PFCOUNT", "m", NULL), &cm) == 0);
        CHECK(cm == cg && c1 == cg);
    }
    kvf_run(2 + nel, fresh);
    CHECK(getreg("f", elems) == 0);

    r = kvf_run(2 + nel, add);
    if (valid)
        CHECK(!is_corrupt(r));
    else
        CHECK(r.len > 0 && (r.p[0] == '-' || r.p[0] == ':'));
    if (valid) {
        char *copy;
        bk_str cur = get_value("h", &copy);
        int sparse = cur.len > 4 && cur.p[4] == 1;
        if (sparse) {
            CHECK(cur.len <= (size_t)srv.cfg.hll_sparse_max_bytes);
            r = kvf_cmd("PFDEBUG", "DECODE", "h", NULL);
            CHECK(r.len > 0 && r.p[0] == '$');
        }
        CHECK(reply_int(kvf_cmd("PFCOUNT", "h", NULL), &c2) == 0);
        free(copy);
        CHECK(getreg("h", after) == 0);
        CHECK(max_of(before, elems, after));
    } else {
        /* Whatever it is, reading it again must be safe. */
        kvf_cmd("PFCOUNT", "h", NULL);
        kvf_cmd("PFDEBUG", "DECODE", "h", NULL);
        kvf_cmd("PFCOUNT", "h", "f", NULL);
        kvf_cmd("PFMERGE", "m", "h", "f", NULL);
        kvf_cmd("PFDEBUG", "GETREG", "h", NULL);
    }
    kvf_cmd("DEL", "h", "f", "g", "m", "s", NULL);
    free(v);
    free(stale);
    return 0;
}
