/* The standard command-line flags (brisk_server_args) and the brisk
 * server's (brisk_server_args_config). */
#include "http/api.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f, const char *prog, int full)
{
    fprintf(f, "usage: %s [options]\n\n", prog);
    if (full)
        fprintf(f,
                "  -c, --config FILE      read the configuration from FILE (INI)\n"
                "  -t, --test             check the configuration and exit\n"
                "      --root DIR         document root\n"
                "      --cgi PREFIX=DIR   run CGI scripts of DIR under PREFIX (repeatable)\n"
                "      --access-log PATH|off\n"
                "      --error-log PATH|stderr\n");
    fprintf(f,
            "      --listen ADDR:PORT [ssl]\n"
            "                         listen address, repeatable (127.0.0.1:8080, [::1]:8080);\n"
            "                         ssl: HTTPS there, with --ssl-cert and --ssl-key\n"
            "      --ssl-cert FILE    TLS certificate chain (PEM)\n"
            "      --ssl-key FILE     TLS private key (PEM)\n"
            "      --workers N|auto   worker threads (auto: one per CPU)\n"
            "  -h, --help             show this help\n"
            "  -v, --version          show the version\n");
    if (full)
        fprintf(f, "\nCommand-line options override the configuration file.\n"
                   "Signals: TERM/INT stop gracefully, HUP reloads, USR1 reopens log files.\n");
}

static void parse_args(brisk_server *s, int argc, char **argv, int full)
{
    enum { OPT_LISTEN = 256, OPT_ROOT, OPT_WORKERS, OPT_ACCESS_LOG, OPT_ERROR_LOG, OPT_CGI,
           OPT_SSL_CERT, OPT_SSL_KEY };
    static const struct option all[] = {
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "workers", required_argument, NULL, OPT_WORKERS },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "root", required_argument, NULL, OPT_ROOT },
        { "access-log", required_argument, NULL, OPT_ACCESS_LOG },
        { "error-log", required_argument, NULL, OPT_ERROR_LOG },
        { "cgi", required_argument, NULL, OPT_CGI },
        { "ssl-cert", required_argument, NULL, OPT_SSL_CERT },
        { "ssl-key", required_argument, NULL, OPT_SSL_KEY },
        { NULL, 0, NULL, 0 },
    };
    static const struct option basic[] = {
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "workers", required_argument, NULL, OPT_WORKERS },
        { "ssl-cert", required_argument, NULL, OPT_SSL_CERT },
        { "ssl-key", required_argument, NULL, OPT_SSL_KEY },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { NULL, 0, NULL, 0 },
    };
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    http_cli *cli = &s->cli;
    cli->prog = prog; /* argv outlives the server */
    int test_only = 0, ch;
    while ((ch = getopt_long(argc, argv, full ? "c:thv" : "hv", full ? all : basic, NULL)) != -1) {
        switch (ch) {
        case 'c': cli->conf_path = optarg; break;
        case 't': test_only = 1; break;
        case OPT_LISTEN:
            if (cli->nlisten == HTTP_MAX_LISTEN) {
                fprintf(stderr, "%s: too many --listen (max %d)\n", prog, HTTP_MAX_LISTEN);
                exit(2);
            }
            /* "--listen ADDR ssl" (two words) as well as "--listen 'ADDR ssl'" */
            if (optind < argc && strcmp(argv[optind], "ssl") == 0) {
                cli->listen_tls[cli->nlisten] = 1;
                optind++;
            }
            cli->listen[cli->nlisten++] = optarg;
            break;
        case OPT_SSL_CERT: cli->ssl_cert = optarg; break;
        case OPT_SSL_KEY: cli->ssl_key = optarg; break;
        case OPT_ROOT: cli->root = optarg; break;
        case OPT_WORKERS: cli->workers = optarg; break;
        case OPT_ACCESS_LOG: cli->access_log = optarg; break;
        case OPT_ERROR_LOG: cli->error_log = optarg; break;
        case OPT_CGI:
            if (cli->ncgi == HTTP_MAX_CGI) {
                fprintf(stderr, "%s: too many --cgi (max %d)\n", prog, HTTP_MAX_CGI);
                exit(2);
            }
            cli->cgi[cli->ncgi++] = optarg;
            break;
        case 'h': usage(stdout, prog, full); exit(0);
        case 'v': printf("%s %s\n", prog, BRISK_VERSION); exit(0);
        default: usage(stderr, prog, full); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog, argv[optind]);
        usage(stderr, prog, full);
        exit(2);
    }
    if (test_only) {
        char err[CONF_ERR_MAX];
        http_conf *conf = http_conf_load(cli, err);
        if (!conf) {
            fprintf(stderr, "%s: %s\n%s: configuration test failed\n", prog, err, prog);
            exit(1);
        }
        fprintf(stderr, "%s: configuration %s%s%stest is successful\n", prog,
                cli->conf_path ? "file " : "", cli->conf_path ? cli->conf_path : "",
                cli->conf_path ? " " : "");
        http_conf_release(conf);
        exit(0);
    }
}

void brisk_server_args(brisk_server *s, int argc, char **argv)
{
    parse_args(s, argc, argv, 0);
}

void brisk_server_args_config(brisk_server *s, int argc, char **argv)
{
    s->cli.default_root = "www";
    parse_args(s, argc, argv, 1);
}
