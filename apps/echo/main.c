/* echo: the classic Node.js echo sample (bench/peers/echo.js), in C.
 * GET or HEAD /?value=X answers X; no value answers "no value specified";
 * other methods get 405 with Allow. */
#include <brisk/brisk.h>

#include <string.h>

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
    brisk_str value = brisk_req_query_param(req, "value", 0);
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
