"""Exercise checkers: run a learner's function beside a reference and say what differs.

    report = ctlkit.checks.check_function(my_fn, reference_fn, cases=[(x,), (y,)])
    report.ok          # True when every case matches
    report.assert_ok() # raise AssertionError with the explanation (used under solutions)

Notebooks call ``ctlkit.exercises.check("NN.name", fn)``, which holds each exercise's reference
and cases and calls these. One job per module:

* ``function``: ``check_function`` (values, structure, dtype, gradients) and ``check_traces``
  (a ``tf.function`` that retraces);
* ``step``:     ``check_step``, a training step against the reference's, weights after each batch;
* ``report``:   ``Report``, ``ContextError`` and ``compare``: how two values differ, in sentences,
  and an answer off by a simple factor named as such;
* ``errors``:   ``explain``: an error raised by the learner's code, in one sentence with the likely
  fix, and ``call``, which runs the learner's code and catches it;
* ``cases``:    the cases tried, their labels, and each call's own copy of the arguments.
"""
from .errors import explain
from .function import check_function, check_traces
from .report import ContextError, Report, compare
from .step import check_step

__all__ = ["ContextError", "Report", "check_function", "check_step", "check_traces", "compare", "explain"]
