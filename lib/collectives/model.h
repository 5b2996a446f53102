/*
 * A cost model computed from the schedules themselves: every rank's
 * schedule is built as the engine would run it, and its operations are
 * played out in simulated time under an alpha-beta-gamma model:
 *
 *   a message of n bytes from rank s to rank d starts when its send is
 *   ready and s's port is free, which it occupies for o (the per-message
 *   overhead, LogGP's o); its bytes then go out in n*beta, on the host's
 *   NIC (inter-host: all of a host's ranks share it, first come first
 *   served) or on s's port (intra-host), and arrive alpha after the last
 *   byte left; alpha, beta and o are the intra-host link's when s and d
 *   share a host, else the inter-host link's;
 *   a reduction of n bytes takes n*gamma, a copy or scale n*copy, on the
 *   rank's one compute resource (the engine reduces on one thread);
 *   an operation starts once its dependencies have completed (receives:
 *   and the message has arrived).
 *
 * The prediction is the time the last operation of any rank completes,
 * all ranks starting at 0. Not modelled: receive-side contention (incast),
 * per-message CPU overhead apart from alpha, flow control's RTS/CTS, the
 * network's topology beyond "same host or not". Ranks r*rph .. r*rph+rph-1
 * share a host (block layout).
 */
#ifndef TNT_COLLECTIVES_MODEL_H
#define TNT_COLLECTIVES_MODEL_H

#include <stddef.h>

#include "collectives/algorithms.h"

typedef struct tnt_model_link {
    double alpha; /* seconds per message */
    double beta;  /* seconds per byte */
    double o;     /* seconds the sender's port is busy per message */
} tnt_model_link_t;

typedef struct tnt_model_params {
    tnt_model_link_t intra, inter;
    double gamma; /* seconds per byte reduced */
    double copy;  /* seconds per byte copied or scaled */
    int all_ranks; /* 1: play every rank even where one host's ranks
                    * could stand for all (model.c; the tests compare) */
} tnt_model_params_t;

typedef struct tnt_model_result {
    double time;       /* predicted completion of the collective, s */
    size_t ops;        /* operations of all ranks played out */
    size_t messages;   /* of all ranks */
    int symmetric;     /* 1: one host's ranks stood for all (model.c) */
} tnt_model_result_t;

/** Predict collective `a` (rank ignored) run by `algo` on a->nranks
 *  ranks, rph per host. TNT_ERR_NO_MEMORY when the schedules of all
 *  ranks would exceed max_ops operations (or memory runs out). */
tnt_result_t tnt__model_run(const tnt_coll_args_t *a, int algo, int rph,
                            const tnt_model_params_t *m, size_t max_ops,
                            tnt_model_result_t *out);

#endif /* TNT_COLLECTIVES_MODEL_H */
