"""Notebook 00's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected


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
