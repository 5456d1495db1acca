"""Gradient statistics that work eagerly and inside ``tf.function``.

    grads = tape.gradient(loss, model.trainable_variables)
    gnorm = ctlkit.grads.global_norm(grads)                       # one scalar tensor
    per_layer = ctlkit.grads.layer_norms(grads, model.trainable_variables)  # {layer: norm}
    ok = ctlkit.grads.all_finite(grads)                           # scalar bool tensor

Every function also takes the (gradient, variable) pairs that ``apply_gradients`` takes,
``zip(grads, variables)``, and then uses only the gradient of each pair (``layer_norms`` and
``none_gradients`` take their variables from the pairs). A variable where a gradient belongs,
or a (variable, gradient) pair, is refused: its weights would be counted as a gradient.

``None`` gradients (variables the loss does not touch) are skipped, and
``tf.IndexedSlices`` (from embeddings) are handled by their values. NumPy arrays and Python
numbers are accepted as gradients too (Python floats become float64, as in NumPy).
"""
from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

_WIDE = (tf.float64, tf.complex128, tf.int64, tf.uint64)   # these give a float64 norm


def is_variable(x) -> bool:
    """Whether ``x`` is a ``tf.Variable`` or a Keras 3 variable (``keras.Variable``)."""
    keras = sys.modules.get("keras")          # no Keras variable can exist before keras is imported
    keras_variable = getattr(keras, "Variable", None)
    return isinstance(x, tf.Variable) or (keras_variable is not None
                                          and isinstance(x, keras_variable))


def _path(variable) -> str:
    return getattr(variable, "path", None) or variable.name


def _is_pair(x) -> bool:
    return isinstance(x, (tuple, list)) and len(x) == 2 and is_variable(x[1])


def _check_list(items, name="grads"):
    if (isinstance(items, (tf.Tensor, tf.Variable, tf.IndexedSlices, np.ndarray, str, bytes,
                           dict, set, frozenset))
            or is_variable(items) or not hasattr(items, "__iter__")):
        want = ("a list of gradients (what tape.gradient returns for a list of variables)"
                if name == "grads" else "a list of variables (model.trainable_variables)")
        raise TypeError(f"{name} must be {want}, got {type(items).__name__}; wrap a single "
                        f"one as [x], and use a list, not a set, so the order is kept")
    items = list(items)
    if not items:
        what = ("tape.gradient(loss, model.trainable_variables)" if name == "grads"
                else "model.trainable_variables")
        raise ValueError(f"{name} is empty: pass {what} for a model that has been built")
    return items


def _check_lengths(grads, variables):
    if len(grads) != len(variables):
        raise ValueError(f"grads has {len(grads)} entries but variables has {len(variables)}; "
                         f"pass the same list you gave to tape.gradient")


def _unpair(grads, variables=None):
    """(list of gradients, list of variables or None) from bare gradients or from pairs."""
    items = _check_list(grads)
    pairs = [_is_pair(x) for x in items]
    if not any(pairs):
        return items, variables
    if not all(pairs):
        raise ValueError(f"grads mixes (gradient, variable) pairs with bare gradients "
                         f"(grads[{pairs.index(False)}] is not a pair): pass either "
                         f"zip(grads, variables) or the list of gradients alone")
    paired = [v for _, v in items]
    if variables is not None:
        variables = _check_list(variables, "variables")
        _check_lengths(items, variables)
        for i, (a, b) in enumerate(zip(paired, variables)):
            if a is not b:
                raise ValueError(f"grads[{i}] is paired with {_path(a)} but variables[{i}] is "
                                 f"{_path(b)}: pass the pairs alone, without variables")
    return [g for g, _ in items], paired


def _tensor(g, i):
    """The values of gradient ``i`` as a tensor of numbers, or a clear error."""
    if is_variable(g):
        raise TypeError(f"grads[{i}] is the variable {_path(g)}, not a gradient: pass "
                        f"tape.gradient(loss, variables) (or zip(grads, variables)), not the "
                        f"variables themselves")
    if isinstance(g, (tuple, list)) and len(g) == 2 and is_variable(g[0]):
        raise TypeError(f"grads[{i}] is a (variable, gradient) pair; apply_gradients pairs are "
                        f"(gradient, variable): pass zip(grads, variables)")
    g = g.values if isinstance(g, tf.IndexedSlices) else g
    if not tf.is_tensor(g):
        try:
            g = tf.convert_to_tensor(np.asarray(g))
        except (TypeError, ValueError) as e:
            raise TypeError(f"grads[{i}] ({type(g).__name__}) is not a tensor of numbers ({e}); "
                            f"pass the gradients tape.gradient returns") from None
    if not (g.dtype.is_floating or g.dtype.is_complex or g.dtype.is_integer):
        raise TypeError(f"grads[{i}] has dtype {g.dtype.name}; a gradient holds floating-point "
                        f"numbers: pass the gradients tape.gradient returns")
    return g


def _present(grads):
    """[(index, tensor)] for the gradients that are not None."""
    return [(i, _tensor(g, i)) for i, g in enumerate(grads) if g is not None]


def _norm_dtype(tensors):
    return tf.float64 if any(t.dtype in _WIDE for t in tensors) else tf.float32


def _power_of_two_at_most(m):
    """The largest power of two <= m (m positive, finite): its exponent bits, mantissa zeroed.

    Dividing by a power of two is exact, so the scaled norm below has the same digits as the
    unscaled one wherever that one does not overflow or underflow.
    """
    int_type, exponent_bits = ((tf.int32, 0x7F800000) if m.dtype == tf.float32
                               else (tf.int64, 0x7FF0000000000000))
    bits = tf.bitwise.bitwise_and(tf.bitcast(m, int_type), tf.constant(exponent_bits, int_type))
    return tf.maximum(tf.bitcast(bits, m.dtype), np.finfo(m.dtype.as_numpy_dtype).tiny)


