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


def test_monitor_overhead_reports_direct_and_indirect_parts():
    m = bench.monitor_overhead(epochs=2, alternations=3)
    assert set(m) >= {"fraction", "direct", "indirect", "indirect_raw", "indirect_iqr", "control",
                      "control_iqr",
                      "comparisons", "redraws", "full_draws", "steps", "loop_seconds"}
    assert m["comparisons"] == 2                  # 7 epochs: even epochs 2 and 4 vs neighbours
    assert m["fraction"] == pytest.approx(m["direct"] + max(m["indirect"], 0.0))
    assert m["indirect"] == pytest.approx(m["indirect_raw"] - m["control"])
    assert 0.0 <= m["direct"] < 1.0 and math.isfinite(m["indirect"])
    assert m["indirect_iqr"][0] <= m["indirect_iqr"][1] and m["steps"] > 0


def test_neighbour_ratios_compare_each_even_epoch_with_its_neighbours():
    # a slow step every other epoch on a machine that slows down steadily: drift cancels
    times = [1.0 + 0.1 * e + (0.05 if e % 2 == 0 else 0.0) for e in range(9)]
    med, iqr, n = bench.neighbour_ratios(times)
    assert n == 3 and iqr[0] <= med <= iqr[1]
    assert med == pytest.approx(2 * times[4] / (times[3] + times[5]) - 1)
    assert 0.02 < med < 0.04                      # 0.05 s on ~1.4 s epochs, not the drift
    assert bench.neighbour_ratios([1.0] * 5)[0] == 0.0
    with pytest.raises(ValueError, match="times needs at least 4 entries"):
        bench.neighbour_ratios([1.0, 1.0, 1.0])


def test_monitor_target_follows_the_summed_fraction(monkeypatch):
    for fraction, met in [(0.03, True), (0.05, True), (0.07, False)]:
        monkeypatch.setattr(bench, "monitor_overhead", lambda epochs, alternations, f=fraction:
                            {"fraction": f, "direct": f, "indirect": 0.0})
        r = bench.run(quick=True, variants=["tf_function", "fit"], repeats=1, examples=64,
                      verbose=False)
        assert r["targets"]["monitor_overhead"] is met and r["monitor_overhead"] == fraction


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
    assert exc.value.code == 2 and "repeats must be a positive int, got 0" in capsys.readouterr().err


def test_cli_refuses_an_unwritable_json_path_before_running(tmp_path, capsys, monkeypatch):
    from ctlkit import bench as bench_module

    monkeypatch.setattr(bench_module, "run", lambda **kw: pytest.fail("the benchmark ran"))
    with pytest.raises(SystemExit) as exc:
        bench_module.main(["--quick", "--json", str(tmp_path / "no" / "such" / "dir" / "b.json")])
    assert exc.value.code == 2 and "cannot write there" in capsys.readouterr().err
