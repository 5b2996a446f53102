/*
 * The verbs transport's view of the machine's RDMA devices: describe
 * every device and port (state, link layer, GID table) in the pure form
 * verbs_select.c decides on, open the chosen one, and the quiet probe
 * behind TNT_TRANSPORT=auto and the conformance test's skip.
 *
 * fork(): ibv_fork_init() is called once, before the first other verbs
 * call, so that registered pages are not shared copy-on-write with a
 * child (on kernels >= 5.13 rdma-core reports it as unneeded). A child
 * must still not use the parent's communicator; see docs/verbs.md.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/param_table.h"
#include "transport/verbs/verbs_dev.h"
#include "transport/verbs/verbs_select.h"

#define VB_GIDS_MAX 64

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_rc;

static void do_fork_init(void)
{
    fork_rc = ibv_fork_init();
}

int tnt__vb_fork_init(void)
{
    pthread_once(&fork_once, do_fork_init);
    return fork_rc;
}

typedef struct vb_scan {
    struct ibv_device **list;
    int n;
    vb_dev_desc_t *devs;
    vb_port_desc_t *ports;
    vb_gid_desc_t *gids;
} vb_scan_t;

static void scan_free(vb_scan_t *s)
{
    if (s->list)
        ibv_free_device_list(s->list);
    free(s->devs);
    free(s->ports);
    free(s->gids);
    memset(s, 0, sizeof(*s));
}

static int gid_type(int t)
{
    if (t == IBV_GID_TYPE_ROCE_V2)
        return VB_GID_ROCE_V2;
    if (t == IBV_GID_TYPE_ROCE_V1)
        return VB_GID_ROCE_V1;
    return VB_GID_IB;
}

/* Describe one opened device into s (ports and GIDs appended). */
static void describe(struct ibv_context *ib, vb_scan_t *s, int d,
                     int *nports, int *ngids)
{
    struct ibv_device_attr da;
    vb_dev_desc_t *dev = &s->devs[d];
    dev->ports = &s->ports[*nports];
    dev->nports = 0;
    if (ibv_query_device(ib, &da) != 0)
        return;
    for (int p = 1; p <= da.phys_port_cnt && *nports < VB_PORTS_MAX; p++) {
        struct ibv_port_attr pa;
        if (ibv_query_port(ib, (uint8_t)p, &pa) != 0)
            continue;
        vb_port_desc_t *pd = &s->ports[(*nports)++];
        vb_gid_desc_t *g = &s->gids[*ngids];
        pd->num = p;
        pd->active = pa.state == IBV_PORT_ACTIVE;
        pd->link = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? VB_LINK_ETH
                                                             : VB_LINK_IB;
        pd->gids = g;
        pd->ngids = 0;
        int len = pa.gid_tbl_len < VB_GIDS_MAX ? pa.gid_tbl_len
                                               : VB_GIDS_MAX;
        for (int i = 0; i < len && *ngids < VB_PORTS_MAX * VB_GIDS_MAX;
             i++) {
            struct ibv_gid_entry e;
            memset(&g[i], 0, sizeof(g[i]));
            if (ibv_query_gid_ex(ib, (uint32_t)p, (uint32_t)i, &e, 0) == 0) {
                memcpy(g[i].raw, e.gid.raw, 16);
                g[i].type = gid_type((int)e.gid_type);
            }
            pd->ngids++;
            (*ngids)++;
        }
        dev->nports++;
    }
}

