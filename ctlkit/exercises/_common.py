"""What several exercise modules share: joining reports and keeping them short, and the small
digits-shaped models and batches that several step checkers train."""
from __future__ import annotations

import numpy as np

from ..checks import Report


def digits_like(n, seed, scale=1.0):
    """``n`` random 8x8x1 images in [0, scale] (float32) and labels 0..9 (int32), as NumPy arrays:
    the shapes of the 8x8 digits the notebooks train on."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(0, scale, (n, 8, 8, 1)).astype("float32"),
            rng.integers(0, 10, n).astype("int32"))


def digits_mlp(hidden, activation, seed, **dense_kwargs):
    """The notebooks' small MLP on 8x8x1 digits (flatten, one hidden layer, 10 logits), its weights
    drawn after ``keras.utils.set_random_seed(seed)``, so each call gives the same model.
    ``dense_kwargs`` go to both Dense layers (e.g. a ``kernel_regularizer``)."""
    import keras
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                             keras.layers.Dense(hidden, activation=activation, **dense_kwargs),
                             keras.layers.Dense(10, **dense_kwargs)])


def merge(name, reports) -> Report:
    """One report from several check_function runs (e.g. cases that need different tolerances),
    tidied: a problem that several cases share is said once, naming the first case and how many
    more; a function not written yet is said once. Case labels must not contain ": "."""
    problems = [p for r in reports for p in r.problems]
    unwritten = [p for p in problems if "not written yet" in p]
    if unwritten:
        problems = unwritten[:1]
    grouped = {}                       # what is wrong -> the cases it was seen on, in order
    for p in problems:
        label, sep, what = p.partition(": ")
        if not sep:
            label, what = "", p
        grouped.setdefault(what, []).append(label)
    tidy = []
    for what, labels in grouped.items():
        more = len(labels) - 1
        first = labels[0] + (f" (and {more} more case{'s' if more > 1 else ''})" if more else "")
        tidy.append(f"{first}: {what}" if first else what)
    return Report(name=name, problems=tidy, cases=sum(r.cases for r in reports))


def trim(problems, per_case=2):
    """At most ``per_case`` problems for each case (they start with the case's label)."""
    out, seen = [], {}
    for p in problems:
        label = p.split(":")[0]
        seen[label] = seen.get(label, 0) + 1
        if seen[label] <= per_case:
            out.append(p)
        elif seen[label] == per_case + 1:
            out.append(f"{label}: ... and more differences like these.")
    return out
