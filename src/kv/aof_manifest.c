/* The manifest of Redis 7.0's multi-part AOF: dir/appenddirname/
 * appendfilename.manifest names one base file (an RDB or an AOF), the
 * incremental AOF files in the order they are replayed, and the history
 * files a finished rewrite left for deletion. One line per file:
 *
 *   file appendonly.aof.2.base.rdb seq 2 type b
 *
 * ("file" NAME "seq" N "type" b|h|i; pairs in any order, unknown pairs
 * ignored; a name with spaces or unprintable bytes in double quotes with
 * C escapes). A bad manifest stops the server with the messages Redis
 * 7.0 logs, as its users' scripts and Redis's tests look for them. */
#include "kv/aof.h"

#include "core/log.h"
#include "kv/config.h"
#include "kv/mem.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MANIFEST_MAX_LINE 1024

void aof_manifest_free(aof_manifest *am)
{
    for (int i = 0; i < am->n; i++)
        kv_free(am->f[i].name);
    kv_free(am->f);
    memset(am, 0, sizeof *am);
}

static aof_info *add(aof_manifest *am, const char *name, size_t len, long long seq, char type)
{
    if (am->n == am->cap) {
        am->cap = am->cap ? am->cap * 2 : 8;
        am->f = kv_realloc(am->f, (size_t)am->cap * sizeof *am->f);
    }
    aof_info *ai = &am->f[am->n++];
    ai->name = kv_strndup(name, len);
    ai->seq = seq;
    ai->type = type;
    return ai;
}

void aof_manifest_dup(aof_manifest *dst, const aof_manifest *src)
{
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->n; i++)
        add(dst, src->f[i].name, strlen(src->f[i].name), src->f[i].seq, src->f[i].type);
    dst->base_seq = src->base_seq;
    dst->incr_seq = src->incr_seq;
}

aof_info *aof_manifest_base(aof_manifest *am)
{
    for (int i = 0; i < am->n; i++)
        if (am->f[i].type == AOF_TYPE_BASE)
            return &am->f[i];
    return NULL;
}

int aof_manifest_count(const aof_manifest *am, char type)
{
    int k = 0;
    for (int i = 0; i < am->n; i++)
        k += am->f[i].type == type;
    return k;
}

aof_info *aof_manifest_last_incr(aof_manifest *am)
{
    for (int i = am->n - 1; i >= 0; i--)
        if (am->f[i].type == AOF_TYPE_INCR)
            return &am->f[i];
    return NULL;
}

/* Entry i becomes the first history file: Redis lists the newest history
 * first (its tests compare manifests line by line). */
static void to_history_front(aof_manifest *am, int i)
{
    aof_info ai = am->f[i];
    ai.type = AOF_TYPE_HIST;
    memmove(&am->f[1], &am->f[0], (size_t)i * sizeof ai);
    am->f[0] = ai;
}

/* seq + 1; a manifest's 2^63-1 wraps to -2^63 as in Redis (no undefined
 * overflow). */
static long long next_seq(long long seq)
{
    return (long long)((unsigned long long)seq + 1);
}

const char *aof_manifest_new_base(aof_manifest *am, int rdb)
{
    aof_info *old = aof_manifest_base(am);
    if (old)
        to_history_front(am, (int)(old - am->f));
    char name[4096];
    am->base_seq = next_seq(am->base_seq);
    int n = snprintf(name, sizeof name, "%s.%lld.base.%s", srv.cfg.appendfilename, am->base_seq,
                     rdb ? "rdb" : "aof");
    return add(am, name, (size_t)n, am->base_seq, AOF_TYPE_BASE)->name;
}

const char *aof_manifest_new_incr(aof_manifest *am)
{
    char name[4096];
    am->incr_seq = next_seq(am->incr_seq);
    int n = snprintf(name, sizeof name, "%s.%lld.incr.aof", srv.cfg.appendfilename, am->incr_seq);
    return add(am, name, (size_t)n, am->incr_seq, AOF_TYPE_INCR)->name;
}

void aof_manifest_incr_to_history(aof_manifest *am, int keep_last)
{
    /* From the last incr file back to the first, each to the front. */
    aof_info *last = keep_last ? aof_manifest_last_incr(am) : NULL;
    int skip = last ? 1 : 0, moved = 0;
    for (int i = am->n - 1; i >= moved; i--) {
        if (am->f[i].type != AOF_TYPE_INCR)
            continue;
        if (skip) {
            skip = 0;
            continue;
        }
        to_history_front(am, i);
        moved++;
        i++; /* the entries before i moved up by one */
    }
}

void aof_manifest_drop_history(aof_manifest *am)
{
    int k = 0;
    for (int i = 0; i < am->n; i++) {
        if (am->f[i].type == AOF_TYPE_HIST)
            kv_free(am->f[i].name);
        else
            am->f[k++] = am->f[i];
    }
    am->n = k;
}

/* ---- text form ---- */

static int needs_quotes(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"' || isspace(c) || !isprint(c))
            return 1;
    }
    return 0;
}

static void put_name(bk_buf *b, const char *s)
{
    if (!needs_quotes(s)) {
        buf_append(b, s, strlen(s));
        return;
    }
    buf_append(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        static const char from[] = "\\\"\n\r\t\a\b", to[] = "\\\"nrtab";
        const char *e = c ? strchr(from, c) : NULL;
        if (e) {
            char esc[2] = { '\\', to[e - from] };
            buf_append(b, esc, 2);
        } else if (isprint(c)) {
            buf_append(b, s, 1);
        } else {
            buf_appendf(b, "\\x%02x", c);
        }
    }
    buf_append(b, "\"", 1);
}