static int scan(vb_scan_t *s, char *why, size_t why_len)
{
    memset(s, 0, sizeof(*s));
    tnt__vb_fork_init();
    s->list = ibv_get_device_list(&s->n);
    if (!s->list || s->n <= 0) {
        snprintf(why, why_len, "no RDMA device found (%s)",
                 s->list ? "the device list is empty"
                         : "no RDMA support in the kernel");
        scan_free(s);
        return -1;
    }
    s->devs = calloc((size_t)s->n, sizeof(*s->devs));
    s->ports = calloc(VB_PORTS_MAX, sizeof(*s->ports));
    s->gids = calloc(VB_PORTS_MAX * VB_GIDS_MAX, sizeof(*s->gids));
    if (!s->devs || !s->ports || !s->gids) {
        snprintf(why, why_len, "out of memory");
        scan_free(s);
        return -1;
    }
    int nports = 0, ngids = 0;
    for (int d = 0; d < s->n; d++) {
        s->devs[d].name = ibv_get_device_name(s->list[d]);
        s->devs[d].ports = &s->ports[nports];
        struct ibv_context *ib = ibv_open_device(s->list[d]);
        if (!ib)
            continue;
        describe(ib, s, d, &nports, &ngids);
        ibv_close_device(ib);
    }
    return 0;
}

int tnt__verbs_probe(char *why, size_t why_len)
{
    vb_scan_t s;
    if (scan(&s, why, why_len) != 0)
        return 0;
    vb_choice_t c;
    int rc = tnt__vb_select(s.devs, s.n, tnt__env(TNT_VAR_IB_HCA),
                            tnt__env(TNT_VAR_IB_GID_INDEX), &c, why, why_len);
    if (rc == 0)
        snprintf(why, why_len, "%s port %d (%s, GID index %d)",
                 s.devs[c.dev].name, c.port,
                 c.link == VB_LINK_ETH ? "RoCE" : "InfiniBand", c.gid_index);
    scan_free(&s);
    return rc == 0;
}

tnt_result_t tnt__vb_open(vb_opened_t *o, int pick)
{
    char why[256];
    vb_scan_t s;
    memset(o, 0, sizeof(*o));
    if (scan(&s, why, sizeof(why)) != 0)
        return tnt__error(TNT_ERR_UNSUPPORTED, "TNT_TRANSPORT=verbs: %s; "
                          "use TNT_TRANSPORT=auto or tcp here", why);
    vb_choice_t c;
    if (tnt__vb_select_nth(s.devs, s.n, tnt__env(TNT_VAR_IB_HCA),
                           tnt__env(TNT_VAR_IB_GID_INDEX), pick, &c, why,
                           sizeof(why)) != 0) {
        scan_free(&s);
        return tnt__error(TNT_ERR_UNSUPPORTED, "TNT_TRANSPORT=verbs: %s; "
                          "use TNT_TRANSPORT=auto or tcp here", why);
    }
    snprintf(o->name, sizeof(o->name), "%s", s.devs[c.dev].name);
    o->ib = ibv_open_device(s.list[c.dev]);
    scan_free(&s);
    if (!o->ib)
        return tnt__error(TNT_ERR_SYSTEM, "verbs: cannot open %s: %s",
                          o->name, strerror(errno));
    o->port = c.port;
    o->gid_index = c.gid_index;
    o->link = c.link;
    if (ibv_query_port(o->ib, (uint8_t)c.port, &o->pa) != 0 ||
        ibv_query_gid(o->ib, (uint8_t)c.port, c.gid_index, &o->gid) != 0) {
        ibv_close_device(o->ib);
        o->ib = NULL;
        return tnt__error(TNT_ERR_SYSTEM, "verbs: cannot query %s port %d",
                          o->name, c.port);
    }
    return TNT_SUCCESS;
}

/* Link rate in Gb/s from the port's width and speed codes (0: unknown). */
double tnt__vb_port_gbps(const struct ibv_port_attr *pa)
{
    double lanes;
    switch (pa->active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
    }
    double per;
    switch (pa->active_speed) {
    case 1: per = 2.5; break;
    case 2: per = 5; break;
    case 4: case 8: per = 10; break;
    case 16: per = 14; break;
    case 32: per = 25; break;
    case 64: per = 50; break;
    case 128: per = 100; break;
    default: return 0;
    }
    return lanes * per;
}
