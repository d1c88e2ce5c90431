/* brisk-foods: shared state of the app. */
#ifndef BRISK_FOODS_FOODS_H
#define BRISK_FOODS_FOODS_H

#include <brisk/brisk.h>

#include "db/db.h"
#include "jsonw.h"

#define FOODS_MAX_BODY (1024 * 1024) /* 413 beyond */

/* Per worker: its database pool and its response buffer. */
typedef struct {
    db_pool *db;
    jw out;
} foods_worker;

/* Read-only once serving. */
typedef struct {
    db_config db;
    brisk_server *server;
} foods_app;

extern foods_app foods;

/* Adds every route of the API. 0 or -1. */
int foods_routes(brisk_server *s);

/* The OpenAPI 3 document served at /api/openapi.json. */
extern const char foods_openapi_json[];

#endif
