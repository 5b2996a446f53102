"""Compares the proof runs of check_keras.py (OUT/p{P}_*.npz, p{P}.json)
of the rank counts given against the first (p = 1) and prints the largest
relative difference of the weights (per tensor: norm of the difference
over the tensor's norm) and of the evaluate results.

    compare_keras.py OUT RTOL P1 P2 ...      (fails above RTOL)
    compare_keras.py --bitwise OUT_A OUT_B P (two runs of one p: equal bits)
"""
import json
import os
import sys

import numpy as np


def load(out, p, name):
    with np.load(os.path.join(out, "p%d_%s.npz" % (p, name))) as z:
        return [z["arr_%d" % i] for i in range(len(z.files))]


def main(argv):
    if argv[0] == "--bitwise":
        a, b, p = argv[1], argv[2], int(argv[3])
        for name in ("lenet", "mlp"):
            wa, wb = load(a, p, name), load(b, p, name)
            if len(wa) != len(wb) or any(
                    x.tobytes() != y.tobytes() for x, y in zip(wa, wb)):
                print("rerun at p = %d: %s weights differ" % (p, name))
                return 1
        ja = json.load(open(os.path.join(a, "p%d.json" % p)))
        jb = json.load(open(os.path.join(b, "p%d.json" % p)))
        if ja != jb:
            print("rerun at p = %d: results differ: %r %r" % (p, ja, jb))
            return 1
        print("rerun at p = %d: bitwise the same weights and results" % p)
        return 0
    out, rtol, ps = argv[0], float(argv[1]), [int(p) for p in argv[2:]]
    worst = 0.0
    ref_json = json.load(open(os.path.join(out, "p%d.json" % ps[0])))
    for p in ps[1:]:
        for name in ("lenet", "mlp"):
            ref, got = load(out, ps[0], name), load(out, p, name)
            for i, (r, g) in enumerate(zip(ref, got)):
                d = float(np.linalg.norm((g - r).astype(np.float64)) /
                          max(np.linalg.norm(r.astype(np.float64)), 1e-30))
                worst = max(worst, d)
                if d > rtol:
                    print("p = %d: %s tensor %d differs from p = %d by %.3g "
                          "(> %g)" % (p, name, i, ps[0], d, rtol))
                    return 1
        j = json.load(open(os.path.join(out, "p%d.json" % p)))
        for key in ("lenet_eval", "mlp_eval", "lenet_loss", "mlp_loss"):
            for r, g in zip(ref_json[key], j[key]):
                d = abs(g - r) / max(abs(r), 1e-30)
                worst = max(worst, d)
                if d > rtol:
                    print("p = %d: %s %r against %r (%.3g > %g)"
                          % (p, key, g, r, d, rtol))
                    return 1
    print("p = %s: weights and evaluate results agree with p = %d; largest "
          "relative difference %.3g (bound %g)" % (
              ", ".join(map(str, ps[1:])), ps[0], worst, rtol))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
