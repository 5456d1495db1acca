"""What ``Monitor.log()`` keeps between two redraws, and how it reaches the history.

``add()`` appends one step as it was given (tensors stay tensors) after a check that costs about a
microsecond once a key and a type have been seen; the first value under each key goes through
``values.check_first``, which reads it at once so a wrong shape or kind fails at that ``log()``.
``drain()`` reads everything buffered in one batch per key (``values.gather``) and moves it into
the history; nothing is lost on the way (see its docstring).
"""
from __future__ import annotations

from .values import check_first, gather, plain_types_seen, read_variables, variable_types_seen


class Buffer:
    """The steps logged since the last redraw: ``[(step, loss, grad_norm, layer_norms, scalars)]``."""

    def __init__(self):
        self.pending = []
        self.known = set()               # per-step keys whose first value was checked
        self.known_layers = set()        # the layers of the first layer_norms= checked

    def add(self, step, loss, grad_norm, layer_norms, scalars, epoch_keys):
        if layer_norms is not None and not isinstance(layer_norms, dict):
            raise TypeError("layer_norms must be a dict {layer name: norm}, as returned by "
                            "ctlkit.grads.layer_norms(grads, variables)")
        if loss is None and grad_norm is None and not scalars and not layer_norms:
            raise ValueError("log() got no values; pass loss=..., grad_norm=..., "
                             "layer_norms={...} or any scalar by name (accuracy=...)")
        plain, known = plain_types_seen, self.known   # the fast path: types and keys seen before
        if (scalars and variable_types_seen and known.issuperset(scalars)
                and not plain.issuperset(map(type, scalars.values()))):
            scalars = read_variables(scalars)    # a variable seen before: its value now
        if (layer_norms and variable_types_seen and self.known_layers and isinstance(layer_norms, dict)
                and not plain.issuperset(map(type, layer_norms.values()))):
            layer_norms = read_variables(layer_norms)   # the same for a layer's norm
        if not (type(loss) in plain and type(grad_norm) in plain
                and (loss is None or "loss" in known)
                and (grad_norm is None or "grad_norm" in known)
                and (not scalars or (known.issuperset(scalars)
                                     and plain.issuperset(map(type, scalars.values()))))
                and (layer_norms is None or self.known_layers)):
            loss, grad_norm, layer_norms, scalars = check_first(
                loss, grad_norm, layer_norms, scalars, known, self.known_layers, epoch_keys)
        self.pending.append((step, loss, grad_norm,
                             None if layer_norms is None else dict(layer_norms), scalars))

    def last_step(self, history):
        """The last step logged: buffered, else in the history (None before the first)."""
        return self.pending[-1][0] if self.pending else history.last_step

    def drain(self, history, watched, on_nonfinite):
        """Read the buffered values and add them to ``history``. ``on_nonfinite(key, step,
        value)`` hears of the earliest NaN/Inf among the ``watched`` keys and the layer norms
        (``watched=None``: watch nothing) before the history changes, so an interrupt between
        the two cannot lose it. The buffer is emptied only after the history holds its steps,
        and steps the history already holds (an interrupt landed between the history's update
        and ours) are skipped. A value that cannot be read is kept as missing (NaN, no alarm)
        with every other value, then a ValueError names its key and step."""
        pending, last = self.pending, history.last_step
        done = 0
        while done < len(pending) and last is not None and pending[done][0] <= last:
            done += 1
        del pending[:done]
        if not pending:
            return
        steps, columns, first, problems = gather(pending, watched)
        if first is not None:
            on_nonfinite(first[1], steps[first[0]], first[2])
        count = len(pending)
        history.extend(steps, columns)
        del pending[:count]
        if problems:
            more = f" ({len(problems) - 1} more keys too)" if len(problems) > 1 else ""
            raise ValueError(f"{problems[0]}{more}. That value is recorded as missing (NaN); "
                             f"every other value of all {count} steps is in monitor.history.")
