#!/usr/bin/env python3
"""torch_digits: the digits MLP of digits_train, in PyTorch, data-parallel
through tntcomm.torch.

    tnt-run -n 4 .venv/bin/python examples/torch_digits.py --epochs 10

(with PYTHONPATH=build/plugins/python from the build tree). Every rank
reads scikit-learn's digits.csv.gz, makes the same split and the same
shuffle from the seed and builds the model with its own seed; the master's
parameters are broadcast, so all start alike. For each global batch a rank
computes the loss of its micro-batch, scaled so that the average over
ranks is the mean over the global batch; DistributedOptimizer averages the
gradients during backward. The master prints the loss per epoch and the
test accuracy; the program fails unless all ranks end with bitwise the
same parameters and the accuracy reaches --min-accuracy.

Under tnt-run --elastic it survives the death of ranks: the step that
fails raises tntcomm's TntError (PEER_LOST); the survivors call
tntcomm.shrink(), take the state of the one that got furthest, split the
same global batch over themselves and go on (recover()). --kill-rank R
--kill-step S makes rank R kill itself at step S, to show it.

The functions above main() are shared with tests/python/check_torch.py,
which trains the same model serially and with DistributedDataParallel.
"""
import argparse
import os
import signal
import sys

import numpy as np
import torch

DEFAULT_DATA = ("/usr/lib/python3/dist-packages/sklearn/datasets/data/"
                "digits.csv.gz")


def load_digits(path, test_fraction=0.2, seed=1):
    """(x_train, y_train, x_test, y_test) as tensors; pixels in [0, 1]."""
    if not os.path.exists(path):
        sys.exit("torch_digits: cannot open the digits data '%s' (it comes "
                 "with scikit-learn: apt-get install python3-sklearn, or "
                 "give its path with --data)" % path)
    raw = np.loadtxt(path, delimiter=",", dtype=np.float32, ndmin=2)
    if raw.shape[1] != 65:
        sys.exit("torch_digits: %s: expected 65 columns, found %d"
                 % (path, raw.shape[1]))
    perm = np.random.default_rng(seed).permutation(len(raw))
    n_test = max(1, int(round(test_fraction * len(raw))))
    x = torch.from_numpy(raw[perm, :64] / 16.0)
    y = torch.from_numpy(raw[perm, 64].astype(np.int64))
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 10))


def global_batches(n, global_batch, epochs, seed, steps=0):
    """The sample indices of every global batch: the same shuffle on every
    rank; the last incomplete batch of an epoch is dropped. Stops after
    `steps` batches if steps > 0."""
    done = 0
    for epoch in range(epochs):
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        for k in range(n // global_batch):
            if steps and done == steps:
                return
            yield epoch, perm[k * global_batch:(k + 1) * global_batch]
            done += 1


def micro_loss(model, x, y, idx, lo, hi, size, global_batch):
    """This rank's share of the global mean loss, times the rank count: the
    average over ranks (op avg, or DDP) is then the global mean whatever
    the split."""
    local = torch.from_numpy(idx[lo:hi])
    out = model(x[local])
    return (torch.nn.functional.cross_entropy(out, y[local], reduction="sum")
            * (size / global_batch))


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def dump(model, path):
    np.savez(path, **{n: p.detach().numpy()
                      for n, p in model.named_parameters()})


def recover(tnt, tnt_torch, model, opt, sums, done):
    """A rank died: the survivors shrink the world to themselves and take
    the parameters, optimizer state and epoch sums of the one that went
    furthest (they may be a step apart: a rank can finish a step's last
    reduction where another still waits for it). Returns the step to go
    on from. A rank dying meanwhile is shrunk away in turn."""
    while True:
        try:
            dead = tnt.shrink()
            furthest = int(tnt.allreduce(np.array([done]), "max")[0])
            have = tnt.get_rank() if done == furthest else tnt.get_size()
            root = int(tnt.allreduce(np.array([have]), "min")[0])
            tnt_torch.broadcast_parameters(model, root=root)
            tnt_torch.broadcast_optimizer_state(opt, root=root)
            tnt.broadcast(sums, root=root, inplace=True)
        except tnt.TntError as e:
            if e.code != tnt.PEER_LOST:
                raise
            continue
        if tnt.is_master_rank():
            print("torch_digits: rank%s %s died; going on with %d rank%s "
                  "from step %d" % ("s" if len(dead) > 1 else "",
                                    ", ".join(map(str, dead)),
                                    tnt.get_size(),
                                    "" if tnt.get_size() == 1 else "s",
                                    furthest), flush=True)
        return furthest


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=0,
                    help="stop after this many steps (0: all epochs)")
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threshold", type=int, default=None,
                    help="fusion bucket bytes (default: the library's)")
    ap.add_argument("--min-accuracy", type=float, default=0.9)
    ap.add_argument("--save", help="torch.save the state_dict (master)")
    ap.add_argument("--dump-params", help="np.savez the parameters (master)")
    ap.add_argument("--kill-rank", type=int, default=-1,
                    help="this rank kills itself (SIGKILL) at --kill-step, "
                    "to show a job going on without it (tnt-run --elastic)")
    ap.add_argument("--kill-step", type=int, default=0)
    args = ap.parse_args(argv)
    if args.global_batch < 1 or args.epochs < 1 or args.steps < 0:
        ap.error("--global-batch and --epochs must be positive")
    if args.kill_step < 0:
        ap.error("--kill-step must be 0 or more")
    return args


