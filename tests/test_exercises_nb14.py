"""Notebook 14's exercises: the reference solutions pass, and wrong answers of each kind are
rejected with a message that names what is wrong (at least six per exercise, one almost right:
a stop_gradient that makes it first-order changes no value, only the gradient through it)."""

import numpy as np
import pytest
import tensorflow as tf
from exercise_helpers import rejected

from ctlkit.exercises import check


def forward(params, x):                       # the notebook's functional MLP
    w1, b1, w2, b2, w3, b3 = params
    h = tf.nn.relu(tf.matmul(x, w1) + b1[..., None, :])
    h = tf.nn.relu(tf.matmul(h, w2) + b2[..., None, :])
    return tf.matmul(h, w3) + b3[..., None, :]


def mse(params, x, y):
    return tf.reduce_mean(tf.square(forward(params, x) - y), axis=[-2, -1])


# -- 14.inner_steps -------------------------------------------------------------------------------
def _steps(first_order=False, sign=1.0, at_start=False, in_place=False, watch=True, numpy=False,
           loss="mean", one_step=False, variables_out=False):
    """An inner_steps answer, right by default; each argument plants one mistake."""
    def inner_steps(params, x, y, alpha, steps):
        fast = list(params)
        for _ in range(1 if one_step else steps):
            at = params if at_start else fast
            with tf.GradientTape() as tape:
                if watch:
                    tape.watch(at)
                err = tf.square(forward(at, x) - y)
                value = tf.reduce_mean(err) if loss == "mean" else tf.reduce_sum(err)
            grads = tape.gradient(value, at)
            if first_order:
                grads = [tf.stop_gradient(g) for g in grads]
            if in_place:
                for w, g in zip(params, grads):
                    w.assign_sub(alpha * g)
                fast = list(params)
            else:
                fast = [w - sign * alpha * g for w, g in zip(fast, grads)]
        if numpy:
            fast = [tf.constant(w.numpy()) for w in fast]
        if variables_out:
            fast = [tf.Variable(w) for w in fast]
        return fast
    return inner_steps


INNER_WRONG = {
    "a stop_gradient on the inner gradients (almost right: every value is right)": (
        _steps(first_order=True), r"gradient of a query loss.*first-order"),
    "steps uphill": (_steps(sign=-1.0), r"adapted weights.*differs.*uphill"),
    "every gradient at the starting weights": (
        _steps(at_start=True), r"three steps.*starting weights"),
    "updates the variables in place with assign_sub": (
        _steps(in_place=True), r"changed the variables it was given"),
    "no tape.watch on plain tensors": (_steps(watch=False), r"plain tensors.*raised.*(watched|None)"),
    "a .numpy() round trip": (_steps(numpy=True), r"no gradient flows"),
    "the summed squared error instead of the mean": (_steps(loss="sum"), r"adapted weights.*differs"),
    "one step whatever `steps` says": (_steps(one_step=True), r"three steps.*single step"),
    "new tf.Variables for the adapted weights": (_steps(variables_out=True), r"no gradient flows"),
}


def test_inner_steps_reference_passes():
    report = check("14.inner_steps", _steps())
    assert report.ok, str(report)


def test_inner_steps_with_a_keras_style_loss_passes():
    def inner_steps(params, x, y, alpha, steps):
        import keras
        fast = params
        for _ in range(steps):
            with tf.GradientTape() as tape:
                tape.watch(fast)
                loss = keras.losses.MeanSquaredError()(y, forward(fast, x))
            fast = [w - alpha * g for w, g in zip(fast, tape.gradient(loss, fast))]
        return fast
    report = check("14.inner_steps", inner_steps)
    assert report.ok, str(report)


def _inner_step(params, x, y, alpha):            # section 3's inner_step, as the notebook has it
    with tf.GradientTape() as tape:
        tape.watch(params)
        loss = mse(params, x, y)
    return [w - alpha * g for w, g in zip(params, tape.gradient(loss, params))]


def _steps_with_the_notebook_helper(params, x, y, alpha, steps):
    """Right: section 3's inner_step called `steps` times (a tf.identity copy first)."""
    fast = [tf.identity(p) for p in params]
    for _ in range(steps):
        fast = _inner_step(fast, x, y, alpha)
    return fast


