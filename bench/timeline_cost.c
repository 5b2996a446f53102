/*
 * timeline-cost: nanoseconds per recorded timeline event, as a recording
 * site pays them (a clock read, the thread's lane, the copy into the ring
 * under its lock). A communicator of one rank with TNT_TIMELINE set to a
 * temporary prefix; batches of events below half the ring (so that the
 * progress thread never writes meanwhile), the ring written out between
 * batches, untimed. Prints the best and the median batch.
 * Usage: timeline-cost [BATCHES]   (docs/timeline.md, "Cost")
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/timeline.h"
#include "core/timeline_internal.h"
#include "util/clock.h"

#define BATCH 4096

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 50;
    if (batches < 1 || batches > 100000) {
        fprintf(stderr, "usage: timeline-cost [BATCHES (1..100000)]\n");
        return 2;
    }
    char prefix[] = "/tmp/timeline-cost.XXXXXX";
    int fd = mkstemp(prefix);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    setenv("TNT_TIMELINE", prefix, 1);
    unsetenv("TNT_RANK");
    unsetenv("TNT_SIZE");
    tnt_comm_t comm;
    if (tnt_comm_init_from_env(&comm) != TNT_SUCCESS || !comm->timeline) {
        fprintf(stderr, "timeline-cost: %s\n", tnt_last_error());
        return 1;
    }
    double *ns = malloc(sizeof(double) * (size_t)batches);
    for (int b = 0; b < batches && ns; b++) {
        double t0 = tnt__now();
        for (int i = 0; i < BATCH; i++) {
            tnt_tl_event_t ev = {.type = TNT_TL_READY, .t = {tnt__now()},
                                 .tensor = (uint32_t)i,
                                 .tid = tnt__tl_tid()};
            tnt__tl_record(comm->timeline, &ev);
        }
        ns[b] = (tnt__now() - t0) * 1e9 / BATCH;
        tnt__tl_flush(comm->timeline);
    }
    unsigned long long dropped = comm->timeline->dropped;
    tnt_comm_free(comm);
    char path[sizeof(prefix) + 16];
    snprintf(path, sizeof(path), "%s.0.json", prefix);
    unlink(path);
    unlink(prefix);
    if (!ns)
        return 1;
    qsort(ns, (size_t)batches, sizeof(double), cmp);
    printf("timeline-cost: %d batches of %d events: best %.1f ns/event, "
           "median %.1f ns/event, %llu dropped\n", batches, BATCH, ns[0],
           ns[batches / 2], dropped);
    free(ns);
    return dropped ? 1 : 0;
}
