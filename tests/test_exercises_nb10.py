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
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check

per_example_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
mean_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- 10.replica_loss ------------------------------------------------------------------------------
def replica_loss_right(labels, logits, global_batch_size):
    per_example = per_example_loss(labels, logits)
    return tf.reduce_sum(per_example) / tf.cast(global_batch_size, per_example.dtype)


REPLICA_LOSS_WRONG = {
    "the per-replica mean (the classic bug)": (
        lambda y, z, g: tf.reduce_mean(per_example_loss(y, z)),
        r"mean over this replica's own examples"),
    "Keras' mean loss, default reduction (the same bug)": (
        lambda y, z, g: mean_loss(y, z), r"mean over this replica's own examples"),
    "summed, never divided": (
        lambda y, z, g: tf.reduce_sum(per_example_loss(y, z)), r"never divided by global_batch_size"),
    "divides by the notebook's 64 (almost right)": (
        lambda y, z, g: tf.reduce_sum(per_example_loss(y, z)) / 64.0, r"a fixed 64"),
    "treats logits as probabilities (from_logits forgotten, almost right)": (
        lambda y, z, g: tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, z))
        / tf.cast(g, tf.float32), r"the result differs"),
    "the per-example losses divided, not summed": (
        lambda y, z, g: per_example_loss(y, z) / tf.cast(g, tf.float32),
        r"has shape \[32\], expected \[\]"),
    "a Python float via .numpy()": (
        lambda y, z, g: float(tf.reduce_sum(per_example_loss(y, z)).numpy()) / int(g),
        r"dtype float64, expected float32"),
    "divides by an integer tensor without a cast": (
        lambda y, z, g: tf.reduce_sum(per_example_loss(y, z)) / g,
        r"tf.constant\(64\): raised"),
    "the gradient stopped (loss from a stop_gradient)": (
        lambda y, z, g: tf.reduce_sum(per_example_loss(y, tf.stop_gradient(z)))
        / tf.cast(g, tf.float32), r"gradient w.r.t. argument 1 differs|gradient is None"),
}


REPLICA_LOSS_RIGHT = {
    "the solution cell": replica_loss_right,
    "tf.nn.compute_average_loss": lambda y, z, g: tf.nn.compute_average_loss(
        per_example_loss(y, z), global_batch_size=g),
    "keras.ops, the fused TF loss": lambda y, z, g: keras.ops.sum(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)) / keras.ops.cast(g, "float32"),
    "the local mean times local / global": lambda y, z, g: tf.reduce_mean(per_example_loss(y, z))
    * tf.cast(tf.shape(z)[0], tf.float32) / tf.cast(g, tf.float32),
    "divided first, then summed": lambda y, z, g: tf.reduce_sum(
        per_example_loss(y, z) / tf.cast(g, tf.float32)),
}


@pytest.mark.parametrize("right", REPLICA_LOSS_RIGHT)
def test_replica_loss_right_answers_pass(right):
    accepted("10.replica_loss", REPLICA_LOSS_RIGHT[right])


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


def _step_apply_keras_ops(strategy, model, optimizer, global_batch_size):
    """optimizer.apply(grads, vars), keras.ops for the loss, the loss summed / global after reduce."""
    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                total = keras.ops.sum(per_example_loss(y, model(x, training=True)))
                loss = total / keras.ops.cast(global_batch_size, "float32")
            optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
            return total
        totals = strategy.run(replica_fn, args=(x, y))
        return strategy.reduce("SUM", totals, axis=None) / tf.cast(global_batch_size, tf.float32)
    return step


