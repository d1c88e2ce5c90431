#include "kv/skiplist.h"

#include "kv/mem.h"
#include "kv/util.h"

#include <math.h>

static bk_str node_key(const dict_node *dn)
{
    return zs_member((const zs_node *)(const void *)dn);
}

static zs_node *node_alloc(int level, double score, bk_str member)
{
    zs_node *n = kv_malloc(sizeof(zs_node) + (size_t)level * sizeof(struct zs_level) + member.len);
    n->dn.next = NULL;
    n->dn.aux = (uint32_t)member.len;
    n->score = score;
    n->backward = NULL;
    n->level = (uint32_t)level;
    n->pad = 0;
    if (member.len)
        memcpy((char *)&n->lv[level], member.p, member.len);
    return n;
}

zset *zset_new(void)
{
    zset *z = kv_malloc(sizeof *z);
    dict_init(&z->dict, node_key);
    z->header = node_alloc(ZS_MAX_LEVEL, 0, BK_STR_NULL);
    for (int i = 0; i < ZS_MAX_LEVEL; i++) {
        z->header->lv[i].forward = NULL;
        z->header->lv[i].span = 0;
    }
    z->tail = NULL;
    z->length = 0;
    z->level = 1;
    z->skiplist = 0;
    return z;
}

void zset_free(zset *z)
{
    if (!z)
        return;
    zs_node *n = z->header->lv[0].forward;
    while (n) {
        zs_node *next = n->lv[0].forward;
        kv_free(n);
        n = next;
    }
    kv_free(z->header);
    dict_clear(&z->dict, NULL, NULL);
    kv_free(z);
}

zset *zset_dup(zset *z)
{
    zset *d = zset_new();
    dict_expand(&d->dict, z->length);
    for (zs_node *n = z->tail; n; n = n->backward)
        zset_insert(d, n->score, zs_member(n));
    d->skiplist = z->skiplist;
    return d;
}

static int random_level(void)
{
    /* p = 1/4: two random bits per level */
    uint64_t r = kv_rand64();
    int level = 1;
    while ((r & 3) == 0 && level < ZS_MAX_LEVEL) {
        level++;
        r >>= 2;
    }
    return level;
}

static inline int member_cmp(bk_str a, bk_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    if (c)
        return c;
    return a.len < b.len ? -1 : a.len > b.len;
}

/* a before (score, member)? */
static inline int before(const zs_node *a, double score, bk_str member)
{
    return a->score < score || (a->score == score && member_cmp(zs_member(a), member) < 0);
}

zs_node *zset_find(zset *z, bk_str member)
{
    return (zs_node *)(void *)dict_find(&z->dict, member.p, member.len,
                                        dict_hash32(member.p, member.len));
}

static void link_node(zset *z, zs_node *node)
{
    zs_node *update[ZS_MAX_LEVEL];
    size_t rank[ZS_MAX_LEVEL];
    bk_str member = zs_member(node);
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        rank[i] = i == z->level - 1 ? 0 : rank[i + 1];
        while (x->lv[i].forward && before(x->lv[i].forward, node->score, member)) {
            rank[i] += x->lv[i].span;
            x = x->lv[i].forward;
        }
        update[i] = x;
    }
    int level = (int)node->level;
    if (level > z->level) {
        for (int i = z->level; i < level; i++) {
            rank[i] = 0;
            update[i] = z->header;
            update[i]->lv[i].span = z->length;
        }
        z->level = level;
    }
    for (int i = 0; i < level; i++) {
        node->lv[i].forward = update[i]->lv[i].forward;
        update[i]->lv[i].forward = node;
        node->lv[i].span = update[i]->lv[i].span - (rank[0] - rank[i]);
        update[i]->lv[i].span = (rank[0] - rank[i]) + 1;
    }
    for (int i = level; i < z->level; i++)
        update[i]->lv[i].span++;
    node->backward = update[0] == z->header ? NULL : update[0];
    if (node->lv[0].forward)
        node->lv[0].forward->backward = node;
    else
        z->tail = node;
    z->length++;
}

