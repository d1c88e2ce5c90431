/* ACL users, rules, checks and the ACL command (see acl.h).
 *
 * Command permissions are a bitmap per selector indexed by command id: the
 * rows of kv_commands first (id = row index), then the subcommands of the
 * container rows (CONFIG GET, CLIENT KILL...), which Redis 7.0 permits and
 * categorises one by one; acl_tables.h lists them. One more bit, past the
 * last id, records "+@all" (future commands), which decides whether a rule
 * description starts from +@all or -@all. */
#include "kv/acl.h"

#include "core/log.h"
#include "kv/config.h"
#include "kv/mem.h"
#include "kv/pubsub.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

typedef struct {
    const char *container, *sub;
    uint32_t cats;
    int first_key, last_key, key_step, arity;
    unsigned flags; /* a subcommand's CMD_* flags */
} acl_subdef;

typedef struct {
    const char *name;
    unsigned char first, rest;
} acl_keydef;

#include "kv/acl_tables.h"

/* ---- SHA-256 (FIPS 180-4), for password hashes ---- */

typedef struct {
    uint32_t h[8];
    uint64_t len;
    unsigned char blk[64];
    size_t n;
} sha256_ctx;

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static uint32_t ror32(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(sha256_ctx *s, const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha_k[i] + w[i];
        uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
    s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha256_update(sha256_ctx *s, const unsigned char *p, size_t n)
{
    s->len += n;
    while (n) {
        size_t take = BK_MIN(n, 64 - s->n);
        memcpy(s->blk + s->n, p, take);
        s->n += take, p += take, n -= take;
        if (s->n == 64) {
            sha256_block(s, s->blk);
            s->n = 0;
        }
    }
}

/* Writes the 64 lower-case hex digits of SHA-256(p, n) into hex. */
static void sha256_hex(const char *p, size_t n, char hex[64])
{
    sha256_ctx s = { .h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f,
                            0x9b05688c, 0x1f83d9ab, 0x5be0cd19 } };
    sha256_update(&s, (const unsigned char *)p, n);
    uint64_t bits = s.len * 8;
    unsigned char pad[72] = { 0x80 };
    size_t padn = (s.n < 56 ? 56 - s.n : 120 - s.n);
    for (int i = 0; i < 8; i++)
        pad[padn + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(&s, pad, padn + 8);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            unsigned char byte = (unsigned char)(s.h[i] >> (24 - 8 * j));
            hex[8 * i + 2 * j] = digits[byte >> 4];
            hex[8 * i + 2 * j + 1] = digits[byte & 15];
        }
}

/* ---- categories and command ids ---- */

static const char *const acl_categories[] = {
    "keyspace", "read",      "write", "set",       "sortedset",  "list",        "hash",
    "string",   "bitmap",    "hyperloglog", "geo", "stream",     "pubsub",      "admin",
    "fast",     "slow",      "blocking", "dangerous", "connection", "transaction", "scripting",
};
#define ACL_NCATS ((int)BK_ARRAY_LEN(acl_categories))

enum { KEY_R = 1, KEY_W = 2 };
enum { CHAN_NONE, CHAN_PUBLISH, CHAN_SUBSCRIBE, CHAN_PSUBSCRIBE };
/* Commands whose keys depend on their arguments (Redis's variable flags,
 * keyword and incomplete key specs). */
enum { VAR_NONE, VAR_SET, VAR_BITFIELD, VAR_STORE, VAR_GEOSTORE, VAR_MIGRATE };

typedef struct {
    const kv_cmd *cmd; /* the row (for subcommands: the container's) */
    char *name;        /* "get", "config|get" (subcommands own theirs) */
    uint32_t cats;
    int parent;        /* -1, or the container's id */
    int sub0, nsub;    /* a container's subcommand ids */
    int first_key, last_key, key_step, arity; /* as in kv_cmd */
    unsigned char kf_first, kf_rest, var, chan;
    signed char nk_pos; /* numkeys argument (0: keys from the row) */
    signed char nk_dest; /* 1: a destination key at argv[1] before numkeys */
    unsigned flags;      /* a subcommand's CMD_* flags (Redis's; the row has the container's) */
} acl_cmd;

/* Commands whose keys follow a numkeys argument (Redis's key specs). */
static const struct {
    const char *name;
    signed char pos, dest;
} numkeys_cmds[] = {
    { "zunionstore", 2, 1 }, { "zinterstore", 2, 1 }, { "zdiffstore", 2, 1 },
    { "zunion", 1, 0 },      { "zinter", 1, 0 },      { "zdiff", 1, 0 },
    { "zintercard", 1, 0 },  { "sintercard", 1, 0 },  { "lmpop", 1, 0 },
    { "zmpop", 1, 0 },       { "blmpop", 2, 0 },      { "bzmpop", 2, 0 },
    { "eval", 2, 0 },        { "evalsha", 2, 0 },     { "eval_ro", 2, 0 },
    { "evalsha_ro", 2, 0 },  { "fcall", 2, 0 },       { "fcall_ro", 2, 0 },
};

/* ---- users ---- */

enum { SEL_ROOT = 1, SEL_ALLKEYS = 2, SEL_ALLCHANNELS = 4, SEL_ALLCOMMANDS = 8 };
enum { U_ON = 1, U_OFF = 2, U_NOPASS = 4, U_SKIP_SANITIZE = 8, U_SANITIZE = 16 };

static const struct {
    const char *name;
    unsigned flag;
} user_flags[] = {
    { "on", U_ON }, { "off", U_OFF }, { "nopass", U_NOPASS },
    { "skip-sanitize-payload", U_SKIP_SANITIZE }, { "sanitize-payload", U_SANITIZE },
};

typedef struct {
    unsigned flags; /* KEY_R | KEY_W for key patterns; 0 for channels */
    size_t len;
    char p[];
} acl_pat;

typedef struct {
    acl_pat **v;
    int n, cap;
} acl_plist;

typedef struct {
    unsigned flags;
    acl_plist keys, chans;
    char ***firstargs; /* NULL, or per id NULL or a NULL-terminated array */
    uint64_t bits[];
} acl_sel;

typedef struct {
    kv_acl_user pub;
    unsigned flags;
    char *name;
    size_t nlen;
    char (*pw)[64];
    int npw, pwcap;
    acl_sel **sel; /* sel[0] is the root selector */
    int nsel, selcap;
} acl_user;

/* Reasons, ordered as Redis orders them when selectors disagree. */
enum { ACL_OK = 0, DENIED_CMD = 1, DENIED_KEY = 2, DENIED_AUTH = 3, DENIED_CHANNEL = 4 };
enum { CTX_TOPLEVEL, CTX_MULTI, CTX_LUA };

typedef struct {
    uint64_t count;
    int reason, context;
    char *object, *username, *cinfo;
    int64_t ctime_ms;
} acl_log_entry;

/* Errors of rule parsing (Redis's errno values), with their texts. */
enum {
    E_OK,
    E_SYNTAX,
    E_UNKNOWN,
    E_KEYS_AFTER_ALL,
    E_CHANNELS_AFTER_ALL,
    E_NO_SUCH_PASS,
    E_BAD_HASH,
    E_DUPLICATE,
    E_FIRSTARG_SUB,
};
static const char *const rule_errors[] = {
    [E_OK] = "OK",
    [E_SYNTAX] = "Syntax error",
    [E_UNKNOWN] = "Unknown command or category name in ACL",
    [E_KEYS_AFTER_ALL] = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not "
                         "valid and does not have any effect. Try 'resetkeys' to start with an "
                         "empty list of patterns",
    [E_CHANNELS_AFTER_ALL] = "Adding a pattern after the * pattern (or the 'allchannels' flag) "
                             "is not valid and does not have any effect. Try 'resetchannels' to "
                             "start with an empty list of channels",
    [E_NO_SUCH_PASS] = "The password you are trying to remove from the user does not exist",
    [E_BAD_HASH] = ("The password hash must be exactly 64 characters and contain only "
                    "lowercase hexadecimal characters"),
    [E_DUPLICATE] = "Duplicate user found. A user can only be defined once in config files",
    [E_FIRSTARG_SUB] = "Allowing first-arg of a subcommand is not supported",
};

static struct {
    acl_cmd *cmds;
    int ncmd; /* rows of kv_commands */
    int nids; /* rows plus subcommands */
    int nwords;
    acl_user **users; /* sorted by name, bytewise */
    int nusers, ucap;
    acl_user *def;
    acl_log_entry **log; /* newest first */
    int nlog, logcap;
    char ***pending; /* "user" config lines: name, rules..., NULL */
    int npending;
    char *aclfile;
    long long log_max;
    unsigned pubsub_default; /* SEL_ALLCHANNELS or 0 */
    int ready;
} A = { .log_max = 128 };

static size_t sel_size(void) { return sizeof(acl_sel) + (size_t)A.nwords * sizeof(uint64_t); }

static int future_bit(void) { return A.nids; }

static int sel_bit(const acl_sel *s, int id)
{
    return (s->bits[id / 64] >> (id % 64)) & 1;
}

static void sel_set_bit(acl_sel *s, int id, int on)
{
    if (on) {
        s->bits[id / 64] |= 1ull << (id % 64);
    } else {
        s->bits[id / 64] &= ~(1ull << (id % 64));
        s->flags &= ~(unsigned)SEL_ALLCOMMANDS;
    }
}

/* ---- pattern lists ---- */

static acl_pat *pat_new(const char *p, size_t n, unsigned flags)
{
    acl_pat *x = kv_malloc(sizeof *x + n + 1);
    x->flags = flags;
    x->len = n;
    memcpy(x->p, p, n);
    x->p[n] = '\0';
    return x;
}

static acl_pat *plist_find(const acl_plist *l, const char *p, size_t n)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i]->len == n && memcmp(l->v[i]->p, p, n) == 0)
            return l->v[i];
    return NULL;
}

static void plist_add(acl_plist *l, acl_pat *x)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4;
        l->v = kv_realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n++] = x;
}

static void plist_clear(acl_plist *l)
{
    for (int i = 0; i < l->n; i++)
        kv_free(l->v[i]);
    l->n = 0;
}

static void plist_free(acl_plist *l)
{
    plist_clear(l);
    kv_free(l->v);
    l->v = NULL;
    l->cap = 0;
}

static void plist_copy(acl_plist *dst, const acl_plist *src)
{
    for (int i = 0; i < src->n; i++)
        plist_add(dst, pat_new(src->v[i]->p, src->v[i]->len, src->v[i]->flags));
}

/* ---- selectors ---- */

static acl_sel *sel_new(unsigned flags)
{
    acl_sel *s = kv_calloc(sel_size());
    s->flags = flags | A.pubsub_default;
    return s;
}

static void firstargs_reset_id(acl_sel *s, int id)
{
    if (!s->firstargs || !s->firstargs[id])
        return;
    for (int i = 0; s->firstargs[id][i]; i++)
        kv_free(s->firstargs[id][i]);
    kv_free(s->firstargs[id]);
    s->firstargs[id] = NULL;
}

