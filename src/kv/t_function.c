/* FUNCTION (LOAD/DELETE/FLUSH/LIST/DUMP/RESTORE/STATS/KILL/HELP) and
 * FCALL/FCALL_RO: Redis 7 function libraries, in a Lua state of their own.
 * A library's code runs once at load with a globals table holding only the
 * library API (redis.register_function, redis.log, constants); the
 * functions it registers run later with the full sandbox. */
#include "kv/script.h"

#include "kv/aof.h"
#include "kv/mem.h"
#include "kv/reply.h"
#include "kv/types.h"
#include "kv/util.h"

#include <lauxlib.h>

#include <ctype.h>
#include <stdio.h>
#include <strings.h>

typedef struct func_lib func_lib;

typedef struct func_fn {
    dict_node node; /* in fns by name; aux = name length */
    func_lib *lib;
    char *name;
    char *lname; /* lower case: the dict key (names are case-insensitive) */
    char *desc;  /* NULL: none */
    int ref;    /* callback in the registry */
    unsigned flags;
    struct func_fn *next_in_lib;
} func_fn;

struct func_lib {
    char *name;
    char *code;
    size_t code_len;
    func_fn *fns;
    int nfns;
    func_lib *next;
};

static lua_State *FL;       /* the functions' state */
static dict fns;            /* name -> func_fn */
static func_lib *libs;      /* all libraries */
static func_lib *loading;   /* the library whose code runs */
static int ready;

static bk_str fn_key(const dict_node *n)
{
    const func_fn *f = (const func_fn *)(const void *)n;
    return (bk_str){ f->lname, n->aux };
}

static int valid_name(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9')))
            return 0;
    }
    return 1;
}

#define E_NAME "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"

static int lerr(lua_State *L, const char *m) { return script_raise_err(L, m, strlen(m)); }

/* redis.register_function(name, cb) or {function_name=, callback=,
 * flags=, description=}. */
static int l_register(lua_State *L)
{
    if (!loading)
        return lerr(L, "ERR redis.register_function can only be called on FUNCTION LOAD command");
    int argc = lua_gettop(L);
    const char *name = NULL, *desc = NULL;
    size_t nlen = 0;
    unsigned flags = 0;
    int cb = 0;
    if (argc == 1 && lua_istable(L, 1)) {
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return lerr(L, "ERR named argument key given to redis.register_function is not a string");
            const char *k = lua_tostring(L, -2);
            if (strcmp(k, "function_name") == 0) {
                if (lua_type(L, -1) != LUA_TSTRING)
                    return lerr(L, "ERR function_name argument given to redis.register_function must be a string");
                name = lua_tolstring(L, -1, &nlen);
            } else if (strcmp(k, "description") == 0) {
                if (lua_type(L, -1) != LUA_TSTRING)
                    return lerr(L, "ERR description argument given to redis.register_function must be a string");
                desc = lua_tostring(L, -1);
            } else if (strcmp(k, "callback") == 0) {
                if (!lua_isfunction(L, -1))
                    return lerr(L, "ERR callback argument given to redis.register_function must be a function");
                cb = 1;
            } else if (strcmp(k, "flags") == 0) {
                if (!lua_istable(L, -1))
                    return lerr(L, "ERR flags argument to redis.register_function must be a table representing function flags");
                for (int i = 1;; i++) {
                    lua_rawgeti(L, -1, i);
                    if (lua_isnil(L, -1)) {
                        lua_pop(L, 1);
                        break;
                    }
                    size_t fl;
                    const char *f = lua_tolstring(L, -1, &fl);
                    unsigned bit = f && lua_type(L, -1) == LUA_TSTRING ? script_flag_by_name(f, fl) : 0;
                    lua_pop(L, 1);
                    if (!bit)
                        return lerr(L, "ERR unknown flag given");
                    flags |= bit;
                }
            } else {
                return lerr(L, "ERR unknown argument given to redis.register_function");
            }
            lua_pop(L, 1);
        }
        if (!name)
            return lerr(L, "ERR redis.register_function must get a function name argument");
        if (!cb)
            return lerr(L, "ERR redis.register_function must get a callback argument");
        lua_getfield(L, 1, "callback");
    } else if (argc == 2) {
        if (lua_type(L, 1) != LUA_TSTRING)
            return lerr(L, "ERR first argument to redis.register_function must be a string");
        if (!lua_isfunction(L, 2))
            return lerr(L, "ERR second argument to redis.register_function must be a function");
        name = lua_tolstring(L, 1, &nlen);
        lua_pushvalue(L, 2);
    } else if (argc == 1) {
        return lerr(L, "ERR calling redis.register_function with a single argument is only "
                       "applicable to Lua table (representing named arguments).");
    } else {
        return lerr(L, "ERR wrong number of arguments to redis.register_function");
    }
    if (!valid_name(name, nlen))
        return lerr(L, E_NAME);
    for (func_fn *f = loading->fns; f; f = f->next_in_lib)
        if (f->node.aux == nlen && strncasecmp(f->name, name, nlen) == 0)
            return lerr(L, "ERR Function already exists in the library");
    func_fn *f = kv_calloc(sizeof *f);
    f->lib = loading;
    f->name = kv_strndup(name, nlen);
    f->lname = kv_strndup(name, nlen);
    for (size_t i = 0; i < nlen; i++)
        f->lname[i] = (char)tolower((unsigned char)f->lname[i]);
    f->node.aux = (uint32_t)nlen;
    f->desc = desc ? kv_strndup(desc, strlen(desc)) : NULL;
    f->flags = flags;
    f->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    f->next_in_lib = loading->fns;
    loading->fns = f;
    loading->nfns++;
    return 0;
}

