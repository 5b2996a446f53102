/*
 * A rank program for tests/test_tnt_run_elastic.sh: allreduces in a loop
 * (every element checked against the members' inputs), rank
 * ELASTIC_VICTIM killing itself with SIGKILL at iteration ELASTIC_AT;
 * the survivors, on TNT_ERR_PEER_LOST, shrink, agree on the iteration
 * to resume from (the earliest any of them failed in) and go on to the
 * end with fewer ranks. Prints what it did on stdout; exits 0 only if every
 * element of every allreduce it finished was right and it reached the
 * end.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tnt/tnt.h"

#define ITERS 200
#define COUNT 1000
#define MAXR 64

static int64_t in_v(int r, int it, int i)
{
    return (int64_t)r * 1000003 + (int64_t)it * 101 + i;
}

int main(void)
{
    const char *v = getenv("ELASTIC_VICTIM"), *a = getenv("ELASTIC_AT");
    int victim = v ? atoi(v) : -1, at = a ? atoi(a) : 50;
    tnt_comm_t comm;
    if (tnt_comm_init_from_env(&comm) != TNT_SUCCESS) {
        fprintf(stderr, "init: %s\n", tnt_last_error());
        return 1;
    }
    int rank, size;
    tnt_comm_rank(comm, &rank);
    tnt_comm_size(comm, &size);
    if (size > MAXR)
        return 1;
    int world = rank, mem[MAXR], m = size;
    for (int i = 0; i < m; i++)
        mem[i] = i;
    static int64_t x[COUNT];
    for (int it = 0; it < ITERS; it++) {
        if (world == victim && it == at)
            kill(getpid(), SIGKILL);
        for (int i = 0; i < COUNT; i++)
            x[i] = in_v(world, it, i);
        tnt_result_t rc = tnt_allreduce(comm, TNT_IN_PLACE, x, COUNT,
                                        TNT_I64, TNT_SUM);
        if (rc == TNT_ERR_PEER_LOST) {
            tnt_comm_t nc;
            rc = tnt_comm_shrink(comm, &nc);
            if (rc != TNT_SUCCESS) {
                fprintf(stderr, "shrink: %s\n", tnt_last_error());
                return 1;
            }
            int f[MAXR], nf = 0, keep = 0;
            tnt_comm_failed_ranks(comm, f, MAXR, &nf);
            for (int i = 0; i < m; i++) {
                int dead = 0;
                for (int k = 0; k < nf; k++)
                    dead |= f[k] == i;
                if (!dead)
                    mem[keep++] = mem[i];
            }
            m = keep;
            tnt_comm_free(comm);
            comm = nc;
            /* The survivors may have failed in different iterations (a
             * rank still waiting for the last message of one when
             * others had finished it): they resume together from the
             * earliest, as a training loop resumes from a step all
             * agree on. */
            int64_t resume = it;
            rc = tnt_allreduce(comm, TNT_IN_PLACE, &resume, 1, TNT_I64,
                               TNT_MIN);
            if (rc != TNT_SUCCESS) {
                fprintf(stderr, "agreeing on the iteration: %s\n",
                        tnt_last_error());
                return 1;
            }
            printf("world rank %d: shrank to %d ranks at iteration %d, "
                   "resuming at %lld\n", world, m, it, (long long)resume);
            fflush(stdout);
            it = (int)resume - 1; /* the loop's it++ comes first */
            continue;
        }
        if (rc != TNT_SUCCESS) {
            fprintf(stderr, "allreduce: %s\n", tnt_last_error());
            return 1;
        }
        for (int i = 0; i < COUNT; i++) {
            int64_t want = 0;
            for (int k = 0; k < m; k++)
                want += in_v(mem[k], it, i);
            if (x[i] != want) {
                fprintf(stderr, "iteration %d element %d: %lld, expected "
                        "%lld\n", it, i, (long long)x[i], (long long)want);
                return 1;
            }
        }
    }
    printf("world rank %d: %d iterations checked, %d ranks at the end\n",
           world, ITERS, m);
    tnt_comm_free(comm);
    return 0;
}
