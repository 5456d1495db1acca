"""Tests for ctlkit/runtime.py: the quick-mode budget, seeding, device/strategy set-up, policy."""
import dataclasses
import json
import os
import pathlib
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit import runtime
from ctlkit.runtime import Budget, budget, recommend_policy, run_seed, setup


# -- Budget ------------------------------------------------------------------------------------
def test_budget_quick_caps_every_count():
    b = Budget(quick=True)
    assert (b.epochs(30), b.steps(500), b.examples(5000)) == (3, 300, 2000)


def test_budget_quick_passes_small_requests_through():
    b = Budget(quick=True)
    assert (b.epochs(2), b.steps(10), b.examples(100)) == (2, 10, 100)


def test_budget_full_mode_passes_everything_through():
    b = Budget(quick=False)
    assert (b.epochs(30), b.steps(500), b.examples(5000)) == (30, 500, 5000)


def test_budget_custom_caps():
    b = Budget(quick=True, max_epochs=5, max_steps=7, max_examples=11)
    assert (b.epochs(10), b.steps(10), b.examples(100)) == (5, 7, 11)


def test_budget_accepts_numpy_ints_and_returns_python_ints():
    n = Budget(quick=True).steps(np.int64(1000))
    assert n == 300 and type(n) is int


def test_budget_pick():
    assert Budget(quick=True).pick("full", "quick") == "quick"
    assert Budget(quick=False).pick("full", "quick") == "full"


def test_budget_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Budget().quick = True


@pytest.mark.parametrize("method", ["epochs", "steps", "examples"])
@pytest.mark.parametrize("bad", [0, -1, -100])
def test_budget_rejects_non_positive_counts(method, bad):
    for quick in (True, False):
        with pytest.raises(ValueError, match=r"n must be a positive int, got"):
            getattr(Budget(quick=quick), method)(bad)


@pytest.mark.parametrize("method", ["epochs", "steps", "examples"])
@pytest.mark.parametrize("bad", ["10", 2.5, None, True, [3]])
def test_budget_rejects_non_int_counts(method, bad):
    with pytest.raises(TypeError, match=r"n must be a positive int"):
        getattr(Budget(quick=True), method)(bad)


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " 1 "])
def test_budget_reads_quick_from_env(monkeypatch, value):
    monkeypatch.setenv("CTLKIT_QUICK", value)
    b = budget()
    assert b.quick is True
    assert b.epochs(30) == 3


@pytest.mark.parametrize("value", ["0", "", "false", "no", "off", "N", " 0 "])
def test_budget_env_not_quick(monkeypatch, value):
    monkeypatch.setenv("CTLKIT_QUICK", value)
    assert budget().quick is False
    assert budget().epochs(30) == 30


@pytest.mark.parametrize("value", ["2", "enabled", "disabled", "quick", "-1", "maybe"])
def test_budget_env_neither_on_nor_off_is_an_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("CTLKIT_QUICK", value)
    with pytest.raises(ValueError, match=r"CTLKIT_QUICK=.*set it to 1"):
        budget()


@pytest.mark.parametrize("bad", ["no", "yes", 1, 0, None, "False"])
def test_budget_quick_must_be_a_bool_not_a_truthy_value(bad):
    with pytest.raises(TypeError, match="quick must be True or False"):
        Budget(quick=bad)


def test_budget_quick_accepts_numpy_bools_and_caps_must_be_positive():
    assert Budget(quick=np.bool_(True)).quick is True
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        Budget(max_steps=0)
    with pytest.raises(TypeError, match="max_epochs must be a positive int"):
        Budget(max_epochs=2.0)


@pytest.mark.parametrize("n", [np.int64(1000), np.int32(1000), tf.constant(1000),
                               np.array(1000), tf.constant(1000, tf.int64)])
def test_budget_accepts_numpy_and_tensor_ints(n):
    b = Budget(quick=True)
    assert b.steps(n) == 300 and type(b.steps(n)) is int


def test_budget_env_unset_is_full_mode(monkeypatch):
    monkeypatch.delenv("CTLKIT_QUICK", raising=False)
    assert budget().quick is False


def test_budget_rereads_env_on_each_call(monkeypatch):
    monkeypatch.setenv("CTLKIT_QUICK", "1")
    assert budget().steps(1000) == 300
    monkeypatch.setenv("CTLKIT_QUICK", "0")
    assert budget().steps(1000) == 1000


# -- setup(): seeding ---------------------------------------------------------------------------
def _draws():
    return (tf.random.uniform((5,)).numpy(), np.random.rand(5), random.random(),
            keras.random.uniform((3,)).numpy())


