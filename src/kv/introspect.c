/* Introspection: COMMAND, INFO, MEMORY, SLOWLOG and LATENCY (split out of
 * t_server.c; CLIENT and CONFIG stay there). */
#include "kv/cmdinfo.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/notify.h"
#include "kv/pubsub.h"
#include "kv/rdb.h"
#include "kv/reply.h"
#include "kv/replication.h"
#include "kv/types.h"
#include "kv/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

static void reply_lines(kv_client *c, const char *const *lines, size_t n);

static void subcommand_unknown(kv_client *c, const char *cmd)
{
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)BK_MIN(c->argv[1].len, 128),
                 c->argv[1].p, cmd);
}

/* ---- COMMAND ---- */

static const struct {
    unsigned flag;
    const char *name;
} flag_names[] = {
    { CMD_WRITE, "write" },     { CMD_READONLY, "readonly" }, { CMD_DENYOOM, "denyoom" },
    { CMD_ADMIN, "admin" },     { CMD_PUBSUB, "pubsub" },     { CMD_NOSCRIPT, "noscript" },
    { CMD_LOADING, "loading" }, { CMD_STALE, "stale" },       { CMD_FAST, "fast" },
    { CMD_NO_AUTH, "no_auth" }, { CMD_ALLOW_BUSY, "allow_busy" },
};

/* COMMAND INFO of a command Redis does not have: from the table row. */
static void reply_command_info_row(kv_client *c, const kv_cmd *cmd)
{
    reply_array(c, 10);
    reply_bulk_cstr(c, cmd->name);
    reply_int(c, cmd->arity);
    int nf = 0;
    for (size_t i = 0; i < BK_ARRAY_LEN(flag_names); i++)
        nf += (cmd->flags & flag_names[i].flag) != 0;
    reply_set(c, nf);
    for (size_t i = 0; i < BK_ARRAY_LEN(flag_names); i++)
        if (cmd->flags & flag_names[i].flag)
            reply_simple(c, flag_names[i].name);
    reply_int(c, cmd->first_key);
    reply_int(c, cmd->last_key);
    reply_int(c, cmd->key_step);
    /* ACL categories */
    const char *acl = cmd->acl ? cmd->acl : "";
    int na = 0;
    for (const char *p = acl; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        na++;
        while (*p && *p != ' ')
            p++;
    }
    reply_set(c, na);
    for (const char *p = acl; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *s = p;
        while (*p && *p != ' ')
            p++;
        char tmp[64];
        size_t l = BK_MIN((size_t)(p - s), sizeof tmp - 1);
        memcpy(tmp, s, l);
        tmp[l] = '\0';
        reply_simple(c, tmp);
    }
    reply_empty_array(c); /* tips */
    if (cmd->first_key > 0) {
        /* one key spec: range from first to last */
        reply_array(c, 1);
        reply_map(c, 3);
        reply_bulk_cstr(c, "flags");
        reply_set(c, 1);
        reply_simple(c, (cmd->flags & CMD_WRITE) ? "RW" : "RO");
        reply_bulk_cstr(c, "begin_search");
        reply_map(c, 2);
        reply_bulk_cstr(c, "type");
        reply_bulk_cstr(c, "index");
        reply_bulk_cstr(c, "spec");
        reply_map(c, 1);
        reply_bulk_cstr(c, "index");
        reply_int(c, cmd->first_key);
        reply_bulk_cstr(c, "find_keys");
        reply_map(c, 2);
        reply_bulk_cstr(c, "type");
        reply_bulk_cstr(c, "range");
        reply_bulk_cstr(c, "spec");
        reply_map(c, 3);
        reply_bulk_cstr(c, "lastkey");
        reply_int(c, cmd->last_key < 0 ? cmd->last_key : cmd->last_key - cmd->first_key);
        reply_bulk_cstr(c, "keystep");
        reply_int(c, cmd->key_step);
        reply_bulk_cstr(c, "limit");
        reply_int(c, 0);
    } else {
        reply_empty_array(c);
    }
    reply_empty_array(c); /* subcommands */
}

/* COMMAND DOCS of a command Redis does not have: from the table row. */
static void reply_command_docs_row(kv_client *c, const kv_cmd *cmd)
{
    reply_bulk_cstr(c, cmd->name);
    reply_map(c, 4);
    reply_bulk_cstr(c, "summary");
    reply_bulk_cstr(c, cmd->summary ? cmd->summary : "");
    reply_bulk_cstr(c, "since");
    reply_bulk_cstr(c, cmd->since ? cmd->since : "1.0.0");
    reply_bulk_cstr(c, "group");
    reply_bulk_cstr(c, cmd->group ? cmd->group : "generic");
    reply_bulk_cstr(c, "complexity");
    reply_bulk_cstr(c, cmd->complexity ? cmd->complexity : "O(1)");
}

