"""Notebook 09, adversarial training: FGSM from a random start, a targeted PGD step, and a PGD step
in another threat model (an L2 ball), which the notebook does not show."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function
from ._common import trim


def _loss(y, logits):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(y, tf.int32),
                                                                         logits=logits))


def _project(x_adv, x, eps):
    return tf.clip_by_value(tf.clip_by_value(x_adv, x - eps, x + eps), 0.0, 1.0)


def _input_gradient(model, x, y):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = _loss(y, model(x, training=False))
    return tape.gradient(loss, x)


def _setup(n=32):
    """A small MLP on 8x8x1 digits (seeded initializers; the global seed is left alone) and
    ``n`` real digits in [0, 1] with their labels: many pixels sit at 0 or 1, so the pixel
    range matters."""
    import keras

    from ..data import arrays
    init = lambda k: keras.initializers.GlorotUniform(seed=90 + k)  # noqa: E731
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(64, activation="relu", kernel_initializer=init(0)),
                              keras.layers.Dense(10, kernel_initializer=init(1))], name="attack_target")
    x, y, _ = arrays("digits")
    pick = np.random.default_rng(91).choice(len(x), n, replace=False)
    return model, tf.constant(x[pick]), tf.constant(y[pick])


def _start(shape, eps, seed):
    return tf.random.stateless_uniform(shape, seed=[seed, 9], minval=-eps, maxval=eps)


def _threat_problems(outputs):
    """Plain-language threat-model checks: [(label, x_adv, x, eps)] -> sentences."""
    problems = []
    for label, xa, x, eps in outputs:
        try:
            xa = tf.convert_to_tensor(xa)
            moved = float(tf.reduce_max(tf.abs(xa - x)))
            low, high = float(tf.reduce_min(xa)), float(tf.reduce_max(xa))
        except Exception:  # the case messages report the error itself
            continue
        if moved > eps + 1e-6:
            problems.append(f"{label}: a pixel moved by {moved:.3f} > eps = {eps}: project onto the "
                            f"eps-ball around the clean x (clip to [x - eps, x + eps]).")
        if low < 0.0 or high > 1.0:
            problems.append(f"{label}: pixels in [{low:.3f}, {high:.3f}], outside [0, 1]: clip to "
                            f"the valid pixel range too.")
    return problems[:2]


# -- 09.fgsm_rs -----------------------------------------------------------------------------------
def _reference_fgsm_rs(model, x, y, eps, alpha, start):
    x_adv = _project(x + start, x, eps)
    x_adv = x_adv + alpha * tf.sign(_input_gradient(model, x_adv, y))
    return _project(x_adv, x, eps)


def fgsm_rs(fn):
    model, x, y = _setup()
    cases = {
        "eps 0.1, alpha 1.25 eps (Wong et al.), a random start":
            (model, x, y, 0.1, 0.125, _start(x.shape, 0.1, 0)),
        "eps 0.2, alpha 0.5 eps (a short step), another random start":
            (model, x, y, 0.2, 0.1, _start(x.shape, 0.2, 1)),
        "eps 0.15, start at the corner +eps (outside [0, 1] where x = 1), alpha 1.25 eps":
            (model, x, y, 0.15, 0.1875, tf.fill(x.shape, 0.15)),
        "eps 0.15, start 0 and alpha eps (plain FGSM)": (model, x, y, 0.15, 0.15, tf.zeros_like(x)),
    }
    report = check_function(fn, _reference_fgsm_rs, cases, name="fgsm_rs", rtol=1e-5, atol=1e-6)
    problems = trim(report.problems)
    if problems and not any("not written yet" in p for p in problems):
        outputs = []
        for label, (m, xx, yy, eps, alpha, start) in cases.items():
            try:
                outputs.append((label, fn(m, xx, yy, eps, alpha, start), xx, eps))
            except Exception:
                pass
        problems[:0] = _threat_problems(outputs)
    return Report(name=report.name, problems=problems, cases=report.cases)


# -- 09.targeted_pgd_step -------------------------------------------------------------------------
def _reference_targeted(model, x_adv, x, target, eps, alpha):
    return _project(x_adv - alpha * tf.sign(_input_gradient(model, x_adv, target)), x, eps)


def _untargeted(model, x_adv, x, target, eps, alpha):      # the usual slip: climbs the target's loss
    return _project(x_adv + alpha * tf.sign(_input_gradient(model, x_adv, target)), x, eps)


def targeted_pgd_step(fn):
    model, x, y = _setup()
    inside = lambda eps, seed: _project(x + _start(x.shape, eps, seed), x, eps)  # noqa: E731
    cases = {
        "eps 0.15, alpha 0.05, from a random point of the ball, target y + 1":
            (model, inside(0.15, 2), x, (y + 1) % 10, 0.15, 0.05),
        "eps 0.1, alpha 0.5 (a step far beyond the ball), target y + 3":
            (model, inside(0.1, 3), x, (y + 3) % 10, 0.1, 0.5),
        "eps 0.3, alpha 0.3, from x itself, target y + 5": (model, x, x, (y + 5) % 10, 0.3, 0.3),
        "eps 0.2, alpha 0.02 (a small step), from a random point, target 0 for every image":
            (model, inside(0.2, 4), x, tf.zeros_like(y), 0.2, 0.02),
    }
    report = check_function(fn, _reference_targeted, cases, name="targeted_pgd_step", rtol=1e-5, atol=1e-6)
    problems = trim(report.problems)
    if problems and not any("not written yet" in p for p in problems):
        outputs, climbs = [], True
        for label, (m, xa, xx, t, eps, alpha) in cases.items():
            try:
                got = fn(m, xa, xx, t, eps, alpha)
                outputs.append((label, got, xx, eps))
                climbs = climbs and bool(np.allclose(got, _untargeted(m, xa, xx, t, eps, alpha), atol=1e-6))
            except Exception:
                climbs = False
        hints = _threat_problems(outputs)
        if climbs:
            hints.insert(0, "your step climbs the target's loss: a targeted step goes *down* it "
                            "(x_adv - alpha * sign(gradient)).")
        problems[:0] = hints
    return Report(name=report.name, problems=problems, cases=report.cases)


# -- 09.l2_pgd_step -------------------------------------------------------------------------------
def _l2_norm(t):
    """Each image's L2 norm, shaped [batch, 1, 1, 1] to broadcast against the images."""
    return tf.sqrt(tf.reduce_sum(tf.square(t), axis=[1, 2, 3], keepdims=True))


