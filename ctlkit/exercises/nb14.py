"""Notebook 14, meta-learning: inner steps on explicit weights, the MAML meta-gradient.

Both checkers call the learner's function on the 1-40-40-1 ReLU MLP of the notebook (its weights
as a list of six tensors or tf.Variables), under an outer GradientTape, and compare what a learner
can get wrong without any value changing: the gradient that flows back through the inner steps
(a stop_gradient makes it first-order), and whether the variables were left alone. When a wrong
result matches a known mistake (first-order, summed over tasks, support and query swapped...),
the report says which.
"""
from __future__ import annotations

import tensorflow as tf

from ..checks import Report
from ..checks.errors import call
from ._sinusoids import (
    changed,
    compare_lists,
    matches,
    max_abs,
    mse,
    random_params,
    sinusoid_task,
    structure_problems,
)


def _diagnose(got, candidates):
    """The hint of the first known mistake that the result matches, or ''. ``candidates``:
    [(a function computing what that mistake gives, its hint)], tried in order."""
    for make, hint in candidates:
        try:
            if matches(got, make()):
                return " " + hint
        except Exception:  # a candidate that cannot be compared is no match
            continue
    return ""


def _report(name, problems, cases, shown=2):
    """The problems of the first ``shown`` failing cases (one or two each), then how many more
    cases failed: the same mistake usually fails every case, and once is enough to read."""
    by_case = {}
    for p in problems:
        by_case.setdefault(p.split(": ")[0], []).append(p)
    kept = [p for ps in list(by_case.values())[:shown] for p in ps[:2]]
    more = len(by_case) - shown
    if more > 0:
        kept.append(f"... and {more} more case{'s' if more > 1 else ''} with problems.")
    return Report(name=name, problems=kept, cases=cases)


def _run(fn, args, variables, label):
    """Call fn(*args) under an outer tape watching ``variables``: (result, tape, problems)."""
    tape = tf.GradientTape(persistent=True)
    with tape:
        tape.watch(variables)
        got, err = call(fn, args, label)
    return got, tape, [err] if err else []


# -- 14.inner_steps -------------------------------------------------------------------------------
def _reference_inner_steps(params, x, y, alpha, steps, first_order=False, at_start=False,
                           sign=1.0):
    fast = list(params)
    for _ in range(steps):
        at = params if at_start else fast
        with tf.GradientTape() as tape:
            tape.watch(at)
            loss = mse(at, x, y)
        grads = tape.gradient(loss, at)
        if first_order:
            grads = [tf.stop_gradient(g) for g in grads]
        fast = [w - sign * alpha * g for w, g in zip(fast, grads)]
    return fast


def _outer_gradient(fast_fn, params, xq, yq):
    """d(query loss at fast_fn(params)) / d params, for a reference variant."""
    with tf.GradientTape() as tape:
        tape.watch(params)
        loss = mse(fast_fn(params), xq, yq)
    return tape.gradient(loss, params)


INNER_CASES = {   # label: (params seed, as variables, task (seed, amplitude, phase, n_support), alpha, steps)
    "one step from a fresh init, the weights as plain tensors (the tape must watch them)":
        (1, False, (11, 3.0, 0.5, 10), 0.01, 1),
    "one step, the weights as tf.Variables (they must not change)":
        (2, True, (12, 4.0, 2.0, 10), 0.01, 1),
    "three steps (each gradient at the weights the previous step made)":
        (3, False, (13, 2.5, 1.0, 10), 0.01, 3),
    "two steps of alpha = 0.05 on a task of amplitude 5, as tf.Variables":
        (4, True, (14, 5.0, 2.8, 10), 0.05, 2),
    "one step on K = 5 points": (5, False, (15, 1.5, 0.2, 5), 0.02, 1),
}


