"""Exercise checkers: run a learner's function beside a reference and say what differs.

    report = ctlkit.checks.check_function(my_fn, reference_fn, cases=[(x,), (y,)])
    report.ok          # True when every case matches
    report.assert_ok() # raise AssertionError with the explanation (used under solutions)

Each problem is one sentence a learner can act on: the function is not written yet,
raised, returned the wrong structure, shape, dtype or values, is not differentiable
where the reference is, or retraces on every call.

This module checks functions; ``ctlkit.checks`` (the package) lists the other rooms.
"""
from __future__ import annotations

import numbers

import numpy as np
import tensorflow as tf

from ..grads import is_variable
from .cases import checker_name, labelled_cases, own_copy
from .errors import call, call_creating
from .report import Report, compare, real_number, tolerance

__all__ = ["check_function", "check_traces", "float32_slack"]


# -- gradients ------------------------------------------------------------------------------------
def _gradients(fn, args):
    """Gradients of sum(fn(*args)) with respect to each floating-point argument."""
    tensors = [a if is_variable(a) else tf.convert_to_tensor(a) for a in args]
    floats = [i for i, t in enumerate(tensors) if tf.as_dtype(t.dtype).is_floating]
    with tf.GradientTape() as tape:
        for i in floats:
            tape.watch(tensors[i])
        out = fn(*tensors)
        flat = [tf.cast(tf.reduce_sum(o), tf.float64) for o in tf.nest.flatten(out)
                if o is not None and tf.as_dtype(getattr(o, "dtype", tf.float32)).is_floating]
        total = tf.add_n(flat) if flat else tf.constant(0.0, tf.float64)
    grads = tape.gradient(total, [tensors[i] for i in floats])
    # a gather (e.g. top-k indices, then tf.gather) gives IndexedSlices: the same gradient, sparse
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    return dict(zip(floats, grads))


# -- float32 noise ---------------------------------------------------------------------------------
SLACK = 8.0  # a right float32 formulation may be a few times as far from exact as the reference


def _float64(x):
    """x with float32 (and float16) tensors, arrays and Python floats as float64 tensors."""
    if isinstance(x, (tuple, list)):
        return type(x)(_float64(v) for v in x)
    if isinstance(x, float):
        return tf.constant(x, tf.float64)
    if isinstance(x, (tf.Tensor, tf.Variable, np.ndarray)) and x.dtype in (
            tf.float32, tf.float16, np.float32, np.float16):
        return tf.cast(tf.convert_to_tensor(x), tf.float64)
    return x


def _gap(low, exact):
    """SLACK * |exact - low| for a float32/float16 value beside its float64 twin, else None."""
    if low is None or exact is None or not hasattr(low, "dtype") or not hasattr(exact, "dtype"):
        return None
    low_arr, exact_arr = np.asarray(low), np.asarray(exact)
    if low_arr.dtype not in (np.float32, np.float16) or low_arr.shape != exact_arr.shape:
        return None
    return SLACK * np.abs(exact_arr.astype(np.float64) - low_arr.astype(np.float64))


def float32_slack(reference, args, want, gradients=None):
    """The allowance, entry by entry, that rounding alone earns at this case: SLACK times how far
    the reference's float32 result (``want``; ``gradients``: its gradients by argument) lies from
    the same reference run in float64. Where a case is ill-conditioned (e.g. a loss at identical
    views, whose float32 gradient is mostly rounding) a right answer written another way, with
    einsum for matmul or in another order, differs from the reference by that much too; where
    the case is well conditioned the allowance is tiny. None when the reference cannot run in
    float64 (then only rtol and atol apply)."""
    try:
        wide = _float64(own_copy(args))
        if gradients is not None:
            exact = _gradients(reference, wide)
            return {i: _gap(g, exact.get(i)) for i, g in gradients.items()}
        exact = reference(*wide)
        return tf.nest.map_structure(_gap, want, exact, check_types=False)
    except Exception:  # a reference that needs float32: no allowance
        return None


