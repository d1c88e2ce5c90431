/* DEBUG DIGEST, DIGEST-VALUE and POPULATE: what Redis's replication
 * tests use to compare a master and its replicas and to fill a dataset.
 *
 * The digest is Redis 7.0's, bit for bit, so a brisk-kv replica and a
 * Redis master (or the other way round) can be compared:
 *   - two SHA-1 steps: xor_in (d ^= SHA1(p)) for what has no order, mix
 *     (d ^= SHA1(p), then d = SHA1(d)) for what does;
 *   - a key: mix its name, then its type code (Redis's OBJ_* number, as 4
 *     big-endian bytes), then the value: a string mixed; list elements
 *     mixed head to tail; set members xor_in; for a hash field or a zset
 *     member, its own digest (from zero: mix field then value, or member
 *     then score as %.17g) xor_in; a stream's entries mixed in order
 *     ("ms.seq", then each field and value, groups left out); then
 *     "!!expire!!" xor_in when it has a TTL;
 *   - the dataset: for each non-empty db in order, mix its number (4
 *     big-endian bytes) into the result, then xor_in each key's digest;
 *     logically expired keys not yet removed count, as in Redis.
 * Both answer status replies; an empty dataset or a missing key gives 40
 * zeros. */
#include "core/common.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/stream.h"
#include "kv/types.h"
#include "kv/util.h"

#include <arpa/inet.h>
#include "kv/sha1.h"

#include <stdio.h>
#include <string.h>

/* d ^= SHA1(p) */
static void xor_in(unsigned char d[20], const void *p, size_t n)
{
    unsigned char h[20];
    sha1_ctx s;
    sha1_init(&s);
    sha1_update(&s, p, n);
    sha1_final(&s, h);
    for (int i = 0; i < 20; i++)
        d[i] ^= h[i];
}

/* d ^= SHA1(p); d = SHA1(d) */
static void mix(unsigned char d[20], const void *p, size_t n)
{
    xor_in(d, p, n);
    sha1_ctx s;
    sha1_init(&s);
    sha1_update(&s, d, 20);
    sha1_final(&s, d);
}

static void mix_u32(unsigned char d[20], uint32_t v)
{
    uint32_t be = htonl(v);
    mix(d, &be, sizeof be);
}

/* Redis's OBJ_* numbers (OBJ_MODULE, 5, has no brisk-kv type). */
static const uint32_t redis_type_code[] = {
    [KV_STRING] = 0, [KV_LIST] = 1, [KV_SET] = 2, [KV_ZSET] = 3, [KV_HASH] = 4, [KV_STREAM] = 6,
};

static void value_digest(kv_entry *e, unsigned char d[20])
{
    unsigned char el[20];
    mix_u32(d, redis_type_code[e->type]);
    switch (e->type) {
    case KV_STRING:
        mix(d, entry_val(e), entry_vlen(e));
        break;
    case KV_LIST: {
        kv_list *l = entry_obj(e);
        for (size_t i = 0; i < l->len; i++) {
            kv_lelem *x = list_at(l, i);
            mix(d, x->data, x->len);
        }
        break;
    }
    case KV_SET: {
        dict_iter it;
        dict_iter_init(&it, entry_obj(e));
        for (dict_node *dn; (dn = dict_iter_next(&it));) {
            bk_str m = smember_str((kv_smember *)dn);
            xor_in(d, m.p, m.len);
        }
        dict_iter_end(&it);
        break;
    }
    case KV_ZSET: {
        zset *z = entry_obj(e);
        for (zs_node *n = z->header->lv[0].forward; n; n = n->lv[0].forward) {
            char sc[64];
            int k = snprintf(sc, sizeof sc, "%.17g", n->score);
            bk_str m = zs_member(n);
            memset(el, 0, sizeof el);
            mix(el, m.p, m.len);
            mix(el, sc, (size_t)k);
            xor_in(d, el, 20);
        }
        break;
    }
    case KV_HASH: {
        hash_iter it;
        hash_iter_init(&it, entry_obj(e));
        for (bk_str k, v; hash_iter_next(&it, &k, &v);) {
            memset(el, 0, sizeof el);
            mix(el, k.p, k.len);
            mix(el, v.p, v.len);
            xor_in(d, el, 20);
        }
        hash_iter_end(&it);
        break;
    }
    case KV_STREAM: {
        st_iter it;
        st_iter_start(&it, entry_obj(e), ST_ID_MIN, ST_ID_MAX, 0);
        while (st_iter_next(&it)) {
            char id[ST_ID_STR_MAX];
            int k = snprintf(id, sizeof id, "%llu.%llu", (unsigned long long)it.id.ms,
                             (unsigned long long)it.id.seq);
            mix(d, id, (size_t)k);
            for (size_t f = 0; f < it.nfields; f++) {
                bk_str fk, fv;
                st_iter_field(&it, &fk, &fv);
                mix(d, fk.p, fk.len);
                mix(d, fv.p, fv.len);
            }
        }
        st_iter_stop(&it);
        break;
    }
    default:
        break;
    }
    if (e->flags & ENTRY_EXPIRES)
        xor_in(d, "!!expire!!", 10);
}

