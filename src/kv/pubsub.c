#include "kv/pubsub.h"

#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

static bk_str chan_key(const dict_node *n)
{
    const kv_chan *ch = (const kv_chan *)(const void *)n;
    return (bk_str){ ch->name, n->aux };
}

void pubsub_init(void)
{
    dict_init(&srv.channels, chan_key);
    dict_init(&srv.patterns, chan_key);
    dict_init(&srv.shard_channels, chan_key);
}

static void free_chan(dict_node *n, void *ud)
{
    kv_chan *ch = (kv_chan *)(void *)n;
    kv_free(ch->clients);
    kv_free(ch);
}

void pubsub_free(void)
{
    dict_clear(&srv.channels, free_chan, NULL);
    dict_clear(&srv.patterns, free_chan, NULL);
    dict_clear(&srv.shard_channels, free_chan, NULL);
}

int pubsub_allowed_when_subscribed(const kv_cmd *cmd)
{
    return cmd->proc == subscribe_command || cmd->proc == unsubscribe_command ||
           cmd->proc == psubscribe_command || cmd->proc == punsubscribe_command ||
           cmd->proc == ssubscribe_command || cmd->proc == sunsubscribe_command ||
           cmd->proc == ping_command || cmd->proc == quit_command || cmd->proc == reset_command;
}

/* ---- the two sides of a subscription ---- */

static void push_ptr(void ***arr, int *n, int *cap, void *p)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *arr = kv_realloc(*arr, (size_t)*cap * sizeof **arr);
    }
    (*arr)[(*n)++] = p;
}

/* Removes p from arr keeping the order (clients see their subscriptions
 * listed in the order they made them). Returns 1 if it was there. */
static int remove_ptr(void **arr, int *n, const void *p)
{
    for (int i = 0; i < *n; i++) {
        if (arr[i] == p) {
            memmove(arr + i, arr + i + 1, (size_t)(*n - i - 1) * sizeof *arr);
            (*n)--;
            return 1;
        }
    }
    return 0;
}

static kv_chan *chan_find(dict *d, bk_str name)
{
    return (kv_chan *)(void *)dict_find(d, name.p, name.len, dict_hash32(name.p, name.len));
}

static kv_subs *subs_of(kv_client *c)
{
    if (!c->subs)
        c->subs = kv_calloc(sizeof *c->subs);
    return c->subs;
}

/* The three kinds of subscription: where their kv_chans are, and the
 * client's list of them. */
enum { SUB_CHANNEL, SUB_PATTERN, SUB_SHARD };

static dict *kind_dict(int kind)
{
    return kind == SUB_PATTERN ? &srv.patterns
           : kind == SUB_SHARD ? &srv.shard_channels
                               : &srv.channels;
}

static kv_chan ***kind_list(kv_subs *s, int kind, int **n, int **cap)
{
    switch (kind) {
    case SUB_PATTERN: *n = &s->npat; *cap = &s->patcap; return &s->pat;
    case SUB_SHARD: *n = &s->nsch; *cap = &s->schcap; return &s->sch;
    default: *n = &s->nch; *cap = &s->chcap; return &s->ch;
    }
}

/* Subscribes c to name. Returns 1 when new. */
static int subscribe(kv_client *c, int kind, bk_str name)
{
    kv_subs *s = subs_of(c);
    dict *d = kind_dict(kind);
    int *n, *cap;
    kv_chan ***mine = kind_list(s, kind, &n, &cap);
    kv_chan *ch = chan_find(d, name);
    if (ch) {
        for (int i = 0; i < *n; i++)
            if ((*mine)[i] == ch)
                return 0;
    } else {
        ch = kv_calloc(sizeof *ch + name.len + 1);
        ch->node.aux = (uint32_t)name.len;
        ch->node.hash = dict_hash32(name.p, name.len);
        memcpy(ch->name, name.p, name.len);
        dict_add(d, &ch->node);
    }
    push_ptr((void ***)&ch->clients, &ch->n, &ch->cap, c);
    push_ptr((void ***)mine, n, cap, ch);
    return 1;
}

/* Drops c's subscription to ch (which c holds). */
static void unsubscribe(kv_client *c, int kind, kv_chan *ch)
{
    int *n, *cap;
    kv_chan ***mine = kind_list(c->subs, kind, &n, &cap);
    remove_ptr((void **)*mine, n, ch);
    /* Order among a channel's subscribers does not matter: swap-remove. */
    for (int i = 0; i < ch->n; i++) {
        if (ch->clients[i] == c) {
            ch->clients[i] = ch->clients[--ch->n];
            break;
        }
    }
    if (ch->n == 0) {
        dict_unlink_node(kind_dict(kind), &ch->node);
        free_chan(&ch->node, NULL);
    }
}

