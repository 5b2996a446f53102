"""The benchmark of issue 41 (not a test; tests/gpu/run.sh runs it under
tnt-run -n 2, both ranks on the one GPU): dist.all_reduce of CUDA float32
tensors from 8 B to 256 MiB, "tnt" (from 64 KiB on the GPU path of ranks
on one host, lib/core/devmem_ipc.c) against "gloo" (its CUDA path), and
"tnt" on CPU tensors of the same size (the host collective alone), and a
DDP step of a CUDA model with each; the pinned host-to-device and
device-to-host copy bandwidth of this GPU in the same run. Rank 0 prints
the tables. Each figure is the median of repeated timed calls (after a
warm-up), each ending with torch.cuda.synchronize() and a barrier-free
start: every rank starts its next call when its previous one returned."""
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import tntcomm.torch  # noqa: F401 - registers "tnt"

rank = int(os.environ["RANK"])
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
BUDGET_S = float(os.environ.get("BENCH_SECONDS_PER_POINT", "0.6"))


def out(*a):
    if rank == 0:
        print(*a, flush=True)


def timed(fn, group):
    """Median seconds of fn() over repeats within BUDGET_S (3..30); every
    rank does the same count (rank 0's, agreed through the group)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = time.perf_counter() - t0
    n = torch.tensor([max(3, min(30, int(BUDGET_S / max(one, 1e-6))))])
    dist.broadcast(n, 0, group=group)
    ts = []
    for _ in range(int(n)):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def copy_bw(nbytes):
    h = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    res = []
    for dst, src in ((d, h), (h, d)):
        dst.copy_(src)
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            dst.copy_(src)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        res.append(nbytes / statistics.median(ts) / 1e9)
    return res


def main():
    dist.init_process_group("tnt")
    cpu = dist.new_group(backend="gloo")  # for the counts (CPU tensors)
    gloo = dist.new_group(backend="gloo")
    groups = {"tnt": dist.group.WORLD, "gloo": gloo}
    if rank == 0:
        h2d, d2h = copy_bw(256 << 20)
    dist.barrier(group=cpu)
    out("# torch %s, %s, 2 ranks on one GPU" % (
        torch.__version__, torch.cuda.get_device_name(dev)))
    if rank == 0:
        out("# pinned copies of 256 MiB (rank 0 alone): H2D %.2f GB/s, "
            "D2H %.2f GB/s" % (h2d, d2h))
    out("# dist.all_reduce of CUDA float32 (median us; tnt/gloo: time "
        "ratio; tnt xH2D: its bandwidth over the H2D copy's); TNT_GPU_IPC=%s "
        "TNT_GPU_IPC_MIN_BYTES=%s (unset: 1, 64k)" % (
            os.environ.get("TNT_GPU_IPC", ""),
            os.environ.get("TNT_GPU_IPC_MIN_BYTES", "")))
    out("%10s %12s %12s %9s %10s %9s %12s" % ("bytes", "tnt us", "gloo us",
                                              "tnt/gloo", "tnt GB/s",
                                              "tnt xH2D", "tnt cpu us"))
    for nbytes in (8, 128, 2 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20,
                   16 << 20, 64 << 20, 256 << 20):
        t = torch.ones(nbytes // 4, device=dev)
        res = {}
        for name, g in groups.items():
            res[name] = timed(lambda: dist.all_reduce(t, group=g), cpu)
        # the same call on a CPU tensor: the host collective alone
        h = torch.ones(nbytes // 4)
        res["cpu"] = timed(lambda: dist.all_reduce(h), cpu)
        bw = nbytes / res["tnt"] / 1e9
        out("%10d %12.1f %12.1f %9.3f %10.2f %9.3f %12.1f" % (
            nbytes, res["tnt"] * 1e6, res["gloo"] * 1e6,
            res["tnt"] / res["gloo"], bw, bw / h2d if rank == 0 else 0,
            res["cpu"] * 1e6))
    # A DDP step (forward, backward with the buckets' all-reduces, SGD)
    # of an MLP with 25.2 M float32 parameters (101 MB of gradients).
    out("# DDP step, MLP 2048-4096-4096-2048 (25.2 M parameters), batch 64")
    for name, g in groups.items():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(),
                          nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 2048)).to(dev)
        ddp = nn.parallel.DistributedDataParallel(m, device_ids=[0],
                                                  process_group=g)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x = torch.randn(64, 2048, device=dev)

        def step():
            opt.zero_grad()
            ddp(x).square().mean().backward()
            opt.step()
        res[name] = timed(step, cpu)
        del ddp, m, opt
    out("ddp_step tnt %.1f ms, gloo %.1f ms, tnt/gloo %.3f" % (
        res["tnt"] * 1e3, res["gloo"] * 1e3, res["tnt"] / res["gloo"]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
