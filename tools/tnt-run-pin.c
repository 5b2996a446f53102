/*
 * Pinning the ranks of one host: --pin-to-socket spreads them evenly over
 * the host's NUMA nodes (the sockets, on the usual machine; packages where
 * hwloc reports no NUMA node) and restricts each to the CPUs of its node;
 * --pin-memory-to-socket also binds its memory there (libnuma's
 * set_mempolicy, which survives execve); --bind-to core gives each rank one
 * core, spread the same way. The plan is made from hwloc's topology before
 * any fork; the child only makes two system calls before execve.
 */
#include "tnt-run.h"

#include <errno.h>
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <numaif.h>
#include <string.h>

/* The index of rank i of n among m slots, spread evenly. */
static int spread(int i, int n, int m)
{
    return n <= m ? (int)((long)i * m / n) : i % m;
}

int run_pin_plan(struct run_job *job, const struct run_spec *sp)
{
    if (!sp->pin_socket && !sp->pin_mem && !sp->bind_core)
        return 0;
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
        run_say(job, "cannot read the topology of this host with hwloc");
        return -1;
    }
    hwloc_obj_type_t dom_type = HWLOC_OBJ_NUMANODE;
    int ndom = hwloc_get_nbobjs_by_type(topo, dom_type);
    if (ndom < 1) {
        dom_type = HWLOC_OBJ_PACKAGE;
        ndom = hwloc_get_nbobjs_by_type(topo, dom_type);
    }
    int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (ndom < 1 || ncores < 1) {
        run_say(job, "hwloc reports no socket or core on this host");
        hwloc_topology_destroy(topo);
        return -1;
    }
    if (ndom == 1 && (sp->pin_socket || sp->pin_mem) && sp->info)
        run_say(job, "info: this host has one NUMA node; every rank is "
                "pinned to it, which changes nothing");
    if (sp->bind_core && sp->nlocal > ncores)
        run_say(job, "warning: %d ranks on %d cores; ranks share cores",
                sp->nlocal, ncores);
    for (int i = 0; i < sp->nlocal; i++) {
        struct run_rank *r = &job->ranks[i];
        hwloc_obj_t dom = hwloc_get_obj_by_type(
            topo, dom_type, (unsigned)spread(i, sp->nlocal, ndom));
        hwloc_obj_t obj = dom;
        if (sp->bind_core)
            obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE,
                                        (unsigned)spread(i, sp->nlocal,
                                                         ncores));
        if (sp->pin_socket || sp->bind_core) {
            CPU_ZERO(&r->cpus);
            hwloc_cpuset_to_glibc_sched_affinity(topo, obj->cpuset,
                                                 &r->cpus, sizeof r->cpus);
            r->cpu_valid = 1;
        }
        if (sp->pin_mem && dom_type == HWLOC_OBJ_NUMANODE)
            r->mem_node = (int)dom->os_index;
        if (sp->info)
            run_say(job, "info: rank %d: %s%d%s", sp->first + i,
                    sp->bind_core ? "core " : "NUMA node ",
                    (int)(sp->bind_core ? obj->logical_index
                                        : dom->os_index),
                    r->mem_node >= 0 ? ", memory bound there" : "");
    }
    hwloc_topology_destroy(topo);
    return 0;
}

int run_pin_apply(const struct run_rank *r)
{
    if (r->cpu_valid && sched_setaffinity(0, sizeof r->cpus, &r->cpus) != 0)
        return -1;
    if (r->mem_node >= 0) {
        unsigned long mask[16];
        memset(mask, 0, sizeof mask);
        if (r->mem_node >= (int)(8 * sizeof mask)) {
            errno = EINVAL;
            return -1;
        }
        mask[r->mem_node / (8 * (int)sizeof(long))] |=
            1ul << (r->mem_node % (8 * (int)sizeof(long)));
        if (set_mempolicy(MPOL_BIND, mask, 8 * sizeof mask) != 0)
            return -1;
    }
    return 0;
}
