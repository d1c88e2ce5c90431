/* brisk-kv: a Redis-compatible key-value server (see src/kv/server.c). */
#include "kv/server.h"

int main(int argc, char **argv)
{
    return kv_server_main(argc, argv);
}
