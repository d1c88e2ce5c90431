#include "http/static.h"

#include "core/clock.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = ascii_lower(ch);
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

int static_normalize_path(bk_str path, char *out, size_t cap, int *dir_form)
{
    if (!path.len || path.p[0] != '/')
        return -400;
    /* The common case first: nothing to decode or collapse (no '%', NUL,
     * "//" or "/." anywhere), so the result is the path without its
     * leading '/' and without one trailing '/'. Anything else, and a
     * result that does not fit, takes the general loop below. */
    size_t k = 1;
    char prev = '/';
    while (k < path.len) {
        uint64_t w; /* eight bytes without '/', '%' or NUL pass at once */
        if (prev != '/' && k + 8 <= path.len &&
            (memcpy(&w, path.p + k, 8),
             !(bytes8_has(w, '/') | bytes8_has(w, '%') | bytes8_has_below(w, 1)))) {
            k += 8;
            prev = path.p[k - 1];
            continue;
        }
        char ch = path.p[k];
        if (ch == '%' || ch == '\0' || (prev == '/' && (ch == '/' || ch == '.')))
            break;
        prev = ch;
        k++;
    }
    if (k == path.len) {
        size_t n = path.len - 1 - (path.len > 1 && path.p[path.len - 1] == '/');
        if (n < cap) {
            memcpy(out, path.p + 1, n);
            out[n] = '\0';
            *dir_form = path.p[path.len - 1] == '/' || n == 0;
            return (int)n;
        }
    }
    size_t o = 0;      /* output length */
    size_t seg = 0;    /* output offset where the current segment began */
    *dir_form = 0;
    for (size_t i = 0; i <= path.len; i++) {
        char ch;
        if (i == path.len) {
            ch = '/'; /* flush the last segment */
        } else if (path.p[i] == '%') {
            if (i + 2 >= path.len)
                return -400;
            int h = hexval(path.p[i + 1]), l = hexval(path.p[i + 2]);
            if (h < 0 || l < 0)
                return -400;
            ch = (char)(h * 16 + l);
            if (ch == '/' || ch == '\0')
                return -404; /* never a separator or a terminator in disguise */
            i += 2;
            if (o >= cap)
                return -414;
            out[o++] = ch;
            continue;
        } else {
            ch = path.p[i];
        }
        if (ch != '/') {
            if (ch == '\0')
                return -404;
            if (o >= cap)
                return -414;
            out[o++] = ch;
            continue;
        }
        /* a separator ends the segment out[seg, o) */
        size_t n = o - seg;
        if (n == 0 || (n == 1 && out[seg] == '.')) {
            o = seg;
        } else if (n == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            if (seg == 0)
                return -404; /* would leave the root */
            o = seg - 1;     /* drop the '/' before ".." too */
            while (o > 0 && out[o - 1] != '/')
                o--;
        } else {
            if (o >= cap)
                return -414;
            out[o++] = '/';
        }
        seg = o;
    }
    if (o > 0 && out[o - 1] == '/')
        o--; /* the separator added after the last segment */
    size_t last = path.len;
    *dir_form = path.p[last - 1] == '/' || o == 0;
    if (o >= cap)
        return -414;
    out[o] = '\0';
    return (int)o;
}

