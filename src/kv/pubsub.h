/* Pub/Sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH,
 * SPUBLISH and PUBSUB.
 *
 * Each channel (each pattern, each shard channel) with at least one
 * subscriber is a kv_chan in srv.channels (srv.patterns,
 * srv.shard_channels) holding its subscribers; each
 * client holds the kv_chans it subscribed to, so that closing a client
 * unsubscribes it everywhere. A PUBLISH writes the message into every
 * receiver's output buffer at once (flushed at the end of the loop batch,
 * like replies) and checks the receiver's output limits (a subscriber is
 * of the pubsub class of client-output-buffer-limit).
 *
 * Shard channels (SSUBSCRIBE/SPUBLISH) are Redis 7's cluster-scoped
 * channels: without cluster mode they are a namespace of their own, with
 * no pattern matching and their own subscription count.
 *
 * Replies follow Redis: in RESP2 subscription replies and messages are
 * arrays and a subscribed client may only run (P|S)SUBSCRIBE,
 * (P|S)UNSUBSCRIBE, PING, QUIT and RESET; in RESP3 they are push messages and any command
 * runs. Main thread only. */
#ifndef BRISK_KV_PUBSUB_H
#define BRISK_KV_PUBSUB_H

#include "kv/server.h"

typedef struct kv_chan {
    dict_node node; /* aux = name length */
    kv_client **clients;
    int n, cap;
    char name[];
} kv_chan;

/* A client's subscriptions (NULL until its first one). */
typedef struct kv_subs {
    kv_chan **ch, **pat, **sch;
    int nch, chcap, npat, patcap, nsch, schcap;
} kv_subs;

void pubsub_init(void);
void pubsub_free(void);
/* Drops every subscription of c without replying (close, RESET). */
void pubsub_unsubscribe_all(kv_client *c);
/* Channels plus patterns c is subscribed to (the count SUBSCRIBE replies). */
static inline int pubsub_count(const kv_client *c)
{
    return c->subs ? c->subs->nch + c->subs->npat : 0;
}
/* Every subscription, shard channels included: a client with any is of the
 * pubsub class (output limits, the RESP2 subscribed state). */
static inline int pubsub_total(const kv_client *c)
{
    return c->subs ? c->subs->nch + c->subs->npat + c->subs->nsch : 0;
}
/* Whether c is in RESP2's subscribed state, where only a few commands run. */
static inline int pubsub_restricted(const kv_client *c)
{
    return c->resp < 3 && pubsub_total(c) > 0;
}
/* Whether cmd may run in that state. */
int pubsub_allowed_when_subscribed(const kv_cmd *cmd);
/* Delivers msg to the subscribers of channel and of the patterns matching
 * it (PUBLISH, keyspace notifications). Returns the number of receivers. */
long long pubsub_publish(bk_str channel, bk_str msg);

#endif
