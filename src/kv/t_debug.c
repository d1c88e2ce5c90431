/* DEBUG subcommands Redis 7.0's test suite drives in its server-starting
 * mode (tags needs:debug): PROTOCOL, QUICKLIST-PACKED-THRESHOLD,
 * SET-DISABLE-DENY-SCRIPTS, PAUSE-CRON, REPLYBUFFER, HTSTATS, HTSTATS-KEY,
 * HELP. Replies and errors are Redis 7.0.15's. */
#include "kv/config.h"
#include "kv/db.h"
#include "kv/rdb.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kv_debug_allow_noscript;
int kv_debug_cron_paused;

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

/* ---- PROTOCOL <type>: one reply of each RESP type ---- */

static void protocol_string(kv_client *c) { reply_bulk_cstr(c, "Hello World"); }
static void protocol_integer(kv_client *c) { reply_int(c, 12345); }
static void protocol_double(kv_client *c) { reply_double(c, 3.141); }
static void protocol_null(kv_client *c) { reply_null(c); }
static void protocol_true(kv_client *c) { reply_bool(c, 1); }
static void protocol_false(kv_client *c) { reply_bool(c, 0); }

static void protocol_bignum(kv_client *c)
{
    static const char n[] = "1234567999999999999999999999999999999";
    if (c->resp >= 3) {
        reply_raw(c, "(", 1);
        reply_raw(c, n, sizeof n - 1);
        reply_raw(c, "\r\n", 2);
    } else {
        reply_bulk(c, n, sizeof n - 1);
    }
}

static void protocol_array(kv_client *c)
{
    reply_array(c, 3);
    for (int i = 0; i < 3; i++)
        reply_int(c, i);
}

static void protocol_set(kv_client *c)
{
    reply_set(c, 3);
    for (int i = 0; i < 3; i++)
        reply_int(c, i);
}

static void protocol_map(kv_client *c)
{
    reply_map(c, 3);
    for (int i = 0; i < 3; i++) {
        reply_int(c, i);
        reply_bool(c, i == 1);
    }
}

static void protocol_attrib(kv_client *c)
{
    if (c->resp >= 3) { /* an attribute (RESP3 only), then the reply */
        reply_raw(c, "|1\r\n", 4);
        reply_bulk_cstr(c, "key-popularity");
        reply_array(c, 2);
        reply_bulk_cstr(c, "key:123");
        reply_int(c, 90);
    }
    reply_bulk_cstr(c, "Some real reply following the attribute");
}

static void protocol_push(kv_client *c)
{
    if (c->resp < 3) {
        reply_error(c, "ERR RESP2 is not supported by this command");
        return;
    }
    reply_raw(c, ">2\r\n", 4);
    reply_bulk_cstr(c, "server-cpu-usage");
    reply_int(c, 42);
    reply_bulk_cstr(c, "Some real reply following the push reply");
}

static void protocol_verbatim(kv_client *c)
{
    static const char v[] = "This is a verbatim\nstring";
    reply_verbatim(c, v, sizeof v - 1, "txt");
}

static const struct {
    const char *name;
    void (*fn)(kv_client *c);
} protocol_types[] = {
    { "string", protocol_string },   { "integer", protocol_integer },
    { "double", protocol_double },   { "bignum", protocol_bignum },
    { "null", protocol_null },       { "array", protocol_array },
    { "set", protocol_set },         { "map", protocol_map },
    { "attrib", protocol_attrib },   { "push", protocol_push },
    { "verbatim", protocol_verbatim }, { "true", protocol_true },
    { "false", protocol_false },
};

static void debug_protocol(kv_client *c)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(protocol_types); i++) {
        if (arg_is(c->argv[2], protocol_types[i].name)) {
            protocol_types[i].fn(c);
            return;
        }
    }
    reply_error(c, "ERR Wrong protocol type name. Please use one of the following: "
                   "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false");
}

/* ---- HTSTATS / HTSTATS-KEY ---- */

/* One table's part of the stats: its slots and items (brisk-kv's chains
 * are not counted). */
static void table_stats(bk_buf *b, const char *which, size_t slots, size_t items)
{
    char line[256];
    int n = items == 0 ? snprintf(line, sizeof line,
                                  "Hash table %s:\nNo stats available for empty dictionaries\n",
                                  which)
                       : snprintf(line, sizeof line,
                                  "Hash table %s:\n table size: %zu\n number of elements: %zu\n",
                                  which, slots, items);
    if (n > 0)
        buf_append(b, line, (size_t)n);
}

/* A dict's table t in full, chains included, as Redis's dictGetStats: the
 * float arithmetic is Redis's too, so the rounding agrees. */
static void dict_table_stats(bk_buf *b, const dict *d, int t)
{
    const char *which = t == 0 ? "0 stats (main hash table)" : "1 stats (rehashing target)";
    if (d->used[t] == 0) {
        table_stats(b, which, d->size[t], 0);
        return;
    }
    enum { HIST = 50 }; /* Redis's DICT_STATS_VECTLEN; its last slot is not listed */
    size_t hist[HIST], maxchain;
    size_t slots = dict_chain_stats(d, t, &maxchain, hist, HIST);
    char line[512];
    int n = snprintf(line, sizeof line,
                     "Hash table %s:\n table size: %zu\n number of elements: %zu\n"
                     " different slots: %zu\n max chain length: %zu\n"
                     " avg chain length (counted): %.02f\n avg chain length (computed): %.02f\n"
                     " Chain length distribution:\n",
                     which, d->size[t], d->used[t], slots, maxchain,
                     (double)((float)d->used[t] / (float)slots),
                     (double)((float)d->used[t] / (float)slots));
    if (n > 0)
        buf_append(b, line, (size_t)n);
    for (size_t i = 0; i < HIST - 1; i++) {
        if (hist[i] == 0)
            continue;
        n = snprintf(line, sizeof line, "   %zu: %zu (%.02f%%)\n", i, hist[i],
                     (double)((float)hist[i] / (float)d->size[t] * 100));
        if (n > 0)
            buf_append(b, line, (size_t)n);
    }
}

