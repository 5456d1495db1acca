"""ctlkit/monitor.py: logging, buffering, the redraw rule, NaN watch, interrupts, headless."""
import decimal
import fractions
import math
import re
import time

import numpy as np
import pytest
import tensorflow as tf

import keras

import ctlkit
from ctlkit import grads
from ctlkit.history import History
from ctlkit.monitor import Monitor, NonFiniteError
from ctlkit.plotter import PNG_MAGIC, Plotter
from ctlkit.sinks import NullSink
from monitor_helpers import Probe, RecordingSink


def test_history_collects_tensors_from_a_real_step():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="hidden"),
                              keras.layers.Dense(1, name="out")], name="mlp")
    x, y = tf.random.normal((16, 4)), tf.random.normal((16, 1))
    losses, gnorms, hidden = [], [], []
    monitor = Monitor(total_steps=5, sink="null")
    with monitor:
        for _ in range(5):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            g = tape.gradient(loss, model.trainable_variables)
            gnorm = grads.global_norm(g)
            per_layer = grads.layer_norms(g, model.trainable_variables)
            monitor.log(loss=loss, grad_norm=gnorm, layer_norms=per_layer)
            losses.append(float(loss))
            gnorms.append(float(gnorm))
            hidden.append(float(per_layer["mlp/hidden"]))
            for v, gv in zip(model.trainable_variables, g):
                v.assign_sub(0.1 * gv)
    h = monitor.history
    assert h.steps.tolist() == [1, 2, 3, 4, 5] and monitor.step == 5
    np.testing.assert_allclose(h["loss"], losses, rtol=1e-6)
    np.testing.assert_allclose(h["grad_norm"], gnorms, rtol=1e-6)
    np.testing.assert_allclose(h["layer/mlp/hidden"], hidden, rtol=1e-6)
    assert "layer/mlp/out" in h and h["loss"].dtype == np.float64
    assert monitor.fraction_done() == 1.0 and monitor.nonfinite is None
    assert losses[-1] < losses[0]


def test_log_accepts_numpy_python_and_extra_scalars():
    m = Monitor(sink="null")
    m.log(loss=np.float32(1.5), grad_norm=2, lr=tf.constant(0.1), accuracy=np.array(0.25))
    m.close()
    assert m.history["loss"].tolist() == [1.5] and m.history["grad_norm"].tolist() == [2.0]
    assert m.history["lr"][0] == pytest.approx(0.1) and m.history["accuracy"].tolist() == [0.25]


def test_explicit_step_numbers():
    m = Monitor(sink="null")
    m.log(step=10, loss=1.0)
    m.log(loss=2.0)
    m.log(step=np.int64(20), loss=3.0)
    m.close()
    assert m.history.steps.tolist() == [10, 11, 20] and m.step == 20


def test_missing_and_late_keys_are_nan_filled():
    m = Monitor(sink="null")
    m.log(loss=1.0, acc=0.5)
    m.log(loss=2.0)
    m.log(loss=3.0, lr=0.1)
    m.close()
    h = m.history
    assert np.isnan(h["acc"][1]) and h["acc"][0] == 0.5
    assert np.isnan(h["lr"][:2]).all() and h["lr"][2] == pytest.approx(0.1)
    assert len(h["loss"]) == len(h["acc"]) == len(h["lr"]) == 3


def test_log_epoch_records_without_forcing_a_redraw():
    m = Monitor(sink="null", every=3600)
    m.log(loss=1.0)
    m.log_epoch(val_loss=0.5)
    assert m.redraws == 0 and m.history["val_loss"].tolist() == [0.5]
    m.close()


def test_log_epoch():
    m = Monitor(sink="null")
    with m:
        for epoch in range(3):
            for _ in range(4):
                m.log(loss=1.0)
            m.log_epoch(val_loss=tf.constant(0.5 + epoch), val_accuracy=0.1 * epoch)
    assert m.history.epoch_steps.tolist() == [4, 8, 12]
    np.testing.assert_allclose(m.history["val_loss"], [0.5, 1.5, 2.5])
    np.testing.assert_allclose(m.history["val_accuracy"], [0.0, 0.1, 0.2])
    assert set(m.history.keys()) == {"loss", "val_loss", "val_accuracy"}


def test_status_line_and_fraction_done():
    m = Monitor(total_steps=10, sink="null")
    assert m.fraction_done() == 0.0 and m.elapsed() == 0.0
    for i in range(4):
        m.log(loss=1.0 / (i + 1), acc=0.5)
    m.flush()
    line = m.status_line()
    assert line.startswith("step 4/10 · ") and "steps/s" in line and "ETA" in line
    assert "loss 0.25" in line and "acc 0.5" in line
    assert m.fraction_done() == pytest.approx(0.4)
    final = m.status_line(final=True)
    assert "ETA" not in final and final.split(" · ")[2].endswith("s")
    assert Monitor(sink="null").fraction_done() is None


# -- non-finite values --------------------------------------------------------------------------
def test_nan_loss_is_reported_with_its_step(capsys):
    m = Monitor(total_steps=10, sink="null")
    with m:
        for step in range(1, 11):
            loss = tf.constant(np.nan if step in (7, 9) else 1.0 / step)
            m.log(loss=loss, grad_norm=tf.constant(1.0))
    assert m.step == 10 and len(m.history["loss"]) == 10  # the run went on
    key, step, value = m.nonfinite
    assert (key, step) == ("loss", 7) and math.isnan(value)
    out = capsys.readouterr().out
    assert "[ctlkit.monitor] non-finite loss (nan) first seen at step 7." in out
    assert "step 9" not in out
    assert m.stopped_reason is None and "NON-FINITE loss at step 7" in m.status_line()


