"""Notebook 05, gradient accumulation: combine micro-batch gradients, an accumulating step for
weighted examples in micro-batches of unequal sizes."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function, check_step
from ._common import digits_mlp


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


# -- 05.weighted_accumulation ---------------------------------------------------------------------
def _reference_weighted_step(model, optimizer, n_accum):
    import keras
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    optimizer.build(model.trainable_variables)
    sums = [tf.Variable(tf.zeros_like(v), trainable=False) for v in model.trainable_variables]
    weight_total = tf.Variable(0.0, trainable=False)
    count = tf.Variable(0, trainable=False)

    def apply():
        optimizer.apply_gradients(zip([s / weight_total for s in sums], model.trainable_variables))
        for s in sums:
            s.assign(tf.zeros_like(s))
        weight_total.assign(0.0)
        count.assign(0)
        return tf.constant(True)

    @tf.function
    def step(x, y, w):
        with tf.GradientTape() as tape:
            weighted_sum = tf.reduce_sum(w * per_example(y, model(x, training=True)))
        for s, g in zip(sums, tape.gradient(weighted_sum, model.trainable_variables)):
            s.assign_add(g)                                  # the gradient of sum(w * loss)
        weight_total.assign_add(tf.reduce_sum(w))
        count.assign_add(1)
        tf.cond(count >= n_accum, apply, lambda: tf.constant(False))
        return weighted_sum / tf.reduce_sum(w)
    return step


def _build():
    """Notebook 05's MLP on 8x8x1 digits, and SGD with momentum (so each update also moves the
    next ones: an extra or a missing update shows)."""
    import keras
    return digits_mlp(64, "tanh", seed=5), keras.optimizers.SGD(0.1, momentum=0.5)


def _state(model, optimizer):
    return {"optimizer.iterations (applied updates)": int(optimizer.iterations.numpy())}


def _micro(seed, n=8):
    """A micro-batch of n examples with weights in [0, 3), one of them 0 when n > 2."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.2, 3.0, n)
    if n > 2:
        w[rng.integers(n)] = 0.0
    return (tf.constant(rng.uniform(0, 1, (n, 8, 8, 1)), tf.float32),
            tf.constant(rng.integers(0, 10, n), tf.int32), tf.constant(w, tf.float32))


_PLAN = ((3, (8, 5, 8, 3, 8, 6, 5), 500), (2, (8, 8, 3, 5, 8), 600))   # n_accum, sizes, seed


def _weighted_batches(n_accum, sizes, seed):
    out = {}
    for k, n in enumerate(sizes, start=1):
        what = ("applies the window's update" if k % n_accum == 0
                else "accumulates only: nothing may change")
        window = (k - 1) // n_accum + 1
        out[f"n_accum={n_accum}, micro-batch {k} ({n} examples, window {window}): {what}"] = \
            _micro(seed + k, n)
    return out


# Slips, written out: when a learner's run follows one of them, the report names it.
def _weighted_slip(kind):
    import keras
    mean_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def factory(model, optimizer, n_accum):
        optimizer.build(model.trainable_variables)
        sums = [tf.Variable(tf.zeros_like(v), trainable=False) for v in model.trainable_variables]
        total = tf.Variable(0.0, trainable=False)
        count = tf.Variable(0, trainable=False)

        def apply():
            optimizer.apply_gradients(zip([s / total for s in sums], model.trainable_variables))
            for s in sums:
                s.assign(tf.zeros_like(s))
            if kind != "weight total kept":
                total.assign(0.0)
            count.assign(0)
            return tf.constant(True)

        @tf.function
        def step(x, y, w):
            n = tf.cast(tf.shape(x)[0], tf.float32)
            with tf.GradientTape() as tape:
                losses = per_example(y, model(x, training=True))
                if kind == "examples":            # section 3's trainer: n x the micro-batch loss
                    part, add = n * mean_loss(y, model(x, training=True), sample_weight=w), n
                elif kind == "mean of means":     # each micro-batch's weighted mean, equal say
                    part, add = tf.reduce_sum(w * losses) / tf.reduce_sum(w), 1.0
                elif kind == "n x weighted mean":  # weighted means, weighted by example count
                    part, add = n * tf.reduce_sum(w * losses) / tf.reduce_sum(w), n
                elif kind == "unweighted":
                    part, add = tf.reduce_sum(losses), n
                else:                             # "weight total kept"
                    part, add = tf.reduce_sum(w * losses), tf.reduce_sum(w)
            for s, g in zip(sums, tape.gradient(part, model.trainable_variables)):
                s.assign_add(g)
            total.assign_add(add)
            count.assign_add(1)
            tf.cond(count >= n_accum, apply, lambda: tf.constant(False))
            return tf.reduce_sum(w * losses) / tf.reduce_sum(w)
        return step
    return factory


