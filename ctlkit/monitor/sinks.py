"""Where the live monitor shows a run: one small class per output, one ``send()`` each.

A sink is any object with ``send(monitor)`` (show the run now: the monitor calls it at each
redraw) and ``close(monitor)`` (show the final state), and optionally ``start(monitor)`` (once,
before the first step) and a ``plotter`` (a ``ctlkit.monitor.plotter.Plotter``: the monitor reads its
counters). Each sink reads what it needs from the monitor (``history``, ``status_line()``,
``picture``) and draws it itself, as livelossplot's outputs do.

* ``WidgetSink``: an ``ipywidgets.Image`` drawn by its own ``Plotter`` (matplotlib's Agg
  backend) and an HTML progress line, updated from the training loop's own thread, so it
  refreshes while the cell is busy in JupyterLab, Notebook, VS Code and Colab. Only APIs common
  to ipywidgets 7 and 8 are used. At the end the widget is replaced by a static PNG, so a saved
  notebook and GitHub's preview still show the curves. It sends at most ``max_fps`` frames
  (picture and line) a second, whatever the monitor's settings: a redraw sooner than that is drawn
  (its cost is the monitor's to count) and its frame is replaced by the next one. Each frame is
  two or three kernel messages, and a client that reads a cell's messages only once the cell has
  finished (nbval, other test runners) gets them through ZeroMQ queues of about 1000 messages on
  each side; a monitor redrawing 100 times a second overflows them within ten seconds, and what
  is dropped then includes the cell's own printed output and the "cell finished" message.
* ``TextSink``: one compact line for terminals, scripts and CI logs; a final PNG when
  running inside IPython.
* ``NullSink``: nothing (tests, timing baselines).
"""
from __future__ import annotations

import math
import os
import sys

from .. import validate
from .plotter import Plotter, render_png


def status_line(monitor, final: bool = False) -> str:
    """Step, steps/s, ETA (or, when ``final``, the total time), the latest values, alarms."""
    el = monitor.elapsed()
    rate, total = (monitor.step / el if el > 0 else 0.0), monitor.total_steps
    parts = [f"step {monitor.step}" + (f"/{total}" if total else ""), f"{rate:.1f} steps/s"]
    if total and not final and rate > 0:
        parts.append(f"ETA {max(0.0, (total - monitor.step) / rate):.0f}s")
    if final:
        parts.append(f"{el:.1f}s")
    h = monitor.history
    keys = [k for k in ("loss", "grad_norm") if k in h]
    keys += [k for k in h.keys() if k not in keys and not k.startswith("layer/")]
    parts += [f"{k} {h.last(k):.4g}" for k in keys if h.last(k) is not None]
    if monitor.nonfinite:
        parts.append(f"NON-FINITE {monitor.nonfinite[0]} at step {monitor.nonfinite[1]}")
    if monitor.interrupted:
        parts.append("interrupted")
    return " · ".join(parts)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def _display_final(png: bytes) -> None:
    if _in_kernel():
        from IPython.display import Image, display

        display(Image(png))


class NullSink:
    """Shows nothing. ``Monitor(sink="null")``."""

    def start(self, monitor):
        pass

    def send(self, monitor):
        pass

    def close(self, monitor):
        pass


class TextSink(NullSink):
    """A compact progress line; in place on a terminal, one line per ``every`` s in a log."""

    def __init__(self, every: float | None = None, stream=None):
        self.stream = stream or sys.stdout
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = every if every is not None else (0.5 if tty else 5.0)
        self.tty, self._last = tty, -1e9

    def send(self, monitor):
        now = monitor.clock()
        if now - self._last >= self.every:
            self._last = now
            end = "\r" if self.tty else "\n"
            print(monitor.status_line(), end=end, file=self.stream, flush=True)

    def close(self, monitor):
        print(monitor.status_line(final=True), file=self.stream, flush=True)
        if _in_kernel() and monitor.history.keys():        # a final figure inside IPython
            _display_final(render_png(monitor.history, monitor.title, x_max=monitor.total_steps))
            if monitor.picture is not None:
                _display_final(monitor.picture)