static void firstargs_reset(acl_sel *s)
{
    if (!s->firstargs)
        return;
    for (int id = 0; id < A.nids; id++)
        firstargs_reset_id(s, id);
    kv_free(s->firstargs);
    s->firstargs = NULL;
}

static void firstargs_add(acl_sel *s, int id, const char *arg, size_t n)
{
    if (!s->firstargs)
        s->firstargs = kv_calloc((size_t)A.nids * sizeof *s->firstargs);
    int items = 0;
    if (s->firstargs[id]) {
        for (; s->firstargs[id][items]; items++)
            if (strlen(s->firstargs[id][items]) == n &&
                strncasecmp(s->firstargs[id][items], arg, n) == 0)
                return;
    }
    s->firstargs[id] = kv_realloc(s->firstargs[id], (size_t)(items + 2) * sizeof(char *));
    s->firstargs[id][items] = kv_strndup(arg, n);
    s->firstargs[id][items + 1] = NULL;
}

static void sel_free(acl_sel *s)
{
    if (!s)
        return;
    plist_free(&s->keys);
    plist_free(&s->chans);
    firstargs_reset(s);
    kv_free(s);
}

static acl_sel *sel_dup(const acl_sel *src)
{
    acl_sel *s = kv_calloc(sel_size());
    s->flags = src->flags;
    memcpy(s->bits, src->bits, (size_t)A.nwords * sizeof(uint64_t));
    plist_copy(&s->keys, &src->keys);
    plist_copy(&s->chans, &src->chans);
    if (src->firstargs)
        for (int id = 0; id < A.nids; id++)
            for (int i = 0; src->firstargs[id] && src->firstargs[id][i]; i++)
                firstargs_add(s, id, src->firstargs[id][i], strlen(src->firstargs[id][i]));
    return s;
}

/* Allows or denies one command; a container takes its subcommands along. */
static void sel_change(acl_sel *s, int id, int allow)
{
    sel_set_bit(s, id, allow);
    firstargs_reset_id(s, id);
    const acl_cmd *ac = &A.cmds[id];
    for (int k = 0; k < ac->nsub; k++)
        sel_set_bit(s, ac->sub0 + k, allow);
}

static void sel_set_category(acl_sel *s, uint32_t cat, int allow)
{
    for (int id = 0; id < A.nids; id++)
        if (A.cmds[id].cats & cat)
            sel_change(s, id, allow);
}

static int category_index(const char *p, size_t n)
{
    for (int i = 0; i < ACL_NCATS; i++)
        if (strlen(acl_categories[i]) == n && strncasecmp(acl_categories[i], p, n) == 0)
            return i;
    return -1;
}

static int find_top(const char *p, size_t n)
{
    for (int id = 0; id < A.ncmd; id++)
        if (strlen(A.cmds[id].name) == n && strncasecmp(A.cmds[id].name, p, n) == 0)
            return id;
    return -1;
}

static int find_sub(int parent, const char *p, size_t n)
{
    const acl_cmd *ac = &A.cmds[parent];
    size_t plen = strlen(ac->name) + 1;
    for (int k = 0; k < ac->nsub; k++) {
        const char *sub = A.cmds[ac->sub0 + k].name + plen;
        if (strlen(sub) == n && strncasecmp(sub, p, n) == 0)
            return ac->sub0 + k;
    }
    return -1;
}

const char *kv_acl_subcommand(const kv_cmd *cmd, bk_str sub, int *arity, int *has_subs)
{
    const acl_cmd *ac = &A.cmds[cmd - kv_commands];
    *has_subs = A.cmds && ac->nsub > 0;
    if (!*has_subs)
        return NULL;
    int id = find_sub((int)(cmd - kv_commands), sub.p, sub.len);
    if (id < 0)
        return NULL;
    *arity = A.cmds[id].arity;
    return A.cmds[id].name;
}

unsigned kv_cmd_flags(const kv_cmd *cmd, int argc, const bk_str *argv)
{
    if (argc < 2 || !A.cmds || A.cmds[cmd - kv_commands].nsub == 0)
        return cmd->flags;
    int id = find_sub((int)(cmd - kv_commands), argv[1].p, argv[1].len);
    return id < 0 ? cmd->flags : A.cmds[id].flags;
}

/* "get", "config|get": Redis's strict lookup of a command by full name. */
static int find_command(const char *p, size_t n)
{
    const char *bar = memchr(p, '|', n);
    if (!bar)
        return find_top(p, n);
    size_t tl = (size_t)(bar - p);
    if (memchr(bar + 1, '|', n - tl - 1))
        return -1;
    int top = find_top(p, tl);
    if (top < 0 || A.cmds[top].nsub == 0)
        return -1;
    return find_sub(top, bar + 1, n - tl - 1);
}

static int str_has_space(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r') || p[i] == '\0')
            return 1;
    return 0;
}

static int op_is(const char *op, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(op, lit, n) == 0;
}

/* Applies one selector rule (Redis's ACLSetSelector). */
static int sel_apply(acl_sel *s, const char *op, size_t n)
{
    /* Redis reads command rules as C strings: a NUL ends the rule
     * ("+select|\0b" has an empty first arg, "-get\0x" is -get). */
    if (n && (op[0] == '+' || op[0] == '-'))
        n = strnlen(op, n);
    if (op_is(op, n, "allkeys") || op_is(op, n, "~*")) {
        s->flags |= SEL_ALLKEYS;
        plist_clear(&s->keys);
    } else if (op_is(op, n, "resetkeys")) {
        s->flags &= ~(unsigned)SEL_ALLKEYS;
        plist_clear(&s->keys);
    } else if (op_is(op, n, "allchannels") || op_is(op, n, "&*")) {
        s->flags |= SEL_ALLCHANNELS;
        plist_clear(&s->chans);
    } else if (op_is(op, n, "resetchannels")) {
        s->flags &= ~(unsigned)SEL_ALLCHANNELS;
        plist_clear(&s->chans);
    } else if (op_is(op, n, "allcommands") || op_is(op, n, "+@all")) {
        memset(s->bits, 0xff, (size_t)A.nwords * sizeof(uint64_t));
        s->flags |= SEL_ALLCOMMANDS;
        firstargs_reset(s);
    } else if (op_is(op, n, "nocommands") || op_is(op, n, "-@all")) {
        memset(s->bits, 0, (size_t)A.nwords * sizeof(uint64_t));
        s->flags &= ~(unsigned)SEL_ALLCOMMANDS;
        firstargs_reset(s);
    } else if (op[0] == '~' || op[0] == '%') {
        if (s->flags & SEL_ALLKEYS)
            return E_KEYS_AFTER_ALL;
        unsigned flags = 0;
        size_t off = 1;
        if (op[0] == '%') {
            for (; off < n; off++) {
                char ch = ascii_lower(op[off]);
                if (ch == 'r' && !(flags & KEY_R)) {
                    flags |= KEY_R;
                } else if (ch == 'w' && !(flags & KEY_W)) {
                    flags |= KEY_W;
                } else if (op[off] == '~') {
                    off++;
                    break;
                } else {
                    return E_SYNTAX;
                }
            }
            if (!flags)
                return E_SYNTAX;
        } else {
            flags = KEY_R | KEY_W;
        }
        if (str_has_space(op + off, n - off))
            return E_SYNTAX;
        acl_pat *old = plist_find(&s->keys, op + off, n - off);
        if (old)
            old->flags |= flags;
        else
            plist_add(&s->keys, pat_new(op + off, n - off, flags));
        s->flags &= ~(unsigned)SEL_ALLKEYS;
    } else if (op[0] == '&') {
        if (s->flags & SEL_ALLCHANNELS)
            return E_CHANNELS_AFTER_ALL;
        if (str_has_space(op + 1, n - 1))
            return E_SYNTAX;
        if (!plist_find(&s->chans, op + 1, n - 1))
            plist_add(&s->chans, pat_new(op + 1, n - 1, 0));
        s->flags &= ~(unsigned)SEL_ALLCHANNELS;
    } else if (op[0] == '+' && (n < 2 || op[1] != '@')) {
        const char *name = op + 1;
        size_t nl = n - 1;
        const char *bar = NULL;
        for (size_t i = nl; i > 0; i--)
            if (name[i - 1] == '|') {
                bar = name + i - 1;
                break;
            }
        if (!bar) {
            int id = find_command(name, nl);
            if (id < 0)
                return E_UNKNOWN;
            sel_change(s, id, 1);
            return E_OK;
        }
        size_t base = (size_t)(bar - name);
        int id = find_command(name, base);
        if (id < 0)
            return E_UNKNOWN;
        if (A.cmds[id].parent >= 0)
            return E_FIRSTARG_SUB;
        size_t subl = nl - base - 1;
        if (subl == 0)
            return E_SYNTAX;
        if (A.cmds[id].nsub) {
            int sub = find_command(name, nl);
            if (sub < 0)
                return E_UNKNOWN;
            sel_change(s, sub, 1);
        } else {
            log_warn("Deprecation warning: Allowing a first arg of an otherwise blocked "
                     "command is a misuse of ACL and may get disabled in the future "
                     "(offender: +%.*s)", (int)nl, name);
            firstargs_add(s, id, bar + 1, subl);
        }
    } else if (op[0] == '-' && (n < 2 || op[1] != '@')) {
        int id = find_command(op + 1, n - 1);
        if (id < 0)
            return E_UNKNOWN;
        sel_change(s, id, 0);
    } else if ((op[0] == '+' || op[0] == '-') && n >= 2 && op[1] == '@') {
        int cat = category_index(op + 2, n - 2);
        if (cat < 0)
            return E_UNKNOWN;
        sel_set_category(s, 1u << cat, op[0] == '+');
    } else {
        return E_SYNTAX;
    }
    return E_OK;
}

/* ---- users ---- */

static void user_update_open(acl_user *u)
{
    unsigned all = SEL_ALLCOMMANDS | SEL_ALLKEYS | SEL_ALLCHANNELS;
    u->pub.open = u->nsel == 1 && (u->sel[0]->flags & all) == all;
}

static void user_add_sel(acl_user *u, acl_sel *s)
{
    if (u->nsel == u->selcap) {
        u->selcap = u->selcap ? u->selcap * 2 : 2;
        u->sel = kv_realloc(u->sel, (size_t)u->selcap * sizeof *u->sel);
    }
    u->sel[u->nsel++] = s;
}

static acl_user *user_new(const char *name, size_t n)
{
    acl_user *u = kv_calloc(sizeof *u);
    u->name = kv_strndup(name, n);
    u->nlen = n;
    u->flags = U_OFF;
    user_add_sel(u, sel_new(SEL_ROOT));
    user_update_open(u);
    return u;
}

static void user_clear(acl_user *u)
{
    for (int i = 0; i < u->nsel; i++)
        sel_free(u->sel[i]);
    u->nsel = 0;
    u->npw = 0;
}

static void user_free(acl_user *u)
{
    if (!u)
        return;
    user_clear(u);
    kv_free(u->sel);
    kv_free(u->pw);
    kv_free(u->name);
    kv_free(u);
}

