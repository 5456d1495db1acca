"""Run a multi-worker program on one machine: ports, ``TF_CONFIG``, processes, logs.

    run = ctlkit.multiworker.launch("worker.py", "runs/mw", args=["--steps", 200])
    run.completed, run.losses(0), run.events(1, "CKPT"), print(run.log(0))

The worker program is yours (notebook 10 writes one): ``launch()`` starts it once per worker as
``python SCRIPT --out OUT ARGS...``, each process with its own ``TF_CONFIG`` on 127.0.0.1 (free
ports; worker 0 is the chief) and no GPU (two processes sharing one GPU would fight over its
memory). It reads what the workers print (a byte that is not UTF-8 shows as U+FFFD), keeps each
worker's output in ``OUT/worker_<i>.log``, stops at ``timeout``, fails at once if a worker dies on
its own, and kills every process it started before it returns. A worker reports progress in lines
``CTLKIT <KIND> <step> ...`` (``READY``, ``STEP n loss``, ``CKPT n``, ``RESUME n``, ``DONE n``);
with ``kill_after_checkpoint=k`` the launcher SIGKILLs one worker once the chief prints ``CTLKIT
CKPT n`` with n >= k, as a lost machine would.

Not private to this machine. ``TF_CONFIG`` names 127.0.0.1, but TensorFlow's gRPC server listens on
every interface (``tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc`` binds the wildcard
address; no ``TF_CONFIG``, ``ServerDef`` field or environment setting narrows it), without
authentication, and TensorFlow's SECURITY.md ("Running a TensorFlow server") says anyone who can
reach it can run code with the process's rights. While workers run, their ports are open to the
machine's network: launch on a network you trust or behind a firewall that refuses incoming
connections. ``tests/test_multiworker.py`` checks that this is still so.
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import validate

TAG = "CTLKIT"
CONFIG = "run_config.json"   # the command of the run whose files a folder holds
LOG = "worker_{}.log"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it when we bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tf_config(ports, index: int) -> str:
    """TF_CONFIG for worker ``index`` of a cluster of workers on 127.0.0.1 (worker 0 is the chief)."""
    if isinstance(ports, (str, bytes)) or not isinstance(ports, (list, tuple)) or not ports:
        raise TypeError(f"ports must be a non-empty list of TCP ports, one per worker, got {ports!r}; "
                        f"e.g. ports=[free_port(), free_port()]")
    bad = [p for p in ports if isinstance(p, bool) or not isinstance(p, int) or not 0 < p < 65536]
    if bad:
        raise ValueError(f"ports must be TCP ports 1..65535, got {bad[0]!r}; "
                         f"e.g. ports=[free_port(), free_port()]")
    if len(set(ports)) != len(ports):
        raise ValueError(f"ports must differ, one per worker, got {list(ports)!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(ports):
        raise ValueError(f"index must name one of the {len(ports)} workers, "
                         f"0..{len(ports) - 1}, got {index!r}")
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


@dataclasses.dataclass
class Run:
    out: Path
    returncodes: list                # one per worker; -9 for a SIGKILLed one
    lines: list                      # (worker, seconds since start, text): all the workers wrote
    wall: float                      # seconds from the first start to the last exit
    killed: int | None = None        # the worker we SIGKILLed
    killed_after: int | None = None  # the chief's checkpoint that triggered it

    def events(self, worker: int, kind: str) -> list:
        """Step numbers from one worker's lines of a kind: 'STEP', 'CKPT', 'RESUME', 'DONE'."""
        return [int(t.split()[2]) for w, _, t in self.lines if w == worker and t.startswith(f"{TAG} {kind} ")]

    def losses(self, worker: int = 0) -> dict:
        """{step: loss} from the worker's ``CTLKIT STEP n loss`` lines."""
        return {int(t.split()[2]): float(t.split()[3]) for w, _, t in self.lines
                if w == worker and t.startswith(f"{TAG} STEP ")}

    @property
    def completed(self) -> bool:
        return all(rc == 0 for rc in self.returncodes)

    def log(self, worker: int, last: int = 20) -> str:
        return "\n".join([t for w, _, t in self.lines if w == worker][-last:])