def _gradient_problems(fn, reference, args, label, rtol, atol) -> list:
    g_want = _gradients(reference, own_copy(args))
    try:
        g_got = _gradients(fn, own_copy(args))
    except Exception as e:  # e.g. NumPy-only code given tensors
        return [f"{label}: raised {type(e).__name__} when called with tensors "
                f"under a GradientTape: {e}".strip()[:400]]
    problems = []
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
            where, tol = f"{label}: the gradient w.r.t. argument {i}", dict(
                rtol=max(rtol, 1e-4), atol=max(atol, 1e-5))
            found = compare(gg, gw, where=where, **tol)
            if found:            # is the difference within this case's own rounding noise?
                slack = float32_slack(reference, args, None, gradients=g_want) or {}
                found = compare(gg, gw, where=where, slack=slack.get(i), **tol)
            problems += found
    return problems


# -- the checkers ---------------------------------------------------------------------------------
def check_function(fn, reference, cases, *, name=None, rtol=1e-5, atol=1e-6,
                   differentiable=False, verbose=False) -> Report:
    """Call ``fn`` and ``reference`` on each case and compare.

    cases:          a list; a tuple or list case holds the arguments of one call, anything else
                    is the only argument. Or a dict {label: arguments} whose labels say what each
                    case is. Each function gets its own copy of the arguments (own_copy).
    differentiable: also compare the gradients of sum(output) with respect to every
                    floating-point argument (catches ``.numpy()`` round trips, integer casts).
    verbose:        also print the report. It is returned either way, and a report that ends
                    a notebook cell displays itself.
    """
    for arg, f in (("fn", fn), ("reference", reference)):
        if not callable(f):
            raise TypeError(f"{arg} must be a function, got {type(f).__name__}: pass the "
                            f"function itself (my_fn), not its result (my_fn(x))")
    cases = labelled_cases(cases)
    name = checker_name(name, fn, differentiable=differentiable, verbose=verbose)
    rtol, atol = tolerance(rtol, "rtol"), tolerance(atol, "atol")
    problems = []
    for label, args in cases:
        want, err = call(reference, own_copy(args), "the reference")
        if err:
            raise RuntimeError(f"checker bug: {err} ({label} called it with {len(args)} "
                               f"argument(s); cases must be a list of argument tuples, e.g. "
                               f"[(x, y)] for one call with two arguments)")
        got, err = call(fn, own_copy(args), label)
        if err:
            problems.append(err)
            if "not written yet" in err:
                break
            continue
        case_problems = compare(got, want, where=f"{label}: the result", rtol=rtol, atol=atol)
        if case_problems:        # is the difference within this case's own rounding noise?
            case_problems = compare(got, want, where=f"{label}: the result", rtol=rtol, atol=atol,
                                    slack=float32_slack(reference, args, want))
        problems += case_problems
        if differentiable and not case_problems:
            problems += _gradient_problems(fn, reference, args, label, rtol, atol)
    report = Report(name=name, problems=problems, cases=len(cases))
    if verbose:
        print(report)
    return report


def check_traces(fn, cases, *, max_traces=1, name=None, verbose=False) -> Report:
    """Call a ``tf.function`` on each case and fail if it traced more than ``max_traces`` times.

    The arguments are passed as they are (not copied): an iterator case goes on where it was.
    """
    if not hasattr(fn, "experimental_get_tracing_count"):
        raise TypeError(f"fn must be a tf.function (decorate it with @tf.function), "
                        f"got {type(fn).__name__}")
    n = real_number(max_traces, "max_traces", "1", "an int >= 1")
    if not isinstance(n, numbers.Integral) or n < 1:
        error = TypeError if not isinstance(n, numbers.Integral) else ValueError
        raise error(f"max_traces must be an int >= 1, e.g. max_traces=1, got {max_traces!r}")
    cases = labelled_cases(cases)
    name = checker_name(name, fn, verbose=verbose)
    before = fn.experimental_get_tracing_count()
    problems, excused = [], 0
    for k, (label, args) in enumerate(cases):
        _, err, created = call_creating(fn, args, label)
        if err:
            problems.append(err)
            break
        if k == 0 and created and fn.experimental_get_tracing_count() - before >= 2:
            excused = 1          # a first call that creates variables traces twice: not a retrace
    traces = fn.experimental_get_tracing_count() - before - excused
    if not problems and traces > n:
        every = " It retraces on every call." if traces >= len(cases) > 1 else ""
        problems.append(f"traced {traces} times for {len(cases)} calls (allowed: {n})."
                        f"{every} Give it an input_signature with None for the varying axis, "
                        f"or pass tensors instead of Python numbers.")
    report = Report(name=name, problems=problems, cases=len(cases))
    if verbose:
        print(report)
    return report
