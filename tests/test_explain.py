"""Tests for ctlkit/checks/errors.py: an error as a sentence, and call(). The hints for a Python
`if` on a tensor, `.numpy()` in a graph and a None gradient, and the traceback TensorFlow wraps
around an error, are tested in tests/test_exercises.py."""
import pytest
import tensorflow as tf

from ctlkit.checks.errors import call, explain


def test_call_returns_the_value_or_a_sentence_that_starts_with_the_label():
    assert call(lambda a, b: a + b, (1, 2), "case 1") == (3, None)

    def unwritten(x):
        raise NotImplementedError
    assert call(unwritten, (1,), "case 2") == (
        None, "case 2: not written yet (it raised NotImplementedError).")

    def numpy_says_no(x):
        raise NotImplementedError("Cannot convert a symbolic tensor")
    assert call(numpy_says_no, (1,), "case 3") == (
        None, "case 3: raised NotImplementedError: Cannot convert a symbolic tensor")


def test_call_lets_an_interrupt_through():
    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        call(interrupted, (), "case 1")


def test_a_variable_created_on_every_call_gets_its_hint():
    @tf.function
    def step(x):
        v = tf.Variable(1.0)
        return v + x
    try:
        step(tf.constant(1.0))
    except Exception as e:
        text = explain(e)
    else:
        pytest.fail("a tf.Variable made inside a tf.function on each call did not raise")
    assert text.startswith("ValueError. Hint: ") and "create it once, outside the step" in text, text
    assert "begins: tf.function only supports singleton" in text, text


def test_a_long_message_is_cut_and_an_empty_one_leaves_the_type():
    text = explain(ValueError("x" * 1000))
    assert text == "ValueError: " + "x" * 237 + "..."
    assert explain(KeyError()) == "KeyError"
    assert explain(RuntimeError("first line\nsecond line\nthird line")) == (
        "RuntimeError: first line second line")


def test_a_python_if_on_a_tensor_leads_with_the_hint_and_drops_tensorflows_general_advice():
    @tf.function
    def f(x):
        if x > 0:
            return x
        return -x
    try:
        tf.function(f.python_function, autograph=False)(tf.constant(1.0))
    except Exception as e:
        text = explain(e)
    else:
        pytest.fail("a Python if on a symbolic tensor did not raise")
    assert text.startswith("OperatorNotAllowedInGraphError. Hint: a Python `if`"), text
    assert "Eager execution" not in text and "as a Python `bool` is not allowed." in text, text
