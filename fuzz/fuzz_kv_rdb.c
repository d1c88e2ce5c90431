/* libFuzzer target: the RDB object loader of brisk-kv (src/kv/rdb.c), the
 * code behind RESTORE, DUMP and dump.rdb.
 *
 * An input starting with "REDIS" is a whole RDB file and goes through
 * rdb_load_image; anything else is a DUMP payload (type byte, object,
 * footer) for rdb_load_payload, read from a buffer of exactly its size
 * (the CRC is not checked: the fuzzer could not get past it). Either way,
 * every value that loads must
 *   - hold the invariants of its type (non-empty, the skip list in order),
 *   - re-dump (rdb_dump_payload) to a payload whose footer verifies, whose
 *     type byte is rdb_object_type's, and which loads again,
 *   - to a value equal to the first: same bytes, same list in order, same
 *     members, fields and values, same members with equal scores (-0 may come back as 0, as in Redis),
 *   - and the second value dumps to the same bytes as the first (lists,
 *     strings, sorted sets; sets and hashes may iterate in another order).
 * Limits: proto-max-bulk-len at its default (512 MB), bounded in practice
 * by LZF_MAX_RATIO times the input. */
#include "kv_fuzz.h"

#include "kv/rdb.h"
#include "kv/types.h"

#include <math.h>
#include <stdint.h>

static kv_db scratch; /* where re-loaded copies go, apart from the image */

static void check_invariants(kv_entry *e)
{
    switch (e->type) {
    case KV_LIST: CHECK(((kv_list *)entry_obj(e))->len > 0); break;
    case KV_SET: CHECK(dict_size(entry_obj(e)) > 0); break;
    case KV_HASH: CHECK(hash_size(entry_obj(e)) > 0); break;
    case KV_ZSET: {
        zset *z = entry_obj(e);
        CHECK(z->length > 0 && zset_check(z) == 0);
        for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward)
            CHECK(!isnan(x->score));
        break;
    }
    }
}


static void check_equal(kv_entry *a, kv_entry *b)
{
    CHECK(a->type == b->type);
    switch (a->type) {
    case KV_STRING: CHECK(str_eq(entry_str(a), entry_str(b))); break;
    case KV_LIST: {
        kv_list *x = entry_obj(a), *y = entry_obj(b);
        CHECK(x->len == y->len);
        for (size_t i = 0; i < x->len; i++) {
            kv_lelem *p = list_at(x, i), *q = list_at(y, i);
            CHECK(p->len == q->len && memcmp(p->data, q->data, p->len) == 0);
        }
        break;
    }
    case KV_SET: {
        dict *x = entry_obj(a), *y = entry_obj(b);
        CHECK(dict_size(x) == dict_size(y));
        dict_iter it;
        dict_iter_init(&it, x);
        for (dict_node *n; (n = dict_iter_next(&it));)
            CHECK(set_has(y, smember_str((kv_smember *)(void *)n)));
        dict_iter_end(&it);
        break;
    }
    case KV_HASH: {
        kv_hash *x = entry_obj(a), *y = entry_obj(b);
        CHECK(hash_size(x) == hash_size(y) && hash_is_small(x) == hash_is_small(y));
        hash_iter it;
        hash_iter_init(&it, x);
        for (bk_str f, v, w; hash_iter_next(&it, &f, &v);)
            CHECK(hash_get(y, f, &w) == 1 && str_eq(v, w));
        hash_iter_end(&it);
        break;
    }
    case KV_ZSET: {
        zset *x = entry_obj(a), *y = entry_obj(b);
        CHECK(x->length == y->length);
        zs_node *p = x->header->lv[0].forward, *q = y->header->lv[0].forward;
        for (; p && q; p = p->lv[0].forward, q = q->lv[0].forward) {
            CHECK(str_eq(zs_member(p), zs_member(q)));
            /* Numerically equal: -0 becomes 0 in a listpack, as in Redis
             * 7.0 (ZADD z -0 m; ZSCORE z m gives "0" there too). */
            CHECK(p->score == q->score);
        }
        CHECK(!p && !q);
        break;
    }
    default: CHECK(0);
    }
}

static void check_entry(kv_entry *e)
{
    check_invariants(e);
    bk_buf d1 = { 0 }, d2 = { 0 };
    rdb_dump_payload(&d1, e);
    CHECK(d1.len >= 11 && rdb_verify_payload(d1.data, d1.len) == 0);
    CHECK((unsigned char)d1.data[0] == (unsigned)rdb_object_type(e));
    rdb_value v;
    CHECK(rdb_load_payload(d1.data, d1.len, &v) == 0);
    kv_entry *e2 = rdb_value_store(&scratch, BK_STR("copy"), &v);
    check_invariants(e2);
    check_equal(e, e2);
    rdb_dump_payload(&d2, e2);
    if (e->type == KV_STRING || e->type == KV_LIST || e->type == KV_ZSET)
        CHECK(d1.len == d2.len && memcmp(d1.data, d2.data, d1.len) == 0);
    else
        CHECK((unsigned char)d2.data[0] == (unsigned char)d1.data[0]);
    db_delete(&scratch, BK_STR("copy"));
    buf_free(&d1);
    buf_free(&d2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvf_init();
    if (!scratch.keys.key)
        db_init(&scratch, 0);
    if (size >= 5 && memcmp(data, "REDIS", 5) == 0) {
        char err[256];
        rdb_load_image(data, size, 0, err, sizeof err);
        for (int i = 0; i < srv.cfg.databases; i++) {
            keytab_iter it;
            keytab_iter_init(&it, &srv.dbs[i].keys);
            for (kv_entry *e; (e = keytab_iter_next(&it));)
                check_entry(e);
            keytab_iter_end(&it);
        }
        kvf_flushall();
        return 0;
    }
    char *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    rdb_value v;
    if (rdb_load_payload(p, size, &v) == 0) {
        kv_entry *e = rdb_value_store(&srv.dbs[0], BK_STR("k"), &v);
        check_entry(e);
        db_delete(&srv.dbs[0], BK_STR("k"));
    }
    free(p);
    return 0;
}