int static_parse_range(bk_str v, uint64_t size, uint64_t *first, uint64_t *last)
{
    if (v.len < 7 || !str_ieq_lit((bk_str){ v.p, 6 }, "bytes=", 6))
        return 0;
    const char *p = v.p + 6, *end = v.p + v.len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    const char *dash = memchr(p, '-', (size_t)(end - p));
    if (!dash || memchr(p, ',', (size_t)(end - p)))
        return 0; /* no dash, or several ranges */
    const char *e = end;
    while (e > dash + 1 && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    uint64_t a, b;
    const uint64_t max = (uint64_t)1 << 62;
    if (dash == p) { /* suffix: -N */
        if (num_parse_u64(dash + 1, (size_t)(e - dash - 1), max, &b) < 0)
            return 0;
        if (b == 0 || size == 0)
            return -416;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return 1;
    }
    if (num_parse_u64(p, (size_t)(dash - p), max, &a) < 0)
        return 0;
    if (e == dash + 1) {
        b = UINT64_MAX; /* open: N- */
    } else if (num_parse_u64(dash + 1, (size_t)(e - dash - 1), max, &b) < 0 || b < a) {
        return 0;
    }
    if (a >= size)
        return -416;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return 1;
}

static bk_str trim(bk_str s)
{
    while (s.len && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.len--;
    }
    while (s.len && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t'))
        s.len--;
    return s;
}

/* Calls fn for each comma-separated element until it returns nonzero. */
static int each_element(bk_str list, int (*fn)(bk_str item, void *arg), void *arg)
{
    size_t i = 0;
    while (i <= list.len) {
        size_t s = i;
        while (i < list.len && list.p[i] != ',')
            i++;
        bk_str item = trim((bk_str){ list.p + s, i - s });
        if (item.len) {
            int rc = fn(item, arg);
            if (rc)
                return rc;
        }
        i++;
    }
    return 0;
}

static int etag_item(bk_str item, void *arg)
{
    const bk_str *etag = arg;
    if (item.len == 1 && item.p[0] == '*')
        return 1;
    if (item.len > 2 && item.p[0] == 'W' && item.p[1] == '/') {
        item.p += 2;
        item.len -= 2;
    }
    return str_eq(item, *etag);
}

int static_etag_match(bk_str header, bk_str etag)
{
    return each_element(header, etag_item, &etag);
}

typedef struct {
    const char *coding;
    int named; /* the coding's own q: -1 unnamed, 0 refused, 1 accepted */
    int star;  /* the same for "*" */
} coding_query;

static int q_is_zero(bk_str params)
{
    /* params: what follows ';', e.g. " q=0.000" */
    params = trim(params);
    if (params.len < 2 || (params.p[0] != 'q' && params.p[0] != 'Q') || params.p[1] != '=')
        return 0;
    for (size_t k = 2; k < params.len; k++)
        if (params.p[k] != '0' && params.p[k] != '.')
            return 0;
    return 1;
}

static int coding_item(bk_str item, void *arg)
{
    coding_query *q = arg;
    const char *semi = memchr(item.p, ';', item.len);
    bk_str name = trim((bk_str){ item.p, semi ? (size_t)(semi - item.p) : item.len });
    int ok = !(semi && q_is_zero((bk_str){ semi + 1, item.len - (size_t)(semi + 1 - item.p) }));
    if (str_ieq_lit(name, q->coding, strlen(q->coding)))
        q->named = ok;
    else if (name.len == 1 && name.p[0] == '*')
        q->star = ok;
    return 0;
}

/* RFC 9110 12.5.3: a coding's own entry decides; "*" covers only codings
 * not named elsewhere; q=0 means "not acceptable". */
int static_accepts_encoding(bk_str header, const char *coding)
{
    if (!header.p)
        return 0;
    coding_query q = { coding, -1, -1 };
    each_element(header, coding_item, &q);
    return q.named >= 0 ? q.named : q.star > 0;
}

/* ---- the handler ---- */

static fcache_entry *lookup(http_exchange *x, const char *rel, size_t len)
{
    /* The cache belongs to the worker, so it follows the worker's current
     * configuration (root, MIME table), not the one this connection began
     * with: entries must never point into a configuration that may go. */
    const http_conf *conf = x->hw->conf;
    fcache_opts o = {
        .root_fd = conf->root_fd,
        .valid_ms = conf->open_file_cache_valid,
        .memory_max = conf->memory_cache_max_file,
        .mime = conf->mime,
    };
    fcache_entry *e = fcache_get(x->hw->files, rel, len, x->hw->w.loop.now_ms, &o);
    if (!e) {
        log_error("out of memory in the file cache");
        abort();
    }
    return e;
}

static int status_for_errno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return 404;
    case ENAMETOOLONG:
        return 414;
    case EACCES:
    case EPERM:
    case EXDEV: /* a symlink out of the root */
    case ELOOP:
        return 403;
    default:
        return 500;
    }
}

void static_redirect_to_dir(http_exchange *x, const http_request *r)
{
    /* Location is the path as sent plus '/', so it is already encoded. */
    size_t n = r->path.len + 1 + (r->query.len ? r->query.len + 1 : 0);
    char *loc = malloc(n + 1);
    if (!loc) {
        http_exchange_error(x, 500, NULL);
        return;
    }
    memcpy(loc, r->path.p, r->path.len);
    loc[r->path.len] = '/';
    if (r->query.len) {
        loc[r->path.len + 1] = '?';
        memcpy(loc + r->path.len + 2, r->query.p, r->query.len);
    }
    loc[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)loc[i] < 0x21 || loc[i] == 0x7f)
            loc[i] = '_'; /* the parser refuses these; belt and braces */
    size_t hl = n + 16;
    char *hdr = malloc(hl);
    if (hdr) {
        snprintf(hdr, hl, "Location: %s\r\n", loc);
        http_exchange_error(x, 301, hdr);
    } else {
        http_exchange_error(x, 500, NULL);
    }
    free(hdr);
    free(loc);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a string literal: its length counted by the compiler (a
 * hand-counted 38 for 37 bytes once put a NUL into every listing). */
