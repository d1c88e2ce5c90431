/* brisk: the HTTP/1.1 server. Serves static files from a root directory. */
#include "http/server.h"
#include "http/static.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: brisk [-c FILE] [-t] [options]\n"
            "\n"
            "  -c, --config FILE      read the configuration from FILE (INI)\n"
            "  -t, --test             check the configuration and exit\n"
            "      --listen ADDR:PORT listen address, repeatable (127.0.0.1:8080, [::1]:8080)\n"
            "      --root DIR         document root\n"
            "      --workers N|auto   worker threads (auto: one per CPU)\n"
            "      --access-log PATH|off\n"
            "      --error-log PATH|stderr\n"
            "  -h, --help             show this help\n"
            "  -v, --version          show the version\n"
            "\n"
            "Command-line options override the configuration file.\n"
            "Signals: TERM/INT stop gracefully, HUP reloads, USR1 reopens log files.\n");
}

int main(int argc, char **argv)
{
    enum { OPT_LISTEN = 256, OPT_ROOT, OPT_WORKERS, OPT_ACCESS_LOG, OPT_ERROR_LOG };
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "root", required_argument, NULL, OPT_ROOT },
        { "workers", required_argument, NULL, OPT_WORKERS },
        { "access-log", required_argument, NULL, OPT_ACCESS_LOG },
        { "error-log", required_argument, NULL, OPT_ERROR_LOG },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { NULL, 0, NULL, 0 },
    };
    http_cli cli = { 0 };
    int test_only = 0, ch;
    while ((ch = getopt_long(argc, argv, "c:thv", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': cli.conf_path = optarg; break;
        case 't': test_only = 1; break;
        case OPT_LISTEN:
            if (cli.nlisten == HTTP_MAX_LISTEN) {
                fprintf(stderr, "brisk: too many --listen (max %d)\n", HTTP_MAX_LISTEN);
                return 2;
            }
            cli.listen[cli.nlisten++] = optarg;
            break;
        case OPT_ROOT: cli.root = optarg; break;
        case OPT_WORKERS: cli.workers = optarg; break;
        case OPT_ACCESS_LOG: cli.access_log = optarg; break;
        case OPT_ERROR_LOG: cli.error_log = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'v': printf("brisk %s\n", BRISK_VERSION); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "brisk: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (test_only) {
        char err[CONF_ERR_MAX];
        http_conf *conf = http_conf_load(&cli, err);
        if (!conf) {
            fprintf(stderr, "brisk: %s\n", err);
            fprintf(stderr, "brisk: configuration test failed\n");
            return 1;
        }
        fprintf(stderr, "brisk: configuration %s%s%stest is successful\n",
                cli.conf_path ? "file " : "", cli.conf_path ? cli.conf_path : "",
                cli.conf_path ? " " : "");
        http_conf_release(conf);
        return 0;
    }
    return http_server_run(&cli, static_handle, NULL);
}
