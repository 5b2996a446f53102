#!/usr/bin/env python3
"""calibrate-model.py - fit the cost model's alpha, beta, gamma to tnt-bench.

Times allreduce (and broadcast) with tnt-bench for every forced algorithm
at p = 2..8 and a sweep of sizes, asks tnt-sim for the model's own counts
of each algorithm (its critical path's latencies, bytes sent and bytes
reduced or copied, from the schedules the engine runs: lib/collectives/
model.c), fits

    T = n_alpha * alpha + n_beta * beta + n_gamma * gamma

by least squares on the relative error (times span six decades, so an
absolute fit would only see 64 MiB), then plays the model again with the
fitted figures and prints predicted against measured for every (p, size,
collective, algorithm), marking with '!' rows off by more than 30%.

The counts: tnt-sim with alpha 1000 us and everything else ~free gives
1000 n_alpha; with 1 us per byte on the link, n_beta; with 1 us per byte
of reduction and copy, n_gamma (copies are counted with reductions: one
compute resource, docs/scale.md, "The cost model"). o is left at 0 and
ends up inside alpha. The model takes the maximum over paths, so these
counts are a linearisation; the "predicted" column is the model itself
run with the fitted figures, not the linear sum.

Ranks on one host (--rph = p, the default: loopback TCP, shared memory)
fit the intra-host link; with --rph 1 (one rank per emulated host, the
namespace test bed: --launch) the inter-host link. Stdlib only.

    nice -n 19 python3 bench/calibrate-model.py --transport tcp \\
        --sizes 8,4K,256K,4M --procs 2,4,8 --iters 10

See docs/scale.md, "Calibration", for the full command and the netns form.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

ALLREDUCE_ALGOS = ["ring", "rd", "rabenseifner", "tree", "oneshot",
                   "direct"]
BCAST_ALGOS = ["binomial", "pipeline", "flat"]
FREE_GBPS = "1e9"  # a link or kernel this fast costs nothing at 64 MiB


def parse_size(s):
    s = s.strip()
    mul = 1
    for suf, m in (("k", 1 << 10), ("K", 1 << 10), ("M", 1 << 20),
                   ("G", 1 << 30)):
        if s.endswith(suf):
            s, mul = s[:-1], m
            break
    return int(s) * mul


def run(cmd, env=None, timeout=1800):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        sys.exit("calibrate-model: %s failed (%d):\n%s%s" %
                 (" ".join(cmd), r.returncode, r.stdout[-2000:],
                  r.stderr[-2000:]))
    return r.stdout


def sim(args, coll, p, sizes, link):
    """tnt-sim's predictions (us) as {(size, algo): t} for one p.

    link: (alpha_us, bw_gbps, gamma_gbps); every size is run on its own
    (-b S -e S) so that the sweep's sizes need not be a geometric series.
    """
    a, bw, g = link
    rph = p if args.rph == 0 else args.rph
    side = "intra" if rph >= p else "inter"
    out = {}
    for s in sizes:
        cmd = [args.sim, "-m", "-c", coll, "-p", str(p), "-r", str(rph),
               "-b", str(s), "-e", str(s),
               "--alpha-" + side, repr(a), "--bw-" + side, bw,
               "--o-intra", "0", "--o-inter", "0",
               "--gamma", g, "--copy", g]
        lines = [l for l in run(cmd).splitlines() if l.startswith("|")]
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        for row in lines[2:]:
            cells = [c.strip() for c in row.strip("|").split("|")]
            for name, val in zip(head[1:], cells[1:]):
                if name in ("table", "best", "table/best"):
                    continue
                out[(s, name)] = None if val == "-" else float(val)
    return out


def counts(args, coll, p, sizes):
    """{(size, algo): (n_alpha, n_beta_bytes, n_gamma_bytes)}."""
    ca = sim(args, coll, p, sizes, (1000.0, FREE_GBPS, FREE_GBPS))
    cb = sim(args, coll, p, sizes, (0.0, "0.001", FREE_GBPS))
    cg = sim(args, coll, p, sizes, (0.0, FREE_GBPS, "0.001"))
    res = {}
    for k, v in ca.items():
        if v is None or cb.get(k) is None or cg.get(k) is None:
            continue
        res[k] = (v / 1000.0, cb[k], cg[k])
    return res


def measure(args, coll, p, algo, sizes):
    """{size: time_us} from tnt-bench (in place; the model's form)."""
    env = dict(os.environ)
    env["TNT_TRANSPORT"] = args.transport
    algo_var = "TNT_ALLREDUCE_ALGO" if coll == "allreduce" else "TNT_BCAST_ALGO"
    env[algo_var] = algo
    # {xenv}: the variables this run sets, as a launcher's "-x VAR" list
    # (tnt-run refuses to forward a variable that is not set).
    xenv = "-x TNT_TRANSPORT -x " + algo_var
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "r.json")
        for s in sizes:
            launch = args.launch.format(p=p, bench=args.bench, xenv=xenv)
            cmd = shlex.split(launch) + [
                coll, "--size", str(s), "-n", str(args.iters),
                "-w", str(args.warmup), "--inplace-only", "--json", js]
            run(cmd, env=env)
            with open(js) as f:
                for row in json.load(f)["rows"]:
                    if row["bytes"] == s and row["in_place"]:
                        res[s] = row["in_place"]["time_us"]
    return res