static void unlink_node(zset *z, zs_node *node)
{
    zs_node *update[ZS_MAX_LEVEL];
    bk_str member = zs_member(node);
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->lv[i].forward && x->lv[i].forward != node &&
               before(x->lv[i].forward, node->score, member))
            x = x->lv[i].forward;
        update[i] = x;
    }
    for (int i = 0; i < z->level; i++) {
        if (update[i]->lv[i].forward == node) {
            update[i]->lv[i].span += node->lv[i].span - 1;
            update[i]->lv[i].forward = node->lv[i].forward;
        } else {
            update[i]->lv[i].span -= 1;
        }
    }
    if (node->lv[0].forward)
        node->lv[0].forward->backward = node->backward;
    else
        z->tail = node->backward;
    while (z->level > 1 && z->header->lv[z->level - 1].forward == NULL)
        z->level--;
    z->length--;
}

zs_node *zset_insert(zset *z, double score, bk_str member)
{
    zs_node *n = node_alloc(random_level(), score, member);
    n->dn.hash = dict_hash32(member.p, member.len);
    dict_add(&z->dict, &n->dn);
    link_node(z, n);
    return n;
}

void zset_update_score(zset *z, zs_node *n, double score)
{
    /* Same position after the change: update in place. */
    bk_str m = zs_member(n);
    if ((n->backward == NULL || before(n->backward, score, m)) &&
        (n->lv[0].forward == NULL || !before(n->lv[0].forward, score, m))) {
        n->score = score;
        return;
    }
    unlink_node(z, n);
    n->score = score;
    link_node(z, n);
}

void zset_delete(zset *z, zs_node *n)
{
    unlink_node(z, n);
    dict_unlink_node(&z->dict, &n->dn);
    kv_free(n);
}

size_t zset_rank(zset *z, zs_node *node)
{
    size_t rank = 0;
    bk_str member = zs_member(node);
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->lv[i].forward &&
               (x->lv[i].forward == node || before(x->lv[i].forward, node->score, member))) {
            rank += x->lv[i].span;
            x = x->lv[i].forward;
            if (x == node)
                return rank;
        }
    }
    return 0;
}

zs_node *zset_at_rank(zset *z, size_t rank)
{
    if (rank == 0 || rank > z->length)
        return NULL;
    size_t traversed = 0;
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->lv[i].forward && traversed + x->lv[i].span <= rank) {
            traversed += x->lv[i].span;
            x = x->lv[i].forward;
        }
        if (traversed == rank)
            return x;
    }
    return NULL;
}

int zset_score_gte_min(double v, const zrange_score *r)
{
    return r->minex ? v > r->min : v >= r->min;
}

int zset_score_lte_max(double v, const zrange_score *r)
{
    return r->maxex ? v < r->max : v <= r->max;
}

static int score_range_empty(zset *z, const zrange_score *r)
{
    if (r->min > r->max || (r->min == r->max && (r->minex || r->maxex)))
        return 1;
    if (!z->tail || !zset_score_gte_min(z->tail->score, r))
        return 1;
    zs_node *first = z->header->lv[0].forward;
    return !first || !zset_score_lte_max(first->score, r);
}

zs_node *zset_first_in_score(zset *z, const zrange_score *r)
{
    if (score_range_empty(z, r))
        return NULL;
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--)
        while (x->lv[i].forward && !zset_score_gte_min(x->lv[i].forward->score, r))
            x = x->lv[i].forward;
    x = x->lv[0].forward;
    if (!x || !zset_score_lte_max(x->score, r))
        return NULL;
    return x;
}

zs_node *zset_last_in_score(zset *z, const zrange_score *r)
{
    if (score_range_empty(z, r))
        return NULL;
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--)
        while (x->lv[i].forward && zset_score_lte_max(x->lv[i].forward->score, r))
            x = x->lv[i].forward;
    if (x == z->header || !zset_score_gte_min(x->score, r))
        return NULL;
    return x;
}

int zset_lex_gte_min(bk_str m, const zrange_lex *r)
{
    if (r->min_neg_inf)
        return 1;
    if (r->min_pos_inf)
        return 0;
    int c = member_cmp(m, r->min);
    return r->minex ? c > 0 : c >= 0;
}