/* dst gets src's rules; names stay. */
static void user_copy(acl_user *dst, const acl_user *src)
{
    user_clear(dst);
    for (int i = 0; i < src->nsel; i++)
        user_add_sel(dst, sel_dup(src->sel[i]));
    if (src->npw > dst->pwcap) {
        dst->pwcap = src->npw;
        dst->pw = kv_realloc(dst->pw, (size_t)dst->pwcap * sizeof *dst->pw);
    }
    if (src->npw)
        memcpy(dst->pw, src->pw, (size_t)src->npw * sizeof *dst->pw);
    dst->npw = src->npw;
    dst->flags = src->flags;
    user_update_open(dst);
}

static int pw_find(const acl_user *u, const char hex[64])
{
    for (int i = 0; i < u->npw; i++)
        if (memcmp(u->pw[i], hex, 64) == 0)
            return i;
    return -1;
}

static int valid_hash(const char *p, size_t n)
{
    if (n != 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

static int user_apply(acl_user *u, const char *op, size_t n);

/* "(rule rule ...)": a new selector from the rules inside. */
static int user_add_selector(acl_user *u, const char *op, size_t n)
{
    char *inner = kv_strndup(op + 1, n - 2);
    char **argv = NULL;
    int argc = kv_split_line(inner, &argv);
    kv_free(inner);
    if (argc < 0)
        return E_SYNTAX;
    acl_sel *s = sel_new(0);
    int rc = E_OK;
    for (int i = 0; i < argc && rc == E_OK; i++)
        rc = sel_apply(s, argv[i], strlen(argv[i]));
    kv_free_argv(argc, argv);
    if (rc != E_OK) {
        sel_free(s);
        return rc;
    }
    user_add_sel(u, s);
    return E_OK;
}

/* Applies one user rule (Redis's ACLSetUser). */
static int user_apply(acl_user *u, const char *op, size_t n)
{
    int rc = E_OK;
    if (n == 0)
        return E_OK;
    if (op_is(op, n, "on")) {
        u->flags = (u->flags | U_ON) & ~(unsigned)U_OFF;
    } else if (op_is(op, n, "off")) {
        u->flags = (u->flags | U_OFF) & ~(unsigned)U_ON;
    } else if (op_is(op, n, "skip-sanitize-payload")) {
        u->flags = (u->flags | U_SKIP_SANITIZE) & ~(unsigned)U_SANITIZE;
    } else if (op_is(op, n, "sanitize-payload")) {
        u->flags = (u->flags | U_SANITIZE) & ~(unsigned)U_SKIP_SANITIZE;
    } else if (op_is(op, n, "nopass")) {
        u->flags |= U_NOPASS;
        u->npw = 0;
    } else if (op_is(op, n, "resetpass")) {
        u->flags &= ~(unsigned)U_NOPASS;
        u->npw = 0;
    } else if (op[0] == '>' || op[0] == '#') {
        char hex[64];
        if (op[0] == '>') {
            sha256_hex(op + 1, n - 1, hex);
        } else {
            if (!valid_hash(op + 1, n - 1))
                return E_BAD_HASH;
            memcpy(hex, op + 1, 64);
        }
        if (pw_find(u, hex) < 0) {
            if (u->npw == u->pwcap) {
                u->pwcap = u->pwcap ? u->pwcap * 2 : 2;
                u->pw = kv_realloc(u->pw, (size_t)u->pwcap * sizeof *u->pw);
            }
            memcpy(u->pw[u->npw++], hex, 64);
        }
        u->flags &= ~(unsigned)U_NOPASS;
    } else if (op[0] == '<' || op[0] == '!') {
        char hex[64];
        if (op[0] == '<') {
            sha256_hex(op + 1, n - 1, hex);
        } else {
            if (!valid_hash(op + 1, n - 1))
                return E_BAD_HASH;
            memcpy(hex, op + 1, 64);
        }
        int i = pw_find(u, hex);
        if (i < 0)
            return E_NO_SUCH_PASS;
        memmove(u->pw[i], u->pw[i + 1], (size_t)(u->npw - i - 1) * sizeof *u->pw);
        u->npw--;
    } else if (op[0] == '(' && op[n - 1] == ')') {
        rc = user_add_selector(u, op, n);
    } else if (op_is(op, n, "clearselectors")) {
        for (int i = 1; i < u->nsel; i++)
            sel_free(u->sel[i]);
        u->nsel = 1;
    } else if (op_is(op, n, "reset")) {
        static const char *const steps[] = { "resetpass", "resetkeys", "resetchannels" };
        for (size_t i = 0; i < BK_ARRAY_LEN(steps); i++)
            user_apply(u, steps[i], strlen(steps[i]));
        if (A.pubsub_default & SEL_ALLCHANNELS)
            user_apply(u, "allchannels", 11);
        user_apply(u, "off", 3);
        user_apply(u, "sanitize-payload", 16);
        user_apply(u, "clearselectors", 14);
        user_apply(u, "-@all", 5);
    } else {
        rc = sel_apply(u->sel[0], op, n);
    }
    user_update_open(u);
    return rc;
}

/* ---- the user set ---- */

static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, BK_MIN(an, bn));
    if (c)
        return c;
    return an < bn ? -1 : an > bn;
}

/* Index of the user, or -(insertion point) - 1. */
static int users_search(acl_user **v, int n, const char *name, size_t nl)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = name_cmp(v[mid]->name, v[mid]->nlen, name, nl);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

static acl_user *user_get(const char *name, size_t nl)
{
    int i = users_search(A.users, A.nusers, name, nl);
    return i >= 0 ? A.users[i] : NULL;
}

static void users_insert(acl_user ***v, int *n, int *cap, acl_user *u)
{
    int i = users_search(*v, *n, u->name, u->nlen);
    assert(i < 0);
    i = -i - 1;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        *v = kv_realloc(*v, (size_t)*cap * sizeof **v);
    }
    memmove(*v + i + 1, *v + i, (size_t)(*n - i) * sizeof **v);
    (*v)[i] = u;
    (*n)++;
}

static void users_remove_at(int i)
{
    memmove(A.users + i, A.users + i + 1, (size_t)(A.nusers - i - 1) * sizeof *A.users);
    A.nusers--;
}

static acl_user *default_user_new(void)
{
    acl_user *u = user_new("default", 7);
    static const char *const rules[] = { "+@all", "~*", "&*", "on", "nopass" };
    for (size_t i = 0; i < BK_ARRAY_LEN(rules); i++)
        user_apply(u, rules[i], strlen(rules[i]));
    return u;
}

/* Closes a client at once, or after its reply when it is the caller. */
static void kill_client(kv_client *self, kv_client *x)
{
    if (x == self)
        x->flags |= CLIENT_CLOSE_AFTER_REPLY;
    else
        kv_client_close(x);
}

/* The user is going away: its clients fall back to the default user,
 * unauthenticated, and are closed. */
static void user_free_and_kill(kv_client *self, acl_user *u)
{
    for (kv_client *x = srv.clients, *next; x; x = next) {
        next = x->next;
        if (x->user == &u->pub) {
            x->user = &A.def->pub;
            x->flags &= ~(unsigned)CLIENT_AUTHED;
            kill_client(self, x);
        }
    }
    user_free(u);
}

/* ---- rule descriptions (ACL LIST, GETUSER, SAVE) ---- */

static void count_category(const acl_sel *s, uint32_t cat, int *on, int *off)
{
    *on = *off = 0;
    for (int id = 0; id < A.nids; id++)
        if (A.cmds[id].cats & cat) {
            if (sel_bit(s, id))
                (*on)++;
            else
                (*off)++;
        }
}

static void buf_cstr(bk_buf *b, const char *s) { buf_append(b, s, strlen(s)); }

/* Command rules: +@all or -@all, then the categories that bring the bitmap
 * closest, then single commands, each applied to a scratch selector as it
 * is emitted so the result reproduces the bitmap exactly. */
static void describe_commands(const acl_sel *s, bk_buf *out)
{
    acl_sel *fake = kv_calloc(sel_size());
    acl_sel *temp = kv_calloc(sel_size());
    size_t start = out->len;
    int additive = !sel_bit(s, future_bit());
    sel_apply(fake, additive ? "-@all" : "+@all", 5);
    buf_cstr(out, additive ? "-@all " : "+@all ");
    memcpy(temp->bits, s->bits, (size_t)A.nwords * sizeof(uint64_t));
    char applied[ACL_NCATS] = { 0 };
    for (;;) {
        int best = -1, mindiff = 1 << 30, maxsame = 0;
        for (int j = 0; j < ACL_NCATS; j++) {
            if (applied[j])
                continue;
            int on, off;
            count_category(temp, 1u << j, &on, &off);
            int diff = additive ? off : on, same = additive ? on : off;
            if (same > diff && (diff < mindiff || (diff == mindiff && same > maxsame))) {
                best = j;
                mindiff = diff;
                maxsame = same;
            }
        }
        if (best < 0)
            break;
        sel_set_category(fake, 1u << best, additive);
        sel_set_category(temp, 1u << best, !additive);
        buf_cstr(out, additive ? "+@" : "-@");
        buf_cstr(out, acl_categories[best]);
        buf_append(out, " ", 1);
        applied[best] = 1;
    }
    for (int id = 0; id < A.ncmd; id++) {
        const acl_cmd *ac = &A.cmds[id];
        for (int k = -1; k < ac->nsub; k++) {
            int x = k < 0 ? id : ac->sub0 + k;
            int ub = sel_bit(s, x), fb = sel_bit(fake, x);
            if (ub != fb) {
                buf_append(out, ub ? "+" : "-", 1);
                buf_cstr(out, A.cmds[x].name);
                buf_append(out, " ", 1);
                sel_change(fake, x, ub);
            }
            if (!ub && s->firstargs && s->firstargs[x])
                for (int j = 0; s->firstargs[x][j]; j++) {
                    buf_append(out, "+", 1);
                    buf_cstr(out, A.cmds[x].name);
                    buf_append(out, "|", 1);
                    buf_cstr(out, s->firstargs[x][j]);
                    buf_append(out, " ", 1);
                }
        }
    }
    if (out->len > start)
        out->len--; /* the last space */
    sel_free(fake);
    sel_free(temp);
}

static void describe_key_pattern(bk_buf *out, const acl_pat *p)
{
    static const char *const prefix[] = { "", "%R~", "%W~", "~" };
    buf_cstr(out, prefix[p->flags & 3]);
    buf_append(out, p->p, p->len);
}

static void describe_selector(const acl_sel *s, bk_buf *out)
{
    if (s->flags & SEL_ALLKEYS) {
        buf_cstr(out, "~* ");
    } else {
        for (int i = 0; i < s->keys.n; i++) {
            describe_key_pattern(out, s->keys.v[i]);
            buf_append(out, " ", 1);
        }
    }
    if (s->flags & SEL_ALLCHANNELS) {
        buf_cstr(out, "&* ");
    } else {
        buf_cstr(out, "resetchannels ");
        for (int i = 0; i < s->chans.n; i++) {
            buf_append(out, "&", 1);
            buf_append(out, s->chans.v[i]->p, s->chans.v[i]->len);
            buf_append(out, " ", 1);
        }
    }
    describe_commands(s, out);
}