class WidgetSink(NullSink):
    """An image widget, drawn by the sink's own plotter, and a progress line, updated while
    the cell runs."""

    def __init__(self, max_fps: float = 5.0):
        import ipywidgets as widgets  # ipywidgets 7.7 and 8 both have these

        self.max_fps = validate.number("max_fps", max_fps, low=0, low_open=True, example=5.0)
        self.frames = 0                  # frames sent (the monitor's redraws may be more)
        self._sent_at = -math.inf
        self.widgets = widgets
        self.label = widgets.HTML(value="")
        self.image = widgets.Image(format="png")
        self.picture = None              # Monitor.show()'s picture, beside the curves, once used
        self.box = widgets.VBox([self.label, widgets.HBox([self.image])])
        self.handle = self.plotter = None

    def start(self, monitor):
        from IPython.display import display

        # Full draws (new axis limits) follow the monitor's throttle rule on their own clock.
        self.plotter = Plotter(monitor.title, draw_budget=monitor.draw_budget, clock=monitor.clock)
        Plotter.warm_up()                # matplotlib's fonts: one-off, counted as start-up
        self.label.value = self._html(monitor)
        # Publish the widget's view ourselves: ipywidgets 7 displays a widget through
        # _ipython_display_, which drops display_id, so the final update would target nothing.
        # This bundle is what both majors send, and it keeps the id on both.
        view = {"version_major": 2, "version_minor": 0, "model_id": self.box.model_id}
        self.handle = display({"text/plain": "ctlkit monitor (live plot widget)",
                               "application/vnd.jupyter.widget-view+json": view},
                              raw=True, display_id=True)

    def _html(self, monitor, final=False):
        frac = monitor.fraction_done()
        bar = (f"<progress value='{frac:.3f}' max='1' style='width:160px'></progress> "
               if frac is not None else "")
        return f"<span style='font-family:monospace'>{bar}{monitor.status_line(final)}</span>"

    def send(self, monitor):
        png = (self.plotter.render(monitor.history, monitor.total_steps)
               if monitor.history.keys() else None)
        now = monitor.clock()
        if now - self._sent_at < 1.0 / self.max_fps:
            return                               # drawn, not sent: the next frame replaces it
        self._sent_at, self.frames = now, self.frames + 1
        self.label.value = self._html(monitor)
        if png is not None:
            self.image.value = png
        if monitor.picture is not None:
            if self.picture is None:             # the first picture: make room for it
                self.picture = self.widgets.Image(format="png")
                self.box.children[1].children = (self.image, self.picture)
            if self.picture.value != monitor.picture:
                self.picture.value = monitor.picture

    def close(self, monitor):
        from IPython.display import HTML, Image, display

        png = (self.plotter.render(monitor.history, monitor.total_steps, relayout=True)
               if self.plotter is not None and monitor.history.keys() else None)
        if self.handle is not None and png is not None:
            self.handle.update(Image(png))  # the static figure takes the widget's place
            self.box.close()
        if monitor.picture is not None:
            display(Image(monitor.picture))
        display(HTML(self._html(monitor, final=True)))


def make_sink(kind: str = "auto"):
    """'auto' picks the widget sink in a Jupyter kernel with ipywidgets, else text.
    The environment variable CTLKIT_MONITOR=widget|text|null overrides 'auto'. An object
    with ``send(monitor)`` and ``close(monitor)`` is a sink of your own (module docstring)."""
    kinds = ("auto", "widget", "text", "null")
    if not isinstance(kind, str) or kind not in kinds:
        if hasattr(kind, "send") and hasattr(kind, "close"):
            return kind  # a sink object of the learner's own
        raise ValueError(f"sink must be one of {kinds} or an object with send(monitor) and "
                         f"close(monitor), got {kind!r}")
    if kind == "auto":
        kind = os.environ.get("CTLKIT_MONITOR", "").strip() or "auto"
        if kind not in kinds:
            raise ValueError(f"CTLKIT_MONITOR must be one of {kinds}, got {kind!r}")
    if kind == "auto":
        kind = "text"
        if _in_kernel():
            try:
                import ipywidgets  # noqa: F401
                kind = "widget"
            except ImportError:
                pass
    return {"widget": WidgetSink, "text": TextSink, "null": NullSink}[kind]()
