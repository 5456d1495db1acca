"""Tests for ctlkit/bench.py: the side-by-side timing harness (tiny sizes; no timing ratios)."""
import math
from functools import partial

import numpy as np
import pytest
import tensorflow as tf

from ctlkit import bench
from ctlkit.steps import plain_step

ON_GPU = bool(tf.config.list_physical_devices("GPU"))


def eager(model, optimizer, task):
    step = plain_step(model, optimizer, task.loss_fn, compile=False)

    def one_epoch():
        for x, y in task.train:
            loss = step(x, y)
        return loss
    return one_epoch


def graph(model, optimizer, task):
    step = plain_step(model, optimizer, task.loss_fn)

    def one_epoch():
        for x, y in task.train:
            loss = step(x, y)
        return loss
    return one_epoch


@pytest.fixture(scope="module")
def tiny_task():
    return bench.Task(330, test_examples=300)      # 11 batches, the last one short


@pytest.fixture(scope="module")
def tiny_run(tiny_task):
    return bench.run({"eager": eager, "graph": graph, "fit": bench.fit}, tiny_task, repeats=1,
                     baseline="fit")


def test_compare_rejects_what_is_not_a_factory_or_a_task(tiny_task):
    with pytest.raises(TypeError, match="factories"):
        bench.compare([eager], tiny_task)
    with pytest.raises(TypeError, match="factories"):
        bench.compare({}, tiny_task)
    with pytest.raises(TypeError, match=r"factories\['broken'\] must return a function"):
        bench.compare({"broken": lambda model, opt, task: 42}, tiny_task, repeats=1)
    with pytest.raises(TypeError, match="task must be a ctlkit.bench.Task"):
        bench.compare({"eager": eager}, tiny_task.train, repeats=1)


@pytest.mark.parametrize("repeats", [0, -1, 2.5, "3"])
def test_bad_repeats_are_rejected_naming_the_argument(tiny_task, repeats):
    with pytest.raises((TypeError, ValueError), match="repeats must be"):
        bench.compare({"eager": eager}, tiny_task, repeats=repeats)


def test_task_is_learnable_offline_data(tiny_task):
    assert tiny_task.x_train.shape == (330, 784) and tiny_task.x_train.dtype == np.float32
    assert 0.0 <= tiny_task.x_train.min() and tiny_task.x_train.max() <= 1.0
    assert set(np.unique(tiny_task.y_train)) <= set(range(10))
    assert tiny_task.steps_per_epoch == 11
    model, optimizer = tiny_task.build()
    assert model.count_params() == 784 * 64 + 64 + 64 * 10 + 10
    assert optimizer.built
    again, _ = tiny_task.build()                 # identically seeded every time
    for a, b in zip(model.get_weights(), again.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_fit_factory_trains_one_epoch_per_call_with_its_settings(tiny_task):
    model, optimizer = tiny_task.build()
    one_epoch = partial(bench.fit, steps_per_execution=5)(model, optimizer, tiny_task)
    assert one_epoch() is None and int(optimizer.iterations) == 11
    one_epoch()
    assert int(optimizer.iterations) == 22 and model.steps_per_execution == 5


def test_a_run_has_the_keys_and_sane_numbers(tiny_run):
    r = tiny_run
    assert set(r) >= {"variants", "baseline", "machine", "config"} and r["baseline"] == "fit"
    assert list(r["variants"]) == ["eager", "graph", "fit"]
    for v in r["variants"].values():
        assert set(v) >= {"examples_per_s", "best_examples_per_s", "ratio_to_baseline", "accuracy",
                          "peak_memory_mb", "memory_growth_mb", "seconds", "warmup_seconds",
                          "repeat_seconds", "policy"}
        assert v["examples_per_s"] > 0 and v["seconds"] > 0 and len(v["repeat_seconds"]) == 1
        assert v["best_examples_per_s"] >= v["examples_per_s"]
        assert 0.2 < v["accuracy"] <= 1.0                  # ten classes: chance is 0.1
        assert v["peak_memory_mb"] is None or v["peak_memory_mb"] > 10   # TF alone is bigger
        assert v["memory_growth_mb"] is None or 0 <= v["memory_growth_mb"] <= v["peak_memory_mb"]
    assert r["variants"]["fit"]["ratio_to_baseline"] == pytest.approx(1.0)
    # identical seeds, data and updates: the loops learn the same model
    accuracies = [v["accuracy"] for v in r["variants"].values()]
    assert max(accuracies) - min(accuracies) <= 0.02
    assert r["variants"]["graph"]["examples_per_s"] > r["variants"]["eager"]["examples_per_s"]
    assert r["machine"]["cores"] >= 1 and r["machine"]["tensorflow"] == tf.__version__
    assert r["config"]["examples"] == 330 and r["config"]["repeats"] == 1
    text = bench.table(r)
    assert all(name in text for name in ("eager", "graph", "fit")) and "machine:" in text


def test_without_the_baseline_the_ratios_are_none(tiny_task):
    r = bench.run({"graph": graph}, tiny_task, repeats=1, baseline="fit")
    assert r["baseline"] is None and r["variants"]["graph"]["ratio_to_baseline"] is None
    assert bench.table(r).splitlines()[1].split()[3] == "-x"      # no ratio without it


@pytest.mark.skipif(ON_GPU, reason="the skip applies where mixed precision does not pay off")
def test_mixed_precision_is_refused_on_cpu_with_the_reason():
    policy, why = bench.mixed_policy()
    assert policy is None and why == bench.MIXED_SKIP_CPU
    assert "skipped on CPU" in bench.MIXED_SKIP_CPU and "GPU" in bench.MIXED_SKIP_CPU


def test_mixed_precision_code_path_runs(tiny_task):
    r = bench.compare({"mixed": graph}, tiny_task, repeats=1, policies={"mixed": "mixed_float16"})
    assert r["mixed"]["policy"] == "mixed_float16" and math.isfinite(r["mixed"]["seconds"])
    model, _ = tiny_task.build("mixed_float16")
    assert model.layers[0].compute_dtype == "float16" and model.layers[-1].dtype == "float32"
