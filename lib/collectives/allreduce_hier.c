/*
 * Hierarchical allreduce for jobs spread over several hosts with more
 * than one rank on some of them: (1) a ring reduce-scatter among the
 * ranks of each host (over shared memory), after which local rank c holds
 * its host's sum of its slices; (2) for every slice, an allreduce among
 * the owners of that slice on all hosts, one rank per host (over the
 * network; recursive doubling, Rabenseifner, the double binary tree or
 * ring by the slice's size, as the flat table would pick for that many
 * hosts: the tree for slices above 2 MiB across more than 16 hosts);
 * (3) a ring allgather
 * among the ranks of each host. Only 1/k of the data crosses the network
 * from each of a host's k ranks, instead of the whole buffer.
 *
 * Slices: the buffer is cut into as many slices as the most populated
 * host has ranks (L); on a host of k <= L ranks local rank c owns the
 * contiguous slices [c*L/k, (c+1)*L/k) (topo.h), so a host with fewer
 * ranks has some own several slices, and takes part in several of the
 * per-slice allreduces. The inter-host allreduce of slice j is built by
 * the flat builders for a group of nhosts ranks and spliced in, with its
 * tags offset by j*HIER_STEP_STRIDE: two slices' groups may share a pair
 * of ranks. Intra-host phases only use pairs on one host and inter-host
 * ones only pairs on different hosts, so their tags never meet.
 *
 * Determinism: each element is reduced over a host by one rank in ring
 * order, then over hosts by an algorithm whose ranks all compute the same
 * bits, then copied; AVG scales once, at the end of phase 2. Every rank
 * gets bitwise identical results, but summed in another order than the
 * flat algorithms, so floating-point results differ from theirs.
 */
#include <stdlib.h>

#include "collectives/algorithms.h"
#include "collectives/patterns.h"
#include "collectives/ring.h"
#include "util/error.h"

/* Tags per slice: above every flat builder's largest tag (recursive
 * doubling's 1000000, 2(p-1)*nseg < 2^19 for the ring, 2^17 for the
 * tree). */
#define HIER_STEP_STRIDE ((uint32_t)1 << 21)

/* Start of slice j in elements (j == nslices: the end). */
static size_t slice_off(size_t count, int nslices, int j)
{
    size_t off, len;
    if (j >= nslices)
        return count;
    tnt__chunk_range(count, nslices, j, &off, &len);
    return off;
}

/* Phase 2 for slice j: an allreduce among its owners, one per host. */
static tnt_result_t slice_allreduce(const tnt_coll_args_t *a, tnt_sched_t *s,
                                    int j, uint32_t entry, uint32_t *exit)
{
    const tnt_topo_t *t = a->topo;
    int L = t->max_local;
    size_t off = slice_off(a->count, L, j);
    size_t len = slice_off(a->count, L, j + 1) - off;
    tnt_bufref_t region = tnt__ref(TNT_BUF_RECV, off * a->esize);
    *exit = entry;
    if (len == 0)
        return TNT_SUCCESS;
    if (t->nhosts == 1) {
        if (a->op == TNT_AVG) {
            *exit = tnt__sched_scale(s, region, len * a->esize);
            tnt__sched_dep(s, entry, *exit);
        }
        return TNT_SUCCESS;
    }
    int *group = malloc((size_t)t->nhosts * sizeof(int));
    if (!group)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    for (int h = 0; h < t->nhosts; h++) {
        int k = tnt__topo_host_size(t, h);
        group[h] = t->members[t->host_start[h] +
                              tnt__topo_slice_owner(L, k, j)];
    }
    tnt_coll_args_t g = *a;
    g.count = len;
    g.rank = t->host_of[a->rank];
    g.nranks = t->nhosts;
    g.in_place = 1;
    g.topo = NULL;
    int algo;
    tnt_sched_t sub;
    tnt_result_t rc = tnt__algo_select(&g, TNT_ALGO_AUTO, &algo);
    if (rc == TNT_SUCCESS)
        rc = tnt__build_schedule(&g, algo, &sub);
    if (rc == TNT_SUCCESS) {
        tnt_splice_t m = {group, (uint32_t)j * HIER_STEP_STRIDE, region};
        *exit = tnt__sched_splice(s, &sub, &m, entry);
        tnt__sched_destroy(&sub);
    }
    free(group);
    return rc;
}

tnt_result_t tnt__allreduce_hier(const tnt_coll_args_t *a, tnt_sched_t *s)
{
    const tnt_topo_t *t = a->topo;
    if (!t || t->nranks != a->nranks)
        return tnt__error(TNT_ERR_INTERNAL, "hierarchical allreduce "
                          "without a host layout of %d ranks", a->nranks);
    if (a->count == 0)
        return TNT_SUCCESS;
    int h = t->host_of[a->rank], c = t->local_of[a->rank];
    int k = tnt__topo_host_size(t, h), L = t->max_local;
    size_t *off = malloc(((size_t)k + 1) * sizeof(size_t));
    if (!off)
        return tnt__error(TNT_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i <= k; i++)
        off[i] = slice_off(a->count, L, tnt__topo_slice_first(L, k, i));

    /* Phase 1: reduce-scatter among this host's ranks. */
    tnt_coll_args_t la = *a;
    la.rank = c;
    la.nranks = k;
    tnt_ring_t r;
    tnt_result_t rc = tnt__ring_init_mapped(&r, &la, off,
                                            t->members + t->host_start[h]);
    if (rc != TNT_SUCCESS) {
        free(off);
        return rc;
    }
    r.src = tnt__ref(TNT_BUF_SEND, 0);
    r.acc = tnt__ref(TNT_BUF_RECV, 0);
    r.owned = c;
    uint32_t entry = TNT_SOP_NONE;
    size_t mine = (size_t)c * r.nseg;
    if (k > 1) {
        tnt__ring_rs_phase(s, &r, a->op);
        /* One join for the owned chunk's last writes and reads. */
        entry = tnt__sched_copy(s, r.acc, r.acc, 0);
        for (size_t j = 0; j < r.nseg; j++) {
            tnt__sched_dep(s, r.last_write[mine + j], entry);
            tnt__sched_dep(s, r.last_read[mine + j], entry);
        }
    } else if (!a->in_place) {
        entry = tnt__sched_copy(s, tnt__ref(TNT_BUF_RECV, 0),
                                tnt__ref(TNT_BUF_SEND, 0),
                                a->count * a->esize);
    }

    /* Phase 2: the owned slices across hosts. */
    int first = tnt__topo_slice_first(L, k, c);
    int last = tnt__topo_slice_first(L, k, c + 1);
    uint32_t done = tnt__sched_copy(s, r.acc, r.acc, 0);
    tnt__sched_dep(s, entry, done);
    for (int j = first; rc == TNT_SUCCESS && j < last; j++) {
        uint32_t exit;
        rc = slice_allreduce(a, s, j, entry, &exit);
        tnt__sched_dep(s, exit, done);
    }

    /* Phase 3: allgather among this host's ranks. */
    if (rc == TNT_SUCCESS && k > 1) {
        for (size_t j = 0; j < r.nseg; j++)
            r.last_write[mine + j] = done;
        r.step_base = (uint32_t)((size_t)(k - 1) * r.nseg);
        tnt__ring_ag_phase(s, &r);
    }
    tnt__ring_fini(&r);
    free(off);
    return rc;
}
