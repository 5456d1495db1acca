"""Notebook 05's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- 05.combine -----------------------------------------------------------------------------------
def combine_right(grads, sizes):
    w = tf.cast(sizes, grads.dtype)
    return tf.tensordot(w / tf.reduce_sum(w), grads, axes=1)


def _naive(grads, sizes):
    return tf.reduce_mean(grads, axis=0)


def _summed(grads, sizes):
    return tf.reduce_sum(grads, axis=0)


def _weights_as_column(grads, sizes):        # right for rank-2 grads only
    w = tf.cast(sizes, grads.dtype)
    return tf.reduce_sum((w / tf.reduce_sum(w))[:, None] * grads, axis=0)


def _numpy(grads, sizes):
    w = np.asarray(sizes, np.float32)
    return tf.constant(np.tensordot(w / w.sum(), grads.numpy(), axes=1))


def _float64(grads, sizes):
    w = tf.cast(sizes, tf.float64)
    return tf.tensordot(w / tf.reduce_sum(w), tf.cast(grads, tf.float64), axes=1)


def _divides_by_k(grads, sizes):             # sum(n_k g_k) / K: the weights do not add up to 1
    w = tf.cast(sizes, grads.dtype)
    return tf.tensordot(w, grads, axes=1) / tf.cast(tf.size(sizes), grads.dtype)


def _plus_epsilon(grads, sizes):             # a "safe" division that biases every result
    w = tf.cast(sizes, grads.dtype)
    return tf.tensordot(w, grads, axes=1) / (tf.reduce_sum(w) + 1e-3)


COMBINE_WRONG = {
    "the plain average (almost right: equal sizes only)": (_naive, r"8, 8, 8, 6 .* differs"),
    "the sum": (_summed, r"differs"),
    "weights as a column: only rank-2 gradients broadcast": (
        _weights_as_column, r"kernels \(64, 10\).*raised"),
    "a NumPy round trip": (_numpy, r"raised|not differentiable"),
    "a float64 result": (_float64, r"dtype float64, expected float32"),
    "divides by the number of micro-batches": (_divides_by_k, r"differs"),
    "divides by the sum of sizes + 1e-3 (tiny bias)": (_plus_epsilon, r"differs"),
}


def combine_loop(grads, sizes):               # a Python loop over the micro-batches
    total = tf.zeros_like(grads[0])
    for k in range(grads.shape[0]):
        total += tf.cast(sizes[k], grads.dtype) * grads[k]
    return total / tf.cast(tf.reduce_sum(sizes), grads.dtype)


def combine_keras_ops(grads, sizes):          # keras.ops, the weights broadcast by expand_dims
    w = keras.ops.cast(sizes, "float32")
    for _ in range(len(grads.shape) - 1):
        w = keras.ops.expand_dims(w, -1)
    return keras.ops.sum(w * grads, axis=0) / keras.ops.sum(w)


def combine_einsum(grads, sizes):             # einsum over the first axis
    w = tf.cast(sizes, grads.dtype)
    return tf.einsum("k,k...->...", w / tf.reduce_sum(w), grads)


COMBINE_RIGHT = {"tensordot": combine_right, "a Python loop": combine_loop,
                 "keras.ops": combine_keras_ops, "einsum": combine_einsum}


@pytest.mark.parametrize("right", COMBINE_RIGHT)
def test_combine_right_answers_pass(right):
    accepted("05.combine", COMBINE_RIGHT[right])


@pytest.mark.parametrize("wrong", COMBINE_WRONG)
def test_combine_wrong_answers_are_rejected(wrong):
    rejected("05.combine", *COMBINE_WRONG[wrong])


# -- 05.weighted_accumulation ---------------------------------------------------------------------
per_example_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)


def _make(part="sum w*loss", zero_total=True, zero_sums=True, reset=True, n_fixed=None, build=True,
          compiled=True, returns="weighted mean", style="tf.cond", apply="apply_gradients"):
    """A weighted accumulating-step factory, right by default; each argument a style or a slip."""
    def factory(model, optimizer, n_accum):
        n_acc = n_fixed or n_accum
        if build:
            optimizer.build(model.trainable_variables)
        sums = [tf.Variable(tf.zeros_like(v), trainable=False) for v in model.trainable_variables]
        total = tf.Variable(0.0, trainable=False)
        count = tf.Variable(0, trainable=False)

        def apply_window():
            grads = [s / total for s in sums] if part != "sum, undivided" else [s + 0.0 for s in sums]
            if apply == "apply":
                optimizer.apply(grads, model.trainable_variables)
            else:
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            if zero_sums:
                for s in sums:
                    s.assign(tf.zeros_like(s))
            if zero_total:
                total.assign(0.0)
            if reset:
                count.assign(0)
            return tf.constant(True)

        def step(x, y, w):
            n = tf.cast(tf.shape(x)[0], tf.float32)
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                losses = per_example_loss(y, logits)
                if part in ("sum w*loss", "sum, undivided"):
                    contribution, weight = tf.reduce_sum(w * losses), tf.reduce_sum(w)
                elif part == "keras sample_weight x n":     # loss_fn divides sum(w * loss) by n
                    contribution, weight = loss_fn(y, logits, sample_weight=w) * n, tf.reduce_sum(w)
                elif part == "weighted mean x sum(w)":
                    wm = keras.ops.sum(w * losses) / keras.ops.sum(w)
                    contribution, weight = wm * keras.ops.sum(w), keras.ops.sum(w)
                elif part == "examples (section 3)":
                    contribution, weight = loss_fn(y, logits, sample_weight=w) * n, n
                elif part == "mean of means":
                    contribution, weight = tf.reduce_sum(w * losses) / tf.reduce_sum(w), 1.0
                elif part == "unweighted":
                    contribution, weight = tf.reduce_sum(losses), n
            grads = tape.gradient(contribution, model.trainable_variables)
            for s, g in zip(sums, grads):
                s.assign_add(g)
            total.assign_add(weight)
            count.assign_add(1)
            if style == "autograph if":
                if count >= n_acc:
                    apply_window()
            else:
                tf.cond(count >= n_acc, apply_window, lambda: tf.constant(False))
            if returns == "weighted mean":
                return tf.reduce_sum(w * losses) / tf.reduce_sum(w)
            return tf.reduce_mean(losses)
        return tf.function(step) if compiled else step
    return factory


WEIGHTED_RIGHT = {
    "gradient of sum(w * loss), divided by sum(w)": _make(),
    "loss_fn with sample_weight, times the micro-batch size": _make(part="keras sample_weight x n"),
    "keras.ops weighted mean times sum(w), an AutoGraph if": _make(part="weighted mean x sum(w)",
                                                                   style="autograph if"),
    "optimizer not built in advance, optimizer.apply": _make(build=False, apply="apply"),
}

WEIGHTED_WRONG = {
    "section 3's trainer: weights by example count (right for weights of 1)": (
        _make(part="examples (section 3)"), r"number of examples .* sum of the weights"),
    "the mean of the micro-batches' weighted means": (
        _make(part="mean of means"), r"equal say"),
    "ignores the weights": (_make(part="unweighted"), r"ignores the weights"),
    "never zeroes the weight total (almost right: the first window is right)": (
        _make(zero_total=False), r"not the sum of the weights"),
    "never zeroes the gradient sums": (_make(zero_sums=False), r"micro-batch 6 .* differs"),
    "applies the sum, undivided": (_make(part="sum, undivided"), r"window 1\): applies.*differs"),
    "n_accum fixed at 3": (_make(n_fixed=3), r"n_accum=2, micro-batch 2 .*(unchanged|differs)"),
    "returns the unweighted mean loss": (_make(returns="mean"), r"value your step returned differs"),
    "not compiled": (_make(compiled=False), r"@tf.function"),
}


@pytest.mark.parametrize("right", WEIGHTED_RIGHT)
def test_weighted_accumulation_right_answers_pass(right):
    accepted("05.weighted_accumulation", WEIGHTED_RIGHT[right])


def test_weighted_batches_are_unequal_and_weighted():
    from ctlkit.exercises import nb05
    for n_accum, sizes, seed in nb05._PLAN:
        batches = list(nb05._weighted_batches(n_accum, sizes, seed).values())
        assert len({int(x.shape[0]) for x, _, _ in batches}) >= 3
        assert all(float(tf.reduce_min(w)) == 0.0 and float(tf.reduce_sum(w)) > 0 for _, _, w in batches)


@pytest.mark.parametrize("wrong", WEIGHTED_WRONG)
def test_weighted_accumulation_wrong_answers_are_rejected(wrong):
    rejected("05.weighted_accumulation", *WEIGHTED_WRONG[wrong])
