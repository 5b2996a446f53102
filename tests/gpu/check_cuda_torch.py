"""The torch side of issue 41 on a GPU (tests/gpu/run.sh runs it under
tnt-run -n 2, both ranks on the one GPU). Not run by CI (no GPU there).

1. Every collective of the "tnt" backend on CUDA tensors, against values
   computed here (small integers: exact in float32 in any order), after
   work queued on a side stream (the backend must wait for it).
2. DDP on a CUDA model, "tnt" against "gloo" (its CUDA path), and
   tntcomm.torch.DistributedOptimizer with CUDA parameters: the same
   steps on the same data; the parameters must agree with gloo's to a
   relative 1e-5 per tensor (the sums run in different orders).
Prints one line per check; exits 1 if any failed."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import tntcomm.torch as ttorch  # registers "tnt"

rank = int(os.environ["RANK"])
size = int(os.environ["WORLD_SIZE"])
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
failed = []


def check(name, ok, detail=""):
    if rank == 0 or not ok:
        print("%s [rank %d] %s %s" % ("ok  " if ok else "FAIL", rank, name,
                                      detail), flush=True)
    if not ok:
        failed.append(name)


def val(r, n, dtype=torch.float32):
    return ((torch.arange(n, device=dev) + 7 * r) % 61).to(dtype)


def collectives():
    side = torch.cuda.Stream()
    for n in (1, 7, 1009, (1 << 20) + 3):
        # made on a side stream that is then the current one: the backend
        # must order its read after this work
        with torch.cuda.stream(side):
            t = val(rank, n) * 1.0
            torch.cuda._sleep(2_000_000)  # ~1 ms of queued GPU work first
            t = t + 0
            dist.all_reduce(t)
            want = sum(val(r, n) for r in range(size))
            check("all_reduce n=%d" % n, torch.equal(t, want))
        torch.cuda.synchronize()
        b = val(rank, n) if rank == size - 1 else torch.full((n,), -1.0,
                                                             device=dev)
        dist.broadcast(b, src=size - 1)
        check("broadcast n=%d" % n, torch.equal(b, val(size - 1, n)))
        out = torch.empty(n * size, device=dev)
        dist.all_gather_into_tensor(out, val(rank, n))
        check("all_gather_into_tensor n=%d" % n,
              torch.equal(out, torch.cat([val(r, n) for r in range(size)])))
        outs = [torch.empty(n, device=dev) for _ in range(size)]
        dist.all_gather(outs, val(rank, n))
        check("all_gather n=%d" % n,
              all(torch.equal(outs[r], val(r, n)) for r in range(size)))
        big = val(rank, n * size)
        rs = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(rs, big)
        want = sum(val(r, n * size) for r in range(size))[rank * n:
                                                          (rank + 1) * n]
        check("reduce_scatter_tensor n=%d" % n, torch.equal(rs, want))
        r0 = val(rank, n)
        dist.reduce(r0, dst=0)
        if rank == 0:
            check("reduce n=%d" % n,
                  torch.equal(r0, sum(val(r, n) for r in range(size))))
        a2a = torch.empty(n * size, device=dev)
        dist.all_to_all_single(a2a, val(rank, n * size))
        want = torch.cat([val(r, n * size)[rank * n:(rank + 1) * n]
                          for r in range(size)])
        check("all_to_all_single n=%d" % n, torch.equal(a2a, want))
        if size >= 2:
            peer = 1 - rank if rank < 2 else None
            if peer is not None:
                got = torch.empty(n, device=dev)
                if rank == 0:
                    dist.send(val(0, n), dst=1)
                    dist.recv(got, src=1)
                    check("send/recv n=%d" % n, torch.equal(got, val(1, n)))
                else:
                    dist.recv(got, src=0)
                    dist.send(val(1, n), dst=0)
                    check("send/recv n=%d" % n, torch.equal(got, val(0, n)))
        # a Future of a CUDA work: then() sees the result
        f = val(rank, n)
        fut = dist.all_reduce(f, async_op=True).get_future()
        res = fut.then(lambda x: x.value()[0] * 2).wait()
        check("future n=%d" % n,
              torch.equal(res, 2 * sum(val(r, n) for r in range(size))))
    # a CPU tensor on rank 0 where the others pass CUDA ones: one
    # backend serves both device types, the library stages the CUDA side
    # and the call is the same on every rank: the right sum everywhere
    for n in (5, 1 << 20):
        t = val(rank, n)
        if rank == 0:
            t = t.cpu()
        dist.all_reduce(t)
        want = sum(val(r, n) for r in range(size)).to(t.device)
        check("all_reduce n=%d, CPU tensor on rank 0, CUDA elsewhere" % n,
              torch.equal(t, want))


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256),
                         nn.ReLU(), nn.Linear(256, 10)).to(dev)


def batch(step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 64, generator=g)
    y = torch.randint(0, 10, (32,), generator=g)
    return x.to(dev), y.to(dev)


STEPS = 8


def train_ddp(group):
    m = model()
    ddp = nn.parallel.DistributedDataParallel(m, device_ids=[0],
                                              process_group=group,
                                              bucket_cap_mb=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for s in range(STEPS):
        x, y = batch(s)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    return [p.detach().cpu() for p in m.parameters()]


def train_dopt():
    m = model()
    ttorch.broadcast_parameters(m)
    opt = ttorch.DistributedOptimizer(
        torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), model=m,
        threshold=50_000)
    for s in range(STEPS):
        x, y = batch(s)
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    return [p.detach().cpu() for p in m.parameters()]


def rel(a, b):
    return max(float((x - y).norm() / y.norm()) for x, y in zip(a, b))


def main():
    dist.init_process_group("tnt")
    gloo = dist.new_group(backend="gloo")
    collectives()
    p_tnt = train_ddp(None)
    p_gloo = train_ddp(gloo)
    r = rel(p_tnt, p_gloo)
    check("DDP on CUDA: tnt vs gloo", r <= 1e-5, "max relative diff %.2e"
          % r)
    p_dopt = train_dopt()
    r = rel(p_dopt, p_gloo)
    check("DistributedOptimizer with CUDA parameters vs gloo DDP",
          r <= 1e-5, "max relative diff %.2e" % r)
    start = [p.detach().cpu() for p in model().parameters()]
    moved = any(float((a - b).norm()) > 0 for a, b in zip(p_tnt, start))
    check("training moved the parameters", moved)
    dist.destroy_process_group()
    print("check_cuda_torch [rank %d]: %s" % (
        rank, "FAILED: " + ", ".join(failed) if failed else "all passed"),
        flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