const kv_cmdinfo *kv_cmdinfo_find(const char *name, size_t len)
{
    size_t lo = 0, hi = kv_cmdinfo_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *n = kv_cmdinfo_table[mid].name;
        int cmp = strncmp(n, name, len);
        if (cmp == 0 && n[len] != '\0')
            cmp = 1;
        if (cmp == 0)
            return &kv_cmdinfo_table[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A reader over RESP3 bytes of the cmdinfo table (trusted, well formed). */
typedef struct {
    const char *p, *end;
} rcur;

static long long cmdinfo_subs(const kv_cmdinfo *ci, rcur *r);

/* Reads an element's header line: its type and the number on it (length,
 * count, integer). */
static char rcur_head(rcur *r, long long *n)
{
    char t = *r->p++;
    const char *eol = memchr(r->p, '\r', (size_t)(r->end - r->p));
    *n = 0;
    if (t != '+' && t != '_')
        kv_parse_ll(r->p, (size_t)(eol - r->p), n);
    else if (t == '+')
        *n = eol - r->p;
    r->p = eol + 2;
    return t;
}

static bk_str rcur_string(rcur *r)
{
    long long n;
    const char *start = r->p + 1;
    char t = rcur_head(r, &n);
    if (t == '$') {
        bk_str s = { r->p, (size_t)n };
        r->p += n + 2;
        return s;
    }
    return (bk_str){ start, t == '+' ? (size_t)n : 0 };
}

static void rcur_skip(rcur *r)
{
    long long n;
    char t = rcur_head(r, &n);
    if (t == '$')
        r->p += n + 2;
    else if (t == '*' || t == '~')
        while (n--)
            rcur_skip(r);
    else if (t == '%')
        for (n *= 2; n--;)
            rcur_skip(r);
}

/* Copies one element as RESP2: sets and maps become arrays. */
static void rcur_to_resp2(rcur *r, bk_buf *out)
{
    const char *start = r->p;
    long long n;
    char t = rcur_head(r, &n);
    char h[32];
    switch (t) {
    case '~':
    case '%': {
        long long k = t == '%' ? 2 * n : n;
        int l = snprintf(h, sizeof h, "*%lld\r\n", k);
        buf_append(out, h, (size_t)l);
        while (k--)
            rcur_to_resp2(r, out);
        return;
    }
    case '*':
        buf_append(out, start, (size_t)(r->p - start));
        while (n--)
            rcur_to_resp2(r, out);
        return;
    case '$':
        r->p += n + 2;
        break;
    case '_':
        buf_append(out, "$-1\r\n", 5);
        return;
    }
    buf_append(out, start, (size_t)(r->p - start));
}

/* Sends RESP3 bytes from the cmdinfo table in the client's protocol. */
static void reply_resp3(kv_client *c, const char *p, size_t len)
{
    if (c->resp >= 3) {
        reply_raw(c, p, len);
        return;
    }
    bk_buf b = { 0 };
    rcur r = { p, p + len };
    rcur_to_resp2(&r, &b);
    reply_raw(c, b.data, b.len);
    buf_free(&b);
}

static void reply_command_docs(kv_client *c, const kv_cmd *cmd)
{
    const kv_cmdinfo *ci = kv_cmdinfo_find(cmd->name, strlen(cmd->name));
    if (!ci) {
        reply_command_docs_row(c, cmd);
        return;
    }
    reply_bulk_cstr(c, cmd->name);
    reply_resp3(c, ci->docs, ci->docs_len);
}

static void reply_command_info(kv_client *c, const kv_cmd *cmd)
{
    const kv_cmdinfo *ci = kv_cmdinfo_find(cmd->name, strlen(cmd->name));
    if (!ci) {
        reply_command_info_row(c, cmd);
        return;
    }
    reply_resp3(c, ci->resp3, ci->len);
}

/* ---- keys of a command line, from its key specs ---- */

enum { BS_INDEX, BS_KEYWORD, BS_UNKNOWN };
enum { FK_RANGE, FK_KEYNUM, FK_UNKNOWN };

typedef struct {
    rcur flags; /* the spec's flags set, for GETKEYSANDFLAGS */
    int bs, fk;
    long long index, startfrom;
    bk_str keyword;
    long long a, b, d; /* range: lastkey keystep limit; keynum: keynumidx firstkey keystep */
} keyspec;

/* Parses the spec map at r (after its header) of n pairs. */
static void parse_spec_map(rcur *r, long long n, keyspec *ks)
{
    while (n--) {
        bk_str k = rcur_string(r);
        if (BK_STR_IEQ(k, "flags")) {
            ks->flags = *r;
            rcur_skip(r);
        } else if (BK_STR_IEQ(k, "begin_search") || BK_STR_IEQ(k, "find_keys")) {
            int begin = BK_STR_IEQ(k, "begin_search");
            long long m, sn;
            rcur_head(r, &m);
            while (m--) {
                bk_str f = rcur_string(r);
                if (BK_STR_IEQ(f, "type")) {
                    bk_str t = rcur_string(r);
                    if (begin)
                        ks->bs = BK_STR_IEQ(t, "index") ? BS_INDEX
                                 : BK_STR_IEQ(t, "keyword") ? BS_KEYWORD : BS_UNKNOWN;
                    else
                        ks->fk = BK_STR_IEQ(t, "range") ? FK_RANGE
                                 : BK_STR_IEQ(t, "keynum") ? FK_KEYNUM : FK_UNKNOWN;
                } else if (BK_STR_IEQ(f, "spec")) {
                    rcur_head(r, &sn);
                    while (sn--) {
                        bk_str name = rcur_string(r);
                        long long v = 0;
                        if (BK_STR_IEQ(name, "keyword")) {
                            ks->keyword = rcur_string(r);
                            continue;
                        }
                        if (*r->p == ':')
                            rcur_head(r, &v);
                        else
                            rcur_skip(r);
                        if (BK_STR_IEQ(name, "index"))
                            ks->index = v;
                        else if (BK_STR_IEQ(name, "startfrom"))
                            ks->startfrom = v;
                        else if (BK_STR_IEQ(name, "lastkey") || BK_STR_IEQ(name, "keynumidx"))
                            ks->a = v;
                        else if (BK_STR_IEQ(name, "keystep"))
                            ks->fk == FK_KEYNUM ? (void)(ks->d = v) : (void)(ks->b = v);
                        else if (BK_STR_IEQ(name, "limit") || BK_STR_IEQ(name, "firstkey"))
                            ks->fk == FK_KEYNUM ? (void)(ks->b = v) : (void)(ks->d = v);
                    }
                } else {
                    rcur_skip(r);
                }
            }
        } else {
            rcur_skip(r);
        }
    }
}

typedef struct {
    int *pos;       /* argv index of each key */
    rcur *flags;    /* its spec's flags */
    int n, cap;
} keylist;

static void keylist_add(keylist *kl, int pos, rcur flags)
{
    if (kl->n == kl->cap) {
        kl->cap = kl->cap ? kl->cap * 2 : 16;
        kl->pos = kv_realloc(kl->pos, (size_t)kl->cap * sizeof *kl->pos);
        kl->flags = kv_realloc(kl->flags, (size_t)kl->cap * sizeof *kl->flags);
    }
    kl->pos[kl->n] = pos;
    kl->flags[kl->n++] = flags;
}

/* Redis's reading of key specs: the keys of argv[0..argc) per the specs
 * array at r. Returns -1 when the arguments do not fit a spec. */
static int keys_from_specs(rcur *r, int argc, const bk_str *argv, keylist *kl)
{
    long long nspecs;
    rcur_head(r, &nspecs);
    for (long long s = 0; s < nspecs; s++) {
        long long m;
        rcur_head(r, &m);
        keyspec ks = { .bs = BS_UNKNOWN, .fk = FK_UNKNOWN };
        parse_spec_map(r, m, &ks);
        long long first;
        if (ks.bs == BS_INDEX) {
            first = ks.index;
        } else if (ks.bs == BS_KEYWORD) {
            long long start = ks.startfrom >= 0 ? ks.startfrom : argc + ks.startfrom;
            long long end = ks.startfrom >= 0 ? argc - 1 : 0, step = ks.startfrom >= 0 ? 1 : -1;
            first = -1;
            for (long long i = start; i >= 0 && i < argc; i += step) {
                /* the spec's keyword is upper case (STREAMS): compare
                 * without case on both sides */
                if (i >= 1 && argv[i].len == ks.keyword.len &&
                    strncasecmp(argv[i].p, ks.keyword.p, ks.keyword.len) == 0) {
                    first = i + 1;
                    break;
                }
                if (i == end)
                    break;
            }
            if (first < 0)
                continue;
        } else {
            continue;
        }
        long long last, step;
        if (ks.fk == FK_RANGE) {
            step = ks.b > 0 ? ks.b : 1;
            if (ks.a >= 0)
                last = first + ks.a;
            else if (!ks.d)
                last = argc + ks.a;
            else
                last = first + ((argc - first) / ks.d + ks.a);
        } else if (ks.fk == FK_KEYNUM) {
            long long numkeys;
            if (first + ks.a >= argc)
                return -1;
            bk_str ns = argv[first + ks.a];
            if (kv_parse_ll(ns.p, ns.len, &numkeys) < 0 || numkeys < 0)
                return -1;
            first += ks.b;
            if (numkeys > argc) /* bounds before arithmetic */
                return -1;
            last = first + numkeys - 1;
            step = ks.d > 0 ? ks.d : 1;
        } else {
            continue;
        }
        for (long long i = first; i <= last; i += step) {
            if (i >= argc || i < 1)
                return -1;
            keylist_add(kl, (int)i, ks.flags);
        }
    }
    return 0;
}

/* What GETKEYS needs of argv's command (its subcommand's when it has one):
 * arity, key specs, and whether keys are optional. */
typedef struct {
    long long arity;
    rcur specs;
    int nspecs;
    int no_mandatory_keys;
    int all_not_key; /* every spec is flagged not_key (shard channels) */
    const kv_cmd *row; /* a command Redis does not have: its table row */
} cmd_keys_info;

/* Reads name, arity, flags and key specs of one COMMAND INFO entry at r
 * (leaves r at its subcommands). */
static void read_entry(rcur *r, cmd_keys_info *ki)
{
    long long n;
    rcur_head(r, &n);
    rcur_skip(r);
    rcur_head(r, &ki->arity);
    long long nflags;
    rcur_head(r, &nflags);
    ki->no_mandatory_keys = 0;
    while (nflags--)
        ki->no_mandatory_keys |= BK_STR_IEQ(rcur_string(r), "no_mandatory_keys");
    for (int i = 0; i < 5; i++) /* first last step acl tips */
        rcur_skip(r);
    ki->specs = *r;
    long long nspecs;
    rcur_head(r, &nspecs);
    ki->nspecs = (int)nspecs;
    ki->all_not_key = nspecs > 0;
    for (long long i = 0; i < nspecs; i++) {
        long long m, nf;
        int not_key = 0;
        rcur_head(r, &m);
        while (m--) {
            bk_str k = rcur_string(r);
            if (!BK_STR_IEQ(k, "flags")) {
                rcur_skip(r);
                continue;
            }
            rcur_head(r, &nf);
            while (nf--)
                not_key |= BK_STR_IEQ(rcur_string(r), "not_key");
        }
        ki->all_not_key &= not_key;
    }
    *r = ki->specs;
    rcur_skip(r);
}

static int keys_info_for(const bk_str *argv, int argc, cmd_keys_info *ki)
{
    const kv_cmd *cmd = kv_cmd_lookup(argv[0]);
    if (!cmd)
        return -1;
    const kv_cmdinfo *ci = kv_cmdinfo_find(cmd->name, strlen(cmd->name));
    memset(ki, 0, sizeof *ki);
    if (!ci) {
        ki->row = cmd;
        ki->arity = cmd->arity;
        ki->nspecs = cmd->first_key > 0;
        return 0;
    }
    rcur r = { ci->resp3, ci->resp3 + ci->len };
    read_entry(&r, ki);
    long long nsub;
    rcur_head(&r, &nsub);
    if (nsub == 0 || argc < 2)
        return 0;
    for (long long i = 0; i < nsub; i++) {
        rcur sub = r;
        long long k;
        rcur_head(&r, &k);
        bk_str name = rcur_string(&r);
        const char *bar = memchr(name.p, '|', name.len);
        r = sub;
        if (bar && str_ieq_lit(argv[1], bar + 1, name.len - (size_t)(bar + 1 - name.p))) {
            read_entry(&r, ki);
            return 0;
        }
        rcur_skip(&r);
    }
    return -1; /* an unknown subcommand */
}

static const char empty_set[] = "~0\r\n";

/* Specs with variable_flags or incomplete: Redis works the flags out of
 * the arguments (SET with GET reads the key; without, only writes it); the
 * others drop the markers, as Redis's getkeys procedures report the key's
 * access alone. Returns 1 when it replied. */
static int reply_flags_computed(kv_client *c, const bk_str *argv, int argc, rcur f)
{
    long long n;
    rcur p = f;
    rcur_head(&p, &n);
    int variable = 0;
    for (long long i = 0; i < n; i++) {
        bk_str s = rcur_string(&p);
        variable |= BK_STR_IEQ(s, "variable_flags") || BK_STR_IEQ(s, "incomplete");
    }
    if (!variable)
        return 0;
    const char *flags[4];
    int nf = 0;
    if (BK_STR_IEQ(argv[0], "set")) {
        int get = 0;
        for (int i = 3; i < argc; i++)
            get |= BK_STR_IEQ(argv[i], "get");
        flags[nf++] = get ? "RW" : "OW";
        if (get)
            flags[nf++] = "access";
        flags[nf++] = "update";
    } else {
        p = f;
        rcur_head(&p, &n);
        for (long long i = 0; i < n; i++) {
            bk_str s = rcur_string(&p);
            if (!BK_STR_IEQ(s, "variable_flags") && !BK_STR_IEQ(s, "incomplete"))
                nf++;
        }
        /* table strings are not NUL terminated: copied out for reply_simple */
        p = f;
        rcur_head(&p, &n);
        reply_set(c, nf);
        for (long long i = 0; i < n; i++) {
            bk_str s = rcur_string(&p);
            if (!BK_STR_IEQ(s, "variable_flags") && !BK_STR_IEQ(s, "incomplete")) {
                char tmp[64];
                size_t l = BK_MIN(s.len, sizeof tmp - 1);
                memcpy(tmp, s.p, l);
                tmp[l] = '\0';
                reply_simple(c, tmp);
            }
        }
        return 1;
    }
    reply_set(c, nf);
    for (int i = 0; i < nf; i++)
        reply_simple(c, flags[i]);
    return 1;
}

static void command_getkeys(kv_client *c, int with_flags)
{
    const bk_str *argv = c->argv + 2;
    int argc = c->argc - 2;
    cmd_keys_info ki;
    keylist kl = { 0 };
    if (keys_info_for(argv, argc, &ki) < 0) {
        reply_error(c, "ERR Invalid command specified");
        return;
    }
    if (ki.nspecs == 0 || ki.all_not_key) {
        reply_error(c, "ERR The command has no key arguments");
        return;
    }
    if ((ki.arity > 0 && argc != ki.arity) || argc < -ki.arity) {
        reply_error(c, "ERR Invalid number of arguments specified for command");
        return;
    }
    /* SORT ... STORE and GEORADIUS ... STORE/STOREDIST: keys a key spec
     * alone does not find (Redis's getkeys procedures) */
    const kv_cmd *mk = kv_cmd_lookup(argv[0]);
    int mpos[3];
    int nmk = mk ? kv_movable_keys(mk, argc, argv, mpos) : -1;
    if (nmk >= 0) {
        reply_array(c, nmk);
        for (int i = 0; i < nmk; i++) {
            if (with_flags) /* the source is read, the STORE targets overwritten */
                reply_array(c, 2);
            reply_bulk_str(c, argv[mpos[i]]);
            if (with_flags) {
                reply_set(c, 2);
                reply_simple(c, i == 0 ? "RO" : "OW");
                reply_simple(c, i == 0 ? "access" : "update");
            }
        }
        goto out;
    }
    int rc = 0;
    if (ki.row) {
        const kv_cmd *cmd = ki.row;
        int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
        for (int i = cmd->first_key; i <= last && i < argc;
             i += cmd->key_step > 0 ? cmd->key_step : 1)
            keylist_add(&kl, i, (rcur){ empty_set, empty_set + sizeof empty_set - 1 });
    } else {
        rc = keys_from_specs(&ki.specs, argc, argv, &kl);
    }
    if (rc < 0 || kl.n == 0) {
        if (ki.no_mandatory_keys)
            reply_empty_array(c);
        else
            reply_error(c, "ERR Invalid arguments specified for command");
        goto out;
    }
    reply_array(c, kl.n);
    for (int i = 0; i < kl.n; i++) {
        if (with_flags) {
            reply_array(c, 2);
            reply_bulk_str(c, argv[kl.pos[i]]);
            rcur f = kl.flags[i];
            if (reply_flags_computed(c, argv, argc, f))
                continue;
            if (c->resp >= 3) {
                const char *start = f.p;
                rcur_skip(&f);
                reply_raw(c, start, (size_t)(f.p - start));
            } else {
                bk_buf b = { 0 };
                rcur_to_resp2(&f, &b);
                reply_raw(c, b.data, b.len);
                buf_free(&b);
            }
        } else {
            reply_bulk_str(c, argv[kl.pos[i]]);
        }
    }
out:
    kv_free(kl.pos);
    kv_free(kl.flags);
}

/* COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pattern] */
/* Whether the ACL categories set at r (RESP3, "+@name" items) holds cat. */
static int acl_set_has(rcur r, bk_str cat)
{
    long long n;
    rcur_head(&r, &n);
    while (n--) {
        bk_str s = rcur_string(&r);
        if (s.len == cat.len + 1 && s.p[0] == '@' && str_ieq_lit(cat, s.p + 1, cat.len))
            return 1;
    }
    return 0;
}

/* One COMMAND LIST candidate: a command or subcommand name and, when Redis
 * has it, its COMMAND INFO entry at e. Returns 1 when the filter keeps it. */
static int list_keeps(int mode, bk_str arg, const char *name, size_t len, const rcur *e,
                      const kv_cmd *row)
{
    if (mode == 3)
        return kv_glob_match(arg.p, arg.len, name, len, 1);
    if (mode != 2)
        return 1;
    if (e) {
        rcur r = *e;
        long long n;
        rcur_head(&r, &n);
        for (int i = 0; i < 6; i++) /* name arity flags first last step */
            rcur_skip(&r);
        return acl_set_has(r, arg);
    }
    /* a command Redis does not have: the "@name" words of its row */
    for (const char *p = row->acl ? row->acl : ""; (p = strchr(p, '@'));) {
        p++;
        size_t l = strcspn(p, " ");
        if (l == arg.len && str_ieq_lit(arg, p, l))
            return 1;
        p += l;
    }
    return 0;
}

/* COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pattern]:
 * commands and, like Redis 7.0, their subcommands ("config|get"). */
static void command_list(kv_client *c)
{
    int mode = 0; /* 0 all, 1 module, 2 aclcat, 3 pattern */
    bk_str arg = BK_STR_NULL;
    if (c->argc == 5 && arg_is(c->argv[2], "filterby")) {
        arg = c->argv[4];
        if (arg_is(c->argv[3], "module"))
            mode = 1;
        else if (arg_is(c->argv[3], "aclcat"))
            mode = 2;
        else if (arg_is(c->argv[3], "pattern"))
            mode = 3;
    }
    if (c->argc != 2 && mode == 0) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    size_t h = reply_defer(c);
    long long n = 0;
    for (size_t i = 0; mode != 1 && i < kv_ncommands; i++) {
        const kv_cmd *cmd = &kv_commands[i];
        const kv_cmdinfo *ci = kv_cmdinfo_find(cmd->name, strlen(cmd->name));
        rcur top = ci ? (rcur){ ci->resp3, ci->resp3 + ci->len } : (rcur){ NULL, NULL };
        if (list_keeps(mode, arg, cmd->name, strlen(cmd->name), ci ? &top : NULL, cmd)) {
            reply_bulk_cstr(c, cmd->name);
            n++;
        }
        rcur r;
        long long nsub = ci ? cmdinfo_subs(ci, &r) : 0;
        for (long long k = 0; k < nsub; k++) {
            rcur e = r, q = r;
            long long m;
            rcur_head(&q, &m);
            bk_str name = rcur_string(&q);
            if (list_keeps(mode, arg, name.p, name.len, &e, cmd)) {
                reply_bulk_str(c, name);
                n++;
            }
            rcur_skip(&r);
        }
    }
    reply_defer_array(c, h, n);
}

/* COMMAND INFO / DOCS of "container|sub": its entry in the parent's
 * subcommands (INFO) or in the parent's docs' "subcommands" map (DOCS).
 * Returns 0 when there is none. */
static int find_subcommand(bk_str full, int docs, rcur *out)
{
    const char *bar = memchr(full.p, '|', full.len);
    if (!bar)
        return 0;
    bk_str base = { full.p, (size_t)(bar - full.p) };
    const kv_cmd *cmd = kv_cmd_lookup(base);
    const kv_cmdinfo *ci = cmd ? kv_cmdinfo_find(cmd->name, strlen(cmd->name)) : NULL;
    if (!ci)
        return 0;
    rcur r;
    long long n;
    if (!docs) {
        n = cmdinfo_subs(ci, &r);
        while (n--) {
            rcur e = r, q = r;
            long long m;
            rcur_head(&q, &m);
            bk_str name = rcur_string(&q);
            if (name.len == full.len && str_ieq_lit(full, name.p, name.len)) {
                *out = e;
                return 1;
            }
            rcur_skip(&r);
        }
        return 0;
    }
    r = (rcur){ ci->docs, ci->docs + ci->docs_len };
    rcur_head(&r, &n);
    while (n--) {
        bk_str k = rcur_string(&r);
        if (!BK_STR_IEQ(k, "subcommands")) {
            rcur_skip(&r);
            continue;
        }
        long long m;
        rcur_head(&r, &m);
        while (m--) {
            bk_str name = rcur_string(&r);
            if (name.len == full.len && str_ieq_lit(full, name.p, name.len)) {
                *out = r;
                return 1;
            }
            rcur_skip(&r);
        }
        return 0;
    }
    return 0;
}

/* Replies the element at r (from the cmdinfo table) in the client's protocol. */
static void reply_elem(kv_client *c, rcur r)
{
    const char *start = r.p;
    rcur_skip(&r);
    reply_resp3(c, start, (size_t)(r.p - start));
}

static const char *const command_help[] = {
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
};

static void command_arity_error(kv_client *c)
{
    char name[32];
    size_t n = BK_MIN(c->argv[1].len, sizeof name - 1);
    for (size_t i = 0; i < n; i++)
        name[i] = ascii_lower(c->argv[1].p[i]);
    name[n] = '\0';
    reply_errorf(c, "ERR wrong number of arguments for 'command|%s' command", name);
}

void command_command(kv_client *c)
{
    if (c->argc == 1) {
        reply_array(c, (long long)kv_ncommands);
        for (size_t i = 0; i < kv_ncommands; i++)
            reply_command_info(c, &kv_commands[i]);
        return;
    }
    bk_str sub = c->argv[1];
    if (arg_is(sub, "count")) {
        if (c->argc != 2)
            command_arity_error(c);
        else
            reply_int(c, (long long)kv_ncommands);
    } else if (arg_is(sub, "info")) {
        if (c->argc == 2) {
            reply_array(c, (long long)kv_ncommands);
            for (size_t i = 0; i < kv_ncommands; i++)
                reply_command_info(c, &kv_commands[i]);
            return;
        }
        reply_array(c, c->argc - 2);
        for (int i = 2; i < c->argc; i++) {
            const kv_cmd *cmd = kv_cmd_lookup(c->argv[i]);
            rcur e;
            if (cmd)
                reply_command_info(c, cmd);
            else if (find_subcommand(c->argv[i], 0, &e))
                reply_elem(c, e);
            else
                reply_null(c);
        }
    } else if (arg_is(sub, "docs")) {
        if (c->argc == 2) {
            reply_map(c, (long long)kv_ncommands);
            for (size_t i = 0; i < kv_ncommands; i++)
                reply_command_docs(c, &kv_commands[i]);
            return;
        }
        size_t h = reply_defer(c);
        long long n = 0;
        for (int i = 2; i < c->argc; i++) {
            const kv_cmd *cmd = kv_cmd_lookup(c->argv[i]);
            rcur e;
            if (cmd) {
                reply_command_docs(c, cmd);
                n++;
            } else if (find_subcommand(c->argv[i], 1, &e)) {
                char name[64];
                size_t l = BK_MIN(c->argv[i].len, sizeof name - 1);
                for (size_t k = 0; k < l; k++)
                    name[k] = ascii_lower(c->argv[i].p[k]);
                reply_bulk(c, name, l);
                reply_elem(c, e);
                n++;
            }
        }
        reply_defer_map(c, h, n);
    } else if (arg_is(sub, "list")) {
        command_list(c);
    } else if (arg_is(sub, "getkeys") || arg_is(sub, "getkeysandflags")) {
        if (c->argc < 4)
            command_arity_error(c);
        else
            command_getkeys(c, arg_is(sub, "getkeysandflags"));
    } else if (arg_is(sub, "help")) {
        if (c->argc != 2)
            command_arity_error(c);
        else
            reply_lines(c, command_help, BK_ARRAY_LEN(command_help));
    } else {
        subcommand_unknown(c, "COMMAND");
    }
}

/* ---- SLOWLOG, LATENCY and the latency histograms ---- */

#define SLOWLOG_MAX_ARGC 32
#define SLOWLOG_MAX_STRING 128
#define LATENCY_SAMPLES 160 /* per event, one per second at most */
#define HIST_BUCKETS 40     /* power-of-two microsecond buckets */
#define ERRORSTATS_MAX 128  /* Redis's limit on distinct error codes */

/* One slow command, in one allocation: the entry, its argv, then the
 * bytes of the arguments, address and name. */
typedef struct slowlog_entry {
    long long id;
    int64_t time;      /* unix seconds */
    long long duration; /* microseconds */
    int argc;
    bk_str *argv;
    bk_str addr, name;
} slowlog_entry;

typedef struct latency_event {
    char name[32];
    struct {
        int64_t time;
        uint32_t ms;
    } samples[LATENCY_SAMPLES];
    int next, count;
    uint32_t max;
} latency_event;

struct kv_introspect {
    /* slowlog: a ring of entries, newest at start */
    slowlog_entry **log;
    size_t start, len, cap; /* cap is a power of two */
    long long next_id;
    latency_event *events;
    int nevents;
    /* per command: calls by power-of-two duration, for LATENCY HISTOGRAM */
    uint64_t (*hist)[HIST_BUCKETS];
    /* INFO errorstats: error replies by code, at most ERRORSTATS_MAX codes */
    struct {
        char code[32];
        uint64_t count;
    } errs[ERRORSTATS_MAX];
    int nerrs;
    size_t peak_memory;
    /* container commands (CONFIG, CLIENT, ...): their subcommands' calls and
     * histograms, reported as "config|set" like Redis */
    unsigned char *container; /* per command: has subcommands */
    struct sub_stat {
        char name[48];
        uint64_t calls, ticks, failed;
        uint64_t hist[HIST_BUCKETS];
    } *subs;
    int nsubs;
    /* per container command: its failed_calls when a call of it last ended,
     * so that the failures of the next call go to that call's subcommand */
    uint64_t *failed_mark;
};

#define SUBSTATS_MAX 256

/* The subcommands of a cmdinfo entry: the reader is left at the count. */
static long long cmdinfo_subs(const kv_cmdinfo *ci, rcur *r)
{
    long long n;
    *r = (rcur){ ci->resp3, ci->resp3 + ci->len };
    rcur_head(r, &n);
    for (int i = 0; i < 9; i++)
        rcur_skip(r);
    rcur_head(r, &n);
    return n;
}

void kv_introspect_init(void)
{
    struct kv_introspect *in = kv_calloc(sizeof *in);
    in->hist = kv_calloc(kv_ncommands * sizeof *in->hist);
    in->container = kv_calloc(kv_ncommands);
    in->failed_mark = kv_calloc(kv_ncommands * sizeof *in->failed_mark);
    for (size_t i = 0; i < kv_ncommands; i++) {
        const kv_cmdinfo *ci = kv_cmdinfo_find(kv_commands[i].name, strlen(kv_commands[i].name));
        rcur r;
        in->container[i] = ci && cmdinfo_subs(ci, &r) > 0;
    }
    srv.introspect = in;
    kv_notify_config_defaults(); /* when no option was given */
}

/* The stats of "cmd|sub" for c's call of a container command; NULL when
 * argv[1] is not one of its subcommands. */
static struct sub_stat *sub_stat_of(kv_client *c, const kv_cmd *cmd)
{
    struct kv_introspect *in = srv.introspect;
    if (c->argc < 2)
        return NULL;
    char name[48];
    int n = snprintf(name, sizeof name, "%s|%.*s", cmd->name, (int)BK_MIN(c->argv[1].len, 40),
                     c->argv[1].p);
    for (int i = (int)strlen(cmd->name) + 1; i < n; i++)
        name[i] = ascii_lower(name[i]);
    for (int i = 0; i < in->nsubs; i++)
        if (strcmp(in->subs[i].name, name) == 0)
            return &in->subs[i];
    if (in->nsubs == SUBSTATS_MAX)
        return NULL;
    rcur r;
    const kv_cmdinfo *ci = kv_cmdinfo_find(cmd->name, strlen(cmd->name));
    long long nsub = ci ? cmdinfo_subs(ci, &r) : 0;
    for (long long i = 0; i < nsub; i++) {
        rcur e = r;
        long long k;
        rcur_head(&r, &k);
        bk_str sn = rcur_string(&r);
        r = e;
        rcur_skip(&r);
        if (sn.len != (size_t)n || memcmp(sn.p, name, sn.len) != 0)
            continue;
        if (!in->subs) /* kept across CONFIG RESETSTAT */
            in->subs = kv_malloc(SUBSTATS_MAX * sizeof *in->subs);
        struct sub_stat *st = &in->subs[in->nsubs++];
        memset(st, 0, sizeof *st);
        memcpy(st->name, name, (size_t)n + 1);
        return st;
    }
    return NULL;
}

static slowlog_entry *slowlog_at(struct kv_introspect *in, size_t i)
{
    return in->log[(in->start + i) & (in->cap - 1)];
}

static void slowlog_trim(struct kv_introspect *in, size_t max)
{
    while (in->len > max) {
        kv_free(slowlog_at(in, in->len - 1));
        in->len--;
    }
}

void kv_introspect_free(void)
{
    struct kv_introspect *in = srv.introspect;
    if (!in)
        return;
    slowlog_trim(in, 0);
    kv_free(in->log);
    kv_free(in->events);
    kv_free(in->hist);
    kv_free(in->container);
    kv_free(in->failed_mark);
    kv_free(in->subs);
    kv_free(in);
    srv.introspect = NULL;
}

/* Arguments whose value must not reach the log (Redis redacts them). */
static int redacted(kv_client *c, int i)
{
    return c->cmd && kv_arg_redacted(c->cmd, c->argc, c->argv, i);
}

static void slowlog_add(kv_client *c, long long us)
{
    struct kv_introspect *in = srv.introspect;
    if (srv.slowlog_max_len == 0)
        return;
    int argc = BK_MIN(c->argc, SLOWLOG_MAX_ARGC);
    char more[64];
    size_t bytes = sizeof(slowlog_entry) + (size_t)argc * sizeof(bk_str);
    for (int i = 0; i < argc; i++)
        bytes += BK_MIN(c->argv[i].len, (size_t)SLOWLOG_MAX_STRING) + sizeof more;
    size_t alen = strlen(c->addr), nlen = c->name ? strlen(c->name) : 0;
    bytes += alen + nlen;
    slowlog_entry *e = kv_malloc(bytes);
    e->id = in->next_id++;
    e->time = srv.now_ms / 1000;
    e->duration = us;
    e->argc = argc;
    e->argv = (bk_str *)(e + 1);
    char *p = (char *)(e->argv + argc);
    for (int i = 0; i < argc; i++) {
        bk_str a = c->argv[i];
        size_t n;
        if (argc == SLOWLOG_MAX_ARGC && i == argc - 1 && c->argc > argc) {
            n = (size_t)snprintf(p, sizeof more, "... (%d more arguments)", c->argc - argc + 1);
        } else if (redacted(c, i)) {
            n = (size_t)snprintf(p, sizeof more, "(redacted)");
        } else if (a.len > SLOWLOG_MAX_STRING) {
            memcpy(p, a.p, SLOWLOG_MAX_STRING);
            n = SLOWLOG_MAX_STRING + (size_t)snprintf(p + SLOWLOG_MAX_STRING, sizeof more,
                                                      "... (%zu more bytes)",
                                                      a.len - SLOWLOG_MAX_STRING);
        } else {
            memcpy(p, a.p, a.len);
            n = a.len;
        }
        e->argv[i] = (bk_str){ p, n };
        p += n;
    }
    memcpy(p, c->addr, alen);
    e->addr = (bk_str){ p, alen };
    p += alen;
    if (nlen)
        memcpy(p, c->name, nlen);
    e->name = (bk_str){ p, nlen };
    if (in->len == in->cap) {
        size_t ncap = in->cap ? in->cap * 2 : 16;
        slowlog_entry **nl = kv_malloc(ncap * sizeof *nl);
        for (size_t i = 0; i < in->len; i++)
            nl[i + 1] = slowlog_at(in, i);
        kv_free(in->log);
        in->log = nl;
        in->cap = ncap;
        in->start = 1;
    }
    in->start = (in->start - 1) & (in->cap - 1);
    in->log[in->start] = e;
    in->len++;
    slowlog_trim(in, (size_t)srv.slowlog_max_len);
}

static void latency_add(const char *event, uint32_t ms)
{
    struct kv_introspect *in = srv.introspect;
    latency_event *ev = NULL;
    for (int i = 0; i < in->nevents; i++)
        if (strcmp(in->events[i].name, event) == 0)
            ev = &in->events[i];
    if (!ev) {
        in->events = kv_realloc(in->events, (size_t)(in->nevents + 1) * sizeof *in->events);
        ev = &in->events[in->nevents++];
        memset(ev, 0, sizeof *ev);
        snprintf(ev->name, sizeof ev->name, "%s", event);
    }
    int64_t now = srv.now_ms / 1000;
    if (ms > ev->max)
        ev->max = ms;
    int last = (ev->next + LATENCY_SAMPLES - 1) % LATENCY_SAMPLES;
    if (ev->count && ev->samples[last].time == now) { /* one sample a second: the worst */
        if (ms > ev->samples[last].ms)
            ev->samples[last].ms = ms;
        return;
    }
    ev->samples[ev->next].time = now;
    ev->samples[ev->next].ms = ms;
    ev->next = (ev->next + 1) % LATENCY_SAMPLES;
    if (ev->count < LATENCY_SAMPLES)
        ev->count++;
}

void kv_slowlog_log(kv_client *c, long long us)
{
    if (srv.slowlog_slower_than >= 0 && us >= srv.slowlog_slower_than)
        slowlog_add(c, us);
}

void kv_latency_sample(const char *event, int64_t ms)
{
    if (srv.latency_threshold > 0 && ms >= srv.latency_threshold)
        latency_add(event, (uint32_t)BK_MIN(ms, (int64_t)UINT32_MAX));
}

void kv_introspect_after_call(kv_client *c, const kv_cmd *cmd, uint64_t ticks)
{
    long long us = (long long)((double)ticks / kv_ticks_per_us());
    /* bucket b holds durations in (2^(b-1), 2^b] us */
    unsigned b = us <= 1 ? 0 : (unsigned)(64 - __builtin_clzll((unsigned long long)us - 1));
    if (b >= HIST_BUCKETS)
        b = HIST_BUCKETS - 1;
    int track = srv.latency_tracking;
    if (track)
        srv.introspect->hist[cmd - kv_commands][b]++;
    size_t idx = (size_t)(cmd - kv_commands);
    if (srv.introspect->container[idx]) {
        struct sub_stat *st = sub_stat_of(c, cmd);
        uint64_t failed = srv.cmd_stats[idx].failed;
        if (st) {
            st->calls++;
            st->ticks += ticks;
            st->failed += failed - srv.introspect->failed_mark[idx];
            st->hist[b] += (uint64_t)track;
        }
        srv.introspect->failed_mark[idx] = failed;
    }
    if (cmd->proc == exec_command) /* its commands are logged one by one */
        return;
    if (srv.slowlog_slower_than >= 0 && us >= srv.slowlog_slower_than)
        slowlog_add(c, us);
    if (srv.latency_threshold > 0 && us / 1000 >= srv.latency_threshold)
        latency_add((cmd->flags & CMD_FAST) ? "fast-command" : "command", (uint32_t)(us / 1000));
}

void kv_introspect_served(kv_client *c, int argc, bk_str *argv, uint64_t ticks)
{
    long long us = (long long)((double)ticks / kv_ticks_per_us());
    if (srv.slowlog_slower_than < 0 || us < srv.slowlog_slower_than)
        return;
    int sargc = c->argc;
    bk_str *sargv = c->argv;
    c->argc = argc;
    c->argv = argv;
    slowlog_add(c, us);
    c->argc = sargc;
    c->argv = sargv;
}

/* The subcommand's own arity error, Redis's "'slowlog|len'" form. */
static int sub_arity(kv_client *c, const char *cmd, int ok)
{
    if (ok)
        return 1;
    char name[48];
    size_t n = BK_MIN(c->argv[1].len, sizeof name - 1);
    for (size_t i = 0; i < n; i++)
        name[i] = ascii_lower(c->argv[1].p[i]);
    name[n] = '\0';
    reply_errorf(c, "ERR wrong number of arguments for '%s|%s' command", cmd, name);
    return 0;
}

static void reply_lines(kv_client *c, const char *const *lines, size_t n)
{
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++)
        reply_simple(c, lines[i]);
}

static const char *const slowlog_help[] = {
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
};

void slowlog_command(kv_client *c)
{
    struct kv_introspect *in = srv.introspect;
    bk_str sub = c->argv[1];
    if (arg_is(sub, "get")) {
        if (c->argc > 3) {
            reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                            "Try SLOWLOG HELP.", (int)sub.len, sub.p);
            return;
        }
        long long count = 10;
        if (c->argc == 3) {
            if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &count) < 0 || count < -1) {
                reply_error(c, "ERR count should be greater than or equal to -1");
                return;
            }
            if (count == -1)
                count = LLONG_MAX;
        }
        size_t n = (size_t)BK_MIN((unsigned long long)count, (unsigned long long)in->len);
        reply_array(c, (long long)n);
        for (size_t i = 0; i < n; i++) {
            slowlog_entry *e = slowlog_at(in, i);
            reply_array(c, 6);
            reply_int(c, e->id);
            reply_int(c, e->time);
            reply_int(c, e->duration);
            reply_array(c, e->argc);
            for (int k = 0; k < e->argc; k++)
                reply_bulk_str(c, e->argv[k]);
            reply_bulk_str(c, e->addr);
            reply_bulk_str(c, e->name);
        }
    } else if (arg_is(sub, "len")) {
        if (sub_arity(c, "slowlog", c->argc == 2))
            reply_int(c, (long long)in->len);
    } else if (arg_is(sub, "reset")) {
        if (sub_arity(c, "slowlog", c->argc == 2)) {
            slowlog_trim(in, 0);
            reply_ok(c);
        }
    } else if (arg_is(sub, "help")) {
        if (sub_arity(c, "slowlog", c->argc == 2))
            reply_lines(c, slowlog_help, BK_ARRAY_LEN(slowlog_help));
    } else {
        subcommand_unknown(c, "SLOWLOG");
    }
}

