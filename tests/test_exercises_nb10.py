"""Notebook 10's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right).

The distributed step is checked under a MirroredStrategy over two logical CPUs, which must be set
up before TensorFlow starts its devices: those checks run in one fresh process (one per module)."""
import json
import os
import re
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected

per_example_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
mean_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- 10.replica_loss ------------------------------------------------------------------------------
def replica_loss_right(labels, logits, global_batch_size):
    per_example = per_example_loss(labels, logits)
    return tf.reduce_sum(per_example) / tf.cast(global_batch_size, per_example.dtype)


REPLICA_LOSS_WRONG = {
    "the per-replica mean (the classic bug)": (
        lambda y, l, g: tf.reduce_mean(per_example_loss(y, l)),
        r"32 examples of a global batch of 64: the result differs"),
    "summed, never divided": (
        lambda y, l, g: tf.reduce_sum(per_example_loss(y, l)), r"the result differs"),
    "treats logits as probabilities (from_logits forgotten, almost right)": (
        lambda y, l, g: tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, l))
        / tf.cast(g, tf.float32), r"the result differs"),
    "the per-example losses divided, not summed": (
        lambda y, l, g: per_example_loss(y, l) / tf.cast(g, tf.float32),
        r"has shape \[32\], expected \[\]"),
    "a Python float via .numpy()": (
        lambda y, l, g: float(tf.reduce_sum(per_example_loss(y, l)).numpy()) / int(g),
        r"dtype float64, expected float32"),
    "divides by an integer tensor without a cast": (
        lambda y, l, g: tf.reduce_sum(per_example_loss(y, l)) / g,
        r"tf.constant\(64\): raised"),
    "the gradient stopped (loss from a stop_gradient)": (
        lambda y, l, g: tf.reduce_sum(per_example_loss(y, tf.stop_gradient(l)))
        / tf.cast(g, tf.float32), r"gradient w.r.t. argument 1 differs|gradient is None"),
}


def test_replica_loss_reference_passes():
    report = check("10.replica_loss", replica_loss_right)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", REPLICA_LOSS_WRONG)
def test_replica_loss_wrong_answers_are_rejected(wrong):
    fn, message = REPLICA_LOSS_WRONG[wrong]
    rejected("10.replica_loss", fn, message)


# -- 10.distributed_step --------------------------------------------------------------------------
def make_step(loss="global", reduce="sum", compiled=True, apply=True, use_run=True):
    """A make_distributed_step, right by default; each argument plants one mistake."""
    def factory(strategy, model, optimizer, global_batch_size):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                if loss == "global":
                    value = tf.nn.compute_average_loss(per_example_loss(y, logits),
                                                       global_batch_size=global_batch_size)
                elif loss == "local_mean":
                    value = tf.reduce_mean(per_example_loss(y, logits))
                elif loss == "keras_default":
                    value = mean_loss(y, logits)
                elif loss == "fixed_64":
                    value = tf.nn.compute_average_loss(per_example_loss(y, logits), global_batch_size=64)
                elif loss == "local_times_replicas":
                    n = tf.shape(x)[0] * strategy.num_replicas_in_sync
                    value = tf.reduce_sum(per_example_loss(y, logits)) / tf.cast(n, tf.float32)
            grads = tape.gradient(value, model.trainable_variables)
            if apply:
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return value

        def step(x, y):
            per_replica = strategy.run(replica_fn, args=(x, y)) if use_run else replica_fn(x, y)
            if reduce == "sum":
                return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
            if reduce == "mean":
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)
            return per_replica
        return tf.function(step) if compiled else step
    return factory


STEP_RIGHT = make_step()
STEP_WRONG = {
    "per-replica mean loss": (make_step(loss="local_mean"), r"global batch of 64 .*differs"),
    "Keras loss with its default reduction (almost right: wrong only on uneven batches)": (
        make_step(loss="keras_default"), r"global batch of 33 .*uneven.*differs"),
    "divides by own batch x replicas (almost right)": (
        make_step(loss="local_times_replicas"), r"not by its own batch size x replicas"),
    "divides by the notebook's 64, not the argument (almost right)": (
        make_step(loss="fixed_64"), r"global_batch_size argument \(33 here\)"),
    "reduces with MEAN, not SUM": (make_step(reduce="mean"), r"the value your step returned differs"),
    "returns per-replica losses": (make_step(reduce=None), r"strategy\.reduce"),
    "not compiled": (make_step(compiled=False), r"@tf.function"),
    "never applies the gradients": (make_step(apply=False), r"apply_gradients"),
    "no strategy.run": (make_step(use_run=False), r"outside strategy\.run"),
}


def _all_step_reports():
    """Run in a process with 2 logical CPUs: {name: [ok, problems, replicas]} for every answer."""
    from ctlkit.exercises.nb10 import default_strategy
    replicas = default_strategy().num_replicas_in_sync
    out = {}
    for name, factory in [("right", STEP_RIGHT)] + [(k, f) for k, (f, _) in STEP_WRONG.items()]:
        report = check("10.distributed_step", factory)
        out[name] = [report.ok, report.problems, replicas]
    return out


@pytest.fixture(scope="module")
def two_replica_reports():
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys, json; import ctlkit.runtime as r; r.split_cpu(2)\n"
            f"sys.path.insert(0, {here!r}); import test_exercises_nb10 as t\n"
            "print('REPORTS ' + json.dumps(t._all_step_reports()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("REPORTS "))
    return json.loads(line[len("REPORTS "):])


def test_distributed_step_reference_passes_on_two_replicas(two_replica_reports):
    ok, problems, replicas = two_replica_reports["right"]
    assert replicas == 2
    assert ok, problems


@pytest.mark.parametrize("wrong", STEP_WRONG)
def test_distributed_step_wrong_answers_are_rejected(two_replica_reports, wrong):
    ok, problems, _ = two_replica_reports[wrong]
    assert not ok
    assert any(re.search(STEP_WRONG[wrong][1], p) for p in problems), problems


def test_distributed_step_on_the_default_strategy():
    """In a process without logical CPUs the check runs on one replica: the reference passes and
    mistakes that do not depend on the replica count are still caught."""
    assert check("10.distributed_step", STEP_RIGHT).ok
    report = check("10.distributed_step", make_step(compiled=False),
                   strategy=tf.distribute.get_strategy())
    assert not report.ok and "@tf.function" in str(report)


def test_distributed_step_on_a_one_device_mirrored_strategy():
    """What notebook 10 passes on a machine with one GPU: a MirroredStrategy over one device."""
    one = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert check("10.distributed_step", STEP_RIGHT, strategy=one).ok
    report = check("10.distributed_step", make_step(apply=False), strategy=one)
    assert not report.ok and "apply_gradients" in str(report)
