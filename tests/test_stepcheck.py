"""Tests for ctlkit/checks/step.py: check_step. More of its messages (the batch that differs, the
returned value, a plain Python step, retracing, the optimizer state, bad arguments) are tested
in tests/test_exercises.py."""
import keras
import pytest
import tensorflow as tf

from ctlkit.checks.step import check_step

BATCHES = {"the first batch": (tf.ones([2, 2]), tf.zeros([2, 1])),
           "the second batch": (tf.fill([2, 2], 3.0), tf.ones([2, 1]))}


def build():
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), keras.optimizers.SGD(0.1)


def factory(model, optimizer, scale=1.0, apply=True):
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = scale * tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        if apply:
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


def test_extra_arguments_reach_both_factories_and_verbose_prints(capsys):
    report = check_step(factory, factory, build, BATCHES, args=(2.0,), verbose=True)
    assert report.ok and report.cases == 2 and "PASS factory" in capsys.readouterr().out
    report = check_step(lambda m, o, s: factory(m, o), factory, build, BATCHES, args=2.0)
    assert not report.ok and "on the first batch, the value your step returned" in \
        report.problems[0], report


def test_a_step_that_never_applies_the_gradients_is_told_so():
    report = check_step(lambda m, o: factory(m, o, apply=False), factory, build, BATCHES,
                        name="no_update")
    assert report.problems == ["on the first batch, your step left every weight unchanged where "
                               "the reference updated them: is optimizer.apply_gradients called?"]
    assert str(report).startswith("NOT YET no_update:")


def test_an_unwritten_factory_says_so_and_a_broken_reference_is_a_checker_bug():
    def unwritten(model, optimizer):
        raise NotImplementedError
    assert check_step(unwritten, factory, build, BATCHES).problems == [
        "unwritten: not written yet (it raised NotImplementedError)."]

    def broken(model, optimizer):
        raise KeyError("oops")
    with pytest.raises(RuntimeError, match=r"checker bug: the reference: raised KeyError"):
        check_step(factory, broken, build, BATCHES)


def build_adam():
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), keras.optimizers.Adam(0.1)


def built_factory(model, optimizer):
    optimizer.build(model.trainable_variables)
    return factory(model, optimizer)


THREE = dict(BATCHES, **{"the third batch": (tf.fill([2, 2], -1.0), tf.ones([2, 1]))})


def test_an_optimizer_built_on_first_use_is_not_a_retrace():
    """Adam unbuilt: the first call creates its slots and TF traces that call twice."""
    report = check_step(factory, built_factory, build_adam, THREE)
    assert report.ok, report
    step = factory(*build_adam())
    step(*BATCHES["the first batch"])
    assert step.experimental_get_tracing_count() == 2       # what is excused: TF's own double trace


def test_a_real_retrace_is_still_caught_and_the_excuse_is_named():
    calls = []

    def per_call(model, optimizer):                          # a new Python object per call retraces
        @tf.function
        def step(x, y, tag):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                          model.trainable_variables))
            return loss

        def run(x, y):
            calls.append(object())
            return step(x, y, calls[-1])
        run.experimental_get_tracing_count = step.experimental_get_tracing_count
        return run
    report = check_step(per_call, built_factory, build_adam, THREE)
    assert not report.ok
    assert report.problems[0].startswith("your step traced 3 times for 3 calls (allowed: 1; not "
                                         "counting the second trace of the first call"), report


def test_an_update_off_by_an_exact_factor_is_named_with_the_slip_it_means():
    def doubled(model, optimizer):                           # the loss (so, with SGD, the update) x 2
        return factory(model, optimizer, scale=2.0)
    report = check_step(doubled, factory, build, BATCHES,
                        slips={2.0: "the loss was summed over two halves instead of averaged"})
    assert report.problems[0].startswith(
        "on the first batch, the value your step returned differs"), report
    assert report.problems[0].endswith("yours is 2 times the expected: the loss was summed over two "
                                       "halves instead of averaged."), report
    assert report.problems[1] == ("on the first batch, your step's update (the change of every "
                                  "weight) is 2 times the reference's: the loss was summed over "
                                  "two halves instead of averaged."), report
    plain = check_step(doubled, factory, build, BATCHES)    # no slips given: the factor alone
    assert plain.problems[1].endswith("is 2 times the reference's."), plain
