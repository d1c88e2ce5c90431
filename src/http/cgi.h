/* CGI/1.1 (RFC 3875): scripts run as child processes whose pipes are
 * watched by the worker's event loop, so a slow script never delays other
 * clients. */
#ifndef BRISK_HTTP_CGI_H
#define BRISK_HTTP_CGI_H

#include "http/exchange.h"

/* The configured mapping whose prefix the normalised path (as made by
 * static_normalize_path: "cgi-bin/x.sh", no leading slash) falls under,
 * or NULL. Matching the normalised path means "/./cgi-bin/x", "//cgi-bin/x"
 * or "/%63gi-bin/x" can never reach the script as a static file. */
const http_cgi_map *http_cgi_match(const http_conf *conf, const char *rel, size_t len);

/* Runs the script named by rel under m (ends the response later). */
void http_cgi_handle(http_exchange *x, const http_request *r, const http_cgi_map *m,
                     const char *rel, size_t len);

/* Kills and reaps the worker's remaining scripts (at worker exit; their
 * responses are over, but a script may outlive its output). */
void http_cgi_shutdown(http_worker *hw);

#endif
