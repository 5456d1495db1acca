"""Notebook 09's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least four per exercise, one almost right)."""

import keras
import pytest
import tensorflow as tf
from exercise_helpers import accepted, rejected

loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)   # notebook 09's globals


def project(x_adv, x, eps):
    x_adv = tf.clip_by_value(x_adv, x - eps, x + eps)
    return tf.clip_by_value(x_adv, 0.0, 1.0)


def input_gradient(model, x, y):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = loss_fn(y, model(x, training=False))
    return tape.gradient(loss, x)


_grad = input_gradient


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
    "ignores the random start (plain FGSM with alpha)":
        (_fgsm_rs(start="none"), r"random start: the result differs"),
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


def _fgsm_rs_names(model, x, y, eps, alpha, start):
    """With the notebook's own helpers, project and input_gradient."""
    x0 = project(x + start, x, eps)
    return project(x0 + alpha * tf.sign(input_gradient(model, x0, y)), x, eps)


def _fgsm_rs_keras_ops(model, x, y, eps, alpha, start):
    """keras.ops, one clip to the intersection of the two boxes, the gradient of the summed loss
    (the sign is the same as the mean's)."""
    ops = keras.ops
    low, high = ops.maximum(x - eps, 0.0), ops.minimum(x + eps, 1.0)
    x0 = ops.minimum(ops.maximum(x + start, low), high)
    with tf.GradientTape() as tape:
        tape.watch(x0)
        total = ops.sum(keras.losses.sparse_categorical_crossentropy(y, model(x0), from_logits=True))
    return ops.minimum(ops.maximum(x0 + alpha * ops.sign(tape.gradient(total, x0)), low), high)


def _fgsm_rs_compiled(model, x, y, eps, alpha, start):
    """The same inside a tf.function (the statement allows it), the fused TF loss."""
    @tf.function
    def run(x, y, start):
        x0 = tf.clip_by_value(tf.clip_by_value(x + start, x - eps, x + eps), 0.0, 1.0)
        with tf.GradientTape() as tape:
            tape.watch(x0)
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x0))
        step = x0 + alpha * tf.sign(tape.gradient(loss, x0))
        return tf.clip_by_value(tf.clip_by_value(step, x - eps, x + eps), 0.0, 1.0)
    return run(x, y, start)


FGSM_RS_RIGHT = {"the solution cell": fgsm_rs_right, "with project and input_gradient": _fgsm_rs_names,
                 "keras.ops, one clip to the intersection": _fgsm_rs_keras_ops,
                 "compiled, the fused loss": _fgsm_rs_compiled}


@pytest.mark.parametrize("right", FGSM_RS_RIGHT)
def test_fgsm_rs_right_answers_pass(right):
    accepted("09.fgsm_rs", FGSM_RS_RIGHT[right])


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


def _targeted_names(model, x_adv, x, target, eps, alpha):
    return project(x_adv - alpha * tf.sign(input_gradient(model, x_adv, target)), x, eps)


def _targeted_negated_loss(model, x_adv, x, target, eps, alpha):
    """Climb the *negative* target loss, with keras.ops and a one-hot categorical loss."""
    with tf.GradientTape() as tape:
        tape.watch(x_adv)
        onehot = keras.ops.one_hot(target, 10)
        loss = -keras.ops.mean(keras.losses.categorical_crossentropy(onehot, model(x_adv),
                                                                     from_logits=True))
    step = x_adv + alpha * keras.ops.sign(tape.gradient(loss, x_adv))
    return keras.ops.clip(keras.ops.clip(step, x - eps, x + eps), 0.0, 1.0)


def _targeted_log_prob(model, x_adv, x, target, eps, alpha):
    """Climb the log-probability of the target class (the same direction), with tf.minimum/maximum."""
    with tf.GradientTape() as tape:
        tape.watch(x_adv)
        log_p = tf.nn.log_softmax(model(x_adv, training=False))
        score = tf.reduce_sum(tf.gather(log_p, target, axis=1, batch_dims=1))
    step = x_adv + alpha * tf.sign(tape.gradient(score, x_adv))
    return tf.minimum(tf.maximum(tf.minimum(tf.maximum(step, x - eps), x + eps), 0.0), 1.0)


TARGETED_RIGHT = {"the solution cell": _targeted(), "with project and input_gradient": _targeted_names,
                  "keras.ops, minus the loss climbed": _targeted_negated_loss,
                  "the target's log-probability climbed": _targeted_log_prob}


@pytest.mark.parametrize("right", TARGETED_RIGHT)
def test_targeted_right_answers_pass(right):
    accepted("09.targeted_pgd_step", TARGETED_RIGHT[right])


@pytest.mark.parametrize("wrong", TARGETED_WRONG)
def test_targeted_wrong_answers_are_rejected(wrong):
    rejected("09.targeted_pgd_step", *TARGETED_WRONG[wrong])


# -- 09.l2_pgd_step -------------------------------------------------------------------------------
def _norm(t):
    return tf.sqrt(tf.reduce_sum(tf.square(t), axis=[1, 2, 3], keepdims=True))


