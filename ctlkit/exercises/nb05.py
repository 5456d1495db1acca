"""Notebook 05, gradient accumulation: combine micro-batch gradients, an accumulating step."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function, check_step


# -- 05.combine -----------------------------------------------------------------------------------
def _reference_combine(grads, sizes):
    w = tf.cast(sizes, grads.dtype)
    w = tf.reshape(w / tf.reduce_sum(w), [-1] + [1] * (len(grads.shape) - 1))
    return tf.reduce_sum(w * grads, axis=0)


def _normal(seed, shape, scale=1.0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape) * scale, tf.float32)


def combine(fn):
    """The size-weighted average along axis 0, for grads of several ranks and sizes of any kind."""
    cases = {
        "kernels (64, 10) of micro-batches 8, 8, 8, 6 (the last one smaller)":
            (_normal(50, (4, 64, 10)), tf.constant([8, 8, 8, 6])),
        "equal sizes 8, 8, 8, 8 (the plain average)": (_normal(51, (4, 64, 10)), tf.constant([8, 8, 8, 8])),
        "very unequal sizes 1 and 31, bias vectors (10,)": (_normal(52, (2, 10)), tf.constant([1, 31])),
        "three micro-batches of one number each (shape (3,)), int64 sizes":
            (tf.constant([0.5, -1.5, 4.0]), tf.constant([3, 1, 4], tf.int64)),
        "one micro-batch (K = 1)": (_normal(53, (1, 5, 3)), tf.constant([7])),
        "all-zero gradients": (tf.zeros((3, 4)), tf.constant([2, 5, 1])),
    }
    report = check_function(fn, _reference_combine, cases, name="combine_micro_gradients",
                            rtol=1e-5, atol=1e-6, differentiable=True)
    if not report.ok:
        return report
    tiny = {"rows of very different scale (1e-7 and 1e3), sizes 5 and 3":
            (tf.constant([[1e-7, 2e-7, 5e2], [3e-7, 4e-7, 1e3]]), tf.constant([5, 3]))}
    small = check_function(fn, _reference_combine, tiny, name="combine_micro_gradients",
                           rtol=1e-5, atol=0.0, differentiable=True)
    return Report(name="combine_micro_gradients", problems=small.problems,
                  cases=report.cases + small.cases)


# -- 05.accumulating_step -------------------------------------------------------------------------
def _reference_accumulating_step(model, optimizer, n_accum):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer.build(model.trainable_variables)
    sums = [tf.Variable(tf.zeros_like(v), trainable=False) for v in model.trainable_variables]
    count = tf.Variable(0, trainable=False)

    def apply():
        optimizer.apply_gradients(zip([s / n_accum for s in sums], model.trainable_variables))
        for s in sums:
            s.assign(tf.zeros_like(s))
        count.assign(0)
        return tf.constant(True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        for s, g in zip(sums, tape.gradient(loss, model.trainable_variables)):
            s.assign_add(g)
        count.assign_add(1)
        tf.cond(count >= n_accum, apply, lambda: tf.constant(False))
        return loss
    return step


def _build():
    """Notebook 05's MLP on 8x8x1 digits, and SGD with momentum (so each update also moves the
    next ones: an extra or a missing update shows)."""
    import keras
    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(64, activation="tanh"), keras.layers.Dense(10)])
    return model, keras.optimizers.SGD(0.1, momentum=0.5)


def _state(model, optimizer):
    return {"optimizer.iterations (applied updates)": int(optimizer.iterations.numpy())}


def _micro(seed, n=8):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.uniform(0, 1, (n, 8, 8, 1)), tf.float32),
            tf.constant(rng.integers(0, 10, n), tf.int32))


def accumulating_step(fn):
    """Equal micro-batches of 8; n_accum = 3 over 7 calls (two updates and a pending window),
    then n_accum = 2 over 5 calls (another hyper-parameter)."""
    def batches(n_accum, calls, seed):
        out = {}
        for k in range(1, calls + 1):
            what = ("applies the window's average" if k % n_accum == 0
                    else "accumulates only: nothing may change")
            window = (k - 1) // n_accum + 1
            out[f"n_accum={n_accum}, micro-batch {k} (window {window}): {what}"] = _micro(seed + k)
        return out
    problems, cases = [], 0
    for n_accum, calls, seed in ((3, 7, 500), (2, 5, 600)):
        r = check_step(fn, _reference_accumulating_step, _build, batches(n_accum, calls, seed),
                       args=(n_accum,), state=_state, name="make_accumulating_step",
                       rtol=1e-5, atol=1e-6)
        problems += r.problems
        cases += r.cases
        if problems:
            break
    return Report(name="make_accumulating_step", problems=problems, cases=cases)


EXERCISES = {"combine": combine, "accumulating_step": accumulating_step}