def main():
    # Arguments first, so that --help and a bad option work without the
    # binding; then the binding, with a hint where it is not importable.
    args = parse_args()
    try:
        import tntcomm as tnt
        import tntcomm.torch as tnt_torch
    except ImportError as e:
        sys.exit("torch_digits: cannot import tntcomm (%s); from the build "
                 "tree set PYTHONPATH=build/plugins/python, after meson "
                 "install see docs/install.md" % e)
    torch.set_num_threads(1)  # ranks share the machine's cores
    rank, size = tnt.get_rank(), tnt.get_size()
    master = tnt.is_master_rank()
    x, y, xt, yt = load_digits(args.data, seed=args.seed)
    if args.global_batch > len(x):
        sys.exit("torch_digits: --global-batch %d is larger than the %d "
                 "training samples" % (args.global_batch, len(x)))

    # Different seeds on purpose: the broadcast must make them agree.
    model = make_model(args.seed + rank)
    tnt_torch.broadcast_parameters(model, root=tnt.get_master_rank())
    lo, hi = tnt_torch.micro_batch_range(args.global_batch)
    opt = tnt_torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr,
                        momentum=args.momentum),
        model, threshold=args.threshold, micro_batch_size=hi - lo)
    if master:
        print("torch_digits: %d rank%s, %d training and %d test samples, "
              "global batch %d, %d fusion bucket%s"
              % (size, "" if size == 1 else "s", len(x), len(xt),
                 args.global_batch, opt.num_buckets(),
                 "" if opt.num_buckets() == 1 else "s"), flush=True)

    batches = list(global_batches(len(x), args.global_batch, args.epochs,
                                  args.seed, args.steps))
    world_rank = rank
    # sums: the epoch's loss sum and step count; it travels with the
    # parameters when survivors resume (recover()).
    sums = np.zeros(2)
    done = 0  # steps whose update this rank applied
    while done < len(batches):
        epoch, idx = batches[done]
        if world_rank == args.kill_rank and done == args.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash, for the tests
        try:
            opt.zero_grad()
            loss = micro_loss(model, x, y, idx, lo, hi, size,
                              args.global_batch)
            # Each rank's loss is size x its share, so the ranks' average
            # is the global batch's mean loss. Every collective of a step
            # comes before its update: a rank that failed anywhere in the
            # step still holds the parameters from before it.
            mean = tnt.allreduce(np.array([loss.item()]), "avg")[0]
            loss.backward()
            opt.step()
        except tnt.TntError as e:
            if e.code != tnt.PEER_LOST:
                raise
            done = recover(tnt, tnt_torch, model, opt, sums, done)
            rank, size = tnt.get_rank(), tnt.get_size()
            master = tnt.is_master_rank()
            lo, hi = tnt_torch.micro_batch_range(args.global_batch)
            continue
        done += 1
        sums += [mean, 1.0]
        if done == len(batches) or batches[done][0] != epoch:
            if master:
                print("epoch %3d  loss %.6f" % (epoch + 1, sums[0] / sums[1]),
                      flush=True)
            sums[:] = 0

    with torch.no_grad():
        correct = (model(xt).argmax(1) == yt).sum().item()
    accuracy = correct / len(xt)
    mine = flat_parameters(model)
    masters = mine.clone()
    tnt_torch.broadcast_parameters([masters])
    same = torch.equal(masters, mine)
    agree = tnt.allreduce(np.array([0 if same else 1]), "sum")[0] == 0
    if master:
        print("test accuracy %.4f (%d samples)" % (accuracy, len(xt)))
        print("parameters %s on all %d rank%s"
              % ("identical" if agree else "DIFFER", size,
                 "" if size == 1 else "s"))
    if args.dump_params and master:
        dump(model, args.dump_params)
    if args.save:
        tnt_torch.save(model.state_dict(), args.save)
    tnt.barrier()
    if not agree:
        sys.exit(1)
    if accuracy < args.min_accuracy:
        sys.exit("torch_digits: test accuracy %.4f is below --min-accuracy "
                 "%g" % (accuracy, args.min_accuracy))


if __name__ == "__main__":
    main()
