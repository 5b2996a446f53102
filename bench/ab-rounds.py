#!/usr/bin/env python3
"""Interleaved A/B rounds at one size: tnt-bench under different
environments (an algorithm forced, a segment size, a spin) beside the
peers, each configuration once per round, the order rotated from round
to round, each ratio taken within its round.

On a small shared machine a configuration's time moves by 2x between
minutes; two configurations run in the same minute move together. So
the first label is the baseline, and every other label's figure is the
median over the rounds of (its time / the baseline's time in that
round), with the range of those ratios: a range that straddles 1 says
the difference is not shown.

Usage: bench/ab-rounds.py [-r ROUNDS] [-p P] [-s SIZE] [-n ITERS]
                          LABEL=SPEC [LABEL=SPEC ...]
SPEC:
  tnt[:VAR=VALUE,...]   tnt-bench allreduce (f32 sum, in place, malloc'd
                        buffers, -c 0) with these environment variables,
                        e.g. tnt:TNT_TRANSPORT=tcp,TNT_SEGMENT_BYTES=64k
  ompi:BTL              Open MPI's allreduce bench over btl BTL (tcp or
                        vader), run as bench/compare-peers.sh runs it
  raw                   tcp-rawring (the bytes of a ring allreduce over
                        loopback TCP, no reduction)
tnt-bench is $TNT_BENCH or build/bench/tnt-bench; tcp-rawring the one
beside it or $TCP_RAWRING; the peers' binaries in $PEERS_BIN
(/tmp/tnt-peers/bin: ../shared/peers/run-all.sh deps build).

Columns: median time per call (us, the slowest rank's mean, as each
bench reports it); ratio to the baseline; CPU time per call of all
ranks and threads (getrusage of the run divided by its timed calls,
start-up included, so an upper bound that short runs inflate); and
voluntary context switches per call, the same way (sleeps).
"""
import argparse
import atexit
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

OMPI = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe",
        "--mca", "pml", "ob1", "--mca", "btl_tcp_if_include", "lo",
        "--mca", "oob_tcp_if_include", "lo"]
UNITS = {"K": 10, "M": 20, "G": 30}


def size_bytes(text):
    """'64K' -> 65536; a plain number is bytes."""
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", text)
    if not m:
        raise ValueError(f"not a size: '{text}' (a number, with K, M or G)")
    return int(m.group(1)) << UNITS.get(m.group(2).upper(), 0)


def parse_spec(label, spec):
    """'tnt:A=1,B=2' -> ('tnt', {'A': '1', 'B': '2'}); checks the form."""
    kind, _, rest = spec.partition(":")
    if kind == "tnt":
        env = {}
        for kv in filter(None, rest.split(",")):
            k, eq, v = kv.partition("=")
            if not eq or not k:
                raise ValueError(f"{label}: '{kv}' is not VAR=VALUE")
            env[k] = v
        return kind, env
    if kind == "ompi" and rest in ("tcp", "vader"):
        return kind, rest
    if kind == "raw" and not rest:
        return kind, None
    raise ValueError(f"{label}: '{spec}' is not tnt[:VAR=VALUE,...], "
                     "ompi:tcp, ompi:vader or raw")


