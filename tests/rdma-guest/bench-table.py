#!/usr/bin/env python3
"""Turns the output of a bench.cmds run (run.sh ... bench.cmds > LOG)
into the Markdown tables of docs/verbs.md: per size, ib_write_bw's
average bandwidth, ib_send_lat's typical latency, and tnt-bench
allreduce over verbs and over TCP (out-of-place time; busbw computed from
the time, since tnt-bench prints GB/s with two decimals), with the ratios
of verbs to ib_write_bw and to TCP; and Open MPI with UCX (bench-mpi.sh)
with the ratio of verbs to it (its time over verbs' time: above 1, verbs
is faster). Bandwidths in MB/s (10^6 B/s). Columns whose step is not in
the log show "-". Then
the crossover sweeps: out-of-place time per bounce buffer size (each
pass, and their mean) and with the registration cache on.
    usage: bench-table.py LOG
"""
import re
import sys


def steps(text):
    """The output of each step, keyed by its command line."""
    out = {}
    parts = re.split(r"^=== \[[0-9.]+ s\] step [0-9]+: (.*)$", text,
                     flags=re.M)
    for i in range(1, len(parts) - 1, 2):
        out[parts[i]] = parts[i + 1]
    return out


def find(st, *words):
    for cmd, body in st.items():
        if all(w in cmd for w in words):
            return body
    return ""


def perftest(body, col):
    """size -> column `col` of perftest's table (the client's, the last
    one printed for each size)."""
    rows = {}
    for line in body.splitlines():
        f = line.split()
        if len(f) > col and f[0].isdigit() and f[1].isdigit():
            try:
                rows[int(f[0])] = float(f[col])
            except ValueError:
                pass
    return rows


def bench(body):
    """size -> (out-of-place time in us, busbw in MB/s) of tnt-bench at
    p = 2 (busbw = algbw there)."""
    rows = {}
    for line in body.splitlines():
        f = re.sub(r"^\[[0-9]+\]", "", line).split()
        if len(f) >= 9 and f[0].isdigit() and f[2] in ("f32",):
            size, t = int(f[0]), float(f[5])
            rows[size] = (t, size / t if t > 0 else 0.0)
    return rows


def mpi(body):
    """size -> out-of-place time in us of mpi_allreduce_bench (one
    'mpi label=... bytes=N ... time_us=T ... check=ok' line per size; a
    size whose check failed is left out)."""
    rows = {}
    for m in re.finditer(r"^mpi .*?bytes=([0-9]+) .*?time_us=([0-9.]+)"
                         r".*?check=(\w+)", body, flags=re.M):
        if m.group(3) == "ok":
            rows[int(m.group(1))] = float(m.group(2))
    return rows


def main():
    text = open(sys.argv[1], errors="replace").read()
    st = steps(text)
    bw = perftest(find(st, "ib_write_bw"), 3)
    lat = perftest(find(st, "ib_send_lat"), 4)
    vb = bench(find(st, "TNT_TRANSPORT=verbs", "-b 8 "))
    tcp = bench(find(st, "bench-tcp-pair.sh"))
    ompi = mpi(find(st, "bench-mpi.sh"))
    print("| size | ib_write_bw MB/s | ib_send_lat us | verbs time us | "
          "verbs busbw MB/s | TCP time us | TCP busbw MB/s | "
          "Open MPI/UCX time us | verbs / ib_write_bw | verbs / TCP | "
          "verbs / Open MPI |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sorted(set(vb) | set(tcp) | set(ompi)):
        v, t = vb.get(size), tcp.get(size)
        b, l = bw.get(size), lat.get(size)
        o = ompi.get(size)

        def num(x, fmt):
            return fmt % x if x is not None else "-"
        r1 = num(v[1] / b if v and b else None, "%.2f")
        r2 = num(v[1] / t[1] if v and t and t[1] else None, "%.2f")
        r3 = num(o / v[0] if v and o and v[0] else None, "%.2f")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            size, num(b, "%.2f"), num(l, "%.0f"),
            num(v[0] if v else None, "%.0f"), num(v[1] if v else None, "%.3f"),
            num(t[0] if t else None, "%.0f"), num(t[1] if t else None, "%.3f"),
            num(o, "%.0f"), r1, r2, r3))


def crossover(st):
    """label -> [size -> time us] per pass, from the '### ' blocks."""
    body = find(st, "for e in")
    passes = []
    for block in re.split(r"^### ", body, flags=re.M)[1:]:
        label = block.split()[0].split("=")[1]
        passes.append((label, {k: v[0] for k, v in bench(block).items()}))
    cache = {k: v[0] for k, v in
             bench(find(st, "TNT_IB_REG_CACHE=1")).items()}
    return passes, cache


def main_crossover(st):
    passes, cache = crossover(st)
    labels = []
    for label, _ in passes:
        if label not in labels:
            labels.append(label)
    sizes = sorted({s for _, rows in passes for s in rows})
    print()
    print("| size | " + " | ".join("%s: passes, mean us" % l
                                      for l in labels) +
          " | 8k + cache us |")
    print("|---:|" + "---:|" * (len(labels) + 1))
    for size in sizes:
        cells = []
        for l in labels:
            ts = [rows[size] for lab, rows in passes
                  if lab == l and size in rows]
            cells.append("%s; %.0f" % (" / ".join("%.0f" % t for t in ts),
                                       sum(ts) / len(ts)) if ts else "-")
        c = cache.get(size)
        cells.append("%.0f" % c if c is not None else "-")
        print("| %d | %s |" % (size, " | ".join(cells)))


if __name__ == "__main__":
    main()
    main_crossover(steps(open(sys.argv[1], errors="replace").read()))
