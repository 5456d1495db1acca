"""What ``monitor.log()`` accepts and how buffered values become floats.

A logged value may be a Python or NumPy number, a scalar tensor or a variable (copied when
logged, since it changes afterwards). Each type is classified once (``_kind``); the first value
under each key is converted at once so a wrong shape or kind fails at the ``log()`` call that
passed it (``admit``); the rest are converted in one batch per key at a redraw (``_to_floats``),
where a value that cannot be read becomes NaN and is named, and every other value is kept.
"""
from __future__ import annotations

import math
import numbers
import operator
import sys

import numpy as np


class NonFiniteError(FloatingPointError):
    """A logged loss, gradient norm or end-of-epoch value was NaN or Inf."""

    def __init__(self, key, step, value):
        self.key, self.step, self.value = key, step, value
        super().__init__(f"non-finite {key} ({value}) first seen at step {step}")


# -- what a logged value may be ----------------------------------------------------------------
_TRACED = ("{key} is a symbolic tensor: monitor.log() was called inside a tf.function, where "
           "it runs once, while tracing, and never again. Return {key} from the step function "
           "and call monitor.log() on what it returns, outside it.")
# Caches, not constants: each grows as _kind() meets a new type, so log()'s fast path is a set lookup.
_KINDS = {}          # type -> "none", "number", "tensor", "array", "variable", "symbolic", "bad"
plain_types_seen = {type(None), float, int, bool}   # types log() may buffer as they are
_NUMBERS = {type(None), float, int, bool}           # ... of which NumPy converts a list in one call
variable_types_seen = set()   # types log() reads at once (a variable changes after the call)
_BAD = (str, bytes, bytearray, complex, np.complexfloating, list, tuple, dict, set, frozenset)


def _kind(t) -> str:
    """What log() does with a value of type ``t``, decided once per type."""
    kind = _KINDS.get(t)
    if kind is None:
        if t is type(None):
            kind = "none"
        elif issubclass(t, _BAD):
            kind = "bad"
        elif issubclass(t, (numbers.Real, np.number, np.bool_)):
            kind = "number"                      # immutable: buffered as it is
        elif issubclass(t, np.ndarray):
            kind = "array"                       # may be changed in place later: read now
        elif hasattr(t, "numpy"):                # tf.Tensor, tf.Variable, keras.Variable
            kind = "variable" if hasattr(t, "assign") else "tensor"
        elif hasattr(t, "graph") or t.__name__ in ("SymbolicTensor", "KerasTensor"):
            kind = "symbolic"
        elif hasattr(t, "__array__") or hasattr(t, "__float__"):
            kind = "tensor"                      # another library's scalar: read at a redraw
        else:
            kind = "bad"
        _KINDS[t] = kind
        if kind in ("number", "tensor"):
            plain_types_seen.add(t)
        if kind == "number":
            _NUMBERS.add(t)
        if kind == "variable":
            variable_types_seen.add(t)
    return kind


def read_variables(scalars: dict) -> dict:
    """``scalars`` with each variable (a type ``admit`` has seen) replaced by its value now, a
    tensor: log()'s fast path for ``learning_rate=optimizer.learning_rate``, one read a step."""
    import tensorflow as tf  # a variable exists, so TF is loaded

    return {k: tf.convert_to_tensor(v) if type(v) in variable_types_seen else v
            for k, v in scalars.items()}


def admit(key, v, now: bool):
    """``v`` as log() buffers it: checked, a copy if it may change, a float if ``now``."""
    kind = _kind(type(v))
    if kind == "none":
        return None
    if kind == "symbolic":
        raise TypeError(_TRACED.format(key=key))
    if kind == "bad":
        raise TypeError(f"{key} must be a number or a scalar tensor, got {type(v).__name__} "
                        f"{v!r:.60}; log one scalar per key (a mean, a norm, float(...))")
    if kind == "variable":
        import tensorflow as tf  # a variable exists, so TF is loaded

        v = tf.convert_to_tensor(v)              # its value now, not at the next redraw
        if not hasattr(v, "numpy"):
            raise TypeError(_TRACED.format(key=key))
    return _to_float(v, key) if now or kind == "array" else v


def _to_float(v, key="value") -> float:
    """One scalar (tensor, NumPy or Python number) as a float; errors name ``key``."""
    if hasattr(v, "numpy"):
        try:
            v = v.numpy()  # about a microsecond for a scalar already on the host
        except NotImplementedError as e:         # a graph tensor or variable: traced
            raise TypeError(_TRACED.format(key=key)) from e
    if isinstance(v, (float, int, np.floating, np.integer)):
        return float(v)
    try:
        a = np.asarray(v)
    except Exception as e:
        raise TypeError(f"{key} could not be read as a number: {e}") from e
    if a.dtype == object and a.ndim == 0 and hasattr(v, "__float__"):  # Decimal, Fraction
        return float(v)
    if a.dtype.kind not in "biuf" and "float" not in a.dtype.name:  # "float": bfloat16, float8
        raise TypeError(f"{key} must be a real number, got {a.dtype.name} {v!r:.60}")
    if a.size != 1:
        raise ValueError(f"{key} must be a scalar, got shape {list(a.shape)}; log a mean "
                         f"(e.g. tf.reduce_mean of a per-sample loss) or a norm")
    return float(a.reshape(()).astype(np.float64))