static const char *const latency_help[] = {
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    ("    Return a cumulative distribution of latencies in the format of a histogram for the "
     "specified command names."),
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
};

static latency_event *latency_find(bk_str name)
{
    struct kv_introspect *in = srv.introspect;
    for (int i = 0; i < in->nevents; i++)
        if (strlen(in->events[i].name) == name.len &&
            memcmp(in->events[i].name, name.p, name.len) == 0)
            return &in->events[i];
    return NULL;
}

/* Sample k of ev, oldest first. */
static int sample_at(const latency_event *ev, int k)
{
    return (ev->next - ev->count + k + 2 * LATENCY_SAMPLES) % LATENCY_SAMPLES;
}

/* One line of LATENCY HISTOGRAM / latencystats: a command, or a container
 * command's subcommand. */
typedef struct {
    const char *name;
    uint64_t calls;
    const uint64_t *hist;
} lat_line;

/* Calls lines of cmd i: itself, or its subcommands that were called. */
static int hist_empty(const uint64_t *h)
{
    for (int b = 0; b < HIST_BUCKETS; b++)
        if (h[b])
            return 0;
    return 1;
}

/* Those with histogram data only (none while latency-tracking is off). */
static int lat_lines(size_t i, lat_line *out, int cap)
{
    struct kv_introspect *in = srv.introspect;
    if (!in->container[i]) {
        if (hist_empty(in->hist[i]) || cap < 1)
            return 0;
        out[0] = (lat_line){ kv_commands[i].name, srv.cmd_stats[i].calls, in->hist[i] };
        return 1;
    }
    int n = 0;
    size_t nl = strlen(kv_commands[i].name);
    for (int k = 0; k < in->nsubs && n < cap; k++)
        if (!hist_empty(in->subs[k].hist) &&
            strncmp(in->subs[k].name, kv_commands[i].name, nl) == 0 &&
            in->subs[k].name[nl] == '|')
            out[n++] = (lat_line){ in->subs[k].name, in->subs[k].calls, in->subs[k].hist };
    return n;
}

