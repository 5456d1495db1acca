"""The exercise registry (ctlkit.exercises), the step checker and the error explanations
(ctlkit.checks.check_step, explain, labelled cases)."""
import json
import re
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import ctlkit
from ctlkit import checks, exercises
from ctlkit.exercises import nb03, nb04, nb10, nb11


def test_every_notebook_with_exercises_has_a_module_and_keys_are_well_formed():
    keys = exercises.names()
    assert "03.clipped_step" in keys and "03.accuracy" in keys
    assert all(re.fullmatch(r"\d\d\.[a-z_][a-z0-9_]*", k) for k in keys)
    assert exercises.names("03") == ["03.accuracy", "03.clipped_step"]
    assert ctlkit.exercises is exercises and "exercises" in ctlkit.__all__


@pytest.mark.parametrize("key, error, words", [
    ("3.accuracy", ValueError, "look like '03.clipped_step'"),
    ("03", ValueError, "look like"),
    (3, ValueError, "look like"),
    ("03.no_such", ValueError, r"notebook 03 has \['03.accuracy', '03.clipped_step'\]"),
    ("99.thing", ValueError, "known:"),
])
def test_bad_keys_are_refused_naming_the_fix(key, error, words):
    with pytest.raises(error, match=words):
        exercises.check(key, lambda *a: None)


def test_a_result_instead_of_a_function_is_refused():
    with pytest.raises(TypeError, match="pass your function itself"):
        exercises.check("03.accuracy", 0.5)
    with pytest.raises(ValueError, match="two-digit"):
        exercises.names("3")


def test_a_checker_that_breaks_reports_instead_of_stopping(monkeypatch):
    from ctlkit.exercises import nb03

    def broken(fn):
        raise KeyError("boom")
    monkeypatch.setitem(nb03.EXERCISES, "accuracy", broken)
    report = exercises.check("03.accuracy", lambda z, y: 0)
    assert not report.ok and "KeyError" in str(report)


@pytest.mark.parametrize("key", exercises.names())
def test_an_unwritten_exercise_says_so_and_nothing_else(key):
    def not_yet(*args, **kwargs):
        raise NotImplementedError            # what the learner's empty cell raises
    report = exercises.check(key, not_yet)
    assert not report.ok and len(report.problems) == 1, str(report)
    assert "not written yet" in report.problems[0], str(report)


def test_labelled_cases_name_themselves_in_the_report():
    report = checks.check_function(lambda x: x + 1, lambda x: x, {"a batch of one": (tf.ones([1]),)})
    assert not report.ok and report.problems[0].startswith("a batch of one:")
    with pytest.raises(TypeError, match="map a label"):
        checks.check_function(lambda x: x, lambda x: x, {1: (1,)})


@pytest.mark.parametrize("make_error, words", [
    (lambda: tf.function(lambda x: 1 if x > 0 else 0, autograph=False)(tf.constant(1.0)), "tf.where"),
    (lambda: tf.function(lambda x: x.numpy())(tf.constant(1.0)), r"\.numpy\(\) does not exist inside"),
    (lambda: None + tf.constant(1.0), "gradient is None"),
])
def test_explain_keeps_the_real_error_and_adds_the_hint(make_error, words):
    try:
        make_error()
    except Exception as e:
        text = checks.explain(e)
    assert re.search(words, text), text
    assert "site-packages" not in text and "File \"" not in text and len(text) < 600


# -- check_step ------------------------------------------------------------------------------------
def _build():
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    return model, keras.optimizers.SGD(0.1)


def _factory(scale=1.0, returns="loss", compiled=True, n_traces=False):
    def factory(model, optimizer):
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = [g * scale for g in tape.gradient(loss, model.trainable_variables)]
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss if returns == "loss" else 2 * loss
        return tf.function(step, reduce_retracing=False) if compiled else step
    return factory


BATCHES = {"batch A": (tf.ones([4, 3]), tf.zeros([4, 2])), "batch B": (tf.fill([4, 3], 2.0), tf.ones([4, 2]))}


def test_check_step_passes_the_reference_and_names_the_batch_that_differs():
    assert checks.check_step(_factory(), _factory(), _build, BATCHES).ok
    report = checks.check_step(_factory(scale=2.0), _factory(), _build, BATCHES)
    assert not report.ok and "on batch A, your step's update" in report.problems[-2], report
    assert "is 2 times the reference's" in report.problems[-2]
    assert "on batch A, weight 0" in report.problems[-1]
    report = checks.check_step(_factory(returns="twice"), _factory(), _build, BATCHES)
    assert "value your step returned" in report.problems[0]
    report = checks.check_step(_factory(compiled=False), _factory(), _build, BATCHES)
    assert "@tf.function" in report.problems[0]
    report = checks.check_step(lambda m, o: 3, _factory(), _build, BATCHES)
    assert "not a step function" in report.problems[0]


