"""Notebook 04, mixed precision: the dynamic loss-scale rule, a loss-scaled step that clips
each gradient tensor under the loss scale."""
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
        return None, None
    if not all(given.values()):
        missing = [k for k, v in given.items() if not v]
        raise ContextError(f"pass the recorded run whole: applied=, scales= and growth= (its "
                           f"dynamic_growth_steps); missing {', '.join(missing)}")
    if isinstance(growth, bool) or not isinstance(growth, (int, np.integer)) or growth < 1:
        raise ContextError(f"growth must be the run's dynamic_growth_steps, a positive int, got {growth!r}")
    try:                                      # an iterator is read once, here
        applied, scales = (np.ravel(np.asarray(v if hasattr(v, "__len__") else list(v))).tolist()
                           for v in (applied, scales))
    except TypeError:
        raise ContextError("applied and scales must be sequences, one value per step") from None
    n_applied, n_scales = len(applied), len(scales)
    if n_applied == 0 or n_applied != n_scales:
        raise ContextError(f"applied and scales must hold one value per step of the same run, at "
                           f"least one step; got {n_applied} and {n_scales}: nothing would be "
                           f"replayed. Pass the lists your recorded run filled (one entry per step "
                           f"it ran), or leave out applied, scales and growth to replay a recorded "
                           f"LossScaleOptimizer run")
    return applied, scales


def loss_scale_rule(fn, applied=None, scales=None, growth=None):
    """The rule, branch by branch; then a recorded run replayed through ``fn``.

    applied, scales, growth: the run to replay (per step: were the gradients finite, the scale the
    optimizer used; its ``dynamic_growth_steps``). Notebook 04 passes its section 7 run; by default
    a short run of a real ``LossScaleOptimizer`` (growth 3, overflows in a row included)."""
    applied, scales = _check_run(applied, scales, growth)
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
    except Exception as e:  # reported below
        return Report(name="update_loss_scale", cases=len(cases) + 1,
                      problems=[f"replaying {what}: raised {explain(e)}"])
    for k, (g, w) in enumerate(zip(got, want)):
        if g != w:
            before = "".join("F" if a else "N" for a in applied[max(0, k - 8):k])
            return Report(name="update_loss_scale", cases=len(cases) + 1, problems=[
                f"replaying {what}: at step {k + 1} your rule gives the scale {g:g}, the optimizer "
                f"used {w:g} (the steps before it, F finite / N not: ...{before})."])
    return Report(name="update_loss_scale", problems=[], cases=len(cases) + 1)


# -- 04.clipped_scaled_step -----------------------------------------------------------------------
CLIP = 0.5          # the per-tensor limit, in true (unscaled) gradient units
GROWTH = 2          # short, so that the scale doubles within the checked batches


