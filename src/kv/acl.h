/* ACLs as Redis 7.0 has them: users with passwords (SHA-256 hashes), on/off,
 * command permissions (+cmd, +cmd|sub, +@category, first-args), key patterns
 * (~pat, %R~, %W~), channel patterns (&pat) and selectors "(...)"; the ACL
 * command, AUTH's user check, the ACL log, aclfile and "user" config lines.
 *
 * Every client points at the user it is authenticated as (c->user; NULL for
 * the AOF loader's fake client, which may run anything). A user that may run
 * every command on every key and channel is `open`: the dispatcher skips the
 * check for it, so the default user costs one flag test per command.
 * Main thread only. */
#ifndef BRISK_KV_ACL_H
#define BRISK_KV_ACL_H

#include "kv/server.h"

struct sockaddr;

struct kv_acl_user {
    int open; /* one selector with allcommands, allkeys and allchannels */
    /* the rest is private to acl.c */
};

/* Creates the default user, applies requirepass, the "user" lines of the
 * config and the aclfile. Returns 0, or -1 after logging why the server
 * must not start. Call once, after the command table is ready. */
int kv_acl_init(void);
void kv_acl_free(void);

/* The user new connections start with, and whether they start
 * authenticated (the default user is on and has nopass). */
kv_acl_user *kv_acl_default_user(void);
int kv_acl_default_nopass(void);
/* Protected mode: refuses a non-loopback peer while the default user has
 * nopass (Redis's rule, which CONFIG SET requirepass feeds). */
int kv_acl_protected_refuses(const struct sockaddr *sa);

/* The dispatcher's check, for a client whose user is not open: 0 when the
 * command may run; otherwise logs the denial, replies the NOPERM error and
 * returns -1. */
int kv_acl_deny(kv_client *c, const kv_cmd *cmd);
/* EXEC's re-check of a queued command (the rules may have changed since it
 * was queued): same contract, EXEC's error text. */
int kv_acl_exec_deny(kv_client *c, const kv_cmd *cmd);

/* Scripts (redis.call): whether the script caller's user may run cmd with
 * argv. NULL when it may; else the denial is logged (context "lua") and
 * Redis's error text is returned (static, without a code). */
const char *kv_acl_script_deny(kv_client *caller, const kv_cmd *cmd, int argc, const bk_str *argv);
/* redis.acl_check_cmd: 1 when the caller's user may run cmd with argv, 0
 * when not (nothing logged), -1 when argv[1] is no subcommand of cmd, -2
 * when a key-checked user asks for SET (or another command with variable
 * keys) without its first key. */
int kv_acl_script_check(const kv_client *caller, const kv_cmd *cmd, int argc, const bk_str *argv);
/* SORT BY/GET patterns: whether c's user may run cmd and read any key (a
 * selector allowing the command has allkeys or a read pattern "*"). */
int kv_acl_full_key_access(kv_client *c, const kv_cmd *cmd, int argc, const bk_str *argv);

/* AUTH / HELLO AUTH: checks user and password; on success c->user is set
 * (the caller marks the client authenticated) and 0 is returned, else the
 * failure is logged and -1 returned (the caller replies WRONGPASS). */
int kv_acl_authenticate(kv_client *c, bk_str user, bk_str pass);
/* RESET: back to the default user; returns whether that is authenticated. */
int kv_acl_client_reset(kv_client *c);
/* The name of c's user, for CLIENT LIST and the ACL log. */
const char *kv_acl_client_user(const kv_client *c);
/* RESTORE with sanitize-dump-payload "clients": whether c's user has the
 * skip-sanitize-payload flag (then the deep check is skipped). */
int kv_acl_client_skip_sanitize(const kv_client *c);
/* CLIENT KILL USER: whether the user exists; whether c is logged in as it. */
int kv_acl_user_exists(bk_str name);
int kv_acl_client_is(const kv_client *c, bk_str name);

/* Config options aclfile, acllog-max-len, acl-pubsub-default and the "user"
 * directive (files and command line only). Returns 1 when name is none of
 * them, else kv_config_set's 0 / -1 with err filled. */
int kv_acl_config_set(const char *name, int argc, char **argv, int at_runtime, char *err,
                      size_t errlen);
void kv_acl_config_get(bk_str pattern, void (*fn)(void *ud, const char *name, const char *value),
                       void *ud);
/* requirepass changed: the default user gets that password (or nopass). */
void kv_acl_requirepass_changed(const char *pw, size_t len);
/* fn(ud, "user NAME RULES") for every user, as ACL LIST (CONFIG REWRITE). */
void kv_acl_user_lines(void (*fn)(void *ud, const char *line, size_t n), void *ud);

void acl_command(kv_client *c);

#endif
