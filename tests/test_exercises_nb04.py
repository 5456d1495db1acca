"""Notebook 04's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit.exercises import check, nb04
from exercise_helpers import rejected

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- 04.loss_scale_rule ---------------------------------------------------------------------------
def rule_right(scale, good_steps, grads_finite, growth_steps):
    if not grads_finite:
        return scale / 2, 0
    if good_steps + 1 == growth_steps:
        return scale * 2, 0
    return scale, good_steps + 1


def _rule(off_by_one=False, keep_count=False, no_reset=False, float_count=False, tensor=False,
          halve_by=2.0):
    def fn(scale, good_steps, grads_finite, growth_steps):
        if not grads_finite:
            out = scale / halve_by, (good_steps if keep_count else 0)
        elif (good_steps == growth_steps) if off_by_one else (good_steps + 1 == growth_steps):
            out = scale * 2, (good_steps + 1 if no_reset else 0)
        else:
            out = scale, good_steps + 1
        if float_count:
            out = out[0], float(out[1])
        if tensor:
            out = tf.constant(out[0], tf.float32), out[1]
        return out
    return fn


RULE_WRONG = {
    "doubles one finite step too late (almost right)": (_rule(off_by_one=True), r"differs"),
    "keeps the count on a non-finite step": (_rule(keep_count=True), r"non-finite .* differs"),
    "does not restart the count after doubling": (_rule(no_reset=True), r"doubles.* differs"),
    "the count as a float": (_rule(float_count=True), r"dtype float64, expected int64"),
    "the scale as a float32 tensor": (_rule(tensor=True), r"dtype float32, expected float64"),
    "divides by 4 on overflow": (_rule(halve_by=4.0), r"differs"),
}


def test_rule_reference_passes():
    assert check("04.loss_scale_rule", rule_right).ok


@pytest.mark.parametrize("wrong", RULE_WRONG)
def test_rule_wrong_answers_are_rejected(wrong):
    rejected("04.loss_scale_rule", *RULE_WRONG[wrong])


def test_rule_replay_reports_the_first_step_that_differs():
    flags, used = nb04._recorded_run()
    wrong = list(used)
    wrong[5] *= 2                                 # a run the rule cannot have produced
    rejected("04.loss_scale_rule", rule_right, r"replaying the run of section 7.* at step 6 ",
              applied=flags, scales=wrong, growth=3)


def test_rule_replays_the_notebook_run():
    flags, used = nb04._recorded_run(pattern="FFFFNFFFFFFNNF", growth=2)
    assert check("04.loss_scale_rule", rule_right, applied=np.array(flags), scales=np.array(used),
                 growth=2).ok


def test_recorded_run_is_a_real_loss_scale_optimizer():
    flags, used = nb04._recorded_run()
    assert used[0] == 2.0 ** 15 and max(used) > 2.0 ** 15 and min(used) < 2.0 ** 15
    assert not all(flags)


# -- 04.scaled_step -------------------------------------------------------------------------------
def _make(scale="api", returns="loss", unscale_twice=False, inner=False, compiled=True):
    """A scaled-step factory, right by default; each argument plants one mistake."""
    def factory(model, optimizer):
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                if scale == "api":
                    scaled = optimizer.scale_loss(loss)
                elif scale == "fixed":
                    scaled = loss * 2.0 ** 15
                else:
                    scaled = loss
            grads = tape.gradient(scaled, model.trainable_variables)
            if unscale_twice or inner:
                grads = [g / optimizer.dynamic_scale for g in grads]
            target = optimizer.inner_optimizer if inner else optimizer
            target.apply_gradients(zip(grads, model.trainable_variables))
            return loss if returns == "loss" else scaled
        return tf.function(step) if compiled else step
    return factory


SCALED_WRONG = {
    "policy + float32 output only: no loss scaling": (_make(scale=None), r"good batch .*weight 0 .* differs"),
    "a fixed 2**15 instead of scale_loss (almost right)": (
        _make(scale="fixed"), r"after the overflow .* differs"),
    "returns the scaled loss": (_make(returns="scaled"), r"value your step returned differs"),
    "divides the gradients by the scale itself as well": (_make(unscale_twice=True), r"differs"),
    "unscales by hand and applies with the inner optimizer (no skip, no scale update)": (
        _make(inner=True), r"overflow.*(differs|NaN)"),
    "not compiled": (_make(compiled=False), r"@tf.function"),
}


def test_scaled_step_reference_passes():
    assert check("04.scaled_step", _make()).ok


def test_scaled_step_batches_do_what_their_labels_say():
    model, optimizer = nb04._build()
    step = nb04._reference_scaled_step(model, optimizer)
    seen = []
    for seed, scale in ((40, 1.0), (41, 1e4), (42, 1.0), (43, 1.0), (44, 1.0)):
        step(*nb04._batch(seed, scale))
        seen.append((float(optimizer.dynamic_scale), int(optimizer.iterations)))
    assert seen == [(2.0 ** 15, 1), (2.0 ** 14, 1), (2.0 ** 14, 2), (2.0 ** 15, 3), (2.0 ** 15, 4)]
    assert keras.mixed_precision.dtype_policy().name == "float32"


@pytest.mark.parametrize("wrong", SCALED_WRONG)
def test_scaled_step_wrong_answers_are_rejected(wrong):
    rejected("04.scaled_step", *SCALED_WRONG[wrong])