def _to_floats(values, key, steps):
    """Floats for the buffered values of one key (None: not logged at that step). Returns
    (floats, unread, problem): a value that cannot be read becomes NaN, its index is in
    ``unread`` and ``problem`` names the first such value (key and step)."""
    try:  # fast paths: one NumPy call for numbers (None -> NaN), or one read per tensor
        if _NUMBERS.issuperset(map(type, values)):
            a = np.array(values, dtype=np.float64)
        else:
            a = np.array([math.nan if v is None else v.numpy() if hasattr(v, "numpy") else v
                          for v in values], dtype=np.float64)
        if a.shape == (len(values),):
            return a, (), None
    except Exception:
        pass
    floats, unread, problem = [], [], None    # slow path: one by one, to name the culprit
    for i, (v, step) in enumerate(zip(values, steps)):
        try:
            floats.append(math.nan if v is None else _to_float(v, key))
        except Exception as e:
            floats.append(math.nan)
            unread.append(i)
            problem = problem or f"{e} (at step {step})"
    return np.asarray(floats), unread, problem


def _columns(dicts, prefix: str = "") -> dict:
    """[{key: value} or None per step] -> {prefix + key: [value or None per step]}."""
    if not any(dicts):
        return {}
    keys = dict.fromkeys(k for d in dicts if d for k in d)
    return {f"{prefix}{k}": [d.get(k) if d else None for d in dicts] for k in keys}


# -- what log() checks ------------------------------------------------------------------------
def step_number(step, last) -> int:
    """``step`` as an int that follows ``last`` (the last step logged, or None)."""
    try:
        if isinstance(step, bool):
            raise TypeError
        step = operator.index(step)
    except (TypeError, AttributeError):      # (a float tensor raises the latter)
        raise TypeError(f"step must be an int (or left out to count steps), got "
                        f"{type(step).__name__} {step!r:.40}") from None
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if last is not None and step <= last:
        raise ValueError(f"step must increase: got {step} after step {last}; leave it "
                         f"out to count steps, or use a new Monitor for a new run")
    return step


def check_first(loss, grad_norm, layer_norms, scalars, known, known_layers, epoch_keys):
    """The slow path of log(): a type it has not seen, a value to copy, or a key it has not
    checked yet (``known``, ``known_layers``: updated here). The first value under each key is
    converted now, so that a wrong shape or kind fails here rather than at a later redraw."""
    first = not known and not known_layers
    named = {"loss": loss, "grad_norm": grad_norm, **scalars}
    for k, v in named.items():
        if v is None or k in known:
            continue
        if k.startswith("layer/"):
            raise ValueError(f"{k!r}: names starting with 'layer/' are for "
                             f"layer_norms={{name: norm}}")
        if k in epoch_keys:
            raise ValueError(f"{k!r} is already an end-of-epoch key (log_epoch); give the "
                             f"per-step value another name")
    checked = {k: admit(k, v, k not in known) for k, v in named.items()}
    loss, grad_norm = checked.pop("loss"), checked.pop("grad_norm")
    if layer_norms is not None:
        for k in layer_norms:
            if not isinstance(k, str):
                raise TypeError(f"layer_norms keys must be layer names (str), got {k!r}")
        layer_norms = {k: admit(f"layer_norms[{k!r}]", v, k not in known_layers)
                       for k, v in layer_norms.items()}
        known_layers.update(k for k, v in layer_norms.items() if v is not None)
    tf = sys.modules.get("tensorflow")
    if first and tf is not None and tf.inside_function():   # only Python numbers given
        raise RuntimeError("monitor.log() was called inside a tf.function, where it runs "
                           "once, while tracing. Return the values from the step function "
                           "and log them outside it.")
    known.update(k for k, v in checked.items() if v is not None)
    known.update(k for k, v in (("loss", loss), ("grad_norm", grad_norm)) if v is not None)
    return loss, grad_norm, layer_norms, checked


def epoch_values(scalars, known) -> dict:
    """What ``log_epoch(**scalars)`` records: every value read as a float now (None dropped);
    names must not be per-step keys (``known``) or layer norms."""
    scalars = {k: v for k, v in scalars.items() if v is not None}
    if not scalars:
        raise ValueError("log_epoch() got no values; pass them by name, e.g. "
                         "monitor.log_epoch(val_loss=v_loss, val_accuracy=v_acc)")
    for k in scalars:
        if k.startswith("layer/"):
            raise ValueError(f"{k!r}: names starting with 'layer/' are for layer_norms=")
        if k in known:
            raise ValueError(f"{k!r} is already logged per step; give the end-of-epoch "
                             f"value another name (e.g. 'val_{k}')")
    return {k: admit(k, v, now=True) for k, v in scalars.items()}


def gather(pending, watched):
    """The buffered steps ``[(step, loss, grad_norm, layer_norms, scalars)]`` as columns of
    floats: ``(steps, {key: floats}, first, problems)``. ``first`` is (index, key, value) of the
    earliest NaN/Inf among the ``watched`` keys and every layer norm (``watched=None``: watch
    nothing); ``problems`` names each value that could not be read (it became NaN)."""
    steps, losses, gnorms, layers, scalars = zip(*pending)
    raw = _columns(scalars)                  # key -> one value (or None) per step
    raw.update({k: vs for k, vs in (("loss", losses), ("grad_norm", gnorms))
                if vs.count(None) < len(vs)})
    raw.update(_columns(layers, prefix="layer/"))
    columns, problems = {}, []
    first = None
    for k, vs in raw.items():
        columns[k], unread, problem = _to_floats(vs, k, steps)
        if problem:
            problems.append(problem)
        if watched is not None and (k in watched or k.startswith("layer/")):
            for i in np.flatnonzero(~np.isfinite(columns[k])):
                if vs[i] is not None and i not in unread:      # logged, and read: NaN/Inf
                    if first is None or i < first[0]:  # the earliest step, then key order
                        first = (int(i), k, float(columns[k][i]))
                    break
    return steps, columns, first, problems
