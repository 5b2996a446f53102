/*
 * A rank of test_tnt_info.sh: runs one allreduce and one broadcast of
 * BYTES bytes of f32 in a real job (under tnt-run) and prints, on rank 0,
 * the algorithm each one ran ("allreduce rd"), read from the request as
 * test_hier.c reads it, for the test to compare with what
 * `tnt-info --algorithms -n P --size BYTES` says the library picks.
 * Usage: info_algo_probe BYTES [mapped]; "mapped" takes the buffer from
 * tnt_mem_alloc (as tnt-info --mapped assumes). Exit status 0 when both
 * collectives succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "collectives/algorithms.h"

/* Post, note the algorithm, wait. */
static int run(tnt_comm_t c, int bcast, float *x, size_t n, int *algo)
{
    tnt_request_t req = NULL;
    tnt_result_t rc = bcast ? tnt_ibroadcast(c, x, n, TNT_F32, 0, &req)
                            : tnt_iallreduce(c, x, x, n, TNT_F32, TNT_SUM,
                                             &req);
    if (rc != TNT_SUCCESS)
        return -1;
    *algo = req->algo;
    rc = tnt_wait(req);
    tnt_request_free(req);
    return rc == TNT_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv)
{
    int mapped = argc == 3 && strcmp(argv[2], "mapped") == 0;
    if (argc != 2 && !mapped)
        return 2;
    size_t n = strtoull(argv[1], NULL, 10) / sizeof(float);
    tnt_comm_t c;
    if (tnt_comm_init_from_env(&c) != TNT_SUCCESS) {
        fprintf(stderr, "probe: %s\n", tnt_last_error());
        return 1;
    }
    float *x = NULL;
    if (!mapped)
        x = calloc(n ? n : 1, sizeof(float));
    else if (tnt_mem_alloc(c, (n ? n : 1) * sizeof(float), (void **)&x) !=
             TNT_SUCCESS)
        x = NULL;
    int ar = -1, bc = -1, rank = -1;
    tnt_comm_rank(c, &rank);
    int bad = !x || run(c, 0, x, n, &ar) != 0 || run(c, 1, x, n, &bc) != 0;
    if (bad)
        fprintf(stderr, "probe: %s\n", tnt_last_error());
    else if (rank == 0)
        printf("allreduce %s\nbroadcast %s\n", tnt__algo_name(ar),
               tnt__algo_name(bc));
    if (mapped)
        tnt_mem_free(c, x);
    else
        free(x);
    tnt_comm_free(c);
    return bad;
}
