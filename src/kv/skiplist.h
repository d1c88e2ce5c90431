/* Sorted set: a skip list ordered by (score, member) with rank spans, plus
 * a dict from member to node. Each member is ONE allocation holding the
 * dict node, the score, the skip-list levels and the member bytes, so a
 * ZADD costs one malloc and a score change none. */
#ifndef BRISK_KV_SKIPLIST_H
#define BRISK_KV_SKIPLIST_H

#include "core/common.h"
#include "kv/dict.h"

#include <stddef.h>
#include <stdint.h>

#define ZS_MAX_LEVEL 32

typedef struct zs_node zs_node;
struct zs_node {
    dict_node dn; /* dn.aux = member length */
    double score;
    zs_node *backward;
    uint32_t level;
    uint32_t pad;
    struct zs_level {
        zs_node *forward;
        size_t span;
    } lv[];
    /* member bytes follow lv[level] */
};

typedef struct zset {
    dict dict;
    zs_node *header, *tail;
    size_t length;
    int level;
    /* Redis 7.0's encoding (OBJECT ENCODING, DUMP): 0 listpack, 1 skiplist.
     * Set by the zset commands (types.h: zset_enc_*): a zset turns skiplist
     * when a new member outgrows zset-max-listpack-*, and stays one when
     * members go; results of the store commands and loaded values are
     * sized afresh. Kept by zset_dup. */
    int skiplist;
} zset;

typedef struct {
    double min, max;
    int minex, maxex; /* exclusive bounds */
} zrange_score;

typedef struct {
    bk_str min, max;
    int minex, maxex;
    int min_neg_inf, max_pos_inf; /* "-" / "+" ; also "+" as min and "-" as max */
    int min_pos_inf, max_neg_inf;
} zrange_lex;

static inline bk_str zs_member(const zs_node *n)
{
    return (bk_str){ (const char *)&n->lv[n->level], n->dn.aux };
}

zset *zset_new(void);
void zset_free(zset *z);
zset *zset_dup(zset *z);
zs_node *zset_find(zset *z, bk_str member);
/* Inserts a member that is not present; returns its node. */
zs_node *zset_insert(zset *z, double score, bk_str member);
/* Changes the score of n (no allocation). */
void zset_update_score(zset *z, zs_node *n, double score);
/* Removes n and frees it. */
void zset_delete(zset *z, zs_node *n);
/* 1-based rank of n (0 if absent). */
size_t zset_rank(zset *z, zs_node *n);
/* Node at a 1-based rank, or NULL. */
zs_node *zset_at_rank(zset *z, size_t rank);
zs_node *zset_first_in_score(zset *z, const zrange_score *r);
zs_node *zset_last_in_score(zset *z, const zrange_score *r);
zs_node *zset_first_in_lex(zset *z, const zrange_lex *r);
zs_node *zset_last_in_lex(zset *z, const zrange_lex *r);
int zset_score_gte_min(double v, const zrange_score *r);
int zset_score_lte_max(double v, const zrange_score *r);
int zset_lex_gte_min(bk_str m, const zrange_lex *r);
int zset_lex_lte_max(bk_str m, const zrange_lex *r);
/* Parses "(1.5", "2", "-inf" style bounds; returns 0 or -1. */
int zset_parse_score_range(bk_str min, bk_str max, zrange_score *r);
/* Parses "[a", "(a", "-", "+"; returns 0 or -1. */
int zset_parse_lex_range(bk_str min, bk_str max, zrange_lex *r);
/* Checks the skip-list invariants (tests); returns 0 when consistent. */
int zset_check(zset *z);

#endif
