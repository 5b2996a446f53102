"""DistributedDataParallel on the digits data, one backend against another.

A small CNN with batch norm (8x8 digit images) is trained with DDP, SGD
with momentum, the global batch split evenly over the ranks, under backend
A and then backend B, from the same seed and the same batches. Checked:
every rank ends with bitwise the same parameters (within each backend), and A's parameters equal B's to a relative 1e-5 per tensor
(norm of the difference over the norm of the tensor: the two backends add
the same gradients in different orders, float32 rounding).

    python3 ddp_digits.py --ranks 2 --backends tnt gloo --data digits.csv.gz
"""
import argparse
import gzip
import os
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def load(path):
    with gzip.open(path, "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
    perm = np.random.default_rng(1).permutation(len(raw))
    x = torch.from_numpy(raw[perm, :64] / 16.0).reshape(-1, 1, 8, 8)
    y = torch.from_numpy(raw[perm, 64].astype(np.int64))
    return x, y


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(16 * 6 * 6, 10))


def rank_main(rank, size, backend, init, args, out):
    torch.set_num_threads(1)
    if backend == "tnt":
        import tntcomm.torch  # noqa: F401  registers "tnt"
    dist.init_process_group(backend, init_method=init, rank=rank,
                            world_size=size)
    x, y = load(args.data)
    model = torch.nn.parallel.DistributedDataParallel(
        make_model(args.seed), bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gb = args.global_batch
    per = gb // size
    rng = np.random.default_rng(args.seed)
    for step in range(args.steps):
        idx = torch.from_numpy(rng.choice(len(x), gb, replace=False))
        mine = idx[rank * per:(rank + 1) * per]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[mine]), y[mine])
        loss.backward()  # DDP averages the gradients over the ranks
        opt.step()
    # Parameters only: DDP broadcasts rank 0's buffers before each forward,
    # so after the last forward each rank's BatchNorm running statistics
    # are its own batch's (the same with every backend).
    state = {k: v.detach().clone() for k, v in
             model.module.named_parameters()}
    torch.save(state, "%s.%d.pt" % (out, rank))
    dist.barrier()
    dist.destroy_process_group()


def run(backend, size, args, tmp):
    init = "file://" + os.path.join(tmp, "init-%s-%d" % (backend, size))
    out = os.path.join(tmp, "%s-%d" % (backend, size))
    mp.spawn(rank_main, args=(size, backend, init, args, out), nprocs=size)
    states = [torch.load("%s.%d.pt" % (out, r)) for r in range(size)]
    for r in range(1, size):
        for k in states[0]:
            if not torch.equal(states[0][k], states[r][k]):
                sys.exit("%s, %d ranks: %s differs between rank 0 and "
                         "rank %d" % (backend, size, k, r))
    print("%s, %d ranks: parameters bitwise identical on all ranks" % (backend, size))
    return states[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--backends", nargs=2, default=["tnt", "gloo"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--bucket-mb", type=float, default=0.01,
                    help="DDP bucket_cap_mb (small: several buckets)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.ranks:
            a = run(args.backends[0], size, args, tmp)
            b = run(args.backends[1], size, args, tmp)
            worst = 0.0
            for k in b:
                if not b[k].is_floating_point():
                    if not torch.equal(a[k], b[k]):
                        sys.exit("%d ranks: %s differs" % (size, k))
                    continue
                d = float((a[k] - b[k]).norm() / b[k].norm())
                worst = max(worst, d)
                if not d <= args.rtol:
                    sys.exit("%d ranks: %s: relative difference %.3g > %g"
                             % (size, k, d, args.rtol))
            print("%d ranks: %s matches %s, max relative difference %.2g "
                  "(<= %g) over %d tensors" % (size, args.backends[0],
                                               args.backends[1], worst,
                                               args.rtol, len(b)))


if __name__ == "__main__":
    main()
