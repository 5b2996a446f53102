"""tntcomm.keras against tf.distribute.MultiWorkerMirroredStrategy (a
benchmark, not a test): time per epoch of the small ResNet-50 and of the
Transformer of examples/ at p ranks, the same model, data, optimizer and
global batch, in one run:

  tnt     tnt.Model.fit (Keras' fit, gradients through the fusion ops)
  nocomm  the same fit with the gradient reduction switched off (the
          reducer returns each rank's own gradients: a stub in this
          benchmark only; the per-step aggregation of the logs stays)
  mwms    MultiWorkerMirroredStrategy, TF_CONFIG over loopback ports,
          its collective ops over gRPC. Keras 3's fit does not run under
          it (keras-team/keras#20585: a PerReplica value reaches
          convert_to_tensor), so this is the custom loop a Keras 3 user
          writes instead: strategy.run of a step whose loss is summed
          over the micro-batch and divided by the global batch, and the
          Keras optimizer's apply_gradients, which all-reduces the
          gradients (SUM) in replica context.

With --timeline, one more tnt run at the first p writes a TNT_TIMELINE
and the benchmark reports, per step, how much of the buckets' allreduce
time lay before the step's last gradient was handed over (i.e. under
backprop).

    flock /tmp/tnt-bench.lock .venv/bin/python bench/keras-bench.py \\
        --ranks 2 4 --models resnet transformer --timeline

Every process gets one intra-op and one inter-op thread (the ranks share
the machine's cores). Each run trains --epochs epochs of --steps steps;
the first epoch (tracing) is left out and the median of the others is
reported, with the ratios tnt/mwms and tnt/nocomm.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- the models and data (shared by every mode) --------------------------

def build(name, args):
    """(keras model, loss with reduction "sum", dataset of global batches,
    optimizer factory)."""
    import numpy as np
    import keras
    import tensorflow as tf
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(3)
    n = args.global_batch[name] * args.steps
    if name == "resnet":
        size = args.image_size
        x = rng.normal(size=(n, size, size, 3)).astype(np.float32)
        y = rng.integers(0, 10, size=n).astype(np.int32)
        model = keras.applications.ResNet50(
            weights=None, input_shape=x.shape[1:], classes=10)
        data = (x, y)
        loss = keras.losses.SparseCategoricalCrossentropy(reduction="sum")
    else:
        import keras_transformer as kt
        L, vocab = 16, 512
        src = rng.integers(2, vocab, size=(n, L)).astype(np.int32)
        out = src[:, ::-1].copy()
        tgt = np.concatenate([np.full((n, 1), 1, np.int32), out[:, :-1]],
                             axis=1)
        model = kt.transformer(vocab, L, args.d_model, 8, 4 * args.d_model,
                               2)
        data = ((src, tgt), out)
        loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="sum")
    ds = tf.data.Dataset.from_tensor_slices(data).batch(
        args.global_batch[name])

    def optimizer():
        return keras.optimizers.SGD(0.01, momentum=0.9)
    return model, loss, ds, optimizer


# ---- one process of one run ----------------------------------------------

def epoch_times_tnt(name, args, nocomm):
    import keras
    import tarantella as tnt
    from tntcomm.keras import _ops
    if nocomm:
        # the stub: each rank's own gradients, nothing sent
        _ops.GradientReducer.reduce = lambda self, grads: list(grads)
    model, _, ds, optimizer = build(name, args)
    model = tnt.Model(model)
    # Keras' default loss (the micro-batch's mean), averaged over the
    # ranks by the reducer: the global batch's mean
    model.compile(optimizer=optimizer(), loss=keras.losses.
                  SparseCategoricalCrossentropy(
                      from_logits=(name != "resnet")))
    times = []

    class T(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.t0)
    model.fit(ds, epochs=args.epochs, verbose=0, callbacks=[T()])
    return times, tnt.get_rank()


def epoch_times_mwms(name, args):
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model, loss, ds, optimizer = build(name, args)
        opt = optimizer()
        opt.build(model.trainable_variables)
    gb = float(args.global_batch[name])
    dist = strategy.experimental_distribute_dataset(ds)

    @tf.function
    def step(batch):
        def replica(x, y):
            with tf.GradientTape() as tape:
                value = loss(y, model(x, training=True)) / gb
            grads = tape.gradient(value, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return value
        return strategy.reduce("sum", strategy.run(replica, args=batch),
                               axis=None)
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        for batch in dist:
            step(batch)
        times.append(time.perf_counter() - t0)
    return times, strategy.cluster_resolver.task_id


def worker(args):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if args.mode == "mwms":
        times, rank = epoch_times_mwms(args.model, args)
    else:
        times, rank = epoch_times_tnt(args.model, args,
                                      args.mode == "nocomm")
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(times, f)
    return 0


# ---- the driver -------------------------------------------------------------

def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def passthrough(args):
    return ["--steps", str(args.steps), "--epochs", str(args.epochs),
            "--image-size", str(args.image_size), "--d-model",
            str(args.d_model), "--batch-resnet",
            str(args.global_batch["resnet"]), "--batch-transformer",
            str(args.global_batch["transformer"])]


def run_one(args, model, mode, p, tmp, timeline=None):
    out = os.path.join(tmp, "%s_%s%s_%d.json" % (
        model, mode, "_timeline" if timeline else "", p))
    me = [os.path.abspath(__file__), "--worker", "--mode", mode, "--model",
          model, "--out", out] + passthrough(args)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    if mode == "mwms":
        ports = free_ports(p)
        procs = []
        for r in range(p):
            cfg = {"cluster": {"worker": ["127.0.0.1:%d" % q
                                          for q in ports]},
                   "task": {"type": "worker", "index": r}}
            procs.append(subprocess.Popen(
                [sys.executable] + me, env=dict(env, TF_CONFIG=json.dumps(
                    cfg)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True))
        logs = [pr.communicate(timeout=args.limit)[0] for pr in procs]
        ok = all(pr.returncode == 0 for pr in procs)
        log = "\n".join(logs)
    else:
        cmd = [args.tnt_run, "-n", str(p), "--timeout", str(args.limit),
               "--interpreter", sys.executable]
        if timeline:
            cmd += ["--timeline", timeline]
        r = subprocess.run(cmd + me, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        ok, log = r.returncode == 0, r.stdout
    wall = time.perf_counter() - t0
    if not ok or not os.path.exists(out):
        sys.stderr.write("keras-bench: %s %s p=%d failed:\n%s\n" % (
            model, mode, p, log[-3000:]))
        return None, wall
    with open(out) as f:
        times = json.load(f)
    print("    epochs: %s s" % ", ".join("%.2f" % t for t in times))
    return statistics.median(times[1:]) if len(times) > 1 else times[0], wall


def overlap(path):
    """Per step (fusion iteration) of rank 0: the buckets' allreduce time
    (post to end, summed) and the part of it before the step's last
    ready; and the buckets posted before it. Returns (steps, median
    fraction of the time hidden, buckets per step, median fraction of the
    buckets posted before the last ready)."""
    import collections
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    last_ready = collections.defaultdict(float)
    spans = collections.defaultdict(list)
    pid0 = min(e["pid"] for e in events if "pid" in e)
    for e in events:
        a = e.get("args", {})
        if e.get("pid") != pid0 or e.get("cat") != "fusion" or \
                "iter" not in a:
            continue
        key = (a["fusion"], a["iter"])
        if e.get("name") == "ready":
            last_ready[key] = max(last_ready[key], e["ts"])
        elif str(e.get("name", "")).startswith("bucket "):
            spans[key].append((a["post"], a["end"]))
    fractions, nb, early = [], [], []
    for key, sp in spans.items():
        if key[1] == 0:
            continue  # the first step traces the graph
        total = sum(e - p for p, e in sp)
        hidden = sum(max(0.0, min(e, last_ready[key]) - p) for p, e in sp)
        if total > 0:
            fractions.append(hidden / total)
            nb.append(len(sp))
            early.append(sum(1 for p, _ in sp if p < last_ready[key]) /
                         len(sp))
    if not fractions:
        return 0, 0.0, 0, 0.0
    return (len(fractions), statistics.median(fractions), max(nb),
            statistics.median(early))


def driver(args):
    load = os.getloadavg()
    print("keras-bench: load average %.1f %.1f %.1f at start, %d cores"
          % (load + (os.cpu_count(),)))
    print("steps/epoch %d, epochs %d (first left out), global batch: "
          "resnet %d (%dx%d images), transformer %d (d_model %d)" % (
              args.steps, args.epochs, args.global_batch["resnet"],
              args.image_size, args.image_size,
              args.global_batch["transformer"], args.d_model))
    rows = []
    tmp = tempfile.mkdtemp(prefix="keras-bench.")
    tl_report = None
    for model in args.models:
        for p in args.ranks:
            t = {}
            for mode in ("tnt", "nocomm", "mwms"):
                t[mode], wall = run_one(args, model, mode, p, tmp)
                print("  %s p=%d %s: %s s/epoch (run %.0f s)" % (
                    model, p, mode, "%.3f" % t[mode] if t[mode] else "-",
                    wall), flush=True)
            rows.append((model, p, t))
            if args.timeline and tl_report is None:
                tl = os.path.join(tmp, "tl_%s_%d" % (model, p))
                secs, _ = run_one(args, model, "tnt", p, tmp, timeline=tl)
                if secs:
                    tl_report = (model, p, secs) + overlap(tl + ".json")
    load = os.getloadavg()
    print("load average %.1f %.1f %.1f at the end" % load)
    print()
    print("| model | p | tnt (s/epoch) | no communication | MWMS | "
          "tnt / MWMS | tnt / no comm. |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model, p, t in rows:
        def f(v):
            return "%.3f" % v if v else "-"

        def ratio(a, b):
            return "%.2f" % (a / b) if a and b else "-"
        print("| %s | %d | %s | %s | %s | %s | %s |" % (
            model, p, f(t["tnt"]), f(t["nocomm"]), f(t["mwms"]),
            ratio(t["tnt"], t["mwms"]), ratio(t["tnt"], t["nocomm"])))
    if tl_report:
        model, p, secs, steps, frac, nb, early = tl_report
        print()
        print("timeline: %s p=%d (%.3f s/epoch with the timeline on): "
              "%d steps after the first, up to %d buckets a step; "
              "medians over the steps: %.0f%% of the buckets posted, and "
              "%.0f%% of the buckets' allreduce time spent, before the "
              "step's last gradient was handed over" % (
                  model, p, secs, steps, nb, 100 * early, 100 * frac))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--models", nargs="+", default=["resnet", "transformer"],
                   choices=["resnet", "transformer"])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--batch-resnet", type=int, default=16)
    p.add_argument("--batch-transformer", type=int, default=32)
    p.add_argument("--timeline", action="store_true")
    p.add_argument("--limit", type=int, default=600,
                   help="seconds a run may take")
    p.add_argument("--tnt-run", default=os.path.join(
        os.path.dirname(sys.executable), "tnt-run"))
    p.add_argument("--overlap-of", metavar="TIMELINE.json",
                   help="only print the overlap figures of a merged "
                   "timeline and exit")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=["tnt", "nocomm", "mwms"],
                   help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.global_batch = {"resnet": args.batch_resnet,
                         "transformer": args.batch_transformer}
    if args.overlap_of:
        print("steps %d, hidden %.3f, buckets %d, posted early %.3f"
              % overlap(args.overlap_of))
        return 0
    if args.epochs < 2:
        p.error("--epochs must be 2 or more (the first is left out)")
    return worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    sys.exit(main())
