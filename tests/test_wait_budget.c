/*
 * The spin of a blocking call (lib/core/wait_budget.c): the floor
 * (TNT_SPIN_US) where nothing is known, where ranks share CPUs or where
 * the host is busy, and 0 when spinning is off; otherwise 1.5x the
 * expected time, which follows a faster call at once and a slower one by
 * an eighth, capped at 10 ms; calls of another kind or size do not
 * count; bad times are ignored; the host's runnable count is readable.
 * The spin of any wait: halved by each spin that lost its CPU, in full
 * after one that kept it 40 us, halved or doubled by short spins that
 * ended without or with their data, none after TNT_SPIN_CUT_OFF
 * halvings, tried in full every 20 ms; while cut, no longer spin.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <string.h>

#include "core/wait_budget.h"
#include "harness.h"

#define KIND 1 /* any kind: the table does not look at what it means */
#define MIB ((size_t)1 << 20)
#define FLOOR 100e-6
#define NOW 1000.0

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 + 1e-9 * fabs(b);
}

/* cpus = 0: the host's load is unknown, which counts as not busy. */
static double budget(tnt_wait_history_t *h, int kind, size_t bytes)
{
    return tnt__wait_spin_budget(h, kind, bytes, FLOOR, 0, 0, NOW);
}

static void test_floor(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    double b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, FLOOR), "nothing known: %g s, expected the floor", b);
    tnt__wait_learn(&h, KIND, MIB, 10e-6);
    b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, FLOOR), "calls of 10 us: %g s, expected the floor", b);
    b = tnt__wait_spin_budget(&h, KIND, MIB, 0.0, 0, 0, NOW);
    TH_CHECK(b == 0.0, "TNT_SPIN_US=0: %g s, expected no spin", b);
    b = tnt__wait_spin_budget(&h, KIND, MIB, -1.0, 0, 0, NOW);
    TH_CHECK(b == 0.0, "negative floor: %g s, expected no spin", b);
}

static void test_expected(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    tnt__wait_learn(&h, KIND, MIB, 400e-6);
    double b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, 600e-6), "calls of 400 us: %g s, expected 600 us", b);
    tnt__wait_learn(&h, KIND, MIB, 200e-6); /* faster: followed at once */
    b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, 300e-6), "then 200 us: %g s, expected 300 us", b);
    tnt__wait_learn(&h, KIND, MIB, 1000e-6); /* slower: an eighth */
    b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, 1.5 * 300e-6), "then 1000 us: %g s, expected 450 us",
             b);
    tnt__wait_learn(&h, KIND, MIB, 1.0);
    for (int i = 0; i < 100; i++)
        tnt__wait_learn(&h, KIND, MIB, 1.0);
    b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, 0.010), "calls of 1 s: %g s, expected the 10 ms cap",
             b);
}

static void test_others_apart(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    tnt__wait_learn(&h, KIND, MIB, 400e-6);
    /* Another size or kind is not this one's, whether it shares the slot
     * or not. */
    double b = budget(&h, KIND, 2 * MIB);
    TH_CHECK(near(b, FLOOR), "2 MiB after 1 MiB calls: %g s, expected the "
             "floor", b);
    b = budget(&h, KIND + 1, MIB);
    TH_CHECK(near(b, FLOOR), "another kind: %g s, expected the floor", b);
    /* A call that takes the slot over replaces what was there. */
    for (size_t n = 1; n <= 4 * TNT_WAIT_HISTORY_SLOTS; n++)
        tnt__wait_learn(&h, KIND, n * 4096, 50e-3);
    for (size_t n = 1; n <= 4 * TNT_WAIT_HISTORY_SLOTS; n++) {
        b = budget(&h, KIND, n * 4096);
        TH_CHECK(near(b, FLOOR) || near(b, 0.010), "%zu bytes: %g s, "
                 "expected the floor (slot taken over) or the cap",
                 n * 4096, b);
    }
    b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, FLOOR) || near(b, 600e-6), "1 MiB after 128 other "
             "sizes: %g s", b);
}

