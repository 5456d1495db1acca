"""Argument checks shared by ctlkit's modules: numbers and flags read the way a person means them.

Each check accepts the Python, NumPy and TensorFlow spellings of a value (``32``, ``np.int64(32)``,
``tf.constant(32)``) and returns a plain Python value, or raises an error that names the argument
and says what to pass instead. Strings are never guessed at: ``quick="no"`` is an error, not True.
"""
from __future__ import annotations

import math
import numbers
import os

import numpy as np

TRUE_WORDS = ("1", "true", "yes", "on", "y")
FALSE_WORDS = ("0", "false", "no", "off", "n", "")


def _scalar(value):
    """A 0-d NumPy array or tensor as its Python/NumPy scalar; anything else unchanged."""
    if hasattr(value, "numpy") and callable(value.numpy) and getattr(value, "shape", None) == ():
        value = value.numpy()
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    return value


def integer(name: str, value, *, minimum: int = 1, maximum: int | None = None,
            example: int = 10) -> int:
    """``value`` as a Python int in [minimum, maximum] (int, NumPy integer or 0-d int tensor)."""
    what = {1: "a positive int", 0: "a non-negative int"}.get(minimum, f"an int >= {minimum}")
    v = _scalar(value)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        hint = f" (for a float, {name}=int(x))" if isinstance(v, numbers.Real) else ""
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r}{hint}; "
                        f"pass e.g. {name}={example}")
    if v < minimum:
        raise ValueError(f"{name} must be {what}, got {int(v)}; pass e.g. {name}={example}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {int(v)}; pass e.g. "
                         f"{name}={example}")
    return int(v)


def positive_int(name: str, value, example: int = 10) -> int:
    """``value`` as a Python int >= 1."""
    return integer(name, value, minimum=1, example=example)


SEED_MAX = 2 ** 32 - 1   # NumPy's and scikit-learn's seeds are 32-bit


def seed(value, name: str = "seed") -> int:
    """A random seed: an int in [0, 2**32 - 1] (NumPy and tensor ints accepted)."""
    return integer(name, value, minimum=0, maximum=SEED_MAX, example=0)


def number(name: str, value, *, low=-math.inf, high=math.inf, low_open=False, high_open=False,
           example=0.5) -> float:
    """``value`` as a finite Python float within [low, high] (open ends where asked)."""
    v = _scalar(value)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}; "
                        f"pass e.g. {name}={example}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}; pass e.g. {name}={example}")
    if v < low or v > high or (low_open and v == low) or (high_open and v == high):
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {v}; "
                         f"pass e.g. {name}={example}")
    return v


def flag(name: str, value) -> bool:
    """``value`` as a bool: True/False (or NumPy bools), never a string or a number."""
    v = _scalar(value)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def env_flag(variable: str, default: bool = False) -> bool:
    """An on/off environment variable. Unset or empty: ``default``. Anything other than the
    usual words (1/true/yes/on/y, 0/false/no/off/n) is an error, not a silent 'off'."""
    raw = os.environ.get(variable)
    if raw is None or not raw.strip():
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"environment variable {variable}={raw!r} is neither on nor off: set it to "
                     f"1 (or {'/'.join(TRUE_WORDS[1:])}) or 0 (or "
                     f"{'/'.join(w for w in FALSE_WORDS[1:] if w)}), or unset it")
