"""Rank program of tests/test_python.sh: checks the tntcomm binding on
every rank of the job it runs in (tnt-run -n N python3 check_tntcomm.py,
or alone as a world of one).

Inputs are generated from (rank, index), so every rank computes the numpy
reference of a collective itself and compares every element. Values are
small integers (also in the float types), so sums and averages are exact
in every dtype whatever order the library adds them in; one float64 case
uses random values and a relative tolerance. Prints "N checks passed" and
exits 0, or names the first failing check and exits 1.
"""
import os
import sys

import numpy as np

import tntcomm as tnt

checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL: %s" % (tnt.get_rank(), what), file=sys.stderr)
        sys.exit(1)


def same(got, want, what):
    check(got.dtype == want.dtype and got.shape == want.shape,
          "%s: got %s%s, want %s%s" % (what, got.dtype, got.shape,
                                       want.dtype, want.shape))
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    check(bad.size == 0, "%s: %d wrong elements, first at %s: %r vs %r"
          % (what, bad.size, bad[:1], got.reshape(-1)[bad[:1]],
             want.reshape(-1)[bad[:1]]))


DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32,
          np.uint32, np.int64, np.uint64]
COUNTS = [0, 1, 7, 1000, 65537]


def data(r, n, dtype, op):
    """Rank r's input: small values that keep every op exact (prod only
    of 1s and 2s, and only on a few ranks' worth)."""
    i = np.arange(n)
    if op == "prod":
        v = 1 + ((i + r) % 3 == 0)
    else:
        v = (i * 7 + r * 3) % 11 + (r == 0)
    return v.astype(dtype)


def reference(size, n, dtype, op):
    xs = [data(r, n, dtype, op).astype(np.float64) for r in range(size)]
    if op == "sum":
        ref = sum(xs)
    elif op == "avg":
        ref = sum(xs) / size
        if np.dtype(dtype).kind in "iu":  # integers truncate toward zero
            ref = np.trunc(ref)
    elif op == "prod":
        ref = np.prod(xs, axis=0) if xs else None
    elif op == "min":
        ref = np.min(xs, axis=0)
    else:
        ref = np.max(xs, axis=0)
    return ref.astype(dtype)


def check_rank_api(rank, size):
    check(rank == int(os.environ.get("TNT_RANK", "0")), "get_rank")
    check(size == int(os.environ.get("TNT_SIZE", "1")), "get_size")
    check(tnt.get_master_rank() == 0, "get_master_rank")
    check(tnt.is_master_rank() == (rank == 0), "is_master_rank")
    check(len(tnt.version()) == 3, "version")
    check(tnt.__version__ == "%d.%d.%d" % tnt.version(),
          "__version__ %r is the library's %r" % (tnt.__version__,
                                                  tnt.version()))


def check_allreduce(rank, size):
    for dtype in DTYPES:
        for op in ["sum", "avg", "prod", "min", "max"]:
            for n in COUNTS if op in ("sum", "avg") else [1, 1000]:
                want = reference(size, n, dtype, op)
                x = data(rank, n, dtype, op)
                keep = x.copy()
                got = tnt.allreduce(x, op=op)
                what = "allreduce %s %s n=%d" % (np.dtype(dtype), op, n)
                same(got, want, what + " (new array)")
                same(x, keep, what + " left its input alone")
                got = tnt.allreduce(x, op=op, inplace=True)
                check(got is x, what + " in place returns the array")
                same(x, want, what + " (in place)")


def check_float_values(rank, size):
    """Random doubles: agree with numpy to a relative 1e-12, and every
    rank holds bitwise the same result."""
    rng = np.random.default_rng(1000 + rank)
    x = rng.standard_normal(4097)
    allx = [np.random.default_rng(1000 + r).standard_normal(4097)
            for r in range(size)]
    got = tnt.allreduce(x, op=tnt.SUM)
    check(np.allclose(got, sum(allx), rtol=1e-12, atol=1e-12),
          "allreduce of random doubles")
    first = tnt.broadcast(got, root=0)
    same(got, first, "allreduce result bitwise equal on every rank")