def _step_compute_loss_fn(strategy, model, optimizer, global_batch_size):
    """The step from a plain function wrapped by tf.function, the fused TF loss, the per-replica
    results gathered with experimental_local_results and added up."""
    def replica_fn(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(list(zip(grads, model.trainable_variables)))
        return loss

    def step(x, y):
        return tf.add_n(strategy.experimental_local_results(strategy.run(replica_fn, args=(x, y))))
    return tf.function(step)


STEP_RIGHT = make_step()
STEP_RIGHT_STYLES = {"optimizer.apply, keras.ops, the sum divided after the reduce": _step_apply_keras_ops,
                     "tf.function(step), the fused loss, local results added": _step_compute_loss_fn}
STEP_WRONG = {
    "per-replica mean loss": (make_step(loss="local_mean"),
                              r"global batch of 64 .*2 times the (expected|reference's): 2 is the "
                              r"number of replicas: each replica's loss was the mean over its own "
                              r"examples"),
    "Keras loss with its default reduction (almost right: wrong only on uneven batches)": (
        make_step(loss="keras_default"), r"global batch of 33 .*uneven.*differs"),
    "divides by own batch x replicas (almost right)": (
        make_step(loss="local_times_replicas"), r"not by its own batch size x replicas"),
    "divides by the notebook's 64, not the argument (almost right)": (
        make_step(loss="fixed_64"), r"global_batch_size argument \(33 here\)"),
    "reduces with MEAN, not SUM": (make_step(reduce="mean"),
                                   r"the value your step returned differs.*1/2 times the expected: "
                                   r"that is one over the number of replicas"),
    "returns per-replica losses": (make_step(reduce=None), r"strategy\.reduce"),
    "not compiled": (make_step(compiled=False), r"@tf.function"),
    "never applies the gradients": (make_step(apply=False), r"apply_gradients"),
    "no strategy.run": (make_step(use_run=False), r"outside strategy\.run"),
}


# -- 10.clipped_step ------------------------------------------------------------------------------
def clip_right(strategy, model, optimizer, global_batch_size, clip):
    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(per_example_loss(y, model(x, training=True)),
                                                  global_batch_size=global_batch_size)
            return loss, tape.gradient(loss, model.trainable_variables)
        losses, shares = strategy.run(replica_fn, args=(x, y))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in shares]
        grads, norm = tf.clip_by_global_norm(grads, clip)
        optimizer.apply(grads, model.trainable_variables)
        return loss, norm
    return step


def _clip_by_hand(strategy, model, optimizer, global_batch_size, clip):
    """Reduced in one call (a list), the norm by tf.linalg.global_norm, the scale min(1, clip/norm)
    by hand, apply_gradients back in the default context, the result as a list."""
    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                total = tf.reduce_sum(per_example_loss(y, model(x, training=True)))
                loss = total / tf.cast(global_batch_size, tf.float32)
            return [loss] + tape.gradient(loss, model.trainable_variables)
        reduced = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_fn, args=(x, y)),
                                  axis=None)
        loss, grads = reduced[0], reduced[1:]
        norm = tf.linalg.global_norm(grads)
        scale = tf.minimum(1.0, clip / norm)
        optimizer.apply_gradients(zip([g * scale for g in grads], model.trainable_variables))
        return [loss, norm]
    return step


def _clip_keras_ops_norm(strategy, model, optimizer, global_batch_size, clip):
    """The norm as sqrt of summed squares (keras.ops), a where instead of a min, the loss reduced
    from per-replica sums divided afterwards."""
    ops = keras.ops

    def replica_fn(x, y):
        with tf.GradientTape() as tape:
            total = ops.sum(per_example_loss(y, model(x, training=True)))
            loss = total / ops.cast(global_batch_size, "float32")
        return total, tape.gradient(loss, model.trainable_variables)

    @tf.function
    def step(x, y):
        totals, shares = strategy.run(replica_fn, args=(x, y))
        grads = [strategy.reduce("SUM", g, axis=None) for g in shares]
        norm = ops.sqrt(sum(ops.sum(ops.square(g)) for g in grads))
        grads = [ops.where(norm > clip, g * clip / norm, g) for g in grads]
        optimizer.apply(grads, model.trainable_variables)
        return (strategy.reduce("SUM", totals, axis=None) / ops.cast(global_batch_size, "float32"),
                norm)
    return step


CLIP_RIGHT = {"the solution cell": clip_right, "by hand, apply_gradients, a list": _clip_by_hand,
              "keras.ops norm, a where": _clip_keras_ops_norm}


