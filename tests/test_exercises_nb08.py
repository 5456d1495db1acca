"""Notebook 08's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected


# -- 08.gram --------------------------------------------------------------------------------------
def gram_right(features):
    shape = tf.shape(features)
    flat = tf.reshape(features, (shape[0], shape[1] * shape[2], shape[3]))
    return tf.matmul(flat, flat, transpose_a=True) / tf.cast(shape[1] * shape[2], features.dtype)


def gram_static(features):            # also right: static shapes, einsum-free
    b, h, w, c = features.shape
    flat = tf.reshape(features, (-1, h * w, c))
    return tf.matmul(flat, flat, transpose_a=True) / float(h * w)


def _gram(divide="hw", transpose="a", merge_batch=False, numpy=False):
    def gram_by_matmul(features):
        b, h, w, c = features.shape
        flat = tf.reshape(features, (-1, c) if merge_batch else (b, h * w, c))
        g = (tf.matmul(flat, flat, transpose_a=True) if transpose == "a"
             else tf.matmul(flat, flat, transpose_b=True))
        if merge_batch:
            g = tf.tile(g[None], [b, 1, 1])
        g = g / {"hw": h * w, "none": 1, "hwc": h * w * c, "hh": h * h}[divide]
        return tf.constant(g.numpy()) if numpy else g
    return gram_by_matmul


GRAM_WRONG = {
    "no division by H*W": (_gram(divide="none"), r"did not divide by the number of positions"),
    "divides by H*W*C (almost right: another common normalisation)":
        (_gram(divide="hwc"), r"divided by H\*W\*C"),
    "divides by H*H (almost right: square maps agree)": (_gram(divide="hh"), r"divided by H\*H"),
    "transpose_b: positions x positions": (_gram(transpose="b"), r"positions x positions"),
    "one Gram matrix for the whole batch": (_gram(merge_batch=True), r"each image its own.*differs"),
    "a NumPy round trip": (_gram(numpy=True), r"not differentiable"),
}


def gram_keras_ops(features):          # keras.ops: transpose, then matmul, the mean over positions
    b, h, w, c = keras.ops.shape(features)
    flat = keras.ops.reshape(features, (b, h * w, c))
    return keras.ops.matmul(keras.ops.transpose(flat, (0, 2, 1)), flat) / (h * w)


def gram_loop(features):               # one image at a time, the division before the product
    out = []
    for i in range(features.shape[0]):
        flat = tf.reshape(features[i], (-1, features.shape[-1]))
        out.append(tf.matmul(flat / flat.shape[0], flat, transpose_a=True))
    return tf.stack(out)


def gram_transpose_b(features):        # (batch, C, H*W) maps times their transpose
    shape = tf.shape(features)
    cols = tf.transpose(tf.reshape(features, (shape[0], -1, shape[3])), [0, 2, 1])
    return tf.matmul(cols, cols, transpose_b=True) / tf.cast(tf.shape(cols)[2], features.dtype)


GRAM_RIGHT = {"the solution cell": gram_right, "static shapes": gram_static,
              "keras.ops": gram_keras_ops, "a loop over images": gram_loop,
              "(C, H*W) times its transpose": gram_transpose_b}


@pytest.mark.parametrize("right", GRAM_RIGHT)
def test_gram_right_answers_pass(right):
    accepted("08.gram", GRAM_RIGHT[right])


@pytest.mark.parametrize("wrong", GRAM_WRONG)
def test_gram_wrong_answers_are_rejected(wrong):
    rejected("08.gram", *GRAM_WRONG[wrong])


# -- 08.total_variation ---------------------------------------------------------------------------
def tv_right(images):
    vertical = tf.abs(images[:, 1:, :, :] - images[:, :-1, :, :])
    horizontal = tf.abs(images[:, :, 1:, :] - images[:, :, :-1, :])
    return tf.reduce_sum(vertical, axis=[1, 2, 3]) + tf.reduce_sum(horizontal, axis=[1, 2, 3])


def _dv(x):
    return x[:, 1:, :, :] - x[:, :-1, :, :]


def _dh(x):
    return x[:, :, 1:, :] - x[:, :, :-1, :]


TV_WRONG = {
    "sqrt(d ** 2) instead of |d| (almost right: NaN gradient at equal pixels)":
        (lambda x: tf.reduce_sum(tf.sqrt(tf.square(_dv(x))), [1, 2, 3])
         + tf.reduce_sum(tf.sqrt(tf.square(_dh(x))), [1, 2, 3]), r"NaN where neighbouring pixels are equal"),
    "the mean, not the sum": (lambda x: tf.reduce_mean(tf.abs(_dv(x)), [1, 2, 3])
                              + tf.reduce_mean(tf.abs(_dh(x)), [1, 2, 3]), r"the result differs"),
    "vertical differences only": (lambda x: tf.reduce_sum(tf.abs(_dv(x)), [1, 2, 3]),
                                  r"the result differs"),
    "squared differences": (lambda x: tf.reduce_sum(tf.square(_dv(x)), [1, 2, 3])
                            + tf.reduce_sum(tf.square(_dh(x)), [1, 2, 3]), r"the result differs"),
    "one number for the whole batch": (lambda x: tf.reduce_sum(tf.abs(_dv(x)))
                                       + tf.reduce_sum(tf.abs(_dh(x))),
                                       r"has shape \[\], expected \[3\]"),
    "per channel, not summed over channels": (lambda x: tf.reduce_sum(tf.abs(_dv(x)), [1, 2])
                                              + tf.reduce_sum(tf.abs(_dh(x)), [1, 2]),
                                              r"has shape \[3, 3\], expected \[3\]"),
    "wraps around the edges with tf.roll (almost right)":
        (lambda x: tf.reduce_sum(tf.abs(x - tf.roll(x, 1, axis=1)), [1, 2, 3])
         + tf.reduce_sum(tf.abs(x - tf.roll(x, 1, axis=2)), [1, 2, 3]), r"the result differs"),
    "a NumPy round trip": (lambda x: tf.constant(tv_right(x).numpy()), r"not differentiable"),
}


def tv_keras_ops(images):              # keras.ops.diff along each axis, summed in one go
    ops = keras.ops
    return (ops.sum(ops.abs(ops.diff(images, axis=1)), axis=(1, 2, 3))
            + ops.sum(ops.abs(ops.diff(images, axis=2)), axis=(1, 2, 3)))


def tv_loop(images):                   # a Python loop over rows and columns
    total = tf.zeros([tf.shape(images)[0]])
    for i in range(images.shape[1] - 1):
        total += tf.reduce_sum(tf.abs(images[:, i + 1] - images[:, i]), axis=[1, 2])
    for j in range(images.shape[2] - 1):
        total += tf.reduce_sum(tf.abs(images[:, :, j + 1] - images[:, :, j]), axis=[1, 2])
    return total


def tv_flatten_first(images):          # the two difference maps flattened and concatenated
    b = tf.shape(images)[0]
    dv = tf.reshape(images[:, :-1] - images[:, 1:], (b, -1))
    dh = tf.reshape(images[:, :, :-1] - images[:, :, 1:], (b, -1))
    return tf.reduce_sum(tf.abs(tf.concat([dv, dh], axis=1)), axis=1)


TV_RIGHT = {"the solution cell": tv_right, "keras.ops.diff": tv_keras_ops, "a Python loop": tv_loop,
            "flattened and concatenated": tv_flatten_first}


@pytest.mark.parametrize("right", TV_RIGHT)
def test_tv_right_answers_pass(right):
    accepted("08.total_variation", TV_RIGHT[right])


@pytest.mark.parametrize("wrong", TV_WRONG)
def test_tv_wrong_answers_are_rejected(wrong):
    rejected("08.total_variation", *TV_WRONG[wrong])


def test_stripes_case_has_the_total_variation_worked_out_by_hand():
    stripes = np.tile(np.array([0.0, 1.0, 0.25, 0.25, 0.75], np.float32)[None, :, None], (4, 1, 1))
    assert float(tf.image.total_variation(tf.constant(stripes[None]))[0]) == pytest.approx(4 * 2.25)


# -- 08.masked_gram -------------------------------------------------------------------------------
def masked_gram_right(features, mask):
    weighted = features * mask[..., None]
    total = tf.reduce_sum(mask, axis=[1, 2])[:, None, None]
    return tf.einsum("bijc,bijd->bcd", weighted, features) / total


def _masked_matmul(features, mask):    # reshape and matmul, the mask normalised first
    shape = tf.shape(features)
    flat = tf.reshape(features, (shape[0], -1, shape[3]))
    m = tf.reshape(mask, (shape[0], -1, 1))
    weights = m / tf.reduce_sum(m, axis=1, keepdims=True)
    return tf.matmul(flat * weights, flat, transpose_a=True)


def _masked_sqrt(features, mask):      # sqrt(m) on each side: the same weights, m per position
    f = features * tf.sqrt(mask)[..., None]
    return tf.einsum("bijc,bijd->bcd", f, f) / tf.reduce_sum(mask, axis=[1, 2])[:, None, None]


def _masked_keras_ops_loop(features, mask):   # keras.ops, one image at a time
    out = []
    for i in range(features.shape[0]):
        f = keras.ops.reshape(features[i], (-1, features.shape[-1]))
        m = keras.ops.reshape(mask[i], (-1, 1))
        out.append(keras.ops.matmul(keras.ops.transpose(f * m), f) / keras.ops.sum(m))
    return keras.ops.stack(out)


MASKED_RIGHT = {"the solution cell": masked_gram_right, "matmul, normalised weights": _masked_matmul,
                "sqrt(mask) on each side": _masked_sqrt, "keras.ops, a loop": _masked_keras_ops_loop}


def _masked(weight="once", divide="mask", over="image"):
    """A masked Gram matrix, right by default; each argument plants one mistake."""
    def masked_gram(features, mask):
        m = mask[..., None]
        left = features * m if weight in ("once", "twice") else features
        right = features * m if weight == "twice" else features
        g = tf.einsum("bijc,bijd->bcd", left, right)
        if divide == "hw":
            return g / float(features.shape[1] * features.shape[2])
        if divide == "broadcast":
            m = tf.broadcast_to(m, tf.shape(features))
        total = tf.reduce_sum(m) if over == "batch" else tf.reduce_sum(m, axis=list(range(1, m.ndim)))
        return g / (total if over == "batch" else total[:, None, None])
    return masked_gram


MASKED_WRONG = {
    "the mask ignored (gram_matrix copied)": (_masked(weight="none", divide="hw"),
                                             r"does not depend on the mask"),
    "divides by H*W (almost right: right for a mask of ones)": (_masked(divide="hw"),
                                                               r"divided by the number of positions"),
    "the mask on both sides (almost right: right for 0/1 masks)": (_masked(weight="twice"),
                                                                   r"weighted both sides"),
    "one total weight for the batch (almost right: right for one image)": (
        _masked(over="batch"), r"one total weight for the whole batch"),
    "the mask's sum broadcast over channels": (_masked(divide="broadcast"), r"C times"),
    "a hard threshold of the mask (almost right: right for 0/1 masks)": (
        lambda f, m: masked_gram_right(f, tf.cast(m > 0.5, f.dtype)), r"soft masks.*differs"),
    "a NumPy round trip": (lambda f, m: tf.constant(masked_gram_right(f, m).numpy()),
                           r"not differentiable"),
}


@pytest.mark.parametrize("right", MASKED_RIGHT)
def test_masked_gram_right_answers_pass(right):
    accepted("08.masked_gram", MASKED_RIGHT[right])


@pytest.mark.parametrize("wrong", MASKED_WRONG)
def test_masked_gram_wrong_answers_are_rejected(wrong):
    rejected("08.masked_gram", *MASKED_WRONG[wrong])