def test_setup_seeds_reproducibly():
    setup(seed=123, verbose=False)
    a = _draws()
    setup(seed=123, verbose=False)
    b = _draws()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_setup_different_seed_differs():
    setup(seed=1, verbose=False)
    a = _draws()
    setup(seed=2, verbose=False)
    b = _draws()
    for x, y in zip(a, b):
        assert not np.array_equal(x, y)


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True, np.int64(-3), [0]])
def test_setup_rejects_bad_seed(bad):
    with pytest.raises((TypeError, ValueError), match=r"seed must be a non-negative int"):
        setup(seed=bad, verbose=False)


# -- the run's seed: CTLKIT_SEED ---------------------------------------------------------------
def test_run_seed_is_zero_when_ctlkit_seed_is_unset_or_empty(monkeypatch):
    monkeypatch.delenv("CTLKIT_SEED", raising=False)
    assert run_seed() == 0 and setup(verbose=False).seed == 0
    monkeypatch.setenv("CTLKIT_SEED", "  ")
    assert run_seed() == 0


def test_setup_without_a_seed_takes_ctlkit_seed_and_says_so(monkeypatch):
    monkeypatch.setenv("CTLKIT_SEED", "3")
    rt = setup(verbose=False)
    assert rt.seed == 3 and "seed: 3 (CTLKIT_SEED)" in rt.summary()
    a = _draws()
    setup(seed=3, verbose=False)                  # the same draws as an explicit seed 3
    for x, y in zip(a, _draws()):
        np.testing.assert_array_equal(x, y)
    monkeypatch.setenv("CTLKIT_SEED", "4")
    setup(verbose=False)
    assert not np.array_equal(a[0], _draws()[0])  # another run seed, other draws


def test_an_explicit_seed_wins_over_ctlkit_seed(monkeypatch):
    monkeypatch.setenv("CTLKIT_SEED", "3")
    rt = setup(seed=5, verbose=False)
    assert rt.seed == 5 and "CTLKIT_SEED" not in rt.summary()


@pytest.mark.parametrize("bad", ["x", "-1", "1.5", "1000001", "0x10"])
def test_a_bad_ctlkit_seed_is_an_error_naming_the_variable_and_the_fix(monkeypatch, bad):
    monkeypatch.setenv("CTLKIT_SEED", bad)
    message = r"CTLKIT_SEED=.* is not a run seed: set it to an integer in \[0, 1000000\]"
    with pytest.raises(ValueError, match=message):
        run_seed()
    with pytest.raises(ValueError, match=r"CTLKIT_SEED"):
        setup(verbose=False)


@pytest.mark.parametrize("seed", [np.int64(5), tf.constant(5), np.array(5)])
def test_setup_accepts_numpy_and_tensor_seeds(seed):
    assert setup(seed=seed, verbose=False).seed == 5


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_setup_rejects_non_bool_deterministic(bad):
    with pytest.raises(TypeError, match=r"deterministic must be True or False"):
        setup(seed=0, deterministic=bad, verbose=False)


def test_setup_deterministic_turns_op_determinism_on_and_off_again():
    from tensorflow.python.framework import config as tf_config
    try:
        rt = setup(seed=0, deterministic=True, verbose=False)
        assert rt.deterministic is True and tf_config.is_op_determinism_enabled()
        rt = setup(seed=0, deterministic=False, verbose=False)
        # what the Runtime says is what TensorFlow does
        assert rt.deterministic is False and not tf_config.is_op_determinism_enabled()
    finally:
        tf_config.disable_op_determinism()


def test_setup_refuses_to_leave_determinism_on_when_tf_cannot_turn_it_off(monkeypatch):
    from tensorflow.python.framework import config as tf_config
    try:
        setup(seed=0, deterministic=True, verbose=False)
        monkeypatch.delattr(tf_config, "disable_op_determinism")
        with pytest.raises(RuntimeError, match=r"restart the kernel.*deterministic=True"):
            setup(seed=0, deterministic=False, verbose=False)
    finally:
        monkeypatch.undo()
        tf_config.disable_op_determinism()


# -- setup(): device, strategy, summary --------------------------------------------------------
def test_setup_finds_this_machines_devices_and_a_usable_strategy():
    rt = setup(seed=0, verbose=False)
    assert rt.kind in {"CPU", "GPU", "TPU"}
    expected_kind = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    assert rt.kind == expected_kind
    assert rt.devices and all(isinstance(d, str) for d in rt.devices)
    assert rt.replicas >= 1
    with rt.strategy.scope():
        v = tf.Variable(1.0)
        layer = keras.layers.Dense(2)
        layer.build((None, 3))
    assert rt.strategy.extended.variable_created_in_scope(v)
    assert float(v.numpy()) == 1.0


