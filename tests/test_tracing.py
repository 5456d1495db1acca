"""Tests for ctlkit/tracing.py: trace counts, the reason for each retrace, storms, bad input."""
import collections
import warnings

import numpy as np
import pytest
import tensorflow as tf

from ctlkit import checks, tracing
from ctlkit.tracing import Leaf, RetracingWarning, count, watch


def make_fn(**options):
    """A fresh tf.function (each test needs its own trace cache)."""
    @tf.function(**options)
    def double(x, scale=1):
        return tf.nest.map_structure(lambda t: 2 * t * tf.cast(scale, t.dtype), x)
    return double


def ones(*shape, dtype=tf.float32):
    return tf.ones(shape, dtype)


class Config:
    pass


# -- count --------------------------------------------------------------------------------------
def test_count_is_zero_before_the_first_call_and_counts_new_signatures_only():
    fn = make_fn()
    assert count(fn) == 0
    fn(ones(4, 2))
    fn(ones(4, 2))
    fn(ones(4, 2) + 1)
    assert count(fn) == 1
    fn(ones(3, 2))
    assert count(fn) == 2


def test_count_accepts_a_watcher():
    fn = make_fn()
    w = watch(fn)
    w(ones(2))
    assert count(w) == count(fn) == 1


# -- reasons ------------------------------------------------------------------------------------
def test_first_call_shape_and_dtype_reasons():
    w = watch(make_fn())
    w(ones(32, 8))
    w(ones(32, 8))
    w(ones(16, 8))
    w(ones(16, 8, dtype=tf.float64))
    assert w.calls == 4 and [t.call for t in w.traces] == [1, 3, 4]
    assert [t.traces for t in w.traces] == [1, 1, 1]
    first, shape, dtype = (t.reason for t in w.traces)
    assert first == "first call"
    assert shape == "argument x: new shape (16, 8) (earlier: (32, 8))"
    assert dtype == "argument x: new dtype float64 (earlier: float32)"
    assert w.traces[1].signature == {"x": Leaf("tensor", "float32", (16, 8)),
                                     "scale": Leaf("python", "int", 1)}


def test_dtype_and_shape_together():
    w = watch(make_fn())
    w(ones(2, 2))
    w(ones(3, dtype=tf.int32))
    assert w.traces[-1].reason == ("argument x: new dtype int32 and shape (3,) "
                                   "(earlier: float32(2, 2))")


def test_python_scalar_retraces_and_the_reason_says_pass_a_tensor():
    w = watch(make_fn())
    w(ones(2), 2)
    w(ones(2), 2)
    w(ones(2), 3)
    assert len(w.traces) == 2
    assert w.traces[1].reason == ("argument scale: new Python value 3 (earlier: 2; Python scalars "
                                  "are part of the signature; pass a tensor)")
    w(ones(2), tf.constant(4))
    w(ones(2), tf.constant(5))   # a tensor: one more trace, then none
    assert len(w.traces) == 3 and "a tensor int32()" in w.traces[2].reason


def test_python_object_retraces_on_identity():
    fn = tf.function(lambda x, cfg: x + 1)
    w = watch(fn)
    cfg = Config()
    w(ones(2), cfg)
    w(ones(2), cfg)
    assert len(w.traces) == 1                                  # the same object: no retrace
    other = Config()
    w(ones(2), other)
    assert len(w.traces) == 2
    assert w.traces[1].reason.startswith("argument cfg: a new Python object of type Config")


def test_nesting_structure_and_keyword_paths():
    w = watch(make_fn())
    w([ones(2), ones(3)])
    w(x=[ones(2), ones(3)])             # keyword or positional: same inputs
    assert len(w.traces) == 1 and list(w.traces[0].signature) == ["x[0]", "x[1]", "scale"]
    w([ones(2), ones(3), ones(1)])
    assert w.traces[1].reason == ("argument x: a new nesting structure x[0], x[1], x[2] "
                                  "(earlier: x[0], x[1])")
    Pair = collections.namedtuple("Pair", "a b")
    w({"p": Pair(ones(1), ones(2))})
    assert list(w.traces[2].signature)[:2] == ["x['p'].a", "x['p'].b"]
    w(ones(1), [])
    w(ones(1), [])                             # an empty list is one (Python) leaf
    assert len(w.traces) == 4 and w.traces[3].signature["scale"] == Leaf("python", "list", [])


def test_numpy_arrays_count_as_tensors():
    w = watch(make_fn())
    w(np.ones((4, 2), np.float32))
    w(ones(4, 2))
    assert len(w.traces) == 1 and w.traces[0].signature["x"] == Leaf("tensor", "float32", (4, 2))
    w(np.float64(3.0))
    assert w.traces[1].signature["x"] == Leaf("tensor", "float64", ())


def test_reason_compares_with_the_closest_earlier_trace():
    w = watch(make_fn())
    w(ones(2), 1)
    w(ones(3), 1)
    w(ones(2), 5)    # closest to the first call, not the latest
    assert w.traces[2].reason.startswith("argument scale: new Python value 5 (earlier: 1;")