static void reply_histogram(kv_client *c, const lat_line *l)
{
    /* fast commands are timed one call in 16: the histogram is scaled to
     * all the calls */
    uint64_t timed = 0;
    for (int b = 0; b < HIST_BUCKETS; b++)
        timed += l->hist[b];
    reply_bulk_cstr(c, l->name);
    reply_map(c, 2);
    reply_bulk_cstr(c, "calls");
    reply_int(c, (long long)l->calls);
    reply_bulk_cstr(c, "histogram_usec");
    int n = 0;
    for (int b = 0; b < HIST_BUCKETS; b++)
        n += l->hist[b] != 0;
    reply_map(c, n);
    uint64_t sum = 0;
    for (int b = 0; b < HIST_BUCKETS; b++) {
        if (!l->hist[b])
            continue;
        sum += l->hist[b];
        reply_int(c, 1ll << b);
        reply_int(c, sum == timed ? (long long)l->calls
                                  : (long long)((double)sum * (double)l->calls / (double)timed));
    }
}

static void latency_histogram(kv_client *c)
{
    size_t h = reply_defer(c);
    long long n = 0;
    lat_line lines[64];
    for (int a = c->argc == 2 ? 1 : 2; a < c->argc || (c->argc == 2 && a == 1); a++) {
        size_t from = 0, to = kv_ncommands;
        bk_str want = BK_STR_NULL;
        if (c->argc > 2) {
            /* "client" (all its subcommands) or "client|id" */
            bk_str arg = c->argv[a];
            const char *bar = memchr(arg.p, '|', arg.len);
            bk_str base = { arg.p, bar ? (size_t)(bar - arg.p) : arg.len };
            const kv_cmd *cmd = kv_cmd_lookup(base);
            if (!cmd)
                continue;
            from = (size_t)(cmd - kv_commands);
            to = from + 1;
            if (bar)
                want = arg;
        }
        for (size_t i = from; i < to; i++) {
            int k = lat_lines(i, lines, (int)BK_ARRAY_LEN(lines));
            for (int j = 0; j < k; j++) {
                if (want.p && !str_ieq_lit(want, lines[j].name, strlen(lines[j].name)))
                    continue;
                reply_histogram(c, &lines[j]);
                n++;
            }
        }
        if (c->argc == 2)
            break;
    }
    reply_defer_map(c, h, n);
}

