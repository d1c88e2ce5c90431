#include "core/conf.h"

#include "core/common.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    conf_key_cb cb;
    void *udata;
    FILE *f;
    int line;        /* lines handed to libinih so far */
    int failed_line; /* line of the first key the callback refused */
    char msg[CONF_ERR_MAX];
} load_state;

/* libinih's line reader, counting lines so each key knows its own. */
static char *read_line(char *line, int num, void *stream)
{
    load_state *st = stream;
    char *r = fgets(line, num, st->f);
    if (r)
        st->line++;
    return r;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    load_state *st = user;
    if (st->failed_line)
        return 1; /* keep the first error only */
    if (st->cb(st->udata, section, name, value, st->msg, sizeof st->msg) < 0) {
        st->failed_line = st->line;
        return 0;
    }
    return 1;
}

int conf_load(const char *path, conf_key_cb cb, void *udata, char *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, CONF_ERR_MAX, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    load_state st = { .cb = cb, .udata = udata, .f = f };
    int line = ini_parse_stream(read_line, &st, on_key, &st);
    fclose(f);
    if (line == 0)
        return 0;
    if (line < 0) {
        snprintf(err, CONF_ERR_MAX, "%s: cannot read", path);
        return -1;
    }
    /* libinih reports the first error's line: ours (a refused key) or its
     * own (a line that is not "key = value" or "[section]"). */
    snprintf(err, CONF_ERR_MAX, "%s:%d: %s", path, line,
             st.failed_line == line ? st.msg : "syntax error");
    return -1;
}

int conf_parse_bool(const char *s, int *out)
{
    static const char *yes[] = { "on", "yes", "true", "1" };
    static const char *no[] = { "off", "no", "false", "0" };
    for (size_t i = 0; i < BK_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

int conf_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    return num_parse_u64(s, strlen(s), max, out);
}

/* Splits "123unit" into the number and a lower-case unit. */
static int split_unit(const char *s, uint64_t *n, char *unit, size_t unitlen)
{
    size_t i = 0;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    if (num_parse_u64(s, i, UINT64_MAX / 4096, n) < 0)
        return -1;
    size_t u = strlen(s + i);
    if (u >= unitlen)
        return -1;
    for (size_t k = 0; k < u; k++)
        unit[k] = ascii_lower(s[i + k]);
    unit[u] = '\0';
    return 0;
}

int conf_parse_size(const char *s, uint64_t *out)
{
    uint64_t n;
    char unit[4];
    if (split_unit(s, &n, unit, sizeof unit) < 0)
        return -1;
    static const struct { const char *u; uint64_t mul; } units[] = {
        { "", 1 }, { "b", 1 }, { "k", 1024 }, { "kb", 1024 },
        { "m", 1024 * 1024 }, { "mb", 1024 * 1024 },
        { "g", 1024ull * 1024 * 1024 }, { "gb", 1024ull * 1024 * 1024 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(units); i++)
        if (strcmp(unit, units[i].u) == 0) {
            if (n > UINT64_MAX / units[i].mul)
                return -1;
            *out = n * units[i].mul;
            return 0;
        }
    return -1;
}

int conf_parse_msec(const char *s, uint64_t *out)
{
    uint64_t n;
    char unit[4];
    if (split_unit(s, &n, unit, sizeof unit) < 0)
        return -1;
    static const struct { const char *u; uint64_t mul; } units[] = {
        { "", 1000 }, { "s", 1000 }, { "ms", 1 }, { "m", 60000 }, { "h", 3600000 },
    };
    for (size_t i = 0; i < BK_ARRAY_LEN(units); i++)
        if (strcmp(unit, units[i].u) == 0) {
            if (n > UINT64_MAX / units[i].mul)
                return -1;
            *out = n * units[i].mul;
            return 0;
        }
    return -1;
}
