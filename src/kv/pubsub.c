#include "kv/pubsub.h"

#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

static str chan_key(const dict_node *n)
{
    const kv_chan *ch = (const kv_chan *)(const void *)n;
    return (str){ ch->name, n->aux };
}

void pubsub_init(void)
{
    dict_init(&srv.channels, chan_key);
    dict_init(&srv.patterns, chan_key);
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
}

int pubsub_allowed_when_subscribed(const kv_cmd *cmd)
{
    return cmd->proc == subscribe_command || cmd->proc == unsubscribe_command ||
           cmd->proc == psubscribe_command || cmd->proc == punsubscribe_command ||
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

static kv_chan *chan_find(dict *d, str name)
{
    return (kv_chan *)(void *)dict_find(d, name.p, name.len, dict_hash32(name.p, name.len));
}

static kv_subs *subs_of(kv_client *c)
{
    if (!c->subs)
        c->subs = kv_calloc(sizeof *c->subs);
    return c->subs;
}

/* Subscribes c to name in d (channels or patterns). Returns 1 when new. */
static int subscribe(kv_client *c, dict *d, int pattern, str name)
{
    kv_subs *s = subs_of(c);
    kv_chan *ch = chan_find(d, name);
    if (ch) {
        kv_chan **mine = pattern ? s->pat : s->ch;
        int n = pattern ? s->npat : s->nch;
        for (int i = 0; i < n; i++)
            if (mine[i] == ch)
                return 0;
    } else {
        ch = kv_calloc(sizeof *ch + name.len + 1);
        ch->node.aux = (uint32_t)name.len;
        ch->node.hash = dict_hash32(name.p, name.len);
        memcpy(ch->name, name.p, name.len);
        dict_add(d, &ch->node);
    }
    push_ptr((void ***)&ch->clients, &ch->n, &ch->cap, c);
    if (pattern)
        push_ptr((void ***)&s->pat, &s->npat, &s->patcap, ch);
    else
        push_ptr((void ***)&s->ch, &s->nch, &s->chcap, ch);
    return 1;
}

/* Drops c's subscription to ch (which c holds). */
static void unsubscribe(kv_client *c, dict *d, int pattern, kv_chan *ch)
{
    kv_subs *s = c->subs;
    if (pattern)
        remove_ptr((void **)s->pat, &s->npat, ch);
    else
        remove_ptr((void **)s->ch, &s->nch, ch);
    /* Order among a channel's subscribers does not matter: swap-remove. */
    for (int i = 0; i < ch->n; i++) {
        if (ch->clients[i] == c) {
            ch->clients[i] = ch->clients[--ch->n];
            break;
        }
    }
    if (ch->n == 0) {
        dict_unlink_node(d, &ch->node);
        free_chan(&ch->node, NULL);
    }
}

void pubsub_unsubscribe_all(kv_client *c)
{
    kv_subs *s = c->subs;
    if (!s)
        return;
    while (s->nch)
        unsubscribe(c, &srv.channels, 0, s->ch[s->nch - 1]);
    while (s->npat)
        unsubscribe(c, &srv.patterns, 1, s->pat[s->npat - 1]);
    kv_free(s->ch);
    kv_free(s->pat);
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

static void reply_subscription(kv_client *c, const char *kind, str name, int null_name)
{
    push_header(c, 3);
    reply_bulk_cstr(c, kind);
    if (null_name)
        reply_null(c);
    else
        reply_bulk_str(c, name);
    reply_int(c, pubsub_count(c));
}

static void subscribe_generic(kv_client *c, int pattern)
{
    dict *d = pattern ? &srv.patterns : &srv.channels;
    for (int i = 1; i < c->argc; i++) {
        subscribe(c, d, pattern, c->argv[i]);
        reply_subscription(c, pattern ? "psubscribe" : "subscribe", c->argv[i], 0);
    }
}

static void unsubscribe_generic(kv_client *c, int pattern)
{
    dict *d = pattern ? &srv.patterns : &srv.channels;
    const char *kind = pattern ? "punsubscribe" : "unsubscribe";
    if (c->argc == 1) {
        /* All of them, oldest first; one reply even when there were none. */
        kv_subs *s = c->subs;
        int n = s ? (pattern ? s->npat : s->nch) : 0;
        if (n == 0) {
            reply_subscription(c, kind, STR_NULL, 1);
            return;
        }
        while (pattern ? s->npat : s->nch) {
            kv_chan *ch = pattern ? s->pat[0] : s->ch[0];
            /* the name goes into the reply after the channel may be freed */
            char small[128];
            char *copy = ch->node.aux <= sizeof small ? small : kv_malloc(ch->node.aux);
            str name = { copy, ch->node.aux };
            memcpy(copy, ch->name, ch->node.aux);
            unsubscribe(c, d, pattern, ch);
            reply_subscription(c, kind, name, 0);
            if (copy != small)
                kv_free(copy);
        }
        return;
    }
    for (int i = 1; i < c->argc; i++) {
        kv_chan *ch = chan_find(d, c->argv[i]);
        if (ch && c->subs) {
            kv_chan **mine = pattern ? c->subs->pat : c->subs->ch;
            int n = pattern ? c->subs->npat : c->subs->nch;
            for (int k = 0; k < n; k++) {
                if (mine[k] == ch) {
                    unsubscribe(c, d, pattern, ch);
                    break;
                }
            }
        }
        reply_subscription(c, kind, c->argv[i], 0);
    }
}

void subscribe_command(kv_client *c) { subscribe_generic(c, 0); }
void psubscribe_command(kv_client *c) { subscribe_generic(c, 1); }
void unsubscribe_command(kv_client *c) { unsubscribe_generic(c, 0); }
void punsubscribe_command(kv_client *c) { unsubscribe_generic(c, 1); }

static void deliver(kv_client *to, const kv_chan *pattern, str channel, str msg)
{
    push_header(to, pattern ? 4 : 3);
    if (pattern) {
        reply_bulk(to, "pmessage", 8);
        reply_bulk(to, pattern->name, pattern->node.aux);
    } else {
        reply_bulk(to, "message", 7);
    }
    reply_bulk_str(to, channel);
    reply_bulk_str(to, msg);
    kv_client_output_added(to);
}

void publish_command(kv_client *c)
{
    str channel = c->argv[1], msg = c->argv[2];
    long long receivers = 0;
    kv_chan *ch = chan_find(&srv.channels, channel);
    if (ch) {
        for (int i = 0; i < ch->n; i++)
            deliver(ch->clients[i], NULL, channel, msg);
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
                deliver(p->clients[i], p, channel, msg);
            receivers += p->n;
        }
        dict_iter_end(&it);
    }
    reply_int(c, receivers);
}

/* PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT */
void pubsub_command(kv_client *c)
{
    str sub = c->argv[1];
    if (STR_IEQ(sub, "channels") && c->argc <= 3) {
        size_t h = reply_defer(c);
        long long n = 0;
        dict_iter it;
        dict_iter_init(&it, &srv.channels);
        for (dict_node *dn; (dn = dict_iter_next(&it));) {
            kv_chan *ch = (kv_chan *)(void *)dn;
            if (c->argc == 3 &&
                !kv_glob_match(c->argv[2].p, c->argv[2].len, ch->name, dn->aux, 0))
                continue;
            reply_bulk(c, ch->name, dn->aux);
            n++;
        }
        dict_iter_end(&it);
        reply_defer_array(c, h, n);
    } else if (STR_IEQ(sub, "numsub")) {
        reply_array(c, 2ll * (c->argc - 2));
        for (int i = 2; i < c->argc; i++) {
            kv_chan *ch = chan_find(&srv.channels, c->argv[i]);
            reply_bulk_str(c, c->argv[i]);
            reply_int(c, ch ? ch->n : 0);
        }
    } else if (STR_IEQ(sub, "numpat") && c->argc == 2) {
        reply_int(c, (long long)dict_size(&srv.patterns));
    } else if (STR_IEQ(sub, "channels") || STR_IEQ(sub, "numpat")) {
        reply_errorf(c, "ERR wrong number of arguments for 'pubsub|%s' command",
                     STR_IEQ(sub, "numpat") ? "numpat" : "channels");
    } else {
        reply_errorf(c, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
                     (int)MIN(sub.len, (size_t)128), sub.p);
    }
}