static void describe_user(const acl_user *u, bk_buf *out)
{
    for (size_t j = 0; j < BK_ARRAY_LEN(user_flags); j++)
        if (u->flags & user_flags[j].flag) {
            buf_cstr(out, user_flags[j].name);
            buf_append(out, " ", 1);
        }
    for (int i = 0; i < u->npw; i++) {
        buf_append(out, "#", 1);
        buf_append(out, u->pw[i], 64);
        buf_append(out, " ", 1);
    }
    for (int i = 0; i < u->nsel; i++) {
        if (i > 0)
            buf_cstr(out, " (");
        describe_selector(u->sel[i], out);
        if (i > 0)
            buf_append(out, ")", 1);
    }
}

/* "user NAME RULES" */
static void describe_user_line(const acl_user *u, bk_buf *out)
{
    buf_cstr(out, "user ");
    buf_append(out, u->name, u->nlen);
    buf_append(out, " ", 1);
    describe_user(u, out);
}

/* ---- permission checks ---- */

static int key_match(const acl_sel *s, bk_str key, unsigned need)
{
    for (int i = 0; i < s->keys.n; i++) {
        const acl_pat *p = s->keys.v[i];
        if ((p->flags & need) != need)
            continue;
        if (kv_glob_match(p->p, p->len, key.p, key.len, 0))
            return 1;
    }
    return 0;
}

static int chan_match(const acl_plist *l, bk_str ch, int literal)
{
    for (int i = 0; i < l->n; i++) {
        const acl_pat *p = l->v[i];
        if (literal ? (p->len == ch.len && memcmp(p->p, ch.p, ch.len) == 0)
                    : kv_glob_match(p->p, p->len, ch.p, ch.len, 0))
            return 1;
    }
    return 0;
}

static int has_arg(int argc, const bk_str *argv, int from, const char *lower)
{
    for (int i = from; i < argc; i++)
        if (str_ieq_lit(argv[i], lower, strlen(lower)))
            return 1;
    return 0;
}

/* Fills pos/flags with the key arguments of the command (at most argc). */
static int command_keys(const acl_cmd *ac, int argc, const bk_str *argv, int *pos, unsigned *fl)
{
    int n = 0;
    unsigned first = ac->kf_first, rest = ac->kf_rest;
    if (ac->var == VAR_SET)
        first = rest = KEY_W | (has_arg(argc, argv, 3, "get") ? KEY_R : 0);
    else if (ac->var == VAR_BITFIELD)
        first = rest = KEY_R | ((has_arg(argc, argv, 2, "set") || has_arg(argc, argv, 2, "incrby"))
                                    ? KEY_W : 0);
    if (ac->cmd && (ac->cmd->proc == xread_command || ac->cmd->proc == xreadgroup_command)) {
        /* XREAD/XREADGROUP: the keys are the first half of what follows
         * STREAMS, searched from argument 1 (XREAD) or 4 (XREADGROUP) as
         * Redis's key spec does (stream-family edit) */
        for (int i = ac->cmd->proc == xread_command ? 1 : 4; i < argc; i++) {
            if (BK_STR_IEQ(argv[i], "streams")) {
                for (int k = 0; k < (argc - i - 1) / 2; k++) {
                    pos[n] = i + 1 + k;
                    fl[n++] = KEY_R;
                }
                break;
            }
        }
        return n;
    }
    if (ac->var == VAR_MIGRATE) {
        /* MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw]
         * [AUTH2 user pw] [KEYS key...] */
        if (argc > 3 && argv[3].len) {
            pos[n] = 3;
            fl[n++] = first;
            return n;
        }
        for (int i = 6; i < argc; i++) {
            if (BK_STR_IEQ(argv[i], "auth")) {
                i++;
            } else if (BK_STR_IEQ(argv[i], "auth2")) {
                i += 2;
            } else if (BK_STR_IEQ(argv[i], "keys")) {
                for (i++; i < argc; i++) {
                    pos[n] = i;
                    fl[n++] = first;
                }
            }
        }
        return n;
    }
    if (ac->nk_pos > 0) {
        if (ac->nk_dest && argc > 1) {
            pos[n] = 1;
            fl[n++] = first;
        }
        long long nk;
        /* a numkeys that is not a count of the arguments there names no keys */
        if (ac->nk_pos >= argc ||
            kv_parse_ll(argv[ac->nk_pos].p, argv[ac->nk_pos].len, &nk) < 0 || nk <= 0 ||
            nk > argc - ac->nk_pos - 1)
            return n;
        for (long long i = 0; i < nk; i++) {
            pos[n] = ac->nk_pos + 1 + (int)i;
            fl[n++] = ac->nk_dest ? rest : first;
        }
        return n;
    }
    if (ac->first_key <= 0)
        return 0;
    int last = ac->last_key < 0 ? argc + ac->last_key : ac->last_key;
    int step = ac->key_step > 0 ? ac->key_step : 1;
    for (int i = ac->first_key; i <= last && i < argc; i += step) {
        pos[n] = i;
        fl[n++] = i == ac->first_key ? first : rest;
    }
    if (ac->var == VAR_STORE || ac->var == VAR_GEOSTORE) {
        /* SORT ... STORE dst; GEORADIUS ... STORE|STOREDIST dst */
        for (int i = 2; i + 1 < argc && n < argc; i++)
            if (BK_STR_IEQ(argv[i], "store") ||
                (ac->var == VAR_GEOSTORE && BK_STR_IEQ(argv[i], "storedist"))) {
                pos[n] = i + 1;
                fl[n++] = KEY_W;
                i++;
            }
    }
    return n;
}

/* The id a command line runs as: a known subcommand of a container, else
 * the row itself. */
static int command_id(const kv_cmd *cmd, int argc, const bk_str *argv)
{
    int id = (int)(cmd - kv_commands);
    if (A.cmds[id].nsub && argc >= 2) {
        int sub = find_sub(id, argv[1].p, argv[1].len);
        if (sub >= 0)
            return sub;
    }
    return id;
}

static int sel_check(const acl_sel *s, int id, int argc, const bk_str *argv, int *kpos, unsigned *kfl,
                     int *nkeys, int *idx)
{
    const acl_cmd *ac = &A.cmds[id];
    if (!(s->flags & SEL_ALLCOMMANDS) && !(ac->cmd->flags & CMD_NO_AUTH) && !sel_bit(s, id)) {
        int ai = ac->parent >= 0 ? 2 : 1;
        if (argc <= ai || !s->firstargs || !s->firstargs[id])
            return DENIED_CMD;
        int ok = 0;
        for (int j = 0; s->firstargs[id][j] && !ok; j++) {
            const char *fa = s->firstargs[id][j];
            ok = strlen(fa) == argv[ai].len && strncasecmp(fa, argv[ai].p, argv[ai].len) == 0;
        }
        if (!ok)
            return DENIED_CMD;
    }
    if (!(s->flags & SEL_ALLKEYS)) {
        if (*nkeys < 0)
            *nkeys = command_keys(ac, argc, argv, kpos, kfl);
        for (int j = 0; j < *nkeys; j++)
            if (!key_match(s, argv[kpos[j]], kfl[j])) {
                *idx = kpos[j];
                return DENIED_KEY;
            }
    }
    if (!(s->flags & SEL_ALLCHANNELS) && ac->chan != CHAN_NONE) {
        int from = 1, to = ac->chan == CHAN_PUBLISH ? BK_MIN(2, argc) : argc;
        for (int j = from; j < to; j++)
            if (!chan_match(&s->chans, argv[j], ac->chan == CHAN_PSUBSCRIBE)) {
                *idx = j;
                return DENIED_CHANNEL;
            }
    }
    return ACL_OK;
}

/* Redis's choice among selectors: OK if any allows; else the "largest"
 * reason, and for equal reasons the last argument position. */
static int user_check(const acl_user *u, int id, int argc, const bk_str *argv, int *idx)
{
    int stackpos[64];
    unsigned stackfl[64];
    int *kpos = stackpos;
    unsigned *kfl = stackfl;
    if (argc > 64) {
        kpos = kv_malloc((size_t)argc * sizeof *kpos);
        kfl = kv_malloc((size_t)argc * sizeof *kfl);
    }
    int nkeys = -1, best = DENIED_CMD, best_idx = 0, rc = ACL_OK;
    for (int i = 0; i < u->nsel; i++) {
        int at = 0;
        rc = sel_check(u->sel[i], id, argc, argv, kpos, kfl, &nkeys, &at);
        if (rc == ACL_OK)
            break;
        if (rc > best || (rc == best && at > best_idx)) {
            best = rc;
            best_idx = at;
        }
    }
    if (rc != ACL_OK) {
        rc = best;
        *idx = best_idx;
    }
    if (kpos != stackpos) {
        kv_free(kpos);
        kv_free(kfl);
    }
    return rc;
}

/* ---- the ACL log ---- */

/* CLIENT LIST's line for c, naming the command being refused as Redis
 * does (cmd= shows the last command otherwise). */
static char *client_info_line(kv_client *c)
{
    bk_buf b = { 0 };
    const kv_cmd *last = c->lastcmd;
    if (c->cmd)
        c->lastcmd = c->cmd;
    kv_client_info(c, &b);
    c->lastcmd = last;
    if (b.len && b.data[b.len - 1] == '\n')
        b.len--;
    char *s = kv_strndup(b.data ? b.data : "", b.len);
    buf_free(&b);
    return s;
}

static void log_entry_free(acl_log_entry *e)
{
    kv_free(e->object);
    kv_free(e->username);
    kv_free(e->cinfo);
    kv_free(e);
}

static void log_trim(void)
{
    while (A.nlog > A.log_max)
        log_entry_free(A.log[--A.nlog]);
}

static void log_add(kv_client *c, int reason, int context, bk_str object, bk_str username)
{
    int64_t now = kv_unix_ms();
    /* A similar recent entry (same reason, context, object and user within
     * a minute, among the last ten) is bumped instead of added. */
    for (int i = 0; i < A.nlog && i < 10; i++) {
        acl_log_entry *e = A.log[i];
        int64_t d = e->ctime_ms - now;
        if (e->reason != reason || e->context != context || (d < 0 ? -d : d) > 60000 ||
            strlen(e->object) != object.len || memcmp(e->object, object.p, object.len) != 0 ||
            strlen(e->username) != username.len ||
            memcmp(e->username, username.p, username.len) != 0)
            continue;
        e->count++;
        e->ctime_ms = now;
        kv_free(e->cinfo);
        e->cinfo = client_info_line(c);
        memmove(A.log + 1, A.log, (size_t)i * sizeof *A.log);
        A.log[0] = e;
        return;
    }
    acl_log_entry *e = kv_calloc(sizeof *e);
    e->count = 1;
    e->reason = reason;
    e->context = context;
    e->object = kv_strndup(object.p, object.len);
    e->username = kv_strndup(username.p, username.len);
    e->cinfo = client_info_line(c);
    e->ctime_ms = now;
    if (A.nlog == A.logcap) {
        A.logcap = A.logcap ? A.logcap * 2 : 16;
        A.log = kv_realloc(A.log, (size_t)A.logcap * sizeof *A.log);
    }
    memmove(A.log + 1, A.log, (size_t)A.nlog * sizeof *A.log);
    A.log[0] = e;
    A.nlog++;
    log_trim();
}

