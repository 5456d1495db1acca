"""ctlkit/monitor/sigint.py: a real SIGINT ("interrupt kernel") stops a tf.function loop cleanly and stops
the whole cell; an interrupt that a library call swallowed is raised again by the next log()."""
import time

import pytest

from ctlkit.monitor import Monitor

# A real interrupt (SIGINT, what "interrupt kernel" sends) stops a tf.function loop cleanly
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


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # expected here
def test_an_interrupt_swallowed_in_a_finalizer_is_raised_again_by_the_next_log():
    """A KeyboardInterrupt raised inside a finalizer is lost there ("Exception ignored in ..."):
    Python hands it to sys.unraisablehook, the monitor notes it, the next log() raises it again."""
    import gc
    import os
    import signal
    import sys

    class Interrupted:                           # like a library object interrupted while freed
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)

    hook = sys.unraisablehook
    m = Monitor(total_steps=100, sink="null")
    with pytest.raises(KeyboardInterrupt, match="swallowed in a finalizer"):
        with m:
            m.log(loss=1.0)
            Interrupted()                        # freed at once: its interrupt is swallowed
            gc.collect()
            m.log(loss=0.5)                      # raises: the interrupt is not lost
            pytest.fail("log() did not raise the swallowed interrupt")
    assert m.interrupted and m.step == 1 and list(m.history["loss"]) == [1.0]
    assert sys.unraisablehook is hook            # the hook is put back


def test_an_interrupt_you_caught_yourself_is_not_raised_a_second_time():
    import os
    import signal

    m = Monitor(total_steps=100, sink="null")
    with m:
        m.log(loss=1.0)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            pytest.fail("no KeyboardInterrupt")
        except KeyboardInterrupt:
            pass                                 # the user's choice: go on
        m.log(loss=0.5)                          # no second interrupt
        m.log(loss=0.25)
    assert not m.interrupted and m.step == 3


def test_the_watch_is_nested_and_restored():
    import signal
    import sys

    before, handler = sys.unraisablehook, signal.getsignal(signal.SIGINT)
    with Monitor(sink="null") as outer:
        inside_outer = sys.unraisablehook
        with Monitor(sink="null") as inner:
            inner.log(loss=1.0)
            assert sys.unraisablehook is not inside_outer
        assert sys.unraisablehook is inside_outer
        outer.log(loss=1.0)
    assert sys.unraisablehook is before
    assert signal.getsignal(signal.SIGINT) is handler     # Python's own handler, untouched

