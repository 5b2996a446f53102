"""tntcomm.torch: data-parallel PyTorch training over libtntcomm.

Tarantella's promise for PyTorch: wrap the optimizer, broadcast the model
once, give each rank its micro-batch of the global batch, and training
gives the same parameters as serial training with that global batch.

    import tntcomm as tnt
    import tntcomm.torch as tnt_torch

    model = Net()
    tnt_torch.broadcast_parameters(model)          # rank 0's weights
    mean_loss = tnt_torch.allreduce(loss)          # averaged over ranks
    opt = tnt_torch.DistributedOptimizer(torch.optim.SGD(...), model)
    lo, hi = tnt_torch.micro_batch_range(global_batch)
    for x, y in global_batches:
        opt.zero_grad()
        loss_fn(model(x[lo:hi]), y[lo:hi]).backward()  # reduced as it goes
        opt.step()                                     # waits, then steps
    tnt_torch.save(model.state_dict(), "model.pt")   # master only

The optimizer wrapper registers a hook that runs once each parameter's
gradient is accumulated (torch >= 2.1: register_post_accumulate_grad_hook;
before: a hook on the parameter's gradient accumulator, as Horovod does);
the hook hands the finished gradient to the
library's gradient fusion (tnt/plugin.h) through tntcomm.Fusion, so that
buckets are averaged across ranks while backprop is still running, and
step() waits for the rest before applying the update. Tensors are passed
to the C library by address: CPU tensors, and CUDA tensors, which the
library stages through pinned host memory after the work queued on their
current stream (the fusion engine takes host memory: CUDA gradients go to
it as pinned host copies, copied back once reduced).
"""
import io
import warnings
import zlib

import torch

import tntcomm as _tnt
from tntcomm import _lib
from tntcomm import _torch_backend

# `import tntcomm.torch` makes "tnt" a torch.distributed backend.
_torch_backend.register()

__all__ = ["allreduce", "allreduce_", "broadcast_parameters",
           "broadcast_optimizer_state",
           "DistributedOptimizer", "micro_batch", "micro_batch_range",
           "check_batchnorm", "save", "BATCHNORM_MIN_MICRO_BATCH"]

# torch dtype -> tnt_dtype_t; bfloat16 works here, unlike through numpy.
_DTYPES = {torch.float32: _lib.F32, torch.float64: _lib.F64,
           torch.float16: _lib.F16, torch.bfloat16: _lib.BF16,
           torch.int8: _lib.I8, torch.uint8: _lib.U8,
           torch.int32: _lib.I32, torch.int64: _lib.I64}

# Tarantella warns when BatchNorm sees micro-batches smaller than this:
# batch statistics of so few samples are noisy, and they are per rank.
BATCHNORM_MIN_MICRO_BATCH = 16


def _tnt_dtype(t, what):
    if t.device.type not in ("cpu", "cuda"):
        raise TypeError("tntcomm.torch: %s is on %s; only CPU and CUDA "
                        "tensors are supported" % (what, t.device))
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise TypeError("tntcomm.torch: %s has dtype %s, which is not "
                        "supported" % (what, t.dtype)) from None


def _stream_done(t):
    """A CUDA tensor is read by the library (which stages it through
    pinned host memory on a stream of its own) when the call is made: wait
    for the work queued on its current stream first. The blocking calls
    return with the result in device memory."""
    if t.device.type == "cuda":
        torch.cuda.current_stream(t.device).synchronize()


def _broadcast_tensor(t, root, what):
    dtype = _tnt_dtype(t, what)
    if t.is_contiguous():
        target = t
    else:
        target = t.contiguous()
    _stream_done(target)
    _tnt._check("tnt_broadcast",
                _lib.lib.tnt_broadcast(_tnt.init(), target.data_ptr(),
                                       target.numel(), dtype, root))
    if target is not t:
        t.copy_(target)


