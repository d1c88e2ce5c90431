/* HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST on plain
 * string values, in Redis's exact representation so that a value written
 * by one server counts the same on the other.
 *
 * Layout (all of it is the string's bytes):
 *
 *   "HYLL" | encoding u8 (0 dense, 1 sparse) | 3 unused | card u64 LE |
 *   registers
 *
 * card caches the last estimate; its top bit set means "stale". There are
 * 2^14 registers of 6 bits. An element's 64-bit MurmurHash64A (seed
 * 0xadc83b19) picks a register with its low 14 bits; the register keeps
 * the largest "position of the first 1 bit" (1..51) seen in the other 50.
 *
 * Dense: the registers packed LSB first, 12288 bytes.
 * Sparse: a run-length code of the registers, one of
 *   00llllll           ZERO:  l+1 (1..64) registers at 0
 *   01llllll llllllll  XZERO: l+1 (1..16384) registers at 0
 *   1vvvvvll           VAL:   l+1 (1..4) registers at v+1 (1..32)
 * A sparse value turns dense when a register needs more than 32 or when it
 * would grow past hll-sparse-max-bytes.
 *
 * The estimate is Ertl's improved raw estimator ("New cardinality
 * estimation algorithms for HyperLogLog sketches", 2017) over the histogram
 * of register values, computed in the same order of floating-point
 * operations as Redis so both servers answer the same number. */
#include "kv/notify.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <math.h>
#include <stdio.h>

#define HLL_P 14
#define HLL_Q (64 - HLL_P)
#define HLL_REGS (1u << HLL_P)
#define HLL_HDR 16
#define HLL_DENSE_BYTES (HLL_HDR + (HLL_REGS * 6 + 7) / 8)
#define HLL_SEED 0xadc83b19ull
#define HLL_ALPHA_INF 0.721347520444481703680 /* 1 / (2 ln 2) */
enum { HLL_DENSE = 0, HLL_SPARSE = 1 };
#define HLL_CARD_STALE 0x80 /* in byte 15, the top byte of card */

#define SPARSE_VAL_MAX 32
#define SPARSE_VAL_MAX_LEN 4
#define SPARSE_ZERO_MAX_LEN 64
#define SPARSE_XZERO_MAX_LEN 16384

#define ERR_HLL_TYPE "WRONGTYPE Key is not a valid HyperLogLog string value."
#define ERR_HLL_CORRUPT "INVALIDOBJ Corrupted HLL object detected"

/* An empty sparse value: header (fresh cache of 0) and one XZERO op. */
static const unsigned char hll_empty_sparse[HLL_HDR + 2] = {
    'H', 'Y', 'L', 'L', HLL_SPARSE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x40 | ((SPARSE_XZERO_MAX_LEN - 1) >> 8), (SPARSE_XZERO_MAX_LEN - 1) & 0xff,
};

/* ---- sparse opcodes ---- */

static inline int op_is_zero(unsigned b) { return (b & 0xc0) == 0x00; }
static inline int op_is_xzero(unsigned b) { return (b & 0xc0) == 0x40; }
static inline unsigned op_zero_len(unsigned b) { return (b & 0x3f) + 1; }
static inline unsigned op_xzero_len(unsigned b, unsigned b2) { return ((b & 0x3f) << 8 | b2) + 1; }
static inline unsigned op_val_value(unsigned b) { return ((b >> 2) & 0x1f) + 1; }
static inline unsigned op_val_len(unsigned b) { return (b & 3) + 1; }
static inline unsigned char op_val(unsigned v, unsigned len)
{
    return (unsigned char)(0x80 | (v - 1) << 2 | (len - 1));
}

/* The second byte of an XZERO; a value cut short reads as 0 there (what
 * Redis reads from its string terminator), and is then found invalid by
 * the register total or by the walk that needs it whole. */
static inline unsigned op_byte2(const unsigned char *p, size_t i, size_t n)
{
    return i + 1 < n ? p[i + 1] : 0;
}

