"""Helper of tests/test_torch.sh: the references that tntcomm.torch is
compared with, and the comparisons.

  check_torch.py serial ARGS --out F   plain single-process training
  check_torch.py ddp ARGS --out F      torch DistributedDataParallel
                                       (gloo), ranks from tnt-run's
                                       TNT_RANK/TNT_SIZE, rendezvous at
                                       127.0.0.1:$TNT_TEST_DDP_PORT
  check_torch.py compare A B RTOL      parameters in A and B agree
  check_torch.py batchnorm             the BatchNorm warning rule
  check_torch.py hooks                 (under tnt-run) backward hands every
                                       gradient over (post-accumulate
                                       hooks on torch >= 2.1); unused
                                       parameters and bad dtypes;
                                       zero_grad's set_to_none default
  check_torch.py save DIR              save() writes on the master only
  check_torch.py optstate              (under tnt-run) broadcast_optimizer_
                                       state in place and, where ranks'
                                       state differs, whole

ARGS are torch_digits.py's (--steps, --global-batch, --seed, ...), so all
runs use the same data, model, initial weights and sample order.
"""
import os
import sys
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import torch_digits as td  # noqa: E402


def train(args, rank, size, wrap):
    torch.set_num_threads(1)
    x, y, _, _ = td.load_digits(args.data, seed=args.seed)
    model = wrap(td.make_model(args.seed))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr,
                          momentum=args.momentum)
    import tntcomm as tnt
    lo, count = tnt.micro_batch(args.global_batch, rank, size)
    for _, idx in td.global_batches(len(x), args.global_batch, args.epochs,
                                    args.seed, args.steps):
        opt.zero_grad()
        td.micro_loss(model, x, y, idx, lo, lo + count, size,
                      args.global_batch).backward()
        opt.step()
    return model


def serial(argv):
    out = argv.pop(argv.index("--out") + 1)
    argv.remove("--out")
    model = train(td.parse_args(argv), 0, 1, lambda m: m)
    td.dump(model, out)


def ddp(argv):
    import torch.distributed as dist
    out = argv.pop(argv.index("--out") + 1)
    argv.remove("--out")
    rank = int(os.environ["TNT_RANK"])
    size = int(os.environ["TNT_SIZE"])
    dist.init_process_group(
        "gloo", rank=rank, world_size=size,
        init_method="tcp://127.0.0.1:%s" % os.environ["TNT_TEST_DDP_PORT"])
    model = train(td.parse_args(argv), rank, size,
                  lambda m: torch.nn.parallel.DistributedDataParallel(m))
    if rank == 0:
        np.savez(out, **{n[len("module."):]: p.detach().numpy()
                         for n, p in model.named_parameters()})
    dist.barrier()
    dist.destroy_process_group()


def compare(a, b, rtol):
    """Every tensor: ||a - b|| <= rtol * ||b|| (a norm, not element-wise:
    single elements near zero have no meaningful relative error)."""
    fa, fb, rtol = np.load(a), np.load(b), float(rtol)
    if sorted(fa.files) != sorted(fb.files):
        sys.exit("tensors differ: %s vs %s" % (fa.files, fb.files))
    worst = 0.0
    for name in fb.files:
        d = np.linalg.norm(fa[name] - fb[name]) / np.linalg.norm(fb[name])
        worst = max(worst, d)
        if not d <= rtol:
            sys.exit("%s: relative difference %.3g > %g" % (name, d, rtol))
    print("max relative difference %.2g (<= %g) over %d tensors"
          % (worst, rtol, len(fb.files)))


def batchnorm():
    import tntcomm.torch as tt
    bn = torch.nn.Sequential(torch.nn.Linear(4, 4),
                             torch.nn.BatchNorm1d(4))
    plain = torch.nn.Sequential(torch.nn.Linear(4, 4))
    cases = [(bn, 8, True), (bn, 15, True), (bn, 16, False),
             (plain, 1, False)]
    for model, mb, want in cases:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = tt.check_batchnorm(model, mb)
        if got != want or len(w) != int(want):
            sys.exit("check_batchnorm(micro-batch %d): warned %s, expected "
                     "%s" % (mb, got, want))
        if want and "BatchNorm" not in str(w[0].message):
            sys.exit("warning text lacks 'BatchNorm': %s" % w[0].message)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tt.DistributedOptimizer(torch.optim.SGD(bn.parameters(), lr=0.1),
                                bn, micro_batch_size=4)
    if not w:
        sys.exit("DistributedOptimizer(micro_batch_size=4) did not warn")
    print("BatchNorm warning below 16 samples only")


