/* Streams in RDB form (dump.rdb, DUMP/RESTORE): Redis 7.0's
 * RDB_TYPE_STREAM_LISTPACKS_2 written, it and the 5.0-6.2 form (type 15)
 * read. Entries go out as Redis's listpacks (a master entry, then each
 * entry delta-encoded against it), one per block of ours. */
#include "kv/mem.h"
#include "kv/rdb.h"
#include "kv/stream.h"
#include "kv/util.h"

#include <stdlib.h>
#include <string.h>

static void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

/* buf_put does not grow the buffer: reserve first. */
static void put_raw(bk_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) < 0)
        abort();
    buf_put(b, p, n);
}

static void put_le64(bk_buf *b, uint64_t v)
{
    unsigned char t[8];
    for (int i = 0; i < 8; i++, v >>= 8)
        t[i] = (unsigned char)v;
    put_raw(b, t, 8);
}

static void save_raw_id(bk_buf *b, st_id id)
{
    unsigned char k[16];
    put_be64(k, id.ms);
    put_be64(k + 8, id.seq);
    rdb_save_string(b, (const char *)k, 16);
}

static void lp_int(bk_buf *l, long long v)
{
    char t[KV_LL_STR_MAX];
    rdb_lp_append(l, t, kv_fmt_ll(t, v));
}

/* One block as Redis's listpack: master entry [count, deleted, nfields,
 * fields..., 0], then per entry [flags, ms-diff, seq-diff, (nfields,
 * fields,) values, lp-count]. */
static void save_block(bk_buf *b, kv_stream *s, size_t bi, bk_buf *l)
{
    st_block *blk = s->blocks[s->head + bi];
    st_iter it;
    /* The block's tail, when deleted, goes out as a deleted entry (as it
     * stays in Redis's listpack): Redis drops a node on a MINID trim by
     * the last ID its listpack holds, and reads our tail back from it. */
    st_id last_live = blk->first;
    st_iter_start(&it, s, blk->first, ST_ID_MAX, 0);
    for (uint32_t e = 0; e < blk->live && st_iter_next(&it); e++)
        last_live = it.id;
    st_iter_stop(&it);
    int dead_tail = blk->live == 0 || st_id_cmp(blk->tail, last_live) > 0;
    st_iter_start(&it, s, blk->first, ST_ID_MAX, 0);
    rdb_lp_begin(l);
    size_t count = 0;
    lp_int(l, blk->live);
    lp_int(l, dead_tail);
    /* master fields */
    const unsigned char *p = blk->data;
    size_t n;
    uint64_t mf = kv_varint_get(p, &n);
    p += n;
    lp_int(l, (long long)mf);
    count += 3;
    for (uint64_t i = 0; i < mf; i++) {
        uint64_t len = kv_varint_get(p, &n);
        rdb_lp_append(l, (const char *)p + n, (size_t)len);
        p += n + len;
        count++;
    }
    lp_int(l, 0);
    count++;
    for (uint32_t e = 0; e < blk->live && st_iter_next(&it); e++) {
        lp_int(l, it.same ? 2 : 0);
        lp_int(l, (long long)(it.id.ms - blk->first.ms));
        lp_int(l, (long long)(it.id.seq - blk->first.seq));
        count += 3;
        if (!it.same) {
            lp_int(l, (long long)it.nfields);
            count++;
        }
        size_t nf = it.nfields;
        for (size_t i = 0; i < nf; i++) {
            bk_str f, v;
            st_iter_field(&it, &f, &v);
            if (!it.same) {
                rdb_lp_append(l, f.p, f.len);
                count++;
            }
            rdb_lp_append(l, v.p, v.len);
            count++;
        }
        lp_int(l, (long long)(nf + 3 + (it.same ? 0 : nf + 1)));
        count++;
    }
    st_iter_stop(&it);
    if (dead_tail) {
        lp_int(l, 1 | 2); /* deleted, master fields; its values are gone: empty */
        lp_int(l, (long long)(blk->tail.ms - blk->first.ms));
        lp_int(l, (long long)(blk->tail.seq - blk->first.seq));
        for (uint64_t i = 0; i < mf; i++)
            rdb_lp_append(l, "", 0);
        lp_int(l, (long long)(mf + 3));
        count += 4 + mf;
    }
    rdb_lp_end(l, count);
    save_raw_id(b, blk->first);
    rdb_save_string(b, l->data, l->len);
}

