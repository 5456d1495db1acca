"""The live training monitor: loss, gradient norms and any scalar, plotted while the loop runs.

    monitor = ctlkit.Monitor(total_steps=epochs * steps_per_epoch, title="digits MLP")
    with monitor:                                # Ctrl-C / "interrupt kernel" stops cleanly
        for epoch in range(epochs):
            for x, y in train_ds:
                loss, gnorm, per_layer = train_step(x, y)          # your step, your tensors
                monitor.log(loss=loss, grad_norm=gnorm, layer_norms=per_layer)
            monitor.log_epoch(val_accuracy=evaluate())
    monitor.history["loss"]                      # NumPy arrays, kept after an interrupt

``log()`` only appends the tensors to a buffer (about a microsecond); they are converted to
numbers in one batch when the picture is redrawn, so logging never forces a device sync per
step. The first value under each key is converted at once, so a wrong shape or kind fails at
the ``log()`` call that passed it. A variable (``optimizer.learning_rate``) is copied when
logged, since it changes afterwards; a value the step returns needs no copy. Call ``log()``
outside the compiled step: inside a ``tf.function`` it would run once, while tracing, so it
raises there.

Redraws come at most every ``every`` seconds, and less often when needed to keep the
monitor's whole cost (logging, conversion, drawing) within ``draw_budget`` (3 %) of the
loop's wall time, but at least every ``LONGEST_WAIT`` seconds; ``monitor.overhead()`` reports
what it actually cost. A redraw costs the same at step 1 000 and at step 1 000 000: the
picture shows a fixed number of points per curve (each bucket of steps keeps its smallest and
largest value, so spikes stay visible) while ``monitor.history`` keeps every value.

A NaN or Inf in the loss, a gradient norm or any end-of-epoch value is reported with the step
it first appeared at; ``stop_on_nonfinite=True`` also ends the run at that step (it checks
every step, which costs one device sync per step) and the ``with`` block ends quietly.

An interrupt (Ctrl-C, the kernel's stop button) ends the ``with`` block cleanly, with the
history and the final figure kept, and is then passed on, so the rest of the cell (the next
run of a loop over several monitored runs, say) does not start. A closed monitor is final:
``log()``, ``log_epoch()`` and a new ``with`` raise; start a new run with a new ``Monitor``.
"""
from __future__ import annotations

import math
import numbers
import operator
import signal
import sys
import threading
import time

import numpy as np

from .sinks import Plotter, make_sink


class NonFiniteError(FloatingPointError):
    """A logged loss, gradient norm or end-of-epoch value was NaN or Inf."""

    def __init__(self, key, step, value):
        self.key, self.step, self.value = key, step, value
        super().__init__(f"non-finite {key} ({value}) first seen at step {step}")


# -- what a logged value may be ----------------------------------------------------------------
_TRACED = ("{key} is a symbolic tensor: monitor.log() was called inside a tf.function, where "
           "it runs once, while tracing, and never again. Return {key} from the step function "
           "and call monitor.log() on what it returns, outside it.")
_KINDS = {}          # type -> "none", "number", "tensor", "array", "variable", "symbolic", "bad"
_PLAIN = {type(None), float, int, bool}  # types that log() may buffer as they are
_NUMBERS = {type(None), float, int, bool}  # ... of which NumPy converts a list in one call
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
            _PLAIN.add(t)
        if kind == "number":
            _NUMBERS.add(t)
    return kind


def _admit(key, v, now: bool):
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
        import tensorflow as tf                  # a variable exists, so TF is loaded

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
    except Exception as e:  # noqa: BLE001 (whatever the object raised, say which key it was)
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
    except Exception:  # noqa: BLE001 (the slow path finds and names the value)
        pass
    floats, unread, problem = [], [], None    # slow path: one by one, to name the culprit
    for i, (v, step) in enumerate(zip(values, steps)):
        try:
            floats.append(math.nan if v is None else _to_float(v, key))
        except Exception as e:  # noqa: BLE001 (a failed device op too: keep the other steps)
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


# -- the history --------------------------------------------------------------------------------
def _grown(buf, capacity, fill):
    new = np.full(capacity, fill, dtype=buf.dtype)
    new[:len(buf)] = buf
    return new


