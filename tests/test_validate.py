"""Tests for ctlkit/validate.py: numbers and flags in every spelling, refusals that name the fix."""
import math

import numpy as np
import pytest
import tensorflow as tf

from ctlkit import validate


@pytest.mark.parametrize("value", [32, np.int64(32), np.int32(32), np.uint8(32), np.array(32),
                                   tf.constant(32), tf.constant(32, tf.int64)])
def test_positive_int_accepts_python_numpy_and_tensor_ints(value):
    got = validate.positive_int("batch", value)
    assert got == 32 and type(got) is int


@pytest.mark.parametrize("value", [32.0, 2.5, np.float32(3), tf.constant(3.0), "32", None, True,
                                   np.bool_(True), [32], np.array([32]), tf.constant([32]), b"3"])
def test_positive_int_refuses_other_types_naming_the_argument(value):
    with pytest.raises(TypeError, match=r"batch must be a positive int, got .*pass e\.g\. batch="):
        validate.positive_int("batch", value)


def test_positive_int_hints_at_int_for_floats():
    with pytest.raises(TypeError, match=r"for a float, steps=int\(x\)"):
        validate.positive_int("steps", 10.0)


@pytest.mark.parametrize("value", [0, -1, np.int64(-5), tf.constant(0)])
def test_positive_int_refuses_non_positive(value):
    with pytest.raises(ValueError, match=r"epochs must be a positive int, got -?\d+"):
        validate.positive_int("epochs", value)


@pytest.mark.parametrize("value, expected", [(0, 0), (np.int64(7), 7), (tf.constant(3), 3)])
def test_seed(value, expected):
    assert validate.seed(value) == expected


@pytest.mark.parametrize("value", [-1, 1.5, "0", None, True, math.nan])
def test_seed_refusals(value):
    with pytest.raises((TypeError, ValueError), match="seed must be a non-negative int"):
        validate.seed(value)


@pytest.mark.parametrize("value", [0.25, np.float32(0.25), tf.constant(0.25), 1, np.int64(0)])
def test_number_accepts_every_spelling(value):
    got = validate.number("lr", value, low=0, high=1)
    assert type(got) is float and got == float(np.asarray(value))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float64("nan"),
                                   tf.constant(float("inf"))])
def test_number_refuses_non_finite(value):
    with pytest.raises(ValueError, match="lr must be finite"):
        validate.number("lr", value)


@pytest.mark.parametrize("value, kw", [(0.0, {"low": 0, "low_open": True}), (1.0, {"high": 0.5}),
                                       (-0.1, {"low": 0}), (0.5, {"high": 0.5, "high_open": True})])
def test_number_range(value, kw):
    with pytest.raises(ValueError, match=r"frac must be in [\[(]"):
        validate.number("frac", value, **kw)


@pytest.mark.parametrize("value", ["0.1", None, True, [0.1], np.array([0.1, 0.2]), 1j])
def test_number_refuses_other_types(value):
    with pytest.raises(TypeError, match="frac must be a number"):
        validate.number("frac", value)


@pytest.mark.parametrize("value, expected", [(True, True), (False, False), (np.bool_(True), True),
                                             (tf.constant(False), False)])
def test_flag(value, expected):
    assert validate.flag("quick", value) is expected


@pytest.mark.parametrize("value", ["no", "yes", "", 0, 1, None, 1.0, [True]])
def test_flag_never_guesses(value):
    with pytest.raises(TypeError, match="quick must be True or False"):
        validate.flag("quick", value)


@pytest.mark.parametrize("raw, expected", [("1", True), ("TRUE", True), (" yes ", True), ("on", True),
                                           ("y", True), ("0", False), ("false", False), ("No", False),
                                           ("off", False), ("n", False), ("", False), ("  ", False)])
def test_env_flag_words(monkeypatch, raw, expected):
    monkeypatch.setenv("CTLKIT_TEST_FLAG", raw)
    assert validate.env_flag("CTLKIT_TEST_FLAG") is expected


def test_env_flag_unset_gives_the_default(monkeypatch):
    monkeypatch.delenv("CTLKIT_TEST_FLAG", raising=False)
    assert validate.env_flag("CTLKIT_TEST_FLAG") is False
    assert validate.env_flag("CTLKIT_TEST_FLAG", default=True) is True


@pytest.mark.parametrize("raw", ["2", "enabled", "disabled", "-1", "tru", "1.0"])
def test_env_flag_refuses_anything_else(monkeypatch, raw):
    monkeypatch.setenv("CTLKIT_TEST_FLAG", raw)
    with pytest.raises(ValueError, match=r"CTLKIT_TEST_FLAG=.* neither on nor off: set it to 1"):
        validate.env_flag("CTLKIT_TEST_FLAG")


@pytest.mark.parametrize("value", [2**32, 2**40, np.uint64(2**63)])
def test_seed_too_large_for_numpy_is_refused_as_a_seed_problem(value):
    with pytest.raises(ValueError, match=r"seed must be at most 4294967295"):
        validate.seed(value)
    assert validate.seed(2**32 - 1) == 2**32 - 1
