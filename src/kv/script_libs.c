/* The two libraries Redis scripts use that Debian does not package for
 * Lua 5.1: struct (pack/unpack/size of binary records) and cmsgpack
 * (MessagePack pack/unpack). Written for brisk-kv from the formats'
 * descriptions. */
#include "kv/script.h"

#include <lauxlib.h>

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* ---- struct ----
 *
 * Redis's struct library as scripts see it: "<" ">" byte order (little by
 * default), "![n]" the largest alignment (a power of two, 8 without n; 1
 * until set), items b/B h/H l/L T f d x, i/I[n] (integers of n bytes, up to
 * 32: bytes past the eighth pack as zero, unpack keeps the low 64 bits),
 * c[n] (c0: the whole string, or in unpack the length read just before),
 * s (zero-terminated). Error texts as Redis words them. */

enum { ST_MAXINT = 32, ST_MAXALIGN = 8 };

typedef struct {
    int little;
    size_t align;
} st_state;

static size_t st_num(lua_State *L, const char **f, size_t dflt)
{
    if (!isdigit((unsigned char)**f))
        return dflt;
    int n = 0;
    do {
        int d = *(*f)++ - '0';
        if (n > INT_MAX / 10 || n * 10 > INT_MAX - d)
            luaL_error(L, "integral size overflow");
        n = n * 10 + d;
    } while (isdigit((unsigned char)**f));
    return (size_t)n;
}

/* Size of one item of option c; 0 for the options that take none. */
static size_t st_size(lua_State *L, char c, const char **f)
{
    switch (c) {
    case 'b': case 'B': case 'x': return 1;
    case 'h': case 'H': return sizeof(short);
    case 'l': case 'L': return sizeof(long);
    case 'T': return sizeof(size_t);
    case 'f': return sizeof(float);
    case 'd': return sizeof(double);
    case 'c': return st_num(L, f, 1);
    case 'i': case 'I': {
        size_t n = st_num(L, f, sizeof(int));
        if (n > ST_MAXINT)
            luaL_error(L, "integral size %d is larger than limit of %d", (int)n, ST_MAXINT);
        return n;
    }
    default: return 0;
    }
}

/* Padding before an item of size at offset len. */
static size_t st_pad(size_t len, const st_state *h, char c, size_t size)
{
    if (size == 0 || c == 'c')
        return 0;
    if (size > h->align)
        size = h->align;
    return (size - (len & (size - 1))) & (size - 1);
}

/* The options that are not items: byte order, alignment, blanks. */
static void st_control(lua_State *L, char c, const char **f, st_state *h)
{
    switch (c) {
    case ' ': return;
    case '>': h->little = 0; return;
    case '<': h->little = 1; return;
    case '!': {
        size_t a = st_num(L, f, ST_MAXALIGN);
        if (a == 0 || (a & (a - 1)))
            luaL_error(L, "alignment %d is not a power of 2", (int)a);
        h->align = a;
        return;
    }
    default:
        luaL_argerror(L, 1, lua_pushfstring(L, "invalid format option '%c'", c));
    }
}

static void st_put_int(luaL_Buffer *b, uint64_t v, size_t n, int little)
{
    char t[ST_MAXINT];
    for (size_t i = 0; i < n; i++) {
        t[little ? i : n - 1 - i] = (char)(v & 0xff);
        v >>= 8;
    }
    luaL_addlstring(b, t, n);
}

/* A Lua number as the 64-bit pattern an integer item packs (saturated
 * where C would leave the conversion undefined). */
static uint64_t st_int_bits(lua_Number v)
{
    if (v < 0)
        return v <= -9223372036854775808.0 ? (uint64_t)INT64_MIN : (uint64_t)(int64_t)v;
    return v >= 18446744073709551616.0 ? 0 : (uint64_t)v;
}

