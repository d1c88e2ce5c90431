/* The endpoints of brisk-foods. A handler checks its input, builds one
 * db_batch (bound parameters only) and returns; the batch's callback writes
 * the JSON answer on the same worker. Per-request state lives in the
 * request arena, which the end of the response frees: nothing is touched
 * after brisk_res_end. */
#include "foods.h"

#include "schema.h"
#include "validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

foods_app foods;

typedef struct {
    brisk_res *res;
    foods_worker *w;
    int64_t id;
    food_in food;  /* POST/PUT /api/foods: echoed back; name in the arena */
    const char *name; /* POST /api/templates */
    size_t name_len;
    template_item_in *items;
    int nitems;
    int64_t *cats; /* bulk: each item's category_id, then the new ids */
    int nstmts;    /* bulk: INSERT statements in the batch */
} req_ctx;

static foods_worker *worker_of(brisk_res *res)
{
    return brisk_loop_data(brisk_res_loop(res));
}

/* A fresh response body in the worker's buffer. */
static jw *out_begin(foods_worker *w)
{
    jw_reset(&w->out);
    return &w->out;
}

static void send_json(brisk_res *res, int status, jw *out)
{
    if (out->oom) {
        brisk_res_error(res, 500);
        return;
    }
    brisk_res_status(res, status);
    brisk_res_header(res, "Content-Type", "application/json");
    brisk_res_end(res, out->buf, out->len);
}

/* {"error": msg, "field": field or null} */
static void reply_error(brisk_res *res, int status, const char *field, const char *msg)
{
    foods_worker *w = worker_of(res);
    jw *o = out_begin(w);
    jw_obj_open(o);
    jw_key(o, "error");
    jw_cstr(o, msg);
    jw_key(o, "field");
    jw_cstr(o, field && *field ? field : NULL);
    jw_obj_close(o);
    if (status == 503)
        brisk_res_header(res, "Retry-After", "1");
    send_json(res, status, o);
}

static void reply_err(brisk_res *res, const foods_err *e)
{
    reply_error(res, e->status, e->field, e->error);
}

/* Answers a failed batch (other than the constraint cases a handler maps
 * itself). Returns 1 when it answered. */
static int db_failed(req_ctx *ctx, const db_result *r)
{
    switch (db_result_status(r)) {
    case DB_OK: return 0;
    case DB_EUNAVAILABLE:
        reply_error(ctx->res, 503, NULL, "database unavailable");
        return 1;
    case DB_EBUSY:
        reply_error(ctx->res, 503, NULL, "database busy");
        return 1;
    case DB_ECONSTRAINT:
        reply_error(ctx->res, 409, NULL, "conflicts with existing data");
        return 1;
    default:
        fprintf(stderr, "brisk-foods: database error: %s\n", db_result_error(r));
        reply_error(ctx->res, 500, NULL, "internal error");
        return 1;
    }
}

static req_ctx *ctx_new(brisk_req *req, brisk_res *res)
{
    req_ctx *ctx = brisk_req_alloc(req, sizeof *ctx);
    if (!ctx) {
        reply_error(res, 500, NULL, "out of memory");
        return NULL;
    }
    memset(ctx, 0, sizeof *ctx);
    ctx->res = res;
    ctx->w = worker_of(res);
    return ctx;
}

/* Hands a one-statement batch to the pool. */
static void run1(req_ctx *ctx, int stmt, const db_value *params, int nparams, db_cb cb)
{
    db_batch *b = db_batch_new(1);
    if (!b || db_batch_add(b, stmt, params, nparams) < 0) {
        db_batch_free(b);
        reply_error(ctx->res, 500, NULL, "out of memory");
        return;
    }
    db_run(ctx->w->db, b, ctx->res, cb, ctx);
}

/* An integer query parameter; absent gives def. 0, or -1 after a 422. */
static int query_int(brisk_req *req, brisk_res *res, const char *key, int64_t min, int64_t max,
                     int64_t def, int64_t *out)
{
    brisk_str v = brisk_req_query_param(req, key, 0);
    if (!v.ptr) {
        *out = def;
        return 0;
    }
    if (foods_parse_int(v.ptr, v.len, min, max, out) < 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be an integer between %lld and %lld", (long long)min,
                 (long long)max);
        reply_error(res, 422, key, msg);
        return -1;
    }
    return 0;
}

