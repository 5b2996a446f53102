"""torch.distributed backends side by side (a benchmark, not a test):
`dist.all_reduce` time per call from 8 B to 64 MiB (float32 SUM, in
place) and the step time of DDP training a ResNet-style CNN, for each
backend named, at each rank count, in one run. Prints one table per rank
count with each backend's median time and the ratio to the first backend.

    PYTHONPATH=build/plugins/python .venv/bin/python \\
        bench/torch-dist-bench.py --ranks 2 4 --backends tnt gloo

Backends that this torch lacks (mpi in the torch wheels) are left out
with a note. Each measurement: warm-up calls, then `--reps` timed batches of
calls; the median batch, divided by the calls in it, is reported.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [8, 1 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
         64 << 20]


def human(n):
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s:
            return "%d %s" % (n // s, unit)
    return "%d B" % n


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(c)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(x + self.b2(self.c2(y)))


def resnet_style():
    """A small ResNet (torchvision is not in Debian 12): 3 stages of 2
    residual blocks, 32/64/128 channels, on 32x32 images, ~1.2 M
    parameters (4.7 MB of float32 gradients per step)."""
    layers = [torch.nn.Conv2d(3, 32, 3, padding=1, bias=False),
              torch.nn.BatchNorm2d(32), torch.nn.ReLU()]
    c = 32
    for out in (32, 64, 128):
        if out != c:
            layers += [torch.nn.Conv2d(c, out, 3, stride=2, padding=1,
                                       bias=False),
                       torch.nn.BatchNorm2d(out), torch.nn.ReLU()]
            c = out
        layers += [Block(c), Block(c)]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
               torch.nn.Linear(c, 10)]
    return torch.nn.Sequential(*layers)


def timed(fn, calls, reps):
    fn()
    times = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def rank_main(rank, size, backend, init, args, out):
    torch.set_num_threads(1)
    if backend == "tnt":
        import tntcomm.torch  # noqa: F401
    dist.init_process_group(backend, init_method=init, rank=rank,
                            world_size=size)
    res = {}
    for nbytes in args.sizes:
        t = torch.ones(max(1, nbytes // 4))
        calls = max(3, min(2000, int(2e6 // max(nbytes, 1024))))
        secs = timed(lambda: dist.all_reduce(t), calls, args.reps)
        res[nbytes] = secs
    if args.ddp_steps:
        torch.manual_seed(1)
        model = torch.nn.parallel.DistributedDataParallel(resnet_style())
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(args.batch, 3, 32, 32)
        y = torch.randint(0, 10, (args.batch,))

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        res["ddp"] = timed(step, args.ddp_steps, args.reps)
    if rank == 0:
        torch.save(res, out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--backends", nargs="+", default=["tnt", "gloo", "mpi"])
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ddp-steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32,
                    help="DDP micro-batch per rank")
    args = ap.parse_args()
    have = {"gloo": dist.is_gloo_available(), "mpi": dist.is_mpi_available(),
            "tnt": True}
    backends = []
    for b in args.backends:
        if have.get(b, True):
            backends.append(b)
        else:
            print("# %s: not available in this torch build, left out" % b)
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.ranks:
            results = {}
            for b in backends:
                out = os.path.join(tmp, "%s%d.pt" % (b, size))
                init = "file://" + os.path.join(tmp, "init-%s-%d" % (b, size))
                mp.spawn(rank_main, args=(size, b, init, args, out),
                         nprocs=size)
                results[b] = torch.load(out)
            print("\n## p = %d (rank 0's median time per call)" % size)
            head = ["size"] + ["%s" % b for b in backends] + \
                   ["%s/%s" % (backends[0], b) for b in backends[1:]]
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            keys = list(args.sizes) + (["ddp"] if args.ddp_steps else [])
            for k in keys:
                name = human(k) if k != "ddp" else "DDP step"
                vals = [results[b][k] for b in backends]
                cells = [name] + ["%.1f us" % (v * 1e6) if v < 1e-2 else
                                  "%.2f ms" % (v * 1e3) for v in vals]
                cells += ["%.2f" % (vals[0] / v) for v in vals[1:]]
                print("| " + " | ".join(cells) + " |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
