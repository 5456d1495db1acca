"""Time training loops side by side in one process: eager, tf.function, XLA, k steps per call, fit.

    python -m ctlkit.bench [--quick] [--json FILE] [--variants eager,fit] [--repeats 5]
    result = ctlkit.bench.run(quick=True); print(ctlkit.bench.table(result))   # in a notebook

Each variant, a factory ``(model, optimizer, task) -> one_epoch()``, trains a fresh, identically
seeded 784-64-10 MLP (Adam, batch 32; DESIGN.md §6) on the same data. Round 0 warms every variant
up (tracing, XLA compilation); ``repeats`` rounds then time one epoch of each, interleaved, so a
busy neighbour slows all alike. Reported: median examples/s, ratio to default ``model.fit``, test
accuracy after the run (speed must not come from not learning), peak memory; and the live
monitor's cost.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from functools import partial

import numpy as np
import tensorflow as tf

import keras

from . import validate
from .runtime import budget, gpu_compute_capability, recommend_policy

TARGETS = {"custom_vs_fit_speedup": 2.0, "graph_vs_eager_speedup": 5.0, "monitor_overhead": 0.05}
MEMORY = {True: "TF allocator peak on GPU:0", False: "peak RSS of the process (TF and data "
            "included); +MB: the most it rose above the RSS at an epoch's start"}
MIXED_SKIP_CPU = ("mixed precision skipped on CPU: CPUs have no fast float16 maths, so "
                  "mixed_float16 runs slower than float32 there (notebook 04 measures by how "
                  "much on this processor); it is for GPUs")


class Task:
    """The data every variant trains on: scikit-learn's 8x8 digits enlarged to 20x20, placed at
    random on a 28x28 canvas, scaled and noised (offline, learnable); test images come from
    digits the training set never saw. ``build()`` makes the model."""

    def __init__(self, examples: int = 20000, test_examples: int = 2000, seed: int = 0):
        from sklearn.datasets import load_digits

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


# -- the loops: each variant is a factory (model, optimizer, task) -> one_epoch() ----------------
def train_step(model, optimizer, loss_fn):
    """The seed article's step, uncompiled: wrap it in tf.function yourself (or don't: eager)."""
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            scaled = optimizer.scale_loss(loss)    # the loss itself unless loss scaling is on
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


def per_batch(step, task):
    """One Python call of ``step`` per batch: the seed's loop."""
    def one_epoch():
        for x, y in task.train:
            loss = step(x, y)
        return loss
    return one_epoch


def k_per_call(step, task, k=10):
    """k steps per Python call: a tf.range loop that pulls batches from an iterator in-graph."""
    @tf.function
    def train_k(iterator, n):
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            loss = step(x, y)
        return loss

    def one_epoch():
        iterator = iter(task.train)
        full, rest = divmod(task.steps_per_epoch, k)
        for n in [k] * full + ([rest] if rest else []):
            loss = train_k(iterator, tf.constant(n))   # a tensor: the last call does not retrace
        return loss
    return one_epoch


def eager(model, opt, task):
    return per_batch(train_step(model, opt, task.loss_fn), task)


def tf_function(model, opt, task, jit=None):
    return per_batch(tf.function(train_step(model, opt, task.loss_fn), jit_compile=jit), task)


def ten_per_call(model, opt, task, jit=False):
    step = train_step(model, opt, task.loss_fn)
    return k_per_call(tf.function(step, jit_compile=True) if jit else step, task, k=10)


def fit(model, opt, task, **compile_kwargs):
    model.compile(optimizer=opt, loss=task.loss_fn, **compile_kwargs)
    return lambda: model.fit(task.train, epochs=1, verbose=0, shuffle=False) and None


