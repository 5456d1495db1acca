"""Notebook 13, contrastive learning: NT-Xent from four blocks, a step that learns its
temperature."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ..checks import Report, check_function, check_step
from ._common import merge, trim


# -- the loss, written once here for both checkers (2N x 2N form, as the notebook teaches it) -----
def _reference_nt_xent(z1, z2, temperature):
    z = tf.math.l2_normalize(tf.concat([z1, z2], axis=0), axis=1)
    logits = tf.matmul(z, z, transpose_b=True) / temperature
    n2 = tf.shape(z)[0]
    logits = tf.where(tf.eye(n2, dtype=tf.bool), -np.inf, logits)
    positive = tf.gather(logits, (tf.range(n2) + n2 // 2) % n2, batch_dims=1)
    return tf.reduce_mean(tf.reduce_logsumexp(logits, axis=1) - positive)


# -- 13.nt_xent_blocks ----------------------------------------------------------------------------
def _pair(seed, n, d, noise=1.0, lengths=(1.0, 1.0)):
    """n embeddings of width d with row lengths in `lengths`, and partners near them."""
    rng = np.random.default_rng(seed)
    z1 = rng.normal(size=(n, d)) * rng.uniform(*lengths, size=(n, 1))
    z2 = (z1 + noise * rng.normal(size=(n, d))) * rng.uniform(*lengths, size=(n, 1))
    return tf.constant(z1, tf.float32), tf.constant(z2, tf.float32)


def _cluster(seed, n, d):
    """Embeddings all close to one direction (cosines near 1, so s / tau is near 1 / tau) and
    partners closer still: the loss is of order 1, and exp(s / tau) is huge."""
    rng = np.random.default_rng(seed)
    z1 = rng.normal(size=(1, d)) + 0.1 * rng.normal(size=(n, d))
    z2 = z1 + 0.01 * rng.normal(size=(n, d))
    return tf.constant(z1, tf.float32), tf.constant(z2, tf.float32)


def _slips(z1, z2, temperature):
    """{what went wrong: the value it gives}: the mistakes the checker can name."""
    z = tf.math.l2_normalize(tf.concat([z1, z2], axis=0), axis=1)
    n2 = int(z.shape[0])
    raw = tf.matmul(z, z, transpose_b=True)
    positive = (np.arange(n2) + n2 // 2) % n2

    def loss(sim, mask=True, reduce=tf.reduce_mean, rows=slice(None)):
        logits = tf.where(tf.eye(n2, dtype=tf.bool), -np.inf, sim) if mask else sim
        per_anchor = tf.reduce_logsumexp(logits, axis=1) - tf.gather(logits, positive, batch_dims=1)
        return float(reduce(per_anchor[rows]))

    zz = tf.concat([z1, z2], axis=0)
    return {
        "the similarity of each view with itself is still a candidate: mask the diagonals of aa and "
        "bb (set them to -inf, or subtract a large number)": loss(raw / temperature, mask=False),
        "it matches the loss without the temperature: divide the logits by temperature":
            loss(raw),
        "it matches the loss on embeddings that were not normalised: l2-normalise z1 and z2 along "
        "axis 1 first, so every dot product is a cosine":
            loss(tf.matmul(zz, zz, transpose_b=True) / temperature),
        "it matches the SUM over the 2N anchors: take the mean":
            loss(raw / temperature, reduce=tf.reduce_sum),
        "it is TWICE the mean over the 2N anchors: the factor 2 of SimCLR's published code, whose "
        "tf2/objective.py returns tf.reduce_mean(loss_a + loss_b), a mean over N of two anchors' "
        "losses added; the mean over all 2N anchors is half of that (or the mean of "
        "tf.concat([loss_a, loss_b], 0))":
            2.0 * loss(raw / temperature),
        "it matches the mean over view 1's anchors only: view 2's N anchors (candidates [ba | bb]) "
        "count too": loss(raw / temperature, rows=slice(0, n2 // 2)),
    }


def nt_xent_blocks(fn):
    """NT-Xent for (z1, z2, temperature), checked against the 2N x 2N reference."""
    cases = {
        "N=8, d=6, tau 0.5, rows of lengths 0.1 to 10 (the loss must normalise them)":
            (*_pair(130, 8, 6, lengths=(0.1, 10.0)), 0.5),
        "N=16, d=8, tau 0.1, unit-scale rows": (*_pair(131, 16, 8), 0.1),
        "N=32, d=16, tau 1.0": (*_pair(132, 32, 16), 1.0),
        "N=4, d=3, tau 2.0 (a large temperature)": (*_pair(133, 4, 3), 2.0),
        "a batch of one pair, tau 0.5 (the only candidate is the positive, so the loss is 0)":
            (*_pair(134, 1, 5), 0.5),
        "N=12, d=8, tau 0.05, identical views z1 == z2": (*[_pair(135, 12, 8)[0]] * 2, 0.05),
    }
    small = "N=16, d=8, tau 0.01, all views close together (exp(1/0.01) overflows float32)"
    small_case = (*_cluster(136, 16, 8), 0.01)
    report = merge("nt_xent_blocks", [      # gradients too, except where they are ill-conditioned
        check_function(fn, _reference_nt_xent, cases, name="nt_xent_blocks", rtol=1e-4, atol=1e-5,
                       differentiable=True),
        check_function(fn, _reference_nt_xent, {small: small_case}, name="nt_xent_blocks",
                       rtol=1e-4, atol=1e-5)])
    if report.ok or any("not written yet" in p for p in report.problems):
        return report
    problems = trim(report.problems, per_case=1)
    if len(problems) > 3:
        problems = problems[:3] + [f"... and {len(problems) - 3} more cases that differ."]
    first = next(iter(cases))
    hints = []
    try:
        got, want = float(fn(*cases[first])), float(_reference_nt_xent(*cases[first]))
        small_got = float(fn(*small_case))
    except Exception:  # the case messages already report the error
        return Report(name=report.name, problems=problems, cases=report.cases)
    if got == np.inf:
        hints.append("your loss is +inf: the positive's logit is a masked entry. The positive of "
                     "anchor i (view 1) is column i of ab, that of anchor i of view 2 column i of "
                     "ba, not the diagonal of aa or bb.")
    elif np.isfinite(got) and not np.isfinite(small_got):
        hints.append(f"at tau 0.01 your loss is {small_got}: exp(s / tau) overflows float32 (about "
                     f"exp(88.7) is the largest it holds). Use tf.reduce_logsumexp or "
                     f"tf.nn.sparse_softmax_cross_entropy_with_logits, which subtract each row's "
                     f"largest logit before exp.")
    elif not np.isclose(got, want, rtol=1e-4, atol=1e-5):
        hints += [f"on {first}: {what}." for what, value in _slips(*cases[first]).items()
                  if np.isclose(got, value, rtol=1e-4, atol=1e-5)][:1]
    return Report(name=report.name, problems=hints + problems, cases=report.cases)


# -- 13.learned_temperature_step ------------------------------------------------------------------
def _reference_learned_temperature_step(model, optimizer, initial_temperature):
    log_tau = tf.Variable(np.log(initial_temperature), dtype=tf.float32, name="log_tau")
    variables = model.trainable_variables + [log_tau]
    optimizer.build(variables)

    @tf.function
    def step(x1, x2):
        with tf.GradientTape() as tape:
            tau = tf.exp(log_tau)
            loss = _reference_nt_xent(model(x1, training=True), model(x2, training=True), tau)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss, tau
    return step


def _build():
    """A small encoder for 8x8x1 images with seeded initializers (the global seed is left alone),
    and SGD with momentum, so each update also moves the next ones."""
    import keras
    init = lambda k: keras.initializers.GlorotUniform(seed=130 + k)  # noqa: E731
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(32, activation="tanh", kernel_initializer=init(0)),
                              keras.layers.Dense(8, kernel_initializer=init(1))], name="embedder")
    return model, keras.optimizers.SGD(0.2, momentum=0.5)


def _state(model, optimizer):
    return {"optimizer.iterations (apply_gradients calls)": int(optimizer.iterations.numpy())}


def _views(seed, n=16):
    """Two views of n real digits: each shifted by up to a pixel and with a little noise."""
    from ..data import arrays
    x, _, _ = arrays("digits")
    rng = np.random.default_rng(seed)
    x = x[rng.choice(len(x), n, replace=False)]

    def view():
        shifted = np.stack([np.roll(img, rng.integers(-1, 2, size=2), axis=(0, 1)) for img in x])
        return tf.constant(np.clip(shifted + rng.normal(0, 0.05, x.shape), 0, 1), tf.float32)
    return view(), view()


def _batches(tau0, seed):
    return {f"initial tau {tau0}, call {k}" + (" (tau not updated yet)" if k == 1 else
                                               " (after an update of tau)"): _views(seed + k)
            for k in (1, 2, 3)}


def _temperatures(fn, tau0, seed):
    """The temperatures the learner's step returns on the three calls (None if it fails)."""
    try:
        step = fn(*_build(), tau0)
        return [float(step(*batch)[1]) for batch in _batches(tau0, seed).values()]
    except Exception:  # check_step reports the error itself
        return None


