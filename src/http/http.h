/* HTTP vocabulary shared by the parser, the connection and the handlers:
 * methods and status codes as X-macro tables, so enums and strings agree. */
#ifndef BRISK_HTTP_HTTP_H
#define BRISK_HTTP_HTTP_H

#include "core/common.h"

#define HTTP_METHODS(X) \
    X(GET, "GET")       \
    X(HEAD, "HEAD")     \
    X(POST, "POST")     \
    X(PUT, "PUT")       \
    X(DELETE, "DELETE") \
    X(PATCH, "PATCH")   \
    X(OPTIONS, "OPTIONS") \
    X(TRACE, "TRACE")   \
    X(CONNECT, "CONNECT")

enum http_method {
    HTTP_METHOD_UNKNOWN = 0,
#define X(id, s) HTTP_##id,
    HTTP_METHODS(X)
#undef X
};

#define HTTP_STATUSES(X)                          \
    X(100, "Continue")                            \
    X(200, "OK")                                  \
    X(201, "Created")                             \
    X(204, "No Content")                          \
    X(206, "Partial Content")                     \
    X(301, "Moved Permanently")                   \
    X(302, "Found")                               \
    X(303, "See Other")                           \
    X(304, "Not Modified")                        \
    X(307, "Temporary Redirect")                  \
    X(308, "Permanent Redirect")                  \
    X(400, "Bad Request")                         \
    X(401, "Unauthorized")                        \
    X(403, "Forbidden")                           \
    X(404, "Not Found")                           \
    X(405, "Method Not Allowed")                  \
    X(408, "Request Timeout")                     \
    X(409, "Conflict")                            \
    X(411, "Length Required")                     \
    X(412, "Precondition Failed")                 \
    X(413, "Content Too Large")                   \
    X(414, "URI Too Long")                        \
    X(415, "Unsupported Media Type")              \
    X(416, "Range Not Satisfiable")               \
    X(417, "Expectation Failed")                  \
    X(422, "Unprocessable Content")               \
    X(429, "Too Many Requests")                   \
    X(431, "Request Header Fields Too Large")     \
    X(500, "Internal Server Error")               \
    X(501, "Not Implemented")                     \
    X(502, "Bad Gateway")                         \
    X(503, "Service Unavailable")                 \
    X(504, "Gateway Timeout")                     \
    X(505, "HTTP Version Not Supported")

/* "Not Found" for 404; "Unknown" for codes outside the table. */
str http_status_reason(int status);
str http_method_name(enum http_method m);

#endif
