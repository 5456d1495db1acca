"""Notebook 01's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right),
and right answers written in other styles pass."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check


# -- 01.grad_x2_sin -------------------------------------------------------------------------------
def _grad_x2_sin(watch=True, f=lambda x: x**2 * tf.sin(x),
                 out=lambda tape, y, x: tape.gradient(y, x)):
    """A grad_x2_sin, right by default; each argument plants one mistake."""
    def grad_x2_sin(x):
        with tf.GradientTape() as tape:
            if watch:
                tape.watch(x)
            y = f(x)
        return out(tape, y, x)
    return grad_x2_sin


def _grad_via_variable(x):
    v = tf.Variable(x)
    with tf.GradientTape() as tape:
        y = v**2 * tf.sin(v)
    return tape.gradient(y, v)


GRAD_WRONG = {
    "x not watched": (_grad_x2_sin(watch=False), r"is None\. .*tape\.watch\(x\)"),
    "returns y, not the gradient": (_grad_x2_sin(out=lambda tape, y, x: y), r"differs"),
    "sin(x) held constant: only 2x sin x (almost right)": (
        _grad_x2_sin(f=lambda x: x**2 * tf.stop_gradient(tf.sin(x))), r"large points.*differs"),
    "x**2 cos x differentiated instead": (_grad_x2_sin(f=lambda x: x**2 * tf.cos(x)), r"differs"),
    "the Jacobian, not the gradient": (
        _grad_x2_sin(out=lambda tape, y, x: tape.jacobian(y, x)),
        r"has shape \[4, 4\], expected \[4\]"),
    "computed in float32": (
        lambda x: _grad_x2_sin()(tf.cast(x, tf.float32)), r"dtype float32, expected float64"),
    "returns a NumPy array": (
        lambda x: _grad_x2_sin()(x).numpy(), r"returned a (ndarray|float64), not a tensor"),
}


def test_grad_x2_sin_reference_passes():
    for right in (_grad_x2_sin(), _grad_via_variable):
        report = check("01.grad_x2_sin", right)
        assert report.ok, str(report)


@pytest.mark.parametrize("wrong", GRAD_WRONG)
def test_grad_x2_sin_wrong_answers_are_rejected(wrong):
    rejected("01.grad_x2_sin", *GRAD_WRONG[wrong])


# -- 01.second_derivative_tanh --------------------------------------------------------------------
def _second(outer_watches=True, inner_inside=True, f=tf.tanh, out="gradient"):
    """A second_derivative_tanh, right by default; each argument plants one mistake."""
    def second_derivative_tanh(x):
        with tf.GradientTape() as outer:
            if outer_watches:
                outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = f(x)
            if inner_inside:
                dy = inner.gradient(y, x)
        if not inner_inside:
            dy = inner.gradient(y, x)
        if out == "first":
            return dy
        return outer.jacobian(dy, x) if out == "jacobian" else outer.gradient(dy, x)
    return second_derivative_tanh


SECOND_WRONG = {
    "the first derivative": (_second(out="first"), r"differs"),
    "the outer tape does not watch x": (_second(outer_watches=False),
                                        r"is None\. .*both tapes must watch x"),
    "inner gradient taken after the outer tape closed": (_second(inner_inside=False),
                                                         r"is None\. .*inside the outer tape"),
    "the sign flipped (almost right)": (lambda x: -_second()(x), r"differs"),
    "the Jacobian of the first derivative": (_second(out="jacobian"),
                                             r"has shape \[5, 5\], expected \[5\]"),
    "computed in float32": (lambda x: _second()(tf.cast(x, tf.float32)),
                            r"dtype float32, expected float64"),
    "the second derivative of sigmoid": (_second(f=tf.sigmoid), r"differs"),
    "returns a NumPy array": (lambda x: _second()(x).numpy(),
                              r"returned a (ndarray|float64), not a tensor"),
}


def test_second_derivative_reference_passes():
    report = check("01.second_derivative_tanh", _second())
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", SECOND_WRONG)
def test_second_derivative_wrong_answers_are_rejected(wrong):
    rejected("01.second_derivative_tanh", *SECOND_WRONG[wrong])


# -- 01.smooth_abs --------------------------------------------------------------------------------
def smooth_abs_right(x):
    return tf.sqrt(x**2 + 1.0) - 1.0


def smooth_abs_numpy(x):                 # the notebook's starting point
    v = x.numpy()
    return tf.constant(np.sqrt(v**2 + 1.0) - 1.0)


SMOOTH_WRONG = {
    "the NumPy version itself": (smooth_abs_numpy, r"not differentiable"),
    "forgets the - 1 (almost right: the gradient is right)": (
        lambda x: tf.sqrt(x**2 + 1.0), r"the result differs"),
    "the true absolute value": (lambda x: tf.abs(x), r"differs"),
    "one factor of x held constant (values right, gradient half)": (
        lambda x: tf.sqrt(x * tf.stop_gradient(x) + 1.0) - 1.0,
        r"the gradient w\.r\.t\. argument 0 differs"),
    "computed in float32": (lambda x: smooth_abs_right(tf.cast(x, tf.float32)),
                            r"dtype float32, expected float64"),
    "another smooth |x|, log cosh x": (lambda x: tf.math.log(tf.cosh(x)), r"differs"),
    "a float64 constant hard-coded": (lambda x: tf.sqrt(x**2 + tf.constant(1.0, tf.float64)) - 1.0,
                                      r"float32 vector.*raised"),
}


def test_smooth_abs_reference_passes():
    report = check("01.smooth_abs", smooth_abs_right)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", SMOOTH_WRONG)
def test_smooth_abs_wrong_answers_are_rejected(wrong):
    rejected("01.smooth_abs", *SMOOTH_WRONG[wrong])


# -- right answers written in other styles pass -----------------------------------------------------
def _grad_forward_mode(x):
    """Forward mode: a tangent of ones gives the elementwise derivative at once."""
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as acc:
        y = x**2 * tf.sin(x)
    return acc.jvp(y)


def _grad_persistent_keras(x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = keras.ops.multiply(keras.ops.square(x), keras.ops.sin(x))
    return tape.gradient(y, x)


def _second_persistent(x):
    """One persistent tape records its own first gradient: no nesting needed."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.tanh(x)
        dy = tape.gradient(y, x)
    return tape.gradient(dy, x)