static void test_bad_times(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    tnt__wait_learn(&h, KIND, MIB, 400e-6);
    tnt__wait_learn(&h, KIND, MIB, -1.0);
    tnt__wait_learn(&h, KIND, MIB, NAN);
    double b = budget(&h, KIND, MIB);
    TH_CHECK(near(b, 600e-6), "after negative and NaN times: %g s, "
             "expected 600 us", b);
}

static void test_shared_or_busy(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    tnt__wait_learn(&h, KIND, MIB, 400e-6);
    double b = tnt__wait_spin_budget(&h, KIND, MIB, FLOOR, 1, 0, NOW);
    TH_CHECK(near(b, FLOOR), "ranks share CPUs: %g s, expected the floor",
             b);
    /* The host was seen busy just now: not looked at again yet. */
    h.host_looked_at = NOW;
    h.host_busy = 1;
    b = tnt__wait_spin_budget(&h, KIND, MIB, FLOOR, 0, 1, NOW + 0.01);
    TH_CHECK(near(b, FLOOR), "busy host: %g s, expected the floor", b);
    /* A host with a million CPUs is never busy: looked at again after
     * a while, the spin comes back. */
    b = tnt__wait_spin_budget(&h, KIND, MIB, FLOOR, 0, 1 << 20, NOW + 1.0);
    TH_CHECK(near(b, 600e-6) && !h.host_busy, "host idle again: %g s, "
             "busy %d; expected 600 us", b, h.host_busy);
}

/* The spin of any wait, cut by what spins see where ranks have CPUs of
 * their own. */
static double floor_at(tnt_wait_history_t *h, double now)
{
    return tnt__wait_spin_floor(h, FLOOR, now);
}

static void test_cut_by_lost_cpu(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    double f = floor_at(&h, NOW);
    TH_CHECK(near(f, FLOOR), "nothing seen: %g s, expected TNT_SPIN_US", f);
    /* Each spin that lost its CPU for 500 us halves the next ones, down
     * to none. */
    double want = FLOOR;
    for (int i = 1; i <= TNT_SPIN_CUT_OFF + 2; i++) {
        tnt__wait_spin_outcome(&h, 600e-6, 1, 500e-6, 0, NOW);
        want = i >= TNT_SPIN_CUT_OFF ? 0.0 : want / 2.0;
        f = floor_at(&h, NOW + 0.001);
        TH_CHECK(near(f, want), "after %d lost spins: %g s, expected %g s",
                 i, f, want);
    }
    /* A while later one wait spins in full (a look whether the host is
     * quiet again), the next one not. */
    f = floor_at(&h, NOW + 1.0);
    TH_CHECK(near(f, FLOOR), "probe: %g s, expected TNT_SPIN_US", f);
    f = floor_at(&h, NOW + 1.0001);
    TH_CHECK(f == 0.0, "right after the probe: %g s, expected none", f);
    /* The probe lost its CPU too: still none. */
    tnt__wait_spin_outcome(&h, 40e-6, 1, 35e-6, 0, NOW + 1.0002);
    f = floor_at(&h, NOW + 1.0003);
    TH_CHECK(f == 0.0, "probe lost its CPU: %g s, expected none", f);
    /* A probe that kept its CPU for 60 us: spins in full again. */
    tnt__wait_spin_outcome(&h, 70e-6, 1, 10e-6, 0, NOW + 2.0);
    f = floor_at(&h, NOW + 2.0001);
    TH_CHECK(near(f, FLOOR), "after a quiet probe: %g s, expected "
             "TNT_SPIN_US", f);
    /* Lost for less than a time slice (a yield, a lock): not cut. */
    tnt__wait_spin_outcome(&h, 25e-6, 1, 20e-6, 1, NOW + 2.0002);
    f = floor_at(&h, NOW + 2.0003);
    TH_CHECK(near(f, FLOOR), "lost 20 us: %g s, expected TNT_SPIN_US", f);
}

