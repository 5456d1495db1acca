"""Notebook 08's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected


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


@pytest.mark.parametrize("right", [gram_right, gram_static])
def test_gram_right_answers_pass(right):
    report = check("08.gram", right)
    assert report.ok, str(report)


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
    "one number for the whole batch": (lambda x: tf.reduce_sum(tf.abs(_dv(x))) + tf.reduce_sum(tf.abs(_dh(x))),
                                       r"has shape \[\], expected \[3\]"),
    "per channel, not summed over channels": (lambda x: tf.reduce_sum(tf.abs(_dv(x)), [1, 2])
                                              + tf.reduce_sum(tf.abs(_dh(x)), [1, 2]),
                                              r"has shape \[3, 3\], expected \[3\]"),
    "wraps around the edges with tf.roll (almost right)":
        (lambda x: tf.reduce_sum(tf.abs(x - tf.roll(x, 1, axis=1)), [1, 2, 3])
         + tf.reduce_sum(tf.abs(x - tf.roll(x, 1, axis=2)), [1, 2, 3]), r"the result differs"),
    "a NumPy round trip": (lambda x: tf.constant(tv_right(x).numpy()), r"not differentiable"),
}


def test_tv_reference_passes():
    report = check("08.total_variation", tv_right)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", TV_WRONG)
def test_tv_wrong_answers_are_rejected(wrong):
    rejected("08.total_variation", *TV_WRONG[wrong])


def test_stripes_case_has_the_total_variation_worked_out_by_hand():
    stripes = np.tile(np.array([0.0, 1.0, 0.25, 0.25, 0.75], np.float32)[None, :, None], (4, 1, 1))
    assert float(tf.image.total_variation(tf.constant(stripes[None]))[0]) == pytest.approx(4 * 2.25)