static void log_clear(void)
{
    for (int i = 0; i < A.nlog; i++)
        log_entry_free(A.log[i]);
    A.nlog = 0;
}

static bk_str user_name_str(const kv_client *c)
{
    const acl_user *u = (const acl_user *)c->user;
    return u ? (bk_str){ u->name, u->nlen } : BK_STR("default");
}

/* Logs a denial of a command line of c (argv: c's own, or a script's). */
static void log_denial(kv_client *c, const bk_str *argv, int rc, int id, int idx, int context)
{
    bk_str object = rc == DENIED_CMD ? (bk_str){ A.cmds[id].name, strlen(A.cmds[id].name) }
                                  : argv[idx];
    log_add(c, rc, context, object, user_name_str(c));
}

int kv_acl_deny(kv_client *c, const kv_cmd *cmd)
{
    const acl_user *u = (const acl_user *)c->user;
    int id = command_id(cmd, c->argc, c->argv), idx = 0;
    const acl_cmd *ac = &A.cmds[id];
    /* Redis checks a subcommand's arity before the ACL */
    if (ac->parent >= 0 && ((ac->arity > 0 && c->argc != ac->arity) ||
                            (ac->arity < 0 && c->argc < -ac->arity))) {
        reply_errorf(c, "ERR wrong number of arguments for '%s' command", ac->name);
        return -1;
    }
    int rc = user_check(u, id, c->argc, c->argv, &idx);
    if (rc == ACL_OK)
        return 0;
    c->cmd = cmd; /* for cmd= in the log's client info */
    log_denial(c, c->argv, rc, id, idx, (c->flags & CLIENT_MULTI) ? CTX_MULTI : CTX_TOPLEVEL);
    c->cmd = NULL; /* a rejected call (the caller counts it), not a failed one */
    if (rc == DENIED_CMD)
        reply_errorf(c, "NOPERM this user has no permissions to run the '%s' command",
                     A.cmds[id].name);
    else if (rc == DENIED_KEY)
        reply_error(c, "NOPERM this user has no permissions to access one of the keys used as "
                       "arguments");
    else
        reply_error(c, "NOPERM this user has no permissions to access one of the channels used "
                       "as arguments");
    return -1;
}

int kv_acl_exec_deny(kv_client *c, const kv_cmd *cmd)
{
    const acl_user *u = (const acl_user *)c->user;
    if (!u || u->pub.open)
        return 0;
    int id = command_id(cmd, c->argc, c->argv), idx = 0;
    int rc = user_check(u, id, c->argc, c->argv, &idx);
    if (rc == ACL_OK)
        return 0;
    c->cmd = cmd;
    log_denial(c, c->argv, rc, id, idx, CTX_MULTI);
    static const char *const reasons[] = {
        [DENIED_CMD] = "no permission to execute the command or subcommand",
        [DENIED_KEY] = "no permission to touch the specified keys",
        [DENIED_AUTH] = "no permission",
        [DENIED_CHANNEL] = "no permission to access one of the channels used as arguments",
    };
    c->cmd = cmd;
    reply_errorf(c, "NOPERM ACLs rules changed between the moment the transaction was "
                    "accumulated and the EXEC call. This command is no longer allowed for the "
                    "following reason: %s", reasons[rc]);
    return -1;
}

int kv_acl_script_check(const kv_client *caller, const kv_cmd *cmd, int argc, const bk_str *argv)
{
    int id = (int)(cmd - kv_commands);
    if (A.cmds[id].nsub && argc >= 2 && find_sub(id, argv[1].p, argv[1].len) < 0)
        return -1;
    const acl_user *u = (const acl_user *)caller->user;
    if (!u || u->pub.open)
        return 1;
    /* A command whose keys depend on its arguments (Redis's getkeys
     * functions: SET, BITFIELD, SORT, GEORADIUS, MIGRATE) without its first
     * key, for a user whose keys are checked: Redis 7.0.15 reads the key
     * past the end of argv (SET and MIGRATE crash it, the others answer at
     * random). Like the fix Redis made later (the arity checked first),
     * this is an error; every other wrong arity keeps 7.0.15's answer. */
    const acl_cmd *ac = &A.cmds[id];
    if (ac->var != VAR_NONE && argc <= ac->first_key)
        for (int i = 0; i < u->nsel; i++)
            if (!(u->sel[i]->flags & SEL_ALLKEYS))
                return -2;
    int idx = 0;
    return user_check(u, command_id(cmd, argc, argv), argc, argv, &idx) == ACL_OK;
}

const char *kv_acl_script_deny(kv_client *caller, const kv_cmd *cmd, int argc, const bk_str *argv)
{
    const acl_user *u = (const acl_user *)caller->user;
    if (!u || u->pub.open)
        return NULL;
    int id = command_id(cmd, argc, argv), idx = 0;
    int rc = user_check(u, id, argc, argv, &idx);
    if (rc == ACL_OK)
        return NULL;
    log_denial(caller, argv, rc, id, idx, CTX_LUA);
    if (rc == DENIED_CMD)
        return "The user executing the script can't run this command or subcommand";
    if (rc == DENIED_KEY)
        return "The user executing the script can't access at least one of the keys mentioned "
               "in the command arguments";
    return "The user executing the script can't publish to the channel mentioned in the command";
}

int kv_acl_full_key_access(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv)
{
    const acl_user *u = (const acl_user *)c->user;
    if (!u || u->pub.open)
        return 1;
    int id = command_id(cmd, argc, argv);
    for (int i = 0; i < u->nsel; i++) {
        const acl_sel *s = u->sel[i];
        int idx = 0, nkeys = 0; /* keys not looked at: only the command */
        if (sel_check(s, id, argc, argv, NULL, NULL, &nkeys, &idx) != ACL_OK)
            continue;
        if (s->flags & SEL_ALLKEYS)
            return 1;
        for (int j = 0; j < s->keys.n; j++)
            if (s->keys.v[j]->len == 1 && s->keys.v[j]->p[0] == '*' &&
                (s->keys.v[j]->flags & KEY_R))
                return 1;
    }
    return 0;
}

/* ---- authentication ---- */

static int credentials_ok(const acl_user *u, bk_str pass)
{
    if (!u || (u->flags & U_OFF))
        return 0;
    if (u->flags & U_NOPASS)
        return 1;
    char hex[64];
    sha256_hex(pass.p, pass.len, hex);
    unsigned ok = 0;
    for (int i = 0; i < u->npw; i++) {
        unsigned diff = 0;
        for (int j = 0; j < 64; j++) /* every byte, whatever matches */
            diff |= (unsigned)(hex[j] ^ u->pw[i][j]);
        ok |= diff == 0;
    }
    return ok != 0;
}

int kv_acl_authenticate(kv_client *c, bk_str user, bk_str pass)
{
    acl_user *u = user_get(user.p, user.len);
    if (credentials_ok(u, pass)) {
        c->user = &u->pub;
        return 0;
    }
    log_add(c, DENIED_AUTH, (c->flags & CLIENT_MULTI) ? CTX_MULTI : CTX_TOPLEVEL, c->argv[0],
            user);
    return -1;
}

kv_acl_user *kv_acl_default_user(void) { return A.def ? &A.def->pub : NULL; }

int kv_acl_default_nopass(void)
{
    if (!A.def)
        return !srv.cfg.requirepass || !srv.cfg.requirepass[0];
    return (A.def->flags & U_NOPASS) && !(A.def->flags & U_OFF);
}

int kv_acl_protected_refuses(const struct sockaddr *sa)
{
    int nopass = A.def ? (A.def->flags & U_NOPASS) != 0
                       : (!srv.cfg.requirepass || !srv.cfg.requirepass[0]);
    return srv.cfg.protected_mode && nopass && !kv_peer_is_local(sa);
}

int kv_acl_client_reset(kv_client *c)
{
    if (c->user)
        c->user = &A.def->pub;
    return kv_acl_default_nopass();
}

const char *kv_acl_client_user(const kv_client *c)
{
    const acl_user *u = (const acl_user *)c->user;
    return u ? u->name : "default";
}

int kv_acl_client_skip_sanitize(const kv_client *c)
{
    const acl_user *u = (const acl_user *)c->user;
    return u && (u->flags & U_SKIP_SANITIZE);
}

int kv_acl_user_exists(bk_str name) { return user_get(name.p, name.len) != NULL; }

int kv_acl_client_is(const kv_client *c, bk_str name)
{
    const acl_user *u = (const acl_user *)c->user;
    bk_str un = u ? (bk_str){ u->name, u->nlen } : BK_STR("default");
    return un.len == name.len && memcmp(un.p, name.p, name.len) == 0;
}

void kv_acl_requirepass_changed(const char *pw, size_t n)
{
    if (!A.def)
        return;
    user_apply(A.def, "resetpass", 9);
    if (n) {
        char *op = kv_malloc(n + 1);
        op[0] = '>';
        memcpy(op + 1, pw, n);
        user_apply(A.def, op, n + 1);
        kv_free(op);
    } else {
        user_apply(A.def, "nopass", 6);
    }
}

/* ---- Pub/Sub clients that lost channels ---- */

/* After a SETUSER changed u into nu: closes u's subscribers whose
 * channels or patterns nu no longer allows. */
static void kill_pubsub_clients(kv_client *self, const acl_user *nu, const acl_user *u)
{
    for (int i = 0; i < nu->nsel; i++)
        if (nu->sel[i]->flags & SEL_ALLCHANNELS)
            return;
    acl_plist up = { 0 };
    for (int i = 0; i < nu->nsel; i++)
        for (int j = 0; j < nu->sel[i]->chans.n; j++)
            plist_add(&up, nu->sel[i]->chans.v[j]);
    int match = 1;
    for (int i = 0; i < u->nsel && match; i++) /* losing allchannels is never a superset */
        if (u->sel[i]->flags & SEL_ALLCHANNELS)
            match = 0;
    for (int i = 0; i < u->nsel && match; i++)
        for (int j = 0; j < u->sel[i]->chans.n && match; j++)
            match = plist_find(&up, u->sel[i]->chans.v[j]->p, u->sel[i]->chans.v[j]->len) != NULL;
    for (kv_client *x = srv.clients, *next; x && !match; x = next) {
        next = x->next;
        if (x->user != &u->pub || !x->subs || pubsub_total(x) == 0)
            continue;
        int kill = 0;
        for (int j = 0; j < x->subs->npat && !kill; j++) {
            kv_chan *ch = x->subs->pat[j];
            kill = !chan_match(&up, (bk_str){ ch->name, ch->node.aux }, 1);
        }
        for (int j = 0; j < x->subs->nch && !kill; j++) {
            kv_chan *ch = x->subs->ch[j];
            kill = !chan_match(&up, (bk_str){ ch->name, ch->node.aux }, 0);
        }
        for (int j = 0; j < x->subs->nsch && !kill; j++) {
            kv_chan *ch = x->subs->sch[j];
            kill = !chan_match(&up, (bk_str){ ch->name, ch->node.aux }, 0);
        }
        if (kill)
            kill_client(self, x);
    }
    kv_free(up.v); /* the patterns belong to nu */
}