def learned_temperature_step(fn):
    """Three steps at initial temperature 0.5, then three at 0.1; loss, tau, weights compared."""
    problems, cases = [], 0
    for tau0, seed in ((0.5, 1300), (0.1, 1310)):
        r = check_step(fn, _reference_learned_temperature_step, _build, _batches(tau0, seed),
                       args=(tau0,), state=_state, name="make_learned_temperature_step",
                       rtol=1e-4, atol=1e-6)
        problems += [p.replace("the value your step returned[0]", "the loss your step returned")
                      .replace("the value your step returned[1]", "the temperature your step returned")
                     for p in r.problems]
        cases += r.cases
        if problems:
            if any("temperature your step returned" in p for p in problems):
                taus = _temperatures(fn, tau0, seed)
                if taus and all(abs(t - tau0) < 1e-6 for t in taus):
                    problems.insert(0, f"your temperature stays at {tau0} on every call: log_tau must "
                                       f"be a tf.Variable, tau = tf.exp(log_tau) computed inside the "
                                       f"tape, and log_tau among the variables given to "
                                       f"tape.gradient and apply_gradients.")
            break
    return Report(name="make_learned_temperature_step", problems=problems, cases=cases)


EXERCISES = {"nt_xent_blocks": nt_xent_blocks, "learned_temperature_step": learned_temperature_step}
