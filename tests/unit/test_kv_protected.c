/* Unit tests for protected mode's decision (src/kv/server.c): which peer
 * addresses count as this host, and when a client is refused. */
#include "kv/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

static struct sockaddr_storage addr(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;
        a->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;
        a->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, &a->sin_addr), 1);
    }
    return ss;
}

static int local(const char *ip)
{
    struct sockaddr_storage ss = addr(ip);
    return kv_peer_is_local((struct sockaddr *)&ss);
}

static void test_loopback_addresses(void **state)
{
    assert_true(local("127.0.0.1"));
    assert_true(local("127.1.2.3"));
    assert_true(local("127.255.255.254"));
    assert_true(local("::1"));
    assert_true(local("::ffff:127.0.0.1"));
    assert_false(local("128.0.0.1"));
    assert_false(local("126.255.255.255"));
    assert_false(local("10.0.0.1"));
    assert_false(local("192.0.2.2"));
    assert_false(local("0.0.0.0"));
    assert_false(local("::"));
    assert_false(local("::2"));
    assert_false(local("fe80::1"));
    assert_false(local("::ffff:10.0.0.1"));
    assert_false(local("::127.0.0.1")); /* IPv4-compatible, not mapped */
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    assert_true(kv_peer_is_local((struct sockaddr *)&un));
}

static void test_refusal_needs_protected_mode_and_no_password(void **state)
{
    kv_config cfg;
    memset(&cfg, 0, sizeof cfg);
    struct sockaddr_storage far = addr("192.0.2.2"), near = addr("127.0.0.1");
    char empty[] = "", pw[] = "secret";
    cfg.protected_mode = 1;
    cfg.requirepass = NULL;
    assert_true(kv_protected_refuses(&cfg, (struct sockaddr *)&far));
    assert_false(kv_protected_refuses(&cfg, (struct sockaddr *)&near));
    cfg.requirepass = empty; /* CONFIG SET requirepass "" clears it */
    assert_true(kv_protected_refuses(&cfg, (struct sockaddr *)&far));
    cfg.requirepass = pw;
    assert_false(kv_protected_refuses(&cfg, (struct sockaddr *)&far));
    cfg.requirepass = empty;
    cfg.protected_mode = 0;
    assert_false(kv_protected_refuses(&cfg, (struct sockaddr *)&far));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback_addresses),
        cmocka_unit_test(test_refusal_needs_protected_mode_and_no_password),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
