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
step. Redraws come at most every ``every`` seconds, and less often when needed to keep the
monitor's whole cost (logging, conversion, drawing) within ``draw_budget`` (3 %) of the
loop's wall time; ``monitor.overhead()`` reports what it actually cost. A NaN or Inf in the
loss or a gradient norm is reported with the step it first appeared at;
``stop_on_nonfinite=True`` also ends the run at that step (it checks every step, which costs
one device sync per step).
"""
from __future__ import annotations

import math
import time

import numpy as np

from .sinks import Plotter, make_sink


class NonFiniteError(FloatingPointError):
    """A logged loss or gradient norm was NaN or Inf."""

    def __init__(self, key, step, value):
        self.key, self.step, self.value = key, step, value
        super().__init__(f"non-finite {key} ({value}) first seen at step {step}")


def _to_float(v, key="value") -> float:
    if hasattr(v, "numpy"):
        v = v.numpy()  # about a microsecond for a scalar already on the host
    if isinstance(v, (float, int, np.floating, np.integer)):
        return float(v)
    a = np.asarray(v, dtype=np.float64)
    if a.size != 1:
        raise ValueError(f"{key} must be a scalar, got shape {list(a.shape)}; log a mean "
                         f"(e.g. tf.reduce_mean of a per-sample loss)")
    return float(a.reshape(()))


def _to_floats(values, key="value") -> list:
    """Floats for a list of scalars (tensors, NumPy, Python); None becomes NaN."""
    try:  # fast path: every value a scalar tensor, NumPy scalar or number
        a = np.array([math.nan if v is None else v.numpy() if hasattr(v, "numpy") else v
                      for v in values], dtype=np.float64)
        if a.shape == (len(values),):
            return a.tolist()
    except (TypeError, ValueError):
        pass
    return [math.nan if v is None else _to_float(v, key) for v in values]  # names the culprit


def _columns(dicts, prefix: str = "") -> dict:
    """[{key: value} or None per step] -> {prefix + key: [value or None per step]}."""
    keys = dict.fromkeys(k for d in dicts if d for k in d)
    return {f"{prefix}{k}": [d.get(k) if d else None for d in dicts] for k in keys}


class History:
    """Per-step and per-epoch scalars, as growing NumPy-backed series."""

    def __init__(self):
        self.steps, self.series, self.epoch_steps, self.epoch_series = [], {}, [], {}

    def add(self, step: int, values: dict):
        self.extend([step], {k: [v] for k, v in values.items()})

    def extend(self, steps: list, columns: dict):
        """Append several steps at once: ``columns`` maps a key to one float per step (NaN
        where the key was not logged). A key seen for the first time is NaN-padded before."""
        n0 = len(self.steps)
        self.steps.extend(steps)
        n = len(self.steps)
        for k, vs in columns.items():
            if len(vs) != len(steps):
                raise ValueError(f"column {k!r} has {len(vs)} values for {len(steps)} steps")
            series = self.series.get(k)
            if series is None:  # (not setdefault: its default would be built on every call)
                series = self.series[k] = [math.nan] * n0
            series.extend(vs)
        for vs in self.series.values():  # a key missing from these steps gets NaN
            if len(vs) < n:
                vs.extend([math.nan] * (n - len(vs)))

    def add_epoch(self, step: int, values: dict):
        for k, v in values.items():
            if k not in self.epoch_series:
                self.epoch_series[k] = [math.nan] * len(self.epoch_steps)
            self.epoch_series[k].append(v)
        self.epoch_steps.append(step)
        for vs in self.epoch_series.values():
            if len(vs) < len(self.epoch_steps):
                vs.append(math.nan)

    def __getitem__(self, key) -> np.ndarray:
        if key in self.series:
            return np.asarray(self.series[key])
        if key in self.epoch_series:
            return np.asarray(self.epoch_series[key])
        raise KeyError(f"{key!r} was never logged; logged: {sorted(self.keys())}")

    def keys(self):
        return list(self.series) + list(self.epoch_series)

    def __contains__(self, key):
        return key in self.series or key in self.epoch_series

    def panels(self, max_points: int = 400):
        """[(panel title, [(label, steps, values, style)])]: at most four panels (loss,
        gradient norms, learning rate, other metrics), since each axis costs drawing time."""
        steps = np.asarray(self.steps)
        stride = max(1, len(steps) // max_points)
        s = steps[::stride]
        ep = np.asarray(self.epoch_steps)
        out = []

        def smooth(v):  # trailing mean over the last w steps (fewer at the start)
            w = max(1, len(v) // 40)
            if w == 1 or not np.isfinite(v).all():
                return v[::stride]
            c = np.concatenate([[0.0], np.cumsum(v)])
            n = np.arange(1, len(v) + 1)
            lo = np.maximum(0, n - w)
            return ((c[n] - c[lo]) / (n - lo))[::stride]

        if "loss" in self.series:
            v = np.asarray(self.series["loss"])
            loss = [("loss", s, v[::stride], "raw"), ("smoothed", s, smooth(v), "line")]
            loss += [(k, ep, np.asarray(vs), "points") for k, vs in self.epoch_series.items()
                     if k.endswith("loss")]
            out.append(("loss", loss))
        layers = [k for k in self.series if k.startswith("layer/")]
        short = [k.rsplit("/", 1)[-1] for k in layers]
        if len(set(short)) < len(short):
            short = [k[len("layer/"):] for k in layers]
        norms = [("global", s, np.asarray(self.series["grad_norm"])[::stride], "bold")
                 ] if "grad_norm" in self.series else []
        norms += [(n, s, np.asarray(self.series[k])[::stride], "line")
                  for n, k in zip(short, layers)]
        if norms:
            out.append(("gradient norms", norms))
        other = [k for k in self.series if k not in ("loss", "grad_norm") and
                 not k.startswith("layer/")]
        lr = [k for k in other if k in ("lr", "learning_rate") or "learning_rate" in k]
        if lr:
            out.append(("learning rate", [(k, s, np.asarray(self.series[k])[::stride], "line")
                                          for k in lr]))
        metrics = [(k, s, np.asarray(self.series[k])[::stride], "line")
                   for k in other if k not in lr]
        metrics += [(k, ep, np.asarray(vs), "points") for k, vs in self.epoch_series.items()
                    if not k.endswith("loss")]
        if metrics:
            out.append(("metrics", metrics))
        return out


class Monitor:
    """Live plot of a hand-written training loop. See the module docstring."""

    WATCHED = ("loss", "grad_norm")  # plus every per-layer norm

    def __init__(self, total_steps: int | None = None, *, title: str = "training",
                 every: float = 0.5, sink="auto", stop_on_nonfinite: bool = False,
                 draw_budget: float = 0.03):
        if total_steps is not None and (isinstance(total_steps, bool) or
                                        not isinstance(total_steps, (int, np.integer))
                                        or total_steps < 1):
            raise ValueError(f"total_steps must be a positive int or None, got {total_steps!r}; "
                             f"pass epochs * steps_per_epoch")
        if isinstance(every, bool) or not isinstance(every, (int, float)) or \
                not math.isfinite(every) or every <= 0:
            raise ValueError(f"every must be a positive number of seconds, got {every!r}")
        if isinstance(draw_budget, bool) or not isinstance(draw_budget, (int, float)) or \
                not 0 < draw_budget < 1:
            raise ValueError(f"draw_budget must be a fraction in (0, 1), got {draw_budget!r}")
        self.total_steps = None if total_steps is None else int(total_steps)
        self.title, self.every, self.draw_budget = title, float(every), draw_budget
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
        """Record one training step. Values may be tensors, NumPy or Python numbers."""
        if self._started is None:
            self._start()
        t0 = time.perf_counter()
        if layer_norms is not None and not isinstance(layer_norms, dict):
            raise TypeError("layer_norms must be a dict {layer name: norm}, as returned by "
                            "ctlkit.grads.layer_norms(grads, variables)")
        self.step = self.step + 1 if step is None else int(step)
        # kept as given: keys are built and tensors read in one batch at the next redraw
        self._pending.append((self.step, loss, grad_norm,
                              None if layer_norms is None else dict(layer_norms), scalars))
        if self.stop_on_nonfinite:   # check every step: costs one device sync per step
            self._convert()
        self._spent += time.perf_counter() - t0
        self._raise_if_nonfinite()
        if self._due(t0):  # new axis limits only when the budget affords a full draw
            self._redraw(relayout=self._affords(self._full_s))

    def log_epoch(self, **scalars):
        """Record end-of-epoch scalars (validation loss/accuracy...), drawn as points."""
        t0 = time.perf_counter()
        self._convert()
        self.history.add_epoch(self.step, {k: _to_float(v, k) for k, v in scalars.items()})
        self._spent += time.perf_counter() - t0
        if self._due(t0):  # otherwise drawn with the next redraw
            self._redraw(relayout=self._affords(self._full_s))

    def flush(self):
        """Convert buffered values, check them and redraw now."""
        self._redraw(relayout=True)

    def _redraw(self, relayout: bool):
        t0 = time.perf_counter()
        if self._started is None:
            self._start()
        self._convert()
        png, one_off = None, 0.0
        if self._wants_png and self.history.steps:
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
        loop's wall time, whatever the step rate."""
        if now - self._last_flush < self.every:
            return False
        return self._affords(self._draw_s, now)

    def _affords(self, cost, now=None) -> bool:
        wall = (now or time.perf_counter()) - self._started
        return self._spent + (cost or 0.0) <= self.draw_budget * wall

    def close(self):
        """Final redraw; the widget becomes a static PNG. Called by ``with`` automatically."""
        if self._closed:
            return
        if self._started is None:
            self._start()
        self._convert()
        self._closed, self._ended = True, time.perf_counter()
        final = getattr(self.sink, "wants_final_png", self._wants_png)
        png = (self.plotter.render(self.history, self.total_steps)
               if self.history.steps and final else None)
        self.sink.close(self, png)

    def __enter__(self):
        if self._started is None:
            self._start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is KeyboardInterrupt:
            self.interrupted, self.stopped_reason = True, f"interrupted at step {self.step}"
        elif exc_type is NonFiniteError:
            self.stopped_reason = str(exc)
        self.close()
        if self.stopped_reason and exc_type is not None:
            print(f"[ctlkit.monitor] stopped cleanly: {self.stopped_reason}. "
                  f"The model and monitor.history are kept.")
        return exc_type in (KeyboardInterrupt, NonFiniteError)

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
        for key in ("loss", "grad_norm"):
            if key in self.history.series and self.history.series[key]:
                parts.append(f"{key} {self.history.series[key][-1]:.4g}")
        for k, vs in list(self.history.series.items()) + list(self.history.epoch_series.items()):
            if k not in ("loss", "grad_norm") and not k.startswith("layer/") and vs:
                parts.append(f"{k} {vs[-1]:.4g}")
        if self.nonfinite:
            parts.append(f"NON-FINITE {self.nonfinite[0]} at step {self.nonfinite[1]}")
        if self.interrupted:
            parts.append("interrupted")
        return " · ".join(parts)

    # -- internals --------------------------------------------------------------------------
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
        """Turn the buffered values into floats: one batched conversion per key, not one
        Python dict per step."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        # key -> one value (or None) per step: named scalars, loss, grad_norm, layer/...
        steps, losses, gnorms, layers, scalars = zip(*pending)
        raw = _columns(scalars)
        raw.update({k: list(vs) for k, vs in (("loss", losses), ("grad_norm", gnorms))
                    if any(v is not None for v in vs)})
        raw.update(_columns(layers, prefix="layer/"))
        columns = {k: _to_floats(vs, k) for k, vs in raw.items()}
        self.history.extend(list(steps), columns)
        if self.nonfinite is None:                         # the earliest step, then key order
            first = None
            for k, vs in columns.items():
                if k not in self.WATCHED and not k.startswith("layer/"):
                    continue
                bad = ~np.isfinite(np.asarray(vs))
                bad &= np.fromiter((v is not None for v in raw[k]), bool, len(vs))
                if bad.any():
                    i = int(np.argmax(bad))
                    if first is None or i < first[0]:
                        first = (i, k, vs[i])
            if first is not None:
                i, k, v = first
                self.nonfinite = (k, steps[i], v)
                print(f"[ctlkit.monitor] non-finite {k} ({v}) first seen at step {steps[i]}.")

    def _raise_if_nonfinite(self):
        if self.nonfinite and self.stop_on_nonfinite and not self._closed:
            raise NonFiniteError(*self.nonfinite)
