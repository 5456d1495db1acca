"""A learner's error as one or two sentences they can act on.

    explain(error)              # "ValueError: <its own message>", or for a common mistake
                                # "ValueError. Hint: <what to do>. TensorFlow's message begins: ..."
    value, problem = call(fn, args, "case 1")   # (result, None), or (None, a sentence)

TensorFlow wraps an error raised inside a ``tf.function`` in file paths, source lines and
node names; ``explain`` keeps the error's own words and adds a hint for the common mistakes
(a Python ``if`` on a tensor, ``.numpy()`` in a graph, a variable created per call, a None
gradient). ``call`` is how every checker runs a learner's function: an exercise's bare
``raise NotImplementedError`` becomes "not written yet", any other error its explanation.
"""
from __future__ import annotations

import re

_HINTS = (  # (words in the error, what to do): the first match is added to the message
    (("as a Python `bool`", "OperatorNotAllowedInGraph"),
     "a Python `if`, `and`, `or` or `while` on a tensor cannot run in this graph: use tf.where "
     "(element-wise) or tf.cond (one branch) instead"),
    (("has no attribute 'numpy'", "numpy() is only available"),
     ".numpy() does not exist inside a tf.function: stay with TensorFlow ops"),
    (("singleton tf.Variable", "creating variables on a non-first call"),
     "a tf.Variable is created inside the step on every call: create it once, outside the step"),
    (("unsupported operand type(s) for", "NoneType"),
     "a gradient is None: was the tensor watched (tape.watch for a plain tensor), and does the "
     "loss depend on it through TensorFlow ops only?"),
)


def explain(error: BaseException) -> str:
    """One or two lines a learner can act on: the error's type, its own message without the
    file paths and traceback TensorFlow wraps around it, and a hint for the common mistakes."""
    text = str(error)
    lines, after_file = [], False
    for ln in (raw.strip() for raw in text.splitlines()):
        if ln and not after_file:        # a traceback's `File ...` line and the source under it
            lines.append(ln)
        after_file = ln.startswith("File ") and not after_file
    keep = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "return ", "in user code",
                                                     "in converted code", "Detected at node",
                                                     "Encountered when calling",
                                                     "Graph execution error",
                                                     "<stack traces unavailable>", "[[{{node"))
            and "site-packages" not in ln and not ln.startswith("/")]
    message = " ".join(keep[:2]) if keep else (lines[-1] if lines else "")
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)    # TF's op wrapper name
    if len(message) > 240:
        message = message[:237] + "..."
    hint = next((h for words, h in _HINTS if any(w in text or w in type(error).__name__
                                                for w in words)), None)
    if hint:   # the hint first; of TensorFlow's message (and its general advice) one sentence
        message = re.sub(rf"^{type(error).__name__}:\s*", "", message)
        first = re.split(r"(?<=[.!?])\s", message, maxsplit=1)[0].rstrip(".") if message else ""
        said = f" TensorFlow's message begins: {first}." if first else ""
        return f"{type(error).__name__}. Hint: {hint}.{said}"
    return f"{type(error).__name__}: {message}".strip().rstrip(":")


def _bare(error: NotImplementedError) -> bool:
    """True for a bare ``raise NotImplementedError`` (also as a tf.function re-raises it, with
    its traceback in the message); False for one with a message of its own (NumPy's, say)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return all(ln.startswith(("File ", "Traceback", "in user code", "in converted code",
                              "raise NotImplementedError", "NotImplementedError"))
               or "site-packages" in ln or ln.startswith("/") for ln in lines)


def call(fn, args, label):
    """``(fn(*args), None)``, or ``(None, a sentence starting with label)`` when it raises."""
    try:
        return fn(*args), None
    except NotImplementedError as e:
        if _bare(e):                     # the exercise's own `raise NotImplementedError`
            return None, f"{label}: not written yet (it raised NotImplementedError)."
        return None, f"{label}: raised {explain(e)}"   # e.g. NumPy given a symbolic tensor
    except Exception as e:  # the learner's error is the message
        return None, f"{label}: raised {explain(e)}"


def call_creating(fn, args, label):
    """``call(fn, args, label)``, plus how many variables the call created (tf.Variable and Keras
    variables alike, inside a tf.function's trace too). A ``tf.function`` whose first call creates
    variables (an optimizer building its slots on first use) traces twice on that call: TF traces
    once to create them and once more to get a graph that only uses them. That second trace is
    not a retrace."""
    import tensorflow as tf
    made = []

    def creator(next_creator, **kwargs):
        made.append(kwargs.get("name"))
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        result, err = call(fn, args, label)
    return result, err, len(made)
