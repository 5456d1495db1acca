"""Notebook 01's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected


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
