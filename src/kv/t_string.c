/* String commands. Values live inline in the key's entry; a SET of a value
 * that fits the entry's room is a memcpy, no allocation. */
#include "kv/db.h"
#include "kv/notify.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static int check_size(kv_client *c, uint64_t total)
{
    if (total > srv.cfg.proto_max_bulk_len || total > UINT32_MAX - 64) {
        reply_error(c, ERR_STRING_SIZE);
        return -1;
    }
    return 0;
}

void get_command(kv_client *c)
{
    kv_entry *e = db_lookup_read(c->db, c->argv[1]);
    if (!e) {
        reply_null(c);
        return;
    }
    if (BK_UNLIKELY(e->type != KV_STRING)) {
        reply_error(c, ERR_WRONGTYPE);
        return;
    }
    reply_bulk_str(c, entry_str(e));
}

enum { SET_NX = 1, SET_XX = 2, SET_GET = 4, SET_KEEPTTL = 8, SET_EX = 16 };

/* Parses an expire argument of SET/GETEX into absolute ms. */
static int parse_expire(kv_client *c, bk_str v, int unit_ms, int absolute, int64_t *when)
{
    long long n;
    if (arg_ll(c, v, &n) < 0)
        return -1;
    if (n <= 0 || (unit_ms == 1000 && n > LLONG_MAX / 1000)) {
        reply_errorf(c, "ERR invalid expire time in '%s' command", c->cmd->name);
        return -1;
    }
    n *= unit_ms;
    if (!absolute) {
        if (n > LLONG_MAX - srv.now_ms) {
            reply_errorf(c, "ERR invalid expire time in '%s' command", c->cmd->name);
            return -1;
        }
        n += srv.now_ms;
    }
    *when = n;
    return 0;
}

/* The core of SET/SETEX/PSETEX/SETNX: flags, absolute expire (0 none). */
static void set_generic(kv_client *c, bk_str key, bk_str val, int flags, int64_t when, int reply_kind)
{
    kv_entry *old = db_lookup_write(c->db, key);
    if (flags & SET_GET) {
        if (!old) /* Redis reads the old value with a read lookup */
            kv_notify(c->db, NOTIFY_KEY_MISS, "keymiss", key);
        if (old && old->type != KV_STRING) {
            reply_error(c, ERR_WRONGTYPE);
            return;
        }
    }
    if ((flags & SET_NX && old) || (flags & SET_XX && !old)) {
        if (flags & SET_GET) {
            if (old)
                reply_bulk_str(c, entry_str(old));
            else
                reply_null(c);
        } else if (reply_kind == 1) {
            reply_int(c, 0);
        } else {
            reply_null(c);
        }
        return;
    }
    if (flags & SET_GET) {
        if (old)
            reply_bulk_str(c, entry_str(old));
        else
            reply_null(c);
    }
    kv_dirty(1);
    if (when && when <= srv.now_ms && !srv.loading && !repl_is_replica()) {
        /* already past: the key is gone at once */
        if (old)
            db_delete_entry(c->db, old);
        bk_str del[2] = { BK_STR("DEL"), key };
        kv_propagate_as(c, 2, del);
    } else {
        db_store_string(c->db, key, old, val.p, val.len,
                        when ? when : (flags & SET_KEEPTTL) ? DB_KEEPTTL : 0);
        if (when) {
            char ms[KV_LL_STR_MAX];
            bk_str prop[5] = { BK_STR("SET"), key, val, BK_STR("PXAT"), { ms, kv_fmt_ll(ms, when) } };
            kv_propagate_as(c, 5, prop);
        } else if ((flags & SET_GET) && c->argc <= 16) {
            /* replicas get SET without GET (GETSET as SET), as in Redis 7 */
            bk_str prop[16];
            int n = 0;
            prop[n++] = BK_STR("SET");
            for (int i = 1; i < c->argc; i++)
                if (i < 3 || !arg_is(c->argv[i], "get"))
                    prop[n++] = c->argv[i];
            kv_propagate_as(c, n, prop);
        }
    }
    kv_notify(c->db, NOTIFY_STRING, "set", key);
    if (when)
        kv_notify(c->db, NOTIFY_GENERIC, "expire", key);
    if (flags & SET_GET)
        return;
    if (reply_kind == 1)
        reply_int(c, 1);
    else
        reply_ok(c);
}

