"""tnt.Model: a Keras 3 model (TensorFlow backend) trained data-parallel.

The wrapper keeps the user's keras.Model and gives it, on the instance,
a train step that scales the loss by the micro-batch's weight (_data.py)
and sends the gradients through the fusion ops (_ops.py) before the
optimizer applies them, and step functions whose logs are aggregated over
the ranks (_logs.py). Everything not defined here is the Keras model's
own attribute. Weights are broadcast from the master rank whenever they
are set: at the first fit/evaluate/predict of a model that was not built
when wrapped (else at wrapping), after set_weights and after every load.
"""
import enum
import warnings

import keras
import numpy as np
import tensorflow as tf
from keras.src.trainers import data_adapters

import tntcomm

from . import _callbacks, _data, _logs, _ops


class ParallelStrategy(enum.Enum):
    DATA = "data"
    PIPELINING = "pipelining"
    ALL = "all"


def _unpack(data):
    return data_adapters.data_adapter_utils.unpack_x_y_sample_weight(data)


def _batch_len(x):
    return tf.shape(next(t for t in tf.nest.flatten(x) if t is not None))[0]


def broadcast_arrays(arrays, root):
    """The root rank's numpy arrays on every rank (one broadcast per
    dtype, over all of them); every rank passes arrays of the same
    shapes and dtypes. Returns new arrays."""
    arrays = [np.asarray(a) for a in arrays]
    if tntcomm.get_size() == 1:
        return arrays
    by_dtype = {}
    for i, a in enumerate(arrays):
        by_dtype.setdefault(np.dtype(a.dtype), []).append(i)
    for dtype, idx in by_dtype.items():
        flat = np.concatenate([np.ravel(arrays[i]) for i in idx]) \
            .astype(dtype, copy=False)
        flat = np.ascontiguousarray(flat)
        tntcomm.broadcast(flat, root=root, inplace=True)
        off = 0
        for i in idx:
            n = arrays[i].size
            arrays[i] = flat[off:off + n].reshape(arrays[i].shape)
            off += n
    return arrays


def broadcast_weights(model, root=None):
    """Every rank takes the root's weights (default: the master rank's)."""
    if tntcomm.get_size() == 1:
        return
    root = tntcomm.get_master_rank() if root is None else root
    model.set_weights(broadcast_arrays(model.get_weights(), root))


def _forward(model, x, training):
    """The model's output, passing training= only to a call that takes it
    (as keras.Model's own train/test/predict steps do)."""
    if model._call_has_training_arg:
        return model(x, training=training)
    return model(x)


def _train_step(model, data):
    data, weight = data
    x, y, sample_weight = _unpack(data)
    with tf.GradientTape() as tape:
        y_pred = _forward(model, x, training=True)
        loss = model._compute_loss(x=x, y=y, y_pred=y_pred,
                                   sample_weight=sample_weight, training=True)
        n = _batch_len(x)
        model._loss_tracker.update_state(
            tf.where(n > 0, loss, tf.zeros_like(loss)), sample_weight=n)
        # weight is 1.0 when every micro-batch has global/p samples
        scaled = loss * tf.cast(weight, loss.dtype)
        if model.optimizer is not None:
            scaled = model.optimizer.scale_loss(scaled)
    variables = model.trainable_weights
    if variables:
        grads = tape.gradient(scaled, variables)
        grads = model._tnt_reducer.reduce(grads)
        model.optimizer.apply_gradients(zip(grads, variables))
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def _test_step(model, data):
    data, _ = data
    x, y, sample_weight = _unpack(data)
    y_pred = _forward(model, x, training=False)
    loss = model._compute_loss(x=x, y=y, y_pred=y_pred,
                               sample_weight=sample_weight, training=False)
    n = _batch_len(x)
    model._loss_tracker.update_state(
        tf.where(n > 0, loss, tf.zeros_like(loss)), sample_weight=n)
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def _predict_step(model, data):
    data, _ = data
    x, _, _ = _unpack(data)
    y_pred = _forward(model, x, training=False)
    # the micro-batch's length, to put the ranks' outputs back in order
    return y_pred, tf.reshape(_batch_len(x), [1])


