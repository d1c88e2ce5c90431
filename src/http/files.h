/* The file handler: static files and CGI scripts, as configured (the brisk
 * server's own handler; brisk_serve_files in the public API). */
#ifndef BRISK_HTTP_FILES_H
#define BRISK_HTTP_FILES_H

#include "http/exchange.h"

/* Answers x from the configuration's root and CGI mappings; udata is
 * unused. */
void http_files_handle(http_exchange *x, void *udata);

#endif