void set_command(kv_client *c)
{
    int flags = 0;
    int64_t when = 0;
    for (int i = 3; i < c->argc; i++) {
        bk_str o = c->argv[i];
        int more = c->argc - i - 1;
        if (arg_is(o, "nx") && !(flags & SET_XX)) {
            flags |= SET_NX;
        } else if (arg_is(o, "xx") && !(flags & SET_NX)) {
            flags |= SET_XX;
        } else if (arg_is(o, "get")) {
            flags |= SET_GET;
        } else if (arg_is(o, "keepttl") && !(flags & SET_EX)) {
            flags |= SET_KEEPTTL;
        } else if (more >= 1 && !(flags & (SET_EX | SET_KEEPTTL)) &&
                   (arg_is(o, "ex") || arg_is(o, "px") || arg_is(o, "exat") ||
                    arg_is(o, "pxat"))) {
            int unit = (o.p[0] | 0x20) == 'e' ? 1000 : 1;
            int absolute = o.len == 4;
            if (parse_expire(c, c->argv[++i], unit, absolute, &when) < 0)
                return;
            flags |= SET_EX;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    if (flags == 0) {
        /* hot path: plain SET */
        db_set_string(c->db, c->argv[1], c->argv[2].p, c->argv[2].len, 0);
        kv_notify(c->db, NOTIFY_STRING, "set", c->argv[1]);
        kv_dirty(1);
        reply_ok(c);
        return;
    }
    set_generic(c, c->argv[1], c->argv[2], flags, when, 0);
}

void setnx_command(kv_client *c)
{
    set_generic(c, c->argv[1], c->argv[2], SET_NX, 0, 1);
}

static void setex_generic(kv_client *c, int unit)
{
    int64_t when;
    if (parse_expire(c, c->argv[2], unit, 0, &when) < 0)
        return;
    set_generic(c, c->argv[1], c->argv[3], 0, when, 0);
}

void setex_command(kv_client *c) { setex_generic(c, 1000); }
void psetex_command(kv_client *c) { setex_generic(c, 1); }

void getset_command(kv_client *c)
{
    set_generic(c, c->argv[1], c->argv[2], SET_GET, 0, 0);
}

void getdel_command(kv_client *c)
{
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0); /* Redis reads it */
    if (e == KV_WRONGTYPE)
        return;
    if (!e) {
        reply_null(c);
        return;
    }
    reply_bulk_str(c, entry_str(e));
    db_delete_entry(c->db, e);
    kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
    kv_dirty(1);
    /* replicas and the AOF get a DEL, as Redis propagates it */
    bk_str del[2] = { BK_STR("DEL"), c->argv[1] };
    kv_propagate_as(c, 2, del);
}

void getex_command(kv_client *c)
{
    int64_t when = 0;
    int persist = 0, seen = 0;
    for (int i = 2; i < c->argc; i++) {
        bk_str o = c->argv[i];
        int more = c->argc - i - 1;
        if (arg_is(o, "persist") && !seen) {
            persist = 1;
            seen = 1;
        } else if (more >= 1 && !seen &&
                   (arg_is(o, "ex") || arg_is(o, "px") || arg_is(o, "exat") ||
                    arg_is(o, "pxat"))) {
            int unit = (o.p[0] | 0x20) == 'e' ? 1000 : 1;
            if (parse_expire(c, c->argv[++i], unit, o.len == 4, &when) < 0)
                return;
            seen = 1;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0); /* Redis reads it */
    if (e == KV_WRONGTYPE)
        return;
    if (!e) {
        reply_null(c);
        return;
    }
    reply_bulk_str(c, entry_str(e));
    if (when) {
        if (when <= srv.now_ms && !repl_is_replica()) {
            bk_str del[2] = { BK_STR("DEL"), c->argv[1] };
            db_delete_entry(c->db, e);
            kv_propagate_as(c, 2, del);
            kv_notify(c->db, NOTIFY_GENERIC, "del", c->argv[1]);
        } else {
            db_set_expire(c->db, e, when);
            char ms[KV_LL_STR_MAX];
            bk_str prop[3] = { BK_STR("PEXPIREAT"), c->argv[1], { ms, kv_fmt_ll(ms, when) } };
            kv_propagate_as(c, 3, prop);
            kv_notify(c->db, NOTIFY_GENERIC, "expire", c->argv[1]);
        }
        kv_dirty(1);
    } else if (persist && (e->flags & ENTRY_EXPIRES)) {
        db_persist(c->db, e);
        bk_str prop[2] = { BK_STR("PERSIST"), c->argv[1] };
        kv_propagate_as(c, 2, prop);
        kv_notify(c->db, NOTIFY_GENERIC, "persist", c->argv[1]);
        kv_dirty(1);
    }
}

void mget_command(kv_client *c)
{
    reply_array(c, c->argc - 1);
    for (int i = 1; i < c->argc; i++) {
        kv_entry *e = db_lookup_read(c->db, c->argv[i]);
        if (!e || e->type != KV_STRING)
            reply_null(c);
        else
            reply_bulk_str(c, entry_str(e));
    }
}

void mset_command(kv_client *c)
{
    if (c->argc % 2 == 0) {
        reply_arity_error(c, c->cmd->name);
        return;
    }
    for (int i = 1; i < c->argc; i += 2) {
        db_set_string(c->db, c->argv[i], c->argv[i + 1].p, c->argv[i + 1].len, 0);
        kv_notify(c->db, NOTIFY_STRING, "set", c->argv[i]);
    }
    kv_dirty(1);
    reply_ok(c);
}

void msetnx_command(kv_client *c)
{
    if (c->argc % 2 == 0) {
        reply_arity_error(c, c->cmd->name);
        return;
    }
    for (int i = 1; i < c->argc; i += 2) {
        if (db_lookup_write(c->db, c->argv[i])) {
            reply_int(c, 0);
            return;
        }
    }
    for (int i = 1; i < c->argc; i += 2) {
        db_set_string(c->db, c->argv[i], c->argv[i + 1].p, c->argv[i + 1].len, 0);
        kv_notify(c->db, NOTIFY_STRING, "set", c->argv[i]);
    }
    kv_dirty(1);
    reply_int(c, 1);
}

static void incr_generic(kv_client *c, long long by)
{
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 1);
    if (e == KV_WRONGTYPE)
        return;
    long long v = 0;
    if (e && kv_parse_ll(entry_val(e), entry_vlen(e), &v) < 0) {
        reply_error(c, ERR_NOT_INT);
        return;
    }
    if ((by > 0 && v > LLONG_MAX - by) || (by < 0 && v < LLONG_MIN - by)) {
        reply_error(c, ERR_OVERFLOW);
        return;
    }
    v += by;
    /* formatted once: the stored value, and between ':' and CRLF the reply */
    char b[KV_LL_STR_MAX + 3];
    b[0] = ':';
    size_t n = kv_fmt_ll(b + 1, v);
    db_store_string(c->db, c->argv[1], e, b + 1, n, DB_KEEPTTL);
    kv_notify(c->db, NOTIFY_STRING, "incrby", c->argv[1]);
    kv_dirty(1);
    b[n + 1] = '\r';
    b[n + 2] = '\n';
    reply_raw(c, b, n + 3);
}

void incr_command(kv_client *c) { incr_generic(c, 1); }
void decr_command(kv_client *c) { incr_generic(c, -1); }

void incrby_command(kv_client *c)
{
    long long by;
    if (arg_ll(c, c->argv[2], &by) < 0)
        return;
    incr_generic(c, by);
}

void decrby_command(kv_client *c)
{
    long long by;
    if (arg_ll(c, c->argv[2], &by) < 0)
        return;
    if (by == LLONG_MIN) {
        reply_error(c, "ERR decrement would overflow");
        return;
    }
    incr_generic(c, -by);
}

void incrbyfloat_command(kv_client *c)
{
    long double by, v = 0;
    if (kv_parse_ldouble(c->argv[2].p, c->argv[2].len, &by) < 0) {
        reply_error(c, ERR_NOT_FLOAT);
        return;
    }
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 1);
    if (e == KV_WRONGTYPE)
        return;
    if (e && kv_parse_ldouble(entry_val(e), entry_vlen(e), &v) < 0) {
        reply_error(c, ERR_NOT_FLOAT);
        return;
    }
    v += by;
    if (isnan(v) || isinf(v)) {
        reply_error(c, "ERR increment would produce NaN or Infinity");
        return;
    }
    char b[KV_LDBL_STR_MAX];
    size_t n = kv_fmt_ldouble(b, sizeof b, v);
    e = db_store_string(c->db, c->argv[1], e, b, n, DB_KEEPTTL);
    e->flags |= ENTRY_EMBSTR; /* see kv_entry */
    kv_notify(c->db, NOTIFY_STRING, "incrbyfloat", c->argv[1]);
    kv_dirty(1);
    bk_str prop[4] = { BK_STR("SET"), c->argv[1], { b, n }, BK_STR("KEEPTTL") };
    kv_propagate_as(c, 4, prop);
    reply_bulk(c, b, n);
}

