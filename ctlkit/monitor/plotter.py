"""The monitor's picture: a matplotlib (Agg) figure with one panel per kind of curve, redrawn
cheaply (the axes are drawn once and cached; a redraw repaints only the lines, "blitting") and
encoded as PNG bytes for a widget, a display update or a file."""
from __future__ import annotations

import io
import math
import time

import numpy as np


class Plotter:
    """Draws a ``monitor.History`` to PNG bytes with matplotlib's Agg backend, fast enough to
    redraw while training.

    The figure is kept between redraws. A *full draw* (axes, ticks, labels, legends) happens
    only when the layout or the axis limits must change; the limits keep headroom (the x axis
    runs to ``total_steps`` when known, log axes span whole decades), so that is rare. Every
    other redraw *blits*: it restores the cached background, draws only the lines and encodes
    the pixels (about a tenth of a full draw). ``full_draws`` counts the former;
    ``layout_changes`` those of them due to a new panel or curve (one-off: a panel holds a
    bounded number of curves); ``builds`` counts new figures (a new panel appeared).

    A group of many curves (per-layer norms, metrics) comes from ``History.panels`` as the
    eight with the largest latest value and one min-max band for the whole group, named in the
    legend, so neither a draw nor the legend grows with the number of layers (500 layer norms:
    a first draw of 0.16 s, not 57 s). Which eight may change only when a full draw is allowed
    (the legend is in the background); a change swaps curves and is not a layout change.
    """

    _warm = False

    def __init__(self, title: str = "", dpi: int = 72, max_points: int = 400,
                 draw_budget: float | None = None, clock=None):
        self.title = title
        self.dpi = dpi
        self.max_points = max_points     # points per curve drawn (longer runs are thinned)
        self.clock = time.perf_counter if clock is None else clock   # the monitor's, from a sink
        self.draw_budget = draw_budget   # None: new limits at once; else see render()
        self._last_full = 0.0            # when the last full draw ended
        self._full_wait = 0.0            # the wait after it before the next may come
        self.fig = None                  # the matplotlib Figure, built for the first panels
        self.layout = None               # the panels' names, in order
        self.axes = {}                   # panel -> Axes
        self.lines = {}                  # (panel, label) -> the curve's artist
        self.builds = 0                  # figures built (a new panel appeared)
        self.full_draws = 0              # draws of axes, ticks and legends (not blits)
        self.layout_changes = 0          # full draws for a new panel or a new line (one-off)
        self.limits = {}                 # panel -> (x0, x1, y0, y1)
        self.last_seconds = None         # what the last render cost
        self.last_blit_seconds = None    # ... of which the blit and the PNG
        self._bg = None                  # the cached background the blit restores

    @classmethod
    def warm_up(cls):
        """Load matplotlib's fonts and Agg once per process (the first figure is slow)."""
        if not cls._warm:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure

            fig = Figure(figsize=(1, 1), dpi=36)
            FigureCanvasAgg(fig)
            fig.add_subplot().set_title("warm-up")
            fig.savefig(io.BytesIO(), format="png")
            cls._warm = True

    def _build(self, panels):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator, NullFormatter

        ncols = min(3, len(panels))
        nrows = -(-len(panels) // ncols)
        self.fig = Figure(figsize=(3.6 * ncols, 2.5 * nrows + 0.3), dpi=self.dpi)
        FigureCanvasAgg(self.fig)
        if self.title:
            self.fig.suptitle(f"{self.title} (x: training step)", fontsize=10)
        self.axes, self.lines, self.limits = {}, {}, {}
        for i, (name, _) in enumerate(panels):
            ax = self.fig.add_subplot(nrows, ncols, i + 1)
            ax.set_title(name, fontsize=9)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(4, integer=True))
            if self._log(name):
                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())  # tick text is the slow part
            else:
                ax.yaxis.set_major_locator(MaxNLocator(4))
            self.axes[name] = ax
        self.fig.subplots_adjust(left=0.07, right=0.98, bottom=0.14 / nrows, wspace=0.3,
                                 hspace=0.55, top=1 - 0.55 / (2.5 * nrows + 0.3))
        self.layout = [name for name, _ in panels]
        self.builds += 1
        self._bg = None

    @staticmethod
    def _artist(ax, label, style):
        """A new curve's artist, animated: drawn by the blit, not into the background."""
        if style == "band":
            from matplotlib.patches import Polygon

            artist = Polygon(np.ones((1, 2)), closed=True, color="grey", alpha=0.3, lw=0,
                             label=label)
            ax.add_patch(artist)
        elif style == "points":
            (artist,) = ax.plot([], [], "o-", ms=3, lw=1, label=label)
        elif style == "bold":
            (artist,) = ax.plot([], [], color="black", lw=1.6, label=label)
        else:
            (artist,) = ax.plot([], [], lw=1, label=label, alpha=0.35 if style == "raw" else 1.0)
        artist.set_animated(True)
        return artist

    @staticmethod
    def _is_band(artist):
        return not hasattr(artist, "set_data")

    @staticmethod
    def _log(name):
        return name.startswith("gradient")

    @staticmethod
    def _visible(name, values):
        values = np.asarray(values, dtype=float)
        return np.isfinite(values) & ((values > 0) if Plotter._log(name) else True)

    def _new_limits(self, name, xs, ys, x_max, old):
        """Limits that hold the data, kept from ``old`` while they still do."""
        x0 = float(xs.min()) if xs.size else 0.0
        x1 = float(xs.max()) if xs.size else 1.0
        if x_max is not None and x_max >= x1:
            hi_x = float(x_max)
        elif old is not None and old[1] >= x1:
            hi_x = old[1]
        else:
            hi_x = max(2.0 * x1, x1 + 10.0)          # unknown length: double at a time
        lo_x = min(x0, old[0]) if old is not None else x0
        if ys.size == 0:
            y = (1e-3, 1.0) if self._log(name) else (0.0, 1.0)
            return (lo_x, hi_x) + (old[2:] if old is not None else y)
        lo, hi = float(ys.min()), float(ys.max())
        if old is not None and old[2] <= lo and hi <= old[3]:
            return (lo_x, hi_x) + old[2:]
        # Headroom makes a new full draw rare: norms fall during training (a decade to spare
        # below), losses and rates are drawn from zero, and the top has a quarter to spare.
        if self._log(name):                          # whole decades
            y0, y1 = 10.0 ** (math.floor(math.log10(lo)) - 1), 10.0 ** math.ceil(math.log10(hi))
            return (lo_x, hi_x, y0, y1 if y1 > y0 else y0 * 10)
        pad = max(0.25 * (hi - lo), 0.25 * abs(hi)) or 1.0    # 1.0: a series of zeros
        return (lo_x, hi_x, 0.0 if lo >= 0 else lo - pad, hi + pad)

    def render(self, history, x_max: int | None = None, relayout: bool | None = None) -> bytes:
        """PNG bytes of ``history``. ``x_max``: the run's last step if known (fixes the x
        axis). New axis limits need a full draw; ``relayout=None`` allows one at once without a
        ``draw_budget``, and with one only when the last full draw's cost / ``draw_budget`` has
        passed since it (the monitor's throttle rule on its own clock; the curves are clipped
        at the edge meanwhile). ``relayout=True`` / ``False`` allows / refuses it now."""
        t0 = self.clock()
        if relayout is None:
            relayout = self.draw_budget is None or t0 - self._last_full >= self._full_wait
        # a group of many curves comes as the top few and one band (History.panels); which
        # few may change only when the legend may be redrawn
        panels = history.panels(self.max_points, rerank=relayout or self._bg is None)
        if not panels:
            return b""
        changed = self.layout != [name for name, _ in panels]
        if changed:
            self._build(panels)
        stale = self._bg is None
        for name, series in panels:
            ax = self.axes[name]
            xs, ys = [], []
            keys = {(name, label) for label, *_ in series}
            gone = [key for key in self.lines if key[0] == name and key not in keys]
            for key in gone:                         # a curve that left the top few
                self.lines.pop(key).remove()
            new = [label for label, *_ in series if (name, label) not in self.lines]
            for label, steps, values, style in series:
                key = (name, label)
                if key not in self.lines:
                    self.lines[key] = self._artist(ax, label, style)
                ok = self._visible(name, values)
                x, y = np.asarray(steps)[ok], np.asarray(values, dtype=float)[ok]
                artist = self.lines[key]
                if style == "band":
                    artist.set_visible(x.size > 0)
                    if x.size:
                        artist.set_xy(np.column_stack([x, y]))
                else:
                    artist.set_data(x, y)
                xs.append(x)
                ys.append(y)
            if new or gone:                          # the legend is in the background
                stale = True
                if len(series) > 1:
                    ax.legend(fontsize=6, loc="upper right" if len(series) > 4 else "best")
                if len(new) > len(gone):             # a new curve, not a swap within the top few
                    changed = True
            xs = np.concatenate(xs) if xs else np.zeros(0)
            ys = np.concatenate(ys) if ys else np.zeros(0)
            old = self.limits.get(name)
            lim = self._new_limits(name, xs, ys, x_max, old)
            if lim != old and (relayout or stale or old is None):
                self.limits[name] = lim
                ax.set_xlim(lim[0], lim[1] if lim[1] > lim[0] else lim[0] + 1)
                ax.set_ylim(lim[2], lim[3])
                stale = True
        canvas = self.fig.canvas
        if stale:                                    # axes, ticks, labels, legends
            canvas.draw()
            self._bg = canvas.copy_from_bbox(self.fig.bbox)
            self.full_draws += 1
            if changed and self.layout is not None:
                self.layout_changes += 1
        t1 = self.clock()
        canvas.restore_region(self._bg)
        for band in (True, False):                   # bands under the lines
            for (name, _), artist in self.lines.items():
                if self._is_band(artist) == band:
                    self.axes[name].draw_artist(artist)
        png = _encode_png(canvas.buffer_rgba())
        now = self.clock()
        self.last_seconds, self.last_blit_seconds = now - t0, now - t1
        if stale and self.draw_budget:
            self._last_full, self._full_wait = now, (now - t0) / self.draw_budget
        return png


