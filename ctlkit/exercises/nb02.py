"""Notebook 02, tf.function: one trace for any batch size, a Huber loss without a Python `if`."""
from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function, check_traces, explain
from ._common import merge


# -- 02.standardizer ------------------------------------------------------------------------------
def _reference_standardize_rows(x):           # notebook 02's standardize_rows
    mean = tf.reduce_mean(x, axis=1, keepdims=True)
    return (x - mean) / (tf.math.reduce_std(x, axis=1, keepdims=True) + 1e-6)


def _rows(n, seed, scale=1.0):
    return tf.constant(np.random.default_rng(seed).normal(size=(n, 8)) * scale, tf.float32)


def standardizer(factory):
    name = "make_standardizer"
    try:
        fn = factory()
    except NotImplementedError:
        return Report(name, [f"{name}: not written yet (it raised NotImplementedError)."], 1)
    except Exception as e:  # the learner's error is the message
        return Report(name, [f"{name}() raised {explain(e)}"], 1)
    if isinstance(fn, tf.Tensor) or not callable(fn):
        return Report(name, [f"{name}() returned {type(fn).__name__}, not a function: return the "
                             f"compiled function itself, e.g. `return tf.function(...)`."], 1)
    if not hasattr(fn, "experimental_get_tracing_count"):
        return Report(name, [f"{name}() returned a plain Python function: wrap standardize_rows "
                             f"with tf.function(...) (and give it an input_signature)."], 1)
    sizes = {"a batch of 32": _rows(32, 20), "a batch of 5": _rows(5, 21),
             "a batch of 17": _rows(17, 22), "a batch of 1": _rows(1, 23),
             "a batch of 64": _rows(64, 24)}
    scales = tf.constant([[1e3], [1.0], [1e-3], [1e-5]], tf.float32)   # a row per scale
    values = {**sizes,
              "rows of very different scale (1e3 to 1e-5)": (_rows(4, 25) * scales,),
              "a row of equal values (standard deviation 0)": (tf.fill([2, 8], 3.0),)}
    report = check_function(fn, _reference_standardize_rows, values, name=name, rtol=1e-5,
                            atol=1e-6)
    refused = [p for p in report.problems if "Binding inputs to tf.function failed" in p]
    if refused:                         # one sentence, not one long TensorFlow error per batch
        spec = re.search(r"to TensorSpec\(shape=(\([^)]*\)), dtype=tf\.(\w+)", refused[0])
        wanted = f" (shape {spec[1]}, {spec[2]})" if spec else ""
        more = f" (and {len(refused) - 1} more cases)" if len(refused) > 1 else ""
        report.problems = [p for p in report.problems if p not in refused] + [
            f"your input_signature{wanted} refused {refused[0].split(':')[0]}{more}: use "
            f"tf.TensorSpec([None, 8], tf.float32), None for the batch axis."]
    if not report.ok:
        return merge(name, [report])
    traces = check_traces(factory(), sizes, max_traces=1, name=name)
    if not traces.ok:
        traces.problems = [p + " (reduce_retracing=True alone traces twice: the second trace "
                               "relaxes the batch axis.)" if "traced" in p else p
                           for p in traces.problems]
    return Report(name, traces.problems, report.cases + traces.cases)


# -- 02.huber -------------------------------------------------------------------------------------
def _reference_huber(err, delta=1.0):
    small = tf.abs(err) <= delta
    return tf.where(small, 0.5 * tf.square(err), delta * (tf.abs(err) - 0.5 * delta))


def _graph_error(e: tf.errors.OpError) -> tf.errors.OpError:
    """The same error with only its own message: a graph's run-time error starts with "Graph
    execution error", "Detected at node ..." and "<stack traces unavailable>" lines."""
    lines = [ln.strip() for ln in (e.message or "").splitlines()]
    keep = [ln for ln in lines if ln and not ln.startswith(
        ("Graph execution error", "Detected at node", "<stack traces", "[[", "File "))]
    message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", keep[0] if keep else str(e))
    message = re.sub(r"\s*\[Op:[^\]]*\]$", "", message)
    if "must be a scalar" in message:
        message += (" (tf.cond picks one branch for the whole tensor: use tf.where to choose "
                    "element by element)")
    return type(e)(e.node_def, e.op, message)


def _in_a_graph_without_autograph(fn, delta):
    """``fn(err, delta)`` compiled as Keras compiles a loss it calls: AutoGraph cannot help.
    A NumPy call on a symbolic tensor raises NotImplementedError, which would read as "not
    written yet": say what it is."""
    def call(err):
        try:
            return fn(err) if delta is None else fn(err, delta)
        except NotImplementedError as e:
            if str(e):
                raise TypeError(f"NumPy cannot run inside a graph ({e}); use tensor ops "
                                f"(tf.abs, tf.where)") from None
            raise
    compiled = tf.function(call, autograph=False)

    def run(err):
        try:
            return compiled(err)
        except tf.errors.OpError as e:
            raise _graph_error(e) from None
    return run


def huber(fn):
    errors = {
        "errors on both sides of delta, with 0 and +-delta": (
            tf.constant([-3.0, -1.0, -0.4, 0.0, 0.7, 1.0, 2.5]),),
        "a 0-d error, 0.3": (tf.constant(0.3),),
        "a 0-d error, -4 (the linear branch)": (tf.constant(-4.0),),
        "a 2 x 3 batch of errors": (tf.constant([[4.0, -0.1, 1.2], [-0.9, 10.0, -2.0]]),),
        "large errors, 1e4 (linear, not squared)": (tf.constant([1e4, -2e4]),),
        "tiny errors, 1e-4 (compared relatively)": (tf.constant([1e-4, -3e-4]),),
        "float64 errors (keep the dtype)": (tf.constant([-2.0, 0.5, 1.5], tf.float64),),
    }
    reports = [check_function(_in_a_graph_without_autograph(fn, None), _reference_huber, errors,
                              name="huber", rtol=1e-6, atol=1e-12, differentiable=True)]
    if reports[0].ok:                                  # then other deltas than the default
        for delta in (0.5, 2.5):
            cases = {f"delta = {delta}, errors on both sides": (
                tf.constant([-3.0 * delta, -0.5 * delta, 0.2, 0.9 * delta, 1.7 * delta]),)}
            reports.append(check_function(_in_a_graph_without_autograph(fn, delta),
                                          lambda e, d=delta: _reference_huber(e, d), cases,
                                          name="huber", rtol=1e-6, atol=1e-12,
                                          differentiable=True))
    return merge("huber", reports)


EXERCISES = {"standardizer": standardizer, "huber": huber}
