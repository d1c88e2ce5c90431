#include "kv/notify.h"

#include "kv/mem.h"
#include "kv/pubsub.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Letter of each class, in the order Redis prints them when not all of A
 * is set. */
static const struct {
    char letter;
    int flag;
} classes[] = {
    { 'g', NOTIFY_GENERIC }, { '$', NOTIFY_STRING }, { 'l', NOTIFY_LIST },
    { 's', NOTIFY_SET },     { 'h', NOTIFY_HASH },   { 'z', NOTIFY_ZSET },
    { 'x', NOTIFY_EXPIRED }, { 'e', NOTIFY_EVICTED }, { 't', NOTIFY_STREAM },
    { 'd', NOTIFY_MODULE },  { 'n', NOTIFY_NEW },
};

int kv_notify_parse(const char *s, size_t len)
{
    int flags = 0;
    for (size_t i = 0; i < len; i++) {
        int f = 0;
        switch (s[i]) {
        case 'A': f = NOTIFY_ALL; break;
        case 'K': f = NOTIFY_KEYSPACE; break;
        case 'E': f = NOTIFY_KEYEVENT; break;
        case 'm': f = NOTIFY_KEY_MISS; break;
        default:
            for (size_t k = 0; k < BK_ARRAY_LEN(classes); k++)
                if (classes[k].letter == s[i])
                    f = classes[k].flag;
            if (!f)
                return -1;
        }
        flags |= f;
    }
    return flags;
}

void kv_notify_format(int flags, char *out, size_t n)
{
    char s[32];
    size_t k = 0;
    if ((flags & NOTIFY_ALL) == NOTIFY_ALL) {
        /* Redis prints A alone here, n included: "An" reads back "A" */
        s[k++] = 'A';
    } else {
        for (size_t i = 0; i < BK_ARRAY_LEN(classes); i++)
            if (flags & classes[i].flag)
                s[k++] = classes[i].letter;
    }
    if (flags & NOTIFY_KEYSPACE)
        s[k++] = 'K';
    if (flags & NOTIFY_KEYEVENT)
        s[k++] = 'E';
    if (flags & NOTIFY_KEY_MISS)
        s[k++] = 'm';
    s[k] = '\0';
    snprintf(out, n, "%s", s);
}

/* "__keyspace@<db>__:" + suffix into a buffer (stack when it fits). */
static bk_str channel_name(char *small, size_t cap, char **heap, const char *kind, int dbid,
                        bk_str suffix)
{
    char head[48];
    int hl = snprintf(head, sizeof head, "__%s@%d__:", kind, dbid);
    size_t len = (size_t)hl + suffix.len;
    char *p = small;
    if (len > cap)
        p = *heap = kv_malloc(len);
    memcpy(p, head, (size_t)hl);
    memcpy(p + hl, suffix.p, suffix.len);
    return (bk_str){ p, len };
}

void kv_notify_publish(kv_db *db, int cls, const char *event, bk_str key)
{
    int flags = srv.notify_flags;
    bk_str ev = { event, strlen(event) };
    char small[256];
    if (flags & NOTIFY_KEYSPACE) {
        char *heap = NULL;
        bk_str ch = channel_name(small, sizeof small, &heap, "keyspace", db->id, key);
        pubsub_publish(ch, ev);
        kv_free(heap);
    }
    if (flags & NOTIFY_KEYEVENT) {
        char *heap = NULL;
        bk_str ch = channel_name(small, sizeof small, &heap, "keyevent", db->id, ev);
        pubsub_publish(ch, key);
        kv_free(heap);
    }
}

/* ---- the options of this family (CONFIG SET/GET, the config file) ---- */

static int defaults_done;

/* Redis's defaults; set before the first config line is applied. */
void kv_notify_config_defaults(void)
{
    if (defaults_done)
        return;
    defaults_done = 1;
    srv.slowlog_slower_than = 10000;
    srv.slowlog_max_len = 128;
    srv.latency_threshold = 0;
    srv.latency_tracking = 1;
    srv.latency_pcts[0] = 50;
    srv.latency_pcts[1] = 99;
    srv.latency_pcts[2] = 99.9;
    srv.nlatency_pcts = 3;
    srv.obuf_replica = (struct kv_obuf_limit){ 256ull << 20, 64ull << 20, 60 };
    srv.obuf_pubsub = (struct kv_obuf_limit){ 32ull << 20, 8ull << 20, 60 };
}

