"""Overlap of communication with backprop in tntcomm.keras, from a merged
timeline (TNT_TIMELINE, docs/timeline.md) of a training run: in a step
(fusion iteration), a bucket is posted, i.e. its allreduce starts, before
the step's last gradient is handed to the fusion (its `ready`), which can
only happen when the TensorFlow op reports each gradient as backprop
computes it. Prints per rank how many steps overlapped and how many had a
bucket finished before the last gradient; fails unless every rank had at
least half of its steps (with two or more buckets) overlapping.

Usage: check_keras_overlap.py TIMELINE.json
"""
import collections
import json
import sys


def main(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    last_ready = collections.defaultdict(float)
    posts = collections.defaultdict(list)
    ends = collections.defaultdict(list)
    for e in events:
        a = e.get("args", {})
        if e.get("cat") != "fusion" or "iter" not in a:
            continue
        key = (e["pid"], a["fusion"], a["iter"])
        if e.get("name") == "ready":
            last_ready[key] = max(last_ready[key], e["ts"])
        elif str(e.get("name", "")).startswith("bucket "):
            posts[key].append(a["post"])
            ends[key].append(a["end"])
    ok = True
    ranks = sorted({k[0] for k in posts})
    if not ranks:
        print("no fusion buckets in %s" % path)
        return 1
    for r in ranks:
        steps = [k for k in posts if k[0] == r and len(posts[k]) >= 2]
        overlap = sum(1 for k in steps if min(posts[k]) < last_ready[k])
        finished = sum(1 for k in steps if min(ends[k]) < last_ready[k])
        print("rank %d: %d of %d steps posted a bucket before the last "
              "gradient was ready, %d had one reduced by then"
              % (r, overlap, len(steps), finished))
        if not steps or 2 * overlap < len(steps):
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
