"""Notebook 05's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected

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


def test_combine_reference_passes():
    assert check("05.combine", combine_right).ok


@pytest.mark.parametrize("wrong", COMBINE_WRONG)
def test_combine_wrong_answers_are_rejected(wrong):
    rejected("05.combine", *COMBINE_WRONG[wrong])


# -- 05.accumulating_step -------------------------------------------------------------------------
def _make(divide="n", zero=True, reset=True, every_call=False, n_fixed=None, build=True,
          compiled=True, returns="loss", style="apply_gradients"):
    """An accumulating-step factory, right by default; each argument plants one mistake."""
    def factory(model, optimizer, n_accum):
        n = n_fixed or n_accum
        if build:
            optimizer.build(model.trainable_variables)
        sums = [tf.Variable(tf.zeros_like(v), trainable=False) for v in model.trainable_variables]
        count = tf.Variable(0, trainable=False)

        def apply():
            d = {"n": n, "one": 1}[divide]
            if style == "apply":                    # Keras 3's optimizer.apply(grads, variables)
                optimizer.apply([s / d for s in sums], model.trainable_variables)
            else:
                optimizer.apply_gradients(zip([s / d for s in sums], model.trainable_variables))
            if zero:
                for s in sums:
                    s.assign(tf.zeros_like(s))
            if reset:
                count.assign(0)
            return tf.constant(True)

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            if every_call:
                optimizer.apply_gradients(zip([g / n for g in grads], model.trainable_variables))
                return loss
            for s, g in zip(sums, grads):
                s.assign_add(g)
            count.assign_add(1)
            if style == "autograph if":               # AutoGraph turns it into a tf.cond
                if count == n:
                    apply()
            else:
                tf.cond(tf.equal(count, n), apply, lambda: tf.constant(False))
            return loss if returns == "loss" else count
        return tf.function(step) if compiled else step
    return factory


ACCUMULATING_WRONG = {
    "applies the sum, not the average": (_make(divide="one"), r"window 1\): applies.*differs"),
    "never zeroes the sums (almost right: the first update is right)": (
        _make(zero=False), r"micro-batch 6 \(window 2\): applies.*differs"),
    "never resets the counter: a single update": (
        _make(reset=False), r"micro-batch 6 \(window 2\): applies.*(unchanged|differs)"),
    "small steps of g / n on every call": (_make(every_call=True), r"micro-batch 1 .*nothing may change.*differs"),
    "n_accum fixed at 3": (_make(n_fixed=3), r"n_accum=2, micro-batch 2 .*(unchanged|differs)"),
    "returns the counter, not the loss": (_make(returns="count"), r"value your step returned"),
    "not compiled": (_make(compiled=False), r"@tf.function"),
}


def test_accumulating_step_reference_passes():
    assert check("05.accumulating_step", _make()).ok


@pytest.mark.parametrize("style", ["apply", "autograph if"])
def test_accumulating_step_right_in_other_styles_passes(style):
    report = check("05.accumulating_step", _make(style=style))
    assert report.ok, str(report)


def test_accumulating_step_accepts_an_optimizer_built_on_first_use():
    """The first call then creates the slots and TF traces it twice: that is not a retrace."""
    report = check("05.accumulating_step", _make(build=False))
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", ACCUMULATING_WRONG)
def test_accumulating_step_wrong_answers_are_rejected(wrong):
    rejected("05.accumulating_step", *ACCUMULATING_WRONG[wrong])