def l2_right(model, x_adv, x, y, eps, alpha):
    g = input_gradient(model, x_adv, y)
    x_adv = x_adv + alpha * g / _norm(g)
    delta = x_adv - x
    delta = delta * tf.minimum(1.0, eps / _norm(delta))
    return tf.clip_by_value(x + delta, 0.0, 1.0)


def _l2_normalize_and_clip_by_norm(model, x_adv, x, y, eps, alpha):
    """tf.math.l2_normalize for the step, tf.clip_by_norm for the projection."""
    g = tf.math.l2_normalize(input_gradient(model, x_adv, y), axis=[1, 2, 3])
    delta = tf.clip_by_norm(x_adv + alpha * g - x, eps, axes=[1, 2, 3])
    return tf.clip_by_value(x + delta, 0.0, 1.0)


def _l2_keras_ops_flat(model, x_adv, x, y, eps, alpha):
    """keras.ops on flattened images, keras.ops.norm, a where for the projection."""
    ops = keras.ops
    shape = ops.shape(x)
    g = ops.reshape(input_gradient(model, x_adv, y), (shape[0], -1))
    step = ops.reshape(x_adv, (shape[0], -1)) + alpha * g / ops.norm(g, axis=1, keepdims=True)
    delta = step - ops.reshape(x, (shape[0], -1))
    n = ops.norm(delta, axis=1, keepdims=True)
    delta = ops.where(n > eps, delta * eps / n, delta)
    return ops.reshape(ops.clip(ops.reshape(x, (shape[0], -1)) + delta, 0.0, 1.0), shape)


def _l2_loop(model, x_adv, x, y, eps, alpha):
    """One image at a time in a Python loop, tf.norm per image, the mean loss of that image."""
    out = []
    for i in range(x.shape[0]):
        xi, ai = x[i:i + 1], x_adv[i:i + 1]
        g = input_gradient(model, ai, y[i:i + 1])
        delta = ai + alpha * g / tf.norm(g) - xi
        delta = delta * tf.minimum(1.0, eps / tf.norm(delta))
        out.append(tf.clip_by_value(xi + delta, 0.0, 1.0))
    return tf.concat(out, 0)


L2_RIGHT = {"the solution cell": l2_right, "l2_normalize and clip_by_norm": _l2_normalize_and_clip_by_norm,
            "keras.ops on flat images": _l2_keras_ops_flat, "one image at a time": _l2_loop}


def _l2(step="unit", project_="l2", norms="image", pixels=True, direction=1.0, order="ball_first"):
    """An L2 PGD step, right by default; each argument plants one mistake."""
    def l2_pgd_step(model, x_adv, x, y, eps, alpha):
        g = input_gradient(model, x_adv, y)
        n = _norm if norms == "image" else (lambda t: tf.norm(t))
        move = {"unit": g / n(g), "sign": tf.sign(g), "raw": g}[step]
        out = x_adv + direction * alpha * move
        if order == "pixels_first":
            out = tf.clip_by_value(out, 0.0, 1.0)
        if project_ == "l2":
            delta = out - x
            out = x + delta * tf.minimum(1.0, eps / n(delta))
        elif project_ == "box":
            out = tf.clip_by_value(out, x - eps, x + eps)
        elif project_ == "always":                     # rescales every step to length eps
            delta = out - x
            out = x + delta * eps / n(delta)
        if pixels and order == "ball_first":
            out = tf.clip_by_value(out, 0.0, 1.0)
        return out
    return l2_pgd_step


L2_WRONG = {
    "section 2's L-inf step copied (sign, project)": (
        lambda m, xa, x, y, eps, alpha: project(xa + alpha * tf.sign(input_gradient(m, xa, y)), x, eps),
        r"the L-inf step of section 2"),
    "the L2 step, projected onto the L-inf box with project (almost right)": (
        _l2(project_="box"), r"projected onto the L-inf box"),
    "one norm for the whole batch": (_l2(norms="batch"), r"one norm for the whole batch"),
    "descends the loss": (_l2(direction=-1.0), r"goes down the loss"),
    "alpha * g, not normalised": (_l2(step="raw"), r"normalise the gradient first"),
    "the sign of the gradient, the L2 projection (almost right)": (_l2(step="sign"),
                                                                  r"follows the sign of the gradient"),
    "no projection onto the ball": (_l2(project_="none"), r"L2 distance of .* > eps"),
    "no clip to [0, 1]": (_l2(pixels=False), r"outside \[0, 1\]"),
    "always rescales to the sphere (almost right: right whenever the step leaves the ball)": (
        _l2(project_="always"), r"scaled every perturbation to length eps"),
    "clips to [0, 1] before the projection (almost right)": (
        _l2(order="pixels_first"), r"the result differs"),
}


@pytest.mark.parametrize("right", L2_RIGHT)
def test_l2_right_answers_pass(right):
    accepted("09.l2_pgd_step", L2_RIGHT[right])


@pytest.mark.parametrize("wrong", L2_WRONG)
def test_l2_wrong_answers_are_rejected(wrong):
    rejected("09.l2_pgd_step", *L2_WRONG[wrong])