def inner_steps(fn):
    """``fn(params, x, y, alpha, steps)``: the adapted weights after ``steps`` gradient steps of
    size ``alpha`` on one task's mean squared error, as new tensors."""
    problems, cases = [], 0
    for label, (seed, variables, task_spec, alpha, steps) in INNER_CASES.items():
        cases += 1
        xs, ys, xq, yq = sinusoid_task(*task_spec)
        mine, ref = random_params(seed, variables), random_params(seed)
        before = [p.numpy() for p in mine]
        got, tape, err = _run(fn, (mine, xs, ys, alpha, steps), mine, label)
        if err:
            problems += err
            if "not written yet" in err[0]:
                break
            continue
        case = structure_problems(got, label, "the adapted weights")
        moved = changed(mine, before)
        if moved:
            case.append(f"{label}: your function changed the variables it was given (items "
                        f"{moved}): an inner step must make new tensors, w - alpha * g, and "
                        f"leave the meta-parameters alone (no assign / assign_sub).")
        if case:
            problems += case
            continue
        want = _reference_inner_steps(ref, xs, ys, alpha, steps)
        value = compare_lists(got, want, f"{label}: the adapted weights", max_abs(want))
        if value:
            problems.append(value[0] + _diagnose(got, [
                (lambda: _reference_inner_steps(ref, xs, ys, alpha, steps, sign=-1.0),
                 "It matches steps uphill (w + alpha * g): step against the gradient."),
                (lambda: _reference_inner_steps(ref, xs, ys, alpha, steps, at_start=True),
                 "It matches taking every step's gradient at the starting weights: compute each "
                 "gradient at the weights the previous step made."),
                (lambda: _reference_inner_steps(ref, xs, ys, alpha, 1),
                 "It matches a single step: take `steps` of them.")]))
            continue
        with tape:
            query_loss = mse(got, xq, yq)
        g_got = tape.gradient(query_loss, mine)
        g_want = _outer_gradient(lambda p: _reference_inner_steps(p, xs, ys, alpha, steps),
                                 ref, xq, yq)
        if any(g is None for g in g_got):
            problems.append(f"{label}: no gradient flows from your adapted weights back to "
                            f"params (items {[k for k, g in enumerate(g_got) if g is None]}): "
                            f"a .numpy() round trip or new tf.Variables cut the chain, and MAML "
                            f"needs it.")
            continue
        grad = compare_lists(g_got, g_want, f"{label}: the gradient of a query loss at your "
                              f"adapted weights w.r.t. params", max_abs(g_want))
        if grad:
            problems.append(grad[0] + _diagnose(g_got, [(
                lambda: _outer_gradient(lambda p: _reference_inner_steps(
                    p, xs, ys, alpha, steps, first_order=True), ref, xq, yq),
                "It matches the first-order gradient: a tf.stop_gradient on the inner gradients "
                "(or a gradient computed off the tape) drops the second-order term.")]))
    return _report("inner_steps", problems, cases)


# -- 14.meta_gradient -----------------------------------------------------------------------------
def _reference_meta_gradient(params, tasks, alpha, first_order=False, reduce="mean",
                             swap=False, adapt=True, sign=1.0):
    with tf.GradientTape() as outer:
        outer.watch(params)
        losses = []
        for xs, ys, xq, yq in tasks:
            if swap:
                xs, ys, xq, yq = xq, yq, xs, ys
            fast = (_reference_inner_steps(params, xs, ys, alpha, 1, first_order, sign=sign)
                    if adapt else params)
            losses.append(mse(fast, xq, yq))
        total = tf.add_n(losses)
        meta_loss = total / len(tasks) if reduce == "mean" else total
    return outer.gradient(meta_loss, params)


META_CASES = {   # label: (params seed, as variables, tasks [(seed, amplitude, phase, n_s, n_q)], alpha)
    "one task, the weights as tf.Variables (they must not change)":
        (21, True, [(31, 3.0, 0.7, 10, 20)], 0.01),
    "three tasks (the meta-loss is the mean over tasks)":
        (22, True, [(32, 1.0, 0.1, 10, 20), (33, 4.5, 2.0, 10, 20), (34, 2.5, 3.0, 10, 20)], 0.01),
    "two tasks of amplitude 5, alpha = 0.05 (a large second-order term)":
        (23, True, [(35, 5.0, 1.2, 10, 20), (36, 4.8, 2.6, 10, 20)], 0.05),
    "the weights as plain tensors (the tapes must watch them)":
        (24, False, [(37, 2.0, 1.5, 10, 20), (38, 3.5, 0.4, 10, 20)], 0.02),
    "5 support and 30 query points per task": (25, True, [(39, 4.0, 2.2, 5, 30)], 0.03),
}


