"""Nonblocking collectives and their requests.

    req = tnt.iallreduce(grads, op="avg", inplace=True)
    ...                                  # compute meanwhile
    req.wait()                           # the result (here: grads)
    while not req.test(): ...            # or poll

Each i* call starts the operation and returns a Request. The arrays the
operation reads and writes are held by the request until it completes, so
they cannot be freed under it; the caller must not change an input until
then (as with MPI). A request dropped before completion is waited for
first (an unfinished operation would write into freed memory otherwise),
and finalize() waits for every pending request before freeing the
communicator.
"""
import ctypes
import weakref

from . import _lib
from ._lib import lib

# Requests not yet completed, for finalize().
pending = weakref.WeakSet()


class Request:
    """A started collective. wait() blocks until it completes and returns
    its result array (None for ibarrier); test() returns True once it has
    completed, False while it runs. Both raise TntError if it failed, and
    so does every later call."""

    def __init__(self, call, handle, result, keep, receive=False):
        self._call = call
        self._handle = handle
        self._result = result
        self._keep = keep  # the buffers the operation uses
        self._error = None
        self._receive = receive
        self._source = None
        pending.add(self)

    def _finish(self, rc):
        from . import TntError
        handle, self._handle = self._handle, None
        if self._receive and rc == _lib.SUCCESS:
            source = ctypes.c_int(-1)
            if lib.tnt_request_source(handle, ctypes.byref(source)) == \
                    _lib.SUCCESS:
                self._source = source.value
        lib.tnt_request_free(handle)
        self._keep = None
        pending.discard(self)
        if rc != _lib.SUCCESS:
            self._error = TntError(self._call, rc)

    def _raise(self):
        if self._error is not None:
            raise self._error

    @property
    def source(self):
        """A receive's sender (irecv; its peer, or the rank a receive from
        ANY_SOURCE took) once wait() or test() saw it complete; None
        before, and for other operations."""
        return self._source

    @property
    def done(self):
        """True once wait() or test() saw the operation complete."""
        return self._handle is None

    def test(self):
        if self._handle is not None:
            rc = lib.tnt_test(self._handle)
            if rc == _lib.INPROGRESS:
                return False
            self._finish(rc)
        self._raise()
        return True

    def wait(self):
        if self._handle is not None:
            self._finish(lib.tnt_wait(self._handle))
        self._raise()
        return self._result

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self._finish(lib.tnt_wait(self._handle))
            except Exception:  # interpreter shutdown: nothing left to do
                pass


def start(call, fn, args, result, keep, receive=False):
    """Calls the C function fn(*args, &request); a Request on success
    (receive: one of a receive, whose sender it reads when it
    completes)."""
    from . import _check
    handle = ctypes.c_void_p()
    _check(call, fn(*args, ctypes.byref(handle)))
    return Request(call, handle, result, keep, receive)
