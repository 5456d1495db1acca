"""ctlkit/history.py: the history store and the envelopes the plot draws."""
import time

import pytest

from ctlkit.history import History
from monitor_helpers import history


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
        for label, steps, values, style in series:
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
