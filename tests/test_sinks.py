"""ctlkit/monitor/sinks.py: choosing a sink; the text and widget sinks."""
import io

import IPython
import IPython.display
import pytest
import tensorflow as tf
from monitor_helpers import RecordingSink, history

from ctlkit.monitor import Monitor, sinks
from ctlkit.monitor.plotter import render_png
from ctlkit.monitor.sinks import NullSink, TextSink, WidgetSink, make_sink


@pytest.mark.parametrize("bad", ["bogus", "Widget", "", None, 5])
def test_unknown_sink(bad):
    with pytest.raises(ValueError,
                       match=r"sink must be one of \('auto', 'widget', 'text', 'null'\)"):
        Monitor(sink=bad)


def test_bogus_ctlkit_monitor_env(monkeypatch):
    monkeypatch.setenv("CTLKIT_MONITOR", "bogus")
    with pytest.raises(ValueError, match=r"CTLKIT_MONITOR must be one of .* got 'bogus'"):
        Monitor()
    assert isinstance(Monitor(sink="null").sink, NullSink)  # an explicit sink ignores the env


def test_make_sink_kinds(monkeypatch):
    assert type(make_sink("null")) is NullSink
    assert type(make_sink("text")) is TextSink
    assert type(make_sink("auto")) is TextSink  # no Jupyter kernel in pytest
    monkeypatch.setenv("CTLKIT_MONITOR", "null")
    assert type(make_sink("auto")) is NullSink
    monkeypatch.setenv("CTLKIT_MONITOR", "text")
    assert type(make_sink()) is TextSink
    own = RecordingSink()
    assert make_sink(own) is own


def test_auto_picks_the_widget_in_a_kernel(monkeypatch, fake_display):
    # imported before the fake kernel exists: on import, ipywidgets 7 registers its comm target
    # with the running kernel, which a fake one cannot take (ipywidgets 8 does not)
    import ipywidgets  # noqa: F401

    class FakeShell:
        kernel = object()

    monkeypatch.setattr(IPython, "get_ipython", lambda: FakeShell())
    assert sinks._in_kernel() is True
    assert type(make_sink("auto")) is WidgetSink
    monkeypatch.setenv("CTLKIT_MONITOR", "text")
    assert type(make_sink("auto")) is TextSink


def test_not_in_kernel_without_ipython_shell(monkeypatch):
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert sinks._in_kernel() is False


def test_text_sink_headless_output(capsys):
    m = Monitor(total_steps=20, sink="text")
    with m:
        for step in range(1, 21):
            m.log(loss=tf.constant(1.0 / step), grad_norm=tf.constant(2.0))
            if step == 10:
                m.flush()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("step 10/20 · ") and "loss 0.1 · grad_norm 2" in lines[0]
    assert lines[-1].startswith("step 20/20 · ") and "loss 0.05" in lines[-1]
    assert "ETA" not in lines[-1]


def test_text_sink_line_per_flush_and_tty_in_place():
    buf = io.StringIO()
    m = Monitor(total_steps=3, sink=TextSink(every=0, stream=buf))
    for _ in range(3):
        m.log(loss=0.5)
        m.flush()
    m.close()
    lines = buf.getvalue().splitlines()
    assert [line.split(" · ")[0] for line in lines] == ["step 1/3", "step 2/3", "step 3/3",
                                                        "step 3/3"]

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    sink = TextSink(stream=tty)
    assert sink.every == 0.5 and TextSink(stream=io.StringIO()).every == 5.0
    sink.send(m)
    assert tty.getvalue().endswith("\r")


def test_text_sink_throttles_its_own_lines():
    buf = io.StringIO()
    m = Monitor(sink=TextSink(every=3600, stream=buf))
    for _ in range(5):
        m.log(loss=0.5)
        m.flush()
    assert len(buf.getvalue().splitlines()) == 1