void stream_rdb_save(bk_buf *b, kv_stream *s)
{
    bk_buf l = { 0 };
    rdb_save_len(b, s->nblocks);
    for (size_t i = 0; i < s->nblocks; i++)
        save_block(b, s, i, &l);
    buf_free(&l);
    st_id first = stream_edge_id(s, 1);
    rdb_save_len(b, s->length);
    rdb_save_len(b, s->last_id.ms);
    rdb_save_len(b, s->last_id.seq);
    rdb_save_len(b, first.ms);
    rdb_save_len(b, first.seq);
    rdb_save_len(b, s->max_deleted_id.ms);
    rdb_save_len(b, s->max_deleted_id.seq);
    rdb_save_len(b, s->entries_added);
    rdb_save_len(b, s->ngroups);
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        st_group *g = s->groups[gi];
        rdb_save_string(b, g->name, g->nlen);
        rdb_save_len(b, g->last_id.ms);
        rdb_save_len(b, g->last_id.seq);
        rdb_save_len(b, (uint64_t)g->entries_read);
        rdb_save_len(b, g->pel.n);
        for (size_t k = 0; k < g->pel.n; k++) {
            st_nack *x = g->pel.v[k];
            unsigned char raw[16];
            put_be64(raw, x->id.ms);
            put_be64(raw + 8, x->id.seq);
            put_raw(b, raw, 16);
            put_le64(b, (uint64_t)x->delivery_ms);
            rdb_save_len(b, x->delivery_count);
        }
        rdb_save_len(b, g->ncons);
        for (size_t ci = 0; ci < g->ncons; ci++) {
            st_consumer *c = g->cons[ci];
            rdb_save_string(b, c->name, c->nlen);
            put_le64(b, (uint64_t)c->seen_ms);
            rdb_save_len(b, c->pel.n);
            for (size_t k = 0; k < c->pel.n; k++) {
                unsigned char raw[16];
                put_be64(raw, c->pel.v[k]->id.ms);
                put_be64(raw + 8, c->pel.v[k]->id.seq);
                put_raw(b, raw, 16);
            }
        }
    }
}

/* ---- loading ---- */

typedef struct {
    bk_str *v;
    size_t n, cap;
} elems;

static int collect(void *ud, const char *p, size_t n)
{
    elems *e = ud;
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 64;
        e->v = kv_realloc(e->v, e->cap * sizeof *e->v);
    }
    /* ints are formatted into a scratch buffer by the walker: copy */
    char *c = kv_malloc(n ? n : 1);
    memcpy(c, p, n);
    e->v[e->n++] = (bk_str){ c, n };
    return 0;
}

static void elems_free(elems *e)
{
    for (size_t i = 0; i < e->n; i++)
        kv_free((void *)e->v[i].p);
    kv_free(e->v);
}

static int num(const elems *e, size_t i, long long *v)
{
    if (i >= e->n)
        return -1;
    return kv_parse_ll(e->v[i].p, e->v[i].len, v) == 0 ? 0 : -1;
}

/* Appends the live entries of one listpack (master ID m) to s. */
static int load_listpack(kv_stream *s, st_id m, const elems *e, size_t lplen)
{
    long long count, deleted, mf;
    if (num(e, 0, &count) < 0 || num(e, 1, &deleted) < 0 || num(e, 2, &mf) < 0 || mf < 0 ||
        (size_t)mf > e->n)
        return -1;
    size_t i = 3;
    const bk_str *mfields = e->v + i;
    i += (size_t)mf + 1; /* and the 0 terminator */
    size_t cap = 0;
    bk_str *fv = NULL;
    int rc = -1;
    long long seen = 0, gone = 0;
    if (count < 0 || deleted < 0 || (s->nblocks && st_id_cmp(m, s->last_id) <= 0))
        goto done;
    /* the block takes the listpack's master ID and fields, as Redis's node */
    cap = (size_t)mf * 2 + 2;
    fv = kv_malloc(cap * sizeof *fv);
    for (long long k = 0; k < mf; k++)
        fv[2 * k] = mfields[k], fv[2 * k + 1] = (bk_str){ "", 0 };
    stream_block_open(s, m, fv, (size_t)mf, lplen, (uint64_t)count, (uint64_t)deleted);
    while (i < e->n) {
        long long flags, dms, dseq, nf;
        if (num(e, i, &flags) < 0 || num(e, i + 1, &dms) < 0 || num(e, i + 2, &dseq) < 0)
            goto done;
        i += 3;
        int same = (flags & 2) != 0;
        if (same)
            nf = mf;
        else if (num(e, i++, &nf) < 0)
            goto done;
        if (nf <= 0 || (size_t)nf > e->n || i + (size_t)nf * (same ? 1 : 2) + 1 > e->n)
            goto done;
        if ((size_t)nf * 2 > cap) {
            cap = (size_t)nf * 2;
            fv = kv_realloc(fv, cap * sizeof *fv);
        }
        for (long long k = 0; k < nf; k++) {
            fv[2 * k] = same ? mfields[k] : e->v[i++];
            fv[2 * k + 1] = e->v[i++];
        }
        i++; /* lp-count */
        st_id id = { m.ms + (uint64_t)dms, m.seq + (uint64_t)dseq };
        if (st_id_cmp(id, m) < 0 || (s->length && st_id_cmp(id, s->last_id) <= 0))
            goto done;
        if (flags & 1) {
            /* deleted: counts toward the block's fill, may be its tail */
            stream_block_note_deleted(s, id);
            gone++;
            continue;
        }
        stream_append_tail(s, id, fv, (size_t)nf);
        seen++;
    }
    rc = seen == count && gone == deleted ? 0 : -1;
done:
    kv_free(fv);
    return rc;
}