def _reference_l2(model, x_adv, x, y, eps, alpha):
    g = _input_gradient(model, x_adv, y)
    x_adv = x_adv + alpha * g / _l2_norm(g)                  # a step of L2 length alpha
    delta = x_adv - x
    delta = delta * tf.minimum(1.0, eps / _l2_norm(delta))  # onto the L2 ball around x
    return tf.clip_by_value(x + delta, 0.0, 1.0)             # then the pixel range


def _l2_slips():
    """The usual wrong answers, each with the sentence that names it: (hint, function)."""
    def linf(model, x_adv, x, y, eps, alpha):                # section 2's pgd_step, copied
        return _project(x_adv + alpha * tf.sign(_input_gradient(model, x_adv, y)), x, eps)

    def box(model, x_adv, x, y, eps, alpha):                 # the L2 step, the L-inf projection
        g = _input_gradient(model, x_adv, y)
        return _project(x_adv + alpha * g / _l2_norm(g), x, eps)

    def batch_norms(model, x_adv, x, y, eps, alpha):         # one norm for the whole batch
        g = _input_gradient(model, x_adv, y)
        delta = x_adv + alpha * g / tf.norm(g) - x
        return tf.clip_by_value(x + delta * tf.minimum(1.0, eps / tf.norm(delta)), 0.0, 1.0)

    def sign_step(model, x_adv, x, y, eps, alpha):           # the L-inf direction, the L2 ball
        delta = x_adv + alpha * tf.sign(_input_gradient(model, x_adv, y)) - x
        return tf.clip_by_value(x + delta * tf.minimum(1.0, eps / _l2_norm(delta)), 0.0, 1.0)

    def to_sphere(model, x_adv, x, y, eps, alpha):           # every perturbation to length eps
        g = _input_gradient(model, x_adv, y)
        delta = x_adv + alpha * g / _l2_norm(g) - x
        return tf.clip_by_value(x + delta * eps / _l2_norm(delta), 0.0, 1.0)

    def descends(model, x_adv, x, y, eps, alpha):
        return _reference_l2(model, x_adv, x, y, eps, -alpha)

    def raw_gradient(model, x_adv, x, y, eps, alpha):        # alpha * g, not a step of length alpha
        g = _input_gradient(model, x_adv, y)
        delta = x_adv + alpha * g - x
        return tf.clip_by_value(x + delta * tf.minimum(1.0, eps / _l2_norm(delta)), 0.0, 1.0)

    return [
        ("your step is the L-inf step of section 2 (the sign of the gradient, then `project`): "
         "in an L2 ball the step follows the gradient itself, scaled to length alpha "
         "(g / ||g||_2), and the projection scales the whole perturbation back to length eps", linf),
        ("you projected onto the L-inf box (`project` clips each pixel to [x - eps, x + eps]): "
         "the L2 ball is a sphere; scale the perturbation x_adv - x by min(1, eps / ||x_adv - x||_2)",
         box),
        ("you took one norm for the whole batch: each image has its own L2 norm (reduce over "
         "axes 1, 2 and 3 only, keepdims=True), both for the gradient and for the perturbation",
         batch_norms),
        ("your step follows the sign of the gradient, the steepest direction of the L-inf ball: "
         "in the L2 ball it is the gradient itself, scaled to L2 length alpha (g / ||g||_2)",
         sign_step),
        ("you scaled every perturbation to length eps: the projection only shrinks a perturbation "
         "longer than eps, by min(1, eps / ||x_adv - x||_2), and leaves a shorter one alone",
         to_sphere),
        ("your step goes down the loss: an untargeted attack climbs it (x_adv + alpha * g / ||g||)",
         descends),
        ("you stepped by alpha * g: normalise the gradient first (g / ||g||_2, per image), so that "
         "each step has L2 length alpha whatever the gradient's size", raw_gradient),
    ]


