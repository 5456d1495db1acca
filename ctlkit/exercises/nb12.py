"""Notebook 12, the performance lab: k steps per tf.function call that stop cleanly at the end of the
data, one trace for every batch size."""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from ..checks import Report, check_step, explain
from ..steps import plain_step


@functools.lru_cache(maxsize=1)
def _task():
    """The notebook's ``ex_task``: 330 examples of the 784-pixel digits, so an epoch is ten
    batches of 32 and a short last one of 10; ``build()`` gives identically seeded pairs."""
    from ..bench import Task
    return Task(330, test_examples=100)


def _build():
    return _task().build()


def _step(model, optimizer):
    return plain_step(model, optimizer, _task().loss_fn, compile=False)   # the notebook's train_step


def _iterations(model, optimizer):
    return {"optimizer.iterations (steps applied so far)": int(optimizer.iterations.numpy())}


def _hint(report, hint):
    """The report, with ``hint`` added to a "traced N times" problem (check_step's message is
    generic; this exercise knows what makes it retrace)."""
    report.problems = [f"{p} Here: {hint}" if "traced" in p and "times for" in p else p
                       for p in report.problems]
    return report


# -- 12.train_k_until_end -------------------------------------------------------------------------
class _Runner:
    """Calls ``train_k(iterator, tf.constant(k))`` on its own iterator over the epoch: the step
    ``check_step`` drives with batches ``(k,)``. Its trace count is ``train_k``'s. An integer
    count of another dtype is taken as int32 (the number is what the statement asks for)."""

    def __init__(self, train_k):
        self.train_k, self.iterator, self.calls = train_k, iter(_task().train), []

    def __call__(self, k):
        out = self.train_k(self.iterator, tf.constant(k, tf.int32))
        if tf.is_tensor(out) and out.dtype.is_integer and out.dtype != tf.int32:
            out = tf.cast(out, tf.int32)
        self.calls.append((k, out))
        return out

    def experimental_get_tracing_count(self):
        return self.train_k.experimental_get_tracing_count()


class _StepsUntilEnd:
    """The reference: up to k calls of the compiled single step, each on the next batch, stopping
    quietly when the epoch's data run out; returns how many steps ran, as fit() counts them."""

    def __init__(self, step):
        self.step, self.iterator, self.calls = tf.function(step), iter(_task().train), []

    def __call__(self, k):
        ran = 0
        for _ in range(k):
            batch = next(self.iterator, None)
            if batch is None:
                break
            self.step(*batch)
            ran += 1
        out = tf.constant(ran, tf.int32)
        self.calls.append((k, out))
        return out


# the epoch has 11 batches (10 of 32, one of 10); each run: [(label, k, steps that run)]
_UNTIL_END_RUNS = [
    [("k = 4 (the first four batches of the epoch)", 4, 4),
     ("k = 2 (the next two, on the same iterator)", 2, 2),
     ("k = 7 with five batches left, the last one short: 5 steps run, then the data end", 7, 5),
     ("k = 3 on the used-up iterator: no step, return 0 without an error", 3, 0)],
    [("k = 11 on a fresh epoch of 11 batches (the data end exactly at k)", 11, 11),
     ("k = 1 after the epoch's last batch: 0 steps", 1, 0)],
]

_OPTIONAL = ("a graph cannot catch the end of the data: next(iterator) (and a Python try/except "
             "around it, which only runs while tracing) raises OutOfRangeError there. Fetch with "
             "`batch = iterator.get_next_as_optional()`, stop the loop when "
             "`batch.has_value()` is False, and take the pair with `batch.get_value()`.")


def _until_end_hints(report, runs):
    """Name the slips a count can show: k returned whatever ran, one too many, the loss."""
    hints = []
    text = " ".join(report.problems)
    if "OutOfRange" in text or "End of sequence" in text:
        hints.append(_OPTIONAL)
    elif "get_value" in text or "empty Optional" in text.lower() or "optional" in text.lower():
        hints.append("get_value() on an empty optional fails: check `batch.has_value()` first, "
                     "and only then take the batch and run the step.")
    mine, ref = runs
    for (k, got), (_, want) in zip(mine.calls, ref.calls):
        if not tf.is_tensor(got) or got.dtype.is_floating or np.shape(got) != ():
            if tf.is_tensor(got) and got.dtype.is_floating and np.shape(got) == () \
                    and float(got) == int(want):
                hints.append("the count is right but a float: count in int32 "
                             "(`ran = tf.constant(0)`, then `ran += 1`).")
            elif tf.is_tensor(got) and got.dtype.is_floating:
                hints.append("train_k returns how many steps ran (an int32 count, as fit() counts "
                             "steps), not the loss.")
            elif isinstance(got, (tuple, list)):
                hints.append("return only the number of steps that ran, an int32 scalar.")
            break
        g, w = int(got), int(want)
        if g != w:
            if g == k and w < k:
                hints.append(f"on a call with k = {k} only {w} steps ran and yours returned {k}: "
                             f"return the count of steps that actually ran, not k.")
            elif g == w + 1:
                hints.append(f"on a call with k = {k}, {w} steps ran and yours counted {g}: the "
                             f"fetch that found no batch is counted as a step.")
            break
    report.problems = hints + report.problems
    return report


