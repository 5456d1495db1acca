"""Notebook 00, start here: a mean squared error, a softmax that does not overflow."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import check_function
from ._common import merge


# -- 00.mse ---------------------------------------------------------------------------------------
def _reference_mse(y_true, y_pred):
    return tf.reduce_mean(tf.square(y_true - y_pred))


def mse(fn):
    rng = np.random.default_rng(0)
    cases = {
        "three values, differences 0, 0.5 and 1": (tf.constant([1.0, 2.0, 3.0]),
                                                    tf.constant([1.5, 2.0, 2.0])),
        "a 4 x 3 matrix (one mean over all 12 entries, not one per row)":
            (tf.constant(rng.normal(size=(4, 3)), tf.float32),
             tf.constant(rng.normal(size=(4, 3)), tf.float32)),
        "differences of 3 and 5 (squares differ from absolute values)":
            (tf.constant([[0.0, 0.0]]), tf.constant([[3.0, -5.0]])),
        "a 2 x 2 x 3 batch of float64 values (keep the inputs' dtype)":
            (tf.constant(rng.normal(size=(2, 2, 3))), tf.constant(rng.normal(size=(2, 2, 3)))),
        "differences around 1e-4 (a tiny error, compared relatively)":
            (tf.constant([1.0, 1.0, 1.0, 1.0]), tf.constant([1.0001, 0.9999, 1.0002, 1.0]))}
    return merge("mse", [check_function(fn, _reference_mse, cases, name="mse", rtol=1e-5,
                                        atol=1e-12, differentiable=True)])


# -- 00.stable_softmax ----------------------------------------------------------------------------
def stable_softmax(fn):
    rng = np.random.default_rng(1)
    cases = {
        "one row of ordinary logits": (tf.constant([[1.0, 2.0, 3.0]]),),
        "huge logits around 1000 (exp overflows to inf without the shift)":
            (tf.constant([[1000.0, 1001.0, 999.0]]),),
        "very negative logits around -1000 (exp underflows to 0 without the shift)":
            (tf.constant([[-1000.0, -1001.0, -999.0]]),),
        "rows of very different scale (each row needs its own maximum)":
            (tf.constant([[1000.0, 1001.0, 999.0], [-1000.0, -999.0, -1002.0], [0.1, 0.2, 0.3]]),),
        "one row spanning -500 to 500": (tf.constant([[-500.0, 0.0, 500.0, 499.0]]),),
        "a 5 x 10 batch of random logits": (tf.constant(rng.normal(size=(5, 10)), tf.float32),),
        "a 2 x 3 x 4 batch (softmax over the last axis only)":
            (tf.constant(rng.normal(size=(2, 3, 4)) * 3, tf.float32),),
        "logits 0 and -20 (a tiny probability, compared relatively)":
            (tf.constant([[0.0, -20.0, -10.0]]),),
    }
    float64 = {"float64 logits (keep the inputs' dtype)":
               (tf.constant(rng.normal(size=(3, 4)) * 50),)}
    return merge("stable_softmax", [
        check_function(fn, tf.nn.softmax, cases, name="stable_softmax", rtol=1e-5, atol=1e-12,
                       differentiable=True),
        check_function(fn, tf.nn.softmax, float64, name="stable_softmax", rtol=1e-10, atol=1e-14,
                       differentiable=True)])


EXERCISES = {"mse": mse, "stable_softmax": stable_softmax}