def average_non_trainable(model):
    """Average the float non-trainable weights (BatchNormalization's
    moving statistics, which each rank updates from its own micro-batches)
    over the ranks, so that every rank evaluates, predicts and saves with
    the same weights. Run after training steps, before the model is used
    otherwise (not per step)."""
    model._tnt_dirty = False
    if tntcomm.get_size() == 1:
        return
    variables = [v for v in model.non_trainable_weights
                 if np.dtype(tf.as_dtype(v.dtype).as_numpy_dtype).kind == "f"]
    if not variables:
        return
    values = [np.asarray(v.numpy()) for v in variables]
    flat = np.concatenate([v.astype(np.float64).ravel() for v in values])
    tntcomm.allreduce(flat, op="avg", inplace=True)
    off = 0
    for v, val in zip(variables, values):
        v.assign(flat[off:off + val.size].reshape(val.shape)
                 .astype(val.dtype))
        off += val.size


def _aggregating(function, model, training):
    def step(iterator):
        if not training and getattr(model, "_tnt_dirty", False):
            average_non_trainable(model)
        function(iterator)
        if training:
            model._tnt_dirty = True
        model._tnt_local_logs = _logs.local_logs(model)
        return _logs.aggregated_logs(model)
    return step


def _install(model):
    """Give the Keras model the data-parallel steps, on the instance."""
    cls = type(model)
    model.train_step = lambda data: _train_step(model, data)
    model.test_step = lambda data: _test_step(model, data)
    model.predict_step = lambda data: _predict_step(model, data)

    def make_train_function(force=False):
        if model.train_function is not None and not force:
            return model.train_function
        cls.make_train_function(model, force=True)
        model.train_function = _aggregating(model.train_function, model,
                                            True)
        return model.train_function

    def make_test_function(force=False):
        if model.test_function is not None and not force:
            return model.test_function
        cls.make_test_function(model, force=True)
        model.test_function = _aggregating(model.test_function, model,
                                           False)
        return model.test_function

    model.make_train_function = make_train_function
    model.make_test_function = make_test_function
    # the logs of the last step are the aggregates; Keras would otherwise
    # read this rank's metrics at the end of an epoch
    model._get_metrics_result_or_logs = lambda logs: logs