static void reply_hex(kv_client *c, const unsigned char d[20])
{
    char hex[41];
    for (int i = 0; i < 20; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    reply_simple(c, hex);
}

void repl_debug_digest(kv_client *c)
{
    unsigned char final[20] = { 0 }, d[20];
    for (int i = 0; i < srv.cfg.databases; i++) {
        kv_db *db = &srv.dbs[i];
        if (db_size(db) == 0)
            continue;
        mix_u32(final, (uint32_t)i);
        keytab_iter it;
        keytab_iter_init(&it, &db->keys);
        for (kv_entry *e; (e = keytab_iter_next(&it));) {
            memset(d, 0, sizeof d);
            bk_str k = entry_key_str(e);
            mix(d, k.p, k.len);
            value_digest(e, d);
            xor_in(final, d, 20);
        }
        keytab_iter_end(&it);
    }
    reply_hex(c, final);
}

void repl_debug_digest_value(kv_client *c)
{
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        unsigned char d[20] = { 0 };
        kv_entry *e = db_find(c->db, c->argv[i]); /* expired or not, as Redis */
        if (e)
            value_digest(e, d);
        reply_hex(c, d);
    }
}

/* DEBUG POPULATE count [prefix] [size]: keys prefix:N = "value:N" (or
 * that padded / cut to size bytes), skipping keys that exist. */
void repl_debug_populate(kv_client *c)
{
    long long count, size = -1;
    if (arg_ll(c, c->argv[2], &count) < 0)
        return;
    if (count < 0) {
        reply_error(c, "ERR count must be greater than or equal to 0");
        return;
    }
    if (c->argc > 4 && arg_ll(c, c->argv[4], &size) < 0)
        return;
    if (c->argc > 4 && (size < 0 || size > 512 * 1024 * 1024)) {
        reply_error(c, "ERR size must be between 0 and 512MB");
        return;
    }
    bk_str prefix = c->argc > 3 ? c->argv[3] : (bk_str){ "key", 3 };
    if (prefix.len > 1024) {
        reply_error(c, "ERR prefix too long");
        return;
    }
    char kbuf[1100], vsmall[64];
    char *vbig = size > (long long)sizeof vsmall ? kv_malloc((size_t)size) : NULL;
    for (long long i = 0; i < count; i++) {
        int kl = snprintf(kbuf, sizeof kbuf, "%.*s:%lld", (int)prefix.len, prefix.p, i);
        bk_str key = { kbuf, (size_t)kl };
        if (db_find(c->db, key))
            continue;
        int vl = snprintf(vsmall, sizeof vsmall, "value:%lld", i);
        const char *v = vsmall;
        size_t n = (size_t)vl;
        if (size >= 0) {
            char *dst = vbig ? vbig : vsmall;
            if (vbig)
                memcpy(vbig, vsmall, BK_MIN((size_t)vl, (size_t)size));
            if ((size_t)size > (size_t)vl)
                memset(dst + vl, 0, (size_t)size - (size_t)vl);
            v = dst;
            n = (size_t)size;
        }
        db_set_string(c->db, key, v, n, 0);
    }
    kv_free(vbig);
    reply_ok(c);
}
