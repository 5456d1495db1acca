"""Notebook 01, GradientTape: a gradient with a tape, a second derivative with nested tapes,
a NumPy function made differentiable, the diagonal of a Hessian."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function
from ._common import merge


def _f64(values):
    return tf.constant(np.asarray(values, dtype=np.float64))


def _explain_none(report: Report, hint: str) -> Report:
    """Say why a gradient comes back None instead of only "expected a value of shape [4]"."""
    report.problems = [p.split(" is None; expected")[0] + f" is None. {hint}"
                       if " is None; expected" in p else p for p in report.problems]
    return report


def _tensor_problems(fn, case, name):
    """A NumPy array or Python number passes a value comparison; the exercise asks for a tensor."""
    try:
        out = fn(*case)
    except Exception:  # already reported by check_function
        return []
    if isinstance(out, (np.ndarray, np.generic, float, int)):
        return [f"{name} returned a {type(out).__name__}, not a tensor: return what "
                f"tape.gradient gives you (no .numpy()), so it can flow on through TensorFlow."]
    return []


# -- 01.grad_x2_sin -------------------------------------------------------------------------------
def _reference_grad_x2_sin(x):
    return 2 * x * tf.sin(x) + x**2 * tf.cos(x)


def grad_x2_sin(fn):
    cases = {
        "a float64 vector with 0 and a negative point": (_f64([0.0, 0.5, -1.3, 2.0]),),
        "a 0-d float64 tensor, x = 3": (_f64(3.0),),
        "a 2 x 3 float64 matrix (elementwise, shape kept)":
            (_f64([[0.1, -0.7, 1.1], [2.5, -3.0, 4.2]]),),
        "large points, 10 to 30 (where the x**2 cos x term dominates)":
            (_f64([10.0, -17.5, 30.0]),),
    }
    report = _explain_none(
        check_function(fn, _reference_grad_x2_sin, cases, name="grad_x2_sin", rtol=1e-9,
                       atol=1e-12),
        "tape.gradient gives None for a source it did not watch: x is a tensor, so call "
        "tape.watch(x) inside the tape (and return the gradient).")
    report = merge("grad_x2_sin", [report])
    if report.ok:
        report.problems += _tensor_problems(fn, cases["a 0-d float64 tensor, x = 3"], "grad_x2_sin")
    return report


# -- 01.second_derivative_tanh --------------------------------------------------------------------
def _reference_second_derivative_tanh(x):
    t = tf.tanh(x)
    return -2.0 * t * (1.0 - t**2)


def second_derivative_tanh(fn):
    cases = {
        "a float64 vector around 0": (_f64([-2.0, -0.3, 0.0, 0.8, 1.5]),),
        "a 0-d float64 tensor, x = 0.5": (_f64(0.5),),
        "a 2 x 2 float64 matrix (elementwise, shape kept)": (_f64([[0.2, -1.0], [3.0, -0.05]]),),
        "x = 4 to 6, where the value is tiny (compared relatively)": (_f64([4.0, -5.0, 6.0]),),
    }
    report = _explain_none(
        check_function(fn, _reference_second_derivative_tanh, cases,
                       name="second_derivative_tanh", rtol=1e-8, atol=1e-13),
        "The outer tape's gradient is None when it did not record the first derivative: both "
        "tapes must watch x, and inner.gradient(...) must run inside the outer tape's `with` "
        "block.")
    report = merge("second_derivative_tanh", [report])
    if report.ok:
        report.problems += _tensor_problems(fn, cases["a 0-d float64 tensor, x = 0.5"],
                                            "second_derivative_tanh")
    return report


# -- 01.smooth_abs --------------------------------------------------------------------------------
def _reference_smooth_abs(x):
    return x**2 / (tf.sqrt(x**2 + 1.0) + 1.0)     # sqrt(x² + 1) - 1 without the cancellation


def smooth_abs(fn):
    float64 = {
        "a float64 vector with 0 and small points": (_f64([-3.0, -0.5, 0.0, 0.001, 2.0]),),
        "a 0-d float64 tensor, x = -1.5": (_f64(-1.5),),
        "a 2 x 2 float64 matrix (elementwise, shape kept)": (_f64([[0.3, -4.0], [7.0, -0.2]]),),
        "large points, 1e3 to 1e4": (_f64([1e3, -1e4]),),
        "tiny points, 1e-3 and 1e-4 (a tiny value, compared relatively)": (_f64([1e-3, -1e-4]),),
    }
    float32 = {"a float32 vector, as a model would give it (keep the dtype)":
               (tf.constant([-4.0, -0.5, 0.5, 3.0]),)}
    return merge("smooth_abs", [
        check_function(fn, _reference_smooth_abs, float64, name="smooth_abs", rtol=1e-7,
                       atol=1e-12, differentiable=True),
        check_function(fn, _reference_smooth_abs, float32, name="smooth_abs", rtol=1e-5,
                       atol=3e-7, differentiable=True)])


# -- 01.hessian_diagonal --------------------------------------------------------------------------
def _hessian_parts(f, x):
    """(the gradient, the Hessian's diagonal, the Hessian times a vector of ones) of f at x."""
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        g = inner.gradient(y, x)
        entries = [g[i] for i in range(x.shape[0])]   # sliced while the outer tape records
    # the Hessian's rows one by one (outer.jacobian would trace a pfor function on every call)
    diagonal = tf.stack([outer.gradient(g_i, x)[i] for i, g_i in enumerate(entries)])
    row_sums = outer.gradient(g, x)              # what a copy of Ex. 2's nested tapes returns
    del outer
    return g, diagonal, row_sums


def _reference_hessian_diagonal(f, x):
    return _hessian_parts(f, x)[1]


def _hessian_cases():
    rng = np.random.default_rng(11)
    a = rng.normal(size=(4, 4))
    matrix = tf.constant(a + a.T)                                 # symmetric, not diagonal
    features = tf.constant(rng.normal(size=(16, 3)))
    labels = tf.constant(rng.choice([-1.0, 1.0], size=16))

    def sum_tanh(x):
        return tf.reduce_sum(tf.tanh(x))

    def logsumexp(x):
        return tf.reduce_logsumexp(x)

    def quadratic(x):
        return 0.5 * tf.reduce_sum(x * tf.linalg.matvec(matrix, x))

    def square_of_sum(x):
        return tf.reduce_sum(x) ** 2

    def logistic_loss(w):
        return tf.reduce_mean(tf.nn.softplus(-labels * tf.linalg.matvec(features, w)))

    def product(x):
        return x[0] * x[1] ** 2 * tf.sin(x[2])

    return {
        "f = sum(tanh(x)), entry by entry (here the Hessian IS diagonal)":
            (sum_tanh, _f64([-1.5, -0.2, 0.0, 0.7, 2.0])),
        "f = logsumexp(x) (every entry of its Hessian is non-zero)":
            (logsumexp, _f64([0.3, -1.0, 2.0, 0.5])),
        "f = x.A.x / 2 with a symmetric 4 x 4 A (the diagonal is A's)":
            (quadratic, _f64([1.0, -2.0, 0.5, 3.0])),
        "f = (sum of x)**2 (every second derivative is 2)": (square_of_sum, _f64([0.5, -1.0, 2.0])),
        "f = notebook 01's logistic loss of 3 parameters": (logistic_loss, _f64([0.3, -0.2, 0.5])),
        "f = x0 * x1**2 * sin(x2), mixed terms": (product, _f64([1.5, -0.7, 0.9])),
        "a vector of one entry, f = sum(tanh(x))": (sum_tanh, _f64([0.4])),
    }


def hessian_diagonal(fn):
    cases = _hessian_cases()
    report = merge("hessian_diagonal", [
        check_function(fn, _reference_hessian_diagonal, cases, name="hessian_diagonal", rtol=1e-8,
                       atol=1e-10)])
    if report.ok:
        report.problems += _tensor_problems(fn, cases["f = logsumexp(x) (every entry of its "
                                                      "Hessian is non-zero)"], "hessian_diagonal")
        return report
    # name the slips: the Hessian's row sums (Ex. 2 copied), the gradient, the whole Hessian
    for label, (f, x) in cases.items():
        try:
            got = np.asarray(fn(f, x))
        except Exception:  # already reported
            continue
        g, diagonal, row_sums = (t.numpy() for t in _hessian_parts(f, x))
        if got.shape == diagonal.shape and not np.allclose(row_sums, diagonal, rtol=1e-6):
            if np.allclose(got, row_sums, rtol=1e-7, atol=1e-10):
                report.problems.insert(0,
                    f"{label}: yours is the Hessian's row sums, H times a vector of ones: "
                    f"outer.gradient(g, x) differentiates sum(g), so each entry collects d/dx_i of "
                    f"every g_j. That equals the diagonal only when f treats each entry on its own "
                    f"(Ex. 2's tanh); here you need d g_i / d x_i alone: the Jacobian of g, then "
                    f"its diagonal.")
                break
            if np.allclose(got, g, rtol=1e-7, atol=1e-10):
                report.problems.insert(0, f"{label}: yours is the gradient (first derivatives); "
                                       f"differentiate it once more, with a tape around the tape.")
                break
        if got.shape == (x.shape[0], x.shape[0]) and x.shape[0] > 1:
            report.problems.insert(0, f"{label}: yours has the shape of the whole Hessian; return "
                                   f"its diagonal (tf.linalg.diag_part).")
            break
    return report


EXERCISES = {"grad_x2_sin": grad_x2_sin, "second_derivative_tanh": second_derivative_tanh,
             "smooth_abs": smooth_abs, "hessian_diagonal": hessian_diagonal}