def check_shapes(rank, size):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) + rank
    want = (np.arange(24, dtype=np.float32) * size
            + sum(range(size))).reshape(2, 3, 4)
    same(tnt.allreduce(x), want, "allreduce keeps the shape")
    strided = np.arange(20, dtype=np.int32)[::2] + rank
    want = np.arange(20, dtype=np.int32)[::2] * size + sum(range(size))
    same(tnt.allreduce(strided), want, "allreduce of a strided view")
    same(tnt.allreduce([1.0, 2.0]), np.array([1.0, 2.0]) * size,
         "allreduce of a list")


def check_broadcast(rank, size):
    for root in range(size):
        for dtype in DTYPES:
            n = 1000
            mine = data(rank, n, dtype, "sum")
            want = data(root, n, dtype, "sum")
            got = tnt.broadcast(mine, root=root)
            same(got, want, "broadcast %s root %d" % (np.dtype(dtype), root))
            same(mine, data(rank, n, dtype, "sum"),
                 "broadcast left its input alone")
            got = tnt.broadcast(mine, root=root, inplace=True)
            check(got is mine, "broadcast in place returns the array")
            same(mine, want, "broadcast %s root %d in place"
                 % (np.dtype(dtype), root))
    tnt.barrier()


def check_allgather(rank, size):
    """Every rank's rows in rank order; shapes (n, ...) -> (size*n, ...),
    a 0-d array counting as one row."""
    for dtype in DTYPES:
        for n in [0, 1, 7, 1000]:
            x = data(rank, n, dtype, "sum")
            want = np.concatenate([data(r, n, dtype, "sum")
                                   for r in range(size)])
            keep = x.copy()
            same(tnt.allgather(x), want, "allgather %s n=%d"
                 % (np.dtype(dtype), n))
            same(x, keep, "allgather left its input alone")
            same(tnt.iallgather(x).wait(), want, "iallgather %s n=%d"
                 % (np.dtype(dtype), n))
    x = (np.arange(6, dtype=np.int32) + 100 * rank).reshape(2, 3)
    want = np.concatenate([(np.arange(6, dtype=np.int32)
                            + 100 * r).reshape(2, 3) for r in range(size)])
    same(tnt.allgather(x), want, "allgather of a 2x3 array")
    same(tnt.allgather(np.float64(rank)), np.arange(size, dtype=np.float64),
         "allgather of a 0-d array")


def check_reduce_scatter(rank, size):
    """Block `rank` (along the first axis) of the reduction over ranks."""
    for dtype in DTYPES:
        for op in ["sum", "avg", "min", "max"]:
            for n in [0, 1, 7, 1000]:
                x = data(rank, size * n, dtype, op)
                full = reference(size, size * n, dtype, op)
                want = full[rank * n:(rank + 1) * n]
                what = "reduce_scatter %s %s n=%d" % (np.dtype(dtype), op, n)
                keep = x.copy()
                same(tnt.reduce_scatter(x, op=op), want, what)
                same(x, keep, what + " left its input alone")
                same(tnt.ireduce_scatter(x, op=op).wait(), want,
                     "i" + what)
    x = np.ones((2 * size, 3), np.float32) * (rank + 1)
    same(tnt.reduce_scatter(x),
         np.full((2, 3), size * (size + 1) / 2, np.float32),
         "reduce_scatter keeps the trailing axes")
    same(tnt.reduce_scatter(tnt.allgather(np.arange(4.0))),
         np.arange(4.0) * size, "reduce_scatter undoes allgather's shape")


