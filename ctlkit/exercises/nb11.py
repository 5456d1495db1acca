"""Notebook 11, debugging: where a history turns non-finite, a cross-entropy that survives."""
from __future__ import annotations

import copy
import numbers

import numpy as np
import tensorflow as tf

from ..checks import ContextError, Report, check_function, compare, explain

NAN, INF = float("nan"), float("inf")


# -- 11.first_nonfinite ---------------------------------------------------------------------------
def _reference_first_nonfinite(history):
    values = np.asarray(history, dtype=np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(values))
    return int(bad[0]) if bad.size else None


def _type_problem(got, want, label):
    """A Python int (not bool, NumPy or tensor) where the reference has one; None where it has None."""
    if want is None:
        if got is None:
            return None
        return (f"{label}: every value is finite, so the answer is None; yours returned "
                f"{got!r} ({type(got).__name__}).")
    if got is None:
        return f"{label}: returned None, but index {want} is not finite."
    if type(got) is int:
        return None
    kind = type(got).__module__.split(".")[0] + "." + type(got).__name__
    if isinstance(got, (bool, np.bool_)):
        return f"{label}: returned a bool ({got!r}); return the index, a Python int."
    if isinstance(got, (tf.Tensor, tf.Variable)):
        return (f"{label}: returned a {kind}; return a Python int (e.g. int(i)), which a log "
                f"reader can print, compare and use as a list index.")
    if isinstance(got, numbers.Integral) or isinstance(got, np.integer):
        return (f"{label}: returned {kind} {got!r}, not a Python int: wrap it, int(i) "
                f"(NumPy indices are NumPy integers).")
    return f"{label}: returned {kind} {got!r}; expected the index {want} as a Python int."


def first_nonfinite(fn, monitor_history=None):
    long = np.linspace(3.0, 0.1, 2000)
    long[1000] = NAN
    cases = {
        "a list: NaN at index 2, then +inf": [0.9, 0.7, NAN, INF],
        "a list with +inf (no NaN) at index 3": [1.0, 0.5, 0.25, INF, 0.1],
        "a NumPy float32 array ending in -inf": np.array([2.0, 1.5, 1.2, 1.1, -INF], np.float32),
        "a tensor with -inf at index 0": tf.constant([-INF, 1.0, NAN]),
        "a NumPy array, all finite": np.array([2.3, 1.1, 0.4]),
        "a list of Python ints, all finite": [3, 2, 1],
        "an empty list": [],
        "a float64 tensor, all finite": tf.constant([0.5, 0.25], tf.float64),
        "2000 float64 values, NaN at index 1000": long,
        "a list of NumPy float32 scalars (as a loop logs them), NaN at 1": [np.float32(1.0),
                                                                          np.float32(NAN)],
        "a huge but finite float64 value (1e300) before a NaN": [1e300, 2.0, NAN],
    }
    if monitor_history is not None:
        try:
            values = np.asarray(monitor_history, dtype=np.float64)
        except (TypeError, ValueError):
            values = None
        if values is None or values.ndim != 1:
            raise ContextError("monitor_history must be one loss per step (the notebook's "
                               "monitor.history['loss']), a 1-D sequence of numbers")
        cases["the notebook's loss history of section 1"] = monitor_history
    problems = []
    for label, history in cases.items():
        want = _reference_first_nonfinite(history)
        try:
            got = fn(copy.deepcopy(history) if not tf.is_tensor(history) else history)
        except NotImplementedError:
            return Report("first_nonfinite", [f"{label}: not written yet (it raised "
                                              f"NotImplementedError)."], len(cases))
        except Exception as e:  # noqa: BLE001 - the learner's error is the message
            problems.append(f"{label}: raised {explain(e)}")
            continue
        typed = _type_problem(got, want, label)
        if typed:
            problems.append(typed)
        elif want is not None:
            problems += [p + (" (an index counts from 0)" if abs(got - want) == 1 else "")
                         for p in compare(got, want, where=f"{label}: the index")]
    return Report("first_nonfinite", problems, len(cases))


# -- 11.safe_xent ---------------------------------------------------------------------------------
def _reference_xent(logits, labels):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def safe_xent(fn, bad_batch=None):
    rng = np.random.default_rng(110)
    ordinary = tf.constant(rng.normal(0, 2, (32, 10)), tf.float32)
    labels = tf.constant(rng.integers(0, 10, 32), tf.int32)
    cases = {
        "ordinary logits (32 x 10)": (ordinary, labels),
        "logits spread over hundreds (a 0-255 batch: exp underflows)": (150.0 * ordinary, labels),
        "a logit 2000 below the largest, and rows of equal logits": (
            tf.constant([[0.0, -1000.0, 1000.0], [5.0, 5.0, 5.0], [-1000.0, 0.0, 1000.0]]),
            tf.constant([1, 2, 2])),
        "all logits equal and huge (1e4)": (tf.fill([2, 4], 1e4), tf.constant([3, 0])),
        "one example, 1000 classes, int64 label": (
            tf.constant(rng.normal(0, 30, (1, 1000)), tf.float32), tf.constant([7], tf.int64)),
    }
    if bad_batch is not None:
        shapes = (None if not isinstance(bad_batch, (tuple, list)) or len(bad_batch) != 2
                  else [np.shape(t) for t in bad_batch])
        if shapes is None or len(shapes[0]) != 2 or shapes[1] != shapes[0][:1]:
            raise ContextError("bad_batch must be (logits, labels): logits of shape [N, classes] "
                               "and labels of shape [N], e.g. the notebook's (bad_logits, bad_labels)")
        cases["the notebook's bad batch of section 1"] = tuple(bad_batch)
    return check_function(fn, _reference_xent, cases, name="safe_log_softmax_xent",
                          differentiable=True, rtol=1e-5, atol=1e-6)


EXERCISES = {"first_nonfinite": first_nonfinite, "safe_xent": safe_xent}
