"""Notebook 07's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected

bce = keras.losses.BinaryCrossentropy(from_logits=True)


# -- 07.d_loss_smoothed ---------------------------------------------------------------------------
def d_loss_right(real_logits, fake_logits, real_label=0.9):
    real_term = tf.reduce_mean(tf.nn.softplus(real_logits) - real_label * real_logits)
    return real_term + tf.reduce_mean(tf.nn.softplus(fake_logits))


def d_loss_keras(real_logits, fake_logits, real_label=0.9):       # also right, with keras.losses
    return (bce(tf.fill(tf.shape(real_logits), real_label), real_logits)
            + bce(tf.zeros_like(fake_logits), fake_logits))


def _naive(real_logits, fake_logits, real_label=0.9):
    p_real, p_fake = tf.sigmoid(real_logits), tf.sigmoid(fake_logits)
    return (tf.reduce_mean(-real_label * tf.math.log(p_real) - (1 - real_label) * tf.math.log(1 - p_real))
            + tf.reduce_mean(-tf.math.log(1 - p_fake)))


def _clipped(real_logits, fake_logits, real_label=0.9):
    p_real = tf.clip_by_value(tf.sigmoid(real_logits), 1e-7, 1 - 1e-7)
    p_fake = tf.clip_by_value(tf.sigmoid(fake_logits), 1e-7, 1 - 1e-7)
    return (tf.reduce_mean(-real_label * tf.math.log(p_real) - (1 - real_label) * tf.math.log(1 - p_real))
            + tf.reduce_mean(-tf.math.log(1 - p_fake)))


D_LOSS_WRONG = {
    "log(sigmoid(x)): overflows at +-200": (_naive, r"NaN or infinite.*softplus"),
    "log of a clipped sigmoid (almost right: wrong at large logits)":
        (_clipped, r"extreme logits of \+-200.*the result differs"),
    "twice one mean over real and fake together (almost right: equal batches agree)":
        (lambda r, f, y=0.9: 2 * tf.reduce_mean(tf.concat([tf.nn.softplus(r) - y * r, tf.nn.softplus(f)], 0)),
         r"24 real logits but 6 fake ones.*the result differs"),
    "ignores real_label (always 0.9)":
        (lambda r, f, y=0.9: d_loss_right(r, f, 0.9), r"real_label=0.8: the result differs"),
    "no smoothing at all (target 1 for real)":
        (lambda r, f, y=0.9: d_loss_right(r, f, 1.0), r"default real_label \(0\.9\): the result differs"),
    "smooths the fake targets too (0.1)":
        (lambda r, f, y=0.9: d_loss_right(r, f, y) - 0.1 * tf.reduce_mean(f), r"the result differs"),
    "sums over the batch instead of averaging":
        (lambda r, f, y=0.9: tf.reduce_sum(tf.nn.softplus(r) - y * r) + tf.reduce_sum(tf.nn.softplus(f)),
         r"the result differs"),
    "a NumPy round trip (no gradient)":
        (lambda r, f, y=0.9: tf.constant(d_loss_right(r, f, y).numpy()), r"not differentiable"),
    "returns the two terms, not their sum":
        (lambda r, f, y=0.9: tf.stack([tf.reduce_mean(tf.nn.softplus(r) - y * r),
                                       tf.reduce_mean(tf.nn.softplus(f))]), r"has shape \[2\], expected \[\]"),
}


@pytest.mark.parametrize("right", [d_loss_right, d_loss_keras])
def test_d_loss_right_answers_pass(right):
    assert check("07.d_loss_smoothed", right).ok, str(check("07.d_loss_smoothed", right))


@pytest.mark.parametrize("wrong", D_LOSS_WRONG)
def test_d_loss_wrong_answers_are_rejected(wrong):
    rejected("07.d_loss_smoothed", *D_LOSS_WRONG[wrong])


# -- 07.r1_penalty --------------------------------------------------------------------------------
def _r1(reduce="right", detach=False, sqrt=False, minus_one=False):
    """An R1 penalty, right by default; each argument plants one mistake."""
    def r1_penalty(critic, real):
        with tf.GradientTape() as inner:
            inner.watch(real)
            scores = critic(real, training=True)
        grads = inner.gradient(scores, real)
        if detach:
            grads = tf.stop_gradient(grads)
        if reduce == "right":
            sq = tf.reduce_sum(tf.square(grads), axis=[1, 2, 3])
        elif reduce == "no_channels":
            sq = tf.reduce_sum(tf.square(grads), axis=[1, 2])
        elif reduce == "mean_pixels":
            sq = tf.reduce_mean(tf.square(grads), axis=[1, 2, 3])
        if sqrt or minus_one:
            sq = tf.sqrt(sq)
        if minus_one:
            sq = tf.square(sq - 1.0)
        if reduce == "sum_batch":
            return tf.reduce_sum(tf.square(grads)) / 1.0
        return tf.reduce_mean(sq)
    return r1_penalty


def _r1_before_tape(critic, real):      # the classic bug: the input gradient is computed eagerly ...
    with tf.GradientTape() as inner:
        inner.watch(real)
        scores = critic(real, training=True)
    grads = tf.constant(inner.gradient(scores, real).numpy())        # ... and leaves the tape's sight
    return tf.reduce_mean(tf.reduce_sum(tf.square(grads), axis=[1, 2, 3]))


R1_WRONG = {
    "stop_gradient on the input gradient": (_r1(detach=True), r"no gradient with respect to the critic"),
    "gradient detached through NumPy": (_r1_before_tape, r"no gradient with respect to the critic"),
    "sums over height and width, not channels (almost right: one channel agrees)":
        (_r1(reduce="no_channels"), r"3-channel images.*(differs|shape)"),
    "the norm, not its square": (_r1(sqrt=True), r"penalty is 3, not .* 9"),
    "the WGAN-GP penalty (||g|| - 1)^2": (_r1(minus_one=True), r"penalty is 4, not .* 9"),
    "mean over pixels instead of the sum": (_r1(reduce="mean_pixels"), r"not \|\|w\|\|\^2 = 9"),
    "sums over the batch instead of averaging": (_r1(reduce="sum_batch"), r"not \|\|w\|\|\^2 = 9"),
}


def test_r1_reference_passes():
    report = check("07.r1_penalty", _r1())
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", R1_WRONG)
def test_r1_wrong_answers_are_rejected(wrong):
    rejected("07.r1_penalty", *R1_WRONG[wrong])


def test_linear_critic_has_the_known_penalty():
    from ctlkit.exercises.nb07 import _critics, _reference_r1
    linear, _, _ = _critics()
    x = tf.constant(np.random.default_rng(0).uniform(-1, 1, (4, 8, 8, 1)), tf.float32)
    assert abs(float(_reference_r1(linear, x)) - 9.0) < 1e-4
