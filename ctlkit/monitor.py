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
import threading
import time

import numpy as np

from .history import History
from .sinks import make_sink
from .plotter import Plotter, image_png
from .values import _PLAIN, NonFiniteError, _admit, check_first, gather, step_number

__all__ = ["Monitor", "NonFiniteError", "History"]


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
        self._image = None               # what show() was given: drawn at the next redraw
        self.picture = None              # PNG bytes of the last image shown

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

    def show(self, image):
        """Show a picture beside the curves (generated samples, the image being optimised),
        redrawn with them, under the same throttle. ``image``: an array (H, W[, 1|3|4]) of
        floats in [0, 1] or uint8, a matplotlib figure, PNG bytes, or a function of no
        arguments returning one: it is called at every redraw, so a costly rendering runs only
        when it will be seen, and its cost counts in the redraw's."""
        if self._closed:
            raise self._closed_error("show")
        if not callable(image):
            image_png(image)                     # a wrong shape or dtype fails here, not later
        self._image = image
        if self._started is None:
            self._start()
        now = time.perf_counter()
        if now - self._last_flush >= self.every and self._due(now):
            self._redraw(relayout=self._affords(self._full_s))

    def _picture(self):
        image = self._image
        if image is not None:
            self.picture = image_png(image() if callable(image) else image)
            if not callable(image):
                self._image = None               # shown; a function is drawn again each time

    def _redraw(self, relayout: bool):
        t0 = time.perf_counter()
        if self._started is None:
            self._start()
        self._convert()
        self._picture()
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
            elif p.full_draws != fulls:      # new axis limits: a full draw
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
            self._picture()
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
        return step_number(step, self._last_logged())

    def _check(self, loss, grad_norm, layer_norms, scalars):
        return check_first(loss, grad_norm, layer_norms, scalars, self._known,
                           self._known_layers, self.history.epoch_keys())

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
        steps, columns, first, problems = gather(pending, self.WATCHED if self.nonfinite is None
                                                 else None)
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
