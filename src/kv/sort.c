/* SORT and SORT_RO over lists, sets and sorted sets: BY and GET patterns
 * (with "->" hash fields and "#"), LIMIT, ASC/DESC, ALPHA and STORE, with
 * Redis 7.0's replies, orderings and errors. Also the key positions of the
 * commands whose keys depend on their options (COMMAND GETKEYS). */
/* qsort_r, newlocale and strcoll_l come with _GNU_SOURCE (set by the build). */
#include "kv/acl.h"
#include "kv/notify.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

/* The C-string length of s: Redis reads patterns as C strings in places. */
static size_t cstr_len(bk_str s)
{
    const char *z = memchr(s.p, '\0', s.len);
    return z ? (size_t)(z - s.p) : s.len;
}

/* The value a BY/GET pattern names for element elem: "#" is elem itself;
 * otherwise the first '*' is replaced by elem, and "->field" (with at
 * least one character of field) reads a hash field instead of a string.
 * Returns 0 when there is no such value. *out stays valid until the
 * keyspace changes. scratch holds the key name between calls. */
static int pattern_value(kv_db *db, bk_str pat, bk_str elem, bk_buf *scratch, bk_str *out)
{
    size_t clen = cstr_len(pat);
    if (clen == 1 && pat.p[0] == '#') {
        *out = elem;
        return 1;
    }
    const char *star = memchr(pat.p, '*', clen);
    if (!star)
        return 0; /* a constant key makes no sense to GET */
    size_t after = (size_t)(star - pat.p) + 1;
    bk_str field = { NULL, 0 };
    for (size_t i = after; i + 2 < clen; i++) {
        if (pat.p[i] == '-' && pat.p[i + 1] == '>') {
            field = (bk_str){ pat.p + i + 2, pat.len - i - 2 };
            break;
        }
    }
    size_t prefix = (size_t)(star - pat.p);
    size_t postfix = pat.len - after - (field.p ? field.len + 2 : 0);
    scratch->len = 0;
    if (buf_reserve(scratch, prefix + elem.len + postfix + 1) < 0)
        abort();
    buf_put(scratch, pat.p, prefix);
    buf_put(scratch, elem.p, elem.len);
    buf_put(scratch, star + 1, postfix);
    kv_entry *e = db_lookup_read(db, (bk_str){ scratch->data, scratch->len });
    if (!e)
        return 0;
    if (field.p) {
        if (e->type != KV_HASH)
            return 0;
        return hash_get(entry_obj(e), field, out);
    }
    if (e->type != KV_STRING)
        return 0;
    *out = entry_str(e);
    return 1;
}

typedef struct {
    bk_str elem;
    double score;
    bk_str cmp;     /* the BY value for ALPHA */
    int has_cmp;
    char *cstr;  /* NUL-terminated copy for strcoll (ALPHA without STORE) */
} sort_item;

typedef struct {
    int desc, alpha, bypattern, store;
    locale_t loc;
} sort_ctx;

/* Binary comparison: memcmp, then the shorter first. */
static int cmp_binary(bk_str a, bk_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int r = n ? memcmp(a.p, b.p, n) : 0;
    if (r)
        return r;
    return a.len < b.len ? -1 : a.len > b.len;
}

/* The environment's collation, as Redis sets it with setlocale at start;
 * made once and never changing the process locale. */
static locale_t collation(void)
{
    static locale_t loc;
    static int tried;
    if (!tried) {
        tried = 1;
        loc = newlocale(LC_COLLATE_MASK, "", (locale_t)0);
        if (!loc)
            loc = newlocale(LC_COLLATE_MASK, "C", (locale_t)0);
    }
    return loc;
}

static int cmp_coll(const sort_ctx *x, const char *a, const char *b)
{
    return x->loc ? strcoll_l(a, b, x->loc) : strcmp(a, b);
}

static int sort_cmp(const void *pa, const void *pb, void *ud)
{
    const sort_item *a = pa, *b = pb;
    const sort_ctx *x = ud;
    int r;
    if (!x->alpha) {
        /* Equal scores fall back to the elements so the order is total. */
        r = a->score > b->score ? 1 : a->score < b->score ? -1 : cmp_binary(a->elem, b->elem);
    } else if (x->bypattern) {
        if (!a->has_cmp || !b->has_cmp)
            r = a->has_cmp == b->has_cmp ? 0 : !a->has_cmp ? -1 : 1;
        else if (x->store)
            r = cmp_binary(a->cmp, b->cmp);
        else
            r = cmp_coll(x, a->cstr, b->cstr);
    } else if (x->store) {
        r = cmp_binary(a->elem, b->elem);
    } else {
        r = cmp_coll(x, a->cstr, b->cstr);
    }
    return x->desc ? -r : r;
}

