"""Notebook 03, the complete custom training loop: accuracy from logits, a clipped step."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import check_function, check_step


def _digits_like(n, seed, scale=1.0):
    """Random 8x8x1 images in [0, scale] and labels 0..9: the shapes notebook 03 trains on."""
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.uniform(0, scale, (n, 8, 8, 1)), tf.float32),
            tf.constant(rng.integers(0, 10, n), tf.int32))


def _reference_accuracy(logits, labels):
    hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.cast(labels, tf.int32))
    return tf.reduce_mean(tf.cast(hits, tf.float32))


def accuracy(fn):
    rng = np.random.default_rng(30)
    logits = tf.constant(rng.normal(size=(64, 10)), tf.float32)
    labels = tf.constant(rng.integers(0, 10, 64), tf.int32)
    cases = {
        "64 random logits, int32 labels": (logits, labels),
        "3 classes, int64 labels": (tf.constant([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5], [0.0, 0.0, 9.0]]),
                                    tf.constant([1, 2, 2], tf.int64)),
        "every prediction right": (tf.one_hot(labels, 10) * 5.0, labels),
        "one example, wrong": (tf.constant([[1.0, 0.0]]), tf.constant([1])),
    }
    return check_function(fn, _reference_accuracy, cases, name="accuracy_from_logits")


def _reference_clipped_step(model, optimizer):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, model.trainable_variables), 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


def _build():
    import keras
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)])
    return model, keras.optimizers.SGD(learning_rate=0.5)


def clipped_step(fn):
    small = (tf.zeros((32, 8, 8, 1)), tf.fill([32], 3))      # zero input: only biases get a gradient
    big = _digits_like(32, seed=31, scale=8.0)                 # big pixels: gradient norm well above 1
    batches = {"a batch whose gradient norm is far above 1 (clipping changes it)": big,
               "a second batch of that kind": _digits_like(32, seed=32, scale=8.0),
               "a batch of zeros (small gradients: nothing to clip)": small}
    return check_step(fn, _reference_clipped_step, _build, batches, name="make_clipped_step",
                      rtol=1e-4, atol=1e-5)


EXERCISES = {"accuracy": accuracy, "clipped_step": clipped_step}
