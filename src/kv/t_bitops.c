/* Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS,
 * BITOP and BITFIELD(_RO). Bits are numbered from the most significant bit
 * of byte 0, as Redis does; a string grows with zero bytes when a write
 * reaches past its end, up to proto-max-bulk-len. */
#include "kv/notify.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>

#define ERR_BIT_OFFSET "ERR bit offset is not an integer or out of range"
#define ERR_BIT_VALUE "ERR bit is not an integer or out of range"
#define ERR_BITFIELD_TYPE \
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."

/* A bit offset argument. With hash, "#N" means N * bits (BITFIELD's
 * field-index form); the product wraps modulo 2^64 as it does in Redis (so
 * "#1152921504606846976" of an i64 is offset 0 there too). The byte it
 * falls in must stay below proto-max-bulk-len, so every later size
 * computation fits. Replies on error. */
static int bit_offset_arg(kv_client *c, bk_str s, int hash, int bits, uint64_t *off)
{
    int usehash = hash && s.len > 1 && s.p[0] == '#';
    long long v;
    int bad = kv_parse_ll(s.p + usehash, s.len - (size_t)usehash, &v) < 0;
    if (!bad && usehash)
        v = (long long)((uint64_t)v * (uint64_t)bits);
    if (bad || v < 0 || (uint64_t)(v >> 3) >= srv.cfg.proto_max_bulk_len) {
        reply_error(c, ERR_BIT_OFFSET);
        return -1;
    }
    *off = (uint64_t)v;
    return 0;
}

/* The string at key for a write reaching bit maxbit: created or grown
 * with zero bytes as needed (*grown says whether its length changed).
 * Returns NULL after replying an error (wrong type, too large). */
static kv_entry *string_for_bit_write(kv_client *c, bk_str key, uint64_t maxbit, int *grown)
{
    uint64_t need = (maxbit >> 3) + 1;
    kv_entry *e = lookup_typed(c, key, KV_STRING, 1);
    if (e == KV_WRONGTYPE)
        return NULL;
    /* The offset check bounds maxbit; this guards the entry format too. */
    if (need > UINT32_MAX - 64) {
        reply_error(c, ERR_STRING_SIZE);
        return NULL;
    }
    *grown = 0;
    if (!e) {
        *grown = 1;
        e = db_add_zeroed_string(c->db, key, (size_t)need);
        e->raw = 1; /* made raw in Redis (see kv_entry) */
        return e;
    }
    size_t old = entry_vlen(e);
    if (need > old) {
        e = db_string_resize(c->db, e, (size_t)need);
        memset(entry_val(e) + old, 0, (size_t)need - old);
        *grown = 1;
    }
    e->raw = 1;
    return e;
}

static inline int bit_at(const unsigned char *p, uint64_t bit)
{
    return (p[bit >> 3] >> (7 - (bit & 7))) & 1;
}

void setbit_command(kv_client *c)
{
    uint64_t off;
    long long on;
    if (bit_offset_arg(c, c->argv[2], 0, 0, &off) < 0 ||
        arg_ll_msg(c, c->argv[3], &on, ERR_BIT_VALUE) < 0)
        return;
    if (on & ~1LL) {
        reply_error(c, ERR_BIT_VALUE);
        return;
    }
    int grown;
    kv_entry *e = string_for_bit_write(c, c->argv[1], off, &grown);
    if (!e)
        return;
    unsigned char *p = (unsigned char *)entry_val(e) + (off >> 3);
    unsigned mask = 1u << (7 - (off & 7));
    int old = (*p & mask) != 0;
    if (on)
        *p |= (unsigned char)mask;
    else
        *p &= (unsigned char)~mask;
    /* Redis counts a change only when the bit or the length changed. */
    if (grown || old != on) {
        kv_notify(c->db, NOTIFY_STRING, "setbit", c->argv[1]);
        kv_dirty(1);
    }
    reply_int(c, old);
}

