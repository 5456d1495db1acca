"""Time training loops side by side in one process: yours (from the notebook) and Keras' fit().

    task = bench.Task(20000)                       # offline MNIST-shaped data and a fresh model
    result = bench.run({"mine": my_loop, "fit()": bench.fit}, task, repeats=5)
    print(bench.table(result))

A *loop factory* ``(model, optimizer, task) -> one_epoch()`` receives a fresh, identically seeded
784-64-10 MLP with Adam (batch 32: the setting of the speed table in the articles the kit grew
from; README, 'Where the kit comes from', calls it "an unsourced speed table") and returns a
function that trains one epoch. Notebook 12 writes its loops (eager, tf.function, k steps per call,
with the live monitor) and hands them in; this module keeps only Keras' own ``fit`` and the harness.
Round 0 warms every variant up (tracing, XLA compilation); ``repeats`` rounds then time one
epoch of each, interleaved, so a busy neighbour slows all alike. Reported per variant: median and
best examples/s, the ratio to a baseline, test accuracy after the run (speed must not come from
not learning), peak memory; and the machine it ran on.
"""
from __future__ import annotations

import os
import platform
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from . import validate
from .runtime import gpu_compute_capability, recommend_policy, run_seed

MEMORY = {True: "TF allocator peak on GPU:0", False: "peak RSS of the process (TF and data "
            "included); +MB: the most it rose above the RSS at an epoch's start"}
MIXED_SKIP_CPU = ("mixed precision skipped on CPU: the kit recommends it only for GPUs with "
                  "tensor cores (ctlkit.devices.recommend_policy); notebook 04 measures what "
                  "mixed_float16 does on this processor")


