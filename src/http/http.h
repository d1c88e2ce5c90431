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
    X(101, "Switching Protocols")                 \
    X(103, "Early Hints")                         \
    X(201, "Created")                             \
    X(202, "Accepted")                            \
    X(203, "Non-Authoritative Information")       \
    X(204, "No Content")                          \
    X(205, "Reset Content")                       \
    X(206, "Partial Content")                     \
    X(300, "Multiple Choices")                    \
    X(301, "Moved Permanently")                   \
    X(302, "Found")                               \
    X(303, "See Other")                           \
    X(304, "Not Modified")                        \
    X(305, "Use Proxy")                           \
    X(307, "Temporary Redirect")                  \
    X(308, "Permanent Redirect")                  \
    X(400, "Bad Request")                         \
    X(401, "Unauthorized")                        \
    X(402, "Payment Required")                    \
    X(403, "Forbidden")                           \
    X(404, "Not Found")                           \
    X(405, "Method Not Allowed")                  \
    X(406, "Not Acceptable")                      \
    X(407, "Proxy Authentication Required")       \
    X(408, "Request Timeout")                     \
    X(409, "Conflict")                            \
    X(410, "Gone")                                \
    X(411, "Length Required")                     \
    X(412, "Precondition Failed")                 \
    X(413, "Content Too Large")                   \
    X(414, "URI Too Long")                        \
    X(415, "Unsupported Media Type")              \
    X(416, "Range Not Satisfiable")               \
    X(417, "Expectation Failed")                  \
    X(421, "Misdirected Request")                 \
    X(422, "Unprocessable Content")               \
    X(423, "Locked")                              \
    X(424, "Failed Dependency")                   \
    X(425, "Too Early")                           \
    X(426, "Upgrade Required")                    \
    X(428, "Precondition Required")               \
    X(429, "Too Many Requests")                   \
    X(431, "Request Header Fields Too Large")     \
    X(451, "Unavailable For Legal Reasons")       \
    X(500, "Internal Server Error")               \
    X(501, "Not Implemented")                     \
    X(502, "Bad Gateway")                         \
    X(503, "Service Unavailable")                 \
    X(504, "Gateway Timeout")                     \
    X(505, "HTTP Version Not Supported")          \
    X(506, "Variant Also Negotiates")             \
    X(507, "Insufficient Storage")                \
    X(508, "Loop Detected")                       \
    X(510, "Not Extended")                        \
    X(511, "Network Authentication Required")

/* "Not Found" for 404; "Unknown" for codes outside the table. */
bk_str http_status_reason(int status);
bk_str http_method_name(enum http_method m);

#endif
