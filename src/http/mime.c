#include "http/mime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MIME_FILE_MAX (4 * 1024 * 1024)

typedef struct {
    char *ext; /* lower case, NUL-terminated */
    uint32_t ext_len;
    bk_str type;  /* points into the owned strings */
} mime_entry;

struct mime_table {
    mime_entry *slots; /* open addressing, power-of-two size */
    uint32_t mask, count;
    bk_str default_type;
    char *default_owned;
};

static const char *builtin[][2] = {
    { "html", "text/html" }, { "htm", "text/html" }, { "css", "text/css" },
    { "js", "text/javascript" }, { "mjs", "text/javascript" }, { "json", "application/json" },
    { "txt", "text/plain" }, { "xml", "text/xml" }, { "svg", "image/svg+xml" },
    { "png", "image/png" }, { "jpg", "image/jpeg" }, { "jpeg", "image/jpeg" },
    { "gif", "image/gif" }, { "webp", "image/webp" }, { "avif", "image/avif" },
    { "ico", "image/x-icon" }, { "wasm", "application/wasm" }, { "pdf", "application/pdf" },
    { "woff", "font/woff" }, { "woff2", "font/woff2" }, { "mp4", "video/mp4" },
    { "webm", "video/webm" }, { "mp3", "audio/mpeg" }, { "zip", "application/zip" },
    { "gz", "application/gzip" }, { "tar", "application/x-tar" }, { "md", "text/markdown" },
    { "csv", "text/csv" },
};

static uint32_t hash_ext(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)ascii_lower(p[i])) * 16777619u;
    return h;
}

static mime_entry *find_slot(mime_table *t, const char *ext, size_t n)
{
    uint32_t i = hash_ext(ext, n) & t->mask;
    for (;;) {
        mime_entry *e = &t->slots[i];
        if (!e->ext)
            return e;
        if (e->ext_len == n) {
            size_t k = 0;
            while (k < n && e->ext[k] == ascii_lower(ext[k]))
                k++;
            if (k == n)
                return e;
        }
        i = (i + 1) & t->mask;
    }
}

static int grow(mime_table *t)
{
    uint32_t old_size = t->mask + 1;
    mime_entry *old = t->slots;
    uint32_t size = old_size * 2;
    t->slots = calloc(size, sizeof *t->slots);
    if (!t->slots) {
        t->slots = old;
        return -1;
    }
    t->mask = size - 1;
    for (uint32_t i = 0; i < old_size; i++)
        if (old[i].ext)
            *find_slot(t, old[i].ext, old[i].ext_len) = old[i];
    free(old);
    return 0;
}

/* Later entries replace earlier ones (the file overrides the built-ins). */
static int add(mime_table *t, const char *ext, size_t ext_len, const char *type, size_t type_len)
{
    if ((t->count + 1) * 2 > t->mask + 1 && grow(t) < 0)
        return -1;
    int text = type_len > 5 && memcmp(type, "text/", 5) == 0;
    const char *cs = text ? "; charset=utf-8" : "";
    size_t cs_len = strlen(cs);
    char *mem = malloc(ext_len + 1 + type_len + cs_len + 1);
    if (!mem)
        return -1;
    for (size_t i = 0; i < ext_len; i++)
        mem[i] = ascii_lower(ext[i]);
    mem[ext_len] = '\0';
    char *ty = mem + ext_len + 1;
    memcpy(ty, type, type_len);
    memcpy(ty + type_len, cs, cs_len + 1);

    mime_entry *e = find_slot(t, mem, ext_len);
    if (e->ext)
        free(e->ext);
    else
        t->count++;
    *e = (mime_entry){ .ext = mem, .ext_len = (uint32_t)ext_len,
                       .type = { ty, type_len + cs_len } };
    return 0;
}

static int load_file(mime_table *t, FILE *f)
{
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *save = NULL;
        char *type = strtok_r(line, " \t\r\n", &save);
        if (!type || type[0] == '#' || !strchr(type, '/'))
            continue;
        for (char *ext; (ext = strtok_r(NULL, " \t\r\n", &save));)
            if (add(t, ext, strlen(ext), type, strlen(type)) < 0)
                return -1;
    }
    return 0;
}

mime_table *mime_load(const char *path, const char *default_type)
{
    mime_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->mask = 255;
    t->slots = calloc(t->mask + 1, sizeof *t->slots);
    t->default_owned = strdup(default_type ? default_type : "application/octet-stream");
    if (!t->slots || !t->default_owned)
        goto fail;
    t->default_type = (bk_str){ t->default_owned, strlen(t->default_owned) };
    for (size_t i = 0; i < BK_ARRAY_LEN(builtin); i++)
        if (add(t, builtin[i][0], strlen(builtin[i][0]), builtin[i][1], strlen(builtin[i][1])) < 0)
            goto fail;
    if (path) {
        /* A regular file of sane size only: /dev/zero or a FIFO would never
         * end the read loop. */
        FILE *f = fopen(path, "r");
        struct stat st;
        if (f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= MIME_FILE_MAX) {
            int rc = load_file(t, f);
            fclose(f);
            if (rc < 0)
                goto fail;
        } else if (f) {
            fclose(f);
        }
    }
    /* Debian maps .js to application/javascript; browsers and RFC 9239 want
     * text/javascript. Keep the modern one whatever the file says. */
    if (add(t, "js", 2, "text/javascript", 15) < 0)
        goto fail;
    return t;
fail:
    mime_free(t);
    return NULL;
}

void mime_free(mime_table *t)
{
    if (!t)
        return;
    if (t->slots)
        for (uint32_t i = 0; i <= t->mask; i++)
            free(t->slots[i].ext);
    free(t->slots);
    free(t->default_owned);
    free(t);
}

bk_str mime_lookup(const mime_table *t, bk_str name)
{
    size_t i = name.len;
    while (i > 0 && name.p[i - 1] != '.' && name.p[i - 1] != '/')
        i--;
    if (i == 0 || name.p[i - 1] != '.' || i == name.len)
        return t->default_type;
    size_t n = name.len - i;
    if (n > 32)
        return t->default_type;
    const mime_entry *e = find_slot((mime_table *)t, name.p + i, n);
    return e->ext ? e->type : t->default_type;
}