def _second_forward_over_back(x):
    with tf.autodiff.ForwardAccumulator(x, tf.ones_like(x)) as acc:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.tanh(x)
        dy = tape.gradient(y, x)
    return acc.jvp(dy)


def _second_variable(x):
    v = tf.Variable(x)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = keras.ops.tanh(v)
        dy = inner.gradient(y, v)
    return outer.gradient(dy, v)


GRAD_RIGHT = {"forward mode (ForwardAccumulator)": _grad_forward_mode,
              "a persistent tape and keras.ops": _grad_persistent_keras}
SECOND_RIGHT = {"one persistent tape, its gradient recorded": _second_persistent,
                "forward over backward": _second_forward_over_back,
                "a variable and keras.ops": _second_variable}
SMOOTH_RIGHT = {
    "keras.ops": lambda x: keras.ops.sqrt(keras.ops.square(x) + 1.0) - 1.0,
    "the cancellation-free form": lambda x: x * x / (tf.sqrt(x * x + 1.0) + 1.0),
    "tf.math.expm1 of a log1p (another order)": lambda x: tf.math.expm1(
        0.5 * tf.math.log1p(tf.square(x))),
}


@pytest.mark.parametrize("style", GRAD_RIGHT)
def test_grad_x2_sin_right_answers_in_other_styles_pass(style):
    accepted("01.grad_x2_sin", GRAD_RIGHT[style])


@pytest.mark.parametrize("style", SECOND_RIGHT)
def test_second_derivative_right_answers_in_other_styles_pass(style):
    accepted("01.second_derivative_tanh", SECOND_RIGHT[style])


@pytest.mark.parametrize("style", SMOOTH_RIGHT)
def test_smooth_abs_right_answers_in_other_styles_pass(style):
    accepted("01.smooth_abs", SMOOTH_RIGHT[style])


# -- 01.hessian_diagonal --------------------------------------------------------------------------
def _nested(f, x, persistent=False):
    """(outer tape, gradient g of f at x), g computed while the outer tape records."""
    outer = tf.GradientTape(persistent=persistent)
    with outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        g = inner.gradient(y, x)
    return outer, g


def hessian_diagonal_right(f, x):
    outer, g = _nested(f, x)
    return tf.linalg.diag_part(outer.jacobian(g, x))


