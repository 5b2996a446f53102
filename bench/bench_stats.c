/*
 * tnt-bench --stats: the communicator's counters (tnt_comm_stats) after
 * the run, as "# stats" lines on rank 0, the way a user reads them: kinds
 * and algorithms that ran, each transport that runs, the time blocking
 * calls waited and the early-message high-water mark. Only rank 0's:
 * the other ranks' differ in their transports' counts alone.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"

void bench_print_stats(tnt_comm_t comm, int rank)
{
    static const char *const kinds[] = {"allreduce", "broadcast",
                                        "allgather", "reduce_scatter",
                                        "barrier", "reduce", "gather",
                                        "scatter"};
    tnt_stats_t s = TNT_STATS_INIT;
    tnt_result_t rc = tnt_comm_stats(comm, &s);
    if (rank != 0)
        return;
    if (rc != TNT_SUCCESS) {
        printf("# stats: %s\n", tnt_last_error());
        return;
    }
    printf("# stats (rank 0): kind calls bytes\n");
    for (int k = 0; k < (int)(sizeof kinds / sizeof kinds[0]); k++)
        if (s.kind[k].calls)
            printf("# stats kind %s %" PRIu64 " %" PRIu64 "\n", kinds[k],
                   s.kind[k].calls, s.kind[k].bytes);
    if (s.alltoall.calls)
        printf("# stats kind alltoall %" PRIu64 " %" PRIu64 "\n",
               s.alltoall.calls, s.alltoall.bytes);
    for (int a = 0; a < TNT_STATS_ALGOS; a++)
        if (s.algo[a].calls && tnt_stats_algo_name(a))
            printf("# stats algo %s %" PRIu64 " %" PRIu64 "\n",
                   tnt_stats_algo_name(a), s.algo[a].calls, s.algo[a].bytes);
    for (int i = 0; i < TNT_STATS_TRANSPORTS; i++) {
        const tnt_stats_transport_t *t = &s.transport[i];
        if (!(t->flags & TNT_STATS_TP_RUNNING))
            continue;
        printf("# stats transport %s peers %u sent %" PRIu64 " msgs %"
               PRIu64 " B recv %" PRIu64 " msgs %" PRIu64 " B", t->name,
               t->peers, t->msgs_sent, t->bytes_sent, t->msgs_recv,
               t->bytes_recv);
        if (t->flags & TNT_STATS_TP_REPORTS)
            printf(" reconnects %" PRIu64 " strangers refused %" PRIu64
                   " evicted %" PRIu64 "\n", t->reconnects,
                   t->strangers_refused, t->strangers_evicted);
        else
            printf(" (reports no counters of its own)\n");
    }
    printf("# stats wait %.6f s, early-message high-water mark %" PRIu64
           " B\n", (double)s.wait_ns * 1e-9, s.unexpected_hwm);
    fflush(stdout);
}
