"""Measure what the live monitor costs on notebook 03's training loop.

    python tools/monitor_overhead.py [--epochs 30] [--repeats 3]

Runs the notebook's model (digits MLP, batch 32, Adam) for the same number of steps with the
monitor's null sink (no drawing) and with a sink that renders the PNG exactly as the widget does
(without a browser to send it to), interleaved, several times, and prints the median wall times,
the added fraction, and the monitor's own accounting (``Monitor.overhead()``).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import keras
    import tensorflow as tf

    import ctlkit
    from ctlkit.sinks import NullSink

    class RenderSink(NullSink):
        wants_png = True  # the monitor renders PNGs for it, as for the widget

    ctlkit.setup(seed=0, verbose=False)
    splits = ctlkit.data.load("digits", batch_size=32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(sink):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([
            keras.Input((8, 8, 1)), keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"), keras.layers.Dropout(0.2),
            keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])
        opt = keras.optimizers.Adam(2e-3)

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return (loss, ctlkit.grads.global_norm(grads),
                    ctlkit.grads.layer_norms(grads, model.trainable_variables))

        for x, y in splits.train.take(1):
            step(x, y)  # trace outside the timing
        mon = ctlkit.Monitor(args.epochs * len(splits.train), sink=sink)
        t0 = time.perf_counter()
        with mon:
            for _ in range(args.epochs):
                for x, y in splits.train:
                    loss, gnorm, per_layer = step(x, y)
                    mon.log(loss=loss, grad_norm=gnorm, layer_norms=per_layer)
                mon.log_epoch(val_accuracy=0.0)
            loop = time.perf_counter() - t0   # the loop itself; the final figure is drawn after
        return loop, mon

    null_t, live_t, own = [], [], []
    for _ in range(args.repeats):
        null_t.append(run("null")[0])
        t, mon = run(RenderSink())
        live_t.append(t)
        own.append(mon.overhead())
    base, live = statistics.median(null_t), statistics.median(live_t)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or '?'}")
    print(f"steps per run: {args.epochs * len(splits.train)}, repeats: {args.repeats}")
    print(f"median loop time (start-up and final figure excluded), null sink: {base:.2f}s; "
          f"rendering sink: {live:.2f}s")
    print(f"added by drawing (A/B): {(live - base) / base:+.1%}")
    print(f"monitor's own accounting (median): {statistics.median(own):.1%}")


if __name__ == "__main__":
    main()
