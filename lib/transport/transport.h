/*
 * The built-in transports and the choice among them (TNT_TRANSPORT).
 */
#ifndef TNT_TRANSPORT_TRANSPORT_H
#define TNT_TRANSPORT_TRANSPORT_H

#include "tnt/transport.h"

extern const tnt_transport_v1_t tnt__tcp_transport;
extern const tnt_transport_v1_t tnt__shm_transport;
#ifdef TNT_HAVE_VERBS
extern const tnt_transport_v1_t tnt__verbs_transport;
/** 1 if the verbs transport has an active device to use (`why` names
 *  it), else 0 with the reason in `why` (verbs_dev.c). */
int tnt__verbs_probe(char *why, size_t why_len);
#endif

/** Shared memory, for a thread that polls instead of sleeping (the
 *  blocking calls' spin, core/progress.c): one look at every connected
 *  peer's ring, taking what arrived and sending what waits, with upcalls
 *  as from the event loop. arm=0: while it spins, peers are asked not to
 *  write the eventfd (no system call on either side); arm=1 (before the
 *  caller sleeps in epoll again, mandatory after arm=0 calls): ask for
 *  the eventfd again and take what came meanwhile. Returns 1 if a
 *  message arrived. Communicator lock and poller role held. */
int tnt__shm_poll(void *shm_ctx, int arm);
/** Shared memory: payloads of at least `bytes` go by the single-copy
 *  rendezvous (process_vm_readv by the receiver), smaller ones stream
 *  through the ring (two copies, by both sides at once). The sender
 *  decides, so ranks need not agree. */
void tnt__shm_set_cma_min(void *shm_ctx, size_t bytes);

/** TCP, for a thread that polls instead of sleeping: one look at every
 *  connected socket (send what waits, recv what arrived), with upcalls as
 *  from the event loop, instead of an epoll_wait before the recv. Returns
 *  the sockets looked at, or -1 without looking when there are more than
 *  a few (then one epoll_wait is cheaper). Communicator lock and poller
 *  role held. */
int tnt__tcp_poll(void *tcp_ctx);

/* Fixed indices of the built-in transports: the core keeps per-index
 * state, and the address blobs of the bootstrap list them in this order. */
enum { TNT_TP_TCP = 0, TNT_TP_SHM = 1, TNT_TP_VERBS = 2, TNT_TP_COUNT = 3 };

/** The built-in transport with index i (0 <= i < TNT_TP_COUNT); NULL
 *  for verbs when it is not built. */
const tnt_transport_v1_t *tnt__transport_get(int i);

/** Which transports TNT_TRANSPORT=`name` asks for, as a bit mask by
 *  index: "auto" or NULL: all (each peer gets the best one that reaches
 *  it; verbs only when an active RDMA port exists), "tcp", "shm" or
 *  "verbs": that one only. Unknown names are TNT_ERR_CONFIG
 *  with a message listing the known ones. */
tnt_result_t tnt__transport_mask(const char *name, unsigned *mask);

#endif /* TNT_TRANSPORT_TRANSPORT_H */