static void latency_graph(kv_client *c, const latency_event *ev)
{
    /* A column per sample, oldest first, scaled to the event's max. */
    enum { ROWS = 4 };
    bk_buf b = { 0 };
    char line[256];
    uint32_t hi = 0, lo = UINT32_MAX;
    for (int k = 0; k < ev->count; k++) {
        uint32_t v = ev->samples[sample_at(ev, k)].ms;
        hi = BK_MAX(hi, v);
        lo = BK_MIN(lo, v);
    }
    int n = snprintf(line, sizeof line, "%s - high %lu ms, low %lu ms (all time high %lu ms)\n",
                     ev->name, (unsigned long)hi, (unsigned long)lo, (unsigned long)ev->max);
    buf_append(&b, line, (size_t)n);
    for (int k = 0; k < 80; k++)
        buf_append(&b, "-", 1);
    buf_append(&b, "\n", 1);
    for (int r = ROWS; r >= 1; r--) {
        for (int k = 0; k < ev->count; k++) {
            uint32_t v = ev->samples[sample_at(ev, k)].ms;
            int level = hi ? (int)((v * (uint64_t)ROWS + hi - 1) / hi) : 0;
            buf_append(&b, level >= r ? (r == level ? "#" : "|") : " ", 1);
        }
        buf_append(&b, "\n", 1);
    }
    reply_verbatim(c, b.data ? b.data : "", b.len, "txt");
    buf_free(&b);
}

static void latency_doctor(kv_client *c)
{
    struct kv_introspect *in = srv.introspect;
    bk_buf b = { 0 };
    char line[512];
    int n;
    if (srv.latency_threshold == 0 && in->nevents == 0) {
        n = snprintf(line, sizeof line,
                     "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this "
                     "Redis instance. You may use \"CONFIG SET latency-monitor-threshold "
                     "<milliseconds>.\" in order to enable it. If we weren't in a deep space "
                     "mission I'd suggest to take a look at "
                     "https://redis.io/topics/latency-monitor.\n");
        buf_append(&b, line, (size_t)n);
    } else if (in->nevents == 0) {
        n = snprintf(line, sizeof line,
                     "Dave, no latency spike was observed during the lifetime of this Redis "
                     "instance, not in the slightest bit. I honestly think you ought to sit down "
                     "calmly, take a stress pill, and think things over.\n");
        buf_append(&b, line, (size_t)n);
    } else {
        n = snprintf(line, sizeof line,
                     "Dave, I have observed latency spikes in this Redis instance. You don't mind "
                     "talking about it, do you Dave?\n\n");
        buf_append(&b, line, (size_t)n);
        for (int i = 0; i < in->nevents; i++) {
            latency_event *ev = &in->events[i];
            uint64_t sum = 0;
            for (int k = 0; k < ev->count; k++)
                sum += ev->samples[sample_at(ev, k)].ms;
            n = snprintf(line, sizeof line,
                         "%d. %s: %d latency spikes (average %llums, mean deviation 0ms, "
                         "period 0 sec). Worst all time event %ums.\n",
                         i + 1, ev->name, ev->count,
                         ev->count ? (unsigned long long)(sum / (uint64_t)ev->count) : 0ull,
                         ev->max);
            buf_append(&b, line, (size_t)n);
        }
        n = snprintf(line, sizeof line,
                     "\nI have a few advices for you:\n\n- Check your system for processes or "
                     "commands that take a long time (SLOWLOG GET).\n");
        buf_append(&b, line, (size_t)n);
    }
    reply_verbatim(c, b.data, b.len, "txt");
    buf_free(&b);
}

void latency_command(kv_client *c)
{
    struct kv_introspect *in = srv.introspect;
    bk_str sub = c->argv[1];
    if (arg_is(sub, "latest")) {
        if (!sub_arity(c, "latency", c->argc == 2))
            return;
        reply_array(c, in->nevents);
        for (int i = 0; i < in->nevents; i++) {
            latency_event *ev = &in->events[i];
            int last = sample_at(ev, ev->count - 1);
            reply_array(c, 4);
            reply_bulk_cstr(c, ev->name);
            reply_int(c, ev->samples[last].time);
            reply_int(c, ev->samples[last].ms);
            reply_int(c, ev->max);
        }
    } else if (arg_is(sub, "history")) {
        if (!sub_arity(c, "latency", c->argc == 3))
            return;
        latency_event *ev = latency_find(c->argv[2]);
        int n = ev ? ev->count : 0;
        reply_array(c, n);
        for (int k = 0; k < n; k++) {
            int s = sample_at(ev, k);
            reply_array(c, 2);
            reply_int(c, ev->samples[s].time);
            reply_int(c, ev->samples[s].ms);
        }
    } else if (arg_is(sub, "reset")) {
        long long resets = 0;
        if (c->argc == 2) {
            resets = in->nevents;
            in->nevents = 0;
        } else {
            for (int a = 2; a < c->argc; a++) {
                latency_event *ev = latency_find(c->argv[a]);
                if (!ev)
                    continue;
                *ev = in->events[--in->nevents];
                resets++;
            }
        }
        reply_int(c, resets);
    } else if (arg_is(sub, "graph")) {
        if (!sub_arity(c, "latency", c->argc == 3))
            return;
        latency_event *ev = latency_find(c->argv[2]);
        if (!ev) {
            reply_errorf(c, "ERR No samples available for event '%.*s'",
                         (int)BK_MIN(c->argv[2].len, 128), c->argv[2].p);
            return;
        }
        latency_graph(c, ev);
    } else if (arg_is(sub, "doctor")) {
        if (sub_arity(c, "latency", c->argc == 2))
            latency_doctor(c);
    } else if (arg_is(sub, "histogram")) {
        latency_histogram(c);
    } else if (arg_is(sub, "help")) {
        if (sub_arity(c, "latency", c->argc == 2))
            reply_lines(c, latency_help, BK_ARRAY_LEN(latency_help));
    } else {
        subcommand_unknown(c, "LATENCY");
    }
}