def meta_gradient(fn):
    """``fn(params, tasks, alpha)``: d/d params of the mean over ``tasks`` of the query loss after
    one inner step of size ``alpha`` on the support points, second order."""
    problems, cases = [], 0
    for label, (seed, variables, specs, alpha) in META_CASES.items():
        cases += 1
        tasks = [sinusoid_task(s, a, p, n_s, n_q) for s, a, p, n_s, n_q in specs]
        mine, ref = random_params(seed, variables), random_params(seed)
        before = [p.numpy() for p in mine]
        got, err = call(fn, (mine, list(tasks), alpha), label)
        if err:
            problems.append(err)
            if "not written yet" in err:
                break
            continue
        case = structure_problems(got, label, "the meta-gradient")
        moved = changed(mine, before)
        if moved:
            case.append(f"{label}: your function changed the variables it was given (items "
                        f"{moved}): the inner step must make new tensors, not assign to the "
                        f"meta-parameters (they take the outer step only, after the gradient).")
        if case:
            problems += case
            continue
        want = _reference_meta_gradient(ref, tasks, alpha)
        value = compare_lists(got, want, f"{label}: the meta-gradient", max_abs(want))
        if not value:
            continue
        problems.append(value[0] + _diagnose(got, [
            (lambda: _reference_meta_gradient(ref, tasks, alpha, first_order=True),
             "It matches first-order MAML: the inner gradient must be computed inside the outer "
             "tape's `with` block and not pass through tf.stop_gradient (and the outer gradient "
             "is taken w.r.t. params, not the adapted weights)."),
            (lambda: _reference_meta_gradient(ref, tasks, alpha, reduce="sum"),
             "It matches the sum over tasks: the meta-loss is the mean of the tasks' query losses."),
            (lambda: _reference_meta_gradient(ref, tasks, alpha, swap=True),
             "It matches support and query swapped: adapt on (x_s, y_s), measure on (x_q, y_q)."),
            (lambda: _reference_meta_gradient(ref, tasks, alpha, adapt=False),
             "It matches the gradient of the query loss at params themselves: measure the query "
             "loss at the adapted weights."),
            (lambda: _reference_meta_gradient(ref, tasks, alpha, sign=-1.0),
             "It matches an inner step uphill (w + alpha * g): step against the gradient."),
            (lambda: [-g for g in want], "It is the meta-gradient with its sign flipped.")]))
    return _report("maml_meta_gradient", problems, cases)


# -- 14.meta_sgd_gradient ------------------------------------------------------------------------
def _alphas(seed, variables=False, low=0.005, high=0.04):
    """Meta-SGD's learning rates: one per weight entry, shaped like params, between low and high."""
    import numpy as np

    from ._sinusoids import SHAPES
    rng = np.random.default_rng(seed)
    out = [tf.constant(rng.uniform(low, high, shape), tf.float32) for shape in SHAPES]
    return [tf.Variable(a) for a in out] if variables else out


def _reference_meta_sgd(params, alphas, tasks, first_order=False, reduce="mean", sign=1.0,
                        alpha_mean=False):
    """d/d(params, alphas) of the mean query loss after one Meta-SGD step per task,
    theta' = theta - alpha * grad (entry by entry), second order."""
    watched = list(params) + list(alphas)
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
            rates = [tf.reduce_mean(a) for a in alphas] if alpha_mean else alphas
            fast = [w - sign * a * g for w, a, g in zip(params, rates, grads)]
            losses.append(mse(fast, xq, yq))
        total = tf.add_n(losses)
        meta_loss = total / len(tasks) if reduce == "mean" else total
    g = outer.gradient(meta_loss, watched)
    n = len(params)
    return list(g[:n]), list(g[n:])


META_SGD_CASES = {   # label: (seed, params as variables, alphas as variables, tasks, alpha range)
    "one task, params and alphas as tf.Variables (neither may change)":
        (41, True, True, [(51, 3.0, 0.7, 10, 20)], (0.005, 0.04)),
    "three tasks (the meta-loss is the mean over tasks)":
        (42, True, True, [(52, 1.0, 0.1, 10, 20), (53, 4.5, 2.0, 10, 20), (54, 2.5, 3.0, 10, 20)],
         (0.005, 0.04)),
    "params and alphas as plain tensors (the outer tape must watch both)":
        (43, False, False, [(55, 2.0, 1.5, 10, 20), (56, 3.5, 0.4, 10, 20)], (0.01, 0.05)),
    "5 support and 30 query points, rates from 0.001 to 0.05":
        (44, True, True, [(57, 4.0, 2.2, 5, 30)], (0.001, 0.05)),
}


