/* Rank placement for forked benchmark ranks (bench_cpu.h). */
#include <sched.h>

#include "bench_cpu.h"

int bench_cpu_for(int r, int n, int always)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int m = CPU_COUNT(&set);
    if (m < 1 || (!always && (n < 2 || n > m)))
        return -1;
    int want = n <= m ? (int)((long)r * m / n) : r % m;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && want-- == 0)
            return c;
    return -1;
}

int bench_pin_cpu(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one);
}
