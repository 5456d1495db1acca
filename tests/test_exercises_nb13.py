"""Notebook 13's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least six per exercise, some almost right)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import rejected

from ctlkit.exercises import check


# -- 13.nt_xent_blocks ----------------------------------------------------------------------------
def _blocks(normalise=True, axis=1, mask=-np.inf, temperature=True, order="positive first",
            reduce="mean", directions=2, stable=True, dtype=None, product="matmul"):
    """An NT-Xent from four blocks, right by default; each argument plants one mistake."""
    def nt_xent_blocks(z1, z2, tau):
        if dtype is not None:
            z1, z2 = tf.cast(z1, dtype), tf.cast(z2, dtype)
        a = tf.math.l2_normalize(z1, axis=axis) if normalise else z1
        b = tf.math.l2_normalize(z2, axis=axis) if normalise else z2
        t = tau if temperature else 1.0
        n = tf.shape(a)[0]
        eye = tf.eye(n, dtype=tf.bool)

        def masked(block):
            if mask is None:
                return block
            if mask == -np.inf:
                return tf.where(eye, -np.inf, block)
            return block - mask * tf.cast(eye, block.dtype)

        def dot(p, q):                             # every row of p with every row of q
            if product == "einsum":
                return tf.einsum("id,jd->ij", p, q)
            if product == "broadcast":
                return tf.reduce_sum(p[:, None, :] * q[None, :, :], axis=-1)
            if product == "keras.ops":
                return keras.ops.matmul(p, keras.ops.transpose(q))
            return tf.matmul(p, q, transpose_b=True)

        aa = masked(dot(a, a) / t)
        bb = masked(dot(b, b) / t)
        ab = dot(a, b) / t
        ba = tf.transpose(ab) if product == "matmul" else dot(b, a) / t
        if order == "positive first":
            la, lb, labels = tf.concat([ab, aa], 1), tf.concat([ba, bb], 1), tf.range(n)
        else:                                      # [aa | ab] but the positive still taken at i
            la, lb, labels = tf.concat([aa, ab], 1), tf.concat([bb, ba], 1), tf.range(n)
        if stable:
            losses = [tf.nn.sparse_softmax_cross_entropy_with_logits(labels, la),
                      tf.nn.sparse_softmax_cross_entropy_with_logits(labels, lb)]
        else:                                      # the textbook exp / sum / log
            def textbook(logits):
                e = tf.exp(logits)
                return -tf.math.log(tf.gather(e, labels, batch_dims=1) / tf.reduce_sum(e, axis=1))
            losses = [textbook(la), textbook(lb)]
        if reduce == "simclr":                     # SimCLR's tf2/objective.py, copied faithfully
            return tf.reduce_mean(losses[0] + losses[1])
        per_anchor = tf.concat(losses[:directions], axis=0)
        return tf.reduce_mean(per_anchor) if reduce == "mean" else tf.reduce_sum(per_anchor)
    return nt_xent_blocks


def _loop_over_anchors(z1, z2, tau):
    """Right, the long way: a Python loop over the anchors, each a logsumexp over its candidates
    (the positive first, then the other view's rows and its own view's other rows)."""
    a, b = tf.math.l2_normalize(z1, axis=1), tf.math.l2_normalize(z2, axis=1)
    n, losses = int(a.shape[0]), []
    for mine, other in ((a, b), (b, a)):
        for i in range(n):
            sims = tf.linalg.matvec(other, mine[i]) / tau
            own = tf.linalg.matvec(mine, mine[i]) / tau
            others = tf.concat([own[:i], own[i + 1:]], axis=0)
            losses.append(tf.reduce_logsumexp(tf.concat([sims, others], 0)) - sims[i])
    return tf.add_n(losses) / (2 * n)


def _half_of_simclr(z1, z2, tau):
    """Right: SimCLR's reduction fixed, (loss_a + loss_b) / 2 averaged, in keras.ops."""
    ops = keras.ops
    a, b = ops.normalize(z1, axis=1), ops.normalize(z2, axis=1)
    n = ops.shape(a)[0]
    big = 1e9 * ops.eye(n)
    aa = ops.matmul(a, ops.transpose(a)) / tau - big
    bb = ops.matmul(b, ops.transpose(b)) / tau - big
    ab = ops.matmul(a, ops.transpose(b)) / tau
    onehot = ops.concatenate([ops.eye(n), ops.zeros((n, n))], axis=1)

    def ce(logits):
        return -ops.sum(onehot * ops.log_softmax(logits, axis=1), axis=1)
    loss_a = ce(ops.concatenate([ab, aa], axis=1))
    loss_b = ce(ops.concatenate([ops.transpose(ab), bb], axis=1))
    return ops.mean(loss_a + loss_b) / 2


