/* Lua scripting shared by EVAL (script.c) and FUNCTION/FCALL
 * (t_function.c): the sandboxed Lua states, the redis.* API, the type
 * conversions both ways and the run of one script with its busy handling. */
#ifndef BRISK_KV_SCRIPT_H
#define BRISK_KV_SCRIPT_H

#include "kv/server.h"

#include <lua.h>

/* Script flags (shebang "#!lua flags=..." and function flags). */
enum {
    SCRIPT_NO_WRITES = 1u << 0,
    SCRIPT_ALLOW_OOM = 1u << 1,
    SCRIPT_ALLOW_STALE = 1u << 2,
    SCRIPT_NO_CLUSTER = 1u << 3,
    SCRIPT_ALLOW_CROSS_SLOT = 1u << 4,
    SCRIPT_LEGACY = 1u << 8, /* EVAL without a shebang: no upfront checks */
};

/* Parses a flag name list entry; returns the flag or 0 when unknown. */
unsigned script_flag_by_name(const char *p, size_t n);

/* A new sandboxed state: the libraries, the redis table, the error
 * handler in the registry (functions: the FUNCTION state; its library API
 * is added by t_function.c). Globals are frozen by script_protect_globals. */
lua_State *script_state_new(int functions);
void script_state_free(lua_State *L);
/* Freezes the globals of L (after the setup and, for functions, loads). */
void script_protect_globals(lua_State *L);

/* Runs the function at the top of L's stack (with nargs arguments above
 * it) for c, replying its result or error. name is the sha or the function
 * name for error messages; flags its script flags; ro the _RO variant. */
void script_run(kv_client *c, lua_State *L, int nargs, const char *name, unsigned flags, int ro,
                int is_func);
/* Upfront checks of a script with flags for c (OOM, read-only). Returns 0,
 * or -1 after replying the error. */
int script_check_flags(kv_client *c, unsigned flags, int ro);
/* Pushes a new array of the strings argv[0..n) (KEYS, ARGV). */
void script_push_args(lua_State *L, const bk_str *argv, int n);
/* Whether the strings argv[0..n) fit under L's heap cap (after a full
 * collection when they do not at first): they are pushed outside a
 * protected call, where a Lua memory error would end the process. When
 * not, the caller replies script_e_args_mem. */
int script_args_fit(lua_State *L, const bk_str *argv, int n);
extern const char script_e_args_mem[];
/* Around a library's load run: "FUNCTION LOAD timeout" past 500 ms. */
int script_load_timeout_hook_install(lua_State *L);
void script_load_timeout_hook_remove(lua_State *L);

/* Replaces the table at the top by a proxy refusing writes (strict: reads
 * of missing names raise too). */
void script_make_readonly(lua_State *L, int strict_index);
/* Raises {err=msg}. */
int script_raise_err(lua_State *L, const char *p, size_t n);

/* Subcommands of SCRIPT and FUNCTION with Redis's arities: replies the
 * unknown-subcommand or arity error (cmd: "script", upper: "SCRIPT") and
 * returns -1, or returns 0. */
typedef struct script_subcmd {
    const char *name;
    int arity;
} script_subcmd;
int script_subcommand_check(kv_client *c, const char *cmd, const char *upper,
                            const script_subcmd *t, size_t n);

/* Whether a script is running (for FUNCTION STATS / KILL). */
/* Redis gives EVAL, EVALSHA and FCALL (and their _RO forms) the flags of
 * the script itself (its shebang, the function's flags): for the replica
 * guards, whether it may run on a stale replica and whether it writes. 0
 * when cmd is none of them or the script is unknown or invalid (the
 * command answers that itself). */
int script_cmd_guard(const kv_cmd *cmd, int argc, const bk_str *argv, int *stale_ok, int *write);
/* t_function.c: a function's flags by name, -1 when there is none. */
long function_flags(bk_str name);

int script_running(void);
int script_running_is_func(void);
/* SCRIPT KILL / FUNCTION KILL. */
void script_kill(kv_client *c, int is_func);
/* FUNCTION STATS running_script part: replies nil or the map. */
void script_reply_running(kv_client *c);

/* Libraries (script_libs.c): registers struct and cmsgpack in L. */
int luaopen_kv_struct(lua_State *L);
int luaopen_kv_cmsgpack(lua_State *L);

/* t_function.c */
void function_init(void);
/* Appends FUNCTION LOAD commands of every library (AOF rewrite). */
void function_rewrite(void (*emit)(void *ud, int argc, const bk_str *argv), void *ud);
/* The libraries in an RDB (opcode FUNCTION2, as Redis 7.0 saves them):
 * function_rdb_each calls fn with each library's code, oldest first;
 * function_rdb_load installs one (replacing a library of its name when
 * replace, else -1 as for code that does not load, with err); function_rdb_flush drops them all (a
 * full sync replaces the replica's functions with the master's). */
void function_rdb_each(void (*fn)(void *ud, const char *code, size_t len), void *ud);
int function_rdb_load(const char *code, size_t len, int replace, char *err, size_t errlen);
void function_rdb_flush(void);

#endif