def _encode_png(rgba) -> bytes:
    from PIL import Image  # a matplotlib dependency

    a = np.asarray(rgba)
    buf = io.BytesIO()
    Image.fromarray(a[..., :3]).save(buf, format="png", compress_level=1)
    return buf.getvalue()


def render_png(history, title: str = "", dpi: int = 72, x_max: int | None = None) -> bytes:
    """One-off drawing of ``history`` to PNG bytes (a live sink keeps a ``Plotter``)."""
    return Plotter(title, dpi).render(history, x_max)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def image_png(image) -> bytes:
    """PNG bytes of a picture for ``Monitor.show``: PNG bytes as they are, a matplotlib figure,
    or an array (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) of floats in [0, 1] or of uint8
    (a tensor too: anything with ``.numpy()``)."""
    if isinstance(image, (bytes, bytearray)):
        if not bytes(image[:8]) == PNG_MAGIC:
            raise ValueError("image bytes must be a PNG file's bytes (they start with \\x89PNG)")
        return bytes(image)
    if hasattr(image, "savefig"):                         # a matplotlib Figure
        buf = io.BytesIO()
        image.savefig(buf, format="png")
        return buf.getvalue()
    a = image.numpy() if hasattr(image, "numpy") else np.asarray(image)
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[-1] in (3, 4))) or a.size == 0:
        raise ValueError(f"image must be an array of shape (H, W), (H, W, 1), (H, W, 3) or "
                         f"(H, W, 4), got shape {list(a.shape)}; for a batch, tile it first")
    if a.dtype.kind == "f":
        if not np.isfinite(a).all():
            raise ValueError("image has NaN or Inf values: nothing sensible to show")
        a = (np.clip(a, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    elif a.dtype != np.uint8:
        raise TypeError(f"image must hold floats in [0, 1] or uint8, got {a.dtype.name}")
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="png", compress_level=1)
    return buf.getvalue()