def check_nonblocking(rank, size):
    """Several operations in flight at once, completed in another order
    than started, through wait() and test(); every element checked."""
    n = 5000
    ins = [data(rank, n, np.float32, "sum") for _ in range(3)]
    inplace = ins[2].copy()
    reqs = [tnt.iallreduce(ins[0], op="sum"),
            tnt.ibroadcast(ins[1], root=size - 1),
            tnt.iallreduce(inplace, op="max", inplace=True),
            tnt.iallgather(np.full(3, rank, np.int64)),
            tnt.ireduce_scatter(np.ones(2 * size, np.int32), op="sum"),
            tnt.ibarrier()]
    while not reqs[5].test():
        pass
    check(reqs[5].done and reqs[5].wait() is None, "ibarrier completes")
    same(reqs[4].wait(), np.full(2, size, np.int32), "ireduce_scatter")
    same(reqs[3].wait(), np.repeat(np.arange(size, dtype=np.int64), 3),
         "iallgather")
    got = reqs[2].wait()
    check(got is inplace, "iallreduce in place returns the array")
    same(inplace, reference(size, n, np.float32, "max"), "iallreduce max")
    same(reqs[1].wait(), data(size - 1, n, np.float32, "sum"), "ibroadcast")
    same(reqs[0].wait(), reference(size, n, np.float32, "sum"),
         "iallreduce sum")
    same(reqs[0].wait(), reference(size, n, np.float32, "sum"),
         "a second wait() gives the result again")
    check(all(r.test() for r in reqs), "test() after wait() is True")
    # A request dropped unfinished is completed first, not left writing
    # into freed memory; the next collective then lines up on every rank.
    tnt.iallreduce(np.ones(100000, np.float64))
    same(tnt.allreduce(np.ones(3)), np.full(3, float(size)),
         "allreduce after a dropped request")


def check_errors(rank, size):
    def raises(exc, fn, text, what):
        try:
            fn()
        except exc as e:
            check(text in str(e), "%s: message %r lacks %r" % (what, str(e),
                                                               text))
            return e
        check(False, what + ": no " + exc.__name__)

    raises(TypeError, lambda: tnt.allreduce(np.ones(2, np.complex64)),
           "dtype complex64 is not supported", "complex dtype")
    raises(ValueError, lambda: tnt.allreduce(np.ones(2), op="mean"),
           "unknown op 'mean'", "bad op")
    raises(ValueError,
           lambda: tnt.allreduce(np.ones(8)[::2], inplace=True),
           "writeable C-contiguous", "strided in place")
    raises(TypeError, lambda: tnt.allreduce([1.0], inplace=True),
           "needs a numpy array", "list in place")
    e = raises(tnt.TntError, lambda: tnt.broadcast(np.ones(2), root=size),
               "root %d is not a rank" % size, "root out of range")
    check(e.code == -1 and e.name == "invalid argument",
          "TntError code %r name %r" % (e.code, e.name))
    raises(tnt.TntError, lambda: tnt.micro_batch(8, rank=size, size=size),
           "tnt_micro_batch", "micro_batch of a rank out of range")
    if size > 1:  # every length divides among one rank
        raises(ValueError, lambda: tnt.reduce_scatter(np.ones(size + 1)),
               "first axis divisible by the number of ranks (%d)" % size,
               "reduce_scatter of an indivisible array")
    raises(TypeError, lambda: tnt.allgather(np.ones(2, np.complex64)),
           "dtype complex64 is not supported", "allgather complex dtype")
    req = tnt.ibroadcast(np.ones(2), root=0)
    req.wait()
    e = raises(tnt.TntError, lambda: tnt.ibroadcast(np.ones(2), root=size),
               "root %d is not a rank" % size, "ibroadcast root out of range")
    check(e.call == "tnt_ibroadcast", "TntError names tnt_ibroadcast")
    check_p2p_errors(rank, size, raises)
    check_alltoallv_errors(rank, size, raises)


