/*
 * The library's one clock (util/clock.h).
 */
#include "util/clock.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double tnt__now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

double tnt__now_coarse(void)
{
    return clock_s(CLOCK_MONOTONIC_COARSE);
}

double tnt__thread_cpu_now(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

struct timespec tnt__timespec_at(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    return ts;
}