def test_setup_on_cpu_recommends_float32_and_keeps_global_policy():
    before = keras.mixed_precision.global_policy().name
    rt = setup(seed=0, verbose=False)
    if rt.kind == "CPU":
        assert rt.policy == "float32"
        assert rt.replicas == 1
    assert keras.mixed_precision.global_policy().name == before


def test_setup_records_quick_mode(monkeypatch):
    monkeypatch.setenv("CTLKIT_QUICK", "1")
    assert setup(seed=0, verbose=False).quick is True
    monkeypatch.setenv("CTLKIT_QUICK", "0")
    assert setup(seed=0, verbose=False).quick is False


def test_summary_mentions_versions_device_and_settings(monkeypatch):
    monkeypatch.setenv("CTLKIT_QUICK", "1")
    rt = setup(seed=7, verbose=False)
    s = rt.summary()
    assert f"TensorFlow {tf.__version__}" in s
    assert f"Keras {keras.__version__}" in s
    assert f"Python {sys.version.split()[0]}" in s
    assert f"device: {rt.kind}" in s
    assert "seed: 7" in s and "quick mode: True" in s
    assert f"recommended precision policy: {rt.policy}" in s
    assert repr(rt) == s


def test_setup_verbose_prints_summary(capsys):
    rt = setup(seed=0, verbose=True)
    out = capsys.readouterr().out
    assert rt.summary() in out
    setup(seed=0, verbose=False)
    assert capsys.readouterr().out == ""


def test_versions():
    v = runtime.versions()
    assert v["tensorflow"] == tf.__version__ and v["keras"] == keras.__version__
    assert v["numpy"] == np.__version__ and v["python"] == sys.version.split()[0]