void getbit_command(kv_client *c)
{
    uint64_t off;
    if (bit_offset_arg(c, c->argv[2], 0, 0, &off) < 0)
        return;
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0);
    if (e == KV_WRONGTYPE)
        return;
    bk_str v = e ? entry_str(e) : (bk_str){ "", 0 };
    reply_int(c, (off >> 3) < v.len ? bit_at((const unsigned char *)v.p, off) : 0);
}

/* ---- ranges: BITCOUNT and BITPOS ---- */

static uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t popcount_bytes(const unsigned char *p, size_t n)
{
    uint64_t total = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        total += (uint64_t)__builtin_popcountll(load64(p + i)) +
                 (uint64_t)__builtin_popcountll(load64(p + i + 8)) +
                 (uint64_t)__builtin_popcountll(load64(p + i + 16)) +
                 (uint64_t)__builtin_popcountll(load64(p + i + 24));
    for (; i + 8 <= n; i += 8)
        total += (uint64_t)__builtin_popcountll(load64(p + i));
    for (; i < n; i++)
        total += (uint64_t)__builtin_popcount(p[i]);
    return total;
}

/* Mask of the bits of one byte from bit lo to bit hi (0 = MSB), inclusive. */
static inline unsigned byte_mask(unsigned lo, unsigned hi)
{
    return (0xffu >> lo) & (0xffu << (7 - hi)) & 0xffu;
}

/* Ones in bits [from, to] (inclusive, to < 8 * length). */
static uint64_t count_bits(const unsigned char *p, uint64_t from, uint64_t to)
{
    uint64_t fb = from >> 3, lb = to >> 3;
    if (fb == lb)
        return (uint64_t)__builtin_popcount(p[fb] & byte_mask(from & 7, to & 7));
    uint64_t n = (uint64_t)__builtin_popcount(p[fb] & byte_mask(from & 7, 7));
    n += popcount_bytes(p + fb + 1, (size_t)(lb - fb - 1));
    n += (uint64_t)__builtin_popcount(p[lb] & byte_mask(0, to & 7));
    return n;
}

/* First bit equal to `bit` in [from, to] (inclusive), or -1. */
static long long find_bit(const unsigned char *p, uint64_t from, uint64_t to, int bit)
{
    unsigned flip = bit ? 0 : 0xffu;
    uint64_t b = from >> 3, lb = to >> 3;
    unsigned lo = from & 7;
    while (b <= lb) {
        unsigned hi = b == lb ? (unsigned)(to & 7) : 7;
        unsigned v = (p[b] ^ flip) & byte_mask(lo, hi);
        if (v)
            return (long long)(b * 8 + (unsigned)__builtin_clz(v << 24));
        b++;
        lo = 0;
        /* Skip whole words holding no candidate. */
        uint64_t skip = bit ? 0 : UINT64_MAX;
        while (b + 8 <= lb && load64(p + b) == skip)
            b += 8;
    }
    return -1;
}

/* A range of BITCOUNT/BITPOS in bits, from start/end arguments in bytes
 * or bits against a string of len bytes, with Redis's negative-index and
 * clamping rules. Returns 0 for an empty range. */
static int bit_range(long long start, long long end, int isbit, size_t len, uint64_t *from,
                     uint64_t *to)
{
    long long total = isbit ? (long long)len * 8 : (long long)len;
    if (start < 0)
        start = total + start;
    if (end < 0)
        end = total + end;
    if (start < 0)
        start = 0;
    if (end < 0)
        end = 0;
    if (end >= total)
        end = total - 1;
    if (start > end)
        return 0;
    *from = isbit ? (uint64_t)start : (uint64_t)start * 8;
    *to = isbit ? (uint64_t)end : (uint64_t)end * 8 + 7;
    return 1;
}

