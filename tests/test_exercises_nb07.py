"""Notebook 07's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

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
                                       tf.reduce_mean(tf.nn.softplus(f))]),
         r"has shape \[2\], expected \[\]"),
}


def d_loss_tf_nn(real_logits, fake_logits, real_label=0.9):     # TF's own stable cross-entropy
    real = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.fill(tf.shape(real_logits), real_label),
                                                   logits=real_logits)
    fake = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.zeros_like(fake_logits), logits=fake_logits)
    return tf.reduce_mean(real) + tf.reduce_mean(fake)


def d_loss_keras_ops(real_logits, fake_logits, real_label=0.9):  # keras.ops, max(x, 0) form
    def bce(x, y):    # max(x, 0) - x y + log(1 + e^-|x|): the same identity, rearranged
        return keras.ops.relu(x) - x * y + keras.ops.log1p(keras.ops.exp(-keras.ops.abs(x)))
    return keras.ops.mean(bce(real_logits, real_label)) + keras.ops.mean(bce(fake_logits, 0.0))


D_LOSS_RIGHT = {"softplus": d_loss_right, "keras.losses": d_loss_keras,
                "tf.nn.sigmoid_cross_entropy_with_logits": d_loss_tf_nn, "keras.ops": d_loss_keras_ops}


@pytest.mark.parametrize("right", D_LOSS_RIGHT)
def test_d_loss_right_answers_pass(right):
    accepted("07.d_loss_smoothed", D_LOSS_RIGHT[right])


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
    "the norm, not its square": (_r1(sqrt=True), r"penalty is 3, not .* 9 \(that is \|\|w\|\| itself"),
    "the WGAN-GP penalty (||g|| - 1)^2": (_r1(minus_one=True), r"penalty is 4, not .* 9 .*WGAN-GP"),
    "mean over pixels instead of the sum": (
        _r1(reduce="mean_pixels"), r"not \|\|w\|\|\^2 = 9 .*averaged over the 64 pixels"),
    "sums over the batch instead of averaging": (
        _r1(reduce="sum_batch"), r"same 16 images .* penalty is 144, not .*summed over the 16 images"),
}


def r1_norm_squared(critic, real):              # tf.norm of each flattened gradient, squared
    with tf.GradientTape() as inner:
        inner.watch(real)
        total = tf.reduce_sum(critic(real, training=True))
    grads = tf.reshape(inner.gradient(total, real), [tf.shape(real)[0], -1])
    return tf.reduce_mean(tf.square(tf.norm(grads, axis=1)))


def r1_keras_ops(critic, real):                 # keras.ops, the rank read from the tensor
    with tf.GradientTape() as inner:
        inner.watch(real)
        scores = critic(real, training=True)
    grads = inner.gradient(scores, real)
    per_image = keras.ops.sum(keras.ops.square(grads), axis=tuple(range(1, len(grads.shape))))
    return keras.ops.mean(per_image)


def r1_einsum_batch_jacobian(critic, real):     # one row per image from batch_jacobian
    with tf.GradientTape() as inner:
        inner.watch(real)
        scores = critic(real, training=True)
    jac = inner.batch_jacobian(scores, real)     # (n, 1, 8, 8, c)
    flat = tf.reshape(jac, [tf.shape(real)[0], -1])
    return tf.reduce_sum(tf.einsum("ij,ij->i", flat, flat)) / tf.cast(tf.shape(real)[0], tf.float32)


R1_RIGHT = {"the reference": _r1(), "tf.norm squared of the sum's gradient": r1_norm_squared,
            "keras.ops": r1_keras_ops, "batch_jacobian and einsum": r1_einsum_batch_jacobian}


@pytest.mark.parametrize("right", R1_RIGHT)
def test_r1_right_answers_pass(right):
    accepted("07.r1_penalty", R1_RIGHT[right])


@pytest.mark.parametrize("wrong", R1_WRONG)
def test_r1_wrong_answers_are_rejected(wrong):
    rejected("07.r1_penalty", *R1_WRONG[wrong])


def test_linear_critic_has_the_known_penalty():
    from ctlkit.exercises.nb07 import _critics, _reference_r1
    linear, _, _ = _critics()
    x = tf.constant(np.random.default_rng(0).uniform(-1, 1, (4, 8, 8, 1)), tf.float32)
    assert abs(float(_reference_r1(linear, x)) - 9.0) < 1e-4


def test_r1_hint_and_case_report_the_same_value():
    """The hint's value and the first case's 'yours' are one number: the same critic, the same images."""
    report = rejected("07.r1_penalty", _r1(reduce="sum_batch"), r"penalty is 144")
    assert any("(yours 144, expected 9)" in p for p in report.problems), str(report)
