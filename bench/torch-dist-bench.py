"""torch.distributed backends side by side (a benchmark, not a test):
`dist.all_reduce` time per call from 8 B to 64 MiB (float32 SUM, in
place), the step time of DDP and of FSDP2 (`fully_shard` on each
residual block and the whole model) training a ResNet-style CNN, for
each backend named, at each rank count, in one run. Prints one table per
rank count with each backend's median time and the ratio to the first
backend.

    PYTHONPATH=build/plugins/python .venv/bin/python \\
        bench/torch-dist-bench.py --ranks 2 4 --backends tnt gloo

The way in: the backend "fake" (torch's FakeProcessGroup, a C++ backend
registered through register_backend as "tnt" is, whose calls do nothing
and complete at once) gives torch's own floor per call; the library's
own time for the same small allreduce comes from bench/tnt-bench (C, no
torch) when --tnt-bench names it; and --layers times the two halves of a
small tnt call (posting it: dist.all_reduce(async_op=True); waiting:
work.wait()) to say where a call's time goes.

The CPU bound: each rank measures its process's CPU time (getrusage,
user + system, every thread: the library's progress thread and the
backend's completion thread included) over the timed calls; the sum over
the ranks of CPU per call, divided by the cores this process may use, is
the least wall time per call a synchronous collective can take when
every rank must run its share of every call (4 ranks on 2 cores: each
call waits for all 4 ranks' CPU). The "bound" columns give it, and the
way in says what fraction of tnt's small call it explains. (A rank that
spins while it waits adds that spin to its CPU, so the bound is an upper
estimate of the CPU the calls need; fake's ranks never wait on one
another, so its bound is not a floor of its own time.)

The backend "fake-turns" is fake with one `os.sched_yield()` after each
call: where ranks outnumber the cores (4 ranks on 2), each call then
hands the core to the rank beside it, as every call of a backend whose
ranks wait for one another must; so it is torch's floor with the
turn-taking (a switch between two Python processes per call and rank,
and the caches the other left cold), which the CPU of a real backend's
small call at that p includes whatever the backend does. Where every
rank has a core, the yield finds nothing else to run and costs well
under a microsecond.

--tnt-before PATH adds the backend "tnt-before": tnt imported from the
tntcomm package under PATH (another build's plugins/python), for a
before/after comparison in one run.

Backends that this torch lacks (mpi in the torch wheels) are left out
with a note. Each measurement: warm-up calls, then `--reps` timed batches of
calls; the median batch, divided by the calls in it, is reported.
"""
import argparse
import os
import json
import resource
import statistics
import subprocess
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


def cpu_seconds():
    """This process's CPU time so far, user + system, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn, calls, reps, cpu=None):
    """Median time per call of `reps` batches of `calls` calls; with a
    list `cpu`, appends this rank's CPU per call over all batches."""
    # Warm-up: the first calls of a process (and of a size) pay for lazy
    # set-up that later calls do not (fake's first row showed 10x its
    # floor with one warm-up call).
    for _ in range(min(10, calls)):
        fn()
    times = []
    used = 0.0
    for _ in range(reps):
        dist.barrier()
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
        used += cpu_seconds() - c0
    if cpu is not None:
        cpu.append(used / (calls * reps))
    return statistics.median(times)


def layers(calls, reps):
    """Median per-call time of posting a small all_reduce and of waiting
    for it, timed apart (perf_counter_ns around each)."""
    t = torch.ones(2)
    post, wait = [], []
    for _ in range(reps):
        dist.barrier()
        p = w = 0
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            work = dist.all_reduce(t, async_op=True)
            t1 = time.perf_counter_ns()
            work.wait()
            w += time.perf_counter_ns() - t1
            p += t1 - t0
        post.append(p / calls * 1e-9)
        wait.append(w / calls * 1e-9)
    return statistics.median(post), statistics.median(wait)


def fsdp2_model(size):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    model = resnet_style()
    mesh = init_device_mesh("cpu", (size,))
    for layer in model:
        if isinstance(layer, Block):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train_steps(model, args):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, 32, 32)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return timed(step, args.ddp_steps, args.reps)