/* The {id} of the path: 0, or -1 after a 422. */
static int path_id(brisk_req *req, brisk_res *res, int64_t *id)
{
    brisk_str v = brisk_req_param(req, "id");
    if (!v.ptr || foods_parse_int(v.ptr, v.len, 1, FOODS_ID_MAX, id) < 0) {
        reply_error(res, 422, "id", "must be a positive integer");
        return -1;
    }
    return 0;
}

/* GET/DELETE /api/.../{id}: one statement with the id from the path. */
static void run_by_id(brisk_req *req, brisk_res *res, int stmt, db_cb cb)
{
    int64_t id;
    if (path_id(req, res, &id) < 0)
        return;
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx)
        return;
    db_value p = db_int(id);
    run1(ctx, stmt, &p, 1, cb);
}

static void write_food(jw *o, int64_t id, const char *name, size_t name_len, int64_t cat,
                       double kcal, double protein, double carbs, double fat)
{
    jw_obj_open(o);
    jw_key(o, "id");
    jw_int(o, id);
    jw_key(o, "name");
    jw_str(o, name, name_len);
    jw_key(o, "category_id");
    jw_int(o, cat);
    jw_key(o, "kcal");
    jw_double(o, kcal);
    jw_key(o, "protein");
    jw_double(o, protein);
    jw_key(o, "carbs");
    jw_double(o, carbs);
    jw_key(o, "fat");
    jw_double(o, fat);
    jw_obj_close(o);
}

static void write_food_row(jw *o, const db_value *row)
{
    write_food(o, db_as_int(&row[FC_ID]), row[FC_NAME].v.s.p, row[FC_NAME].v.s.len,
               db_as_int(&row[FC_CATEGORY]), db_as_double(&row[FC_KCAL]),
               db_as_double(&row[FC_PROTEIN]), db_as_double(&row[FC_CARBS]),
               db_as_double(&row[FC_FAT]));
}

/* ---- /api/health ---------------------------------------------------- */

static void health_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    int ok = db_result_status(r) == DB_OK;
    jw *o = out_begin(ctx->w);
    jw_obj_open(o);
    jw_key(o, "status");
    jw_cstr(o, ok ? "ok" : "unavailable");
    jw_key(o, "database");
    jw_cstr(o, db_kind_name(foods.db.kind));
    if (!ok) {
        jw_key(o, "error");
        jw_cstr(o, "database unavailable");
        jw_key(o, "field");
        jw_null(o);
        brisk_res_header(ctx->res, "Retry-After", "1");
    }
    jw_obj_close(o);
    send_json(ctx->res, ok ? 200 : 503, o);
}

static void h_health(brisk_req *req, brisk_res *res, void *udata)
{
    req_ctx *ctx = ctx_new(req, res);
    if (ctx)
        run1(ctx, ST_PING, NULL, 0, health_done);
}

static void h_openapi(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_header(res, "Content-Type", "application/json");
    brisk_res_end_borrowed(res, foods_openapi_json, strlen(foods_openapi_json), NULL, NULL);
}

/* ---- /api/categories ------------------------------------------------ */

/* [{"id": .., "name": ..}, ...] from rows of (id, name): categories and
 * the template list share it. */
static void id_name_list_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_failed(ctx, r))
        return;
    jw *o = out_begin(ctx->w);
    jw_arr_open(o);
    for (int i = 0, n = db_result_nrows(r, 0); i < n; i++) {
        const db_value *row = db_result_row(r, 0, i);
        jw_obj_open(o);
        jw_key(o, "id");
        jw_int(o, db_as_int(&row[0]));
        jw_key(o, "name");
        jw_str(o, row[1].v.s.p, row[1].v.s.len);
        jw_obj_close(o);
    }
    jw_arr_close(o);
    send_json(ctx->res, 200, o);
}

static void h_categories(brisk_req *req, brisk_res *res, void *udata)
{
    req_ctx *ctx = ctx_new(req, res);
    if (ctx)
        run1(ctx, ST_CATEGORIES, NULL, 0, id_name_list_done);
}

/* ---- /api/foods ----------------------------------------------------- */