void aof_manifest_format(const aof_manifest *am, bk_buf *b)
{
    static const char order[] = { AOF_TYPE_BASE, AOF_TYPE_HIST, AOF_TYPE_INCR };
    for (size_t o = 0; o < sizeof order; o++) {
        for (int i = 0; i < am->n; i++) {
            const aof_info *ai = &am->f[i];
            if (ai->type != order[o])
                continue;
            buf_append(b, "file ", 5);
            put_name(b, ai->name);
            buf_appendf(b, " seq %lld type %c\n", ai->seq, ai->type);
        }
    }
}

/* Logs Redis's words for a bad manifest and stops the server. */
_Noreturn static void fatal(int linenum, const char *line, const char *err)
{
    log_error("*** FATAL AOF MANIFEST FILE ERROR ***");
    if (line) {
        log_error("Reading the manifest file, at line %d", linenum);
        log_error(">>> '%s'", line);
    }
    log_error("%s", err);
    exit(1);
}

void aof_manifest_load(const char *path, aof_manifest *am)
{
    memset(am, 0, sizeof *am);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        log_error("Fatal error: can't open the AOF manifest file %s for reading: %s", path,
                  strerror(errno));
        exit(1);
    }
    char buf[MANIFEST_MAX_LINE + 1];
    long long maxseq = 0;
    int linenum = 0;
    for (;;) {
        if (!fgets(buf, sizeof buf, fp)) {
            if (ferror(fp))
                fatal(0, NULL, "Read AOF manifest failed");
            if (linenum == 0)
                fatal(0, NULL, "Found an empty AOF manifest");
            break;
        }
        linenum++;
        if (buf[0] == '#')
            continue;
        if (!strchr(buf, '\n'))
            fatal(0, NULL, "The AOF manifest file contains too long line");
        /* trim spaces, tabs and line ends on both sides */
        char *line = buf, *end = buf + strlen(buf);
        while (*line && strchr(" \t\r\n", *line))
            line++;
        while (end > line && strchr(" \t\r\n", end[-1]))
            *--end = 0;
        if (!*line)
            fatal(linenum, line, "Invalid AOF manifest file format");
        char **w; /* Redis's argument splitting: quotes and escapes as inline commands */
        int argc = kv_split_line(line, &w);
        if (argc < 6 || argc % 2)
            fatal(linenum, line, "Invalid AOF manifest file format");
        const char *name = NULL;
        long long seq = 0;
        char type = 0;
        for (int i = 0; i < argc; i += 2) {
            if (!strcasecmp(w[i], "file")) {
                name = w[i + 1];
                if (strchr(name, '/') || strchr(name, '\\'))
                    fatal(linenum, line, "File can't be a path, just a filename");
            } else if (!strcasecmp(w[i], "seq")) {
                seq = atoll(w[i + 1]);
            } else if (!strcasecmp(w[i], "type")) {
                type = w[i + 1][0];
            }
        }
        if (!name || !seq || !type)
            fatal(linenum, line, "Invalid AOF manifest file format");
        if (type == AOF_TYPE_BASE) {
            if (aof_manifest_base(am))
                fatal(linenum, line, "Found duplicate base file information");
            am->base_seq = seq;
        } else if (type == AOF_TYPE_INCR) {
            if (seq <= maxseq)
                fatal(linenum, line, "Found a non-monotonic sequence number");
            am->incr_seq = maxseq = seq;
        } else if (type != AOF_TYPE_HIST) {
            fatal(linenum, line, "Unknown AOF file type");
        }
        add(am, name, strlen(name), seq, type);
        kv_free_argv(argc, w);
    }
    fclose(fp);
}

static void fsync_dir_of(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int aof_manifest_persist(const aof_manifest *am)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/%s.manifest", srv.cfg.appenddirname, srv.cfg.appendfilename);
    snprintf(tmp, sizeof tmp, "%s/temp-%s.manifest", srv.cfg.appenddirname,
             srv.cfg.appendfilename);
    /* Redis's messages name the files, not their paths. */
    const char *name = path + strlen(srv.cfg.appenddirname) + 1;
    const char *tmp_name = tmp + strlen(srv.cfg.appenddirname) + 1;
    bk_buf b = { 0 };
    aof_manifest_format(am, &b);
    int rc = -1;
    int fd = open(tmp, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_warn("Can't open the AOF manifest file %s: %s", tmp_name, strerror(errno));
        goto out;
    }
    for (size_t off = 0; off < b.len;) {
        ssize_t w = write(fd, b.data + off, b.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            log_warn("Error trying to write the temporary AOF manifest file %s: %s", tmp_name,
                     strerror(errno));
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0) {
        log_warn("Fail to fsync the temp AOF file %s: %s.", tmp_name, strerror(errno));
        goto out;
    }
    if (rename(tmp, path) < 0) {
        log_warn("Error trying to rename the temporary AOF manifest file %s into %s: %s",
                 tmp_name, name, strerror(errno));
        goto out;
    }
    fsync_dir_of(srv.cfg.appenddirname);
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    buf_free(&b);
    return rc;
}