void pubsub_unsubscribe_all(kv_client *c)
{
    kv_subs *s = c->subs;
    if (!s)
        return;
    while (s->nch)
        unsubscribe(c, SUB_CHANNEL, s->ch[s->nch - 1]);
    while (s->npat)
        unsubscribe(c, SUB_PATTERN, s->pat[s->npat - 1]);
    while (s->nsch)
        unsubscribe(c, SUB_SHARD, s->sch[s->nsch - 1]);
    kv_free(s->ch);
    kv_free(s->pat);
    kv_free(s->sch);
    kv_free(s);
    c->subs = NULL;
}

/* ---- replies ---- */

/* The header of an out-of-band message: a push in RESP3, an array in RESP2. */
static void push_header(kv_client *c, long long n)
{
    char h[32];
    h[0] = c->resp >= 3 ? '>' : '*';
    size_t len = 1 + kv_fmt_ll(h + 1, n);
    h[len++] = '\r';
    h[len++] = '\n';
    reply_raw(c, h, len);
}

/* Out-of-band messages are not replies: CLIENT REPLY OFF/SKIP drops the
 * running command's output after it ran (kv_client_after_command), so a
 * push written to that client meanwhile (its own (un)subscribe
 * confirmations, a message it published to itself) moves to srv.trk_self,
 * which is written after the truncation, as Redis sends them anyway. */
static void push_keep(kv_client *c, size_t at)
{
    if (c == srv.cl_running && (c->cl_flags & (CL_REPLY_OFF | CL_REPLY_SKIP)) &&
        c->wbuf.len > at) {
        buf_append(&srv.trk_self, c->wbuf.data + at, c->wbuf.len - at);
        c->wbuf.len = at;
    }
}

static const char *const sub_names[] = { "subscribe", "psubscribe", "ssubscribe" };
static const char *const unsub_names[] = { "unsubscribe", "punsubscribe", "sunsubscribe" };

/* The count in the reply: shard channels are counted apart. */
static void reply_subscription(kv_client *c, int kind, const char *what, bk_str name,
                               int null_name)
{
    size_t at = c->wbuf.len;
    push_header(c, 3);
    reply_bulk_cstr(c, what);
    if (null_name)
        reply_null(c);
    else
        reply_bulk_str(c, name);
    reply_int(c, kind == SUB_SHARD ? (c->subs ? c->subs->nsch : 0) : pubsub_count(c));
    push_keep(c, at);
}

static void subscribe_generic(kv_client *c, int kind)
{
    for (int i = 1; i < c->argc; i++) {
        subscribe(c, kind, c->argv[i]);
        reply_subscription(c, kind, sub_names[kind], c->argv[i], 0);
    }
}

static void unsubscribe_generic(kv_client *c, int kind)
{
    dict *d = kind_dict(kind);
    const char *what = unsub_names[kind];
    int *n = NULL, *cap;
    kv_chan ***mine = c->subs ? kind_list(c->subs, kind, &n, &cap) : NULL;
    if (c->argc == 1) {
        /* All of them, oldest first; one reply even when there were none. */
        if (!mine || *n == 0) {
            reply_subscription(c, kind, what, BK_STR_NULL, 1);
            return;
        }
        while (*n) {
            kv_chan *ch = (*mine)[0];
            /* the name goes into the reply after the channel may be freed */
            char small[128];
            char *copy = ch->node.aux <= sizeof small ? small : kv_malloc(ch->node.aux);
            bk_str name = { copy, ch->node.aux };
            memcpy(copy, ch->name, ch->node.aux);
            unsubscribe(c, kind, ch);
            reply_subscription(c, kind, what, name, 0);
            if (copy != small)
                kv_free(copy);
        }
        return;
    }
    for (int i = 1; i < c->argc; i++) {
        kv_chan *ch = chan_find(d, c->argv[i]);
        if (ch && mine) {
            for (int k = 0; k < *n; k++) {
                if ((*mine)[k] == ch) {
                    unsubscribe(c, kind, ch);
                    break;
                }
            }
        }
        reply_subscription(c, kind, what, c->argv[i], 0);
    }
}

void subscribe_command(kv_client *c) { subscribe_generic(c, SUB_CHANNEL); }
void psubscribe_command(kv_client *c) { subscribe_generic(c, SUB_PATTERN); }
void ssubscribe_command(kv_client *c) { subscribe_generic(c, SUB_SHARD); }
void unsubscribe_command(kv_client *c) { unsubscribe_generic(c, SUB_CHANNEL); }
void punsubscribe_command(kv_client *c) { unsubscribe_generic(c, SUB_PATTERN); }
void sunsubscribe_command(kv_client *c) { unsubscribe_generic(c, SUB_SHARD); }

