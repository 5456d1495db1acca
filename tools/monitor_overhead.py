"""The live monitor's cost on two loops, for comparing two versions of ctlkit:

    python tools/monitor_overhead.py [FOLDER]     # FOLDER holds the ctlkit to measure (default: .)
    git worktree add /tmp/old <commit> && python tools/monitor_overhead.py /tmp/old   # an older one

Loops: notebook 03's digits MLP (total_steps known, per-layer norms, an end-of-epoch value) for 30
epochs, and a ~1 ms/step loop of the same step for 60 epochs without total_steps. Printed per
loop: ms per step, monitor.overhead() (its own clock, the widget's PNG rendering included),
redraws, full draws, start-up seconds, and the median of epochs that log against the epochs
around them that do not (an outside view; noisy on a shared machine)."""
import gc
import statistics
import sys
import time

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")
import keras
import tensorflow as tf

import ctlkit
from ctlkit import data, grads
from ctlkit.monitor import Monitor
from ctlkit.monitor.sinks import NullSink

print("ctlkit from", ctlkit.__file__)


class RenderSink(NullSink):
    """Draws the PNGs a widget would show, without a widget. ctlkit up to 57e51bb drew them in the
    monitor for a sink that says ``wants_png``; later the sink draws them with its own plotter."""
    wants_png = True
    plotter = None

    def start(self, monitor):
        if not hasattr(monitor, "_wants_png"):               # the sink draws
            from ctlkit.monitor.plotter import Plotter
            self.plotter = Plotter(monitor.title, draw_budget=monitor.draw_budget)
            Plotter.warm_up()

    def send(self, monitor, png=None):
        if self.plotter is not None and monitor.history.keys():
            self.plotter.render(monitor.history, monitor.total_steps)

    def close(self, monitor, png=None):
        pass


splits = data.load("digits", batch_size=32)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

def make(width):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
        keras.layers.Dense(width, activation="relu"), keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10)])
    opt = keras.optimizers.Adam(2e-3)
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
        return loss, grads.global_norm(g), grads.layer_norms(g, model.trainable_variables)
    for x, y in splits.train.take(1):
        step(x, y)
    return step

out = {}
for name, width, epochs in (("nb03-like", 256, 30), ("bench-1ms", 256, 60)):
    step = make(width)
    gc.collect()
    total = epochs * len(splits.train)
    pc = time.perf_counter
    with Monitor(total_steps=total if name == "nb03-like" else None, sink=RenderSink()) as mon:
        for _ in range(epochs):
            for x, y in splits.train:
                loss, gn, pl = step(x, y)
                mon.log(loss=loss, grad_norm=gn, layer_norms=pl)
            if name == "nb03-like":
                mon.log_epoch(val_loss=float(loss))
    t_on, t_off = [], []
    with Monitor(total_steps=None, sink=RenderSink()) as mon2:
        for e in range(2 * epochs + 1):
            t0 = pc()
            for x, y in splits.train:
                loss, gn, pl = step(x, y)
                if e % 2 == 0:
                    mon2.log(loss=loss, grad_norm=gn, layer_norms=pl)
            (t_on if e % 2 == 0 else t_off).append(pc() - t0)
    ab = [2 * t_on[i] / (t_off[i - 1] + t_off[i]) - 1 for i in range(1, len(t_off))]
    ms = 1000 * statistics.median(t_off) / len(splits.train)
    out[name] = dict(ms_per_step=round(ms, 3), overhead=round(mon.overhead(), 4), redraws=mon.redraws,
                     full_draws=mon.plotter.full_draws, startup=round(mon.startup_seconds, 3),
                     ab_median=round(statistics.median(ab), 4), loop_s=round(mon.elapsed(), 1))
    print(name, out[name], flush=True)
