/*
 * The spin of a wait (wait_budget.h).
 *
 * Every wait first spins TNT_SPIN_US: a peer that answers within
 * microseconds costs no sleep and wake-up on either side. But on a host
 * where other threads wait for a CPU, a spin takes theirs, perhaps that
 * of the peer rank that would send the data, and its yields put the
 * spinner behind them while its data arrives (a sleeper would be woken
 * at once): at load 20 on 2 CPUs Gloo, which sleeps at once, took
 * 1/2-1/11 of our time at p = 2 over TCP (docs/performance.md, "the
 * spin's empty reads"). So where every rank has a CPU of its own (else
 * the spin yields to the ranks it waits for at every round, as before)
 * the spin is cut by what the spins themselves see, as adaptive mutexes
 * do, with no host-wide setting:
 *  - a spin that lost its CPU to other threads for more than LOST_S
 *    (wall time against the thread's CPU time, from its first yield)
 *    halves the next spins: another thread wanted this CPU;
 *  - a spin that kept its CPU for QUIET_S or more spins in full again:
 *    nothing else wanted the CPU, spinning costs nobody;
 *  - a shorter spin (it ended before its first yield, so it saw nothing
 *    of the host) halves the next ones if it ended without its data and
 *    doubles them if its wait was done: spin where spinning pays;
 *  - after TNT_SPIN_CUT_OFF halvings a wait sleeps at once, as Gloo's
 *    do; every PROBE_S one wait spins in full to see whether the host
 *    has become quiet again (at most a yield's worth of a CPU: the probe
 *    ends at the first yield that ran another thread).
 *
 * A blocking call that sleeps in epoll pays a wake-up through the kernel
 * each time its sockets run dry in the middle of the call, several per
 * step of a ring over TCP; spinning for the whole call avoids them: on a
 * quiet host a 1 MiB allreduce over loopback TCP at p = 2 took 0.7x the
 * time (issue 40). But a spinning thread takes a CPU: where other
 * threads wait to run (other ranks of this host, other work), the spin
 * is their lost time, and with a loaded host it made the same calls
 * 1.4-1.7x slower (docs/performance.md, "How a blocking call waits").
 * So a call spins for its expected time only where every rank of the
 * communicator has a CPU of its own, its spins are not cut and the host
 * has no more runnable threads than CPUs (looked up at most every
 * HOST_LOOK_S); else it spins as any wait does (above).
 *
 * The expected time: what calls of the same kind and size took on this
 * communicator from the start of their wait, following a faster call at
 * once and a slower one by an eighth of the difference (one call that
 * waited for a late peer, or lost its CPU for a while, must not make the
 * next ones spin long), times EXPECT_FACTOR (the spread between calls),
 * at most SPIN_CAP_S.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "core/wait_budget.h"

#define EXPECT_FACTOR 1.5
/* No spin longer than this: past it the wake-ups a sleep costs (a few
 * per step, microseconds each) are a small share of the call, and a spin
 * that long is a CPU taken from whatever else starts on the host. */
#define SPIN_CAP_S 0.010
/* How often a communicator looks at the host's runnable threads (a read
 * of /proc/loadavg: microseconds). */
#define HOST_LOOK_S 0.1
/* A spin that was off its CPU longer than this lost it to another
 * thread: a yield with nothing else to run, a lock handed over, take
 * microseconds; a time slice of another thread, hundreds. */
#define LOST_S 30e-6
/* A spin that kept its CPU this long (past its first yield) found the
 * host quiet: several yields, each of which would have run a waiting
 * thread. */
#define QUIET_S 40e-6
/* How often a cut spin is tried in full: each try costs at most the
 * time to its first yield (10 µs) and that yield's slice where the host
 * is still busy. */
#define PROBE_S 0.02

static uint64_t key_of(int kind, size_t bytes)
{
    /* kind < 256 (TNT_COLL_*); the key is never 0 for a real call. */
    return ((uint64_t)bytes << 8 | (uint64_t)(kind & 0xff)) + 1;
}

static unsigned slot_of(uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing */
    return (unsigned)(h >> 32) % TNT_WAIT_HISTORY_SLOTS;
}

int tnt__host_runnable(void)
{
    /* "0.50 0.40 0.30 3/185 12345": the 4th field's numerator. */
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    double a1, a5, a15;
    int running, total;
    if (sscanf(buf, "%lf %lf %lf %d/%d", &a1, &a5, &a15, &running,
               &total) != 5 || running < 0)
        return -1;
    return running;
}

/* More threads ready to run on this host than CPUs (the reader counts
 * itself): a spin would take one's time. Unknown counts as not busy. */
static int host_busy(tnt_wait_history_t *h, int cpus, double now)
{
    if (now - h->host_looked_at >= HOST_LOOK_S || now < h->host_looked_at) {
        int running = tnt__host_runnable();
        h->host_busy = cpus > 0 && running > cpus;
        h->host_looked_at = now;
    }
    return h->host_busy;
}

double tnt__wait_spin_floor(tnt_wait_history_t *h, double full_s,
                            double now)
{
    if (h->cut <= 0 || full_s <= 0.0)
        return full_s;
    if (now >= h->probe_at || now < h->probe_at - PROBE_S) {
        h->probe_at = now + PROBE_S;
        return full_s;
    }
    if (h->cut >= TNT_SPIN_CUT_OFF)
        return 0.0;
    return full_s / (double)(1 << h->cut);
}

void tnt__wait_spin_outcome(tnt_wait_history_t *h, double spun_s,
                            int measured, double lost_s, int done,
                            double now)
{
    int longer;
    if (measured && lost_s > LOST_S)
        longer = 0;
    else if (measured && spun_s - lost_s >= QUIET_S) {
        h->cut = 0;
        return;
    } else
        longer = done;
    if (longer && h->cut > 0) {
        h->cut--;
    } else if (!longer && h->cut < TNT_SPIN_CUT_OFF) {
        if (h->cut == 0) /* the first try in full a while from now */
            h->probe_at = now + PROBE_S;
        h->cut++;
    }
}

double tnt__wait_spin_budget(tnt_wait_history_t *h, int kind, size_t bytes,
                             double floor_s, int shared, int cpus,
                             double now)
{
    if (floor_s <= 0.0)
        return 0.0;
    uint64_t key = key_of(kind, bytes);
    unsigned i = slot_of(key);
    if (shared || h->cut > 0 || h->slot[i].key != key ||
        host_busy(h, cpus, now))
        return floor_s;
    double s = h->slot[i].seconds * EXPECT_FACTOR;
    if (s > SPIN_CAP_S)
        s = SPIN_CAP_S;
    return s > floor_s ? s : floor_s;
}

void tnt__wait_learn(tnt_wait_history_t *h, int kind, size_t bytes,
                     double seconds)
{
    if (!(seconds >= 0.0))
        return;
    uint64_t key = key_of(kind, bytes);
    unsigned i = slot_of(key);
    if (h->slot[i].key != key || seconds < h->slot[i].seconds) {
        h->slot[i].key = key;
        h->slot[i].seconds = seconds;
        return;
    }
    h->slot[i].seconds += (seconds - h->slot[i].seconds) / 8.0;
}
