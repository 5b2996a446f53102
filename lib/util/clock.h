/*
 * The library's one clock: CLOCK_MONOTONIC in seconds, for deadlines,
 * idle times and timestamps in every layer.
 */
#ifndef TNT_UTIL_CLOCK_H
#define TNT_UTIL_CLOCK_H

#include <time.h>

double tnt__now(void);
/** tnt__now() to the last clock tick (a few ms; the same clock): eight
 *  times cheaper (3 against 25 ns), for deadlines and idle times,
 *  which a small collective would otherwise read several times. */
double tnt__now_coarse(void);
/** CPU time this thread has run, seconds (CLOCK_THREAD_CPUTIME_ID: a
 *  system call, about a microsecond; 0 where it cannot be read). Beside
 *  tnt__now() it says how long the thread waited for a CPU. */
double tnt__thread_cpu_now(void);
/** A tnt__now() time as the absolute time the condition variables wait
 *  for (they run on CLOCK_MONOTONIC, like tnt__now). */
struct timespec tnt__timespec_at(double t);

#endif /* TNT_UTIL_CLOCK_H */