void append_command(kv_client *c)
{
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 1);
    if (e == KV_WRONGTYPE)
        return;
    bk_str add = c->argv[2];
    if (!e) {
        e = db_store_string(c->db, c->argv[1], NULL, add.p, add.len, 0);
    } else {
        if (check_size(c, (uint64_t)entry_vlen(e) + add.len) < 0)
            return;
        size_t old = entry_vlen(e);
        e = db_string_resize(c->db, e, old + add.len);
        memcpy(entry_val(e) + old, add.p, add.len);
        e->raw = 1; /* Redis unshares it as a raw string */
    }
    kv_notify(c->db, NOTIFY_STRING, "append", c->argv[1]);
    kv_dirty(1);
    reply_int(c, (long long)entry_vlen(e));
}

void strlen_command(kv_client *c)
{
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0);
    if (e == KV_WRONGTYPE)
        return;
    reply_int(c, e ? (long long)entry_vlen(e) : 0);
}

void getrange_command(kv_client *c)
{
    long long start, end;
    if (arg_ll(c, c->argv[2], &start) < 0 || arg_ll(c, c->argv[3], &end) < 0)
        return;
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 0);
    if (e == KV_WRONGTYPE)
        return;
    long long len = e ? (long long)entry_vlen(e) : 0;
    if (!e || len == 0 || (start < 0 && end < 0 && start > end)) {
        reply_bulk(c, "", 0);
        return;
    }
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (end < 0)
        end = 0;
    if (end >= len)
        end = len - 1;
    if (start > end) {
        reply_bulk(c, "", 0);
        return;
    }
    reply_bulk(c, entry_val(e) + start, (size_t)(end - start + 1));
}

