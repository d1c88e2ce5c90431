/* Blocking commands: a client parks on keys (BLPOP, BZPOPMIN, ... and later
 * XREAD BLOCK) or on nothing (WAIT) until it is served, times out, is
 * unblocked by CLIENT UNBLOCK or disconnects. Nothing polls:
 *
 * - Each db has a table key -> FIFO of the clients waiting on that key.
 * - A write that creates a key (db_add_obj, RENAME, MOVE, COPY, RESTORE,
 *   SWAPDB) calls blocking_signal(), which marks the key ready when someone
 *   waits on it (one load and a branch when nobody is blocked).
 * - After each top-level command (after EXEC as a whole, not per queued
 *   command) blocking_serve_ready() walks the ready keys in signalling
 *   order and, for each, the waiting clients in FIFO order, calling their
 *   kind's serve(). A serve that writes (BLMOVE's push) may make more keys
 *   ready; they are served in the same call.
 * - A served client gets its reply at once; the commands it pipelined
 *   after the blocking one run from a 0 ms loop timer, after this batch of
 *   events and before its AOF write and replies, so a chain of blocked
 *   clients never recurses.
 * - Timeouts are loop timers (ms precision), one per blocked client.
 *
 * Inside EXEC (and scripts) a blocking command must not block:
 * blocking_denied() says so and the command answers as if it timed out.
 * Whatever runs commands on a client's behalf (EXEC, a script) raises
 * srv.blk_deny around them.
 *
 * Cost when nobody blocks, measured with callgrind over 100k pipelined
 * LPUSH + 100k ZADD: about 5 instructions per command (the checks in
 * process_input and after kv_call) of ~2,700. */
#ifndef BRISK_KV_BLOCKING_H
#define BRISK_KV_BLOCKING_H

#include "kv/server.h"

/* What one kind of blocking command does when its client is woken. */
typedef struct kv_block_kind {
    /* The value type (KV_LIST, KV_ZSET, ...) a ready key must hold to serve
     * this kind; keys of other types leave the client blocked. */
    int value_type;
    /* key (in db, holding value_type as e) is ready: answer c from it.
     * Returns 1 when c got its reply (it is then unblocked), 0 when it
     * stays blocked. The serve propagates what it changed (aof_feed) and
     * counts it (kv_dirty); c->cmd is the blocking command. */
    int (*serve)(kv_client *c, kv_db *db, bk_str key, kv_entry *e);
    /* Writes the reply of a timeout (also CLIENT UNBLOCK [TIMEOUT]). */
    void (*timed_out)(kv_client *c);
} kv_block_kind;

/* The state of a blocked client; c->bstate, kept (and reused) from the
 * first block until the client closes. */
typedef struct kv_bstate {
    const kv_block_kind *kind;
    const struct kv_cmd *cmd;
    kv_db *db;
    /* A copy of the blocking command's argv, owned here, valid while the
     * client is blocked: serve() reads its keys and options from it. */
    int argc;
    bk_str *argv;
    size_t argv_bytes;
    /* Parsed options the command keeps for serve() (where, count, ...). */
    long long param[4];
    /* private */
    struct kv_bwait *waits; /* one per distinct key, linked into its FIFO */
    int nwaits, waits_cap;
    bk_timer tm;
} kv_bstate;

/* Parses a timeout in seconds (a float, Redis's rules and errors). *ms gets
 * the relative timeout in ms, 0 for none (block forever). Replies the
 * error and returns -1 when invalid. */
int blocking_timeout_arg(kv_client *c, bk_str arg, int64_t *ms);
/* The same for a timeout in milliseconds (an integer: XREAD BLOCK, WAIT). */
int blocking_timeout_ms_arg(kv_client *c, bk_str arg, int64_t *ms);

/* 1 when c must not block now (inside EXEC or a script, or c replays the
 * AOF): the command answers as if its timeout expired at once. */
int blocking_denied(const kv_client *c);

/* The arguments of LMPOP/ZMPOP (numkeys at argv[numkeys_idx], keys, a
 * where word w0 or w1 (lower case), [COUNT n]) and of BLMPOP/BZMPOP.
 * Sets *nkeys, *where (0 for w0, 1 for w1) and *count (1 when absent).
 * Replies the error and returns -1 when invalid. */
int blocking_mpop_args(kv_client *c, int numkeys_idx, const char *w0, const char *w1,
                       int *nkeys, int *where, long long *count);

/* Parks c on the nkeys keys at c->argv[first_key...] (duplicates count
 * once) for timeout_ms (0: forever). Copies c->argv; returns the state so
 * the command can fill param[]. c reads no more commands until woken. */
kv_bstate *blocking_park(kv_client *c, const kv_block_kind *kind, int first_key, int nkeys,
                         int64_t timeout_ms);

/* c (blocked) got its reply from elsewhere, e.g. WAIT on replica acks:
 * unblocks it. */
void blocking_done(kv_client *c);

/* Key creation hook: key in db may now serve someone. A command that makes
 * an existing key ready (XADD on a stream clients wait on) calls it too. */
void blocking_signal_key(kv_db *db, bk_str key);
static inline void blocking_signal(kv_db *db, bk_str key)
{
    if (BK_UNLIKELY(srv.blk_nkeys))
        blocking_signal_key(db, key);
}
/* SWAPDB: every waited-on key of db that exists now is ready. */
void blocking_signal_db(kv_db *db);

/* Serves the ready keys; call after a top-level command. */
void blocking_serve_ready(void);
static inline void blocking_after_command(void)
{
    if (BK_UNLIKELY(srv.blk_nready))
        blocking_serve_ready();
}

/* CLIENT UNBLOCK id [TIMEOUT|ERROR] (argv[2], argv[3]). */
void blocking_client_unblock_command(kv_client *c);

/* A closing client: leaves every FIFO, stops its timer, frees its state. */
void blocking_client_closed(kv_client *c);

#endif