static void state_init(void)
{
    if (ready)
        return;
    ready = 1;
    dict_init(&fns, fn_key);
    lua_State *L = FL = script_state_new(1);
    /* The library API: what the code sees while it loads. */
    lua_newtable(L); /* load globals */
    lua_newtable(L); /* limited redis */
    lua_getglobal(L, "redis");
    static const char *keep[] = { "log", "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE",
                                  "LOG_WARNING", "REDIS_VERSION", "REDIS_VERSION_NUM" };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        lua_getfield(L, -1, keep[i]);
        lua_setfield(L, -3, keep[i]);
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_register);
    lua_setfield(L, -2, "register_function");
    script_make_readonly(L, 1);
    lua_setfield(L, -2, "redis");
    lua_setfield(L, LUA_REGISTRYINDEX, "kv_load_globals");
    script_protect_globals(L);
    /* The load globals get the strict reads too. */
    lua_getfield(L, LUA_REGISTRYINDEX, "kv_load_globals");
    script_make_readonly(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "kv_load_globals");
}

void function_init(void) { state_init(); }

static void lib_free(func_lib *lib)
{
    func_fn *f = lib->fns;
    while (f) {
        func_fn *n = f->next_in_lib;
        if (FL)
            luaL_unref(FL, LUA_REGISTRYINDEX, f->ref);
        kv_free(f->name);
        kv_free(f->lname);
        kv_free(f->desc);
        kv_free(f);
        f = n;
    }
    kv_free(lib->name);
    kv_free(lib->code);
    kv_free(lib);
}

static void lib_unlink_fns(func_lib *lib)
{
    for (func_fn *f = lib->fns; f; f = f->next_in_lib)
        dict_unlink_node(&fns, &f->node);
}

static void lib_link_fns(func_lib *lib)
{
    for (func_fn *f = lib->fns; f; f = f->next_in_lib) {
        f->node.hash = dict_hash32(f->lname, f->node.aux);
        dict_add(&fns, &f->node);
    }
}

static func_lib *lib_find(const char *name, size_t n, func_lib ***prevp)
{
    func_lib **pp = &libs;
    for (; *pp; pp = &(*pp)->next)
        if (strlen((*pp)->name) == n && memcmp((*pp)->name, name, n) == 0) {
            if (prevp)
                *prevp = pp;
            return *pp;
        }
    return NULL;
}