class Runner:
    def __init__(self, opts):
        self.o = opts
        self.bench = os.environ.get("TNT_BENCH", "build/bench/tnt-bench")
        self.rawring = os.environ.get(
            "TCP_RAWRING",
            os.path.join(os.path.dirname(self.bench), "tcp-rawring"))
        self.peers = os.environ.get("PEERS_BIN", "/tmp/tnt-peers/bin")
        self.tmp = tempfile.mkdtemp(prefix="ab-rounds.")
        atexit.register(shutil.rmtree, self.tmp, True)

    def check(self, kind):
        """The binary a kind needs, or a ValueError saying what is missing."""
        need = {"tnt": self.bench, "raw": self.rawring,
                "ompi": os.path.join(self.peers,
                                     "mpi_allreduce_bench.openmpi")}[kind]
        if not os.access(need, os.X_OK):
            raise ValueError(f"{need} is not built")

    def command(self, kind, arg):
        b, p = self.o.bytes, str(self.o.p)
        if kind == "tnt":
            js = os.path.join(self.tmp, "row.json")
            return [self.bench, "-N", p, "allreduce", "--size", str(b),
                    "-n", str(self.o.n), "-w", "5", "-c", "0",
                    "--inplace-only", "--json", js], js
        if kind == "ompi":
            return OMPI + ["-np", p, "--mca", "btl", arg + ",self",
                           os.path.join(self.peers,
                                        "mpi_allreduce_bench.openmpi"),
                           "--sizes", str(b), "--min-time", "0.3",
                           "--inplace"], None
        return [self.rawring, "--p", p, "--sizes", str(b),
                "--min-time", "0.3"], None

    def run(self, kind, arg):
        """(us per call, CPU us per call, voluntary switches per call)."""
        env = dict(os.environ)
        if kind == "tnt":
            env.update(arg)
        cmd, js = self.command(kind, arg)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {res.returncode}: "
                               f"{res.stderr.strip()[-400:]}")
        if js:
            t = json.load(open(js))["rows"][0]["in_place"]["time_us"]
            calls = self.o.n
        else:
            m = re.search(r" iters=(\d+) .*time_us=([0-9.]+)", res.stdout)
            if not m:
                raise RuntimeError(f"{cmd[0]}: no result line in its output")
            calls, t = int(m.group(1)), float(m.group(2))
        cpu = (after.ru_utime + after.ru_stime
               - before.ru_utime - before.ru_stime)
        return t, cpu / calls * 1e6, (after.ru_nvcsw - before.ru_nvcsw) / calls


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("-r", type=int, default=10, dest="rounds")
    ap.add_argument("-p", type=int, default=2)
    ap.add_argument("-s", default="1M", dest="size")
    ap.add_argument("-n", type=int, default=100,
                    help="tnt-bench's timed calls a run")
    ap.add_argument("configs", nargs="+", metavar="LABEL=SPEC")
    o = ap.parse_args()
    try:
        o.bytes = size_bytes(o.size)
        if o.rounds < 1 or o.p < 1 or o.n < 1:
            raise ValueError("-r, -p and -n want numbers >= 1")
        configs = []
        for c in o.configs:
            label, eq, spec = c.partition("=")
            if not eq or not label:
                raise ValueError(f"'{c}' is not LABEL=SPEC")
            configs.append((label,) + parse_spec(label, spec))
        if len({c[0] for c in configs}) != len(configs):
            raise ValueError("labels must differ")
        runner = Runner(o)
        for _, kind, _ in configs:
            runner.check(kind)
    except ValueError as e:
        print(f"ab-rounds: {e}", file=sys.stderr)
        return 2
    got = {c[0]: [] for c in configs}
    try:
        for r in range(o.rounds):
            k = r % len(configs)
            for label, kind, arg in configs[k:] + configs[:k]:
                got[label].append(runner.run(kind, arg))
            print(f"round {r + 1}: " + " ".join(
                f"{c[0]} {got[c[0]][-1][0]:.1f}" for c in configs),
                file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"ab-rounds: {e}", file=sys.stderr)
        return 1
    base = configs[0][0]
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"allreduce f32 sum in place, p = {o.p}, {o.size}, {o.rounds} "
          f"rounds, load {load} at the end\n")
    print(f"| label | us per call | / {base} (range) | CPU us per call "
          "(start-up included) | voluntary switches per call |")
    print("|---|---|---|---|---|")
    for label, _, _ in configs:
        rows = got[label]
        ratios = [rows[i][0] / got[base][i][0] for i in range(o.rounds)]
        print(f"| {label} | {statistics.median(x[0] for x in rows):.1f} | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-"
              f"{max(ratios):.2f}) | "
              f"{statistics.median(x[1] for x in rows):.0f} | "
              f"{statistics.median(x[2] for x in rows):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
