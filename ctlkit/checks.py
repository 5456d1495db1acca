"""Exercise checkers: run a learner's function beside a reference and say what differs.

    report = ctlkit.checks.check_function(my_fn, reference_fn, cases=[(x,), (y,)])
    report.ok          # True when every case matches
    report.assert_ok() # raise AssertionError with the explanation (used under solutions)

Each problem is one sentence a learner can act on: the function is not written yet,
raised, returned the wrong structure, shape, dtype or values, is not differentiable
where the reference is, or retraces on every call.
"""
from __future__ import annotations

import copy
import dataclasses
import numbers
import re
import sys

import numpy as np
import tensorflow as tf

from .grads import _is_variable


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


# -- argument checks ------------------------------------------------------------------------------
def _number(x, name, example, what="a number"):
    """``x`` as a Python number if it is one real number (Python, NumPy or a 0-d tensor)."""
    if isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)):
        return x
    if isinstance(x, (np.ndarray, np.generic, tf.Tensor)) and np.shape(x) == ():
        if np.asarray(x).dtype.kind in "iuf":
            return np.asarray(x).item()
    raise TypeError(f"{name} must be {what}, e.g. {name}={example}, got {type(x).__name__}")


def _tolerance(x, name):
    x = float(_number(x, name, "1e-5"))
    if not (np.isfinite(x) and x >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, e.g. {name}=1e-5, got {x!r}")
    return x


def _name_and_flags(name, fn, **flags):
    for flag, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{flag} must be True or False, got {type(value).__name__}")
    if not isinstance(name, (str, type(None))):
        raise TypeError(f"name must be a string (or None for fn's own name), got "
                        f"{type(name).__name__}")
    return name or getattr(fn, "__name__", "your function")


def _normalise_cases(cases):
    """A list of (label, argument tuple). ``cases`` is a list (a tuple or list case holds the
    arguments, anything else is the only argument; labels are "case 1", ...) or a dict from a label
    that says what the case is ("rows of very different scale") to its arguments."""
    if isinstance(cases, dict):
        if not all(isinstance(k, str) for k in cases):
            raise TypeError("cases as a dict must map a label (a string saying what the case is) to "
                            "its arguments, e.g. {'a batch of one': (x1,)}")
        labels, cases = list(cases), list(cases.values())
    else:
        labels = None
    if (cases is None or isinstance(cases, (str, bytes, set, frozenset, np.ndarray))
            or tf.is_tensor(cases) or not hasattr(cases, "__iter__")):
        raise TypeError(f"cases must be a list of argument tuples, e.g. cases=[(x,), (x, y)], "
                        f"got {type(cases).__name__}")
    out = []
    for k, c in enumerate(cases):
        if isinstance(c, (set, frozenset)):
            raise TypeError(f"cases[{k}] is a {type(c).__name__}, which has no order: write the "
                            f"arguments of one call as a tuple, e.g. (x, y)")
        out.append(tuple(c) if isinstance(c, (tuple, list)) else (c,))
    if not out:
        raise ValueError("cases is empty: give at least one tuple of arguments to try")
    labels = labels or [f"case {k + 1}" for k in range(len(out))]
    return list(zip(labels, out))


# -- compare --------------------------------------------------------------------------------------
def _as_array(x):
    return x.numpy() if isinstance(x, (tf.Tensor, tf.Variable)) else np.asarray(x)


def _dtype_name(x) -> str:
    return x.dtype.name if isinstance(x, (tf.Tensor, tf.Variable)) else np.asarray(x).dtype.name


def _fmt(x) -> str:
    x = x.item() if hasattr(x, "item") else x
    return f"{x:.6g}" if isinstance(x, float) else repr(x)


def _mismatches(g, w, rtol, atol):
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
    bad = ~np.isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(invalid="ignore"):
        diff = np.where(bad, np.abs(gf - wf), 0.0)
    diff[bad & np.isnan(diff)] = np.inf  # a NaN on one side only is the worst difference
    return bad, diff


def compare(got, want, *, where="the result", rtol=1e-5, atol=1e-6) -> list:
    """Sentences describing how ``got`` differs from ``want`` ([] when they agree).

    Floats agree within ``atol + rtol * |want|`` and complex numbers when the size of their
    difference (both parts) is that small; integers, bools and strings must be equal.
    """
    if not isinstance(where, str):
        raise TypeError(f"where must be a string, e.g. where='the loss', got "
                        f"{type(where).__name__}")
    rtol, atol = _tolerance(rtol, "rtol"), _tolerance(atol, "atol")
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
    bad, diff = _mismatches(g, w, rtol, atol)
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
        problems.append(f"{where} differs: {size}{at} (yours {_fmt(g[idx])}, "
                        f"expected {_fmt(w[idx])}).")
    return problems


# -- running the functions ------------------------------------------------------------------------
def _own_copy(x, memo):
    """A copy of an argument that one function may change without the other, or the next case,
    seeing it: arrays, lists, tuples, dicts and sets are copied all the way down, a variable
    becomes a fresh one (same value, dtype, trainable flag); tensors (immutable), models,
    iterators and other objects are shared."""
    if id(x) in memo:                  # the same object twice in the arguments stays one object
        return memo[id(x)]
    if isinstance(x, tf.Variable):
        out = tf.Variable(x.read_value(), dtype=x.dtype, shape=x.shape, trainable=x.trainable,
                          name=x.name.split(":")[0])
    elif _is_variable(x):              # a Keras variable: keras is loaded
        out = sys.modules["keras"].Variable(x.numpy(), dtype=x.dtype, trainable=x.trainable,
                                            name=x.name)
    elif isinstance(x, np.ndarray):
        out = copy.deepcopy(x)
    elif isinstance(x, (list, dict)):
        out = memo[id(x)] = copy.copy(x)
        for k in (range(len(x)) if isinstance(x, list) else x):
            out[k] = _own_copy(x[k], memo)
    elif isinstance(x, tuple):
        items = [_own_copy(v, memo) for v in x]
        out = type(x)(*items) if hasattr(x, "_fields") else type(x)(items)   # namedtuples too
    else:
        out = copy.copy(x) if isinstance(x, (set, bytearray)) else x
    memo[id(x)] = out
    return out


_HINTS = (  # (words in the error, what to do): the first match is added to the message
    (("as a Python `bool`", "OperatorNotAllowedInGraph"),
     "a Python `if`, `and`, `or` or `while` on a tensor cannot run in this graph: use tf.where "
     "(element-wise) or tf.cond (one branch) instead"),
    (("has no attribute 'numpy'", "numpy() is only available"),
     ".numpy() does not exist inside a tf.function: stay with TensorFlow ops"),
    (("singleton tf.Variable", "creating variables on a non-first call"),
     "a tf.Variable is created inside the step on every call: create it once, outside the step"),
    (("unsupported operand type(s) for", "NoneType"),
     "a gradient is None: was the tensor watched (tape.watch for a plain tensor), and does the "
     "loss depend on it through TensorFlow ops only?"),
)


def explain(error: BaseException) -> str:
    """One or two lines a learner can act on: the error's type, its own message without the
    file paths and traceback TensorFlow wraps around it, and a hint for the common mistakes."""
    text = str(error)
    lines, after_file = [], False
    for ln in (raw.strip() for raw in text.splitlines()):
        if ln and not after_file:        # a traceback's `File ...` line and the source under it
            lines.append(ln)
        after_file = ln.startswith("File ") and not after_file
    keep = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "return ", "in user code",
                                                     "in converted code", "Detected at node",
                                                     "Encountered when calling",
                                                     "Graph execution error",
                                                     "<stack traces unavailable>", "[[{{node"))
            and "site-packages" not in ln and not ln.startswith("/")]
    message = " ".join(keep[:2]) if keep else (lines[-1] if lines else "")
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)    # TF's op wrapper name
    if len(message) > 240:
        message = message[:237] + "..."
    hint = next((h for words, h in _HINTS if any(w in text or w in type(error).__name__
                                                for w in words)), None)
    return f"{type(error).__name__}: {message}".strip().rstrip(":") + (f". Hint: {hint}." if hint else "")


