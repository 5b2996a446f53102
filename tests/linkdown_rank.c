/*
 * One rank of test_linkdown.sh: joins the job described by the launcher
 * environment (TNT_RANK, TNT_SIZE, TNT_ROOT_ADDR, TNT_JOB_KEY), runs
 * checked allreduces back to back until one fails or `give_up_s` seconds
 * have passed, and prints one line the script parses:
 *
 *   RESULT rank=R rc=RC t=T n=N wrong=W msg=TEXT
 *
 * where T is CLOCK_MONOTONIC seconds when the failing call returned (the
 * clock is shared by all network namespaces, so the script can compare it
 * with the moment it took the link down). After `ready_after`
 * allreduces it creates the file `ready_path` so that the script knows
 * the job is running. `linkdown_rank now` prints the monotonic clock.
 *
 * Usage: linkdown_rank now | linkdown_rank READY_PATH GIVE_UP_S
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "datagen.h"
#include "tnt/tnt.h"

enum { COUNT = 64 * 1024, READY_AFTER = 20 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "now") == 0) {
        printf("%.6f\n", now_s());
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s now | %s READY_PATH GIVE_UP_S\n",
                argv[0], argv[0]);
        return 2;
    }
    const char *ready_path = argv[1];
    double give_up = atof(argv[2]);
    tnt_comm_t comm = NULL;
    tnt_result_t rc = tnt_comm_init_from_env(&comm);
    if (rc != TNT_SUCCESS) {
        printf("RESULT rank=-1 rc=%d t=%.6f n=0 wrong=0 msg=init: %s\n", rc,
               now_s(), tnt_last_error());
        return 1;
    }
    int rank = -1, size = 0;
    tnt_comm_rank(comm, &rank);
    tnt_comm_size(comm, &size);
    float *send = malloc(COUNT * sizeof(float));
    float *recv = malloc(COUNT * sizeof(float));
    if (!send || !recv)
        return 1;
    double t0 = now_s();
    long n = 0, wrong = 0;
    for (;;) {
        uint64_t seed = 77 + (uint64_t)n;
        tnt_gen_fill(send, COUNT, TNT_F32, TNT_SUM, seed, rank);
        rc = tnt_allreduce(comm, send, recv, COUNT, TNT_F32, TNT_SUM);
        if (rc != TNT_SUCCESS)
            break;
        if (tnt_gen_check_allreduce(recv, 0, COUNT, TNT_F32, TNT_SUM, seed,
                                    size, NULL))
            wrong++;
        if (++n == READY_AFTER) {
            FILE *f = fopen(ready_path, "w");
            if (f)
                fclose(f);
        }
        if (now_s() - t0 > give_up)
            break;
    }
    double t_end = now_s();
    /* One line, flushed at once: the script may kill this process. */
    printf("RESULT rank=%d rc=%d t=%.6f n=%ld wrong=%ld msg=%s\n", rank, rc,
           t_end, n, wrong, rc != TNT_SUCCESS ? tnt_last_error() : "none");
    fflush(stdout);
    tnt_comm_free(comm);
    free(send);
    free(recv);
    return rc == TNT_SUCCESS ? 3 : 0;
}
