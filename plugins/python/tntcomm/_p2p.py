"""Point-to-point: send, recv and their nonblocking forms isend, irecv
(tnt_send, tnt_recv, tnt_isend, tnt_irecv in include/tnt/tnt.h).

    tnt.send(x, peer=1, tag=7)          # returns once x may be reused
    y = tnt.recv(np.empty(5), peer=0, tag=7)   # fills and returns y
    req = tnt.isend(x, peer=1); req.wait()     # wait() gives None
    req = tnt.irecv(y, peer=0); req.wait()     # wait() gives y

A message is the whole array (its elements in C order); the receive's
array must have the send's number of elements and dtype, else TntError
(TNT_ERR_MISMATCH, naming both ranks, the tag and both counts) and the
communicator fails, as in the library. The receive buffer is always the
caller's array, written in place: it must be a writeable C-contiguous
numpy array. Messages between one pair of ranks with one tag arrive in
the order they were sent; other tags (0 to TAG_MAX) are independent. A
large send (above TNT_EAGER_BYTES) returns only once the peer has posted
its receive: two ranks that both send first wait for each other; use
isend.

A receive from any source, peer=ANY_SOURCE, takes the next message with
its tag from whichever rank sends one (the library's TNT_ANY_SOURCE:
each sender's messages still arrive in its order, no sender is starved).
The sender is known once the receive completed: irecv's Request says it
(`source`); a blocking recv does not, as in the C API.

    req = tnt.irecv(y, tnt.ANY_SOURCE, tag=3); req.wait(); req.source
"""
import numpy as np

from ._lib import lib

# TNT_TAG_MAX (include/tnt/tnt.h): the largest tag.
TAG_MAX = 0x3fffffff
# TNT_ANY_SOURCE: a receive's peer that takes a message from any rank.
ANY_SOURCE = -1
_C_INT_MIN, _C_INT_MAX = -2 ** 31, 2 ** 31 - 1


def int_arg(value, what):
    """value as a C int argument: an int (not a bool) in the C int range.
    ctypes would wrap a larger one silently (peer 2**32 + 1 would reach
    the library as rank 1), so it is refused here; the library checks the
    rest (peer a rank of the communicator, tag up to TAG_MAX)."""
    if isinstance(value, np.integer):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("tntcomm: %s must be an int, not %s"
                        % (what, type(value).__name__))
    if not _C_INT_MIN <= value <= _C_INT_MAX:
        raise ValueError("tntcomm: %s %d is out of the C int range"
                         % (what, value))
    return value


def _send_args(array, peer, tag):
    from . import init
    from ._rooted import _send
    send, dtype = _send(array)
    return (init(), send.ctypes.data, send.size, dtype,
            int_arg(peer, "peer"), int_arg(tag, "tag")), send


def _recv_args(array, peer, tag, what):
    from . import init, _dtype_of, _target
    out = _target(array, True, what)
    dtype = _dtype_of(out)
    return (init(), out.ctypes.data, out.size, dtype, int_arg(peer, "peer"),
            int_arg(tag, "tag")), out


def send(array, peer, tag=0):
    """Send `array` (any array-like; its elements in C order) to rank
    `peer` with `tag`; returns once the array may be changed."""
    from . import _check
    args, _ = _send_args(array, peer, tag)
    _check("tnt_send", lib.tnt_send(*args))


def recv(array, peer, tag=0):
    """Receive rank `peer`'s message with `tag` into `array` (a writeable
    C-contiguous numpy array of the send's size and dtype); returns
    `array`. peer ANY_SOURCE: the next message from any rank (irecv
    tells which)."""
    from . import _check
    args, out = _recv_args(array, peer, tag, "recv")
    _check("tnt_recv", lib.tnt_recv(*args))
    return out


def isend(array, peer, tag=0):
    """send, started; returns a Request (wait() gives None). The request
    holds the array; do not change it before the request completes."""
    from . import _request
    args, send_buf = _send_args(array, peer, tag)
    return _request.start("tnt_isend", lib.tnt_isend, args, None,
                          (send_buf,))


def irecv(array, peer, tag=0):
    """recv, started; returns a Request whose wait() gives `array` and
    whose `source` is then the rank the message came from (peer, or the
    sender that a receive from ANY_SOURCE took)."""
    from . import _request
    args, out = _recv_args(array, peer, tag, "irecv")
    return _request.start("tnt_irecv", lib.tnt_irecv, args, out, (out,),
                          receive=True)