def test_inf_grad_norm_and_layer_norms_are_watched():
    m = Monitor(sink="null")
    m.log(loss=1.0, grad_norm=1.0)
    m.log(loss=1.0, grad_norm=np.inf)
    m.close()
    assert m.nonfinite == ("grad_norm", 2, math.inf)
    m = Monitor(sink="null")
    m.log(loss=1.0, layer_norms={"dense": 1.0})
    m.log(loss=1.0, layer_norms={"dense": float("nan")})
    m.close()
    assert m.nonfinite[:2] == ("layer/dense", 2)


def test_nan_in_other_scalars_is_not_an_alarm():
    m = Monitor(sink="null", stop_on_nonfinite=True)
    with m:
        m.log(loss=1.0, val_metric=float("nan"))
        m.log(loss=1.0)
    assert m.nonfinite is None and m.step == 2 and m.stopped_reason is None


def test_stop_on_nonfinite_ends_the_with_block_cleanly(capsys):
    m = Monitor(total_steps=10, sink="null", stop_on_nonfinite=True)
    ran = []
    with m:
        for step in range(1, 11):
            ran.append(step)
            m.log(loss=tf.constant(np.nan if step == 4 else 1.0))
    assert ran == [1, 2, 3, 4]  # steps after the NaN did not run
    assert m.step == 4 and len(m.history["loss"]) == 4
    assert m.stopped_reason == "non-finite loss (nan) first seen at step 4"
    assert not m.interrupted
    assert "stopped cleanly: non-finite loss (nan) first seen at step 4" in capsys.readouterr().out


def test_stop_on_nonfinite_outside_with_raises_nonfinite_error():
    m = Monitor(sink="null", stop_on_nonfinite=True)
    m.log(loss=1.0)
    with pytest.raises(NonFiniteError, match=r"non-finite grad_norm \(inf\) first seen at step 2"
                       ) as info:
        m.log(loss=1.0, grad_norm=float("inf"))
    assert (info.value.key, info.value.step, info.value.value) == ("grad_norm", 2, math.inf)
    assert isinstance(info.value, FloatingPointError)
    assert ctlkit.NonFiniteError is NonFiniteError


def test_keyboard_interrupt_closes_cleanly_keeps_history_and_is_passed_on(capsys):
    sink = RecordingSink()
    m = Monitor(total_steps=100, sink=sink)
    with pytest.raises(KeyboardInterrupt):         # the interrupt goes on: the cell stops
        with m:
            for step in range(1, 101):
                m.log(loss=1.0 / step)
                if step == 5:
                    raise KeyboardInterrupt
    assert m.interrupted is True and m.stopped_reason == "interrupted at step 5"
    assert m.history["loss"].tolist() == [1.0, 0.5, 1 / 3, 0.25, 0.2]
    assert sink.calls[0] == "start" and sink.calls[-1] == "close"   # final figure drawn
    assert "interrupted" in m.status_line()
    out = capsys.readouterr().out
    assert "stopped cleanly: interrupted at step 5" in out and "the rest of the cell" in out


def test_one_interrupt_stops_a_loop_of_runs():
    # a cell that trains several configurations in a row: the first interrupt ends them all
    monitors = []
    with pytest.raises(KeyboardInterrupt):
        for lr in (0.1, 0.01, 0.001):
            with Monitor(sink="null") as m:
                monitors.append(m)
                for step in range(1, 101):
                    m.log(loss=lr * step)
                    if step == 7:
                        raise KeyboardInterrupt
    (m,) = monitors                                 # the second run never started
    assert m.interrupted and m._closed and m.history["loss"].tolist() == [
        0.1 * s for s in range(1, 8)]


