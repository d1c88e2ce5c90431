/* Reply builders: each appends one RESP value to the client's output
 * buffer (flushed at the end of the event-loop batch). RESP2 or RESP3
 * framing follows the client's HELLO version. Error messages are passed
 * without the leading '-' and with their code ("ERR syntax error"). */
#ifndef BRISK_KV_REPLY_H
#define BRISK_KV_REPLY_H

#include "kv/server.h"

#include <stdarg.h>

/* Shared error strings (Redis's exact wording). */
#define ERR_SYNTAX "ERR syntax error"
#define ERR_NOT_INT "ERR value is not an integer or out of range"
#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define ERR_NO_KEY "ERR no such key"
#define ERR_OVERFLOW "ERR increment or decrement would overflow"
#define ERR_OUT_OF_RANGE "ERR index out of range"
#define ERR_OFFSET_RANGE "ERR offset is out of range"
#define ERR_STRING_SIZE "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
#define ERR_OOM "OOM command not allowed when used memory > 'maxmemory'."
#define ERR_NOAUTH "NOAUTH Authentication required."
#define ERR_DB_RANGE "ERR DB index is out of range"
#define ERR_POSITIVE "ERR value is out of range, must be positive"
/* A RESP2 client with subscriptions ran another command (%s: its name). */
#define ERR_SUBSCRIBED_FMT                                                                     \
    "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET " \
    "are allowed in this context"
/* Sent (then the connection is closed) to a non-loopback client while
 * protected mode is on and no password is set; Redis 7's text verbatim,
 * its "Setup a an" included, for clients that match on it. */
#define ERR_DENIED \
    "DENIED Redis is running in protected mode because protected mode is " \
    "enabled and no password is set for the default user. In this mode " \
    "connections are only accepted from the loopback interface. If you want " \
    "to connect from external computers to Redis you may adopt one of the " \
    "following solutions: 1) Just disable protected mode sending the " \
    "command 'CONFIG SET protected-mode no' from the loopback interface by " \
    "connecting to Redis from the same host the server is running, however " \
    "MAKE SURE Redis is not publicly accessible from internet if you do so. " \
    "Use CONFIG REWRITE to make this change permanent. 2) Alternatively you " \
    "can just disable the protected mode by editing the Redis configuration " \
    "file, and setting the protected mode option to 'no', and then " \
    "restarting the server. 3) If you started the server manually just for " \
    "testing, restart it with the '--protected-mode no' option. 4) Setup a " \
    "an authentication password for the default user. NOTE: You only need " \
    "to do one of the above things in order for the server to start " \
    "accepting connections from the outside."

void reply_raw(kv_client *c, const char *p, size_t n);
void reply_ok(kv_client *c);
void reply_simple(kv_client *c, const char *s);
void reply_error(kv_client *c, const char *msg);
void reply_errorf(kv_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_arity_error(kv_client *c, const char *name);
void reply_int(kv_client *c, long long v);
void reply_bulk(kv_client *c, const char *p, size_t n);
static inline void reply_bulk_str(kv_client *c, bk_str s) { reply_bulk(c, s.p, s.len); }
void reply_bulk_cstr(kv_client *c, const char *s);
void reply_bulk_ll(kv_client *c, long long v);
void reply_null(kv_client *c);        /* $-1 or _ */
void reply_null_array(kv_client *c);  /* *-1 or _ */
void reply_array(kv_client *c, long long n);
void reply_map(kv_client *c, long long n);  /* n pairs */
void reply_set(kv_client *c, long long n);
void reply_double(kv_client *c, double v);
void reply_bool(kv_client *c, int v);  /* RESP3 #t/#f, RESP2 :1/:0 */
void reply_verbatim(kv_client *c, const char *p, size_t n, const char *fmt3);
void reply_empty_array(kv_client *c);

/* Deferred lengths: reply_defer returns a handle, the elements follow,
 * then reply_defer_set writes the header in front of them. */
size_t reply_defer(kv_client *c);
void reply_defer_set(kv_client *c, size_t handle, char type, long long n);
void reply_defer_array(kv_client *c, size_t handle, long long n);
void reply_defer_map(kv_client *c, size_t handle, long long n);
void reply_defer_set_type(kv_client *c, size_t handle, long long n);

#endif
