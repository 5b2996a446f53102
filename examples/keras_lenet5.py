"""The Quick Start of Tarantella's manual on tntcomm.keras: LeNet-5 on the
8x8 digits that scikit-learn ships, scaled to 28x28 (nothing downloaded).

    tarantella -n 4 -- examples/keras_lenet5.py --epochs 2
    tnt-run -n 4 --interpreter .venv/bin/python examples/keras_lenet5.py

The global batch is split over the ranks; the master prints the progress
bar and the result. --save-weights FILE writes the final weights (.npz,
master only); --check-ranks fails unless every rank holds bitwise the
same weights (their bytes' hashes gathered from every rank).
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

import tarantella as tnt  # noqa: E402  (starts communication)
import tntcomm  # noqa: E402
from weights_check import ranks_agree, weights_digest  # noqa: E402


def lenet5_model_generator():
    inputs = keras.Input(shape=(28, 28, 1))
    x = keras.layers.Conv2D(6, 5, padding="same", activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(16, 5, activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(120, activation="relu")(x)
    x = keras.layers.Dense(84, activation="relu")(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def digits(n_test=297):
    """The digits as 28x28 images in [0, 1], split by a fixed permutation."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = d.images.astype(np.float32) / 16.0
    x = tf.image.resize(x[..., None], (28, 28)).numpy()
    y = d.target.astype(np.int32)
    perm = np.random.default_rng(0).permutation(len(x))
    x, y = x[perm], y[perm]
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--train-samples", type=int, default=0,
                   help="use the first N training samples (0: all)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--save-weights", default="")
    p.add_argument("--check-ranks", action="store_true")
    p.add_argument("--min-accuracy", type=float, default=0.0)
    p.add_argument("--verbose", type=int, default=1)
    args = p.parse_args()

    keras.utils.set_random_seed(args.seed)
    (x_train, y_train), (x_test, y_test) = digits()
    if args.train_samples:
        x_train, y_train = (x_train[:args.train_samples],
                            y_train[:args.train_samples])

    model = tnt.Model(lenet5_model_generator())
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05,
                                                 momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    train = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    train = train.shuffle(len(x_train), seed=42).batch(args.global_batch)
    test = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    test = test.batch(args.global_batch)

    model.fit(train, epochs=args.epochs, verbose=args.verbose)
    loss, acc = model.evaluate(test, verbose=0)
    weights = model.get_weights()
    digest = weights_digest(weights).hex()
    if args.check_ranks:
        if not ranks_agree(weights, tntcomm.allgather):
            print("rank %d: weights differ between ranks" % tnt.get_rank(),
                  file=sys.stderr)
            return 1
    if args.save_weights and tnt.is_master_rank():
        np.savez(args.save_weights, *weights)
    if tnt.is_master_rank():
        print("ranks %d evaluate loss %.9g accuracy %.9g weights %s"
              % (tnt.get_size(), loss, acc, digest[:16]))
    print("rank %d evaluate %r %r" % (tnt.get_rank(), float(loss),
                                      float(acc)), file=sys.stderr)
    if acc < args.min_accuracy:
        print("accuracy %.4f is below --min-accuracy %.4f"
              % (acc, args.min_accuracy), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
