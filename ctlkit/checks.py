"""Exercise checkers: run a learner's function beside a reference and say what differs.

    report = ctlkit.checks.check_function(my_fn, reference_fn, cases=[(x,), (y,)])
    report.ok          # True when every case matches
    report.assert_ok() # raise AssertionError with the explanation (used under solutions)

Each problem is one sentence a learner can act on: the function is not written yet,
raised, returned the wrong structure, shape, dtype or values, is not differentiable
where the reference is, or retraces on every call.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf


@dataclasses.dataclass
class Report:
    name: str
    problems: list
    cases: int

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"PASS {self.name}: matches the reference on all {self.cases} case(s)."
        return f"NOT YET {self.name}:\n" + "\n".join(f"  - {p}" for p in self.problems)

    __repr__ = __str__

    def assert_ok(self) -> "Report":
        if not self.ok:
            raise AssertionError(str(self))
        return self


def _as_array(x):
    if isinstance(x, (tf.Tensor, tf.Variable)):
        return x.numpy()
    return np.asarray(x)


def _dtype_name(x) -> str:
    return x.dtype.name if isinstance(x, (tf.Tensor, tf.Variable)) else np.asarray(x).dtype.name


def compare(got, want, *, where="the result", rtol=1e-5, atol=1e-6) -> list:
    """Sentences describing how ``got`` differs from ``want`` ([] when they agree)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            return [f"{where} should be a dict with keys {sorted(want)}, got {keys}."]
        return [p for k in want for p in compare(got[k], want[k], where=f"{where}[{k!r}]",
                                                   rtol=rtol, atol=atol)]
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            n = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
            return [f"{where} should hold {len(want)} items, got {n}."]
        return [p for i, (g, w) in enumerate(zip(got, want))
                for p in compare(g, w, where=f"{where}[{i}]", rtol=rtol, atol=atol)]
    if want is None:
        return [] if got is None else [f"{where} should be None, got {type(got).__name__}."]
    if got is None:
        return [f"{where} is None; expected a value of shape {list(np.shape(_as_array(want)))}."]
    g, w = _as_array(got), _as_array(want)
    if g.shape != w.shape:
        hint = " (a missing or extra axis: check keepdims / reshape)" if g.size == w.size else ""
        return [f"{where} has shape {list(g.shape)}, expected {list(w.shape)}{hint}."]
    problems = []
    if _dtype_name(got) != _dtype_name(want):
        problems.append(f"{where} has dtype {_dtype_name(got)}, expected {_dtype_name(want)}.")
    try:
        gf, wf = g.astype(np.float64), w.astype(np.float64)
    except (TypeError, ValueError):  # strings or objects: compare exactly
        bad = ~np.broadcast_to(np.asarray(g == w, dtype=bool), g.shape)
        diff = None
    else:
        bad = ~np.isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True)
        with np.errstate(invalid="ignore"):
            diff = np.where(bad, np.abs(gf - wf), 0.0)
        diff[bad & np.isnan(diff)] = np.inf  # a NaN on one side only is the worst difference
    if bad.any():
        idx = np.unravel_index(np.argmax(diff if diff is not None else bad), bad.shape)
        at = f" at index {tuple(int(i) for i in idx)}" if g.ndim else ""
        if diff is None:
            size = "not equal"
        elif np.isnan(gf[idx]) != np.isnan(wf[idx]):
            size = "NaN where the other has a number"
        else:
            size = f"max |difference| {float(diff[idx]):.3g}"
        problems.append(f"{where} differs: {size}{at} (yours {_fmt(g[idx])}, "
                        f"expected {_fmt(w[idx])}).")
    return problems


def _fmt(x) -> str:
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.6g}" if isinstance(x, float) else repr(x)


def _call(fn, args, label):
    try:
        return fn(*args), None
    except NotImplementedError:
        return None, f"{label}: not written yet (it raised NotImplementedError)."
    except Exception as e:  # noqa: BLE001 - the learner's error is the message
        return None, f"{label}: raised {type(e).__name__}: {e}".strip()[:400]


def _gradients(fn, args):
    """Gradients of sum(fn(*args)) with respect to each floating-point argument."""
    tensors = [tf.convert_to_tensor(a) if not isinstance(a, tf.Variable) else a for a in args]
    floats = [i for i, t in enumerate(tensors) if t.dtype.is_floating]
    with tf.GradientTape() as tape:
        for i in floats:
            tape.watch(tensors[i])
        out = fn(*tensors)
        flat = [tf.cast(tf.reduce_sum(o), tf.float64) for o in tf.nest.flatten(out)
                if o is not None and tf.as_dtype(getattr(o, "dtype", tf.float32)).is_floating]
        total = tf.add_n(flat) if flat else tf.constant(0.0, tf.float64)
    return dict(zip(floats, tape.gradient(total, [tensors[i] for i in floats])))


