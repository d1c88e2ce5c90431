/* Commands a standalone Redis 7.0 has even though they do nothing here:
 * CLUSTER (cluster support disabled), ASKING, READWRITE and MODULE (no
 * module can be loaded). They exist so that COMMAND LIST/INFO/COUNT, ACL
 * rules and clients probing them see what a real redis-server shows. */
#include "kv/config.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <strings.h>

#define ERR_NO_CLUSTER "ERR This instance has cluster support disabled"

typedef struct {
    const char *name;
    int arity; /* Redis's: > 0 exact, < 0 at least -arity */
} sub_arity;

/* Redis 7.0's CLUSTER subcommands and their arities. */
static const sub_arity cluster_subs[] = {
    { "addslots", -3 },      { "addslotsrange", -4 },        { "bumpepoch", 2 },
    { "count-failure-reports", 3 }, { "countkeysinslot", 3 }, { "delslots", -3 },
    { "delslotsrange", -4 }, { "failover", -2 },             { "flushslots", 2 },
    { "forget", 3 },         { "getkeysinslot", 4 },         { "help", 2 },
    { "info", 2 },           { "keyslot", 3 },               { "links", 2 },
    { "meet", -4 },          { "myid", 2 },                  { "nodes", 2 },
    { "replicas", 3 },       { "replicate", 3 },             { "reset", -2 },
    { "saveconfig", 2 },     { "set-config-epoch", 3 },      { "setslot", -4 },
    { "shards", 2 },         { "slaves", 3 },                { "slots", 2 },
};

static const sub_arity module_subs[] = {
    { "help", 2 }, { "list", 2 }, { "load", -3 }, { "loadex", -3 }, { "unload", 3 },
};

/* Finds argv[1] in t and checks the arity, replying Redis's error when it
 * is unknown or has the wrong number of arguments. Returns the entry. */
static const sub_arity *find_sub(kv_client *c, const char *cmd, const char *upper,
                                 const sub_arity *t, size_t n)
{
    bk_str s = c->argv[1];
    for (size_t i = 0; i < n; i++) {
        if (!str_ieq_lit(s, t[i].name, strlen(t[i].name)))
            continue;
        int a = t[i].arity;
        if ((a > 0 && c->argc != a) || (a < 0 && c->argc < -a)) {
            reply_errorf(c, "ERR wrong number of arguments for '%s|%s' command", cmd, t[i].name);
            return NULL;
        }
        return &t[i];
    }
    reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)BK_MIN(s.len, (size_t)128),
                 s.p, upper);
    return NULL;
}

void cluster_command(kv_client *c)
{
    if (find_sub(c, "cluster", "CLUSTER", cluster_subs, BK_ARRAY_LEN(cluster_subs)))
        reply_error(c, ERR_NO_CLUSTER);
}

void asking_command(kv_client *c)
{
    reply_error(c, ERR_NO_CLUSTER);
}

void readwrite_command(kv_client *c)
{
    reply_error(c, ERR_NO_CLUSTER);
}

static const char *const module_help[] = {
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    ("    Load a module library from <path>, while passing it module configurations and "
     "optional arguments."),
    "UNLOAD <name>",
    "    Unload a module.",
    "HELP",
    "    Prints this help.",
};

void module_command(kv_client *c)
{
    const sub_arity *s = find_sub(c, "module", "MODULE", module_subs, BK_ARRAY_LEN(module_subs));
    if (!s)
        return;
    if (s == &module_subs[0]) {
        reply_array(c, (long long)BK_ARRAY_LEN(module_help));
        for (size_t i = 0; i < BK_ARRAY_LEN(module_help); i++)
            reply_simple(c, module_help[i]);
    } else if (s == &module_subs[1]) {
        reply_empty_array(c); /* no module is ever loaded */
    } else if (!kv_protected_action_allowed("enable-module-command", c->addr)) {
        reply_error(c, "ERR MODULE command not allowed. If the enable-module-command option is "
                       "set to \"local\", you can run it from a local connection, otherwise you "
                       "need to set this option in the configuration file, and then restart the "
                       "server.");
    } else if (c->argv[1].len == 6 && strncasecmp(c->argv[1].p, "unload", 6) == 0) {
        reply_error(c, "ERR Error unloading module: no such module with that name");
    } else {
        /* brisk-kv loads no modules: what Redis answers when loading fails */
        reply_error(c, "ERR Error loading the extension. Please check the server logs.");
    }
}
