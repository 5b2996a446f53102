#!/usr/bin/env python3
"""plot-calibration.py - predicted against measured, from calibrate-model.py.

    plot-calibration.py OUT.png NAME=cal.json [NAME=cal.json ...]

One panel per JSON file (a link: loopback TCP, shared memory, a namespace
test bed), log-log, one point per (p, size, collective, algorithm) row,
coloured by p; the diagonal is a perfect model and the band around it is
the +-30% that calibrate-model.py marks. Needs matplotlib (Debian:
python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, panels = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2),
                             squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, (name, path) in zip(axes[0], panels):
        with open(path) as f:
            d = json.load(f)
        rows = [r for r in d["rows"] if r["predicted_us"]]
        ps = sorted({r["p"] for r in rows})
        for i, p in enumerate(ps):
            pr = [r for r in rows if r["p"] == p]
            ax.scatter([r["measured_us"] for r in pr],
                       [r["predicted_us"] for r in pr], s=9,
                       color=cmap(i / max(1, len(ps) - 1)), label="p=%d" % p)
        lo = min(min(r["measured_us"], r["predicted_us"]) for r in rows) / 2
        hi = max(max(r["measured_us"], r["predicted_us"]) for r in rows) * 2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [0.7 * lo, 0.7 * hi], [1.3 * lo, 1.3 * hi],
                        color="grey", alpha=0.2, lw=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        fit = ",".join(str(p) for p in d.get("fit_procs", ps))
        ax.set_title("%s (fit on p=%s)" % (name, fit), fontsize=9)
        ax.set_xlabel("measured (us)")
        ax.set_ylabel("predicted (us)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
