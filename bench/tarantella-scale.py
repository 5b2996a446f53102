"""Predicted data-parallel speedup of a training step past one machine,
from the bucket plan of our gradient fusion, the cost model's allreduce
(tnt-sim) and a model of how backprop hands the gradients over; for the
configurations of Tarantella's published results (docs/scale.md,
"Tarantella's results against the model"). On paper: nothing is sent.

    python3 bench/tarantella-scale.py --bench build/bench/tnt-bench \\
        --sim build/tools/tnt-sim [--markdown]

Per configuration (model, ranks p, ranks per host, link, per-device
throughput, micro-batch):

- compute: one device's step takes T = micro-batch / throughput, a third
  forward and two thirds backprop (backprop costs about twice the
  forward pass);
- the gradients, in backprop order, as `tnt-bench fusion --model M
  --dry-run` registers them, become ready during backprop at times given
  by the --ready rule: "params" (a tensor's share of backprop time is its
  share of the parameters), "tensors" (every tensor the same share) or
  "end" (all at the end of backprop: no overlap);
- the buckets of the plan (the library's default threshold) are reduced
  one after another in plan order, each starting when its last tensor is
  ready and the previous bucket is done, taking the time the cost model
  gives the selection table's algorithm for its size at that p and layout
  (log-log interpolation between tnt-sim's power-of-two rows), plus, for
  devices whose gradients live in device memory, a copy to the host and
  back at --stage GB/s;
- the step ends when backprop and the last bucket are done; the speedup
  over one device at the same micro-batch is p * T / step.

Not modelled: the input pipeline, the optimizer's update, stragglers and
OS noise, congestion (see docs/scale.md, "The cost model").
"""
import argparse
import bisect
import math
import re
import subprocess
import sys

# name, model, p, ranks per host, tnt-sim link options, samples per
# second per device, micro-batch, staging GB/s (0: host memory), the
# published speedup
CONFIGS = [
    ("ResNet-50, 256 CPU processes (SuperMUC-NG)", "resnet50", 256, 2,
     ["-n", "roce-100g"], 38.7, 64, 0.0, 62),
    ("ResNet-50, 96 V100 (HPC-DA)", "resnet50", 96, 6,
     ["-n", "hdr-ib"], 412.0, 64, 25.0, 57),
    ("Transformer-big, 96 V100 (HPC-DA)", "transformer-big", 96, 6,
     ["-n", "hdr-ib"], 7635.0, 4096, 25.0, 34),
]

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def plan(bench, model):
    """The plan's buckets, in plan order: (first tensor, last tensor,
    bytes), tensors numbered in backprop order."""
    out = subprocess.run([bench, "fusion", "--model", model, "--dry-run"],
                         check=True, capture_output=True, text=True).stdout
    buckets = []
    for line in out.splitlines():
        m = re.match(r"bucket (\d+): tensors (\d+)-(\d+) .*?(\d+) bytes",
                     line)
        if m:
            b, lo, hi, nbytes = map(int, m.groups())
            buckets.append((lo, hi, nbytes))
    if not buckets:
        raise SystemExit("no bucket plan from %s fusion --dry-run" % bench)
    return buckets


