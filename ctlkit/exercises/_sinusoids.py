"""Notebook 14's setting, for its checkers: the 1-40-40-1 ReLU MLP as six explicit tensors,
sinusoid tasks (amplitude, phase, x in [-5, 5]), and how two lists of six weights are compared."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import compare

SHAPES = [(1, 40), (40,), (40, 40), (40,), (40, 1), (1,)]


def forward(params, x):
    """The notebook's functional MLP: kernels (in, out), biases (out,)."""
    w1, b1, w2, b2, w3, b3 = params
    h = tf.nn.relu(tf.matmul(x, w1) + b1[..., None, :])
    h = tf.nn.relu(tf.matmul(h, w2) + b2[..., None, :])
    return tf.matmul(h, w3) + b3[..., None, :]


def mse(params, x, y):
    return tf.reduce_mean(tf.square(forward(params, x) - y), axis=[-2, -1])


def random_params(seed, variables=False):
    """Glorot-uniform kernels and small random biases (so bias gradients are not trivial)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in SHAPES:
        if len(shape) == 2:
            limit = np.sqrt(6.0 / sum(shape))
            value = rng.uniform(-limit, limit, shape)
        else:
            value = rng.normal(0.0, 0.1, shape)
        value = tf.constant(value, tf.float32)
        out.append(tf.Variable(value) if variables else value)
    return out


def sinusoid_task(seed, amplitude, phase, n_support=10, n_query=20):
    """One sinusoid: (x_s, y_s, x_q, y_q), x of shape (n, 1) in [-5, 5]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-5.0, 5.0, (n_support + n_query, 1))
    y = amplitude * np.sin(x - phase)
    t = [tf.constant(v, tf.float32) for v in (x, y)]
    return t[0][:n_support], t[1][:n_support], t[0][n_support:], t[1][n_support:]


def max_abs(values):
    return max(float(tf.reduce_max(tf.abs(v))) for v in values)


def matches(got, want, rtol=1e-3):
    """True when two lists of tensors agree to the checker's tolerance."""
    if want is None or len(got) != len(want):
        return False
    atol = 1e-5 * max(max_abs(want), 1e-12)
    return all(g is not None and g.shape == w.shape and
               np.allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
               for g, w in zip(got, want))


def structure_problems(got, label, what):
    if isinstance(got, (tf.Tensor, np.ndarray)) or not isinstance(got, (list, tuple)):
        return [f"{label}: returned a {type(got).__name__}; expected a list of 6 tensors ({what}), "
                f"in the order of params."]
    if len(got) != len(SHAPES):
        return [f"{label}: returned {len(got)} items; expected 6 ({what}), one per weight, in "
                f"the order of params (a (loss, grads) pair? return the list only)."]
    for k, (g, shape) in enumerate(zip(got, SHAPES)):
        if g is None:
            return [f"{label}: item {k} is None (was every weight watched, and does the loss "
                    f"depend on it through TensorFlow ops?)."]
        if tuple(np.shape(g)) != shape:
            return [f"{label}: item {k} has shape {list(np.shape(g))}, expected {list(shape)} "
                    f"(the shape of params[{k}])."]
    return []


def changed(variables, before):
    return [k for k, (v, b) in enumerate(zip(variables, before))
            if isinstance(v, tf.Variable) and not np.array_equal(v.numpy(), b)]


def compare_lists(got, want, where, scale):
    problems = []
    atol = 1e-5 * max(scale, 1e-12)
    for k, (g, w) in enumerate(zip(got, want)):
        problems += compare(tf.convert_to_tensor(g), w, where=f"{where}, item {k}", rtol=1e-3,
                            atol=atol)
        if problems:
            break
    return problems