def _norm(tensors, dtype):
    """sqrt(sum of |x|**2) over all entries, in ``dtype``, scaled so the squares cannot overflow."""
    wide_complex = tf.complex128 if dtype == tf.float64 else tf.complex64
    mags = [tf.cast(tf.abs(tf.cast(t, wide_complex)) if t.dtype.is_complex
                    else tf.abs(tf.cast(t, dtype)), dtype) for t in tensors]
    biggest = tf.reduce_max(tf.stack([tf.reduce_max(m) for m in mags]))  # -inf for empty ones
    ok = tf.math.is_finite(biggest) & (biggest > 0)
    one = tf.ones((), dtype)
    scale = tf.where(ok, _power_of_two_at_most(tf.where(ok, biggest, one)), one)
    total = tf.add_n([tf.reduce_sum(tf.square(m / scale)) for m in mags])
    return scale * tf.sqrt(total)   # NaN in, NaN out; Inf in, Inf out


def global_norm(grads) -> tf.Tensor:
    """sqrt(sum of squares of every gradient entry): the norm clip_by_global_norm uses.

    Returns a scalar float32 tensor, or float64 when any gradient is 64-bit (float64,
    complex128, int64): float16 / bfloat16 gradients are measured in float32. The squares
    are scaled, so a norm the dtype can hold (1e200 in float64, 1e20 in float32) is returned
    instead of an overflowed inf; complex gradients count |x|**2. NaN or Inf in, NaN or Inf out.
    """
    grads, _ = _unpair(grads)
    present = [t for _, t in _present(grads)]
    if not present:
        return tf.constant(0.0)
    return _norm(present, _norm_dtype(present))


def layer_name(variable) -> str:
    """The name of the layer a variable belongs to: 'dense_1/kernel' -> 'dense_1'."""
    if not is_variable(variable):
        raise TypeError(f"variable must be a variable (one of model.trainable_variables), got "
                        f"{type(variable).__name__}")
    path = _path(variable).split(":")[0]
    return path.rsplit("/", 1)[0] if "/" in path else path


def _gradient_shape(g, t) -> tf.TensorShape:
    """The static shape of the variable gradient ``g`` is for; unknown dimensions are None."""
    if not isinstance(g, tf.IndexedSlices):
        return t.shape
    dense = None if g.dense_shape is None else tf.get_static_value(g.dense_shape)
    if dense is not None:
        return tf.TensorShape([int(d) for d in dense])
    return tf.TensorShape([None]).concatenate(t.shape[1:])   # values: [rows, *variable.shape[1:]]


def _matched(grads, variables, caller):
    """Gradients and variables checked entry by entry: same length, variables, same shapes."""
    grads, variables = _unpair(grads, variables)
    if variables is None:
        raise TypeError(f"{caller} needs the variables: pass {caller}(grads, "
                        f"model.trainable_variables), or the pairs zip(grads, variables)")
    variables = _check_list(variables, "variables")
    _check_lengths(grads, variables)
    for i, v in enumerate(variables):
        if not is_variable(v):
            raise TypeError(f"variables[{i}] must be a variable (model.trainable_variables), "
                            f"got {type(v).__name__}")
    present = _present(grads)
    for i, t in present:
        got, want = _gradient_shape(grads[i], t), tf.TensorShape(variables[i].shape)
        if not got.is_compatible_with(want):
            raise ValueError(f"grads[{i}] has shape {got.as_list()} but variables[{i}] "
                             f"({_path(variables[i])}) has shape "
                             f"{want.as_list()}: pass the gradients in the order of the variables "
                             f"they came from (tape.gradient(loss, variables), same list)")
    return present, variables


def layer_norms(grads, variables=None) -> dict:
    """{layer name: norm of all its gradients} in the order layers first appear.

    ``variables`` is the list given to ``tape.gradient`` (or leave it out and pass
    ``zip(grads, variables)``); each gradient's shape must match its variable's. Layers without
    any gradient are left out; the norms have global_norm's dtype and overflow protection.
    """
    present, variables = _matched(grads, variables, "layer_norms")
    groups: dict = {}
    for i, t in present:
        groups.setdefault(layer_name(variables[i]), []).append(t)
    dtype = _norm_dtype([t for _, t in present])
    return {name: _norm(ts, dtype) for name, ts in groups.items()}


def all_finite(grads) -> tf.Tensor:
    """A scalar bool tensor: True when no gradient holds a NaN or an Inf.

    Each gradient is checked in its own dtype (a float64 1e300 is finite), complex ones in both
    their real and imaginary parts; integer gradients are always finite.
    """
    grads, _ = _unpair(grads)
    checks = []
    for _, t in _present(grads):
        if t.dtype.is_complex:
            t = tf.stack([tf.math.real(t), tf.math.imag(t)])
        if t.dtype.is_floating:
            checks.append(tf.reduce_all(tf.math.is_finite(t)))
    if not checks:
        return tf.constant(True)
    return tf.reduce_all(tf.stack(checks))


def none_gradients(grads, variables=None) -> list:
    """Paths of the variables whose gradient is None (the loss does not depend on them)."""
    present, variables = _matched(grads, variables, "none_gradients")
    touched = {i for i, _ in present}
    return [_path(v) for i, v in enumerate(variables) if i not in touched]
