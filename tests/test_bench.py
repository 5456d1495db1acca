"""Tests for ctlkit/bench.py: the side-by-side timing harness (tiny sizes; no timing ratios)."""
import json
import math

import numpy as np
import pytest
import tensorflow as tf

from ctlkit import bench

ON_GPU = bool(tf.config.list_physical_devices("GPU"))


@pytest.fixture(scope="module")
def tiny_task():
    return bench.Task(330, test_examples=300)      # 11 batches, the last one short


@pytest.fixture(scope="module")
def tiny_run():
    return bench.run(quick=True, variants=["eager", "tf_function"], repeats=1, examples=640,
                     monitor=False, verbose=False)


@pytest.mark.parametrize("kwargs, argument", [
    ({"quick": "yes"}, "quick"),
    ({"variants": ["eager", "warp_speed"]}, "variants"),
    ({"variants": []}, "variants"),
    ({"variants": "eager,,fit"}, "variants"),
    ({"repeats": 0}, "repeats"),
    ({"repeats": 2.5}, "repeats"),
    ({"examples": 10}, "examples"),
])
def test_bad_arguments_are_rejected_naming_the_argument(kwargs, argument):
    with pytest.raises((TypeError, ValueError), match=argument):
        bench.run(verbose=False, monitor=False, **kwargs)


def test_defaults_follow_quick_mode(monkeypatch):
    monkeypatch.setenv("CTLKIT_QUICK", "1")
    quick = bench.options()
    monkeypatch.setenv("CTLKIT_QUICK", "0")
    full = bench.options()
    assert quick["quick"] and not full["quick"]
    assert quick["examples"] < full["examples"] == 20000 and quick["repeats"] < full["repeats"]
    assert full["variants"] == list(bench.VARIANTS)
    assert bench.options(variants="eager, fit")["variants"] == ["eager", "fit"]


def test_compare_rejects_what_is_not_a_factory(tiny_task):
    with pytest.raises(TypeError, match="factories"):
        bench.compare([bench.eager], tiny_task)
    with pytest.raises(TypeError, match="factories"):
        bench.compare({"broken": lambda model, opt, task: 42}, tiny_task, repeats=1)


def test_task_is_learnable_offline_data(tiny_task):
    assert tiny_task.x_train.shape == (330, 784) and tiny_task.x_train.dtype == np.float32
    assert 0.0 <= tiny_task.x_train.min() and tiny_task.x_train.max() <= 1.0
    assert set(np.unique(tiny_task.y_train)) <= set(range(10))
    assert tiny_task.steps_per_epoch == 11
    model, optimizer = tiny_task.build()
    assert model.count_params() == 784 * 64 + 64 + 64 * 10 + 10
    assert optimizer.built


