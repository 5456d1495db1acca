"""Notebook 03, the complete custom training loop: accuracy from logits, a step that adds the
regularisers' penalties and clips the gradients by their global norm."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import check_function, check_step
from ._common import digits_like, digits_mlp


def _digits_like(n, seed, scale=1.0):
    """Random 8x8x1 images in [0, scale] and labels 0..9, as tensors: what notebook 03 trains on."""
    x, y = digits_like(n, seed, scale)
    return tf.constant(x), tf.constant(y)


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


L2 = 1e-2          # the checker's penalty on both kernels: 0.5 or so added to the loss
CLIP = 1.0


def _reference_clipped_step(model, optimizer):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True)) + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, norm = tf.clip_by_global_norm(grads, CLIP)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, norm
    return step


def _variant(penalty="inside", clip="global", returns="loss", norm="before"):
    """The reference with one slip planted, to name a learner's step that matches it exactly."""
    def factory(model, optimizer):
        import keras
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def step(x, y):
            before = tf.add_n(model.losses)              # read before the tape: a constant to it
            with tf.GradientTape() as tape:
                data = loss_fn(y, model(x, training=True))
                total = data + (tf.add_n(model.losses) if penalty == "inside" else
                                before if penalty == "before_tape" else 0.0)
            grads = tape.gradient(total, model.trainable_variables)
            n = tf.linalg.global_norm(grads)
            if clip == "global":
                grads, _ = tf.clip_by_global_norm(grads, CLIP)
            elif clip == "per_tensor":
                grads = [tf.clip_by_norm(g, CLIP) for g in grads]
            elif clip == "always":
                grads = [g * CLIP / n for g in grads]
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            loss = data if returns == "data" else (total if penalty != "none" else data + before)
            return loss, (tf.linalg.global_norm(grads) if norm == "after" else n)
        return step
    return factory


_SLIPS = [
    (_variant(penalty="none"), "the regularisers' penalties are not in what the tape "
     "differentiates: either sum(model.losses) is left out of the loss (it is not part of "
     "loss_fn's value), or it is read before the tape starts, where the tape sees a constant. "
     "Add it to the loss inside the tape."),
    (_variant(clip="per_tensor"), "each gradient tensor is clipped on its own (tf.clip_by_norm), "
     "which changes the update's direction; clip them together by their global norm "
     "(tf.clip_by_global_norm)."),
    (_variant(clip="always"), "your step rescales the gradients to norm 1.0 even where their "
     "norm is below it; clipping only shrinks: tf.clip_by_global_norm leaves a gradient whose "
     "global norm is at most clip_norm as it is."),
    (_variant(clip="none"), "the gradients are not clipped: the update is the raw gradient's."),
    (_variant(norm="after"), "the norm you return is the one after clipping (at most 1.0); return "
     "the norm before clipping, the second value tf.clip_by_global_norm gives back."),
    (_variant(returns="data"), "the loss you return leaves out the penalties: return the total "
     "loss the step minimises, loss_fn's value plus sum(model.losses)."),
]


def _build():
    import keras
    model = digits_mlp(32, "relu", seed=3, kernel_regularizer=keras.regularizers.L2(L2))
    return model, keras.optimizers.SGD(learning_rate=0.5)


def _batches():
    small = (tf.zeros((32, 8, 8, 1)), tf.range(32) % 10)   # zero input, labels spread over the
    return {                                                # classes: the gradient is mostly the penalty's
        "a batch of zeros with every class (a small gradient, nothing to clip: the penalty's "
        "gradient shows)": small,
        "a batch whose gradient norm is far above 1 (clipping changes it)":
            _digits_like(32, seed=31, scale=8.0),              # big pixels: norm >> 1
        "a second batch of that kind": _digits_like(32, seed=32, scale=8.0)}


def clipped_step(fn):
    batches = _batches()
    report = check_step(fn, _reference_clipped_step, _build, batches, name="make_clipped_step",
                        rtol=1e-4, atol=1e-5)
    if report.ok or any(w in p for p in report.problems for w in (
            "not written yet", "plain Python function", "not a step function", "traced")):
        return report
    for variant, slip in _SLIPS:             # does the step match the reference with one slip?
        try:
            same = check_step(fn, variant, _build, batches, name="make_clipped_step", rtol=1e-4,
                              atol=1e-5).ok
        except Exception:  # a diagnosis only; the first report stands
            same = False
        if same:
            report.problems.insert(0, f"your step matches the reference with one slip: {slip}")
            break
    return report


EXERCISES = {"accuracy": accuracy, "clipped_step": clipped_step}
