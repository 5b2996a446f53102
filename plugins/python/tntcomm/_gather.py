"""allgather and reduce_scatter, blocking and nonblocking.

Both work along the first axis, as Horovod's allgather and PyTorch's
all_gather_into_tensor / reduce_scatter_tensor do, and undo each other's
shapes:

    allgather(x)        x of shape (n, ...) on every rank -> (size*n, ...):
                        rank r's x at rows r*n .. r*n+n-1 (a 0-d x counts
                        as shape (1,), giving shape (size,))
    reduce_scatter(x)   x of shape (size*n, ...) -> (n, ...): rank r gets
                        rows r*n .. r*n+n-1 of the element-wise reduction
                        of every rank's x

Every rank must pass the same shape and dtype. Results are new arrays.
"""
import numpy as np

from . import _lib, _request
from ._lib import lib


def _send(array):
    from . import _dtype_of
    send = np.ascontiguousarray(array)
    return send, _dtype_of(send)


def _allgather_args(array):
    from . import init, get_size
    send, dtype = _send(array)
    out = np.empty((get_size() * send.shape[0],) + send.shape[1:],
                   dtype=send.dtype)
    return out, (init(), send.ctypes.data, out.ctypes.data, send.size,
                 dtype), send


def _reduce_scatter_args(array, op, what):
    from . import init, get_size, _op_of
    code = _op_of(op)
    send, dtype = _send(array)
    size = get_size()
    if send.shape[0] % size != 0:
        raise ValueError("tntcomm: %s needs a first axis divisible by the "
                         "number of ranks (%d); the array's shape is %s"
                         % (what, size, np.shape(array)))
    out = np.empty((send.shape[0] // size,) + send.shape[1:],
                   dtype=send.dtype)
    return out, (init(), send.ctypes.data, out.ctypes.data, out.size,
                 dtype, code), send


def allgather(array):
    """Every rank's `array` concatenated along the first axis, in rank
    order (a new array)."""
    from . import _check
    out, args, _ = _allgather_args(array)
    _check("tnt_allgather", lib.tnt_allgather(*args))
    return out


def reduce_scatter(array, op="sum"):
    """This rank's block of the element-wise reduction (op: sum, avg,
    prod, min, max) of every rank's `array`, split along the first axis
    into one block per rank (a new array)."""
    from . import _check
    out, args, _ = _reduce_scatter_args(array, op, "reduce_scatter")
    _check("tnt_reduce_scatter", lib.tnt_reduce_scatter(*args))
    return out


def iallgather(array):
    """allgather, started; returns a Request whose wait() gives the
    result."""
    out, args, send = _allgather_args(array)
    return _request.start("tnt_iallgather", lib.tnt_iallgather, args, out,
                          (send, out))


def ireduce_scatter(array, op="sum"):
    """reduce_scatter, started; returns a Request whose wait() gives the
    result."""
    out, args, send = _reduce_scatter_args(array, op, "ireduce_scatter")
    return _request.start("tnt_ireduce_scatter", lib.tnt_ireduce_scatter,
                          args, out, (send, out))


def iallreduce(array, op="sum", inplace=False):
    """allreduce, started; returns a Request whose wait() gives the result
    (a new array, or `array` itself with inplace=True)."""
    from . import init, _op_of, _target, _dtype_of
    code = _op_of(op)
    out = _target(array, inplace, "iallreduce")
    dtype = _dtype_of(out)
    return _request.start("tnt_iallreduce", lib.tnt_iallreduce,
                          (init(), _lib.IN_PLACE, out.ctypes.data, out.size,
                           dtype, code), out, (out,))


def ibroadcast(array, root=0, inplace=False):
    """broadcast, started; returns a Request whose wait() gives the result
    (a new array, or `array` itself with inplace=True)."""
    from . import init, _target, _dtype_of
    out = _target(array, inplace, "ibroadcast")
    dtype = _dtype_of(out)
    if not isinstance(root, int):
        raise TypeError("tntcomm: root must be an int, not %s"
                        % type(root).__name__)
    return _request.start("tnt_ibroadcast", lib.tnt_ibroadcast,
                          (init(), out.ctypes.data, out.size, dtype, root),
                          out, (out,))


def ibarrier():
    """barrier, started; returns a Request (wait() gives None)."""
    from . import init
    return _request.start("tnt_ibarrier", lib.tnt_ibarrier, (init(),),
                          None, ())