@torch.no_grad()
def allreduce_(tensor, op="avg"):
    """Reduce `tensor` over all ranks in place (op: avg, the default as in
    Horovod's hvd.allreduce_, or sum, prod, min, max) and return it.
    Integer averages truncate toward zero. Not differentiable."""
    code = _tnt._op_of(op)
    if not torch.is_tensor(tensor):
        raise TypeError("tntcomm.torch: allreduce_ needs a tensor, not %s"
                        % type(tensor).__name__)
    dtype = _tnt_dtype(tensor, "the tensor")
    target = tensor if tensor.is_contiguous() else tensor.contiguous()
    _stream_done(target)
    _tnt._check("tnt_allreduce",
                _lib.lib.tnt_allreduce(_tnt.init(), _lib.IN_PLACE,
                                       target.data_ptr(), target.numel(),
                                       dtype, code))
    if target is not tensor:
        tensor.copy_(target)
    return tensor


def allreduce(tensor, op="avg"):
    """A new tensor: `tensor` reduced over all ranks, averaged by default,
    as Horovod's hvd.allreduce (for metrics: loss, accuracy, counts).
    Python numbers are accepted too (a 0-d float64 tensor comes back).
    The input is left alone; the result has no autograd history."""
    if not torch.is_tensor(tensor):
        if not isinstance(tensor, (int, float)) or isinstance(tensor, bool):
            raise TypeError("tntcomm.torch: allreduce needs a tensor or a "
                            "number, not %s" % type(tensor).__name__)
        tensor = torch.tensor(float(tensor), dtype=torch.float64)
    return allreduce_(tensor.detach().clone(
        memory_format=torch.contiguous_format), op)


def _named_state(model_or_tensors):
    if isinstance(model_or_tensors, torch.nn.Module):
        yield from model_or_tensors.named_parameters()
        yield from model_or_tensors.named_buffers()
    elif isinstance(model_or_tensors, dict):
        yield from model_or_tensors.items()
    else:
        for i, t in enumerate(model_or_tensors):
            yield str(i), t


@torch.no_grad()
def broadcast_parameters(model_or_tensors, root=0):
    """Copy the root rank's parameters and buffers (a Module, a
    state_dict or a list of tensors) into every rank's, in place.
    Collective: every rank must pass the same structure."""
    for name, t in _named_state(model_or_tensors):
        if torch.is_tensor(t):
            _broadcast_tensor(t.data if isinstance(t, torch.nn.Parameter)
                              else t, root, "'%s'" % name)


def _state_layout(optimizer):
    """Which state tensors the optimizer holds, with their shapes and
    dtypes, as a number that ranks compare (CRC-32 of its text)."""
    layout = [(gi, pi, key, tuple(v.shape), str(v.dtype))
              for gi, group in enumerate(optimizer.param_groups)
              for pi, p in enumerate(group["params"])
              for key, v in sorted(optimizer.state.get(p, {}).items())
              if torch.is_tensor(v)]
    return zlib.crc32(repr(layout).encode())


@torch.no_grad()
def broadcast_optimizer_state(optimizer, root=0):
    """Copy the root rank's optimizer state (momentum buffers, ...) to
    every rank. Where the ranks' state has the same structure its tensors
    are broadcast in place; where it differs (a rank with none yet, before
    its first step, as after a failure that left ranks a step apart) every
    rank takes the root's whole state_dict."""
    import numpy as np
    mine = _state_layout(optimizer)
    seen = _tnt.allreduce(np.array([mine, -mine], dtype=np.int64), "max")
    if seen[0] == -seen[1]:
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                for key, v in sorted(optimizer.state.get(p, {}).items()):
                    if torch.is_tensor(v):
                        _broadcast_tensor(v, root, "optimizer state %d.%d.%s"
                                          % (gi, pi, key))
        return
    data = np.zeros(0, dtype=np.uint8)
    if _tnt.get_rank() == root:
        buf = io.BytesIO()
        torch.save(optimizer.state_dict(), buf)
        data = np.frombuffer(buf.getvalue(), dtype=np.uint8).copy()
    size = _tnt.broadcast(np.array([data.size], dtype=np.int64), root)[0]
    if _tnt.get_rank() != root:
        data = np.zeros(size, dtype=np.uint8)
    _tnt.broadcast(data, root, inplace=True)
    if _tnt.get_rank() != root:
        optimizer.load_state_dict(torch.load(io.BytesIO(data.tobytes())))