static void debug_htstats(kv_client *c)
{
    long long id;
    if (arg_ll(c, c->argv[2], &id) < 0)
        return;
    if (id < 0 || id >= srv.cfg.databases) {
        reply_error(c, "ERR Out of range database");
        return;
    }
    kv_db *db = &srv.dbs[id];
    bk_buf b = { 0 };
    buf_append(&b, "[Dictionary HT]\n", 16);
    table_stats(&b, "0 stats (main hash table)", db->keys.size[0], db->keys.used[0]);
    if (keytab_resizing(&db->keys))
        table_stats(&b, "1 stats (rehashing target)", db->keys.size[1], db->keys.used[1]);
    buf_append(&b, "[Expires HT]\n", 13);
    table_stats(&b, "0 stats (main hash table)", db->vol_len, db->vol_len);
    reply_verbatim(c, b.data, b.len, "txt");
    buf_free(&b);
}

static void debug_htstats_key(kv_client *c)
{
    kv_entry *e = db_find(c->db, c->argv[2]);
    if (!e) {
        reply_error(c, "ERR no such key");
        return;
    }
    if (strcmp(rdb_encoding_name(e), "hashtable") != 0) {
        reply_error(c, "ERR The value stored at the specified key is not represented using an "
                       "hash table");
        return;
    }
    dict *d = e->type == KV_SET ? (dict *)entry_obj(e) : hash_dict(entry_obj(e));
    bk_buf b = { 0 };
    dict_table_stats(&b, d, 0);
    if (dict_rehashing(d))
        dict_table_stats(&b, d, 1);
    reply_verbatim(c, b.data, b.len, "txt");
    buf_free(&b);
}

/* ---- the rest ---- */

static void debug_quicklist_threshold(kv_client *c)
{
    /* brisk-kv's lists have no plain nodes: the size is checked as Redis
     * checks it, and has no other effect */
    char v[64];
    uint64_t sz;
    size_t n = BK_MIN(c->argv[2].len, sizeof v - 1);
    memcpy(v, c->argv[2].p, n);
    v[n] = '\0';
    if (c->argv[2].len >= sizeof v || kv_config_parse_memory(v, &sz) < 0 ||
        sz > (1ull << 32) - (1ull << 20)) {
        reply_error(c, "ERR argument must be a memory value bigger than 1 and smaller than 4gb");
        return;
    }
    reply_ok(c);
}

/* DEBUG REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|ms> | RESIZING <0|1>:
 * 0 for another word (the caller's unknown-subcommand error). */
static int debug_replybuffer(kv_client *c)
{
    bk_str what = c->argv[2], v = c->argv[3];
    if (arg_is(what, "peak-reset-time")) {
        long long ms;
        if (arg_is(v, "never"))
            srv.rb_peak_reset_time = -1;
        else if (arg_is(v, "reset"))
            srv.rb_peak_reset_time = KV_RB_PEAK_RESET_MS;
        else if (arg_ll(c, v, &ms) < 0)
            return 1;
        else
            srv.rb_peak_reset_time = ms;
    } else if (arg_is(what, "resizing")) {
        long long on = 0;
        kv_parse_ll(v.p, v.len, &on); /* (atoi, as Redis: junk is 0) */
        srv.rb_resizing = on != 0;
    } else {
        return 0;
    }
    reply_ok(c);
    return 1;
}

static void debug_flag(kv_client *c, int *flag)
{
    long long v = 0;
    kv_parse_ll(c->argv[2].p, c->argv[2].len, &v); /* (atoi, as Redis: junk is 0) */
    *flag = v != 0;
    reply_ok(c);
}

static const char *const debug_help[] = {
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about the <key> and associated value.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "REPLICATE <command> [<arg> ...]",
    "    Propagate <command> to the replicas and the AOF as it is.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Disable/enable the deny-script flag on commands (allowing scripts to call",
    "    them).",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak",
    "    resets. In case NEVER is provided the last observed peak will never be",
    "    reset. In case RESET is provided the peak reset time will be restored to",
    "    the default value.",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job.",
    "HELP",
    "    Print this help.",
};

int kv_debug_suite_subcommand(kv_client *c)
{
    bk_str sub = c->argv[1];
    if (arg_is(sub, "help") && c->argc == 2) {
        reply_array(c, (long long)BK_ARRAY_LEN(debug_help));
        for (size_t i = 0; i < BK_ARRAY_LEN(debug_help); i++)
            reply_simple(c, debug_help[i]);
    } else if (arg_is(sub, "protocol") && c->argc == 3) {
        debug_protocol(c);
    } else if (arg_is(sub, "quicklist-packed-threshold") && c->argc == 3) {
        debug_quicklist_threshold(c);
    } else if (arg_is(sub, "set-disable-deny-scripts") && c->argc == 3) {
        debug_flag(c, &kv_debug_allow_noscript);
    } else if (arg_is(sub, "pause-cron") && c->argc == 3) {
        debug_flag(c, &kv_debug_cron_paused);
    } else if (arg_is(sub, "htstats") && c->argc == 3) {
        debug_htstats(c);
    } else if (arg_is(sub, "htstats-key") && c->argc == 3) {
        debug_htstats_key(c);
    } else if (arg_is(sub, "replybuffer") && c->argc == 4 && debug_replybuffer(c)) {
        /* replied */
    } else {
        return 0;
    }
    return 1;
}