/* Writes a run of len zero registers; returns the bytes used. */
static int put_zero_run(unsigned char *out, uint32_t len)
{
    if (len > SPARSE_ZERO_MAX_LEN) {
        out[0] = (unsigned char)(0x40 | (len - 1) >> 8);
        out[1] = (unsigned char)((len - 1) & 0xff);
        return 2;
    }
    out[0] = (unsigned char)(len - 1);
    return 1;
}

/* The run of len registers (len < 5 for a VAL run) that was at the value
 * oldval, or at 0 when zero; returns the bytes used. */
static int put_run(unsigned char *out, int zero, unsigned oldval, uint32_t len)
{
    if (zero)
        return put_zero_run(out, len);
    out[0] = op_val(oldval, len);
    return 1;
}

/* ---- dense registers ---- */

/* Register i sits at bit 6i, LSB first. The last register ends inside the
 * final byte, so the byte after is touched only when the field spans it. */
static inline unsigned dense_get(const unsigned char *r, uint32_t i)
{
    uint32_t b = i * 6 / 8, fb = i * 6 & 7;
    unsigned v = r[b] >> fb;
    if (fb > 2)
        v |= (unsigned)r[b + 1] << (8 - fb);
    return v & 63;
}

static inline void dense_set(unsigned char *r, uint32_t i, unsigned v)
{
    uint32_t b = i * 6 / 8, fb = i * 6 & 7;
    r[b] = (unsigned char)((r[b] & ~(63u << fb)) | v << fb);
    if (fb > 2)
        r[b + 1] = (unsigned char)((r[b + 1] & ~(63u >> (8 - fb))) | v >> (8 - fb));
}

/* All registers to bytes, and back: four registers per three bytes. */
static void dense_unpack(const unsigned char *r, uint8_t *regs)
{
    for (uint32_t i = 0; i < HLL_REGS; i += 4, r += 3) {
        regs[i] = r[0] & 63;
        regs[i + 1] = (uint8_t)((r[0] >> 6 | r[1] << 2) & 63);
        regs[i + 2] = (uint8_t)((r[1] >> 4 | r[2] << 4) & 63);
        regs[i + 3] = r[2] >> 2;
    }
}

static void dense_pack(const uint8_t *regs, unsigned char *r)
{
    for (uint32_t i = 0; i < HLL_REGS; i += 4, r += 3) {
        r[0] = (unsigned char)(regs[i] | regs[i + 1] << 6);
        r[1] = (unsigned char)(regs[i + 1] >> 2 | regs[i + 2] << 4);
        r[2] = (unsigned char)(regs[i + 2] >> 4 | regs[i + 3] << 2);
    }
}

/* ---- hashing ---- */

/* MurmurHash64A (Austin Appleby, public domain), reading blocks as little
 * endian so every host hashes alike. */
