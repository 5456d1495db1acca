"""Notebook 12's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import pytest
import tensorflow as tf

from ctlkit import bench
from ctlkit.exercises import check
from exercise_helpers import rejected


# -- 12.train_k -----------------------------------------------------------------------------------
def _make_train_k(plant=None):
    """A make_train_k, right by default; ``plant`` names one mistake."""
    def make_train_k(step):
        def train_k(iterator, n):
            loss, total = tf.constant(0.0), tf.constant(0.0)
            if plant == "one_batch":                   # fetches once, trains n times on it
                x, y = next(iterator)
            steps = tf.range(1, n) if plant == "off_by_one" else tf.range(n)
            if plant == "python_int":
                steps = range(n.numpy())
            for _ in steps:
                if plant != "one_batch":
                    x, y = next(iterator)
                loss = step(x, y)
                total += loss
            if plant == "mean_loss":
                return total / tf.cast(n, tf.float32)
            if plant == "no_return":
                return None
            return loss
        return train_k if plant == "not_compiled" else tf.function(train_k)
    return make_train_k


TRAIN_K_WRONG = {
    "runs n - 1 steps (almost right)": (_make_train_k("off_by_one"), r"differs"),
    "fetches one batch and trains on it n times (almost right)": (
        _make_train_k("one_batch"), r"n = 3 .*weight .* differs"),
    "returns the mean loss of the n steps, not the last": (
        _make_train_k("mean_loss"), r"n = 3 .*the value your step returned differs"),
    "returns nothing": (_make_train_k("no_return"), r"value your step returned is None"),
    "reads n with .numpy() inside the graph": (_make_train_k("python_int"), r"numpy\(\) does not exist"),
    "not compiled": (_make_train_k("not_compiled"), r"@tf.function"),
    "returns the result of a call, not the function": (
        lambda step: _make_train_k()(step)(iter(bench.Task(64).train), tf.constant(1)),
        r"not a function"),
}


def test_train_k_reference_passes():
    report = check("12.train_k", _make_train_k())
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", TRAIN_K_WRONG)
def test_train_k_wrong_answers_are_rejected(wrong):
    rejected("12.train_k", *TRAIN_K_WRONG[wrong])


def test_train_k_that_retraces_for_each_n_is_rejected():
    def make_train_k(step):
        @tf.function
        def inner(iterator, n):                         # n a Python int: one graph per value
            loss = tf.constant(0.0)
            for _ in range(n):
                loss = step(*next(iterator))
            return loss

        class TrainK:                                   # looks like a tf.function to the checker
            def __call__(self, iterator, n):
                return inner(iterator, int(n))

            def experimental_get_tracing_count(self):
                return inner.experimental_get_tracing_count()
        return TrainK()
    rejected("12.train_k", make_train_k, r"traced 3 times")


# -- 12.step --------------------------------------------------------------------------------------
def _make_step(plant=None):
    """A make_step, right by default; ``plant`` names one mistake."""
    def make_step(model, optimizer, loss_fn):
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            if plant != "no_apply":
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return tf.reduce_sum(loss) * 32 if plant == "sum" else loss
        rows = 32 if plant == "fixed_32" else None
        labels = tf.int64 if plant == "int64_labels" else tf.int32
        signature = [tf.TensorSpec([rows, 784], tf.float32), tf.TensorSpec([rows], labels)]
        if plant == "no_signature":
            return tf.function(step)
        if plant == "reduce_retracing":
            return tf.function(step, reduce_retracing=True)
        if plant == "not_compiled":
            return step
        return tf.function(step, input_signature=signature)
    return make_step


STEP_WRONG = {
    "no input_signature: traces once per batch size": (_make_step("no_signature"),
                                                        r"traced 3 times for 4 calls"),
    "reduce_retracing=True (almost right: traces twice)": (_make_step("reduce_retracing"),
                                                           r"traced 2 times"),
    "a signature fixed at 32 rows": (_make_step("fixed_32"), r"10 rows.*raised"),
    "a signature with int64 labels": (_make_step("int64_labels"), r"raised"),
    "not compiled": (_make_step("not_compiled"), r"@tf.function"),
    "never applies the gradients": (_make_step("no_apply"), r"apply_gradients"),
    "returns the summed loss, not the mean": (_make_step("sum"),
                                              r"32 rows.*the value your step returned differs"),
}


def test_step_reference_passes():
    report = check("12.step", _make_step())
    assert report.ok, str(report)


def test_step_compiled_with_xla_and_a_signature_passes():
    def make_step(model, optimizer, loss_fn):
        return tf.function(_make_step("not_compiled")(model, optimizer, loss_fn), jit_compile=True,
                           input_signature=[tf.TensorSpec([None, 784]), tf.TensorSpec([None], tf.int32)])
    report = check("12.step", make_step)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", STEP_WRONG)
def test_step_wrong_answers_are_rejected(wrong):
    rejected("12.step", *STEP_WRONG[wrong])
