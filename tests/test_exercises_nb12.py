"""Notebook 12's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import pytest
import tensorflow as tf
from exercise_helpers import rejected

from ctlkit import bench
from ctlkit.exercises import check


# -- 12.train_k_until_end -------------------------------------------------------------------------
def _make_train_k(plant=None):
    """A make_train_k that stops at the end of the data and returns the steps run, right by
    default (a tf.range loop with a break); ``plant`` names one mistake."""
    def make_train_k(step):
        def train_k(iterator, k):
            ran = tf.constant(0)
            if plant == "one_batch":                      # fetches once, trains k times on it
                first = iterator.get_next_as_optional()
            steps = tf.range(k - 1) if plant == "one_short" else tf.range(k)
            if plant == "python_int":
                steps = range(k.numpy())
            for _ in steps:
                batch = first if plant == "one_batch" else iterator.get_next_as_optional()
                if plant == "count_the_miss":
                    ran += 1                              # counted before looking
                if plant != "no_check" and not batch.has_value():
                    break
                x, y = batch.get_value()
                step(x, y)
                if plant != "count_the_miss":
                    ran += 1
            if plant == "returns_k":
                return k
            if plant == "float_count":
                return tf.cast(ran, tf.float32)
            return ran
        return train_k if plant == "not_compiled" else tf.function(train_k)
    return make_train_k


def _copied_cell(step):
    """Section 4's train_k as it stands: next(iterator), the last loss returned."""
    @tf.function
    def train_k(iterator, n):
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            loss = step(x, y)
        return loss
    return train_k


def _copied_cell_counting(step):
    """Section 4's loop that returns n: right until the data run out, then OutOfRangeError."""
    @tf.function
    def train_k(iterator, n):
        for _ in tf.range(n):
            x, y = next(iterator)
            step(x, y)
        return n
    return train_k


def _try_except(step):
    """Almost right: a Python try/except around next() runs while tracing, not when the graph
    runs, so the end of the data still raises."""
    @tf.function
    def train_k(iterator, k):
        ran = tf.constant(0)
        for _ in tf.range(k):
            try:
                x, y = next(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                break
            step(x, y)
            ran += 1
        return ran
    return train_k


def _while_loop(step):
    """Right: tf.while_loop on (count < k) and "the last fetch found a batch", tf.cond inside."""
    @tf.function
    def train_k(iterator, k):
        def body(ran, more):
            batch = iterator.get_next_as_optional()

            def run():
                step(*batch.get_value())
                return ran + 1, tf.constant(True)
            return tf.cond(batch.has_value(), run, lambda: (ran, tf.constant(False)))
        ran, _ = tf.while_loop(lambda ran, more: (ran < k) & more, body,
                               (tf.constant(0), tf.constant(True)))
        return ran
    return train_k


def _python_while(step):
    """Right: a Python while on tensors (AutoGraph converts it), a compiled step inside, an int64
    count."""
    step = tf.function(step)

    @tf.function
    def train_k(iterator, k):
        ran, more = tf.constant(0, tf.int64), tf.constant(True)
        while more and ran < tf.cast(k, tf.int64):
            batch = iterator.get_next_as_optional()
            more = batch.has_value()
            if more:
                x, y = batch.get_value()
                step(x, y)
                ran += 1
        return ran
    return train_k


TRAIN_K_RIGHT = {"a tf.range loop with a break (the reference's style)": _make_train_k(),
                 "tf.while_loop and tf.cond": _while_loop,
                 "a Python while on tensors, the step compiled too, an int64 count": _python_while}


TRAIN_K_WRONG = {
    "section 4's cell copied: next(iterator), the loss returned": (
        _copied_cell, r"returns how many steps ran .*not the loss"),
    "section 4's loop returning n: fails when the data run out": (
        _copied_cell_counting, r"get_next_as_optional"),
    "a Python try/except around next() (almost right)": (_try_except, r"get_next_as_optional"),
    "returns k, not the steps that ran (almost right)": (
        _make_train_k("returns_k"), r"only 5 steps ran and yours returned 7"),
    "counts the fetch that found no batch (almost right)": (
        _make_train_k("count_the_miss"), r"5 steps ran and yours counted 6"),
    "takes the batch without checking has_value()": (_make_train_k("no_check"), r"has_value"),
    "runs k - 1 steps": (_make_train_k("one_short"), r"count train_k returned differs"),
    "fetches one batch and trains on it k times": (
        _make_train_k("one_batch"), r"k = 4 .*weight .* differs"),
    "returns the count as a float": (_make_train_k("float_count"), r"the count is right but a float"),
    "reads k with .numpy() inside the graph": (_make_train_k("python_int"), r"numpy\(\) does not exist"),
    "not compiled": (_make_train_k("not_compiled"), r"@tf.function"),
    "returns the result of a call, not the function": (
        lambda step: _make_train_k()(step)(iter(bench.Task(64).train), tf.constant(1)),
        r"not a function"),
}


@pytest.mark.parametrize("right", TRAIN_K_RIGHT)
def test_train_k_until_end_right_in_other_styles_passes(right):
    report = check("12.train_k_until_end", TRAIN_K_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", TRAIN_K_WRONG)
def test_train_k_until_end_wrong_answers_are_rejected(wrong):
    rejected("12.train_k_until_end", *TRAIN_K_WRONG[wrong])


def test_train_k_until_end_that_retraces_for_each_k_is_rejected():
    def make_train_k(step):
        @tf.function
        def inner(iterator, k):                         # k a Python int: one graph per value
            ran = tf.constant(0)
            for _ in range(k):
                batch = iterator.get_next_as_optional()
                if batch.has_value():
                    step(*batch.get_value())
                    ran += 1
            return ran

        class TrainK:                                   # looks like a tf.function to the checker
            def __call__(self, iterator, k):
                return inner(iterator, int(k))

            def experimental_get_tracing_count(self):
                return inner.experimental_get_tracing_count()
        return TrainK()
    rejected("12.train_k_until_end", make_train_k, r"traced \d times.*tf.range\(k\)")


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


def _decorated_with_apply(model, optimizer, loss_fn):
    """Right: the decorator form, a looser [None, None] signature, optimizer.apply, the optimizer
    built in advance."""
    optimizer.build(model.trainable_variables)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32),
                                  tf.TensorSpec([None], tf.int32)])
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss
    return step


def _keras_ops_loss(model, optimizer, loss_fn):
    """Right: the loss written with keras.ops (sparse cross-entropy from logits), dtypes left
    to their defaults in the signature where they match."""
    import keras

    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = keras.ops.mean(keras.losses.sparse_categorical_crossentropy(y, logits,
                                                                               from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return tf.function(step, input_signature=[tf.TensorSpec([None, 784]),
                                              tf.TensorSpec([None], "int32")])


STEP_RIGHT = {"tf.function(train_step(...), input_signature=...) (the reference)": _make_step(),
              "decorator, [None, None], optimizer.apply, built in advance": _decorated_with_apply,
              "keras.ops loss, default dtypes in the signature": _keras_ops_loss}


@pytest.mark.parametrize("right", STEP_RIGHT)
def test_step_right_in_other_styles_passes(right):
    report = check("12.step", STEP_RIGHT[right])
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
