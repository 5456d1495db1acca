"""Notebook 11's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


# -- 11.first_nonfinite ---------------------------------------------------------------------------
def first_nonfinite_right(history):
    values = np.asarray(history, dtype=np.float64).reshape(-1)
    for i, v in enumerate(values):
        if not np.isfinite(v):
            return i
    return None


def _nan_only(history):
    values = np.asarray(history, dtype=np.float64).reshape(-1)
    bad = np.flatnonzero(np.isnan(values))
    return int(bad[0]) if bad.size else None


def _no_minus_inf(history):
    for i, v in enumerate(np.asarray(history, dtype=np.float64).reshape(-1)):
        if v != v or v == float("inf"):
            return i
    return None


def _numpy_index(history):
    bad = np.flatnonzero(~np.isfinite(np.asarray(history, dtype=np.float64)))
    return bad[0] if bad.size else None


def _argmax(history):
    return int(np.argmax(~np.isfinite(np.asarray(history, dtype=np.float64))))


def _minus_one(history):
    bad = np.flatnonzero(~np.isfinite(np.asarray(history, dtype=np.float64)))
    return int(bad[0]) if bad.size else -1


def _tensor_index(history):
    bad = tf.where(~tf.math.is_finite(tf.cast(tf.reshape(history, [-1]), tf.float64)))
    return bad[0, 0] if tf.size(bad) > 0 else None


def _step_number(history):
    i = first_nonfinite_right(history)
    return None if i is None else i + 1


def _float32_cast(history):
    values = np.asarray(history, dtype=np.float32).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(values))
    return int(bad[0]) if bad.size else None


def _python_math(history):
    """Another right answer: math.isfinite on each item works on lists, arrays and tensors."""
    for i, v in enumerate(history):
        if not math.isfinite(v):
            return i
    return None


FIRST_NONFINITE_WRONG = {
    "looks for NaN only (almost right: misses +inf and -inf)":
        (_nan_only, r"\+inf \(no NaN\).*returned None"),
    "misses -inf": (_no_minus_inf, r"ending in -inf: returned None"),
    "returns a NumPy integer (almost right)": (_numpy_index, r"numpy\.int64 .*not a Python int"),
    "argmax: 0 when every value is finite": (_argmax, r"all finite: every value is finite, so the "
                                                      r"answer is None; yours returned 0"),
    "returns -1 for 'none'": (_minus_one, r"answer is None; yours returned -1"),
    "returns a tensor": (_tensor_index, r"returned a tensorflow\.\w+; return a Python int"),
    "returns the 1-based step number": (_step_number, r"index counts from 0"),
    "casts to float32 (1e300 becomes inf)": (_float32_cast, r"1e300.*the index differs"),
}


def test_first_nonfinite_reference_passes():
    report = check("11.first_nonfinite", first_nonfinite_right)
    assert report.ok, str(report)
    history = [1.0, 0.5, float("nan")]
    assert check("11.first_nonfinite", first_nonfinite_right, monitor_history=history).cases == 12


def _vectorised(history):
    """NumPy without a loop: the first True of ~isfinite, as a Python int via .item()."""
    bad = ~np.isfinite(np.asarray(history, dtype=np.float64).ravel())
    return bad.argmax().item() if bad.any() else None


def _generator(history):
    """next() over a generator of float(v), with a default of None."""
    return next((i for i, v in enumerate(np.ravel(history)) if not math.isfinite(float(v))), None)


def _tensorflow(history):
    """TensorFlow ops in float64 (a float32 tensor is cast up, a list converted as float64)."""
    t = history if tf.is_tensor(history) else tf.constant(np.asarray(history, np.float64))
    bad = tf.where(~tf.math.is_finite(tf.reshape(tf.cast(t, tf.float64), [-1])))
    return int(bad[0, 0]) if bad.shape[0] else None


FIRST_NONFINITE_RIGHT = {"the solution cell": first_nonfinite_right, "math.isfinite per item": _python_math,
                         "vectorised NumPy": _vectorised, "a generator with next()": _generator,
                         "TensorFlow ops in float64": _tensorflow}


@pytest.mark.parametrize("right", FIRST_NONFINITE_RIGHT)
def test_first_nonfinite_right_answers_pass(right):
    accepted("11.first_nonfinite", FIRST_NONFINITE_RIGHT[right])


@pytest.mark.parametrize("wrong", FIRST_NONFINITE_WRONG)
def test_first_nonfinite_wrong_answers_are_rejected(wrong):
    fn, message = FIRST_NONFINITE_WRONG[wrong]
    rejected("11.first_nonfinite", fn, message)


# -- 11.safe_xent ---------------------------------------------------------------------------------
def safe_xent_right(logits, labels):
    logits = tf.convert_to_tensor(logits)
    shifted = logits - tf.stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
    log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True))
    return -tf.gather(log_probs, labels, axis=-1, batch_dims=1)


def _naive(logits, labels):
    return -tf.gather(tf.math.log(tf.nn.softmax(logits)), labels, axis=-1, batch_dims=1)


def _epsilon(logits, labels):
    return -tf.gather(tf.math.log(tf.nn.softmax(logits) + 1e-9), labels, axis=-1, batch_dims=1)


def _unshifted_exp(logits, labels):
    m = tf.reduce_max(logits, axis=-1, keepdims=True)
    log_probs = logits - m - tf.math.log(tf.reduce_sum(tf.exp(logits), axis=-1, keepdims=True))
    return -tf.gather(log_probs, labels, axis=-1, batch_dims=1)


def _batch_mean(logits, labels):
    return tf.reduce_mean(safe_xent_right(logits, labels))


def _no_batch_dims(logits, labels):
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True))
    return -tf.gather(log_probs, labels, axis=-1)


def _clipped_logits(logits, labels):
    return safe_xent_right(tf.clip_by_value(logits, -50.0, 50.0), labels)


def _frozen_normaliser(logits, labels):
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    lse = tf.stop_gradient(tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True)))
    return -tf.gather(shifted - lse, labels, axis=-1, batch_dims=1)


SAFE_XENT_WRONG = {
    "log of softmax (the textbook formula)": (_naive, r"spread over hundreds.*(inf|NaN)"),
    "log(softmax + 1e-9) (almost right: finite, but capped near 20.7)": (
        _epsilon, r"spread over hundreds.*the result differs"),
    "shifted by the max outside the exp only (exp overflows)": (_unshifted_exp, r"1e4\).*differs"),
    "the batch mean, not per example": (_batch_mean, r"has shape \[\], expected \[32\]"),
    "gather without batch_dims": (_no_batch_dims, r"has shape \[32, 32\], expected \[32\]"),
    "clips the logits to +-50": (_clipped_logits, r"spread over hundreds.*differs"),
    "stop_gradient on the log-sum-exp (almost right: right values, wrong gradient)": (
        _frozen_normaliser, r"ordinary logits.*the gradient w\.r\.t\. argument 0 differs"),
    "logsumexp(z) - z_y (almost right: cancellation at logits of 1e4)": (
        lambda z, y: tf.reduce_logsumexp(z, axis=-1) - tf.gather(z, y, axis=-1, batch_dims=1),
        r"1e4\).*cancellation"),
    "shifted, then the max added back before subtracting z_y (cancellation)": (
        lambda z, y: (tf.math.log(tf.reduce_sum(tf.exp(z - tf.reduce_max(z, -1, keepdims=True)), -1))
                      + tf.reduce_max(z, -1) - tf.gather(z, y, axis=-1, batch_dims=1)),
        r"cancellation"),
}


def _keras_ops(logits, labels):
    """keras.ops.log_softmax, then take_along_axis."""
    log_probs = keras.ops.log_softmax(logits, axis=-1)
    picked = keras.ops.take_along_axis(log_probs, keras.ops.cast(labels, "int32")[:, None], axis=-1)
    return -picked[:, 0]


def _one_hot_sum(logits, labels):
    """The shift without stop_gradient (the gradient is the same), a one-hot sum for the pick."""
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    log_probs = shifted - tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1, keepdims=True))
    return -tf.reduce_sum(tf.one_hot(labels, tf.shape(logits)[-1]) * log_probs, axis=-1)


def _shifted_logsumexp(logits, labels):
    """Pick the shifted label logit first, then subtract tf.reduce_logsumexp of the shifted row."""
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    z_y = tf.gather(shifted, labels, axis=1, batch_dims=1)
    return tf.reduce_logsumexp(shifted, axis=-1) - z_y


SAFE_XENT_RIGHT = {"the solution cell": safe_xent_right, "keras.ops.log_softmax": _keras_ops,
                   "one-hot sum, no stop_gradient": _one_hot_sum,
                   "logsumexp of the shifted logits": _shifted_logsumexp}


@pytest.mark.parametrize("right", SAFE_XENT_RIGHT)
def test_safe_xent_right_answers_pass(right):
    accepted("11.safe_xent", SAFE_XENT_RIGHT[right])


def test_safe_xent_reference_passes_with_the_notebooks_bad_batch():
    bad = (tf.constant([[300.0, -200.0, 0.0]]), tf.constant([1]))
    assert check("11.safe_xent", safe_xent_right, bad_batch=bad).ok


@pytest.mark.parametrize("wrong", SAFE_XENT_WRONG)
def test_safe_xent_wrong_answers_are_rejected(wrong):
    fn, message = SAFE_XENT_WRONG[wrong]
    rejected("11.safe_xent", fn, message)


# -- 11.stable_bce --------------------------------------------------------------------------------
def stable_bce_right(logits, labels):
    return tf.nn.relu(logits) - logits * labels + tf.math.log1p(tf.exp(-tf.abs(logits)))


STABLE_BCE_RIGHT = {
    "the solution cell": stable_bce_right,
    "softplus(z) - z * y": lambda z, y: tf.nn.softplus(z) - z * y,
    "log_sigmoid of z and of -z": lambda z, y: -(y * tf.math.log_sigmoid(z)
                                                 + (1 - y) * tf.math.log_sigmoid(-z)),
    "keras.ops, softplus of -|z|": lambda z, y: (keras.ops.maximum(z, 0.0) - z * y
                                                 + keras.ops.softplus(-keras.ops.abs(z))),
    "each label's softplus": lambda z, y: y * tf.nn.softplus(-z) + (1 - y) * tf.nn.softplus(z),
    "Keras' loss, reshaped": lambda z, y: keras.losses.binary_crossentropy(
        y[..., None], z[..., None], from_logits=True),
    "the fused op": lambda z, y: tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z),
}


def _sig(z):
    return tf.math.sigmoid(z)


STABLE_BCE_WRONG = {
    "log(sigmoid) by hand (the textbook formula)": (
        lambda z, y: -(y * tf.math.log(_sig(z)) + (1 - y) * tf.math.log(1 - _sig(z))),
        r"log\(sigmoid\(z\)\) and log\(1 - sigmoid\(z\)\) by hand"),
    "an epsilon inside the logs (almost right: finite, but capped)": (
        lambda z, y: -(y * tf.math.log(_sig(z) + 1e-7) + (1 - y) * tf.math.log(1 - _sig(z) + 1e-7)),
        r"added an epsilon inside the logs"),
    "log(1 + exp(z)) as written (overflows)": (
        lambda z, y: tf.math.log(1 + tf.exp(z)) - z * y, r"log\(1 \+ exp\(z\)\) as written"),
    "rounds soft labels": (
        lambda z, y: stable_bce_right(z, tf.round(y)), r"ignores soft labels"),
    "the batch mean": (lambda z, y: tf.reduce_mean(stable_bce_right(z, y)), r"mean over the batch"),
    "the sign of z flipped (labels swapped)": (
        lambda z, y: stable_bce_right(-z, y), r"ordinary logits.*the result differs"),
    "max(z, 0) without the log term (almost right for large |z|)": (
        lambda z, y: tf.nn.relu(z) - z * y, r"ordinary logits.*the result differs"),
    "clips the logits to +-15 (almost right: finite, wrong beyond)": (
        lambda z, y: stable_bce_right(tf.clip_by_value(z, -15.0, 15.0), y), r"\+-20.*differs"),
    "stop_gradient on the log term (right values, wrong gradient)": (
        lambda z, y: tf.nn.relu(z) - z * y + tf.stop_gradient(tf.math.log1p(tf.exp(-tf.abs(z)))),
        r"gradient w\.r\.t\. argument 0 differs"),
}


@pytest.mark.parametrize("right", STABLE_BCE_RIGHT)
def test_stable_bce_right_answers_pass(right):
    accepted("11.stable_bce", STABLE_BCE_RIGHT[right])


@pytest.mark.parametrize("wrong", STABLE_BCE_WRONG)
def test_stable_bce_wrong_answers_are_rejected(wrong):
    rejected("11.stable_bce", *STABLE_BCE_WRONG[wrong])