static void update_timing(void)
{
    /* A CMD_FAST call can take a few microseconds, never milliseconds:
     * below this threshold every call must be timed to be logged. */
    srv.time_every_call = (srv.slowlog_slower_than >= 0 && srv.slowlog_slower_than < 1000) ||
                          srv.latency_threshold > 0;
}

/* Redis memory units (k 1000, kb 1024, m, mb, g, gb), no sign. */
static int parse_mem(const char *s, uint64_t *out)
{
    size_t n = strlen(s), i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    uint64_t v;
    if (i == 0 || num_parse_u64(s, i, UINT64_MAX, &v) < 0)
        return -1;
    static const struct {
        const char *u;
        uint64_t mul;
    } units[] = {
        { "", 1 },         { "b", 1 },           { "k", 1000 },
        { "kb", 1024 },    { "m", 1000000 },     { "mb", 1024 * 1024 },
        { "g", 1000000000ull }, { "gb", 1024ull * 1024 * 1024 },
    };
    for (size_t k = 0; k < BK_ARRAY_LEN(units); k++) {
        if (strcasecmp(s + i, units[k].u) == 0) {
            if (v > UINT64_MAX / units[k].mul)
                return -1;
            *out = v * units[k].mul;
            return 0;
        }
    }
    return -1;
}

/* client-output-buffer-limit <class> <hard> <soft> <secs> [...]: all
 * checked before any is applied, with Redis's messages. */
static int set_obuf(int argc, char **argv, char *err, size_t errlen)
{
    if (argc == 0 || argc % 4) {
        snprintf(err, errlen, "Wrong number of arguments in buffer limit configuration.");
        return -1;
    }
    struct kv_obuf_limit lim[3] = {
        { srv.cfg.obuf_hard, srv.cfg.obuf_soft, srv.cfg.obuf_soft_secs },
        srv.obuf_replica,
        srv.obuf_pubsub,
    };
    for (int i = 0; i < argc; i += 4) {
        int cls;
        if (strcasecmp(argv[i], "normal") == 0)
            cls = 0;
        else if (strcasecmp(argv[i], "replica") == 0 || strcasecmp(argv[i], "slave") == 0)
            cls = 1;
        else if (strcasecmp(argv[i], "pubsub") == 0)
            cls = 2;
        else {
            snprintf(err, errlen, "Invalid client class specified in buffer limit configuration.");
            return -1;
        }
        long long secs;
        if (parse_mem(argv[i + 1], &lim[cls].hard) < 0 ||
            parse_mem(argv[i + 2], &lim[cls].soft) < 0 ||
            kv_parse_ll(argv[i + 3], strlen(argv[i + 3]), &secs) < 0 || secs < 0 ||
            secs > INT_MAX) { /* Redis's bound; secs * 1000 cannot overflow */
            snprintf(err, errlen, "Error in hard, soft or soft_seconds setting in buffer limit "
                                  "configuration.");
            return -1;
        }
        lim[cls].secs = (uint64_t)secs;
    }
    srv.cfg.obuf_hard = lim[0].hard;
    srv.cfg.obuf_soft = lim[0].soft;
    srv.cfg.obuf_soft_secs = lim[0].secs;
    srv.obuf_replica = lim[1];
    srv.obuf_pubsub = lim[2];
    return 0;
}

static int set_ll(const char *v, long long min, long long *out, char *err, size_t errlen)
{
    long long n;
    if (kv_parse_ll(v, strlen(v), &n) < 0) {
        snprintf(err, errlen, "argument couldn't be parsed into an integer");
        return -1;
    }
    if (n < min) {
        snprintf(err, errlen, "argument must be between %lld and 9223372036854775807 inclusive",
                 min);
        return -1;
    }
    *out = n;
    return 0;
}

/* latency-tracking-info-percentiles: doubles in [0, 100], from one
 * space-separated value (CONFIG SET) or several (a config file line). */
static int set_percentiles(int argc, char **argv, char *err, size_t errlen)
{
    double v[BK_ARRAY_LEN(srv.latency_pcts)];
    int n = 0;
    for (int i = 0; i < argc; i++) {
        for (const char *p = argv[i]; *p;) {
            while (*p == ' ')
                p++;
            if (!*p)
                break;
            size_t len = strcspn(p, " ");
            double d;
            if (n == (int)BK_ARRAY_LEN(v) || kv_parse_double(p, len, &d) < 0) {
                snprintf(err, errlen, "Invalid latency-tracking-info-percentiles parameters");
                return -1;
            }
            if (d < 0 || d > 100) {
                snprintf(err, errlen, "latency-tracking-info-percentiles parameters should sit "
                                      "between [0.0,100.0]");
                return -1;
            }
            v[n++] = d;
            p += len;
        }
    }
    memcpy(srv.latency_pcts, v, (size_t)n * sizeof *v);
    srv.nlatency_pcts = n;
    return 0;
}

