/* Shared by the fuzz_kv_* targets: a brisk-kv server set up in-process
 * (default configuration, the command table, the default user, 16
 * databases) and a fake client whose commands run through kv_call, the
 * way the AOF loader runs them. Replies land in the client's wbuf. */
#ifndef BRISK_FUZZ_KV_FUZZ_H
#define BRISK_FUZZ_KV_FUZZ_H

#include "core/log.h"
#include "kv/acl.h"
#include "kv/config.h"
#include "kv/db.h"
#include "kv/mem.h"
#include "kv/pubsub.h"
#include "kv/server.h"
#include "kv/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s: check failed: %s (line %d)\n", __FILE__, #cond, __LINE__); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static kv_client *kvf_client;

static void kvf_init(void)
{
    if (kvf_client)
        return;
    kv_config_defaults(&srv.cfg);
    log_set_level(LOG_ERROR);
    srv.now_ms = kv_unix_ms();
    srv.aof_fd = -1;
    srv.aof_selected_db = -1;
    kv_rand_seed(1);
    dict_set_seed(1, 2);
    kv_cmd_table_init();
    if (kv_acl_init() < 0)
        abort();
    srv.dbs = kv_calloc((size_t)srv.cfg.databases * sizeof *srv.dbs);
    for (int i = 0; i < srv.cfg.databases; i++)
        db_init(&srv.dbs[i], i);
    pubsub_init();
    tracking_init();
    kv_introspect_init();
    kvf_client = kv_client_new_fake();
}

/* Runs one command; returns the reply (valid until the next call). */
static bk_str kvf_run(int argc, const bk_str *argv)
{
    kv_client *c = kvf_client;
    if ((size_t)argc > c->argv_cap) {
        kv_free(c->argv);
        c->argv_cap = (size_t)argc;
        c->argv = kv_malloc(c->argv_cap * sizeof *c->argv);
    }
    memcpy(c->argv, argv, (size_t)argc * sizeof *argv);
    c->argc = argc;
    c->wbuf.len = 0;
    kv_call(c);
    return (bk_str){ c->wbuf.data, c->wbuf.len };
}

/* kvf_run of C strings, NULL-terminated. */
static inline bk_str kvf_cmd(const char *a0, ...)
{
    bk_str argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && argc < 16; a = va_arg(ap, const char *))
        argv[argc++] = (bk_str){ a, strlen(a) };
    va_end(ap);
    return kvf_run(argc, argv);
}

static inline int kvf_is_error(bk_str r) { return r.len > 0 && r.p[0] == '-'; }

static inline void kvf_flushall(void)
{
    for (int i = 0; i < srv.cfg.databases; i++)
        db_flush(&srv.dbs[i]);
}

#endif
