"""alltoallv and ialltoallv (tnt_alltoallv, tnt_ialltoallv): alltoall with
a count of rows per peer, along the first axis as alltoall is
(_rooted.py).

    alltoallv(x, sendcounts, recvcounts=None)
        x of shape (n, ...), split along the first axis into `size`
        consecutive blocks of sendcounts[0], sendcounts[1], ... rows
        (summing to n); block j goes to rank j. Returns the blocks
        received, in rank order: a new array of shape (sum(recvcounts),
        ...) whose rows from sum(recvcounts[:i]) on are rank i's block
        for this rank.

recvcounts[i] must be what rank i sends this rank (its sendcounts[rank]),
else TntError (TNT_ERR_MISMATCH): at once for this rank's block to itself
(nothing is sent; the communicator stays usable), else on every rank, and
the communicator fails, as the library says. Without recvcounts, they
are first exchanged with an alltoall of the sendcounts (one more
collective). Every rank passes arrays of the same dtype and trailing
shape. Counts are rows (numbers of elements along the first axis); a
non-integer count is TypeError, a wrong number of counts, a negative one
or sendcounts that do not add up to the rows a ValueError.
"""
import numpy as np

from . import _request
from ._lib import lib, c_size_t


def _counts(counts, size, what):
    """counts as a numpy int64 array of `size` non-negative entries."""
    c = np.asarray(counts)
    if c.ndim != 1:
        raise TypeError("tntcomm: %s must be a sequence of ints, not %r"
                        % (what, counts))
    if c.size != size:
        raise ValueError("tntcomm: %s has %d entries; expected one per rank "
                         "(%d)" % (what, c.size, size))
    if c.dtype.kind not in "iu":
        raise TypeError("tntcomm: %s must be ints, not %s: %r"
                        % (what, c.dtype, counts))
    if (c < 0).any():
        raise ValueError("tntcomm: %s has a negative count: %s"
                         % (what, c.tolist()))
    return c.astype(np.int64)


def _size_ts(values):
    """A C size_t[] of values (kept alive by the caller)."""
    return (c_size_t * len(values))(*[int(v) for v in values])


def _args(array, sendcounts, recvcounts):
    from . import init, get_size
    from ._rooted import alltoall, _send
    size = get_size()
    if np.ndim(array) == 0:  # (_send would make it 1-d)
        raise ValueError("tntcomm: alltoallv needs an array with a first "
                         "axis, not a 0-d array")
    send, dtype = _send(array)
    scounts = _counts(sendcounts, size, "sendcounts")
    if scounts.sum() != send.shape[0]:
        raise ValueError("tntcomm: sendcounts add up to %d rows but the "
                         "array has %d" % (scounts.sum(), send.shape[0]))
    if recvcounts is None:
        rcounts = alltoall(scounts)
    else:
        rcounts = _counts(recvcounts, size, "recvcounts")
    row = int(np.prod(send.shape[1:], dtype=np.int64))
    out = np.empty((int(rcounts.sum()),) + send.shape[1:], dtype=send.dtype)

    def elements(rows):  # counts and their displacements, in elements
        return (_size_ts(rows * row),
                _size_ts(np.concatenate(([0], np.cumsum(rows)[:-1])) * row))
    (sc, sd), (rc, rd) = elements(scounts), elements(rcounts)
    return out, (init(), send.ctypes.data, sc, sd, out.ctypes.data, rc, rd,
                 dtype), send


def alltoallv(array, sendcounts, recvcounts=None):
    """sendcounts[j] rows of `array` (consecutive blocks along the first
    axis) to rank j; returns the rows received from every rank, in rank
    order (a new array)."""
    from . import _check
    out, args, _ = _args(array, sendcounts, recvcounts)
    _check("tnt_alltoallv", lib.tnt_alltoallv(*args))
    return out


def ialltoallv(array, sendcounts, recvcounts=None):
    """alltoallv, started; returns a Request whose wait() gives the
    result. Without recvcounts, their exchange completes first (a
    blocking alltoall)."""
    out, args, send = _args(array, sendcounts, recvcounts)
    return _request.start("tnt_ialltoallv", lib.tnt_ialltoallv, args, out,
                          (send, out))