/* ---- errorstats and CONFIG RESETSTAT ---- */

void kv_errorstat_add(const char *msg)
{
    struct kv_introspect *in = srv.introspect;
    if (!in)
        return;
    size_t n = strcspn(msg, " ");
    if (n >= sizeof in->errs[0].code)
        n = sizeof in->errs[0].code - 1;
    for (int i = 0; i < in->nerrs; i++) {
        if (strlen(in->errs[i].code) == n && memcmp(in->errs[i].code, msg, n) == 0) {
            in->errs[i].count++;
            return;
        }
    }
    if (in->nerrs == ERRORSTATS_MAX)
        return;
    memcpy(in->errs[in->nerrs].code, msg, n);
    in->errs[in->nerrs].code[n] = '\0';
    in->errs[in->nerrs++].count = 1;
}

void kv_introspect_resetstat(void)
{
    struct kv_introspect *in = srv.introspect;
    in->nerrs = 0;
    memset(in->hist, 0, kv_ncommands * sizeof *in->hist);
    in->nsubs = 0;
    memset(in->failed_mark, 0, kv_ncommands * sizeof *in->failed_mark);
}

/* ---- INFO ---- */

static void human(char *out, size_t n, double v)
{
    if (v < 1024)
        snprintf(out, n, "%.0fB", v);
    else if (v < 1024.0 * 1024)
        snprintf(out, n, "%.2fK", v / 1024);
    else if (v < 1024.0 * 1024 * 1024)
        snprintf(out, n, "%.2fM", v / 1024 / 1024);
    else
        snprintf(out, n, "%.2fG", v / 1024 / 1024 / 1024);
}

/* The clients' memory as INFO shows it: what their buffers hold (part of
 * used_memory) and their structures, replicas apart (mem_clients_slaves). */
typedef struct {
    size_t normal, replicas, max_in, max_out;
} client_mem;

static client_mem client_buffers(void)
{
    client_mem m = { 0 };
    for (kv_client *x = srv.clients; x; x = x->next) {
        size_t n = x->rbuf.cap + x->wbuf.cap + x->prop_buf.cap + sizeof *x;
        if (x->repl_flags & REPL_C_REPLICA)
            m.replicas += n;
        else
            m.normal += n;
        m.max_in = BK_MAX(m.max_in, x->rbuf.cap);
        m.max_out = BK_MAX(m.max_out, x->wbuf.len - x->wpos);
    }
    return m;
}

static size_t used_memory(void)
{
    size_t used = kv_memory_used();
    if (used > srv.introspect->peak_memory)
        srv.introspect->peak_memory = used;
    return used;
}

static void info_server(bk_buf *b)
{
    struct utsname un;
    uname(&un);
    int64_t uptime = (srv.now_ms - srv.start_ms) / 1000;
    buf_appendf(b, "# Server\r\nredis_version:%s\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
            "redis_build_id:0\r\nredis_mode:standalone\r\nos:%s %s %s\r\narch_bits:%d\r\n"
            "monotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n"
            "atomicvar_api:c11-builtin\r\ngcc_version:%d.%d.%d\r\nprocess_id:%d\r\n"
            "process_supervised:no\r\nrun_id:%016llx%016llx%08x\r\ntcp_port:%d\r\n"
            "server_time_usec:%lld\r\nuptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\nhz:%d\r\n"
            "configured_hz:%d\r\nlru_clock:%u\r\nexecutable:%s\r\nconfig_file:%s\r\n"
            "io_threads_active:0\r\n",
         KV_VERSION, un.sysname, un.release, un.machine, (int)(sizeof(void *) * 8),
#ifdef __GNUC__
         __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
         0, 0, 0,
#endif
         (int)getpid(), (unsigned long long)srv.start_ms * 2654435761ull,
         (unsigned long long)getpid() * 40503ull, (unsigned)srv.cfg.port, srv.cfg.port,
         (long long)kv_unix_us(), (long long)uptime, (long long)uptime / 86400, srv.cfg.hz,
         srv.cfg.hz, srv.lru_clock, srv.executable ? srv.executable : "",
         srv.config_file ? srv.config_file : "");
    if (srv.shutdown_ms) /* a shutdown waits for its replicas */
        buf_appendf(b, "shutdown_in_milliseconds:%lld\r\n", (long long)(srv.shutdown_ms - srv.now_ms));
    buf_appendf(b, "brisk_kv_version:%s\r\n", BRISK_VERSION);
}

static void info_clients(bk_buf *b)
{
    client_mem cm = client_buffers();
    buf_appendf(b, "# Clients\r\nconnected_clients:%llu\r\ncluster_connections:0\r\nmaxclients:%llu\r\n"
            "client_recent_max_input_buffer:%zu\r\nclient_recent_max_output_buffer:%zu\r\n"
            "blocked_clients:%llu\r\ntracking_clients:%d\r\nclients_in_timeout_table:%llu\r\n",
         (unsigned long long)(srv.nclients - (uint64_t)repl_replica_count()),
         (unsigned long long)srv.cfg.maxclients, cm.max_in,
         cm.max_out, (unsigned long long)(srv.nheld + srv.blk_nclients), srv.trk_nclients,
         (unsigned long long)srv.blk_ntimeout);
}

static void info_memory(bk_buf *b)
{
    client_mem cm = client_buffers();
    size_t cbufs = cm.normal + cm.replicas;
    size_t used = used_memory(), rss = kv_rss_memory(), peak = srv.introspect->peak_memory;
    size_t dataset = kv_used_memory();
    char h1[32], h2[32], h3[32], h4[32], h5[32];
    human(h1, sizeof h1, (double)used);
    human(h2, sizeof h2, (double)rss);
    human(h3, sizeof h3, (double)peak);
    human(h4, sizeof h4, (double)srv.cfg.maxmemory);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    long long total = (long long)pages * psz;
    human(h5, sizeof h5, (double)total);
    double frag = used ? (double)rss / (double)used : 0.0;
    size_t lua_mem = script_lua_memory();
    char h6[32];
    human(h6, sizeof h6, (double)lua_mem);
    buf_appendf(b, "# Memory\r\nused_memory:%zu\r\nused_memory_human:%s\r\nused_memory_rss:%zu\r\n"
            "used_memory_rss_human:%s\r\nused_memory_peak:%zu\r\nused_memory_peak_human:%s\r\n"
            "used_memory_peak_perc:%.2f%%\r\nused_memory_overhead:%zu\r\n"
            "used_memory_startup:0\r\nused_memory_dataset:%zu\r\n"
            "used_memory_dataset_perc:%.2f%%\r\nallocator_allocated:%zu\r\n"
            "allocator_active:%zu\r\nallocator_resident:%zu\r\ntotal_system_memory:%lld\r\n"
            "total_system_memory_human:%s\r\nused_memory_lua:%zu\r\nused_memory_vm_eval:%zu\r\n"
            "used_memory_lua_human:%s\r\nused_memory_scripts_eval:0\r\n"
            "number_of_cached_scripts:%zu\r\nnumber_of_functions:0\r\nnumber_of_libraries:0\r\n"
            "used_memory_vm_functions:0\r\nused_memory_vm_total:0\r\n"
            "used_memory_vm_total_human:0B\r\nused_memory_functions:0\r\n"
            "used_memory_scripts:0\r\nused_memory_scripts_human:0B\r\nmaxmemory:%llu\r\n"
            "maxmemory_human:%s\r\nmaxmemory_policy:%s\r\nallocator_frag_ratio:1.00\r\n"
            "allocator_frag_bytes:0\r\nallocator_rss_ratio:1.00\r\nallocator_rss_bytes:0\r\n"
            "rss_overhead_ratio:%.2f\r\nrss_overhead_bytes:%lld\r\n"
            "mem_fragmentation_ratio:%.2f\r\nmem_fragmentation_bytes:%lld\r\n"
            "mem_not_counted_for_evict:%zu\r\nmem_replication_backlog:0\r\n"
            "mem_total_replication_buffers:%zu\r\nmem_clients_slaves:%zu\r\n"
            "mem_clients_normal:%zu\r\nmem_cluster_links:0\r\nmem_aof_buffer:%zu\r\n"
            "mem_allocator:libc\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:0\r\n"
            "lazyfreed_objects:%llu\r\n"
            /* brisk-kv's own: the clients' buffers, part of used_memory */
            "used_memory_clients:%zu\r\n",
         used, h1, rss, h2, peak, h3, peak ? 100.0 * (double)used / (double)peak : 0.0, cbufs,
         dataset, used ? 100.0 * (double)dataset / (double)used : 0.0, used, used, rss, total, h5,
         lua_mem, lua_mem, h6, script_cached_count(), (unsigned long long)srv.cfg.maxmemory, h4, kv_policy_name(srv.cfg.maxmemory_policy),
         frag, (long long)rss - (long long)used, frag, (long long)rss - (long long)used,
         kv_memory_not_counted(), repl_replica_obufs(), cm.replicas, cm.normal, srv.aof_buf.len,
         (unsigned long long)srv.stat_lazyfreed, cbufs);
}

