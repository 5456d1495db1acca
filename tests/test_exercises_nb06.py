"""Notebook 06's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check


# -- 06.rsqrt_schedule ----------------------------------------------------------------------------
def rsqrt_right(step, peak_lr, warmup_steps):
    t = tf.cast(step, tf.float32)
    return tf.where(t < warmup_steps, peak_lr * t / warmup_steps,
                    peak_lr * tf.sqrt(warmup_steps / tf.maximum(t, 1.0)))


def rsqrt_keras_min(step, peak_lr, warmup_steps):     # the Transformer's form: the smaller of the two
    t = keras.ops.cast(step, "float32")
    return peak_lr * keras.ops.minimum(t / warmup_steps, keras.ops.sqrt(warmup_steps / t))


def rsqrt_math_rsqrt(step, peak_lr, warmup_steps):    # rsqrt, inf at t = 0 in the branch not taken
    t = tf.cast(step, tf.float32)
    decay = peak_lr * math.sqrt(warmup_steps) * tf.math.rsqrt(t)
    return tf.where(t >= warmup_steps, decay, peak_lr * t / warmup_steps)


def rsqrt_pow(step, peak_lr, warmup_steps):           # powers, and <= at the boundary (equal there)
    t = tf.cast(step, tf.float32)
    return keras.ops.where(t <= warmup_steps, t * (peak_lr / warmup_steps),
                           peak_lr * (t / warmup_steps) ** -0.5)


RSQRT_RIGHT = {"tf.where": rsqrt_right, "keras.ops.minimum of both": rsqrt_keras_min,
               "tf.math.rsqrt": rsqrt_math_rsqrt, "a power -0.5, <= at the boundary": rsqrt_pow}


def _rsqrt(python_if=False, no_w=False, no_sqrt=False, int_div=False, shift=0.0, float64=False,
           fixed_peak=None, np_sqrt=False, cosine_copy=False):
    def fn(step, peak_lr, warmup_steps):
        peak = fixed_peak or peak_lr
        if python_if:
            if step < warmup_steps:
                return peak * tf.cast(step, tf.float32) / warmup_steps
        t = tf.cast(step, tf.float64 if float64 else tf.float32)
        warm = peak * (t + shift) / warmup_steps
        if int_div:
            warm = peak * tf.cast(step // warmup_steps, t.dtype)
        if cosine_copy:              # the warmup + cosine of section 1, with an invented end
            progress = tf.clip_by_value((t - warmup_steps) / (10 * warmup_steps), 0.0, 1.0)
            return tf.where(t < warmup_steps, warm, 0.5 * peak * (1.0 + tf.cos(math.pi * progress)))
        safe = tf.maximum(t, 1.0)
        if np_sqrt:
            decay = peak * np.sqrt(warmup_steps / safe)
        elif no_w:
            decay = peak / tf.sqrt(safe)
        elif no_sqrt:
            decay = peak * warmup_steps / safe
        else:
            decay = peak * tf.sqrt(warmup_steps / safe)
        return tf.where(t < warmup_steps, warm, decay)
    return fn


RSQRT_WRONG = {
    "a Python if on the step": (_rsqrt(python_if=True), r"raised .*Hint: .*tf.where"),
    "peak / sqrt(t), without the warmup length (the rate drops at the end of warmup)": (
        _rsqrt(no_w=True), r"peak 0.1, warmup 10, .* differs"),
    "W / t, without the square root": (_rsqrt(no_sqrt=True), r"differs"),
    "integer division of the step in the warmup": (_rsqrt(int_div=True), r"differs"),
    "warmup one step ahead, (t + 1) / W (almost right)": (_rsqrt(shift=1.0), r"differs"),
    "a float64 result": (_rsqrt(float64=True), r"dtype float64, expected float32"),
    "the peak fixed at 0.1": (_rsqrt(fixed_peak=0.1), r"peak 3e-4.* differs"),
    "NumPy's sqrt on a tensor": (_rsqrt(np_sqrt=True), r"raised TypeError: NumPy cannot compute"),
    "section 1's cosine, copied": (_rsqrt(cosine_copy=True), r"differs"),
}


@pytest.mark.parametrize("right", RSQRT_RIGHT)
def test_rsqrt_right_answers_pass(right):
    accepted("06.rsqrt_schedule", RSQRT_RIGHT[right])


@pytest.mark.parametrize("wrong", RSQRT_WRONG)
def test_rsqrt_wrong_answers_are_rejected(wrong):
    rejected("06.rsqrt_schedule", *RSQRT_WRONG[wrong])


def test_rsqrt_tolerance_follows_the_peak():
    # off by 1e-9 everywhere: invisible at peak 0.1, but 3e-6 of the 3e-4 peak
    rejected("06.rsqrt_schedule", lambda *a: rsqrt_right(*a) + (1e-9 if a[1] < 1e-3 else 0.0),
             r"peak 3e-4.* differs")


# -- 06.clip_global -------------------------------------------------------------------------------
def clip_right(grads, max_norm):
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
    scale = tf.minimum(1.0, max_norm / tf.maximum(norm, 1e-30))
    return [g * scale for g in grads], norm


def _per_tensor(grads, max_norm):
    return [tf.clip_by_norm(g, max_norm) for g in grads], tf.linalg.global_norm(grads)


def _always_scale(grads, max_norm):
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in grads]))
    return [g * max_norm / norm for g in grads], norm


def _norm_after(grads, max_norm):
    clipped, _ = clip_right(grads, max_norm)
    return clipped, tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(g)) for g in clipped]))


def _sum_of_norms(grads, max_norm):
    norm = tf.add_n([tf.norm(g) for g in grads])
    return [g * tf.minimum(1.0, max_norm / norm) for g in grads], norm


def _by_value(grads, max_norm):
    return [tf.clip_by_value(g, -max_norm, max_norm) for g in grads], tf.linalg.global_norm(grads)


def _python_norm(grads, max_norm):
    clipped, norm = clip_right(grads, max_norm)
    return clipped, float(norm)


CLIP_WRONG = {
    "clips each tensor on its own (almost right)": (_per_tensor, r"differs"),
    "always multiplies by max_norm / norm": (_always_scale, r"nothing changes.* differs"),
    "returns the norm after clipping (almost right)": (_norm_after, r"it clips.*result\[1\] differs"),
    "the sum of the tensors' norms": (_sum_of_norms, r"differs"),
    "clips by value": (_by_value, r"differs"),
    "the norm as a Python float": (_python_norm, r"result\[1\] has dtype float64, expected float32"),
    "only the clipped list": (lambda g, c: clip_right(g, c)[0], r"should hold 2 items"),
}


def clip_keras_ops(grads, max_norm):            # keras.ops, the factor through tf.where
    norm = keras.ops.sqrt(sum(keras.ops.sum(keras.ops.square(g)) for g in grads))
    factor = keras.ops.where(norm > max_norm, max_norm / norm, 1.0)
    return [g * factor for g in grads], norm


def clip_flat_loop(grads, max_norm):            # one flat vector, a loop, a divide-then-multiply order
    flat = tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)
    norm = tf.norm(flat)
    clipped = []
    for g in grads:
        clipped.append(tf.cond(norm > max_norm, lambda g=g: g / norm * max_norm, lambda g=g: g))
    return clipped, norm


CLIP_RIGHT = {"tf.minimum factor": clip_right, "keras.ops and where": clip_keras_ops,
              "a flat vector, tf.cond per tensor": clip_flat_loop}


@pytest.mark.parametrize("right", CLIP_RIGHT)
def test_clip_right_answers_pass(right):
    accepted("06.clip_global", CLIP_RIGHT[right])


@pytest.mark.parametrize("wrong", CLIP_WRONG)
def test_clip_wrong_answers_are_rejected(wrong):
    rejected("06.clip_global", *CLIP_WRONG[wrong])


def test_all_zero_gradients_catch_a_division_by_zero():
    rejected("06.clip_global", _always_scale, r"all-zero gradients.* NaN")


# -- 06.uncertainty_total -------------------------------------------------------------------------
def total_right(task_losses, log_vars):
    return tf.reduce_sum(tf.exp(-log_vars) * task_losses + log_vars)


TOTAL_WRONG = {
    "no + s term": (lambda losses, s: tf.reduce_sum(tf.exp(-s) * losses), r"differs"),
    "exp(s) instead of exp(-s) (almost right: equal at s = 0)": (
        lambda losses, s: tf.reduce_sum(tf.exp(s) * losses + s), r"s of both signs.* differs"),
    "the mean over tasks": (lambda losses, s: tf.reduce_mean(tf.exp(-s) * losses + s), r"differs"),
    "Kendall's regression form 1/2 exp(-s) L + s/2": (
        lambda losses, s: tf.reduce_sum(0.5 * tf.exp(-s) * losses + 0.5 * s), r"differs"),
    "weights held constant (stop_gradient)": (
        lambda losses, s: tf.reduce_sum(tf.stop_gradient(tf.exp(-s)) * losses + s),
        r"gradient w.r.t. argument 1"),
    "one total per task": (lambda losses, s: tf.exp(-s) * losses + s, r"has shape \[2\], expected \[\]"),
    "through NumPy": (lambda losses, s: tf.constant(np.sum(np.exp(-s.numpy()) * losses.numpy() + s.numpy())),
                      r"not differentiable|raised"),
}


def total_keras_ops(task_losses, log_vars):     # keras.ops, the division written out
    return keras.ops.sum(task_losses / keras.ops.exp(log_vars) + log_vars)


def total_loop(task_losses, log_vars):          # a Python loop over the tasks
    total = tf.constant(0.0)
    for i in range(task_losses.shape[0]):
        total += tf.exp(-log_vars[i]) * task_losses[i] + log_vars[i]
    return total


def total_dot(task_losses, log_vars):           # a dot product, and the s terms summed apart
    return tf.tensordot(tf.exp(-log_vars), task_losses, axes=1) + tf.reduce_sum(log_vars)


TOTAL_RIGHT = {"reduce_sum": total_right, "keras.ops, L / e^s": total_keras_ops,
               "a Python loop": total_loop, "a dot product": total_dot}


@pytest.mark.parametrize("right", TOTAL_RIGHT)
def test_total_right_answers_pass(right):
    accepted("06.uncertainty_total", TOTAL_RIGHT[right])


@pytest.mark.parametrize("wrong", TOTAL_WRONG)
def test_total_wrong_answers_are_rejected(wrong):
    rejected("06.uncertainty_total", *TOTAL_WRONG[wrong])


# -- 06.hardest_mean ------------------------------------------------------------------------------
def hardest_right(per_sample_losses, k):
    return tf.reduce_mean(tf.math.top_k(per_sample_losses, k).values)


def _by_sort(per_sample_losses, k):       # right too: a descending sort, then the first k
    return tf.reduce_mean(tf.sort(per_sample_losses, direction="DESCENDING")[:k])


def _at_or_above_kth(per_sample_losses, k):
    kth = tf.math.top_k(per_sample_losses, k).values[-1]
    chosen = tf.boolean_mask(per_sample_losses, per_sample_losses >= kth)
    return tf.reduce_mean(chosen)


def _over_batch_size(per_sample_losses, k):
    top = tf.math.top_k(per_sample_losses, k).values
    return tf.reduce_sum(top) / tf.cast(tf.size(per_sample_losses), tf.float32)


HARDEST_WRONG = {
    "the k smallest losses":
        (lambda losses, k: -tf.reduce_mean(tf.math.top_k(-losses, k).values), r"differs"),
    "every loss (k ignored)": (lambda losses, k: tf.reduce_mean(losses), r"k = 3.* differs"),
    "the sum of the k largest, not their mean": (
        lambda losses, k: tf.reduce_sum(tf.math.top_k(losses, k).values), r"k = 3.* differs"),
    "divided by the batch size, as sample_weight= with a 0/1 mask does (almost right)": (
        _over_batch_size, r"k = 3.* differs"),
    "every loss at or above the k-th largest: more than k on ties (almost right)": (
        _at_or_above_kth, r"tied at the cut.* differs"),
    "the choice and the values behind stop_gradient": (
        lambda losses, k: tf.reduce_mean(tf.stop_gradient(tf.math.top_k(losses, k).values)),
        r"not differentiable"),
    "the k largest losses, not their mean": (
        lambda losses, k: tf.math.top_k(losses, k).values, r"has shape \[3\], expected \[\]"),
    "the largest loss only (k ignored)": (lambda losses, k: tf.reduce_max(losses), r"k = 3.* differs"),
    "a float64 result": (
        lambda losses, k: tf.cast(hardest_right(losses, k), tf.float64), r"dtype float64, expected float32"),
    "through NumPy": (
        lambda losses, k: tf.constant(np.sort(losses.numpy())[-k:].mean()), r"raised"),
}


def test_hardest_reference_passes():
    assert check("06.hardest_mean", hardest_right).ok


def _gather_top_indices(per_sample_losses, k):   # section 5's own way: indices, then a gather
    chosen = tf.math.top_k(tf.stop_gradient(per_sample_losses), k).indices
    return tf.reduce_mean(tf.gather(per_sample_losses, chosen))   # its gradient is IndexedSlices


def _keras_ops(per_sample_losses, k):
    return keras.ops.mean(keras.ops.top_k(per_sample_losses, k)[0])


HARDEST_RIGHT = {"a descending sort, then the first k": _by_sort,
                 "section 5's way: top-k indices, then tf.gather": _gather_top_indices,
                 "keras.ops.top_k": _keras_ops}


@pytest.mark.parametrize("right", HARDEST_RIGHT)
def test_hardest_right_answers_in_other_styles_pass(right):
    report = check("06.hardest_mean", HARDEST_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", HARDEST_WRONG)
def test_hardest_wrong_answers_are_rejected(wrong):
    rejected("06.hardest_mean", *HARDEST_WRONG[wrong])