def _normalise_cases(cases):
    if (cases is None or isinstance(cases, (str, bytes, dict, np.ndarray, tf.Tensor))
            or not hasattr(cases, "__iter__")):
        raise TypeError(f"cases must be a list of argument tuples, e.g. cases=[(x,), (x, y)], "
                        f"got {type(cases).__name__}")
    cases = [c if isinstance(c, tuple) else (c,) for c in cases]
    if not cases:
        raise ValueError("cases is empty: give at least one tuple of arguments to try")
    return cases


def check_function(fn, reference, cases, *, name=None, rtol=1e-5, atol=1e-6,
                   differentiable=False, verbose=False) -> Report:
    """Call ``fn`` and ``reference`` on each case (a tuple of arguments) and compare.

    differentiable: also compare the gradients of sum(output) with respect to every
                    floating-point argument (catches ``.numpy()`` round trips, integer casts).
    verbose:        also print the report. It is returned either way, and a report that ends
                    a notebook cell displays itself.
    """
    for arg, f in (("fn", fn), ("reference", reference)):
        if not callable(f):
            raise TypeError(f"{arg} must be a function, got {type(f).__name__}: pass the "
                            f"function itself (my_fn), not its result (my_fn(x))")
    cases = _normalise_cases(cases)
    name = name or getattr(fn, "__name__", "your function")
    problems = []
    for k, args in enumerate(cases):
        label = f"case {k + 1}"
        want, err = _call(reference, args, "the reference")
        if err:
            raise RuntimeError(f"checker bug: {err}")
        got, err = _call(fn, args, label)
        if err:
            problems.append(err)
            if "not written yet" in err:
                break
            continue
        case_problems = compare(got, want, where=f"{label}: the result", rtol=rtol, atol=atol)
        problems += case_problems
        if differentiable and not case_problems:
            g_want = _gradients(reference, args)
            try:
                g_got = _gradients(fn, args)
            except Exception as e:  # noqa: BLE001 - e.g. NumPy-only code given tensors
                problems.append(f"{label}: raised {type(e).__name__} when called with tensors "
                                f"under a GradientTape: {e}".strip()[:400])
                continue
            for i, gw in g_want.items():
                gg = g_got.get(i)
                if gw is not None and gg is None:
                    problems.append(f"{label}: not differentiable with respect to argument {i}: "
                                    f"its gradient is None (a .numpy() round trip, an int cast "
                                    f"or a Python float breaks the tape).")
                elif gw is None and gg is not None:
                    problems.append(f"{label}: has a gradient with respect to argument {i}, where "
                                    f"the reference has none (a missing tf.stop_gradient?).")
                elif gw is not None:
                    problems += compare(gg, gw, where=f"{label}: the gradient w.r.t. argument {i}",
                                        rtol=max(rtol, 1e-4), atol=max(atol, 1e-5))
    report = Report(name=name, problems=problems, cases=len(cases))
    if verbose:
        print(report)
    return report


def check_traces(fn, cases, *, max_traces=1, name=None, verbose=False) -> Report:
    """Call a ``tf.function`` on each case and fail if it traced more than ``max_traces`` times."""
    if not hasattr(fn, "experimental_get_tracing_count"):
        raise TypeError(f"fn must be a tf.function (decorate it with @tf.function), "
                        f"got {type(fn).__name__}")
    if isinstance(max_traces, bool) or not isinstance(max_traces, int) or max_traces < 1:
        raise ValueError(f"max_traces must be an int >= 1, got {max_traces!r}")
    cases = _normalise_cases(cases)
    name = name or getattr(fn, "__name__", "your function")
    before = fn.experimental_get_tracing_count()
    problems = []
    for k, args in enumerate(cases):
        _, err = _call(fn, args, f"case {k + 1}")
        if err:
            problems.append(err)
            break
    traces = fn.experimental_get_tracing_count() - before
    if not problems and traces > max_traces:
        every = " It retraces on every call." if traces >= len(cases) > 1 else ""
        problems.append(f"traced {traces} times for {len(cases)} calls (allowed: {max_traces})."
                        f"{every} Give it an input_signature with None for the varying axis, "
                        f"or pass tensors instead of Python numbers.")
    report = Report(name=name, problems=problems, cases=len(cases))
    if verbose:
        print(report)
    return report