/* BYTE | BIT unit argument. Replies on error. */
static int unit_arg(kv_client *c, bk_str s, int *isbit)
{
    if (BK_STR_IEQ(s, "bit"))
        *isbit = 1;
    else if (BK_STR_IEQ(s, "byte"))
        *isbit = 0;
    else {
        reply_error(c, ERR_SYNTAX);
        return -1;
    }
    return 0;
}

void bitcount_command(kv_client *c)
{
    /* Redis looks the key up before it reads the range: a missing key
     * answers 0 whatever the other arguments are. */
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0);
    if (e == KV_WRONGTYPE)
        return;
    if (!e) {
        reply_int(c, 0);
        return;
    }
    long long start = 0, end = -1;
    int isbit = 0;
    if (c->argc == 4 || c->argc == 5) {
        if (arg_ll(c, c->argv[2], &start) < 0 || arg_ll(c, c->argv[3], &end) < 0)
            return;
        if (c->argc == 5 && unit_arg(c, c->argv[4], &isbit) < 0)
            return;
    } else if (c->argc != 2) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    bk_str v = entry_str(e);
    /* Both negative with start past end: empty, before any clamping. */
    uint64_t from, to;
    if ((start < 0 && end < 0 && start > end) || !bit_range(start, end, isbit, v.len, &from, &to)) {
        reply_int(c, 0);
        return;
    }
    reply_int(c, (long long)count_bits((const unsigned char *)v.p, from, to));
}

void bitpos_command(kv_client *c)
{
    long long bit;
    if (arg_ll(c, c->argv[2], &bit) < 0)
        return;
    if (bit != 0 && bit != 1) {
        reply_error(c, "ERR The bit argument must be 1 or 0.");
        return;
    }
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0);
    if (e == KV_WRONGTYPE)
        return;
    /* A missing key is an endless run of zero bits. */
    if (!e) {
        reply_int(c, bit ? -1 : 0);
        return;
    }
    bk_str v = entry_str(e);
    long long start = 0, end = -1;
    int isbit = 0, end_given = 0;
    if (c->argc >= 4 && c->argc <= 6) {
        if (arg_ll(c, c->argv[3], &start) < 0)
            return;
        if (c->argc == 6 && unit_arg(c, c->argv[5], &isbit) < 0)
            return;
        if (c->argc >= 5) {
            if (arg_ll(c, c->argv[4], &end) < 0)
                return;
            end_given = 1;
        }
    } else if (c->argc != 3) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    uint64_t from, to;
    if (!bit_range(start, end, isbit, v.len, &from, &to)) {
        reply_int(c, -1);
        return;
    }
    long long pos = find_bit((const unsigned char *)v.p, from, to, (int)bit);
    /* Looking for a clear bit without an explicit end, the string counts as
     * padded with zeros on the right: the answer is the first bit past the
     * range's last byte. (Without an end the range reaches the string's
     * end, so that is its length in bits.) */
    if (pos < 0 && bit == 0 && !end_given)
        pos = (long long)((to >> 3) + 1) * 8;
    reply_int(c, pos);
}

/* ---- BITOP ---- */

enum { BITOP_AND, BITOP_OR, BITOP_XOR, BITOP_NOT };

static const struct {
    const char *name;
    int op;
} bitop_names[] = {
    { "and", BITOP_AND }, { "or", BITOP_OR }, { "xor", BITOP_XOR }, { "not", BITOP_NOT },
};

/* dst[0..n) op= src[0..n), eight bytes at a time. */
static void bitop_apply(int op, unsigned char *dst, const unsigned char *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t a = load64(dst + i), b = load64(src + i);
        a = op == BITOP_AND ? a & b : op == BITOP_OR ? a | b : a ^ b;
        memcpy(dst + i, &a, sizeof a);
    }
    for (; i < n; i++)
        dst[i] = (unsigned char)(op == BITOP_AND ? dst[i] & src[i]
                                 : op == BITOP_OR ? dst[i] | src[i]
                                                  : dst[i] ^ src[i]);
}

