"""Tests for ctlkit/stepcheck.py: check_step. More of its messages (the batch that differs, the
returned value, a plain Python step, retracing, the optimizer state, bad arguments) are tested
in tests/test_exercises.py."""
import keras
import pytest
import tensorflow as tf

from ctlkit.stepcheck import check_step

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