def test_one_interrupt_stops_nested_runs_and_both_keep_their_history():
    with pytest.raises(KeyboardInterrupt):
        with Monitor(sink="null") as outer:
            for epoch in range(3):
                with Monitor(sink="null") as inner:
                    for step in range(1, 11):
                        inner.log(loss=float(step))
                        outer.log(loss=float(10 * epoch + step))
                        if epoch == 1 and step == 4:
                            raise KeyboardInterrupt
    assert inner.interrupted and outer.interrupted and inner._closed and outer._closed
    assert inner.history["loss"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert len(outer.history) == outer.step == 14


def test_other_exceptions_propagate_after_closing():
    sink = RecordingSink()
    m = Monitor(sink=sink)
    with pytest.raises(ValueError, match="learner bug"):
        with m:
            m.log(loss=1.0)
            raise ValueError("learner bug")
    assert sink.calls[-1] == "close" and m.stopped_reason is None and not m.interrupted


def test_close_is_idempotent_and_works_without_with():
    sink = RecordingSink()
    m = Monitor(sink=sink)
    m.log(loss=1.0)
    m.close()
    m.close()
    assert sink.calls.count("close") == 1 and sink.calls.count("start") == 1


# -- buffering and redraw throttling --------------------------------------------------------------
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


@pytest.mark.timing
def test_cheap_loop_gets_only_a_few_redraws():
    m = Monitor(total_steps=2000, sink="null")  # every=0.5 s
    t0 = time.perf_counter()
    for i in range(2000):
        m.log(loss=1.0 / (i + 1), grad_norm=1.0)
    elapsed = time.perf_counter() - t0
    assert m.redraws <= 1 + elapsed / 0.5
    assert m.redraws <= 3
    m.close()
    assert len(m.history["loss"]) == 2000


@pytest.mark.timing
def test_redraws_follow_every_seconds():
    m = Monitor(sink="null", every=0.1)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.65:
        m.log(loss=1.0)
        time.sleep(0.001)
    assert 3 <= m.redraws <= 8  # live, but not per step (hundreds of steps ran)
    assert m.step > 100
    m.close()


@pytest.mark.timing
def test_slow_drawing_stretches_the_redraw_interval():
    sink = RecordingSink(wants_png=True)
    m = Monitor(sink=sink, every=0.01)  # asks for 100 redraws/s; drawing takes far longer
    with m:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            m.log(loss=1.0, grad_norm=1.0)
            time.sleep(0.001)
        assert 1 <= m.redraws < 30  # unthrottled it would be ~100
        # the budget holds: all the monitor's time within draw_budget, give or take one redraw
        assert m.overhead() <= m.draw_budget + 2 * m.redraw_seconds / m.elapsed() + 0.01
    assert all(p[:8] == PNG_MAGIC for p in sink.pngs)


def _slow_start_run(monkeypatch, use_with):
    # Simulate a first-in-process matplotlib warm-up of 0.3 s (typical on a cold laptop).
    monkeypatch.setattr(Plotter, "warm_up", classmethod(lambda cls: time.sleep(0.3)))
    # Drawing itself made instant, so the measured overhead is the bookkeeping alone and the test
    # does not depend on how busy the machine's cores are.
    monkeypatch.setattr(Plotter, "render",
                        lambda self, history, x_max=None, relayout=True: b"\x89PNG fake")
    m = Monitor(sink=RecordingSink(wants_png=True), every=0.05)
    if use_with:
        m.__enter__()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.6:
        m.log(loss=1.0)
        time.sleep(0.002)
    overhead = m.overhead()
    m.close()
    assert m.startup_seconds >= 0.3
    return overhead


def test_start_up_is_not_counted_as_overhead(monkeypatch):
    assert _slow_start_run(monkeypatch, use_with=True) < 0.2


def test_start_up_is_not_counted_as_overhead_without_with(monkeypatch):
    assert _slow_start_run(monkeypatch, use_with=False) < 0.2


# -- bad arguments ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, "x", 2.5, True, [10]])
def test_bad_total_steps(bad):
    with pytest.raises((TypeError, ValueError), match=r"total_steps must be .*; pass e\.g\. total_steps="):
        Monitor(total_steps=bad, sink="null")


@pytest.mark.parametrize("bad", [0, -0.5, "x", None])
def test_bad_every(bad):
    with pytest.raises((TypeError, ValueError), match=r"every must be .*; pass e\.g\. every="):
        Monitor(every=bad, sink="null")


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1])
def test_bad_draw_budget(bad):
    with pytest.raises((TypeError, ValueError), match=r"draw_budget must be .*; pass e\.g\. draw_budget="):
        Monitor(draw_budget=bad, sink="null")


@pytest.mark.parametrize("bad", [[("dense", 1.0)], 1.0, "dense"])
def test_layer_norms_must_be_a_dict(bad):
    m = Monitor(sink="null")
    with pytest.raises(TypeError, match=r"layer_norms must be a dict"):
        m.log(loss=1.0, layer_norms=bad)


def test_monitor_fixes_the_x_axis_to_total_steps():
    m = Monitor(total_steps=500, sink=RecordingSink(wants_png=True))
    with m:
        for _ in range(10):
            m.log(loss=1.0, grad_norm=1.0)
        m.flush()
    assert m.plotter.limits["loss"][1] == 500


def test_widget_monitor_end_to_end(fake_display):
    shown, handles = fake_display
    m = Monitor(total_steps=300, sink="widget", every=0.05)
    with m:
        for i in range(300):
            m.log(loss=tf.constant(1.0 / (i + 1)), grad_norm=tf.constant(1.0))
            time.sleep(0.001)
    assert m.redraws >= 1 and m.sink.image.value[:8] == PNG_MAGIC
    (update,) = handles[0].updates
    assert update.data[:8] == PNG_MAGIC and m.sink.box.comm is None  # static final picture
    assert "step 300/300" in shown[-1].data


# -- overhead -----------------------------------------------------------------------------------
def _train(monitor, seconds):
    """A real (small) compiled training-like step: matmuls, a loss, norms, as tensors."""
    a = tf.random.uniform((160, 160))

    @tf.function
    def step(a):
        h1 = tf.tanh(a @ a)
        h2 = tf.tanh(h1 @ a)
        h3 = tf.tanh(h2 @ h1)
        return tf.reduce_mean(h3), tf.norm(h3), {"h1": tf.norm(h1), "h2": tf.norm(h2)}

    step(a)  # trace outside the timed loop
    t0 = time.perf_counter()
    with monitor:
        while time.perf_counter() - t0 < seconds:
            loss, gnorm, per_layer = step(a)
            monitor.log(loss=loss, grad_norm=gnorm, layer_norms=per_layer)
    return monitor.overhead()


@pytest.mark.timing
def test_widget_monitor_overhead_is_small(fake_display):
    m = Monitor(sink="widget")
    overhead = _train(m, seconds=2.5)
    assert m.redraws >= 1 and m.sink.image.value[:8] == PNG_MAGIC  # it did draw
    # the throttle's promise: every redraw but the last is followed by a wait of its cost over
    # the budget, so the monitor's share is the budget plus at most the last redraw's
    allowed = m.draw_budget + m.redraw_seconds / m.elapsed() + 0.01
    assert overhead <= allowed, f"monitor took {overhead:.1%} of the loop's wall time"