static uint64_t murmur64a(const unsigned char *p, size_t len, uint64_t seed)
{
    const uint64_t m = 0xc6a4a7935bd1e995ull;
    const int r = 47;
    uint64_t h = seed ^ ((uint64_t)len * m);
    size_t blocks = len / 8;
    for (size_t i = 0; i < blocks; i++, p += 8) {
        uint64_t k = 0;
        for (int j = 7; j >= 0; j--)
            k = k << 8 | p[j];
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    size_t rest = len & 7;
    if (rest) {
        for (size_t j = rest; j-- > 0;)
            h ^= (uint64_t)p[j] << (8 * j);
        h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

/* The register an element maps to and the value it offers (1..51). */
static unsigned hll_pattern(bk_str ele, uint32_t *index)
{
    uint64_t h = murmur64a((const unsigned char *)ele.p, ele.len, HLL_SEED);
    *index = (uint32_t)(h & (HLL_REGS - 1));
    h >>= HLL_P;
    h |= 1ull << HLL_Q; /* bounds the count at Q + 1 */
    return (unsigned)__builtin_ctzll(h) + 1;
}

/* ---- estimate ---- */

static double hll_sigma(double x)
{
    if (x == 1.0)
        return INFINITY;
    double z = x, y = 1, prev;
    do {
        x *= x;
        prev = z;
        z += x * y;
        y += y;
    } while (prev != z);
    return z;
}

static double hll_tau(double x)
{
    if (x == 0.0 || x == 1.0)
        return 0.0;
    double z = 1 - x, y = 1.0, prev;
    do {
        x = sqrt(x);
        prev = z;
        y *= 0.5;
        z -= pow(1 - x, 2) * y;
    } while (prev != z);
    return z / 3;
}

/* histo[v] = registers holding v (v < 64). */
static uint64_t hll_estimate(const int *histo)
{
    double m = HLL_REGS;
    double z = m * hll_tau((m - histo[HLL_Q + 1]) / m);
    for (int j = HLL_Q; j >= 1; j--) {
        z += histo[j];
        z *= 0.5;
    }
    z += m * hll_sigma(histo[0] / m);
    return (uint64_t)llround(HLL_ALPHA_INF * m * m / z);
}

/* ---- walking a sparse value ---- */

/* Calls fn for each run (first register, length, value) of the sparse
 * code p[0..n) that fits in the 16384 registers. Returns 0 when the runs
 * cover exactly the 16384 registers, -1 otherwise (a VAL run passing the
 * end is invalid at once). */
typedef void (*run_fn)(void *ud, uint32_t first, uint32_t len, unsigned val);

static int sparse_walk(const unsigned char *p, size_t n, run_fn fn, void *ud)
{
    uint64_t idx = 0;
    size_t i = 0;
    while (i < n && idx <= HLL_REGS) {
        unsigned b = p[i];
        uint32_t len;
        unsigned val = 0;
        if (op_is_zero(b)) {
            len = op_zero_len(b);
            i++;
        } else if (op_is_xzero(b)) {
            len = op_xzero_len(b, op_byte2(p, i, n));
            i += 2;
        } else {
            len = op_val_len(b);
            val = op_val_value(b);
            if (idx + len > HLL_REGS)
                return -1;
            i++;
        }
        if (idx + len <= HLL_REGS)
            fn(ud, (uint32_t)idx, len, val);
        idx += len;
    }
    return idx == HLL_REGS ? 0 : -1;
}

static void run_histo(void *ud, uint32_t first, uint32_t len, unsigned val)
{
    ((int *)ud)[val] += (int)len;
}

static void run_max(void *ud, uint32_t first, uint32_t len, unsigned val)
{
    uint8_t *regs = ud;
    if (val == 0)
        return;
    for (uint32_t i = first; i < first + len; i++)
        if (val > regs[i])
            regs[i] = (uint8_t)val;
}

/* ---- values ---- */

/* The string holding an HLL: entries may move when they grow. */
typedef struct {
    kv_db *db;
    kv_entry *e;
} hll_ref;

static inline unsigned char *hll_bytes(const hll_ref *h) { return (unsigned char *)entry_val(h->e); }
static inline size_t hll_len(const hll_ref *h) { return entry_vlen(h->e); }
static inline int hll_encoding(const hll_ref *h) { return hll_bytes(h)[4]; }

/* Whether a string looks like an HLL (header and, for dense, length).
 * Replies the error when it does not; e is an existing entry. */
static int hll_check(kv_client *c, kv_entry *e)
{
    if (e->type != KV_STRING) {
        reply_error(c, ERR_WRONGTYPE);
        return -1;
    }
    bk_str v = entry_str(e);
    if (v.len < HLL_HDR || memcmp(v.p, "HYLL", 4) != 0 || (uint8_t)v.p[4] > HLL_SPARSE ||
        (v.p[4] == HLL_DENSE && v.len != HLL_DENSE_BYTES)) {
        reply_error(c, ERR_HLL_TYPE);
        return -1;
    }
    return 0;
}

/* Registers of a checked value, max-merged into regs. -1: corrupted. */
static int hll_merge(uint8_t *regs, bk_str v)
{
    const unsigned char *p = (const unsigned char *)v.p;
    if (p[4] == HLL_DENSE) {
        uint8_t mine[HLL_REGS];
        dense_unpack(p + HLL_HDR, mine);
        for (uint32_t i = 0; i < HLL_REGS; i++)
            regs[i] = BK_MAX(regs[i], mine[i]);
        return 0;
    }
    return sparse_walk(p + HLL_HDR, v.len - HLL_HDR, run_max, regs);
}

/* The estimate of a checked value. -1: corrupted. */
static int hll_count(bk_str v, uint64_t *card)
{
    const unsigned char *p = (const unsigned char *)v.p;
    int histo[64] = { 0 };
    if (p[4] == HLL_DENSE) {
        uint8_t regs[HLL_REGS];
        dense_unpack(p + HLL_HDR, regs);
        for (uint32_t i = 0; i < HLL_REGS; i++)
            histo[regs[i]]++;
    } else if (sparse_walk(p + HLL_HDR, v.len - HLL_HDR, run_histo, histo) < 0) {
        return -1;
    }
    *card = hll_estimate(histo);
    return 0;
}

/* Rewrites a sparse value as dense (cached card kept). -1: corrupted. */
static int hll_to_dense(hll_ref *h)
{
    if (hll_encoding(h) == HLL_DENSE)
        return 0;
    uint8_t regs[HLL_REGS] = { 0 };
    if (sparse_walk(hll_bytes(h) + HLL_HDR, hll_len(h) - HLL_HDR, run_max, regs) < 0)
        return -1;
    h->e = db_string_resize(h->db, h->e, HLL_DENSE_BYTES);
    unsigned char *p = hll_bytes(h);
    p[4] = HLL_DENSE;
    dense_pack(regs, p + HLL_HDR);
    return 0;
}

/* Raises register index of a sparse value to count. Returns 1 when it
 * changed, 0 when it already held as much, -1 when the value is
 * corrupted. */
static int hll_sparse_set(hll_ref *h, uint32_t index, unsigned count)
{
    if (count > SPARSE_VAL_MAX)
        goto promote;
    unsigned char *p = hll_bytes(h);
    size_t end = hll_len(h), at = HLL_HDR, prev = 0;
    uint32_t first = 0, span = 0;
    /* 1. The opcode covering the register. */
    while (at < end) {
        unsigned b = p[at];
        size_t oplen = 1;
        if (op_is_zero(b)) {
            span = op_zero_len(b);
        } else if (!op_is_xzero(b)) {
            span = op_val_len(b);
        } else {
            if (at + 1 >= end)
                return -1; /* an XZERO cut short */
            span = op_xzero_len(b, p[at + 1]);
            oplen = 2;
        }
        if (index <= first + span - 1)
            break;
        prev = at;
        at += oplen;
        first += span;
    }
    if (at >= end)
        return -1;

    unsigned b = p[at];
    uint32_t last = first + span - 1;
    unsigned oldval = 0;
    if (!op_is_zero(b) && !op_is_xzero(b)) {
        oldval = op_val_value(b);
        if (oldval >= count)
            return 0;
        if (span == 1) {
            p[at] = op_val(count, 1);
            goto merge;
        }
    }
    /* 2. Split the run around the register: at most run, VAL, run. */
    {
        unsigned char seq[5];
        int n = 0;
        int zero = op_is_zero(b) || op_is_xzero(b);
        if (index != first)
            n += put_run(seq + n, zero, oldval, index - first);
        seq[n++] = op_val(count, 1);
        if (index != last)
            n += put_run(seq + n, zero, oldval, last - index);
        size_t oldlen = op_is_xzero(b) ? 2 : 1;
        long delta = (long)n - (long)oldlen;
        if (delta > 0 && end + (size_t)delta > srv.cfg.hll_sparse_max_bytes)
            goto promote;
        if (delta > 0) {
            h->e = db_string_resize(h->db, h->e, end + (size_t)delta);
            p = hll_bytes(h);
        }
        memmove(p + at + n, p + at + oldlen, end - at - oldlen);
        memcpy(p + at, seq, (size_t)n);
        end = (size_t)((long)end + delta);
    }
merge:
    /* 3. Merge neighbouring VAL runs of equal value, scanning five
     * opcodes from the one before the change. */
    {
        size_t q = prev ? prev : HLL_HDR;
        int scan = 5;
        while (q < end && scan--) {
            unsigned x = p[q];
            if (op_is_xzero(x)) {
                q += 2;
                continue;
            }
            if (op_is_zero(x)) {
                q++;
                continue;
            }
            if (q + 1 < end && !op_is_zero(p[q + 1]) && !op_is_xzero(p[q + 1]) &&
                op_val_value(x) == op_val_value(p[q + 1])) {
                unsigned len = op_val_len(x) + op_val_len(p[q + 1]);
                if (len <= SPARSE_VAL_MAX_LEN) {
                    p[q + 1] = op_val(op_val_value(x), len);
                    memmove(p + q, p + q + 1, end - q - 1);
                    end--;
                    continue;
                }
            }
            q++;
        }
    }
    if (end != hll_len(h))
        h->e = db_string_resize(h->db, h->e, end);
    return 1;

promote:
    if (hll_to_dense(h) < 0)
        return -1;
    dense_set(hll_bytes(h) + HLL_HDR, index, count);
    return 1;
}

/* Adds one element. Returns 1 if a register changed, 0 if not, -1 when
 * the value is corrupted. */
static int hll_add(hll_ref *h, bk_str ele)
{
    uint32_t index;
    unsigned count = hll_pattern(ele, &index);
    if (hll_encoding(h) == HLL_SPARSE)
        return hll_sparse_set(h, index, count);
    unsigned char *r = hll_bytes(h) + HLL_HDR;
    if (dense_get(r, index) >= count)
        return 0;
    dense_set(r, index, count);
    return 1;
}

static void hll_invalidate(hll_ref *h) { hll_bytes(h)[15] |= HLL_CARD_STALE; }

/* A HyperLogLog is a raw string in Redis (made raw, or unshared before a
 * change): see kv_entry's raw. */
static kv_entry *hll_create(kv_db *db, bk_str key)
{
    kv_entry *e = db_store_string(db, key, NULL, (const char *)hll_empty_sparse,
                                  sizeof hll_empty_sparse, 0);
    e->raw = 1;
    return e;
}

/* ---- commands ---- */

void pfadd_command(kv_client *c)
{
    kv_entry *e = db_lookup_write(c->db, c->argv[1]);
    long long updated = 0;
    if (e && hll_check(c, e) < 0)
        return;
    if (!e) {
        e = hll_create(c->db, c->argv[1]);
        updated++;
    }
    e->raw = 1;
    hll_ref h = { c->db, e };
    for (int i = 2; i < c->argc; i++) {
        int r = hll_add(&h, c->argv[i]);
        if (r < 0) {
            /* Redis leaves the registers already raised in place, with a
             * stale cache and no change counted. */
            if (updated)
                hll_invalidate(&h);
            reply_error(c, ERR_HLL_CORRUPT);
            return;
        }
        updated += r;
    }
    if (updated) {
        hll_invalidate(&h);
        kv_notify(c->db, NOTIFY_STRING, "pfadd", c->argv[1]);
        kv_dirty(updated);
    }
    reply_int(c, updated ? 1 : 0);
}

void pfcount_command(kv_client *c)
{
    if (c->argc > 2) {
        /* The union: register-wise maximum of every key. */
        uint8_t regs[HLL_REGS] = { 0 };
        for (int i = 1; i < c->argc; i++) {
            kv_entry *e = db_lookup_read(c->db, c->argv[i]);
            if (!e)
                continue;
            if (hll_check(c, e) < 0)
                return;
            if (hll_merge(regs, entry_str(e)) < 0) {
                reply_error(c, ERR_HLL_CORRUPT);
                return;
            }
        }
        int histo[64] = { 0 };
        for (uint32_t i = 0; i < HLL_REGS; i++)
            histo[regs[i]]++;
        reply_int(c, (long long)hll_estimate(histo));
        return;
    }
    kv_entry *e = db_lookup_read(c->db, c->argv[1]);
    if (!e) {
        reply_int(c, 0);
        return;
    }
    if (hll_check(c, e) < 0)
        return;
    unsigned char *p = (unsigned char *)entry_val(e);
    uint64_t card = 0;
    if (!(p[15] & HLL_CARD_STALE)) {
        for (int i = 7; i >= 0; i--)
            card = card << 8 | p[8 + i];
    } else {
        if (hll_count(entry_str(e), &card) < 0) {
            reply_error(c, ERR_HLL_CORRUPT);
            return;
        }
        /* Caching the estimate changes the string: like Redis, count it as
         * a change (PFCOUNT is a read command, so it is not propagated). */
        for (int i = 0; i < 8; i++)
            p[8 + i] = (unsigned char)(card >> (8 * i));
        kv_touch_key(c->db, c->argv[1]);
        kv_dirty(1);
    }
    reply_int(c, (long long)card);
}

void pfmerge_command(kv_client *c)
{
    uint8_t regs[HLL_REGS] = { 0 };
    int use_dense = 0;
    /* The destination's own registers count too (it is argv[1]). */
    for (int i = 1; i < c->argc; i++) {
        kv_entry *e = db_lookup_read(c->db, c->argv[i]);
        if (!e)
            continue;
        if (hll_check(c, e) < 0)
            return;
        if (entry_val(e)[4] == HLL_DENSE)
            use_dense = 1;
        if (hll_merge(regs, entry_str(e)) < 0) {
            reply_error(c, ERR_HLL_CORRUPT);
            return;
        }
    }
    kv_entry *e = db_lookup_write(c->db, c->argv[1]);
    if (!e)
        e = hll_create(c->db, c->argv[1]);
    e->raw = 1;
    hll_ref h = { c->db, e };
    if (use_dense && hll_to_dense(&h) < 0) {
        reply_error(c, ERR_HLL_CORRUPT);
        return;
    }
    for (uint32_t i = 0; i < HLL_REGS; i++) {
        if (!regs[i])
            continue;
        if (hll_encoding(&h) == HLL_DENSE)
            dense_set(hll_bytes(&h) + HLL_HDR, i, regs[i]);
        else
            hll_sparse_set(&h, i, regs[i]);
    }
    hll_invalidate(&h);
    kv_notify(c->db, NOTIFY_STRING, "pfadd", c->argv[1]);
    kv_dirty(1);
    reply_ok(c);
}

/* PFDEBUG DECODE: the sparse opcodes as text ("z:N Z:N v:V,N"). */
static void pfdebug_decode(kv_client *c, bk_str v)
{
    const unsigned char *p = (const unsigned char *)v.p + HLL_HDR;
    size_t n = v.len - HLL_HDR, len = 0;
    /* "v:32,4 " is the longest token, 7 bytes; "Z:16384 " is 8 for 2 bytes. */
    char *out = kv_malloc(n * 8 + 1);
    for (size_t i = 0; i < n;) {
        unsigned b = p[i];
        if (op_is_zero(b)) {
            len += (size_t)sprintf(out + len, "z:%u ", op_zero_len(b));
            i++;
        } else if (op_is_xzero(b)) {
            len += (size_t)sprintf(out + len, "Z:%u ", op_xzero_len(b, op_byte2(p, i, n)));
            i += 2;
        } else {
            len += (size_t)sprintf(out + len, "v:%u,%u ", op_val_value(b), op_val_len(b));
            i++;
        }
    }
    while (len && out[len - 1] == ' ')
        len--;
    reply_bulk(c, out, len);
    kv_free(out);
}

void pfdebug_command(kv_client *c)
{
    bk_str sub = c->argv[1];
    kv_entry *e = db_lookup_write(c->db, c->argv[2]);
    if (!e) {
        reply_error(c, "ERR The specified key does not exist");
        return;
    }
    if (hll_check(c, e) < 0)
        return;
    hll_ref h = { c->db, e };
    if (BK_STR_IEQ(sub, "getreg") || BK_STR_IEQ(sub, "todense")) {
        int conv = hll_encoding(&h) == HLL_SPARSE;
        if (conv) {
            if (hll_to_dense(&h) < 0) {
                reply_error(c, ERR_HLL_CORRUPT);
                return;
            }
            kv_dirty(1); /* the encoding changed: propagate */
        }
        if (BK_STR_IEQ(sub, "todense")) {
            reply_int(c, conv);
            return;
        }
        const unsigned char *r = hll_bytes(&h) + HLL_HDR;
        reply_array(c, HLL_REGS);
        for (uint32_t i = 0; i < HLL_REGS; i++)
            reply_int(c, dense_get(r, i));
    } else if (BK_STR_IEQ(sub, "decode")) {
        if (hll_encoding(&h) != HLL_SPARSE) {
            reply_error(c, "ERR HLL encoding is not sparse");
            return;
        }
        pfdebug_decode(c, entry_str(h.e));
    } else if (BK_STR_IEQ(sub, "encoding")) {
        reply_simple(c, hll_encoding(&h) == HLL_DENSE ? "dense" : "sparse");
    } else {
        reply_errorf(c, "ERR Unknown PFDEBUG subcommand '%.*s'", (int)BK_MIN(sub.len, 128), sub.p);
    }
}

/* PFSELFTEST: the register packing, and the estimate of sparse and dense
 * values fed the same elements against the true count, on scratch values
 * outside the keyspace. */
void pfselftest_command(kv_client *c)
{
    const char *fail = NULL;
    char msg[128];
    kv_db scratch;
    db_init(&scratch, 0);

    /* Registers: unpack(pack(x)) == x, and set/get agree with pack. */
    static uint8_t regs[HLL_REGS], back[HLL_REGS];
    static unsigned char packed[HLL_DENSE_BYTES - HLL_HDR], one[HLL_DENSE_BYTES - HLL_HDR];
    for (int round = 0; round < 100 && !fail; round++) {
        for (uint32_t i = 0; i < HLL_REGS; i++)
            regs[i] = (uint8_t)(kv_rand64() & 63);
        dense_pack(regs, packed);
        dense_unpack(packed, back);
        memset(one, 0, sizeof one);
        for (uint32_t i = 0; i < HLL_REGS; i++)
            dense_set(one, i, regs[i]);
        for (uint32_t i = 0; i < HLL_REGS && !fail; i++) {
            if (back[i] != regs[i] || dense_get(packed, i) != regs[i]) {
                snprintf(msg, sizeof msg, "TESTFAILED Register error at %u", i);
                fail = msg;
            }
        }
        if (!fail && memcmp(one, packed, sizeof one) != 0)
            fail = "TESTFAILED Register set and pack disagree";
    }

    /* Estimates: within 6 standard errors (1.04 / sqrt(m)) of the truth,
     * rounded up, and equal for the sparse and the dense copy. */
    hll_ref sp = { &scratch, hll_create(&scratch, BK_STR("sparse")) };
    hll_ref de = { &scratch, hll_create(&scratch, BK_STR("dense")) };
    hll_to_dense(&de);
    double relerr = 1.04 / sqrt((double)HLL_REGS);
    uint64_t seed = kv_rand64(), next_check = 1;
    for (uint64_t j = 1; j <= 100000 && !fail; j++) {
        unsigned char ele[8];
        uint64_t x = j ^ seed;
        for (int k = 0; k < 8; k++)
            ele[k] = (unsigned char)(x >> (8 * k));
        bk_str s = { (const char *)ele, sizeof ele };
        if (hll_add(&sp, s) < 0 || hll_add(&de, s) < 0) {
            fail = "TESTFAILED Could not add an element";
            break;
        }
        if (j != next_check)
            continue;
        next_check = j < 100 ? j + 1 : j * 11 / 10;
        uint64_t a, b;
        if (hll_count(entry_str(sp.e), &a) < 0 || hll_count(entry_str(de.e), &b) < 0) {
            fail = "TESTFAILED Invalid value while counting";
        } else if (a != b) {
            snprintf(msg, sizeof msg, "TESTFAILED Sparse and dense estimates differ at %llu",
                     (unsigned long long)j);
            fail = msg;
        } else {
            /* Redis's bound, ceil(6 standard errors): never under 1 (a
             * single register collision at 10-25 elements is an error of
             * 1, which 5 x relerr x j, under 1 there, failed about one run
             * in a hundred). */
            double err = fabs((double)b - (double)j);
            double max = ceil(relerr * 6 * (double)j);
            if (err > max) {
                snprintf(msg, sizeof msg, "TESTFAILED Too big error. card:%llu abserr:%.0f",
                         (unsigned long long)j, err);
                fail = msg;
            }
        }
    }
    db_free(&scratch);
    if (fail)
        reply_error(c, fail);
    else
        reply_ok(c);
}
