/* RDB object encoding (version 10) for DUMP / RESTORE and, later, SAVE and
 * full sync. Written from the RDB, listpack, ziplist, intset, zipmap and
 * LZF format descriptions; see rdb.h for the contract. */
#include "kv/rdb.h"
#include "kv/stream.h"

#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/types.h"
#include "kv/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CRC-64/Jones ---- */

/* Slice-by-8: crc_table[k][i] is the CRC of byte i followed by k zero
 * bytes, so eight input bytes fold in with eight lookups. */
static uint64_t crc_table[8][256];
static int crc_ready;

static void crc_init(void)
{
    /* 0x95ac9329ac4bc9b5 is 0xad93d23594c935a9 bit-reversed (reflected CRC). */
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x95ac9329ac4bc9b5ull : c >> 1;
        crc_table[0][i] = c;
    }
    for (unsigned i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
    crc_ready = 1;
}

uint64_t rdb_crc64(uint64_t crc, const void *p, size_t n)
{
    if (BK_UNLIKELY(!crc_ready))
        crc_init();
    const unsigned char *s = p;
    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w = 0;
        for (int i = 0; i < 8; i++)
            w |= (uint64_t)s[i] << (8 * i);
        crc ^= w;
        crc = crc_table[7][crc & 0xff] ^ crc_table[6][(crc >> 8) & 0xff] ^
              crc_table[5][(crc >> 16) & 0xff] ^ crc_table[4][(crc >> 24) & 0xff] ^
              crc_table[3][(crc >> 32) & 0xff] ^ crc_table[2][(crc >> 40) & 0xff] ^
              crc_table[1][(crc >> 48) & 0xff] ^ crc_table[0][crc >> 56];
    }
    for (size_t i = 0; i < n; i++)
        crc = crc_table[0][(crc ^ s[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

/* ---- LZF ----
 * Format: a control byte c. c < 32: c+1 literal bytes follow. Otherwise a
 * back reference: length (c >> 5) + 2, or 7 + next byte + 2 when c >> 5 is
 * 7; offset ((c & 31) << 8) + next byte + 1 back from the output end.
 *
 * The compressor reproduces liblzf's greedy choices with Redis's settings
 * (a 2^16-slot table of last positions of 3-byte hashes, "very fast" mode
 * that re-hashes the last two positions of each match, a zeroed table),
 * so that a DUMP of the same value is the same bytes. */

#define LZF_HLOG 16
#define LZF_HSIZE (1u << LZF_HLOG)
#define LZF_MAX_LIT 32
#define LZF_MAX_OFF 8192
#define LZF_MAX_REF 264

static inline uint32_t lzf_idx(uint32_t h)
{
    return ((h >> (24 - LZF_HLOG)) - h * 5) & (LZF_HSIZE - 1);
}

size_t rdb_lzf_compress(const void *in_data, size_t in_len, void *out_data, size_t out_len)
{
    const unsigned char *in = in_data;
    unsigned char *out = out_data;
    if (!in_len || !out_len || in_len < 3 || in_len > UINT32_MAX / 2)
        return 0;
    /* Slots hold base + position, base growing by each call's length: a
     * slot written by an older call lies below base and reads as out of
     * range, so the 256 KB table needs no clearing per call (which would
     * cost more than compressing a short string); cleared only when the
     * 32-bit positions would wrap. */
    static uint32_t htab[LZF_HSIZE];
    static uint64_t next_base = 1;
    if (next_base + in_len > UINT32_MAX) {
        memset(htab, 0, sizeof htab);
        next_base = 1;
    }
    const uint32_t base = (uint32_t)next_base;
    next_base += in_len;
    size_t ip = 0, op = 1, lit = 0, end = in_len;
    uint32_t hval = ((uint32_t)in[0] << 8) | in[1];
    while (ip + 2 < end) {
        hval = (hval << 8) | in[ip + 2];
        uint32_t *slot = &htab[lzf_idx(hval)];
        size_t ref = (uint32_t)(*slot - base); /* >= ip when not of this call */
        *slot = base + (uint32_t)ip;
        size_t off;
        if (ref > 0 && ref < ip && (off = ip - ref - 1) < LZF_MAX_OFF &&
            in[ref + 2] == in[ip + 2] && in[ref] == in[ip] && in[ref + 1] == in[ip + 1]) {
            size_t len = 2, maxlen = end - ip - len;
            if (maxlen > LZF_MAX_REF)
                maxlen = LZF_MAX_REF;
            if (op + 4 >= out_len && op - !lit + 4 >= out_len)
                return 0;
            out[op - lit - 1] = (unsigned char)(lit - 1); /* close the literal run */
            op -= !lit;
            /* liblzf first compares 16 bytes unrolled without looking at
             * maxlen (safe: more than 16 remain), then goes on while under
             * it, so a long match may end up to 2 bytes past maxlen. */
            int open_run = 1;
            if (maxlen > 16) {
                for (int k = 0; k < 16 && open_run; k++) {
                    len++;
                    open_run = in[ref + len] == in[ip + len];
                }
            }
            if (open_run) {
                do
                    len++;
                while (len < maxlen && in[ref + len] == in[ip + len]);
            }
            len -= 2;
            ip++;
            if (len < 7) {
                out[op++] = (unsigned char)((off >> 8) + (len << 5));
            } else {
                out[op++] = (unsigned char)((off >> 8) + (7 << 5));
                out[op++] = (unsigned char)(len - 7);
            }
            out[op++] = (unsigned char)off;
            lit = 0;
            op++;
            ip += len + 1;
            if (ip + 2 >= end)
                break;
            ip -= 2;
            hval = ((uint32_t)in[ip] << 8) | in[ip + 1];
            hval = (hval << 8) | in[ip + 2];
            htab[lzf_idx(hval)] = base + (uint32_t)ip;
            ip++;
            hval = (hval << 8) | in[ip + 2];
            htab[lzf_idx(hval)] = base + (uint32_t)ip;
            ip++;
        } else {
            if (op >= out_len)
                return 0;
            lit++;
            out[op++] = in[ip++];
            if (lit == LZF_MAX_LIT) {
                out[op - lit - 1] = (unsigned char)(lit - 1);
                lit = 0;
                op++;
            }
        }
    }
    if (op + 3 > out_len)
        return 0;
    while (ip < end) {
        lit++;
        out[op++] = in[ip++];
        if (lit == LZF_MAX_LIT) {
            out[op - lit - 1] = (unsigned char)(lit - 1);
            lit = 0;
            op++;
        }
    }
    out[op - lit - 1] = (unsigned char)(lit - 1);
    op -= !lit;
    return op;
}

size_t rdb_lzf_decompress(const void *in_data, size_t in_len, void *out_data, size_t out_len)
{
    const unsigned char *ip = in_data, *in_end = ip + in_len;
    unsigned char *out = out_data;
    size_t op = 0;
    while (ip < in_end) {
        unsigned c = *ip++;
        if (c < 32) {
            size_t n = c + 1;
            if ((size_t)(in_end - ip) < n || out_len - op < n)
                return 0;
            memcpy(out + op, ip, n);
            ip += n;
            op += n;
        } else {
            size_t len = c >> 5;
            if (len == 7) {
                if (ip >= in_end)
                    return 0;
                len += *ip++;
            }
            if (ip >= in_end)
                return 0;
            size_t back = ((size_t)(c & 0x1f) << 8) + *ip++ + 1;
            len += 2;
            if (back > op || out_len - op < len)
                return 0;
            for (size_t i = 0; i < len; i++, op++) /* may overlap: byte by byte */
                out[op] = out[op - back];
        }
    }
    return op;
}

/* ---- configuration read at use (CONFIG SET applies at once) ---- */

static void cfg_cb(void *ud, const char *name, const char *value)
{
    (void)name;
    long long v;
    if (kv_parse_ll(value, strlen(value), &v) == 0)
        *(long long *)ud = v;
}

static void cfg_bool_cb(void *ud, const char *name, const char *value)
{
    (void)name;
    *(int *)ud = strcmp(value, "no") != 0;
}

static int cfg_bool(const char *name, int dflt)
{
    int v = dflt;
    kv_config_get(&srv.cfg, (bk_str){ name, strlen(name) }, cfg_bool_cb, &v);
    return v;
}

static long long cfg_ll(const char *name, long long dflt)
{
    long long v = dflt;
    kv_config_get(&srv.cfg, (bk_str){ name, strlen(name) }, cfg_cb, &v);
    return v;
}

/* The options the writer follows, read once per command (a SAVE writes
 * millions of values; a CONFIG SET is a command of its own, so it always
 * shows in the next one). In a BGSAVE child the counter stands still. */
static struct {
    uint64_t at_cmd;
    int valid;
    int compression, list_fill;
} cfg;

static void cfg_refresh(void)
{
    if (cfg.valid && cfg.at_cmd == srv.stat_cmds)
        return;
    cfg.compression = cfg_bool("rdbcompression", 1);
    cfg.list_fill = (int)cfg_ll("list-max-listpack-size", -2);
    cfg.at_cmd = srv.stat_cmds;
    cfg.valid = 1;
}

/* ---- writing helpers ---- */

static void out(bk_buf *b, const void *p, size_t n)
{
    if (buf_append(b, p, n) < 0) {
        fprintf(stderr, "brisk-kv: out of memory serialising a value\n");
        abort();
    }
}

static void out_u8(bk_buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    out(b, &c, 1);
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void rdb_save_len(bk_buf *b, uint64_t len)
{
    unsigned char h[9];
    if (len < 64) {
        out_u8(b, (unsigned)len);
    } else if (len < 16384) {
        h[0] = (unsigned char)(0x40 | (len >> 8));
        h[1] = (unsigned char)len;
        out(b, h, 2);
    } else if (len <= UINT32_MAX) {
        h[0] = 0x80;
        for (int i = 0; i < 4; i++)
            h[1 + i] = (unsigned char)(len >> (24 - 8 * i));
        out(b, h, 5);
    } else {
        h[0] = 0x81;
        for (int i = 0; i < 8; i++)
            h[1 + i] = (unsigned char)(len >> (56 - 8 * i));
        out(b, h, 9);
    }
}

/* Integer encoding of a string that is a canonical integer in int32 range:
 * returns the bytes written to h (0 when it does not apply). */
static size_t int_encoding(const char *p, size_t n, unsigned char *h)
{
    long long v;
    if (n > 11 || kv_parse_ll(p, n, &v) < 0)
        return 0;
    if (v >= -128 && v <= 127) {
        h[0] = 0xc0;
        h[1] = (unsigned char)v;
        return 2;
    }
    if (v >= -32768 && v <= 32767) {
        h[0] = 0xc1;
        put_le(h + 1, (uint64_t)v, 2);
        return 3;
    }
    if (v >= INT32_MIN && v <= INT32_MAX) {
        h[0] = 0xc2;
        put_le(h + 1, (uint64_t)v, 4);
        return 5;
    }
    return 0;
}

void rdb_save_string(bk_buf *b, const char *p, size_t n)
{
    unsigned char h[5];
    size_t hn = int_encoding(p, n, h);
    if (hn) {
        out(b, h, hn);
        return;
    }
    cfg_refresh();
    if (n > 20 && cfg.compression) {
        /* Worth it only when it saves at least 4 bytes (Redis's rule). */
        size_t cap = n - 4;
        unsigned char *z = kv_malloc(cap + 1);
        size_t zn = rdb_lzf_compress(p, n, z, cap);
        if (zn > 0) {
            out_u8(b, 0xc3);
            rdb_save_len(b, zn);
            rdb_save_len(b, n);
            out(b, z, zn);
            kv_free(z);
            return;
        }
        kv_free(z);
    }
    rdb_save_len(b, n);
    out(b, p, n);
}

static void save_double(bk_buf *b, double d)
{
    unsigned char h[8];
    uint64_t u;
    memcpy(&u, &d, 8);
    put_le(h, u, 8);
    out(b, h, 8);
}

/* ---- listpack writer ---- */

/* Size of the backlen field for an entry of l bytes. */
static size_t lp_backlen_size(size_t l)
{
    if (l <= 127)
        return 1;
    if (l < 16383)
        return 2;
    if (l < 2097151)
        return 3;
    if (l < 268435455)
        return 4;
    return 5;
}

static void lp_backlen_put(unsigned char *p, size_t l)
{
    size_t n = lp_backlen_size(l);
    if (n == 1) {
        p[0] = (unsigned char)l;
        return;
    }
    /* Most significant 7-bit group first; every byte but the first carries
     * the continuation bit (the listpack is read backwards from here). */
    for (size_t i = 0; i < n; i++) {
        unsigned g = (unsigned)(l >> (7 * (n - 1 - i))) & 127;
        p[i] = (unsigned char)(i == 0 ? g : g | 128);
    }
}

/* Encoding header of a listpack element; returns its size, and in *data
 * whether the string bytes follow it. */
static size_t lp_encode(const char *p, size_t n, unsigned char *h, int *data)
{
    long long v;
    *data = 0;
    if (n <= 20 && kv_parse_ll(p, n, &v) == 0) {
        uint64_t u = (uint64_t)v;
        if (v >= 0 && v <= 127) {
            h[0] = (unsigned char)v;
            return 1;
        }
        if (v >= -4096 && v <= 4095) {
            u &= 0x1fff;
            h[0] = (unsigned char)(0xc0 | (u >> 8));
            h[1] = (unsigned char)u;
            return 2;
        }
        static const struct { long long lo, hi; unsigned char tag; int bytes; } widths[] = {
            { -32768, 32767, 0xf1, 2 },
            { -8388608, 8388607, 0xf2, 3 },
            { INT32_MIN, INT32_MAX, 0xf3, 4 },
            { INT64_MIN, INT64_MAX, 0xf4, 8 },
        };
        for (size_t i = 0; i < BK_ARRAY_LEN(widths); i++) {
            if (v >= widths[i].lo && v <= widths[i].hi) {
                h[0] = widths[i].tag;
                put_le(h + 1, u, widths[i].bytes);
                return 1 + (size_t)widths[i].bytes;
            }
        }
    }
    *data = 1;
    if (n < 64) {
        h[0] = (unsigned char)(0x80 | n);
        return 1;
    }
    if (n < 4096) {
        h[0] = (unsigned char)(0xe0 | (n >> 8));
        h[1] = (unsigned char)n;
        return 2;
    }
    h[0] = 0xf0;
    put_le(h + 1, n, 4);
    return 5;
}

static void lp_begin(bk_buf *b)
{
    b->len = 0;
    out(b, "\0\0\0\0\0\0", 6);
}

static void lp_append(bk_buf *b, const char *p, size_t n)
{
    unsigned char h[16];
    int data;
    size_t hn = lp_encode(p, n, h, &data);
    size_t l = hn + (data ? n : 0);
    out(b, h, hn);
    if (data)
        out(b, p, n);
    lp_backlen_put(h, l);
    out(b, h, lp_backlen_size(l));
}

static void lp_end(bk_buf *b, size_t count)
{
    out_u8(b, 0xff);
    put_le((unsigned char *)b->data, b->len, 4);
    put_le((unsigned char *)b->data + 4, count < 65535 ? count : 65535, 2);
}

void rdb_lp_begin(bk_buf *b) { lp_begin(b); }
void rdb_lp_append(bk_buf *b, const char *p, size_t n) { lp_append(b, p, n); }
void rdb_lp_end(bk_buf *b, size_t count) { lp_end(b, count); }

/* ---- what Redis 7.0 would hold ---- */

static int list_quicklist_fill(void)
{
    cfg_refresh();
    return cfg.list_fill;
}

static int zset_is_listpack(zset *z)
{
    return !z->skiplist;
}

/* Whether s is an intset (see types.h); the widest value width in *width
 * (2, 4 or 8). */
static int set_intset_width(dict *s, int *width)
{
    if (!set_is_intset(s))
        return 0;
    dict_iter it;
    dict_iter_init(&it, s);
    int ok = 1;
    *width = 2;
    for (dict_node *dn; ok && (dn = dict_iter_next(&it));) {
        bk_str m = smember_str((kv_smember *)(void *)dn);
        long long v;
        ok = kv_parse_ll(m.p, m.len, &v) == 0;
        if (ok && (v < INT16_MIN || v > INT16_MAX) && *width < 4)
            *width = 4;
        if (ok && (v < INT32_MIN || v > INT32_MAX))
            *width = 8;
    }
    dict_iter_end(&it);
    return ok;
}

const char *rdb_encoding_name(kv_entry *e)
{
    switch (e->type) {
    case KV_STRING: {
        long long v;
        bk_str s = entry_str(e);
        if (e->raw)
            return "raw";
        if (e->flags & ENTRY_EMBSTR)
            return s.len <= 44 ? "embstr" : "raw";
        if (s.len <= 20 && kv_parse_ll(s.p, s.len, &v) == 0)
            return "int";
        return s.len <= 44 ? "embstr" : "raw";
    }
    case KV_LIST:
        return "quicklist"; /* 7.0 has no listpack-encoded lists */
    case KV_SET: {
        int w;
        return set_intset_width(entry_obj(e), &w) ? "intset" : "hashtable";
    }
    case KV_HASH:
        return hash_is_small(entry_obj(e)) ? "listpack" : "hashtable";
    case KV_ZSET:
        return zset_is_listpack(entry_obj(e)) ? "listpack" : "skiplist";
    case KV_STREAM:
        return "stream";
    }
    return "unknown";
}

int rdb_object_type(kv_entry *e)
{
    int w;
    switch (e->type) {
    case KV_STRING: return RDB_TYPE_STRING;
    case KV_LIST: return RDB_TYPE_LIST_QUICKLIST_2;
    case KV_SET: return set_intset_width(entry_obj(e), &w) ? RDB_TYPE_SET_INTSET : RDB_TYPE_SET;
    case KV_HASH: return hash_is_small(entry_obj(e)) ? RDB_TYPE_HASH_LISTPACK : RDB_TYPE_HASH;
    case KV_ZSET: return zset_is_listpack(entry_obj(e)) ? RDB_TYPE_ZSET_LISTPACK : RDB_TYPE_ZSET_2;
    case KV_STREAM: return RDB_TYPE_STREAM_LISTPACKS_2;
    }
    return -1;
}

/* ---- writing values ---- */

/* Whether a quicklist node of node_sz bytes and count elements takes one
 * more element of n bytes (Redis 7.0's rule for a push at either end). */
static int ql_allows(size_t node_sz, size_t count, int fill, size_t n)
{
    static const size_t levels[] = { 4096, 8192, 16384, 32768, 65536 };
    size_t new_sz = node_sz + n + 8; /* 7.0's overestimate of the entry's overhead */
    if (fill < 0) {
        size_t lvl = (size_t)(-fill) - 1;
        if (lvl < BK_ARRAY_LEN(levels) && new_sz <= levels[lvl])
            return 1;
    }
    if (new_sz > 8192)
        return 0;
    return fill >= 0 && count < (size_t)fill;
}

#define QL_PLAIN_THRESHOLD (1ull << 30)

/* The list as a quicklist of listpacks filled from the head, as RPUSH
 * builds it. */
static void save_list(bk_buf *b, kv_list *l)
{
    int fill = list_quicklist_fill();
    /* First count the nodes (the count goes before them). */
    size_t nodes = 0, sz = 0, cnt = 0;
    int open = 0;
    for (size_t i = 0; i < l->len; i++) {
        kv_lelem *el = list_at(l, i);
        unsigned char h[16];
        int data;
        if (el->len >= QL_PLAIN_THRESHOLD) {
            nodes++;
            open = 0;
            continue;
        }
        if (!open || !ql_allows(sz, cnt, fill, el->len)) {
            nodes++;
            open = 1;
            sz = 7;
            cnt = 0;
        }
        size_t hn = lp_encode(el->data, el->len, h, &data);
        size_t ln = hn + (data ? el->len : 0);
        sz += ln + lp_backlen_size(ln);
        cnt++;
    }
    rdb_save_len(b, nodes);
    bk_buf lp = { 0 };
    open = 0;
    sz = cnt = 0;
    for (size_t i = 0; i <= l->len; i++) {
        kv_lelem *el = i < l->len ? list_at(l, i) : NULL;
        int plain = el && el->len >= QL_PLAIN_THRESHOLD;
        if (open && (!el || plain || !ql_allows(sz, cnt, fill, el->len))) {
            lp_end(&lp, cnt);
            rdb_save_len(b, 2); /* packed */
            rdb_save_string(b, lp.data, lp.len);
            open = 0;
        }
        if (!el)
            break;
        if (plain) {
            rdb_save_len(b, 1);
            rdb_save_string(b, el->data, el->len);
            continue;
        }
        if (!open) {
            lp_begin(&lp);
            open = 1;
            cnt = 0;
        }
        lp_append(&lp, el->data, el->len);
        sz = lp.len + 1;
        cnt++;
    }
    buf_free(&lp);
}

int rdb_list_shape(kv_list *l, size_t *nodes, size_t *bytes)
{
    int fill = list_quicklist_fill();
    size_t sz = 0, cnt = 0;
    int open = 0;
    *nodes = *bytes = 0;
    for (size_t i = 0; i < l->len; i++) {
        kv_lelem *el = list_at(l, i);
        unsigned char h[16];
        int data;
        if (el->len >= QL_PLAIN_THRESHOLD) {
            (*nodes)++;
            *bytes += el->len;
            open = 0;
            continue;
        }
        if (!open || !ql_allows(sz, cnt, fill, el->len)) {
            if (open)
                *bytes += sz;
            (*nodes)++;
            open = 1;
            sz = 7;
            cnt = 0;
        }
        size_t hn = lp_encode(el->data, el->len, h, &data);
        size_t ln = hn + (data ? el->len : 0);
        sz += ln + lp_backlen_size(ln);
        cnt++;
    }
    if (open)
        *bytes += sz;
    return fill;
}

static void save_set(bk_buf *b, dict *s)
{
    int width;
    if (set_intset_width(s, &width)) {
        size_t n = dict_size(s);
        long long *v = kv_malloc(n * sizeof *v + 1);
        size_t k = 0;
        dict_iter it;
        dict_iter_init(&it, s);
        for (dict_node *dn; (dn = dict_iter_next(&it));) {
            bk_str m = smember_str((kv_smember *)(void *)dn);
            kv_parse_ll(m.p, m.len, &v[k++]);
        }
        dict_iter_end(&it);
        /* Sorted ascending, as an intset keeps them. */
        for (size_t i = 1; i < n; i++) {
            long long x = v[i];
            size_t j = i;
            for (; j > 0 && v[j - 1] > x; j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
        size_t bytes = 8 + n * (size_t)width;
        unsigned char *is = kv_malloc(bytes);
        put_le(is, (uint64_t)width, 4);
        put_le(is + 4, n, 4);
        for (size_t i = 0; i < n; i++)
            put_le(is + 8 + i * (size_t)width, (uint64_t)v[i], width);
        rdb_save_string(b, (const char *)is, bytes);
        kv_free(is);
        kv_free(v);
        return;
    }
    rdb_save_len(b, dict_size(s));
    dict_iter it;
    dict_iter_init(&it, s);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        bk_str m = smember_str((kv_smember *)(void *)dn);
        rdb_save_string(b, m.p, m.len);
    }
    dict_iter_end(&it);
}

static void save_hash(bk_buf *b, kv_hash *h)
{
    int lp = hash_is_small(h);
    bk_buf l = { 0 };
    if (lp)
        lp_begin(&l);
    else
        rdb_save_len(b, hash_size(h));
    hash_iter it;
    hash_iter_init(&it, h);
    for (bk_str k, v; hash_iter_next(&it, &k, &v);) {
        if (lp) {
            lp_append(&l, k.p, k.len);
            lp_append(&l, v.p, v.len);
        } else {
            rdb_save_string(b, k.p, k.len);
            rdb_save_string(b, v.p, v.len);
        }
    }
    hash_iter_end(&it);
    if (lp) {
        lp_end(&l, 2 * hash_size(h));
        rdb_save_string(b, l.data, l.len);
        buf_free(&l);
    }
}

/* A score as a zset listpack holds it: integers in the safe range as
 * integers, others with 17 significant digits (Redis 7.0's d2string). */
static size_t score_text(char *o, size_t cap, double d)
{
    if (isnan(d))
        return (size_t)snprintf(o, cap, "nan");
    if (isinf(d))
        return (size_t)snprintf(o, cap, d < 0 ? "-inf" : "inf");
    if (d == 0) /* -0 too: Redis 7.0 stores it as the integer 0 */
        return (size_t)snprintf(o, cap, "0");
    if (d > -4503599627370495.0 && d < 4503599627370496.0 && d == (double)(long long)d)
        return kv_fmt_ll(o, (long long)d);
    return (size_t)snprintf(o, cap, "%.17g", d);
}

static void save_zset(bk_buf *b, zset *z)
{
    if (zset_is_listpack(z)) {
        bk_buf l = { 0 };
        lp_begin(&l);
        for (zs_node *n = z->header->lv[0].forward; n; n = n->lv[0].forward) {
            char t[64];
            bk_str m = zs_member(n);
            lp_append(&l, m.p, m.len);
            lp_append(&l, t, score_text(t, sizeof t, n->score));
        }
        lp_end(&l, 2 * z->length);
        rdb_save_string(b, l.data, l.len);
        buf_free(&l);
        return;
    }
    /* Highest first, so a loader inserting at the head does no search. */
    rdb_save_len(b, z->length);
    for (zs_node *n = z->tail; n; n = n->backward) {
        bk_str m = zs_member(n);
        rdb_save_string(b, m.p, m.len);
        save_double(b, n->score);
    }
}

void rdb_save_object(bk_buf *b, kv_entry *e)
{
    switch (e->type) {
    case KV_STRING: {
        bk_str s = entry_str(e);
        rdb_save_string(b, s.p, s.len);
        break;
    }
    case KV_LIST: save_list(b, entry_obj(e)); break;
    case KV_SET: save_set(b, entry_obj(e)); break;
    case KV_HASH: save_hash(b, entry_obj(e)); break;
    case KV_ZSET: save_zset(b, entry_obj(e)); break;
    case KV_STREAM: stream_rdb_save(b, entry_obj(e)); break;
    }
}

void rdb_dump_payload(bk_buf *b, kv_entry *e)
{
    out_u8(b, (unsigned)rdb_object_type(e));
    rdb_save_object(b, e);
    unsigned char f[10];
    put_le(f, RDB_VERSION, 2);
    out(b, f, 2);
    put_le(f, rdb_crc64(0, b->data, b->len), 8);
    out(b, f, 8);
}

/* ---- reading ---- */

static int rd(rdb_reader *r, void *dst, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return -1;
    memcpy(dst, r->p, n);
    r->p += n;
    return 0;
}

/* A length, or (when enc is not NULL) a special encoding 0..3 in *enc. */
static int load_len(rdb_reader *r, uint64_t *len, int *enc)
{
    unsigned char c[8];
    if (rd(r, c, 1) < 0)
        return -1;
    if (enc)
        *enc = -1;
    switch (c[0] >> 6) {
    case 0:
        *len = c[0] & 0x3f;
        return 0;
    case 1: {
        unsigned char d;
        if (rd(r, &d, 1) < 0)
            return -1;
        *len = ((uint64_t)(c[0] & 0x3f) << 8) | d;
        return 0;
    }
    case 2: {
        int n = c[0] == 0x80 ? 4 : c[0] == 0x81 ? 8 : 0;
        if (!n || rd(r, c, (size_t)n) < 0)
            return -1;
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
            v = (v << 8) | c[i];
        *len = v;
        return 0;
    }
    default:
        if (!enc)
            return -1;
        *enc = c[0] & 0x3f;
        *len = 0;
        return 0;
    }
}

int rdb_load_len(rdb_reader *r, uint64_t *len)
{
    return load_len(r, len, NULL);
}

/* LZF decompression output is bounded: a 2-byte back reference yields at
 * most 264 bytes, so nothing real expands by more than ~140x. */
#define LZF_MAX_RATIO 140

int rdb_load_string(rdb_reader *r, char **s, size_t *n)
{
    uint64_t len;
    int enc;
    if (load_len(r, &len, &enc) < 0)
        return -1;
    if (enc >= 0 && enc <= 2) {
        int bytes = 1 << enc;
        unsigned char d[4];
        if (rd(r, d, (size_t)bytes) < 0)
            return -1;
        uint64_t u = get_le(d, bytes);
        long long v = bytes == 1 ? (int8_t)u : bytes == 2 ? (int16_t)u : (int32_t)u;
        *s = kv_malloc(KV_LL_STR_MAX + 1);
        *n = kv_fmt_ll(*s, v);
        (*s)[*n] = '\0';
        return 0;
    }
    if (enc == 3) {
        uint64_t clen, ulen;
        if (rdb_load_len(r, &clen) < 0 || rdb_load_len(r, &ulen) < 0)
            return -1;
        if (clen == 0 || ulen == 0 || clen > (uint64_t)(r->end - r->p) ||
            ulen / LZF_MAX_RATIO > clen || ulen > srv.cfg.proto_max_bulk_len)
            return -1;
        char *o = kv_malloc((size_t)ulen + 1);
        if (rdb_lzf_decompress(r->p, (size_t)clen, o, (size_t)ulen) != ulen) {
            kv_free(o);
            return -1;
        }
        r->p += clen;
        o[ulen] = '\0';
        *s = o;
        *n = (size_t)ulen;
        return 0;
    }
    if (enc >= 0 || len > (uint64_t)(r->end - r->p))
        return -1;
    char *o = kv_malloc((size_t)len + 1);
    memcpy(o, r->p, (size_t)len);
    o[len] = '\0';
    r->p += len;
    *s = o;
    *n = (size_t)len;
    return 0;
}

/* Element callback of the blob decoders: 0 to go on, -1 to stop (error). */
typedef int (*elem_fn)(void *ud, const char *p, size_t n);

/* Walks a listpack, checking its structure. Returns the element count or
 * -1. */
static long long lp_walk(const unsigned char *lp, size_t size, elem_fn fn, void *ud)
{
    if (size < 7 || get_le(lp, 4) != size || lp[size - 1] != 0xff)
        return -1;
    size_t hdr_count = (size_t)get_le(lp + 4, 2);
    const unsigned char *p = lp + 6, *end = lp + size - 1;
    long long count = 0;
    while (p < end) {
        unsigned c = p[0];
        size_t hn, dn = 0;
        long long v = 0;
        int is_int = 1;
        size_t avail = (size_t)(end - p);
        if (c < 0x80) {
            hn = 1;
            v = c;
        } else if ((c & 0xc0) == 0x80) {
            hn = 1;
            dn = c & 0x3f;
            is_int = 0;
        } else if ((c & 0xe0) == 0xc0) {
            if (avail < 2)
                return -1;
            uint64_t u = ((uint64_t)(c & 0x1f) << 8) | p[1];
            v = u >= 4096 ? (long long)u - 8192 : (long long)u;
            hn = 2;
        } else if ((c & 0xf0) == 0xe0) {
            if (avail < 2)
                return -1;
            hn = 2;
            dn = ((size_t)(c & 0x0f) << 8) | p[1];
            is_int = 0;
        } else if (c == 0xf0) {
            if (avail < 5)
                return -1;
            hn = 5;
            dn = (size_t)get_le(p + 1, 4);
            is_int = 0;
        } else if (c >= 0xf1 && c <= 0xf4) {
            static const int widths[] = { 2, 3, 4, 8 };
            int w = widths[c - 0xf1];
            if (avail < (size_t)w + 1)
                return -1;
            uint64_t u = get_le(p + 1, w);
            if (w < 8 && (u >> (8 * w - 1)))
                u |= ~0ull << (8 * w); /* sign-extend */
            v = (long long)u;
            hn = 1 + (size_t)w;
        } else {
            return -1; /* 0xf5..0xfe unused, 0xff only at the end */
        }
        if (dn > avail - hn)
            return -1;
        size_t l = hn + dn, bl = lp_backlen_size(l);
        if (bl > avail - l)
            return -1;
        unsigned char want[5];
        lp_backlen_put(want, l);
        if (memcmp(want, p + l, bl) != 0)
            return -1;
        if (fn) {
            int rc;
            if (is_int) {
                char t[KV_LL_STR_MAX];
                rc = fn(ud, t, kv_fmt_ll(t, v));
            } else {
                rc = fn(ud, (const char *)p + hn, dn);
            }
            if (rc < 0)
                return -1;
        }
        count++;
        p += l + bl;
    }
    if (hdr_count != 65535 && (size_t)count != hdr_count)
        return -1;
    return count;
}

long long rdb_lp_walk(const unsigned char *lp, size_t size,
                      int (*fn)(void *ud, const char *p, size_t n), void *ud)
{
    return lp_walk(lp, size, fn, ud);
}

/* Walks a ziplist. Returns the element count or -1. */
static long long zl_walk(const unsigned char *zl, size_t size, elem_fn fn, void *ud)
{
    if (size < 11 || get_le(zl, 4) != size || zl[size - 1] != 0xff || get_le(zl + 4, 4) > size - 1)
        return -1;
    size_t hdr_count = (size_t)get_le(zl + 8, 2);
    const unsigned char *p = zl + 10, *end = zl + size - 1;
    size_t prev_len = 0;
    long long count = 0;
    while (p < end) {
        const unsigned char *start = p;
        size_t avail = (size_t)(end - p);
        size_t pl;
        if (p[0] < 254) {
            pl = p[0];
            p += 1;
        } else {
            if (p[0] != 254 || avail < 5)
                return -1;
            pl = (size_t)get_le(p + 1, 4);
            p += 5;
        }
        if (pl != prev_len)
            return -1;
        avail = (size_t)(end - p);
        if (avail < 1)
            return -1;
        unsigned c = p[0];
        size_t hn, dn = 0;
        int is_int = 1;
        long long v = 0;
        switch (c >> 6) {
        case 0:
            hn = 1;
            dn = c & 0x3f;
            is_int = 0;
            break;
        case 1:
            if (avail < 2)
                return -1;
            hn = 2;
            dn = ((size_t)(c & 0x3f) << 8) | p[1];
            is_int = 0;
            break;
        case 2:
            if (c != 0x80 || avail < 5)
                return -1;
            hn = 5;
            dn = ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
            is_int = 0;
            break;
        default: {
            int w;
            if (c == 0xc0)
                w = 2;
            else if (c == 0xd0)
                w = 4;
            else if (c == 0xe0)
                w = 8;
            else if (c == 0xf0)
                w = 3;
            else if (c == 0xfe)
                w = 1;
            else if (c >= 0xf1 && c <= 0xfd)
                w = 0;
            else
                return -1;
            if (avail < (size_t)w + 1)
                return -1;
            if (w == 0) {
                v = (long long)(c & 0x0f) - 1;
            } else {
                uint64_t u = get_le(p + 1, w);
                if (w < 8 && (u >> (8 * w - 1)))
                    u |= ~0ull << (8 * w);
                v = (long long)u;
            }
            hn = 1 + (size_t)w;
        }
        }
        if (dn > avail - hn)
            return -1;
        if (fn) {
            int rc;
            if (is_int) {
                char t[KV_LL_STR_MAX];
                rc = fn(ud, t, kv_fmt_ll(t, v));
            } else {
                rc = fn(ud, (const char *)p + hn, dn);
            }
            if (rc < 0)
                return -1;
        }
        p += hn + dn;
        prev_len = (size_t)(p - start);
        count++;
    }
    if (hdr_count != 65535 && (size_t)count != hdr_count)
        return -1;
    return count;
}

/* Collected pairs for hashes and zsets out of a listpack/ziplist. */
typedef struct {
    int type; /* KV_HASH or KV_ZSET */
    void *obj;
    char *pend; /* a field / member waiting for its value */
    size_t pend_len;
    int have;
} pair_acc;

static int pair_elem(void *ud, const char *p, size_t n)
{
    pair_acc *a = ud;
    if (!a->have) {
        a->pend = kv_malloc(n + 1);
        memcpy(a->pend, p, n);
        a->pend_len = n;
        a->have = 1;
        return 0;
    }
    bk_str k = { a->pend, a->pend_len };
    int rc = 0;
    if (a->type == KV_HASH) {
        rc = hash_set(a->obj, k, (bk_str){ p, n }) ? 0 : -1; /* -1: a duplicate */
    } else {
        /* Redis reads packed scores with strtod on up to 127 bytes and does
         * not check them: junk reads as 0. NaN is refused (it would break
         * the ordering). */
        char t[128];
        size_t tn = BK_MIN(n, sizeof t - 1);
        memcpy(t, p, tn);
        t[tn] = '\0';
        double d = strtod(t, NULL);
        if (isnan(d) || zset_find(a->obj, k))
            rc = -1;
        else
            zset_insert(a->obj, d, k);
    }
    kv_free(a->pend);
    a->pend = NULL;
    a->have = 0;
    return rc;
}

static int list_elem(void *ud, const char *p, size_t n)
{
    list_push(ud, 1, lelem_new(p, n));
    return 0;
}

static int set_elem(void *ud, const char *p, size_t n)
{
    return set_add(ud, (bk_str){ p, n }) ? 0 : -1;
}

static void *new_obj(int type)
{
    switch (type) {
    case KV_LIST: return list_new();
    case KV_SET: return set_new();
    case KV_HASH: return hash_new();
    case KV_ZSET: return zset_new();
    }
    return NULL;
}

static size_t obj_len(int type, void *o)
{
    switch (type) {
    case KV_LIST: return ((kv_list *)o)->len;
    case KV_SET: return dict_size(o);
    case KV_HASH: return hash_size(o);
    case KV_ZSET: return ((zset *)o)->length;
    }
    return 0;
}

/* Decodes one listpack or ziplist blob into v (type already set). */
static int load_packed(rdb_reader *r, rdb_value *v, int ziplist)
{
    char *s;
    size_t n;
    if (rdb_load_string(r, &s, &n) < 0)
        return -1;
    pair_acc acc = { v->type, v->obj, NULL, 0, 0 };
    elem_fn fn;
    void *ud;
    if (v->type == KV_LIST) {
        fn = list_elem;
        ud = v->obj;
    } else if (v->type == KV_SET) {
        fn = set_elem;
        ud = v->obj;
    } else {
        fn = pair_elem;
        ud = &acc;
    }
    long long cnt = ziplist ? zl_walk((unsigned char *)s, n, fn, ud)
                            : lp_walk((unsigned char *)s, n, fn, ud);
    int rc = cnt < 0 || acc.have ? -1 : 0; /* an odd count of pair elements */
    kv_free(acc.pend);
    kv_free(s);
    return rc;
}

static int load_intset(rdb_reader *r, rdb_value *v)
{
    char *s;
    size_t n;
    if (rdb_load_string(r, &s, &n) < 0)
        return -1;
    const unsigned char *p = (const unsigned char *)s;
    int rc = -1;
    if (n >= 8) {
        uint64_t w = get_le(p, 4), cnt = get_le(p + 4, 4);
        if ((w == 2 || w == 4 || w == 8) && cnt * w == n - 8) {
            rc = 0;
            long long prev = 0;
            for (uint64_t i = 0; i < cnt && rc == 0; i++) {
                uint64_t u = get_le(p + 8 + i * w, (int)w);
                if (w < 8 && (u >> (8 * w - 1)))
                    u |= ~0ull << (8 * w);
                long long x = (long long)u;
                if (i > 0 && x <= prev) /* strictly ascending, no duplicates */
                    rc = -1;
                prev = x;
                char t[KV_LL_STR_MAX];
                if (rc == 0)
                    set_add(v->obj, (bk_str){ t, kv_fmt_ll(t, x) });
            }
        }
    }
    kv_free(s);
    return rc;
}

static int load_zipmap(rdb_reader *r, rdb_value *v)
{
    char *s;
    size_t n;
    if (rdb_load_string(r, &s, &n) < 0)
        return -1;
    const unsigned char *p = (const unsigned char *)s + 1, *end = (const unsigned char *)s + n;
    int rc = n >= 2 ? 0 : -1;
    bk_str kv[2];
    while (rc == 0) {
        if (p >= end) {
            rc = -1;
            break;
        }
        if (*p == 0xff) {
            rc = p + 1 == end ? 0 : -1;
            break;
        }
        for (int k = 0; k < 2 && rc == 0; k++) {
            size_t len, free_b = 0;
            if (p >= end) {
                rc = -1;
                break;
            }
            if (*p < 254) {
                len = *p++;
            } else if (*p == 254 && end - p >= 5) {
                len = (size_t)get_le(p + 1, 4);
                p += 5;
            } else {
                rc = -1;
                break;
            }
            if (k == 1) {
                if (p >= end) {
                    rc = -1;
                    break;
                }
                free_b = *p++;
            }
            if (len > (size_t)(end - p) || free_b > (size_t)(end - p) - len) {
                rc = -1;
                break;
            }
            kv[k] = (bk_str){ (const char *)p, len };
            p += len + free_b;
        }
        if (rc == 0) {
            rc = hash_set(v->obj, kv[0], kv[1]) ? 0 : -1; /* -1: a duplicate */
        }
    }
    kv_free(s);
    return rc;
}

static int load_quicklist(rdb_reader *r, rdb_value *v, int version)
{
    uint64_t nodes;
    if (rdb_load_len(r, &nodes) < 0)
        return -1;
    for (uint64_t i = 0; i < nodes; i++) {
        uint64_t container = 2;
        if (version == 2 && (rdb_load_len(r, &container) < 0 || (container != 1 && container != 2)))
            return -1;
        if (container == 1) { /* plain: one element */
            char *s;
            size_t n;
            if (rdb_load_string(r, &s, &n) < 0)
                return -1;
            if (n == 0) { /* Redis refuses a node of encoded length 0 */
                kv_free(s);
                return -1;
            }
            list_push(v->obj, 1, lelem_new(s, n));
            kv_free(s);
            continue;
        }
        char *s;
        size_t n;
        if (rdb_load_string(r, &s, &n) < 0)
            return -1;
        long long cnt = version == 2 ? lp_walk((unsigned char *)s, n, list_elem, v->obj)
                                     : zl_walk((unsigned char *)s, n, list_elem, v->obj);
        kv_free(s);
        /* Redis skips empty nodes quietly; a malformed one fails the load. */
        if (cnt < 0)
            return -1;
    }
    return 0;
}

static int load_double_text(rdb_reader *r, double *d)
{
    unsigned char len;
    char t[256];
    if (rd(r, &len, 1) < 0)
        return -1;
    if (len >= 253) {
        if (len == 253)
            return -1; /* NaN is refused for scores */
        *d = len == 254 ? INFINITY : -INFINITY;
        return 0;
    }
    if (rd(r, t, len) < 0)
        return -1;
    t[len] = '\0';
    char *e;
    *d = strtod(t, &e);
    return (e == t + len && len > 0 && !isnan(*d)) ? 0 : -1;
}

/* RDB_TYPE_LIST / SET / HASH / ZSET / ZSET_2: a count, then strings. */
static int load_plain(rdb_reader *r, rdb_value *v, int rdbtype)
{
    uint64_t count;
    if (rdb_load_len(r, &count) < 0 || count == 0)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        char *a, *b = NULL;
        size_t an, bn = 0;
        if (rdb_load_string(r, &a, &an) < 0)
            return -1;
        bk_str k = { a, an };
        int rc = 0;
        switch (rdbtype) {
        case RDB_TYPE_LIST: list_push(v->obj, 1, lelem_new(a, an)); break;
        case RDB_TYPE_SET: rc = set_add(v->obj, k) ? 0 : -1; break;
        case RDB_TYPE_HASH:
            rc = rdb_load_string(r, &b, &bn);
            if (rc == 0 && !hash_set(v->obj, k, (bk_str){ b, bn }))
                rc = -1; /* a duplicate */
            break;
        default: { /* zsets */
            double d;
            if (rdbtype == RDB_TYPE_ZSET_2) {
                unsigned char db[8];
                rc = rd(r, db, 8);
                uint64_t u = get_le(db, 8);
                memcpy(&d, &u, 8);
                if (rc == 0 && isnan(d))
                    rc = -1;
            } else {
                rc = load_double_text(r, &d);
            }
            if (rc == 0 && zset_find(v->obj, k))
                rc = -1;
            if (rc == 0)
                zset_insert(v->obj, d, k);
        }
        }
        kv_free(a);
        kv_free(b);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static const struct {
    int rdbtype, type;
} type_map[] = {
    { RDB_TYPE_STRING, KV_STRING },         { RDB_TYPE_LIST, KV_LIST },
    { RDB_TYPE_SET, KV_SET },               { RDB_TYPE_ZSET, KV_ZSET },
    { RDB_TYPE_HASH, KV_HASH },             { RDB_TYPE_ZSET_2, KV_ZSET },
    { RDB_TYPE_HASH_ZIPMAP, KV_HASH },      { RDB_TYPE_LIST_ZIPLIST, KV_LIST },
    { RDB_TYPE_SET_INTSET, KV_SET },        { RDB_TYPE_ZSET_ZIPLIST, KV_ZSET },
    { RDB_TYPE_HASH_ZIPLIST, KV_HASH },     { RDB_TYPE_LIST_QUICKLIST, KV_LIST },
    { RDB_TYPE_HASH_LISTPACK, KV_HASH },    { RDB_TYPE_ZSET_LISTPACK, KV_ZSET },
    { RDB_TYPE_LIST_QUICKLIST_2, KV_LIST },
    { RDB_TYPE_STREAM_LISTPACKS, KV_STREAM }, { RDB_TYPE_STREAM_LISTPACKS_2, KV_STREAM },
};

int rdb_load_object(rdb_reader *r, int rdbtype, rdb_value *v)
{
    memset(v, 0, sizeof *v);
    int type = -1;
    for (size_t i = 0; i < BK_ARRAY_LEN(type_map); i++)
        if (type_map[i].rdbtype == rdbtype)
            type = type_map[i].type;
    if (type < 0)
        return -1;
    v->type = type;
    if (type == KV_STRING)
        return rdb_load_string(r, &v->s, &v->s_len);
    if (type == KV_STREAM) { /* empty streams are valid */
        v->obj = stream_rdb_load(r, rdbtype == RDB_TYPE_STREAM_LISTPACKS_2);
        return v->obj ? 0 : -1;
    }
    v->obj = new_obj(type);
    int rc;
    switch (rdbtype) {
    case RDB_TYPE_LIST_ZIPLIST:
    case RDB_TYPE_ZSET_ZIPLIST:
    case RDB_TYPE_HASH_ZIPLIST: rc = load_packed(r, v, 1); break;
    case RDB_TYPE_HASH_LISTPACK:
    case RDB_TYPE_ZSET_LISTPACK: rc = load_packed(r, v, 0); break;
    case RDB_TYPE_SET_INTSET: rc = load_intset(r, v); break;
    case RDB_TYPE_HASH_ZIPMAP: rc = load_zipmap(r, v); break;
    case RDB_TYPE_LIST_QUICKLIST: rc = load_quicklist(r, v, 1); break;
    case RDB_TYPE_LIST_QUICKLIST_2: rc = load_quicklist(r, v, 2); break;
    default: rc = load_plain(r, v, rdbtype); break;
    }
    /* Empty collections are refused, as Redis 7.0 does. */
    if (rc == 0 && obj_len(type, v->obj) == 0)
        rc = -1;
    if (rc == 0 && type == KV_ZSET) {
        if (rdbtype == RDB_TYPE_ZSET_ZIPLIST || rdbtype == RDB_TYPE_ZSET_LISTPACK)
            zset_enc_loaded_packed(v->obj);
        else
            zset_enc_fit(v->obj);
    }
    if (rc < 0) {
        rdb_value_free(v);
        return -1;
    }
    return 0;
}

void rdb_value_free(rdb_value *v)
{
    if (v->obj)
        obj_free(v->type, v->obj);
    kv_free(v->s);
    v->obj = NULL;
    v->s = NULL;
}

kv_entry *rdb_value_store(kv_db *db, bk_str key, rdb_value *v)
{
    kv_entry *e;
    if (v->type == KV_STRING) {
        e = db_store_string(db, key, NULL, v->s, v->s_len, 0);
        kv_free(v->s);
    } else {
        e = db_add_obj(db, key, v->type, v->obj);
    }
    v->s = NULL;
    v->obj = NULL;
    return e;
}

int rdb_verify_payload(const char *p, size_t n)
{
    if (n < 10)
        return -1;
    const unsigned char *f = (const unsigned char *)p + n - 10;
    if (get_le(f, 2) > RDB_VERSION)
        return -1;
    return rdb_crc64(0, p, n - 8) == get_le(f + 2, 8) ? 0 : -1;
}

int rdb_load_payload(const char *p, size_t n, rdb_value *v)
{
    if (n < 11)
        return -1;
    /* Like Redis (whose reader's buffer is the whole payload), the object
     * may run into the footer bytes, and bytes left before it are ignored:
     * the CRC covered them all. */
    rdb_reader r = { (const unsigned char *)p + 1, (const unsigned char *)p + n };
    return rdb_load_object(&r, (unsigned char)p[0], v);
}
