"""ctlkit: helpers for the custom-training-loop notebooks.

The training step a notebook teaches is written in the notebook; ctlkit only sets up
the runtime, loads offline data, shows the live monitor, measures gradients, checks
exercises and keeps notebook 03's plain step (``steps``) for the notebooks that compare a
new step against it. Importing it has no side effects.
"""
from . import checks, data, exercises, grads, memory, runtime, steps, tf32, tracing
from .monitor import Monitor, NonFiniteError
from .runtime import Budget, Runtime, budget, run_seed, setup

__version__ = "0.1.0"
__all__ = ["setup", "run_seed", "budget", "Budget", "Runtime", "Monitor", "NonFiniteError",
           "data", "grads", "checks", "exercises", "memory", "runtime", "steps", "tf32", "tracing",
           "__version__"]