def check_p2p_errors(rank, size, raises):
    """Bad arguments of send/recv: a Python exception saying why, and the
    communicator still works (the next collective checks it)."""
    other = (rank + 1) % size
    for fn in (tnt.send, tnt.isend, tnt.recv, tnt.irecv):
        name = "tnt_" + fn.__name__
        e = raises(tnt.TntError, lambda: fn(np.ones(2), size),
                   "peer %d is not a rank" % size, name + " peer = size")
        check(e.code == -1 and e.call == name, "%s: TntError %r %r"
              % (name, e.code, e.call))
        raises(tnt.TntError, lambda: fn(np.ones(2), -2),
               "peer -2 is not a rank", name + " peer -2")
        if fn in (tnt.send, tnt.isend):  # -1 is TNT_ANY_SOURCE
            raises(tnt.TntError, lambda: fn(np.ones(2), -1),
                   "TNT_ANY_SOURCE is for receives", name + " peer -1")
        raises(tnt.TntError, lambda: fn(np.ones(2), rank),
               "peer %d is this rank" % rank, name + " peer = own rank")
        raises(ValueError, lambda: fn(np.ones(2), 2 ** 32 + other),
               "peer %d is out of the C int range" % (2 ** 32 + other),
               name + " peer past the C int range")
        raises(TypeError, lambda: fn(np.ones(2), "1"),
               "peer must be an int, not str", name + " peer a string")
        raises(TypeError, lambda: fn(np.ones(2), 1.0),
               "peer must be an int, not float", name + " peer a float")
        if size > 1:  # else every peer is refused before the tag
            raises(tnt.TntError, lambda: fn(np.ones(2), other, tag=-1),
                   "tag -1; expected 0..TNT_TAG_MAX", name + " negative tag")
            raises(tnt.TntError,
                   lambda: fn(np.ones(2), other, tag=tnt.TAG_MAX + 1),
                   "tag %d" % (tnt.TAG_MAX + 1), name + " tag past TAG_MAX")
        raises(TypeError, lambda: fn(np.ones(2, np.complex64), other),
               "dtype complex64 is not supported", name + " complex dtype")
    for fn in (tnt.recv, tnt.irecv):
        raises(TypeError, lambda: fn([1.0, 2.0], other),
               "needs a numpy array", fn.__name__ + " into a list")
        raises(ValueError, lambda: fn(np.ones(8)[::2], other),
               "writeable C-contiguous", fn.__name__ + " into a strided view")
    tnt.barrier()


def check_alltoallv_errors(rank, size, raises):
    """Bad counts: ValueError/TypeError before any call, or the library's
    own local TntError; none of them fails the communicator."""
    x = np.arange(2 * size, dtype=np.float32)
    twos = [2] * size
    for fn in (tnt.alltoallv, tnt.ialltoallv):
        name = fn.__name__
        raises(ValueError, lambda: fn(x, [2] * (size + 1), twos),
               "sendcounts has %d entries; expected one per rank (%d)"
               % (size + 1, size), name + " sendcounts too long")
        raises(ValueError, lambda: fn(x, twos, [2] * (size - 1)),
               "recvcounts has %d entries" % (size - 1),
               name + " recvcounts too short")
        raises(ValueError, lambda: fn(x, [3] + [2] * (size - 1), twos),
               "sendcounts add up to %d rows but the array has %d"
               % (2 * size + 1, 2 * size), name + " sendcounts sum")
        raises(ValueError, lambda: fn(x, [-1] + [2] * (size - 1), twos),
               "sendcounts has a negative count", name + " negative count")
        raises(TypeError, lambda: fn(x, [2.0] * size, twos),
               "sendcounts must be ints, not float64", name + " float counts")
        raises(TypeError, lambda: fn(x, 2, twos),
               "sendcounts must be a sequence of ints", name + " scalar")
        raises(TypeError, lambda: fn(x.astype(np.complex64), twos, twos),
               "dtype complex64 is not supported", name + " complex dtype")
        raises(ValueError, lambda: fn(np.float32(1), [1] * size, twos),
               "not a 0-d array", name + " 0-d array")
        # This rank's block to itself must keep its count: the library
        # refuses it locally (TNT_ERR_MISMATCH), before any rank posts.
        bad = list(twos)
        bad[rank] = 3
        e = raises(tnt.TntError, lambda: fn(x, twos, bad),
                   "the block a rank sends itself", name + " own block")
        check(e.code == -8, name + ": own block is TNT_ERR_MISMATCH")
    # Every rank's x is the same: each sends rank j rows 2j, 2j+1.
    same(tnt.alltoallv(x, twos, twos),
         np.tile(np.arange(2 * rank, 2 * rank + 2, dtype=np.float32), size),
         "alltoallv after the errors")