void bitop_command(kv_client *c)
{
    int op = -1;
    for (size_t i = 0; i < BK_ARRAY_LEN(bitop_names); i++)
        if (str_ieq_lit(c->argv[1], bitop_names[i].name, strlen(bitop_names[i].name)))
            op = bitop_names[i].op;
    if (op < 0) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    int nsrc = c->argc - 3;
    if (op == BITOP_NOT && nsrc != 1) {
        reply_error(c, "ERR BITOP NOT must be called with a single source key.");
        return;
    }
    /* Source values stay valid while nothing is written (a lookup may only
     * delete the expired key it looks up). */
    bk_str stack_src[16];
    bk_str *src = nsrc <= 16 ? stack_src : kv_malloc((size_t)nsrc * sizeof *src);
    unsigned char *res = NULL;
    size_t maxlen = 0;
    for (int i = 0; i < nsrc; i++) {
        kv_entry *e = lookup_typed(c, c->argv[3 + i], KV_STRING, 0);
        if (e == KV_WRONGTYPE)
            goto done;
        src[i] = e ? entry_str(e) : (bk_str){ "", 0 };
        maxlen = BK_MAX(maxlen, src[i].len);
    }
    if (maxlen) {
        res = kv_malloc(maxlen);
        /* Shorter inputs count as zero-padded to the longest. */
        memset(res, 0, maxlen);
        memcpy(res, src[0].p, src[0].len);
        if (op == BITOP_NOT) {
            for (size_t j = 0; j < maxlen; j++)
                res[j] = (unsigned char)~res[j];
        }
        for (int i = 1; i < nsrc; i++) {
            bitop_apply(op, res, (const unsigned char *)src[i].p, src[i].len);
            if (op == BITOP_AND)
                memset(res + src[i].len, 0, maxlen - src[i].len);
        }
        db_set_string(c->db, c->argv[2], (const char *)res, maxlen, 0)->raw = 1;
        kv_notify(c->db, NOTIFY_STRING, "set", c->argv[2]);
        kv_dirty(1);
    } else if (db_delete(c->db, c->argv[2])) {
        kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[2]);
        kv_dirty(1);
    }
    reply_int(c, (long long)maxlen);
done:
    kv_free(res);
    if (src != stack_src)
        kv_free(src);
}

/* ---- BITFIELD ---- */

enum { BF_GET, BF_SET, BF_INCRBY, BF_OVERFLOW };
enum { BF_WRAP, BF_SAT, BF_FAIL };

typedef struct {
    const char *name; /* lower case */
    int args;         /* arguments it needs after its name */
} bf_word;

/* Indexed by the enums above. */
static const bf_word bf_subcommands[] = {
    [BF_GET] = { "get", 2 }, [BF_SET] = { "set", 3 }, [BF_INCRBY] = { "incrby", 3 },
    [BF_OVERFLOW] = { "overflow", 1 },
};
static const bf_word bf_policies[] = {
    [BF_WRAP] = { "wrap", 0 }, [BF_SAT] = { "sat", 0 }, [BF_FAIL] = { "fail", 0 },
};

static int word_index(bk_str s, const bf_word *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (str_ieq_lit(s, words[i].name, strlen(words[i].name)))
            return (int)i;
    return -1;
}

typedef struct {
    uint64_t offset;
    int64_t arg; /* SET value or INCRBY increment */
    uint8_t op, sign, bits, overflow;
} bf_op;

static uint64_t bf_read(const unsigned char *p, uint64_t off, int bits)
{
    uint64_t v = 0;
    for (int i = 0; i < bits; i++)
        v = (v << 1) | (uint64_t)bit_at(p, off + (uint64_t)i);
    return v;
}

static void bf_write(unsigned char *p, uint64_t off, int bits, uint64_t v)
{
    for (int i = 0; i < bits; i++) {
        uint64_t b = off + (uint64_t)i;
        unsigned mask = 1u << (7 - (b & 7));
        if ((v >> (bits - 1 - i)) & 1)
            p[b >> 3] |= (unsigned char)mask;
        else
            p[b >> 3] &= (unsigned char)~mask;
    }
}