def _reference_clipped_step(model, optimizer, clip):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            scaled_loss = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled_loss, model.trainable_variables)     # x dynamic_scale
        limit = clip * optimizer.dynamic_scale                            # the limit, scaled too
        grads = [tf.clip_by_norm(g, limit) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # unscales, may skip
        return loss
    return step


def _build():
    """A small mixed_float16 MLP (float32 logits) and a built LossScaleOptimizer around plain SGD."""
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


def _batches():
    return {
        "a good batch, every gradient tensor below the limit (their global norm is above it)": _batch(40),
        "a batch with inputs 1e4 too large (float16 gradients overflow: skip, halve to 2**14)":
            _batch(41, 1e4),
        "a good batch at the halved scale 2**14, one kernel's gradient above the limit": _batch(42),
        "a batch with inputs 3 times larger, three kernels above the limit (completes "
        "dynamic_growth_steps=2: the scale doubles back to 2**15)": _batch(43, 3.0),
        "a good batch at 2**15": _batch(44),
        "a good batch (the scale doubles to 2**16)": _batch(45),
    }


# Slips a learner makes here, each written out: when yours moves the model exactly as one of them,
# the report says which it is. factory(model, optimizer, clip) -> step, as the exercise's.
def _slip_step(kind):
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def factory(model, optimizer, clip):
        fixed = float(optimizer.dynamic_scale.numpy())

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                scaled = loss if kind == "never scaled" else optimizer.scale_loss(loss)
            grads = tape.gradient(scaled, model.trainable_variables)
            scale = optimizer.dynamic_scale
            target = optimizer
            if kind == "global":
                grads, _ = tf.clip_by_global_norm(grads, clip * scale)
            elif kind == "plain limit":
                grads = [tf.clip_by_norm(g, clip) for g in grads]
            elif kind == "fixed scale":
                grads = [tf.clip_by_norm(g, clip * fixed) for g in grads]
            elif kind in ("unscaled twice", "inner optimizer"):
                grads = [tf.clip_by_norm(g / scale, clip) for g in grads]
                if kind == "inner optimizer":
                    target = optimizer.inner_optimizer
            elif kind == "by value":
                grads = [tf.clip_by_value(g, -clip * scale, clip * scale) for g in grads]
            elif kind == "never scaled":
                grads = [tf.clip_by_norm(g, clip) for g in grads]
            elif kind == "not clipped":
                pass
            target.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return step
    return factory


_SLIPS = {
    "global": "your step clips all gradients together by their global norm (section 5's "
              "`clip_by_global_norm`); this exercise clips each tensor by its own norm: "
              "`tf.clip_by_norm` per tensor, at `clip * optimizer.dynamic_scale`.",
    "plain limit": "your step clips the *scaled* gradients at `clip`: they are 2**15 times the true "
                   "ones, so every tensor is cut to `clip` in scaled units and reaches the optimizer "
                   "at clip / 2**15. Clip at `clip * optimizer.dynamic_scale`.",
    "fixed scale": "your step clips at a limit fixed when the step was made (`clip` times the "
                   "scale at the start, 2**15): right until the overflow halves the scale. Read "
                   "`optimizer.dynamic_scale` inside the step.",
    "unscaled twice": "your step divides the gradients by the loss scale and then calls "
                      "`apply_gradients`, which divides them again: unscaled twice, an update 2**15 "
                      "times too small. Hand `apply_gradients` the scaled gradients, clipped at the "
                      "scaled limit.",
    "never scaled": "your step never scales the loss: it takes the gradients of the plain loss, and "
                    "`apply_gradients` divides them by the scale all the same, so the update is "
                    "2**15 times too small (and small float16 gradients underflow). Take the "
                    "gradients of `optimizer.scale_loss(loss)`.",
    "inner optimizer": "your step unscales by hand and applies with `optimizer.inner_optimizer`: "
                       "nothing checks the gradients then, so an overflow is applied (NaN weights) "
                       "instead of skipped, and the scale never changes. Apply with the "
                       "`LossScaleOptimizer` itself.",
    "by value": "your step clips each entry (`clip_by_value`), not each tensor's norm; and an entry "
                "clipped from inf to the limit is finite, so the overflowing step is applied instead "
                "of skipped. Use `tf.clip_by_norm` per tensor.",
    "not clipped": "your step does not clip: the update is the unclipped one.",
}
_SLIP_CACHE = {}


def _run(factory):
    """The weights and state after each batch of a fresh setup trained by ``factory``'s step."""
    model, optimizer = _build()
    out = []
    try:
        step = factory(model, optimizer, CLIP)
        for x, y in _batches().values():
            step(x, y)
            out.append([np.array(w.numpy(), np.float64) for w in model.weights]
                       + [np.array(list(_state(model, optimizer).values()), np.float64)])
    except Exception:  # a run that breaks matches only as far as it went
        pass
    return out


def _same(a, b):
    """Two runs (per batch: a list of arrays) agree, batch by batch, array by array."""
    return len(a) == len(b) and all(
        len(p) == len(q) and all(np.allclose(u, v, rtol=1e-4, atol=1e-6, equal_nan=True)
                                 for u, v in zip(p, q))
        for p, q in zip(a, b))


def _name_the_slip(factory):
    """The sentence of the slip whose whole run yours follows, batch by batch, or None."""
    mine = _run(factory)
    if not mine:
        return None
    for kind, sentence in _SLIPS.items():
        if kind not in _SLIP_CACHE:
            _SLIP_CACHE[kind] = _run(_slip_step(kind))
        if _same(mine, _SLIP_CACHE[kind]):
            return sentence
    return None


def clipped_scaled_step(fn):
    batches = _batches()
    report = check_step(fn, _reference_clipped_step, _build, batches, args=(CLIP,), state=_state,
                        name="make_clipped_step", rtol=1e-4, atol=1e-6,
                        slips={2.0 ** -15: "the gradients reached the optimizer 2**15 times too "
                                           "small: never scaled, or unscaled twice",
                               2.0 ** 15: "2**15 is the loss scale: a scaled value where the "
                                          "unscaled one is meant (the scaled loss returned, or "
                                          "scaled gradients that were never divided)"})
    if report.ok:
        return report
    if any(p.startswith(("on ", "your step's update")) for p in report.problems):
        try:
            sentence = _name_the_slip(fn)
        except Exception:  # the comparison's own messages stand
            sentence = None
        if sentence:
            report.problems.insert(0, sentence)
    return report


EXERCISES = {"loss_scale_rule": loss_scale_rule, "clipped_scaled_step": clipped_scaled_step}
