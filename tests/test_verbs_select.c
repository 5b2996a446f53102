/*
 * Unit tests of verbs device, port and GID selection from fake device
 * descriptions: TNT_IB_HCA names, ports and exclusions, the first active
 * port, RoCE GID preference and TNT_IB_GID_INDEX, and clear refusals.
 */
#include <string.h>

#include "harness.h"
#include "transport/verbs/verbs_select.h"

/* GIDs of a typical RoCE port: link-local v1 and v2, then IPv4-mapped v1
 * and v2 (the order the kernel fills them in). */
static const vb_gid_desc_t roce_gids[] = {
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, VB_GID_ROCE_V1},
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, VB_GID_ROCE_V2},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, VB_GID_ROCE_V1},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, VB_GID_ROCE_V2},
    {{0}, VB_GID_ROCE_V2},
};
static const vb_gid_desc_t ib_gids[] = {
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9}, VB_GID_IB},
};

static const vb_port_desc_t mlx0_ports[] = {
    {1, 0, VB_LINK_IB, 1, ib_gids},
    {2, 1, VB_LINK_IB, 1, ib_gids},
};
static const vb_port_desc_t mlx1_ports[] = {
    {1, 1, VB_LINK_ETH, 5, roce_gids},
};
static const vb_port_desc_t down_ports[] = {
    {1, 0, VB_LINK_IB, 1, ib_gids},
};
static const vb_dev_desc_t devs[] = {
    {"mlx5_0", 2, mlx0_ports},
    {"mlx5_1", 1, mlx1_ports},
    {"mlx5_2", 1, down_ports},
};

static int sel(const char *hca, const char *gid, vb_choice_t *c, char *why)
{
    return tnt__vb_select(devs, 3, hca, gid, c, why, 256);
}

static void test_default_first_active(void)
{
    vb_choice_t c = {0};
    char why[256];
    TH_CHECK(sel(NULL, NULL, &c, why) == 0 && c.dev == 0 && c.port == 2 &&
             c.link == VB_LINK_IB && c.gid_index == 0,
             "default choice dev %d port %d", c.dev, c.port);
    TH_CHECK(sel("", "", &c, why) == 0 && c.dev == 0 && c.port == 2,
             "empty knobs are not the default");
}

static void test_hca_lists(void)
{
    vb_choice_t c = {0};
    char why[256];
    TH_CHECK(sel("mlx5_1", NULL, &c, why) == 0 && c.dev == 1 &&
             c.port == 1 && c.link == VB_LINK_ETH && c.gid_index == 3,
             "mlx5_1: dev %d port %d gid %d", c.dev, c.port, c.gid_index);
    TH_CHECK(sel("mlx5_2,mlx5_1", NULL, &c, why) == 0 && c.dev == 1,
             "a device with no active port was not skipped");
    TH_CHECK(sel("mlx5_0:1", NULL, &c, why) == -1 &&
             strstr(why, "mlx5_0:1"), "inactive named port chosen: %s", why);
    TH_CHECK(sel("mlx5_0:2", NULL, &c, why) == 0 && c.port == 2,
             "named port 2");
    TH_CHECK(sel("^mlx5_0", NULL, &c, why) == 0 && c.dev == 1,
             "exclusion ignored");
    TH_CHECK(sel("^mlx5_0:2", NULL, &c, why) == 0 && c.dev == 1,
             "port exclusion ignored");
    TH_CHECK(sel("^mlx5_0:1", NULL, &c, why) == 0 && c.dev == 0 &&
             c.port == 2, "excluding port 1 excluded port 2");
    TH_CHECK(sel("^mlx5_0,mlx5_1", NULL, &c, why) == -1 &&
             strstr(why, "no active port"), "all excluded: %s", why);
    TH_CHECK(sel("mlx5", NULL, &c, why) == -1 && strstr(why, "mlx5"),
             "a prefix matched a device name");
    TH_CHECK(sel("nosuch", NULL, &c, why) == -1, "unknown device chosen");
}

static void test_hca_malformed(void)
{
    static const char *const bad[] = {"^", "mlx5_0:", "mlx5_0:x",
                                      "mlx5_0:0", "mlx5_0:1x", ",mlx5_0",
                                      "mlx5_0,,mlx5_1", ":1",
                                      "mlx5_0:99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        vb_choice_t c = {0};
        char why[256] = "";
        TH_CHECK(sel(bad[i], NULL, &c, why) == -1 &&
                 strstr(why, "TNT_IB_HCA"),
                 "TNT_IB_HCA='%s' accepted (%s)", bad[i], why);
    }
}