static void libs_flush(void)
{
    while (libs) {
        func_lib *l = libs;
        libs = l->next;
        lib_unlink_fns(l);
        lib_free(l);
    }
}

/* Sets the proxy of the globals to read through to reg (a registry name). */
static void globals_read_through(lua_State *L, const char *reg)
{
    lua_getmetatable(L, LUA_GLOBALSINDEX);
    lua_getfield(L, LUA_REGISTRYINDEX, reg);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

/* Creates a library from code. Returns it (not yet linked), or NULL with
 * the error in err. replace: an existing library of that name may go. */
static func_lib *lib_create(bk_str code, int replace, char *err, size_t errlen)
{
    state_init();
    if (code.len < 2 || code.p[0] != '#' || code.p[1] != '!') {
        snprintf(err, errlen, "ERR Missing library metadata");
        return NULL;
    }
    const char *nl = memchr(code.p, '\n', code.len);
    size_t ll = nl ? (size_t)(nl - code.p) : code.len;
    const char *name = NULL;
    size_t nlen = 0;
    size_t i = 2;
    int first = 1;
    while (i < ll) {
        while (!first && i < ll && code.p[i] == ' ')
            i++;
        size_t s = i;
        while (i < ll && code.p[i] != ' ')
            i++;
        if (i == s && !first)
            break;
        const char *w = code.p + s;
        size_t wl = i - s;
        if (first) {
            first = 0;
            if (!(wl == 3 && strncasecmp(w, "lua", 3) == 0)) {
                snprintf(err, errlen, "ERR Engine '%.*s' not found", (int)BK_MIN(wl, 100), w);
                return NULL;
            }
            continue;
        }
        if (wl >= 5 && memcmp(w, "name=", 5) == 0) {
            if (name) {
                snprintf(err, errlen,
                         "ERR Invalid metadata value, name argument was given multiple times");
                return NULL;
            }
            name = w + 5;
            nlen = wl - 5;
            if (nlen >= 2 && name[0] == '"' && name[nlen - 1] == '"')
                name++, nlen -= 2; /* quoted, as the shebang is split like a command line */
            continue;
        }
        snprintf(err, errlen, "ERR Invalid metadata value given: %.*s", (int)BK_MIN(wl, 100), w);
        return NULL;
    }
    if (!name) {
        snprintf(err, errlen, "ERR Library name was not given");
        return NULL;
    }
    if (!valid_name(name, nlen)) {
        snprintf(err, errlen, E_NAME);
        return NULL;
    }
    if (!replace && lib_find(name, nlen, NULL)) {
        snprintf(err, errlen, "ERR Library '%.*s' already exists", (int)nlen, name);
        return NULL;
    }
    lua_State *L = FL;
    if (luaL_loadbuffer(L, code.p + ll, code.len - ll, "@user_function")) {
        snprintf(err, errlen, "ERR Error compiling function: %s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return NULL;
    }
    func_lib *lib = kv_calloc(sizeof *lib);
    lib->name = kv_strndup(name, nlen);
    lib->code = kv_strndup(code.p, code.len);
    lib->code_len = code.len;
    loading = lib;
    globals_read_through(L, "kv_load_globals");
    lua_getfield(L, LUA_REGISTRYINDEX, "kv_err_handler");
    lua_insert(L, -2);
    script_load_timeout_hook_install(L);
    int rc = lua_pcall(L, 0, 0, -2);
    script_load_timeout_hook_remove(L);
    globals_read_through(L, "kv_globals");
    loading = NULL;
    if (rc != 0) {
        const char *m = NULL;
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            m = lua_tostring(L, -1);
        } else {
            m = lua_tostring(L, -1);
        }
        snprintf(err, errlen, "ERR Error registering functions: %s", m ? m : "unknown error");
        lua_settop(L, 0);
        lib_free(lib);
        return NULL;
    }
    lua_settop(L, 0);
    if (!lib->nfns) {
        snprintf(err, errlen, "ERR No functions registered");
        lib_free(lib);
        return NULL;
    }
    return lib;
}

/* Links lib, replacing a library of the same name when replace. Returns 0
 * or -1 with err (lib then freed). */
static int lib_install(func_lib *lib, int replace, char *err, size_t errlen)
{
    func_lib **pp = NULL;
    func_lib *old = lib_find(lib->name, strlen(lib->name), &pp);
    if (old && !replace) {
        snprintf(err, errlen, "ERR Library '%s' already exists", lib->name);
        lib_free(lib);
        return -1;
    }
    for (func_fn *f = lib->fns; f; f = f->next_in_lib) {
        func_fn *o = (func_fn *)(void *)dict_find(&fns, f->lname, f->node.aux,
                                                   dict_hash32(f->lname, f->node.aux));
        if (o && o->lib != old) {
            snprintf(err, errlen, "ERR Function %s already exists", f->name);
            lib_free(lib);
            return -1;
        }
    }
    if (old) {
        *pp = old->next;
        lib_unlink_fns(old);
        lib_free(old);
    }
    lib->next = libs;
    libs = lib;
    lib_link_fns(lib);
    return 0;
}

static void propagate(kv_client *c)
{
    kv_dirty(1);
    if (!srv.loading)
        aof_feed(c->db, c->argc, c->argv);
}

/* ---- DUMP / RESTORE: Redis's payload (opcode 245 + RDB string per
 * library, RDB version 10, CRC64 Jones) ---- */

static uint64_t crc64(uint64_t crc, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x95ac9329ac4bc9b5ULL & (0 - (crc & 1)));
    }
    return crc;
}

