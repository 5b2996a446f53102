"""tnt.elastic: Keras training that goes on after a rank died (issue 39),
in the manner of Horovod Elastic (hvd.elastic.run, KerasState, commit and
restore), on libtntcomm's shrink.

    import tntcomm.keras as tnt                  # or: import tarantella
    model = tnt.Model(keras_model)
    model.compile(...)
    state = tnt.elastic.KerasState(model)        # epoch=0; commits once

    @tnt.elastic.run
    def train(state):
        model.fit(train, epochs=EPOCHS, initial_epoch=state.epoch,
                  callbacks=[tnt.elastic.CommitStateCallback(state)])
        return model.evaluate(test)

    loss, accuracy = train(state)   # under tnt-run --elastic

A state holds the training's resumable state: the model's weights, its
optimizer's variables (step count, momenta, ...) and the attributes given
as keywords (epoch, and any the script adds), as of its last commit().
CommitStateCallback commits when fit starts and after every epoch, with
state.epoch the next epoch to run.

run(func) calls func(state); when a rank dies during it (a TntError with
code tntcomm.PEER_LOST, raised by any collective of fit, evaluate, the
gradient ops or the script), every survivor:
  1. calls tntcomm.shrink(): the world communicator becomes the
     survivors', ranked in their old order (again, while ranks keep dying);
  2. agrees with the others on the furthest commit any of them made (the
     survivors may be a step, or an epoch end, apart: a rank can finish a
     reduction another still waits for) and takes that commit's state from
     the first rank holding it (sync());
  3. runs the reset callbacks (register_reset_callbacks) and calls
     func(state) again: fit(initial_epoch=state.epoch) then repeats the
     epoch that the death interrupted, with each global batch split over
     the survivors (tnt.Model.fit cuts it by the new rank count) and the
     gradient reducer's fusion context made anew on their communicator.
When func returns, a barrier confirms that every survivor got there; a
death found by it goes through the same recovery (fit then runs no epoch
when the last commit was the end of training).

The repeated epoch sees the same global batches as the interrupted one
when the dataset's order does not depend on how often it was iterated
(shuffle(..., seed=S, reshuffle_each_iteration=False), or no shuffle);
with reshuffle_each_iteration=True a new fit starts TensorFlow's sequence
of orders anew, so the epochs after a death see other orders than an
undisturbed run would (the training is still right, not the same).
"""
import functools
import pickle
import sys

import keras
import numpy as np
import tensorflow as tf

import tntcomm

from . import _model, _ops

__all__ = ["KerasState", "CommitStateCallback", "run"]


def _peer_lost(error):
    """The TntError of a lost peer that `error` is, or None."""
    if isinstance(error, tf.errors.OpError):
        error = _ops.tnt_error(error)
    if isinstance(error, tntcomm.TntError) and \
            error.code == tntcomm.PEER_LOST:
        return error
    return None


def _broadcast_object(obj, root):
    """The root's picklable object on every rank."""
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    n = tntcomm.broadcast(np.array([data.size], np.int64), root=root)
    buf = np.zeros(int(n[0]), np.uint8)
    if tntcomm.get_rank() == root:
        buf[:] = data
    tntcomm.broadcast(buf, root=root, inplace=True)
    return pickle.loads(buf.tobytes())


