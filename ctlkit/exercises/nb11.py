"""Notebook 11, debugging: where a history turns non-finite, a cross-entropy that survives, and the
same lesson moved to sigmoid outputs (a binary cross-entropy from logits)."""
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
        except Exception as e:  # the learner's error is the message
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
    report = check_function(fn, _reference_xent, cases, name="safe_log_softmax_xent",
                            differentiable=True, rtol=1e-5, atol=1e-6)
    if not report.ok and not any("not written yet" in p for p in report.problems):
        hint = _cancellation(fn, cases, _reference_xent, lambda args: tf.abs(args[0]))
        if hint:
            report.problems.insert(0, hint)
    return report


def _cancellation(fn, cases, reference, scale):
    """A sentence when the only wrong values are off by a few float32 roundings of the inputs'
    own size (``scale(args)``, per entry or per row): the formula subtracts two large, nearly
    equal numbers (e.g. logsumexp(z) - z_y at logits of 1e4), which float32 cannot do exactly."""
    lost = []
    for label, args in cases.items():
        try:
            got = np.asarray(fn(*args), np.float64)
            want = np.asarray(reference(*args), np.float64)
            size = np.asarray(scale(args), np.float64)       # per entry, or per row of logits
            size = size.max(axis=tuple(range(want.ndim, size.ndim))) if size.ndim > want.ndim else size
            rounding = np.spacing(np.broadcast_to(size, want.shape).astype(np.float32)).astype(np.float64)
        except Exception:  # the case messages report errors
            return None
        if got.shape != want.shape or not np.all(np.isfinite(got)):
            return None
        off = ~np.isclose(got, want, rtol=1e-5, atol=1e-6)
        if not off.any():
            continue
        if np.all(np.abs(got - want)[off] <= 16 * rounding[off]):
            lost.append(label)
        else:
            return None
    if not lost:
        return None
    return (f"{lost[0]}: your values are off by a few float32 roundings of the inputs' size: "
            f"cancellation. Your formula subtracts two large, nearly equal numbers (such as "
            f"logsumexp(z) - z_y, or adding the max back and subtracting z_y), and float32 keeps "
            f"only about 7 significant digits of each. Subtract the max from every logit first and "
            f"combine only the shifted values: (z_y - max) - log(sum(exp(z - max))).")


# -- 11.stable_bce --------------------------------------------------------------------------------
def _reference_bce(logits, labels):
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)


def _bce_cases():
    rng = np.random.default_rng(111)
    ordinary = rng.normal(0, 2, (16, 3))
    ordinary[np.abs(ordinary) < 0.05] = 0.5        # not at 0, where |z| and max(z, 0) have a kink
    soft = np.clip(rng.uniform(0, 1, (16, 3)), 0.05, 0.95)
    f32 = lambda a: tf.constant(a, tf.float32)     # noqa: E731
    return {
        "ordinary logits, 0/1 labels (16 x 3)": (f32(ordinary), f32(rng.integers(0, 2, (16, 3)))),
        "ordinary logits, soft labels in (0, 1)": (f32(ordinary), f32(soft)),
        "logits of +-200 (sigmoid rounds to exactly 0 or 1), labels 0, 1 and 0.3": (
            f32([[200.0, -200.0, 200.0, -200.0, 150.0, -150.0]]),
            f32([[1.0, 0.0, 0.0, 1.0, 0.3, 0.3]])),
        "logits of +-20 (1 - sigmoid(20) rounds to 0 in float32), both labels": (
            f32([[20.0, -20.0, 20.0, -20.0, 17.0, -17.0]]), f32([[1.0, 0.0, 0.0, 1.0, 0.0, 1.0]])),
        "logits up to 5000 in a column of 4, label smoothing 0.1 / 0.9": (
            f32([[5000.0], [-5000.0], [40.0], [-0.7]]), f32([[0.9], [0.1], [0.9], [0.1]])),
        "a single logit of shape [1], label 1": (f32([3.25]), f32([1.0])),
    }


def _bce_slips():
    """(sentence, wrong formula) for the slips a copy of the notebook's cells makes."""
    sig = tf.math.sigmoid
    return [
        ("you took log(sigmoid(z)) and log(1 - sigmoid(z)) by hand: in float32 sigmoid(z) rounds to "
         "exactly 1 from z of about 17 and to 0 below about -88, and log(0) is -inf, as section 1 "
         "found for softmax. Write the loss with softplus (log(1 + exp(z)), computed stably) or "
         "max(z, 0) - z * y + log(1 + exp(-|z|))",
         lambda z, y: -(y * tf.math.log(sig(z)) + (1 - y) * tf.math.log(1 - sig(z)))),
        ("you added an epsilon inside the logs: that keeps the loss finite, but caps it (at about "
         "-log(eps)) where the true loss is far larger, and it still differs from the exact loss",
         lambda z, y: -(y * tf.math.log(sig(z) + 1e-7) + (1 - y) * tf.math.log(1 - sig(z) + 1e-7))),
        ("your loss ignores soft labels: y * (loss if 1) + (1 - y) * (loss if 0) is linear in y, so "
         "compute it for the label as given, not for a rounded or thresholded one",
         lambda z, y: _reference_bce(z, tf.round(y))),
        ("your result is the mean over the batch: the exercise asks for one loss per entry, shaped "
         "like the logits", lambda z, y: tf.reduce_mean(_reference_bce(z, y))),
        ("you used log(1 + exp(z)) as written: exp(z) overflows to inf from z of about 89. "
         "tf.nn.softplus (or max(z, 0) + log1p(exp(-|z|))) computes the same without overflow",
         lambda z, y: tf.math.log(1 + tf.exp(z)) - z * y),
    ]


def stable_bce(fn):
    cases = _bce_cases()
    report = check_function(fn, _reference_bce, cases, name="stable_bce", differentiable=True,
                            rtol=1e-5, atol=1e-6)
    if report.ok or any("not written yet" in p for p in report.problems):
        return report
    problems = list(report.problems)
    for sentence, slip in _bce_slips():
        try:
            same = all(_same(fn(*args), slip(*args)) for args in cases.values())
        except Exception:  # the case messages report errors
            same = False
        if same:
            problems.insert(0, sentence + ".")
            break
    else:
        hint = _cancellation(fn, cases, _reference_bce, lambda args: tf.abs(args[0]))
        if hint:
            problems.insert(0, hint.replace(
                "Subtract the max from every logit first and combine only the shifted values: "
                "(z_y - max) - log(sum(exp(z - max))).",
                "Write the loss so that no step subtracts two large numbers: max(z, 0) - z * y + "
                "log1p(exp(-|z|)) keeps the small term separate."))
    return Report(name=report.name, problems=problems[:6], cases=report.cases)


def _same(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))


EXERCISES = {"first_nonfinite": first_nonfinite, "safe_xent": safe_xent, "stable_bce": stable_bce}