static void put_len(bk_buf *b, uint64_t n)
{
    unsigned char t[9];
    if (n < 64) {
        t[0] = (unsigned char)n;
        buf_append(b, t, 1);
    } else if (n < 16384) {
        t[0] = (unsigned char)(0x40 | (n >> 8));
        t[1] = (unsigned char)n;
        buf_append(b, t, 2);
    } else if (n <= UINT32_MAX) {
        t[0] = 0x80;
        for (int i = 0; i < 4; i++)
            t[1 + i] = (unsigned char)(n >> (24 - 8 * i));
        buf_append(b, t, 5);
    } else {
        t[0] = 0x81;
        for (int i = 0; i < 8; i++)
            t[1 + i] = (unsigned char)(n >> (56 - 8 * i));
        buf_append(b, t, 9);
    }
}

/* Reads an RDB length; returns -1 on a bad or truncated one, 1 for an
 * encoded (LZF/int) string, which we do not read. */
static int get_len(const unsigned char **p, const unsigned char *end, uint64_t *n)
{
    if (*p >= end)
        return -1;
    unsigned char b = *(*p)++;
    switch (b >> 6) {
    case 0:
        *n = b & 63;
        return 0;
    case 1:
        if (*p >= end)
            return -1;
        *n = ((uint64_t)(b & 63) << 8) | *(*p)++;
        return 0;
    case 2: {
        int k = b == 0x80 ? 4 : b == 0x81 ? 8 : 0;
        if (!k || end - *p < k)
            return -1;
        *n = 0;
        for (int i = 0; i < k; i++)
            *n = (*n << 8) | *(*p)++;
        return 0;
    }
    default:
        *n = b & 63;
        return 1;
    }
}

/* LZF decompression of an RDB compressed string. */
static int lzf_dec(const unsigned char *in, size_t ilen, unsigned char *out, size_t olen)
{
    size_t ip = 0, op = 0;
    while (ip < ilen) {
        unsigned ctrl = in[ip++];
        if (ctrl < 32) {
            size_t run = ctrl + 1;
            if (ip + run > ilen || op + run > olen)
                return -1;
            memcpy(out + op, in + ip, run);
            ip += run, op += run;
        } else {
            size_t len = ctrl >> 5;
            if (len == 7) {
                if (ip >= ilen)
                    return -1;
                len += in[ip++];
            }
            if (ip >= ilen)
                return -1;
            size_t back = ((ctrl & 0x1f) << 8) + in[ip++] + 1;
            len += 2;
            if (back > op || op + len > olen)
                return -1;
            for (size_t i = 0; i < len; i++, op++)
                out[op] = out[op - back];
        }
    }
    return op == olen ? 0 : -1;
}

