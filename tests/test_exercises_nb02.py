"""Notebook 02's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right),
and right answers written in other styles pass."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check


# -- 02.standardizer ------------------------------------------------------------------------------
def standardize_rows(x):                 # as in the notebook
    mean = tf.reduce_mean(x, axis=1, keepdims=True)
    return (x - mean) / (tf.math.reduce_std(x, axis=1, keepdims=True) + 1e-6)


def _with(**kwargs):
    return lambda: tf.function(standardize_rows, **kwargs)


def standardize_columns(x):
    mean = tf.reduce_mean(x, axis=0, keepdims=True)
    return (x - mean) / (tf.math.reduce_std(x, axis=0, keepdims=True) + 1e-6)


STANDARDIZER_WRONG = {
    "a plain tf.function": (_with(), r"traced [2-9] times"),
    "reduce_retracing=True (almost right)": (_with(reduce_retracing=True),
                                             r"traced 2 times.*reduce_retracing=True alone"),
    "not compiled": (lambda: standardize_rows, r"plain Python function"),
    "a signature fixed to batches of 32": (
        _with(input_signature=[tf.TensorSpec([32, 8], tf.float32)]),
        r"input_signature \(shape \(32, 8\), float32\) refused a batch of 5"),
    "a float64 signature": (
        _with(input_signature=[tf.TensorSpec([None, 8], tf.float64)]),
        r"input_signature \(shape \(None, 8\), float64\) refused"),
    "standardizes columns, not rows": (
        lambda: tf.function(standardize_columns,
                            input_signature=[tf.TensorSpec([None, 8], tf.float32)]), r"differs"),
    "divides by the variance": (
        lambda: tf.function(lambda x: (x - tf.reduce_mean(x, 1, keepdims=True))
                            / (tf.math.reduce_variance(x, 1, keepdims=True) + 1e-6),
                            input_signature=[tf.TensorSpec([None, 8], tf.float32)]),
        r"very different scale.*differs"),
    "returns the result of one call": (
        lambda: tf.function(standardize_rows)(tf.ones((2, 8))),
        r"returned EagerTensor, not a function"),
}


def test_standardizer_reference_passes():
    for right in (_with(input_signature=[tf.TensorSpec([None, 8], tf.float32)]),
                  _with(input_signature=[tf.TensorSpec([None, None], tf.float32)])):
        report = check("02.standardizer", right)
        assert report.ok, str(report)


@pytest.mark.parametrize("wrong", STANDARDIZER_WRONG)
def test_standardizer_wrong_answers_are_rejected(wrong):
    rejected("02.standardizer", *STANDARDIZER_WRONG[wrong])


# -- 02.huber -------------------------------------------------------------------------------------
def huber_right(err, delta=1.0):
    abs_err = tf.abs(err)
    return tf.where(abs_err <= delta, 0.5 * err * err, delta * (abs_err - 0.5 * delta))


def huber_python(err, delta=1.0):        # the notebook's starting point
    if abs(err) <= delta:
        return 0.5 * err ** 2
    return delta * (abs(err) - 0.5 * delta)


HUBER_WRONG = {
    "a Python if": (huber_python, r"raised .*Hint: .*tf\.where"),
    "tf.cond (one branch for the whole tensor)": (
        lambda e, d=1.0: tf.cond(tf.abs(e) <= d, lambda: 0.5 * e * e,
                                 lambda: d * (tf.abs(e) - 0.5 * d)),
        r"must be a scalar.*use tf\.where"),
    "delta not squared in the linear branch (almost right)": (
        lambda e, d=1.0: tf.where(tf.abs(e) <= d, 0.5 * e * e, d * tf.abs(e) - 0.5 * d),
        r"delta = (0\.5|2\.5).*differs"),
    "delta ignored (1.0 hard-coded)": (lambda e, d=1.0: huber_right(e), r"delta = 0\.5.*differs"),
    "no 0.5 in the quadratic branch": (
        lambda e, d=1.0: tf.where(tf.abs(e) <= d, e * e, d * (tf.abs(e) - 0.5 * d)), r"differs"),
    "squared everywhere": (lambda e, d=1.0: 0.5 * tf.square(e), r"large errors.*differs"),
    "a Keras Huber loss (one averaged number)": (
        lambda e, d=1.0: keras.losses.Huber(delta=d)(tf.zeros_like(e), e),
        r"has shape \[\], expected \[7\]"),
    "NumPy": (lambda e, d=1.0: np.where(np.abs(e) <= d, 0.5 * e * e, d * (np.abs(e) - 0.5 * d)),
              r"NumPy cannot run inside a graph"),
    "float32 constants (breaks float64)": (
        lambda e, d=1.0: huber_right(e, tf.constant(d)), r"float64 errors.*raised"),
    "the old signature, no delta": (lambda e: huber_right(e), r"delta = 0\.5.*raised TypeError"),
}


def test_huber_reference_passes():
    keras_ops = lambda e, d=1.0: keras.ops.where(keras.ops.abs(e) <= d, 0.5 * e * e,  # noqa: E731
                                                 d * (keras.ops.abs(e) - 0.5 * d))
    for right in (huber_right, keras_ops):
        report = check("02.huber", right)
        assert report.ok, str(report)


@pytest.mark.parametrize("wrong", HUBER_WRONG)
def test_huber_wrong_answers_are_rejected(wrong):
    rejected("02.huber", *HUBER_WRONG[wrong])


# -- right answers written in other styles pass -----------------------------------------------------
def _decorated():
    @tf.function(input_signature=[tf.TensorSpec(shape=(None, 8))])     # float32 is the default
    def standardize(x):
        return standardize_rows(x)
    return standardize


STANDARDIZER_RIGHT = {
    "the decorator on a wrapper, dtype left to its default": _decorated,
    "a lambda around standardize_rows": lambda: tf.function(
        lambda x: standardize_rows(x), input_signature=[tf.TensorSpec([None, 8], tf.float32)]),
    "any width too, [None, None]": _with(input_signature=[tf.TensorSpec([None, None], tf.float32)]),
    "an input_signature with reduce_retracing=True as well": _with(
        input_signature=[tf.TensorSpec([None, 8], tf.float32)], reduce_retracing=True),
}


def _huber_minimum(err, delta=1.0):
    """0.5 * m**2 + delta * (|e| - m), m = min(|e|, delta): one formula, no branch."""
    m = tf.minimum(tf.abs(err), delta)
    return 0.5 * m * m + delta * (tf.abs(err) - m)


HUBER_RIGHT = {
    "keras.ops": lambda e, d=1.0: keras.ops.where(keras.ops.abs(e) <= d, 0.5 * e * e,
                                                 d * (keras.ops.abs(e) - 0.5 * d)),
    "tf.minimum, no choice at all": _huber_minimum,
    "the test turned round (|e| > delta picks the linear branch)": lambda e, d=1.0: tf.where(
        tf.abs(e) > d, d * tf.abs(e) - 0.5 * d * d, 0.5 * tf.square(e)),
}


@pytest.mark.parametrize("style", STANDARDIZER_RIGHT)
def test_standardizer_right_answers_in_other_styles_pass(style):
    accepted("02.standardizer", STANDARDIZER_RIGHT[style])


@pytest.mark.parametrize("style", HUBER_RIGHT)
def test_huber_right_answers_in_other_styles_pass(style):
    accepted("02.huber", HUBER_RIGHT[style])
