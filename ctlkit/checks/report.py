"""How a learner's value differs from the reference's, in sentences, and the Report that holds them.

    compare(got, want, where="the loss")   # [] when they agree, else one sentence per difference
    Report(name="f", problems=[...], cases=2).assert_ok()

compare walks dicts, tuples and lists item by item, then says the first thing that is off:
the structure, None, the kind (text against numbers), the shape, the dtype, and the worst
entry with its index and both values. Floats and complex numbers agree within a tolerance,
integers, bools and strings only when equal. ``tolerance`` and ``real_number`` read the
checkers' number arguments the way a person writes them (Python, NumPy or a 0-d tensor).
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np
import tensorflow as tf


class ContextError(ValueError):
    """What a notebook passed to a checker is wrong (not the learner's answer): ``check`` raises
    it, naming the argument, instead of reporting it as the learner's mistake."""


@dataclasses.dataclass
class Report:
    """What a checker found: ``problems`` (sentences, empty when it passes) over ``cases`` calls."""

    name: str
    problems: list
    cases: int
    notes: list = dataclasses.field(default_factory=list)   # how it was checked, if unusual

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        notes = "".join(f"\n  (note: {n})" for n in self.notes)
        if self.ok:
            return f"PASS {self.name}: matches the reference on all {self.cases} case(s).{notes}"
        return f"NOT YET {self.name}:\n" + "\n".join(f"  - {p}" for p in self.problems) + notes

    __repr__ = __str__

    def assert_ok(self) -> Report:
        if not self.ok:
            raise AssertionError(str(self))
        return self


# -- argument checks ------------------------------------------------------------------------------
def real_number(x, name, example, what="a number"):
    """``x`` if it is one real number: a Python or NumPy number as it is, a 0-d array or
    tensor as a Python number; else a TypeError naming ``name`` and an example."""
    if isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)):
        return x
    if isinstance(x, (np.ndarray, np.generic, tf.Tensor)) and np.shape(x) == ():
        if np.asarray(x).dtype.kind in "iuf":
            return np.asarray(x).item()
    raise TypeError(f"{name} must be {what}, e.g. {name}={example}, got {type(x).__name__}")


def tolerance(x, name):
    """``x`` (an rtol or atol) as a float >= 0, or an error naming ``name`` and an example."""
    x = float(real_number(x, name, "1e-5"))
    if not (np.isfinite(x) and x >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, e.g. {name}=1e-5, got {x!r}")
    return x


# -- compare --------------------------------------------------------------------------------------
def _as_array(x):
    return x.numpy() if isinstance(x, (tf.Tensor, tf.Variable)) else np.asarray(x)


def _dtype_name(x) -> str:
    return x.dtype.name if isinstance(x, (tf.Tensor, tf.Variable)) else np.asarray(x).dtype.name


def _fmt(x) -> str:
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.6g}" if isinstance(x, float) else repr(x)


def _mismatches(g, w, rtol, atol, slack=None):
    """(bad entries, |difference| to rank them, or None for strings and objects)."""
    kinds = {g.dtype.kind, w.dtype.kind}
    if kinds <= set("biu"):        # integers and bools exactly, as Python ints (no float64 cast)
        g, w = (g, w) if g.dtype == w.dtype else (g.astype(object), w.astype(object))
        bad = np.asarray(g != w, dtype=bool)
        diff = np.zeros(g.shape, dtype=object)
        diff[bad] = abs(g[bad].astype(object) - w[bad].astype(object))
        return bad, diff
    if not kinds <= set("biufc"):  # strings or objects: compare exactly
        return ~np.broadcast_to(np.asarray(g == w, dtype=bool), g.shape), None
    as_type = np.complex128 if "c" in kinds else np.float64   # complex: |difference| of both parts
    gf, wf = g.astype(as_type), w.astype(as_type)
    if slack is not None and np.shape(slack) == g.shape:    # float32 noise of this very point
        atol = atol + np.nan_to_num(np.abs(slack).astype(np.float64), nan=0.0, posinf=0.0)
    bad = ~np.isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(invalid="ignore"):
        diff = np.where(bad, np.abs(gf - wf), 0.0)
    diff[bad & np.isnan(diff)] = np.inf  # a NaN on one side only is the worst difference
    return bad, diff


def factor(got, want, rtol=1e-3):
    """The number c with got == c * want in every entry (to ``rtol``), or None: a result off by
    an exact factor (2, the batch size, a loss scale of 2**15, the replica count) is a slip with a
    name. Entries where want is 0 must be 0 in got too; c = 1 and c = 0 are not factors."""
    g, w = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    if g.shape != w.shape or not (np.all(np.isfinite(g)) and np.all(np.isfinite(w))):
        return None
    big = np.abs(w) > 1e-12 * max(np.abs(w).max(initial=0.0), 1e-30)
    if not big.any() or not np.allclose(g[~big], 0.0, atol=1e-12 * np.abs(g).max(initial=1.0)):
        return None
    ratios = g[big] / w[big]
    c = float(np.median(ratios))
    if c == 0.0 or abs(c - 1.0) < 10 * rtol or not np.allclose(ratios, c, rtol=rtol, atol=0.0):
        return None
    return c