/* ---- SETUSER argument merging: "(+get" "~x)" is one selector ---- */

/* Returns the merged rules (binary safe; their bytes are owned by the
 * array, free with free_strs) and their count, or NULL with *bad set to
 * the argument that opened an unclosed "(". */
static bk_str *merge_selectors(int argc, const bk_str *argv, int *outc, int *bad)
{
    bk_str *out = kv_malloc((size_t)(argc + 1) * sizeof *out);
    int n = 0, open = -1;
    bk_buf sel = { 0 };
    for (int j = 0; j < argc; j++) {
        bk_str op = argv[j];
        if (op.len > 0 && op.p[0] == '(' && op.p[op.len - 1] != ')') {
            sel.len = 0;
            buf_append(&sel, op.p, op.len);
            open = j;
            continue;
        }
        if (open >= 0) {
            buf_append(&sel, " ", 1);
            buf_append(&sel, op.p, op.len);
            if (op.len > 0 && op.p[op.len - 1] == ')') {
                open = -1;
                out[n++] = (bk_str){ kv_strndup(sel.data, sel.len), sel.len };
            }
            continue;
        }
        out[n++] = (bk_str){ kv_strndup(op.p, op.len), op.len };
    }
    buf_free(&sel);
    if (open >= 0) {
        for (int i = 0; i < n; i++)
            kv_free((char *)out[i].p);
        kv_free(out);
        *bad = open;
        return NULL;
    }
    *outc = n;
    return out;
}

static void free_strs(bk_str *v, int n)
{
    for (int i = 0; i < n; i++)
        kv_free((char *)v[i].p);
    kv_free(v);
}

/* ---- loading and saving ---- */

static void users_free_all(acl_user **v, int n)
{
    for (int i = 0; i < n; i++)
        user_free(v[i]);
    kv_free(v);
}

