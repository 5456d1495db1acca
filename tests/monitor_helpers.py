"""Shared by the monitor's test files (test_monitor, test_history, test_plotter, test_sinks):
small fakes and a ready-made history."""
import struct

import numpy as np

from ctlkit.history import History


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
    """A learner-style sink object: records every call."""

    def __init__(self, wants_png=False):
        self.wants_png = wants_png
        self.calls, self.pngs = [], []

    def start(self, monitor):
        self.calls.append("start")

    def send(self, monitor, png):
        self.calls.append("send")
        self.pngs.append(png)

    def close(self, monitor, png):
        self.calls.append("close")
        self.pngs.append(png)


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
