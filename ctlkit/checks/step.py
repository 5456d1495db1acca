"""Checking a learner's training step: train one fresh model with it and one with the
reference's step, batch by batch, and say where they first part.

    report = ctlkit.checks.check_step(my_factory, reference_factory, build, batches)

After each batch the step's returned value, every weight of the model and (optionally) the
optimizer's state must match the reference's. A step that is not a ``tf.function``, leaves
every weight where it was, or retraces, is named as such.
"""
from __future__ import annotations

import numpy as np

from .cases import checker_name, labelled_cases, own_copy
from .errors import call, call_creating
from .report import Report, _simple, compare, factor, factor_words, tolerance

_EXCUSED = ("; not counting the second trace of the first call, which created variables, such as "
            "the optimizer's slots: TF traces such a call twice")


def _weights(model):
    """[(a name for messages, value)] of every weight (trainable or not), in the model's order."""
    out = []
    for k, v in enumerate(model.weights):
        layer = (getattr(v, "path", None) or v.name).split("/")
        short = "/".join(layer[-2:]) if len(layer) > 1 else layer[0]
        out.append((f"weight {k} ({short.split(':')[0]})", np.array(v.numpy())))
    return out


def _weight_problems(got, want, label, rtol, atol):
    if len(got) != len(want):
        return [f"on {label}, the model has {len(got)} weights, the reference's {len(want)}."]
    return [p for (name, g), (_, w) in zip(got, want)
            for p in compare(g, w, where=f"on {label}, {name} after the step", rtol=rtol, atol=atol)]


def _update_factor(before, got, want):
    """c when the learner's update (every weight's change on this call) is c times the
    reference's, else None. A change is the difference of two float32 weights, so an entry whose
    change is within a thousand roundings of the weight is left out: rounding, not the update."""
    def flat(ws):
        return np.concatenate([np.asarray(w, np.float64).ravel() for _, w in ws])
    try:
        start, mine, theirs = flat(before), flat(got), flat(want)
    except ValueError:
        return None
    rounding = 1e3 * np.finfo(np.float32).eps * np.maximum(np.abs(start), np.abs(theirs))
    keep = np.abs(theirs - start) > rounding
    if not keep.any():
        return None
    return factor(mine[keep] - start[keep], theirs[keep] - start[keep])


def _slip(c, slips):
    """What the exercise says a factor c means (slips: {factor: meaning}), or ''."""
    for f, meaning in (slips or {}).items():
        if c is not None and abs(c / f - 1.0) < 1e-3:
            return f": {meaning}"
    return ""


def check_step(factory, reference, build, batches, *, args=(), state=None, name=None,
               rtol=1e-5, atol=1e-6, max_traces=1, slips=None, verbose=False) -> Report:
    """Train one fresh setup with the learner's step and one with the reference's; compare.

    factory:    the learner's ``factory(model, optimizer, *args) -> step``; ``step(*batch)``
                returns the loss (or whatever the exercise asks) and updates the model.
    reference:  the same, written right.
    build:      ``build() -> (model, optimizer)``, a fresh pair that starts from the same point
                each time it is called (seed it, or set fixed weights).
    batches:    a dict ``{label: batch}`` (or a list of batches); a batch is the tuple of
                arguments of one call. The label names the batch in messages, e.g.
                ``{"a batch whose gradient norm is above the clip": (x, y)}``; include one batch
                where the behaviour under test changes the result.
    state:      ``state(model, optimizer) -> dict`` of more things to compare after each call
                (the loss scale, a step counter).
    slips:      ``{factor: what it means}``: when the update (or the returned value) is exactly
                that many times the reference's, the message names the slip, e.g.
                ``{2**15: "the gradients were never unscaled"}``. Any exact factor is reported.
    After every call the returned value, every weight of the model and ``state`` must match the
    reference's; the first call that differs is reported. The step must be a ``tf.function``
    that traces at most ``max_traces`` times over all batches (give batches of one shape unless
    the exercise is about shapes).
    """
    for arg, f in (("factory", factory), ("reference", reference), ("build", build)):
        if not callable(f):
            raise TypeError(f"{arg} must be a function, got {type(f).__name__}")
    if state is not None and not callable(state):
        raise TypeError(f"state must be a function (model, optimizer) -> dict, or None, got "
                        f"{type(state).__name__}")
    cases = labelled_cases(batches)
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    name = checker_name(name, factory, verbose=verbose)
    rtol, atol = tolerance(rtol, "rtol"), tolerance(atol, "atol")

    def report(problems):
        r = Report(name=name, problems=problems, cases=len(cases))
        if verbose:
            print(r)
        return r

    mine, theirs = build(), build()
    step, err = call(factory, (*mine, *args), name)
    if err:
        return report([err])
    ref_step, err = call(reference, (*theirs, *args), "the reference")
    if err:
        raise RuntimeError(f"checker bug: {err}")
    if not callable(step):
        return report([f"{name} returned {type(step).__name__}, not a step function: return the "
                       f"step (e.g. `return step`), not its result."])
    if not hasattr(step, "experimental_get_tracing_count"):
        return report([f"{name} returned a plain Python function: compile the step with "
                       f"@tf.function (or tf.function(step)) so it runs as one graph."])
    start = _weights(mine[0])
    excused = 0          # the second trace of a first call that created variables
    for k, (label, batch) in enumerate(cases):
        before = _weights(mine[0])       # the same as the reference's: every earlier call matched
        want, err = call(ref_step, own_copy(batch), "the reference")
        if err:
            raise RuntimeError(f"checker bug: {err} (on {label})")
        traced = step.experimental_get_tracing_count()
        got, err, created = call_creating(step, own_copy(batch), f"on {label}, your step")
        if err:
            return report([err])
        if k == 0 and created and step.experimental_get_tracing_count() - traced >= 2:
            excused = 1
        problems = compare(got, want, where=f"on {label}, the value your step returned",
                           rtol=rtol, atol=atol)
        if problems and slips:
            try:
                c = factor(np.asarray(got, np.float64), np.asarray(want, np.float64))
            except (TypeError, ValueError):
                c = None
            problems = [p.rstrip(".") + _slip(c, slips) + "." if _slip(c, slips) else p
                        for p in problems]
        w_got, w_want = _weights(mine[0]), _weights(theirs[0])
        weight_problems = _weight_problems(w_got, w_want, label, rtol, atol)
        unchanged = lambda ws: all(np.array_equal(a, b) for (_, a), (_, b) in zip(ws, start))  # noqa: E731
        if weight_problems and unchanged(w_got) and not unchanged(w_want):
            weight_problems = [f"on {label}, your step left every weight unchanged where the "
                               f"reference updated them: is optimizer.apply_gradients called?"]
        elif weight_problems:
            c = _update_factor(before, w_got, w_want)
            if c is not None and (_simple(c) or _slip(c, slips)):
                weight_problems = [f"on {label}, your step's update (the change of every weight) "
                                   f"is {factor_words(c)} times the reference's{_slip(c, slips)}.",
                                   *weight_problems[:1]]
        problems += weight_problems[:2]
        if state is not None and not weight_problems:
            problems += compare(state(*mine), state(*theirs),
                                where=f"on {label}, the optimizer state", rtol=rtol, atol=atol)
        if problems:
            return report(problems)
    traces = step.experimental_get_tracing_count() - excused
    if traces > max_traces:
        return report([f"your step traced {traces} times for {len(cases)} calls (allowed: "
                       f"{max_traces}{_EXCUSED if excused else ''}): a Python number or a new "
                       f"Python object in the arguments, or a tf.function created inside the step, "
                       f"retraces it."])
    return report([])
