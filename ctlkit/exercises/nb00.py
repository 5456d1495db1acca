"""Notebook 00, start here: a mean squared error, a softmax that does not overflow, and one that
leaves some entries out (a mask)."""
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
def _by_conditioning(fn, reference, cases, name):
    """One float32 check per case, its relative tolerance from the case's conditioning: a right
    softmax may subtract a shift that is not exactly one of the logits (a logsumexp, a mean of
    maxima), and at logits of size L that shift is rounded by about L * 2**-24, which moves every
    probability by that much relatively. 1e-5 where the logits are small. For masked_softmax
    (a second argument, the mask) only the kept logits count."""
    out = []
    for label, args in cases.items():
        z = args[0].numpy()
        kept = z[args[1].numpy()] if len(args) > 1 else z        # masked_softmax: the kept logits
        size = float(np.max(np.abs(kept))) if kept.size else 0.0
        out.append(check_function(fn, reference, {label: args}, name=name,
                                  rtol=max(1e-5, 4 * size * 2.0**-23), atol=1e-12,
                                  differentiable=True))
    return out


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
        *_by_conditioning(fn, tf.nn.softmax, cases, "stable_softmax"),
        check_function(fn, tf.nn.softmax, float64, name="stable_softmax", rtol=1e-10, atol=1e-14,
                       differentiable=True)])


# -- 00.masked_softmax ----------------------------------------------------------------------------
def _reference_masked_softmax(z, mask):
    kept = tf.where(mask, z, tf.constant(-np.inf, z.dtype))     # a dropped entry: exp(-inf) = 0
    return tf.nn.softmax(kept, axis=-1)


_NAN_GRADIENT = ("the values are right but the gradient has a NaN: a tf.where applied after exp "
                 "still differentiates the branch it did not pick, and exp of a dropped large "
                 "logit is inf there (0 * inf = NaN). Replace the dropped logits before exp.")


_NAN_VALUE = ("0/0 or inf/inf: shift each row by its largest KEPT logit, a dropped one may be far "
              "above or below the kept ones; replace the dropped logits (e.g. by -inf) before exp.")


def masked_softmax(fn):
    rng = np.random.default_rng(2)
    cases = {
        "one row, its middle entry dropped": (tf.constant([[1.0, 2.0, 3.0]]),
                                              tf.constant([[True, False, True]])),
        "every entry kept (a plain softmax)": (tf.constant([[0.5, -1.0, 2.0, 0.0]]),
                                               tf.constant([[True, True, True, True]])),
        "a dropped padding logit of 1000 beside ordinary ones (shift by the largest KEPT logit)":
            (tf.constant([[0.0, 1000.0, 1.0, -1.0]]), tf.constant([[True, False, True, True]])),
        "kept logits around -1000 and a dropped 0 (a dropped entry must not count, whatever its "
        "value)": (tf.constant([[-1000.0, 0.0, -999.0]]), tf.constant([[True, False, True]])),
        "rows of very different scale and different masks (each row its own maximum)":
            (tf.constant([[1000.0, 1001.0, 999.0, 5.0], [-1000.0, -999.0, 3.0, -1002.0],
                          [0.1, 0.2, 0.3, 0.4]]),
             tf.constant([[True, True, False, True], [True, True, False, True],
                          [False, True, True, False]])),
        "a row with one kept entry (probability 1 there)": (tf.constant([[4.0, -2.0, 7.0]]),
                                                           tf.constant([[False, True, False]])),
        "a 2 x 3 x 4 batch (softmax over the last axis only)":
            (tf.constant(rng.normal(size=(2, 3, 4)) * 3, tf.float32),
             tf.constant(np.arange(24).reshape(2, 3, 4) % 3 != 1)),
    }
    float64 = {"float64 logits (keep the inputs' dtype)":
               (tf.constant(rng.normal(size=(3, 5)) * 50),
                tf.constant([[True, False, True, True, False]] * 3))}
    report = merge("masked_softmax", [
        *_by_conditioning(fn, _reference_masked_softmax, cases, "masked_softmax"),
        check_function(fn, _reference_masked_softmax, float64, name="masked_softmax", rtol=1e-10,
                       atol=1e-14, differentiable=True)])
    def hint(p):
        if "NaN where the other has a number" not in p:
            return p
        return p.rstrip(".") + ": " + (_NAN_GRADIENT if "gradient" in p else _NAN_VALUE)
    report.problems = [hint(p) for p in report.problems]
    return report


EXERCISES = {"mse": mse, "stable_softmax": stable_softmax, "masked_softmax": masked_softmax}
