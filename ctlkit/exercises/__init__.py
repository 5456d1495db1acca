"""The notebooks' exercise checkers, one module per notebook, references out of the learner's sight.

    ctlkit.exercises.check("03.clipped_step", make_clipped_step)    # in the notebook: one line
    ctlkit.exercises.names("03")                                    # ['03.accuracy', '03.clipped_step']

Each module ``nbNN.py`` holds, for notebook NN, a dict ``EXERCISES`` from an exercise's name to its
checker ``checker(fn, **context) -> ctlkit.checks.Report``. A checker builds its own small models
and data (so the tests can run it on wrong answers without the notebook), holds the reference
solution, and names each case by what it is. ``context`` carries what only the notebook has,
e.g. notebook 04 passes the loss-scale run of its section 7 to be replayed.

``check`` never stops the notebook: it returns a report that displays itself (``PASS`` or
``NOT YET`` and what is wrong); ``.assert_ok()`` turns a ``NOT YET`` into an AssertionError (the
solution cells use it, so CI proves every reference solution passes).
"""
from __future__ import annotations

import importlib
import pkgutil
import re

import tensorflow as tf

from ..checks import Report, explain

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
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")        # checkers build fresh steps on purpose: no retracing warnings
    try:
        return checker(fn, **context)
    except Exception as e:  # noqa: BLE001 - a checker reports, it never stops the notebook
        return Report(name=match[2], problems=[f"calling your function failed in a way the checker "
                                               f"did not expect: {explain(e)}"], cases=0)
    finally:
        logger.setLevel(level)