static void test_gid(void)
{
    vb_choice_t c = {0};
    char why[256];
    TH_CHECK(sel("mlx5_1", "2", &c, why) == 0 && c.gid_index == 2,
             "TNT_IB_GID_INDEX ignored");
    TH_CHECK(sel("mlx5_1", "4", &c, why) == -1 &&
             strstr(why, "TNT_IB_GID_INDEX"), "empty GID accepted");
    TH_CHECK(sel("mlx5_1", "5", &c, why) == -1, "GID index out of range");
    TH_CHECK(sel("mlx5_1", "-1", &c, why) == -1 &&
             sel("mlx5_1", "1x", &c, why) == -1 &&
             sel("mlx5_1", " 2", &c, why) == -1 &&
             sel("mlx5_1", "+2", &c, why) == -1 &&
             sel("mlx5_1", "0x2", &c, why) == -1, "malformed GID index");
    /* Preference order without the IPv4-mapped v2 entry. */
    vb_port_desc_t p = {1, 1, VB_LINK_ETH, 3, roce_gids};
    TH_CHECK(tnt__vb_pick_gid(&p) == 1, "link-local v2 not preferred over "
             "v1: %d", tnt__vb_pick_gid(&p));
    vb_gid_desc_t g[3] = {roce_gids[0], roce_gids[2], roce_gids[1]};
    g[2].raw[0] = 0x20; /* a global IPv6 address, v2 */
    p.gids = g;
    TH_CHECK(tnt__vb_pick_gid(&p) == 2, "global v2 not preferred");
    vb_gid_desc_t empty[2] = {{{0}, VB_GID_ROCE_V2}, {{0}, VB_GID_ROCE_V1}};
    p.gids = empty;
    p.ngids = 2;
    TH_CHECK(tnt__vb_pick_gid(&p) == -1, "all-zero GID picked");
    vb_port_desc_t rp[] = {{1, 1, VB_LINK_ETH, 2, empty}};
    vb_dev_desc_t d[] = {{"rxe0", 1, rp}};
    TH_CHECK(tnt__vb_select(d, 1, NULL, NULL, &c, why, sizeof(why)) == -1 &&
             strstr(why, "no usable GID"), "RoCE without GIDs: %s", why);
    TH_CHECK(tnt__vb_select(d, 0, NULL, NULL, &c, why, sizeof(why)) == -1 &&
             strstr(why, "no RDMA device"), "no devices: %s", why);
}

/* TNT_IB_HCA_MAP=local_rank: local rank k takes the k-th usable port,
 * round robin, in TNT_IB_HCA's order when it lists devices. */
static void test_pick_round_robin(void)
{
    vb_choice_t c = {0};
    char why[256];
    static const int want_dev[] = {0, 1, 0, 1};
    for (int k = 0; k < 4; k++)
        TH_CHECK(tnt__vb_select_nth(devs, 3, NULL, NULL, k, &c, why,
                                    sizeof(why)) == 0 &&
                 c.dev == want_dev[k],
                 "pick %d: dev %d, want %d", k, c.dev, want_dev[k]);
    TH_CHECK(tnt__vb_select_nth(devs, 3, "mlx5_1,mlx5_0", NULL, 0, &c, why,
                                sizeof(why)) == 0 && c.dev == 1,
             "pick 0 of mlx5_1,mlx5_0: dev %d", c.dev);
    TH_CHECK(tnt__vb_select_nth(devs, 3, "mlx5_1,mlx5_0", NULL, 3, &c, why,
                                sizeof(why)) == 0 && c.dev == 0,
             "pick 3 of mlx5_1,mlx5_0: dev %d", c.dev);
    TH_CHECK(tnt__vb_select_nth(devs, 3, "mlx5_0:1,mlx5_2", NULL, 1, &c, why,
                                sizeof(why)) == -1,
             "inactive ports only: no pick");
    TH_CHECK(tnt__vb_select_nth(devs, 3, "^mlx5_0", NULL, 5, &c, why,
                                sizeof(why)) == 0 && c.dev == 1,
             "one usable port: every pick is it (dev %d)", c.dev);
}

static const th_test_def_t k_tests[] = {
    {"verbs_select", "pick_round_robin", test_pick_round_robin},
    {"verbs_select", "default_first_active", test_default_first_active},
    {"verbs_select", "hca_lists", test_hca_lists},
    {"verbs_select", "hca_malformed", test_hca_malformed},
    {"verbs_select", "gid", test_gid},
    {NULL, NULL, NULL}};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
