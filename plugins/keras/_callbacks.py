"""Callbacks in data-parallel training, as in serial training.

The logs every callback sees are already the ranks' aggregate (_logs.py),
the same on every rank, so callbacks that decide (EarlyStopping,
ReduceLROnPlateau, LearningRateScheduler, TerminateOnNaN) decide alike on
all ranks. Those that print or write files run on the master rank only:
ProgbarLogger, CSVLogger, TensorBoard (on every rank, each into its own
directory, with TNT_TENSORBOARD_ON_ALL_DEVICES=true) and ModelCheckpoint,
after whose saves every rank waits at a barrier, so that the file is
complete when any rank goes on. Callback(cb, aggregate_logs,
run_on_all_ranks) chooses for any callback.
"""
import os

import keras

import tntcomm

_HOOKS_LOGS = ("on_train_begin", "on_train_end", "on_test_begin",
               "on_test_end", "on_predict_begin", "on_predict_end")
_HOOKS_INDEX = ("on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
                "on_train_batch_end", "on_test_batch_begin",
                "on_test_batch_end", "on_predict_batch_begin",
                "on_predict_batch_end")


def _local(model, logs):
    """logs with this rank's own values in place of the aggregates."""
    own = getattr(model, "_tnt_local_logs", None)
    if logs is None or not own:
        return logs
    out = dict(logs)
    for k, v in own.items():
        if k in out:
            out[k] = v
        if "val_" + k in out and "val_" + k in own:
            out["val_" + k] = own["val_" + k]
    return out


class Callback(keras.callbacks.Callback):
    """Wraps a Keras callback for data-parallel training.

    aggregate_logs: the callback sees the logs aggregated over the ranks
    (True) or this rank's own (False). run_on_all_ranks: it runs on every
    rank (True) or on the master rank only (False)."""

    def __init__(self, callback, aggregate_logs=True, run_on_all_ranks=True):
        super().__init__()
        if isinstance(callback, Callback):
            callback = callback.callback
        if not isinstance(callback, keras.callbacks.Callback):
            raise TypeError("tntcomm.keras.callbacks.Callback wraps a "
                            "keras.callbacks.Callback, not %s"
                            % type(callback).__name__)
        self.callback = callback
        self.aggregate_logs = bool(aggregate_logs)
        self.run_on_all_ranks = bool(run_on_all_ranks)
        self._active = self.run_on_all_ranks or tntcomm.is_master_rank()

    # a callback that does not run here never sees the model either: some
    # (TensorBoard) create their files there
    def set_model(self, model):
        super().set_model(model)
        if self._active:
            self.callback.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        if self._active:
            self.callback.set_params(params)

    def _logs(self, logs):
        return logs if self.aggregate_logs else _local(self.model, logs)

    def _after(self, hook):
        pass


def _make_hook(name, with_index):
    if with_index:
        def hook(self, index, logs=None):
            if self._active:
                getattr(self.callback, name)(index, self._logs(logs))
            self._after(name)
    else:
        def hook(self, logs=None):
            if self._active:
                getattr(self.callback, name)(self._logs(logs))
            self._after(name)
    hook.__name__ = name
    return hook


for _name in _HOOKS_LOGS:
    setattr(Callback, _name, _make_hook(_name, False))
for _name in _HOOKS_INDEX:
    setattr(Callback, _name, _make_hook(_name, True))


class _Saving(Callback):
    """A callback that writes model files (ModelCheckpoint) on the master
    rank, followed on every rank by a barrier where it may have saved."""

    def __init__(self, callback):
        super().__init__(callback, aggregate_logs=True,
                         run_on_all_ranks=False)
        self._per_batch = getattr(callback, "save_freq", "epoch") != "epoch"

    def _after(self, hook):
        if hook == "on_epoch_end" or hook == "on_train_end" or (
                self._per_batch and hook == "on_train_batch_end"):
            tntcomm.barrier()


def _tensorboard_on_all():
    return os.environ.get("TNT_TENSORBOARD_ON_ALL_DEVICES", "").lower() in (
        "1", "true", "yes", "on")


def prepare(callbacks):
    """The user's callbacks, each wrapped as its kind needs."""
    out = []
    for cb in callbacks or []:
        if isinstance(cb, Callback):
            out.append(cb)
        elif isinstance(cb, keras.callbacks.ModelCheckpoint):
            out.append(_Saving(cb))
        elif isinstance(cb, keras.callbacks.TensorBoard):
            if _tensorboard_on_all():
                cb.log_dir = os.path.join(cb.log_dir,
                                          "rank_%d" % tntcomm.get_rank())
                out.append(Callback(cb))
            else:
                out.append(Callback(cb, run_on_all_ranks=False))
        elif isinstance(cb, (keras.callbacks.ProgbarLogger,
                             keras.callbacks.CSVLogger)):
            out.append(Callback(cb, run_on_all_ranks=False))
        else:
            out.append(Callback(cb))
    return out
