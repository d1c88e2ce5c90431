/* LCS: the longest common subsequence of two strings, by the classic
 * (alen+1) x (blen+1) dynamic-programming table, walked back from the end
 * to build the string or the matched ranges. */
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <stdint.h>
#include <stdlib.h>

/* The table is transient but quadratic: two 16 KiB strings already need 1
 * GiB. Refuse beyond this many bytes (Redis refuses when its allocation
 * fails, which with overcommit can be far too late). */
#define LCS_MAX_TABLE_BYTES ((size_t)256 << 20)

#define ERR_LCS_TYPE "ERR The specified keys must contain string values"
#define ERR_LCS_MEM "ERR Insufficient memory, failed allocating transient memory for LCS"

static int arg_is(bk_str s, const char *lower)
{
    return str_ieq_lit(s, lower, strlen(lower));
}

/* Reads a key for LCS: a missing key is the empty string. */
static int lcs_operand(kv_client *c, bk_str key, bk_str *out)
{
    kv_entry *e = db_lookup_read(c->db, key);
    *out = (bk_str){ "", 0 };
    if (!e)
        return 0;
    if (e->type != KV_STRING) {
        reply_error(c, ERR_LCS_TYPE);
        return -1;
    }
    *out = entry_str(e);
    return 0;
}

static void reply_range(kv_client *c, size_t a0, size_t a1, size_t b0, size_t b1, int withlen)
{
    reply_array(c, 2 + withlen);
    reply_array(c, 2);
    reply_int(c, (long long)a0);
    reply_int(c, (long long)a1);
    reply_array(c, 2);
    reply_int(c, (long long)b0);
    reply_int(c, (long long)b1);
    if (withlen)
        reply_int(c, (long long)(a1 - a0 + 1));
}

void lcs_command(kv_client *c)
{
    bk_str a, b;
    if (lcs_operand(c, c->argv[1], &a) < 0 || lcs_operand(c, c->argv[2], &b) < 0)
        return;
    int getidx = 0, getlen = 0, withlen = 0;
    long long minlen = 0;
    for (int j = 3; j < c->argc; j++) {
        bk_str o = c->argv[j];
        if (arg_is(o, "idx")) {
            getidx = 1;
        } else if (arg_is(o, "len")) {
            getlen = 1;
        } else if (arg_is(o, "withmatchlen")) {
            withlen = 1;
        } else if (arg_is(o, "minmatchlen") && j + 1 < c->argc) {
            if (arg_ll(c, c->argv[++j], &minlen) < 0)
                return;
            if (minlen < 0)
                minlen = 0;
        } else {
            reply_error(c, ERR_SYNTAX);
            return;
        }
    }
    if (getidx && getlen) {
        reply_error(c, "ERR If you want both the length and indexes, please just use IDX.");
        return;
    }
    /* Bound the table before multiplying anything that could overflow. */
    size_t cols = b.len + 1, max_cells = LCS_MAX_TABLE_BYTES / sizeof(uint32_t);
    if (a.len >= max_cells || b.len >= max_cells || (a.len + 1) > max_cells / cols) {
        reply_error(c, ERR_LCS_MEM);
        return;
    }
    uint32_t *t = kv_malloc((a.len + 1) * cols * sizeof *t);
    char *seq = NULL;
#define CELL(i, j) t[(size_t)(i) * cols + (j)]
    for (size_t j = 0; j < cols; j++)
        CELL(0, j) = 0;
    for (size_t i = 1; i <= a.len; i++) {
        CELL(i, 0) = 0;
        for (size_t j = 1; j <= b.len; j++) {
            if (a.p[i - 1] == b.p[j - 1]) {
                CELL(i, j) = CELL(i - 1, j - 1) + 1;
            } else {
                uint32_t up = CELL(i - 1, j), left = CELL(i, j - 1);
                CELL(i, j) = up > left ? up : left;
            }
        }
    }
    size_t total = CELL(a.len, b.len);
    if (getlen) {
        reply_int(c, (long long)total);
        goto out;
    }
    size_t h = 0;
    long long nranges = 0;
    if (getidx) {
        reply_map(c, 2);
        reply_bulk(c, "matches", 7);
        h = reply_defer(c);
    } else {
        seq = kv_malloc(total + 1);
    }
    /* Walk back from the end: a diagonal step is a common byte; a run of
     * them is one range, reported when the run stops (a ranges reply lists
     * them from the end of the strings). Ties step left in b, as Redis. */
    size_t i = a.len, j = b.len, k = total;
    int in_run = 0;
    size_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    while (i > 0 && j > 0) {
        int close = 0;
        if (a.p[i - 1] == b.p[j - 1]) {
            if (seq)
                seq[--k] = a.p[i - 1];
            if (!in_run) {
                in_run = 1;
                a1 = i - 1;
                b1 = j - 1;
            }
            a0 = i - 1;
            b0 = j - 1;
            i--;
            j--;
            close = i == 0 || j == 0;
        } else {
            if (CELL(i - 1, j) > CELL(i, j - 1))
                i--;
            else
                j--;
            close = in_run;
        }
        if (close) {
            in_run = 0;
            if (getidx && (minlen == 0 || (long long)(a1 - a0 + 1) >= minlen)) {
                reply_range(c, a0, a1, b0, b1, withlen);
                nranges++;
            }
        }
    }
#undef CELL
    if (getidx) {
        reply_defer_array(c, h, nranges);
        reply_bulk(c, "len", 3);
        reply_int(c, (long long)total);
    } else {
        reply_bulk(c, seq, total);
    }
out:
    kv_free(seq);
    kv_free(t);
}