def _numpy_round_trip(z1, z2, tau):
    a, b = tf.constant(np.asarray(z1)), tf.constant(np.asarray(z2))
    return tf.constant(_blocks()(a, b, float(tau)).numpy())


BLOCKS_WRONG = {
    "self-similarity left in the candidates": (_blocks(mask=None), r"itself is still a candidate"),
    "the positive at the wrong index (the masked diagonal of aa)": (
        _blocks(order="self first"), r"\+inf: the positive's logit is a masked"),
    "no temperature": (_blocks(temperature=False), r"without the temperature"),
    "embeddings not normalised": (_blocks(normalise=False), r"not normalised"),
    "normalised along the wrong axis": (_blocks(axis=0), r"lengths 0.1 to 10 .*differs"),
    "the textbook exp, which overflows at small tau": (
        _blocks(stable=False), r"tau 0.01.*overflows float32"),
    "the sum over anchors, not the mean": (_blocks(reduce="sum"), r"SUM over the 2N anchors"),
    "SimCLR's code copied: reduce_mean(loss_a + loss_b), twice the mean (almost right)": (
        _blocks(reduce="simclr"), r"TWICE the mean over the 2N anchors: the factor 2 of SimCLR's"),
    "view 1's anchors only (almost right: exact for identical views)": (
        _blocks(directions=1), r"view 1's anchors only"),
    "a mask of 1 subtracted, not -inf (almost right: a weak mask)": (_blocks(mask=1.0), r"differs"),
    "a float64 result": (_blocks(dtype=tf.float64), r"dtype float64, expected float32"),
    "a NumPy round trip": (_numpy_round_trip, r"not differentiable|raised"),
}


def test_nt_xent_blocks_reference_passes():
    report = check("13.nt_xent_blocks", _blocks())
    assert report.ok, str(report)
    assert check("13.nt_xent_blocks", _blocks(mask=1e9)).ok      # SimCLR's LARGE_NUM mask: right too


@pytest.mark.parametrize("right", [_loop_over_anchors, _half_of_simclr])
def test_nt_xent_blocks_right_as_a_loop_or_as_simclr_halved_passes(right):
    report = check("13.nt_xent_blocks", right)
    assert report.ok, str(report)


@pytest.mark.parametrize("product", ["einsum", "broadcast", "keras.ops"])
def test_nt_xent_blocks_right_in_other_styles_passes(product):
    """Float32 noise is not a mistake: at identical views (tau 0.05) the float32 gradient is mostly
    rounding, and an einsum or a broadcast product rounds differently from matmul."""
    report = check("13.nt_xent_blocks", _blocks(product=product))
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", BLOCKS_WRONG)
def test_nt_xent_blocks_wrong_answers_are_rejected(wrong):
    rejected("13.nt_xent_blocks", *BLOCKS_WRONG[wrong])


