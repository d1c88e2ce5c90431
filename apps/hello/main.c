/* hello: the classic Node.js hello world (bench/peers/hello.js), in C. */
#include <brisk/brisk.h>

static void on_request(brisk_req *req, brisk_res *res, void *udata)
{
    brisk_res_header(res, "Content-Type", "text/plain");
    brisk_res_end_str(res, "Hello World");
}

int main(int argc, char **argv)
{
    brisk_server *server = brisk_create_server(on_request, NULL);
    brisk_server_args(server, argc, argv); /* --listen 127.0.0.1:8080 --workers N */
    return brisk_run(server);
}
