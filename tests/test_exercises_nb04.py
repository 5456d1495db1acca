"""Notebook 04's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

from ctlkit.exercises import check, nb04

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


def rule_counting(scale, good_steps, grads_finite, growth_steps):     # one expression per output
    if grads_finite:
        done = (good_steps + 1) % growth_steps == 0
        return (scale * 2.0 if done else scale), (0 if done else good_steps + 1)
    return scale * 0.5, 0


def rule_ldexp(scale, good_steps, grads_finite, growth_steps):        # powers of two, via math
    import math
    count = good_steps + 1 if grads_finite else 0
    if count >= growth_steps:
        return math.ldexp(scale, 1), 0
    return (scale if grads_finite else math.ldexp(scale, -1)), count


RULE_RIGHT = {"the reference": rule_right, "one expression per output": rule_counting,
              "math.ldexp and a running count": rule_ldexp}


@pytest.mark.parametrize("right", RULE_RIGHT)
def test_rule_right_answers_pass(right):
    accepted("04.loss_scale_rule", RULE_RIGHT[right])


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


# -- 04.clipped_scaled_step -----------------------------------------------------------------------
def _make(clip_how="per tensor", scale="api", returns="loss", apply="apply_gradients", compiled=True):
    """A clipped loss-scaled step factory, right by default; each argument a style or a mistake."""
    def factory(model, optimizer, clip):
        if clip_how == "inner clipnorm":                # the inner optimizer clips, after unscaling
            optimizer.inner_optimizer.clipnorm = clip
        fixed = float(optimizer.dynamic_scale.numpy())

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                scaled = optimizer.scale_loss(loss) if scale == "api" else loss
            grads = tape.gradient(scaled, model.trainable_variables)
            s = optimizer.dynamic_scale
            if clip_how == "per tensor":
                grads = [tf.clip_by_norm(g, clip * s) for g in grads]
            elif clip_how == "unscale, clip, rescale":
                grads = [tf.clip_by_norm(g / s, clip) * s for g in grads]
            elif clip_how == "keras.ops":
                grads = [g * keras.ops.minimum(1.0, clip * s / keras.ops.norm(g)) for g in grads]
            elif clip_how == "global (section 5)":
                grads, _ = tf.clip_by_global_norm(grads, clip * s)
            elif clip_how == "plain limit":
                grads = [tf.clip_by_norm(g, clip) for g in grads]
            elif clip_how == "fixed 2**15":
                grads = [tf.clip_by_norm(g, clip * 2.0 ** 15) for g in grads]
            elif clip_how == "scale read in the factory":
                grads = [tf.clip_by_norm(g, clip * fixed) for g in grads]
            elif clip_how == "unscaled twice":
                grads = [tf.clip_by_norm(g / s, clip) for g in grads]
            elif clip_how == "by value":
                grads = [tf.clip_by_value(g, -clip * s, clip * s) for g in grads]
            elif clip_how == "never scaled":
                grads = [tf.clip_by_norm(g, clip) for g in grads]
            elif clip_how == "inner optimizer":
                grads = [tf.clip_by_norm(g / s, clip) for g in grads]
            elif clip_how == "after apply":             # clips nothing that is applied
                pass
            target = optimizer.inner_optimizer if clip_how == "inner optimizer" else optimizer
            if apply == "apply":
                target.apply(grads, model.trainable_variables)
            else:
                target.apply_gradients(zip(grads, model.trainable_variables))
            return loss if returns == "loss" else scaled
        return tf.function(step) if compiled else step
    return factory


CLIPPED_RIGHT = {
    "tf.clip_by_norm at clip * dynamic_scale": _make(),
    "unscale, clip at clip, scale back": _make(clip_how="unscale, clip, rescale"),
    "keras.ops: g * min(1, limit / ||g||)": _make(clip_how="keras.ops"),
    "clipnorm set on the inner optimizer": _make(clip_how="inner clipnorm"),
    "optimizer.apply(grads, variables)": _make(apply="apply"),
}

CLIPPED_WRONG = {
    "section 5's global clip (copies the cell above)": (
        _make(clip_how="global (section 5)"), r"global norm .* its own norm"),
    "clips the scaled gradients at the plain limit": (
        _make(clip_how="plain limit"), r"clips the \*scaled\* gradients at `clip`"),
    "a limit fixed at clip * 2**15 (almost right: fails after the overflow)": (
        _make(clip_how="fixed 2**15"), r"fixed when the step was made"),
    "the scale read once, in the factory (almost right)": (
        _make(clip_how="scale read in the factory"), r"fixed when the step was made"),
    "unscaled twice: divides by the scale, then apply_gradients divides again": (
        _make(clip_how="unscaled twice"), r"unscaled twice"),
    "never scaled: gradients of the plain loss": (
        _make(clip_how="never scaled", scale=None), r"never scales the loss"),
    "unscales by hand and applies with the inner optimizer (no skip, no scale update)": (
        _make(clip_how="inner optimizer"), r"inner_optimizer.*instead of skipped"),
    "clips by value, not by norm (inf becomes finite: the overflow is applied)": (
        _make(clip_how="by value"), r"clip_by_value.*applied instead of skipped"),
    "no clip at all": (_make(clip_how="after apply"), r"does not clip"),
    "returns the scaled loss":
        (_make(returns="scaled"), r"value your step returned differs.*the scaled loss"),
    "not compiled": (_make(compiled=False), r"@tf.function"),
}


@pytest.mark.parametrize("right", CLIPPED_RIGHT)
def test_clipped_step_right_answers_pass(right):
    accepted("04.clipped_scaled_step", CLIPPED_RIGHT[right])


def test_clipped_step_batches_do_what_their_labels_say():
    model, optimizer = nb04._build()
    step = nb04._reference_clipped_step(model, optimizer, nb04.CLIP)
    seen, above, global_norms = [], [], []
    for x, y in nb04._batches().values():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        above.append(sum(float(tf.norm(g)) > nb04.CLIP for g in grads))
        global_norms.append(float(tf.linalg.global_norm(grads)))
        step(x, y)
        seen.append((float(optimizer.dynamic_scale), int(optimizer.iterations)))
    assert seen == [(2.0 ** 15, 1), (2.0 ** 14, 1), (2.0 ** 14, 2), (2.0 ** 15, 3), (2.0 ** 15, 4),
                    (2.0 ** 16, 5)]
    assert above[0] == 0 and global_norms[0] > nb04.CLIP          # none per tensor, but globally
    assert above[2] == 1 and above[3] == 3
    assert keras.mixed_precision.dtype_policy().name == "float32"


@pytest.mark.parametrize("wrong", CLIPPED_WRONG)
def test_clipped_step_wrong_answers_are_rejected(wrong):
    rejected("04.clipped_scaled_step", *CLIPPED_WRONG[wrong])


# -- 04.loss_scale_rule's recorded run: nothing passes without being compared (issue 23) --------
@pytest.mark.parametrize("empty", [[], (), np.array([]), np.zeros((0, 1)), iter([])],
                         ids=["list", "tuple", "array", "2-d array", "iterator"])
def test_an_empty_recorded_run_is_an_error_that_names_the_fix(empty):
    from ctlkit.checks import ContextError

    other = iter([]) if isinstance(empty, type(iter([]))) else empty
    with pytest.raises(ContextError, match=r"got 0 and 0: nothing would be replayed\. Pass the "
                                           r"lists your recorded run filled .* or leave out"):
        check("04.loss_scale_rule", rule_right, applied=empty, scales=other, growth=3)


def test_a_recorded_run_given_as_iterators_is_replayed_step_by_step():
    flags, used = nb04._recorded_run(growth=3)
    assert check("04.loss_scale_rule", rule_right, applied=iter(flags), scales=iter(used),
                 growth=3).ok
    wrong = list(used)
    wrong[-1] *= 2                                  # a step the rule cannot reproduce
    report = check("04.loss_scale_rule", rule_right, applied=iter(flags), scales=iter(wrong),
                   growth=3)
    assert not report.ok and f"at step {len(flags)}" in str(report)
