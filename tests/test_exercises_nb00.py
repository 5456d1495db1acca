"""Notebook 00's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right),
and right answers written in other styles pass."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check


# -- 00.mse ---------------------------------------------------------------------------------------
def mse_right(y_true, y_pred):
    return tf.reduce_mean(tf.square(y_true - y_pred))


MSE_WRONG = {
    "the mean absolute error (almost right)": (
        lambda t, p: tf.reduce_mean(tf.abs(t - p)), r"differences of 3 and 5.*differs"),
    "the sum, not the mean": (lambda t, p: tf.reduce_sum(tf.square(t - p)), r"differs"),
    "the root of the mean (RMSE)": (
        lambda t, p: tf.sqrt(tf.reduce_mean(tf.square(t - p))), r"differs"),
    "one mean per row": (lambda t, p: tf.reduce_mean(tf.square(t - p), axis=-1),
                         r"4 x 3 matrix.*has shape \[4\], expected \[\]"),
    "half the mean (the 1/2 of some textbooks)": (
        lambda t, p: 0.5 * tf.reduce_mean(tf.square(t - p)), r"differs"),
    "the square of the mean difference": (
        lambda t, p: tf.square(tf.reduce_mean(t - p)), r"differs"),
    "computed in NumPy": (lambda t, p: np.mean(np.square(t.numpy() - p.numpy())),
                          r"not differentiable"),
    "cast to float32": (lambda t, p: tf.reduce_mean(tf.square(tf.cast(t, tf.float32)
                                                              - tf.cast(p, tf.float32))),
                        r"float64.*dtype float32, expected float64"),
    "a Python float": (lambda t, p: float(tf.reduce_mean(tf.square(t - p))),
                       r"dtype float64, expected float32|not differentiable"),
    "adds an epsilon of 1e-7 (swamps a tiny error)": (
        lambda t, p: tf.reduce_mean(tf.square(t - p)) + 1e-7, r"around 1e-4.*differs"),
}


def test_mse_reference_passes():
    report = check("00.mse", mse_right)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", MSE_WRONG)
def test_mse_wrong_answers_are_rejected(wrong):
    rejected("00.mse", *MSE_WRONG[wrong])


# -- 00.stable_softmax ----------------------------------------------------------------------------
def softmax_right(z):
    e = tf.exp(z - tf.reduce_max(z, axis=-1, keepdims=True))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)


def _shifted(shift, total=lambda e: tf.reduce_sum(e, axis=-1, keepdims=True)):
    def softmax(z):
        e = tf.exp(z - shift(z))
        return e / total(e)
    return softmax


def _numpy_softmax(z):
    e = np.exp(z.numpy() - z.numpy().max(-1, keepdims=True))
    return tf.constant(e / e.sum(-1, keepdims=True))


SOFTMAX_WRONG = {
    "the textbook formula, no shift": (_shifted(lambda z: 0.0), r"huge logits.*NaN"),
    "shifts by the maximum of the whole batch (almost right)": (
        _shifted(lambda z: tf.reduce_max(z)), r"rows of very different scale"),
    "shifts by the row minimum": (
        _shifted(lambda z: tf.reduce_min(z, axis=-1, keepdims=True)), r"-500 to 500"),
    "shifts by the row mean": (
        _shifted(lambda z: tf.reduce_mean(z, axis=-1, keepdims=True)), r"-500 to 500"),
    "normalises over the whole batch": (
        _shifted(lambda z: tf.reduce_max(z, axis=-1, keepdims=True), lambda e: tf.reduce_sum(e)),
        r"5 x 10 batch.*differs"),
    "axis 1 instead of the last axis": (
        lambda z: tf.nn.softmax(z, axis=1), r"2 x 3 x 4 batch.*differs"),
    "clips probabilities to at least 1e-7": (
        lambda z: tf.clip_by_value(softmax_right(z), 1e-7, 1.0), r"tiny probability.*differs"),
    "computed in NumPy": (_numpy_softmax, r"not differentiable"),
    "computed in float32": (
        lambda z: softmax_right(tf.cast(z, tf.float32)), r"float64 logits.*dtype float32"),
    "log-softmax, not softmax": (lambda z: tf.nn.log_softmax(z), r"differs"),
}


def test_softmax_reference_passes():
    report = check("00.stable_softmax", softmax_right)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", SOFTMAX_WRONG)
def test_softmax_wrong_answers_are_rejected(wrong):
    rejected("00.stable_softmax", *SOFTMAX_WRONG[wrong])


# -- right answers written in other styles pass -----------------------------------------------------
MSE_RIGHT = {
    "keras.ops": lambda t, p: keras.ops.mean(keras.ops.square(p - t)),
    "a sum divided by the count": lambda t, p: tf.reduce_sum((t - p) * (t - p))
    / tf.cast(tf.size(t), t.dtype),
    "the mean of per-row means (rows of equal length)": lambda t, p: tf.reduce_mean(
        tf.reduce_mean(tf.square(t - p), axis=-1)),
}

SOFTMAX_RIGHT = {
    "keras.ops": lambda z: (lambda e: e / keras.ops.sum(e, axis=-1, keepdims=True))(
        keras.ops.exp(z - keras.ops.max(z, axis=-1, keepdims=True))),
    "exp(z - logsumexp(z))": lambda z: tf.exp(z - tf.reduce_logsumexp(z, axis=-1, keepdims=True)),
    "tf.nn.softmax itself": lambda z: tf.nn.softmax(z),
}


@pytest.mark.parametrize("style", MSE_RIGHT)
def test_mse_right_answers_in_other_styles_pass(style):
    accepted("00.mse", MSE_RIGHT[style])


@pytest.mark.parametrize("style", SOFTMAX_RIGHT)
def test_softmax_right_answers_in_other_styles_pass(style):
    accepted("00.stable_softmax", SOFTMAX_RIGHT[style])


# -- 00.masked_softmax ----------------------------------------------------------------------------
def _minus_inf(z):
    return tf.constant(-np.inf, z.dtype)


def masked_softmax_right(z, mask):
    return softmax_right(tf.where(mask, z, _minus_inf(z)))


def _exp_then_where(z, mask):
    """Values right; the exp of a dropped large logit is inf in the branch tf.where did not pick."""
    top = tf.reduce_max(tf.where(mask, z, _minus_inf(z)), axis=-1, keepdims=True)
    e = tf.where(mask, tf.exp(z - top), tf.zeros_like(z))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)


def _masked_then_renormalised(z, mask):        # stable_softmax copied, then the mask
    p = softmax_right(z) * tf.cast(mask, z.dtype)
    return p / tf.reduce_sum(p, axis=-1, keepdims=True)


def _shift_by_batch_max(z, mask):
    kept = tf.where(mask, z, _minus_inf(z))
    e = tf.exp(kept - tf.reduce_max(kept))
    return e / tf.reduce_sum(e, axis=-1, keepdims=True)


MASKED_RIGHT = {
    "the reference's way, -inf then a stable softmax": masked_softmax_right,
    "an additive -1e9 on the dropped logits": lambda z, m: softmax_right(
        z + tf.cast(tf.logical_not(m), z.dtype) * -1e9),
    "keras.ops.where and keras.ops.softmax": lambda z, m: keras.ops.softmax(
        keras.ops.where(m, z, keras.ops.full_like(z, -np.inf)), axis=-1),
    "the dtype's lowest value instead of -inf": lambda z, m: softmax_right(
        tf.where(m, z, z.dtype.min)),
    "-inf added (z + where(mask, 0, -inf))": lambda z, m: tf.nn.softmax(
        z + tf.where(m, tf.zeros_like(z), _minus_inf(z))),
    "tf.nn.softmax of a where with a Python -inf": lambda z, m: tf.nn.softmax(
        tf.where(m, z, -np.inf)),
    "exp(kept - logsumexp(kept))": lambda z, m: (lambda k: tf.exp(
        k - tf.reduce_logsumexp(k, axis=-1, keepdims=True)))(tf.where(m, z, _minus_inf(z))),
}

MASKED_WRONG = {
    "stable_softmax copied, then the mask and a renormalisation (almost right)": (
        _masked_then_renormalised, r"padding logit of 1000.*NaN.*largest KEPT logit"),
    "the shift and the mask right, but tf.where after exp (NaN gradient, almost right)": (
        _exp_then_where,
        r"gradient w\.r\.t\. argument 0 differs: NaN.*Replace the dropped logits before exp"),
    "softmax times the mask, no renormalisation": (
        lambda z, m: softmax_right(z) * tf.cast(m, z.dtype), r"middle entry dropped.*differs"),
    "dropped logits set to 0, not removed": (
        lambda z, m: softmax_right(z * tf.cast(m, z.dtype)), r"dropped 0.*differs"),
    "shifted by the maximum of the whole batch": (
        _shift_by_batch_max, r"very different scale and different masks.*NaN"),
    "no shift at all": (
        lambda z, m: (lambda e: e / tf.reduce_sum(e, axis=-1, keepdims=True))(
            tf.exp(z) * tf.cast(m, z.dtype)), r"padding logit of 1000.*NaN"),
    "the mask read the other way round": (
        lambda z, m: softmax_right(tf.where(m, _minus_inf(z), z)), r"middle entry dropped.*differs"),
    "computed in float32": (
        lambda z, m: masked_softmax_right(tf.cast(z, tf.float32), m),
        r"float64 logits.*dtype float32, expected float64"),
    "a Keras Softmax layer with mask= (float32 whatever the input)": (
        lambda z, m: keras.layers.Softmax()(z, mask=m), r"float64 logits.*dtype float32"),
    "softmax over axis 1, not the last axis": (
        lambda z, m: tf.nn.softmax(tf.where(m, z, _minus_inf(z)), axis=1), r"2 x 3 x 4 batch.*differs"),
    "computed in NumPy": (
        lambda z, m: tf.constant(_numpy_softmax(tf.where(m, z, _minus_inf(z))).numpy()),
        r"not differentiable"),
}


@pytest.mark.parametrize("style", MASKED_RIGHT)
def test_masked_softmax_right_answers_pass(style):
    accepted("00.masked_softmax", MASKED_RIGHT[style])


@pytest.mark.parametrize("wrong", MASKED_WRONG)
def test_masked_softmax_wrong_answers_are_rejected(wrong):
    rejected("00.masked_softmax", *MASKED_WRONG[wrong])