/* ---- partial quicksort ----
 *
 * Redis orders a LIMITed SORT BY and a GEO search with COUNT with a partial
 * quicksort: Bentley and McIlroy's "Engineering a sort function" (1993) as
 * the BSD libcs implement it (median of three, ninther above 40 elements,
 * insertion sort below 7 or when a pass swapped nothing, equal keys
 * gathered at the ends), recursing only into the parts that overlap the
 * wanted range. Its result for that range is sorted whatever the method;
 * doing the same swaps matters only for the order of equal keys, which is
 * what a client sees. */

typedef struct {
    size_t es;
    kv_cmp_fn *cmp;
    void *ud;
} pq_ctx;

static void pq_swap(char *a, char *b, size_t n)
{
    char t[64];
    while (n) {
        size_t k = n < sizeof t ? n : sizeof t;
        memcpy(t, a, k);
        memcpy(a, b, k);
        memcpy(b, t, k);
        a += k;
        b += k;
        n -= k;
    }
}

static char *pq_med3(const pq_ctx *x, char *a, char *b, char *c)
{
    if (x->cmp(a, b, x->ud) < 0)
        return x->cmp(b, c, x->ud) < 0 ? b : x->cmp(a, c, x->ud) < 0 ? c : a;
    return x->cmp(b, c, x->ud) > 0 ? b : x->cmp(a, c, x->ud) < 0 ? a : c;
}

static void pq_insertion(const pq_ctx *x, char *a, size_t n)
{
    size_t es = x->es;
    for (char *m = a + es; m < a + n * es; m += es)
        for (char *l = m; l > a && x->cmp(l - es, l, x->ud) > 0; l -= es)
            pq_swap(l, l - es, es);
}

/* Whether [l, r] (bytes) misses the wanted range [lo, hi] entirely. */
static int pq_outside(const char *l, const char *r, const char *lo, const char *hi)
{
    return (lo < l && hi < l) || (lo > r && hi > r);
}

static void pq_sort(const pq_ctx *x, char *a, size_t n, const char *lo, const char *hi)
{
    size_t es = x->es;
    for (;;) {
        if (n < 7) {
            pq_insertion(x, a, n);
            return;
        }
        char *pm = a + (n / 2) * es;
        if (n > 7) {
            char *pl = a, *pn = a + (n - 1) * es;
            if (n > 40) {
                size_t d = (n / 8) * es;
                pl = pq_med3(x, pl, pl + d, pl + 2 * d);
                pm = pq_med3(x, pm - d, pm, pm + d);
                pn = pq_med3(x, pn - 2 * d, pn - d, pn);
            }
            pm = pq_med3(x, pl, pm, pn);
        }
        pq_swap(a, pm, es); /* the pivot waits at a */
        char *pa = a + es, *pb = pa, *pc = a + (n - 1) * es, *pd = pc;
        int swapped = 0;
        for (;;) {
            int r;
            while (pb <= pc && (r = x->cmp(pb, a, x->ud)) <= 0) {
                if (r == 0) { /* equal keys gather at the left end */
                    swapped = 1;
                    pq_swap(pa, pb, es);
                    pa += es;
                }
                pb += es;
            }
            while (pb <= pc && (r = x->cmp(pc, a, x->ud)) >= 0) {
                if (r == 0) { /* ... and at the right end */
                    swapped = 1;
                    pq_swap(pc, pd, es);
                    pd -= es;
                }
                pc -= es;
            }
            if (pb > pc)
                break;
            pq_swap(pb, pc, es);
            swapped = 1;
            pb += es;
            pc -= es;
        }
        if (!swapped) { /* already ordered around the pivot */
            pq_insertion(x, a, n);
            return;
        }
        /* Move the equal keys from the ends to the middle. */
        char *pn = a + n * es;
        size_t r = BK_MIN((size_t)(pa - a), (size_t)(pb - pa));
        if (r)
            pq_swap(a, pb - r, r);
        r = BK_MIN((size_t)(pd - pc), (size_t)(pn - pd) - es);
        if (r)
            pq_swap(pb, pn - r, r);
        r = (size_t)(pb - pa);
        if (r > es && !pq_outside(a, a + r - 1, lo, hi))
            pq_sort(x, a, r / es, lo, hi);
        r = (size_t)(pd - pc);
        if (r <= es)
            return;
        a = pn - r; /* the greater part: iterate, not recurse */
        n = r / es;
        if (pq_outside(a, a + r - 1, lo, hi))
            return;
    }
}