def test_overhead_measure_catches_a_monitor_that_redraws_all_the_time(fake_display, monkeypatch):
    # The same loop with throttling switched off: the measure must see every redraw's time.
    rendered = []
    real_render = Plotter.render

    def timed_render(self, *args, **kwargs):
        t0 = time.perf_counter()
        png = real_render(self, *args, **kwargs)
        rendered.append((time.perf_counter() - t0, self.layout_changes))
        return png

    monkeypatch.setattr(Plotter, "render", timed_render)
    m = Monitor(sink="widget", every=1e-6, draw_budget=0.99)
    overhead = _train(m, seconds=1.0)
    # renders during the loop (not the final one at close), less one-offs that built a layout
    during = rendered[:-1]
    steady = sum(t for (t, n), (_, before) in zip(during[1:], during) if n == before)
    assert m.redraws >= 5
    assert overhead * m.elapsed() >= 0.95 * steady > 0
    assert overhead > 3 * 0.03   # far above the default budget's cost


# -- regressions: bugs found by these tests, fixed --------------------------------------------
def test_smoothed_loss_does_not_droop_at_the_end():
    h = History()
    for i in range(1, 401):
        h.add(i, {"loss": 1.0})
    (_, series), *_ = h.panels()
    smoothed = dict((label, values) for label, _, values, _ in series)["smoothed"]
    np.testing.assert_allclose(smoothed, 1.0, rtol=0.05)


def test_custom_sink_without_wants_png():
    class Minimal:
        def start(self, monitor):
            pass

        def send(self, monitor, png):
            pass

        def close(self, monitor, png):
            pass

    m = Monitor(sink=Minimal())
    m.log(loss=1.0)
    m.flush()
    m.close()


def test_overhead_is_frozen_after_close():
    m = Monitor(sink="null")
    with m:
        for _ in range(100):
            m.log(loss=1.0)
        m.flush()
    before = m.overhead()
    time.sleep(0.2)
    assert m.overhead() == pytest.approx(before, rel=0.1)


def test_non_scalar_loss_error_names_the_argument():
    m = Monitor(sink="null")
    with pytest.raises(ValueError, match=r"loss"):
        m.log(loss=tf.ones(4))  # e.g. a per-sample loss (reduction=None)
        m.flush()


def test_every_nan_is_rejected():
    with pytest.raises(ValueError, match=r"every"):
        Monitor(every=float("nan"), sink="null")


# -- logging cost does not grow with the run ---------------------------------------------
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


def test_non_scalar_in_a_batch_names_its_key():
    m = Monitor(sink="null")
    m.log(loss=1.0, grad_norm=1.0)
    m.log(loss=1.0, grad_norm=tf.ones(3))        # e.g. per-variable norms passed by mistake
    with pytest.raises(ValueError, match=r"grad_norm must be a scalar, got shape \[3\]"):
        m.flush()


# -- the history never loses data ---------------------------------------------------------------
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


def test_closed_monitor_refuses_to_log_and_says_what_to_do():
    m = Monitor(sink="null", title="run A")
    m.log(loss=1.0)
    m.close()
    for call in (lambda: m.log(loss=2.0), lambda: m.log_epoch(val_loss=1.0), m.__enter__):
        with pytest.raises(RuntimeError, match=r"'run A'\) was closed at step 1.*new "
                                               r"ctlkit.Monitor"):
            call()
    m.flush()                             # nothing to do, and no error
    m.close()
    assert m.step == 1 and m.history["loss"].tolist() == [1.0]
    with Monitor(sink="null") as m2:      # a used monitor cannot be entered again either
        m2.log(loss=1.0)
    with pytest.raises(RuntimeError, match=r"was closed"):
        with m2:
            pass


def test_a_monitor_in_two_with_blocks_at_once_is_refused():
    m = Monitor(sink="null")
    with m:
        with pytest.raises(RuntimeError, match=r"already in a with block"):
            m.__enter__()
        m.log(loss=1.0)
    assert m.history["loss"].tolist() == [1.0]


def test_log_inside_tf_function_raises_at_once_naming_the_fix():
    m = Monitor(sink="null")

    @tf.function
    def step(x):
        loss = tf.reduce_sum(x)
        m.log(loss=loss)
        return loss

    with pytest.raises(TypeError, match=r"loss is a symbolic tensor: monitor.log\(\) was called "
                                        r"inside a tf.function.*Return loss from the step"):
        step(tf.ones(3))

    @tf.function
    def python_values_only(x):
        m.log(lr=0.1)                     # Python numbers inside a trace: logged once, never again
        return x

    with pytest.raises(RuntimeError, match=r"inside a tf.function"):
        python_values_only(tf.ones(1))
    assert len(m.history) == 0 and m.step == 0
    m.log(loss=tf.constant(3.0))
    m.close()                             # no NumPy error at close
    assert m.history["loss"].tolist() == [3.0]


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


# -- non-finite end-of-epoch values -------------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), np.float32("inf"), tf.constant(-np.inf)],
                         ids=["python nan", "numpy inf", "tensor -inf"])
def test_nonfinite_epoch_value_is_reported_like_a_step_value(bad, capsys):
    m = Monitor(sink="null")
    with m:
        for epoch in range(3):
            for _ in range(5):
                m.log(loss=1.0)
            m.log_epoch(val_loss=bad if epoch == 1 else 0.5, val_accuracy=0.9)
    key, step, value = m.nonfinite
    assert (key, step) == ("val_loss", 10) and not math.isfinite(value)
    assert "non-finite val_loss" in capsys.readouterr().out
    assert len(m.history["val_loss"]) == 3 and m.step == 15      # reported; the run went on


def test_nonfinite_epoch_value_stops_the_run_when_asked(capsys):
    m = Monitor(sink="null", stop_on_nonfinite=True)
    epochs = []
    with m:
        for epoch in range(5):
            epochs.append(epoch)
            m.log(loss=1.0)
            m.log_epoch(val_accuracy=float("nan") if epoch == 2 else 0.5)
    assert epochs == [0, 1, 2] and m.stopped_reason.startswith("non-finite val_accuracy (nan)")
    assert "stopped cleanly" in capsys.readouterr().out