def test_check_step_counts_traces_and_compares_state():
    shapes = {"4 rows": (tf.ones([4, 3]), tf.zeros([4, 2])), "5 rows": (tf.ones([5, 3]), tf.zeros([5, 2]))}
    report = checks.check_step(_factory(), _factory(), _build, shapes)
    assert not report.ok and "traced 2 times" in report.problems[0]
    assert checks.check_step(_factory(), _factory(), _build, shapes, max_traces=2).ok
    calls = []

    def state(model, optimizer):
        calls.append(1)
        return {"iterations": int(optimizer.iterations) + (len(calls) % 2)}   # differs on purpose
    report = checks.check_step(_factory(), _factory(), _build, BATCHES, state=state)
    assert "the optimizer state['iterations']" in report.problems[0]


def test_check_step_refuses_bad_arguments():
    with pytest.raises(TypeError, match="build must be a function"):
        checks.check_step(_factory(), _factory(), None, BATCHES)
    with pytest.raises(TypeError, match="state must be a function"):
        checks.check_step(_factory(), _factory(), _build, BATCHES, state={})
    with pytest.raises(ValueError, match="cases is empty"):
        checks.check_step(_factory(), _factory(), _build, {})


def test_check_step_explains_an_error_inside_the_step():
    def factory(model, optimizer):
        @tf.function(autograph=False)
        def step(x, y):
            loss = tf.reduce_mean(model(x))
            if loss > 0:
                loss = -loss
            return loss
        return step
    report = checks.check_step(factory, _factory(), _build, BATCHES)
    assert not report.ok and "on batch A, your step: raised" in report.problems[0]
    assert "tf.where" in report.problems[0]


def test_only_the_bare_not_implemented_error_means_not_written_yet():
    def numpy_on_a_symbolic_tensor(x):
        raise NotImplementedError("Cannot convert a symbolic tf.Tensor to a numpy array")
    report = checks.check_function(numpy_on_a_symbolic_tensor, lambda x: x, [(1.0,)])
    assert "not written yet" not in str(report) and "Cannot convert a symbolic" in str(report)


def test_a_graph_execution_error_shows_its_own_message():
    @tf.function
    def bad(x):
        tf.debugging.assert_positive(x, message="x must be positive")
        return x
    try:
        bad(tf.constant(-1.0))
    except Exception as e:
        text = checks.explain(e)
    assert "x must be positive" in text and "stack traces" not in text and "{{node" not in text, text


# -- the notebooks use the registry, and nothing gives the answer away -----------------------------

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CALL = re.compile(r'ctlkit\.exercises\.check\(\s*"(\d\d\.[a-z0-9_]+)"')


def _cells(path):
    cells = json.loads(path.read_text())["cells"]
    return [("".join(c["source"]), c) for c in cells if c["cell_type"] == "code"]