static void info_persistence(bk_buf *b)
{
    const kv_childinfo *ci = &childinfo;
    buf_appendf(b, "# Persistence\r\nloading:%d\r\nasync_loading:%d\r\ncurrent_cow_peak:%llu\r\n"
            "current_cow_size:%llu\r\ncurrent_cow_size_age:%lld\r\ncurrent_fork_perc:%.2f\r\n"
            "current_save_keys_processed:%llu\r\ncurrent_save_keys_total:%llu\r\n"
            "rdb_changes_since_last_save:%llu\r\nrdb_bgsave_in_progress:%d\r\n"
            "rdb_last_save_time:%lld\r\nrdb_last_bgsave_status:%s\r\n"
            "rdb_last_bgsave_time_sec:%lld\r\nrdb_current_bgsave_time_sec:%lld\r\nrdb_saves:%llu\r\n"
            "rdb_last_cow_size:%llu\r\nrdb_last_load_keys_expired:%llu\r\n"
            "rdb_last_load_keys_loaded:%llu\r\naof_enabled:%d\r\naof_rewrite_in_progress:%d\r\n"
            "aof_rewrite_scheduled:%d\r\naof_last_rewrite_time_sec:-1\r\n"
            "aof_current_rewrite_time_sec:%lld\r\naof_last_bgrewrite_status:%s\r\n"
            "aof_rewrites:%llu\r\naof_rewrites_consecutive_failures:%llu\r\n"
            "aof_last_write_status:%s\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\n"
            "module_fork_last_cow_size:0\r\n",
         srv.loading, repl_async_loading(), (unsigned long long)ci->cow_peak, (unsigned long long)ci->cow,
         ci->cow_at_ms ? (long long)((srv.now_ms - ci->cow_at_ms) / 1000) : 0LL,
         ci->keys_total ? 100.0 * (double)ci->keys_done / (double)ci->keys_total : 0.0,
         (unsigned long long)ci->keys_done, (unsigned long long)ci->keys_total,
         (unsigned long long)(srv.dirty - srv.rdb_dirty_at_save),
         srv.rdb_child_pid > 0 || repl_rdb_child_running(), (long long)srv.lastsave,
         srv.rdb_last_bgsave_failed ? "err" : "ok", (long long)srv.rdb_last_bgsave_secs - 1,
         srv.rdb_child_pid > 0 ? (long long)((srv.now_ms - srv.rdb_save_start_ms) / 1000) : -1LL,
         (unsigned long long)srv.rdb_saves, (unsigned long long)ci->last_cow,
         (unsigned long long)srv.rdb_load_expired,
         (unsigned long long)srv.rdb_load_loaded, srv.aof_state != 0,
         srv.child_pid > 0, srv.aof_rewrite_scheduled,
         srv.child_pid > 0 ? (long long)((srv.now_ms - srv.aof_rewrite_start_ms) / 1000) : -1LL,
         srv.aof_last_bgrewrite_ok ? "ok" : "err", (unsigned long long)srv.aof_rewrites,
         (unsigned long long)srv.aof_rw_failures,
         srv.aof_last_write_ok ? "ok" : "err");
    if (srv.aof_state)
        buf_appendf(b, "aof_current_size:%llu\r\naof_base_size:%llu\r\naof_pending_rewrite:0\r\n"
                "aof_buffer_length:%zu\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n",
             (unsigned long long)srv.aof_current_size, (unsigned long long)srv.aof_base_size,
             srv.aof_buf.len);
    kv_loading_info(b); /* while a start-up load serves clients */
}

static void info_stats(bk_buf *b)
{
    unsigned long long sync[3];
    repl_sync_counts(sync);
    buf_appendf(b, "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
            "instantaneous_ops_per_sec:%llu\r\ntotal_net_input_bytes:%llu\r\n"
            "total_net_output_bytes:%llu\r\ntotal_net_repl_input_bytes:0\r\n"
            "total_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:%.2f\r\n"
            "instantaneous_output_kbps:%.2f\r\ninstantaneous_input_repl_kbps:0.00\r\n"
            "instantaneous_output_repl_kbps:0.00\r\nrejected_connections:%llu\r\n"
            "sync_full:%llu\r\nsync_partial_ok:%llu\r\nsync_partial_err:%llu\r\n"
            "expired_keys:%llu\r\n"
            "expired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\n"
            "expire_cycle_cpu_milliseconds:%llu\r\nevicted_keys:%llu\r\nevicted_clients:%llu\r\n"
            "total_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\n"
            "keyspace_hits:%llu\r\nkeyspace_misses:%llu\r\npubsub_channels:%zu\r\n"
            "pubsub_patterns:%zu\r\npubsubshard_channels:%zu\r\nlatest_fork_usec:0\r\n"
            "total_forks:%llu\r\nmigrate_cached_sockets:%zu\r\nslave_expires_tracked_keys:0\r\n"
            "active_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\n"
            "active_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\n"
            "current_active_defrag_time:0\r\ntracking_total_keys:%zu\r\n"
            "tracking_total_items:%llu\r\ntracking_total_prefixes:%d\r\n"
            "unexpected_error_replies:0\r\ntotal_error_replies:%llu\r\n"
            "dump_payload_sanitizations:0\r\ntotal_reads_processed:0\r\n"
            "total_writes_processed:0\r\nio_threaded_reads_processed:0\r\n"
            "io_threaded_writes_processed:0\r\nreply_buffer_shrinks:%llu\r\n"
            "reply_buffer_expands:%llu\r\n",
         (unsigned long long)srv.stat_conns, (unsigned long long)srv.stat_cmds,
         (unsigned long long)(kv_instantaneous(0) + 0.5), (unsigned long long)srv.stat_net_in,
         (unsigned long long)srv.stat_net_out, kv_instantaneous(1) / 1024,
         kv_instantaneous(2) / 1024, (unsigned long long)srv.stat_rejected_conns, sync[0],
         sync[1], sync[2], (unsigned long long)srv.stat_expired,
         (unsigned long long)srv.stat_expire_cycles_cpu_ms,
         (unsigned long long)srv.stat_evicted,
         (unsigned long long)srv.stat_evicted_clients, (unsigned long long)srv.stat_hits,
         (unsigned long long)srv.stat_misses, dict_size(&srv.channels),
         dict_size(&srv.patterns), dict_size(&srv.shard_channels),
         (unsigned long long)srv.stat_forks, migrate_cached_sockets(),
         dict_size(&srv.trk_keys), (unsigned long long)srv.trk_items, srv.trk_nprefix,
         (unsigned long long)srv.stat_errors, (unsigned long long)srv.stat_rb_shrinks,
         (unsigned long long)srv.stat_rb_expands);
}

static void info_replication(bk_buf *b)
{
    size_t start = b->len;
    repl_info(b);
    /* sections are separated by the caller: drop repl_info's blank line */
    if (b->len >= start + 4 && memcmp(b->data + b->len - 4, "\r\n\r\n", 4) == 0)
        b->len -= 2;
}