def make_clip(loss="global", where="after", norm="before", reduce_op="sum", apply_in="default"):
    """A make_clipped_step, right by default; each argument plants one mistake."""
    def factory(strategy, model, optimizer, global_batch_size, clip):
        op = tf.distribute.ReduceOp.SUM if reduce_op == "sum" else tf.distribute.ReduceOp.MEAN

        def replica_loss(x, y):
            per_example = per_example_loss(y, model(x, training=True))
            if loss == "local_mean":
                return tf.reduce_mean(per_example)
            size = 64 if loss == "fixed_64" else global_batch_size
            return tf.nn.compute_average_loss(per_example, global_batch_size=size)

        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                value = replica_loss(x, y)
            grads = tape.gradient(value, model.trainable_variables)
            if where == "share":                      # each replica clips its share, Keras applies
                ctx = tf.distribute.get_replica_context()
                n = tf.linalg.global_norm(ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads))
                grads, share_norm = tf.clip_by_global_norm(grads, clip)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return value, (share_norm if norm == "shares" else n / ctx.num_replicas_in_sync)
            if apply_in == "replica":                 # all-reduce, clip, apply: all in the replica
                ctx = tf.distribute.get_replica_context()
                grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
                grads, n = tf.clip_by_global_norm(grads, clip)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return value, n
            return value, grads

        @tf.function
        def step(x, y):
            value, rest = strategy.run(replica_fn, args=(x, y))
            total = strategy.reduce(op, value, axis=None)
            if where == "share" or apply_in == "replica":
                return total, strategy.reduce(tf.distribute.ReduceOp.SUM if where == "share"
                                              else tf.distribute.ReduceOp.MEAN, rest, axis=None)
            grads = [strategy.reduce(op, g, axis=None) for g in rest]
            clipped, n = tf.clip_by_global_norm(grads, clip)
            if where == "never":
                clipped = grads
            optimizer.apply(clipped, model.trainable_variables)
            return total, (tf.linalg.global_norm(clipped) if norm == "after" else n)
        return step
    return factory


CLIP_WRONG = {
    "each replica clips its share (what Keras' global_clipnorm does; almost right)": (
        make_clip(where="share"), r"longer than the clip.*clip the all-reduced gradient"),
    "the norm logged as the sum of the replicas' own norms": (
        make_clip(where="share", norm="shares"), r"sum or mean of each replica's own norm"),
    "never clips (almost right: right below the clip)": (
        make_clip(where="never"), r"longer than the clip.*clip the all-reduced gradient"),
    "per-replica mean loss": (
        make_clip(loss="local_mean"), r"2 times the (expected|reference's): 2 is the number of replicas"),
    "gradients reduced with MEAN": (
        make_clip(reduce_op="mean"), r"1/2 times the (expected|reference's).*one over the number of "
                                     r"replicas"),
    "all-reduced, clipped and applied inside strategy.run (summed twice)": (
        make_clip(apply_in="replica"), r"2 times the reference's( on some weights)?: 2 is the number of "
                                       r"replicas.*summed again"),
    "returns the norm after clipping (almost right: right below the clip)": (
        make_clip(norm="after"), r"longer than the clip.*returned\[1\] differs"),
    "divides by the notebook's 64, not the argument (almost right)": (
        make_clip(loss="fixed_64"), r"global batch of 33.*(not the mean over the global batch|differs)"),
}


def test_clipped_step_right_answers_pass_on_two_replicas(two_replica_reports):
    for name in CLIP_RIGHT:
        ok, problems, replicas = two_replica_reports["clip: " + name]
        assert replicas == 2
        assert ok, (name, problems)


@pytest.mark.parametrize("wrong", CLIP_WRONG)
def test_clipped_step_wrong_answers_are_rejected(two_replica_reports, wrong):
    ok, problems, _ = two_replica_reports["clip: " + wrong]
    assert not ok
    assert any(re.search(CLIP_WRONG[wrong][1], p) for p in problems), problems


def test_clipped_step_on_the_default_strategy():
    """One replica: the reference passes, a step that never clips is still caught."""
    assert check("10.clipped_step", clip_right).ok
    report = check("10.clipped_step", make_clip(where="never"))
    assert not report.ok and "clip the all-reduced gradient" in str(report)


def _all_step_reports():
    """Run in a process with 2 logical CPUs: {name: [ok, problems, replicas]} for every answer of
    both step exercises (a clipped step's names start with "clip: ")."""
    from ctlkit.exercises.nb10 import default_strategy
    replicas = default_strategy().num_replicas_in_sync
    answers = ([("10.distributed_step", "right", STEP_RIGHT)]
               + [("10.distributed_step", k, f) for k, f in STEP_RIGHT_STYLES.items()]
               + [("10.distributed_step", k, f) for k, (f, _) in STEP_WRONG.items()]
               + [("10.clipped_step", "clip: " + k, f) for k, f in CLIP_RIGHT.items()]
               + [("10.clipped_step", "clip: " + k, f) for k, (f, _) in CLIP_WRONG.items()])
    out = {}
    for key, name, factory in answers:
        report = check(key, factory)
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


@pytest.mark.parametrize("right", STEP_RIGHT_STYLES)
def test_distributed_step_right_answers_pass_on_two_replicas(two_replica_reports, right):
    ok, problems, _ = two_replica_reports[right]
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