def rank_main(rank, size, backend, init, args, out):
    torch.set_num_threads(1)
    if backend == "tnt-before":  # another build's tntcomm, as "tnt"
        sys.path.insert(0, args.tnt_before)
        backend = "tnt"
    if backend == "tnt":
        import tntcomm.torch  # noqa: F401
    turns = backend == "fake-turns"
    if turns:
        backend = "fake"
    if backend == "fake":
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", store=FakeStore(), rank=rank,
                                world_size=size)
    else:
        dist.init_process_group(backend, init_method=init, rank=rank,
                                world_size=size)
    res = {}
    cpu = {}
    for nbytes in args.sizes:
        t = torch.ones(max(1, nbytes // 4))
        calls = max(3, min(2000, int(2e6 // max(nbytes, 1024))))
        used = []
        if turns:
            def call(t=t):
                dist.all_reduce(t)
                os.sched_yield()
        else:
            def call(t=t):
                dist.all_reduce(t)
        secs = timed(call, calls, args.reps, used)
        res[nbytes] = secs
        cpu[nbytes] = used[0]
    torch.save(cpu, "%s.cpu%d" % (out, rank))  # every rank's own
    if backend == "fake":  # no training: nothing is exchanged
        if rank == 0:
            torch.save(res, out)
        dist.destroy_process_group()
        return
    if args.layers:
        res["post"], res["wait"] = layers(2000, args.reps)
    if args.ddp_steps:
        torch.manual_seed(1)
        model = torch.nn.parallel.DistributedDataParallel(resnet_style())
        res["ddp"] = train_steps(model, args)
        del model
        torch.manual_seed(1)
        res["fsdp2"] = train_steps(fsdp2_model(size), args)
    if rank == 0:
        torch.save(res, out)
    dist.barrier()
    dist.destroy_process_group()


def library_time(exe, size, reps):
    """bench/tnt-bench's median in-place 8 B allreduce at `size` ranks
    (us), the library alone; None without the program."""
    if not exe:
        return None
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "lib.json")
        for _ in range(reps):
            subprocess.run([exe, "-N", str(size), "allreduce", "--size", "8",
                            "-n", "2000", "-w", "200", "-c", "0",
                            "--inplace-only", "--json", out], check=True,
                           stdout=subprocess.DEVNULL)
            with open(out) as f:
                times.append(json.load(f)["rows"][0]["in_place"]["time_us"])
    return statistics.median(times) * 1e-6


def cell(v):
    if v is None:
        return "-"
    return "%.1f us" % (v * 1e6) if v < 1e-2 else "%.2f ms" % (v * 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--backends", nargs="+",
                    default=["tnt", "gloo", "mpi", "fake"])
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ddp-steps", type=int, default=5,
                    help="timed DDP and FSDP2 steps per batch (0: none)")
    ap.add_argument("--batch", type=int, default=32,
                    help="DDP and FSDP2 micro-batch per rank")
    ap.add_argument("--layers", action="store_true",
                    help="time posting and waiting of a small call apart")
    ap.add_argument("--tnt-bench", metavar="EXE",
                    help="bench/tnt-bench, for the library's own time")
    ap.add_argument("--tnt-before", metavar="PATH",
                    help="another build's plugins/python: backend "
                    "tnt-before")
    args = ap.parse_args()
    if args.tnt_before:
        args.tnt_before = os.path.abspath(args.tnt_before)
    have = {"gloo": dist.is_gloo_available(), "mpi": dist.is_mpi_available(),
            "tnt": True, "fake": True, "fake-turns": True,
            "tnt-before": bool(args.tnt_before)}
    backends = []
    for b in args.backends:
        if have.get(b, True):
            backends.append(b)
        else:
            print("# %s: not available in this torch build, left out" % b)
    cores = len(os.sched_getaffinity(0))
    print("# load average at the start: %s; %d cores" % (" ".join(
        "%.1f" % x for x in os.getloadavg()), cores))
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.ranks:
            results = {}
            bound = {}  # backend -> size -> sum of ranks' CPU / cores
            percpu = {}  # backend -> size -> each rank's CPU per call
            for b in backends:
                out = os.path.join(tmp, "%s%d.pt" % (b, size))
                init = "file://" + os.path.join(tmp, "init-%s-%d" % (b, size))
                mp.spawn(rank_main, args=(size, b, init, args, out),
                         nprocs=size)
                results[b] = torch.load(out)
                ranks = [torch.load("%s.cpu%d" % (out, r))
                         for r in range(size)]
                percpu[b] = {k: [c[k] for c in ranks] for k in args.sizes}
                bound[b] = {k: sum(v) / cores for k, v in percpu[b].items()}
            lib = library_time(args.tnt_bench, size, args.reps)
            print("\n## p = %d (rank 0's median time per call; bound: the "
                  "ranks' CPU per call / %d cores)" % (size, cores))
            real = [b for b in backends if not b.startswith("fake")]
            head = ["size"] + backends + \
                   ["%s/%s" % (real[0], b) for b in real[1:]] + \
                   ["%s bound" % b for b in backends]
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            keys = list(args.sizes) + (["ddp", "fsdp2"] if args.ddp_steps
                                       else [])
            names = {"ddp": "DDP step", "fsdp2": "FSDP2 step"}
            for k in keys:
                vals = [results[b].get(k) for b in backends]
                cells = [names.get(k) or human(k)] + [cell(v) for v in vals]
                cells += ["%.2f" % (results[real[0]][k] / results[b][k])
                          for b in real[1:]]
                cells += [cell(bound[b].get(k)) for b in backends]
                print("| " + " | ".join(cells) + " |")
            small = min(args.sizes)
            for b in backends:
                print("%s, %s: CPU per call and rank %s" % (
                    b, human(small), ", ".join(
                        cell(c) for c in percpu[b][small])))
            for tnt in ("tnt", "tnt-before"):
                if "fake" not in results or tnt not in results:
                    continue
                floor = results["fake"][small]
                t = results[tnt][small]
                goal = 1.5 * floor + (lib or 0.0)
                print("\nthe way in, %s: %s %s; torch's floor (fake) %s; "
                      "the library alone %s; goal 1.5 x floor + library = "
                      "%s; %s / goal = %.2f; the CPU bound %s explains "
                      "%.0f%% of it, %s left" % (
                          human(small), tnt, cell(t), cell(floor), cell(lib),
                          cell(goal), tnt, t / goal, cell(bound[tnt][small]),
                          100 * bound[tnt][small] / t,
                          cell(max(0.0, t - bound[tnt][small]))))
                if "fake-turns" in results:
                    turns = results["fake-turns"][small]
                    print("the way in taking turns, %s: %s / fake-turns "
                          "(%s) = %.2f; goal 1.5 x fake-turns + library = "
                          "%s; %s / that goal = %.2f" % (
                              human(small), tnt, cell(turns), t / turns,
                              cell(1.5 * turns + (lib or 0.0)), tnt,
                              t / (1.5 * turns + (lib or 0.0))))
            if args.layers:
                for b in real:
                    print("%s, 8 B: posting %s, waiting %s" % (
                        b, cell(results[b]["post"]),
                        cell(results[b]["wait"])))
            print("# load average now: %s" % " ".join(
                "%.1f" % x for x in os.getloadavg()))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