int zset_lex_lte_max(bk_str m, const zrange_lex *r)
{
    if (r->max_pos_inf)
        return 1;
    if (r->max_neg_inf)
        return 0;
    int c = member_cmp(m, r->max);
    return r->maxex ? c < 0 : c <= 0;
}

static int lex_range_empty(zset *z, const zrange_lex *r)
{
    if (r->min_pos_inf || r->max_neg_inf)
        return 1;
    if (!r->min_neg_inf && !r->max_pos_inf) {
        int c = member_cmp(r->min, r->max);
        if (c > 0 || (c == 0 && (r->minex || r->maxex)))
            return 1;
    }
    if (!z->tail || !zset_lex_gte_min(zs_member(z->tail), r))
        return 1;
    zs_node *first = z->header->lv[0].forward;
    return !first || !zset_lex_lte_max(zs_member(first), r);
}

zs_node *zset_first_in_lex(zset *z, const zrange_lex *r)
{
    if (lex_range_empty(z, r))
        return NULL;
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--)
        while (x->lv[i].forward && !zset_lex_gte_min(zs_member(x->lv[i].forward), r))
            x = x->lv[i].forward;
    x = x->lv[0].forward;
    if (!x || !zset_lex_lte_max(zs_member(x), r))
        return NULL;
    return x;
}

zs_node *zset_last_in_lex(zset *z, const zrange_lex *r)
{
    if (lex_range_empty(z, r))
        return NULL;
    zs_node *x = z->header;
    for (int i = z->level - 1; i >= 0; i--)
        while (x->lv[i].forward && zset_lex_lte_max(zs_member(x->lv[i].forward), r))
            x = x->lv[i].forward;
    if (x == z->header || !zset_lex_gte_min(zs_member(x), r))
        return NULL;
    return x;
}

static int parse_bound(bk_str s, double *v, int *ex)
{
    *ex = 0;
    if (s.len > 0 && s.p[0] == '(') {
        *ex = 1;
        s.p++;
        s.len--;
    }
    if (kv_parse_double(s.p, s.len, v) < 0)
        return -1;
    return 0;
}

int zset_parse_score_range(bk_str min, bk_str max, zrange_score *r)
{
    if (parse_bound(min, &r->min, &r->minex) < 0 || parse_bound(max, &r->max, &r->maxex) < 0)
        return -1;
    return 0;
}

static int parse_lex(bk_str s, bk_str *out, int *ex, int *neg, int *pos)
{
    *neg = *pos = *ex = 0;
    if (s.len == 0)
        return -1;
    if (s.len == 1 && s.p[0] == '-') {
        *neg = 1;
        return 0;
    }
    if (s.len == 1 && s.p[0] == '+') {
        *pos = 1;
        return 0;
    }
    if (s.p[0] == '(')
        *ex = 1;
    else if (s.p[0] != '[')
        return -1;
    *out = (bk_str){ s.p + 1, s.len - 1 };
    return 0;
}

int zset_parse_lex_range(bk_str min, bk_str max, zrange_lex *r)
{
    memset(r, 0, sizeof *r);
    if (parse_lex(min, &r->min, &r->minex, &r->min_neg_inf, &r->min_pos_inf) < 0 ||
        parse_lex(max, &r->max, &r->maxex, &r->max_neg_inf, &r->max_pos_inf) < 0)
        return -1;
    return 0;
}

int zset_check(zset *z)
{
    size_t count = 0;
    zs_node *prev = NULL;
    for (zs_node *x = z->header->lv[0].forward; x; x = x->lv[0].forward) {
        if (x->backward != prev)
            return -1;
        if (prev && !before(prev, x->score, zs_member(x)))
            return -2;
        if (zset_find(z, zs_member(x)) != x)
            return -3;
        prev = x;
        count++;
    }
    if (prev != z->tail || count != z->length || count != dict_size(&z->dict))
        return -4;
    /* spans: the sum of spans along each level reaches length */
    for (int i = 0; i < z->level; i++) {
        size_t sum = 0;
        zs_node *x = z->header;
        while (x->lv[i].forward) {
            sum += x->lv[i].span;
            x = x->lv[i].forward;
            if (zset_rank(z, x) != sum)
                return -5;
        }
    }
    return 0;
}
