"""Gradient statistics that work eagerly and inside ``tf.function``.

    grads = tape.gradient(loss, model.trainable_variables)
    gnorm = ctlkit.grads.global_norm(grads)                       # one scalar tensor
    per_layer = ctlkit.grads.layer_norms(grads, model.trainable_variables)  # {layer: norm}
    ok = ctlkit.grads.all_finite(grads)                           # scalar bool tensor

``None`` gradients (variables the loss does not touch) are skipped, and
``tf.IndexedSlices`` (from embeddings) are handled by their values.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf


def _values(g):
    return g.values if isinstance(g, tf.IndexedSlices) else g


def _check_list(grads, name="grads"):
    if (isinstance(grads, (tf.Tensor, tf.Variable, np.ndarray, str, bytes, dict))
            or not hasattr(grads, "__iter__")):
        raise TypeError(f"{name} must be a list of gradients (what tape.gradient returns for a "
                        f"list of variables), got {type(grads).__name__}; wrap a single "
                        f"tensor as [g]")
    grads = list(grads)
    if not grads:
        raise ValueError(f"{name} is empty: pass tape.gradient(loss, model.trainable_variables) "
                         f"for a model that has been built")
    return grads


def global_norm(grads) -> tf.Tensor:
    """sqrt(sum of squares of every gradient entry): the norm clip_by_global_norm uses."""
    present = [tf.cast(_values(g), tf.float32) for g in _check_list(grads) if g is not None]
    if not present:
        return tf.constant(0.0)
    return tf.linalg.global_norm(present)


def layer_name(variable) -> str:
    """The name of the layer a variable belongs to: 'dense_1/kernel' -> 'dense_1'."""
    path = getattr(variable, "path", None) or variable.name
    path = path.split(":")[0]
    return path.rsplit("/", 1)[0] if "/" in path else path


def layer_norms(grads, variables) -> dict:
    """{layer name: norm of all its gradients} in the order layers first appear."""
    grads = _check_list(grads)
    variables = _check_list(variables, "variables")
    if len(grads) != len(variables):
        raise ValueError(f"grads has {len(grads)} entries but variables has {len(variables)}; "
                         f"pass the same list you gave to tape.gradient")
    groups: dict = {}
    for g, v in zip(grads, variables):
        if g is not None:
            groups.setdefault(layer_name(v), []).append(tf.cast(_values(g), tf.float32))
    return {name: tf.linalg.global_norm(gs) for name, gs in groups.items()}


def all_finite(grads) -> tf.Tensor:
    """A scalar bool tensor: True when no gradient holds a NaN or an Inf."""
    checks = [tf.reduce_all(tf.math.is_finite(tf.cast(_values(g), tf.float32)))
              for g in _check_list(grads) if g is not None]
    if not checks:
        return tf.constant(True)
    return tf.reduce_all(tf.stack(checks))


def none_gradients(grads, variables) -> list:
    """Names of the variables whose gradient is None (the loss does not depend on them)."""
    grads, variables = _check_list(grads), _check_list(variables, "variables")
    if len(grads) != len(variables):
        raise ValueError(f"grads has {len(grads)} entries but variables has {len(variables)}")
    return [getattr(v, "path", v.name) for g, v in zip(grads, variables) if g is None]
