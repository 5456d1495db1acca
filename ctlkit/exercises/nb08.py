"""Notebook 08, style transfer: the Gram matrix by matmul, total variation by slicing, and a Gram
matrix over a region of the image (a weighted mask), which the notebook does not show."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function
from ._common import trim


# -- 08.gram --------------------------------------------------------------------------------------
def _reference_gram(features):
    """(batch, H, W, C) -> (batch, C, C), averaged over the H*W positions (notebook 08's gram_matrix)."""
    positions = tf.cast(tf.shape(features)[1] * tf.shape(features)[2], features.dtype)
    return tf.einsum("bijc,bijd->bcd", features, features) / positions


def gram(fn):
    rng = np.random.default_rng(80)
    maps = lambda *shape, scale=1.0: tf.constant(rng.normal(size=shape) * scale, tf.float32)  # noqa: E731
    relu = lambda t: tf.nn.relu(t)  # noqa: E731
    cases = {
        "2 maps of 5x7 positions (H != W), 4 channels": (maps(2, 5, 7, 4),),
        "3 ReLU maps of 6x6, 8 channels (each image its own Gram matrix)": (relu(maps(3, 6, 6, 8)),),
        "one map of 4x9 positions, 16 channels": (maps(1, 4, 9, 16),),
        "2 maps whose scales differ 1000x (tiny and large entries)":
            (tf.concat([maps(1, 3, 5, 6, scale=1e-3), maps(1, 3, 5, 6, scale=1.0)], 0),),
        "2 maps of a single position (1x1), 3 channels": (maps(2, 1, 1, 3),),
    }
    report = check_function(fn, _reference_gram, cases, name="gram_by_matmul", differentiable=True,
                            rtol=1e-4, atol=1e-9)
    problems = trim(report.problems)
    if problems and not any("not written yet" in p for p in problems):
        problems[:0] = _gram_hints(fn, maps(1, 5, 7, 4))
    return Report(name=report.name, problems=problems, cases=report.cases)


def _gram_hints(fn, f):
    """Name the usual mistakes by the ratio of the answer to the reference."""
    try:
        got = np.asarray(fn(f), np.float64)
    except Exception:  # the case messages report errors
        return []
    want = _reference_gram(f).numpy().astype(np.float64)
    if got.shape != want.shape:
        if got.shape[-2:] == (35, 35):
            return ["your result is (positions x positions): the Gram matrix is channels x channels; "
                    "multiply the transposed (H*W, C) map by the map (transpose_a=True)."]
        return []
    ratio = float(np.sum(got * want) / np.sum(want * want))
    for factor, hint in ((35, "you did not divide by the number of positions H*W"),
                         (1 / 4, "you divided by H*W*C: divide by the number of positions H*W only"),
                         (7 / 5, "you divided by H*H: the number of positions is H*W"),
                         (5 / 7, "you divided by W*W: the number of positions is H*W")):
        if abs(ratio - factor) < 1e-3 * factor and np.allclose(got, factor * want, rtol=1e-3, atol=1e-6):
            return [hint + "."]
    return []


# -- 08.total_variation ---------------------------------------------------------------------------
def total_variation(fn):
    rng = np.random.default_rng(81)
    uniform = lambda *shape: tf.constant(rng.uniform(size=shape), tf.float32)  # noqa: E731
    stripes = np.tile(np.array([0.0, 1.0, 0.25, 0.25, 0.75], np.float32)[None, :, None], (4, 1, 1))
    flat_patches = np.repeat(np.repeat(rng.uniform(size=(2, 3, 2, 3)), 2, axis=1), 3, axis=2)
    cases = {
        "3 random images of 6x5 pixels (H != W), 3 channels": (uniform(3, 6, 5, 3),),
        "one grey image of 4x7, 1 channel": (uniform(1, 4, 7, 1),),
        "vertical stripes: equal vertical neighbours, some equal horizontal ones":
            (tf.constant(stripes[None]),),
        "flat 2x3 patches in 2 images, 3 channels (many equal neighbours)":
            (tf.constant(flat_patches, tf.float32),),
        "a constant image (every neighbour equal: TV 0)": (tf.fill([1, 5, 5, 2], 0.5),),
        "2 images, one 1000x brighter (the sum scales with the pixels)":
            (tf.concat([uniform(1, 4, 4, 3), 1000.0 * uniform(1, 4, 4, 3)], 0),),
    }
    report = check_function(fn, tf.image.total_variation, cases, name="total_variation",
                            differentiable=True, rtol=1e-5, atol=1e-6)
    problems = trim(report.problems)
    if problems and any("gradient" in p and "NaN" in p for p in problems):
        problems.insert(0, "your gradient is NaN where neighbouring pixels are equal: "
                           "sqrt(d ** 2) has no gradient at d = 0; use tf.abs(d).")
    return Report(name=report.name, problems=problems, cases=report.cases)


# -- 08.masked_gram -------------------------------------------------------------------------------
def _reference_masked_gram(features, mask):
    """(batch, H, W, C), (batch, H, W) -> (batch, C, C): the Gram matrix averaged over the
    positions with weights ``mask``, divided by each image's total weight."""
    weighted = features * mask[..., None]
    total = tf.reduce_sum(mask, axis=[1, 2])[:, None, None]
    return tf.einsum("bijc,bijd->bcd", weighted, features) / total


def _mask_slips():
    """(sentence, wrong formula): the usual slips, named when an answer matches one."""
    gram_of = lambda f, m: tf.einsum("bijc,bijd->bcd", f * m[..., None], f)  # noqa: E731
    hw = lambda f: tf.cast(tf.shape(f)[1] * tf.shape(f)[2], f.dtype)        # noqa: E731
    return [
        ("your result does not depend on the mask: weight each position's outer product "
         "F_ij F_ij^T by mask[b, i, j] before summing",
         lambda f, m: _reference_gram(f)),
        ("you divided by the number of positions H*W: a masked Gram matrix averages over the "
         "masked positions only, so divide by each image's total weight, the sum of its mask",
         lambda f, m: gram_of(f, m) / hw(f)),
        ("you weighted both sides by the mask (mask * F against mask * F): a position then counts "
         "mask**2, which only a 0/1 mask hides; weight the product once",
         lambda f, m: tf.einsum("bijc,bijd->bcd", f * m[..., None], f * m[..., None])
         / tf.reduce_sum(m, axis=[1, 2])[:, None, None]),
        ("you divided by one total weight for the whole batch: each image has its own mask, so "
         "divide each image's matrix by the sum of its own mask (reduce over axes 1 and 2)",
         lambda f, m: gram_of(f, m) / tf.reduce_sum(m)),
        ("you divided by the mask's sum after broadcasting it over the channels: that is C times "
         "each image's total weight; sum the (batch, H, W) mask itself",
         lambda f, m: gram_of(f, m) / (tf.reduce_sum(m, axis=[1, 2])[:, None, None]
                                      * tf.cast(tf.shape(f)[3], f.dtype))),
    ]


def masked_gram(fn):
    rng = np.random.default_rng(82)
    maps = lambda *shape: tf.constant(rng.normal(size=shape), tf.float32)      # noqa: E731
    half = np.zeros((2, 5, 7), np.float32)
    half[0, :, :3], half[1, 2:, :] = 1.0, 1.0                                  # a different region each
    one = np.zeros((2, 4, 4), np.float32)
    one[0, 1, 2], one[1, 3, 0] = 1.0, 1.0                                      # a single position each
    masks = [tf.constant(half), tf.constant(rng.uniform(0.05, 1.0, (3, 6, 6)), tf.float32),
             tf.ones([1, 4, 9]), tf.constant(one),
             tf.constant(np.where(rng.uniform(size=(2, 3, 5)) < 0.5, 0.25, 0.75), tf.float32)]
    cases = {
        "0/1 masks, a different region in each of 2 images (5x7, 4 channels)": (maps(2, 5, 7, 4), 0),
        "soft masks in (0, 1) (3 images of 6x6, 8 channels)": (tf.nn.relu(maps(3, 6, 6, 8)), 1),
        "a mask of ones (then it is gram_matrix), 4x9, 16 channels": (maps(1, 4, 9, 16), 2),
        "a mask that keeps a single position of each image": (maps(2, 4, 4, 3), 3),
        "masks of 0.25 and 0.75 (the same region weighted 3:1)": (maps(2, 3, 5, 6), 4),
    }
    # the mask is looked up by its number: gradients are compared for the features only
    mine = lambda f, k: fn(f, masks[k])                                        # noqa: E731
    theirs = lambda f, k: _reference_masked_gram(f, masks[k])                  # noqa: E731
    report = check_function(mine, theirs, cases, name="masked_gram", differentiable=True,
                            rtol=1e-4, atol=1e-7)
    problems = trim(report.problems)
    if problems and not any("not written yet" in p for p in problems):
        for sentence, slip in _mask_slips():
            try:
                same = all(np.allclose(fn(f, masks[k]), slip(f, masks[k]), rtol=1e-4, atol=1e-6)
                           for f, k in cases.values())
            except Exception:  # the case messages report errors
                same = False
            if same:
                problems.insert(0, sentence + ".")
                break
    return Report(name=report.name, problems=problems, cases=report.cases)


EXERCISES = {"gram": gram, "total_variation": total_variation, "masked_gram": masked_gram}