def test_two_traces_in_the_first_call_that_creates_variables():
    class Scale(tf.Module):
        def __init__(self):
            self.v = None

        @tf.function
        def __call__(self, x):
            if self.v is None:                                 # created once, on the first trace
                self.v = tf.Variable(2.0)
            return self.v * x

    scale = Scale()                      # keep it: a bound tf.function holds only a weakref to it
    w = watch(scale.__call__)
    w(tf.constant(1.0))
    w(tf.constant(2.0))
    assert [t.traces for t in w.traces] == [2] and w.traced == 2 and w.calls == 2
    assert "tf.Variables" in w.traces[0].reason


def test_watcher_started_after_earlier_traces():
    fn = make_fn()
    fn(ones(1))
    w = watch(fn)
    w(ones(2))
    assert w.traces[0].reason == "first call through the watcher (1 earlier trace(s) not seen)"


# -- what stops retracing -----------------------------------------------------------------------
def test_input_signature_traces_once_for_any_batch_size():
    fn = tf.function(lambda x: x * 2, input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    w = watch(fn)
    for n in (1, 5, 32, 7):
        w(ones(n, 8))
    assert count(fn) == 1 and len(w.traces) == 1
    with pytest.raises(TypeError):
        w(ones(3, 8, dtype=tf.float64))                        # outside the signature: refused
    assert w.calls == 4 and count(fn) == 1


def test_reduce_retracing_generalises_shapes_after_the_second_trace():
    fn = make_fn(reduce_retracing=True)
    w = watch(fn)
    for n in (1, 2, 3, 4, 5):
        w(ones(n, 8))
    assert count(fn) == 2                                      # (1, 8), then (None, 8)
    assert w.traces[1].reason == "argument x: new shape (2, 8) (earlier: (1, 8))"
    assert any("shape=(None, 8)" in s for s in w.concrete_signatures())
    for k in (10, 11, 12):                                     # ...but not Python numbers
        w(ones(4, 8), k)
    assert count(fn) == 5


# -- storm warning ------------------------------------------------------------------------------
def test_storm_warns_once_with_name_count_and_fix():
    w = watch(make_fn(), storm=3, name="my_step")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetracingWarning)      # at the threshold: no warning
        for k in range(3):
            w(ones(1), k + 1)
    with pytest.warns(RetracingWarning) as record:
        for k in range(3, 8):
            w(ones(1), k + 1)
    assert len(record) == 1 and w.warned
    message = str(record[0].message)
    assert message.startswith("my_step traced 4 times in 4 calls (storm=3)")
    for fix in ("input_signature", "None", "reduce_retracing=True", "tensors instead of Python"):
        assert fix in message
    assert issubclass(RetracingWarning, UserWarning)


# -- the wrapper behaves like the function -------------------------------------------------------
def test_results_errors_and_attributes_pass_through():
    fn = make_fn()
    w = watch(fn)
    np.testing.assert_allclose(w(ones(3)).numpy(), [2.0, 2.0, 2.0])
    assert w.get_concrete_function(ones(3)) is not None
    assert w.experimental_get_tracing_count() == 1
    assert checks.check_traces(w, [(ones(3),), (ones(3),)]).ok  # a watcher goes where fn goes
    with pytest.raises(TypeError):
        w(ones(3), bogus=1)                                    # an error propagates, no record
    assert w.calls == 3 and len(w.traces) == 1


def test_summary_and_concrete_signatures():
    w = watch(make_fn(), name="step")
    w(ones(2))
    w(ones(2))
    w(ones(3))
    text = w.summary()
    assert text.startswith("step: 3 call(s), 2 trace(s) through the watcher (2 in all); "
                           "1 call(s) reused a graph")
    assert "first call" in text and "new shape (3,) (earlier: (2,))" in text
    assert repr(w) == text
    sigs = w.concrete_signatures()
    assert len(sigs) == 2 and "shape=(2,)" in sigs[0] and "shape=(3,)" in sigs[1]


# -- bad input ----------------------------------------------------------------------------------
def test_plain_python_function_is_refused_with_the_fix():
    def step(x):
        return x

    for call in (lambda: count(step), lambda: watch(step)):
        with pytest.raises(TypeError, match=r"fn must be a tf.function.*@tf.function"):
            call()


def test_non_callable_is_refused():
    with pytest.raises(TypeError, match="not its result"):
        watch(ones(2))
    with pytest.raises(TypeError, match="fn must be a tf.function"):
        count(None)


@pytest.mark.parametrize("storm, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError),
                                          (True, TypeError), ("5", TypeError), (None, TypeError),
                                          (float("nan"), TypeError), ([5], TypeError),
                                          (np.int64(0), ValueError)])
def test_bad_storm(storm, error):
    with pytest.raises(error, match="storm must be"):
        watch(make_fn(), storm=storm)


@pytest.mark.parametrize("storm", [np.int64(3), np.array(3), tf.constant(3)])
def test_storm_accepts_numpy_and_tensor_ints(storm):
    assert watch(make_fn(), storm=storm).storm == 3


def test_bad_name():
    with pytest.raises(TypeError, match="name must be a str"):
        watch(make_fn(), name=3)


def test_public_names():
    import ctlkit

    assert ctlkit.tracing is tracing and "tracing" in ctlkit.__all__
