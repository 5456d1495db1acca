"""Interrupts inside a monitored run: an interrupt that Python swallowed is raised again.

A KeyboardInterrupt raised inside a finalizer (``__del__``) or a callback that Python calls on its
own is not raised in the loop: Python prints "Exception ignored in ..." and goes on, so the run does
not stop. Python hands such an exception to ``sys.unraisablehook``; while a ``Monitor``'s ``with``
block runs, ``SigintNote`` watches that hook, and the monitor's next ``log()`` raises the
interrupt again. An interrupt that reached your code and that you caught yourself
(``except KeyboardInterrupt``) is yours: it is not raised a second time.
"""
from __future__ import annotations

import sys


class SigintNote:
    """``watch()`` puts the note on ``sys.unraisablehook``, ``unwatch()`` restores the hook."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def watch(self):
        previous = sys.unraisablehook

        def on_unraisable(unraisable):
            if isinstance(unraisable.exc_value, KeyboardInterrupt):
                self.pending = True               # swallowed: log() raises it again
            previous(unraisable)                  # still printed as Python would

        self._previous = previous
        sys.unraisablehook = on_unraisable

    def unwatch(self):
        self.pending = False                     # the interrupt is being handled now
        if self._previous is not None:
            sys.unraisablehook = self._previous
            self._previous = None
