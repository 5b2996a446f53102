/*
 * tnt-info: NUMA nodes and cores, as hwloc (which tnt-run pins with)
 * sees them.
 */
#include <hwloc.h>

#include "tnt-info.h"

void info_numa(info_out_t *o)
{
    hwloc_topology_t t;
    info_obj(o, "numa");
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0) {
        info_str(o, "error", "hwloc could not read the topology");
        info_close(o);
        return;
    }
    info_int(o, "packages", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
    info_int(o, "cores", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
    info_int(o, "pus", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
    int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    info_arr(o, "nodes");
    for (int i = 0; i < n; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
        char cpus[256];
        hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), node->cpuset);
        info_row(o);
        info_int(o, "os_index", node->os_index);
        info_int(o, "cores", hwloc_get_nbobjs_inside_cpuset_by_type(
                                 t, node->cpuset, HWLOC_OBJ_CORE));
        info_str(o, "cpus", cpus);
        info_int(o, "memory_bytes", (long long)node->attr->numanode.local_memory);
        info_close(o);
    }
    info_close(o);
    info_close(o);
    hwloc_topology_destroy(t);
}
