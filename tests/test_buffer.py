"""ctlkit/monitor/buffer.py, through the monitor: log() only keeps the values, they are read in one batch
per key at a redraw, and the history never loses or doubles a step (bad values, interrupts)."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from monitor_helpers import Probe

from ctlkit.monitor import Monitor


def test_log_does_not_convert_values_until_a_redraw():
    conversions = []
    m = Monitor(sink="null", every=3600)
    for i in range(50):
        m.log(loss=Probe(1.0 / (i + 1), conversions), grad_norm=Probe(1.0, conversions))
    assert conversions == [1, 1]  # only the first value of each key, checked at once
    assert m.redraws == 0
    m.flush()
    assert len(conversions) == 100 and m.redraws == 1
    assert m.history["loss"][-1] == pytest.approx(1 / 50)
    m.flush()
    assert len(conversions) == 100  # converted once only
    m.close()


def test_stop_on_nonfinite_converts_every_step():
    conversions = []
    m = Monitor(sink="null", every=3600, stop_on_nonfinite=True)
    for i in range(5):
        m.log(loss=Probe(1.0, conversions))
        assert len(conversions) == i + 1
    m.close()


def test_buffered_steps_are_converted_in_one_batch_with_nan_for_missing_keys():
    m = Monitor(sink="null")
    m.log(loss=tf.constant(1.0), lr=0.1)
    m.log(loss=np.float32(2.0), grad_norm=3, layer_norms={"d": tf.constant(4.0)})
    m.log(loss=np.array(5.0), layer_norms={"e": 6.0})
    m.close()
    assert m.history["loss"].tolist() == [1.0, 2.0, 5.0]
    assert np.isnan(m.history["grad_norm"][[0, 2]]).all() and m.history["grad_norm"][1] == 3.0
    assert np.isnan(m.history["layer/d"][[0, 2]]).all() and m.history["layer/e"][2] == 6.0
    assert np.isnan(m.history["lr"][1:]).all() and m.nonfinite is None  # missing is not an alarm


def test_a_reused_layer_norms_dict_is_copied_at_log_time():
    m = Monitor(sink="null")
    norms = {"dense": 1.0}
    m.log(loss=1.0, layer_norms=norms)
    norms["dense"] = 2.0                         # a loop that refills one dict each step
    m.log(loss=1.0, layer_norms=norms)
    m.close()
    assert m.history["layer/dense"].tolist() == [1.0, 2.0]


def test_earliest_nonfinite_step_wins_across_keys():
    m = Monitor(sink="null")
    m.log(loss=1.0, grad_norm=1.0)
    m.log(loss=1.0, grad_norm=1.0, layer_norms={"out": float("inf")})
    m.log(loss=float("nan"), grad_norm=float("nan"))
    m.close()
    assert m.nonfinite == ("layer/out", 2, math.inf)


class Interrupting(Probe):
    """A tensor-like value whose first conversion is interrupted (Ctrl-C during a redraw)."""

    def numpy(self):
        if not self.counter:
            self.counter.append(1)
            raise KeyboardInterrupt
        return np.float32(self.value)


def test_a_bad_value_keeps_every_good_step_and_names_its_key_and_step():
    m = Monitor(sink="null", every=3600)
    for i in range(1, 501):
        m.log(loss=tf.constant(float(i)), grad_norm=tf.ones(3) if i == 123 else tf.constant(1.0))
    with pytest.raises(ValueError, match=r"grad_norm must be a scalar, got shape \[3\].*"
                                         r"at step 123.*recorded as missing.*all 500 steps"):
        m.flush()
    h = m.history
    assert len(h) == 500 and h["loss"].tolist() == [float(i) for i in range(1, 501)]
    g = h["grad_norm"]
    assert np.isnan(g[122]) and np.isfinite(np.delete(g, 122)).all()
    assert m.nonfinite is None            # a value that could not be read is not a NaN alarm
    m.log(loss=1.0, grad_norm=1.0)        # and the run goes on
    m.close()
    assert len(m.history) == 501


def test_an_interrupt_during_conversion_loses_nothing():
    m = Monitor(sink="null", every=3600)
    hits = []
    with pytest.raises(KeyboardInterrupt):
        with m:
            for i in range(1, 501):
                m.log(loss=Interrupting(float(i), hits) if i == 250 else tf.constant(float(i)))
            m.flush()                     # the interrupt lands while the 500 steps convert
    assert hits == [1] and m.interrupted
    assert m.history["loss"].tolist() == [float(i) for i in range(1, 501)]


def test_an_interrupt_between_history_and_buffer_updates_adds_nothing_twice():
    m = Monitor(sink="null", every=3600)
    real, hits = m.history.extend, []

    def extend_then_interrupt(steps, columns):
        real(steps, columns)
        if not hits:
            hits.append(1)
            raise KeyboardInterrupt

    m.history.extend = extend_then_interrupt
    with pytest.raises(KeyboardInterrupt):
        with m:
            for i in range(1, 101):
                m.log(loss=float(i))
            m.flush()
    assert m.history.steps.tolist() == list(range(1, 101)) and m.step == 100


def test_variables_and_arrays_are_read_when_logged_not_when_drawn():
    v, kv, a = tf.Variable(0.1), keras.Variable(1.0), np.array(5.0)
    m = Monitor(sink="null", every=3600)
    for _ in range(3):
        m.log(loss=1.0, lr=v, scale=kv, count=a)
        v.assign(2 * v)
        kv.assign_add(1.0)
        a += 1                            # in place: the logged value must not change
    m.close()
    np.testing.assert_allclose(m.history["lr"], [0.1, 0.2, 0.4], rtol=1e-6)
    assert m.history["scale"].tolist() == [1.0, 2.0, 3.0]
    assert m.history["count"].tolist() == [5.0, 6.0, 7.0]



def test_a_variable_seen_before_is_read_on_the_fast_path(monkeypatch):
    # learning_rate=optimizer.learning_rate at every step (notebook 00): after its first value
    # the variable is read (its value now) without the first-value checks of every key
    import ctlkit.monitor.buffer as buffer

    v, kv = tf.Variable(0.1), keras.Variable(1.0)
    m = Monitor(sink="null", every=3600)
    m.log(loss=tf.constant(1.0), lr=v, scale=kv)
    m.log(loss=tf.constant(1.0), lr=v, scale=kv)  # the tensor type it converts to, seen once
    slow = []
    real = buffer.check_first
    monkeypatch.setattr(buffer, "check_first", lambda *a: slow.append(1) or real(*a))
    for _ in range(3):
        v.assign(2 * v)
        kv.assign_add(1.0)
        m.log(loss=tf.constant(1.0), lr=v, scale=kv)
    m.close()
    assert slow == []
    np.testing.assert_allclose(m.history["lr"], [0.1, 0.1, 0.2, 0.4, 0.8], rtol=1e-6)
    assert m.history["scale"].tolist() == [1.0, 1.0, 2.0, 3.0, 4.0]


def test_a_variable_among_the_layer_norms_is_read_at_each_log():
    # found on the way (issue 23): after the first log(), layer_norms took the fast path, which
    # kept a variable itself, so every step showed its value at the next redraw
    v = tf.Variable(1.0)
    m = Monitor(sink="null", every=3600)
    for _ in range(3):
        m.log(loss=1.0, layer_norms={"a": v, "b": tf.constant(0.5)})
        v.assign_add(1.0)
    m.close()
    assert m.history["layer/a"].tolist() == [1.0, 2.0, 3.0]
    assert m.history["layer/b"].tolist() == [0.5, 0.5, 0.5]
