/* echo: the classic Node.js echo sample (bench/peers/echo.js), in C.
 * GET or HEAD /?value=X answers X; no value answers "no value specified";
 * other methods get 405 with Allow. */
#include <brisk/brisk.h>

#include <string.h>

/* Every value of a repeated query key, joined with ',' (what Node's
 * String(url.parse(u, true).query.key) gives). */
static brisk_str query_joined(brisk_req *req, const char *key)
{
    brisk_str first = brisk_req_query_param(req, key, 0);
    brisk_str next = brisk_req_query_param(req, key, 1);
    if (!next.ptr)
        return first;
    size_t len = first.len;
    for (unsigned i = 1; (next = brisk_req_query_param(req, key, i)).ptr; i++)
        len += 1 + next.len;
    char *out = brisk_req_alloc(req, len + 1), *p = out;
    if (!out)
        return first;
    for (unsigned i = 0; (next = brisk_req_query_param(req, key, i)).ptr; i++) {
        if (i)
            *p++ = ',';
        memcpy(p, next.ptr, next.len);
        p += next.len;
    }
    return (brisk_str){ out, (size_t)(p - out) };
}

static void on_request(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_str method = brisk_req_method(req);
    if (!(method.len == 3 && memcmp(method.ptr, "GET", 3) == 0) &&
        !(method.len == 4 && memcmp(method.ptr, "HEAD", 4) == 0)) {
        brisk_res_status(res, 405);
        brisk_res_header(res, "Allow", "GET, HEAD");
        brisk_res_end_str(res, "Method Not Allowed\n");
        return;
    }
    brisk_str value = query_joined(req, "value"); /* ?value=a&value=b -> "a,b", as Node */
    brisk_res_header(res, "Content-Type", "text/plain");
    if (value.len)
        brisk_res_end(res, value.ptr, value.len);
    else
        brisk_res_end_str(res, "no value specified");
}

int main(int argc, char **argv)
{
    brisk_server *server = brisk_create_server(on_request, NULL);
    brisk_server_args(server, argc, argv); /* --listen 127.0.0.1:8080 --workers N */
    return brisk_run(server);
}