def _hessian_loop(f, x):
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        g = inner.gradient(y, x)
        entries = [g[i] for i in range(x.shape[0])]      # sliced while the outer tape records
    return tf.stack([outer.gradient(g_i, x)[i] for i, g_i in enumerate(entries)])


def _hessian_hvp_unit_vectors(f, x):
    out = []
    for i in range(x.shape[0]):
        e = tf.one_hot(i, x.shape[0], dtype=x.dtype)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = f(x)
            g_dot_e = tf.reduce_sum(inner.gradient(y, x) * e)
        out.append(tf.reduce_sum(outer.gradient(g_dot_e, x) * e))     # e . (H e) = H[i, i]
    return tf.stack(out)


def _hessian_forward_over_back(f, x):
    out = []
    for i in range(x.shape[0]):
        with tf.autodiff.ForwardAccumulator(x, tf.one_hot(i, x.shape[0], dtype=x.dtype)) as acc:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = f(x)
            g = tape.gradient(y, x)
        out.append(acc.jvp(g)[i])
    return tf.stack(out)


def _hessian_variable_keras(f, x):
    v = tf.Variable(x)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = f(v)
        g = inner.gradient(y, v)
    return keras.ops.diagonal(outer.jacobian(g, v))


@tf.function
def _hessians_in_a_graph(f, x):
    return tf.linalg.diag_part(tf.hessians(f(x), x)[0])


def _hessian_row_sums(f, x):              # Ex. 2 copied: the gradient of sum(g)
    outer, g = _nested(f, x)
    return outer.gradient(g, x)


def _hessian_full(f, x):
    outer, g = _nested(f, x)
    return outer.jacobian(g, x)


def _hessian_gradient_only(f, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return tape.gradient(y, x)


def _hessian_outer_not_recording(f, x):
    with tf.GradientTape() as inner:
        inner.watch(x)
        y = f(x)
    g = inner.gradient(y, x)
    with tf.GradientTape() as outer:       # opened after g was computed: it saw nothing
        outer.watch(x)
        g = tf.identity(g)
    return tf.linalg.diag_part(outer.jacobian(g, x, unconnected_gradients="zero"))


HESSIAN_RIGHT = {
    "the Jacobian of the gradient, then its diagonal": hessian_diagonal_right,
    "a loop over the entries, one persistent tape": _hessian_loop,
    "Hessian-vector products with unit vectors": _hessian_hvp_unit_vectors,
    "forward over backward, a unit tangent per entry": _hessian_forward_over_back,
    "a tf.Variable and keras.ops.diagonal": _hessian_variable_keras,
    "tf.hessians inside a tf.function": lambda f, x: _hessians_in_a_graph(f, x),
}

HESSIAN_WRONG = {
    "Ex. 2 copied: outer.gradient of the gradient (almost right)": (
        _hessian_row_sums, r"logsumexp.*yours is the Hessian's row sums"),
    "the whole Hessian": (_hessian_full, r"shape of the whole Hessian.*diag_part"),
    "the gradient, not the second derivative": (
        _hessian_gradient_only, r"yours is the gradient \(first derivatives\)"),
    "the outer tape opened after the inner gradient": (
        _hessian_outer_not_recording, r"differs"),
    "tf.hessians in eager mode": (
        lambda f, x: tf.hessians(f(x), x)[0], r"raised RuntimeError.*GradientTape"),
    "the sign flipped": (lambda f, x: -hessian_diagonal_right(f, x), r"-1 times the expected"),
    "returns a NumPy array": (lambda f, x: hessian_diagonal_right(f, x).numpy(),
                              r"returned a ndarray, not a tensor"),
    "computed in float32": (
        lambda f, x: tf.cast(hessian_diagonal_right(f, x), tf.float32),
        r"dtype float32, expected float64"),
}


@pytest.mark.parametrize("style", HESSIAN_RIGHT)
def test_hessian_diagonal_right_answers_pass(style):
    accepted("01.hessian_diagonal", HESSIAN_RIGHT[style])


@pytest.mark.parametrize("wrong", HESSIAN_WRONG)
def test_hessian_diagonal_wrong_answers_are_rejected(wrong):
    rejected("01.hessian_diagonal", *HESSIAN_WRONG[wrong])