static int st_pack(lua_State *L)
{
    const char *f = luaL_checkstring(L, 1);
    st_state h = { 1, 1 };
    int arg = 2;
    size_t total = 0;
    lua_pushnil(L); /* the arguments end here: the buffer's pieces go above */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    while (*f) {
        char c = *f++;
        size_t size = st_size(L, c, &f);
        size_t pad = st_pad(total, &h, c, size);
        total += pad;
        while (pad--)
            luaL_addchar(&b, 0);
        switch (c) {
        case 'b': case 'B': case 'h': case 'H': case 'l': case 'L': case 'T': case 'i': case 'I':
            st_put_int(&b, st_int_bits(luaL_checknumber(L, arg++)), size, h.little);
            break;
        case 'x':
            luaL_addchar(&b, 0);
            break;
        case 'f': {
            float v = (float)luaL_checknumber(L, arg++);
            uint32_t u;
            memcpy(&u, &v, 4);
            st_put_int(&b, u, 4, h.little);
            break;
        }
        case 'd': {
            double v = luaL_checknumber(L, arg++);
            uint64_t u;
            memcpy(&u, &v, 8);
            st_put_int(&b, u, 8, h.little);
            break;
        }
        case 'c': case 's': {
            size_t l;
            const char *s = luaL_checklstring(L, arg++, &l);
            if (size == 0)
                size = l;
            luaL_argcheck(L, l >= size, arg, "string too short");
            luaL_addlstring(&b, s, size);
            if (c == 's') {
                luaL_addchar(&b, 0);
                size++;
            }
            break;
        }
        default:
            st_control(L, c, &f, &h);
        }
        total += size;
    }
    luaL_pushresult(&b);
    return 1;
}

/* The integer item at p: the low 64 bits, sign-extended from the item's
 * top bit for a signed one (for items of 9 bytes or more, from bit
 * (8n - 1) mod 64, which is what Redis computes on x86-64). */
static lua_Number st_get_int(const unsigned char *p, size_t n, int little, int is_signed)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[little ? n - 1 - i : i];
    if (!is_signed)
        return (lua_Number)v;
    uint64_t mask = ~0ULL << ((unsigned)(n * 8 - 1) & 63);
    if (v & mask)
        v |= mask;
    return (lua_Number)(int64_t)v;
}

static int st_unpack(lua_State *L)
{
    const char *f = luaL_checkstring(L, 1);
    size_t len;
    const unsigned char *d = (const unsigned char *)luaL_checklstring(L, 2, &len);
    size_t pos = (size_t)luaL_optinteger(L, 3, 1) - 1;
    luaL_argcheck(L, pos <= len, 3, "offset must be 1 or greater");
    st_state h = { 1, 1 };
    int n = 0;
    while (*f) {
        char c = *f++;
        size_t size = st_size(L, c, &f);
        pos += st_pad(pos, &h, c, size);
        luaL_argcheck(L, size <= len && pos <= len - size, 2, "data string too short");
        luaL_checkstack(L, 2, "too many results");
        switch (c) {
        case 'b': case 'B': case 'h': case 'H': case 'l': case 'L': case 'T': case 'i': case 'I':
            lua_pushnumber(L, st_get_int(d + pos, size, h.little, islower((unsigned char)c)));
            n++;
            break;
        case 'x':
            break;
        case 'f': case 'd': {
            uint64_t v = 0;
            for (size_t i = 0; i < size; i++)
                v = (v << 8) | d[pos + (h.little ? size - 1 - i : i)];
            if (c == 'f') {
                uint32_t u = (uint32_t)v;
                float fl;
                memcpy(&fl, &u, 4);
                lua_pushnumber(L, fl);
            } else {
                double db;
                memcpy(&db, &v, 8);
                lua_pushnumber(L, db);
            }
            n++;
            break;
        }
        case 'c':
            if (size == 0) {
                if (n == 0 || !lua_isnumber(L, -1))
                    luaL_error(L, "format 'c0' needs a previous size");
                lua_Number want = lua_tonumber(L, -1);
                size = want > 0 ? (size_t)want : 0;
                lua_pop(L, 1);
                n--;
                luaL_argcheck(L, size <= len && pos <= len - size, 2, "data string too short");
            }
            lua_pushlstring(L, (const char *)d + pos, size);
            n++;
            break;
        case 's': {
            const unsigned char *e = memchr(d + pos, 0, len - pos);
            if (!e)
                luaL_error(L, "unfinished string in data");
            size = (size_t)(e - (d + pos)) + 1;
            lua_pushlstring(L, (const char *)d + pos, size - 1);
            n++;
            break;
        }
        default:
            st_control(L, c, &f, &h);
        }
        pos += size;
    }
    lua_pushinteger(L, (lua_Integer)pos + 1);
    return n + 1;
}