void kv_pqsort(void *base, size_t n, size_t es, kv_cmp_fn *cmp, void *ud, size_t first,
               size_t last)
{
    if (n < 2)
        return;
    pq_ctx x = { es, cmp, ud };
    char *a = base;
    pq_sort(&x, a, n, a + first * es, a + (last + 1) * es - 1);
}

/* strtod over the value read as a C string, as Redis does: leading spaces
 * and hex are fine, trailing junk, overflow, underflow and NaN are not. */
static int parse_sort_score(bk_str v, double *out)
{
    char stack[128];
    char *b = v.len < sizeof stack ? stack : kv_malloc(v.len + 1);
    memcpy(b, v.p, v.len);
    b[v.len] = '\0';
    char *end;
    errno = 0;
    double d = strtod(b, &end);
    int bad = *end != '\0' || errno == ERANGE || isnan(d);
    if (b != stack)
        kv_free(b);
    *out = d;
    return bad ? -1 : 0;
}

/* Sets hold no order; Redis 7.0 keeps an intset sorted, so that is the
 * order it lists them in. */
static int set_int_order(const void *pa, const void *pb)
{
    const sort_item *a = pa, *b = pb;
    return a->score > b->score ? 1 : a->score < b->score ? -1 : 0;
}

/* Loads the members of s into v in the order Redis lists them (that order
 * shows without sorting, and in how ALPHA BY orders equal values). */
static void load_set(dict *s, sort_item *v)
{
    size_t n = 0;
    int all_ints = set_is_intset(s);
    dict_iter it;
    dict_iter_init(&it, s);
    for (dict_node *dn; (dn = dict_iter_next(&it));) {
        bk_str m = smember_str((kv_smember *)dn);
        long long ll;
        v[n] = (sort_item){ .elem = m };
        if (all_ints && kv_parse_ll(m.p, m.len, &ll) == 0)
            v[n].score = (double)ll;
        else
            all_ints = 0;
        n++;
    }
    dict_iter_end(&it);
    if (all_ints)
        qsort(v, n, sizeof *v, set_int_order);
    for (size_t k = 0; k < n; k++)
        v[k].score = 0; /* a missing BY value sorts as 0 */
}

enum { MAX_GETS_STACK = 8 };

/* BY and GET patterns read keys the ACL key check never saw (they are
 * built from the elements): as in Redis, only a user that may read every
 * key may use them. An open user costs one flag test. */
static int sort_may_read_any_key(kv_client *c)
{
    return kv_acl_full_key_access(c, c->cmd, c->argc, c->argv);
}

