"""Tests for ctlkit/multiworker.py, the launcher, with worker programs written here.

Most tests run a stand-in worker (plain Python, no TensorFlow, well under a second a launch) that
behaves like notebook 10's: it reads TF_CONFIG, waits for its peers at every step (as an all-reduce
does, so a dead peer blocks it), lets the chief checkpoint, resumes from the chief's checkpoint, and
on request dies, hangs or exits with an error. One test starts two real TensorFlow workers with
``MultiWorkerMirroredStrategy`` to prove that the ports and TF_CONFIG make a working cluster.
Every launch is bounded by ``launch(timeout=...)`` and pytest-timeout, uses loopback only, and the
launcher kills its processes in a ``finally`` (checked by pid).
"""
import json
import os
import signal
import time

import numpy as np
import pytest

from ctlkit import multiworker

FAKE_WORKER = '''\
import argparse, json, os, sys, time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--out", type=Path, required=True)
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--ckpt-every", type=int, default=2)
ap.add_argument("--pace", type=float, default=0.0)           # seconds per step
ap.add_argument("--die-code", type=int, default=0)           # exit with this code ...
ap.add_argument("--die-worker", type=int, default=-1)        # ... in this worker (-1: every one)
ap.add_argument("--die-step", type=int, default=1)           # ... instead of this step
ap.add_argument("--hang", action="store_true")               # never take a step
ap.add_argument("--extra", nargs="*", default=[])
ap.add_argument("--bad-byte", action="store_true")          # first print a byte that is not UTF-8
ap.add_argument("--chatter", action="store_true")           # print forever, never take a step
a = ap.parse_args()
config = json.loads(os.environ["TF_CONFIG"])
i, n_workers = config["task"]["index"], len(config["cluster"]["worker"])
seen = dict(tf_config=config, argv=sys.argv[1:], pid=os.getpid(),
            cuda=os.environ.get("CUDA_VISIBLE_DEVICES"), log_level=os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
(a.out / f"seen_{i}.json").write_text(json.dumps(seen))
say = lambda *words: print("CTLKIT", *words, flush=True)
ckpt = a.out / "ckpt"                                        # the chief's last checkpoint: a step
start = int(ckpt.read_text()) if ckpt.exists() else 0
say("READY", i, n_workers)
if start:
    say("RESUME", start)
if a.bad_byte:
    sys.stdout.buffer.write(b"\\xff\\n")
    sys.stdout.buffer.flush()
while a.chatter:
    print("x" * 200, flush=True)
while a.hang:
    time.sleep(1)
for n in range(start + 1, a.steps + 1):
    if a.die_code and a.die_worker in (-1, i) and n == a.die_step:
        print(f"worker {i} gives up before step {n}", flush=True)
        sys.exit(a.die_code)
    time.sleep(a.pace)
    (a.out / f"beat_{i}_{n}").touch()
    while not all((a.out / f"beat_{j}_{n}").exists() for j in range(n_workers)):
        time.sleep(0.005)                                    # the "all-reduce": wait for everybody
    say("STEP", n, f"{1 / n:.6f}")
    if n % a.ckpt_every == 0 or n == a.steps:
        if i == 0:
            ckpt.write_text(str(n))
        say("CKPT", n)
say("DONE", a.steps, start)
'''

TF_WORKER = '''\
import json, os
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()      # waits until every worker is up
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
print("CTLKIT READY", index, strategy.num_replicas_in_sync, flush=True)
total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(index + 1.0)), axis=None)
print("CTLKIT STEP 1", float(total), flush=True)
os._exit(0)
'''


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "fake_worker.py"
    path.write_text(FAKE_WORKER)
    return path


def seen(out, worker):
    return json.loads((out / f"seen_{worker}.json").read_text())


def assert_gone(pid):
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- no processes ---------------------------------------------------------------------------------
def test_tf_config_names_every_worker_and_this_task():
    config = json.loads(multiworker.tf_config([1111, 2222], 1))
    assert config == {"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]},
                      "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize("ports, index, error, match", [
    ("1111,2222", 0, TypeError, r"ports must be a non-empty list of TCP ports"),
    ([], 0, TypeError, r"ports must be a non-empty list"),
    ([1111, 0], 0, ValueError, r"ports must be TCP ports 1\.\.65535, got 0"),
    ([1111, 70000], 0, ValueError, r"got 70000"),
    ([1111, "2222"], 0, ValueError, r"got '2222'"),
    ([1111, True], 0, ValueError, r"got True"),
    ([1111, 1111], 0, ValueError, r"ports must differ"),
    ([1111, 2222], 2, ValueError, r"index must name one of the 2 workers, 0\.\.1, got 2"),
    ([1111, 2222], -1, ValueError, r"got -1"),
    ([1111, 2222], 1.0, ValueError, r"got 1\.0"),
])
def test_tf_config_rejects_ports_and_index_that_make_no_cluster(ports, index, error, match):
    with pytest.raises(error, match=match):
        multiworker.tf_config(ports, index)


