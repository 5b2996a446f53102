"""Tarantella's ResNet-50 tutorial at small scale on tntcomm.keras:
keras.applications.ResNet50 (weights=None) on synthetic images made with
a fixed seed (nothing downloaded), trained with SGD and momentum.

    tarantella -n 4 -- examples/keras_resnet50.py --image-size 32 --steps 4

The master prints the time of each epoch (the first includes tracing)
and the final loss; --check-ranks fails unless every rank holds bitwise
the same weights (BatchNormalization's moving statistics are averaged over
the ranks after training, see docs/keras.md).
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

import tarantella as tnt  # noqa: E402
import tntcomm  # noqa: E402
from weights_check import ranks_agree  # noqa: E402


class EpochTimes(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        print("epoch %d: %.3f s, loss %.6g" % (
            epoch + 1, time.perf_counter() - self.t0, logs["loss"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=4, help="steps per epoch")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--check-ranks", action="store_true")
    args = p.parse_args()

    keras.utils.set_random_seed(args.seed)
    n = args.global_batch * args.steps
    rng = np.random.default_rng(args.seed)
    x = rng.normal(size=(n, args.image_size, args.image_size, 3)) \
        .astype(np.float32)
    y = rng.integers(0, args.classes, size=n).astype(np.int32)
    model = tnt.Model(keras.applications.ResNet50(
        weights=None, input_shape=x.shape[1:], classes=args.classes))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01,
                                                 momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
        n, seed=args.seed).batch(args.global_batch)
    return fit_and_report(model, train, args, "ResNet-50")


def fit_and_report(model, train, args, name):
    """Train, print each epoch's time and the final loss on the master;
    with --check-ranks, fail unless the ranks hold the same weights."""
    cbs = [tnt.keras.callbacks.Callback(EpochTimes(), run_on_all_ranks=False)]
    history = model.fit(train, epochs=args.epochs, verbose=0, callbacks=cbs)
    if args.check_ranks and not ranks_agree(model.get_weights(),
                                           tntcomm.allgather):
        print("rank %d: weights differ between ranks" % tnt.get_rank(),
              file=sys.stderr)
        return 1
    if tnt.is_master_rank():
        print("%s ranks %d global batch %d: final loss %.9g"
              % (name, tnt.get_size(), args.global_batch,
                 history.history["loss"][-1]))
    return 0

if __name__ == "__main__":
    sys.exit(main())
