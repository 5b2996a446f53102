"""Rank program of tests/test_python.sh (under tnt-run --elastic, 4
ranks): tntcomm.Comm. split by parity and dup, an allreduce on each
with every element against the members' inputs, a communicator freed
twice (TntError); then rank 2 kills itself, the survivors get a TntError
from the world's allreduce, shrink, agree that rank 2 failed, and
allreduce over the three of them; then tntcomm.shrink() makes the
survivors the world (get_size, allreduce, Comm.world(), an older Fusion
refused). Prints "N checks passed", exits 0, or
names the first failing check and exits 1.
"""
import os
import signal
import sys

import numpy as np

import tntcomm as tnt

checks = 0
world = tnt.Comm.world()
me, size = world.rank, world.size


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL: %s" % (me, what), file=sys.stderr)
        sys.exit(1)


def inputs(r):
    return np.arange(1009, dtype=np.int64) * 7 + r * 1000003


def check_allreduce(comm, members, what):
    got = comm.allreduce(inputs(me))
    want = sum(inputs(r) for r in members)
    check(np.array_equal(got, want), "%s: allreduce differs at %s"
          % (what, np.flatnonzero(got != want)[:5]))


half = world.split(me % 2, key=-me)
mates = sorted((r for r in range(size) if r % 2 == me % 2), reverse=True)
check(half.size == len(mates) and half.rank == mates.index(me),
      "split: rank %d of %d, expected %d of %d"
      % (half.rank, half.size, mates.index(me), len(mates)))
check_allreduce(half, mates, "split")
none = world.split(None if me == 0 else 5)
check((none is None) == (me == 0), "split with UNDEFINED on rank 0")
copy = world.dup()
check(copy.rank == me and copy.size == size, "dup: rank and size")
check_allreduce(copy, range(size), "dup")
copy.free()
try:
    copy.free()
    check(False, "a second free raised nothing")
except tnt.TntError as e:
    check(e.code == -10, "second free: %s" % e)
half.free()
if none is not None:
    none.free()

if size == 4:
    victim = 2
    fusion = tnt.Fusion([(8, np.float32, "t")])  # on the world of 4
    if me == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(1000):
            world.allreduce(inputs(me))
        check(False, "no error after rank %d died" % victim)
    except tnt.TntError as e:
        check(e.code == -6, "expected peer lost: %s" % e)
    survivors = world.shrink()
    check(world.failed_ranks() == [victim],
          "failed ranks %s" % world.failed_ranks())
    alive = [r for r in range(size) if r != victim]
    check(survivors.size == 3 and survivors.rank == alive.index(me),
          "shrink: rank %d of %d" % (survivors.rank, survivors.size))
    check_allreduce(survivors, alive, "after shrink")
    survivors.free()
    # The module's shrink: the world becomes the survivors' (a second
    # agreement on the same failed communicator), the Fusion made before
    # the death is freed with a message that says why, Comm.world()
    # follows.
    check(tnt.shrink() == [victim], "tnt.shrink() did not name rank %d"
          % victim)
    check(tnt.get_size() == 3 and tnt.get_rank() == alive.index(me)
          and tnt.generation() == 1,
          "after tnt.shrink(): rank %d of %d, generation %d"
          % (tnt.get_rank(), tnt.get_size(), tnt.generation()))
    check(world.size == 3, "Comm.world() did not follow tnt.shrink()")
    check_allreduce(world, alive, "on the world after tnt.shrink()")
    got = tnt.allreduce(np.arange(5.0) + me)
    check(np.array_equal(got, sum(np.arange(5.0) + r for r in alive)),
          "tnt.allreduce after tnt.shrink(): %s" % got)
    try:
        fusion.wait_all()
        check(False, "a Fusion of the old world still worked")
    except ValueError as e:
        check("tntcomm.shrink()" in str(e), "Fusion after shrink: %s" % e)
print("%d checks passed" % checks)