_WEIGHTED_SLIPS = {
    "examples": "your step weights each micro-batch by its number of examples and divides by the "
                "examples in the window, as section 3's trainer does: right for weights of 1, but "
                "here the window's loss is sum(w * loss) / sum(w). Accumulate the gradient of "
                "sum(w * loss) and divide by the sum of the weights.",
    "mean of means": "your step averages the micro-batches' weighted mean losses with equal say: "
                     "a micro-batch of 3 examples counts as much as one of 8. Accumulate the "
                     "gradient of sum(w * loss) and divide by the window's sum of weights.",
    "n x weighted mean": "your step weights each micro-batch's weighted mean by its example count: "
                         "a micro-batch counts by its total weight, sum(w), not by its size.",
    "unweighted": "your step ignores the weights w: the window's loss is sum(w * loss) / sum(w).",
    "weight total kept": "your step zeroes the gradient sums after an update but not the sum of "
                         "the weights: from the second window on it divides by too much.",
}
_WEIGHTED_CACHE = {}


def _weighted_run(factory):
    out = []
    for n_accum, sizes, seed in _PLAN:
        model, optimizer = _build()
        try:
            step = factory(model, optimizer, n_accum)
            for x, y, w in _weighted_batches(n_accum, sizes, seed).values():
                step(x, y, w)
                out.append([np.array(v.numpy(), np.float64) for v in model.weights])
        except Exception:  # a run that breaks matches nothing
            return None
    return out


def _weighted_slip_sentence(fn):
    mine = _weighted_run(fn)
    if mine is None:
        return None
    for kind, sentence in _WEIGHTED_SLIPS.items():
        if kind not in _WEIGHTED_CACHE:
            _WEIGHTED_CACHE[kind] = _weighted_run(_weighted_slip(kind))
        theirs = _WEIGHTED_CACHE[kind]
        if theirs is not None and len(theirs) == len(mine) and all(
                np.allclose(a, b, rtol=1e-5, atol=1e-6) for p, q in zip(mine, theirs)
                for a, b in zip(p, q)):
            return sentence
    return None


def weighted_accumulation(fn):
    """Micro-batches of unequal sizes with per-example weights (some 0): n_accum = 3 over 7 calls
    (two updates and an open window), then n_accum = 2 over 5 calls."""
    problems, cases = [], 0
    for n_accum, sizes, seed in _PLAN:
        r = check_step(fn, _reference_weighted_step, _build, _weighted_batches(n_accum, sizes, seed),
                       args=(n_accum,), state=_state, name="make_weighted_accumulating_step",
                       rtol=1e-5, atol=1e-6, max_traces=len(set(sizes)))
        problems += r.problems
        cases += r.cases
        if problems:
            break
    if problems and any(p.startswith("on ") for p in problems):
        try:
            sentence = _weighted_slip_sentence(fn)
        except Exception:  # the comparison's own messages stand
            sentence = None
        if sentence:
            problems.insert(0, sentence)
    return Report(name="make_weighted_accumulating_step", problems=problems, cases=cases)


EXERCISES = {"combine": combine, "weighted_accumulation": weighted_accumulation}
