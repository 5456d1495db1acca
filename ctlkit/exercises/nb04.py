"""Notebook 04, mixed precision: the dynamic loss-scale rule, a loss-scaled training step."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import ContextError, Report, check_function, check_step, explain


# -- 04.loss_scale_rule ---------------------------------------------------------------------------
def _reference_update(scale, good_steps, grads_finite, growth_steps):
    if not grads_finite:                      # skip the step, halve, restart the count
        return scale * 0.5, 0
    if good_steps == growth_steps - 1:        # this finite step completes a run: double
        return scale * 2.0, 0
    return scale, good_steps + 1


_PATTERN = "FFFFFFNFFNNFFFFFFFNFFF"       # F: finite gradients, N: non-finite (inf)


def _recorded_run(pattern=_PATTERN, growth=3):
    """A real ``LossScaleOptimizer`` run: (flags: gradients finite per step, the scale each step
    used). One variable, SGD inside, gradients of 1 (finite) or inf in the order of ``pattern``."""
    import keras
    w = keras.Variable(0.0)
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01),
                                                    dynamic_growth_steps=growth)
    optimizer.build([w])
    flags, used = [], []
    for c in pattern:
        used.append(float(optimizer.dynamic_scale.numpy()))
        flags.append(c == "F")
        g = 1.0 if c == "F" else float("inf")
        optimizer.apply_gradients([(tf.constant(g), w)])
    return flags, used


def _replay(fn, applied, growth):
    scale, good, used = 2.0 ** 15, 0, []
    for ok in applied:
        used.append(float(scale))
        scale, good = fn(scale, good, bool(ok), growth)
    return used


def _check_run(applied, scales, growth):
    """The notebook's recorded run, if it passes one: all three, the same non-zero number of steps."""
    given = {"applied": applied is not None, "scales": scales is not None, "growth": growth is not None}
    if not any(given.values()):
        return
    if not all(given.values()):
        missing = [k for k, v in given.items() if not v]
        raise ContextError(f"pass the recorded run whole: applied=, scales= and growth= (its "
                           f"dynamic_growth_steps); missing {', '.join(missing)}")
    if isinstance(growth, bool) or not isinstance(growth, (int, np.integer)) or growth < 1:
        raise ContextError(f"growth must be the run's dynamic_growth_steps, a positive int, got {growth!r}")
    try:
        n_applied, n_scales = len(np.ravel(applied)), len(np.ravel(scales))
    except TypeError:
        raise ContextError("applied and scales must be sequences, one value per step") from None
    if n_applied == 0 or n_applied != n_scales:
        raise ContextError(f"applied and scales must hold one value per step of the same run, at "
                           f"least one step; got {n_applied} and {n_scales}: nothing would be replayed")


def loss_scale_rule(fn, applied=None, scales=None, growth=None):
    """The rule, branch by branch; then a recorded run replayed through ``fn``.

    applied, scales, growth: the run to replay (per step: were the gradients finite, the scale the
    optimizer used; its ``dynamic_growth_steps``). Notebook 04 passes its section 7 run; by default
    a short run of a real ``LossScaleOptimizer`` (growth 3, overflows in a row included)."""
    _check_run(applied, scales, growth)
    cases = {
        "a finite step early in the count (growth_steps 10)": (32768.0, 0, True, 10),
        "a finite step in the middle of the count": (32768.0, 4, True, 10),
        "the finite step that completes the growth interval (it doubles)": (32768.0, 9, True, 10),
        "a non-finite step late in the count (halve, count restarts)": (32768.0, 9, False, 10),
        "a non-finite step at count 0": (1024.0, 0, False, 2000),
        "the default growth_steps 2000, one step before doubling": (1.0, 1998, True, 2000),
        "the default growth_steps 2000, the doubling step": (1.0, 1999, True, 2000),
        "growth_steps 1: every finite step doubles": (4.0, 0, True, 1),
        "a scale below 1 halving again": (0.25, 3, False, 5),
    }
    report = check_function(fn, _reference_update, cases, name="update_loss_scale",
                            rtol=0.0, atol=0.0)
    if not report.ok:
        return report
    if applied is None or scales is None:
        growth = 3
        applied, scales = _recorded_run(growth=growth)
        what = "a recorded LossScaleOptimizer run (dynamic_growth_steps=3)"
    else:
        what = f"the run of section 7 (dynamic_growth_steps={growth})"
    applied = [bool(a) for a in np.asarray(applied)]
    want = [float(s) for s in np.asarray(scales)]
    try:
        got = _replay(fn, applied, growth)
    except Exception as e:  # noqa: BLE001 - reported below
        return Report(name="update_loss_scale", cases=len(cases) + 1,
                      problems=[f"replaying {what}: raised {explain(e)}"])
    for k, (g, w) in enumerate(zip(got, want)):
        if g != w:
            before = "".join("F" if a else "N" for a in applied[max(0, k - 8):k])
            return Report(name="update_loss_scale", cases=len(cases) + 1, problems=[
                f"replaying {what}: at step {k + 1} your rule gives the scale {g:g}, the optimizer "
                f"used {w:g} (the steps before it, F finite / N not: ...{before})."])
    return Report(name="update_loss_scale", problems=[], cases=len(cases) + 1)


# -- 04.scaled_step -------------------------------------------------------------------------------
def _reference_scaled_step(model, optimizer):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            scaled_loss = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled_loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


GROWTH = 2          # short, so that the scale doubles within the checked batches


def _build():
    """A small mixed_float16 MLP (float32 logits) and a built LossScaleOptimizer around SGD."""
    import keras
    policy = keras.mixed_precision.dtype_policy()
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(5)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10),
                                  keras.layers.Activation("linear", dtype="float32")])
    finally:
        keras.mixed_precision.set_dtype_policy(policy)
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1),
                                                    dynamic_growth_steps=GROWTH)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _state(model, optimizer):
    return {"loss scale": float(optimizer.dynamic_scale.numpy()),
            "iterations (applied steps)": int(optimizer.iterations.numpy())}


def _batch(seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.uniform(0, 1, (32, 64)) * scale, tf.float32),
            tf.constant(rng.integers(0, 10, 32), tf.int32))


def scaled_step(fn):
    batches = {
        "a good batch (scale 2**15)": _batch(40),
        "a batch with pixels 1e4 too large (float16 gradients overflow: skip, halve)": _batch(41, 1e4),
        "a good batch after the overflow (scale 2**14)": _batch(42),
        "a second good batch (completes dynamic_growth_steps=2: the scale doubles)": _batch(43),
        "a good batch at the doubled scale": _batch(44),
    }
    return check_step(fn, _reference_scaled_step, _build, batches, state=_state,
                      name="make_scaled_step", rtol=1e-4, atol=1e-6)


EXERCISES = {"loss_scale_rule": loss_scale_rule, "scaled_step": scaled_step}