def test_find_tpu_is_none_without_tpu_hints(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    from ctlkit import devices
    monkeypatch.setattr(devices.os.path, "exists", lambda p: False)
    assert runtime.find_tpu() is None


# -- recommend_policy ---------------------------------------------------------------------------
def test_recommend_policy_cpu():
    assert recommend_policy("CPU") == "float32"
    assert recommend_policy("CPU", [(9, 0)]) == "float32"


def test_recommend_policy_gpu_with_tensor_cores():
    assert recommend_policy("GPU", [(7, 0)]) == "mixed_float16"
    assert recommend_policy("GPU", [(8, 6), (9, 0)]) == "mixed_float16"


def test_recommend_policy_old_or_unknown_gpu():
    assert recommend_policy("GPU", [(6, 1)]) == "float32"
    assert recommend_policy("GPU", [(8, 0), (6, 1)]) == "float32"  # one old card: float32
    assert recommend_policy("GPU", [None]) == "float32"
    assert recommend_policy("GPU", []) == "float32"


def test_recommend_policy_tpu():
    assert recommend_policy("TPU") == "mixed_bfloat16"


@pytest.mark.parametrize("bad", ["cpu", "gpu", "XLA", "", None, 3])
def test_recommend_policy_rejects_unknown_kind(bad):
    with pytest.raises(ValueError, match=r"kind must be 'CPU', 'GPU' or 'TPU'"):
        recommend_policy(bad)


@pytest.mark.parametrize("bad", [(7, 0), "7.0", 7, [7.0], [(7.5, 0)], [()]])
def test_recommend_policy_rejects_malformed_capabilities(bad):
    with pytest.raises(TypeError, match=r"capabilities must be a list of \(major, minor\)"):
        recommend_policy("GPU", bad)


def test_gpu_compute_capability_never_raises_for_bad_device():
    assert runtime.gpu_compute_capability("not a device") is None


# -- cpu_replicas: a MirroredStrategy over logical CPUs (runs in a fresh process) ----------------
def _run_fresh(code: str) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_cpu_replicas_gives_a_mirrored_strategy_and_refuses_a_late_change():
    out = _run_fresh(
        "import ctlkit, tensorflow as tf\n"
        "rt = ctlkit.setup(cpu_replicas=2, verbose=False)\n"
        "print(type(rt.strategy).__name__, rt.replicas, len(rt.devices))\n"
        "per = rt.strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)\n"
        "print(sorted(int(t) for t in rt.strategy.experimental_local_results(per)))\n"
        "try:\n"
        "    ctlkit.setup(cpu_replicas=3, verbose=False)\n"
        "except RuntimeError as e:\n"
        "    print('refused:', 'cpu_replicas=3' in str(e) and 'Restart the kernel' in str(e))\n")
    lines = out.strip().splitlines()
    assert lines[0] == "MirroredStrategy 2 2"
    assert lines[1] == "[0, 1]"
    assert lines[2] == "refused: True"


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_cpu_replicas_rejects_bad_values(bad):
    with pytest.raises((TypeError, ValueError), match="cpu_replicas"):
        setup(cpu_replicas=bad, verbose=False)


# -- one GPU: no strategy, so fit()'s jit_compile="auto" still means XLA -------------------------
@pytest.fixture
def one_fake_gpu(monkeypatch):
    """Make TensorFlow (and Keras, which asks tf.config) believe there is one GPU."""
    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
    real_physical, real_logical = tf.config.list_physical_devices, tf.config.list_logical_devices

    def physical(kind=None):
        return [gpu] if kind == "GPU" else real_physical(kind) + ([gpu] if kind is None else [])

    def logical(kind=None):
        fake = [tf.config.LogicalDevice("/device:GPU:0", "GPU")]
        return fake if kind == "GPU" else real_logical(kind) + (fake if kind is None else [])

    monkeypatch.setattr(tf.config, "list_physical_devices", physical)
    monkeypatch.setattr(tf.config, "list_logical_devices", logical)
    monkeypatch.setattr(runtime, "gpu_compute_capability", lambda device: (8, 0))
    return gpu


def _auto_jit(strategy=None):
    def build():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse")   # jit_compile="auto", Keras' default
        return bool(model.jit_compile)
    if strategy is None:
        return build()
    with strategy.scope():
        return build()


def test_setup_on_one_gpu_returns_the_default_strategy(one_fake_gpu):
    rt = setup(seed=0, verbose=False)
    assert rt.kind == "GPU" and rt.replicas == 1 and rt.policy == "mixed_float16"
    assert rt.strategy is tf.distribute.get_strategy()       # not OneDeviceStrategy
    assert _auto_jit(rt.strategy) is True                    # so fit() keeps its XLA


def test_keras_auto_jit_rules_on_this_keras(one_fake_gpu, monkeypatch):
    """What notebook 12 teaches about jit_compile="auto", checked on the installed Keras."""
    assert _auto_jit() is True                                # a GPU, no strategy, no determinism
    assert _auto_jit(tf.distribute.OneDeviceStrategy("/cpu:0")) is False   # any strategy: off
    from tensorflow.python.framework import config as tf_config

    monkeypatch.setattr(tf_config, "is_op_determinism_enabled", lambda: True)
    assert _auto_jit() is False                               # op determinism: off


def test_keras_auto_jit_is_off_on_a_cpu_only_machine():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")  # the rule under test is the CPU-only one
    assert _auto_jit() is False



# Keras picks its backend once, at import (keras/src/backend/config.py): a kernel started with
# another backend (KERAS_BACKEND=jax on Colab, which ships JAX) must be refused by setup() with the
# fix, not fail later far from the cause. JAX is not installed here, so Keras' answer is stubbed.
def _backend_is(monkeypatch, name):
    monkeypatch.setattr(keras.backend, "backend", lambda: name)


def test_setup_refuses_a_keras_backend_set_by_the_environment_and_says_the_fix(monkeypatch):
    _backend_is(monkeypatch, "jax")
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    with pytest.raises(runtime.BackendError) as e:
        setup(verbose=False)
    message = str(e.value)
    assert message.startswith("Keras runs on the 'jax' backend (KERAS_BACKEND=jax is set)")
    assert "unset KERAS_BACKEND" in message and "restart the kernel" in message


def test_setup_refuses_a_keras_backend_set_by_keras_json_and_names_the_file(monkeypatch):
    from keras.src.backend import config

    _backend_is(monkeypatch, "torch")
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    with pytest.raises(runtime.BackendError) as e:
        setup(verbose=False)
    path = os.path.join(config.keras_home(), "keras.json")
    assert f'"backend": "torch" is in {path}' in str(e.value)
    assert 'write "backend": "tensorflow" in that file' in str(e.value)


def test_a_keras_that_cannot_import_its_backend_is_named_too(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", None)     # import keras raises ImportError
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    with pytest.raises(runtime.BackendError, match=r"'jax' backend \(KERAS_BACKEND=jax is set\)"):
        runtime.keras_backend()
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")   # not a backend problem: Keras' own error
    with pytest.raises(ImportError):
        runtime.keras_backend()


def _fresh_keras_backend(tmp_path, backend_env, keras_json):
    (tmp_path / "keras.json").write_text(json.dumps({"backend": keras_json}))
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(KERAS_HOME=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2")
    if backend_env is not None:
        env["KERAS_BACKEND"] = backend_env
    run = subprocess.run([sys.executable, "-c", "import keras; print(keras.backend.backend())"],
                         capture_output=True, text=True, env=env, timeout=300)
    return run.stdout.strip() or run.stderr[-300:]


def test_keras_chooses_its_backend_as_keras_backend_says():
    # The order the docstring of keras_backend() states: KERAS_BACKEND, then keras.json.
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert _fresh_keras_backend(pathlib.Path(d), None, "tensorflow") == "tensorflow"
    with tempfile.TemporaryDirectory() as d:
        assert _fresh_keras_backend(pathlib.Path(d), "tensorflow", "jax") == "tensorflow"
    with tempfile.TemporaryDirectory() as d:
        assert "jax" in _fresh_keras_backend(pathlib.Path(d), "", "jax")   # empty: keras.json's


def test_keras_backend_in_this_process_is_tensorflow():
    assert runtime.keras_backend() == "tensorflow" == keras.backend.backend()


# -- GPU memory growth and TF32 (issue 34): checked with fake GPUs, as CI has none -------------
def test_memory_growth_is_requested_for_every_visible_gpu_before_seeding(monkeypatch):
    gpus = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(2)]
    events = []
    real_physical = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: list(gpus) if kind == "GPU" else real_physical(kind))
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth",
                        lambda gpu, on: events.append(("growth", gpu.name, on)))
    monkeypatch.setattr(runtime, "seed_everything", lambda seed: events.append(("seed", seed)))
    monkeypatch.setattr(runtime, "find_tpu", lambda: None)
    monkeypatch.setattr(runtime, "gpu_compute_capability", lambda device: (8, 0))
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: [
        tf.config.LogicalDevice(f"/device:{kind or 'GPU'}:{i}", kind or "GPU") for i in range(2)])
    monkeypatch.setattr(tf.distribute, "MirroredStrategy", lambda *a, **k: tf.distribute.get_strategy())
    rt = setup(seed=3, verbose=False)
    assert events == [("growth", g.name, True) for g in gpus] + [("seed", 3)]
    assert rt.memory_growth == "on" and rt.compute_capability == ((8, 0), (8, 0))
    line = rt.summary().splitlines()[-1]
    assert "compute capability: 8.0, 8.0" in line and "memory growth: on" in line
    assert "TF32: on: float32 matmuls" in line          # the default on an Ampere GPU
    events.clear()
    rt = setup(seed=3, verbose=False, memory_growth=False)
    assert events == [("seed", 3)] and rt.memory_growth.startswith("off (setup(memory_growth=False))")


