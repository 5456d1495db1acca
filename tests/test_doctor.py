"""Tests for ctlkit/__main__.py: ``python -m ctlkit doctor``, run by a teacher before a session."""
import os
import re
import subprocess
import sys

import pytest

from ctlkit import __main__ as cli
from ctlkit import data


@pytest.fixture(scope="module")
def doctor_run(tmp_path_factory):
    env = dict(os.environ, CTLKIT_QUICK="1", TF_CPP_MIN_LOG_LEVEL="2",
               KERAS_HOME=str(tmp_path_factory.mktemp("keras_home")))
    env.pop("CTLKIT_MONITOR", None)
    return subprocess.run([sys.executable, "-m", "ctlkit", "doctor"], capture_output=True,
                          text=True, env=env, timeout=180)


def test_doctor_exits_zero(doctor_run):
    assert doctor_run.returncode == 0, doctor_run.stderr[-2000:]


def test_doctor_reports_versions_device_and_mode(doctor_run):
    out = doctor_run.stdout
    assert out.startswith("ctlkit doctor\n")
    assert re.search(r"^TensorFlow 2\.\d+\.\d+ · Keras 3\.\d+\.\d+ · Python 3\.\d+", out, re.M)
    assert re.search(r"^device: (CPU|GPU|TPU) \(.+\) · strategy: \w+ · replicas: \d+$", out, re.M)
    assert re.search(r"^recommended precision policy: (float32|mixed_float16|mixed_bfloat16)",
                     out, re.M)
    assert re.search(r"^  CPU: [1-9]\d* device\(s\)", out, re.M)
    assert re.search(r"^  GPU: \d+ device\(s\)", out, re.M)
    assert "quick mode (CTLKIT_QUICK=1): True" in out


def test_doctor_reports_widgets_sink_datasets_and_images(doctor_run):
    out = doctor_run.stdout
    assert re.search(r"^widget frontend: ipywidgets \d+\.\d+", out, re.M)
    assert "monitor sink in this process: TextSink" in out  # no Jupyter kernel in a subprocess
    assert "datasets:\n  digits: offline (scikit-learn)\n  mnist: " in out
    assert re.search(r"^  fashion_mnist: (cached|downloadable|offline: falls back to digits)",
                     out, re.M)
    assert "images offline: " + ", ".join(data.IMAGES) in out


def test_doctor_in_process_follows_ctlkit_monitor(monkeypatch, capsys):
    monkeypatch.setattr(data, "online", lambda timeout=3.0: False)
    monkeypatch.setenv("CTLKIT_MONITOR", "null")
    assert cli.main(["doctor"]) == 0
    assert "monitor sink in this process: NullSink" in capsys.readouterr().out


def test_doctor_reports_a_bogus_ctlkit_monitor_without_crashing(monkeypatch, capsys):
    monkeypatch.setattr(data, "online", lambda timeout=3.0: False)
    monkeypatch.setenv("CTLKIT_MONITOR", "bogus")
    monkeypatch.setenv("CTLKIT_QUICK", "0")
    assert cli.main(["doctor"]) == 1                      # an ERROR line means a failed check
    out = capsys.readouterr().out
    assert "monitor sink in this process: ERROR: CTLKIT_MONITOR must be one of" in out
    assert "quick mode (CTLKIT_QUICK=1): False" in out
    assert "1 ERROR(s) above" in out


def test_doctor_reports_a_bad_quick_flag_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(data, "online", lambda timeout=3.0: False)
    monkeypatch.setenv("CTLKIT_QUICK", "maybe")
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: environment variable CTLKIT_QUICK='maybe' is neither on nor off" in out


@pytest.mark.parametrize("argv, message", [(["bogus"], "invalid choice: 'bogus'"),
                                           ([], "the following arguments are required")])
def test_bad_command(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_doctor_names_the_keras_backend(doctor_run):
    assert "\nKeras backend: tensorflow\n" in doctor_run.stdout



def test_doctor_refuses_another_keras_backend_with_the_fix(monkeypatch, capsys):
    import keras

    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")   # JAX is not installed here
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: Keras runs on the 'jax' backend (KERAS_BACKEND=jax is set)" in out
    assert "the other checks need the TensorFlow backend" in out