def test_the_earliest_nonfinite_value_wins_between_steps_and_epochs():
    m = Monitor(sink="null", every=3600)
    m.log(loss=1.0)
    m.log(loss=float("nan"))              # buffered, not converted yet
    m.log_epoch(val_loss=float("nan"))
    m.close()
    assert m.nonfinite[:2] == ("loss", 2)


# -- hostile input to the public API ------------------------------------------------------------
@pytest.mark.parametrize("bad", [10.0, float("nan"), np.int64(0), "10", np.float64(3.0)])
def test_more_bad_total_steps(bad):
    with pytest.raises((TypeError, ValueError), match=r"total_steps must be .*; pass e\.g\. total_steps="):
        Monitor(total_steps=bad, sink="null")


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), True, "0.5", np.float32(-1)])
def test_more_bad_every(bad):
    with pytest.raises((TypeError, ValueError), match=r"every must be .*; pass e\.g\. every="):
        Monitor(every=bad, sink="null")


@pytest.mark.parametrize("bad", [float("nan"), True, "0.03", None])
def test_more_bad_draw_budget(bad):
    with pytest.raises((TypeError, ValueError), match=r"draw_budget must be .*; pass e\.g\. draw_budget="):
        Monitor(draw_budget=bad, sink="null")


@pytest.mark.parametrize("bad", [None, 5, b"run"])
def test_bad_title(bad):
    with pytest.raises(TypeError, match=r"title must be a str"):
        Monitor(title=bad, sink="null")


@pytest.mark.parametrize("bad", ["no", 1, None])
def test_bad_stop_on_nonfinite(bad):
    with pytest.raises(TypeError, match=r"stop_on_nonfinite must be True or False"):
        Monitor(stop_on_nonfinite=bad, sink="null")


def test_numpy_and_tensor_constructor_arguments():
    m = Monitor(total_steps=tf.constant(10), every=np.float32(0.25), draw_budget=np.float64(0.05),
                stop_on_nonfinite=np.bool_(True), sink="null")
    assert (m.total_steps, m.every, m.draw_budget, m.stop_on_nonfinite) == (10, 0.25, 0.05, True)
    assert type(m.total_steps) is int and Monitor(np.int32(7), sink="null").total_steps == 7


_NUMBERS = {
    "int": (3, 3.0), "float": (0.5, 0.5), "bool": (True, 1.0),
    "np.float16": (np.float16(0.5), 0.5), "np.float32": (np.float32(0.25), 0.25),
    "np.float64": (np.float64(2.5), 2.5), "np.int64": (np.int64(-4), -4.0),
    "np.bool_": (np.bool_(False), 0.0), "0-d array": (np.array(1.5), 1.5),
    "shape-(1,) array": (np.array([2.0]), 2.0), "float32 tensor": (tf.constant(0.75), 0.75),
    "float64 tensor": (tf.constant(0.1, tf.float64), 0.1), "int32 tensor": (tf.constant(7), 7.0),
    "float16 tensor": (tf.constant(0.5, tf.float16), 0.5),
    "bfloat16 tensor": (tf.constant(0.5, tf.bfloat16), 0.5),
    "shape-(1, 1) tensor": (tf.constant([[4.0]]), 4.0),
    "tf.Variable": (tf.Variable(0.5), 0.5), "keras.Variable": (keras.Variable(2.0), 2.0),
    "Fraction": (fractions.Fraction(1, 4), 0.25), "Decimal": (decimal.Decimal("1.5"), 1.5),
}


@pytest.mark.parametrize("value, expected", list(_NUMBERS.values()), ids=list(_NUMBERS))
def test_every_kind_of_number_is_logged_exactly(value, expected):
    m = Monitor(sink="null", every=3600)
    m.log(loss=value, acc=value, layer_norms={"dense": value})   # the first value: read now
    m.log(loss=value, acc=value, layer_norms={"dense": value})   # later ones: at the redraw
    m.log_epoch(val_loss=value)
    m.close()
    for key in ("loss", "acc", "layer/dense"):
        assert m.history[key].tolist() == pytest.approx([expected] * 2, rel=1e-6), key
    assert m.history["val_loss"].tolist() == pytest.approx([expected], rel=1e-6)


@pytest.mark.parametrize("value", [float("nan"), np.float32("nan"), np.inf, -np.inf,
                                   tf.constant(np.nan), tf.constant(np.inf, tf.float16)],
                         ids=["nan", "np.float32 nan", "inf", "-inf", "tensor nan",
                              "float16 tensor inf"])
def test_every_kind_of_nonfinite_loss_is_reported(value):
    m = Monitor(sink="null", every=3600)
    m.log(loss=1.0)
    m.log(loss=value)
    m.close()
    assert m.nonfinite[:2] == ("loss", 2)


_NOT_A_SCALAR = {
    "str": ("0.5", TypeError, r"acc must be a number or a scalar tensor, got str"),
    "bytes": (b"1", TypeError, r"got bytes"),
    "list": ([1.0], TypeError, r"got list"),
    "tuple": ((1.0, 2.0), TypeError, r"got tuple"),
    "dict": ({"a": 1.0}, TypeError, r"got dict"),
    "complex": (1 + 2j, TypeError, r"got complex"),
    "np.complex64": (np.complex64(1), TypeError, r"got complex64"),
    "object": (object(), TypeError, r"got object"),
    "vector array": (np.ones(3), ValueError, r"acc must be a scalar, got shape \[3\]"),
    "empty array": (np.zeros(0), ValueError, r"acc must be a scalar, got shape \[0\]"),
    "per-sample tensor": (tf.ones(4), ValueError, r"acc must be a scalar, got shape \[4\]"),
    "empty tensor": (tf.zeros((0,)), ValueError, r"got shape \[0\]"),
    "string tensor": (tf.constant("0.5"), TypeError, r"acc must be a real number, got bytes"),
    "complex tensor": (tf.constant(1 + 1j), TypeError, r"acc must be a real number, got complex"),
    "object array": (np.array([None]), TypeError, r"acc must be a real number"),
}