def _bare(error: NotImplementedError) -> bool:
    """True for a bare ``raise NotImplementedError`` (also as a tf.function re-raises it, with
    its traceback in the message); False for one with a message of its own (NumPy's, say)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return all(ln.startswith(("File ", "Traceback", "in user code", "in converted code",
                              "raise NotImplementedError", "NotImplementedError"))
               or "site-packages" in ln or ln.startswith("/") for ln in lines)


def _call(fn, args, label):
    try:
        return fn(*args), None
    except NotImplementedError as e:
        if _bare(e):                     # the exercise's own `raise NotImplementedError`
            return None, f"{label}: not written yet (it raised NotImplementedError)."
        return None, f"{label}: raised {explain(e)}"   # e.g. NumPy given a symbolic tensor
    except Exception as e:  # noqa: BLE001 - the learner's error is the message
        return None, f"{label}: raised {explain(e)}"


def _gradients(fn, args):
    """Gradients of sum(fn(*args)) with respect to each floating-point argument."""
    tensors = [a if _is_variable(a) else tf.convert_to_tensor(a) for a in args]
    floats = [i for i, t in enumerate(tensors) if tf.as_dtype(t.dtype).is_floating]
    with tf.GradientTape() as tape:
        for i in floats:
            tape.watch(tensors[i])
        out = fn(*tensors)
        flat = [tf.cast(tf.reduce_sum(o), tf.float64) for o in tf.nest.flatten(out)
                if o is not None and tf.as_dtype(getattr(o, "dtype", tf.float32)).is_floating]
        total = tf.add_n(flat) if flat else tf.constant(0.0, tf.float64)
    return dict(zip(floats, tape.gradient(total, [tensors[i] for i in floats])))


def _gradient_problems(fn, reference, args, label, rtol, atol) -> list:
    g_want = _gradients(reference, _own_copy(args, {}))
    try:
        g_got = _gradients(fn, _own_copy(args, {}))
    except Exception as e:  # noqa: BLE001 - e.g. NumPy-only code given tensors
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
            problems += compare(gg, gw, where=f"{label}: the gradient w.r.t. argument {i}",
                                rtol=max(rtol, 1e-4), atol=max(atol, 1e-5))
    return problems


def check_function(fn, reference, cases, *, name=None, rtol=1e-5, atol=1e-6,
                   differentiable=False, verbose=False) -> Report:
    """Call ``fn`` and ``reference`` on each case and compare.

    cases:          a list; a tuple or list case holds the arguments of one call, anything else
                    is the only argument. Or a dict {label: arguments} whose labels say what each
                    case is. Each function gets its own copy of the arguments (_own_copy).
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
    name = _name_and_flags(name, fn, differentiable=differentiable, verbose=verbose)
    rtol, atol = _tolerance(rtol, "rtol"), _tolerance(atol, "atol")
    problems = []
    for label, args in cases:
        want, err = _call(reference, _own_copy(args, {}), "the reference")
        if err:
            raise RuntimeError(f"checker bug: {err} ({label} called it with {len(args)} "
                               f"argument(s); cases must be a list of argument tuples, e.g. "
                               f"[(x, y)] for one call with two arguments)")
        got, err = _call(fn, _own_copy(args, {}), label)
        if err:
            problems.append(err)
            if "not written yet" in err:
                break
            continue
        case_problems = compare(got, want, where=f"{label}: the result", rtol=rtol, atol=atol)
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
    n = _number(max_traces, "max_traces", "1", "an int >= 1")
    if not isinstance(n, numbers.Integral) or n < 1:
        error = TypeError if not isinstance(n, numbers.Integral) else ValueError
        raise error(f"max_traces must be an int >= 1, e.g. max_traces=1, got {max_traces!r}")
    cases = _normalise_cases(cases)
    name = _name_and_flags(name, fn, verbose=verbose)
    before = fn.experimental_get_tracing_count()
    problems = []
    for label, args in cases:
        _, err = _call(fn, args, label)
        if err:
            problems.append(err)
            break
    traces = fn.experimental_get_tracing_count() - before
    if not problems and traces > n:
        every = " It retraces on every call." if traces >= len(cases) > 1 else ""
        problems.append(f"traced {traces} times for {len(cases)} calls (allowed: {n})."
                        f"{every} Give it an input_signature with None for the varying axis, "
                        f"or pass tensors instead of Python numbers.")
    report = Report(name=name, problems=problems, cases=len(cases))
    if verbose:
        print(report)
    return report


