"""Notebook 07, GANs: a label-smoothed discriminator loss from logits, the R1 gradient penalty."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function
from ._common import trim


# -- 07.d_loss_smoothed ---------------------------------------------------------------------------
def _reference_d_loss_smoothed(real_logits, fake_logits, real_label=0.9):
    real = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.fill(tf.shape(real_logits), tf.cast(real_label, real_logits.dtype)), logits=real_logits)
    fake = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.zeros_like(fake_logits), logits=fake_logits)
    return tf.reduce_mean(real) + tf.reduce_mean(fake)


def d_loss_smoothed(fn):
    rng = np.random.default_rng(70)
    logits = lambda n, scale=3.0: tf.constant(rng.normal(size=(n, 1)) * scale, tf.float32)  # noqa: E731
    cases = {   # label: (real logits, fake logits, real_label or None for the default)
        "32 real and 32 fake logits, the default real_label (0.9)": (logits(32), logits(32), None),
        "real_label=0.8": (logits(16), logits(16), 0.8),
        "real_label=1.0 (no smoothing)": (logits(8), logits(8), 1.0),
        # no logit at exactly 0: max(x, 0) and |x| forms of the same loss pick a subgradient there
        "extreme logits of +-200 (log(sigmoid) overflows there)":
            (tf.constant([[200.0], [-200.0], [0.25]]), tf.constant([[-200.0], [200.0], [1.5]]), 0.9),
        "24 real logits but 6 fake ones (each term is the mean over its own batch)":
            (logits(24), logits(6, scale=5.0), 0.9),
    }
    problems = []
    for label, (real, fake, real_label) in cases.items():
        # real_label goes in as a Python float (as the notebook passes it), not as a tensor to watch
        bind = (lambda f: (lambda r, g: f(r, g))) if real_label is None else (
            lambda f, y=real_label: (lambda r, g: f(r, g, y)))
        report = check_function(bind(fn), bind(_reference_d_loss_smoothed), {label: (real, fake)},
                                name="d_loss_smoothed", differentiable=True, rtol=1e-5, atol=1e-6)
        problems += report.problems
        if any("not written yet" in p for p in report.problems):
            break
    report = Report(name="d_loss_smoothed", problems=trim(problems), cases=len(cases))
    return _hint_nonfinite(report, fn)


def _hint_nonfinite(report, fn):
    """Say so when the answer is NaN or infinite at large logits: the usual log(sigmoid) overflow."""
    if report.ok or any("not written yet" in p for p in report.problems):
        return report
    try:
        x = tf.constant([[200.0], [-200.0]])
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = fn(x, -x, 0.9)
        grad = tape.gradient(value, x)
        finite = bool(np.all(np.isfinite(np.asarray(value)))) and (
            grad is None or bool(np.all(np.isfinite(grad.numpy()))))
    except Exception:  # the case messages already report errors
        return report
    if not finite:
        report.problems.insert(0, "at logits of +-200 your loss or its gradient is NaN or infinite: "
                                  "log(sigmoid(x)) overflows there; use softplus(x) - y * x.")
    return report


# -- 07.r1_penalty --------------------------------------------------------------------------------
def _reference_r1(critic, real):
    with tf.GradientTape() as tape:
        tape.watch(real)
        scores = critic(real, training=True)
    grads = tape.gradient(scores, real)
    return tf.reduce_mean(tf.reduce_sum(tf.square(grads), axis=tf.range(1, tf.rank(grads))))


def _with_weight_gradients(penalty):
    """Run ``penalty`` under an outer tape: the value and its gradient for each critic weight."""
    def run(critic, real):
        with tf.GradientTape() as outer:
            value = penalty(critic, real)
        grads = outer.gradient(value, critic.trainable_variables)
        out = {"the penalty": value}
        for k, (v, g) in enumerate(zip(critic.trainable_variables, grads)):
            name = (getattr(v, "path", None) or v.name).split(":")[0].split("/")[-2:]
            out[f"its gradient for weight {k} ({'/'.join(name)})"] = g
        return out
    return run


def _critics():
    """(linear critic with ||w|| = 3 on 8x8x1, conv critic on 8x8x1, conv critic on 8x8x3)."""
    import keras
    linear = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(1)],
                              name="r1_linear_critic")
    linear.layers[-1].set_weights([np.full((64, 1), 3.0 / 8, np.float32), np.array([0.7], np.float32)])

    def conv(channels, seed):      # seeded initializers: the notebook's global seed is left alone
        init = lambda k: keras.initializers.GlorotUniform(seed=seed + k)  # noqa: E731
        return keras.Sequential([                       # notebook 07's discriminator, narrower
            keras.Input((8, 8, channels)),
            keras.layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, kernel_initializer=init(0)),
            keras.layers.LeakyReLU(negative_slope=0.2),
            keras.layers.Conv2D(32, 3, strides=2, padding="same", use_bias=False, kernel_initializer=init(1)),
            keras.layers.LeakyReLU(negative_slope=0.2),
            keras.layers.Flatten(), keras.layers.Dense(1, kernel_initializer=init(2))],
            name=f"r1_conv_critic_{channels}")
    return linear, conv(1, 71), conv(3, 72)


def _r1_slip(value, batch, pixels):
    """What a wrong penalty on the linear critic (||w|| = 3, so 9 is right) most likely did."""
    near = lambda a, b: abs(a - b) <= 1e-3 * abs(b)  # noqa: E731
    for want, what in ((9.0 * batch, f"{batch} x 9: summed over the {batch} images instead of "
                                     f"averaged"),
                       (9.0 / pixels, f"9 / {pixels}: averaged over the {pixels} pixels instead "
                                      f"of summed"),
                       (9.0 / batch / pixels, "9 divided by every entry: a mean over everything"),
                       (3.0, "||w|| itself: the norm, not its square"),
                       (4.0, "(||w|| - 1)^2: WGAN-GP's penalty, not R1's"),
                       (18.0, "twice 9"), (4.5, "half of 9")):
        if near(value, want):
            return f" (that is {what})"
    return ""


def r1_penalty(fn):
    linear, conv1, conv3 = _critics()
    rng = np.random.default_rng(73)
    images = lambda n, c: tf.constant(rng.uniform(-1, 1, (n, 8, 8, c)), tf.float32)  # noqa: E731
    cases = {
        "a linear critic with ||w|| = 3 (the penalty is 9), 16 images": (linear, images(16, 1)),
        "the notebook's convolutional critic, 32 images": (conv1, images(32, 1)),
        "a convolutional critic on 3-channel images, 8 images": (conv3, images(8, 3)),
    }
    report = check_function(_with_weight_gradients(fn), _with_weight_gradients(_reference_r1), cases,
                            name="r1_penalty", rtol=1e-4, atol=1e-7)
    report = Report(name=report.name, problems=trim(report.problems), cases=report.cases)
    if report.ok or any("not written yet" in p for p in report.problems):
        return report
    hints = []
    first = cases["a linear critic with ||w|| = 3 (the penalty is 9), 16 images"][1]
    try:
        out = _with_weight_gradients(fn)(linear, first)          # the same critic, the same images
        value, grads = out.pop("the penalty"), list(out.values())
        if grads and all(g is None for g in grads):
            hints.append("the outer tape gets no gradient with respect to the critic's weights: take "
                         "the input gradient with a tape opened *inside* your function (no "
                         "tf.stop_gradient, no .numpy()), so that the caller's tape records it.")
        elif np.shape(value) == () and abs(float(value) - 9.0) > 1e-3:
            hints.append(f"for the linear critic with ||w|| = 3, on the same 16 images as the first "
                         f"case below, your penalty is {float(value):.4g}, not ||w||^2 = 9"
                         f"{_r1_slip(float(value), int(first.shape[0]), int(np.prod(first.shape[1:])))}"
                         f": square each image's input-gradient norm (the sum of the squared "
                         f"gradient over every pixel and channel), then average over the batch.")
    except Exception:  # the case messages already report errors
        pass
    return Report(name=report.name, problems=hints + report.problems, cases=report.cases)


EXERCISES = {"d_loss_smoothed": d_loss_smoothed, "r1_penalty": r1_penalty}
