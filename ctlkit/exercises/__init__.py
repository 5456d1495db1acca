"""The notebooks' exercise checkers, one module per notebook, references out of the learner's sight.

    ctlkit.exercises.check("03.clipped_step", make_clipped_step)    # in the notebook: one line
    ctlkit.exercises.names("03")                                    # ['03.accuracy', '03.clipped_step']

Each module ``nbNN.py`` holds, for notebook NN, a dict ``EXERCISES`` from an exercise's name to its
checker ``checker(fn, **context) -> ctlkit.checks.Report``. A checker builds its own small models
and data (so the tests can run it on wrong answers without the notebook), holds the reference
solution, and names each case by what it is. ``context`` carries what only the notebook has,
e.g. notebook 04 passes the loss-scale run of its section 7 to be replayed.

A checker runs in a known state and gives the notebook back its own: graph mode (a
``tf.config.run_functions_eagerly(True)`` left on from debugging would hide retracing and graph-only
errors, so it is turned off for the check, said in the report, and turned on again), the float32
policy, and the random state afterwards is what it was before (Python, NumPy, TensorFlow's global
seed and generator, Keras' global seed), so the next cell's numbers do not depend on whether an
exercise was checked.

``check`` never stops the notebook: it returns a report that displays itself (``PASS`` or
``NOT YET`` and what is wrong); ``.assert_ok()`` turns a ``NOT YET`` into an AssertionError (the
solution cells use it, so CI proves every reference solution passes).
"""
from __future__ import annotations

import contextlib
import importlib
import pkgutil
import random
import re

import keras
import numpy as np
import tensorflow as tf

from ..checks import ContextError, Report, explain

__all__ = ["check", "names"]

_KEY = re.compile(r"^(\d\d)\.([a-z_][a-z0-9_]*)$")


def _module(number: str):
    try:
        return importlib.import_module(f"{__name__}.nb{number}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.nb{number}":
            raise
        return None


def names(notebook: str | None = None) -> list:
    """Every exercise key (``"03.clipped_step"``), or those of one notebook (``"03"``)."""
    numbers = sorted(m.name[2:] for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"nb\d\d", m.name))
    if notebook is not None:
        if not (isinstance(notebook, str) and re.fullmatch(r"\d\d", notebook)):
            raise ValueError(f"notebook must be a two-digit string such as '03', got {notebook!r}")
        numbers = [n for n in numbers if n == notebook]
    return [f"{n}.{name}" for n in numbers for name in _module(n).EXERCISES]


def check(key: str, fn, **context) -> Report:
    """Check the learner's ``fn`` for exercise ``key`` (``"NN.name"``, as the notebook writes it)."""
    match = _KEY.match(key) if isinstance(key, str) else None
    if not match:
        raise ValueError(f"key must look like '03.clipped_step' (notebook number, a dot, the "
                         f"exercise's name), got {key!r}")
    module = _module(match[1])
    checker = getattr(module, "EXERCISES", {}).get(match[2])
    if checker is None:
        known = names(match[1]) if module else []
        raise ValueError(f"no exercise {key!r}" + (f"; notebook {match[1]} has {known}" if known
                                                   else f"; known: {names()}"))
    if not callable(fn):
        raise TypeError(f"pass your function itself to check(), e.g. check({key!r}, my_fn), "
                        f"not its result; got {type(fn).__name__}")
    notes = []
    with _known_state(notes):
        try:
            report = checker(fn, **context)
        except ContextError:
            raise                          # the notebook's argument is wrong, not the learner's answer
        except Exception as e:  # a checker reports, it never stops the notebook
            report = Report(name=match[2], problems=[f"calling your function failed in a way the "
                                                     f"checker did not expect: {explain(e)}"], cases=0)
    report.notes = notes + list(report.notes)
    return report


@contextlib.contextmanager
def _known_state(notes: list):
    """Graph mode, the float32 policy and quiet retracing for the check; the notebook's eager flag,
    policy and random state (Python, NumPy, TensorFlow, Keras) given back afterwards."""
    from keras.src.backend.common import global_state  # Keras' global seed and generator
    from tensorflow.python.eager import context as tf_context

    # TF's global generator, read without creating one: get_global_generator() would create it,
    # and refuses to under op determinism (stateful_random_ops.py:990 in TF 2.19-2.21)
    from tensorflow.python.ops import stateful_random_ops

    eager = tf.config.functions_run_eagerly()
    if eager:
        notes.append("tf.config.run_functions_eagerly(True) was on; the check ran in graph mode, "
                     "as a compiled step runs, and turned it back on")
        tf.config.run_functions_eagerly(False)
    policy = keras.mixed_precision.dtype_policy()
    keras.mixed_precision.set_dtype_policy("float32")
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")        # checkers build fresh steps on purpose: no retracing warnings
    ctx = tf_context.context()
    tf_seed, tf_rng = ctx._seed, getattr(ctx, "_rng", None)
    tf_rng_state = tf_rng.getstate() if tf_rng is not None else None
    generator = stateful_random_ops.global_generator
    generator_state = generator.state.numpy() if generator is not None else None
    keras_seed = global_state.get_global_attribute("global_random_seed")
    keras_generator = global_state.get_global_attribute("global_seed_generator")
    keras_generator_state = (keras_generator.state.numpy() if keras_generator is not None else None)
    py_state, np_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        ctx._seed = tf_seed                         # tf.random.set_seed's effect, undone
        if tf_rng is not None:
            tf_rng.setstate(tf_rng_state)
            ctx._rng = tf_rng
        stateful_random_ops.global_generator = generator
        if generator is not None:
            generator.state.assign(generator_state)
        global_state.set_global_attribute("global_random_seed", keras_seed)
        global_state.set_global_attribute("global_seed_generator", keras_generator)
        if keras_generator is not None:
            keras_generator.state.assign(keras_generator_state)
        logger.setLevel(level)
        keras.mixed_precision.set_dtype_policy(policy)
        if eager:
            tf.config.run_functions_eagerly(True)
