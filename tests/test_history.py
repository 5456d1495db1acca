"""ctlkit/monitor/history.py: the history store and the envelopes the plot draws."""
import time

import numpy as np
import pytest
from monitor_helpers import history

from ctlkit.monitor.history import History


def test_history_unknown_key_names_what_was_logged():
    h = history(3, layers=False, epochs=False)
    with pytest.raises(KeyError, match=r"'acc' was never logged; logged: \['grad_norm', 'loss'\]"):
        h["acc"]


def _panel_with(panels, label):
    (found,) = [[lbl for lbl, *_ in series] for _, series in panels
                if label in [lbl for lbl, *_ in series]]
    return found


def test_history_panels_group_related_series():
    panels = history(30).panels()
    assert 1 <= len(panels) <= 4  # each axis costs drawing time
    assert {"loss", "val_loss"} <= set(_panel_with(panels, "loss"))  # validation beside training
    layer_panel = _panel_with(panels, "dense")
    assert "out" in layer_panel and len(layer_panel) == 3  # the global norm and both layers
    assert "val_accuracy" not in _panel_with(panels, "loss")
    for _, series in panels:
        for label, steps, values, _ in series:
            assert len(steps) == len(values), label


def test_history_panels_subsample_long_runs():
    h = History()
    for i in range(1, 2001):
        h.add(i, {"loss": 1.0 / i, "grad_norm": 1.0, "layer/dense": 2.0})
    for _, series in h.panels(max_points=400):
        for label, steps, values, _ in series:
            assert len(steps) == len(values) <= 400, label


@pytest.mark.timing
def test_history_add_cost_does_not_grow_with_its_length():
    def seconds_for_500_adds(h):
        t0 = time.perf_counter()
        first = len(h)
        for i in range(first, first + 500):
            h.add(i, {"loss": 1.0, "grad_norm": 2.0})
        return time.perf_counter() - t0

    short, long_ = History(), History()
    long_.extend(list(range(300_000)), {"loss": [1.0] * 300_000, "grad_norm": [1.0] * 300_000})
    fresh = min(seconds_for_500_adds(short) for _ in range(3))
    late = min(seconds_for_500_adds(long_) for _ in range(3))
    # a per-add copy of the series (the old setdefault default) made this ~300x; allow noise
    assert late < 10 * fresh + 0.01, (fresh, late)
    assert len(long_["loss"]) == 301_500 and long_["grad_norm"][-1] == 2.0


def test_history_extend_is_all_or_nothing():
    h = history(3, layers=False, epochs=False)
    before = (h.steps.tolist(), h["loss"].tolist(), h.keys())
    with pytest.raises(ValueError, match=r"column 'acc' has shape \[1\] for 2 steps"):
        h.extend([4, 5], {"loss": [1.0, 2.0], "acc": [0.5]})
    with pytest.raises(ValueError, match=r"steps must increase"):
        h.extend([3, 4], {"loss": [1.0, 2.0]})
    with pytest.raises(TypeError, match=r"column 'loss' must hold one float per step"):
        h.extend([4], {"loss": [object()]})
    with pytest.raises(TypeError, match=r"steps must be a list of ints"):
        h.extend([4.5], {"loss": [1.0]})
    assert (h.steps.tolist(), h["loss"].tolist(), h.keys()) == before
    h.extend([], {})                      # nothing to add: nothing changes
    assert len(h) == 3


def test_history_arrays_are_copies():
    h = history(3, layers=False, epochs=False)
    h["loss"][:] = 0.0
    h.steps[:] = 0
    assert h["loss"][0] == 2.0 and h.steps[0] == 1


@pytest.mark.parametrize("max_points", [0, 7, 2.5, True, None])
def test_panels_bad_max_points(max_points):
    with pytest.raises(ValueError, match=r"max_points must be an int >= 8"):
        history(5).panels(max_points)


# -- many curves: the top few and one band (issue 23) -------------------------------------------
def test_many_layers_fold_into_the_top_few_and_a_band_of_all():
    from ctlkit.monitor.history import TOP

    h = History()
    rng = np.random.default_rng(3)
    table = rng.uniform(0.1, 2.0, (50, 30))                   # 50 steps, 30 layers
    for i in range(50):
        h.add(i + 1, {"loss": 1.0, **{f"layer/l{j}": table[i, j] for j in range(30)}})
    (norms,) = [series for name, series in h.panels() if name == "gradient norms"]
    band = [s for s in norms if s[3] == "band"]
    lines = [s for s in norms if s[3] != "band"]
    assert len(band) == 1 and len(lines) == TOP
    assert band[0][0] == f"+{30 - TOP} more layers; band: min-max of all 30"
    top = np.argsort(-table[-1])[:TOP]
    assert [s[0] for s in lines] == [f"l{j}" for j in top]   # largest latest value first
    _, xs, ys, _ = band[0]                                    # up the upper edge, back the lower
    upper, lower = ys[:50], ys[50:][::-1]
    np.testing.assert_array_equal(xs[:50], np.arange(1, 51))
    np.testing.assert_allclose(upper, table.max(axis=1))
    np.testing.assert_allclose(lower, table.min(axis=1))


def test_the_band_is_kept_up_to_date_and_bounded_for_a_long_run():
    h = History()
    for i in range(1, 5001):
        h.add(i, {f"layer/l{j}": float(j + 1) * (2.0 if i == 4000 else 1.0) for j in range(12)})
        if i in (10, 2000):
            h.panels(max_points=100)                          # incremental rows
    (_, norms), = h.panels(max_points=100)
    (_, xs, ys, _), = [s for s in norms if s[3] == "band"]
    assert len(xs) <= 2 * 100 + 4
    assert ys.max() == 24.0 and ys.min() == 1.0               # the spike at step 4000 is kept
    assert xs[np.argmax(ys)] == 4000


def test_few_curves_are_not_folded_and_bad_top_is_refused():
    h = History()
    h.add(1, {f"layer/l{j}": 1.0 for j in range(8)})
    (_, norms), = h.panels()
    assert len(norms) == 8 and all(s[3] == "line" for s in norms)
    with pytest.raises(ValueError, match="top must be an int >= 1"):
        h.panels(top=0)


def test_many_metrics_and_epoch_values_fold_too():
    h = History()
    for i in range(1, 21):
        h.add(i, {"loss": 1.0, **{f"m{j}": float(j) for j in range(40)}})
    for e in range(3):
        h.add_epoch(20, {f"val_m{j}": float(j + e) for j in range(15)})
    (_, metrics), = [p for p in h.panels() if p[0] == "metrics"]
    bands = [s for s in metrics if s[3] == "band"]
    assert [b[0] for b in bands] == ["+32 more metrics; band: min-max of all 40",
                                     "+7 more end-of-epoch metrics; band: min-max of all 15"]
    assert len(metrics) == 2 * 8 + 2
