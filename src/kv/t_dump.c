/* DUMP, RESTORE (and RESTORE-ASKING), MIGRATE: values moved between
 * servers as DUMP payloads (rdb.h), with Redis 7.0's options and errors. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/rdb.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>

#define ERR_BUSYKEY "BUSYKEY Target key name already exists."
#define ERR_PAYLOAD "ERR DUMP payload version or checksum are wrong"
#define ERR_BAD_FORMAT "ERR Bad data format"

static int arg_is(str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

void dump_command(kv_client *c)
{
    kv_entry *e = db_lookup_read(c->db, c->argv[1]);
    if (!e) {
        reply_null(c);
        return;
    }
    buf b = { 0 };
    rdb_dump_payload(&b, e);
    reply_bulk(c, b.data, b.len);
    buf_free(&b);
}

/* The LRU stamp for a key idle for idle_s seconds (IDLETIME), on the
 * 28-bit clock of KV_LRU_MS ticks; idle times past the clock's range wrap
 * to half its range ago, as Redis does. */
static uint32_t lru_for_idle(long long idle_s)
{
    const uint64_t range = 1u << 28;
    uint64_t ticks = (uint64_t)idle_s > UINT64_MAX / 1000 ? UINT64_MAX : (uint64_t)idle_s * 1000 / KV_LRU_MS;
    if (ticks > srv.lru_clock)
        return (uint32_t)((srv.lru_clock + range / 2) % range);
    return (uint32_t)(srv.lru_clock - ticks);
}

void restore_command(kv_client *c)
{
    int replace = 0, absttl = 0;
    long long idle = -1, freq = -1, ttl;
    for (int j = 4; j < c->argc; j++) {
        int more = c->argc - j - 1;
        str o = c->argv[j];
        if (arg_is(o, "replace")) {
            replace = 1;
        } else if (arg_is(o, "absttl")) {
            absttl = 1;
        } else if (arg_is(o, "idletime") && more >= 1 && freq == -1) {
            if (arg_ll(c, c->argv[++j], &idle) < 0)
                return;
            if (idle < 0) {
                reply_error(c, "ERR Invalid IDLETIME value, must be >= 0");
                return;
            }
        } else if (arg_is(o, "freq") && more >= 1 && idle == -1) {
            if (arg_ll(c, c->argv[++j], &freq) < 0)
                return;
            if (freq < 0 || freq > 255) {
                reply_error(c, "ERR Invalid FREQ value, must be >= 0 and <= 255");
                return;
            }
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    str key = c->argv[1];
    if (!replace && db_lookup_write(c->db, key)) {
        reply_error(c, ERR_BUSYKEY);
        return;
    }
    if (arg_ll(c, c->argv[2], &ttl) < 0)
        return;
    if (ttl < 0) {
        reply_error(c, "ERR Invalid TTL value, must be >= 0");
        return;
    }
    str payload = c->argv[3];
    if (rdb_verify_payload(payload.p, payload.len) < 0) {
        reply_error(c, ERR_PAYLOAD);
        return;
    }
    rdb_value v;
    if (rdb_load_payload(payload.p, payload.len, &v) < 0) {
        reply_error(c, ERR_BAD_FORMAT);
        return;
    }
    int deleted = 0;
    if (replace) {
        kv_entry *old = db_lookup_write(c->db, key);
        if (old) {
            db_delete_entry(c->db, old);
            deleted = 1;
        }
    }
    /* A relative TTL past the end of time wraps negative in Redis, which
     * then finds the key already expired: the same outcome here, without
     * the overflow. */
    int expired = 0;
    if (ttl && !absttl) {
        if (ttl > LLONG_MAX - srv.now_ms)
            expired = 1;
        else
            ttl += srv.now_ms;
    }
    if (ttl && ttl <= srv.now_ms && !srv.loading)
        expired = 1;
    if (expired) {
        rdb_value_free(&v);
        if (deleted) {
            str del[2] = { STR("DEL"), key };
            kv_touch_key(c->db, key);
            kv_dirty(1);
            kv_propagate_as(c, 2, del);
        }
        reply_ok(c);
        return;
    }
    kv_entry *e = rdb_value_store(c->db, key, &v);
    if (ttl) {
        e = db_set_expire(c->db, e, ttl);
        if (!absttl) {
            /* The AOF gets the absolute time, as Redis propagates it. */
            char ms[KV_LL_STR_MAX];
            str *prop = kv_malloc(((size_t)c->argc + 1) * sizeof *prop);
            for (int i = 0; i < c->argc; i++)
                prop[i] = c->argv[i];
            prop[2] = (str){ ms, kv_fmt_ll(ms, ttl) };
            prop[c->argc] = STR("ABSTTL");
            kv_propagate_as(c, c->argc + 1, prop);
            kv_free(prop);
        }
    }
    /* IDLETIME sets the LRU stamp; FREQ is kept only under an LFU policy,
     * which brisk-kv does not have, so it is checked and dropped. */
    if (idle >= 0)
        e->lru = lru_for_idle(idle) & 0xfffffff;
    kv_touch_key(c->db, key);
    kv_dirty(1);
    reply_ok(c);
}