static int st_sizeof(lua_State *L)
{
    const char *f = luaL_checkstring(L, 1);
    st_state h = { 1, 1 };
    size_t pos = 0;
    while (*f) {
        char c = *f++;
        size_t size = st_size(L, c, &f);
        pos += st_pad(pos, &h, c, size);
        if (c == 's')
            luaL_argerror(L, 1, "option 's' has no fixed size");
        else if (c == 'c' && size == 0)
            luaL_argerror(L, 1, "option 'c0' has no fixed size");
        if (!isalnum((unsigned char)c))
            st_control(L, c, &f, &h);
        pos += size;
    }
    lua_pushinteger(L, (lua_Integer)pos);
    return 1;
}

int luaopen_kv_struct(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "pack", st_pack }, { "unpack", st_unpack }, { "size", st_sizeof }, { NULL, NULL }
    };
    lua_newtable(L);
    luaL_register(L, NULL, fns);
    return 1;
}

/* ---- cmsgpack ---- */

#define MP_MAX_NESTING 16

/* The encoder's output: a C buffer, not a luaL_Buffer, whose pieces live
 * on the Lua stack and would break the lua_next walks of the tables. */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} mp_buf;

static void mp_add(mp_buf *b, const char *p, size_t n)
{
    if (b->oom)
        return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->len < n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void mp_put(mp_buf *b, unsigned char tag, uint64_t v, int n)
{
    char t[9];
    t[0] = (char)tag;
    for (int i = 0; i < n; i++)
        t[1 + i] = (char)(v >> (8 * (n - 1 - i)));
    mp_add(b, t, (size_t)n + 1);
}

static void mp_int(mp_buf *b, int64_t v)
{
    if (v >= 0) {
        if (v < 128) {
            char ch = (char)v;
            mp_add(b, &ch, 1);
        } else if (v < 256)
            mp_put(b, 0xcc, (uint64_t)v, 1);
        else if (v < 65536)
            mp_put(b, 0xcd, (uint64_t)v, 2);
        else if (v <= 0xffffffffLL)
            mp_put(b, 0xce, (uint64_t)v, 4);
        else
            mp_put(b, 0xcf, (uint64_t)v, 8);
    } else {
        if (v >= -32) {
            char ch = (char)(int8_t)v;
            mp_add(b, &ch, 1);
        } else if (v >= -128)
            mp_put(b, 0xd0, (uint64_t)v & 0xff, 1);
        else if (v >= -32768)
            mp_put(b, 0xd1, (uint64_t)v & 0xffff, 2);
        else if (v >= -2147483648LL)
            mp_put(b, 0xd2, (uint64_t)v & 0xffffffff, 4);
        else
            mp_put(b, 0xd3, (uint64_t)v, 8);
    }
}

static void mp_hdr(mp_buf *b, size_t n, unsigned fix, unsigned fixmax, unsigned char t8,
                   unsigned char t16, unsigned char t32)
{
    if (n < fixmax) {
        char ch = (char)(fix | n);
        mp_add(b, &ch, 1);
    } else if (t8 && n < 256)
        mp_put(b, t8, n, 1);
    else if (n < 65536)
        mp_put(b, t16, n, 2);
    else
        mp_put(b, t32, n, 4);
}

/* Whether the table at idx is an array 1..n without holes. */
static int mp_is_array(lua_State *L, int idx, size_t *n)
{
    size_t count = 0, max = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        lua_Number k;
        if (lua_type(L, -1) != LUA_TNUMBER || (k = lua_tonumber(L, -1)) < 1 || floor(k) != k) {
            lua_pop(L, 1);
            return 0;
        }
        if ((size_t)k > max)
            max = (size_t)k;
        count++;
    }
    *n = max;
    return max == count;
}

