"""The live monitor: ``ctlkit.Monitor`` and the rooms it is built from.

    monitor = ctlkit.Monitor(total_steps=1000, title="my run")
    with monitor:
        for step in range(1000):
            monitor.log(loss=train_step())

One job per module, read in this order:

* ``monitor``:  the ``Monitor`` class, what a loop calls (``log``, ``log_epoch``, ``close``), and
  the throttle that decides when to redraw;
* ``buffer``:   what ``log()`` appends to; tensors are read in one batch per key at a redraw;
* ``values``:   what may be logged (numbers, tensors, variables, lists of them) and the
  ``NonFiniteError``;
* ``history``:  every value logged, kept as NumPy arrays, and which curves a picture shows;
* ``envelope``: the band that stands for the layers not drawn one by one;
* ``plotter``:  matplotlib (Agg) drawing the curves into a PNG, with blitting;
* ``sinks``:    where the picture goes: a widget in a notebook, a text line in a terminal or CI,
  nothing in a test;
* ``sigint``:   an interrupt the user caught, told apart from one Python swallowed.
"""
from .monitor import Monitor
from .values import NonFiniteError

__all__ = ["Monitor", "NonFiniteError"]