def meta_sgd_gradient(fn):
    """``fn(params, alphas, tasks)``: (d meta-loss / d params, d meta-loss / d alphas), where the
    inner step is theta' = theta - alphas * grad, entry by entry, and the meta-loss is the mean
    over tasks of the query loss at theta'."""
    problems, cases = [], 0
    for label, (seed, p_vars, a_vars, specs, (low, high)) in META_SGD_CASES.items():
        cases += 1
        tasks = [sinusoid_task(s, a, p, n_s, n_q) for s, a, p, n_s, n_q in specs]
        mine, ref = random_params(seed, p_vars), random_params(seed)
        rates, ref_rates = _alphas(seed + 100, a_vars, low, high), _alphas(seed + 100, False, low, high)
        before = [v.numpy() for v in mine + rates]
        got, err = call(fn, (mine, rates, list(tasks)), label)
        if err:
            problems.append(err)
            if "not written yet" in err:
                break
            continue
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            what = (f"{len(got)} items" if isinstance(got, (tuple, list))
                    else f"a {type(got).__name__}")
            problems.append(f"{label}: returned {what}; expected a pair (the gradients w.r.t. "
                            f"params, the gradients w.r.t. alphas), each a list of six tensors.")
            continue
        got_p, got_a = got
        case = (structure_problems(got_p, label, "the gradients w.r.t. params")
                or structure_problems(got_a, label, "the gradients w.r.t. alphas"))
        moved = changed(mine + rates, before)
        if moved:
            case.append(f"{label}: your function changed the variables it was given (items "
                        f"{moved} of params + alphas): the inner step makes new tensors; only "
                        f"the outer optimiser, afterwards, updates params and alphas.")
        if case:
            if not moved and any("item" in p and "is None" in p for p in case) \
                    and isinstance(got_a, (list, tuple)) and any(g is None for g in got_a):
                case = [f"{label}: the gradient w.r.t. alphas is None: the outer tape must "
                        f"watch the alphas too (tape.watch(params + alphas)), and the inner "
                        f"step must multiply each gradient by its alpha with TensorFlow ops."]
            problems += case
            continue
        want_p, want_a = _reference_meta_sgd(ref, ref_rates, tasks)
        alpha_diff = compare_lists(got_a, want_a, f"{label}: the gradient w.r.t. alphas",
                                   max_abs(want_a))
        param_diff = compare_lists(got_p, want_p, f"{label}: the gradient w.r.t. params",
                                   max_abs(want_p))
        if not alpha_diff and not param_diff:
            continue
        variants = [
            (dict(first_order=True),
             "It matches first-order Meta-SGD: the inner gradient must stay on the outer tape (no "
             "tf.stop_gradient), so that the params' gradient keeps its Hessian term; the alphas' "
             "gradient is the same either way."),
            (dict(reduce="sum"),
             "It matches the sum over tasks: the meta-loss is the mean of the tasks' query losses."),
            (dict(sign=-1.0),
             "It matches an inner step uphill (theta + alpha * g): step against the gradient."),
            (dict(alpha_mean=True),
             "It matches one rate per weight tensor (the mean of its alphas): Meta-SGD multiplies "
             "entry by entry, theta' = theta - alpha * g with alpha shaped like theta."),
        ]
        hint = ""
        for settings, words in variants:
            try:
                vp, va = _reference_meta_sgd(ref, ref_rates, tasks, **settings)
            except Exception:  # a variant that cannot run is no match
                continue
            if matches(got_p, vp) and matches(got_a, va):
                hint = " " + words
                break
        problems.append((param_diff or alpha_diff)[0] + hint)
    return _report("meta_sgd_gradient", problems, cases)


EXERCISES = {"inner_steps": inner_steps, "meta_gradient": meta_gradient,
             "meta_sgd_gradient": meta_sgd_gradient}