def test_free_port_can_be_bound_on_loopback():
    import socket

    port = multiworker.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(args="--steps 5"), TypeError, r"args must be a list of the program's arguments, got str"),
    (dict(args=["--steps", {"n": 5}]), TypeError, r"args must be strings, paths or numbers, got \{'n': 5\}"),
    (dict(args=["--hang", True]), TypeError, r"args must be strings, paths or numbers, got True"),
    (dict(args=["--out", "elsewhere"]), ValueError, r"must not contain --out: launch\(\) passes"),
    (dict(args=["--out=elsewhere"]), ValueError, r"must not contain --out"),
    (dict(workers=0), ValueError, r"workers must be a positive int"),
    (dict(workers="2"), TypeError, r"workers must be a positive int"),
    (dict(workers=True), TypeError, r"workers must be a positive int"),
    (dict(timeout=0), ValueError, r"timeout must be in \(0"),
    (dict(timeout=float("nan")), ValueError, r"timeout must be finite"),
    (dict(grace=-1), ValueError, r"grace must be in \[0"),
    (dict(kill_after_checkpoint=0), ValueError, r"kill_after_checkpoint must be a positive int"),
    (dict(kill_after_checkpoint=2.5), TypeError, r"kill_after_checkpoint must be a positive int"),
    (dict(kill_after_checkpoint=4, kill_worker=0), ValueError,
     r"kill_worker must name a non-chief worker, 1\.\.1, got 0"),
    (dict(kill_after_checkpoint=4, kill_worker=2), ValueError, r"non-chief worker, 1\.\.1, got 2"),
    (dict(kill_after_checkpoint=4, kill_worker="1"), ValueError, r"non-chief worker, 1\.\.1, got '1'"),
    (dict(kill_after_checkpoint=4, workers=1), ValueError, r"needs workers >= 2"),
])
def test_launch_rejects_bad_arguments_before_starting_anything(fake, tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        multiworker.launch(fake, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("script", ["missing.py", "."])
def test_launch_needs_the_worker_program_as_a_file(tmp_path, script):
    with pytest.raises(FileNotFoundError, match=r"is not a file: write the worker program first"):
        multiworker.launch(tmp_path / script, tmp_path / "out")


# -- stand-in workers -------------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_each_worker_gets_its_tf_config_no_gpu_and_the_same_arguments(fake, tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    out, other = tmp_path / "out", tmp_path / "a file.txt"
    run = multiworker.launch(fake, out, args=("--steps", 6, "--extra", other, 1.5), timeout=50)
    assert run.completed and run.returncodes == [0, 0], run.log(0) + run.log(1)
    configs = [seen(out, i)["tf_config"] for i in range(2)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(2)]
    cluster = configs[0]["cluster"]["worker"]
    assert configs[1]["cluster"]["worker"] == cluster and len(set(cluster)) == 2
    assert all(address.startswith("127.0.0.1:") for address in cluster)
    for i in range(2):
        assert seen(out, i)["argv"] == ["--out", str(out), "--steps", "6", "--extra", str(other), "1.5"]
        assert seen(out, i)["cuda"] == "" and seen(out, i)["log_level"] == "2"
    assert seen(out, 0)["pid"] != seen(out, 1)["pid"]


@pytest.mark.timeout(60)
def test_a_completed_run_reports_events_losses_and_keeps_each_workers_log(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")                # the caller's choice is kept
    out = tmp_path / "out"
    run = multiworker.launch(fake, out, args=["--steps", 6, "--ckpt-every", 2], workers=3, timeout=50)
    assert run.completed and len(run.returncodes) == 3 and run.killed is None
    assert seen(out, 2)["log_level"] == "0" and len(seen(out, 2)["tf_config"]["cluster"]["worker"]) == 3
    assert run.events(0, "CKPT") == run.events(2, "CKPT") == [2, 4, 6]
    assert run.events(1, "DONE") == [6] and run.events(0, "RESUME") == []
    assert run.losses(0) == run.losses(2) == {n: round(1 / n, 6) for n in range(1, 7)}
    assert run.log(1, last=1) == "CTLKIT DONE 6 0" and 0 < run.wall < 50
    assert [t for w, _, t in run.lines if w == 0][0] == "CTLKIT READY 0 3"
    for i in range(3):
        logged = (out / multiworker.LOG.format(i)).read_text().splitlines()
        assert [line.split(None, 1)[1] for line in logged] == [t for w, _, t in run.lines if w == i]
    config = json.loads((out / multiworker.CONFIG).read_text())
    assert config == {"script": str(fake.resolve()), "args": ["--steps", "6", "--ckpt-every", "2"],
                      "workers": 3}


@pytest.mark.timeout(90)
def test_a_killed_worker_stops_the_run_and_a_relaunch_resumes_from_the_chiefs_checkpoint(fake, tmp_path):
    out, args = tmp_path / "out", ["--steps", 20, "--ckpt-every", 2, "--pace", 0.1]
    t0 = time.perf_counter()
    crashed = multiworker.launch(fake, out, args=args, kill_after_checkpoint=4, grace=0.3, timeout=60)
    assert crashed.killed == 1 and crashed.killed_after == 4, crashed.log(0)
    assert crashed.returncodes == [-signal.SIGKILL, -signal.SIGKILL]    # the waiting chief too
    assert not crashed.completed and crashed.events(0, "DONE") == []
    assert crashed.events(0, "STEP")[-1] <= crashed.events(1, "STEP")[-1] + 1
    assert time.perf_counter() - t0 < 30                 # killed after the grace, not at the timeout
    for i in range(2):
        assert_gone(seen(out, i)["pid"])
    last_ckpt = crashed.events(0, "CKPT")[-1]
    assert 4 <= last_ckpt < 20

    resumed = multiworker.launch(fake, out, args=args, timeout=60)
    assert resumed.completed, resumed.log(0) + resumed.log(1)
    assert resumed.events(0, "RESUME") == resumed.events(1, "RESUME") == [last_ckpt]
    assert min(resumed.losses(0)) == last_ckpt + 1 and resumed.events(0, "DONE") == [20]


@pytest.mark.timeout(60)
def test_a_worker_that_dies_on_its_own_fails_the_launch_at_once_and_the_others_are_killed(fake, tmp_path):
    out = tmp_path / "out"
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"(?s)worker 1 exited with code 3 after [\d.]+ s; its last "
                                           r"lines:\n.*worker 1 gives up before step 3"):
        multiworker.launch(fake, out, args=["--steps", 10, "--die-code", 3, "--die-worker", 1,
                                            "--die-step", 3], timeout=50)
    assert time.perf_counter() - t0 < 25                 # not at the timeout: the chief waits forever
    for i in range(2):
        assert_gone(seen(out, i)["pid"])
    assert "gives up" in (out / multiworker.LOG.format(1)).read_text()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("attempt", range(4))
def test_workers_dying_together_are_reported_every_time(fake, tmp_path, attempt):
    # Both exit at once: every stdout may close before the loop sees an exit code (the race once
    # fixed in the launcher); it must raise all the same.
    with pytest.raises(RuntimeError, match=r"worker \d exited with code 5 after"):
        multiworker.launch(fake, tmp_path / "out", args=["--die-code", 5], timeout=50)


@pytest.mark.timeout(60)
def test_a_run_past_its_timeout_raises_with_the_last_lines_and_leaves_no_process(fake, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TimeoutError, match=r"(?s)still running after timeout=3\.0 s; last lines:\n.*READY"):
        multiworker.launch(fake, out, args=["--hang"], timeout=3)
    for i in range(2):
        assert_gone(seen(out, i)["pid"])
        assert f"CTLKIT READY {i} 2" in (out / multiworker.LOG.format(i)).read_text()


@pytest.mark.timeout(60)
def test_relaunch_with_another_command_is_refused_before_any_worker_starts(fake, tmp_path):
    out, args = tmp_path / "out", ["--steps", 4]
    assert multiworker.launch(fake, out, args=args, timeout=50).completed     # leaves out/ckpt
    log = (out / multiworker.LOG.format(0)).read_text()
    other = tmp_path / "other_worker.py"
    other.write_text(FAKE_WORKER)
    for change, name in ((dict(args=["--steps", 8]), "args"), (dict(workers=3), "workers"),
                         (dict(script=other), "script")):
        launch = {"script": fake, "args": args, **change}
        with pytest.raises(ValueError, match=rf"holds the files of another run \({name} was"):
            multiworker.launch(launch.pop("script"), out, timeout=50, **launch)
    assert (out / multiworker.LOG.format(0)).read_text() == log        # nothing ran
    assert json.loads((out / multiworker.CONFIG).read_text())["args"] == ["--steps", "4"]


@pytest.mark.timeout(60)
def test_a_folder_with_only_a_failed_launchs_config_and_logs_takes_a_new_command(fake, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / multiworker.CONFIG).write_text(json.dumps({"script": "x.py", "args": [], "workers": 2}))
    (out / multiworker.LOG.format(0)).write_text("   0.100 Traceback ...\n")
    assert multiworker.launch(fake, out, args=["--steps", 2], timeout=50).completed


@pytest.mark.timeout(60)
def test_a_byte_that_is_not_utf8_loses_none_of_the_output_after_it(fake, tmp_path):
    run = multiworker.launch(fake, tmp_path / "out", args=["--steps", 4, "--bad-byte"], timeout=50)
    assert run.completed
    for i in range(2):
        assert run.events(i, "STEP") == [1, 2, 3, 4] and run.events(i, "DONE") == [4]
        assert "\ufffd" in run.log(i)                        # the byte is shown, replaced


@pytest.mark.timeout(60)
def test_a_worker_that_never_stops_printing_times_out_with_timeout_error(fake, tmp_path):
    out = tmp_path / "out"
    start = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"still running after timeout=3\.0 s"):
        multiworker.launch(fake, out, args=["--bad-byte", "--chatter"], timeout=3)
    assert time.perf_counter() - start < 20
    for i in range(2):
        assert_gone(seen(out, i)["pid"])


@pytest.mark.timeout(60)
def test_a_folder_with_a_checkpoint_but_no_run_config_is_refused(fake, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "ckpt").write_text("4")                         # another run's checkpoint
    with pytest.raises(ValueError, match=r"holds files \(ckpt\) but no run_config\.json.*new out folder"):
        multiworker.launch(fake, out, args=["--steps", 6], timeout=50)
    assert sorted(p.name for p in out.iterdir()) == ["ckpt"]  # nothing ran, nothing written


# -- two real TensorFlow workers ----------------------------------------------------------------------
@pytest.mark.timeout(300)
def test_two_tensorflow_workers_form_a_cluster_and_all_reduce(tmp_path):
    script = tmp_path / "tf_worker.py"
    script.write_text(TF_WORKER)
    run = multiworker.launch(script, tmp_path / "out", timeout=240)
    assert run.completed, run.log(0) + "\n" + run.log(1)
    assert sorted(t for _, _, t in run.lines if t.startswith("CTLKIT READY")) == \
        ["CTLKIT READY 0 2", "CTLKIT READY 1 2"]                  # one replica each, two in sync
    assert run.losses(0) == run.losses(1) == {1: 3.0}           # 1 + 2, summed across the processes
    assert np.isfinite(run.wall)


EXPOSED_WORKER = '''\
import json, os, socket
import tensorflow as tf

port = int(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"][0].rsplit(":", 1)[1])
tf.distribute.Server(tf.train.ClusterSpec({"worker": [f"127.0.0.1:{port}"]}),
                     job_name="worker", task_index=0, start=True)
listening = []                         # local addresses of the sockets listening on that port
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for row in open(table).read().splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
            listening.append(local.rsplit(":", 1)[0])
try:                                   # the machine's own non-loopback address, if it has a route
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))    # no packet is sent: this only picks the interface
        address = probe.getsockname()[0]
except OSError:
    address = "127.0.0.1"
with socket.socket() as client:
    client.settimeout(5)
    reached = client.connect_ex((address, port)) == 0
print("CTLKIT STEP 1", json.dumps({"listening": listening, "address": address, "reached": reached}))
os._exit(0)
'''


@pytest.mark.timeout(300)
def test_tensorflows_server_listens_on_every_interface_as_the_docs_warn(tmp_path):
    # TF_CONFIG names 127.0.0.1, yet TensorFlow's gRPC server binds the wildcard address
    # (grpc_server_lib.cc) and nothing TF offers narrows it: launch()'s docstring, notebook 10 and
    # the README warn of it. If a TensorFlow version binds loopback only, this fails: update them.
    script = tmp_path / "exposed_worker.py"
    script.write_text(EXPOSED_WORKER)
    run = multiworker.launch(script, tmp_path / "out", workers=1, timeout=240)
    assert run.completed, run.log(0)
    seen = json.loads(next(t for _, _, t in run.lines if t.startswith("CTLKIT STEP 1")).split(" ", 3)[3])
    assert seen["listening"], seen
    assert all(set(a) == {"0"} for a in seen["listening"]), seen        # 0.0.0.0 or [::]: every interface
    if not seen["address"].startswith("127."):                         # a machine with a network
        assert seen["reached"], seen                                   # reachable from it
