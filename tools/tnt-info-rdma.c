/*
 * tnt-info: RDMA devices and the state of their ports, through
 * libibverbs as the verbs transport sees them. No device is a normal
 * answer ("no RDMA device"), not an error; a build without libibverbs
 * says so.
 */
#include "tnt-info.h"

#ifdef TNT_HAVE_VERBS
#include <infiniband/verbs.h>

static void ports(info_out_t *o, struct ibv_context *ctx, int nports)
{
    info_arr(o, "ports");
    for (int p = 1; p <= nports; p++) {
        struct ibv_port_attr pa;
        if (ibv_query_port(ctx, (uint8_t)p, &pa) != 0)
            continue;
        info_row(o);
        info_int(o, "port", p);
        info_str(o, "state", ibv_port_state_str(pa.state));
        info_str(o, "link_layer", pa.link_layer == IBV_LINK_LAYER_ETHERNET
                                      ? "Ethernet (RoCE)"
                                      : "InfiniBand");
        info_int(o, "active_mtu", 128 << pa.active_mtu);
        info_int(o, "gid_table", pa.gid_tbl_len);
        info_close(o);
    }
    info_close(o);
}

void info_rdma(info_out_t *o)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    info_obj(o, "rdma");
    info_bool(o, "compiled_in", 1);
    info_int(o, "devices_found", list ? n : 0);
    if (!list || n == 0)
        info_str(o, "note", "no RDMA device");
    info_arr(o, "devices");
    for (int i = 0; list && i < n; i++) {
        info_obj(o, NULL);
        info_str(o, "name", ibv_get_device_name(list[i]));
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr da;
        if (!ctx || ibv_query_device(ctx, &da) != 0) {
            info_str(o, "error", "cannot open or query the device");
        } else {
            info_str(o, "firmware", da.fw_ver);
            ports(o, ctx, da.phys_port_cnt);
        }
        if (ctx)
            ibv_close_device(ctx);
        info_close(o);
    }
    info_close(o);
    info_close(o);
    if (list)
        ibv_free_device_list(list);
}
#else
void info_rdma(info_out_t *o)
{
    info_obj(o, "rdma");
    info_bool(o, "compiled_in", 0);
    info_int(o, "devices_found", 0);
    info_str(o, "note", "built without libibverbs: no verbs transport");
    info_close(o);
}
#endif
