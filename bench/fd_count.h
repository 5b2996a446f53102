/*
 * How many descriptors this process holds open: what a communicator's
 * creation opened and its free closed (comm-derive, tests/test_split.c).
 * Shared by the benchmarks and the test suite, as datagen.c is.
 */
#ifndef TNT_BENCH_FD_COUNT_H
#define TNT_BENCH_FD_COUNT_H

/** Entries of /proc/self/fd (the directory's own descriptor included,
 *  the same in every count), or -1 when it cannot be read. */
int tnt_open_fds(void);

#endif
