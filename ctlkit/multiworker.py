"""Multi-worker training on one machine: the worker program and the launcher that runs it.

    run = ctlkit.multiworker.launch("digits.npz", "runs/mw", steps=200, ckpt_every=20)
    run.weights(0)                  # the final weights the chief saved

A worker (``python -m ctlkit.multiworker --data ... --out ...``, with ``TF_CONFIG`` set) trains a
small MLP with ``MultiWorkerMirroredStrategy`` in a custom loop and prints progress lines
(``CTLKIT STEP n loss``, ``CTLKIT CKPT n``). Every ``ckpt_every`` steps it checkpoints (the chief
into ``out/ckpt``, the others into temporary directories they delete), and at start it resumes from
the chief's latest checkpoint: model, optimizer, step counter, and the data position, by skipping
the batches already consumed. ``launch()`` runs the workers on 127.0.0.1 (free ports), reads their
lines, and with ``kill_after_checkpoint=k`` SIGKILLs one once the chief reports checkpoint >= k.
Workers see no GPU: two processes sharing one GPU would fight over its memory.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

if __name__ == "__main__" and Path(sys.path[0]).resolve() == Path(__file__).parent.resolve():
    sys.path.pop(0)  # run as a file: keep ctlkit/data.py & co. from shadowing top-level modules
import numpy as np  # noqa: E402

TAG = "CTLKIT"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it when we bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tf_config(ports, index: int) -> str:
    """TF_CONFIG for worker ``index`` of a cluster of workers on 127.0.0.1 (worker 0 is the chief)."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def worker(data, out, steps, batch, ckpt_every, lr, seed):
    """One worker's whole run. Reads TF_CONFIG; prints progress lines; read top to bottom."""
    import keras
    import tensorflow as tf

    config = json.loads(os.environ["TF_CONFIG"])
    task, index = config["task"], config["task"]["index"]
    # The chief is the "chief" task if the cluster has one (Vertex AI does), else worker 0.
    is_chief = task["type"] == "chief" or ("chief" not in config["cluster"] and index == 0)
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()     # waits until every worker is up
    say = lambda *words: print(TAG, *words, flush=True)  # noqa: E731
    say("READY", index, strategy.num_replicas_in_sync)

    with strategy.scope():
        model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
        optimizer = keras.optimizers.Adam(lr)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    out = Path(out)
    # Every worker saves (saving may need all of them), but only the chief's copy is kept.
    temp_dir = out / f"workertemp_{index}"
    write_dir = out / "ckpt" if is_chief else temp_dir / "ckpt"
    manager = tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=2)
    latest = tf.train.latest_checkpoint(out / "ckpt")          # everybody restores the chief's
    if latest:
        checkpoint.restore(latest).assert_existing_objects_matched()
    start = n = int(step.numpy())                              # a Python copy of the counter
    if latest:
        say("RESUME", start)

    arrays = np.load(data)

    def dataset_fn(ctx):        # explicit sharding: worker i owns examples i, i+n, ... for good
        ds = tf.data.Dataset.from_tensor_slices((arrays["x"], arrays["y"]))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        ds = ds.shuffle(4096, seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.batch(ctx.get_per_replica_batch_size(batch), drop_remainder=True)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return ds.skip(start).with_options(options)   # skip the batches consumed before a restart

    batches = iter(strategy.distribute_datasets_from_function(dataset_fn))
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    @tf.function
    def train_step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(per_example(y, model(x, training=True)),
                                                  global_batch_size=batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))  # all-reduce inside
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_fn, (x, y)), None)

    while n < steps:
        loss = train_step(*next(batches))
        step.assign_add(1)
        n += 1
        say("STEP", n, f"{float(loss):.6f}")
        if n % ckpt_every == 0 or n == steps:
            manager.save(checkpoint_number=n)
            if not is_chief:
                shutil.rmtree(write_dir, ignore_errors=True)
            say("CKPT", n)
    weights_dir = out if is_chief else temp_dir           # the worker's copy: for comparisons
    weights_dir.mkdir(parents=True, exist_ok=True)
    np.savez(weights_dir / "final_weights.npz", *model.get_weights())
    say("DONE", n, start)


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
        """{step: global-batch loss} as the worker printed it."""
        return {int(t.split()[2]): float(t.split()[3]) for w, _, t in self.lines
                if w == worker and t.startswith(f"{TAG} STEP ")}

    @property
    def completed(self) -> bool:
        return all(rc == 0 for rc in self.returncodes)

    def weights(self, worker: int = 0) -> list:
        path = self.out / ("" if worker == 0 else f"workertemp_{worker}") / "final_weights.npz"
        with np.load(path) as f:
            return [f[f"arr_{i}"] for i in range(len(f.files))]

    def log(self, worker: int, last: int = 20) -> str:
        return "\n".join([t for w, _, t in self.lines if w == worker][-last:])


