"""Distributed datasets: each rank's micro-batch of every global batch.

A tf.data.Dataset batched with the global batch size B is cut, batch by
batch, into the ranks' micro-batches as tnt_micro_batch does (B // p
samples each, the first B % p ranks one more, in rank order). Every
element becomes (element, weight) with weight = count * p / B: the train
step scales its loss by it before the gradients are averaged over the
ranks, so that the average equals the gradient of the global batch's mean
loss even when the micro-batches differ in size (weight 1.0 exactly when p
divides B, so the loss is then untouched).

The cut takes place after the whole pipeline, so every rank must produce
the same global batches: the same shuffle order. Shuffles without a seed
take theirs from TensorFlow's global seed, which importing tntcomm.keras
sets (when the script has set none) to the same value on every rank.
"""
import tensorflow as tf

import tntcomm


class DatasetError(ValueError):
    """A dataset that cannot be distributed; the message says what to do."""


def _batch_ops(dataset):
    """The batch operations of a dataset's pipeline (outermost first), as
    (batch_size or None, drop_remainder), following the chain of input
    datasets."""
    found = []
    seen = 0
    ds = dataset
    while ds is not None and seen < 10000:
        seen += 1
        name = type(ds).__name__
        if name in ("_BatchDataset", "BatchDataset", "_ParallelBatchDataset",
                    "_PaddedBatchDataset", "PaddedBatchDataset"):
            size = tf.get_static_value(getattr(ds, "_batch_size", None))
            drop = tf.get_static_value(getattr(ds, "_drop_remainder", False))
            found.append((None if size is None else int(size), bool(drop)))
        elif name in ("_UnbatchDataset", "_RebatchDataset"):
            # An unbatch undoes the batches under it.
            return found
        ds = getattr(ds, "_input_dataset", None)
    return found


def _first_tensor(element):
    return tf.nest.flatten(element)[0]


def _pack(args):
    return args[0] if len(args) == 1 else tuple(args)


def describe_batching(dataset, micro_batch_size, what):
    """(global batch size, batch now?) for a dataset to be distributed, or a
    DatasetError that says what to do."""
    size = tntcomm.get_size()
    if not isinstance(dataset, tf.data.Dataset):
        raise DatasetError(
            "tntcomm.keras: %s must be a tf.data.Dataset to be distributed "
            "(got %s); pass tnt_distribute_dataset=False to use it as each "
            "rank's own data" % (what, type(dataset).__name__))
    batches = _batch_ops(dataset)
    if len(batches) > 1:
        raise DatasetError(
            "tntcomm.keras: %s is batched %d times (batch sizes %s): batch it "
            "once, with the global batch size" % (
                what, len(batches), ", ".join(str(b[0]) for b in batches)))
    if micro_batch_size is not None and (
            not isinstance(micro_batch_size, int) or micro_batch_size < 1):
        raise DatasetError("tntcomm.keras: tnt_micro_batch_size must be a "
                           "positive int, not %r" % (micro_batch_size,))
    if not batches:
        first = _first_tensor(dataset.element_spec)
        if micro_batch_size is None and first.shape.rank and \
                first.shape[0] is None:
            raise DatasetError(
                "tntcomm.keras: the batch size of %s is not known: its "
                "pipeline has no batch() and its elements' first dimension "
                "is not fixed (e.g. batches from a generator): batch it "
                "with dataset.batch(global_batch), or give "
                "tnt_micro_batch_size if its elements are single samples"
                % what)
        if micro_batch_size is None:
            raise DatasetError(
                "tntcomm.keras: %s is not batched: batch it with the global "
                "batch size (dataset.batch(B)), or give tnt_micro_batch_size "
                "to have it batched with micro_batch_size * ranks" % what)
        return micro_batch_size * size, True
    global_batch, _ = batches[0]
    if global_batch is None:
        raise DatasetError(
            "tntcomm.keras: the batch size of %s is not known when the "
            "pipeline is built (a tensor, not a constant): batch with a "
            "Python int, or give tnt_micro_batch_size with an unbatched "
            "dataset" % what)
    if micro_batch_size is not None and micro_batch_size * size != \
            global_batch:
        raise DatasetError(
            "tntcomm.keras: tnt_micro_batch_size=%d does not fit %s: its "
            "batch size %d is not %d ranks x %d; leave tnt_micro_batch_size "
            "out (the micro-batch is then %d/%d), or batch with %d" % (
                micro_batch_size, what, global_batch, size, micro_batch_size,
                global_batch, size, micro_batch_size * size))
    return global_batch, False


def distribute(dataset, micro_batch_size=None, what="the dataset"):
    """This rank's part of `dataset` as (element, weight) elements; also
    the global batch size."""
    global_batch, batch_now = describe_batching(dataset, micro_batch_size,
                                                what)
    if batch_now:
        dataset = dataset.batch(global_batch)
    rank, size = tntcomm.get_rank(), tntcomm.get_size()

    def cut(*args):
        element = _pack(args)
        n = tf.shape(_first_tensor(element), out_type=tf.int64)[0]
        base, rem = n // size, n % size
        count = base + tf.cast(rank < rem, tf.int64)
        offset = rank * base + tf.minimum(tf.constant(rank, tf.int64), rem)
        part = tf.nest.map_structure(lambda t: t[offset:offset + count],
                                     element)
        weight = tf.cast(count * size, tf.float32) / tf.cast(
            tf.maximum(n, 1), tf.float32)
        return part, weight

    return dataset.map(cut), global_batch


def local(dataset):
    """A dataset used as this rank's own data (tnt_distribute_dataset=False):
    (element, 1.0)."""
    return dataset.map(lambda *args: (_pack(args), tf.constant(1.0)))


def element_spec(dataset):
    """The user's element spec of a distributed dataset."""
    return dataset.element_spec[0]