@pytest.mark.parametrize("value, error, message", list(_NOT_A_SCALAR.values()),
                         ids=list(_NOT_A_SCALAR))
def test_a_value_that_is_not_one_real_number_fails_at_log_time(value, error, message):
    m = Monitor(sink="null", every=3600)
    m.log(loss=1.0)
    with pytest.raises(error, match=message):
        m.log(loss=2.0, acc=value)
    m.log(loss=3.0)                       # the failed call stored nothing; the run goes on
    m.close()
    assert m.history.steps.tolist() == [1, 2] and m.history["loss"].tolist() == [1.0, 3.0]
    assert "acc" not in m.history


@pytest.mark.parametrize("value", ["0.5", [1.0], np.ones(2), tf.ones(2)],
                         ids=["str", "list", "vector array", "per-sample tensor"])
def test_a_bad_value_fails_at_log_time_under_every_argument(value):
    for kwargs in (dict(loss=value), dict(grad_norm=value), dict(layer_norms={"dense": value})):
        m = Monitor(sink="null")
        key = next(iter(kwargs)).replace("layer_norms", "layer_norms['dense']")
        with pytest.raises((TypeError, ValueError), match=re.escape(key)):
            m.log(**kwargs)
        assert len(m.history) == 0 and m.step == 0


@pytest.mark.parametrize("kwargs, message", [
    ({}, r"log\(\) got no values"),
    ({"loss": None}, r"log\(\) got no values"),
    ({"layer_norms": {}}, r"log\(\) got no values"),
    ({"loss": 1.0, "layer_norms": {0: 1.0}}, r"layer_norms keys must be layer names \(str\)"),
    ({"loss": 1.0, "layer/dense": 1.0}, r"'layer/dense': names starting with 'layer/'"),
], ids=["nothing", "only None", "empty layer_norms", "non-str layer name", "layer/ scalar"])
def test_log_without_usable_values_is_refused(kwargs, message):
    m = Monitor(sink="null")
    with pytest.raises((TypeError, ValueError), match=message):
        m.log(**kwargs)
    assert m.step == 0


@pytest.mark.parametrize("step, error, message", [
    (2.5, TypeError, r"step must be an int .* got float 2.5"),
    ("3", TypeError, r"got str"),
    (True, TypeError, r"got bool"),
    (tf.constant(2.0), TypeError, r"step must be an int"),
    (None.__class__, TypeError, r"step must be an int"),
    (-1, ValueError, r"step must be >= 0"),
    (5, ValueError, r"step must increase: got 5 after step 5"),
    (np.int64(4), ValueError, r"step must increase: got 4 after step 5"),
], ids=["float", "str", "bool", "float tensor", "a type", "negative", "repeated", "backwards"])
def test_bad_step_numbers(step, error, message):
    m = Monitor(sink="null")
    m.log(step=5, loss=1.0)
    with pytest.raises(error, match=message):
        m.log(step=step, loss=2.0)
    m.log(step=tf.constant(6), loss=3.0)  # an int tensor is fine
    m.close()
    assert m.history.steps.tolist() == [5, 6] and m.step == 6


def test_step_zero_first_is_fine():
    m = Monitor(sink="null")
    for step in range(3):
        m.log(step, loss=1.0)
    m.close()
    assert m.history.steps.tolist() == [0, 1, 2]


@pytest.mark.parametrize("kwargs, error, message", [
    ({}, ValueError, r"log_epoch\(\) got no values"),
    ({"val_loss": None}, ValueError, r"log_epoch\(\) got no values"),
    ({"val_loss": tf.ones(2)}, ValueError, r"val_loss must be a scalar, got shape \[2\]"),
    ({"val_loss": "0.5"}, TypeError, r"val_loss must be a number or a scalar tensor, got str"),
    ({"val_loss": 0.5, "val_acc": [0.9]}, TypeError, r"val_acc .* got list"),
    ({"layer/x": 1.0}, ValueError, r"names starting with 'layer/'"),
    ({"loss": 0.5}, ValueError, r"'loss' is already logged per step.*'val_loss'"),
], ids=["nothing", "only None", "vector", "str", "one bad of two", "layer/ key", "step key"])
def test_bad_log_epoch(kwargs, error, message):
    m = Monitor(sink="null")
    m.log(loss=1.0)
    with pytest.raises(error, match=message):
        m.log_epoch(**kwargs)
    m.close()
    assert m.history.epoch_keys() == [] and m.history["loss"].tolist() == [1.0]


def test_epoch_key_reused_per_step_is_refused():
    m = Monitor(sink="null")
    m.log(loss=1.0)
    m.log_epoch(accuracy=0.5)
    with pytest.raises(ValueError, match=r"'accuracy' is already an end-of-epoch key"):
        m.log(loss=1.0, accuracy=0.7)
    m.close()
    assert m.history["accuracy"].tolist() == [0.5] and len(m.history) == 1


def test_log_epoch_before_any_step_and_without_with():
    m = Monitor(sink="null")
    m.log_epoch(val_loss=np.float32(2.0))     # a baseline before training
    m.log(loss=1.0)
    m.close()
    assert m.history.epoch_steps.tolist() == [0] and m.history["val_loss"].tolist() == [2.0]


