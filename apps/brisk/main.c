/* brisk: the HTTP/1.1 server, built on its own public API: static files
 * and CGI are one handler mounted on every path. */
#include <brisk/brisk.h>

int main(int argc, char **argv)
{
    brisk_server *server = brisk_server_new();
    brisk_server_args_config(server, argc, argv);
    brisk_route(server, NULL, "/*", brisk_serve_files, NULL);
    return brisk_run(server);
}
