/* brisk-foods: a JSON REST API (foods, categories, meal templates) on the
 * brisk handler API, with SQLite by default and PostgreSQL or MariaDB.
 *
 *   brisk-foods --listen 127.0.0.1:8000 --db sqlite:foods.db --seed 1000 --workers 1
 */
#include "foods.h"

#include "schema.h"
#include "validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SETUP_WAIT_MS 15000 /* how long to wait for a database server at startup */

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [--listen ADDR:PORT] [--db URL] [--workers N|auto] [--seed N]\n"
            "\n"
            "      --listen ADDR:PORT  listen address, repeatable (default 127.0.0.1:8080);\n"
            "                          ADDR:PORT ssl serves HTTPS, with --ssl-cert FILE --ssl-key FILE\n"
            "      --db URL            sqlite:PATH (default sqlite:foods.db),\n"
            "                          postgresql://user:pass@host:port/db,\n"
            "                          mysql://user:pass@host:port/db or mysql://user@/db?socket=PATH\n"
            "      --db-pool N         database connections per worker (default: SQLite 1 writer,\n"
            "                          PostgreSQL 4, MariaDB 4)\n"
            "      --seed N            with an empty database, load N sample foods and N/10 templates\n"
            "      --workers N|auto    worker threads (auto: one per CPU)\n"
            "  -h, --help              show this help\n"
            "  -v, --version           show the version\n",
            prog);
}

static void on_worker(brisk_loop *loop, int start, void *udata)
{
    if (start) {
        foods_worker *w = calloc(1, sizeof *w);
        if (!w) {
            fprintf(stderr, "brisk-foods: out of memory\n");
            abort();
        }
        jw_init(&w->out);
        w->db = db_pool_open(&foods.db, loop);
        if (!w->db) {
            fprintf(stderr, "brisk-foods: out of memory\n");
            abort();
        }
        brisk_loop_set_data(loop, w);
        return;
    }
    foods_worker *w = brisk_loop_data(loop);
    if (!w)
        return;
    db_pool_close(w->db);
    jw_free(&w->out);
    free(w);
    brisk_loop_set_data(loop, NULL);
}

/* Our flags are taken out of argv; the rest goes to brisk_server_args. */
static const char *take_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (strcmp(argv[*i], name) == 0) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "brisk-foods: %s needs a value\n", name);
            exit(2);
        }
        return argv[++*i];
    }
    return NULL;
}

static long number_arg(const char *name, const char *v, long max)
{
    int64_t n;
    if (foods_parse_int(v, strlen(v), 0, max, &n) < 0) {
        fprintf(stderr, "brisk-foods: %s: expected a number from 0 to %ld, got \"%s\"\n", name, max,
                v);
        exit(2);
    }
    return (long)n;
}

/* "database sqlite foods.db" / "database postgresql postgres://u:***@h/db":
 * the start-up line names the database, never its password. */
static void describe_db(const db_config *db, char *out, size_t cap)
{
    const char *t = db->target ? db->target : "";
    const char *scheme = strstr(t, "://");
    const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
    const char *colon = at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;
    if (colon)
        snprintf(out, cap, "database %s %.*s:***%s", db_kind_name(db->kind), (int)(colon - t), t, at);
    else if (!scheme && strstr(t, "password"))
        snprintf(out, cap, "database %s (conninfo)", db_kind_name(db->kind));
    else
        snprintf(out, cap, "database %s %s", db_kind_name(db->kind), t);
}

int main(int argc, char **argv)
{
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *url = "sqlite:foods.db";
    long seed = 0, pool = 0;
    /* The flags left for brisk; argv's size (at most argc + 1 entries) fits. */
    char **rest = argv;
    int nrest = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = take_value(argc, argv, &i, "--db")))
            url = v;
        else if ((v = take_value(argc, argv, &i, "--seed")))
            seed = number_arg("--seed", v, 10000000);
        else if ((v = take_value(argc, argv, &i, "--db-pool")))
            pool = number_arg("--db-pool", v, 64);
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout, prog);
            return 0;
        } else
            rest[nrest++] = argv[i]; /* nrest <= i: never overwrites what is still to read */
    }
    rest[nrest] = NULL;

    char err[512];
    db_global_init();
    if (db_config_parse(&foods.db, url, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    foods.db.stmts = foods_stmts;
    foods.db.nstmts = ST_COUNT;
    foods.db.pool_size = (int)pool;

    brisk_server *s = foods.server = brisk_server_new();
    if (!s) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    brisk_server_args(s, nrest, rest);

    /* A database server may still be starting: retry for a while. */
    struct timespec nap = { 0, 250 * 1000000L };
    int waited = 0;
    while (foods_schema_setup(&foods.db, seed, err, sizeof err) < 0) {
        if (foods.db.kind == DB_SQLITE || waited >= SETUP_WAIT_MS) {
            fprintf(stderr, "%s: database setup failed: %s\n", prog, err);
            brisk_server_free(s);
            db_config_free(&foods.db);
            return 1;
        }
        if (waited == 0)
            fprintf(stderr, "%s: waiting for the database: %s\n", prog, err);
        nanosleep(&nap, NULL);
        waited += 250;
    }

    char what[256];
    describe_db(&foods.db, what, sizeof what);
    brisk_server_describe(s, what);
    brisk_max_body(s, FOODS_MAX_BODY);
    brisk_on_worker(s, on_worker, NULL);
    if (foods_routes(s) < 0) {
        fprintf(stderr, "%s: out of memory\n", prog);
        brisk_server_free(s);
        db_config_free(&foods.db);
        return 1;
    }
    int rc = brisk_run(s); /* frees s */
    foods.server = NULL;
    db_config_free(&foods.db);
    return rc;
}