static void function_dump(kv_client *c)
{
    bk_buf b = { 0 };
    /* Oldest first, as they were loaded. */
    int n = 0;
    for (func_lib *l = libs; l; l = l->next)
        n++;
    func_lib **arr = kv_malloc((size_t)(n ? n : 1) * sizeof *arr);
    int i = n;
    for (func_lib *l = libs; l; l = l->next)
        arr[--i] = l;
    for (i = 0; i < n; i++) {
        unsigned char op = 245;
        buf_append(&b, (char *)&op, 1);
        put_len(&b, arr[i]->code_len);
        buf_append(&b, arr[i]->code, arr[i]->code_len);
    }
    kv_free(arr);
    unsigned char ver[2] = { 10, 0 };
    buf_append(&b, (char *)ver, 2);
    uint64_t crc = crc64(0, (unsigned char *)b.data, b.len);
    unsigned char cb[8];
    for (int k = 0; k < 8; k++)
        cb[k] = (unsigned char)(crc >> (8 * k));
    buf_append(&b, (char *)cb, 8);
    reply_bulk(c, b.data, b.len);
    buf_free(&b);
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

static void function_restore(kv_client *c)
{
    int policy = 1; /* 0 flush, 1 append, 2 replace */
    if (c->argc > 4) {
        reply_error(c, ERR_SYNTAX);
        return;
    }
    if (c->argc == 4) {
        if (BK_STR_IEQ(c->argv[3], "flush"))
            policy = 0;
        else if (BK_STR_IEQ(c->argv[3], "append"))
            policy = 1;
        else if (BK_STR_IEQ(c->argv[3], "replace"))
            policy = 2;
        else {
            reply_error(c, "ERR Wrong restore policy given, value should be either FLUSH, APPEND "
                           "or REPLACE.");
            return;
        }
    }
    const unsigned char *p = (const unsigned char *)c->argv[2].p;
    size_t len = c->argv[2].len;
    if (len < 10 || (p[len - 10] | p[len - 9] << 8) > 10 ||
        crc64(0, p, len - 8) != get_le64(p + len - 8)) {
        reply_error(c, "ERR DUMP payload version or checksum are wrong");
        return;
    }
    /* Parse every library first: nothing changes on a bad payload. */
    const unsigned char *q = p, *end = p + len - 10;
    func_lib *made = NULL;
    char err[512] = "";
    while (q < end) {
        if (*q++ != 245) {
            snprintf(err, sizeof err, "ERR given type is not a function");
            break;
        }
        uint64_t n;
        int enc = get_len(&q, end, &n);
        char *code = NULL;
        size_t clen = 0;
        if (enc == 0 && (uint64_t)(end - q) >= n) {
            code = kv_malloc(n ? n : 1);
            memcpy(code, q, n);
            clen = n;
            q += n;
        } else if (enc == 1 && n == 3) { /* LZF */
            uint64_t cl, ul;
            if (get_len(&q, end, &cl) == 0 && get_len(&q, end, &ul) == 0 &&
                (uint64_t)(end - q) >= cl && ul < (512ull << 20)) {
                code = kv_malloc(ul ? ul : 1);
                if (lzf_dec(q, cl, (unsigned char *)code, ul) < 0) {
                    kv_free(code);
                    code = NULL;
                } else {
                    clen = ul;
                    q += cl;
                }
            }
        }
        if (!code) {
            snprintf(err, sizeof err, "ERR payload version or checksum are wrong");
            break;
        }
        func_lib *lib = lib_create((bk_str){ code, clen }, 1, err, sizeof err);
        kv_free(code);
        if (!lib)
            break;
        lib->next = made;
        made = lib;
    }
    if (!err[0]) {
        /* Collisions among the new ones and with what stays. */
        for (func_lib *a = made; a && !err[0]; a = a->next) {
            for (func_lib *b = a->next; b; b = b->next)
                if (strcmp(a->name, b->name) == 0)
                    snprintf(err, sizeof err, "ERR Library '%s' already exists", a->name);
            if (policy == 1 && !err[0] && lib_find(a->name, strlen(a->name), NULL))
                snprintf(err, sizeof err, "ERR Library %s already exists", a->name);
        }
    }
    if (!err[0]) {
        /* Functions must not clash with libraries that stay. */
        for (func_lib *a = made; a && !err[0]; a = a->next)
            for (func_fn *f = a->fns; f && !err[0]; f = f->next_in_lib) {
                func_fn *o = (func_fn *)(void *)dict_find(&fns, f->lname, f->node.aux,
                                                           dict_hash32(f->lname, f->node.aux));
                if (o && policy != 0 &&
                    !(policy == 2 && lib_find(a->name, strlen(a->name), NULL) == o->lib))
                    snprintf(err, sizeof err, "ERR Function %s already exists", f->name);
            }
    }
    if (err[0]) {
        while (made) {
            func_lib *n = made->next;
            lib_free(made);
            made = n;
        }
        reply_error(c, err);
        return;
    }
    if (policy == 0)
        libs_flush();
    while (made) {
        func_lib *n = made->next;
        made->next = NULL;
        char e2[256];
        lib_install(made, 1, e2, sizeof e2);
        made = n;
    }
    propagate(c);
    reply_ok(c);
}

static void reply_lib(kv_client *c, func_lib *l, int withcode)
{
    reply_map(c, withcode ? 4 : 3);
    reply_bulk_cstr(c, "library_name");
    reply_bulk_cstr(c, l->name);
    reply_bulk_cstr(c, "engine");
    reply_bulk_cstr(c, "LUA");
    reply_bulk_cstr(c, "functions");
    reply_array(c, l->nfns);
    for (func_fn *f = l->fns; f; f = f->next_in_lib) {
        reply_map(c, 3);
        reply_bulk_cstr(c, "name");
        reply_bulk_cstr(c, f->name);
        reply_bulk_cstr(c, "description");
        if (f->desc)
            reply_bulk_cstr(c, f->desc);
        else
            reply_null(c);
        reply_bulk_cstr(c, "flags");
        int nf = 0;
        static const char *names[] = { "no-writes", "allow-oom", "allow-stale", "no-cluster",
                                       "allow-cross-slot-keys" };
        for (int k = 0; k < 5; k++)
            if (f->flags & (1u << k))
                nf++;
        reply_set(c, nf);
        for (int k = 0; k < 5; k++)
            if (f->flags & (1u << k))
                reply_bulk_cstr(c, names[k]);
    }
    if (withcode) {
        reply_bulk_cstr(c, "library_code");
        reply_bulk(c, l->code, l->code_len);
    }
}

static void function_list(kv_client *c)
{
    int withcode = 0;
    bk_str pat = BK_STR_NULL;
    for (int i = 2; i < c->argc; i++) {
        if (BK_STR_IEQ(c->argv[i], "withcode") && !withcode) {
            withcode = 1;
        } else if (BK_STR_IEQ(c->argv[i], "libraryname") && !pat.p) {
            if (i + 1 >= c->argc) {
                reply_error(c, "ERR library name argument was not given");
                return;
            }
            pat = c->argv[++i];
        } else {
            reply_errorf(c, "ERR Unknown argument %.*s", (int)BK_MIN(c->argv[i].len, 128),
                         c->argv[i].p);
            return;
        }
    }
    size_t h = reply_defer(c);
    long long n = 0;
    for (func_lib *l = libs; l; l = l->next) {
        if (pat.p && !kv_glob_match(pat.p, pat.len, l->name, strlen(l->name), 0))
            continue;
        reply_lib(c, l, withcode);
        n++;
    }
    reply_defer_array(c, h, n);
}

static const char *help[] = {
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
};

void function_command(kv_client *c)
{
    static const script_subcmd subs[] = { { "load", -3 },    { "delete", 3 }, { "flush", -2 },
                                          { "list", -2 },    { "dump", 2 },   { "restore", -3 },
                                          { "kill", 2 },     { "stats", 2 },  { "help", 2 } };
    bk_str sub = c->argv[1];
    state_init();
    if (script_subcommand_check(c, "function", "FUNCTION", subs, sizeof subs / sizeof subs[0]) < 0)
        return;
    char err[1024];
    if (BK_STR_IEQ(sub, "load") && c->argc >= 3) {
        int replace = 0;
        for (int i = 2; i < c->argc - 1; i++) {
            if (!BK_STR_IEQ(c->argv[i], "replace")) {
                reply_errorf(c, "ERR Unknown option given: %.*s", (int)BK_MIN(c->argv[i].len, 128),
                             c->argv[i].p);
                return;
            }
            replace = 1;
        }
        func_lib *lib = lib_create(c->argv[c->argc - 1], replace, err, sizeof err);
        if (!lib || lib_install(lib, replace, err, sizeof err) < 0) {
            reply_error(c, err);
            return;
        }
        propagate(c);
        reply_bulk_cstr(c, libs->name);
    } else if (BK_STR_IEQ(sub, "delete") && c->argc == 3) {
        func_lib **pp = NULL;
        func_lib *l = lib_find(c->argv[2].p, c->argv[2].len, &pp);
        if (!l) {
            reply_error(c, "ERR Library not found");
            return;
        }
        *pp = l->next;
        lib_unlink_fns(l);
        lib_free(l);
        propagate(c);
        reply_ok(c);
    } else if (BK_STR_IEQ(sub, "flush") && c->argc <= 3) {
        if (c->argc == 3 && !BK_STR_IEQ(c->argv[2], "sync") && !BK_STR_IEQ(c->argv[2], "async")) {
            reply_error(c, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            return;
        }
        libs_flush();
        propagate(c);
        reply_ok(c);
    } else if (BK_STR_IEQ(sub, "list")) {
        function_list(c);
    } else if (BK_STR_IEQ(sub, "dump") && c->argc == 2) {
        function_dump(c);
    } else if (BK_STR_IEQ(sub, "restore") && c->argc >= 3 && c->argc <= 4) {
        function_restore(c);
    } else if (BK_STR_IEQ(sub, "kill") && c->argc == 2) {
        script_kill(c, 1);
    } else if (BK_STR_IEQ(sub, "stats") && c->argc == 2) {
        reply_map(c, 2);
        reply_bulk_cstr(c, "running_script");
        script_reply_running(c);
        reply_bulk_cstr(c, "engines");
        reply_map(c, 1);
        reply_bulk_cstr(c, "LUA");
        reply_map(c, 2);
        reply_bulk_cstr(c, "libraries_count");
        long long nl = 0;
        for (func_lib *l = libs; l; l = l->next)
            nl++;
        reply_int(c, nl);
        reply_bulk_cstr(c, "functions_count");
        reply_int(c, (long long)dict_size(&fns));
    } else if (BK_STR_IEQ(sub, "help") && c->argc == 2) {
        reply_array(c, (long long)(sizeof help / sizeof help[0]));
        for (size_t i = 0; i < sizeof help / sizeof help[0]; i++)
            reply_simple(c, help[i]);
    } else {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try "
                        "FUNCTION HELP.",
                     (int)BK_MIN(sub.len, 128), sub.p);
    }
}

static func_fn *fn_lookup(bk_str name)
{
    char low[128];
    if (name.len > sizeof low)
        return NULL; /* longer names: compared below */
    for (size_t i = 0; i < name.len; i++)
        low[i] = (char)tolower((unsigned char)name.p[i]);
    return (func_fn *)(void *)dict_find(&fns, low, name.len, dict_hash32(low, name.len));
}

long function_flags(bk_str name)
{
    if (!ready)
        return -1; /* no library loaded yet: nothing to find, no Lua state to make */
    func_fn *f = fn_lookup(name);
    return f ? (long)f->flags : -1; /* (names over 128 bytes: unknown here, FCALL finds them) */
}

static void fcall_generic(kv_client *c, int ro)
{
    state_init();
    func_fn *f = fn_lookup(c->argv[1]);
    if (!f && c->argv[1].len > 128) {
        char *low = kv_strndup(c->argv[1].p, c->argv[1].len);
        for (size_t i = 0; i < c->argv[1].len; i++)
            low[i] = (char)tolower((unsigned char)low[i]);
        f = (func_fn *)(void *)dict_find(&fns, low, c->argv[1].len,
                                         dict_hash32(low, c->argv[1].len));
        kv_free(low);
    }
    if (!f) {
        reply_error(c, "ERR Function not found");
        return;
    }
    long long numkeys;
    if (kv_parse_ll(c->argv[2].p, c->argv[2].len, &numkeys) < 0) {
        reply_error(c, "ERR Bad number of keys provided");
        return;
    }
    if (numkeys > c->argc - 3) {
        reply_error(c, "ERR Number of keys can't be greater than number of args");
        return;
    }
    if (numkeys < 0) {
        reply_error(c, "ERR Number of keys can't be negative");
        return;
    }
    if (ro && !(f->flags & SCRIPT_NO_WRITES)) {
        reply_error(c, "ERR Can not execute a script with write flag using *_ro command.");
        return;
    }
    if (script_check_flags(c, f->flags, ro) < 0)
        return;
    lua_State *L = FL;
    int nk = (int)numkeys;
    if (BK_UNLIKELY(!script_args_fit(L, c->argv + 3, c->argc - 3))) {
        reply_error(c, script_e_args_mem);
        return;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
    script_push_args(L, c->argv + 3, nk);
    script_push_args(L, c->argv + 3 + nk, c->argc - 3 - nk);
    script_run(c, L, 2, f->name, f->flags, ro, 1);
}

/* (suite) CLIENT PAUSE WRITE: whether FCALL argv names a function flagged
 * no-writes (such calls are not held). Unknown names: 0. */
int function_call_no_writes(int argc, const bk_str *argv)
{
    if (argc < 2 || !ready)
        return 0;
    func_fn *f = fn_lookup(argv[1]);
    return f && (f->flags & SCRIPT_NO_WRITES);
}

void fcall_command(kv_client *c) { fcall_generic(c, 0); }
void fcall_ro_command(kv_client *c) { fcall_generic(c, 1); }

struct rewrite_ctx {
    void (*emit)(void *ud, int argc, const bk_str *argv);
    void *ud;
};

static void rewrite_one(void *ud, const char *code, size_t len)
{
    struct rewrite_ctx *r = ud;
    bk_str argv[3] = { BK_STR("FUNCTION"), BK_STR("LOAD"), { code, len } };
    r->emit(r->ud, 3, argv);
}

/* Oldest first, as the RDB has them. */
void function_rewrite(void (*emit)(void *ud, int argc, const bk_str *argv), void *ud)
{
    struct rewrite_ctx r = { emit, ud };
    function_rdb_each(rewrite_one, &r);
}

/* ---- RDB (rdb_file.c): every library's code, oldest first, and back ---- */

void function_rdb_each(void (*fn)(void *ud, const char *code, size_t len), void *ud)
{
    int n = 0;
    for (func_lib *l = libs; l; l = l->next)
        n++;
    for (int k = n - 1; k >= 0; k--) {
        func_lib *l = libs;
        for (int i = 0; i < k; i++)
            l = l->next;
        fn(ud, l->code, l->code_len);
    }
}

int function_rdb_load(const char *code, size_t len, int replace, char *err, size_t errlen)
{
    func_lib *lib = lib_create((bk_str){ code, len }, 1, err, errlen);
    if (!lib || lib_install(lib, replace, err, errlen) < 0)
        return -1;
    return 0;
}

void function_rdb_flush(void)
{
    libs_flush();
}
