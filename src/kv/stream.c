/* Streams: the block store, iterators, trimming, and the consumer groups
 * with their pending entry lists (see stream.h for the layout). */
#include "kv/stream.h"

#include "kv/mem.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Writes u in decimal at out, right to left into a scratch buffer first
 * (snprintf was a third of an XADD's instructions: two IDs per call). */
static size_t fmt_u64(char *out, uint64_t u)
{
    char tmp[20];
    size_t n = sizeof tmp;
    do {
        tmp[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    memcpy(out, tmp + n, sizeof tmp - n);
    return sizeof tmp - n;
}

size_t st_id_fmt(char *out, st_id id)
{
    /* Consecutive IDs share their ms part (an XADD formats its ID for the
     * reply and again for the AOF; a range reply walks one ms at a time):
     * its digits are kept. Main thread only. */
    static uint64_t ms_cached = UINT64_MAX;
    static char ms_digits[20];
    static size_t ms_len;
    if (id.ms != ms_cached) {
        ms_len = fmt_u64(ms_digits, id.ms);
        ms_cached = id.ms;
    }
    size_t n = ms_len;
    memcpy(out, ms_digits, ms_len);
    out[n++] = '-';
    n += fmt_u64(out + n, id.seq);
    out[n] = '\0';
    return n;
}

/* Config values are read per append, so a CONFIG SET takes effect at once,
 * as in Redis. */

typedef struct node_cfg_cache {
    const char *str;  /* the option's value (stable storage, rewritten in place) */
    char seen[24];    /* the value parsed last: reparsed only when it changed */
    size_t value;
} node_cfg_cache;

static size_t node_cfg(const char *name, node_cfg_cache *c, long long dflt)
{
    if (!c->str) {
        c->str = kv_config_noop_str(name);
        c->value = (size_t)dflt;
        if (!c->str)
            return c->value;
        c->seen[0] = '\0';
    } else if (strncmp(c->str, c->seen, sizeof c->seen) == 0) {
        return c->value;
    }
    long long v = dflt;
    size_t len = strlen(c->str);
    if (kv_parse_ll(c->str, len, &v) != 0)
        v = dflt;
    c->value = v > 0 ? (size_t)v : 0;
    /* a value too long for the snapshot is parsed each time */
    if (len < sizeof c->seen)
        memcpy(c->seen, c->str, len + 1);
    else
        c->seen[0] = '\0';
    return c->value;
}

size_t stream_node_max_entries(void)
{
    static node_cfg_cache c;
    return node_cfg("stream-node-max-entries", &c, 100);
}

size_t stream_node_max_bytes(void)
{
    static node_cfg_cache c;
    return node_cfg("stream-node-max-bytes", &c, 4096);
}

/* ---- blocks ---- */

static size_t put_bytes(unsigned char *p, bk_str s)
{
    size_t n = kv_varint_put(p, s.len);
    memcpy(p + n, s.p, s.len);
    return n + s.len;
}

static bk_str get_bytes(const unsigned char **pp)
{
    size_t n;
    uint64_t len = kv_varint_get(*pp, &n);
    bk_str s = { (const char *)*pp + n, (size_t)len };
    *pp += n + len;
    return s;
}

static void skip_bytes(const unsigned char **pp)
{
    size_t n;
    uint64_t len = kv_varint_get(*pp, &n);
    *pp += n + len;
}

/* Grows b so that it can hold need more bytes; returns the block (moved).
 * Capacity grows by a quarter (at least 64 bytes): appends stay amortised
 * O(1) while the slack stays small, which is most of the memory per entry. */
static st_block *block_reserve(st_block *b, size_t need)
{
    if ((size_t)b->len + need <= b->cap)
        return b;
    size_t cap = (size_t)b->len + need;
    cap += BK_MAX(cap / 4, (size_t)64);
    cap = (cap + 15) & ~(size_t)15;
    b = kv_realloc(b, sizeof *b + cap);
    b->cap = (uint32_t)cap;
    return b;
}

/* ---- Redis's listpack sizes (node splits by stream-node-max-bytes) ---- */

/* Bytes of an integer element: encoding, then a one-byte back length. */
static size_t lp_int_size(int64_t v)
{
    size_t enc = v >= 0 && v <= 127                ? 1
                 : v >= -4096 && v <= 4095         ? 2
                 : v >= -32768 && v <= 32767       ? 3
                 : v >= -8388608 && v <= 8388607   ? 4
                 : v >= INT32_MIN && v <= INT32_MAX ? 5
                                                   : 9;
    return enc + 1;
}

/* Whether a listpack stores s as an integer: a canonical decimal int64
 * ("0", or an optional '-' then no leading zero). */
static int lp_is_int(bk_str s, int64_t *v)
{
    if (s.len == 0 || s.len > 20)
        return 0;
    size_t i = s.p[0] == '-';
    if (i == s.len || s.p[i] < '0' || s.p[i] > '9' || (s.p[i] == '0' && s.len > 1))
        return 0;
    long long x;
    if (kv_parse_ll(s.p, s.len, &x) != 0)
        return 0;
    *v = x;
    return 1;
}

static size_t lp_str_size(bk_str s)
{
    int64_t v;
    if (lp_is_int(s, &v))
        return lp_int_size(v);
    size_t enc = s.len < 64 ? 1 + s.len : s.len < 4096 ? 2 + s.len : 5 + s.len;
    size_t back = enc <= 127 ? 1 : enc < 16383 ? 2 : enc < 2097151 ? 3 : enc < 268435455 ? 4 : 5;
    return enc + back;
}

static void lpb_add(st_block *b, size_t n)
{
    size_t t = (size_t)b->lpb + n;
    b->lpb = t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

static size_t lp_bytes(const st_block *b)
{
    return (size_t)b->lpb + lp_int_size(b->live) + lp_int_size((int64_t)(b->added - b->live));
}

static st_block *block_new(st_id first, const bk_str *fv, size_t nfields, size_t need)
{
    size_t mf = kv_varint_len(nfields);
    for (size_t i = 0; i < nfields; i++)
        mf += kv_varint_len(fv[2 * i].len) + fv[2 * i].len;
    size_t cap = ((mf + need + 64) + 15) & ~(size_t)15;
    st_block *b = kv_malloc(sizeof *b + cap);
    b->first = first;
    b->cap = (uint32_t)cap;
    b->live = b->added = 0;
    unsigned char *p = b->data;
    p += kv_varint_put(p, nfields);
    for (size_t i = 0; i < nfields; i++)
        p += put_bytes(p, fv[2 * i]);
    b->mf_len = (uint32_t)(p - b->data);
    b->len = b->mf_len;
    /* header and end byte, the field count, the fields, the 0 ending them */
    size_t lpb = 7 + lp_int_size((int64_t)nfields) + lp_int_size(0);
    for (size_t i = 0; i < nfields; i++)
        lpb += lp_str_size(fv[2 * i]);
    b->lpb = 0;
    lpb_add(b, lpb);
    return b;
}

static int same_fields(const st_block *b, const bk_str *fv, size_t nfields)
{
    const unsigned char *p = b->data;
    size_t n;
    if (kv_varint_get(p, &n) != nfields)
        return 0;
    p += n;
    for (size_t i = 0; i < nfields; i++) {
        bk_str f = get_bytes(&p);
        if (f.len != fv[2 * i].len || memcmp(f.p, fv[2 * i].p, f.len) != 0)
            return 0;
    }
    return 1;
}

/* Decodes the entry at p: its ID, field count and whether it uses the
 * master fields; returns where its fields start. */
static const unsigned char *entry_head(const st_block *b, const unsigned char *p, st_id *id,
                                       size_t *nfields, int *same)
{
    size_t n;
    uint64_t dms = kv_varint_get(p, &n);
    p += n;
    id->ms = b->first.ms + dms;
    id->seq = kv_varint_get(p, &n);
    if (dms == 0)
        id->seq += b->first.seq;
    p += n;
    uint64_t nf = kv_varint_get(p, &n);
    p += n;
    if (nf == 0) {
        *same = 1;
        *nfields = (size_t)kv_varint_get(b->data, &n);
    } else {
        *same = 0;
        *nfields = (size_t)nf;
    }
    return p;
}

static const unsigned char *entry_skip(const st_block *b, const unsigned char *p)
{
    st_id id;
    size_t nf;
    int same;
    p = entry_head(b, p, &id, &nf, &same);
    for (size_t i = 0; i < (same ? nf : 2 * nf); i++)
        skip_bytes(&p);
    return p;
}

static st_block *blk(const kv_stream *s, size_t i) { return s->blocks[s->head + i]; }

static void blocks_push(kv_stream *s, st_block *b)
{
    if (s->head + s->nblocks == s->cap) {
        if (s->head > s->nblocks) {
            /* Slide down what trimming at the front left behind. */
            memmove(s->blocks, s->blocks + s->head, s->nblocks * sizeof *s->blocks);
            s->head = 0;
        } else {
            s->cap = s->cap ? s->cap * 2 : 4;
            s->blocks = kv_realloc(s->blocks, s->cap * sizeof *s->blocks);
        }
    }
    s->blocks[s->head + s->nblocks++] = b;
}

static void blocks_remove(kv_stream *s, size_t i)
{
    kv_free(blk(s, i));
    if (i == 0) {
        s->head++;
    } else {
        memmove(s->blocks + s->head + i, s->blocks + s->head + i + 1,
                (s->nblocks - i - 1) * sizeof *s->blocks);
    }
    s->nblocks--;
    if (s->nblocks == 0)
        s->head = 0;
}

static void append_into(kv_stream *s, st_block *b, st_id id, const bk_str *fv, size_t nfields,
                        size_t vbytes, size_t fbytes, int count_lp);

void stream_append(kv_stream *s, st_id id, const bk_str *fv, size_t nfields)
{
    size_t vbytes = 0, fbytes = 0;
    for (size_t i = 0; i < nfields; i++) {
        fbytes += kv_varint_len(fv[2 * i].len) + fv[2 * i].len;
        vbytes += kv_varint_len(fv[2 * i + 1].len) + fv[2 * i + 1].len;
    }
    st_block *b = s->nblocks ? blk(s, s->nblocks - 1) : NULL;
    size_t max_e = stream_node_max_entries(), max_b = stream_node_max_bytes();
    if (max_b == 0 || max_b > ((size_t)1 << 30))
        max_b = (size_t)1 << 30; /* Redis's cap on a node's listpack */
    size_t raw = 0; /* Redis's measure of the new entry: field and value bytes */
    for (size_t i = 0; i < 2 * nfields; i++)
        raw += fv[i].len;
    if (b && (lp_bytes(b) + raw >= max_b || (max_e && b->added >= max_e) ||
              b->added == UINT32_MAX || (size_t)b->len + vbytes + fbytes + 40 > UINT32_MAX / 2))
        b = NULL;
    if (!b && s->nblocks) {
        /* The tail block is full: give back its growth slack. */
        st_block *t = blk(s, s->nblocks - 1);
        if (t->cap > t->len) {
            t = kv_realloc(t, sizeof *t + t->len);
            t->cap = t->len;
            s->blocks[s->head + s->nblocks - 1] = t;
        }
    }
    if (!b) {
        b = block_new(id, fv, nfields, vbytes + 32);
        blocks_push(s, b);
    }
    append_into(s, b, id, fv, nfields, vbytes, fbytes, 1);
}

void stream_block_open(kv_stream *s, st_id master, const bk_str *fv, size_t nfields,
                       size_t lp_size, uint64_t count, uint64_t deleted)
{
    if (s->nblocks) {
        st_block *t = blk(s, s->nblocks - 1);
        if (t->cap > t->len) {
            t = kv_realloc(t, sizeof *t + t->len);
            t->cap = t->len;
            s->blocks[s->head + s->nblocks - 1] = t;
        }
    }
    st_block *b = block_new(master, fv, nfields, 64);
    b->tail = master;
    /* the listpack's own size, less its two counts (lp_bytes adds ours) */
    size_t counts = lp_int_size(count > INT64_MAX ? INT64_MAX : (int64_t)count) +
                    lp_int_size(deleted > INT64_MAX ? INT64_MAX : (int64_t)deleted);
    b->lpb = 0;
    lpb_add(b, lp_size > counts ? lp_size - counts : 0);
    blocks_push(s, b);
}

void stream_append_tail(kv_stream *s, st_id id, const bk_str *fv, size_t nfields)
{
    size_t vbytes = 0, fbytes = 0;
    for (size_t i = 0; i < nfields; i++) {
        fbytes += kv_varint_len(fv[2 * i].len) + fv[2 * i].len;
        vbytes += kv_varint_len(fv[2 * i + 1].len) + fv[2 * i + 1].len;
    }
    st_block *b = blk(s, s->nblocks - 1);
    if (b->added == UINT32_MAX || (size_t)b->len + vbytes + fbytes + 40 > UINT32_MAX / 2) {
        stream_append(s, id, fv, nfields); /* a listpack beyond our block sizes */
        return;
    }
    append_into(s, b, id, fv, nfields, vbytes, fbytes, 0); /* lpb came with the listpack */
}

void stream_block_note_deleted(kv_stream *s, st_id id)
{
    st_block *b = blk(s, s->nblocks - 1);
    if (b->added < UINT32_MAX)
        b->added++;
    b->tail = id;
}

/* Writes the entry at the end of b (the tail block). */
static void append_into(kv_stream *s, st_block *b, st_id id, const bk_str *fv, size_t nfields,
                        size_t vbytes, size_t fbytes, int count_lp)
{
    int same = same_fields(b, fv, nfields);
    size_t need = 30 + kv_varint_len(nfields) + vbytes + (same ? 0 : fbytes);
    st_block *nb = block_reserve(b, need);
    if (nb != b)
        s->blocks[s->head + s->nblocks - 1] = nb;
    b = nb;
    unsigned char *p = b->data + b->len;
    p += kv_varint_put(p, id.ms - b->first.ms);
    p += kv_varint_put(p, id.ms == b->first.ms ? id.seq - b->first.seq : id.seq);
    p += kv_varint_put(p, same ? 0 : nfields);
    for (size_t i = 0; i < nfields; i++) {
        if (!same)
            p += put_bytes(p, fv[2 * i]);
        p += put_bytes(p, fv[2 * i + 1]);
    }
    b->len = (uint32_t)(p - b->data);
    /* flags, ms and seq differences, [field count, fields,] values, lp-count */
    size_t lpb = lp_int_size(same ? 2 : 0) + lp_int_size((int64_t)(id.ms - b->first.ms)) +
                 lp_int_size((int64_t)(id.seq - b->first.seq)) +
                 lp_int_size((int64_t)(nfields + 3 + (same ? 0 : nfields + 1)));
    if (!same)
        lpb += lp_int_size((int64_t)nfields);
    for (size_t i = 0; count_lp && i < nfields; i++)
        lpb += (same ? 0 : lp_str_size(fv[2 * i])) + lp_str_size(fv[2 * i + 1]);
    if (count_lp)
        lpb_add(b, lpb);
    b->live++;
    b->added++;
    b->tail = id;
    s->length++;
    s->entries_added++;
    s->last_id = id;
    s->last_entry = id;
    s->last_entry_ok = 1;
}

/* ---- stream object ---- */

kv_stream *stream_new(void)
{
    return kv_calloc(sizeof(kv_stream));
}

static void pel_free(st_pel *p, int free_nacks)
{
    if (free_nacks)
        for (size_t i = 0; i < p->n; i++)
            kv_free(p->v[i]);
    kv_free(p->v);
    p->v = NULL;
    p->n = p->cap = 0;
}

static void group_free(st_group *g)
{
    pel_free(&g->pel, 1);
    for (size_t i = 0; i < g->ncons; i++) {
        pel_free(&g->cons[i]->pel, 0);
        kv_free(g->cons[i]);
    }
    kv_free(g->cons);
    kv_free(g);
}

void stream_free(kv_stream *s)
{
    if (!s)
        return;
    if (s->group_waiters)
        stream_waiters_check_later();
    for (size_t i = 0; i < s->nblocks; i++)
        kv_free(blk(s, i));
    kv_free(s->blocks);
    for (size_t i = 0; i < s->ngroups; i++)
        group_free(s->groups[i]);
    kv_free(s->groups);
    kv_free(s);
}

kv_stream *stream_dup(kv_stream *s)
{
    kv_stream *d = stream_new();
    d->length = s->length;
    d->entries_added = s->entries_added;
    d->last_id = s->last_id;
    d->max_deleted_id = s->max_deleted_id;
    d->last_entry = s->last_entry;
    d->last_entry_ok = s->last_entry_ok;
    if (s->nblocks) {
        d->cap = s->nblocks;
        d->blocks = kv_malloc(d->cap * sizeof *d->blocks);
        for (size_t i = 0; i < s->nblocks; i++) {
            st_block *b = blk(s, i);
            st_block *n = kv_malloc(sizeof *n + b->len);
            memcpy(n, b, sizeof *n + b->len);
            n->cap = n->len;
            d->blocks[i] = n;
        }
        d->nblocks = s->nblocks;
    }
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        st_group *g = s->groups[gi];
        st_group *ng = stream_group_create(d, (bk_str){ g->name, g->nlen }, g->last_id,
                                           g->entries_read);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            st_consumer *c = g->cons[ci];
            st_consumer *nc = group_consumer_create(ng, (bk_str){ c->name, c->nlen });
            nc->seen_ms = c->seen_ms;
            for (size_t k = 0; k < c->pel.n; k++) {
                st_nack *x = kv_malloc(sizeof *x);
                *x = *c->pel.v[k];
                x->consumer = nc;
                pel_insert(&nc->pel, x);
                pel_insert(&ng->pel, x);
            }
        }
    }
    return d;
}

/* Byte i (0..15) of an ID as Redis keys its radix tree: ms then seq, both
 * big-endian. */
static unsigned id_byte(st_id id, int i)
{
    uint64_t v = i < 8 ? id.ms : id.seq;
    return (unsigned)(v >> (8 * (7 - (i & 7)))) & 0xff;
}

/* Nodes of the radix tree Redis would hold for the sorted block keys
 * [lo, hi) that share their first d bytes: one node here (a compressed
 * node when the keys go on together, a branch node where they part), then
 * the nodes below; a key's end is a leaf node. */
static size_t rax_nodes(const kv_stream *s, size_t lo, size_t hi, int d)
{
    if (d == 16)
        return 1;
    st_id a = blk(s, lo)->first, z = blk(s, hi - 1)->first;
    int l = d;
    while (l < 16 && id_byte(a, l) == id_byte(z, l))
        l++;
    if (l > d)
        return 1 + rax_nodes(s, lo, hi, l);
    size_t n = 1;
    while (lo < hi) {
        unsigned c = id_byte(blk(s, lo)->first, d);
        size_t e = lo + 1;
        while (e < hi && id_byte(blk(s, e)->first, d) == c)
            e++;
        n += rax_nodes(s, lo, e, d + 1);
        lo = e;
    }
    return n;
}

size_t stream_rax_nodes(const kv_stream *s)
{
    return s->nblocks ? rax_nodes(s, 0, s->nblocks, 0) : 1;
}

size_t stream_mem_bytes(const kv_stream *s)
{
    size_t n = sizeof *s + s->cap * sizeof(void *);
    for (size_t i = 0; i < s->nblocks; i++)
        n += sizeof(st_block) + blk(s, i)->cap;
    for (size_t i = 0; i < s->ngroups; i++) {
        st_group *g = s->groups[i];
        n += sizeof *g + g->nlen + g->pel.cap * sizeof(void *) + g->pel.n * sizeof(st_nack);
        for (size_t k = 0; k < g->ncons; k++)
            n += sizeof(st_consumer) + g->cons[k]->nlen + g->cons[k]->pel.cap * sizeof(void *);
    }
    return n;
}

/* ---- iteration ---- */

/* Index of the last block whose first ID is <= id (0 when none is). */
static size_t block_floor(const kv_stream *s, st_id id)
{
    size_t lo = 0, hi = s->nblocks;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (st_id_cmp(blk(s, mid)->first, id) <= 0)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static void iter_load_rev(st_iter *it)
{
    st_block *b = blk(it->s, it->bi);
    it->noffs = 0;
    for (const unsigned char *p = b->data + b->mf_len; p < b->data + b->len;
         p = entry_skip(b, p)) {
        if (it->noffs == it->offs_cap) {
            it->offs_cap = it->offs_cap ? it->offs_cap * 2 : 128;
            it->offs = kv_realloc(it->offs, it->offs_cap * sizeof *it->offs);
        }
        it->offs[it->noffs++] = (size_t)(p - b->data);
    }
    it->oi = it->noffs;
}

void st_iter_start(st_iter *it, kv_stream *s, st_id start, st_id end, int rev)
{
    memset(it, 0, sizeof *it);
    it->s = s;
    it->start = start;
    it->end = end;
    it->rev = rev;
    if (s->nblocks == 0 || st_id_cmp(start, end) > 0) {
        it->bi = SIZE_MAX;
        return;
    }
    if (!rev) {
        it->bi = block_floor(s, start);
        it->pos = blk(s, it->bi)->mf_len;
    } else {
        it->bi = block_floor(s, end);
        iter_load_rev(it);
    }
}

int st_iter_next(st_iter *it)
{
    while (it->bi != SIZE_MAX) {
        st_block *b = blk(it->s, it->bi);
        const unsigned char *p;
        if (!it->rev) {
            if (it->pos >= b->len) {
                if (++it->bi >= it->s->nblocks) {
                    it->bi = SIZE_MAX;
                    return 0;
                }
                it->pos = blk(it->s, it->bi)->mf_len;
                continue;
            }
            p = b->data + it->pos;
        } else {
            if (it->oi == 0) {
                if (it->bi == 0) {
                    it->bi = SIZE_MAX;
                    return 0;
                }
                it->bi--;
                iter_load_rev(it);
                continue;
            }
            p = b->data + it->offs[--it->oi];
        }
        it->epos = (size_t)(p - b->data);
        const unsigned char *f = entry_head(b, p, &it->id, &it->nfields, &it->same);
        if (!it->rev) {
            it->pos = (size_t)(entry_skip(b, p) - b->data);
            if (st_id_cmp(it->id, it->start) < 0)
                continue;
            if (st_id_cmp(it->id, it->end) > 0) {
                it->bi = SIZE_MAX;
                return 0;
            }
        } else {
            if (st_id_cmp(it->id, it->end) > 0)
                continue;
            if (st_id_cmp(it->id, it->start) < 0) {
                it->bi = SIZE_MAX;
                return 0;
            }
        }
        it->fp = f;
        if (it->same) {
            size_t n;
            kv_varint_get(b->data, &n);
            it->mf = b->data + n;
        }
        return 1;
    }
    return 0;
}

void st_iter_field(st_iter *it, bk_str *field, bk_str *value)
{
    if (it->same)
        *field = get_bytes(&it->mf);
    else
        *field = get_bytes(&it->fp);
    *value = get_bytes(&it->fp);
}

void st_iter_remove(st_iter *it)
{
    kv_stream *s = it->s;
    st_block *b = blk(s, it->bi);
    size_t end = (size_t)(entry_skip(b, b->data + it->epos) - b->data);
    size_t gone = end - it->epos;
    memmove(b->data + it->epos, b->data + end, b->len - end);
    b->len -= (uint32_t)gone;
    b->live--;
    s->length--;
    s->last_entry_ok = 0;
    if (b->live == 0) {
        blocks_remove(s, it->bi);
        if (!it->rev) {
            if (it->bi >= s->nblocks) {
                it->bi = SIZE_MAX;
            } else {
                it->pos = blk(s, it->bi)->mf_len;
            }
        } else {
            it->oi = 0; /* moves to the previous block on the next call */
            if (it->bi == 0)
                it->bi = SIZE_MAX;
            else
                it->bi--, iter_load_rev(it);
        }
        return;
    }
    if (!it->rev) {
        it->pos = it->epos;
    } else {
        /* offsets before the removed entry are unchanged */
    }
}

void st_iter_stop(st_iter *it)
{
    kv_free(it->offs);
    it->offs = NULL;
}

st_id stream_edge_id(kv_stream *s, int first)
{
    if (!first && s->length && s->last_entry_ok)
        return s->last_entry;
    st_iter it;
    st_id id = { 0, 0 };
    st_iter_start(&it, s, ST_ID_MIN, ST_ID_MAX, !first);
    if (st_iter_next(&it))
        id = it.id;
    st_iter_stop(&it);
    if (!first && s->length) {
        s->last_entry = id;
        s->last_entry_ok = 1;
    }
    return id;
}

int stream_delete(kv_stream *s, st_id id)
{
    st_iter it;
    int found = 0;
    st_iter_start(&it, s, id, id, 0);
    if (st_iter_next(&it)) {
        st_iter_remove(&it);
        found = 1;
    }
    st_iter_stop(&it);
    return found;
}

long long stream_trim(kv_stream *s, int strategy, long long maxlen, st_id minid, int approx,
                      long long limit)
{
    long long deleted = 0;
    if (strategy == ST_TRIM_NONE)
        return 0;
    while (s->nblocks) {
        if (strategy == ST_TRIM_MAXLEN && s->length <= (uint64_t)maxlen)
            break;
        st_block *b = blk(s, 0);
        long long entries = b->live;
        if (limit && deleted + entries > limit)
            break;
        int whole;
        if (strategy == ST_TRIM_MAXLEN)
            whole = s->length - (uint64_t)entries >= (uint64_t)maxlen;
        else
            whole = st_id_cmp(b->tail, minid) < 0;
        if (whole) {
            s->length -= (uint64_t)entries;
            deleted += entries;
            blocks_remove(s, 0);
            continue;
        }
        if (approx)
            break;
        /* Remove entries from the front of this block: they are contiguous,
         * so it is one memmove. */
        const unsigned char *p = b->data + b->mf_len, *q = p;
        long long n = 0;
        while (q < b->data + b->len) {
            if (strategy == ST_TRIM_MAXLEN) {
                if (s->length - (uint64_t)n <= (uint64_t)maxlen)
                    break;
            } else {
                st_id id;
                size_t nf;
                int same;
                entry_head(b, q, &id, &nf, &same);
                if (st_id_cmp(id, minid) >= 0)
                    break;
            }
            q = entry_skip(b, q);
            n++;
        }
        size_t gone = (size_t)(q - p);
        memmove((unsigned char *)p, q, (size_t)(b->data + b->len - q));
        b->len -= (uint32_t)gone;
        b->live -= (uint32_t)n;
        s->length -= (uint64_t)n;
        deleted += n;
        break;
    }
    return deleted;
}

/* ---- PEL ---- */

size_t pel_lower(const st_pel *p, st_id id)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st_id_cmp(p->v[mid]->id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

st_nack *pel_find(st_pel *p, st_id id)
{
    size_t i = pel_lower(p, id);
    return i < p->n && st_id_cmp(p->v[i]->id, id) == 0 ? p->v[i] : NULL;
}

void pel_insert(st_pel *p, st_nack *n)
{
    /* Deliveries come in ID order: check the tail first. */
    size_t i = (p->n == 0 || st_id_cmp(p->v[p->n - 1]->id, n->id) < 0) ? p->n
                                                                     : pel_lower(p, n->id);
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 4;
        p->v = kv_realloc(p->v, p->cap * sizeof *p->v);
    }
    memmove(p->v + i + 1, p->v + i, (p->n - i) * sizeof *p->v);
    p->v[i] = n;
    p->n++;
}

void pel_remove(st_pel *p, st_id id)
{
    size_t i = pel_lower(p, id);
    if (i < p->n && st_id_cmp(p->v[i]->id, id) == 0) {
        memmove(p->v + i, p->v + i + 1, (p->n - i - 1) * sizeof *p->v);
        p->n--;
    }
}

/* ---- groups and consumers (sorted by name, compared as bytes) ---- */

static int name_cmp(const char *a, size_t alen, bk_str b)
{
    int r = memcmp(a, b.p, BK_MIN(alen, b.len));
    if (r)
        return r;
    return alen < b.len ? -1 : alen > b.len ? 1 : 0;
}

static size_t group_pos(const kv_stream *s, bk_str name, int *found)
{
    size_t lo = 0, hi = s->ngroups;
    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = name_cmp(s->groups[mid]->name, s->groups[mid]->nlen, name);
        if (r == 0) {
            *found = 1;
            return mid;
        }
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

st_group *stream_group_find(kv_stream *s, bk_str name)
{
    int found;
    if (!s)
        return NULL;
    size_t i = group_pos(s, name, &found);
    return found ? s->groups[i] : NULL;
}

st_group *stream_group_create(kv_stream *s, bk_str name, st_id id, long long entries_read)
{
    int found;
    size_t i = group_pos(s, name, &found);
    if (found)
        return NULL;
    st_group *g = kv_calloc(sizeof *g + name.len);
    memcpy(g->name, name.p, name.len);
    g->nlen = name.len;
    g->last_id = id;
    g->entries_read = entries_read;
    if (s->ngroups == s->gcap) {
        s->gcap = s->gcap ? s->gcap * 2 : 2;
        s->groups = kv_realloc(s->groups, s->gcap * sizeof *s->groups);
    }
    memmove(s->groups + i + 1, s->groups + i, (s->ngroups - i) * sizeof *s->groups);
    s->groups[i] = g;
    s->ngroups++;
    return g;
}

int stream_group_destroy(kv_stream *s, bk_str name)
{
    int found;
    size_t i = group_pos(s, name, &found);
    if (!found)
        return 0;
    group_free(s->groups[i]);
    memmove(s->groups + i, s->groups + i + 1, (s->ngroups - i - 1) * sizeof *s->groups);
    s->ngroups--;
    return 1;
}

static size_t consumer_pos(const st_group *g, bk_str name, int *found)
{
    size_t lo = 0, hi = g->ncons;
    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = name_cmp(g->cons[mid]->name, g->cons[mid]->nlen, name);
        if (r == 0) {
            *found = 1;
            return mid;
        }
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

st_consumer *group_consumer_find(st_group *g, bk_str name)
{
    int found;
    size_t i = consumer_pos(g, name, &found);
    return found ? g->cons[i] : NULL;
}

st_consumer *group_consumer_create(st_group *g, bk_str name)
{
    int found;
    size_t i = consumer_pos(g, name, &found);
    if (found)
        return NULL;
    st_consumer *c = kv_calloc(sizeof *c + name.len);
    memcpy(c->name, name.p, name.len);
    c->nlen = name.len;
    c->seen_ms = srv.now_ms;
    if (g->ncons == g->ccap) {
        g->ccap = g->ccap ? g->ccap * 2 : 2;
        g->cons = kv_realloc(g->cons, g->ccap * sizeof *g->cons);
    }
    memmove(g->cons + i + 1, g->cons + i, (g->ncons - i) * sizeof *g->cons);
    g->cons[i] = c;
    g->ncons++;
    return c;
}

size_t group_consumer_delete(st_group *g, bk_str name)
{
    int found;
    size_t i = consumer_pos(g, name, &found);
    if (!found)
        return 0;
    st_consumer *c = g->cons[i];
    size_t pending = c->pel.n;
    for (size_t k = 0; k < c->pel.n; k++) {
        pel_remove(&g->pel, c->pel.v[k]->id);
        kv_free(c->pel.v[k]);
    }
    pel_free(&c->pel, 0);
    kv_free(c);
    memmove(g->cons + i, g->cons + i + 1, (g->ncons - i - 1) * sizeof *g->cons);
    g->ncons--;
    return pending;
}

/* ---- read counters (Redis 7's entries-read / lag logic) ---- */

int stream_range_has_tombstones(kv_stream *s, st_id start, int has_end, st_id end)
{
    if (s->length == 0 || st_id_zero(s->max_deleted_id))
        return 0;
    if (st_id_cmp(stream_edge_id(s, 1), s->max_deleted_id) > 0)
        return 0;
    if (!has_end)
        end = ST_ID_MAX;
    return st_id_cmp(start, s->max_deleted_id) <= 0 && st_id_cmp(s->max_deleted_id, end) <= 0;
}

long long stream_estimate_distance(kv_stream *s, st_id id)
{
    if (!s->entries_added)
        return 0;
    if (!s->length && st_id_cmp(id, s->last_id) < 1)
        return (long long)s->entries_added;
    int cmp_last = st_id_cmp(id, s->last_id);
    if (cmp_last == 0)
        return (long long)s->entries_added;
    if (cmp_last > 0)
        return ST_INVALID_READ;
    st_id first = stream_edge_id(s, 1);
    int cmp_first = st_id_cmp(id, first);
    if (st_id_zero(s->max_deleted_id) || st_id_cmp(s->max_deleted_id, first) < 0) {
        if (cmp_first < 0)
            return (long long)(s->entries_added - s->length);
        if (cmp_first == 0)
            return (long long)(s->entries_added - s->length + 1);
    }
    return ST_INVALID_READ;
}