def test_memory_growth_says_why_when_the_gpu_started_before_setup(monkeypatch):
    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")

    def started(device, on):
        raise RuntimeError("Physical devices cannot be modified after being initialized")
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", started)
    said = runtime.memory_growth_on_gpus([gpu])
    assert said.startswith("off:") and "restart the kernel and call ctlkit.setup() first" in said

    def refused(device, on):
        raise ValueError("Cannot set memory growth on device when virtual devices configured")
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", refused)
    said = runtime.memory_growth_on_gpus([gpu])
    assert said.startswith("off: TensorFlow refused it for /physical_device:GPU:0")
    assert runtime.memory_growth_on_gpus([]) == "no GPU"


def test_setup_turns_tf32_off_and_on_as_asked_and_says_so():
    before = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        rt = setup(seed=0, verbose=False, tf32=False)
        assert rt.tf32 is False and not tf.config.experimental.tensor_float_32_execution_enabled()
        assert "TF32 switch: off" in rt.summary()
        rt = setup(seed=0, verbose=False)                    # None: left as it is
        assert rt.tf32 is False
        rt = setup(seed=0, verbose=False, tf32=True)
        assert rt.tf32 is True and "TF32 switch: on (it matters on GPUs" in rt.summary()
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(before)


@pytest.mark.parametrize("bad", ["off", 0, 1.0])
def test_setup_rejects_a_tf32_that_is_not_none_or_a_bool(bad):
    with pytest.raises(TypeError, match=r"tf32 must be None \(keep TensorFlow's setting\), True or False"):
        setup(seed=0, verbose=False, tf32=bad)


def test_tf32_words_tell_an_ampere_gpu_from_an_older_one():
    assert runtime.tf32_words(True, [(8, 6)]).startswith("on: float32 matmuls")
    assert runtime.tf32_words(True, [(7, 5)]).startswith("on, but no GPU here has TF32")
    assert runtime.tf32_words(True, [None]).startswith("on; TensorFlow reports no compute capability")
    assert runtime.tf32_words(False, [(8, 0)]).startswith("off")