/* The field as a signed or unsigned number (sign-extended from bits). */
static int64_t bf_value(uint64_t raw, int bits, int sign)
{
    if (sign && bits < 64 && (raw >> (bits - 1)) & 1)
        raw |= UINT64_MAX << bits;
    return (int64_t)raw;
}

/* Applies an increment to a field's value under an OVERFLOW policy.
 * Returns 0 when the result fits (*out = value + incr), 1 on overflow with
 * *out wrapped or saturated (FAIL leaves it unset). A SET is value = the
 * argument, incr = 0.
 *
 * The range test follows Redis's exactly, 64-bit wrap-around of the
 * headroom included: for a signed field narrower than 64 bits, a SET of a
 * value within 2^bits of INT64_MIN reads as an overflow upwards and
 * saturates to the maximum. */
static int bf_fit_signed(int64_t value, int64_t incr, int bits, int policy, int64_t *out)
{
    int64_t max = bits == 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
    int64_t min = -max - 1;
    int64_t up = (int64_t)((uint64_t)max - (uint64_t)value);
    int64_t down = (int64_t)((uint64_t)min - (uint64_t)value);
    int dir = 0;
    if (value > max || (bits != 64 && incr > up) || (value >= 0 && incr > 0 && incr > up))
        dir = 1;
    else if (value < min || (bits != 64 && incr < down) || (value < 0 && incr < 0 && incr < down))
        dir = -1;
    if (!dir) {
        *out = value + incr;
        return 0;
    }
    if (policy == BF_SAT) {
        *out = dir > 0 ? max : min;
    } else if (policy == BF_WRAP) {
        /* Modulo 2^bits, then sign-extended. */
        uint64_t u = (uint64_t)value + (uint64_t)incr;
        if (bits < 64)
            u &= ~(UINT64_MAX << bits);
        *out = bf_value(u, bits, 1);
    }
    return 1;
}

/* The unsigned twin (bits <= 63); a SET's argument is taken as a 64-bit
 * unsigned number, so a negative one overflows upwards. */
static int bf_fit_unsigned(uint64_t value, int64_t incr, int bits, int policy, int64_t *out)
{
    uint64_t max = (1ull << bits) - 1;
    int64_t up = (int64_t)(max - value);
    int64_t down = (int64_t)(0 - value);
    int dir = 0;
    if (value > max || (incr > 0 && incr > up))
        dir = 1;
    else if (incr < 0 && incr < down)
        dir = -1;
    if (!dir) {
        *out = (int64_t)(value + (uint64_t)incr);
        return 0;
    }
    if (policy == BF_SAT)
        *out = dir > 0 ? (int64_t)max : 0;
    else if (policy == BF_WRAP)
        *out = (int64_t)((value + (uint64_t)incr) & max);
    return 1;
}

/* i<bits> (1..64) or u<bits> (1..63). Replies on error. */
static int bf_type_arg(kv_client *c, bk_str s, int *sign, int *bits)
{
    long long n;
    if (s.len < 2 || kv_parse_ll(s.p + 1, s.len - 1, &n) < 0)
        goto bad;
    char t = ascii_lower(s.p[0]);
    if (t != 'i' && t != 'u')
        goto bad;
    *sign = t == 'i';
    if (n < 1 || n > (*sign ? 64 : 63))
        goto bad;
    *bits = (int)n;
    return 0;
bad:
    reply_error(c, ERR_BITFIELD_TYPE);
    return -1;
}