def check_micro_batch(rank, size):
    parts = [tnt.micro_batch(10, r, size) for r in range(size)]
    check(sum(c for _, c in parts) == 10 and parts[0][0] == 0,
          "micro_batch covers the batch: %r" % parts)
    check(tnt.micro_batch(10) == parts[rank], "micro_batch defaults")


def check_fusion(rank, size):
    sizes = [3, 5000, 17]
    grads = [np.full(n, float(rank + 1 + i), np.float32)
             for i, n in enumerate(sizes)]
    f = tnt.Fusion([(n, np.float32, "t%d" % i)
                    for i, n in enumerate(sizes)], op="avg", threshold=0)
    check(f.num_buckets() == 3, "threshold 0: one bucket per tensor")
    for it in range(2):
        for i in reversed(range(3)):
            f.ready(i, grads[i].ctypes.data)
        f.wait_all()
        for i, n in enumerate(sizes):
            mean = sum(r + 1 + i for r in range(size)) / size
            same(grads[i], np.full(n, mean, np.float32),
                 "fusion avg tensor %d iteration %d" % (i, it))
            grads[i][:] = rank + 1 + i
    f.free()


def check_stats(rank, size):
    """tntcomm.stats(): a few allreduces counted exactly (deltas)."""
    before = tnt.stats()
    x = np.ones(256, np.float32)   # 1 KiB
    for _ in range(5):
        tnt.allreduce(x, inplace=True)
    tnt.barrier()
    after = tnt.stats()
    ar = {k: after["kinds"]["allreduce"][k] - before["kinds"]["allreduce"][k]
          for k in ("calls", "bytes")}
    check(ar == {"calls": 5, "bytes": 5 * 1024},
          "stats: 5 allreduces of 1 KiB counted as %r" % ar)
    check(after["kinds"]["barrier"]["calls"] -
          before["kinds"]["barrier"]["calls"] == 1, "stats: one barrier")
    check(sum(a["calls"] for a in after["algorithms"].values()) ==
          sum(k["calls"] for k in after["kinds"].values()),
          "stats: calls by algorithm = calls by kind")
    if size > 1:
        check(sum(t["peers"] for t in after["transports"].values()) ==
              size - 1, "stats: transports serve the peers: %r" %
              after["transports"])
    check(after["wait_s"] >= 0 and after["unexpected_hwm"] >= 0,
          "stats: wait and high-water mark")
    check(after["comm"] == {"name": "world", "how": "", "rank": rank,
                            "world_rank": rank},
          "stats: the world communicator named: %r" % after["comm"])


def check_reproducible(rank, size):
    """init(reproducible=True): sums of values whose rounding depends on
    the order give the same bits under ring, rd and oneshot, and the mode
    cannot change under a live communicator."""
    i = np.arange(30011)
    x = ((-1.0) ** (i + rank) * 2.0 ** ((i * 7 + rank * 13) % 41 - 20) *
         (1 + ((i + 3 * rank) % 97) / 97.0)).astype(np.float32)
    saved = {k: os.environ.get(k) for k in ("TNT_ALLREDUCE_ALGO",
                                            "TNT_REPRODUCIBLE")}
    results = []
    for algo in ("ring", "rd", "oneshot"):
        tnt.finalize()
        os.environ["TNT_ALLREDUCE_ALGO"] = algo
        tnt.init(reproducible=True)
        check(tnt.is_reproducible(), "is_reproducible() after init(True)")
        results.append(tnt.allreduce(x))
    for algo, y in zip(("rd", "oneshot"), results[1:]):
        check(y.tobytes() == results[0].tobytes(),
              "reproducible: %s gave other bits than ring" % algo)
    raised = False
    try:
        tnt.init(reproducible=False)
    except ValueError:
        raised = True
    check(raised, "init(reproducible=False) under a reproducible "
          "communicator raises ValueError")
    tnt.finalize()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    tnt.init(reproducible=False)
    check(not tnt.is_reproducible(), "init(reproducible=False)")