def test_overhead_and_elapsed_before_and_after_use():
    m = Monitor(sink="null")
    assert m.overhead() == 0.0 and m.elapsed() == 0.0 and m.redraws == 0
    m.close()                                 # closing an unused monitor is fine
    assert m.overhead() >= 0.0 and len(m.history) == 0 and m.history.keys() == []


def test_a_bad_value_found_while_an_interrupt_closes_the_run(capsys):
    # found by close(): it is raised with the interrupt as its context, and the history is kept
    m = Monitor(sink="null", every=3600)
    with pytest.raises(ValueError, match=r"loss must be a scalar") as info:
        with m:
            m.log(loss=1.0)
            m.log(loss=tf.constant([1.0, 2.0]))   # buffered: the key was checked at step 1
            raise KeyboardInterrupt
    assert isinstance(info.value.__context__, KeyboardInterrupt)
    assert m.interrupted and m.history["loss"][0] == 1.0 and len(m.history) == 2
    assert "stopped cleanly: interrupted at step 2" in capsys.readouterr().out


class PngSink(NullSink):
    wants_png = True


def _monitor_with(n):
    m = Monitor(total_steps=2 * n, sink=PngSink(), every=3600)
    noise = np.random.default_rng(0).random(n)
    for i in range(n):
        m.log(loss=1.0 / (i + 1) + 0.01 * noise[i], grad_norm=1.0 + 0.1 * (i % 7),
              layer_norms={"dense": 0.5, "out": 0.3}, lr=1e-3)
    m.flush()
    return m


def _redraw_seconds(m, times=8):
    best = math.inf
    for _ in range(times):
        m.log(loss=0.5, grad_norm=1.2, layer_norms={"dense": 0.5, "out": 0.3}, lr=1e-3)
        fulls = m.plotter.full_draws
        t0 = time.perf_counter()
        m.flush()
        best = min(best, time.perf_counter() - t0)
        assert m.plotter.full_draws == fulls        # blits only: the same kind of redraw
    return best


@pytest.mark.timing
def test_redraw_cost_does_not_grow_with_the_run_and_the_history_keeps_every_step():
    short, long_ = _monitor_with(1_000), _monitor_with(200_000)
    fast, slow = _redraw_seconds(short), _redraw_seconds(long_)
    # before: ~10 ms at 1k steps, ~53 ms at 200k (panels() read the whole history each time)
    assert slow < 3 * fast + 0.005, f"redraw {fast * 1e3:.1f} ms at 1k, {slow * 1e3:.1f} ms at 200k"
    h = long_.history
    assert len(h) == 200_008 and all(len(h[k]) == 200_008 for k in h.keys())
    assert h["loss"][-1] == 0.5 and h["loss"][199_999] == pytest.approx(1 / 200_000, abs=0.011)
    for _, series in h.panels(long_.plotter.max_points):
        for label, steps, values, _ in series:
            assert len(steps) == len(values) <= long_.plotter.max_points, label
    long_.close()


def test_short_runs_are_drawn_point_for_point_with_the_same_smoothing():
    v = np.random.default_rng(2).random(300)
    h = History()
    h.extend(list(range(1, 301)), {"loss": v})
    (_, [(_, steps, raw, _), (_, s_steps, smoothed, _)]), = h.panels(1000)
    np.testing.assert_array_equal(raw, v)
    w = 300 // 40                          # trailing mean over the last w steps
    expected = [v[max(0, i + 1 - w):i + 1].mean() for i in range(300)]
    np.testing.assert_allclose(smoothed, expected, rtol=1e-12)
    assert s_steps.tolist() == list(range(1, 301))


@pytest.mark.timing
def test_an_expensive_redraw_waits_its_cost_over_the_budget():
    # the throttle: next redraw when now - last >= max(every, last redraw's cost / draw_budget)
    sink = RecordingSink(wants_png=False)
    sink.send = lambda monitor, png: time.sleep(0.05)      # every redraw costs 50 ms
    m = Monitor(sink=sink, every=0.01, draw_budget=0.25)   # so the wait after one is ~0.2 s
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.25:
        m.log(loss=1.0)
        time.sleep(0.001)
    assert m.redraw_seconds >= 0.05
    assert 3 <= m.redraws <= 6        # about one per 0.25 s (0.2 waiting + 0.05 drawing)
    assert m.overhead() <= 0.25 + 0.05 / m.elapsed() + 0.02   # the budget, give or take one
    m.close()


# -- a real interrupt (SIGINT, what "interrupt kernel" sends) stops a tf.function loop cleanly ---
# and stops the whole "cell": the process, here, which runs several monitored runs in a row
# (sequential) or runs inside a run (nested). The first run's history must be kept and the
# next run must never start.
_INTERRUPTIBLE = r"""
import sys, tensorflow as tf, ctlkit
w = tf.Variable(tf.ones([64, 64]))
opt = tf.keras.optimizers.SGD(1e-3)

@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(w @ w))
    grads = tape.gradient(loss, [w])
    opt.apply_gradients(zip(grads, [w]))
    return loss, ctlkit.grads.global_norm(grads)

def train(monitors, ready):
    for i in range(10**7):
        loss, gnorm = step()
        for monitor in monitors:
            monitor.log(loss=loss, grad_norm=gnorm)
        if i == 20 and ready:
            print("READY", flush=True)

runs = []
try:
    if sys.argv[1] == "sequential":
        for run in range(3):
            print("START", run, flush=True)
            with ctlkit.Monitor(total_steps=10**7, sink="null") as monitor:
                runs.append(monitor)
                train([monitor], run == 0)
    else:
        with ctlkit.Monitor(sink="null") as outer:
            runs.append(outer)
            for run in range(3):
                print("START", run, flush=True)
                with ctlkit.Monitor(total_steps=10**7, sink="null") as inner:
                    runs.append(inner)
                    train([inner, outer], run == 0)
finally:   # what a learner's next cell would look at
    for m in runs:
        print("AFTER", m.interrupted, m._closed, m.step, len(m.history["loss"]),
              int(opt.iterations) - m.step in (0, 1), flush=True)  # the signal may land between
"""


