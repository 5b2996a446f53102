"""tntcomm: Python binding of libtntcomm, with Tarantella's rank API.

    import tntcomm as tnt
    rank, size = tnt.get_rank(), tnt.get_size()
    total = tnt.allreduce(np.arange(4.0))       # a new array
    tnt.allreduce(grads, op="avg", inplace=True)  # in place
    tnt.broadcast(weights, root=tnt.get_master_rank(), inplace=True)
    everyone = tnt.allgather(x)       # every rank's x along the first axis
    mine = tnt.reduce_scatter(y)      # this rank's block of the sum
    req = tnt.iallreduce(grads, inplace=True); ...; req.wait()
    half = tnt.Comm.world().split(color=rank % 2)  # split, dup, shrink
    dead = tnt.shrink()   # after a rank died: the world becomes the survivors
    tnt.send(x, peer=1, tag=0); tnt.recv(y, peer=0, tag=0)  # y in place

The world communicator is created from the launcher's environment
(tnt-run sets TNT_RANK, TNT_SIZE, ...) on first use, or by init(), and
freed at exit or by finalize(). Every failing call raises TntError, whose
message is the library's own (tnt_last_error()). The binding is a thin
ctypes layer (see docs/frontends.md for why): each call goes straight to
the C function on the array's memory, without copies for in-place calls.
"""
import atexit
import ctypes
import os
import weakref

import numpy as np

from . import _lib, _request, _stats
from ._lib import lib

__all__ = ["TntError", "init", "is_reproducible", "finalize", "get_rank", "get_size",
           "get_master_rank", "is_master_rank", "allreduce", "broadcast",
           "barrier", "allgather", "reduce_scatter", "iallreduce",
           "ibroadcast", "ibarrier", "iallgather", "ireduce_scatter",
           "reduce", "gather", "scatter", "alltoall", "alltoallv",
           "ialltoallv", "send", "recv", "isend", "irecv", "TAG_MAX",
           "ANY_SOURCE",
           "Request", "micro_batch", "Fusion", "Comm", "UNDEFINED",
           "shrink", "generation", "PEER_LOST",
           "version", "__version__",
           "stats",
           "SUM", "AVG", "PROD", "MIN", "MAX"]

SUM, AVG, PROD, MIN, MAX = "sum", "avg", "prod", "min", "max"
_OPS = {"sum": _lib.SUM, "avg": _lib.AVG, "prod": _lib.PROD,
        "min": _lib.MIN, "max": _lib.MAX}

# numpy dtype -> tnt_dtype_t. bfloat16 has no numpy type.
_DTYPES = {np.dtype(np.float32): _lib.F32, np.dtype(np.float64): _lib.F64,
           np.dtype(np.float16): _lib.F16, np.dtype(np.int8): _lib.I8,
           np.dtype(np.uint8): _lib.U8, np.dtype(np.int32): _lib.I32,
           np.dtype(np.uint32): _lib.U32, np.dtype(np.int64): _lib.I64,
           np.dtype(np.uint64): _lib.U64}


class TntError(RuntimeError):
    """A libtntcomm call failed. `code` is the tnt_result_t value, `name`
    its text (tnt_strerror) and str(e) the library's detailed message
    (detail: that message when it was taken elsewhere, e.g. on the thread
    of a TensorFlow op; else this thread's tnt_last_error())."""

    def __init__(self, call, code, detail=None):
        self.call = call
        self.code = code
        self.name = lib.tnt_strerror(code).decode(errors="replace")
        if detail is None:
            detail = lib.tnt_last_error().decode(errors="replace")
        super().__init__("%s: %s: %s" % (call, self.name, detail)
                         if detail else "%s: %s" % (call, self.name))


def _check(call, rc):
    if rc != 0:
        raise TntError(call, rc)


_comm = None
_reproducible = False
# How many times shrink() replaced the world communicator: objects bound
# to it (Fusion, tntcomm.torch.DistributedOptimizer) compare theirs.
_generation = 0
# tnt_result_t of a lost peer (TNT_ERR_PEER_LOST): TntError.code after a
# rank died, the case shrink() is for.
PEER_LOST = -6
# Fusion contexts alive on the communicator: finalize() frees them first,
# since a context must not outlive the communicator it reduces on.
_fusions = weakref.WeakSet()


