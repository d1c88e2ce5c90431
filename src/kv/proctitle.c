/* The process title (ps, /proc/PID/cmdline) from proc-title-template, as
 * Redis 7 sets it: "{title} {listen-addr} {server-mode}" by default.
 *
 * Linux shows the bytes of the original argv area as the command line, so
 * the title is written there. The environment strings usually follow the
 * argv strings in one run of memory: kv_proctitle_init moves environ to the
 * heap so that the whole run can hold a long title, and gives the caller a
 * heap copy of argv (the strings in the area get overwritten). */
#include "kv/proctitle.h"

#include "kv/config.h"
#include "kv/mem.h"
#include "kv/server.h"

#include <stdio.h>
#include <string.h>

extern char **environ;

static char *area;   /* the argv (and environ) strings, once copied away */
static size_t area_len;
static char **argv_copy; /* the caller's from then on, for the process's life */

char **kv_proctitle_init(int argc, char **argv)
{
    char **copy = argv_copy = kv_malloc(((size_t)argc + 1) * sizeof *copy);
    for (int i = 0; i < argc; i++)
        copy[i] = kv_strndup(argv[i], strlen(argv[i]));
    copy[argc] = NULL;
    if (argc == 0)
        return copy;
    /* The run of strings that starts at argv[0], each right after the last. */
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; i++)
        end = argv[i] + strlen(argv[i]) + 1;
    size_t nenv = 0;
    while (environ && environ[nenv])
        nenv++;
    char **env = kv_malloc((nenv + 1) * sizeof *env);
    for (size_t i = 0; i < nenv; i++) {
        if (environ[i] == end)
            end = environ[i] + strlen(environ[i]) + 1;
        env[i] = kv_strndup(environ[i], strlen(environ[i]));
    }
    env[nenv] = NULL;
    environ = env;
    area = argv[0];
    area_len = (size_t)(end - area);
    return copy;
}

/* Appends the value of the template variable name[0..n) to out (NUL
 * terminated, cap bytes); 0, or -1 when the variable is unknown. */
static int put_var(char *out, size_t cap, size_t *len, const char *name, size_t n)
{
    char v[512];
    const char *unixsocket = kv_config_noop_str("unixsocket");
    int port = srv.cfg.port, tls_port = kv_tls_port();
#define IS(lit) (n == sizeof lit - 1 && memcmp(name, lit, n) == 0)
    if (IS("title"))
        snprintf(v, sizeof v, "%s", srv.executable ? srv.executable : "");
    else if (IS("listen-addr") && (port || tls_port))
        snprintf(v, sizeof v, "%s:%d", srv.cfg.nbind ? srv.cfg.bind[0] : "*",
                 port ? port : tls_port);
    else if (IS("listen-addr"))
        snprintf(v, sizeof v, "unixsocket:%s", unixsocket ? unixsocket : "");
    else if (IS("server-mode"))
        v[0] = '\0'; /* "[cluster]" or "[sentinel]" in Redis: neither here */
    else if (IS("port"))
        snprintf(v, sizeof v, "%d", port);
    else if (IS("tls-port"))
        snprintf(v, sizeof v, "%d", tls_port);
    else if (IS("unixsocket"))
        snprintf(v, sizeof v, "%s", unixsocket ? unixsocket : "");
    else if (IS("config-file"))
        snprintf(v, sizeof v, "%s", srv.config_file ? srv.config_file : "");
    else
        return -1;
#undef IS
    int k = snprintf(out + *len, cap - *len, "%s", v);
    if (k > 0)
        *len = BK_MIN(*len + (size_t)k, cap - 1);
    return 0;
}

/* Expands tmpl into out (cap bytes): "{name}" is a variable, "{{" a brace
 * (a '}' is itself); spaces at both ends go. Returns the length, or -1 for
 * an unknown or unclosed variable (as Redis's sdstemplate). */
static long expand(const char *tmpl, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (const char *p = tmpl; *p;) {
        if (p[0] == '{' && p[1] == '{') {
            if (len + 1 < cap)
                out[len++] = '{';
            p += 2;
        } else if (p[0] == '{') {
            const char *close = strchr(p + 1, '}');
            if (!close || put_var(out, cap, &len, p + 1, (size_t)(close - p - 1)) < 0)
                return -1;
            p = close + 1;
        } else {
            if (len + 1 < cap)
                out[len++] = *p;
            p++;
        }
        out[len] = '\0';
    }
    size_t start = 0;
    while (out[start] == ' ')
        start++;
    while (len > start && out[len - 1] == ' ')
        len--;
    memmove(out, out + start, len - start);
    out[len - start] = '\0';
    return (long)(len - start);
}

int kv_proctitle_valid(const char *tmpl)
{
    char out[1024];
    return expand(tmpl, out, sizeof out) > 0;
}

void kv_proctitle_update(void)
{
    const char *tmpl = kv_config_noop_str("proc-title-template");
    char out[4096];
    if (!area || !tmpl || expand(tmpl, out, sizeof out) <= 0)
        return;
    size_t n = BK_MIN(strlen(out), area_len - 1);
    memset(area, 0, area_len);
    memcpy(area, out, n);
}