class KerasState:
    """The resumable state of a tnt.Model's training: its weights, its
    optimizer's variables and the keyword attributes (epoch=0 unless
    given), as of the last commit(). Made on every rank alike; commits
    once when made."""

    def __init__(self, model, **kwargs):
        if not isinstance(model, _model.Model):
            raise TypeError("tnt.elastic.KerasState takes a tnt.Model, not "
                            "%s" % type(model).__name__)
        kwargs.setdefault("epoch", 0)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "_names", sorted(kwargs))
        for k, v in kwargs.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_reset_callbacks", [])
        # commits made so far: the same sequence on every rank, so the
        # survivors compare theirs to find the furthest
        object.__setattr__(self, "commits", 0)
        # world ranks (at the start) of the current communicator's ranks
        object.__setattr__(self, "ranks", list(range(tntcomm.get_size())))
        object.__setattr__(self, "dead", [])
        object.__setattr__(self, "_saved", None)
        self.commit()

    def __setattr__(self, name, value):
        # a new attribute after construction belongs to the state too
        if name not in self.__dict__ and not name.startswith("_"):
            self._names.append(name)
        object.__setattr__(self, name, value)

    def register_reset_callbacks(self, callbacks):
        """Functions called (without arguments) on every survivor after a
        recovery, before func runs again."""
        self._reset_callbacks.extend(callbacks)

    # ---- the snapshot ---------------------------------------------------
    def _optimizer(self):
        """The model's optimizer, built (its variables made) when the
        model is, so that every commit of a built model holds them."""
        keras_model = self.model.model
        opt = getattr(keras_model, "optimizer", None)
        if opt is not None and not opt.built and keras_model.built:
            opt.build(keras_model.trainable_variables)
        return opt

    def _values(self):
        """(weights, optimizer variables) now, as numpy arrays."""
        keras_model = self.model.model
        weights = keras_model.get_weights() if keras_model.built else []
        opt = self._optimizer()
        slots = [np.array(v.numpy()) for v in opt.variables] \
            if opt is not None and opt.built else []
        return weights, slots

    def commit(self):
        """Remember the state now (in memory, on every rank)."""
        weights, slots = self._values()
        attrs = {k: getattr(self, k) for k in self._names}
        object.__setattr__(self, "_saved", (weights, slots, attrs))
        object.__setattr__(self, "commits", self.commits + 1)

    def restore(self):
        """Go back to the last commit (this rank's own)."""
        weights, slots, attrs = self._saved
        self._put(weights, slots)
        for k, v in attrs.items():
            object.__setattr__(self, k, v)

    def _put(self, weights, slots):
        keras_model = self.model.model
        if weights and keras_model.built:
            keras_model.set_weights(weights)
        opt = self._optimizer()
        if slots and opt is not None and opt.built:
            for v, value in zip(opt.variables, slots):
                v.assign(value)

    def sync(self):
        """Collective over the current world: every rank takes the state
        of the furthest commit, from the first rank that made it."""
        counts = np.array([self.commits], np.int64)
        furthest = int(tntcomm.allreduce(counts, "max")[0])
        have = tntcomm.get_rank() if self.commits == furthest \
            else tntcomm.get_size()
        root = int(tntcomm.allreduce(np.array([have], np.int64), "min")[0])
        weights, slots, attrs = self._saved
        # the root's shapes first, so that a rank whose model differs
        # fails with a clear error rather than a mismatched broadcast
        shapes = _broadcast_object(
            ([w.shape for w in weights], [s.shape for s in slots]), root)
        mine = ([w.shape for w in weights], [s.shape for s in slots])
        if shapes != mine:
            raise ValueError(
                "tnt.elastic: rank %d's committed state (%d weights, %d "
                "optimizer variables) differs from rank %d's (%d, %d): "
                "every rank must commit the same model"
                % (tntcomm.get_rank(), len(mine[0]), len(mine[1]), root,
                   len(shapes[0]), len(shapes[1])))
        both = _model.broadcast_arrays(list(weights) + list(slots), root)
        weights, slots = both[:len(weights)], both[len(weights):]
        attrs = _broadcast_object(attrs, root)
        object.__setattr__(self, "_saved", (weights, slots, attrs))
        object.__setattr__(self, "commits", furthest)
        self.restore()
        return root

    def _recover(self):
        """After a lost peer: shrink (again while ranks keep dying), then
        sync. Returns the dead ranks, as ranks at the start."""
        lost = []
        while True:
            try:
                dead = tntcomm.shrink()
                lost += [self.ranks[r] for r in dead]
                self.dead.extend(self.ranks[r] for r in dead)
                object.__setattr__(self, "ranks", [
                    w for r, w in enumerate(self.ranks) if r not in dead])
                self.sync()
            except Exception as e:  # noqa: BLE001  (re-raised unless lost)
                if _peer_lost(e) is None:
                    raise
                continue
            return lost


class CommitStateCallback(keras.callbacks.Callback):
    """Commits the state when fit starts and after every epoch, with
    state.epoch the next epoch to run (Horovod's CommitStateCallback and
    UpdateEpochStateCallback in one): a recovery repeats at most the epoch
    that a death interrupted."""

    def __init__(self, state):
        super().__init__()
        if not isinstance(state, KerasState):
            raise TypeError("tnt.elastic.CommitStateCallback takes a "
                            "tnt.elastic.KerasState, not %s"
                            % type(state).__name__)
        self.state = state

    def on_train_begin(self, logs=None):
        self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
        self.state.commit()


def run(func):
    """Decorator: func(state, ...) runs again on the survivors, from the
    state's furthest commit, whenever a rank dies during it (see the
    module's text). Needs TNT_RECOVERY=1 on every rank, which tnt-run
    --elastic sets. Other errors pass through unchanged."""
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, KerasState):
            raise TypeError("tnt.elastic.run: the function's first argument "
                            "must be a tnt.elastic.KerasState, not %s"
                            % type(state).__name__)
        while True:
            try:
                result = func(state, *args, **kwargs)
                tntcomm.barrier()  # every survivor got here
                return result
            except Exception as e:  # noqa: BLE001  (re-raised unless lost)
                if _peer_lost(e) is None:
                    raise
            lost = state._recover()
            if tntcomm.is_master_rank():
                size = tntcomm.get_size()
                # epochs counted from 1, as Keras' progress bar does
                print("tnt.elastic: rank%s %s died; going on with %d "
                      "rank%s at epoch %d" % (
                          "s" if len(lost) > 1 else "",
                          ", ".join(map(str, lost)), size,
                          "" if size == 1 else "s", state.epoch + 1),
                      file=sys.stderr, flush=True)
            for callback in state._reset_callbacks:
                callback()
    return wrapper
