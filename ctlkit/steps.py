"""Notebook 03's training step, kept once for the notebooks that compare against it.

Notebook 03 writes the step and explains every line: the forward pass under a ``GradientTape``,
the gradient of the loss, one ``apply_gradients``. Notebooks 04, 05 and 06 each teach a change
to it (loss scaling, gradient accumulation, schedules) and need the unchanged step beside their
own as the baseline; they take it from here instead of each writing it out again. Read it in a
notebook with ``ctlkit.steps.plain_step??``.
"""
from __future__ import annotations

import tensorflow as tf

from . import validate

__all__ = ["plain_step"]


def plain_step(model, optimizer, loss_fn, *, compile: bool = True):
    """``step(x, y) -> loss``: one update of ``model`` by ``optimizer`` on ``loss_fn(y, model(x))``
    plus the model's regularisation penalties (``sum(model.losses)``, read inside the tape, as
    notebook 03 proves it must be; 0 for a model without regularisers).

    ``compile=True`` wraps it in ``tf.function`` (one graph per model/optimizer pair, as in
    notebook 03); ``compile=False`` returns the plain Python function, which runs eagerly or can be
    wrapped by the caller (e.g. ``tf.function(..., jit_compile=True)``).
    """
    compile = _checked(model, optimizer, loss_fn, compile)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True)) + sum(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return tf.function(step) if compile else step


def _checked(model, optimizer, loss_fn, compile):
    """plain_step's arguments checked, each wrong one named with the fix; ``compile`` as a bool."""
    if not callable(model) or not hasattr(model, "trainable_variables"):
        raise TypeError(f"model must be a Keras model (callable, with trainable_variables), got "
                        f"{type(model).__name__}; pass e.g. keras.Sequential([...])")
    if not hasattr(optimizer, "apply_gradients"):
        hint = (" (the arguments are model, optimizer, loss_fn: is the order right?)"
                if callable(optimizer) else "")
        raise TypeError(f"optimizer must be a Keras optimizer (with apply_gradients), got "
                        f"{type(optimizer).__name__}{hint}; pass e.g. "
                        f"keras.optimizers.Adam(1e-3)")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a function loss_fn(y_true, y_pred) -> scalar, got "
                        f"{type(loss_fn).__name__}; pass e.g. "
                        f"keras.losses.SparseCategoricalCrossentropy(from_logits=True)")
    return validate.flag("compile", compile)