int kv_notify_config_set(const char *name, int argc, char **argv, char *err, size_t errlen)
{
    kv_notify_config_defaults();
    int rc;
    if (strcasecmp(name, "client-output-buffer-limit") == 0)
        return set_obuf(argc, argv, err, errlen);
    if (strcasecmp(name, "latency-tracking-info-percentiles") == 0)
        return set_percentiles(argc, argv, err, errlen);
    if (strcasecmp(name, "latency-tracking") == 0) {
        if (argc != 1 || (strcasecmp(argv[0], "yes") && strcasecmp(argv[0], "no"))) {
            snprintf(err, errlen, "argument must be 'yes' or 'no'");
            return -1;
        }
        srv.latency_tracking = strcasecmp(argv[0], "yes") == 0;
        return 0;
    }
    if (strcasecmp(name, "notify-keyspace-events") != 0 &&
        strcasecmp(name, "slowlog-log-slower-than") != 0 &&
        strcasecmp(name, "slowlog-max-len") != 0 &&
        strcasecmp(name, "latency-monitor-threshold") != 0)
        return 1;
    if (argc != 1) {
        snprintf(err, errlen, "wrong number of arguments");
        return -1;
    }
    if (strcasecmp(name, "notify-keyspace-events") == 0) {
        int flags = kv_notify_parse(argv[0], strlen(argv[0]));
        if (flags < 0) {
            snprintf(err, errlen, "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.");
            return -1;
        }
        srv.notify_flags = flags;
        return 0;
    }
    if (strcasecmp(name, "slowlog-log-slower-than") == 0)
        rc = set_ll(argv[0], -1, &srv.slowlog_slower_than, err, errlen);
    else if (strcasecmp(name, "slowlog-max-len") == 0)
        rc = set_ll(argv[0], 0, &srv.slowlog_max_len, err, errlen);
    else
        rc = set_ll(argv[0], 0, &srv.latency_threshold, err, errlen);
    update_timing();
    return rc;
}

void kv_notify_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                          void *ud)
{
    kv_notify_config_defaults();
    char v[256];
    static const char *names[] = { "notify-keyspace-events", "slowlog-log-slower-than",
                                   "slowlog-max-len", "latency-monitor-threshold",
                                   "client-output-buffer-limit", "latency-tracking",
                                   "latency-tracking-info-percentiles" };
    for (size_t i = 0; i < BK_ARRAY_LEN(names); i++) {
        if (!kv_glob_match(pattern.p, pattern.len, names[i], strlen(names[i]), 1))
            continue;
        switch (i) {
        case 0: kv_notify_format(srv.notify_flags, v, sizeof v); break;
        case 1: snprintf(v, sizeof v, "%lld", srv.slowlog_slower_than); break;
        case 2: snprintf(v, sizeof v, "%lld", srv.slowlog_max_len); break;
        case 3: snprintf(v, sizeof v, "%lld", srv.latency_threshold); break;
        case 5: snprintf(v, sizeof v, "%s", srv.latency_tracking ? "yes" : "no"); break;
        case 6: {
            size_t k = 0;
            v[0] = '\0';
            for (int j = 0; j < srv.nlatency_pcts && k < sizeof v; j++)
                k += (size_t)snprintf(v + k, sizeof v - k, "%s%g", j ? " " : "",
                                      srv.latency_pcts[j]);
            break;
        }
        case 4:
            snprintf(v, sizeof v, "normal %llu %llu %llu slave %llu %llu %llu pubsub %llu %llu %llu",
                     (unsigned long long)srv.cfg.obuf_hard, (unsigned long long)srv.cfg.obuf_soft,
                     (unsigned long long)srv.cfg.obuf_soft_secs,
                     (unsigned long long)srv.obuf_replica.hard,
                     (unsigned long long)srv.obuf_replica.soft,
                     (unsigned long long)srv.obuf_replica.secs,
                     (unsigned long long)srv.obuf_pubsub.hard,
                     (unsigned long long)srv.obuf_pubsub.soft,
                     (unsigned long long)srv.obuf_pubsub.secs);
            break;
        }
        fn(ud, names[i], v);
    }
}
