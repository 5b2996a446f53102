/*
 * PMIx as a launcher and as the rendezvous: the PMIx server that started
 * this process (srun --mpi=pmix, Open MPI's mpirun) gives rank, size and
 * local rank, and carries the bootstrap table through put/commit/fence/get
 * instead of a TCP connection to rank 0. Built only when libpmix is found
 * (TNT_HAVE_PMIX).
 */
#ifndef TNT_BOOT_BOOT_PMIX_H
#define TNT_BOOT_BOOT_PMIX_H

#include "boot/bootstrap.h"
#include "boot/launch_env.h"

#ifdef TNT_HAVE_PMIX
/** PMIx_Init and the job's shape into *l (rank, size, local rank and
 *  size, job key from the namespace). Paired with tnt__pmix_stop(). */
tnt_result_t tnt__pmix_start(tnt_launch_t *l);
void tnt__pmix_stop(void);

/** tnt__bootstrap()'s job through the PMIx server; a->root_addr is not
 *  used. Collective over every process of the PMIx namespace. */
tnt_result_t tnt__bootstrap_pmix(const tnt_boot_args_t *a,
                                 tnt_boot_entry_t *table);
#endif

#endif /* TNT_BOOT_BOOT_PMIX_H */
