"""Work.wait() of the backend "tnt" racing its completion thread
(plugins/torch/c10d/tnt_work.hpp: whoever gets to a work's requests first
finishes it): many async_op=True works in flight at once, some with their
Future taken (the completion thread waits on those), chained with then()
as DDP's comm hooks do (half of those waited too), some waited by two
threads at once, some only polled with is_completed(), the others waited for in a shuffled order by
the main thread and a second thread; a wait(timeout) that passes on a
receive whose send comes later, then the same work waited for again.
Every result is compared element by element with the same operation over
a gloo group of the same ranks, in the same run, and every callback must
have run exactly once.

    python3 check_torch_wait.py [RANKS] [WORKS]
"""
import datetime
import os
import random
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tntcomm.torch  # noqa: F401  registers "tnt"


def data(rank, i, n):
    """Rank r's input of work i: integers, so that tnt and gloo must agree
    bitwise whatever order each sums in."""
    return (torch.arange(n, dtype=torch.int64) * (rank + 1) + 7 * i) % 1000


def post(kind, rank, size, i, group):
    """Posts work i of `kind` on `group` (None: the default, tnt), async;
    returns (work, the tensor it writes)."""
    n = 1 + (i * 37) % 300  # awkward sizes, 1..300 elements
    x = data(rank, i, n)
    if kind == "all_reduce":
        return dist.all_reduce(x, group=group, async_op=True), x
    if kind == "all_gather":
        out = torch.empty(n * size, dtype=x.dtype)
        return ALL_GATHER(out, x, group=group, async_op=True), out
    if kind == "reduce_scatter":
        big = data(rank, i, n * size)
        out = torch.empty(n, dtype=x.dtype)
        return REDUCE_SCATTER(out, big, group=group, async_op=True), out
    if kind == "broadcast":
        return dist.broadcast(x, i % size, group=group, async_op=True), x
    raise ValueError(kind)


# torch 2.13 names them *_single (the old names warn).
ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single",
                         dist.reduce_scatter_tensor)
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def run(rank, size, path, works):
    dist.init_process_group("tnt", init_method="file://" + path, rank=rank,
                            world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    rng = random.Random(1000 + rank)  # each rank its own order of waits

    # Post them all: tnt's in flight together, gloo's as the reference.
    ours, ref = [], []
    for i in range(works):
        kind = KINDS[i % len(KINDS)]
        ours.append(post(kind, rank, size, i, None))
        w, out = post(kind, rank, size, i, gloo)
        w.wait()
        ref.append(out)

    # Roles: 1 in 4 with its Future taken and chained (a count of
    # callbacks and doubling, then + 1); 1 in 8 waited by both threads;
    # 1 in 16 only polled; the rest waited once, by one of the two
    # threads.
    calls = [0] * works
    lock = threading.Lock()
    chained = {}

    def counted(i):
        def cb(fut):
            with lock:
                calls[i] += 1
            return fut.value()[0] * 2
        return cb

    roles = []
    for i in range(works):
        r = rng.random()
        role = ("future" if r < 0.25 else "both" if r < 0.375
                else "poll" if r < 0.4375 else "wait")
        roles.append(role)
        if role == "future":
            chained[i] = ours[i][0].get_future().then(counted(i)).then(
                lambda f: f.value() + 1)

    # Half of those with a Future are waited too: the completion thread
    # is often inside a slice of a wait on them when wait() comes.
    order = [i for i in range(works) if roles[i] in ("wait", "both")
             or (roles[i] == "future" and i % 2 == 0)]
    rng.shuffle(order)
    mine = [i for k, i in enumerate(order)
            if k % 2 == 0 or roles[i] == "both"]
    theirs = [i for k, i in enumerate(order)
              if k % 2 == 1 or roles[i] == "both"]
    errors = []

    def waiter(idx):
        try:
            for i in idx:
                assert ours[i][0].wait() is True
        except Exception as e:  # reported by the main thread
            errors.append(e)

    t = threading.Thread(target=waiter, args=(theirs,))
    t.start()
    waiter(mine)
    t.join()
    if errors:
        raise errors[0]
    for i, role in enumerate(roles):
        if role == "poll":
            end = time.time() + 60
            while not ours[i][0].is_completed():
                if time.time() > end:
                    raise AssertionError("work %d never completed" % i)
                time.sleep(0.0005)
    for i, fut in chained.items():
        got = fut.wait()
        want = ref[i] * 2 + 1
        if not torch.equal(got, want):
            raise AssertionError("chained future of work %d: %s, want %s"
                                 % (i, got, want))

    # Every element against gloo's, every callback once.
    for i in range(works):
        if not torch.equal(ours[i][1], ref[i]):
            bad = (ours[i][1] != ref[i]).nonzero()[:5].flatten().tolist()
            raise AssertionError("work %d (%s): elements %s differ from "
                                 "gloo's" % (i, KINDS[i % len(KINDS)], bad))
        if roles[i] == "future" and calls[i] != 1:
            raise AssertionError("work %d: its callback ran %d times"
                                 % (i, calls[i]))
        if not ours[i][0].is_completed():
            raise AssertionError("work %d waited but not completed" % i)

    # A wait() whose own timeout passes lets go of the work, which the
    # completion thread or a later wait() then finishes: rank 0 waits
    # 50 ms for a receive that rank 1 sends only after a barrier.
    if size > 1 and rank < 2:
        buf = torch.zeros(1000, dtype=torch.int64)
        if rank == 0:
            w = dist.irecv(buf, 1, tag=9)
            try:
                w.wait(timeout=datetime.timedelta(milliseconds=50))
                raise AssertionError("wait(50 ms) did not time out")
            except RuntimeError as e:
                if "timed out" not in str(e):
                    raise
            dist.barrier()
            w.wait()
            if not torch.equal(buf, data(1, 9, 1000)):
                raise AssertionError("the receive after the timeout: %s"
                                     % buf[:8])
        else:
            dist.barrier()
            dist.send(data(1, 9, 1000), 0, tag=9)
    else:
        dist.barrier()
    dist.barrier()
    print("rank %d: %d async works (%d with futures, %d waited by two "
          "threads, %d polled) equal gloo's; callbacks once; a wait's "
          "timeout let go" % (rank, works, len(chained),
                              roles.count("both"), roles.count("poll")))
    dist.destroy_process_group()


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    works = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.spawn(run, args=(size, os.path.join(tmp, "init"), works),
                       nprocs=size, join=False)
        while not ctx.join():
            pass


if __name__ == "__main__":
    main()