VARIANTS = {  # name: (factory, mixed precision?, what it is)
    "eager": (eager, False, "the step run eagerly, op by op"),
    "tf_function": (tf_function, False, "the seed's loop: @tf.function step, one per call"),
    "tf_function_xla": (partial(tf_function, jit=True), False, "the same, jit_compile=True"),
    "ten_per_call": (ten_per_call, False, "10 steps per tf.function call (tf.range loop)"),
    "ten_per_call_xla": (partial(ten_per_call, jit=True), False, "10 per call, XLA step"),
    "fit": (fit, False, "model.fit, Keras defaults (jit_compile='auto')"),
    "fit_no_jit": (partial(fit, jit_compile=False), False, "model.fit, jit_compile=False"),
    "fit_spe10": (partial(fit, steps_per_execution=10), False, "model.fit, steps_per_execution=10"),
    "ten_per_call_xla_mixed": (partial(ten_per_call, jit=True), True, "10 per call, XLA, mixed"),
    "fit_mixed": (fit, True, "model.fit, mixed precision"),
}


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


def monitor_overhead(epochs: int = 30, alternations: int = 100) -> dict:
    """The live monitor's cost on notebook 03's loop (a monitor rendering the widget's PNGs),
    in two measured parts; ``fraction`` is their sum (a negative indirect part counts as 0).

    direct: the monitor's own count of the time inside its calls (``Monitor.overhead()``) in a
      loop that logs every step for ``epochs`` epochs.
    indirect: how much slower everything else in the loop (the iterator and the step) runs
      because of the monitor. One run of ``2 * alternations + 1`` epochs logs on even epochs
      only; each such epoch's time, with the time inside the monitor taken out, is compared with
      the mean of its two neighbours, and the median ratio is kept. Alternating every epoch
      (tens of milliseconds) cancels the drift of a shared machine, which whole-run A/B tests
      cannot resolve to a few percent. The same comparison on an A/A run (nothing logged) is
      subtracted: it need not be zero on average (the run reports it), and shows the noise floor.
    """
    from . import data, grads
    from .monitor import Monitor
    from .sinks import NullSink

    class RenderSink(NullSink):
        wants_png = True                           # the monitor renders PNGs as for the widget

    splits = data.load("digits", batch_size=32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
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
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
        return loss, grads.global_norm(g), grads.layer_norms(g, model.trainable_variables)

    for x, y in splits.train.take(1):
        step(x, y)                                 # trace outside the timing

    def run(n_epochs, logs):
        """Seconds per epoch outside the monitor's calls, and the monitor."""
        # a full collection of TF's objects (~0.2 s) would land in a random epoch otherwise;
        # the collector stays on, so garbage the monitor makes is still paid for
        gc.collect()
        pc, times = time.perf_counter, []
        with Monitor(n_epochs * len(splits.train), sink=RenderSink()) as mon:
            for e in range(n_epochs):
                inside, t0 = 0.0, pc()
                for x, y in splits.train:
                    loss, gnorm, per_layer = step(x, y)
                    if logs(e):
                        m0 = pc()
                        mon.log(loss=loss, grad_norm=gnorm, layer_norms=per_layer)
                        inside += pc() - m0
                times.append(pc() - t0 - inside)
        return times, mon

    _, live = run(epochs, lambda e: True)
    n = 2 * alternations + 1
    raw, spread, comparisons = neighbour_ratios(run(n, lambda e: e % 2 == 0)[0])
    control, control_spread, _ = neighbour_ratios(run(n, lambda e: False)[0])
    direct, indirect = live.overhead(), raw - control   # the comparison's own bias taken out
    return {"fraction": direct + max(indirect, 0.0), "direct": direct,
            "indirect": indirect, "indirect_raw": raw, "indirect_iqr": spread,
            "control": control, "control_iqr": control_spread, "comparisons": comparisons,
            "redraws": live.redraws, "full_draws": live.plotter.full_draws,
            "steps": epochs * len(splits.train), "loop_seconds": live.elapsed()}


def neighbour_ratios(times):
    """Each even-numbered entry of ``times`` (from the third) against the mean of its two
    neighbours: (median of time / neighbours - 1, [25th, 75th percentile], how many)."""
    if len(times) < 4:
        raise ValueError(f"times needs at least 4 entries (two alternations), got {len(times)}")
    r = [2 * times[e] / (times[e - 1] + times[e + 1]) - 1 for e in range(2, len(times) - 1, 2)]
    return statistics.median(r), [float(q) for q in np.percentile(r, [25, 75])], len(r)


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


def _mixed_policy():
    """(policy, None) where mixed precision pays off here, else (None, why not)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None, MIXED_SKIP_CPU
    policy = recommend_policy("GPU", [gpu_compute_capability(g) for g in gpus])
    return (None, "mixed precision skipped: this GPU has no tensor cores (compute capability "
                  "< 7)") if policy == "float32" else (policy, None)


def _ratio(a, b):
    return a / b if a and b else None


def options(quick=None, variants=None, repeats=None, examples=None) -> dict:
    """Checked arguments of ``run()`` with their defaults filled in (quick: 6400 examples and
    3 repeats; full: 20000 and 5). quick=None follows ``ctlkit.budget()`` (CTLKIT_QUICK=1)."""
    quick = budget().quick if quick is None else quick
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True, False or None (follow CTLKIT_QUICK), got {quick!r}")
    chosen = ([v.strip() for v in variants.split(",")] if isinstance(variants, str)
              else list(VARIANTS) if variants is None else variants)
    if not isinstance(chosen, (list, tuple)) or not chosen or not all(
            isinstance(v, str) and v in VARIANTS for v in chosen):
        raise ValueError(f"variants must be a list of names from {list(VARIANTS)}, "
                         f"got {variants!r}")
    repeats = validate.positive_int("repeats", (3 if quick else 5) if repeats is None else repeats)
    examples = validate.positive_int("examples", (6400 if quick else 20000) if examples is None
                             else examples)
    if examples < 64:
        raise ValueError(f"examples must be >= 64 (two batches of 32), got {examples}")
    return {"quick": quick, "variants": list(chosen), "repeats": repeats, "examples": examples}


def run(quick=None, variants=None, *, repeats=None, examples=None, monitor=True,
        verbose=True) -> dict:
    """Time ``variants`` (default: all; mixed precision only where it pays off) and the live
    monitor's cost; returns a dict (see ``table``). Arguments: see ``options``."""
    o = options(quick, variants, repeats, examples)
    quick, chosen, repeats, examples = o["quick"], o["variants"], o["repeats"], o["examples"]
    say = print if verbose else (lambda *a: None)
    info, task = machine(), Task(examples)
    policy, why_not = _mixed_policy()
    skipped = {n: why_not for n in chosen if VARIANTS[n][1] and not policy}
    names = [n for n in chosen if n not in skipped]
    for name in skipped:
        say(f"skipped {name}: {why_not}")
    say(f"timing {', '.join(names)}: 1 warm-up + {repeats} epochs of {examples} examples each")
    v = compare({n: VARIANTS[n][0] for n in names}, task, repeats,
                {n: policy for n in names if VARIANTS[n][1]}) if names else {}
    fit_rate = v.get("fit", {}).get("examples_per_s")
    for name, r in v.items():
        r.update(description=VARIANTS[name][2], ratio_to_fit=_ratio(r["examples_per_s"], fit_rate))
    custom = {n: r["examples_per_s"] for n, r in v.items()
              if not n.startswith("fit") and r["policy"] == "float32"}
    best = max(custom, key=custom.get) if custom else None
    fastest = {n: v[n]["best_examples_per_s"] for n in custom}
    out = {"variants": v, "skipped": skipped, "best_custom": best,
           "custom_vs_fit_speedup": _ratio(custom.get(best), fit_rate),
           "custom_vs_fit_speedup_fastest_epochs": _ratio(
               max(fastest.values(), default=None), v.get("fit", {}).get("best_examples_per_s")),
           "graph_vs_eager_speedup": _ratio(v.get("tf_function", {}).get("examples_per_s"),
                                            v.get("eager", {}).get("examples_per_s")),
           "monitor_overhead": None, "monitor": None, "machine": info,
           "config": {"quick": quick, "examples": examples, "batch_size": task.batch_size,
                      "repeats": repeats, "steps_per_epoch": task.steps_per_epoch,
                      "model": "784-64-10 MLP, Adam(1e-3)", "memory_measure": MEMORY[bool(
                          tf.config.list_logical_devices("GPU"))]}}
    if monitor:
        say("timing the live monitor (its own count, then alternating epochs)")
        out["monitor"] = monitor_overhead(20 if quick else 40, 40 if quick else 150)
        out["monitor_overhead"] = out["monitor"]["fraction"]
    out["targets"] = {k: None if out[k] is None else bool(out[k] >= t)
                      for k, t in TARGETS.items() if k != "monitor_overhead"}
    out["targets"]["monitor_overhead"] = None if not monitor else bool(
        out["monitor_overhead"] <= TARGETS["monitor_overhead"])
    info["load_average_end"] = os.getloadavg()
    return out


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def table(result: dict) -> str:
    """The result as a plain-text table with the headline ratios and the targets."""
    rows = [f"{'variant':22s} {'examples/s':>10s} {'(best)':>8s} {'vs fit':>7s} {'accuracy':>8s} "
            f"{'peak MB':>7s} {'+MB':>5s} {'s/epoch':>7s}  what"]
    rows += [f"{n:22s} {r['examples_per_s']:10.0f} {r['best_examples_per_s']:8.0f} "
             f"{_f(r['ratio_to_fit'], '6.2f')}x {r['accuracy']:8.3f} "
             f"{_f(r['peak_memory_mb'], '7.0f')} {_f(r['memory_growth_mb'], '5.1f')} "
             f"{r['seconds']:7.3f}  {r['description']}" for n, r in result["variants"].items()]
    rows += [f"{n}: {why}" for n, why in result["skipped"].items()]
    c, m, mon = result["config"], result["machine"], result["monitor"]
    rows += ["", f"best custom loop vs default fit: {_f(result['custom_vs_fit_speedup'], '.2f')}x "
             f"({result['best_custom']}; target >= {TARGETS['custom_vs_fit_speedup']}x; from the "
             f"fastest epochs: {_f(result['custom_vs_fit_speedup_fastest_epochs'], '.2f')}x)",
             f"graph (tf_function) vs eager: {_f(result['graph_vs_eager_speedup'], '.1f')}x "
             f"(target >= {TARGETS['graph_vs_eager_speedup']}x)"]
    if mon:
        rows.append(f"live monitor adds {mon['fraction']:.1%} to the loop: {mon['direct']:.1%} "
                    f"inside its calls ({mon['redraws']} redraws in {mon['steps']} steps) + "
                    f"{mon['indirect']:+.1%} to the rest of the loop ({mon['comparisons']} "
                    f"alternating epochs: {mon['indirect_raw']:+.1%}, less {mon['control']:+.1%} "
                    f"without logging); target <= {TARGETS['monitor_overhead']:.0%}")
    rows += ["targets met: " + ", ".join(f"{k} {'-' if ok is None else 'yes' if ok else 'NO'}"
                                         for k, ok in result["targets"].items()),
             f"{c['examples']} examples, batch {c['batch_size']}, 1 warm-up + {c['repeats']} timed "
             f"epochs per variant, interleaved; examples/s from the median epoch, (best) from the "
             f"fastest; peak memory: {c['memory_measure']}",
             f"machine: {m['cpu']}, {m['cores']} cores, {m['device']}, TF {m['tensorflow']}, "
             f"Keras {m['keras']}; load average {m['load_average'][0]:.2f} at start, "
             f"{m.get('load_average_end', [float('nan')])[0]:.2f} at end"]
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ctlkit.bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer examples and repeats (also "
                   "CTLKIT_QUICK=1)")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    p.add_argument("--variants", help=f"comma-separated names from: {','.join(VARIANTS)}")
    p.add_argument("--repeats", type=int, help="timed epochs per variant (default 5, quick 3)")
    p.add_argument("--examples", type=int, help="training examples (default 20000, quick 6400)")
    p.add_argument("--no-monitor", action="store_true", help="skip the live monitor's A/B")
    args = p.parse_args(argv)
    try:
        o = options(args.quick or None, args.variants, args.repeats, args.examples)
    except (TypeError, ValueError) as e:
        p.error(str(e))                            # exits 2 with the message
    if args.json:                                  # fail now, not after the whole benchmark
        try:
            with open(args.json, "a", encoding="utf-8"):
                pass
        except OSError as e:
            p.error(f"--json {args.json}: cannot write there ({e.strerror}); pass a file in a "
                    f"folder you can write to")
    result = run(**o, monitor=not args.no_monitor)
    print(table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"written {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
