/* The static file handler, and the pieces of it that are worth testing
 * alone: path normalisation, Range parsing, validator matching. */
#ifndef BRISK_HTTP_STATIC_H
#define BRISK_HTTP_STATIC_H

#include "http/exchange.h"

#include <time.h>

/* Percent-decodes and normalises a URL path ("/a/./b/../c") into out as a
 * path relative to the root ("a/c"; "" for the root itself). Refuses NUL,
 * encoded '/', bad escapes and any ".." that would climb above the root.
 * Returns the length, or a negative HTTP status (-400, -404, -414).
 * *dir_form is set when the path ends with '/'. */
int static_normalize_path(bk_str path, char *out, size_t cap, int *dir_form);

/* Parses a Range header for a representation of size bytes. Returns 1 with
 * the inclusive range in *first, *last; 0 when the header must be ignored
 * (bad syntax, another unit, or several ranges: brisk then sends the whole
 * representation with 200); -416 when no byte of it can be satisfied. */
int static_parse_range(bk_str value, uint64_t size, uint64_t *first, uint64_t *last);

/* If-None-Match: 1 when the list is "*" or names etag (weak comparison). */
int static_etag_match(bk_str header, bk_str etag);

/* Accept-Encoding: 1 when the coding (lower-case) is acceptable (q > 0). */
int static_accepts_encoding(bk_str header, const char *coding);

/* Longest normalised path served. */
#define STATIC_PATH_MAX 4096

/* Serves path, already normalised by static_normalize_path (NUL-ended). */
/* 301 to the path as sent plus '/' (and its query). */
void static_redirect_to_dir(http_exchange *x, const http_request *r);
void static_serve(http_exchange *x, const http_request *r, const char *path, size_t len,
                  int dir_form);

#endif