# -- 13.learned_temperature_step ------------------------------------------------------------------
def _nt_xent(z1, z2, temperature):
    z = tf.math.l2_normalize(tf.concat([z1, z2], axis=0), axis=1)
    logits = tf.matmul(z, z, transpose_b=True) / temperature
    n2 = tf.shape(z)[0]
    logits = tf.where(tf.eye(n2, dtype=tf.bool), -np.inf, logits)
    positive = tf.gather(logits, (tf.range(n2) + n2 // 2) % n2, batch_dims=1)
    return tf.reduce_mean(tf.reduce_logsumexp(logits, axis=1) - positive)


def _make(learn=True, parametrise="log", same_view=False, stop_view=False, applies=1,
          compiled=True, returns="before", fixed_tau=None, one_pass=False, build=True,
          apply="apply_gradients", variable="tf", exp="tf"):
    """A learned-temperature step factory, right by default; each argument plants one mistake."""
    def factory(model, optimizer, initial_temperature):
        tau0 = fixed_tau or initial_temperature
        start = np.log(tau0) if parametrise == "log" else tau0
        t = (keras.Variable(np.float32(start), dtype="float32", trainable=learn) if variable == "keras"
             else tf.Variable(start, dtype=tf.float32, trainable=learn))
        variables = model.trainable_variables + ([t] if learn else [])
        if build:                                    # else: the slots are made on the first call
            optimizer.build(variables)

        def step(x1, x2):
            with tf.GradientTape() as tape:
                if parametrise != "log":
                    tau = t * 1.0
                else:
                    tau = keras.ops.exp(t) if exp == "keras" else tf.exp(t)
                if one_pass:
                    z = model(tf.concat([x1, x2], axis=0), training=True)
                    z1, z2 = tf.split(z, 2, axis=0)
                else:
                    z1 = model(x1, training=True)
                    z2 = model(x1 if same_view else x2, training=True)
                if stop_view:
                    z2 = tf.stop_gradient(z2)
                loss = _nt_xent(z1, z2, tau)
            grads = tape.gradient(loss, variables)
            if applies == 1 and apply == "apply":
                optimizer.apply(grads, variables)
            elif applies == 1:
                optimizer.apply_gradients(zip(grads, variables))
            else:                                    # the model and the temperature apart
                optimizer.apply_gradients(zip(grads[:-1], variables[:-1]))
                optimizer.apply_gradients(zip(grads[-1:], variables[-1:]))
            if returns == "after":
                return loss, tf.exp(t)
            return loss, tau
        return tf.function(step) if compiled else step
    return factory


STEP_WRONG = {
    "the temperature is not trained": (_make(learn=False), r"temperature stays at 0.5 on every call"),
    "tau itself trained, not log tau (almost right: call 1 matches)": (
        _make(parametrise="raw"), r"call 2 .*temperature your step returned"),
    "one view embedded twice": (_make(same_view=True), r"call 1 .*loss your step returned.*differs"),
    "a stop_gradient on view 2 (almost right: the loss of call 1 matches)": (
        _make(stop_view=True), r"call 1 .*weight"),
    "two apply_gradients calls": (_make(applies=2), r"optimizer.iterations"),
    "not compiled": (_make(compiled=False), r"@tf.function"),
    "returns the temperature after the update": (_make(returns="after"),
                                                 r"call 1 .*temperature your step returned"),
    "the initial temperature fixed at 0.5": (_make(fixed_tau=0.5), r"initial tau 0.1, call 1"),
}


def test_learned_temperature_step_reference_passes():
    report = check("13.learned_temperature_step", _make())
    assert report.ok, str(report)
    assert check("13.learned_temperature_step", _make(one_pass=True)).ok   # one pass on both views


STEP_RIGHT = {
    "optimizer.apply(grads, variables), built on first use": _make(apply="apply", build=False),
    "keras.ops.exp for tau, one model call on both views": _make(exp="keras", one_pass=True),
    "log tau a keras.Variable": _make(variable="keras"),
}


@pytest.mark.parametrize("right", STEP_RIGHT)
def test_learned_temperature_step_right_in_other_styles_passes(right):
    report = check("13.learned_temperature_step", STEP_RIGHT[right])
    assert report.ok, str(report)


def test_learned_temperature_step_accepts_an_optimizer_built_on_first_use():
    """The first call then creates the slots and TF traces it twice: that is not a retrace."""
    report = check("13.learned_temperature_step", _make(build=False))
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", STEP_WRONG)
def test_learned_temperature_step_wrong_answers_are_rejected(wrong):
    rejected("13.learned_temperature_step", *STEP_WRONG[wrong])