def test_k_steps_per_call_trains_exactly_like_one_step_per_call(tiny_task):
    weights = {}
    for name in ("tf_function", "ten_per_call"):
        model, optimizer = tiny_task.build()
        bench.VARIANTS[name][0](model, optimizer, tiny_task)()   # one epoch: 10 + 1 steps
        assert int(optimizer.iterations) == 11
        weights[name] = model.get_weights()
    for a, b in zip(weights["tf_function"], weights["ten_per_call"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_tiny_run_has_the_keys_and_sane_numbers(tiny_run):
    r = tiny_run
    assert set(r) >= {"variants", "custom_vs_fit_speedup", "graph_vs_eager_speedup",
                      "custom_vs_fit_speedup_fastest_epochs",
                      "monitor_overhead", "machine", "targets", "config", "skipped"}
    assert list(r["variants"]) == ["eager", "tf_function"]
    for v in r["variants"].values():
        assert set(v) >= {"examples_per_s", "best_examples_per_s", "ratio_to_fit", "accuracy",
                          "peak_memory_mb", "memory_growth_mb", "seconds", "warmup_seconds",
                          "repeat_seconds", "description", "policy"}
        assert v["examples_per_s"] > 0 and v["seconds"] > 0 and len(v["repeat_seconds"]) == 1
        assert v["best_examples_per_s"] >= v["examples_per_s"]
        assert 0.2 < v["accuracy"] <= 1.0                  # ten classes: chance is 0.1
        assert v["ratio_to_fit"] is None                    # fit was not run
        assert v["peak_memory_mb"] is None or v["peak_memory_mb"] > 10   # TF alone is bigger
        assert v["memory_growth_mb"] is None or 0 <= v["memory_growth_mb"] <= v["peak_memory_mb"]
    # identical seeds, data and updates: the two loops learn the same model
    assert r["variants"]["eager"]["accuracy"] == pytest.approx(
        r["variants"]["tf_function"]["accuracy"], abs=0.02)
    assert r["graph_vs_eager_speedup"] > 1.0               # loose: this is a test, not a benchmark
    assert r["custom_vs_fit_speedup"] is None and r["monitor_overhead"] is None
    assert r["machine"]["cores"] >= 1 and r["machine"]["tensorflow"] == tf.__version__
    text = bench.table(r)
    assert "eager" in text and "tf_function" in text and "targets met" in text


@pytest.mark.skipif(ON_GPU, reason="the skip applies where mixed precision does not pay off")
def test_mixed_precision_is_skipped_on_cpu_with_the_reason():
    r = bench.run(variants=["fit_mixed"], repeats=1, examples=64, monitor=False, verbose=False)
    assert r["variants"] == {}
    assert r["skipped"]["fit_mixed"] == bench.MIXED_SKIP_CPU
    assert "skipped on CPU" in bench.MIXED_SKIP_CPU and "GPU" in bench.MIXED_SKIP_CPU


def test_mixed_precision_code_path_runs(tiny_task):
    factory = bench.VARIANTS["ten_per_call_xla_mixed"][0]
    r = bench.compare({"mixed": factory}, tiny_task, repeats=1, policies={"mixed": "mixed_float16"})
    assert r["mixed"]["policy"] == "mixed_float16" and math.isfinite(r["mixed"]["seconds"])


def test_monitor_overhead_ab_reports_both_measures():
    m = bench.monitor_overhead(epochs=2, pairs=2)
    assert set(m) >= {"fraction", "interval", "confidence", "fraction_fastest", "pair_fractions",
                      "monitor_reported",
                      "bare_seconds", "live_seconds", "redraws", "full_draws", "steps", "pairs"}
    assert math.isfinite(m["fraction"]) and math.isfinite(m["fraction_fastest"])
    assert len(m["pair_fractions"]) == 2 and m["pair_fractions"] == sorted(m["pair_fractions"])
    assert m["pair_fractions"][0] <= m["fraction"] <= m["pair_fractions"][-1]
    assert 0.0 <= m["monitor_reported"] < 1.0
    assert m["bare_seconds"] > 0 and m["live_seconds"] > 0 and m["steps"] > 0


def test_median_interval_uses_sign_test_order_statistics():
    (lo, hi), level = bench.median_interval(list(range(10)))
    assert (lo, hi) == (1, 8) and level == pytest.approx(1 - 2 * 11 / 1024)  # P(X <= 1) = 11/1024
    (lo, hi), level = bench.median_interval([5, 0, 3, 1, 4, 2])
    assert (lo, hi) == (0, 5) and level == pytest.approx(1 - 2 / 64)
    (lo, hi), level = bench.median_interval(list(range(30)))
    assert level >= 0.95 and 0 < lo < 14.5 < hi < 29
    assert bench.median_interval([3.0]) == ((3.0, 3.0), 0.0)
    with pytest.raises(ValueError, match="values must not be empty"):
        bench.median_interval([])
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        bench.median_interval([1, 2], confidence=1.5)


def test_monitor_target_needs_the_own_count_and_an_ab_not_significantly_above(monkeypatch):
    def fake(own, interval):
        return lambda epochs, pairs: {"monitor_reported": own, "fraction": sum(interval) / 2,
                                      "interval": interval, "confidence": 0.98}
    for own, interval, met in [(0.03, [-0.2, 0.3], True),     # noisy A/B, cheap monitor
                               (0.07, [-0.2, 0.3], False),    # its own count is over
                               (0.03, [0.08, 0.3], False)]:   # the A/B shows more, clearly
        monkeypatch.setattr(bench, "monitor_overhead", fake(own, interval))
        r = bench.run(quick=True, variants=["tf_function", "fit"], repeats=1, examples=64,
                      verbose=False)
        assert r["targets"]["monitor_overhead"] is met, (own, interval)
        assert r["monitor_overhead"] == own


def test_monitor_overhead_pairs_alternate_their_order():
    # ABBA: the bare run first in even pairs, second in odd ones, so a drifting machine
    # speed (or a first-run penalty) does not bias the difference either way
    assert bench._abba(4) == [(False, True), (True, False), (False, True), (True, False)]
    assert sum(order[0] for order in bench._abba(6)) == 3


def test_cli_writes_json_with_fit_as_the_reference(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert bench.main(["--variants", "tf_function,fit", "--repeats", "1", "--examples", "320",
                       "--no-monitor", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    assert result["variants"]["fit"]["ratio_to_fit"] == pytest.approx(1.0)
    assert result["custom_vs_fit_speedup"] == pytest.approx(
        result["variants"]["tf_function"]["ratio_to_fit"])
    assert result["targets"]["monitor_overhead"] is None
    out = capsys.readouterr().out
    assert "best custom loop vs default fit" in out and f"written {path}" in out


def test_cli_rejects_bad_arguments_with_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--repeats", "0"])
    assert exc.value.code == 2 and "repeats must be >= 1" in capsys.readouterr().err
