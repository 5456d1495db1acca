"""Notebook 03's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- 03.accuracy ----------------------------------------------------------------------------------
def accuracy_right(logits, labels):
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.reduce_mean(tf.cast(predicted == tf.cast(labels, tf.int32), tf.float32))


ACCURACY_WRONG = {
    "argmax over the batch axis": (
        lambda l, y: tf.reduce_mean(tf.cast(tf.argmax(l, 0, output_type=tf.int32) == tf.cast(y, tf.int32),
                                            tf.float32)), r"differs"),
    "the count, not the fraction (almost right)": (
        lambda l, y: tf.reduce_sum(tf.cast(tf.argmax(l, -1, output_type=tf.int32) == tf.cast(y, tf.int32),
                                           tf.float32)), r"differs"),
    "a float64 result": (
        lambda l, y: tf.reduce_mean(tf.cast(tf.argmax(l, -1, output_type=tf.int32) == tf.cast(y, tf.int32),
                                            tf.float64)), r"dtype float64, expected float32"),
    "int32 labels compared with int64 argmax": (
        lambda l, y: tf.reduce_mean(tf.cast(tf.argmax(l, -1) == y, tf.float32)), r"raised"),
    "a per-example vector": (
        lambda l, y: tf.cast(tf.argmax(l, -1, output_type=tf.int32) == tf.cast(y, tf.int32), tf.float32),
        r"has shape \[64\], expected \[\]"),
}


def test_accuracy_reference_passes():
    assert check("03.accuracy", accuracy_right).ok


@pytest.mark.parametrize("wrong", ACCURACY_WRONG)
def test_accuracy_wrong_answers_are_rejected(wrong):
    fn, message = ACCURACY_WRONG[wrong]
    rejected("03.accuracy", fn, message)


# -- 03.clipped_step ------------------------------------------------------------------------------
def _make(clip=None, returns="loss", compiled=True, apply=True):
    """A clipped-step factory, right by default; each argument plants one mistake."""
    def factory(model, optimizer):
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            norm = tf.linalg.global_norm(grads)
            if clip == "global":
                grads, _ = tf.clip_by_global_norm(grads, 1.0)
            elif clip == "per_tensor":
                grads = [tf.clip_by_norm(g, 1.0) for g in grads]
            elif clip == "by_value":
                grads = [tf.clip_by_value(g, -1.0, 1.0) for g in grads]
            elif clip == "to_10":
                grads, _ = tf.clip_by_global_norm(grads, 10.0)
            if apply:
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss if returns == "loss" else norm
        return tf.function(step) if compiled else step
    return factory


CLIPPED_WRONG = {
    "no clipping at all": (_make(), r"weight 0 .* differs"),
    "clips each tensor on its own (almost right)": (_make("per_tensor"), r"differs"),
    "clips by value": (_make("by_value"), r"differs"),
    "clips to 10, not 1": (_make("to_10"), r"differs"),
    "returns the gradient norm, not the loss": (_make("global", returns="norm"), r"value your step returned"),
    "not compiled": (_make("global", compiled=False), r"@tf.function"),
    "never applies the gradients": (_make("global", apply=False), r"apply_gradients"),
}


def test_clipped_step_reference_passes():
    assert check("03.clipped_step", _make("global")).ok


@pytest.mark.parametrize("wrong", CLIPPED_WRONG)
def test_clipped_step_wrong_answers_are_rejected(wrong):
    fn, message = CLIPPED_WRONG[wrong]
    rejected("03.clipped_step", fn, message)
