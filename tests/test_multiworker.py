"""Tests for ctlkit/multiworker.py: two MultiWorkerMirroredStrategy workers on 127.0.0.1.

The slow part is one module-scoped uninterrupted run (the reference) plus a crashed and a resumed
run: three launches of two processes, each mostly TensorFlow's import. Everything is bounded by
``launch(timeout=...)`` and pytest-timeout, uses loopback only, and the launcher kills its processes
in a ``finally``.
"""
import json
import signal

import numpy as np
import pytest

from ctlkit import multiworker
from ctlkit.data import arrays

STEPS, CKPT_EVERY, KILL_AFTER = 90, 10, 20
LAUNCH = dict(steps=STEPS, batch=32, ckpt_every=CKPT_EVERY, lr=1e-2, seed=0, timeout=150)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    x, y, _ = arrays("digits")
    path = tmp_path_factory.mktemp("mw") / "digits.npz"
    np.savez(path, x=x[:600], y=y[:600])
    return path


@pytest.fixture(scope="module")
def uninterrupted(data_file, tmp_path_factory):
    return multiworker.launch(data_file, tmp_path_factory.mktemp("mw_a"), **LAUNCH)


# -- no processes ---------------------------------------------------------------------------------
def test_tf_config_names_every_worker_and_this_task():
    config = json.loads(multiworker.tf_config([1111, 2222], 1))
    assert config == {"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]},
                      "task": {"type": "worker", "index": 1}}


def test_free_port_can_be_bound_on_loopback():
    import socket

    port = multiworker.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


@pytest.mark.parametrize("kwargs, match", [
    (dict(steps=0), r"steps must be a positive int"),
    (dict(batch=33), r"batch=33 must be divisible by workers=2"),
    (dict(ckpt_every=True), r"ckpt_every must be a positive int"),
    (dict(kill_after_checkpoint=10, kill_worker=0), r"kill_worker must name a non-chief worker"),
    (dict(steps=np.float64(5)), r"steps must be a positive int"),
    (dict(workers="2"), r"workers must be a positive int"),
    (dict(lr=float("nan")), r"lr must be finite"),
    (dict(lr=0), r"lr must be in \(0"),
    (dict(seed=-1), r"seed must be a non-negative int"),
    (dict(timeout=0), r"timeout must be in \(0"),
])
def test_launch_rejects_bad_arguments(data_file, tmp_path, kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        multiworker.launch(data_file, tmp_path, **kwargs)


def test_launch_needs_a_data_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"np\.savez"):
        multiworker.launch(tmp_path / "missing.npz", tmp_path)


def test_worker_refuses_to_start_without_tf_config(monkeypatch, data_file, tmp_path):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(SystemExit, match="TF_CONFIG is not set"):
        multiworker.main(["--data", str(data_file), "--out", str(tmp_path)])


# -- two real workers -------------------------------------------------------------------------------
@pytest.mark.timeout(200)
def test_two_workers_train_in_sync_to_identical_weights(uninterrupted):
    run = uninterrupted
    assert run.completed, run.log(0) + "\n" + run.log(1)
    assert sorted(t for _, _, t in run.lines if t.startswith("CTLKIT READY")) == \
        ["CTLKIT READY 0 2", "CTLKIT READY 1 2"]
    assert run.events(0, "DONE") == run.events(1, "DONE") == [STEPS]
    assert run.losses(0) == run.losses(1) and len(run.losses(0)) == STEPS
    for a, b in zip(run.weights(0), run.weights(1)):
        assert np.array_equal(a, b)
    losses = np.array(list(run.losses(0).values()))
    assert losses[-10:].mean() < 0.5 * losses[:10].mean()
    # the chief keeps its checkpoints, the other worker deletes its temporary ones
    assert sorted(p.name for p in (run.out / "ckpt").glob("*.index")) == [
        f"ckpt-{STEPS - CKPT_EVERY}.index", f"ckpt-{STEPS}.index"]
    assert not (run.out / "workertemp_1" / "ckpt").exists()


@pytest.mark.timeout(300)
def test_killed_worker_then_restart_resumes_bit_identically(uninterrupted, data_file, tmp_path):
    crashed = multiworker.launch(data_file, tmp_path, kill_after_checkpoint=KILL_AFTER, **LAUNCH)
    assert crashed.killed == 1 and crashed.returncodes[1] == -signal.SIGKILL
    last_ckpt = crashed.events(0, "CKPT")[-1]
    assert KILL_AFTER <= last_ckpt < STEPS, crashed.log(0)
    assert crashed.events(0, "DONE") == []                   # the chief cannot finish alone
    assert crashed.events(0, "STEP")[-1] <= crashed.events(1, "STEP")[-1] + 1

    resumed = multiworker.launch(data_file, tmp_path, **LAUNCH)
    assert resumed.completed, resumed.log(0) + "\n" + resumed.log(1)
    assert resumed.events(0, "RESUME") == resumed.events(1, "RESUME") == [last_ckpt]
    assert min(resumed.losses(0)) == last_ckpt + 1
    reference = uninterrupted.losses(0)
    assert all(reference[s] == v for s, v in resumed.losses(0).items())
    for a, b in zip(resumed.weights(0), uninterrupted.weights(0)):
        assert np.array_equal(a, b)


@pytest.mark.timeout(120)
def test_relaunch_with_other_settings_is_refused_before_any_worker_starts(uninterrupted, data_file):
    for change, name in ((dict(steps=5), "steps"), (dict(batch=64), "batch"), (dict(lr=1e-3), "lr"),
                         (dict(seed=1), "seed")):
        with pytest.raises(ValueError, match=rf"holds the checkpoints of another run \({name} was"):
            multiworker.launch(data_file, uninterrupted.out, **{**LAUNCH, **change})
    assert json.loads((uninterrupted.out / multiworker.CONFIG).read_text())["steps"] == STEPS


@pytest.mark.timeout(120)
def test_a_worker_that_dies_at_start_fails_the_launch_at_once(tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not an npz file")            # each worker dies loading it
    with pytest.raises(RuntimeError, match=r"worker \d exited with code 1 after"):
        multiworker.launch(broken, tmp_path / "out", steps=4, batch=32, timeout=100)