def _l2_threat_problems(outputs):
    problems = []
    for label, xa, x, eps in outputs:
        try:
            d = tf.convert_to_tensor(xa) - x
            moved = float(tf.reduce_max(_l2_norm(d)))
            low, high = float(tf.reduce_min(xa)), float(tf.reduce_max(xa))
        except Exception:  # the case messages report the error itself
            continue
        if moved > eps * (1 + 1e-5) + 1e-6:
            problems.append(f"{label}: an image moved by an L2 distance of {moved:.3f} > eps = {eps}: "
                            f"project onto the L2 ball around the clean x (scale x_adv - x by "
                            f"min(1, eps / its norm), per image).")
        if low < 0.0 or high > 1.0:
            problems.append(f"{label}: pixels in [{low:.3f}, {high:.3f}], outside [0, 1]: clip to "
                            f"the valid pixel range after the projection.")
    return problems[:2]


def _inside_l2(x, eps, seed):
    """A random point of the L2 ball of radius eps around x (each image at its own radius < eps),
    clipped to [0, 1] (which only brings it closer to x)."""
    rng = np.random.default_rng(seed)
    d = rng.normal(size=x.shape)
    d *= (eps * rng.uniform(0.3, 0.95, size=(x.shape[0], 1, 1, 1))
          / np.sqrt((d ** 2).sum(axis=(1, 2, 3), keepdims=True)))
    return tf.clip_by_value(x + tf.constant(d, tf.float32), 0.0, 1.0)


def l2_pgd_step(fn):
    model, x, y = _setup()
    cases = {
        "eps 1.0, alpha 0.25, from a random point of the L2 ball": (model, _inside_l2(x, 1.0, 5), x, y,
                                                                   1.0, 0.25),
        "eps 0.5, alpha 2.0 (a step far beyond the ball), from x itself": (model, x, x, y, 0.5, 2.0),
        "eps 2.0, alpha 0.5, from a random point of the L2 ball": (model, _inside_l2(x, 2.0, 6), x, y,
                                                                  2.0, 0.5),
        "eps 1.5, alpha 0.1 (a short step that stays inside the ball), from x itself":
            (model, x, x, y, 1.5, 0.1),
    }
    report = check_function(fn, _reference_l2, cases, name="l2_pgd_step", rtol=1e-5, atol=1e-6)
    problems = trim(report.problems)
    if problems and not any("not written yet" in p for p in problems):
        outputs, got = [], {}
        for label, (m, xa, xx, yy, eps, alpha) in cases.items():
            try:
                got[label] = fn(m, xa, xx, yy, eps, alpha)
                outputs.append((label, got[label], xx, eps))
            except Exception:  # the case messages report the error
                pass
        hints = []
        if len(got) == len(cases):
            for hint, slip in _l2_slips():
                if all(np.allclose(got[label], slip(*args), rtol=1e-5, atol=1e-6)
                       for label, args in cases.items()):
                    hints.append(hint + ".")
                    break
        hints += _l2_threat_problems(outputs) if not hints else []
        problems[:0] = hints
    return Report(name=report.name, problems=problems, cases=report.cases)


EXERCISES = {"fgsm_rs": fgsm_rs, "targeted_pgd_step": targeted_pgd_step, "l2_pgd_step": l2_pgd_step}
