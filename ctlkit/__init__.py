"""ctlkit: helpers for the custom-training-loop notebooks.

The training step a notebook teaches is written in the notebook; ctlkit only sets up
the runtime, loads offline data, shows the live monitor, measures gradients and checks
exercises. Importing it has no side effects.
"""
from . import checks, data, exercises, grads, memory, runtime, tracing
from .monitor import Monitor, NonFiniteError
from .runtime import Budget, Runtime, budget, setup

__version__ = "0.1.0"
__all__ = ["setup", "budget", "Budget", "Runtime", "Monitor", "NonFiniteError",
           "data", "grads", "checks", "exercises", "memory", "runtime", "tracing", "__version__"]