static int load_id_raw(rdb_reader *r, st_id *id)
{
    if ((size_t)(r->end - r->p) < 16)
        return -1;
    id->ms = get_be64(r->p);
    id->seq = get_be64(r->p + 8);
    r->p += 16;
    return 0;
}

static int load_le64(rdb_reader *r, int64_t *v)
{
    if ((size_t)(r->end - r->p) < 8)
        return -1;
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--)
        u = (u << 8) | r->p[i];
    r->p += 8;
    *v = (int64_t)u;
    return 0;
}

static int load_u64(rdb_reader *r, uint64_t *v) { return rdb_load_len(r, v); }

kv_stream *stream_rdb_load(rdb_reader *r, int v2)
{
    kv_stream *s = stream_new();
    uint64_t nlp, len, a, b2;
    char *key = NULL, *lp = NULL;
    size_t klen, lplen;
    if (load_u64(r, &nlp) < 0)
        goto fail;
    for (uint64_t i = 0; i < nlp; i++) {
        if (rdb_load_string(r, &key, &klen) < 0 || klen != 16)
            goto fail;
        st_id m = { get_be64((unsigned char *)key), get_be64((unsigned char *)key + 8) };
        kv_free(key);
        key = NULL;
        if (rdb_load_string(r, &lp, &lplen) < 0)
            goto fail;
        elems e = { 0 };
        long long n = rdb_lp_walk((const unsigned char *)lp, lplen, collect, &e);
        int rc = n < 0 ? -1 : load_listpack(s, m, &e, lplen);
        elems_free(&e);
        kv_free(lp);
        lp = NULL;
        if (rc < 0)
            goto fail;
    }
    if (load_u64(r, &len) < 0 || len != s->length)
        goto fail;
    if (load_u64(r, &a) < 0 || load_u64(r, &b2) < 0)
        goto fail;
    s->last_id = (st_id){ a, b2 };
    if (v2) {
        uint64_t fm, fs, dm, ds, added;
        if (load_u64(r, &fm) < 0 || load_u64(r, &fs) < 0 || load_u64(r, &dm) < 0 ||
            load_u64(r, &ds) < 0 || load_u64(r, &added) < 0)
            goto fail;
        s->max_deleted_id = (st_id){ dm, ds };
        s->entries_added = added;
    } else {
        /* 6.2 kept no counters: as Redis, assume nothing was deleted. */
        s->entries_added = s->length;
    }
    uint64_t ng;
    if (load_u64(r, &ng) < 0)
        goto fail;
    for (uint64_t gi = 0; gi < ng; gi++) {
        char *gname;
        size_t glen;
        uint64_t ms, seq, er = (uint64_t)ST_INVALID_READ;
        if (rdb_load_string(r, &gname, &glen) < 0)
            goto fail;
        if (load_u64(r, &ms) < 0 || load_u64(r, &seq) < 0 || (v2 && load_u64(r, &er) < 0)) {
            kv_free(gname);
            goto fail;
        }
        st_id gid = { ms, seq };
        long long entries_read = v2 ? (long long)er : stream_estimate_distance(s, gid);
        st_group *g = stream_group_create(s, (bk_str){ gname, glen }, gid, entries_read);
        kv_free(gname);
        if (!g)
            goto fail; /* duplicate group */
        uint64_t np;
        if (load_u64(r, &np) < 0)
            goto fail;
        for (uint64_t k = 0; k < np; k++) {
            st_nack *x = kv_malloc(sizeof *x);
            x->consumer = NULL;
            if (load_id_raw(r, &x->id) < 0 || load_le64(r, &x->delivery_ms) < 0 ||
                load_u64(r, &x->delivery_count) < 0 || pel_find(&g->pel, x->id)) {
                kv_free(x);
                goto fail;
            }
            pel_insert(&g->pel, x);
        }
        uint64_t nc;
        if (load_u64(r, &nc) < 0)
            goto fail;
        for (uint64_t ci = 0; ci < nc; ci++) {
            char *cname;
            size_t clen;
            if (rdb_load_string(r, &cname, &clen) < 0)
                goto fail;
            st_consumer *c = group_consumer_create(g, (bk_str){ cname, clen });
            kv_free(cname);
            if (!c || load_le64(r, &c->seen_ms) < 0)
                goto fail;
            uint64_t cp;
            if (load_u64(r, &cp) < 0)
                goto fail;
            for (uint64_t k = 0; k < cp; k++) {
                st_id id;
                if (load_id_raw(r, &id) < 0)
                    goto fail;
                st_nack *x = pel_find(&g->pel, id);
                if (!x || x->consumer)
                    goto fail; /* not in the group PEL, or owned twice */
                x->consumer = c;
                pel_insert(&c->pel, x);
            }
        }
        /* every pending entry must have an owner */
        for (size_t k = 0; k < g->pel.n; k++)
            if (!g->pel.v[k]->consumer)
                goto fail;
    }
    return s;
fail:
    kv_free(key);
    kv_free(lp);
    /* NACKs without an owner are only in the group PEL: stream_free frees
     * group PELs' nacks, consumers' PELs hold the same pointers. */
    stream_free(s);
    return NULL;
}