static void foods_list_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_failed(ctx, r))
        return;
    jw *o = out_begin(ctx->w);
    jw_arr_open(o);
    for (int i = 0, n = db_result_nrows(r, 0); i < n; i++)
        write_food_row(o, db_result_row(r, 0, i));
    jw_arr_close(o);
    send_json(ctx->res, 200, o);
}

static void h_foods_list(brisk_req *req, brisk_res *res, void *udata)
{
    int64_t limit, offset, cat;
    if (query_int(req, res, "limit", 1, FOODS_LIMIT_MAX, FOODS_LIMIT_DEFAULT, &limit) < 0 ||
        query_int(req, res, "offset", 0, FOODS_OFFSET_MAX, 0, &offset) < 0 ||
        query_int(req, res, "category_id", 1, FOODS_CATEGORY_ID_MAX, 0, &cat) < 0)
        return;
    brisk_str q = brisk_req_query_param(req, "q", 0);
    foods_err e;
    if (q.ptr && q.len && foods_check_text(q.ptr, q.len, FOODS_Q_MAX, "q", &e) < 0) {
        reply_err(res, &e);
        return;
    }
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx)
        return;
    db_value p[4];
    int n = 0, stmt;
    if (cat)
        p[n++] = db_int(cat);
    if (q.ptr && q.len)
        p[n++] = db_text(q.ptr, q.len);
    stmt = cat ? (n == 2 ? ST_FOODS_LIST_CAT_Q : ST_FOODS_LIST_CAT)
               : (n == 1 ? ST_FOODS_LIST_Q : ST_FOODS_LIST);
    p[n++] = db_int(limit);
    p[n++] = db_int(offset);
    run1(ctx, stmt, p, n, foods_list_done);
}

static void food_get_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_failed(ctx, r))
        return;
    if (db_result_nrows(r, 0) == 0) {
        reply_error(ctx->res, 404, "id", "food not found");
        return;
    }
    jw *o = out_begin(ctx->w);
    write_food_row(o, db_result_row(r, 0, 0));
    send_json(ctx->res, 200, o);
}

static void h_food_get(brisk_req *req, brisk_res *res, void *udata)
{
    run_by_id(req, res, ST_FOOD_GET, food_get_done);
}

/* Parses and checks a food body into ctx->food, its name copied into the
 * request arena. 0, or -1 after answering. */
static int read_food_body(brisk_req *req, req_ctx *ctx)
{
    brisk_str body = brisk_req_body(req);
    foods_err e;
    cJSON *j = foods_parse_json(body.ptr, body.len, &e);
    if (!j || foods_food_from_json(j, NULL, &ctx->food, &e) < 0) {
        cJSON_Delete(j);
        reply_err(ctx->res, &e);
        return -1;
    }
    char *name = brisk_req_alloc(req, ctx->food.name_len + 1);
    if (!name) {
        cJSON_Delete(j);
        reply_error(ctx->res, 500, NULL, "out of memory");
        return -1;
    }
    memcpy(name, ctx->food.name, ctx->food.name_len + 1);
    ctx->food.name = name;
    cJSON_Delete(j);
    return 0;
}

static int food_params(const food_in *f, db_value *p)
{
    p[0] = db_text(f->name, f->name_len);
    p[1] = db_int(f->category_id);
    p[2] = db_double(f->kcal);
    p[3] = db_double(f->protein);
    p[4] = db_double(f->carbs);
    p[5] = db_double(f->fat);
    return 6;
}

static void write_food_in(jw *o, int64_t id, const food_in *f)
{
    write_food(o, id, f->name, f->name_len, f->category_id, f->kcal, f->protein, f->carbs, f->fat);
}

static void food_create_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_result_status(r) == DB_ECONSTRAINT) {
        reply_error(ctx->res, 422, "category_id", "unknown category");
        return;
    }
    if (db_failed(ctx, r))
        return;
    int64_t id = db_as_int(&db_result_row(r, 0, 0)[0]);
    char loc[48];
    snprintf(loc, sizeof loc, "/api/foods/%lld", (long long)id);
    brisk_res_header(ctx->res, "Location", loc);
    jw *o = out_begin(ctx->w);
    write_food_in(o, id, &ctx->food);
    send_json(ctx->res, 201, o);
}

