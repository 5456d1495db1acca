"""Notebook 03's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

import ctlkit
from ctlkit.exercises import check

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- 03.accuracy ----------------------------------------------------------------------------------
def accuracy_right(logits, labels):
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.reduce_mean(tf.cast(predicted == tf.cast(labels, tf.int32), tf.float32))


ACCURACY_WRONG = {
    "argmax over the batch axis": (
        lambda z, y: tf.reduce_mean(tf.cast(tf.argmax(z, 0, output_type=tf.int32) == tf.cast(y, tf.int32),
                                            tf.float32)), r"differs"),
    "the count, not the fraction (almost right)": (
        lambda z, y: tf.reduce_sum(tf.cast(tf.argmax(z, -1, output_type=tf.int32) == tf.cast(y, tf.int32),
                                           tf.float32)), r"differs"),
    "a float64 result": (
        lambda z, y: tf.reduce_mean(tf.cast(tf.argmax(z, -1, output_type=tf.int32) == tf.cast(y, tf.int32),
                                            tf.float64)), r"dtype float64, expected float32"),
    "int32 labels compared with int64 argmax": (
        lambda z, y: tf.reduce_mean(tf.cast(tf.argmax(z, -1) == y, tf.float32)), r"raised"),
    "the mean of the probabilities at the labels": (
        lambda z, y: tf.reduce_mean(tf.gather(tf.nn.softmax(z), tf.cast(y, tf.int32), batch_dims=1)),
        r"differs"),
    "the error rate, 1 - accuracy": (
        lambda z, y: 1.0 - accuracy_right(z, y), r"every prediction right.*differs"),
    "a Python float": (lambda z, y: float(accuracy_right(z, y)), r"dtype float64, expected float32|differs"),
    "a per-example vector": (
        lambda z, y: tf.cast(tf.argmax(z, -1, output_type=tf.int32) == tf.cast(y, tf.int32), tf.float32),
        r"has shape \[64\], expected \[\]"),
}


def _accuracy_loop(logits, labels):
    """A tf.range loop over the rows, a hit counted at a time."""
    hits = tf.constant(0.0)
    n = tf.shape(logits)[0]
    for i in tf.range(n):
        hits += tf.cast(tf.argmax(logits[i]) == tf.cast(labels[i], tf.int64), tf.float32)
    return hits / tf.cast(n, tf.float32)


ACCURACY_RIGHT = {
    "keras.ops": lambda z, y: keras.ops.mean(keras.ops.cast(
        keras.ops.equal(keras.ops.argmax(z, axis=-1), keras.ops.cast(y, "int64")), "float32")),
    "int64 comparison": lambda z, y: tf.reduce_mean(tf.cast(
        tf.equal(tf.argmax(z, axis=1), tf.cast(y, tf.int64)), tf.float32)),
    "a count divided by the batch size": lambda z, y: tf.math.count_nonzero(
        tf.argmax(z, -1, output_type=tf.int32) == tf.cast(y, tf.int32), dtype=tf.float32)
    / tf.cast(tf.shape(z)[0], tf.float32),
    "a tf.range loop over the rows": _accuracy_loop,
    "tf.math.in_top_k with k=1 (no ties in the cases)": lambda z, y: tf.reduce_mean(tf.cast(
        tf.math.in_top_k(tf.cast(y, tf.int32), z, k=1), tf.float32)),
}


def test_accuracy_reference_passes():
    assert check("03.accuracy", accuracy_right).ok


@pytest.mark.parametrize("style", ACCURACY_RIGHT)
def test_accuracy_right_answers_in_other_styles_pass(style):
    accepted("03.accuracy", ACCURACY_RIGHT[style])


@pytest.mark.parametrize("wrong", ACCURACY_WRONG)
def test_accuracy_wrong_answers_are_rejected(wrong):
    fn, message = ACCURACY_WRONG[wrong]
    rejected("03.accuracy", fn, message)


# -- 03.clipped_step ------------------------------------------------------------------------------
def _make(penalty="inside", clip="global", returns="total", norm="before", compiled=True,
          apply=True, threshold=1.0):
    """A factory for the step, right by default; each argument plants one mistake."""
    def factory(model, optimizer):
        def step(x, y):
            early = sum(model.losses)
            with tf.GradientTape() as tape:
                data = loss_fn(y, model(x, training=True))
                total = data + {"inside": sum(model.losses), "before_tape": early,
                                "none": 0.0}[penalty]
            grads = tape.gradient(total, model.trainable_variables)
            before = tf.linalg.global_norm(grads)
            if clip == "global":
                grads, _ = tf.clip_by_global_norm(grads, threshold)
            elif clip == "per_tensor":
                grads = [tf.clip_by_norm(g, threshold) for g in grads]
            elif clip == "by_value":
                grads = [tf.clip_by_value(g, -threshold, threshold) for g in grads]
            elif clip == "always_scaled":                    # scales to norm 1 even when below it
                grads = [g * threshold / before for g in grads]
            if apply:
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            loss = {"total": data + early, "data": data}[returns]       # early: before the update
            returned_norm = {"before": before, "after": tf.linalg.global_norm(grads),
                             "none": None}[norm]
            return (loss, returned_norm) if norm != "none" else loss
        return tf.function(step) if compiled else step
    return factory


def _by_hand(model, optimizer):
    """keras.ops, the clipping scale written out, optimizer.apply, the penalty first."""
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            penalty = keras.ops.sum(keras.ops.stack(model.losses))
            loss = penalty + loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        norm = keras.ops.sqrt(sum(keras.ops.sum(keras.ops.square(g)) for g in grads))
        scale = keras.ops.minimum(1.0, 1.0 / norm)
        optimizer.apply([g * scale for g in grads], model.trainable_variables)
        return loss, norm
    return step


def _built_in_advance(model, optimizer):
    optimizer.build(model.trainable_variables)
    step = _make()(model, optimizer)
    return step


def _xla(model, optimizer):
    step = _make(compiled=False)(model, optimizer)
    return tf.function(step, jit_compile=True)


def _ctlkit_norm(model, optimizer):
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits) + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        norm = ctlkit.grads.global_norm(grads)
        clipped, _ = tf.clip_by_global_norm(grads, 1.0, use_norm=norm)
        optimizer.apply_gradients(zip(clipped, model.trainable_variables))
        return loss, norm
    return step


CLIPPED_RIGHT = {
    "the reference's way, sum(model.losses)": _make(),
    "keras.ops, the scale by hand, optimizer.apply, penalty first": _by_hand,
    "an optimizer built in advance": _built_in_advance,
    "compiled with XLA (jit_compile=True)": _xla,
    "ctlkit.grads.global_norm passed as use_norm": _ctlkit_norm,
}

CLIPPED_WRONG = {
    "the old exercise: no penalty at all (almost right)": (
        _make(penalty="none"), r"one slip: the regularisers' penalties are not in what the tape"),
    "the penalty read before the tape (almost right)": (
        _make(penalty="before_tape"), r"one slip: the regularisers' penalties are not in what the tape"),
    "no clipping at all": (_make(clip="none"), r"one slip: the gradients are not clipped"),
    "clips each tensor on its own": (_make(clip="per_tensor"), r"one slip: each gradient tensor"),
    "clips by value": (_make(clip="by_value"), r"weight \d .* differs"),
    "clips to 10, not 1": (_make(threshold=10.0), r"differs"),
    "always rescales to norm 1, even below it": (
        _make(clip="always_scaled"), r"one slip: your step rescales the gradients to norm 1\.0 even"),
    "returns the norm after clipping":
        (_make(norm="after"), r"one slip: the norm you return is the one after"),
    "returns loss_fn's value only": (_make(returns="data"), r"one slip: the loss you return leaves out"),
    "returns the loss only, no norm": (_make(norm="none"), r"value your step returned"),
    "not compiled": (_make(compiled=False), r"@tf.function"),
    "never applies the gradients": (_make(apply=False), r"apply_gradients"),
}


@pytest.mark.parametrize("style", CLIPPED_RIGHT)
def test_clipped_step_right_answers_pass(style):
    accepted("03.clipped_step", CLIPPED_RIGHT[style])


def test_clipped_step_reference_passes():
    from ctlkit.exercises import nb03
    accepted("03.clipped_step", nb03._reference_clipped_step)


@pytest.mark.parametrize("wrong", CLIPPED_WRONG)
def test_clipped_step_wrong_answers_are_rejected(wrong):
    fn, message = CLIPPED_WRONG[wrong]
    rejected("03.clipped_step", fn, message)
