/* brisk-kv configuration: redis.conf syntax in files, "--name value" on
 * the command line, CONFIG GET/SET at run time, from one table. */
#ifndef BRISK_KV_CONFIG_H
#define BRISK_KV_CONFIG_H

#include "kv/server.h"

void kv_config_defaults(kv_config *cfg);
/* busy-reply-threshold (alias lua-time-limit), ms: a script running longer
 * lets other clients in (they get BUSY). */
extern long long kv_busy_reply_ms;
/* min-replicas-to-write: brisk-kv has no replicas, so any value > 0
 * refuses scripts' writes (NOREPLICAS), as Redis without enough replicas. */
void kv_config_free(kv_config *cfg);
/* Applies "name arg..." (from a file line, the command line or CONFIG
 * SET). Returns 0, or -1 with a message in err. at_runtime refuses
 * options that cannot change while serving. */
int kv_config_set(kv_config *cfg, const char *name, int argc, char **argv, int at_runtime,
                  char *err, size_t errlen);
/* Reads a redis.conf style file. Returns 0, or -1 with "file:line: msg". */
int kv_config_load_file(kv_config *cfg, const char *path, char *err, size_t errlen);
/* Calls fn for every (name, value) whose name matches the glob pattern. */
void kv_config_get(const kv_config *cfg, bk_str pattern,
                   void (*fn)(void *ud, const char *name, const char *value), void *ud);
const char *kv_policy_name(enum kv_policy p);
/* A memory value as Redis writes them (100, 1b, 5k, 5kb, 2m, 2mb, 1g, 1gb): 0, or -1. */
int kv_config_parse_memory(const char *s, uint64_t *out);
const char *kv_fsync_name(enum kv_fsync f);
/* Splits a line like redis.conf does (quotes, escapes). Returns argc or
 * -1 on unbalanced quotes; the strings are malloc'd into argv. */
/* config_rewrite.c: CONFIG GET * of the built-in defaults, taken once at
 * start-up before any option is read; CONFIG REWRITE of srv.config_file
 * (Redis's rules: lines rewritten in place, non-defaults appended; with
 * force_all, every option). */
void kv_config_snapshot_defaults(void);
/* shutdown-on-sigterm / shutdown-on-sigint flags for sig (SIGTERM or SIGINT). */
enum { KV_SHUTDOWN_SAVE = 1, KV_SHUTDOWN_NOSAVE = 2, KV_SHUTDOWN_NOW = 4, KV_SHUTDOWN_FORCE = 8 };
int kv_shutdown_flags(int sig);
int kv_config_rewrite(int force_all, char *err, size_t errlen);
/* enable-debug-command, enable-protected-configs and enable-module-command
 * (no, yes or local: loopback clients only), as Redis 7.0 reads them:
 * whether the client at addr ("ip:port", c->addr) may use the feature. */
int kv_protected_action_allowed(const char *option, const char *addr);
int kv_split_line(const char *line, char ***argv);
void kv_free_argv(int argc, char **argv);

#endif