def test_text_sink_final_png_only_in_a_kernel(monkeypatch, fake_display):
    shown, _ = fake_display
    m = Monitor(sink="null")
    TextSink(stream=io.StringIO()).close(m)                 # nothing logged: no figure
    m.history = history(5)
    TextSink(stream=io.StringIO()).close(m)                 # not in a kernel: no figure
    assert shown == []
    monkeypatch.setattr(sinks, "_in_kernel", lambda: True)
    TextSink(stream=io.StringIO()).close(m)
    assert len(shown) == 1 and isinstance(shown[0], IPython.display.Image)
    assert shown[0].data == render_png(m.history, m.title)  # the whole history, drawn once


def test_widget_sink_start_send_close(fake_display):
    shown, handles = fake_display
    m = Monitor(total_steps=10, sink="null")
    sink = WidgetSink(max_fps=1e9)          # every send is a frame (the cap: the next test)
    sink.start(m)
    view = "application/vnd.jupyter.widget-view+json"     # the bundle itself, as on ipywidgets 7 and 8
    assert len(shown) == 1 and shown[0][view]["model_id"] == sink.box.model_id and len(handles) == 1
    assert "<progress value='0.000'" in sink.label.value and "step 0/10" in sink.label.value

    assert sink.plotter is not None and sink.plotter.draw_budget == m.draw_budget
    m.step = 3
    sink.send(m)                # nothing logged yet: a text-only update, no picture
    assert sink.image.value == b"" and "step 3/10" in sink.label.value
    m.history, m.step = history(10), 5
    sink.send(m)                # the sink draws the history with its own plotter
    png = sink.image.value
    assert png == render_png(m.history, m.title, x_max=10) and sink.plotter.full_draws == 1
    assert "<progress value='0.500'" in sink.label.value and "step 5/10" in sink.label.value

    m.history = history(12)
    sink.close(m)               # the final picture, with every step, takes the widget's place
    (update,) = handles[0].updates
    assert isinstance(update, IPython.display.Image)
    assert update.data.startswith(b"\x89PNG") and update.data != png
    assert sink.box.comm is None  # the live widget is closed
    assert isinstance(shown[-1], IPython.display.HTML) and "step 5/10" in shown[-1].data


def test_widget_sink_close_without_picture_keeps_widget(fake_display):
    _, handles = fake_display
    m = Monitor(sink="null")
    sink = WidgetSink()
    sink.start(m)
    sink.close(m)               # nothing was logged: the widget stays, with its last line
    assert handles[0].updates == []


def test_widget_sink_sends_at_most_max_fps_frames(fake_display):
    clock = [100.0]
    m = Monitor(total_steps=100, sink="null", clock=lambda: clock[0])   # the sink reads it too
    sink = WidgetSink(max_fps=5)
    sink.start(m)
    m.history, m.step = history(10), 10
    sink.send(m)
    first = bytes(sink.image.value)
    assert sink.frames == 1 and first.startswith(b"\x89PNG") and "step 10/100" in sink.label.value
    m.history, m.step = history(20), 20
    clock[0] += 0.1                           # sooner than 1/5 s: drawn, not sent
    sink.send(m)
    assert sink.frames == 1 and bytes(sink.image.value) == first and "step 10/100" in sink.label.value
    clock[0] += 0.15                          # 0.25 s after the last frame: sent
    sink.send(m)
    assert sink.frames == 2 and bytes(sink.image.value) != first and "step 20/100" in sink.label.value


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (float("inf"), ValueError),
                                        ("5", TypeError)])
def test_widget_sink_max_fps_is_checked(bad, error):
    with pytest.raises(error, match="max_fps"):
        WidgetSink(max_fps=bad)


def test_text_sink_prints_a_line_per_every_seconds_of_the_monitors_clock():
    clock = [0.0]
    buf = io.StringIO()
    m = Monitor(sink=TextSink(every=5.0, stream=buf), every=0.5, clock=lambda: clock[0])
    for _ in range(96):                       # 12 s of steps of 1/8 s, from the first log()
        clock[0] += 0.125
        m.log(loss=0.5)
    # a redraw per 0.5 s (23 after 11.875 s); a line at the first and then per 5 s: 3
    assert m.redraws == 23 and len(buf.getvalue().splitlines()) == 3


def test_a_clock_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError, match=r"clock must be a function returning seconds \(like time"):
        Monitor(sink="null", clock=12.0)

