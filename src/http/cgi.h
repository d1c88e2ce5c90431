/* CGI/1.1 (RFC 3875): scripts run as child processes whose pipes are
 * watched by the worker's event loop, so a slow script never delays other
 * clients. */
#ifndef BRISK_HTTP_CGI_H
#define BRISK_HTTP_CGI_H

#include "http/conn.h"

/* The configured mapping whose prefix the request path falls under, or
 * NULL. */
const http_cgi_map *http_cgi_match(http_conn *c, const http_request *r);

/* Runs the script for the request (ends the response later). */
void http_cgi_handle(http_conn *c, const http_request *r, const http_cgi_map *m);

#endif
