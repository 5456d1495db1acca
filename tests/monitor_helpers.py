"""Shared by the monitor's test files (test_monitor, test_values, test_buffer, test_history,
test_plotter, test_sinks): small fakes and a ready-made history."""
import struct

import numpy as np

from ctlkit.monitor.history import History
from ctlkit.monitor.plotter import Plotter

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(png):
    assert png[:8] == PNG_MAGIC
    return struct.unpack(">II", png[16:24])  # (width, height) from the IHDR chunk


class FakeHandle:
    def __init__(self):
        self.updates = []

    def update(self, obj):
        self.updates.append(obj)


class RecordingSink:
    """A learner-style sink object: records every call; with ``draws=True`` it keeps a plotter
    (as the widget sink does) and records the PNG of every redraw and of the final picture."""

    def __init__(self, draws=False):
        self.draws, self.plotter = draws, None
        self.calls, self.pngs = [], []

    def start(self, monitor):
        self.calls.append("start")
        if self.draws:
            self.plotter = Plotter(monitor.title, draw_budget=monitor.draw_budget, clock=monitor.clock)
            Plotter.warm_up()                   # as the widget sink does: start-up, not overhead

    def _png(self, monitor, relayout=None):
        if self.plotter is None or not monitor.history.keys():
            return None
        return self.plotter.render(monitor.history, monitor.total_steps, relayout=relayout)

    def send(self, monitor):
        self.calls.append("send")
        self.pngs.append(self._png(monitor))

    def close(self, monitor):
        self.calls.append("close")
        self.pngs.append(self._png(monitor, relayout=True))


class FakeClock:
    """A clock a test moves by hand: ``Monitor(clock=FakeClock())`` never reads the wall clock, so
    its throttle is checked to the step, on any machine, however busy."""

    def __init__(self, start=1000.0):
        self.now = start

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class Probe:
    """A value whose conversion to a number is counted (as a tensor's .numpy() would sync)."""

    def __init__(self, value, counter):
        self.value, self.counter = value, counter

    def numpy(self):
        self.counter.append(1)
        return np.float32(self.value)


def history(n=50, layers=True, epochs=True):
    h = History()
    for i in range(1, n + 1):
        row = {"loss": 2.0 / i, "grad_norm": 1.0 + 1.0 / i}
        if layers:
            row.update({"layer/dense": 0.5 / i, "layer/out": 0.3})
        h.add(i, row)
        if epochs and i % 10 == 0:
            h.add_epoch(i, {"val_loss": 2.5 / i, "val_accuracy": i / n})
    return h