def init(reproducible=None):
    """Create the world communicator (collective over all ranks). Called
    implicitly by the first function that needs it.

    reproducible: True or False switches the reproducible mode of
    floating-point reductions (TNT_REPRODUCIBLE, docs/environment.md:
    the same bits whatever the algorithm, transport, segment size, host
    layout or fusion buckets) for the communicator created now, by
    setting TNT_REPRODUCIBLE in this process's environment (child
    processes inherit it); None leaves it to the environment. Every rank
    must choose the same. Asking for another mode than the existing
    communicator's is a ValueError: finalize() first."""
    global _comm, _reproducible
    if reproducible is not None and not isinstance(reproducible, bool):
        raise TypeError("tntcomm.init: reproducible must be True, False or "
                        "None, not %r" % (reproducible,))
    if _comm is None:
        if reproducible is not None:
            os.environ["TNT_REPRODUCIBLE"] = "1" if reproducible else "0"
        handle = ctypes.c_void_p()
        _check("tnt_comm_init_from_env",
               lib.tnt_comm_init_from_env(ctypes.byref(handle)))
        _comm = handle
        _reproducible = os.environ.get("TNT_REPRODUCIBLE", "0") == "1"
    elif reproducible is not None and reproducible != _reproducible:
        raise ValueError("tntcomm.init(reproducible=%r): the communicator "
                         "exists already with reproducible=%r; call "
                         "tntcomm.finalize() first"
                         % (reproducible, _reproducible))
    return _comm


def is_reproducible():
    """Whether the world communicator (created if needed) runs in the
    reproducible mode (init(reproducible=...), TNT_REPRODUCIBLE)."""
    init()
    return _reproducible


def _end_work_on_world():
    """Wait for the requests still running (they use the communicator and
    their arrays) and free the Fusion contexts, which must not outlive
    the communicator they reduce on."""
    for request in list(_request.pending):
        try:
            request.wait()
        except TntError:
            pass
    for fusion in list(_fusions):
        try:
            fusion.free()
        except TntError:  # a context of a failed communicator
            pass


def finalize():
    """Free the world communicator; a later call creates a new one."""
    global _comm
    _end_work_on_world()
    _communicator.free_all()
    if _comm is not None:
        comm, _comm = _comm, None
        _check("tnt_comm_free", lib.tnt_comm_free(comm))


atexit.register(finalize)


def shrink():
    """After a rank died (a TntError whose code is PEER_LOST): every
    surviving rank calls it; they agree on the dead ranks
    (tnt_comm_shrink; TNT_RECOVERY=1 on every rank, which tnt-run
    --elastic sets) and the world communicator becomes theirs, ranked in
    their old order: get_rank, get_size, micro_batch, every collective
    and tntcomm.torch work on the survivors from then on. Requests still running on the old one are
    waited for (they fail) and its Fusion contexts freed (a
    DistributedOptimizer makes a new one at its next step). Returns the
    ranks that died, as ranks of the communicator before. The survivors
    may have failed in different calls: agree on where to resume (an
    allreduce of the step, say) before going on."""
    global _comm, _generation
    old = init()
    new = ctypes.c_void_p()
    _check("tnt_comm_shrink", lib.tnt_comm_shrink(old, ctypes.byref(new)))
    dead = _communicator.failed_ranks(old)
    _end_work_on_world()
    _comm = new
    _generation += 1
    _check("tnt_comm_free", lib.tnt_comm_free(old))
    return dead


def generation():
    """How many times shrink() replaced the world communicator."""
    return _generation


def _int_query(name):
    out = ctypes.c_int()
    _check(name, getattr(lib, name)(init(), ctypes.byref(out)))
    return out.value


def get_rank():
    return _int_query("tnt_comm_rank")


def get_size():
    return _int_query("tnt_comm_size")


def get_master_rank():
    return _int_query("tnt_comm_master_rank")


def is_master_rank():
    return bool(_int_query("tnt_comm_is_master"))


def stats():
    """The world communicator's counters (tnt_comm_stats), a dict:
    {"kinds": {"allreduce": {"calls": n, "bytes": b}, ...} (every kind:
               allreduce, broadcast, allgather, reduce_scatter, barrier,
               reduce, gather, scatter, alltoall (with alltoallv) and p2p
               (send, recv and their i-variants, each a call)),
     "algorithms": {"ring": {"calls", "bytes"}, ...} (those that ran),
     "transports": {"tcp": {"peers", "msgs_sent", "bytes_sent",
                            "msgs_recv", "bytes_recv", "reconnects",
                            "strangers_refused", "strangers_evicted",
                            "reports"}, ...} (those running),
     "wait_s": seconds blocking calls waited,
     "unexpected_hwm": most bytes early messages held at once,
     "comm": {"name": "world", "how": "", "rank", "world_rank"} (a derived
             communicator's name and how it was made: docs/design.md)}."""
    rc, d = _stats.query(init())
    _check("tnt_comm_stats", rc)
    return d