def hooks():
    import tntcomm as tnt
    import tntcomm.torch as tt
    rank, size = tnt.get_rank(), tnt.get_size()
    torch.manual_seed(rank)
    lin, unused = torch.nn.Linear(3, 2), torch.nn.Linear(2, 2)
    model = torch.nn.ModuleDict({"lin": lin, "unused": unused})
    tt.broadcast_parameters(model)
    opt = tt.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0), model, threshold=0)
    # torch >= 2.1: the hook runs after accumulation into p.grad, through
    # the parameter's own post-accumulate hooks (no accumulator trick).
    if hasattr(lin.weight, "register_post_accumulate_grad_hook"):
        for p in model.parameters():
            if not getattr(p, "_post_accumulate_grad_hooks", None):
                sys.exit("no post-accumulate-grad hook on a parameter: "
                         "the accumulator's hook is used on torch %s"
                         % torch.__version__)
    for step in range(2):
        opt.zero_grad()
        # torch's default, set_to_none=True: no gradient until backward.
        if step > 0 and lin.weight.grad is not None:
            sys.exit("zero_grad() left a gradient tensor; torch's default "
                     "is set_to_none=True")
        x = torch.full((1, 3), float(rank + 1))
        lin(x).sum().backward()
        if opt.ready_count() != 2:
            sys.exit("after backward %d of 4 gradients were handed over, "
                     "expected lin's 2" % opt.ready_count())
        before = lin.weight.detach().clone()
        opt.step()
        mean = sum(r + 1 for r in range(size)) / size
        want = before - mean
        if not torch.allclose(lin.weight, want, rtol=1e-6):
            sys.exit("step %d: weight %s, expected %s"
                     % (step, lin.weight, want))
        if not torch.equal(unused.weight.grad, torch.zeros(2, 2)):
            sys.exit("the unused layer's gradient is not zero")
    opt.zero_grad(set_to_none=False)  # asked for: zeros stay
    if not torch.equal(lin.weight.grad, torch.zeros(2, 3)):
        sys.exit("zero_grad(set_to_none=False) did not zero the gradient")
    try:
        tt.DistributedOptimizer(torch.optim.SGD(
            [torch.zeros(2, dtype=torch.complex64, requires_grad=True)],
            lr=1.0))
        sys.exit("a complex parameter was accepted")
    except TypeError as e:
        if "complex64" not in str(e):
            sys.exit("unclear error: %s" % e)
    if rank == 0:
        print("hooks hand every computed gradient over during backward")


def allreduce():
    """tntcomm.torch.allreduce / allreduce_ on every rank: inputs from
    (rank, index), references computed here from every rank's input; avg
    by default; every element compared."""
    import tntcomm as tnt
    import tntcomm.torch as tt
    rank, size = tnt.get_rank(), tnt.get_size()

    def x(r, dtype, n=1000):
        return ((torch.arange(n) * 7 + r * 3) % 11 + (r == 0)).to(dtype)

    def want(dtype, op, n=1000):
        xs = torch.stack([x(r, torch.float64, n) for r in range(size)])
        ref = {"sum": xs.sum(0), "avg": xs.sum(0) / size,
               "min": xs.min(0).values, "max": xs.max(0).values}[op]
        if op == "avg" and not dtype.is_floating_point:
            ref = torch.trunc(ref)  # integer averages truncate
        return ref.to(dtype)

    def same(got, ref, what):
        if got.dtype != ref.dtype or got.shape != ref.shape or \
                not torch.equal(got, ref):
            bad = (got != ref).nonzero()
            sys.exit("rank %d: %s: %s %s vs %s %s, first difference at %s"
                     % (rank, what, got.dtype, tuple(got.shape), ref.dtype,
                        tuple(ref.shape), bad[:1].tolist()))

    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
              torch.int32, torch.int64, torch.uint8]
    for dtype in dtypes:
        for op in ["avg", "sum", "min", "max"]:
            t = x(rank, dtype)
            keep = t.clone()
            got = tt.allreduce(t, op=op)
            same(got, want(dtype, op), "allreduce %s %s" % (dtype, op))
            same(t, keep, "allreduce left its input alone")
            back = tt.allreduce_(t, op=op)
            if back is not t:
                sys.exit("allreduce_ did not return its tensor")
            same(t, want(dtype, op), "allreduce_ %s %s" % (dtype, op))
    # The default is the average (Horovod's): a metric, a 0-d tensor.
    loss = torch.tensor(float(rank + 1))
    same(tt.allreduce(loss), torch.tensor((size + 1) / 2.0),
         "allreduce of a 0-d loss averages by default")
    same(tt.allreduce(rank + 1, op="sum"),
         torch.tensor(size * (size + 1) / 2.0, dtype=torch.float64),
         "allreduce of a Python number")
    # A non-contiguous view, and a tensor that requires grad.
    m = x(rank, torch.float32, 12).reshape(3, 4).t()
    same(tt.allreduce(m, op="sum"),
         want(torch.float32, "sum", 12).reshape(3, 4).t().contiguous(),
         "allreduce of a transposed view")
    w = x(rank, torch.float32, 5).requires_grad_()
    r = tt.allreduce(w, op="max")
    if r.requires_grad:
        sys.exit("allreduce's result carries autograd history")
    same(r, want(torch.float32, "max", 5), "allreduce of a leaf with grad")
    for bad, text in [(lambda: tt.allreduce(x(rank, torch.float32),
                                            op="mean"), "unknown op 'mean'"),
                      (lambda: tt.allreduce("1"), "a tensor or a number"),
                      (lambda: tt.allreduce(torch.zeros(2,
                                            dtype=torch.complex64)),
                       "complex64")]:
        try:
            bad()
            sys.exit("accepted: expected an error with %r" % text)
        except (TypeError, ValueError) as e:
            if text not in str(e):
                sys.exit("unclear error %r, expected %r" % (str(e), text))
    if rank == 0:
        print("allreduce and allreduce_: %d dtypes, 4 ops, %d ranks"
              % (len(dtypes), size))


