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
/** A tnt__now() time as the absolute time the condition variables wait
 *  for (they run on CLOCK_MONOTONIC, like tnt__now). */
struct timespec tnt__timespec_at(double t);

#endif /* TNT_UTIL_CLOCK_H */