static void mp_encode(lua_State *L, mp_buf *b, int idx, int level)
{
    switch (lua_type(L, idx)) {
    case LUA_TNIL: {
        char ch = (char)0xc0;
        mp_add(b, &ch, 1);
        return;
    }
    case LUA_TBOOLEAN: {
        char ch = (char)(lua_toboolean(L, idx) ? 0xc3 : 0xc2);
        mp_add(b, &ch, 1);
        return;
    }
    case LUA_TNUMBER: {
        lua_Number n = lua_tonumber(L, idx);
        if (isfinite(n) && floor(n) == n && n >= -9223372036854775808.0 && n < 9223372036854775808.0) {
            mp_int(b, (int64_t)n);
        } else if ((lua_Number)(float)n == n) {
            float f = (float)n;
            uint32_t u;
            memcpy(&u, &f, 4);
            mp_put(b, 0xca, u, 4);
        } else {
            uint64_t u;
            memcpy(&u, &n, 8);
            mp_put(b, 0xcb, u, 8);
        }
        return;
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        mp_hdr(b, n, 0xa0, 32, 0xd9, 0xda, 0xdb);
        mp_add(b, s, n);
        return;
    }
    case LUA_TTABLE: {
        if (level >= MP_MAX_NESTING || !lua_checkstack(L, 4)) {
            char ch = (char)0xc0;
            mp_add(b, &ch, 1);
            return;
        }
        size_t n;
        if (mp_is_array(L, idx, &n)) {
            mp_hdr(b, n, 0x90, 16, 0, 0xdc, 0xdd);
            for (size_t i = 1; i <= n; i++) {
                lua_rawgeti(L, idx, (int)i);
                mp_encode(L, b, lua_gettop(L), level + 1);
                lua_pop(L, 1);
            }
        } else {
            size_t cnt = 0;
            lua_pushnil(L);
            while (lua_next(L, idx)) {
                lua_pop(L, 1);
                cnt++;
            }
            mp_hdr(b, cnt, 0x80, 16, 0, 0xde, 0xdf);
            lua_pushnil(L);
            while (lua_next(L, idx)) {
                int top = lua_gettop(L);
                mp_encode(L, b, top - 1, level + 1);
                mp_encode(L, b, top, level + 1);
                lua_pop(L, 1);
            }
        }
        return;
    }
    default: {
        char ch = (char)0xc0;
        mp_add(b, &ch, 1);
    }
    }
}

static int mp_pack(lua_State *L)
{
    int n = lua_gettop(L);
    if (n == 0)
        return luaL_argerror(L, 0, "MessagePack pack needs input.");
    mp_buf b = { 0 };
    for (int i = 1; i <= n; i++)
        mp_encode(L, &b, i, 0);
    if (b.oom) {
        free(b.p);
        return luaL_error(L, "out of memory packing MessagePack");
    }
    lua_pushlstring(L, b.p ? b.p : "", b.len);
    free(b.p);
    return 1;
}

typedef struct {
    const unsigned char *p;
    size_t left;
    int err;
} mp_cur;