#define BUF_LIT(b, lit) buf_append((b), (lit), sizeof(lit) - 1)

static void put_html_escaped(bk_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': BUF_LIT(b, "&lt;"); break;
        case '>': BUF_LIT(b, "&gt;"); break;
        case '&': BUF_LIT(b, "&amp;"); break;
        case '"': BUF_LIT(b, "&quot;"); break;
        case '\'': BUF_LIT(b, "&#39;"); break;
        default: buf_append(b, s, 1);
        }
    }
}

static void put_url_escaped(bk_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            buf_append(b, s, 1);
        } else {
            char e[3] = { '%', hex[ch >> 4], hex[ch & 15] };
            buf_append(b, e, 3);
        }
    }
}

#define AUTOINDEX_MAX 10000

/* An HTML listing of a directory; every name is escaped. */
static void autoindex(http_exchange *x, const http_request *r, fcache_entry *dir)
{
    int fd = openat(dir->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        http_exchange_error(x, 403, NULL);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < AUTOINDEX_MAX) {
        if (de->d_name[0] == '.')
            continue; /* hidden files, "." and ".." */
        int is_dir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK) {
            struct stat st;
            is_dir = fstatat(dirfd(d), de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        size_t len = strlen(de->d_name);
        names[n] = malloc(len + 2);
        if (!names[n])
            break;
        memcpy(names[n], de->d_name, len);
        names[n][len] = is_dir ? '/' : '\0';
        names[n][len + 1] = '\0';
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);

    bk_buf b = { 0 };
    char title[PATH_MAX + 8];
    snprintf(title, sizeof title, "%.*s", (int)BK_MIN(r->path.len, (size_t)PATH_MAX), r->path.p);
    BUF_LIT(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    put_html_escaped(&b, title);
    BUF_LIT(&b, "</title></head>\n<body><h1>Index of ");
    put_html_escaped(&b, title);
    BUF_LIT(&b, "</h1><hr><pre>\n<a href=\"../\">../</a>\n");
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        int is_dir = len && names[i][len - 1] == '/';
        if (is_dir)
            names[i][len - 1] = '\0';
        BUF_LIT(&b, "<a href=\"");
        put_url_escaped(&b, names[i]);
        if (is_dir)
            BUF_LIT(&b, "/");
        BUF_LIT(&b, "\">");
        put_html_escaped(&b, names[i]);
        if (is_dir)
            BUF_LIT(&b, "/");
        BUF_LIT(&b, "</a>\n");
        free(names[i]);
    }
    free(names);
    BUF_LIT(&b, "</pre><hr></body></html>\n");

    bk_str ct = BK_STR("Content-Type: text/html; charset=utf-8\r\n");
    http_exchange_send_head(x, 200, &ct, 1, b.len, b.data, b.len);
    http_exchange_finish(x);
    buf_free(&b);
}

/* A compressed sibling (FILE.br / FILE.gz) the client accepts, not older
 * than the file, or NULL. *any_variant tells whether one exists at all. */
static fcache_entry *pick_variant(http_exchange *x, const http_request *r, fcache_entry *f,
                                  const char **coding, int *any_variant)
{
    static const struct { const char *ext, *coding; } variants[] = {
        { ".br", "br" }, { ".gz", "gzip" },
    };
    bk_str ae = http_request_header(r, HH_ACCEPT_ENCODING);
    *any_variant = 0;
    /* Siblings are looked for even when the client accepts no coding: the
     * identity response must say Vary too, or a shared cache could hand
     * it the compressed one (nginx's gzip_vary). */
    if (!x->conf->precompressed || f->key_len + 4 > PATH_MAX)
        return NULL;
    /* Most files have no sibling: remember that for as long as the
     * siblings' own (negative) cache entries stay fresh, which is as long
     * as looking them up would have given the same answer. */
    uint64_t now = x->hw->w.loop.now_ms, valid = x->hw->conf->open_file_cache_valid;
    if (now < f->no_variant_until)
        return NULL;
    uint64_t until = UINT64_MAX;
    char name[PATH_MAX];
    memcpy(name, f->key, f->key_len);
    for (size_t i = 0; i < BK_ARRAY_LEN(variants); i++) {
        memcpy(name + f->key_len, variants[i].ext, 3);
        fcache_entry *v = lookup(x, name, f->key_len + 3);
        until = BK_MIN(until, v->checked_ms + valid);
        int usable = !v->err && !v->is_dir &&
                     (v->mtime.tv_sec > f->mtime.tv_sec ||
                      (v->mtime.tv_sec == f->mtime.tv_sec && v->mtime.tv_nsec >= f->mtime.tv_nsec));
        if (usable) {
            *any_variant = 1;
            if (ae.p && static_accepts_encoding(ae, variants[i].coding)) {
                *coding = variants[i].coding;
                return v;
            }
        }
        fcache_release(v);
    }
    if (!*any_variant)
        f->no_variant_until = until;
    return NULL;
}

/* 304 when the client's copy is current. */
static int not_modified(const http_request *r, const fcache_entry *f)
{
    bk_str inm = http_request_header(r, HH_IF_NONE_MATCH);
    if (inm.p)
        return static_etag_match(inm, (bk_str){ f->etag, f->etag_len });
    bk_str ims = http_request_header(r, HH_IF_MODIFIED_SINCE);
    time_t t;
    return ims.p && clock_parse_http_date(ims.p, ims.len, &t) == 0 && f->mtime.tv_sec <= t;
}

/* If-Range: the range applies only to the representation it names. */
static int if_range_ok(const http_request *r, const fcache_entry *f)
{
    bk_str ir = http_request_header(r, HH_IF_RANGE);
    if (!ir.p)
        return 1;
    if (ir.len && ir.p[0] == '"')
        return str_eq(ir, (bk_str){ f->etag, f->etag_len }); /* strong comparison */
    time_t t;
    return clock_parse_http_date(ir.p, ir.len, &t) == 0 && t == f->mtime.tv_sec;
}

static void release_entry(void *arg)
{
    fcache_release(arg);
}

/* The header lines every 200/206 of f starts with, made once per cache
 * entry: "Content-Type", "Last-Modified", "ETag", "Accept-Ranges".
 * Returns an empty slice when out of memory (the caller writes them
 * itself). */
static bk_str file_head(fcache_entry *f)
{
    if (!f->head) {
        static const char ct[] = "Content-Type: ", lm[] = "\r\nLast-Modified: ",
                          et[] = "\r\nETag: ", ar[] = "\r\nAccept-Ranges: bytes\r\n";
        size_t n = sizeof ct + f->mime.len + sizeof lm + CLOCK_HTTP_DATE_LEN + sizeof et +
                   f->etag_len + sizeof ar;
        char *h = malloc(n), *p = h;
        if (!h)
            return BK_STR_NULL;
        p = mempcpy(p, ct, sizeof ct - 1);
        p = mempcpy(p, f->mime.p, f->mime.len);
        p = mempcpy(p, lm, sizeof lm - 1);
        p = mempcpy(p, f->last_modified, CLOCK_HTTP_DATE_LEN);
        p = mempcpy(p, et, sizeof et - 1);
        p = mempcpy(p, f->etag, f->etag_len);
        p = mempcpy(p, ar, sizeof ar - 1);
        f->head = h;
        f->head_len = (uint32_t)(p - h);
    }
    return (bk_str){ f->head, f->head_len };
}

static void send_file(http_exchange *x, const http_request *r, fcache_entry *f, bk_str mime,
                      const char *coding, int vary)
{
    if (not_modified(r, f)) {
        bk_str lines[] = {
            BK_STR("ETag: "), { f->etag, f->etag_len },
            BK_STR("\r\nLast-Modified: "), { f->last_modified, CLOCK_HTTP_DATE_LEN },
            BK_STR("\r\n"), vary ? BK_STR("Vary: Accept-Encoding\r\n") : BK_STR_NULL,
        };
        http_exchange_send_head(x, 304, lines, BK_ARRAY_LEN(lines), HTTP_LEN_NONE, NULL, 0);
        http_exchange_finish(x);
        return;
    }
    uint64_t first = 0, last = f->size ? f->size - 1 : 0, len = f->size;
    int status = 200;
    bk_str range = http_request_header(r, HH_RANGE);
    if (range.p && if_range_ok(r, f)) {
        int rc = static_parse_range(range, f->size, &first, &last);
        if (rc < 0) {
            char extra[64];
            snprintf(extra, sizeof extra, "Content-Range: bytes */%llu\r\n",
                     (unsigned long long)f->size);
            http_exchange_error(x, 416, extra);
            return;
        }
        if (rc == 1) {
            status = 206;
            len = last - first + 1;
        }
    }

    /* The head (and a small in-memory body) goes out in one piece. */
    char cr[96];
    bk_str parts[16];
    size_t np = 0;
    bk_str head = mime.p == f->mime.p && mime.len == f->mime.len ? file_head(f) : BK_STR_NULL;
    if (head.len) {
        parts[np++] = head;
    } else {
        parts[np++] = BK_STR("Content-Type: ");
        parts[np++] = mime;
        parts[np++] = BK_STR("\r\nLast-Modified: ");
        parts[np++] = (bk_str){ f->last_modified, CLOCK_HTTP_DATE_LEN };
        parts[np++] = BK_STR("\r\nETag: ");
        parts[np++] = (bk_str){ f->etag, f->etag_len };
        parts[np++] = BK_STR("\r\nAccept-Ranges: bytes\r\n");
    }
    if (coding) {
        parts[np++] = BK_STR("Content-Encoding: ");
        parts[np++] = (bk_str){ coding, strlen(coding) };
        parts[np++] = BK_STR("\r\n");
    }
    if (vary)
        parts[np++] = BK_STR("Vary: Accept-Encoding\r\n");
    if (status == 206) {
        int n = snprintf(cr, sizeof cr, "Content-Range: bytes %llu-%llu/%llu\r\n",
                         (unsigned long long)first, (unsigned long long)last,
                         (unsigned long long)f->size);
        parts[np++] = (bk_str){ cr, (size_t)n };
    }
    assert(np <= BK_ARRAY_LEN(parts));
    if (f->content && len <= HTTP_COPY_MAX) {
        http_exchange_send_head(x, status, parts, np, len, f->content + first, (size_t)len);
    } else {
        http_exchange_send_head(x, status, parts, np, len, NULL, 0);
        f->refs++; /* the output queue's, dropped by release_entry */
        if (f->content)
            http_exchange_send_ref(x, f->content + first, (size_t)len, release_entry, f);
        else
            http_exchange_send_fd(x, f->fd, x->map_files ? fcache_map(f) : NULL, first, len,
                                  release_entry, f);
    }
    http_exchange_finish(x);
}

void static_serve(http_exchange *x, const http_request *r, const char *path, size_t plen,
                  int dir_form)
{
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
        http_exchange_error(x, 405, "Allow: GET, HEAD\r\n");
        return;
    }
    if (x->hw->conf->root_fd < 0) {
        http_exchange_error(x, 404, NULL); /* no root configured */
        return;
    }
    /* room to append "/" + index */
    char rel[STATIC_PATH_MAX + 1 + sizeof x->conf->index];
    memcpy(rel, path, plen + 1);
    int len = (int)plen;
    fcache_entry *f = lookup(x, rel, (size_t)len);
    if (f->err) {
        http_exchange_error(x, status_for_errno(f->err), NULL);
        fcache_release(f);
        return;
    }
    if (f->is_dir) {
        if (!dir_form) {
            fcache_release(f);
            static_redirect_to_dir(x, r);
            return;
        }
        size_t ilen = (size_t)snprintf(rel + len, sizeof rel - (size_t)len, "%s%s",
                                       len ? "/" : "", x->conf->index);
        fcache_entry *idx = lookup(x, rel, (size_t)len + ilen);
        if (idx->err || idx->is_dir) {
            fcache_release(idx);
            if (x->conf->autoindex)
                autoindex(x, r, f);
            else
                http_exchange_error(x, 403, NULL);
            fcache_release(f);
            return;
        }
        fcache_release(f);
        f = idx;
    } else if (dir_form) {
        http_exchange_error(x, 404, NULL); /* "file.html/" names no directory */
        fcache_release(f);
        return;
    }

    const char *coding = NULL;
    int vary;
    fcache_entry *v = pick_variant(x, r, f, &coding, &vary);
    send_file(x, r, v ? v : f, f->mime, coding, vary);
    fcache_release(f);
    fcache_release(v);
}