static void h_food_create(brisk_req *req, brisk_res *res, void *udata)
{
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx || read_food_body(req, ctx) < 0)
        return;
    db_value p[6];
    int n = food_params(&ctx->food, p);
    run1(ctx, ST_FOOD_INSERT, p, n, food_create_done);
}

/* How a write to one food ends when it does not succeed: the database
 * refused it (constraint: status, field, message), failed, or found no such
 * food. 1 when that answered the request. */
static int food_write_refused(req_ctx *ctx, const db_result *r, int status, const char *field,
                              const char *msg)
{
    if (db_result_status(r) == DB_ECONSTRAINT) {
        reply_error(ctx->res, status, field, msg);
        return 1;
    }
    if (db_failed(ctx, r))
        return 1;
    if (db_result_affected(r, 0) == 0) {
        reply_error(ctx->res, 404, "id", "food not found");
        return 1;
    }
    return 0;
}

static void food_update_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (food_write_refused(ctx, r, 422, "category_id", "unknown category"))
        return;
    jw *o = out_begin(ctx->w);
    write_food_in(o, ctx->id, &ctx->food);
    send_json(ctx->res, 200, o);
}

static void h_food_update(brisk_req *req, brisk_res *res, void *udata)
{
    int64_t id;
    if (path_id(req, res, &id) < 0)
        return;
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx || read_food_body(req, ctx) < 0)
        return;
    ctx->id = id;
    db_value p[7];
    int n = food_params(&ctx->food, p);
    p[n++] = db_int(id);
    run1(ctx, ST_FOOD_UPDATE, p, n, food_update_done);
}

static void food_delete_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (food_write_refused(ctx, r, 409, "id", "food is used by a template"))
        return;
    brisk_res_status(ctx->res, 204);
    brisk_res_end(ctx->res, NULL, 0);
}

static void h_food_delete(brisk_req *req, brisk_res *res, void *udata)
{
    run_by_id(req, res, ST_FOOD_DELETE, food_delete_done);
}

/* ---- /api/foods/bulk ------------------------------------------------ */

/* A bulk goes as 100-row, then 10-row, then 1-row INSERTs. */
static const struct {
    int stmt, rows;
} bulk_chunks[] = { { ST_FOOD_INSERT_100, 100 }, { ST_FOOD_INSERT_10, 10 }, { ST_FOOD_INSERT, 1 } };

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The database refused a category: find the first item that names one
 * that does not exist (the statement that failed holds up to 100 items). */
static void bulk_find_category(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_failed(ctx, r))
        return;
    int ncat = db_result_nrows(r, 0);
    for (int i = 0; i < ctx->nitems; i++) {
        int found = 0;
        for (int k = 0; k < ncat && !found; k++)
            found = db_as_int(&db_result_row(r, 0, k)[0]) == ctx->cats[i];
        if (!found) {
            char field[48];
            snprintf(field, sizeof field, "[%d].category_id", i);
            reply_error(ctx->res, 422, field, "unknown category");
            return;
        }
    }
    reply_error(ctx->res, 409, NULL, "conflicts with existing data");
}

static void bulk_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_result_status(r) == DB_ECONSTRAINT) {
        run1(ctx, ST_CATEGORIES, NULL, 0, bulk_find_category);
        return;
    }
    if (db_failed(ctx, r))
        return;
    /* Each statement's ids, ascending: the order of its VALUES rows. */
    int64_t *ids = ctx->cats; /* done with */
    int n = 0;
    for (int st = 0; st < ctx->nstmts; st++) {
        int rows = db_result_nrows(r, st), first = n;
        for (int k = 0; k < rows && n < ctx->nitems; k++)
            ids[n++] = db_as_int(&db_result_row(r, st, k)[0]);
        qsort(ids + first, (size_t)(n - first), sizeof *ids, cmp_i64);
    }
    if (n != ctx->nitems) {
        fprintf(stderr, "brisk-foods: bulk insert returned %d ids for %d foods\n", n, ctx->nitems);
        reply_error(ctx->res, 500, NULL, "internal error");
        return;
    }
    jw *o = out_begin(ctx->w);
    jw_obj_open(o);
    jw_key(o, "ids");
    jw_arr_open(o);
    for (int i = 0; i < n; i++)
        jw_int(o, ids[i]);
    jw_arr_close(o);
    jw_obj_close(o);
    send_json(ctx->res, 201, o);
}