@pytest.mark.parametrize("layout", ["sequential", "nested"])
def test_sigint_stops_the_whole_cell_after_a_clean_stop(layout):
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTIBLE, layout],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        line, before = "", []
        deadline = time.time() + 120
        while "READY" not in line and time.time() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, proc.stderr.read()[-2000:]
            before.append(line)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        out = "".join(before) + out
    finally:
        if proc.poll() is None:
            proc.kill()
    # the interrupt reached the top: Python ends a process it interrupted with SIGINT itself
    assert proc.returncode == -signal.SIGINT, (proc.returncode, err[-2000:])
    assert "KeyboardInterrupt" in err
    lines = out.splitlines()
    assert [ln for ln in lines if ln.startswith("START")] == ["START 0"], out  # no next run
    after = [ln.split()[1:] for ln in lines if ln.startswith("AFTER")]
    assert len(after) == (1 if layout == "sequential" else 2), out + err[-2000:]
    for interrupted, closed, step, n_loss, in_sync in after:
        assert interrupted == closed == in_sync == "True", out
        assert int(step) > 20 and int(n_loss) == int(step)    # every step kept
    assert out.count("stopped cleanly: interrupted at step") == len(after)


def test_an_interrupt_swallowed_inside_a_library_call_is_raised_again_by_the_next_log():
    """A KeyboardInterrupt raised inside a finalizer or callback is lost there ("Exception
    ignored in ..."): the monitor noted the SIGINT, so the next log() raises it again."""
    import os
    import signal

    before = signal.getsignal(signal.SIGINT)
    m = Monitor(total_steps=100, sink="null")
    with pytest.raises(KeyboardInterrupt):
        with m:
            m.log(loss=1.0)
            try:                                   # a library that swallows the interrupt
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
            except KeyboardInterrupt:
                pass
            m.log(loss=0.5)                        # raises: the interrupt is not lost
            pytest.fail("log() did not raise the swallowed interrupt")
    assert m.interrupted and m.step == 1 and list(m.history["loss"]) == [1.0]
    assert signal.getsignal(signal.SIGINT) is before   # the handler is put back


def test_the_sigint_watch_is_nested_and_restored():
    import signal

    before = signal.getsignal(signal.SIGINT)
    with Monitor(sink="null") as outer:
        inside_outer = signal.getsignal(signal.SIGINT)
        with Monitor(sink="null") as inner:
            inner.log(loss=1.0)
            assert signal.getsignal(signal.SIGINT) is not inside_outer
        assert signal.getsignal(signal.SIGINT) is inside_outer
        outer.log(loss=1.0)
    assert signal.getsignal(signal.SIGINT) is before


# -- show(): one live picture beside the curves, under the same throttle ----------------------
def test_show_draws_a_picture_at_redraws_and_a_function_each_time():
    calls = []

    def samples():
        calls.append(1)
        return np.full((4, 4), len(calls) / 10)

    m = Monitor(sink=RecordingSink(wants_png=True), every=0.05)
    with m:
        m.show(samples)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.4:
            m.log(loss=1.0)
            time.sleep(0.002)
    assert m.picture[:8] == PNG_MAGIC
    assert 2 <= len(calls) <= m.redraws + 1      # once per redraw (and at close), never per step
    m2 = Monitor(sink="null")
    m2.show(np.zeros((3, 3)))
    m2.close()
    assert m2.picture[:8] == PNG_MAGIC


def test_show_refuses_a_bad_image_at_once_and_after_close():
    m = Monitor(sink="null")
    with pytest.raises(ValueError, match="tile it first"):
        m.show(np.zeros((8, 4, 4, 1)))
    m.close()
    with pytest.raises(RuntimeError, match="show: this Monitor"):
        m.show(np.zeros((3, 3)))


def test_widget_sink_shows_the_picture_beside_the_curves(fake_display):
    shown, handles = fake_display
    m = Monitor(sink="widget", every=0.01)
    with m:
        m.show(lambda: np.zeros((6, 6)))
        for i in range(30):
            m.log(loss=1.0 / (i + 1))
            time.sleep(0.002)
        m.flush()
        assert m.sink.picture.value[:8] == PNG_MAGIC
        assert m.sink.picture in m.sink.box.children[1].children
    assert any(getattr(o, "data", b"")[:8] == PNG_MAGIC and o.data == m.picture for o in shown)


@pytest.mark.timing
def test_new_axis_limits_wait_their_own_cost_over_the_budget():
    # a loss that climbs forever leaves the axes at every redraw; a full draw (axes, ticks,
    # labels) costs several blits, so it comes at most every full cost / draw_budget, and the
    # redraws between are blits with the curve clipped at the edge
    m = Monitor(sink=RecordingSink(wants_png=True), every=0.01, draw_budget=0.2)
    t0, i = time.perf_counter(), 0
    with m:
        while time.perf_counter() - t0 < 1.5:
            i += 1
            m.log(loss=float(i))
            time.sleep(0.001)
    fulls = m.plotter.full_draws - 1                  # the final picture at close() is full
    assert 1 <= fulls < m.redraws - m.plotter.layout_changes, (fulls, m.redraws)
    assert m.overhead() <= 2 * m.draw_budget + 0.05
