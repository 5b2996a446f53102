/*
 * Unit tests of the TNT_SOCKET_IFNAME matcher (lib/util/ifname.c): names
 * and prefixes, exact names, "^" exclusions, IPv4 and IPv6 CIDR blocks,
 * malformed patterns, and the choice among the host's real interfaces
 * (loopback always exists, so "lo" and 127.0.0.0/8 can be asked for and a
 * name that no interface has must fail with the list of those that do).
 * A test also checks that a communicator refuses to start with a pattern
 * that matches nothing.
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "util/ifname.h"
#include "harness.h"

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static struct sockaddr_in6 v6(const char *ip)
{
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof(a));
    a.sin6_family = AF_INET6;
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    return a;
}

static int m4(const char *spec, const char *name, const char *ip)
{
    struct sockaddr_in a = v4(ip);
    return tnt__ifname_match(spec, name, (struct sockaddr *)&a);
}

static void test_names_and_prefixes(void)
{
    TH_CHECK(m4("eth", "eth0", "10.0.0.1"), "prefix eth matches eth0");
    TH_CHECK(m4("eth0", "eth0", "10.0.0.1"), "eth0 matches eth0");
    TH_CHECK(!m4("eth0", "eth1", "10.0.0.1"), "eth0 must not match eth1");
    TH_CHECK(!m4("eth", "veth0", "10.0.0.1"), "a prefix is not a substring");
    TH_CHECK(m4("ib,eth", "eth2", "10.0.0.1"), "second item of a list");
    TH_CHECK(m4(" ib , eth ", "eth2", "10.0.0.1"), "blanks around items");
    TH_CHECK(m4("=eth1", "eth1", "10.0.0.1"), "exact name");
    TH_CHECK(!m4("=eth1", "eth10", "10.0.0.1"), "exact is not a prefix");
}

static void test_exclusions(void)
{
    TH_CHECK(!m4("^lo", "lo", "127.0.0.1"), "^lo excludes lo");
    TH_CHECK(m4("^lo", "eth0", "10.0.0.1"), "^lo alone admits the rest");
    TH_CHECK(!m4("^lo,^docker", "docker0", "172.17.0.1"), "two exclusions");
    TH_CHECK(m4("^lo,^docker", "veth0", "10.0.0.1"), "two exclusions, rest");
    TH_CHECK(!m4("eth,^eth1", "eth1", "10.0.0.1"),
             "an exclusion wins over an inclusion");
    TH_CHECK(m4("eth,^eth1", "eth0", "10.0.0.1"), "inclusion minus one");
    TH_CHECK(!m4("^10.0.0.0/8", "eth0", "10.1.2.3"), "excluded block");
}

static void test_cidr(void)
{
    TH_CHECK(m4("10.77.0.0/24", "x", "10.77.0.9"), "inside the /24");
    TH_CHECK(!m4("10.77.0.0/24", "x", "10.77.1.9"), "outside the /24");
    TH_CHECK(m4("10.77.0.0/23", "x", "10.77.1.9"), "inside the /23");
    TH_CHECK(m4("10.77.0.128/25", "x", "10.77.0.200"), "inside the /25");
    TH_CHECK(!m4("10.77.0.128/25", "x", "10.77.0.100"), "outside the /25");
    TH_CHECK(m4("0.0.0.0/0", "x", "192.168.1.1"), "/0 matches all v4");
    TH_CHECK(m4("10.0.0.1/32", "x", "10.0.0.1"), "/32 exact");
    TH_CHECK(!m4("10.0.0.1/32", "x", "10.0.0.2"), "/32 other");
    struct sockaddr_in6 a = v6("fd00:1::5");
    TH_CHECK(tnt__ifname_match("fd00::/8", "x", (struct sockaddr *)&a),
             "IPv6 block");
    TH_CHECK(!tnt__ifname_match("10.0.0.0/8", "x", (struct sockaddr *)&a),
             "an IPv4 block never matches an IPv6 address");
    TH_CHECK(!m4("fd00::/8", "x", "10.0.0.1"),
             "an IPv6 block never matches an IPv4 address");
}

static void test_bad_patterns(void)
{
    const char *bad[] = {"", ",", "eth,", "^", "10.0.0.0/33", "10.0.0.0/",
                         "10.0.0.0/x", "300.1.1.1/8", "fd00::/129",
                         "10.0.0.0/8junk"};
    char err[256];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        TH_CHECK(tnt__ifname_check(bad[i], err, sizeof(err)) != 0,
                 "pattern '%s' must be rejected", bad[i]);
        TH_CHECK(strstr(err, "TNT_SOCKET_IFNAME") != NULL,
                 "error for '%s' names the variable: %s", bad[i], err);
    }
    TH_CHECK(tnt__ifname_check("eth0,^lo,10.0.0.0/8,=ib0", err,
                               sizeof(err)) == 0, "a valid list: %s", err);
}

static void test_pick_real_interfaces(void)
{
    char ip[64], name[32], err[1024];
    TH_CHECK(tnt__ifname_pick("lo", ip, sizeof(ip), name, sizeof(name), err,
                              sizeof(err)) == 0, "lo: %s", err);
    TH_CHECK(strcmp(ip, "127.0.0.1") == 0 && strcmp(name, "lo") == 0,
             "lo gives 127.0.0.1, got %s on %s", ip, name);
    TH_CHECK(tnt__ifname_pick("127.0.0.0/8", ip, sizeof(ip), NULL, 0, err,
                              sizeof(err)) == 0 &&
             strcmp(ip, "127.0.0.1") == 0, "127.0.0.0/8 gives %s", ip);
    int rc = tnt__ifname_pick("nosuchif9", ip, sizeof(ip), NULL, 0, err,
                              sizeof(err));
    TH_CHECK(rc != 0, "a name no interface has must fail");
    TH_CHECK(strstr(err, "nosuchif9") && strstr(err, "lo 127.0.0.1"),
             "the error lists the interfaces that exist: %s", err);
    rc = tnt__ifname_pick("^lo,^127.0.0.0/8,lo", ip, sizeof(ip), NULL, 0,
                          err, sizeof(err));
    TH_CHECK(rc != 0, "everything excluded must fail");
}

static void test_comm_refuses_unknown_interface(void)
{
    setenv("TNT_SOCKET_IFNAME", "nosuchif9", 1);
    tnt_config_t cfg = TNT_CONFIG_INIT;
    cfg.rank = 0;
    cfg.nranks = 2;
    cfg.root_addr = "127.0.0.1:1";
    cfg.timeout_s = 5;
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init(&cfg, &comm);
    unsetenv("TNT_SOCKET_IFNAME");
    TH_CHECK(rc == TNT_ERR_CONFIG, "tnt_comm_init: %s", tnt_strerror(rc));
    TH_CHECK(strstr(tnt_last_error(), "nosuchif9") &&
             strstr(tnt_last_error(), "lo"),
             "message: %s", tnt_last_error());
    if (rc == TNT_SUCCESS)
        tnt_comm_free(comm);
}

static const th_test_def_t tests[] = {
    {"ifname", "names_and_prefixes", test_names_and_prefixes},
    {"ifname", "exclusions", test_exclusions},
    {"ifname", "cidr", test_cidr},
    {"ifname", "bad_patterns", test_bad_patterns},
    {"ifname", "pick_real_interfaces", test_pick_real_interfaces},
    {"ifname", "comm_refuses_unknown_interface",
     test_comm_refuses_unknown_interface},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, tests);
}
