"""Count the traces of a ``tf.function`` and say why each one happened.

    ctlkit.tracing.count(step)            # graphs step has traced so far
    watched = ctlkit.tracing.watch(step)  # call it exactly as you would call step
    watched(x, y); watched(x2, y2)
    watched.traces                        # [Trace(call, signature, traces, reason), ...]
    print(watched.summary())              # each trace: its inputs and why it happened
    watched.concrete_signatures()         # the graphs step holds now, as TF prints them

A reason compares the inputs with the closest earlier trace's: a new shape or dtype, a new Python
value, a new Python object or a new nesting structure. More than ``storm`` traces through one
watcher warn once (``RetracingWarning``) with the fix.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import warnings
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from . import validate

FIX = ("give it an input_signature with None for the axes that vary (tf.TensorSpec([None, ...])) "
       "or use @tf.function(reduce_retracing=True), and pass tensors instead of Python numbers")


class RetracingWarning(UserWarning):
    """A watched tf.function traced more often than its ``storm`` threshold."""


def _check_function(fn):
    if not callable(fn):
        raise TypeError(f"fn must be a tf.function, got {type(fn).__name__} {fn!r:.60}: pass the "
                        f"function itself (step), not its result (step(x))")
    if not hasattr(fn, "experimental_get_tracing_count"):
        name = getattr(fn, "__name__", type(fn).__name__)
        raise TypeError(f"fn must be a tf.function, got the plain Python callable {name!r}: "
                        f"decorate it with @tf.function or pass tf.function({name})")
    return fn


def count(fn) -> int:
    """Traces so far: how many graphs ``fn`` (a tf.function or a TraceWatcher) has built."""
    fn = fn.fn if isinstance(fn, TraceWatcher) else fn
    return int(_check_function(fn).experimental_get_tracing_count())


class Leaf(NamedTuple):
    """One input as tf.function sees it."""

    kind: str      # "tensor" (NumPy too), "variable", "python" (number, str, None...) or "object"
    type: str      # the dtype for tensors and variables, the Python type name otherwise
    value: object  # the shape for tensors and variables, the value for Python, id() for objects

    def __str__(self) -> str:
        if self.kind in ("tensor", "variable"):
            return f"{self.type}{self.value}" + (" variable" if self.kind == "variable" else "")
        return f"{self.value!r:.40}" if self.kind == "python" else f"<{self.type} object>"


def _leaf(x) -> Leaf:
    if isinstance(x, tf.Variable):
        return Leaf("variable", x.dtype.name, tuple(x.shape))
    if tf.is_tensor(x) or isinstance(x, (np.ndarray, np.generic)):
        shape = tf.TensorShape(x.shape)
        return Leaf("tensor", tf.as_dtype(x.dtype).name,
                    tuple(shape) if shape.rank is not None else ("?",))  # "?": unknown rank
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes)):
        return Leaf("python", type(x).__name__, x)
    return Leaf("object", type(x).__name__, id(x))


def _flatten(x, path: str, out: dict) -> dict:
    """Lists, tuples, namedtuples and dicts are nests, as in tf.nest; anything else is a leaf."""
    if isinstance(x, dict):
        for k in sorted(x, key=repr):
            _flatten(x[k], f"{path}[{k!r}]", out)
    elif isinstance(x, tuple) and hasattr(x, "_fields"):
        for k, v in zip(x._fields, x):
            _flatten(v, f"{path}.{k}", out)
    elif isinstance(x, (list, tuple)) and x:
        for i, v in enumerate(x):
            _flatten(v, f"{path}[{i}]", out)
    else:
        out[path] = Leaf("python", type(x).__name__, type(x)()) if isinstance(x, (list, tuple)) \
            else _leaf(x)
    return out


def _as_text(leaf: Leaf) -> str:
    return {"tensor": f"a tensor {leaf}", "variable": f"a tf.Variable {leaf.type}{leaf.value}",
            "python": f"the Python value {leaf}",
            "object": f"a Python object of type {leaf.type}"}[leaf.kind]


def _change(path: str, old: Leaf, new: Leaf) -> tuple:
    """(cost, sentence) for one input that differs; the cost picks the closest earlier trace."""
    at = f"argument {path}"
    if old.kind != new.kind:
        return 3, f"{at}: {_as_text(new)} where the earlier trace had {_as_text(old)}"
    if old.kind in ("tensor", "variable"):
        if old.type != new.type and old.value != new.value:
            return 2, f"{at}: new dtype {new.type} and shape {new.value} (earlier: {old})"
        if old.type != new.type:
            return 1, f"{at}: new dtype {new.type} (earlier: {old.type})"
        return 1, f"{at}: new shape {new.value} (earlier: {old.value})"
    if old.kind == "python":
        number = isinstance(new.value, (int, float, complex)) and not isinstance(new.value, bool)
        why = ("Python scalars are part of the signature; pass a tensor" if number
               else "each Python value gets its own graph")
        return 1, f"{at}: new Python value {new} (earlier: {old}; {why})"
    return 1, (f"{at}: a new Python object of type {new.type} (objects are matched by identity: "
               f"reuse one object, or pass its tensors)")


def _root(path: str) -> str:
    return re.split(r"[\[.]", path, maxsplit=1)[0]  # "batch['x'][0]" -> "batch"


def _differences(old: dict, new: dict) -> list:
    """[(cost, sentence)] for each input that differs between two signatures ([] if equal)."""
    out = []
    for root in dict.fromkeys(_root(p) for p in new):
        olds, news = [p for p in old if _root(p) == root], [p for p in new if _root(p) == root]
        if olds != news:
            short = lambda ps: ", ".join(ps[:4]) + (", ..." if len(ps) > 4 else "")  # noqa: E731
            out.append((5, f"argument {root}: a new nesting structure {short(news)} "
                           f"(earlier: {short(olds)})"))
        else:
            out += [_change(p, old[p], new[p]) for p in news if old[p] != new[p]]
    return out


@dataclasses.dataclass
class Trace:
    call: int          # 1-based index of the call that traced
    signature: dict    # {argument path: Leaf}
    traces: int        # graphs built in this call (2 when the first trace created variables)
    reason: str

    def inputs(self) -> str:
        return ", ".join(f"{p}={leaf}" for p, leaf in self.signature.items())


class TraceWatcher:
    """Call it like the tf.function it wraps; it records each trace and why it happened.

    Other attributes (get_concrete_function, experimental_get_tracing_count, ...) are the
    wrapped function's, so a watcher can go where a tf.function is expected.
    """

    def __init__(self, fn, *, storm: int = 5, name: str | None = None):
        self.fn = _check_function(fn)
        storm = validate.positive_int("storm", storm, example=5)   # traces allowed before a warning
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}; pass e.g. name='step'")
        self.storm, self.calls, self.traces, self.warned = int(storm), 0, [], False
        self.__name__ = name or getattr(fn, "__name__", None) or getattr(fn, "name", "tf.function")
        self._before = count(fn)  # traces made before the watcher existed
        try:
            self._signature = inspect.signature(fn.python_function)
        except (AttributeError, TypeError, ValueError):
            self._signature = None

    def __getattr__(self, attr):
        if attr == "fn":  # not set yet (copying, a failed __init__): no recursion
            raise AttributeError(attr)
        return getattr(self.fn, attr)

    def _inputs(self, args, kwargs) -> dict:
        try:
            bound = self._signature.bind(*args, **kwargs)
            bound.apply_defaults()
            named = bound.arguments
        except (AttributeError, TypeError):  # no Python signature, or the call does not fit it
            named = {**{f"#{i}": a for i, a in enumerate(args)}, **kwargs}
        out = {}
        for key, value in named.items():
            _flatten(value, key, out)
        return out

    def __call__(self, *args, **kwargs):
        signature, before = self._inputs(args, kwargs), count(self.fn)
        result = self.fn(*args, **kwargs)
        self.calls += 1
        new = count(self.fn) - before
        if new:
            self.traces.append(Trace(self.calls, signature, new, self._reason(signature, new)))
            if self.traced > self.storm and not self.warned:
                self.warned = True
                warnings.warn(f"{self.__name__} traced {self.traced} times in {self.calls} calls "
                              f"(storm={self.storm}): each trace rebuilds the graph. Latest: "
                              f"{self.traces[-1].reason}. Fix: {FIX}.", RetracingWarning,
                              stacklevel=2)
        return result

    def _reason(self, signature: dict, new: int) -> str:
        if self.traces:  # compare with the closest earlier trace, the latest one on a tie
            diffs = min((_differences(t.signature, signature) for t in reversed(self.traces)),
                        key=lambda d: sum(cost for cost, _ in d))
            reason = "; ".join(s for _, s in diffs) or (
                "inputs equal to an earlier trace's (a Python object with a reused id?)")
        elif self._before:
            reason = f"first call through the watcher ({self._before} earlier trace(s) not seen)"
        else:
            reason = "first call"
        if new > 1:
            reason += (f" ({new} traces in one call: a trace that creates tf.Variables, e.g. an "
                       f"optimizer's slots, is followed by one that does not)")
        return reason

    @property
    def traced(self) -> int:
        """Traces made through this watcher (one call can make two, see ``Trace.traces``)."""
        return sum(t.traces for t in self.traces)

    def concrete_signatures(self) -> list:
        """One text block per graph the tf.function holds now: its input and output specs."""
        text = self.fn.pretty_printed_concrete_signatures()
        return [block.strip() for block in text.split("\n\n") if block.strip()]

    def summary(self) -> str:
        lines = [f"{self.__name__}: {self.calls} call(s), {self.traced} trace(s) through the "
                 f"watcher ({count(self.fn)} in all); {self.calls - len(self.traces)} call(s) "
                 f"reused a graph"]
        lines += [f"  call {t.call:>3}: {t.inputs()}\n      -> {t.reason}" for t in self.traces]
        return "\n".join(lines)

    __repr__ = summary


def watch(fn, *, storm: int = 5, name: str | None = None) -> TraceWatcher:
    """Wrap a tf.function so that each of its traces is recorded with its inputs and reason."""
    return TraceWatcher(fn, storm=storm, name=name)
