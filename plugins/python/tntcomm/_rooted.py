"""reduce, gather, scatter and alltoall (blocking), along the first axis
as allgather and reduce_scatter are (_gather.py):

    reduce(x, op, root)   x of the same shape on every rank -> at root the
                          element-wise reduction (a new array, bitwise what
                          allreduce gives), None elsewhere
    gather(x, root)       x of shape (n, ...) -> at root (size*n, ...): rank
                          r's x at rows r*n .. r*n+n-1; None elsewhere
    scatter(x, root)      x of shape (size*n, ...) on every rank (only the
                          root's data is read; the others' gives the shape
                          and dtype) -> (n, ...): rows r*n .. r*n+n-1 of
                          root's x on rank r
    alltoall(x)           x of shape (size*n, ...) -> (size*n, ...): block
                          j of x goes to rank j, arriving as block r (the
                          sender's rank)

Every rank must pass the same shape and dtype. Results are new arrays.
"""
import numpy as np

from ._lib import lib


def _send(array):
    from . import _dtype_of
    send = np.ascontiguousarray(array)
    return send, _dtype_of(send)


def _root_of(root):
    if not isinstance(root, int):
        raise TypeError("tntcomm: root must be an int, not %s"
                        % type(root).__name__)
    return root


def _rows(send, what):
    from . import get_size
    size = get_size()
    if send.ndim == 0 or send.shape[0] % size != 0:
        raise ValueError("tntcomm: %s needs a first axis divisible by the "
                         "number of ranks (%d); the array's shape is %s"
                         % (what, size, send.shape))
    return size


def reduce(array, op="sum", root=0):
    """The element-wise reduction (op: sum, avg, prod, min, max) of every
    rank's `array`, at root (a new array); None on the other ranks."""
    from . import init, get_rank, _check, _op_of
    code = _op_of(op)
    root = _root_of(root)
    send, dtype = _send(array)
    out = np.empty_like(send) if get_rank() == root else None
    _check("tnt_reduce",
           lib.tnt_reduce(init(), send.ctypes.data,
                          out.ctypes.data if out is not None else None,
                          send.size, dtype, code, root))
    return out


def gather(array, root=0):
    """Every rank's `array` concatenated along the first axis in rank
    order, at root (a new array; a 0-d array counts as one row); None on
    the other ranks."""
    from . import init, get_rank, get_size, _check
    root = _root_of(root)
    send, dtype = _send(array)
    rows = send.reshape((1,) + send.shape) if send.ndim == 0 else send
    out = None
    if get_rank() == root:
        out = np.empty((get_size() * rows.shape[0],) + rows.shape[1:],
                       dtype=send.dtype)
    _check("tnt_gather",
           lib.tnt_gather(init(), send.ctypes.data,
                          out.ctypes.data if out is not None else None,
                          send.size, dtype, root))
    return out


def scatter(array, root=0):
    """This rank's block of root's `array`, split along the first axis into
    one block per rank (a new array)."""
    from . import init, _check
    root = _root_of(root)
    send, dtype = _send(array)
    size = _rows(send, "scatter")
    out = np.empty((send.shape[0] // size,) + send.shape[1:],
                   dtype=send.dtype)
    _check("tnt_scatter",
           lib.tnt_scatter(init(), send.ctypes.data, out.ctypes.data,
                           out.size, dtype, root))
    return out


def alltoall(array):
    """Block j of `array` (split along the first axis into one block per
    rank) to rank j; returns the blocks received, in rank order (a new
    array of the same shape)."""
    from . import init, _check
    send, dtype = _send(array)
    size = _rows(send, "alltoall")
    out = np.empty_like(send)
    _check("tnt_alltoall",
           lib.tnt_alltoall(init(), send.ctypes.data, out.ctypes.data,
                            send.size // size, dtype))
    return out
