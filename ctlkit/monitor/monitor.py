"""The live training monitor: loss, gradient norms and any scalar, plotted while the loop runs.

    monitor = ctlkit.Monitor(total_steps=epochs * steps_per_epoch, title="digits MLP")
    with monitor:                                # Ctrl-C / "interrupt kernel" stops cleanly
        for epoch in range(epochs):
            for x, y in train_ds:
                loss, gnorm, per_layer = train_step(x, y)          # your step, your tensors
                monitor.log(loss=loss, grad_norm=gnorm, layer_norms=per_layer)
            monitor.log_epoch(val_accuracy=evaluate())
    monitor.history["loss"]                      # NumPy arrays, kept after an interrupt

``log()`` only appends the values to a buffer (``buffer.py``); tensors are read in one batch per
key at a redraw, so logging never forces a device sync per step. Inside a ``tf.function`` it
would run once, while tracing, so it raises there: call it from the Python loop.

Throttle: redraw when ``now - last >= max(every, last_cost / draw_budget)``, ``last_cost`` being
what the previous redraw cost. At a redraw the sink (``sinks.py``) draws the picture with its own
plotter, where a full draw (new axis limits, several blits' cost) follows the same rule, timed
apart. Start-up (the widget, matplotlib's fonts) and the full draws for a new panel or curve
are one-off (``startup_seconds``): they do not stretch the wait, since that would leave the live
plot blank for a while, but they are counted. ``overhead()`` says what it all cost: every second
spent in the monitor's calls, start-up, first draw and close() included, over the loop's time.
Every time is read from ``clock`` (``time.perf_counter`` unless given), by the monitor, its sink
and the sink's plotter alike: a test passes a clock it moves by hand, so the throttle can be
checked step by step, with no real waiting. A picture holds a bounded number of curves
(``History.panels``: eight per group and one band for the rest), so no draw grows with the number
of layers logged.

A NaN or Inf in the loss, a gradient norm or an end-of-epoch value is reported with its step;
``stop_on_nonfinite=True`` also ends the run there (one device sync per step). An interrupt ends
the ``with`` block cleanly, history and figure kept, and is passed on. A closed monitor is final.
"""
from __future__ import annotations

import math
import time

from .. import validate
from .buffer import Buffer
from .history import History
from .plotter import image_png
from .sigint import SigintNote
from .sinks import make_sink, status_line
from .values import NonFiniteError, epoch_values, step_number

__all__ = ["Monitor", "NonFiniteError", "History"]