static void sort_generic(kv_client *c, int readonly)
{
    int desc = 0, alpha = 0, dontsort = 0, has_store = 0;
    long long lstart = 0, lcount = -1;
    bk_str by = { NULL, 0 }, store = { NULL, 0 };
    int ngets = 0;
    bk_str gets_stack[MAX_GETS_STACK];
    bk_str *gets = gets_stack;
    sort_item *v = NULL;
    char *arena = NULL;
    bk_buf scratch = { 0 };

    for (int j = 2; j < c->argc; j++) {
        bk_str a = c->argv[j];
        int left = c->argc - j - 1;
        if (arg_is(a, "asc")) {
            desc = 0;
        } else if (arg_is(a, "desc")) {
            desc = 1;
        } else if (arg_is(a, "alpha")) {
            alpha = 1;
        } else if (arg_is(a, "limit") && left >= 2) {
            if (arg_ll(c, c->argv[j + 1], &lstart) < 0 || arg_ll(c, c->argv[j + 2], &lcount) < 0)
                goto cleanup;
            j += 2;
        } else if (!readonly && arg_is(a, "store") && left >= 1) {
            store = c->argv[++j];
            has_store = 1;
        } else if (arg_is(a, "by") && left >= 1) {
            by = c->argv[++j];
            /* A pattern without '*' names one key for all: no sorting
             * (and, as in Redis, a later BY does not undo that). */
            if (!memchr(by.p, '*', cstr_len(by)))
                dontsort = 1;
            else if (!sort_may_read_any_key(c)) {
                reply_error(c, "ERR BY option of SORT denied due to insufficient ACL permissions.");
                goto cleanup;
            }
        } else if (arg_is(a, "get") && left >= 1) {
            if (!sort_may_read_any_key(c)) {
                reply_error(c, "ERR GET option of SORT denied due to insufficient ACL permissions.");
                goto cleanup;
            }
            if (ngets == MAX_GETS_STACK && gets == gets_stack) {
                gets = kv_malloc((size_t)c->argc * sizeof *gets);
                memcpy(gets, gets_stack, sizeof gets_stack);
            }
            gets[ngets++] = c->argv[++j];
        } else {
            reply_error(c, ERR_SYNTAX);
            goto cleanup;
        }
    }

    kv_entry *e = db_lookup_read(c->db, c->argv[1]);
    if (e && e->type != KV_LIST && e->type != KV_SET && e->type != KV_ZSET) {
        reply_error(c, ERR_WRONGTYPE);
        goto cleanup;
    }
    int type = e ? e->type : KV_LIST;
    void *obj = e ? entry_obj(e) : NULL;
    /* Set order is arbitrary: what gets stored is sorted, so the AOF and
     * replicas see the same list. */
    if (dontsort && type == KV_SET && (has_store || srv.script_caller)) { /* or a script's */
        dontsort = 0;
        alpha = 1;
        by = (bk_str){ NULL, 0 };
    }

    long long len = !obj                ? 0
                    : type == KV_LIST ? (long long)((kv_list *)obj)->len
                    : type == KV_SET  ? (long long)dict_size((dict *)obj)
                                      : (long long)((zset *)obj)->length;
    /* Clamp to the object's size first: no overflow whatever the input. */
    long long start = lstart < 0 ? 0 : lstart > len ? len : lstart;
    long long cnt = lcount < -1 ? -1 : lcount > len ? len : lcount;
    long long end = cnt < 0 ? len - 1 : start + cnt - 1;
    if (start >= len) {
        start = len - 1;
        end = len - 2;
    }
    if (end >= len)
        end = len - 1;

    long long vlen = len;
    /* Lists and sorted sets have an order of their own: without sorting,
     * load only the range asked for. */
    int ranged = dontsort && (type == KV_LIST || type == KV_ZSET);
    if (ranged && (start != 0 || end != len - 1))
        vlen = end - start + 1;
    v = kv_malloc((size_t)(vlen > 0 ? vlen : 1) * sizeof *v);
    long long n = 0;
    if (type == KV_LIST && obj) {
        kv_list *l = obj;
        if (ranged) {
            if (end >= start) {
                for (long long k = 0; k < vlen; k++) {
                    long long idx = desc ? len - start - 1 - k : start + k;
                    kv_lelem *x = list_at(l, (size_t)idx);
                    v[n++] = (sort_item){ .elem = { x->data, x->len } };
                }
                end -= start;
                start = 0;
            }
        } else {
            for (size_t k = 0; k < l->len; k++) {
                kv_lelem *x = list_at(l, k);
                v[n++] = (sort_item){ .elem = { x->data, x->len } };
            }
        }
    } else if (type == KV_SET) {
        load_set(obj, v);
        n = len;
    } else if (type == KV_ZSET) {
        zset *z = obj;
        if (ranged) {
            zs_node *x;
            if (desc)
                x = start > 0 ? zset_at_rank(z, (size_t)(len - start)) : z->tail;
            else
                x = start > 0 ? zset_at_rank(z, (size_t)start + 1) : z->header->lv[0].forward;
            for (long long k = 0; k < vlen && x; k++) {
                v[n++] = (sort_item){ .elem = zs_member(x) };
                x = desc ? x->backward : x->lv[0].forward;
            }
            end -= start;
            start = 0;
        } else {
            for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward)
                v[n++] = (sort_item){ .elem = zs_member(x) };
        }
    }

    int bad_score = 0;
    if (!dontsort) {
        sort_ctx ctx = { .desc = desc, .alpha = alpha, .bypattern = by.p != NULL,
                         .store = has_store };
        for (long long k = 0; k < n; k++) {
            bk_str val = v[k].elem;
            if (by.p) {
                if (!pattern_value(c->db, by, v[k].elem, &scratch, &val))
                    continue;
                v[k].cmp = val;
                v[k].has_cmp = 1;
            }
            if (!alpha && parse_sort_score(val, &v[k].score) < 0)
                bad_score = 1;
        }
        if (alpha && !has_store) {
            /* strcoll wants C strings: one arena for all of them. */
            ctx.loc = collation();
            size_t bytes = 0;
            for (long long k = 0; k < n; k++)
                bytes += (by.p ? v[k].cmp.len : v[k].elem.len) + 1;
            arena = kv_malloc(bytes ? bytes : 1);
            char *w = arena;
            for (long long k = 0; k < n; k++) {
                bk_str s = by.p ? v[k].cmp : v[k].elem;
                if (s.len) /* a missing BY value has no bytes at all */
                    memcpy(w, s.p, s.len);
                w[s.len] = '\0';
                v[k].cstr = w;
                w += s.len + 1;
            }
        }
        /* A LIMIT with BY sorts partially, as Redis does (equal ALPHA BY
         * values then come out in its order). */
        if (!bad_score && n > 1 && by.p && (start != 0 || end != n - 1))
            kv_pqsort(v, (size_t)n, sizeof *v, sort_cmp, &ctx, (size_t)start, (size_t)end);
        else if (!bad_score && n > 1)
            qsort_r(v, (size_t)n, sizeof *v, sort_cmp, &ctx);
    }

    long long outlen = (ngets ? ngets : 1) * (end - start + 1);
    if (bad_score) {
        reply_error(c, "ERR One or more scores can't be converted into double");
    } else if (!has_store) {
        reply_array(c, outlen);
        for (long long k = start; k <= end; k++) {
            if (!ngets)
                reply_bulk_str(c, v[k].elem);
            for (int g = 0; g < ngets; g++) {
                bk_str val;
                if (pattern_value(c->db, gets[g], v[k].elem, &scratch, &val))
                    reply_bulk_str(c, val);
                else
                    reply_null(c);
            }
        }
    } else {
        kv_list *out = list_new();
        for (long long k = start; k <= end; k++) {
            if (!ngets)
                list_push(out, 1, lelem_new(v[k].elem.p, v[k].elem.len));
            for (int g = 0; g < ngets; g++) {
                bk_str val = { "", 0 };
                pattern_value(c->db, gets[g], v[k].elem, &scratch, &val);
                list_push(out, 1, lelem_new(val.p, val.len));
            }
        }
        /* The source may be the destination: it is replaced only now. */
        if (outlen) {
            kv_entry *old = db_lookup_write(c->db, store);
            if (old)
                db_delete_entry(c->db, old);
            db_add_obj(c->db, store, KV_LIST, out);
            kv_touch_key(c->db, store);
            kv_notify(c->db, NOTIFY_LIST, "sortstore", store);
            kv_dirty(outlen);
        } else {
            list_free(out);
            if (db_delete(c->db, store)) {
                kv_touch_key(c->db, store);
                kv_notify(c->db, NOTIFY_GENERIC, "del", store);
                kv_dirty(1);
            }
        }
        reply_int(c, outlen);
    }

