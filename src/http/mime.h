/* File extension -> media type, read once from a mime.types file (Debian's
 * media-types package) with a small built-in table underneath. Immutable
 * after loading, so workers share it without locks. */
#ifndef BRISK_HTTP_MIME_H
#define BRISK_HTTP_MIME_H

#include "core/common.h"

typedef struct mime_table mime_table;

/* path may be NULL or missing: the built-in table is always there.
 * default_type is used for unknown extensions. NULL on OOM. */
mime_table *mime_load(const char *path, const char *default_type);
void mime_free(mime_table *t);

/* The Content-Type for a file name (text types get "; charset=utf-8"). */
bk_str mime_lookup(const mime_table *t, bk_str filename);

#endif
