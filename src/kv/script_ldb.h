/* The Lua debugger (LDB) of SCRIPT DEBUG YES / SYNC: script_ldb.c. */
#ifndef BRISK_KV_SCRIPT_LDB_H
#define BRISK_KV_SCRIPT_LDB_H

#include "kv/server.h"

#include <lua.h>

enum { LDB_FORK = 1, LDB_SYNC = 2 }; /* kv_client.ldb_mode; 0 = off */

/* Starts a session for c's EVAL of body: 1 = run it (ldb_hook installed by
 * the caller) then ldb_end; 0 = do not (an error was replied, or this is
 * the parent of a forked session: the child answers c, c closes here). */
int ldb_start(kv_client *c, bk_str body);
/* Ends the session (a forked child exits here, after the reply). */
void ldb_end(kv_client *c);
/* The line and count hook of a debugged EVAL. */
void ldb_hook(lua_State *L, lua_Debug *ar);

/* A session runs (active); it stops at the next line (step). Read inline:
 * redis.call asks on every call whether it logs its command and reply. */
extern struct ldb_flags {
    int active, step;
} ldb_flags;
static inline int ldb_active(void) { return ldb_flags.active; }
static inline int ldb_logging(void) { return ldb_flags.active & ldb_flags.step; }
void ldb_log_command(int argc, const bk_str *argv);
void ldb_log_reply(const char *p, size_t n);
void ldb_log_error(const char *err);
/* A write refused before the command ran: Redis logs its shared error as
 * it is ("-READONLY ...\r\n"), and no reply. */
void ldb_log_refusal(const char *p, size_t n);

/* redis.debug() and redis.breakpoint(). */
int l_ldb_debug(lua_State *L);
int l_ldb_breakpoint(lua_State *L);

/* Reaps ended forked sessions (cron); kills them all (shutdown). */
void ldb_cron(void);
void ldb_kill_sessions(void);

#endif