def sim_table(sim, p, rph, link, largest):
    """{size: seconds} of the selection table's algorithm."""
    top = 1 << max(10, math.ceil(math.log2(max(largest, 1))))
    cmd = [sim, "-p", str(p), "-r", str(rph), "-b", "256", "-e", str(top),
           "-f", "2", "-m"] + link
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    header, table = None, {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "size":
            header = cells
            continue
        if header is None or len(cells) != len(header) or \
                cells[0].startswith("-"):
            continue
        num, unit = cells[0].split()
        size = int(num) * UNITS[unit]
        pick = cells[header.index("table")]
        t = cells[header.index(pick)]
        if t not in ("-", ""):
            table[size] = float(t) * 1e-6
    if not table:
        raise SystemExit("no rows from %s" % " ".join(cmd))
    return table


def interp(table, n):
    sizes = sorted(table)
    if n <= sizes[0]:
        return table[sizes[0]]
    i = bisect.bisect_left(sizes, n)
    if i == len(sizes):
        a, b = sizes[-2], sizes[-1]
    else:
        a, b = sizes[i - 1], sizes[i]
    la, lb = math.log(a), math.log(b)
    f = (math.log(n) - la) / (lb - la)
    return math.exp(math.log(table[a]) * (1 - f) + math.log(table[b]) * f)


def tensor_bytes(buckets):
    """Per tensor (backprop order) its bytes, its bucket's total spread
    evenly over the bucket's tensors (the dry run gives bucket totals).
    A bucket starts when its last tensor is ready, and under the
    "params" rule that time depends on the totals up to it only, so the
    spreading changes no result."""
    sizes = []
    for lo, hi, nbytes in buckets:
        k = hi - lo + 1
        sizes += [nbytes / k] * k
    return sizes


def step(buckets, table, T, rule, stage):
    """(step time, exposed communication, all buckets' reduction time)
    for one device's compute T."""
    fwd, bwd = T / 3.0, 2.0 * T / 3.0
    sizes = tensor_bytes(buckets)
    n = len(sizes)
    total = sum(sizes)
    ready = []
    acc = 0.0
    for i, s in enumerate(sizes):
        if rule == "params":
            acc += s / total
        elif rule == "tensors":
            acc = (i + 1) / n
        else:
            acc = 1.0
        ready.append(fwd + bwd * acc)
    end = busy = 0.0
    for lo, hi, nbytes in buckets:
        cost = interp(table, nbytes)
        if stage:
            cost += 2.0 * nbytes / (stage * 1e9)
        end = max(end, ready[hi]) + cost
        busy += cost
    total_step = max(T, end)
    return total_step, total_step - T, busy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="build/bench/tnt-bench")
    ap.add_argument("--sim", default="build/tools/tnt-sim")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", type=int, nargs="*",
                    help="configuration indexes (default: all)")
    ap.add_argument("--comm-factor", type=float, default=1.0,
                    help="multiply every allreduce time by this (the "
                    "model is optimistic: what if it is off by F?)")
    args = ap.parse_args()
    rows = []
    for k, (name, model, p, rph, link, tput, micro, stage, pub) in \
            enumerate(CONFIGS):
        if args.only and k not in args.only:
            continue
        buckets = plan(args.bench, model)
        largest = max(b[2] for b in buckets)
        T = micro / tput
        variants = [("as stated", link, T, stage)]
        # what moves the result: 3x faster devices (mixed precision),
        # half the inter-host bandwidth, no staging copies
        fast = T / 3.0
        half = link + ["--bw-inter", "%g" % (_bw(link) / 2)]
        variants += [("devices 3x faster", link, fast, stage),
                     ("half the inter-host bandwidth", half, T, stage)]
        tables = {}
        for label, lk, t, st in variants:
            key = tuple(lk)
            if key not in tables:
                tables[key] = {n: args.comm_factor * t for n, t in
                               sim_table(args.sim, p, rph, lk,
                                         largest).items()}
            res = {}
            for rule in ("params", "tensors", "end"):
                s, exposed, busy = step(buckets, tables[key], t, rule, st)
                res[rule] = (p * t / s, exposed)
            rows.append((name, len(buckets), t, busy, label, res, pub))
    if args.markdown:
        print("| configuration | buckets | variant | step compute (ms) | "
              "allreduces (ms) | speedup, ready by parameters | by "
              "tensors | no overlap | exposed comm., by parameters (ms) | "
              "Tarantella |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, nb, t, busy, label, res, pub in rows:
        cells = (name, nb, label, 1e3 * t, 1e3 * busy, res["params"][0],
                 res["tensors"][0], res["end"][0], 1e3 * res["params"][1],
                 pub)
        if args.markdown:
            print("| %s | %d | %s | %.0f | %.1f | %.1f | %.1f | %.1f | "
                  "%.1f | %dx |" % cells)
        else:
            print("%s; %d buckets; %s: compute %.0f ms, allreduces %.1f "
                  "ms; speedup %.1f (params) %.1f (tensors) %.1f (no "
                  "overlap); exposed %.1f ms; Tarantella %dx" % cells)
    return 0


def _bw(link):
    """The inter-host bandwidth (GB/s) a link's options give."""
    if "--bw-inter" in link:
        return float(link[link.index("--bw-inter") + 1])
    preset = link[link.index("-n") + 1]
    return {"hdr-ib": 24.0, "roce-100g": 12.0, "tcp-25g": 2.9}[preset]


if __name__ == "__main__":
    sys.exit(main())