/* One message: pattern is NULL for channel and shard subscribers. */
static void deliver(kv_client *to, const char *what, const kv_chan *pattern, bk_str channel,
                    bk_str msg)
{
    size_t at = to->wbuf.len;
    push_header(to, pattern ? 4 : 3);
    reply_bulk_cstr(to, what);
    if (pattern)
        reply_bulk(to, pattern->name, pattern->node.aux);
    reply_bulk_str(to, channel);
    reply_bulk_str(to, msg);
    push_keep(to, at);
    kv_client_output_added(to);
}

long long pubsub_publish(bk_str channel, bk_str msg)
{
    long long receivers = 0;
    kv_chan *ch = chan_find(&srv.channels, channel);
    if (ch) {
        for (int i = 0; i < ch->n; i++)
            deliver(ch->clients[i], "message", NULL, channel, msg);
        receivers += ch->n;
    }
    if (dict_size(&srv.patterns)) {
        dict_iter it;
        dict_iter_init(&it, &srv.patterns);
        for (dict_node *n; (n = dict_iter_next(&it));) {
            kv_chan *p = (kv_chan *)(void *)n;
            if (!kv_glob_match(p->name, n->aux, channel.p, channel.len, 0))
                continue;
            for (int i = 0; i < p->n; i++)
                deliver(p->clients[i], "pmessage", p, channel, msg);
            receivers += p->n;
        }
        dict_iter_end(&it);
    }
    return receivers;
}

void publish_command(kv_client *c)
{
    reply_int(c, pubsub_publish(c->argv[1], c->argv[2]));
}

void spublish_command(kv_client *c)
{
    long long receivers = 0;
    kv_chan *ch = chan_find(&srv.shard_channels, c->argv[1]);
    if (ch) {
        for (int i = 0; i < ch->n; i++)
            deliver(ch->clients[i], "smessage", NULL, c->argv[1], c->argv[2]);
        receivers = ch->n;
    }
    reply_int(c, receivers);
}

/* CHANNELS / SHARDCHANNELS [pattern] */
static void pubsub_channels(kv_client *c, dict *d)
{
    size_t h = reply_defer(c);
    long long n = 0;
    dict_iter it;
    dict_iter_init(&it, d);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        kv_chan *ch = (kv_chan *)(void *)dn;
        if (c->argc == 3 && !kv_glob_match(c->argv[2].p, c->argv[2].len, ch->name, dn->aux, 0))
            continue;
        reply_bulk(c, ch->name, dn->aux);
        n++;
    }
    dict_iter_end(&it);
    reply_defer_array(c, h, n);
}

/* NUMSUB / SHARDNUMSUB [channel ...] */
static void pubsub_numsub(kv_client *c, dict *d)
{
    reply_array(c, 2ll * (c->argc - 2));
    for (int i = 2; i < c->argc; i++) {
        kv_chan *ch = chan_find(d, c->argv[i]);
        reply_bulk_str(c, c->argv[i]);
        reply_int(c, ch ? ch->n : 0);
    }
}

static const char *const pubsub_help[] = {
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
};

/* PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT |
 * SHARDCHANNELS [pattern] | SHARDNUMSUB [channel ...] | HELP */
void pubsub_command(kv_client *c)
{
    bk_str sub = c->argv[1];
    if (BK_STR_IEQ(sub, "channels") && c->argc <= 3) {
        pubsub_channels(c, &srv.channels);
    } else if (BK_STR_IEQ(sub, "shardchannels") && c->argc <= 3) {
        pubsub_channels(c, &srv.shard_channels);
    } else if (BK_STR_IEQ(sub, "numsub")) {
        pubsub_numsub(c, &srv.channels);
    } else if (BK_STR_IEQ(sub, "shardnumsub")) {
        pubsub_numsub(c, &srv.shard_channels);
    } else if (BK_STR_IEQ(sub, "numpat") && c->argc == 2) {
        reply_int(c, (long long)dict_size(&srv.patterns));
    } else if (BK_STR_IEQ(sub, "help") && c->argc == 2) {
        reply_array(c, (long long)BK_ARRAY_LEN(pubsub_help));
        for (size_t i = 0; i < BK_ARRAY_LEN(pubsub_help); i++)
            reply_simple(c, pubsub_help[i]);
    } else if (BK_STR_IEQ(sub, "numpat") || BK_STR_IEQ(sub, "help")) {
        reply_errorf(c, "ERR wrong number of arguments for 'pubsub|%s' command",
                     BK_STR_IEQ(sub, "numpat") ? "numpat" : "help");
    } else if (BK_STR_IEQ(sub, "channels") || BK_STR_IEQ(sub, "shardchannels")) {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                        "PUBSUB HELP.", (int)sub.len, sub.p);
    } else {
        reply_errorf(c, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
                     (int)BK_MIN(sub.len, (size_t)128), sub.p);
    }
}