class Monitor:
    """Live plot of a hand-written training loop. See the module docstring."""

    WATCHED = ("loss", "grad_norm")  # plus every per-layer norm and every end-of-epoch value

    def __init__(self, total_steps: int | None = None, *, title: str = "training",
                 every: float = 0.5, sink="auto", stop_on_nonfinite: bool = False,
                 draw_budget: float = 0.02, clock=None):
        if total_steps is not None:
            total_steps = validate.positive_int("total_steps", total_steps,
                                                example="epochs * steps_per_epoch")
        if not isinstance(title, str):
            raise TypeError(f"title must be a str, got {type(title).__name__} {title!r:.40}")
        self.total_steps, self.title = total_steps, title
        self.every = validate.number("every", every, low=0, low_open=True, example=0.5)
        self.draw_budget = validate.number("draw_budget", draw_budget, low=0, high=1,
                                           low_open=True, high_open=True, example=0.02)
        self.stop_on_nonfinite = validate.flag("stop_on_nonfinite", stop_on_nonfinite)
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a function returning seconds (like time.perf_counter, "
                            f"the default), got {type(clock).__name__} {clock!r:.40}")
        self.clock = time.perf_counter if clock is None else clock   # the sinks read it too
        self.sink = make_sink(sink)
        self.history = History()
        self.step = 0                    # the last step logged
        self.redraws = 0
        self.nonfinite = None            # (key, step, value) of the first NaN/Inf seen
        self.interrupted = False
        self.stopped_reason = None
        self._buffer = Buffer()          # what log() appended since the last redraw
        self._started = None             # clock time of the first call (start-up included)
        self._ended = None               # clock time when close() ended
        self._closed = False
        self._in_with = False
        self._sigint = SigintNote()
        self._last_flush = 0.0           # when the last redraw ended
        self._wait = self.every          # the wait after it (the throttle)
        self._spent = 0.0                # seconds in the monitor in all
        self.redraw_seconds = 0.0        # what the last redraw cost
        self.startup_seconds = 0.0       # one-off: widget, matplotlib warm-up, layout (in _spent)
        self.close_seconds = 0.0         # close(): the final picture (in _spent too)
        self._image = None               # what show() was given
        self.picture = None              # PNG bytes of the last picture shown

    # -- the loop calls these ---------------------------------------------------------------
    def log(self, step: int | None = None, *, loss=None, grad_norm=None, layer_norms=None,
            **scalars):
        """Record one step: one scalar per key (tensor or number); ``step``, if given, increases."""
        self._begin("log")
        if self._sigint.pending:                 # an interrupt that Python swallowed
            self._sigint.pending = False
            raise KeyboardInterrupt("interrupted (the first KeyboardInterrupt was swallowed in a "
                                    "finalizer or callback; ctlkit.Monitor raises it again)")
        t0 = self.clock()
        step = (self.step + 1 if step is None
                else step_number(step, self._buffer.last_step(self.history)))
        self._buffer.add(step, loss, grad_norm, layer_norms, scalars, self.history.epoch_keys())
        self.step = step
        if self.stop_on_nonfinite:   # check every step: costs one device sync per step
            self._convert()
            self._raise_if_nonfinite()
        self._spent += self.clock() - t0
        if t0 - self._last_flush >= self._wait:
            self._redraw()

    def log_epoch(self, **scalars):
        """Record end-of-epoch scalars (validation loss/accuracy...), drawn as points. A NaN
        or Inf among them is reported like one in the loss."""
        self._begin("log_epoch")
        t0 = self.clock()
        floats = epoch_values(scalars, self._buffer.known)
        try:
            self._convert()      # the steps before this epoch first, and their NaN watch
        finally:
            self.history.add_epoch(self.step, floats)
            bad = next(((k, v) for k, v in floats.items() if not math.isfinite(v)), None)
            if bad and self.nonfinite is None:
                self._report_nonfinite(bad[0], self.step, bad[1])
        self._spent += self.clock() - t0
        self._raise_if_nonfinite()
        if t0 - self._last_flush >= self._wait:  # otherwise drawn with the next redraw
            self._redraw()

    def flush(self):
        """Read the buffered values, check them and redraw now (not after close())."""
        if not self._closed:
            self._redraw()

    def show(self, image):
        """A picture beside the curves, redrawn with them: anything ``plotter.image_png`` takes,
        or a function of no arguments returning one, called only at a redraw (in its cost)."""
        self._begin("show")
        if not callable(image):
            image_png(image)                     # a wrong shape or dtype fails here, not later
        self._image = image
        if self.clock() - self._last_flush >= self._wait:
            self._redraw()

    def _picture(self):
        image = self._image
        if image is not None:
            self.picture = image_png(image() if callable(image) else image)
            if not callable(image):
                self._image = None               # shown; a function is drawn again each time

    @property
    def plotter(self):
        """The sink's ``Plotter`` (its draw counters), or None for a sink that draws nothing."""
        return getattr(self.sink, "plotter", None)

    def _redraw(self):
        t0 = self.clock()
        self._convert()
        self._picture()
        p, d0 = self.plotter, self.clock()
        layouts = p.layout_changes if p is not None else 0
        self.sink.send(self)                     # the sink draws and shows
        self.redraws += 1
        self._last_flush = self.clock()
        # a new panel or line (a layout change) is one-off, like start-up: counted in the
        # overhead, not in the wait (bounded: a picture holds a bounded number of curves)
        one_off = self._last_flush - d0 if p is not None and p.layout_changes != layouts else 0.0
        cost = self._last_flush - t0 - one_off
        self._wait = max(self.every, cost / self.draw_budget)   # the throttle, whole
        self.redraw_seconds = cost
        self.startup_seconds += one_off
        self._spent += cost + one_off
        self._raise_if_nonfinite()

    def close(self):
        """Final redraw, the widget becomes a static PNG (``with`` calls it; twice is harmless)."""
        if self._closed:
            return
        if self._started is None:
            self._start()
        self._closed, t0 = True, self.clock()
        try:
            self._convert()      # may raise for a value it cannot read, after keeping the rest
            self._picture()
        finally:
            try:
                self.sink.close(self)            # the final picture, drawn by the sink
            finally:                             # the loop's thread waited for it too
                self._ended = self.clock()
                self.close_seconds = self._ended - t0
                self._spent += self.close_seconds

    def __enter__(self):
        if self._in_with and not self._closed:
            raise RuntimeError("this Monitor is already in a with block; one with block per "
                               "run (a nested run needs its own ctlkit.Monitor)")
        self._begin("with")
        self._in_with = True
        self._sigint.watch()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._in_with = False
        self._sigint.unwatch()
        interrupt, nonfinite = (exc_type is not None and issubclass(exc_type, e)
                                for e in (KeyboardInterrupt, NonFiniteError))
        last = self._buffer.last_step(self.history)
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
        # a NaN stop is what the run asked for: go on after the block; an interrupt goes up
        return nonfinite

    # -- numbers for the reader -------------------------------------------------------------
    def fraction_done(self):
        return None if not self.total_steps else min(1.0, self.step / self.total_steps)

    def elapsed(self) -> float:
        """Seconds from the monitor's first call (its start-up included) to now, or to the end
        of close()."""
        end = self._ended or self.clock()
        return 0.0 if self._started is None else end - self._started

    def overhead(self) -> float:
        """Share of the loop's wall time (``elapsed()``) spent in the monitor: start-up, every
        log/log_epoch/show/flush, every redraw (the first and those for a new panel included)
        and close(). ``spent_seconds`` is that time in seconds; ``startup_seconds`` and
        ``close_seconds`` are its one-off parts. The throttle keeps the redraws after the first
        within ``draw_budget``, all but the last (no wait follows it); log() adds its own cost,
        about 1-2 us a value (some tens of us to read a variable); the one-offs are a fixed
        cost, a large share of a short run."""
        wall = self.elapsed()
        return self._spent / wall if wall > 0 else 0.0

    @property
    def spent_seconds(self) -> float:
        """Seconds spent in the monitor's calls in all (``overhead() * elapsed()``)."""
        return self._spent

    def status_line(self, final: bool = False) -> str:
        return status_line(self, final)

    # -- internals --------------------------------------------------------------------------
    def _begin(self, what):
        if self._closed:
            raise RuntimeError(f"{what}: this Monitor ({self.title!r}) was closed at step "
                               f"{self.step}, its history is final; start the next run with a "
                               f"new ctlkit.Monitor(...)")
        if self._started is None:
            self._start()

    def _start(self):
        t0 = self.clock()
        if hasattr(self.sink, "start"):
            self.sink.start(self)                # a widget, a plotter: one-off
        self._started = t0                       # the loop's time runs from here: start-up in it
        self._last_flush = self.clock()
        self.startup_seconds = self._last_flush - t0
        self._spent += self.startup_seconds

    def _convert(self):
        """Buffered values into the history (``Buffer.drain``), watched until the first NaN/Inf."""
        watched = self.WATCHED if self.nonfinite is None else None
        self._buffer.drain(self.history, watched, self._report_nonfinite)

    def _report_nonfinite(self, key, step, value):
        self.nonfinite = (key, step, value)
        print(f"[ctlkit.monitor] non-finite {key} ({value}) first seen at step {step}.")

    def _raise_if_nonfinite(self):
        if self.nonfinite and self.stop_on_nonfinite and not self._closed:
            raise NonFiniteError(*self.nonfinite)
