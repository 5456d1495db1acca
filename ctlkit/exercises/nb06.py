"""Notebook 06: a graph-safe warmup + inverse-square-root schedule, clipping by the global norm, the
uncertainty-weighted multi-task total, the mean of the hardest examples' losses."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import check_function
from ._common import merge


# -- 06.rsqrt_schedule ----------------------------------------------------------------------------
def _reference_rsqrt_lr(step, peak_lr, warmup_steps):
    t = tf.cast(step, tf.float32)
    warm = peak_lr * t / warmup_steps
    decay = peak_lr * tf.sqrt(warmup_steps / tf.maximum(t, 1.0))    # t = 0 is warmup's anyway
    return tf.where(t < warmup_steps, warm, decay)


def rsqrt_schedule(fn):
    """Each hyper-parameter set on its own, with a tolerance relative to its peak (a small peak
    must not hide behind an absolute tolerance), called as the optimizer calls it: in a
    ``tf.function`` with AutoGraph off."""
    settings = [  # (what, peak, warmup, {label: steps})
        ("peak 0.1, warmup 10", 0.1, 10, {
            "every step 0..129 (int32)": tf.range(0, 130),
            "one int64 step, the end of warmup (the peak)": tf.constant(10, tf.int64),
            "int64 steps 0, 5, 40 (at 4 x warmup: half the peak)":
                tf.constant([0, 5, 40], tf.int64),
            "far steps 1e3, 1e5, 1e7 and 2**31 - 1 (int32)":
                tf.constant([1000, 100000, 10000000, 2 ** 31 - 1], tf.int32),
        }),
        ("peak 3e-4, warmup 4000 (a long warmup, a small peak)", 3e-4, 4000, {
            "every 37th step 0..19980 (int64)": tf.range(0, 20000, 37, dtype=tf.int64),
            "the first steps 0..5": tf.range(0, 6, dtype=tf.int64)}),
        ("peak 2.0, warmup 1 (a one-step warmup)", 2.0, 1, {
            "steps 0..8 (int32)": tf.range(0, 9)}),
    ]
    reports = []
    for what, peak, warmup, steps in settings:
        def as_the_optimizer_calls_it(step, fn=fn, peak=peak, warmup=warmup):
            try:
                return tf.function(fn, autograph=False)(step, peak, warmup)
            except NotImplementedError as e:
                if not str(e).strip():          # the unwritten exercise: "not written yet"
                    raise
                # NumPy on a graph tensor raises NotImplementedError too: say what it is
                raise TypeError(f"NumPy cannot compute with the graph's symbolic tensors: use "
                                f"TensorFlow ops (tf.sqrt, tf.where, tf.maximum). NumPy "
                                f"said: {e}") from None

        def reference(step, peak=peak, warmup=warmup):
            return _reference_rsqrt_lr(step, peak, warmup)
        cases = {f"{what}, {label}": (s,) for label, s in steps.items()}
        r = check_function(as_the_optimizer_calls_it, reference, cases, name="warmup_rsqrt_lr",
                           rtol=1e-5, atol=1e-6 * peak)
        reports.append(r)
        if any("not written yet" in p for p in r.problems):
            break
    return merge("warmup_rsqrt_lr", reports)


# -- 06.clip_global -------------------------------------------------------------------------------
def _real_gradient():
    """A small classifier's gradient on one batch: a kernel, a bias, a second kernel and bias."""
    import keras
    keras.utils.set_random_seed(6)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(10)])
    rng = np.random.default_rng(60)
    x = tf.constant(rng.uniform(0, 1, (32, 64)), tf.float32)
    y = tf.constant(rng.integers(0, 10, 32), tf.int32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    return tape.gradient(loss, model.trainable_variables)


def clip_global(fn):
    constructed = [tf.constant([[3.0, 0.0], [0.0, 4.0]]), tf.constant([0.3, 0.4])]   # norm 5.02
    real = list(_real_gradient())
    norms = sorted(float(tf.norm(g)) for g in real)
    mid = (norms[1] + norms[2]) / 2        # some tensors above it, some below, the total above
    cases = {
        "a kernel of norm 5 and a bias of norm 0.5, limit 1 (the norm is above: it clips)":
            (constructed, 1.0),
        "the same, limit 100 (the norm is below: nothing changes)": (constructed, 100.0),
        "a real gradient of 4 tensors, limit between their norms": (real, mid),
        "tensors of very different scale (1e-4 and 1e2), limit 10":
            ([tf.constant([1e-4, -2e-4]), tf.constant([[60.0, 80.0]])], 10.0),
        "all-zero gradients (norm 0), limit 1": ([tf.zeros((2, 2)), tf.zeros(3)], 1.0),
        "a single tensor of norm exactly the limit 5": ([tf.constant([3.0, 4.0])], 5.0),
    }
    return check_function(fn, lambda g, c: tf.clip_by_global_norm(g, c), cases,
                          name="clip_global", rtol=1e-5, atol=1e-12)


# -- 06.uncertainty_total -------------------------------------------------------------------------
def _reference_total(task_losses, log_vars):
    return tf.reduce_sum(tf.exp(-log_vars) * task_losses + log_vars)


def uncertainty_total(fn):
    cases = {
        "two tasks at s = 0 (both weights 1)": (tf.constant([0.5, 4.0]), tf.constant([0.0, 0.0])),
        "three tasks, s of both signs": (tf.constant([0.1, 2.25, 1.0]), tf.constant([-1.0, 0.7, 0.2])),
        "weights far from 1 (s = -3 and 4)": (tf.constant([0.3, 60.0]), tf.constant([-3.0, 4.0])),
        "losses of very different scale (1e-3 and 1e3)": (tf.constant([1e-3, 1e3]),
                                                          tf.constant([0.5, -0.5])),
        "one task": (tf.constant([2.0]), tf.constant([0.3])),
    }
    return check_function(fn, _reference_total, cases, name="uncertainty_total",
                          rtol=1e-5, atol=1e-6, differentiable=True)


# -- 06.hardest_mean ------------------------------------------------------------------------------
def _reference_hardest_mean(per_sample_losses, k):
    return tf.reduce_mean(tf.math.top_k(per_sample_losses, k).values)


def hardest_mean(fn):
    """Each k on its own (k is a Python int, as in the notebook's step), the function called in a
    ``tf.function`` as the step calls it. Distinct losses: values and gradients compared. Losses
    tied at the cut: values only, since which of two equal losses gets the gradient is arbitrary."""
    rng = np.random.default_rng(61)
    eight = tf.constant(rng.permutation(np.linspace(0.1, 3.0, 8)), tf.float32)
    sixty_four = tf.constant(rng.gamma(1.0, 0.5, 64), tf.float32)
    settings = [  # (k, differentiable, {label: losses})
        (3, True, {"8 distinct losses, k = 3": eight}),
        (1, True, {"8 losses, k = 1 (the largest alone)": eight}),
        (8, True, {"8 losses, k = 8 (every loss, the plain mean)": eight}),
        (8, True, {"64 losses, k = 8 (section 5's setting)": sixty_four}),
        (2, False, {"losses tied at the cut [5, 2, 2, 1], k = 2 (exactly k count)":
                    tf.constant([5.0, 2.0, 2.0, 1.0])}),
        (3, False, {"ties above and at the cut [4, 4, 1, 1, 1, 0], k = 3":
                    tf.constant([4.0, 4.0, 1.0, 1.0, 1.0, 0.0])}),
    ]
    reports = []
    for k, differentiable, cases in settings:
        def yours(losses, k=k):
            def as_in_the_step(per_sample_losses):
                return fn(per_sample_losses, k)
            try:
                return tf.function(as_in_the_step)(losses)
            except NotImplementedError as e:
                last = ([ln.strip() for ln in str(e).splitlines() if ln.strip()] or [""])[-1]
                if last.rstrip(":") in ("", "NotImplementedError"):   # the unwritten exercise
                    raise NotImplementedError from None
                raise

        def reference(losses, k=k):
            return _reference_hardest_mean(losses, k)
        r = check_function(yours, reference, {label: (v,) for label, v in cases.items()},
                           name="hardest_mean", rtol=1e-5, atol=1e-6,
                           differentiable=differentiable)
        reports.append(r)
        if any("not written yet" in p for p in r.problems):
            break
    return merge("hardest_mean", reports)


EXERCISES = {"rsqrt_schedule": rsqrt_schedule, "clip_global": clip_global,
             "uncertainty_total": uncertainty_total, "hardest_mean": hardest_mean}