static void test_cut_by_pay(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    /* A spin in full that ended with its data before its first yield:
     * nothing to change. */
    tnt__wait_spin_outcome(&h, 5e-6, 0, 0.0, 1, NOW);
    double f = floor_at(&h, NOW);
    TH_CHECK(near(f, FLOOR), "spin that paid: %g s, expected TNT_SPIN_US",
             f);
    tnt__wait_spin_outcome(&h, 100e-6, 1, 100e-6, 0, NOW);
    tnt__wait_spin_outcome(&h, 100e-6, 1, 100e-6, 0, NOW);
    f = floor_at(&h, NOW + 0.001);
    TH_CHECK(near(f, FLOOR / 4), "two lost spins: %g s, expected 1/4", f);
    /* Short spins (no yield, so nothing seen of the host): one that
     * ended without its data halves, one that ended with it doubles. */
    tnt__wait_spin_outcome(&h, 25e-6, 0, 0.0, 0, NOW + 0.002);
    f = floor_at(&h, NOW + 0.003);
    TH_CHECK(near(f, FLOOR / 8), "short spin without data: %g s, expected "
             "1/8", f);
    tnt__wait_spin_outcome(&h, 3e-6, 0, 0.0, 1, NOW + 0.004);
    tnt__wait_spin_outcome(&h, 3e-6, 0, 0.0, 1, NOW + 0.005);
    f = floor_at(&h, NOW + 0.006);
    TH_CHECK(near(f, FLOOR / 2), "two short spins with data: %g s, "
             "expected 1/2", f);
    tnt__wait_spin_outcome(&h, 3e-6, 0, 0.0, 1, NOW + 0.007);
    tnt__wait_spin_outcome(&h, 3e-6, 0, 0.0, 1, NOW + 0.008);
    f = floor_at(&h, NOW + 0.009);
    TH_CHECK(near(f, FLOOR), "and more: %g s, expected TNT_SPIN_US", f);
    /* Spinning off: nothing to cut. */
    f = tnt__wait_spin_floor(&h, 0.0, NOW);
    TH_CHECK(f == 0.0, "TNT_SPIN_US=0: %g s, expected none", f);
}

/* While the spin is cut, a blocking call spins no longer than it. */
static void test_cut_no_expected(void)
{
    tnt_wait_history_t h;
    memset(&h, 0, sizeof(h));
    tnt__wait_learn(&h, KIND, MIB, 400e-6);
    tnt__wait_spin_outcome(&h, 100e-6, 1, 100e-6, 0, NOW);
    double f = floor_at(&h, NOW + 0.001);
    double b = tnt__wait_spin_budget(&h, KIND, MIB, f, 0, 0, NOW + 0.001);
    TH_CHECK(near(b, FLOOR / 2), "cut spin, calls of 400 us: %g s, "
             "expected the cut floor", b);
    tnt__wait_spin_outcome(&h, 100e-6, 1, 0.0, 0, NOW + 0.002);
    f = floor_at(&h, NOW + 0.003);
    b = tnt__wait_spin_budget(&h, KIND, MIB, f, 0, 0, NOW + 0.003);
    TH_CHECK(near(b, 600e-6), "quiet again: %g s, expected 600 us", b);
}

static void test_host_runnable(void)
{
    int n = tnt__host_runnable();
    TH_CHECK(n >= 1, "runnable threads on this host: %d; expected >= 1 "
             "(the reader itself)", n);
}

static const th_test_def_t k_tests[] = {
    {"wait_budget", "floor", test_floor},
    {"wait_budget", "expected", test_expected},
    {"wait_budget", "others_apart", test_others_apart},
    {"wait_budget", "bad_times", test_bad_times},
    {"wait_budget", "shared_or_busy", test_shared_or_busy},
    {"wait_budget", "cut_by_lost_cpu", test_cut_by_lost_cpu},
    {"wait_budget", "cut_by_pay", test_cut_by_pay},
    {"wait_budget", "cut_no_expected", test_cut_no_expected},
    {"wait_budget", "host_runnable", test_host_runnable},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    return th_main(argc, argv, k_tests);
}
