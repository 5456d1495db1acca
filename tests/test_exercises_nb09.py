"""Notebook 09's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import pytest
import tensorflow as tf

from ctlkit.exercises import check
from exercise_helpers import rejected

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)   # notebook 09's globals


def project(x_adv, x, eps):
    x_adv = tf.clip_by_value(x_adv, x - eps, x + eps)
    return tf.clip_by_value(x_adv, 0.0, 1.0)


def _grad(model, x, y):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = loss_fn(y, model(x, training=False))
    return tape.gradient(loss, x)


# -- 09.fgsm_rs -----------------------------------------------------------------------------------
def fgsm_rs_right(model, x, y, eps, alpha, start):
    x_adv = project(x + start, x, eps)
    with tf.GradientTape() as tape:
        tape.watch(x_adv)
        loss = loss_fn(y, model(x_adv, training=False))
    x_adv = x_adv + alpha * tf.sign(tape.gradient(loss, x_adv))
    return project(x_adv, x, eps)


def _fgsm_rs(start="projected", step="alpha", direction=1.0, ball=True, pixels=True, sign=True):
    """FGSM-RS, right by default; each argument plants one mistake."""
    def fgsm_rs(model, x, y, eps, alpha, start_):
        x_adv = {"projected": project(x + start_, x, eps), "raw": x + start_, "none": x}[start]
        g = _grad(model, x_adv, y)
        x_adv = x_adv + direction * (alpha if step == "alpha" else eps) * (tf.sign(g) if sign else g)
        if ball:
            x_adv = tf.clip_by_value(x_adv, x - eps, x + eps)
        if pixels:
            x_adv = tf.clip_by_value(x_adv, 0.0, 1.0)
        return x_adv
    return fgsm_rs


FGSM_RS_WRONG = {
    "ignores the random start (plain FGSM with alpha)": (_fgsm_rs(start="none"), r"random start: the result differs"),
    "does not project the start (almost right: the gradient is taken outside [0, 1])":
        (_fgsm_rs(start="raw"), r"corner \+eps.*the result differs"),
    "no projection onto the eps-ball": (_fgsm_rs(ball=False), r"moved by .* > eps.*eps-ball"),
    "no clip to [0, 1]": (_fgsm_rs(pixels=False), r"outside \[0, 1\]"),
    "a step of eps, not alpha": (_fgsm_rs(step="eps"), r"alpha 0\.5 eps.*the result differs"),
    "descends the loss": (_fgsm_rs(direction=-1.0), r"the result differs"),
    "the raw gradient, not its sign": (_fgsm_rs(sign=False), r"the result differs"),
    "returns the perturbation, not the image":
        (lambda m, x, y, eps, alpha, s: fgsm_rs_right(m, x, y, eps, alpha, s) - x, r"the result differs"),
}


def test_fgsm_rs_reference_passes():
    report = check("09.fgsm_rs", fgsm_rs_right)
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", FGSM_RS_WRONG)
def test_fgsm_rs_wrong_answers_are_rejected(wrong):
    rejected("09.fgsm_rs", *FGSM_RS_WRONG[wrong])


# -- 09.targeted_pgd_step -------------------------------------------------------------------------
def _targeted(direction=-1.0, around="x", pixels=True, at="x_adv", step="alpha", sign=True):
    """A targeted PGD step, right by default; each argument plants one mistake."""
    def targeted_pgd_step(model, x_adv, x, target, eps, alpha):
        g = _grad(model, x_adv if at == "x_adv" else x, target)
        base = x_adv if at == "x_adv" else x
        out = base + direction * (alpha if step == "alpha" else eps) * (tf.sign(g) if sign else g)
        centre = x if around == "x" else x_adv
        out = tf.clip_by_value(out, centre - eps, centre + eps)
        return tf.clip_by_value(out, 0.0, 1.0) if pixels else out
    return targeted_pgd_step


TARGETED_WRONG = {
    "climbs the target's loss": (_targeted(direction=1.0), r"climbs the target's loss"),
    "projects around x_adv, not x (almost right: the first step from x agrees)":
        (_targeted(around="x_adv"), r"moved by .* > eps"),
    "no clip to [0, 1]": (_targeted(pixels=False), r"outside \[0, 1\]"),
    "steps from x, not from x_adv": (_targeted(at="x"), r"random point.*the result differs"),
    "a step of eps, not alpha": (_targeted(step="eps"), r"alpha 0\.05.*the result differs"),
    "the raw gradient, not its sign": (_targeted(sign=False), r"the result differs"),
}


def test_targeted_reference_passes():
    report = check("09.targeted_pgd_step", _targeted())
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", TARGETED_WRONG)
def test_targeted_wrong_answers_are_rejected(wrong):
    rejected("09.targeted_pgd_step", *TARGETED_WRONG[wrong])
