"""The gradient reducer of tntcomm.keras: TensorFlow ops (tf_ops.cc) over
the library's gradient fusion (tntcomm.Fusion, include/tnt/plugin.h).

GradientReducer(variables) registers the variables' gradients with a
fusion context in backprop order (the reverse of the variables' order:
the last layer's gradients come first) and, in every train step,
reduce(grads) hands each gradient to TntFusionReady, whose output goes
through TntFusionWait. In a tf.function graph each Ready runs as soon as
TensorFlow has computed its gradient, so buckets are allreduced while the
rest of backprop runs; eagerly, all are handed over before the first wait.
The op is AVG: every rank gets the same bits, the mean over the ranks.

A failing op raises a TensorFlow error (tf.errors.AbortedError) whose
message ends with "[tnt_result_t CODE in OP]"; tnt_error() turns it back into
tntcomm's TntError with that code, so that a lost peer is seen as
TntError(code=tntcomm.PEER_LOST), as everywhere else in tntcomm.
"""
import os
import re

import numpy as np
import tensorflow as tf

import tntcomm

_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tf_ops.so")
_ops = None


def ops():
    """The loaded op library (tf.load_op_library), loaded once."""
    global _ops
    if _ops is None:
        if not os.path.exists(_LIB):
            raise ImportError(
                "tntcomm.keras: the TensorFlow op library %s is missing: it "
                "is built by meson when the interpreter given with "
                "-Dpython= imports tensorflow (see docs/keras.md)" % _LIB)
        _ops = tf.load_op_library(_LIB)
    return _ops


_CODE = re.compile(
    r"^tntcomm: (.*) \[tnt_result_t (-?[0-9]+) in (TntFusion[A-Za-z]+)\]$",
    re.S)


def tnt_error(error):
    """The TntError a TensorFlow error of these ops stands for, or None
    when it is not theirs."""
    if not isinstance(error, tf.errors.OpError):
        return None
    # TensorFlow may append the op's context after our message
    for line in (error.message or "").split("\n"):
        m = _CODE.match(line.strip())
        if m:
            return tntcomm.TntError(m.group(3), int(m.group(2)),
                                    detail=m.group(1))
    return None


class GradientReducer:
    def __init__(self, variables, threshold=None):
        """variables: the model's trainable variables (Keras variables).
        threshold: the fusion threshold in bytes (None: the library's
        default, TNT_FUSION_THRESHOLD, set by --fusion-threshold)."""
        self.variables = list(variables)
        n = len(self.variables)
        # plan index i holds variable order[i]
        self.order = list(reversed(range(n)))
        tensors = []
        for i in self.order:
            v = self.variables[i]
            dtype = np.dtype(tf.as_dtype(v.dtype).as_numpy_dtype)
            tensors.append((int(np.prod(v.shape, dtype=np.int64)), dtype,
                            getattr(v, "path", None) or v.name))
        self.fusion = tntcomm.Fusion(tensors, op="avg", threshold=threshold)
        self.handle = self.fusion._handle.value or 0
        self.ntensors = n

    def current(self, variables):
        """Whether this reducer still serves `variables`: the same
        variables, on the world communicator it was made on (a shrink
        frees its fusion context; tntcomm.generation() counts them)."""
        return (self.fusion.generation == tntcomm.generation() and
                self.same_variables(variables))

    def same_variables(self, variables):
        variables = list(variables)
        return len(variables) == len(self.variables) and all(
            a is b for a, b in zip(variables, self.variables))

    def reduce(self, grads):
        """The gradients averaged over the ranks, in the variables' order.
        A missing gradient (None: the variable did not take part) counts
        as zeros, so every rank reports every tensor."""
        lib = ops()
        bufs = [None] * self.ntensors
        for plan, i in enumerate(self.order):
            g = grads[i]
            if g is None:
                g = tf.zeros(self.variables[i].shape, self.variables[i].dtype)
            elif isinstance(g, tf.IndexedSlices):
                g = tf.convert_to_tensor(g)
            bufs[i] = lib.tnt_fusion_ready(g, fusion=self.handle, index=plan)
        out = [None] * self.ntensors
        for plan, i in enumerate(self.order):
            out[i] = lib.tnt_fusion_wait(bufs[i], fusion=self.handle,
                                         index=plan, ntensors=self.ntensors)
        return out

    def free(self):
        self.fusion.free()