def version():
    """The loaded library's version, (major, minor, patch)."""
    v = [ctypes.c_int() for _ in range(3)]
    lib.tnt_get_version(*[ctypes.byref(x) for x in v])
    return tuple(x.value for x in v)


# The library's own version (tnt_get_version), as "MAJOR.MINOR.PATCH".
__version__ = "%d.%d.%d" % version()


def _dtype_of(array):
    try:
        return _DTYPES[array.dtype]
    except KeyError:
        raise TypeError("tntcomm: dtype %s is not supported; use one of %s"
                        % (array.dtype, ", ".join(sorted(
                            str(d) for d in _DTYPES)))) from None


def _op_of(op):
    try:
        return _OPS[op.lower() if isinstance(op, str) else op]
    except (KeyError, AttributeError):
        raise ValueError("tntcomm: unknown op %r; expected one of %s"
                         % (op, ", ".join(_OPS))) from None


def _target(array, inplace, what):
    """The array the C call writes: the argument itself in place (which
    must then be a writeable C-contiguous numpy array), else a copy."""
    if inplace:
        if not isinstance(array, np.ndarray):
            raise TypeError("tntcomm: %s in place needs a numpy array, not "
                            "%s" % (what, type(array).__name__))
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError("tntcomm: %s in place needs a writeable "
                             "C-contiguous array" % what)
        return array
    return np.array(array, copy=True, order="C")


def _allreduce_on(handle, array, op, inplace):
    """allreduce on the communicator handle() returns (called once the
    arguments are checked: a bad argument starts nothing)."""
    code = _op_of(op)
    out = _target(array, inplace, "allreduce")
    dtype = _dtype_of(out)
    _check("tnt_allreduce",
           lib.tnt_allreduce(handle(), _lib.IN_PLACE, out.ctypes.data,
                             out.size, dtype, code))
    return out


def _broadcast_on(handle, array, root, inplace):
    """broadcast on the communicator handle() returns (as _allreduce_on)."""
    out = _target(array, inplace, "broadcast")
    dtype = _dtype_of(out)
    if not isinstance(root, int):
        raise TypeError("tntcomm: root must be an int, not %s"
                        % type(root).__name__)
    _check("tnt_broadcast",
           lib.tnt_broadcast(handle(), out.ctypes.data, out.size, dtype,
                             root))
    return out


def allreduce(array, op=SUM, inplace=False):
    """Reduce `array` element-wise over all ranks with op (sum, avg, prod,
    min, max). Returns a new array, or `array` itself with inplace=True."""
    return _allreduce_on(init, array, op, inplace)


def broadcast(array, root=0, inplace=False):
    """Copy root's `array` to every rank. Returns a new array, or `array`
    itself with inplace=True."""
    return _broadcast_on(init, array, root, inplace)


def barrier():
    _check("tnt_barrier", lib.tnt_barrier(init()))


def micro_batch(global_batch, rank=None, size=None):
    """Tarantella's split of a global batch: (offset, count) of this
    rank's samples (tnt_micro_batch)."""
    rank = get_rank() if rank is None else rank
    size = get_size() if size is None else size
    off, count = ctypes.c_size_t(), ctypes.c_size_t()
    _check("tnt_micro_batch",
           lib.tnt_micro_batch(global_batch, rank, size, ctypes.byref(off),
                               ctypes.byref(count)))
    return off.value, count.value


from ._fusion import Fusion  # noqa: E402  (needs the names above)
from . import _communicator  # noqa: E402
from ._communicator import Comm, UNDEFINED  # noqa: E402
from ._gather import (allgather, reduce_scatter, iallreduce,  # noqa: E402
                      ibroadcast, ibarrier, iallgather, ireduce_scatter)
from ._rooted import reduce, gather, scatter, alltoall  # noqa: E402
from ._alltoallv import alltoallv, ialltoallv  # noqa: E402
from ._p2p import send, recv, isend, irecv, TAG_MAX, ANY_SOURCE  # noqa: E402
from ._request import Request  # noqa: E402