def micro_batch(global_batch):
    """(offset, count) of this rank's samples of a global batch
    (tnt_micro_batch: the first global % size ranks get one more)."""
    return _tnt.micro_batch(global_batch)


def micro_batch_range(global_batch):
    """(start, stop) of this rank's slice of a global batch."""
    off, count = _tnt.micro_batch(global_batch)
    return off, off + count


def check_batchnorm(model, micro_batch_size):
    """Warn, as Tarantella does, when `model` has BatchNorm layers and the
    micro-batch is below 16 samples. Returns True if it warned."""
    has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                 for m in model.modules())
    if has_bn and micro_batch_size < BATCHNORM_MIN_MICRO_BATCH:
        warnings.warn("tntcomm.torch: the model has BatchNorm layers and "
                      "the micro-batch is %d samples (< %d): batch "
                      "statistics are computed per rank over few samples; "
                      "use a larger global batch or fewer ranks"
                      % (micro_batch_size, BATCHNORM_MIN_MICRO_BATCH),
                      stacklevel=2)
        return True
    return False


def save(obj, path, **kwargs):
    """torch.save on the master rank only; returns True where it saved."""
    if _tnt.is_master_rank():
        torch.save(obj, path, **kwargs)
        return True
    return False


class DistributedOptimizer:
    """Wraps a torch optimizer so that gradients are averaged over all
    ranks during backward (Horovod's DistributedOptimizer).

    model: the Module (to name tensors in messages) or None. op: "avg"
    (the gradient of the global mean loss when every rank's loss is the
    mean over an equal micro-batch) or "sum". threshold: the fusion bucket
    size in bytes (None: TNT_FUSION_THRESHOLD or 32 KiB).
    micro_batch_size: if given, check_batchnorm(model, it) is applied.
    Everything else (param_groups, state_dict, ...) is the wrapped
    optimizer's.

    After a rank died, step() raises the TntError (code
    tntcomm.PEER_LOST); once the survivors called tntcomm.shrink(), the
    next step reduces over them (a new fusion context and bucket plan on
    their communicator), and micro_batch_range() splits the global batch
    over them. examples/torch_digits.py shows the loop.
    """

    def __init__(self, optimizer, model=None, op="avg", threshold=None,
                 micro_batch_size=None):
        self.optimizer = optimizer
        names = {}
        if model is not None:
            names = {id(p): n for n, p in model.named_parameters()}
            if micro_batch_size is not None:
                check_batchnorm(model, micro_batch_size)
        params = [p for g in optimizer.param_groups for p in g["params"]
                  if p.requires_grad]
        if len({id(p) for p in params}) != len(params):
            raise ValueError("tntcomm.torch: a parameter appears twice in "
                             "the optimizer's param_groups")
        # Backprop produces the last layers' gradients first: register in
        # reverse order so that the first buckets fill first.
        self._params = list(reversed(params))
        for i, p in enumerate(self._params):
            _tnt_dtype(p, "parameter '%s'" % names.get(id(p), i))
        self._tensors = [(p.numel(), _np_dtype(p.dtype),
                          names.get(id(p), "param%d" % i))
                         for i, p in enumerate(self._params)]
        self._op, self._threshold = op, threshold
        self._fusion = self._make_fusion()
        # CUDA parameters: the fusion engine copies gradients into its
        # host buckets with memcpy, so a CUDA gradient is handed over as a
        # pinned host copy (one per parameter, made once) and copied back
        # after the buckets are reduced.
        self._host = {i: torch.empty(p.shape, dtype=p.dtype,
                                     pin_memory=True)
                      for i, p in enumerate(self._params)
                      if p.device.type == "cuda"}
        self._pending = {}  # index -> gradient handed over this iteration
        self._error = None  # the first failure of this step's hand-overs
        self._synced = False
        self._hooks = []
        for i, p in enumerate(self._params):
            # The hook runs once p.grad holds the final gradient of this
            # backward pass (a plain hook on p would see the incoming
            # gradient before accumulation into p.grad).
            if hasattr(p, "register_post_accumulate_grad_hook"):
                self._hooks.append(p.register_post_accumulate_grad_hook(
                    self._make_hook(i, p)))
            else:  # torch < 2.1: the accumulator's hook, kept alive here
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._make_hook(i, p))
                self._hooks.append(acc)

    def _make_hook(self, index, p):
        def hook(*_):
            self._ready(index, p)
        return hook

    def _make_fusion(self):
        return _tnt.Fusion(self._tensors, op=self._op,
                           threshold=self._threshold)

    def _follow_world(self):
        """After tntcomm.shrink(): a fusion context on the survivors'
        communicator, with the bucket plan made anew (collective: every
        rank gets here at its next step's first gradient)."""
        if self._fusion.generation == _tnt.generation():
            return
        if self._pending:
            self._pending.clear()
            self._error = None
            raise RuntimeError(
                "tntcomm.torch: tntcomm.shrink() replaced the communicator "
                "between this step's backward and step(); zero_grad() and "
                "compute the step again")
        self._fusion = self._make_fusion()

    def _ready(self, index, p):
        self._follow_world()
        if index in self._pending:
            raise RuntimeError(
                "tntcomm.torch: the gradient of parameter %d came twice in "
                "one step (two backward passes before step() are not "
                "supported)" % index)
        grad = p.grad
        if not grad.is_contiguous():
            p.grad = grad = grad.contiguous()
        self._pending[index] = grad
        if self._error is not None:
            return  # the step failed already: synchronize() raises it
        host = self._host.get(index)
        try:
            if host is not None:
                host.copy_(grad)  # to pinned memory: waits for the stream
                self._fusion.ready(index, host.data_ptr())
            else:
                self._fusion.ready(index, grad.data_ptr())
        except _tnt.TntError as e:
            # Raised from step(), not through autograd's engine: backward
            # ends normally and the caller sees the library's error (a
            # lost peer: tntcomm.shrink(), then the step again).
            self._error = e

    def synchronize(self):
        """Wait until every gradient is averaged over the ranks. Parameters
        that got no gradient this step contribute zeros (every rank must
        take part in every bucket). A failure of the step (a lost peer:
        TntError) is raised here, after the library let go of the
        gradients."""
        self._follow_world()
        with torch.no_grad():
            for i, p in enumerate(self._params):
                if i not in self._pending:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    self._ready(i, p)
        try:
            try:
                # Also after a failed hand-over: it returns once no bucket
                # is in flight on the gradients.
                self._fusion.wait_all()
            except _tnt.TntError as e:
                if self._error is None:
                    self._error = e
            if self._error is not None:
                raise self._error
            with torch.no_grad():
                for i, grad in self._pending.items():
                    if i in self._host:
                        grad.copy_(self._host[i])
        finally:
            self._pending.clear()
            self._error = None
        self._synced = True

    def step(self, closure=None):
        """synchronize() unless the caller already did (to clip gradients,
        say), then the wrapped optimizer's step."""
        if not self._synced:
            self.synchronize()
        self._synced = False
        return self.optimizer.step(closure)

    def zero_grad(self, set_to_none=True):
        """The wrapped optimizer's zero_grad, with torch's default
        (set_to_none=True: the next backward makes new gradients)."""
        return self.optimizer.zero_grad(set_to_none=set_to_none)

    def ready_count(self):
        """Gradients handed to the library so far in this step (after
        backward(): all those that backward computed)."""
        return len(self._pending)

    def num_buckets(self):
        return self._fusion.num_buckets()

    def __getattr__(self, name):
        return getattr(self.optimizer, name)


def _np_dtype(dtype):
    """The numpy dtype tntcomm.Fusion takes for a torch dtype."""
    import numpy as np
    table = {torch.float32: np.float32, torch.float64: np.float64,
             torch.float16: np.float16, torch.int8: np.int8,
             torch.uint8: np.uint8, torch.int32: np.int32,
             torch.int64: np.int64}
    if dtype not in table:
        raise TypeError("tntcomm.torch: gradients of dtype %s are not "
                        "supported by DistributedOptimizer" % dtype)
    return table[dtype]