def test_every_exercise_is_checked_in_its_notebook_in_one_line_and_solved_out_of_sight():
    used = set()
    for path in NOTEBOOKS:
        number = path.name[:2]
        for source, cell in _cells(path):
            keys = CALL.findall(source)
            used.update(keys)
            assert all(k.startswith(number + ".") for k in keys), (path.name, keys)
            if source.startswith("# @title Solution"):
                assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, path.name
                assert cell["metadata"].get("cellView") == "form", path.name
                assert keys and source.rstrip().endswith(".assert_ok()"), (path.name, source[-200:])
            elif keys:                    # the learner's checker cell: the call and nothing else
                code = [ln for ln in source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
                assert "def " not in source and len(code) <= 3, (path.name, source)
            assert "_reference" not in source or source.startswith("# @title Solution"), \
                (path.name, "a reference solution in sight", source[:200])
    assert used == set(exercises.names()), set(exercises.names()) ^ used


def test_every_exercise_module_has_its_wrong_answer_tests():
    for key in exercises.names():
        number = key[:2]
        tests = ROOT / "tests" / f"test_exercises_nb{number}.py"
        assert tests.exists(), f"{key}: no {tests.name}"
        assert key in tests.read_text(), f"{tests.name} never checks {key}"


def test_explain_drops_the_source_lines_of_a_traceback():
    class Fake(ValueError):
        pass
    e = Fake('in user code:\n\n    File "/x/y.py", line 5, in step  *\n'
             '        per_replica = strategy.run(f)\n'
             '    File "/x/z.py", line 9, in f\n        logits = model(x)\n\n'
             '    ValueError: the real message')
    text = checks.explain(e)
    assert "the real message" in text and "strategy.run" not in text and "logits =" not in text, text


def test_explain_drops_the_op_wrapper_name_of_an_eager_error():
    try:
        tf.constant([1.0, 2.0, 3.0]) * tf.constant([1.0, 2.0])
    except Exception as e:
        text = checks.explain(e)
    assert "function_node" not in text and "Incompatible shapes" in text, text


# -- a check runs in a known state and gives the notebook its own back ------------------------------


def _standardize_rows(x):
    mean = tf.reduce_mean(x, axis=1, keepdims=True)
    return (x - mean) / (tf.math.reduce_std(x, axis=1, keepdims=True) + 1e-6)


def test_a_check_with_eager_mode_left_on_runs_in_graph_mode_and_turns_it_back_on():
    no_signature = lambda: tf.function(_standardize_rows)          # noqa: E731 - retraces per size
    graph = ctlkit.exercises.check("02.standardizer", no_signature)
    tf.config.run_functions_eagerly(True)
    try:
        eager = ctlkit.exercises.check("02.standardizer", no_signature)
        assert tf.config.functions_run_eagerly()                    # given back
    finally:
        tf.config.run_functions_eagerly(False)
    assert not graph.ok and not eager.ok                            # eager mode hid the retracing
    assert eager.problems == graph.problems
    assert "run_functions_eagerly(True) was on" in str(eager)


def test_a_check_leaves_the_notebooks_random_state_and_policy_as_they_were():
    import random

    from keras.src.backend.common import global_state

    def draws():
        return (random.random(), float(np.random.rand()), float(tf.random.uniform([])),
                float(tf.random.get_global_generator().normal([])), float(keras.random.uniform([])))

    def reseed():      # set_random_seed resets neither TF's global generator nor, in Keras 3.10, Keras'
        keras.utils.set_random_seed(123)
        tf.random.set_global_generator(tf.random.Generator.from_seed(123))
        global_state.set_global_attribute("global_seed_generator", None)

    reseed()
    expected = draws()
    reseed()
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        # both checkers reseed (keras.utils.set_random_seed) and 04's sets a policy of its own
        ctlkit.exercises.check("03.clipped_step", nb03._reference_clipped_step).assert_ok()
        ctlkit.exercises.check("04.clipped_scaled_step", nb04._reference_clipped_step).assert_ok()
        assert keras.mixed_precision.dtype_policy().name == "mixed_float16"
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert draws() == expected
    assert global_state.get_global_attribute("global_random_seed") == 123


# -- a wrong argument from the notebook is the notebook's error, not the learner's ------------------
@pytest.mark.parametrize("key, context, match", [
    ("04.loss_scale_rule", dict(applied=[], scales=[], growth=3), r"at least one step; got 0 and 0"),
    ("04.loss_scale_rule", dict(applied=[True, False], scales=[1.0], growth=3), r"got 2 and 1"),
    ("04.loss_scale_rule", dict(applied=[True], scales=[1.0]), r"missing growth"),
    ("04.loss_scale_rule", dict(applied=[True], scales=[1.0], growth=0), r"growth must be .* positive int"),
    ("10.distributed_step", dict(strategy="mirrored"), r"strategy must be a tf\.distribute\.Strategy"),
    ("11.first_nonfinite", dict(monitor_history=[[1.0, 2.0]]), r"monitor_history must be one loss per step"),
    ("11.first_nonfinite", dict(monitor_history="loss"), r"monitor_history must be"),
    ("11.safe_xent", dict(bad_batch=(tf.zeros([4, 10]),)), r"bad_batch must be \(logits, labels\)"),
    ("11.safe_xent", dict(bad_batch=(tf.zeros([4, 10]), tf.zeros([3], tf.int32))), r"bad_batch must be"),
])
def test_a_wrong_context_argument_raises_naming_it_instead_of_blaming_the_learner(key, context, match):
    answer = {"04.loss_scale_rule": nb04._reference_update,
              "10.distributed_step": nb10._reference_distributed_step,
              "11.first_nonfinite": nb11._reference_first_nonfinite,
              "11.safe_xent": nb11._reference_xent}[key]
    with pytest.raises(checks.ContextError, match=match):
        ctlkit.exercises.check(key, answer, **context)


def test_the_notebooks_own_run_still_replays():
    flags, used = nb04._recorded_run()
    assert ctlkit.exercises.check("04.loss_scale_rule", nb04._reference_update,
                                  applied=flags, scales=used, growth=3).ok


def test_a_check_works_with_op_determinism_on_and_leaves_no_global_generator_behind():
    # notebooks 03, 07 and 15 run setup(deterministic=True): TF then refuses to create its global
    # generator, so a check must not ask for it
    from tensorflow.python.framework import config as tf_config
    from tensorflow.python.ops import stateful_random_ops

    saved = stateful_random_ops.global_generator
    stateful_random_ops.global_generator = None
    tf.config.experimental.enable_op_determinism()
    try:
        ctlkit.exercises.check("03.clipped_step", nb03._reference_clipped_step).assert_ok()
        assert stateful_random_ops.global_generator is None
    finally:
        tf_config.disable_op_determinism()
        stateful_random_ops.global_generator = saved