static void h_foods_bulk(brisk_req *req, brisk_res *res, void *udata)
{
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx)
        return;
    brisk_str body = brisk_req_body(req);
    foods_err e;
    db_batch *b = NULL;
    cJSON *j = foods_parse_json(body.ptr, body.len, &e);
    if (!j)
        goto invalid;
    if (!cJSON_IsArray(j)) {
        foods_fail(&e, 422, NULL, "must be a JSON array of foods");
        goto invalid;
    }
    int n = cJSON_GetArraySize(j);
    if (n < 1 || n > FOODS_BULK_MAX) {
        foods_fail(&e, 422, NULL, "must hold 1 to %d foods", FOODS_BULK_MAX);
        goto invalid;
    }
    /* Everything is checked before anything is written. */
    food_in *fs = brisk_req_alloc(req, (size_t)n * sizeof *fs);
    ctx->cats = brisk_req_alloc(req, (size_t)n * sizeof *ctx->cats);
    b = db_batch_new(n / 100 + 10);
    if (!fs || !ctx->cats || !b) {
        foods_fail(&e, 500, NULL, "out of memory");
        goto invalid;
    }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, j)
    {
        char prefix[24];
        snprintf(prefix, sizeof prefix, "[%d].", i);
        if (foods_food_from_json(it, prefix, &fs[i], &e) < 0)
            goto invalid;
        ctx->cats[i] = fs[i].category_id;
        i++;
    }
    ctx->nstmts = 0;
    for (size_t c = 0, at = 0; c < sizeof bulk_chunks / sizeof bulk_chunks[0]; c++) {
        int rows = bulk_chunks[c].rows;
        for (; at + (size_t)rows <= (size_t)n; at += (size_t)rows) {
            db_value p[6 * 100];
            for (int k = 0; k < rows; k++)
                food_params(&fs[at + (size_t)k], p + 6 * k);
            if (db_batch_add(b, bulk_chunks[c].stmt, p, 6 * rows) < 0) {
                foods_fail(&e, 500, NULL, "out of memory");
                goto invalid;
            }
            ctx->nstmts++;
        }
    }
    cJSON_Delete(j); /* the batch holds copies */
    ctx->nitems = n;
    db_run(ctx->w->db, b, res, bulk_done, ctx);
    return;
invalid:
    db_batch_free(b);
    cJSON_Delete(j);
    reply_err(res, &e);
}

/* ---- /api/templates ------------------------------------------------- */

static void h_templates_list(brisk_req *req, brisk_res *res, void *udata)
{
    int64_t limit, offset;
    if (query_int(req, res, "limit", 1, FOODS_TEMPLATES_LIMIT_MAX, FOODS_TEMPLATES_LIMIT_DEFAULT,
                  &limit) < 0 ||
        query_int(req, res, "offset", 0, FOODS_OFFSET_MAX, 0, &offset) < 0)
        return;
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx)
        return;
    db_value p[2] = { db_int(limit), db_int(offset) };
    run1(ctx, ST_TEMPLATES_LIST, p, 2, id_name_list_done);
}

static void template_create_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_result_status(r) == DB_ECONSTRAINT && db_result_failed(r) >= 1) {
        char field[48];
        snprintf(field, sizeof field, "items[%d].food_id", db_result_failed(r) - 1);
        reply_error(ctx->res, 422, field, "unknown food");
        return;
    }
    if (db_failed(ctx, r))
        return;
    jw *o = out_begin(ctx->w);
    jw_obj_open(o);
    jw_key(o, "id");
    jw_int(o, db_as_int(&db_result_row(r, 0, 0)[0]));
    jw_key(o, "name");
    jw_str(o, ctx->name, ctx->name_len);
    jw_key(o, "items");
    jw_arr_open(o);
    for (int i = 0; i < ctx->nitems; i++) {
        jw_obj_open(o);
        jw_key(o, "position");
        jw_int(o, i + 1);
        jw_key(o, "food_id");
        jw_int(o, ctx->items[i].food_id);
        jw_key(o, "grams");
        jw_double(o, ctx->items[i].grams);
        jw_obj_close(o);
    }
    jw_arr_close(o);
    jw_obj_close(o);
    send_json(ctx->res, 201, o);
}