def check_rooted(rank, size):
    """reduce, gather and scatter at every root, alltoall: each against
    its numpy reference; reduce also bit for bit against allreduce on
    random float64 values whose sums round."""
    for root in range(size):
        for dtype in [np.float32, np.float16, np.int32, np.uint8]:
            for op in ["sum", "max", "avg"]:
                for n in [0, 1, 7, 1000]:
                    got = tnt.reduce(data(rank, n, dtype, op), op=op,
                                     root=root)
                    what = "reduce %s %s n=%d root %d" % (
                        np.dtype(dtype), op, n, root)
                    if rank == root:
                        same(got, reference(size, n, dtype, op), what)
                    else:
                        check(got is None, what + ": None off the root")
        x = np.random.default_rng(root * 100 + rank).uniform(-1, 1, 5001)
        got = tnt.reduce(x, root=root)
        want = tnt.allreduce(x)
        if rank == root:
            check(got.tobytes() == want.tobytes(),
                  "reduce root %d: bitwise what allreduce gives" % root)
        for n in [0, 1, 7, 1000]:
            x = data(rank, n, np.int64, "sum")
            got = tnt.gather(x, root=root)
            if rank == root:
                same(got, np.concatenate([data(r, n, np.int64, "sum")
                                          for r in range(size)]),
                     "gather n=%d root %d" % (n, root))
            else:
                check(got is None, "gather: None off the root")
            full = np.concatenate([data(r + root, n, np.float32, "sum")
                                   for r in range(size)])
            mine = full if rank == root else np.zeros_like(full)
            same(tnt.scatter(mine, root=root),
                 data(rank + root, n, np.float32, "sum"),
                 "scatter n=%d root %d" % (n, root))
    for n in [0, 1, 7, 1000]:
        blocks = [data(rank * size + j, n, np.int32, "sum")
                  for j in range(size)]
        got = tnt.alltoall(np.concatenate(blocks).reshape(size * n))
        want = np.concatenate([data(r * size + rank, n, np.int32, "sum")
                               for r in range(size)])
        same(got, want, "alltoall n=%d" % n)
    try:
        tnt.scatter(np.zeros(size * 2 + 1), root=0)
        check(size == 1, "scatter of rows not divisible by size raises")
    except ValueError as e:
        check("divisible" in str(e), "scatter's ValueError says why")
    tnt.barrier()


def v_counts(r, j, size, base):
    """Rows rank r sends rank j in alltoallv case `base`: 0, 1, primes
    and uneven (base 1009: large, above TNT_EAGER_BYTES, 256 KiB, in
    float64)."""
    if base == 1009:
        return 32771 + 13 * r + 3 * j
    return (r * 3 + j * 5 + base) % 4 + (base == 2 and r == j) * 7


