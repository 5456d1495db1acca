"""Notebook 12, the performance lab: k steps per tf.function call, one trace for every batch size."""
from __future__ import annotations

import functools

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


# -- 12.train_k -----------------------------------------------------------------------------------
class _Runner:
    """Calls ``train_k(iterator, tf.constant(n))`` on its own iterator over the epoch: the step
    ``check_step`` drives with batches ``(n,)``. Its trace count is ``train_k``'s."""

    def __init__(self, train_k):
        self.train_k, self.iterator = train_k, iter(_task().train)

    def __call__(self, n):
        return self.train_k(self.iterator, tf.constant(n, tf.int32))

    def experimental_get_tracing_count(self):
        return self.train_k.experimental_get_tracing_count()


class _SingleSteps:
    """The reference: n calls of the compiled single step on the next n batches; the last loss."""

    def __init__(self, step):
        self.step, self.iterator = tf.function(step), iter(_task().train)

    def __call__(self, n):
        loss = tf.constant(0.0)
        for _ in range(n):
            loss = self.step(*next(self.iterator))
        return loss


def train_k(fn):
    model, optimizer = _build()
    made, problems = None, []
    try:
        made = fn(_step(model, optimizer))
    except NotImplementedError:
        problems = ["make_train_k: not written yet (it raised NotImplementedError)."]
    except Exception as e:  # noqa: BLE001 - the learner's error is the message
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
            "so that its loop runs inside one graph (that is the point: one Python call for n "
            "steps)."])
    # One epoch is 11 batches (10 of 32, one of 10): n = 3, 1 and 7 walk through all of them on
    # one iterator, each call carrying on where the last one stopped, the last call through the
    # short batch. After each call the loss returned (the last step's), every weight and the
    # optimizer's step counter must equal those after n single steps; n varies, so a train_k
    # that depends on n's value at trace time traces more than once.
    batches = {"n = 3 (the first three batches of an epoch)": (3,),
               "n = 1 (one step, on the same iterator)": (1,),
               "n = 7 (the rest of the epoch, through its short last batch of 10)": (7,)}
    report = check_step(lambda m, o: _Runner(fn(_step(m, o))),
                        lambda m, o: _SingleSteps(_step(m, o)), _build, batches,
                        state=_iterations, name="make_train_k", rtol=1e-4, atol=1e-6,
                        max_traces=1)
    return _hint(report, "train_k must trace once for every n: keep n a tensor and loop with "
                         "tf.range(n) (a Python value of n makes one graph per n).")


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


EXERCISES = {"train_k": train_k, "step": step}