def optstate():
    """broadcast_optimizer_state from rank 1: in place where every rank
    holds state of the same structure (SGD with momentum, each rank
    stepped on its own data), whole where it differs (Adam, only the
    root stepped: the others hold none). Afterwards every rank's state
    equals the root's, made again here from the root's seed."""
    import tntcomm as tnt
    import tntcomm.torch as tt
    rank, size = tnt.get_rank(), tnt.get_size()
    root = 1 if size > 1 else 0

    def stepped(kind, r, steps):
        torch.manual_seed(100 + r)
        model = torch.nn.Linear(4, 3)
        opt = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
               if kind == "sgd" else
               torch.optim.Adam(model.parameters(), lr=0.01))
        for _ in range(steps):
            opt.zero_grad()
            model(torch.randn(5, 4)).square().sum().backward()
            opt.step()
        return opt

    for kind, steps in (("sgd", 2), ("adam", 2 if rank == root else 0)):
        opt = stepped(kind, rank, steps)
        tt.broadcast_optimizer_state(opt, root=root)
        got = opt.state_dict()["state"]
        want = stepped(kind, root, 2).state_dict()["state"]
        if sorted(got) != sorted(want):
            sys.exit("rank %d, %s: state of parameters %s, root's %s"
                     % (rank, kind, sorted(got), sorted(want)))
        for i in want:
            for key, v in want[i].items():
                g = got[i].get(key)
                if not (torch.is_tensor(g) and torch.equal(g, v)):
                    sys.exit("rank %d, %s: state %d.%s is %s, root's %s"
                             % (rank, kind, i, key, g, v))
    print("rank %d: optimizer state equals rank %d's" % (rank, root))


def save(directory):
    import tntcomm as tnt
    import tntcomm.torch as tt
    rank = tnt.get_rank()
    wrote = tt.save({"rank": rank}, os.path.join(directory, "m%d.pt" % rank))
    if wrote != (rank == 0):
        sys.exit("rank %d: save returned %s" % (rank, wrote))
    tnt.barrier()
    if rank == 0:
        files = sorted(os.listdir(directory))
        if files != ["m0.pt"]:
            sys.exit("expected only m0.pt, found %s" % files)
        if torch.load(os.path.join(directory, "m0.pt")) != {"rank": 0}:
            sys.exit("m0.pt does not hold the master's object")
        print("saved on the master only")


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    {"serial": lambda: serial(rest), "ddp": lambda: ddp(rest),
     "compare": lambda: compare(*rest), "batchnorm": batchnorm,
     "hooks": hooks, "allreduce": allreduce, "optstate": optstate,
     "save": lambda: save(*rest)}[mode]()