def check_alltoallv(rank, size):
    """Rank r's block for rank j is data(r*size + j) of v_counts(r, j)
    rows; rank `rank` must hold every sender's block for it, in rank
    order. Blocking and nonblocking, with and without recvcounts, in 1-d
    and with trailing axes."""
    for base in [0, 1, 2, 1009]:
        for dtype in [np.float64, np.int32, np.uint8]:
            scounts = [v_counts(rank, j, size, base) for j in range(size)]
            rcounts = [v_counts(i, rank, size, base) for i in range(size)]
            x = np.concatenate([data(rank * size + j, scounts[j], dtype,
                                     "sum") for j in range(size)])
            want = np.concatenate([data(i * size + rank, rcounts[i], dtype,
                                        "sum") for i in range(size)])
            keep = x.copy()
            what = "alltoallv %s base %d" % (np.dtype(dtype), base)
            same(tnt.alltoallv(x, scounts, rcounts), want, what)
            same(x, keep, what + " left its input alone")
            same(tnt.alltoallv(x, np.array(scounts, np.uint64)), want,
                 what + " (recvcounts exchanged)")
            same(tnt.ialltoallv(x, scounts, rcounts).wait(), want,
                 "i" + what)
            same(tnt.ialltoallv(x, scounts).wait(), want,
                 "i" + what + " (recvcounts exchanged)")
    # Rows of shape (2, 3): counts are rows, not elements.
    scounts = [v_counts(rank, j, size, 0) for j in range(size)]
    rcounts = [v_counts(i, rank, size, 0) for i in range(size)]
    x = np.concatenate([data(rank * size + j, 6 * scounts[j], np.int64,
                             "sum") for j in range(size)]).reshape(-1, 2, 3)
    want = np.concatenate([data(i * size + rank, 6 * rcounts[i], np.int64,
                                "sum") for i in range(size)]).reshape(-1, 2, 3)
    same(tnt.alltoallv(x, scounts, rcounts), want, "alltoallv of rows 2x3")


def check_p2p(rank, size):
    """send/recv around the ring (rank to rank+1), every element checked:
    blocking and nonblocking, counts 0, 1, 7 and 65537 (float64, above
    TNT_EAGER_BYTES: the send waits for the receive), tags apart."""
    if size == 1:
        return  # no other rank to talk to; check_errors covers size 1
    right, left = (rank + 1) % size, (rank - 1) % size
    before = tnt.stats()["kinds"]["p2p"]
    calls = nbytes = 0
    for dtype in [np.float64, np.int8, np.uint32]:
        for n in [0, 1, 7, 65537]:
            mine = data(rank * 31 + n, n, dtype, "sum")
            want = data(left * 31 + n, n, dtype, "sum")
            what = "send/recv %s n=%d" % (np.dtype(dtype), n)
            got = np.full(n, 99, dtype)
            # A chain, so large blocking sends cannot wait for each other:
            # rank 0 sends first, every other rank receives first.
            if rank == 0:
                tnt.send(mine, right, tag=n)
                check(tnt.recv(got, left, tag=n) is got,
                      what + ": recv returns its array")
            else:
                tnt.recv(got, left, tag=n)
                tnt.send(mine, right, tag=n)
            same(got, want, what)
            got2 = np.full(n, 99, dtype)
            reqs = [tnt.irecv(got2, left, tag=5), tnt.isend(mine, right,
                                                            tag=5)]
            check(reqs[1].wait() is None, what + ": isend gives None")
            check(reqs[0].wait() is got2, what + ": irecv gives its array")
            same(got2, want, "i" + what)
            calls += 4
            nbytes += 4 * n * np.dtype(dtype).itemsize
    # Tags are independent: two messages received in the other order.
    a, b = np.arange(5.0) + rank, np.arange(3, dtype=np.int32) * rank
    sends = [tnt.isend(a, right, tag=tnt.TAG_MAX), tnt.isend(b, right, tag=0)]
    gb = tnt.recv(np.empty(3, np.int32), left, tag=0)
    ga = tnt.recv(np.empty(5), left, tag=tnt.TAG_MAX)
    for r in sends:
        r.wait()
    same(ga, np.arange(5.0) + left, "tag TAG_MAX received second")
    same(gb, np.arange(3, dtype=np.int32) * left, "tag 0 received first")
    calls += 4
    nbytes += 2 * (5 * 8 + 3 * 4)
    after = tnt.stats()["kinds"]["p2p"]
    got = {k: after[k] - before[k] for k in ("calls", "bytes")}
    check(got == {"calls": calls, "bytes": nbytes},
          "stats p2p: %r, want %d calls of %d bytes" % (got, calls, nbytes))
    tnt.barrier()