class History:
    """Every logged value: one float per step for each key (NaN where the key was not logged)
    and one per ``log_epoch()`` call for end-of-epoch keys.

    ``history["loss"]`` is a NumPy copy of a series, ``history.steps`` and
    ``history.epoch_steps`` the step numbers, ``len(history)`` the number of steps. The
    series grow in place (appending is amortized O(1)), and a change is published as one
    assignment, so an interrupt sees the history before or after it, never half-written.
    """

    def __init__(self):
        # (number of steps, step numbers, {key: values}); the buffers have spare room at
        # the end, which readers never see: only whole states are swapped in
        self._state = (0, np.zeros(0, np.int64), {})
        self._epochs = ((), {})                  # (steps, {key: values}), tuples: swapped whole
        self._envelopes = {}                     # (key, size limit) -> _Envelope, for drawing

    # -- reading ------------------------------------------------------------------------------
    def __len__(self):
        return self._state[0]

    @property
    def steps(self) -> np.ndarray:
        n, steps, _ = self._state
        return steps[:n].copy()

    @property
    def epoch_steps(self) -> np.ndarray:
        return np.array(self._epochs[0], dtype=np.int64)

    @property
    def last_step(self):
        n, steps, _ = self._state
        return int(steps[n - 1]) if n else None

    def __getitem__(self, key) -> np.ndarray:
        n, _, series = self._state
        if key in series:
            return series[key][:n].copy()
        if key in self._epochs[1]:
            return np.array(self._epochs[1][key], dtype=np.float64)
        raise KeyError(f"{key!r} was never logged; logged: {sorted(self.keys())}")

    def last(self, key):
        """The newest value under ``key`` (NaN if it was not logged then), or None."""
        n, _, series = self._state
        if key in series:
            return float(series[key][n - 1])
        vs = self._epochs[1].get(key)
        return vs[-1] if vs else None

    def keys(self):
        return self.step_keys() + self.epoch_keys()

    def step_keys(self):
        return list(self._state[2])

    def epoch_keys(self):
        return list(self._epochs[1])

    def __contains__(self, key):
        return key in self._state[2] or key in self._epochs[1]

    # -- writing ------------------------------------------------------------------------------
    def add(self, step: int, values: dict):
        self.extend([step], {k: [v] for k, v in values.items()})

    def extend(self, steps, columns: dict):
        """Append several steps at once: ``columns`` maps a key to one float per step (NaN
        where the key was not logged). A key seen for the first time is NaN before. Steps must
        increase. Everything is checked before anything changes."""
        steps = np.asarray(steps)
        if steps.ndim != 1 or (steps.size and steps.dtype.kind not in "iu"):
            raise TypeError(f"steps must be a list of ints, got {steps!r:.80}")
        k = len(steps)
        new = {}
        for key, vs in columns.items():
            try:
                a = np.asarray(vs, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise TypeError(f"column {key!r} must hold one float per step: {e}") from e
            if a.shape != (k,):
                raise ValueError(f"column {key!r} has shape {list(a.shape)} for {k} steps")
            if key in self._epochs[1]:
                raise ValueError(f"{key!r} is already an end-of-epoch key; give the per-step "
                                 f"value another name")
            new[key] = a
        n, step_buf, series = self._state
        if k == 0:
            return
        last = steps[0] - 1 if n == 0 else step_buf[n - 1]
        if not (np.diff(steps, prepend=last) > 0).all():
            raise ValueError(f"steps must increase: got {steps.tolist()[:8]} after step {last}")
        if n + k > len(step_buf):                # new buffers, with room to grow
            room = max(2 * len(step_buf), n + k, 1024)
            step_buf = _grown(step_buf[:n], room, 0)
            series = {key: _grown(buf[:n], room, math.nan) for key, buf in series.items()}
        else:
            series = dict(series)                # new keys stay unseen until the swap
        step_buf[n:n + k] = steps
        for key, buf in series.items():
            buf[n:n + k] = new.get(key, math.nan)
        for key, a in new.items():
            if key not in series:
                series[key] = np.full(len(step_buf), math.nan)
                series[key][n:n + k] = a
        self._state = (n + k, step_buf, series)  # the one change readers can see

    def add_epoch(self, step: int, values: dict):
        if step is None or isinstance(step, bool):
            raise TypeError(f"step must be an int, got {step!r}")
        step = operator.index(step)
        clash = [k for k in values if k in self._state[2]]
        if clash:
            raise ValueError(f"{clash[0]!r} is already a per-step key; give the end-of-epoch "
                             f"value another name (e.g. 'val_{clash[0]}')")
        floats = {k: float(v) for k, v in values.items()}
        steps, series = self._epochs
        grown = {k: vs + (floats.get(k, math.nan),) for k, vs in series.items()}
        for k, v in floats.items():
            if k not in grown:
                grown[k] = (math.nan,) * len(steps) + (v,)
        self._epochs = (steps + (step,), grown)

    # -- drawing ------------------------------------------------------------------------------
    def panels(self, max_points: int = 400):
        """[(panel title, [(label, steps, values, style)])]: at most four panels (loss,
        gradient norms, learning rate, other metrics), since each axis costs drawing time.
        Each curve has at most ``max_points`` points, whatever the length of the run, and
        the cost of this call does not grow with it either (see ``_Envelope``)."""
        if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) \
                or max_points < 8:
            raise ValueError(f"max_points must be an int >= 8, got {max_points!r}")
        n, step_buf, series = self._state
        steps, limit = step_buf[:n], (max_points - 4) // 2
        ep_steps, ep_series = self._epochs
        stride = max(1, -(-len(ep_steps) // max_points))
        ep = np.asarray(ep_steps[::stride], dtype=np.int64)

        def curve(key, label, style):
            values = series[key][:n]
            idx = self._envelope(key, limit, values).points(values)
            return label, steps[idx], values[idx], style

        def epoch_curve(key):
            return key, ep, np.asarray(ep_series[key][::stride], dtype=np.float64), "points"

        out = []
        if "loss" in series:
            values = series["loss"][:n]
            ends, means = self._envelope("loss", limit, values).means(values, max(1, n // 40))
            loss = [curve("loss", "loss", "raw"), ("smoothed", steps[ends], means, "line")]
            loss += [epoch_curve(k) for k in ep_series if k.endswith("loss")]
            out.append(("loss", loss))
        layers = [k for k in series if k.startswith("layer/")]
        short = [k.rsplit("/", 1)[-1] for k in layers]
        if len(set(short)) < len(short):
            short = [k[len("layer/"):] for k in layers]
        norms = [curve("grad_norm", "global", "bold")] if "grad_norm" in series else []
        norms += [curve(k, name, "line") for name, k in zip(short, layers)]
        if norms:
            out.append(("gradient norms", norms))
        other = [k for k in series if k not in ("loss", "grad_norm") and
                 not k.startswith("layer/")]
        lr = [k for k in other if k in ("lr", "learning_rate") or "learning_rate" in k]
        if lr:
            out.append(("learning rate", [curve(k, k, "line") for k in lr]))
        metrics = [curve(k, k, "line") for k in other if k not in lr]
        metrics += [epoch_curve(k) for k in ep_series if not k.endswith("loss")]
        if metrics:
            out.append(("metrics", metrics))
        return out

    def _envelope(self, key, limit, values):
        env = self._envelopes.get((key, limit))
        if env is None:
            env = self._envelopes[(key, limit)] = _Envelope(limit)
        env.update(values)
        return env


def _bucket_stats(values, start, count, size):
    """Per bucket of ``size`` values from ``start``: the index of its smallest and of its
    largest finite value (its first index if it has none), and the sum and the number of its
    finite values."""
    chunk = values[start:start + count * size].reshape(count, size)
    finite = np.isfinite(chunk)
    base = start + size * np.arange(count)
    lo = base + np.where(finite, chunk, np.inf).argmin(axis=1)
    hi = base + np.where(finite, chunk, -np.inf).argmax(axis=1)
    return lo, hi, np.where(finite, chunk, 0.0).sum(axis=1), finite.sum(axis=1).astype(float)


def _better(values, a, b, op):
    """Per pair, whichever of the indices ``a``, ``b`` points at the finite value that ``op``
    prefers (np.less: the smaller)."""
    va, vb = values[a], values[b]
    return np.where(np.isfinite(vb) & (~np.isfinite(va) | op(vb, va)), b, a)


class _Envelope:
    """What is drawn of one growing series, kept up to date as it grows.

    The values are cut into buckets of ``size`` consecutive steps; each bucket keeps where its
    smallest and largest finite values are (so a spike is drawn, not skipped by a stride) and
    the sum and count of its finite values (for the smoothed mean). When there are more than
    ``limit`` buckets, neighbours merge and ``size`` doubles. A redraw therefore reads at most
    ``limit`` buckets plus the newest values that do not fill one yet (fewer than ``size``),
    and each value is bucketed once: the cost does not grow with the length of the run.
    """

    def __init__(self, limit: int):
        self.limit, self.size, self.done = limit, 1, 0      # done: values in whole buckets
        self.lo = self.hi = np.zeros(0, np.int64)
        self.total = self.count = np.zeros(0)

    def update(self, values):
        if not self.done:                        # new, maybe for a long series: start at the
            while len(values) // self.size > self.limit:    # size merging would reach
                self.size *= 2
        fresh = (len(values) - self.done) // self.size
        if fresh:
            stats = _bucket_stats(values, self.done, fresh, self.size)
            self.lo, self.hi, self.total, self.count = (
                np.concatenate([old, new]) for old, new in
                zip((self.lo, self.hi, self.total, self.count), stats))
            self.done += fresh * self.size
        while len(self.lo) > self.limit:
            if len(self.lo) % 2:                 # the odd one out goes back to the tail
                self.lo, self.hi, self.total, self.count = (
                    a[:-1] for a in (self.lo, self.hi, self.total, self.count))
                self.done -= self.size
            self.lo = _better(values, self.lo[0::2], self.lo[1::2], np.less)
            self.hi = _better(values, self.hi[0::2], self.hi[1::2], np.greater)
            self.total = self.total[0::2] + self.total[1::2]
            self.count = self.count[0::2] + self.count[1::2]
            self.size *= 2

    def _with_tail(self, values):
        tail = len(values) - self.done
        if not tail:
            return self.lo, self.hi, self.total, self.count
        return tuple(np.concatenate([a, b]) for a, b in
                     zip((self.lo, self.hi, self.total, self.count),
                         _bucket_stats(values, self.done, 1, tail)))

    def points(self, values) -> np.ndarray:
        """Indices to draw, in order: the first and last value and each bucket's extremes."""
        n = len(values)
        if n == 0:
            return np.zeros(0, np.int64)
        lo, hi, _, _ = self._with_tail(values)
        idx = np.empty(2 * len(lo) + 2, np.int64)
        idx[0], idx[-1] = 0, n - 1
        idx[1:-1:2], idx[2:-1:2] = np.minimum(lo, hi), np.maximum(lo, hi)
        return idx[np.concatenate([[True], idx[1:] != idx[:-1]])]

    def means(self, values, window: int):
        """(index of each bucket's last value, mean of the finite values among the ``window``
        or so values that end there): a trailing mean, NaN where no value is finite."""
        n = len(values)
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        _, _, total, count = self._with_tail(values)
        k = max(1, round(window / self.size))    # the window, in buckets
        sums = np.concatenate([[0.0], np.cumsum(total)])
        counts = np.concatenate([[0.0], np.cumsum(count)])
        j = np.arange(1, len(total) + 1)
        lo = np.maximum(0, j - k)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (sums[j] - sums[lo]) / (counts[j] - counts[lo])
        return np.minimum(j * self.size - 1, n - 1), means


# -- the monitor --------------------------------------------------------------------------------
class Monitor:
    """Live plot of a hand-written training loop. See the module docstring."""

    WATCHED = ("loss", "grad_norm")  # plus every per-layer norm and every end-of-epoch value
    LONGEST_WAIT = 5.0               # seconds: redraw then even if the budget says not yet

    def __init__(self, total_steps: int | None = None, *, title: str = "training",
                 every: float = 0.5, sink="auto", stop_on_nonfinite: bool = False,
                 draw_budget: float = 0.03):
        if total_steps is not None:
            try:
                n = -1 if isinstance(total_steps, bool) else operator.index(total_steps)
            except (TypeError, AttributeError):  # 2.5, "10", [10], a float tensor
                n = -1
            if n < 1:
                raise ValueError(f"total_steps must be a positive int or None, got "
                                 f"{total_steps!r}; pass epochs * steps_per_epoch")
            total_steps = n
        if not isinstance(title, str):
            raise TypeError(f"title must be a str, got {type(title).__name__} {title!r:.40}")
        if isinstance(every, bool) or not isinstance(every, (numbers.Real, np.number)) or \
                not math.isfinite(every) or every <= 0:
            raise ValueError(f"every must be a positive number of seconds, got {every!r}; "
                             f"the monitor redraws at most that often (e.g. 0.5)")
        if isinstance(draw_budget, bool) or not isinstance(draw_budget, (numbers.Real,
                                                                          np.number)) \
                or not 0 < draw_budget < 1:
            raise ValueError(f"draw_budget must be a fraction in (0, 1), got {draw_budget!r}; "
                             f"e.g. 0.03 for 3 % of the loop's time")
        if not isinstance(stop_on_nonfinite, (bool, np.bool_)):
            raise TypeError(f"stop_on_nonfinite must be True or False, got "
                            f"{stop_on_nonfinite!r}")
        self.total_steps = total_steps
        self.title, self.every, self.draw_budget = title, float(every), float(draw_budget)
        self.stop_on_nonfinite = bool(stop_on_nonfinite)
        self.sink = make_sink(sink)
        self.plotter = Plotter(title)
        self._wants_png = bool(getattr(self.sink, "wants_png", False))
        self.history = History()
        self.step = 0
        self.nonfinite = None            # (key, step, value) of the first NaN/Inf
        self.interrupted = False
        self.stopped_reason = None
        self._pending, self._started, self._ended, self._closed = [], None, None, False
        self._in_with = False
        self._interrupt_pending, self._prev_sigint = False, None
        self._known = set()              # keys whose first value was checked (loss, lr, ...)
        self._known_layers = set()       # the layers of the first layer_norms= checked
        self._last_flush = 0.0
        self._spent = 0.0                # seconds spent inside the monitor during the loop
        self.startup_seconds = 0.0       # one-off: widget creation, matplotlib warm-up
        self.redraws = 0
        self._draw_s = None              # smoothed time of one redraw that blits
        self._full_s = None              # ... and of one that draws new axis limits
        self._drawn = 0.0                # total steady-state drawing time

    # -- the loop calls these ---------------------------------------------------------------
    def log(self, step: int | None = None, *, loss=None, grad_norm=None, layer_norms=None,
            **scalars):
        """Record one training step. Values may be tensors, NumPy or Python numbers, one
        scalar each; ``step`` (optional) must increase from call to call."""
        if self._closed:
            raise self._closed_error("log")
        if self._interrupt_pending:              # an interrupt that something swallowed
            self._interrupt_pending = False
            raise KeyboardInterrupt("interrupted (the first KeyboardInterrupt was swallowed "
                                    "inside a library call; ctlkit.Monitor raises it again)")
        if self._started is None:
            self._start()
        t0 = time.perf_counter()
        if layer_norms is not None and not isinstance(layer_norms, dict):
            raise TypeError("layer_norms must be a dict {layer name: norm}, as returned by "
                            "ctlkit.grads.layer_norms(grads, variables)")
        if loss is None and grad_norm is None and not scalars and not layer_norms:
            raise ValueError("log() got no values; pass loss=..., grad_norm=..., "
                             "layer_norms={...} or any scalar by name (accuracy=...)")
        step = self.step + 1 if step is None else self._step_number(step)
        plain, known = _PLAIN, self._known       # the fast path: types and keys seen before
        if not (type(loss) in plain and type(grad_norm) in plain
                and (loss is None or "loss" in known)
                and (grad_norm is None or "grad_norm" in known)
                and (not scalars or (known.issuperset(scalars)
                                     and plain.issuperset(map(type, scalars.values()))))
                and (layer_norms is None or self._known_layers)):
            loss, grad_norm, layer_norms, scalars = self._check(loss, grad_norm, layer_norms,
                                                                scalars)
        # kept as given: keys are built and tensors read in one batch at the next redraw
        self._pending.append((step, loss, grad_norm,
                              None if layer_norms is None else dict(layer_norms), scalars))
        self.step = step
        if self.stop_on_nonfinite:   # check every step: costs one device sync per step
            self._convert()
            self._raise_if_nonfinite()
        self._spent += time.perf_counter() - t0
        if t0 - self._last_flush >= self.every and self._due(t0):
            self._redraw(relayout=self._affords(self._full_s))  # new limits if affordable

    def log_epoch(self, **scalars):
        """Record end-of-epoch scalars (validation loss/accuracy...), drawn as points. A NaN
        or Inf among them is reported like one in the loss."""
        if self._closed:
            raise self._closed_error("log_epoch")
        scalars = {k: v for k, v in scalars.items() if v is not None}
        if not scalars:
            raise ValueError("log_epoch() got no values; pass them by name, e.g. "
                             "monitor.log_epoch(val_loss=v_loss, val_accuracy=v_acc)")
        for k in scalars:
            if k.startswith("layer/"):
                raise ValueError(f"{k!r}: names starting with 'layer/' are for layer_norms=")
            if k in self._known:
                raise ValueError(f"{k!r} is already logged per step; give the end-of-epoch "
                                 f"value another name (e.g. 'val_{k}')")
        if self._started is None:
            self._start()
        t0 = time.perf_counter()
        floats = {k: _admit(k, v, now=True) for k, v in scalars.items()}  # all, then keep
        try:
            self._convert()      # the steps before this epoch first, and their NaN watch
        finally:
            self.history.add_epoch(self.step, floats)
            bad = [(k, v) for k, v in floats.items() if not math.isfinite(v)]
            if bad and self.nonfinite is None:
                self._report_nonfinite(bad[0][0], self.step, bad[0][1])
        self._spent += time.perf_counter() - t0
        self._raise_if_nonfinite()
        if self._due(t0):  # otherwise drawn with the next redraw
            self._redraw(relayout=self._affords(self._full_s))

    def flush(self):
        """Convert buffered values, check them and redraw now (after close(): nothing to do,
        the final figure is drawn)."""
        if not self._closed:
            self._redraw(relayout=True)

    def _redraw(self, relayout: bool):
        t0 = time.perf_counter()
        if self._started is None:
            self._start()
        self._convert()
        png, one_off = None, 0.0
        if self._wants_png and self.history.keys():
            p = self.plotter
            layouts, fulls = p.layout_changes, p.full_draws
            d0 = time.perf_counter()
            png = p.render(self.history, self.total_steps, relayout=relayout)
            draw = time.perf_counter() - d0
            if p.layout_changes != layouts:  # a new panel or line: one-off, like start-up
                one_off = draw               # first guesses: high for a full draw, fair for a blit
                self._full_s = self._full_s or draw
                self._draw_s = self._draw_s or p.last_blit_seconds or draw
            else:
                self._drawn += draw
                if p.full_draws != fulls:    # new axis limits: a full draw
                    self._full_s = draw if self._full_s is None else 0.5 * (self._full_s + draw)
                else:
                    self._draw_s = draw if self._draw_s is None else 0.7 * self._draw_s + 0.3 * draw
        self.sink.send(self, png)
        self.redraws += 1
        self._last_flush = time.perf_counter()
        self.startup_seconds += one_off
        self._spent += self._last_flush - t0 - one_off
        self._raise_if_nonfinite()

    def _due(self, now) -> bool:
        """Redraw when ``every`` seconds have passed and everything the monitor has cost so far
        (logging, conversion, drawing) plus one more redraw stays within ``draw_budget`` of the
        loop's wall time, whatever the step rate; after ``LONGEST_WAIT`` seconds in any case
        (a redraw in that time is a fraction of a percent), so the picture never freezes."""
        waited = now - self._last_flush
        if waited < self.every:
            return False
        return waited >= self.LONGEST_WAIT or self._affords(self._draw_s, now)

    def _affords(self, cost, now=None) -> bool:
        wall = (now or time.perf_counter()) - self._started
        return self._spent + (cost or 0.0) <= self.draw_budget * wall

    def close(self):
        """Final redraw; the widget becomes a static PNG. Called by ``with`` automatically.
        Closing twice does nothing; after close() the monitor only answers questions."""
        if self._closed:
            return
        if self._started is None:
            self._start()
        self._closed, self._ended = True, time.perf_counter()
        try:
            self._convert()      # may raise for a value it cannot read, after keeping the rest
        finally:
            final = getattr(self.sink, "wants_final_png", self._wants_png)
            png = (self.plotter.render(self.history, self.total_steps)
                   if self.history.keys() and final else None)
            self.sink.close(self, png)

    def __enter__(self):
        if self._closed:
            raise self._closed_error("with")
        if self._in_with:
            raise RuntimeError("this Monitor is already in a with block; one with block per "
                               "run (a nested run needs its own ctlkit.Monitor)")
        if self._started is None:
            self._start()
        self._in_with = True
        self._watch_sigint()
        return self

    def _watch_sigint(self):
        """Inside the with block, note every SIGINT before Python raises KeyboardInterrupt: a
        KeyboardInterrupt raised inside a finalizer or a library callback is swallowed there
        ("Exception ignored in ..."), and the note lets the next log() raise it again."""
        if threading.current_thread() is not threading.main_thread():
            return                               # signal handlers live in the main thread
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):               # SIG_IGN / SIG_DFL / None: leave them be
            return

        def on_sigint(signum, frame):
            self._interrupt_pending = True
            previous(signum, frame)              # normally default_int_handler: raises

        self._prev_sigint = previous
        signal.signal(signal.SIGINT, on_sigint)

    def _unwatch_sigint(self):
        if self._prev_sigint is not None:
            signal.signal(signal.SIGINT, self._prev_sigint)
            self._prev_sigint = None

    def __exit__(self, exc_type, exc, tb):
        self._in_with = False
        self._unwatch_sigint()
        self._interrupt_pending = False          # this one is being handled now
        interrupt = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        nonfinite = exc_type is not None and issubclass(exc_type, NonFiniteError)
        last = self._last_logged()
        if last is not None and last > self.step:
            self.step = last                     # an interrupt between two lines of log()
        if interrupt:
            self.interrupted, self.stopped_reason = True, f"interrupted at step {self.step}"
        elif nonfinite:
            self.stopped_reason = str(exc)
        try:
            self.close()
        finally:
            if interrupt or nonfinite:
                print(f"[ctlkit.monitor] stopped cleanly: {self.stopped_reason}. "
                      f"The model and monitor.history are kept."
                      + (" The interrupt is passed on: the rest of the cell does not run."
                         if interrupt else ""))
        # a NaN stop is what the run asked for: the code after the with block goes on. An
        # interrupt goes on up (returning False), so one press stops the whole cell.
        return nonfinite

    # -- numbers for the reader -------------------------------------------------------------
    def fraction_done(self):
        return None if not self.total_steps else min(1.0, self.step / self.total_steps)

    def elapsed(self) -> float:
        """Seconds from the first step to now, or to close()."""
        if self._started is None:
            return 0.0
        return (self._ended or time.perf_counter()) - self._started

    def overhead(self) -> float:
        """Fraction of the loop's wall time spent inside log/flush/redraw (the one-off
        start-up, ``startup_seconds``, is excluded: it does not grow with the run)."""
        wall = self.elapsed()
        return self._spent / wall if wall > 0 else 0.0

    def status_line(self, final: bool = False) -> str:
        el = self.elapsed()
        rate = self.step / el if el > 0 else 0.0
        parts = [f"step {self.step}" + (f"/{self.total_steps}" if self.total_steps else "")]
        parts.append(f"{rate:.1f} steps/s")
        if self.total_steps and not final and rate > 0:
            parts.append(f"ETA {max(0.0, (self.total_steps - self.step) / rate):.0f}s")
        if final:
            parts.append(f"{el:.1f}s")
        h = self.history
        keys = [k for k in ("loss", "grad_norm") if k in h]
        keys += [k for k in h.keys() if k not in ("loss", "grad_norm") and
                 not k.startswith("layer/")]
        parts += [f"{k} {h.last(k):.4g}" for k in keys if h.last(k) is not None]
        if self.nonfinite:
            parts.append(f"NON-FINITE {self.nonfinite[0]} at step {self.nonfinite[1]}")
        if self.interrupted:
            parts.append("interrupted")
        return " · ".join(parts)

    # -- internals --------------------------------------------------------------------------
    def _closed_error(self, what):
        return RuntimeError(f"{what}: this Monitor ({self.title!r}) was closed at step "
                            f"{self.step}, so its history is final and nothing more can be "
                            f"logged; start the next run with a new ctlkit.Monitor(...)")

    def _last_logged(self):
        return self._pending[-1][0] if self._pending else self.history.last_step

    def _step_number(self, step) -> int:
        try:
            if isinstance(step, bool):
                raise TypeError
            step = operator.index(step)
        except (TypeError, AttributeError):      # (a float tensor raises the latter)
            raise TypeError(f"step must be an int (or left out to count steps), got "
                            f"{type(step).__name__} {step!r:.40}") from None
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        last = self._last_logged()
        if last is not None and step <= last:
            raise ValueError(f"step must increase: got {step} after step {last}; leave it "
                             f"out to count steps, or use a new Monitor for a new run")
        return step

    def _check(self, loss, grad_norm, layer_norms, scalars):
        """The slow path of log(): a type it has not seen, a value to copy, or a key it has
        not checked yet. The first value under each key is converted now, so that a wrong
        shape or kind fails here rather than at a later redraw."""
        first = not self._known and not self._known_layers
        known, epoch_keys = self._known, self.history.epoch_keys()
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
        checked = {k: _admit(k, v, k not in known) for k, v in named.items()}
        loss, grad_norm = checked.pop("loss"), checked.pop("grad_norm")
        if layer_norms is not None:
            for k in layer_norms:
                if not isinstance(k, str):
                    raise TypeError(f"layer_norms keys must be layer names (str), got {k!r}")
            layer_norms = {k: _admit(f"layer_norms[{k!r}]", v, k not in self._known_layers)
                           for k, v in layer_norms.items()}
            self._known_layers.update(k for k, v in layer_norms.items() if v is not None)
        tf = sys.modules.get("tensorflow")
        if first and tf is not None and tf.inside_function():   # only Python numbers given
            raise RuntimeError("monitor.log() was called inside a tf.function, where it runs "
                               "once, while tracing. Return the values from the step function "
                               "and log them outside it.")
        known.update(k for k, v in checked.items() if v is not None)
        known.update(k for k, v in (("loss", loss), ("grad_norm", grad_norm)) if v is not None)
        return loss, grad_norm, layer_norms, checked

    def _start(self):
        t0 = time.perf_counter()
        if hasattr(self.sink, "start"):
            self.sink.start(self)
        if self._wants_png:
            Plotter.warm_up()
        self._started = time.perf_counter()
        self.startup_seconds = self._started - t0
        self._last_flush = self._started

    def _convert(self):
        """Turn the buffered values into floats, one batched conversion per key, and add them
        to the history. Nothing is lost on the way: the buffer is emptied only after the
        history holds its steps, and a value that cannot be read is kept as missing (NaN, not
        an alarm) while every other value is kept; then the error names its key and step."""
        pending = self._pending
        last = self.history.last_step
        done = 0                                 # already in the history: an interrupt landed
        while done < len(pending) and last is not None and pending[done][0] <= last:
            done += 1                            # between the history's update and ours
        if done:
            del pending[:done]
        if not pending:
            return
        # key -> one value (or None) per step: named scalars, loss, grad_norm, layer/...
        steps, losses, gnorms, layers, scalars = zip(*pending)
        raw = _columns(scalars)
        raw.update({k: vs for k, vs in (("loss", losses), ("grad_norm", gnorms))
                    if vs.count(None) < len(vs)})
        raw.update(_columns(layers, prefix="layer/"))
        columns, problems = {}, []
        first = None                             # (index, key, value): the earliest NaN/Inf
        for k, vs in raw.items():
            columns[k], unread, problem = _to_floats(vs, k, steps)
            if problem:
                problems.append(problem)
            if self.nonfinite is None and (k in self.WATCHED or k.startswith("layer/")):
                for i in np.flatnonzero(~np.isfinite(columns[k])):
                    if vs[i] is not None and i not in unread:      # logged, and read: NaN/Inf
                        if first is None or i < first[0]:  # the earliest step, then key order
                            first = (int(i), k, float(columns[k][i]))
                        break
        if first is not None:                    # before the history changes: not lost
            self._report_nonfinite(first[1], steps[first[0]], first[2])
        count = len(pending)
        self.history.extend(steps, columns)
        del pending[:count]
        if problems:
            more = f" ({len(problems) - 1} more keys too)" if len(problems) > 1 else ""
            raise ValueError(f"{problems[0]}{more}. That value is recorded as missing (NaN); "
                             f"every other value of all {count} steps is in monitor.history.")

    def _report_nonfinite(self, key, step, value):
        self.nonfinite = (key, step, value)
        print(f"[ctlkit.monitor] non-finite {key} ({value}) first seen at step {step}.")

    def _raise_if_nonfinite(self):
        if self.nonfinite and self.stop_on_nonfinite and not self._closed:
            raise NonFiniteError(*self.nonfinite)