def launch(data, out, *, workers=2, steps=200, batch=64, ckpt_every=20, lr=1e-2, seed=0,
           kill_after_checkpoint=None, kill_worker=1, timeout=120.0, grace=0.5) -> Run:
    """Run ``workers`` workers on 127.0.0.1 until they exit, at most ``timeout`` seconds.

    kill_after_checkpoint: SIGKILL worker ``kill_worker`` once the chief reports a checkpoint at or
    past this step. The others then wait for it in their next all-reduce; ``grace`` seconds later
    they are killed too, as a cluster manager would. Every process is killed in a ``finally``.
    """
    from . import validate

    workers, steps, batch, ckpt_every = (validate.positive_int(name, v) for name, v in (
        ("workers", workers), ("steps", steps), ("batch", batch), ("ckpt_every", ckpt_every)))
    lr, seed = validate.number("lr", lr, low=0, low_open=True, example=0.01), validate.seed(seed)
    timeout = validate.number("timeout", timeout, low=0, low_open=True, example=120)
    if batch % workers:
        raise ValueError(f"batch={batch} must be divisible by workers={workers} (one replica each)")
    if not Path(data).is_file():
        raise FileNotFoundError(f"data={str(data)!r} is not a file: write it with np.savez(path, x=x, y=y)")
    if kill_after_checkpoint is not None and not 0 < kill_worker < workers:
        raise ValueError(f"kill_worker must name a non-chief worker, 1..{workers - 1}, got {kill_worker!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _claim(out, {"data": str(Path(data).resolve()), "workers": workers, "steps": steps,
                 "batch": batch, "lr": lr, "seed": seed})
    ports = [free_port() for _ in range(workers)]
    # The file itself, not `-m ctlkit.multiworker`: skips the package's imports (~0.5 s a worker).
    args = [sys.executable, str(Path(__file__).resolve()), "--data", str(data), "--out", str(out),
            "--steps", str(steps), "--batch", str(batch), "--ckpt-every", str(ckpt_every),
            "--lr", str(lr), "--seed", str(seed)]
    lines, q, procs, readers = [], queue.Queue(), [], []
    killed = killed_after = kill_others_at = None
    t0 = time.perf_counter()
    try:
        for i in range(workers):
            env = dict(os.environ, TF_CONFIG=tf_config(ports, i), CUDA_VISIBLE_DEVICES="")
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, text=True, bufsize=1))
            readers.append(threading.Thread(target=lambda i=i, p=procs[-1]: [q.put((i, ln.rstrip()))
                                                                             for ln in p.stdout], daemon=True))
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
                p.wait(timeout=max(1.0, t0 + timeout - time.perf_counter()))
            _fail_if_a_worker_died(procs, q, lines, t0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return Run(out, [p.returncode for p in procs], lines, wall, killed, killed_after)


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


CONFIG = "run_config.json"


def _claim(out: Path, config: dict) -> None:
    """Record the run's configuration in ``out``, or refuse a relaunch into ``out`` that differs
    from the run whose checkpoints it holds (resuming them would silently mix two runs)."""
    path = out / CONFIG
    if path.exists() and (out / "ckpt").exists():
        before = json.loads(path.read_text())
        differ = {k: (before.get(k), v) for k, v in config.items() if before.get(k) != v}
        if differ:
            what = ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in differ.items())
            raise ValueError(f"out={str(out)!r} holds the checkpoints of another run ({what}): "
                             f"resuming them would mix two runs. Relaunch with the same settings "
                             f"to resume, or pass a new out folder (or delete this one) to start over")
        return
    path.write_text(json.dumps(config, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description="One MultiWorkerMirroredStrategy worker (reads TF_CONFIG).")
    ap.add_argument("--data", required=True, help="an .npz file with x (n, 8, 8, 1) and y (n,)")
    ap.add_argument("--out", required=True, help="run directory: checkpoints and final weights")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64, help="the global batch, all workers together")
    ap.add_argument("--ckpt-every", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if "TF_CONFIG" not in os.environ:
        sys.exit("TF_CONFIG is not set: start workers with ctlkit.multiworker.launch(), or set it "
                 "as ctlkit.multiworker.tf_config() shows")
    worker(a.data, a.out, a.steps, a.batch, a.ckpt_every, a.lr, a.seed)
    sys.stdout.flush()
    os._exit(0)  # everything is saved: skip TensorFlow's slow teardown (gRPC server, thread pools)


if __name__ == "__main__":
    main()