static uint64_t mp_be(mp_cur *c, int n)
{
    if (c->left < (size_t)n) {
        c->err = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | c->p[i];
    c->p += n;
    c->left -= (size_t)n;
    return v;
}

static void mp_decode(lua_State *L, mp_cur *c, int depth);

static void mp_str(lua_State *L, mp_cur *c, size_t n)
{
    if (c->left < n) {
        c->err = 1;
        lua_pushnil(L);
        return;
    }
    lua_pushlstring(L, (const char *)c->p, n);
    c->p += n;
    c->left -= n;
}

static void mp_arr(lua_State *L, mp_cur *c, size_t n, int map, int depth)
{
    if (depth > 1000 || !lua_checkstack(L, 4)) {
        c->err = 1;
        lua_pushnil(L);
        return;
    }
    lua_newtable(L);
    for (size_t i = 0; i < n && !c->err; i++) {
        if (map) {
            mp_decode(L, c, depth + 1);
            mp_decode(L, c, depth + 1);
            if (lua_isnil(L, -2))
                lua_pop(L, 2);
            else
                lua_settable(L, -3);
        } else {
            mp_decode(L, c, depth + 1);
            lua_rawseti(L, -2, (int)i + 1);
        }
    }
}

static void mp_decode(lua_State *L, mp_cur *c, int depth)
{
    if (c->err) { /* the first error stands (a map reads on after its key) */
        lua_pushnil(L);
        return;
    }
    if (c->left == 0) {
        c->err = 1;
        lua_pushnil(L);
        return;
    }
    unsigned char t = *c->p++;
    c->left--;
    if (t < 0x80) {
        lua_pushnumber(L, t);
    } else if (t >= 0xe0) {
        lua_pushnumber(L, (int8_t)t);
    } else if ((t & 0xe0) == 0xa0) {
        mp_str(L, c, t & 0x1f);
    } else if ((t & 0xf0) == 0x90) {
        mp_arr(L, c, t & 0x0f, 0, depth);
    } else if ((t & 0xf0) == 0x80) {
        mp_arr(L, c, t & 0x0f, 1, depth);
    } else {
        switch (t) {
        case 0xc0: lua_pushnil(L); break;
        case 0xc2: lua_pushboolean(L, 0); break;
        case 0xc3: lua_pushboolean(L, 1); break;
        case 0xcc: lua_pushnumber(L, (lua_Number)mp_be(c, 1)); break;
        case 0xcd: lua_pushnumber(L, (lua_Number)mp_be(c, 2)); break;
        case 0xce: lua_pushnumber(L, (lua_Number)mp_be(c, 4)); break;
        case 0xcf: lua_pushnumber(L, (lua_Number)mp_be(c, 8)); break;
        case 0xd0: lua_pushnumber(L, (int8_t)mp_be(c, 1)); break;
        case 0xd1: lua_pushnumber(L, (int16_t)mp_be(c, 2)); break;
        case 0xd2: lua_pushnumber(L, (int32_t)mp_be(c, 4)); break;
        case 0xd3: lua_pushnumber(L, (lua_Number)(int64_t)mp_be(c, 8)); break;
        case 0xca: {
            uint32_t u = (uint32_t)mp_be(c, 4);
            float f;
            memcpy(&f, &u, 4);
            lua_pushnumber(L, f);
            break;
        }
        case 0xcb: {
            uint64_t u = mp_be(c, 8);
            double d;
            memcpy(&d, &u, 8);
            lua_pushnumber(L, d);
            break;
        }
        case 0xd9: mp_str(L, c, (size_t)mp_be(c, 1)); break;
        case 0xda: mp_str(L, c, (size_t)mp_be(c, 2)); break;
        case 0xdb: mp_str(L, c, (size_t)mp_be(c, 4)); break;
        case 0xdc: mp_arr(L, c, (size_t)mp_be(c, 2), 0, depth); break;
        case 0xdd: mp_arr(L, c, (size_t)mp_be(c, 4), 0, depth); break;
        case 0xde: mp_arr(L, c, (size_t)mp_be(c, 2), 1, depth); break;
        case 0xdf: mp_arr(L, c, (size_t)mp_be(c, 4), 1, depth); break;
        default: /* bin, ext and 0xc1: not decoded, as in Redis's cmsgpack */
            c->err = 2;
            lua_pushnil(L);
        }
    }
}

/* unpack(s), unpack_one(s[, offset]), unpack_limit(s, limit[, offset]) */
static int mp_unpack_full(lua_State *L, int limit, int offset)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    if (offset < 0 || (size_t)offset > len)
        return luaL_error(L, "Start offset %d greater than input length %d.", offset, (int)len);
    mp_cur c = { (const unsigned char *)s + offset, len - (size_t)offset, 0 };
    int n = 0;
    int top = lua_gettop(L);
    while (c.left > 0 && (limit <= 0 || n < limit)) {
        if (!lua_checkstack(L, 2))
            return luaL_error(L, "too many values to unpack");
        mp_decode(L, &c, 0);
        if (c.err) {
            lua_settop(L, top);
            return luaL_error(L, c.err == 2 ? "Bad data format in input."
                                            : "Missing bytes in input.");
        }
        n++;
    }
    if (limit > 0 || offset > 0 || lua_gettop(L) - top != n) {
        /* unpack_one / unpack_limit: next offset first (-1 at the end). */
        lua_pushinteger(L, c.left ? (lua_Integer)(len - c.left) : -1);
        lua_insert(L, top + 1);
        return n + 1;
    }
    return n;
}

static int mp_unpack(lua_State *L) { return mp_unpack_full(L, 0, 0); }
static int mp_unpack_one(lua_State *L)
{
    int off = (int)luaL_optinteger(L, 2, 0);
    lua_settop(L, 1);
    int n = mp_unpack_full(L, 1, off);
    if (n == 1) { /* no value: still the offset first */
        return n;
    }
    return n;
}
static int mp_unpack_limit(lua_State *L)
{
    int limit = (int)luaL_checkinteger(L, 2);
    int off = (int)luaL_optinteger(L, 3, 0);
    lua_settop(L, 1);
    if (limit <= 0)
        limit = 1 << 30;
    return mp_unpack_full(L, limit, off);
}

int luaopen_kv_cmsgpack(lua_State *L)
{
    static const luaL_Reg fns[] = { { "pack", mp_pack },
                                    { "unpack", mp_unpack },
                                    { "unpack_one", mp_unpack_one },
                                    { "unpack_limit", mp_unpack_limit },
                                    { NULL, NULL } };
    lua_newtable(L);
    luaL_register(L, NULL, fns);
    return 1;
}
