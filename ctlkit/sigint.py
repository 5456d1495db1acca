"""Interrupts inside a monitored run: a note of every Ctrl-C, so that none is lost.

A KeyboardInterrupt raised inside a finalizer or a library callback is swallowed there
("Exception ignored in ..."). While a ``Monitor``'s ``with`` block runs, ``SigintNote`` sees each
SIGINT before Python raises it, so the monitor's next ``log()`` can raise it again.
"""
from __future__ import annotations

import signal
import threading


class SigintNote:
    """``watch()`` installs the note (main thread only), ``unwatch()`` restores the handler."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def watch(self):
        if threading.current_thread() is not threading.main_thread():
            return                               # signal handlers live in the main thread
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):               # SIG_IGN / SIG_DFL / None: leave them be
            return

        def on_sigint(signum, frame):
            self.pending = True
            previous(signum, frame)              # normally default_int_handler: raises

        self._previous = previous
        signal.signal(signal.SIGINT, on_sigint)

    def unwatch(self):
        self.pending = False                     # the interrupt is being handled now
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