def check_p2p_any(rank, size):
    """Receives from any source (ANY_SOURCE): every rank but 0 sends two
    messages to rank 0 (isend, so large ones cannot block), which takes
    them with irecv from any rank; each sender must be reported
    (Request.source) exactly twice, its first message in the earlier
    receive (one sender's messages keep their order), and every element
    equal the sender's reference data. Then blocking recv from any source
    (no sender reported: the arrays must be the senders' data, each
    once), a named irecv's source is its peer, and a send's is None."""
    if size == 1:
        return
    cases = [(np.float64, 1), (np.int32, 7), (np.float64, 65537)]
    for i, (dtype, n) in enumerate(cases):
        # Tags of their own per case: a sender may run ahead into the
        # next case before rank 0 took this one's messages.
        tag = 20 + 2 * i
        what = "recv from any source %s n=%d" % (np.dtype(dtype), n)
        if rank == 0:
            reqs = [tnt.irecv(np.full(n, 99, dtype), tnt.ANY_SOURCE, tag=tag)
                    for _ in range(2 * (size - 1))]
            check(all(r.source is None for r in reqs),
                  what + ": no source before completion")
            got = [(r.wait(), r.source) for r in reqs]
            srcs = [s for _, s in got]
            check(sorted(srcs) == sorted(list(range(1, size)) * 2),
                  what + ": sources %r, want each of 1..%d twice"
                  % (srcs, size - 1))
            seen = {}
            for arr, src in got:
                k = seen.get(src, 0)
                seen[src] = k + 1
                same(arr, data(2 * src + k, n, dtype, "sum"),
                     "%s: message %d of rank %d" % (what, k, src))
            outs = [tnt.recv(np.full(n, 99, dtype), tnt.ANY_SOURCE,
                             tag=tag + 1) for _ in range(size - 1)]
            want = {src: data(2 * size + src, n, dtype, "sum")
                    for src in range(1, size)}
            for arr in outs:
                match = [src for src, w in want.items()
                         if np.array_equal(arr, w)]
                check(len(match) == 1, what + ": blocking recv got %r, no "
                      "sender's data (or several)" % arr[:4])
                del want[match[0]]
        else:
            sends = [tnt.isend(data(2 * rank + k, n, dtype, "sum"), 0,
                               tag=tag) for k in range(2)]
            sends.append(tnt.isend(data(2 * size + rank, n, dtype, "sum"), 0,
                                   tag=tag + 1))
            for r in sends:
                check(r.wait() is None and r.source is None,
                      what + ": a send's request has no source")
    peer = size - 1 if rank == 0 else 0
    if rank in (0, size - 1):
        if rank == 0:
            r = tnt.irecv(np.empty(3), peer, tag=11)
            same(r.wait(), np.arange(3.0) + peer, "named irecv")
            check(r.source == peer, "named irecv: source %r, want %d"
                  % (r.source, peer))
        else:
            tnt.send(np.arange(3.0) + rank, peer, tag=11)
    tnt.barrier()


def main():
    rank, size = tnt.get_rank(), tnt.get_size()
    check_rank_api(rank, size)
    check_allreduce(rank, size)
    check_float_values(rank, size)
    check_shapes(rank, size)
    check_broadcast(rank, size)
    check_allgather(rank, size)
    check_reduce_scatter(rank, size)
    check_rooted(rank, size)
    check_alltoallv(rank, size)
    check_p2p(rank, size)
    check_p2p_any(rank, size)
    check_nonblocking(rank, size)
    check_errors(rank, size)
    check_micro_batch(rank, size)
    check_fusion(rank, size)
    check_stats(rank, size)
    check_reproducible(rank, size)
    tnt.barrier()
    if tnt.is_master_rank():
        print("%d checks passed on each of %d rank%s"
              % (checks, size, "" if size == 1 else "s"))


main()