static void bitfield_generic(kv_client *c, int readonly_cmd)
{
    int nops = 0, writes = 0, policy = BF_WRAP;
    uint64_t maxbit = 0;
    /* Each operation takes at least three arguments. */
    bf_op stack_ops[16];
    int cap = (c->argc - 2) / 3;
    bf_op *ops = cap <= 16 ? stack_ops : kv_malloc((size_t)cap * sizeof *ops);
    for (int j = 2; j < c->argc; j++) {
        int more = c->argc - j - 1;
        int op = word_index(c->argv[j], bf_subcommands, BK_ARRAY_LEN(bf_subcommands));
        if (op < 0 || more < bf_subcommands[op].args) {
            reply_error(c, ERR_SYNTAX);
            goto done;
        }
        if (op == BF_OVERFLOW) {
            policy = word_index(c->argv[++j], bf_policies, BK_ARRAY_LEN(bf_policies));
            if (policy < 0) {
                reply_error(c, "ERR Invalid OVERFLOW type specified");
                goto done;
            }
            continue;
        }
        int sign, bits;
        uint64_t off;
        long long arg = 0;
        if (bf_type_arg(c, c->argv[j + 1], &sign, &bits) < 0 ||
            bit_offset_arg(c, c->argv[j + 2], 1, bits, &off) < 0)
            goto done;
        if (op != BF_GET) {
            writes = 1;
            maxbit = BK_MAX(maxbit, off + (uint64_t)bits - 1);
            if (arg_ll(c, c->argv[j + 3], &arg) < 0)
                goto done;
        }
        ops[nops++] = (bf_op){ off, arg, (uint8_t)op, (uint8_t)sign, (uint8_t)bits,
                               (uint8_t)policy };
        j += op == BF_GET ? 2 : 3;
    }

    kv_entry *e;
    int grown = 0;
    if (!writes) {
        e = lookup_typed(c, c->argv[1], KV_STRING, 0);
        if (e == KV_WRONGTYPE)
            goto done;
    } else if (readonly_cmd) {
        reply_error(c, "ERR BITFIELD_RO only supports the GET subcommand");
        goto done;
    } else if (!(e = string_for_bit_write(c, c->argv[1], maxbit, &grown))) {
        goto done;
    }

    long long changes = 0;
    reply_array(c, nops);
    for (int i = 0; i < nops; i++) {
        const bf_op *o = &ops[i];
        if (o->op == BF_GET) {
            /* Reads may pass the end of the string: copy the bytes the
             * field spans (9 at most) into a zero-padded buffer. */
            unsigned char b[9] = { 0 };
            bk_str v = e ? entry_str(e) : (bk_str){ "", 0 };
            uint64_t first = o->offset >> 3;
            if (first < v.len)
                memcpy(b, v.p + first, (size_t)BK_MIN((uint64_t)sizeof b, v.len - first));
            uint64_t raw = bf_read(b, o->offset & 7, o->bits);
            reply_int(c, bf_value(raw, o->bits, o->sign));
            continue;
        }
        unsigned char *p = (unsigned char *)entry_val(e);
        int64_t old = bf_value(bf_read(p, o->offset, o->bits), o->bits, o->sign);
        int64_t value = o->op == BF_INCRBY ? old : o->arg;
        int64_t incr = o->op == BF_INCRBY ? o->arg : 0;
        int64_t nv = 0;
        int over = o->sign ? bf_fit_signed(value, incr, o->bits, o->overflow, &nv)
                           : bf_fit_unsigned((uint64_t)value, incr, o->bits, o->overflow, &nv);
        if (over && o->overflow == BF_FAIL) {
            reply_null(c);
            continue;
        }
        reply_int(c, o->op == BF_INCRBY ? nv : old);
        bf_write(p, o->offset, o->bits, (uint64_t)nv);
        if (grown || nv != old)
            changes++;
    }
    if (changes)
        kv_notify(c->db, NOTIFY_STRING, "setbit", c->argv[1]);
    kv_dirty(changes);
done:
    if (ops != stack_ops)
        kv_free(ops);
}

void bitfield_command(kv_client *c) { bitfield_generic(c, 0); }
void bitfield_ro_command(kv_client *c) { bitfield_generic(c, 1); }