static void info_cpu(bk_buf *b)
{
    struct rusage ru, ch;
    getrusage(RUSAGE_SELF, &ru);
    getrusage(RUSAGE_CHILDREN, &ch);
    buf_appendf(b, "# CPU\r\nused_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\n"
            "used_cpu_sys_children:%ld.%06ld\r\nused_cpu_user_children:%ld.%06ld\r\n"
            "used_cpu_sys_main_thread:%ld.%06ld\r\nused_cpu_user_main_thread:%ld.%06ld\r\n",
         (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec, (long)ru.ru_utime.tv_sec,
         (long)ru.ru_utime.tv_usec, (long)ch.ru_stime.tv_sec, (long)ch.ru_stime.tv_usec,
         (long)ch.ru_utime.tv_sec, (long)ch.ru_utime.tv_usec, (long)ru.ru_stime.tv_sec,
         (long)ru.ru_stime.tv_usec, (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
}

static void info_modules(bk_buf *b)
{
    buf_appendf(b, "# Modules\r\n");
}

static double cmd_usec(const kv_cmd_stats *st)
{
    /* the timed calls stand for all of them */
    return st->timed ? (double)st->ticks / kv_ticks_per_us() * (double)st->calls /
                           (double)st->timed
                     : 0.0;
}

static void info_commandstats(bk_buf *b)
{
    struct kv_introspect *in = srv.introspect;
    buf_appendf(b, "# Commandstats\r\n");
    for (size_t i = 0; i < kv_ncommands; i++) {
        kv_cmd_stats *st = &srv.cmd_stats[i];
        if (in->container[i]) {
            /* Redis reports container commands by subcommand only */
            size_t nl = strlen(kv_commands[i].name);
            for (int k = 0; k < in->nsubs; k++) {
                struct sub_stat *ss = &in->subs[k];
                if (!ss->calls || strncmp(ss->name, kv_commands[i].name, nl) != 0 ||
                    ss->name[nl] != '|')
                    continue;
                /* whole microseconds, the mean from them (Redis's) */
                unsigned long long usec = (unsigned long long)((double)ss->ticks / kv_ticks_per_us());
                buf_appendf(b, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=0,"
                        "failed_calls=%llu\r\n",
                     ss->name, (unsigned long long)ss->calls, usec,
                     (double)usec / (double)ss->calls, (unsigned long long)ss->failed);
            }
            continue;
        }
        if (!st->calls && !st->rejected && !st->failed)
            continue;
        unsigned long long usec = (unsigned long long)cmd_usec(st);
        buf_appendf(b, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                "failed_calls=%llu\r\n",
             kv_commands[i].name, (unsigned long long)st->calls, usec,
             st->calls ? (double)usec / (double)st->calls : 0.0, (unsigned long long)st->rejected,
             (unsigned long long)st->failed);
    }
}

static void info_errorstats(bk_buf *b)
{
    struct kv_introspect *in = srv.introspect;
    buf_appendf(b, "# Errorstats\r\n");
    for (int i = 0; i < in->nerrs; i++)
        buf_appendf(b, "errorstat_%s:count=%llu\r\n", in->errs[i].code,
             (unsigned long long)in->errs[i].count);
}

/* The duration below which pct % of the calls fell, from the power-of-two
 * histogram (the bucket's upper bound, as HdrHistogram's does). */
static double percentile(const uint64_t *h, uint64_t total, double pct)
{
    uint64_t want = (uint64_t)((double)total * pct / 100.0 + 0.5), sum = 0;
    if (want == 0)
        want = 1;
    for (int k = 0; k < HIST_BUCKETS; k++) {
        sum += h[k];
        if (sum >= want)
            return (double)(1ull << k);
    }
    return (double)(1ull << (HIST_BUCKETS - 1));
}

static void info_latencystats(bk_buf *b)
{
    buf_appendf(b, "# Latencystats\r\n");
    lat_line lines[64];
    for (size_t i = 0; i < kv_ncommands; i++) {
        int n = lat_lines(i, lines, (int)BK_ARRAY_LEN(lines));
        for (int j = 0; j < n; j++) {
            const uint64_t *h = lines[j].hist;
            uint64_t total = 0;
            for (int k = 0; k < HIST_BUCKETS; k++)
                total += h[k];
            if (!total)
                continue;
            buf_appendf(b, "latency_percentiles_usec_%s:", lines[j].name);
            for (int k = 0; k < srv.nlatency_pcts; k++)
                buf_appendf(b, "%sp%g=%.3f", k ? "," : "", srv.latency_pcts[k],
                     percentile(h, total, srv.latency_pcts[k]));
            buf_appendf(b, "\r\n");
        }
    }
}

static void info_cluster(bk_buf *b)
{
    buf_appendf(b, "# Cluster\r\ncluster_enabled:0\r\n");
}

static void info_keyspace(bk_buf *b)
{
    buf_appendf(b, "# Keyspace\r\n");
    for (int i = 0; i < srv.cfg.databases; i++) {
        kv_db *db = &srv.dbs[i];
        if (db_size(db) == 0)
            continue;
        /* avg_ttl over the keys with a TTL that a cheap pass sees */
        long long sum = 0, n = 0;
        for (size_t k = 0; k < db->vol_len && k < 64; k++) {
            int64_t left = entry_expire(db->vol[k]) - srv.now_ms;
            if (left > 0) {
                sum += left;
                n++;
            }
        }
        buf_appendf(b, "db%d:keys=%zu,expires=%zu,avg_ttl=%lld\r\n", i, db_size(db), db->vol_len,
             n ? sum / n : 0);
    }
}

/* INFO's sections in Redis 7.0's order; "all" is every one but modules,
 * "everything" all of them, "default" the marked ones. */
static const struct {
    const char *name;
    int is_default;
    void (*fn)(bk_buf *b);
} sections[] = {
    { "server", 1, info_server },           { "clients", 1, info_clients },
    { "memory", 1, info_memory },           { "persistence", 1, info_persistence },
    { "stats", 1, info_stats },             { "replication", 1, info_replication },
    { "cpu", 1, info_cpu },                 { "modules", 0, info_modules },
    { "commandstats", 0, info_commandstats }, { "errorstats", 1, info_errorstats },
    { "latencystats", 0, info_latencystats }, { "cluster", 1, info_cluster },
    { "keyspace", 1, info_keyspace },
};

void info_command(kv_client *c)
{
    unsigned want = 0; /* bit i: sections[i] */
    if (c->argc == 1)
        for (size_t i = 0; i < BK_ARRAY_LEN(sections); i++)
            want |= (unsigned)sections[i].is_default << i;
    for (int a = 1; a < c->argc; a++) {
        bk_str s = c->argv[a];
        for (size_t i = 0; i < BK_ARRAY_LEN(sections); i++) {
            int is_modules = strcmp(sections[i].name, "modules") == 0;
            if (arg_is(s, sections[i].name) || arg_is(s, "everything") ||
                (arg_is(s, "all") && !is_modules) ||
                (arg_is(s, "default") && sections[i].is_default))
                want |= 1u << i;
        }
    }
    bk_buf b = { 0 };
    for (size_t i = 0; i < BK_ARRAY_LEN(sections); i++) {
        if (!(want & (1u << i)))
            continue;
        if (b.len)
            buf_appendf(&b, "\r\n");
        sections[i].fn(&b);
    }
    reply_verbatim(c, b.data ? b.data : "", b.len, "txt");
    buf_free(&b);
}

/* ---- MEMORY ---- */

/* Bytes of the value of e: the entry, plus its object's parts (sampled up
 * to samples elements, 0 for all, and extrapolated like Redis). */
static size_t value_bytes(kv_entry *e, long long samples)
{
    size_t total = db_entry_bytes(e), seen = 0, part = 0, count = 0;
    switch (e->type) {
    case KV_LIST: {
        kv_list *l = entry_obj(e);
        total += sizeof *l + l->cap * sizeof *l->ring;
        count = l->len;
        for (size_t i = 0; i < l->len && (!samples || seen < (size_t)samples); i++, seen++)
            part += sizeof(kv_lelem) + list_at(l, i)->len + 8;
        break;
    }
    case KV_HASH:
        total += hash_mem_bytes(entry_obj(e), samples);
        break;
    case KV_SET: {
        dict *d = entry_obj(e);
        total += sizeof *d + dict_buckets(d) * sizeof(void *);
        count = dict_size(d);
        dict_iter it;
        dict_iter_init(&it, d);
        for (dict_node *dn; (!samples || seen < (size_t)samples) && (dn = dict_iter_next(&it));
             seen++) {
            part += sizeof(kv_smember) + dn->aux + 8;
        }
        dict_iter_end(&it);
        break;
    }
    case KV_ZSET: {
        zset *z = entry_obj(e);
        total += sizeof *z + dict_buckets(&z->dict) * sizeof(void *);
        count = z->length;
        for (zs_node *x = z->header->lv[0].forward; x && (!samples || seen < (size_t)samples);
             x = x->lv[0].forward, seen++)
            part += sizeof *x + x->level * sizeof x->lv[0] + x->dn.aux + 8;
        break;
    }
    default:
        break;
    }
    if (seen)
        total += (size_t)((double)part / (double)seen * (double)count);
    return total;
}

static const char *const memory_help[] = {
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
};

static void memory_stats(kv_client *c)
{
    client_mem cm = client_buffers();
    size_t used = used_memory(), rss = kv_rss_memory(), dataset = kv_used_memory();
    size_t keys = 0;
    int ndbs = 0;
    for (int i = 0; i < srv.cfg.databases; i++) {
        keys += db_size(&srv.dbs[i]);
        ndbs += db_size(&srv.dbs[i]) > 0;
    }
    reply_map(c, 27 + ndbs);
    static const char *const zero_fields[] = { "startup.allocated", "replication.backlog",
                                               "cluster.links" };
    reply_bulk_cstr(c, "peak.allocated");
    reply_int(c, (long long)srv.introspect->peak_memory);
    reply_bulk_cstr(c, "total.allocated");
    reply_int(c, (long long)used);
    for (size_t i = 0; i < 2; i++) {
        reply_bulk_cstr(c, zero_fields[i]);
        reply_int(c, 0);
    }
    reply_bulk_cstr(c, "clients.slaves");
    reply_int(c, (long long)cm.replicas);
    reply_bulk_cstr(c, "clients.normal");
    reply_int(c, (long long)cm.normal);
    reply_bulk_cstr(c, zero_fields[2]);
    reply_int(c, 0);
    reply_bulk_cstr(c, "aof.buffer");
    reply_int(c, (long long)srv.aof_buf.len);
    reply_bulk_cstr(c, "lua.caches");
    reply_int(c, 0);
    reply_bulk_cstr(c, "functions.caches");
    reply_int(c, 0);
    for (int i = 0; i < srv.cfg.databases; i++) {
        kv_db *db = &srv.dbs[i];
        if (!db_size(db))
            continue;
        char name[32];
        snprintf(name, sizeof name, "db.%d", i);
        reply_bulk_cstr(c, name);
        reply_map(c, 3);
        reply_bulk_cstr(c, "overhead.hashtable.main");
        reply_int(c, (long long)(db_size(db) * sizeof(void *)));
        reply_bulk_cstr(c, "overhead.hashtable.expires");
        reply_int(c, (long long)(db->vol_cap * sizeof(void *)));
        reply_bulk_cstr(c, "overhead.hashtable.slot-to-keys");
        reply_int(c, 0);
    }
    reply_bulk_cstr(c, "overhead.total");
    reply_int(c, (long long)(cm.normal + cm.replicas));
    reply_bulk_cstr(c, "keys.count");
    reply_int(c, (long long)keys);
    reply_bulk_cstr(c, "keys.bytes-per-key");
    reply_int(c, keys ? (long long)(dataset / keys) : 0);
    reply_bulk_cstr(c, "dataset.bytes");
    reply_int(c, (long long)dataset);
    reply_bulk_cstr(c, "dataset.percentage");
    reply_double(c, used ? 100.0 * (double)dataset / (double)used : 0);
    reply_bulk_cstr(c, "peak.percentage");
    reply_double(c, srv.introspect->peak_memory
                        ? 100.0 * (double)used / (double)srv.introspect->peak_memory
                        : 0);
    reply_bulk_cstr(c, "allocator.allocated");
    reply_int(c, (long long)used);
    reply_bulk_cstr(c, "allocator.active");
    reply_int(c, (long long)used);
    reply_bulk_cstr(c, "allocator.resident");
    reply_int(c, (long long)rss);
    reply_bulk_cstr(c, "allocator-fragmentation.ratio");
    reply_double(c, 1.0);
    reply_bulk_cstr(c, "allocator-fragmentation.bytes");
    reply_int(c, 0);
    reply_bulk_cstr(c, "allocator-rss.ratio");
    reply_double(c, 1.0);
    reply_bulk_cstr(c, "allocator-rss.bytes");
    reply_int(c, 0);
    reply_bulk_cstr(c, "rss-overhead.ratio");
    reply_double(c, used ? (double)rss / (double)used : 0);
    reply_bulk_cstr(c, "rss-overhead.bytes");
    reply_int(c, (long long)rss - (long long)used);
    reply_bulk_cstr(c, "fragmentation");
    reply_double(c, used ? (double)rss / (double)used : 0);
    reply_bulk_cstr(c, "fragmentation.bytes");
    reply_int(c, (long long)rss - (long long)used);
}

void memory_command(kv_client *c)
{
    bk_str sub = c->argv[1];
    if (arg_is(sub, "usage")) {
        if (!sub_arity(c, "memory", c->argc >= 3))
            return;
        long long samples = 5;
        for (int i = 3; i < c->argc; i++) {
            if (arg_is(c->argv[i], "samples") && i + 1 < c->argc) {
                if (arg_ll(c, c->argv[++i], &samples) < 0)
                    return;
                if (samples < 0) {
                    reply_error(c, ERR_SYNTAX);
                    return;
                }
            } else {
                reply_error(c, ERR_SYNTAX);
                return;
            }
        }
        kv_entry *e = db_find(c->db, c->argv[2]);
        if (e && db_expire_if_needed(c->db, e))
            e = NULL;
        if (!e) {
            reply_null(c);
            return;
        }
        reply_int(c, (long long)value_bytes(e, samples));
    } else if (arg_is(sub, "stats")) {
        if (sub_arity(c, "memory", c->argc == 2))
            memory_stats(c);
    } else if (arg_is(sub, "doctor")) {
        if (sub_arity(c, "memory", c->argc == 2)) {
            static const char txt[] =
                "Hi Sam, I can't find any memory issue in your instance. I can only account for "
                "what occurs on this base.";
            reply_verbatim(c, txt, sizeof txt - 1, "txt");
        }
    } else if (arg_is(sub, "malloc-stats")) {
        if (sub_arity(c, "memory", c->argc == 2)) {
            static const char txt[] = "Stats not supported for the current allocator";
            reply_verbatim(c, txt, sizeof txt - 1, "txt");
        }
    } else if (arg_is(sub, "purge")) {
        if (sub_arity(c, "memory", c->argc == 2))
            reply_ok(c);
    } else if (arg_is(sub, "help")) {
        if (sub_arity(c, "memory", c->argc == 2))
            reply_lines(c, memory_help, BK_ARRAY_LEN(memory_help));
    } else {
        subcommand_unknown(c, "MEMORY");
    }
}
