"""Logs aggregated over the ranks.

Keras metrics keep additive state (a Mean its total and count, accuracy
the same, confusion-matrix metrics their counts), so the state the serial
run would hold is the sum of the ranks' states. After every step the
state of every metric (the loss tracker, weighted by the micro-batch's
samples, included) is summed over the ranks in one allreduce, the results
are computed from the sums, and the local state is put back: the logs
are the same on every rank and equal the serial ones up to float
rounding. Metrics whose state is not a sum would be wrong; Keras' own
metrics all keep sums.
"""
import numpy as np

import tntcomm


def _metric_variables(model):
    out = []
    for m in model.metrics:
        out.extend(m.variables)
    return out


def local_logs(model):
    return dict(model.get_metrics_result())


def aggregated_logs(model):
    """The logs of model.metrics with their state summed over the ranks."""
    variables = _metric_variables(model)
    if not variables or tntcomm.get_size() == 1:
        return local_logs(model)
    values = [np.asarray(v.numpy()) for v in variables]
    flat = np.concatenate([v.astype(np.float64).ravel() for v in values]) \
        if values else np.zeros(0)
    total = tntcomm.allreduce(flat, op="sum")
    try:
        off = 0
        for v, val in zip(variables, values):
            n = val.size
            v.assign(total[off:off + n].reshape(val.shape).astype(val.dtype))
            off += n
        return dict(model.get_metrics_result())
    finally:
        for v, val in zip(variables, values):
            v.assign(val)