class Task:
    """The data every variant trains on: scikit-learn's 8x8 digits enlarged to 20x20, placed at
    random on a 28x28 canvas, scaled and noised (offline, learnable); test images come from
    digits the training set never saw. ``build()`` makes the model."""

    def __init__(self, examples: int = 20000, test_examples: int = 2000, seed: int | None = None):
        from sklearn.datasets import load_digits

        seed = run_seed() if seed is None else validate.seed(seed)
        d, rng = load_digits(), np.random.default_rng(seed)
        big = tf.image.resize(d.images[..., None] / 16.0, (20, 20)).numpy()[..., 0]

        def synth(pool, n):
            idx, (dy, dx) = rng.choice(pool, size=n), rng.integers(0, 9, size=(2, n))
            canvas = np.zeros((n, 28, 28), np.float32)
            for oy in range(9):
                for ox in range(9):
                    sel = (dy == oy) & (dx == ox)
                    canvas[sel, oy:oy + 20, ox:ox + 20] = big[idx[sel]]
            canvas = canvas * rng.uniform(0.6, 1.2, (n, 1, 1)) + rng.normal(0, .15, canvas.shape)
            return (np.clip(canvas, 0, 1).reshape(n, 784).astype(np.float32),
                    d.target[idx].astype(np.int32))

        order = rng.permutation(len(d.images))
        self.x_train, self.y_train = synth(order[len(order) // 4:], examples)
        self.x_test, self.y_test = synth(order[:len(order) // 4], test_examples)
        self.seed, self.batch_size = seed, 32
        self.train = (tf.data.Dataset.from_tensor_slices((self.x_train, self.y_train))
                      .batch(self.batch_size).prefetch(tf.data.AUTOTUNE))
        self.steps_per_epoch = -(-examples // self.batch_size)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def build(self, policy: str = "float32"):
        """A fresh, identically seeded model and a built Adam (loss-scaled for mixed_float16)."""
        keras.utils.set_random_seed(self.seed)
        old = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            model = keras.Sequential([keras.Input((784,)),
                                      keras.layers.Dense(64, activation="relu"),
                                      keras.layers.Dense(10, dtype="float32")])
        finally:
            keras.config.set_dtype_policy(old)
        optimizer = keras.optimizers.Adam(1e-3)
        if policy == "mixed_float16":
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
        return model, optimizer

    def accuracy(self, model) -> float:
        logits = model(self.x_test, training=False)
        return float(np.mean(np.argmax(logits, axis=-1) == self.y_test))


def fit(model, optimizer, task, **compile_kwargs):
    """Keras' own loop as a factory: ``compile(**compile_kwargs)``, then one ``fit`` epoch per
    call (``functools.partial(bench.fit, steps_per_execution=10)`` for other settings)."""
    model.compile(optimizer=optimizer, loss=task.loss_fn, **compile_kwargs)
    return lambda: model.fit(task.train, epochs=1, verbose=0, shuffle=False) and None


# -- measuring ------------------------------------------------------------------------------------
def _memory_mb(reset=False):
    """Peak memory in MiB since the last reset, or (reset=True) reset it and return the current
    use; None where it cannot be measured. GPU: TF's allocator. CPU: the process's resident set
    (Linux VmHWM / VmRSS): it counts everything the process holds, also where TF's CPU allocator
    keeps no statistics (see ctlkit.memory)."""
    try:
        if tf.config.list_logical_devices("GPU"):
            if reset:
                tf.config.experimental.reset_memory_stats("GPU:0")
            info = tf.config.experimental.get_memory_info("GPU:0")
            return info["current" if reset else "peak"] / 2 ** 20
        if reset:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")                       # resets VmHWM to the current RSS
        key = "VmRSS:" if reset else "VmHWM:"
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith(key)) / 1024
    except (OSError, StopIteration):
        return None


def compare(factories: dict, task: Task, repeats: int = 3, policies=None) -> dict:
    """{name: numbers} for each factory: a warm-up round, then ``repeats`` interleaved rounds of
    one timed epoch per variant. examples_per_s comes from the median epoch (what you typically
    get), best_examples_per_s from the fastest (noise only adds time: what the code can do)."""
    if not isinstance(factories, dict) or not factories or not all(map(callable,
                                                                       factories.values())):
        raise TypeError(f"factories must be a non-empty dict {{name: factory(model, optimizer, "
                        f"task) -> one_epoch}}, got {factories!r}")
    if not isinstance(task, Task):
        raise TypeError(f"task must be a ctlkit.bench.Task (the data and the model every "
                        f"variant trains), got {type(task).__name__}; make one with bench.Task()")
    repeats, policies = validate.positive_int("repeats", repeats), policies or {}
    runs = {}
    for name, factory in factories.items():
        model, optimizer = task.build(policies.get(name, "float32"))
        runs[name] = {"model": model, "epoch": factory(model, optimizer, task), "s": [], "mb": []}
        if not callable(runs[name]["epoch"]):
            raise TypeError(f"factories[{name!r}] must return a function that trains one epoch")
    for _ in range(1 + repeats):                   # round 0 is the warm-up
        for run in runs.values():
            start_mb = _memory_mb(reset=True)
            t0 = time.perf_counter()
            out = run["epoch"]()
            if out is not None:
                np.asarray(out)                    # wait for the last step to finish
            run["s"].append(time.perf_counter() - t0)
            peak_mb = _memory_mb()
            run["mb"].append(None if None in (start_mb, peak_mb) else (peak_mb, peak_mb - start_mb))
    out = {}
    for name, run in runs.items():
        median, mb = statistics.median(run["s"][1:]), run["mb"]
        out[name] = {"examples_per_s": len(task.x_train) / median, "seconds": median,
                     "best_examples_per_s": len(task.x_train) / min(run["s"][1:]),
                     "repeat_seconds": run["s"][1:], "warmup_seconds": run["s"][0],
                     "accuracy": task.accuracy(run["model"]),
                     "peak_memory_mb": None if None in mb else max(m[0] for m in mb),
                     "memory_growth_mb": None if None in mb else max(m[1] for m in mb),
                     "policy": policies.get(name, "float32")}
    return out


def run(loops: dict, task: Task, repeats: int = 3, policies=None, baseline="fit()") -> dict:
    """``compare`` with what a table needs: {"variants": {name: numbers and ratio_to_baseline},
    "baseline", "machine", "config"}. ``baseline``: the variant the ratios are taken to (None
    where it was not run)."""
    info = machine()
    variants = compare(loops, task, repeats, policies)
    base = variants.get(baseline, {}).get("examples_per_s")
    for r in variants.values():
        r["ratio_to_baseline"] = r["examples_per_s"] / base if base else None
    info["load_average_end"] = os.getloadavg()
    return {"variants": variants, "baseline": baseline if base else None, "machine": info,
            "config": {"examples": len(task.x_train), "batch_size": task.batch_size,
                       "repeats": repeats, "steps_per_epoch": task.steps_per_epoch,
                       "model": "784-64-10 MLP, Adam(1e-3)",
                       "memory_measure": MEMORY[bool(tf.config.list_logical_devices("GPU"))]}}


def machine() -> dict:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpus = tf.config.list_physical_devices("GPU")
    return {"cpu": cpu, "cores": os.cpu_count(), "tensorflow": tf.__version__,
            "keras": keras.__version__, "python": platform.python_version(),
            "device": f"GPU x{len(gpus)}" if gpus else "CPU", "load_average": os.getloadavg()}


def mixed_policy():
    """(policy, None) where mixed precision pays off here, else (None, why not)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None, MIXED_SKIP_CPU
    policy = recommend_policy("GPU", [gpu_compute_capability(g) for g in gpus])
    return (None, "mixed precision skipped: this GPU has no tensor cores (compute capability "
                  "< 7)") if policy == "float32" else (policy, None)


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def table(result: dict) -> str:
    """The result of ``run`` as a plain-text table, with the setting and the machine."""
    base = result["baseline"]
    rows = [f"{'variant':28s} {'examples/s':>10s} {'(best)':>8s} {'vs ' + str(base)[:6]:>9s} "
            f"{'accuracy':>8s} {'peak MB':>7s} {'+MB':>5s} {'s/epoch':>7s}"]
    rows += [f"{n:28s} {r['examples_per_s']:10.0f} {r['best_examples_per_s']:8.0f} "
             f"{_f(r['ratio_to_baseline'], '8.2f')}x {r['accuracy']:8.3f} "
             f"{_f(r['peak_memory_mb'], '7.0f')} {_f(r['memory_growth_mb'], '5.1f')} "
             f"{r['seconds']:7.3f}" for n, r in result["variants"].items()]
    c, m = result["config"], result["machine"]
    rows += ["", f"{c['examples']} examples, batch {c['batch_size']}, 1 warm-up + {c['repeats']} "
             f"timed epochs per variant, interleaved; examples/s from the median epoch, (best) "
             f"from the fastest; peak memory: {c['memory_measure']}",
             f"machine: {m['cpu']}, {m['cores']} cores, {m['device']}, TF {m['tensorflow']}, "
             f"Keras {m['keras']}; load average {m['load_average'][0]:.2f} at start, "
             f"{m.get('load_average_end', [float('nan')])[0]:.2f} at end"]
    return "\n".join(rows)
