"""ctlkit/monitor/envelope.py: what the plot draws of a growing series. Spikes, the first and the last
point survive decimation; growing it step by step gives what one pass over the whole gives; the
smoothed mean is a trailing mean that leaves NaNs out; the work per redraw stays bounded."""
import numpy as np
import pytest

from ctlkit.monitor.envelope import Envelope
from ctlkit.monitor.history import History


def test_points_are_the_first_the_last_and_each_buckets_extremes():
    values = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.0, 6.0, 5.0, 0.5, 7.0])
    env = Envelope(limit=4)
    env.update(values)
    assert env.size == 4 and env.done == 8 and len(env.lo) == 2   # 10 values, buckets of 4
    idx = env.points(values)
    assert idx[0] == 0 and idx[-1] == len(values) - 1 and (np.diff(idx) > 0).all()
    assert {1, 4} <= set(idx) and {5, 6} & set(idx)        # min/max of bucket 0; bucket 1's
    assert 8 in set(idx)                                   # the tail's minimum (0.5)


def test_the_number_of_buckets_stays_bounded_as_the_series_grows():
    values = np.random.default_rng(0).random(100_000)
    env = Envelope(limit=50)
    for end in range(1_000, 100_001, 1_000):
        env.update(values[:end])
        assert len(env.lo) <= 50 and end - env.done < env.size
    assert len(env.points(values)) <= 2 * 50 + 2 + 2


@pytest.mark.parametrize("window", [1, 4, 10])
def test_means_are_trailing_means_of_the_finite_values(window):
    values = np.arange(1.0, 41.0)
    values[[7, 21]] = np.nan
    env = Envelope(limit=1000)                             # buckets of one: exact windows
    env.update(values)
    ends, means = env.means(values, window)
    for end, mean in zip(ends, means):
        part = values[max(0, end - window + 1):end + 1]
        expected = np.nanmean(part) if np.isfinite(part).any() else np.nan
        np.testing.assert_allclose(mean, expected, equal_nan=True)


def test_an_empty_series_draws_nothing():
    env = Envelope(limit=10)
    env.update(np.zeros(0))
    assert env.points(np.zeros(0)).size == 0 and env.means(np.zeros(0), 5)[0].size == 0


def test_decimation_keeps_spikes_first_and_last_points():
    n = 200_000
    loss = np.ones(n)
    loss[123_456], loss[77_777], loss[5] = 50.0, 1e-3, np.nan
    h = History()
    h.extend(list(range(1, n + 1)), {"loss": loss})
    (_, series), = h.panels(400)
    _, steps, values, _ = series[0]
    assert len(steps) <= 400 and steps[0] == 1 and steps[-1] == n
    assert np.nanmax(values) == 50.0 and steps[np.nanargmax(values)] == 123_457
    assert np.nanmin(values) == 1e-3 and steps[np.nanargmin(values)] == 77_778
    assert (np.diff(steps) > 0).all()
    _, s_steps, smoothed, _ = series[1]
    assert np.isfinite(smoothed).all()    # the NaN is left out of the mean, not spread


def test_incremental_decimation_equals_one_made_at_once():
    rng = np.random.default_rng(1)
    values = rng.standard_normal(30_000)
    values[rng.integers(0, 30_000, 50)] = np.nan
    grown, whole = History(), History()
    whole.extend(list(range(30_000)), {"loss": values})
    for start in range(0, 30_000, 997):   # as the monitor does: a redraw after each batch
        end = min(start + 997, 30_000)
        grown.extend(list(range(start, end)), {"loss": values[start:end]})
        grown.panels(400)
    (_, [raw_a, mean_a]), = grown.panels(400)
    (_, [raw_b, mean_b]), = whole.panels(400)
    for a, b in zip(raw_a[1:3], raw_b[1:3]):    # the same points
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(mean_a[1], mean_b[1])
    np.testing.assert_allclose(mean_a[2], mean_b[2], rtol=1e-9)  # sums added in another order
