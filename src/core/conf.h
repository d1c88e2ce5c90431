/* Reading INI config files (libinih) with errors as "file:line: message",
 * and the value parsers every config schema shares. */
#ifndef BRISK_CORE_CONF_H
#define BRISK_CORE_CONF_H

#include <stddef.h>
#include <stdint.h>

#define CONF_ERR_MAX 512

/* Called for each key; returns 0, or -1 after writing a message to err
 * (without the file:line prefix, which conf_load adds). */
typedef int (*conf_key_cb)(void *udata, const char *section, const char *key,
                           const char *value, char *err, size_t errlen);

/* Parses path, calling cb for every key in order. Returns 0, or -1 with
 * "path:line: message" in err (CONF_ERR_MAX bytes). */
int conf_load(const char *path, conf_key_cb cb, void *udata, char *err);

/* Value parsers: 0 on success, -1 on bad input. */
int conf_parse_bool(const char *s, int *out);          /* on off yes no true false 1 0 */
int conf_parse_uint(const char *s, uint64_t max, uint64_t *out);
int conf_parse_size(const char *s, uint64_t *out);     /* 512, 8k, 1m, 2g */
int conf_parse_msec(const char *s, uint64_t *out);     /* 500ms, 60s, 5m, 1h; bare = s */

#endif
