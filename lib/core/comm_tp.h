/*
 * The transports of one communicator and the choice of one per peer (see
 * comm_tp.c).
 */
#ifndef TNT_CORE_COMM_TP_H
#define TNT_CORE_COMM_TP_H

#include <stddef.h>

#include "core/engine.h"

/** Start the transports TNT_TRANSPORT asks for (progress already set
 *  up). fill_env(comm, i) fills transport i's environment before its
 *  init: the engine's upcalls (engine_wire.c), passed down by the
 *  communicator's creation so that this layer does not reach up. */
tnt_result_t tnt__comm_tp_init(struct tnt_comm *comm,
                               void (*fill_env)(struct tnt_comm *, int));
/** Listen on every transport; pack their addresses into one blob. */
tnt_result_t tnt__comm_tp_listen(struct tnt_comm *comm, void *blob,
                                 size_t *len);
/** Pick the transport of `peer` from its blob and host; fill p->addr. */
tnt_result_t tnt__comm_tp_assign(struct tnt_comm *comm, tnt_peer_t *p,
                                 const void *blob, size_t len);
/** Whether the bootstrap blob of a rank lists an address for transport
 *  `tpi` (the rank runs it). */
int tnt__comm_tp_runs(const void *blob, size_t len, int tpi);
/** The pair area `area` (TNT_TP_AREA_*) that this rank shares with
 *  peer q through q's transport: this rank's side and q's. Only for the
 *  on-host algorithms, which run only where every pair has one
 *  (comm->intra_host: every rank on this host runs the transport of the
 *  pair areas, comm->net.area_tpi). The set of areas is comm's own
 *  (comm->area_ctx). */
void tnt__comm_tp_pair_area(struct tnt_comm *comm, int q, int area,
                            void **mine, const void **theirs);
/** How many sets of pair areas (communicators sharing a pair) the
 *  transport of the pair areas offers: 0 with none, 1 for context 0
 *  alone (an interface older than 4). */
unsigned tnt__comm_tp_area_contexts(const struct tnt_comm *comm);
/** Zero this rank's side of comm's set of areas (comm->area_ctx) with
 *  every peer over the transport of the pair areas that is connected
 *  (a pair made later starts zeroed). Lock held. */
void tnt__comm_tp_pair_area_clear(struct tnt_comm *comm);
/** tnt_mem_alloc's memory of this rank, `len` bytes at ptr: every
 *  transport that serves a peer and has reg_mem registers it for its
 *  whole life (handles[i]; NULL where none, or where registering failed:
 *  that transport then registers per message, as for any memory).
 *  tnt__comm_tp_dereg_mem ends it, before the memory is unmapped. The
 *  caller holds comm->group->lock (the transports' contexts are the progress
 *  thread's otherwise). handles has TNT_TP_MAX entries. */
void tnt__comm_tp_reg_mem(struct tnt_comm *comm, void *ptr, size_t len,
                          void **handles);
void tnt__comm_tp_dereg_mem(struct tnt_comm *comm, void **handles);
/** Finalize every transport started. */
void tnt__comm_tp_finalize(struct tnt_comm *comm);
/** "transport tcp (6 peers) shm (1 peer)": what each peer got. */
void tnt__comm_tp_describe(const struct tnt_comm *comm, char *out,
                           size_t n);

/** Log at INFO which transport each peer uses and why, compactly by
 *  ranges of peers (comm_tp_log.c). Once, when the communicator is
 *  ready. */
void tnt__comm_tp_log_peers(const struct tnt_comm *comm);

#endif /* TNT_CORE_COMM_TP_H */