cleanup:
    if (gets != gets_stack)
        kv_free(gets);
    kv_free(v);
    kv_free(arena);
    buf_free(&scratch);
}

void sort_command(kv_client *c) { sort_generic(c, 0); }
void sort_ro_command(kv_client *c) { sort_generic(c, 1); }

/* ---- key positions of SORT and GEORADIUS* (COMMAND GETKEYS) ---- */

/* SORT: the key, and the argument after the last STORE, skipping the
 * arguments of LIMIT, GET and BY (Redis's scan, quirks included). */
static int sort_keys(int argc, const bk_str *argv, int *pos)
{
    static const struct {
        const char *name;
        int skip;
    } skips[] = { { "limit", 2 }, { "get", 1 }, { "by", 1 } };
    int n = 0, store = 0;
    pos[n++] = 1;
    for (int i = 2; i < argc; i++) {
        size_t k = 0;
        for (; k < sizeof skips / sizeof skips[0]; k++)
            if (arg_is(argv[i], skips[k].name))
                break;
        if (k < sizeof skips / sizeof skips[0])
            i += skips[k].skip;
        else if (arg_is(argv[i], "store") && i + 1 < argc)
            store = i + 1;
    }
    if (store)
        pos[n++] = store;
    return n;
}

/* GEORADIUS*: the key, then the argument after the first STORE and after
 * the first STOREDIST found from argument `from` on (key-spec keyword
 * search: the last argument is never taken as the keyword). */
static int georadius_keys(int argc, const bk_str *argv, int from, int *pos)
{
    static const char *const words[] = { "store", "storedist" };
    int n = 0;
    pos[n++] = 1;
    for (size_t w = 0; w < 2; w++) {
        for (int i = from; i < argc - 1; i++) {
            if (arg_is(argv[i], words[w])) {
                pos[n++] = i + 1;
                break;
            }
        }
    }
    return n;
}

int kv_movable_keys(const kv_cmd *cmd, int argc, const bk_str *argv, int *pos)
{
    if (cmd->proc == sort_command || cmd->proc == sort_ro_command)
        return cmd->proc == sort_command ? sort_keys(argc, argv, pos) : (pos[0] = 1, 1);
    if (cmd->proc == georadius_command)
        return georadius_keys(argc, argv, 6, pos);
    if (cmd->proc == georadiusbymember_command)
        return georadius_keys(argc, argv, 5, pos);
    return -1;
}
