/*
 * Where the ranks a benchmark forks on this host run: one CPU each, spread
 * evenly over the CPUs the process may use, as mpirun binds its ranks.
 * Shared by tnt-bench -N (bench_launch.c) and tcp-rawring, so that both
 * place their ranks alike.
 */
#ifndef TNT_BENCH_CPU_H
#define TNT_BENCH_CPU_H

/** The CPU for rank r of n, or -1 for none. Without `always`, only when
 *  2 <= n <= the allowed CPUs (one rank: nothing to keep apart; more
 *  ranks than CPUs: pinning would stop the scheduler balancing them);
 *  with it, ranks share CPUs round-robin when there are more. Linux
 *  numbers the hardware threads of one core apart on the usual machine,
 *  so an even spread lands on distinct cores first. */
int bench_cpu_for(int r, int n, int always);

/** Pins the calling process (and the threads it starts later) to cpu.
 *  0, or -1 with errno. */
int bench_pin_cpu(int cpu);

#endif /* TNT_BENCH_CPU_H */
