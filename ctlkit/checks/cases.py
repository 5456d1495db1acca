"""What a checker is given: the cases it tries, a fresh copy of their arguments for each call,
and the name it reports under.

    labelled_cases([(x,), (x, y)])          # [("case 1", (x,)), ("case 2", (x, y))]
    labelled_cases({"a batch of one": (x1,)})   # the label says what the case is
    own_copy(args)                          # arrays, lists, dicts, variables copied; tensors shared

A learner's function and the reference each get their own copy of a case's arguments, so
one that changes a variable or appends to a list cannot change what the other, or the next
case, sees.
"""
from __future__ import annotations

import copy
import sys

import numpy as np
import tensorflow as tf

from ..grads import is_variable


def labelled_cases(cases):
    """A list of (label, argument tuple). ``cases`` is a list (a tuple or list case holds the
    arguments, anything else is the only argument; labels are "case 1", ...) or a dict from a label
    that says what the case is ("rows of very different scale") to its arguments."""
    if isinstance(cases, dict):
        if not all(isinstance(k, str) for k in cases):
            raise TypeError("cases as a dict must map a label (a string saying what the case is) to "
                            "its arguments, e.g. {'a batch of one': (x1,)}")
        labels, cases = list(cases), list(cases.values())
    else:
        labels = None
    if (cases is None or isinstance(cases, (str, bytes, set, frozenset, np.ndarray))
            or tf.is_tensor(cases) or not hasattr(cases, "__iter__")):
        raise TypeError(f"cases must be a list of argument tuples, e.g. cases=[(x,), (x, y)], "
                        f"got {type(cases).__name__}")
    out = []
    for k, c in enumerate(cases):
        if isinstance(c, (set, frozenset)):
            raise TypeError(f"cases[{k}] is a {type(c).__name__}, which has no order: write the "
                            f"arguments of one call as a tuple, e.g. (x, y)")
        out.append(tuple(c) if isinstance(c, (tuple, list)) else (c,))
    if not out:
        raise ValueError("cases is empty: give at least one tuple of arguments to try")
    labels = labels or [f"case {k + 1}" for k in range(len(out))]
    return list(zip(labels, out))


def own_copy(x, memo=None):
    """A copy of an argument that one function may change without the other, or the next case,
    seeing it: arrays, lists, tuples, dicts and sets are copied all the way down, a variable
    becomes a fresh one (same value, dtype, trainable flag); tensors (immutable), models,
    iterators and other objects are shared."""
    memo = {} if memo is None else memo
    if id(x) in memo:                  # the same object twice in the arguments stays one object
        return memo[id(x)]
    if isinstance(x, tf.Variable):
        out = tf.Variable(x.read_value(), dtype=x.dtype, shape=x.shape, trainable=x.trainable,
                          name=x.name.split(":")[0])
    elif is_variable(x):              # a Keras variable: keras is loaded
        out = sys.modules["keras"].Variable(x.numpy(), dtype=x.dtype, trainable=x.trainable,
                                            name=x.name)
    elif isinstance(x, np.ndarray):
        out = copy.deepcopy(x)
    elif isinstance(x, (list, dict)):
        out = memo[id(x)] = copy.copy(x)
        for k in (range(len(x)) if isinstance(x, list) else x):
            out[k] = own_copy(x[k], memo)
    elif isinstance(x, tuple):
        items = [own_copy(v, memo) for v in x]
        out = type(x)(*items) if hasattr(x, "_fields") else type(x)(items)   # namedtuples too
    else:
        out = copy.copy(x) if isinstance(x, (set, bytearray)) else x
    memo[id(x)] = out
    return out


def checker_name(name, fn, **flags):
    """The name a report goes under (``name``, else fn's own), after checking the flags are bools."""
    for flag, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{flag} must be True or False, got {type(value).__name__}")
    if not isinstance(name, (str, type(None))):
        raise TypeError(f"name must be a string (or None for fn's own name), got "
                        f"{type(name).__name__}")
    return name or getattr(fn, "__name__", "your function")