def _steps_keras_ops(params, x, y, alpha, steps):
    """Right: keras.ops arithmetic, a tape that watches only what it is told."""
    import keras
    fast = list(params)
    for _ in range(steps):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(fast)
            loss = keras.ops.mean(keras.ops.square(forward(fast, x) - y))
        grads = tape.gradient(loss, fast)
        fast = [keras.ops.subtract(w, keras.ops.multiply(alpha, g)) for w, g in zip(fast, grads)]
    return fast


INNER_RIGHT = {"section 3's inner_step in a loop": _steps_with_the_notebook_helper,
               "keras.ops, watch_accessed_variables=False": _steps_keras_ops}


@pytest.mark.parametrize("right", INNER_RIGHT)
def test_inner_steps_right_in_other_styles_passes(right):
    report = check("14.inner_steps", INNER_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", INNER_WRONG)
def test_inner_steps_wrong_answers_are_rejected(wrong):
    rejected("14.inner_steps", *INNER_WRONG[wrong])


# -- 14.meta_gradient -----------------------------------------------------------------------------
def _meta(first_order=False, reduce="mean", swap=False, adapt=True, sign=1.0, in_place=False,
          outer_wrt_fast=False, returns="grads", watch=True):
    """A maml_meta_gradient answer, right by default; each argument plants one mistake."""
    def maml_meta_gradient(params, tasks, alpha):
        with tf.GradientTape(persistent=outer_wrt_fast) as outer:
            if watch:
                outer.watch(params)
            losses, fasts = [], []
            for xs, ys, xq, yq in tasks:
                if swap:
                    xs, ys, xq, yq = xq, yq, xs, ys
                if adapt:
                    with tf.GradientTape() as inner:
                        if watch:
                            inner.watch(params)
                        support = mse(params, xs, ys)
                    grads = inner.gradient(support, params)
                    if first_order:
                        grads = [tf.stop_gradient(g) for g in grads]
                    if in_place:
                        for w, g in zip(params, grads):
                            w.assign_sub(alpha * g)
                        fast = params
                    else:
                        fast = [w - sign * alpha * g for w, g in zip(params, grads)]
                else:
                    fast = params
                fasts.append(fast)
                losses.append(mse(fast, xq, yq))
            meta_loss = tf.add_n(losses)
            if reduce == "mean":
                meta_loss = meta_loss / len(tasks)
        if outer_wrt_fast:                    # d meta_loss / d fast weights, summed over tasks
            per_task = [outer.gradient(meta_loss, f) for f in fasts]
            grads = [tf.add_n(list(gs)) for gs in zip(*per_task)]
        else:
            grads = outer.gradient(meta_loss, params)
        return (meta_loss, grads) if returns == "pair" else grads
    return maml_meta_gradient


META_WRONG = {
    "first-order: a stop_gradient on the inner gradients (almost right)": (
        _meta(first_order=True), r"meta-gradient.*differs.*first-order"),
    "the outer gradient w.r.t. the adapted weights": (
        _meta(outer_wrt_fast=True), r"meta-gradient.*differs.*first-order"),
    "the sum over tasks, not the mean": (_meta(reduce="sum"), r"three tasks.*sum over tasks"),
    "support and query swapped": (_meta(swap=True), r"differs.*swapped"),
    "no inner step: the query loss at params": (_meta(adapt=False), r"differs.*at params themselves"),
    "an inner step uphill": (_meta(sign=-1.0), r"differs.*uphill"),
    "the inner step assigned to the variables in place": (
        _meta(in_place=True), r"changed the variables it was given"),
    "returns (loss, grads)": (_meta(returns="pair"), r"returned 2 items"),
    "no watch on plain tensors": (_meta(watch=False), r"plain tensors.*(raised|None)"),
}


def test_meta_gradient_reference_passes():
    report = check("14.meta_gradient", _meta())
    assert report.ok, str(report)


def _meta_per_task_tapes(params, tasks, alpha):
    """Right, another order: one outer tape per task, the gradients averaged afterwards."""
    total = None
    for xs, ys, xq, yq in tasks:
        with tf.GradientTape() as outer:
            outer.watch(params)
            loss = mse(_inner_step(params, xs, ys, alpha), xq, yq)
        g = outer.gradient(loss, params)
        total = g if total is None else [t + x for t, x in zip(total, g)]
    return [t / len(tasks) for t in total]


def _meta_keras_ops(params, tasks, alpha):
    """Right: keras.ops, the mean of the stacked query losses, a persistent outer tape."""
    import keras
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(params)
        losses = []
        for xs, ys, xq, yq in tasks:
            with tf.GradientTape() as inner:
                inner.watch(params)
                support = keras.ops.mean(keras.ops.square(forward(params, xs) - ys))
            fast = [w - alpha * g for w, g in zip(params, inner.gradient(support, params))]
            losses.append(keras.ops.mean(keras.ops.square(forward(fast, xq) - yq)))
        meta = keras.ops.mean(keras.ops.stack(losses))
    return outer.gradient(meta, params)


META_RIGHT = {"one outer tape per task, averaged": _meta_per_task_tapes,
              "keras.ops, the mean of stacked losses, a persistent tape": _meta_keras_ops}


@pytest.mark.parametrize("right", META_RIGHT)
def test_meta_gradient_right_in_other_styles_passes(right):
    report = check("14.meta_gradient", META_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", META_WRONG)
def test_meta_gradient_wrong_answers_are_rejected(wrong):
    rejected("14.meta_gradient", *META_WRONG[wrong])


def test_the_second_order_term_is_large_enough_to_tell_first_order_apart():
    """The checker's cases must separate first- from second-order well beyond its tolerance."""
    from ctlkit.exercises import nb14
    for seed, _, specs, alpha in nb14.META_CASES.values():
        tasks = [nb14.sinusoid_task(s, a, p, n_s, n_q) for s, a, p, n_s, n_q in specs]
        params = nb14.random_params(seed)
        second = nb14._reference_meta_gradient(params, tasks, alpha)
        first = nb14._reference_meta_gradient(params, tasks, alpha, first_order=True)
        gap = max(float(tf.reduce_max(tf.abs(a - b))) for a, b in zip(first, second))
        assert gap > 100 * 1e-5 * nb14.max_abs(second), (specs, gap)
    assert np.isfinite(gap)


# -- 14.meta_sgd_gradient -------------------------------------------------------------------------
def _meta_sgd(first_order=False, reduce="mean", sign=1.0, watch_alphas=True, rates="entries",
              returns="pair", in_place=False):
    """A Meta-SGD meta-gradient, right by default; each argument plants one mistake."""
    def meta_sgd_gradient(params, alphas, tasks):
        watched = list(params) + (list(alphas) if watch_alphas else [])
        with tf.GradientTape() as outer:
            outer.watch(watched)
            losses = []
            for xs, ys, xq, yq in tasks:
                with tf.GradientTape() as inner:
                    inner.watch(params)
                    support = mse(params, xs, ys)
                grads = inner.gradient(support, params)
                if first_order:
                    grads = [tf.stop_gradient(g) for g in grads]
                lr = [tf.reduce_mean(a) for a in alphas] if rates == "mean" else alphas
                if rates == "scalar":
                    lr = [0.01] * len(alphas)
                if in_place:
                    for w, a, g in zip(params, lr, grads):
                        w.assign_sub(a * g)
                    fast = params
                else:
                    fast = [w - sign * a * g for w, a, g in zip(params, lr, grads)]
                losses.append(mse(fast, xq, yq))
            meta = tf.add_n(losses)
            if reduce == "mean":
                meta = meta / len(tasks)
        g = outer.gradient(meta, list(params) + list(alphas))
        if returns == "flat":
            return g
        if returns == "params only":
            return g[:6]
        return g[:6], g[6:]
    return meta_sgd_gradient


def _meta_sgd_per_task_tapes(params, alphas, tasks):
    """Right, another order: one outer tape per task (persistent inner), gradients averaged."""
    total_p, total_a = None, None
    for xs, ys, xq, yq in tasks:
        with tf.GradientTape(persistent=True) as outer:
            outer.watch(params)
            outer.watch(alphas)
            with tf.GradientTape() as inner:
                inner.watch(params)
                support = tf.reduce_mean(tf.square(forward(params, xs) - ys))
            fast = [tf.subtract(w, tf.multiply(a, g))
                    for w, a, g in zip(params, alphas, inner.gradient(support, params))]
            query = tf.reduce_mean(tf.square(forward(fast, xq) - yq))
        gp, ga = outer.gradient(query, params), outer.gradient(query, alphas)
        total_p = gp if total_p is None else [t + g for t, g in zip(total_p, gp)]
        total_a = ga if total_a is None else [t + g for t, g in zip(total_a, ga)]
    return [t / len(tasks) for t in total_p], [t / len(tasks) for t in total_a]


def _meta_sgd_keras_ops(params, alphas, tasks):
    """Right, in keras.ops, the meta-loss as the mean of a stacked vector."""
    import keras
    ops = keras.ops
    with tf.GradientTape() as outer:
        outer.watch(list(params) + list(alphas))
        losses = []
        for xs, ys, xq, yq in tasks:
            with tf.GradientTape() as inner:
                inner.watch(params)
                support = ops.mean(ops.square(forward(params, xs) - ys))
            fast = [w - a * g for w, a, g in zip(params, alphas, inner.gradient(support, params))]
            losses.append(ops.mean(ops.square(forward(fast, xq) - yq)))
        meta = ops.mean(ops.stack(losses))
    g = outer.gradient(meta, list(params) + list(alphas))
    return g[:6], g[6:]


META_SGD_RIGHT = {"one outer tape over the tasks (the reference's style)": _meta_sgd(),
                  "one outer tape per task, the gradients averaged": _meta_sgd_per_task_tapes,
                  "keras.ops, the mean of the stacked task losses": _meta_sgd_keras_ops}

META_SGD_WRONG = {
    "first-order: a stop_gradient on the inner gradients (almost right: alphas' gradient is right)": (
        _meta_sgd(first_order=True), r"w.r.t. params.*differs.*first-order Meta-SGD"),
    "the sum over tasks": (_meta_sgd(reduce="sum"), r"three tasks.*sum over tasks"),
    "an inner step uphill": (_meta_sgd(sign=-1.0), r"uphill"),
    "one rate per tensor, the mean of its alphas": (_meta_sgd(rates="mean"), r"one rate per weight tensor"),
    "MAML's fixed alpha = 0.01, the alphas unused": (_meta_sgd(rates="scalar"), r"alphas.*None|differs"),
    "alphas not watched (plain tensors)": (_meta_sgd(watch_alphas=False), r"plain tensors.*watch the alphas"),
    "a flat list of 12 gradients": (_meta_sgd(returns="flat"), r"returned 12 items; expected a pair"),
    "the params' gradients only": (_meta_sgd(returns="params only"), r"returned 6 items"),
    "the inner step assigned in place": (_meta_sgd(in_place=True), r"changed the variables"),
}


@pytest.mark.parametrize("right", META_SGD_RIGHT)
def test_meta_sgd_gradient_right_in_other_styles_passes(right):
    report = check("14.meta_sgd_gradient", META_SGD_RIGHT[right])
    assert report.ok, str(report)


@pytest.mark.parametrize("wrong", META_SGD_WRONG)
def test_meta_sgd_gradient_wrong_answers_are_rejected(wrong):
    rejected("14.meta_sgd_gradient", *META_SGD_WRONG[wrong])


def test_meta_sgd_second_order_term_is_large_enough_to_tell_first_order_apart():
    from ctlkit.exercises import nb14
    for seed, _, _, specs, (low, high) in nb14.META_SGD_CASES.values():
        tasks = [nb14.sinusoid_task(s, a, p, n_s, n_q) for s, a, p, n_s, n_q in specs]
        params, rates = nb14.random_params(seed), nb14._alphas(seed + 100, False, low, high)
        second = nb14._reference_meta_sgd(params, rates, tasks)[0]
        first = nb14._reference_meta_sgd(params, rates, tasks, first_order=True)[0]
        gap = max(float(tf.reduce_max(tf.abs(a - b))) for a, b in zip(first, second))
        assert gap > 100 * 1e-5 * nb14.max_abs(second), (specs, gap)