void substr_command(kv_client *c)
{
    getrange_command(c);
}

void setrange_command(kv_client *c)
{
    long long off;
    if (arg_ll(c, c->argv[2], &off) < 0)
        return;
    if (off < 0) {
        reply_error(c, ERR_OFFSET_RANGE);
        return;
    }
    bk_str v = c->argv[3];
    kv_entry *e = lookup_typed(c, c->argv[1], KV_STRING, 1);
    if (e == KV_WRONGTYPE)
        return;
    if (!e) {
        if (v.len == 0) {
            reply_int(c, 0);
            return;
        }
        if (check_size(c, (uint64_t)off + v.len) < 0)
            return;
        e = db_add_zeroed_string(c->db, c->argv[1], (size_t)off + v.len);
    } else if (v.len == 0) {
        reply_int(c, (long long)entry_vlen(e));
        return;
    } else if (check_size(c, (uint64_t)off + v.len) < 0) {
        return;
    }
    size_t need = (size_t)off + v.len;
    size_t old = entry_vlen(e);
    if (need > old) {
        e = db_string_resize(c->db, e, need);
        memset(entry_val(e) + old, 0, need - old);
    }
    memcpy(entry_val(e) + off, v.p, v.len);
    e->raw = 1; /* Redis unshares it as a raw string */
    kv_notify(c->db, NOTIFY_STRING, "setrange", c->argv[1]);
    kv_dirty(1);
    reply_int(c, (long long)entry_vlen(e));
}