def lstsq(rows, fixed):
    """Minimise sum(((x . c) - t) / t)^2 over x >= 0 (small active set).

    rows: [(coeffs[3], t)]; fixed: {index: value} held constant."""
    free = [i for i in range(3) if i not in fixed]
    while True:
        n = len(free)
        A = [[0.0] * n for _ in range(n)]
        b = [0.0] * n
        for c, t in rows:
            w = 1.0 / t
            rhs = t - sum(c[i] * v for i, v in fixed.items())
            for i in range(n):
                b[i] += c[free[i]] * w * rhs * w
                for j in range(n):
                    A[i][j] += c[free[i]] * w * c[free[j]] * w
        x = solve(A, b)
        if x is None:
            sys.exit("calibrate-model: the fit is singular (too few sizes "
                     "or algorithms?)")
        neg = [free[i] for i in range(n) if x[i] < 0]
        if not neg:
            out = dict(fixed)
            out.update({free[i]: x[i] for i in range(n)})
            return [out[i] for i in range(3)]
        fixed = dict(fixed)
        fixed[neg[0]] = 0.0
        free.remove(neg[0])


def solve(A, b):
    n = len(b)
    M = [A[i][:] + [b[i]] for i in range(n)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(M[r][c]))
        if abs(M[piv][c]) < 1e-300:
            return None
        M[c], M[piv] = M[piv], M[c]
        for r in range(n):
            if r != c:
                f = M[r][c] / M[c][c]
                for k in range(c, n + 1):
                    M[r][k] -= f * M[c][k]
    return [M[i][n] / M[i][i] for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transport", default="tcp",
                    help="TNT_TRANSPORT of the measured runs (tcp, shm)")
    ap.add_argument("--procs", default="2,3,4,5,6,7,8",
                    help="rank counts, comma separated")
    ap.add_argument("--sizes", default="8,64,512,4K,32K,256K,2M,16M,64M",
                    help="sizes in bytes (k/M/G suffixes)")
    ap.add_argument("--algos", default=",".join(ALLREDUCE_ALGOS))
    ap.add_argument("--bcast-algos", default=",".join(BCAST_ALGOS),
                    help="broadcast algorithms; empty: no broadcast")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rph", type=int, default=0,
                    help="ranks per host for the model (0: all on one host)")
    ap.add_argument("--gamma", type=float, default=0,
                    help="reduction GB/s, held fixed (e.g. from tnt-bench "
                         "kernels); 0: fitted")
    ap.add_argument("--launch", default="{bench} -N {p}",
                    help="how to start p ranks of tnt-bench ({p}, {bench}, and "
                         "{xenv}: -x VAR for each variable set)")
    ap.add_argument("--bench", default="build/bench/tnt-bench")
    ap.add_argument("--sim", default="build/tools/tnt-sim")
    ap.add_argument("--json", help="also write every row here")
    ap.add_argument("--fit-procs", default="",
                    help="fit on the rows of these rank counts only "
                         "(default: all); e.g. the p that have a core each")
    ap.add_argument("--fit-sizes", default="",
                    help="fit on the rows of these sizes only (default: "
                         "all); e.g. leave out a shaped link's burst")
    ap.add_argument("--replay", metavar="JSON",
                    help="take the measured times and counts from an "
                         "earlier --json instead of running tnt-bench")
    args = ap.parse_args()
    procs = [int(x) for x in args.procs.split(",")]
    sizes = [parse_size(x) for x in args.sizes.split(",")]
    plan = [("allreduce", a) for a in args.algos.split(",") if a]
    plan += [("broadcast", a) for a in args.bcast_algos.split(",") if a]

    data = []  # (p, size, coll, algo, coeffs, measured_us)
    if args.replay:
        with open(args.replay) as f:
            for r in json.load(f)["rows"]:
                if r["p"] in procs and r["bytes"] in sizes and \
                        (r["collective"], r["algorithm"]) in plan:
                    data.append((r["p"], r["bytes"], r["collective"],
                                 r["algorithm"],
                                 (r["n_alpha"], r["n_beta"], r["n_gamma"]),
                                 r["measured_us"]))
        procs = sorted({d[0] for d in data})
    for p in ([] if args.replay else procs):
        cnt = {coll: counts(args, coll, p, sizes)
               for coll in sorted({c for c, _ in plan})}
        for coll, algo in plan:
            meas = measure(args, coll, p, algo, sizes)
            for s in sizes:
                c = cnt[coll].get((s, algo))
                if c is None or s not in meas or meas[s] <= 0:
                    continue
                data.append((p, s, coll, algo, c, meas[s]))
        print("# p=%d measured" % p, file=sys.stderr, flush=True)

    # Coefficients in us per unit: alpha (us), beta (us/B), gamma (us/B).
    fixed = {2: 1e-3 / args.gamma} if args.gamma > 0 else {}
    fit_p = {int(x) for x in args.fit_procs.split(",") if x} or set(procs)
    fit_s = {parse_size(x) for x in args.fit_sizes.split(",") if x} or \
        set(sizes)
    x = lstsq([(c, t) for p, s, *_, c, t in data
               if p in fit_p and s in fit_s], fixed)
    alpha, beta, gamma = x
    bw = 1e-3 / beta if beta > 0 else float("inf")
    gbps = 1e-3 / gamma if gamma > 0 else float("inf")
    print("# transport %s, ranks per host %s, fitted on p = %s: alpha %.3f "
          "us, beta %.4g us/B (%.3f GB/s), gamma %.4g us/B (%.3f GB/s%s)" %
          (args.transport, args.rph or "p",
           ",".join(str(p) for p in sorted(fit_p)), alpha, beta, bw, gamma,
           gbps, ", fixed" if fixed else ""))

    # Predicted: the model itself with the fitted figures.
    link = (alpha, "%.6g" % min(bw, 1e9), "%.6g" % min(gbps, 1e9))
    pred = {}
    for p in procs:
        for coll in sorted({c for c, _ in plan}):
            for (s, algo), t in sim(args, coll, p, sizes, link).items():
                pred[(p, s, coll, algo)] = t
    print("| p | size (B) | collective | algorithm | measured us | "
          "predicted us | predicted/measured | off >30% |")
    print("|---:|---:|---|---|---:|---:|---:|---|")
    rows, off = [], 0
    for p, s, coll, algo, c, t in data:
        pt = pred.get((p, s, coll, algo))
        ratio = pt / t if pt else float("nan")
        bad = not (0.7 <= ratio <= 1.3)
        off += bad
        print("| %d | %d | %s | %s | %.2f | %.2f | %.2f | %s |" %
              (p, s, coll, algo, t, pt or -1, ratio, "!" if bad else ""))
        rows.append({"p": p, "bytes": s, "collective": coll,
                     "algorithm": algo, "measured_us": t, "predicted_us": pt,
                     "n_alpha": c[0], "n_beta": c[1], "n_gamma": c[2]})
    print("# %d of %d rows off by more than 30%%" % (off, len(rows)))
    for p in procs:
        pr = [r for r in rows if r["p"] == p and r["predicted_us"]]
        rs = sorted(r["predicted_us"] / r["measured_us"] for r in pr)
        if rs:
            print("# p = %d: %d of %d rows off by more than 30%%, median "
                  "predicted/measured %.2f" %
                  (p, sum(1 for q in rs if not 0.7 <= q <= 1.3), len(rs),
                   rs[len(rs) // 2]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"transport": args.transport, "alpha_us": alpha,
                       "fit_procs": sorted(fit_p),
                       "fit_sizes": sorted(fit_s),
                       "beta_us_per_byte": beta, "gamma_us_per_byte": gamma,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