# -- training steps -------------------------------------------------------------------------------
def _weights(model):
    """[(a name for messages, value)] of every weight (trainable or not), in the model's order."""
    out = []
    for k, v in enumerate(model.weights):
        layer = (getattr(v, "path", None) or v.name).split("/")
        short = "/".join(layer[-2:]) if len(layer) > 1 else layer[0]
        out.append((f"weight {k} ({short.split(':')[0]})", np.array(v.numpy())))
    return out


def _weight_problems(got, want, label, rtol, atol):
    if len(got) != len(want):
        return [f"on {label}, the model has {len(got)} weights, the reference's {len(want)}."]
    return [p for (name, g), (_, w) in zip(got, want)
            for p in compare(g, w, where=f"on {label}, {name} after the step", rtol=rtol, atol=atol)]


def check_step(factory, reference, build, batches, *, args=(), state=None, name=None,
               rtol=1e-5, atol=1e-6, max_traces=1, verbose=False) -> Report:
    """Train one fresh setup with the learner's step and one with the reference's; compare.

    factory:    the learner's ``factory(model, optimizer, *args) -> step``; ``step(*batch)``
                returns the loss (or whatever the exercise asks) and updates the model.
    reference:  the same, written right.
    build:      ``build() -> (model, optimizer)``, a fresh pair that starts from the same point
                each time it is called (seed it, or set fixed weights).
    batches:    a dict ``{label: batch}`` (or a list of batches); a batch is the tuple of
                arguments of one call. The label names the batch in messages, e.g.
                ``{"a batch whose gradient norm is above the clip": (x, y)}``; include one batch
                where the behaviour under test changes the result.
    state:      ``state(model, optimizer) -> dict`` of more things to compare after each call
                (the loss scale, a step counter).
    After every call the returned value, every weight of the model and ``state`` must match the
    reference's; the first call that differs is reported. The step must be a ``tf.function``
    that traces at most ``max_traces`` times over all batches (give batches of one shape unless
    the exercise is about shapes).
    """
    for arg, f in (("factory", factory), ("reference", reference), ("build", build)):
        if not callable(f):
            raise TypeError(f"{arg} must be a function, got {type(f).__name__}")
    if state is not None and not callable(state):
        raise TypeError(f"state must be a function (model, optimizer) -> dict, or None, got "
                        f"{type(state).__name__}")
    cases = _normalise_cases(batches)
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    name = _name_and_flags(name, factory, verbose=verbose)
    rtol, atol = _tolerance(rtol, "rtol"), _tolerance(atol, "atol")

    def report(problems):
        r = Report(name=name, problems=problems, cases=len(cases))
        if verbose:
            print(r)
        return r

    mine, theirs = build(), build()
    step, err = _call(factory, (*mine, *args), name)
    if err:
        return report([err])
    ref_step, err = _call(reference, (*theirs, *args), "the reference")
    if err:
        raise RuntimeError(f"checker bug: {err}")
    if not callable(step):
        return report([f"{name} returned {type(step).__name__}, not a step function: return the "
                       f"step (e.g. `return step`), not its result."])
    if not hasattr(step, "experimental_get_tracing_count"):
        return report([f"{name} returned a plain Python function: compile the step with "
                       f"@tf.function (or tf.function(step)) so it runs as one graph."])
    start = _weights(mine[0])
    for label, batch in cases:
        want, err = _call(ref_step, _own_copy(batch, {}), "the reference")
        if err:
            raise RuntimeError(f"checker bug: {err} (on {label})")
        got, err = _call(step, _own_copy(batch, {}), f"on {label}, your step")
        if err:
            return report([err])
        problems = compare(got, want, where=f"on {label}, the value your step returned",
                           rtol=rtol, atol=atol)
        w_got, w_want = _weights(mine[0]), _weights(theirs[0])
        weight_problems = _weight_problems(w_got, w_want, label, rtol, atol)
        unchanged = lambda ws: all(np.array_equal(a, b) for (_, a), (_, b) in zip(ws, start))  # noqa: E731
        if weight_problems and unchanged(w_got) and not unchanged(w_want):
            weight_problems = [f"on {label}, your step left every weight unchanged where the "
                               f"reference updated them: is optimizer.apply_gradients called?"]
        problems += weight_problems[:2]
        if state is not None and not weight_problems:
            problems += compare(state(*mine), state(*theirs),
                                where=f"on {label}, the optimizer state", rtol=rtol, atol=atol)
        if problems:
            return report(problems)
    traces = step.experimental_get_tracing_count()
    if traces > max_traces:
        return report([f"your step traced {traces} times for {len(cases)} calls (allowed: "
                       f"{max_traces}): a Python number or a new Python object in the arguments, "
                       f"or a tf.function created inside the step, retraces it."])
    return report([])