def train_k_until_end(fn):
    model, optimizer = _build()
    made, problems = None, []
    try:
        made = fn(_step(model, optimizer))
    except NotImplementedError:
        problems = ["make_train_k: not written yet (it raised NotImplementedError)."]
    except Exception as e:  # the learner's error is the message
        problems = [f"make_train_k(step) raised {explain(e)}"]
    if problems:
        return Report(name="make_train_k", problems=problems, cases=0)
    if not callable(made):
        return Report(name="make_train_k", cases=0, problems=[
            f"make_train_k returned {type(made).__name__}, not a function: return train_k "
            f"itself (`return train_k`)."])
    if not hasattr(made, "experimental_get_tracing_count"):
        return Report(name="make_train_k", cases=0, problems=[
            "make_train_k returned a plain Python function: decorate train_k with @tf.function, "
            "so that its loop runs inside one graph (that is the point: one Python call for k "
            "steps)."])
    problems, cases = [], 0
    for run in _UNTIL_END_RUNS:
        made_here = {}

        def mine(m, o):
            made_here["mine"] = _Runner(fn(_step(m, o)))
            return made_here["mine"]

        def theirs(m, o):
            made_here["ref"] = _StepsUntilEnd(_step(m, o))
            return made_here["ref"]
        batches = {label: (k,) for label, k, _ in run}
        r = check_step(mine, theirs, _build, batches, state=_iterations, name="make_train_k",
                       rtol=1e-4, atol=1e-6, max_traces=1)
        cases += r.cases
        if not r.ok:
            r.problems = [p.replace("the value your step returned", "the count train_k returned")
                          .replace("your step's update", "the update of your train_k call")
                          .replace("your step traced", "train_k traced")
                          .replace("your step: raised", "train_k raised")
                          .replace("on k = ", "on the call with k = ")
                          for p in r.problems]
            if "mine" in made_here and "ref" in made_here:
                r = _until_end_hints(r, (made_here["mine"], made_here["ref"]))
            r = _hint(r, "train_k must trace once for every k: keep k a tensor and loop with "
                         "tf.range(k) or a tf.while_loop (a Python value of k makes one graph per "
                         "k).")
            problems = r.problems
            break
    return Report(name="make_train_k", problems=problems, cases=cases)


# -- 12.step --------------------------------------------------------------------------------------
def _reference_step(model, optimizer, loss_fn):
    signature = [tf.TensorSpec([None, 784], tf.float32), tf.TensorSpec([None], tf.int32)]
    return tf.function(plain_step(model, optimizer, loss_fn, compile=False),
                       input_signature=signature)


def step(fn):
    t = _task()
    x, y = t.x_train, t.y_train
    rows = lambda a, b: (tf.constant(x[a:b]), tf.constant(y[a:b]))  # noqa: E731
    batches = {"a full batch of 32 rows": rows(0, 32),
               "a short batch of 10 rows (a new batch size: must not trace again)": rows(32, 42),
               "a batch of 7 rows (a third size)": rows(42, 49),
               "another batch of 32 rows": rows(49, 81)}
    report = check_step(fn, _reference_step, _build, batches, args=(t.loss_fn,),
                        state=_iterations, name="make_step", rtol=1e-4, atol=1e-6, max_traces=1)
    return _hint(report, "each new batch size traces a plain tf.function again (and "
                         "reduce_retracing=True still traces once more): pass "
                         "input_signature=[tf.TensorSpec([None, 784], tf.float32), "
                         "tf.TensorSpec([None], tf.int32)], None marking the axis that varies.")


EXERCISES = {"train_k_until_end": train_k_until_end, "step": step}