class Model:
    """tnt.Model(keras_model, parallel_strategy=tnt.ParallelStrategy.DATA)."""

    _OWN = ("model", "_tnt_synced", "_tnt_threshold")

    def __init__(self, model, parallel_strategy=ParallelStrategy.DATA,
                 num_pipeline_stages=1):
        if isinstance(model, Model):
            model = model.model
        if not isinstance(model, keras.Model):
            raise TypeError("tnt.Model wraps a keras.Model, not %s"
                            % type(model).__name__)
        if parallel_strategy not in (ParallelStrategy.DATA, "data", "DATA"):
            raise ValueError(
                "tnt.Model: parallel_strategy %r is not supported by "
                "tntcomm.keras; only ParallelStrategy.DATA (data "
                "parallelism) is" % (parallel_strategy,))
        if num_pipeline_stages != 1:
            raise ValueError("tnt.Model: pipelining is not supported "
                             "(num_pipeline_stages must be 1)")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "_tnt_synced", False)
        tntcomm.init()
        model._tnt_reducer = None
        model._tnt_local_logs = None
        _install(model)
        if model.compiled:
            model.jit_compile = False
        if model.built:
            self._sync()

    # ---- delegation -------------------------------------------------
    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "model"), name)

    def __setattr__(self, name, value):
        if name in Model._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.model, name, value)

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def __repr__(self):
        return "<tnt.Model of %r>" % (self.model,)

    # ---- weights ------------------------------------------------------
    def _sync(self):
        broadcast_weights(self.model)
        self._tnt_synced = True

    def get_weights(self):
        return self.model.get_weights()

    def set_weights(self, weights):
        self.model.set_weights(weights)
        self._sync()

    def load_weights(self, filepath, **kwargs):
        self.model.load_weights(filepath, **kwargs)
        self._sync()

    def save_weights(self, filepath, tnt_save_all_devices=False, **kwargs):
        if tnt_save_all_devices or tntcomm.is_master_rank():
            self.model.save_weights(filepath, **kwargs)
        tntcomm.barrier()

    def save(self, filepath, tnt_save_all_devices=False, **kwargs):
        if tnt_save_all_devices or tntcomm.is_master_rank():
            self.model.save(filepath, **kwargs)
        tntcomm.barrier()

    def summary(self, *args, **kwargs):
        if tntcomm.is_master_rank():
            return self.model.summary(*args, **kwargs)
        return None

    def get_config(self):
        return self.model.get_config()

    def to_json(self, **kwargs):
        return self.model.to_json(**kwargs)

    # ---- training -----------------------------------------------------
    def compile(self, *args, **kwargs):
        # the train step holds custom ops, which XLA cannot compile
        if kwargs.get("jit_compile") is True:
            warnings.warn("tnt.Model: jit_compile=True is not supported "
                          "(the gradient ops have no XLA kernel); compiling "
                          "without XLA")
        kwargs["jit_compile"] = False
        self.model.compile(*args, **kwargs)

    def _prepare(self, dataset, micro_batch_size, distribute, what,
                 training):
        """(the dataset for Keras, the user's element spec, the micro-batch
        size if known)."""
        if distribute:
            ds, global_batch = _data.distribute(dataset, micro_batch_size,
                                                what)
            size = tntcomm.get_size()
            micro = global_batch // size
        else:
            if not isinstance(dataset, tf.data.Dataset):
                raise _data.DatasetError(
                    "tntcomm.keras: %s must be a tf.data.Dataset" % what)
            if micro_batch_size is not None and not _data._batch_ops(dataset):
                dataset = dataset.batch(micro_batch_size)
            ds = _data.local(dataset)
            batches = _data._batch_ops(dataset)
            micro = batches[0][0] if batches else None
        return ds, _data.element_spec(ds), micro

    def _build(self, spec, training):
        """Build model, metrics and loss from the element spec rather than
        by Keras peeking at a batch (whose structure is ours)."""
        model = self.model
        symbolic = tf.nest.map_structure(
            lambda s: None if s is None else keras.KerasTensor(
                s.shape, keras.backend.standardize_dtype(s.dtype)), spec)
        if model.compiled or not model.built:
            model._symbolic_build(data_batch=symbolic)
        if not self._tnt_synced:
            self._sync()
        if training and model.optimizer is not None and \
                not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)

    def _reducer(self):
        model = self.model
        r = model._tnt_reducer
        if r is None or not r.current(model.trainable_weights):
            if r is not None:
                r.free()  # nothing to do when a shrink freed it
            model._tnt_reducer = _ops.GradientReducer(
                model.trainable_weights)
            # the step functions hold the old reducer's ops
            model.train_function = None
        return model._tnt_reducer

    def _warn_batchnorm(self, micro):
        if micro is None or micro >= 16 or not tntcomm.is_master_rank():
            return
        if any(isinstance(layer, keras.layers.BatchNormalization)
               for layer in self.model._flatten_layers()):
            warnings.warn(
                "tnt.Model: the micro-batch has %d samples (< 16): "
                "BatchNormalization layers normalise over each rank's "
                "micro-batch only, which may hurt accuracy; use a larger "
                "global batch" % micro)

    def fit(self, x=None, y=None, *, callbacks=None, validation_data=None,
            verbose="auto", tnt_micro_batch_size=None,
            tnt_validation_micro_batch_size=None, tnt_distribute_dataset=True,
            tnt_distribute_validation_dataset=True, **kwargs):
        if y is not None:
            raise _data.DatasetError(
                "tnt.Model.fit: give the data as a tf.data.Dataset of "
                "(x, y) batched with the global batch size, not as x and y")
        for k in ("batch_size", "validation_split", "validation_batch_size"):
            if kwargs.get(k):
                raise _data.DatasetError(
                    "tnt.Model.fit: %s is not supported: batch the "
                    "tf.data.Dataset with the global batch size" % k)
        ds, spec, micro = self._prepare(x, tnt_micro_batch_size,
                                        tnt_distribute_dataset,
                                        "the training dataset", True)
        val = None
        if validation_data is not None:
            val, _, _ = self._prepare(validation_data,
                                      tnt_validation_micro_batch_size,
                                      tnt_distribute_validation_dataset,
                                      "the validation dataset", False)
        self._build(spec, True)
        self._reducer()
        self._warn_batchnorm(micro)
        if verbose == "auto":
            verbose = 1
        kwargs["shuffle"] = False  # the dataset's own shuffle counts
        try:
            history = self.model.fit(
                ds, validation_data=val,
                callbacks=_callbacks.prepare(callbacks),
                verbose=verbose if tntcomm.is_master_rank() else 0, **kwargs)
        except tf.errors.OpError as e:
            # the gradient ops' failures as tntcomm's TntError (a lost
            # peer: code tntcomm.PEER_LOST, what elastic.run waits for)
            error = _ops.tnt_error(e)
            if error is None:
                raise
            raise error from e
        if getattr(self.model, "_tnt_dirty", False):
            average_non_trainable(self.model)
        return history

    def evaluate(self, x=None, y=None, *, callbacks=None, verbose="auto",
                 tnt_micro_batch_size=None, tnt_distribute_dataset=True,
                 **kwargs):
        if y is not None or kwargs.get("batch_size"):
            raise _data.DatasetError(
                "tnt.Model.evaluate: give a tf.data.Dataset batched with "
                "the global batch size")
        ds, spec, _ = self._prepare(x, tnt_micro_batch_size,
                                    tnt_distribute_dataset,
                                    "the evaluation dataset", False)
        self._build(spec, False)
        if verbose == "auto":
            verbose = 1
        return self.model.evaluate(
            ds, callbacks=_callbacks.prepare(callbacks),
            verbose=verbose if tntcomm.is_master_rank() else 0, **kwargs)

    def predict(self, x=None, *, callbacks=None, verbose="auto",
                tnt_micro_batch_size=None, tnt_distribute_dataset=True,
                **kwargs):
        if kwargs.get("batch_size"):
            raise _data.DatasetError(
                "tnt.Model.predict: give a tf.data.Dataset batched with "
                "the global batch size")
        ds, spec, _ = self._prepare(x, tnt_micro_batch_size,
                                    tnt_distribute_dataset,
                                    "the prediction dataset", False)
        self._build(spec, False)
        if getattr(self.model, "_tnt_dirty", False):
            average_non_trainable(self.model)
        if verbose == "auto":
            verbose = 1
        out, counts = self.model.predict(
            ds, callbacks=_callbacks.prepare(callbacks),
            verbose=verbose if tntcomm.is_master_rank() else 0, **kwargs)
        if not tnt_distribute_dataset or tntcomm.get_size() == 1:
            return out
        return tf.nest.map_structure(
            lambda o: _reassemble(o, np.asarray(counts, np.int64)), out)


def _reassemble(local, counts):
    """The global predictions from every rank's micro-batch outputs, in
    the global batches' order: the same array on every rank."""
    size = tntcomm.get_size()
    local = np.ascontiguousarray(local)
    nb = counts.size
    all_counts = tntcomm.allgather(counts).reshape(size, nb)
    most = int(all_counts.sum(axis=1).max())
    padded = np.zeros((most,) + local.shape[1:], local.dtype)
    padded[:local.shape[0]] = local
    everyone = tntcomm.allgather(padded).reshape((size, most) +
                                                 local.shape[1:])
    starts = np.concatenate([np.zeros((size, 1), np.int64),
                             np.cumsum(all_counts, axis=1)], axis=1)
    parts = []
    for b in range(nb):
        for r in range(size):
            parts.append(everyone[r, starts[r, b]:starts[r, b] +
                                  all_counts[r, b]])
    return np.concatenate(parts) if parts else local
