/*
 * The host layout of a communicator, as the hierarchical allreduce sees
 * it: which host each rank is on and its index among that host's ranks.
 * Hosts are numbered in the order of their lowest rank and a host's ranks
 * in ascending rank order, so every rank derives the same layout from the
 * same table of host identities without another message. Pure functions,
 * no I/O: the schedule simulator builds layouts of its own.
 */
#ifndef TNT_COLLECTIVES_TOPO_H
#define TNT_COLLECTIVES_TOPO_H

#include <stddef.h>

#include "tnt/tnt.h"

typedef struct tnt_topo {
    int nranks;
    int nhosts;
    int max_local;    /* ranks on the most populated host */
    int *host_of;     /* rank -> host index */
    int *local_of;    /* rank -> index among its host's ranks */
    int *host_start;  /* host h's ranks are members[host_start[h] ..  */
    int *members;     /*   host_start[h+1]), ascending */
} tnt_topo_t;

/** Build the layout of n ranks; ranks with equal key[r] share a host.
 *  TNT_ERR_NO_MEMORY or success; free with tnt__topo_fini. */
tnt_result_t tnt__topo_init(tnt_topo_t *t, int n, const int *key);
void tnt__topo_fini(tnt_topo_t *t);

static inline int tnt__topo_host_size(const tnt_topo_t *t, int h)
{
    return t->host_start[h + 1] - t->host_start[h];
}

/** Hierarchical allreduce: the buffer is cut into `nslices` (the largest
 *  host's rank count) slices; on a host of k ranks, local rank c owns the
 *  contiguous slices [first(c), first(c + 1)), first(c) = c*nslices/k.
 *  These return first(c) and the owner of slice j. */
int tnt__topo_slice_first(int nslices, int k, int c);
int tnt__topo_slice_owner(int nslices, int k, int j);

#endif /* TNT_COLLECTIVES_TOPO_H */