def factor_words(c) -> str:
    """c for a sentence: "2", "1/8", "32768 (2**15)", "-1", else 4 significant digits."""
    for value, words in ((c, None), (1.0 / c, "1/")):
        n = round(value)
        if n != 0 and abs(value - n) < 1e-3 * abs(value):
            power = abs(n).bit_length() - 1
            two = abs(n) >= 64 and abs(n) == 1 << power
            if words is None:
                return f"{n}" + (f" (2**{power})" if two else "")
            return f"1/{n}" + (f" (2**-{power})" if two else "")
    return f"{c:.4g}"


def _simple(c) -> bool:
    """c is a whole number or one over a whole number (2, 1/8, 32768, -1)."""
    return any(round(v) != 0 and abs(v - round(v)) < 1e-3 * abs(v) for v in (c, 1.0 / c))


def _part(slack, key):
    """The slack of one item of a dict, tuple or list (None when slack does not have it)."""
    try:
        return None if slack is None else slack[key]
    except (KeyError, IndexError, TypeError):
        return None


def compare(got, want, *, where="the result", rtol=1e-5, atol=1e-6, slack=None) -> list:
    """Sentences describing how ``got`` differs from ``want`` ([] when they agree).

    Floats agree within ``atol + rtol * |want|`` and complex numbers when the size of their
    difference (both parts) is that small; integers, bools and strings must be equal.
    ``slack``, shaped like ``want`` (None anywhere: nothing), adds an allowance per entry: the
    checkers pass the rounding noise of the case itself (see checks.float32_slack).
    """
    if not isinstance(where, str):
        raise TypeError(f"where must be a string, e.g. where='the loss', got "
                        f"{type(where).__name__}")
    rtol, atol = tolerance(rtol, "rtol"), tolerance(atol, "atol")
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            return [f"{where} should be a dict with keys {sorted(want)}, got {keys}."]
        return [p for k in want for p in compare(got[k], want[k], where=f"{where}[{k!r}]",
                                                   rtol=rtol, atol=atol, slack=_part(slack, k))]
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            n = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
            return [f"{where} should hold {len(want)} items, got {n}."]
        return [p for i, (g, w) in enumerate(zip(got, want))
                for p in compare(g, w, where=f"{where}[{i}]", rtol=rtol, atol=atol,
                                 slack=_part(slack, i))]
    if want is None:
        return [] if got is None else [f"{where} should be None, got {type(got).__name__}."]
    if got is None:
        return [f"{where} is None; expected a value of shape {list(np.shape(_as_array(want)))} "
                f"(a missing `return`? If it is a gradient: was the tensor watched, and does the "
                f"result depend on it through TensorFlow ops?)."]
    g, w = _as_array(got), _as_array(want)
    if (g.dtype.kind in "OSU") != (w.dtype.kind in "OSU"):     # text or objects vs numbers
        return [f"{where} should be like the reference's {w.dtype.name} of shape "
                f"{list(w.shape)}, got {type(got).__name__} ({g.dtype.name})."]
    if g.shape != w.shape:
        hint = " (a missing or extra axis: check keepdims / reshape)" if g.size == w.size else ""
        return [f"{where} has shape {list(g.shape)}, expected {list(w.shape)}{hint}."]
    problems = []
    if _dtype_name(got) != _dtype_name(want):
        problems.append(f"{where} has dtype {_dtype_name(got)}, expected {_dtype_name(want)}.")
    bad, diff = _mismatches(g, w, rtol, atol, None if slack is None else _as_array(slack))
    if bad.any():
        idx = np.unravel_index(np.argmax(diff if diff is not None else bad), bad.shape)
        at = f" at index {tuple(int(i) for i in idx)}" if g.ndim else ""
        if diff is None:
            size = "not equal"
        elif diff.dtype != object and np.isnan(g[idx]) != np.isnan(w[idx]):
            size = "NaN where the other has a number"
        else:
            size = "max |difference| " + (str(diff[idx]) if diff.dtype == object
                                          else f"{float(diff[idx]):.3g}")
        c = factor(g, w) if g.dtype.kind in "biuf" and w.dtype.kind in "biuf" and g.size > 0 else None
        if c is not None and g.size == 1 and not _simple(c):
            c = None             # one number over another is always "a factor": only name a simple one
        times = (f"; yours is {factor_words(c)} times the expected"
                 + (", in every entry" if g.size > 1 else "")) if c else ""
        problems.append(f"{where} differs: {size}{at} (yours {_fmt(g[idx])}, "
                        f"expected {_fmt(w[idx])}){times}.")
    return problems