static void errf(bk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void errf(bk_buf *b, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        buf_append(b, line, BK_MIN((size_t)n, sizeof line - 1));
}

/* Loads the aclfile into a new user set and swaps it in only when every
 * line is valid. Returns NULL, or the errors (caller frees). */
static char *load_file(kv_client *self, const char *path)
{
    FILE *f = fopen(path, "r");
    bk_buf errs = { 0 };
    if (!f) {
        errf(&errs, "Error loading ACLs, opening file '%s': %s", path, strerror(errno));
        goto done;
    }
    bk_buf text = { 0 };
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_append(&text, chunk, got);
    fclose(f);
    acl_user **nv = NULL;
    int nn = 0, ncap = 0;
    int lineno = 0;
    bk_str *words = NULL;
    for (size_t off = 0; off < text.len;) {
        const char *line = text.data + off;
        const char *nl = memchr(line, '\n', text.len - off);
        size_t ll = nl ? (size_t)(nl - line) : text.len - off;
        off += ll + (nl ? 1 : 0);
        lineno++;
        while (ll && memchr(" \t\r\n", line[0], 4))
            line++, ll--;
        while (ll && memchr(" \t\r\n", line[ll - 1], 4))
            ll--;
        if (ll == 0)
            continue;
        /* split on single spaces, as Redis does (empty rules are no-ops) */
        size_t nspaces = 0;
        for (size_t i = 0; i < ll; i++)
            nspaces += line[i] == ' ';
        kv_free(words);
        words = kv_malloc((nspaces + 1) * sizeof *words);
        int nw = 0;
        for (size_t s = 0, i = 0; i <= ll; i++)
            if (i == ll || line[i] == ' ') {
                words[nw++] = (bk_str){ line + s, i - s };
                s = i + 1;
            }
        if (nw < 2 || words[0].len != 4 || memcmp(words[0].p, "user", 4) != 0) {
            errf(&errs, "%s:%d should start with user keyword followed by the username. ", path,
                 lineno);
            continue;
        }
        if (str_has_space(words[1].p, words[1].len)) {
            errf(&errs, "'%s:%d: username '%.*s' contains invalid characters. ", path, lineno,
                 (int)words[1].len, words[1].p);
            continue;
        }
        if (users_search(nv, nn, words[1].p, words[1].len) >= 0) {
            errf(&errs, "WARNING: Duplicate user '%.*s' found on line %d. ", (int)words[1].len,
                 words[1].p, lineno);
            continue;
        }
        acl_user *u = user_new(words[1].p, words[1].len);
        users_insert(&nv, &nn, &ncap, u);
        int margc = 0, bad = 0;
        bk_str *rules = merge_selectors(nw - 2, words + 2, &margc, &bad);
        if (!rules) {
            errf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", path, lineno);
            continue;
        }
        for (int j = 0; j < margc; j++) {
            const char *r = rules[j].p;
            size_t rl = rules[j].len;
            while (rl && memchr("\t\r\n", r[rl - 1], 3))
                rl--;
            int rc = user_apply(u, r, rl);
            if (rc != E_OK)
                errf(&errs, "%s:%d: Error in applying operation '%.*s': %s. ", path, lineno,
                     (int)rl, r, rule_errors[rc]);
        }
        free_strs(rules, margc);
    }
    buf_free(&text);
    kv_free(words);
    if (errs.len) {
        users_free_all(nv, nn);
        errf(&errs, "WARNING: ACL errors detected, no change to the previously active ACL rules "
                    "was performed");
        goto done;
    }
    /* The default user object stays (clients point at it): it takes the
     * new rules; every other old user goes, and its clients with it. */
    int di = users_search(nv, nn, "default", 7);
    acl_user *nd = di >= 0 ? nv[di] : default_user_new();
    user_copy(A.def, nd);
    user_free(nd);
    if (di >= 0)
        nv[di] = A.def;
    else
        users_insert(&nv, &nn, &ncap, A.def);
    acl_user **old = A.users;
    int on = A.nusers;
    A.users = nv, A.nusers = nn, A.ucap = ncap;
    for (int i = 0; i < on; i++)
        if (old[i] != A.def)
            user_free_and_kill(self, old[i]);
    kv_free(old);
done:
    if (!errs.len) {
        buf_free(&errs);
        return NULL;
    }
    char *s = kv_strndup(errs.data, errs.len);
    buf_free(&errs);
    return s;
}

static int save_file(const char *path)
{
    bk_buf out = { 0 };
    for (int i = 0; i < A.nusers; i++) {
        describe_user_line(A.users[i], &out);
        buf_append(&out, "\n", 1);
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d-%lld", path, (int)getpid(), (long long)kv_unix_ms());
    int rc = -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_warn("Opening temp ACL file for ACL SAVE: %s", strerror(errno));
        goto out;
    }
    if (out.len && write(fd, out.data, out.len) != (ssize_t)out.len) {
        log_warn("Writing ACL file for ACL SAVE: %s", strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        log_warn("Renaming ACL file for ACL SAVE: %s", strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    buf_free(&out);
    return rc;
}

/* ---- init ---- */

static const acl_keydef *keydef_find(const char *name)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(acl_keydefs); i++)
        if (strcmp(acl_keydefs[i].name, name) == 0)
            return &acl_keydefs[i];
    return NULL;
}

static uint32_t parse_categories(const char *s)
{
    uint32_t m = 0;
    while (s && *s) {
        while (*s == ' ')
            s++;
        const char *w = s;
        while (*s && *s != ' ')
            s++;
        if (s > w && w[0] == '@') {
            int c = category_index(w + 1, (size_t)(s - w - 1));
            if (c >= 0)
                m |= 1u << c;
        }
    }
    return m;
}

static void cmd_key_access(acl_cmd *ac)
{
    const acl_keydef *kd = keydef_find(ac->name);
    if (kd) {
        ac->kf_first = kd->first;
        ac->kf_rest = kd->rest;
    } else {
        unsigned f = (ac->cmd->flags & CMD_WRITE) ? KEY_W : KEY_R;
        ac->kf_first = ac->kf_rest = (unsigned char)f;
    }
}

static void build_command_ids(void)
{
    size_t nsubs = 0;
    for (size_t i = 0; i < kv_ncommands; i++)
        for (size_t k = 0; k < BK_ARRAY_LEN(acl_subdefs); k++)
            if (acl_subdefs[k].sub && strcmp(acl_subdefs[k].container, kv_commands[i].name) == 0)
                nsubs++;
    A.ncmd = (int)kv_ncommands;
    A.nids = A.ncmd + (int)nsubs;
    A.nwords = A.nids / 64 + 1; /* room for the future-commands bit */
    A.cmds = kv_calloc((size_t)A.nids * sizeof *A.cmds);
    int next = A.ncmd;
    for (int i = 0; i < A.ncmd; i++) {
        acl_cmd *ac = &A.cmds[i];
        ac->cmd = &kv_commands[i];
        ac->name = (char *)kv_commands[i].name;
        ac->parent = -1;
        ac->cats = parse_categories(kv_commands[i].acl);
        ac->first_key = kv_commands[i].first_key;
        ac->last_key = kv_commands[i].last_key;
        ac->key_step = kv_commands[i].key_step;
        ac->arity = kv_commands[i].arity;
        cmd_key_access(ac);
        static const char *const chans[] = { [CHAN_PUBLISH] = "publish",
                                             [CHAN_SUBSCRIBE] = "subscribe",
                                             [CHAN_PSUBSCRIBE] = "psubscribe" };
        for (int k = 1; k < (int)BK_ARRAY_LEN(chans); k++)
            if (strcmp(ac->name, chans[k]) == 0)
                ac->chan = (unsigned char)k;
        /* Shard channels sit where keys do (for cluster slots), but their
         * key specs are NOT_KEY: checked as channels, never as keys. */
        if (strcmp(ac->name, "spublish") == 0)
            ac->chan = CHAN_PUBLISH;
        if (strcmp(ac->name, "ssubscribe") == 0)
            ac->chan = CHAN_SUBSCRIBE;
        if (strcmp(ac->name, "spublish") == 0 || strcmp(ac->name, "ssubscribe") == 0 ||
            strcmp(ac->name, "sunsubscribe") == 0)
            ac->first_key = ac->last_key = ac->key_step = 0;
        static const struct {
            const char *name;
            unsigned char var;
        } vars[] = { { "set", VAR_SET },
                     { "bitfield", VAR_BITFIELD },
                     { "sort", VAR_STORE },
                     { "georadius", VAR_GEOSTORE },
                     { "georadiusbymember", VAR_GEOSTORE },
                     { "migrate", VAR_MIGRATE } };
        for (size_t k = 0; k < BK_ARRAY_LEN(vars); k++)
            if (strcmp(ac->name, vars[k].name) == 0)
                ac->var = vars[k].var;
        for (size_t k = 0; k < BK_ARRAY_LEN(numkeys_cmds); k++)
            if (strcmp(ac->name, numkeys_cmds[k].name) == 0) {
                ac->nk_pos = numkeys_cmds[k].pos;
                ac->nk_dest = numkeys_cmds[k].dest;
            }
        ac->sub0 = next;
        for (size_t k = 0; k < BK_ARRAY_LEN(acl_subdefs); k++) {
            const acl_subdef *sd = &acl_subdefs[k];
            if (strcmp(sd->container, ac->name) != 0)
                continue;
            if (!sd->sub) {
                ac->cats = sd->cats; /* a container's own categories */
                continue;
            }
            acl_cmd *sc = &A.cmds[next++];
            size_t nl = strlen(ac->name), sl = strlen(sd->sub);
            sc->name = kv_malloc(nl + sl + 2);
            memcpy(sc->name, ac->name, nl);
            sc->name[nl] = '|';
            memcpy(sc->name + nl + 1, sd->sub, sl + 1);
            sc->cmd = ac->cmd;
            sc->parent = i;
            sc->cats = sd->cats;
            sc->first_key = sd->first_key;
            sc->last_key = sd->last_key;
            sc->key_step = sd->key_step;
            sc->arity = sd->arity;
            sc->flags = sd->flags;
            cmd_key_access(sc);
            ac->nsub++;
        }
    }
}

int kv_acl_init(void)
{
    build_command_ids();
    A.def = default_user_new();
    users_insert(&A.users, &A.nusers, &A.ucap, A.def);
    A.ready = 1;
    if (srv.cfg.requirepass && srv.cfg.requirepass[0])
        kv_acl_requirepass_changed(srv.cfg.requirepass, strlen(srv.cfg.requirepass));
    if (A.aclfile && A.aclfile[0] && A.npending) {
        log_error("Configuring Redis with users defined in redis.conf and at the same setting "
                  "an ACL file path is invalid. This setup is very likely to lead to "
                  "configuration errors and security holes, please define either an ACL file "
                  "or declare users directly in your redis.conf, but not both.");
        return -1;
    }
    for (int i = 0; i < A.npending; i++) {
        char **rules = A.pending[i];
        size_t nl = strlen(rules[0]);
        if (str_has_space(rules[0], nl)) {
            log_error("Spaces not allowed in ACL usernames");
            return -1;
        }
        acl_user *u = user_get(rules[0], nl);
        if (u) {
            user_apply(u, "reset", 5);
        } else {
            u = user_new(rules[0], nl);
            users_insert(&A.users, &A.nusers, &A.ucap, u);
        }
        for (int j = 1; rules[j]; j++) {
            int rc = user_apply(u, rules[j], strlen(rules[j]));
            if (rc != E_OK) {
                log_error("Error loading ACL rule '%s' for the user named '%s': %s", rules[j],
                          rules[0], rule_errors[rc]);
                return -1;
            }
        }
        if (u->flags & U_OFF)
            log_info("The user '%s' is disabled (there is no 'on' modifier in the user "
                     "description). Make sure this is not a configuration error.", rules[0]);
    }
    if (A.aclfile && A.aclfile[0]) {
        char *errs = load_file(NULL, A.aclfile);
        if (errs) {
            log_error("Aborting Redis startup because of ACL errors: %s", errs);
            kv_free(errs);
            return -1;
        }
    }
    return 0;
}

void kv_acl_free(void)
{
    users_free_all(A.users, A.nusers);
    A.users = NULL;
    A.nusers = A.ucap = 0;
    A.def = NULL;
    log_clear();
    kv_free(A.log);
    A.log = NULL;
    for (int i = A.ncmd; i < A.nids; i++)
        kv_free(A.cmds[i].name);
    kv_free(A.cmds);
    A.cmds = NULL;
    for (int i = 0; i < A.npending; i++) {
        for (int j = 0; A.pending[i][j]; j++)
            kv_free(A.pending[i][j]);
        kv_free(A.pending[i]);
    }
    kv_free(A.pending);
    A.pending = NULL;
    A.npending = 0;
    kv_free(A.aclfile);
    A.aclfile = NULL;
    A.ready = 0;
}

/* ---- config ---- */

int kv_acl_config_set(const char *name, int argc, char **argv, int at_runtime, char *err,
                      size_t errlen)
{
    if (strcasecmp(name, "user") == 0) {
        if (at_runtime)
            return 1;
        if (argc < 1) {
            snprintf(err, errlen, "wrong number of arguments");
            return -1;
        }
        for (int i = 0; i < A.npending; i++)
            if (strcmp(A.pending[i][0], argv[0]) == 0) {
                snprintf(err, errlen, "Error in user declaration '%s': %s", argv[0],
                         rule_errors[E_DUPLICATE]);
                return -1;
            }
        /* merge "(a" "b)" like SETUSER does */
        bk_str *words = kv_malloc((size_t)argc * sizeof *words);
        for (int i = 0; i < argc; i++)
            words[i] = (bk_str){ argv[i], strlen(argv[i]) };
        int margc = 0, bad = 0;
        bk_str *rules = merge_selectors(argc - 1, words + 1, &margc, &bad);
        kv_free(words);
        if (!rules) {
            snprintf(err, errlen, "Unmatched parenthesis in acl selector starting at '%s'.",
                     argv[bad + 1]);
            return -1;
        }
        char **line = kv_malloc((size_t)(margc + 2) * sizeof *line);
        line[0] = kv_strndup(argv[0], strlen(argv[0]));
        for (int i = 0; i < margc; i++)
            line[i + 1] = (char *)rules[i].p;
        line[margc + 1] = NULL;
        kv_free(rules);
        A.pending = kv_realloc(A.pending, (size_t)(A.npending + 1) * sizeof *A.pending);
        A.pending[A.npending++] = line;
        return 0;
    }
    if (strcasecmp(name, "aclfile") == 0) {
        if (argc != 1) {
            snprintf(err, errlen, "wrong number of arguments");
            return -1;
        }
        if (at_runtime) {
            snprintf(err, errlen, "can't set immutable config");
            return -1;
        }
        kv_free(A.aclfile);
        A.aclfile = kv_strndup(argv[0], strlen(argv[0]));
        return 0;
    }
    if (strcasecmp(name, "acllog-max-len") == 0) {
        long long v;
        if (argc != 1 || kv_parse_ll(argv[0], strlen(argv[0]), &v) < 0) {
            snprintf(err, errlen, "argument couldn't be parsed into an integer");
            return -1;
        }
        if (v < 0 || v > 2147483647LL) {
            snprintf(err, errlen, "argument must be between 0 and 2147483647 inclusive");
            return -1;
        }
        A.log_max = v;
        log_trim();
        return 0;
    }
    if (strcasecmp(name, "acl-pubsub-default") == 0) {
        if (argc != 1 ||
            (strcasecmp(argv[0], "allchannels") && strcasecmp(argv[0], "resetchannels"))) {
            snprintf(err, errlen, "argument(s) must be one of the following: allchannels, "
                                  "resetchannels");
            return -1;
        }
        A.pubsub_default = strcasecmp(argv[0], "allchannels") == 0 ? SEL_ALLCHANNELS : 0;
        return 0;
    }
    return 1;
}

void kv_acl_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                       void *ud)
{
    char num[32];
    snprintf(num, sizeof num, "%lld", A.log_max);
    const struct {
        const char *name, *value;
    } vals[] = {
        { "aclfile", A.aclfile ? A.aclfile : "" },
        { "acllog-max-len", num },
        { "acl-pubsub-default", A.pubsub_default ? "allchannels" : "resetchannels" },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(vals); i++)
        if (kv_glob_match(pattern.p, pattern.len, vals[i].name, strlen(vals[i].name), 1))
            fn(ud, vals[i].name, vals[i].value);
}

/* ---- the ACL command ---- */

static void reply_selector(kv_client *c, const acl_sel *s)
{
    bk_buf b = { 0 };
    reply_bulk_cstr(c, "commands");
    describe_commands(s, &b);
    reply_bulk(c, b.data ? b.data : "", b.len);
    b.len = 0;
    reply_bulk_cstr(c, "keys");
    if (s->flags & SEL_ALLKEYS) {
        buf_cstr(&b, "~*");
    } else {
        for (int i = 0; i < s->keys.n; i++) {
            if (i)
                buf_append(&b, " ", 1);
            describe_key_pattern(&b, s->keys.v[i]);
        }
    }
    reply_bulk(c, b.data ? b.data : "", b.len);
    b.len = 0;
    reply_bulk_cstr(c, "channels");
    if (s->flags & SEL_ALLCHANNELS) {
        buf_cstr(&b, "&*");
    } else {
        for (int i = 0; i < s->chans.n; i++) {
            if (i)
                buf_append(&b, " ", 1);
            buf_append(&b, "&", 1);
            buf_append(&b, s->chans.v[i]->p, s->chans.v[i]->len);
        }
    }
    reply_bulk(c, b.data ? b.data : "", b.len);
    buf_free(&b);
}

static void acl_setuser(kv_client *c)
{
    bk_str name = c->argv[2];
    if (str_has_space(name.p, name.len)) {
        reply_error(c, "ERR Usernames can't contain spaces or null characters");
        return;
    }
    int margc = 0, bad = 0;
    bk_str *rules = merge_selectors(c->argc - 3, c->argv + 3, &margc, &bad);
    if (!rules) {
        reply_errorf(c, "ERR Unmatched parenthesis in acl selector starting at '%.*s'.",
                     (int)c->argv[3 + bad].len, c->argv[3 + bad].p);
        return;
    }
    acl_user *u = user_get(name.p, name.len);
    acl_user *tmp = user_new(name.p, name.len);
    if (u)
        user_copy(tmp, u);
    for (int j = 0; j < margc; j++) {
        int rc = user_apply(tmp, rules[j].p, rules[j].len);
        if (rc != E_OK) {
            reply_errorf(c, "ERR Error in ACL SETUSER modifier '%s': %s", rules[j].p,
                         rule_errors[rc]);
            goto out;
        }
    }
    if (u) {
        kill_pubsub_clients(c, tmp, u);
    } else {
        u = user_new(name.p, name.len);
        users_insert(&A.users, &A.nusers, &A.ucap, u);
    }
    user_copy(u, tmp);
    reply_ok(c);
out:
    user_free(tmp);
    free_strs(rules, margc);
}

static void acl_deluser(kv_client *c)
{
    for (int j = 2; j < c->argc; j++)
        if (c->argv[j].len == 7 && memcmp(c->argv[j].p, "default", 7) == 0) {
            reply_error(c, "ERR The 'default' user cannot be removed");
            return;
        }
    long long deleted = 0;
    for (int j = 2; j < c->argc; j++) {
        int i = users_search(A.users, A.nusers, c->argv[j].p, c->argv[j].len);
        if (i < 0)
            continue;
        acl_user *u = A.users[i];
        users_remove_at(i);
        user_free_and_kill(c, u);
        deleted++;
    }
    reply_int(c, deleted);
}

static void acl_getuser(kv_client *c)
{
    acl_user *u = user_get(c->argv[2].p, c->argv[2].len);
    if (!u) {
        reply_null(c);
        return;
    }
    reply_map(c, 6);
    reply_bulk_cstr(c, "flags");
    int nf = 0;
    for (size_t j = 0; j < BK_ARRAY_LEN(user_flags); j++)
        nf += (u->flags & user_flags[j].flag) != 0;
    reply_set(c, nf);
    for (size_t j = 0; j < BK_ARRAY_LEN(user_flags); j++)
        if (u->flags & user_flags[j].flag)
            reply_bulk_cstr(c, user_flags[j].name);
    reply_bulk_cstr(c, "passwords");
    reply_array(c, u->npw);
    for (int i = 0; i < u->npw; i++)
        reply_bulk(c, u->pw[i], 64);
    reply_selector(c, u->sel[0]);
    reply_bulk_cstr(c, "selectors");
    reply_array(c, u->nsel - 1);
    for (int i = 1; i < u->nsel; i++) {
        reply_map(c, 3);
        reply_selector(c, u->sel[i]);
    }
}

static void acl_list(kv_client *c, int names_only)
{
    reply_array(c, A.nusers);
    bk_buf b = { 0 };
    for (int i = 0; i < A.nusers; i++) {
        if (names_only) {
            reply_bulk(c, A.users[i]->name, A.users[i]->nlen);
            continue;
        }
        b.len = 0;
        describe_user_line(A.users[i], &b);
        reply_bulk(c, b.data, b.len);
    }
    buf_free(&b);
}

void kv_acl_user_lines(void (*fn)(void *ud, const char *line, size_t n), void *ud)
{
    bk_buf b = { 0 };
    for (int i = 0; i < A.nusers; i++) {
        b.len = 0;
        describe_user_line(A.users[i], &b);
        fn(ud, b.data, b.len);
    }
    buf_free(&b);
}

static void acl_cat(kv_client *c)
{
    if (c->argc == 2) {
        reply_array(c, ACL_NCATS);
        for (int j = 0; j < ACL_NCATS; j++)
            reply_bulk_cstr(c, acl_categories[j]);
        return;
    }
    int cat = category_index(c->argv[2].p, c->argv[2].len);
    if (cat < 0) {
        reply_errorf(c, "ERR Unknown category '%.*s'", (int)BK_MIN(c->argv[2].len, 128),
                     c->argv[2].p);
        return;
    }
    size_t h = reply_defer(c);
    long long n = 0;
    for (int id = 0; id < A.ncmd; id++) {
        const acl_cmd *ac = &A.cmds[id];
        for (int k = -1; k < ac->nsub; k++) {
            int x = k < 0 ? id : ac->sub0 + k;
            if (A.cmds[x].cats & (1u << cat)) {
                reply_bulk_cstr(c, A.cmds[x].name);
                n++;
            }
        }
    }
    reply_defer_array(c, h, n);
}

static void acl_genpass(kv_client *c)
{
    long long bits = 256;
    if (c->argc == 3 && arg_ll(c, c->argv[2], &bits) < 0)
        return;
    if (bits <= 0 || bits > 4096) {
        reply_error(c, "ERR ACL GENPASS argument must be the number of bits for the output "
                       "password, a positive number up to 4096");
        return;
    }
    size_t chars = (size_t)(bits + 3) / 4;
    unsigned char raw[512];
    size_t need = (chars + 1) / 2, got = 0;
    while (got < need) {
        ssize_t r = getrandom(raw + got, need - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            for (; got < need; got++) /* no kernel entropy: the PRNG */
                raw[got] = (unsigned char)kv_rand64();
            break;
        }
        got += (size_t)r;
    }
    char hex[1024];
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < chars; i++)
        hex[i] = digits[(raw[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
    reply_bulk(c, hex, chars);
}

/* Redis 7.0 writes doubles with %.17g (0.029999999999999999), in both
 * protocols; reply_double writes the shortest form. */
static void reply_double_17g(kv_client *c, double v)
{
    char b[64];
    int n = snprintf(b + 1, sizeof b - 3, "%.17g", v);
    if (n < 0 || n > (int)sizeof b - 4)
        n = 0;
    if (c->resp >= 3) {
        b[0] = ',';
        memcpy(b + 1 + n, "\r\n", 2);
        reply_raw(c, b, (size_t)n + 3);
    } else {
        reply_bulk(c, b + 1, (size_t)n);
    }
}

static void acl_log(kv_client *c)
{
    long long count = 10;
    if (c->argc == 3) {
        if (BK_STR_IEQ(c->argv[2], "reset")) {
            log_clear();
            reply_ok(c);
            return;
        }
        if (arg_ll(c, c->argv[2], &count) < 0)
            return;
        if (count < 0)
            count = 0;
    }
    if (count > A.nlog)
        count = A.nlog;
    static const char *const reasons[] = { [DENIED_CMD] = "command", [DENIED_KEY] = "key",
                                           [DENIED_AUTH] = "auth", [DENIED_CHANNEL] = "channel" };
    static const char *const contexts[] = { [CTX_TOPLEVEL] = "toplevel", [CTX_MULTI] = "multi",
                                            [CTX_LUA] = "lua" };
    int64_t now = kv_unix_ms();
    reply_array(c, count);
    for (long long i = 0; i < count; i++) {
        const acl_log_entry *e = A.log[i];
        reply_map(c, 7);
        reply_bulk_cstr(c, "count");
        reply_int(c, (long long)e->count);
        reply_bulk_cstr(c, "reason");
        reply_bulk_cstr(c, reasons[e->reason]);
        reply_bulk_cstr(c, "context");
        reply_bulk_cstr(c, contexts[e->context]);
        reply_bulk_cstr(c, "object");
        reply_bulk_cstr(c, e->object);
        reply_bulk_cstr(c, "username");
        reply_bulk_cstr(c, e->username);
        reply_bulk_cstr(c, "age-seconds");
        reply_double_17g(c, (double)(now - e->ctime_ms) / 1000);
        reply_bulk_cstr(c, "client-info");
        reply_bulk_cstr(c, e->cinfo);
    }
}

static void acl_dryrun(kv_client *c)
{
    acl_user *u = user_get(c->argv[2].p, c->argv[2].len);
    if (!u) {
        reply_errorf(c, "ERR User '%.*s' not found", (int)c->argv[2].len, c->argv[2].p);
        return;
    }
    const kv_cmd *cmd = kv_cmd_lookup(c->argv[3]);
    if (!cmd) {
        reply_errorf(c, "ERR Command '%.*s' not found", (int)c->argv[3].len, c->argv[3].p);
        return;
    }
    int argc = c->argc - 3;
    const bk_str *argv = c->argv + 3;
    int id = command_id(cmd, argc, argv), idx = 0;
    /* as Redis's lookup: a container with an unknown subcommand is no command */
    if (A.cmds[id].nsub && argc >= 2) {
        reply_errorf(c, "ERR Command '%.*s' not found", (int)c->argv[3].len, c->argv[3].p);
        return;
    }
    int ar = A.cmds[id].arity;
    if ((ar > 0 && argc != ar) || (ar < 0 && argc < -ar)) {
        reply_errorf(c, "ERR wrong number of arguments for '%s' command", A.cmds[id].name);
        return;
    }
    int rc = user_check(u, id, argc, argv, &idx);
    char msg[512];
    if (rc == ACL_OK) {
        reply_ok(c);
        return;
    }
    if (rc == DENIED_CMD)
        snprintf(msg, sizeof msg, "This user has no permissions to run the '%s' command",
                 A.cmds[id].name);
    else
        snprintf(msg, sizeof msg, "This user has no permissions to access the '%.*s' %s",
                 (int)BK_MIN(argv[idx].len, 256), argv[idx].p, rc == DENIED_KEY ? "key" : "channel");
    reply_bulk_cstr(c, msg);
}

static void acl_help(kv_client *c)
{
    static const char *const lines[] = {
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Prints this help.",
    };
    reply_array(c, (long long)BK_ARRAY_LEN(lines));
    for (size_t i = 0; i < BK_ARRAY_LEN(lines); i++)
        reply_simple(c, lines[i]);
}

static void acl_load(kv_client *c)
{
    char *errs = load_file(c, A.aclfile);
    if (!errs) {
        reply_ok(c);
        return;
    }
    size_t n = strlen(errs);
    char *msg = kv_malloc(n + 5); /* not reply_errorf: the text may pass its 1 KB */
    memcpy(msg, "ERR ", 4);
    memcpy(msg + 4, errs, n + 1);
    reply_error(c, msg);
    kv_free(msg);
    kv_free(errs);
}

static void acl_save(kv_client *c)
{
    if (save_file(A.aclfile) == 0)
        reply_ok(c);
    else
        reply_error(c, "ERR There was an error trying to save the ACLs. Please check the server "
                       "logs for more information");
}

static void acl_whoami(kv_client *c)
{
    const acl_user *u = (const acl_user *)c->user;
    if (u)
        reply_bulk(c, u->name, u->nlen);
    else
        reply_null(c);
}

static void acl_users(kv_client *c) { acl_list(c, 1); }
static void acl_list_rules(kv_client *c) { acl_list(c, 0); }

static const struct {
    const char *name;
    int arity;
    int needs_file;
    void (*fn)(kv_client *c);
} acl_subs[] = {
    { "cat", -2, 0, acl_cat },         { "deluser", -3, 0, acl_deluser },
    { "dryrun", -4, 0, acl_dryrun },   { "genpass", -2, 0, acl_genpass },
    { "getuser", 3, 0, acl_getuser },  { "help", 2, 0, acl_help },
    { "list", 2, 0, acl_list_rules },  { "load", 2, 1, acl_load },
    { "log", -2, 0, acl_log },         { "save", 2, 1, acl_save },
    { "setuser", -3, 0, acl_setuser }, { "users", 2, 0, acl_users },
    { "whoami", 2, 0, acl_whoami },
};

void acl_command(kv_client *c)
{
    for (size_t i = 0; i < BK_ARRAY_LEN(acl_subs); i++) {
        if (!str_ieq_lit(c->argv[1], acl_subs[i].name, strlen(acl_subs[i].name)))
            continue;
        int ar = acl_subs[i].arity;
        if ((ar > 0 && c->argc != ar) || (ar < 0 && c->argc < -ar)) {
            reply_errorf(c, "ERR wrong number of arguments for 'acl|%s' command",
                         acl_subs[i].name);
            return;
        }
        /* cat, genpass and log take at most one argument */
        if ((acl_subs[i].fn == acl_cat || acl_subs[i].fn == acl_genpass ||
             acl_subs[i].fn == acl_log) && c->argc > 3) {
            reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                            "Try ACL HELP.", (int)BK_MIN(c->argv[1].len, 128), c->argv[1].p);
            return;
        }
        if (acl_subs[i].needs_file && (!A.aclfile || !A.aclfile[0])) {
            reply_error(c, "ERR This Redis instance is not configured to use an ACL file. You "
                           "may want to specify users via the ACL SETUSER command and then "
                           "issue a CONFIG REWRITE (assuming you have a Redis configuration "
                           "file set) in order to store users in the Redis configuration.");
            return;
        }
        acl_subs[i].fn(c);
        return;
    }
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try ACL HELP.", (int)BK_MIN(c->argv[1].len, 128),
                 c->argv[1].p);
}
