/* Replication, PSYNC2-compatible with Redis 7.0, both directions.
 *
 * Master side: a replica's PSYNC either continues from the backlog
 * (+CONTINUE) or gets +FULLRESYNC and an RDB that a forked child writes to
 * its socket (diskless: "$EOF:<mark>" framing; disk-backed: a temp file
 * sent as "$<len>"). Every write the AOF gets (aof_feed) is also encoded
 * into the backlog and the replicas' output with Redis's SELECT and
 * MULTI/EXEC framing; a replica proxies its master's stream verbatim to
 * its own replicas, so offsets agree along a chain.
 *
 * Replica side: a non-blocking handshake (PING, AUTH, REPLCONF, PSYNC)
 * driven by the loop, the RDB received into memory and loaded, then the
 * socket becomes a client whose commands run with replies dropped. */
#ifndef BRISK_KV_REPLICATION_H
#define BRISK_KV_REPLICATION_H

#include "kv/server.h"

/* c->repl_flags */
enum {
    REPL_C_MASTER = 1u << 0,  /* the link to our master */
    REPL_C_REPLICA = 1u << 1, /* a replica of ours (after SYNC/PSYNC) */
    REPL_C_HOLD = 1u << 2,    /* the RDB child owns the socket (TLS: the relay): no writes */
    REPL_C_WAITING = 1u << 3, /* blocked in WAIT */
    REPL_C_ACKWAIT = 1u << 4, /* diskless sync sent: the stream starts at its first ACK */
    REPL_C_RESUME = 1u << 5,  /* WAIT replied: its queued input runs from a timer */
};

#endif