static void h_template_create(brisk_req *req, brisk_res *res, void *udata)
{
    req_ctx *ctx = ctx_new(req, res);
    if (!ctx)
        return;
    brisk_str body = brisk_req_body(req);
    foods_err e;
    template_item_in *items = NULL;
    db_batch *b = NULL;
    const char *name;
    size_t name_len;
    int n;
    cJSON *j = foods_parse_json(body.ptr, body.len, &e);
    if (!j || foods_template_from_json(j, &name, &name_len, &items, &n, &e) < 0)
        goto invalid;
    char *name_copy = brisk_req_alloc(req, name_len + 1);
    template_item_in *items_copy = brisk_req_alloc(req, (size_t)n * sizeof *items);
    b = db_batch_new(n + 1);
    db_value tv = db_text(name, name_len);
    if (!name_copy || !items_copy || !b || db_batch_add(b, ST_TEMPLATE_INSERT, &tv, 1) < 0) {
        foods_fail(&e, 500, NULL, "out of memory");
        goto invalid;
    }
    for (int i = 0; i < n; i++) {
        db_value p[3] = { db_int(i + 1), db_int(items[i].food_id), db_double(items[i].grams) };
        if (db_batch_add(b, ST_TEMPLATE_ITEM_ADD, p, 3) < 0) {
            foods_fail(&e, 500, NULL, "out of memory");
            goto invalid;
        }
    }
    memcpy(name_copy, name, name_len + 1);
    memcpy(items_copy, items, (size_t)n * sizeof *items);
    ctx->name = name_copy;
    ctx->name_len = name_len;
    ctx->items = items_copy;
    ctx->nitems = n;
    free(items);
    cJSON_Delete(j);
    db_run(ctx->w->db, b, res, template_create_done, ctx);
    return;
invalid:
    db_batch_free(b);
    free(items);
    cJSON_Delete(j);
    reply_err(res, &e);
}

/* Columns of ST_TEMPLATE_FULL. */
enum { TF_ID, TF_NAME, TF_POS, TF_GRAMS, TF_FOOD };

static void template_full_done(const db_result *r, void *udata)
{
    req_ctx *ctx = udata;
    if (db_failed(ctx, r))
        return;
    int n = db_result_nrows(r, 0);
    if (n == 0) {
        reply_error(ctx->res, 404, "id", "template not found");
        return;
    }
    const db_value *first = db_result_row(r, 0, 0);
    double grams = 0, kcal = 0, protein = 0, carbs = 0, fat = 0;
    jw *o = out_begin(ctx->w);
    jw_obj_open(o);
    jw_key(o, "id");
    jw_int(o, db_as_int(&first[TF_ID]));
    jw_key(o, "name");
    jw_str(o, first[TF_NAME].v.s.p, first[TF_NAME].v.s.len);
    jw_key(o, "items");
    jw_arr_open(o);
    for (int i = 0; i < n; i++) {
        const db_value *row = db_result_row(r, 0, i);
        if (row[TF_POS].type == DB_T_NULL)
            continue; /* a template without items: one row of NULLs */
        const db_value *f = row + TF_FOOD; /* id, name, category_id, kcal, protein, carbs, fat, category */
        double g = db_as_double(&row[TF_GRAMS]);
        double fk = db_as_double(&f[FC_KCAL]), fp = db_as_double(&f[FC_PROTEIN]);
        double fc = db_as_double(&f[FC_CARBS]), ff = db_as_double(&f[FC_FAT]);
        grams += g;
        kcal += fk * g / 100.0;
        protein += fp * g / 100.0;
        carbs += fc * g / 100.0;
        fat += ff * g / 100.0;
        jw_obj_open(o);
        jw_key(o, "position");
        jw_int(o, db_as_int(&row[TF_POS]));
        jw_key(o, "grams");
        jw_double(o, g);
        jw_key(o, "food");
        jw_obj_open(o);
        jw_key(o, "id");
        jw_int(o, db_as_int(&f[FC_ID]));
        jw_key(o, "name");
        jw_str(o, f[FC_NAME].v.s.p, f[FC_NAME].v.s.len);
        jw_key(o, "category_id");
        jw_int(o, db_as_int(&f[FC_CATEGORY]));
        jw_key(o, "kcal");
        jw_double(o, fk);
        jw_key(o, "protein");
        jw_double(o, fp);
        jw_key(o, "carbs");
        jw_double(o, fc);
        jw_key(o, "fat");
        jw_double(o, ff);
        jw_key(o, "category");
        jw_obj_open(o);
        jw_key(o, "id");
        jw_int(o, db_as_int(&f[FC_CATEGORY]));
        jw_key(o, "name");
        jw_str(o, f[FC_N].v.s.p, f[FC_N].v.s.len);
        jw_obj_close(o);
        jw_obj_close(o);
        jw_obj_close(o);
    }
    jw_arr_close(o);
    jw_key(o, "totals");
    jw_obj_open(o);
    jw_key(o, "grams");
    jw_double(o, jw_round2(grams));
    jw_key(o, "kcal");
    jw_double(o, jw_round2(kcal));
    jw_key(o, "protein");
    jw_double(o, jw_round2(protein));
    jw_key(o, "carbs");
    jw_double(o, jw_round2(carbs));
    jw_key(o, "fat");
    jw_double(o, jw_round2(fat));
    jw_obj_close(o);
    jw_obj_close(o);
    send_json(ctx->res, 200, o);
}

