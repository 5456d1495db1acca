"""Notebook 11's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""
import math

import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected

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
    "looks for NaN only (almost right: misses +inf and -inf)": (_nan_only, r"\+inf \(no NaN\).*returned None"),
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


def test_first_nonfinite_other_right_answer_passes():
    assert check("11.first_nonfinite", _python_math).ok


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
}


def test_safe_xent_reference_passes():
    report = check("11.safe_xent", safe_xent_right)
    assert report.ok, str(report)
    bad = (tf.constant([[300.0, -200.0, 0.0]]), tf.constant([1]))
    assert check("11.safe_xent", safe_xent_right, bad_batch=bad).ok


@pytest.mark.parametrize("wrong", SAFE_XENT_WRONG)
def test_safe_xent_wrong_answers_are_rejected(wrong):
    fn, message = SAFE_XENT_WRONG[wrong]
    rejected("11.safe_xent", fn, message)