def launch(script, out, *, args=(), workers=2, kill_after_checkpoint=None, kill_worker=1,
           timeout=120.0, grace=0.5) -> Run:
    """Run ``python script --out out *args`` as ``workers`` workers until they exit.

    args: the program's other arguments (strings, paths, numbers), the same for every worker.
    kill_after_checkpoint: SIGKILL worker ``kill_worker`` once the chief reports a checkpoint at or
    past this step. The others then wait for it in their next all-reduce; ``grace`` seconds later
    they are killed too, as a cluster manager would. TimeoutError after ``timeout`` seconds;
    RuntimeError, with its last lines, as soon as a worker exits non-zero on its own.
    """
    script, out, argv = Path(script), Path(out), _arguments(args)
    workers = validate.positive_int("workers", workers, example=2)
    timeout = validate.number("timeout", timeout, low=0, low_open=True, example=120)
    grace = validate.number("grace", grace, low=0, example=0.5)
    if not script.is_file():
        raise FileNotFoundError(f"script={str(script)!r} is not a file: write the worker program first")
    if kill_after_checkpoint is not None:
        kill_after_checkpoint = validate.positive_int("kill_after_checkpoint", kill_after_checkpoint)
        if workers < 2:
            raise ValueError("kill_after_checkpoint needs workers >= 2: the chief is never killed")
        if isinstance(kill_worker, bool) or not isinstance(kill_worker, int) or not 0 < kill_worker < workers:
            raise ValueError(f"kill_worker must name a non-chief worker, 1..{workers - 1}, "
                             f"got {kill_worker!r}")
    out.mkdir(parents=True, exist_ok=True)
    _claim(out, {"script": str(script.resolve()), "args": argv, "workers": workers})
    ports = [free_port() for _ in range(workers)]
    command = [sys.executable, str(script), "--out", str(out), *argv]
    lines, q, procs, readers = [], queue.Queue(), [], []
    killed = killed_after = kill_others_at = None
    t0 = time.perf_counter()
    try:
        for i in range(workers):
            env = dict(os.environ, TF_CONFIG=tf_config(ports, i), CUDA_VISIBLE_DEVICES="")
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            # errors="replace": a byte that is not UTF-8 becomes U+FFFD; it must not stop the reading
            procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1))
            readers.append(threading.Thread(target=_read, args=(i, procs[-1], q), daemon=True))
            readers[-1].start()
        while any(r.is_alive() for r in readers) or not q.empty():   # until every stdout closes
            now = time.perf_counter()
            if now > t0 + timeout:
                raise TimeoutError(f"workers still running after timeout={timeout} s; last lines:\n"
                                   + "\n".join(t for _, _, t in lines[-20:]))
            if kill_others_at is not None and now > kill_others_at:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            if kill_others_at is None:             # a worker that dies on its own fails the run now
                _fail_if_a_worker_died(procs, q, lines, t0)
            try:
                i, text = q.get(timeout=0.05)
            except queue.Empty:
                continue
            lines.append((i, round(time.perf_counter() - t0, 3), text))
            if (killed is None and kill_after_checkpoint is not None and i == 0
                    and text.startswith(f"{TAG} CKPT ") and int(text.split()[2]) >= kill_after_checkpoint):
                procs[kill_worker].send_signal(signal.SIGKILL)
                killed, killed_after = kill_worker, int(text.split()[2])
                kill_others_at = time.perf_counter() + grace
        wall = time.perf_counter() - t0
        if kill_others_at is None:
            # Every stdout is closed, but a worker that died may not have been reaped when the loop
            # last looked (both workers dying together closed the loop first): look once more.
            for p in procs:
                try:
                    p.wait(timeout=max(1.0, t0 + timeout - time.perf_counter()))
                except subprocess.TimeoutExpired:
                    raise TimeoutError(f"a worker closed its output but was still running after "
                                       f"timeout={timeout} s; last lines:\n"
                                       + "\n".join(t for _, _, t in lines[-20:])) from None
            _fail_if_a_worker_died(procs, q, lines, t0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for i in range(len(procs)):                # what each worker wrote, also after an error
            (out / LOG.format(i)).write_text("".join(f"{s:8.3f} {t}\n" for w, s, t in lines if w == i))
    return Run(out, [p.returncode for p in procs], lines, wall, killed, killed_after)


def _read(i: int, proc, q) -> None:
    """Put each line worker ``i`` prints on ``q``; a reading error becomes a line of its own."""
    try:
        for line in proc.stdout:
            q.put((i, line.rstrip()))
    except Exception as exc:                       # reported, never swallowed
        q.put((i, f"(launcher: reading worker {i}'s output failed: {exc!r})"))


def _arguments(args) -> list:
    """The program's arguments as strings; a list of them, never one string to split."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list of the program's arguments, got {type(args).__name__} "
                        f"{args!r}; pass e.g. args=['--steps', 200]")
    bad = [a for a in args if isinstance(a, bool) or not isinstance(a, (str, int, float, os.PathLike))]
    if bad:
        raise TypeError(f"args must be strings, paths or numbers, got {bad[0]!r} "
                        f"({type(bad[0]).__name__}); pass e.g. args=['--steps', 200]")
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    if "--out" in argv or any(a.startswith("--out=") for a in argv):
        raise ValueError("args must not contain --out: launch() passes --out OUT itself")
    return argv


def _fail_if_a_worker_died(procs, q, lines, t0) -> None:
    """Raise RuntimeError with its last lines if a worker exited non-zero on its own."""
    for i, p in enumerate(procs):
        if p.poll() not in (None, 0):
            now = time.perf_counter()
            time.sleep(0.2)                        # let its last lines arrive
            while not q.empty():
                j, text = q.get()
                lines.append((j, round(time.perf_counter() - t0, 3), text))
            raise RuntimeError(f"worker {i} exited with code {p.returncode} after {now - t0:.1f} s; "
                               f"its last lines:\n" + "\n".join(t for w, _, t in lines[-20:] if w == i))


def _claim(out: Path, command: dict) -> None:
    """Record the run's command in ``out``, or refuse a relaunch into ``out`` that differs from the
    run whose files (checkpoints) it holds, or into a folder holding files but no recorded command:
    resuming them would silently mix two runs."""
    path = out / CONFIG
    held = [p for p in out.iterdir() if p.name != CONFIG and not re.fullmatch(r"worker_\d+\.log", p.name)]
    if path.exists() and held:
        before = json.loads(path.read_text())
        differ = {k: (before.get(k), v) for k, v in command.items() if before.get(k) != v}
        if differ:
            what = ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in differ.items())
            raise ValueError(f"out={str(out)!r} holds the files of another run ({what}): "
                             f"resuming them would mix two runs. Relaunch with the same command "
                             f"to resume, or pass a new out folder (or delete this one) to start over")
        return
    if held:
        raise ValueError(f"out={str(out)!r} holds files ({', '.join(sorted(p.name for p in held)[:3])}"
                         f"{', ...' if len(held) > 3 else ''}) but no {CONFIG}: they are not a launch() "
                         f"run whose command can be checked, and resuming them with new settings would "
                         f"mix two runs. Pass a new out folder, or delete these files to start over")
    path.write_text(json.dumps(command, indent=1))