static void h_template_full(brisk_req *req, brisk_res *res, void *udata)
{
    run_by_id(req, res, ST_TEMPLATE_FULL, template_full_done);
}

/* ---- errors brisk makes itself (no route, 405, 413, 400), as JSON ---- */

static void on_error(brisk_req *req, brisk_res *res, int status, void *udata)
{
    static const struct { int status; const char *msg; } msgs[] = {
        { 400, "malformed request" },
        { 404, "not found" },
        { 405, "method not allowed" },
        { 413, "request body too large" },
        { 414, "request target too long" },
        { 431, "request headers too large" },
    };
    const char *msg = "request refused";
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
        if (msgs[i].status == status)
            msg = msgs[i].msg;
    reply_error(res, status, NULL, msg);
}

static void h_method_not_allowed(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_header(res, "Allow", udata);
    reply_error(res, 405, NULL, "method not allowed");
}

int foods_routes(brisk_server *s)
{
    static const struct {
        const char *method, *pattern;
        brisk_handler handler;
    } routes[] = {
        { "GET", "/api/health", h_health },
        { NULL, "/api/health", NULL },
        { "GET", "/api/openapi.json", h_openapi },
        { NULL, "/api/openapi.json", NULL },
        { "GET", "/api/categories", h_categories },
        { NULL, "/api/categories", NULL },
        { "GET", "/api/foods", h_foods_list },
        { "POST", "/api/foods", h_food_create },
        { NULL, "/api/foods", NULL },
        { "POST", "/api/foods/bulk", h_foods_bulk },
        { NULL, "/api/foods/bulk", NULL },
        { "GET", "/api/foods/:id", h_food_get },
        { "PUT", "/api/foods/:id", h_food_update },
        { "DELETE", "/api/foods/:id", h_food_delete },
        { NULL, "/api/foods/:id", NULL },
        { "GET", "/api/templates", h_templates_list },
        { "POST", "/api/templates", h_template_create },
        { NULL, "/api/templates", NULL },
        { "GET", "/api/templates/:id/full", h_template_full },
        { NULL, "/api/templates/:id/full", NULL },
    };
    /* A route without a method closes each path: it answers 405 (JSON)
     * with the methods of the routes just before it, so that, e.g.,
     * GET /api/foods/bulk never falls through to /api/foods/:id. */
    static char allow[sizeof routes / sizeof routes[0]][32];
    size_t first = 0;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (routes[i].handler) {
            if (brisk_route(s, routes[i].method, routes[i].pattern, routes[i].handler, NULL) < 0)
                return -1;
            continue;
        }
        size_t len = 0;
        for (size_t k = first; k < i; k++)
            len += (size_t)snprintf(allow[i] + len, sizeof allow[i] - len, "%s%s",
                                    len ? ", " : "", routes[k].method);
        if (brisk_route(s, NULL, routes[i].pattern, h_method_not_allowed, allow[i]) < 0)
            return -1;
        first = i + 1;
    }
    /* Everything else (no route, 413, malformed requests) is answered by
     * brisk itself; on_error makes those JSON too. */
    brisk_on_error(s, on_error, NULL);
    return 0;
}
