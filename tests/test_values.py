"""ctlkit/monitor/values.py, through Monitor.log(): what log() and log_epoch() accept (every kind of
number, tensor and variable), the first-value checks, step numbers, and the errors that name
the argument and the fix."""
import decimal
import fractions
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit.monitor import Monitor


def test_log_accepts_numpy_python_and_extra_scalars():
    m = Monitor(sink="null")
    m.log(loss=np.float32(1.5), grad_norm=2, lr=tf.constant(0.1), accuracy=np.array(0.25))
    m.close()
    assert m.history["loss"].tolist() == [1.5] and m.history["grad_norm"].tolist() == [2.0]
    assert m.history["lr"][0] == pytest.approx(0.1) and m.history["accuracy"].tolist() == [0.25]


def test_explicit_step_numbers():
    m = Monitor(sink="null")
    m.log(step=10, loss=1.0)
    m.log(loss=2.0)
    m.log(step=np.int64(20), loss=3.0)
    m.close()
    assert m.history.steps.tolist() == [10, 11, 20] and m.step == 20


def test_missing_and_late_keys_are_nan_filled():
    m = Monitor(sink="null")
    m.log(loss=1.0, acc=0.5)
    m.log(loss=2.0)
    m.log(loss=3.0, lr=0.1)
    m.close()
    h = m.history
    assert np.isnan(h["acc"][1]) and h["acc"][0] == 0.5
    assert np.isnan(h["lr"][:2]).all() and h["lr"][2] == pytest.approx(0.1)
    assert len(h["loss"]) == len(h["acc"]) == len(h["lr"]) == 3


@pytest.mark.parametrize("bad", [[("dense", 1.0)], 1.0, "dense"])
def test_layer_norms_must_be_a_dict(bad):
    m = Monitor(sink="null")
    with pytest.raises(TypeError, match=r"layer_norms must be a dict"):
        m.log(loss=1.0, layer_norms=bad)


def test_non_scalar_loss_error_names_the_argument():
    m = Monitor(sink="null")
    with pytest.raises(ValueError, match=r"loss"):
        m.log(loss=tf.ones(4))  # e.g. a per-sample loss (reduction=None)
        m.flush()


def test_every_nan_is_rejected():
    with pytest.raises(ValueError, match=r"every"):
        Monitor(every=float("nan"), sink="null")


def test_non_scalar_in_a_batch_names_its_key():
    m = Monitor(sink="null")
    m.log(loss=1.0, grad_norm=1.0)
    m.log(loss=1.0, grad_norm=tf.ones(3))        # e.g. per-variable norms passed by mistake
    with pytest.raises(ValueError, match=r"grad_norm must be a scalar, got shape \[3\]"):
        m.flush()


def test_log_inside_tf_function_raises_at_once_naming_the_fix():
    m = Monitor(sink="null")

    @tf.function
    def step(x):
        loss = tf.reduce_sum(x)
        m.log(loss=loss)
        return loss

    with pytest.raises(TypeError, match=r"loss is a symbolic tensor: monitor.log\(\) was called "
                                        r"inside a tf.function.*Return loss from the step"):
        step(tf.ones(3))

    @tf.function
    def python_values_only(x):
        m.log(lr=0.1)                     # Python numbers inside a trace: logged once, never again
        return x

    with pytest.raises(RuntimeError, match=r"inside a tf.function"):
        python_values_only(tf.ones(1))
    assert len(m.history) == 0 and m.step == 0
    m.log(loss=tf.constant(3.0))
    m.close()                             # no NumPy error at close
    assert m.history["loss"].tolist() == [3.0]


_NUMBERS = {
    "int": (3, 3.0), "float": (0.5, 0.5), "bool": (True, 1.0),
    "np.float16": (np.float16(0.5), 0.5), "np.float32": (np.float32(0.25), 0.25),
    "np.float64": (np.float64(2.5), 2.5), "np.int64": (np.int64(-4), -4.0),
    "np.bool_": (np.bool_(False), 0.0), "0-d array": (np.array(1.5), 1.5),
    "shape-(1,) array": (np.array([2.0]), 2.0), "float32 tensor": (tf.constant(0.75), 0.75),
    "float64 tensor": (tf.constant(0.1, tf.float64), 0.1), "int32 tensor": (tf.constant(7), 7.0),
    "float16 tensor": (tf.constant(0.5, tf.float16), 0.5),
    "bfloat16 tensor": (tf.constant(0.5, tf.bfloat16), 0.5),
    "shape-(1, 1) tensor": (tf.constant([[4.0]]), 4.0),
    "tf.Variable": (tf.Variable(0.5), 0.5), "keras.Variable": (keras.Variable(2.0), 2.0),
    "Fraction": (fractions.Fraction(1, 4), 0.25), "Decimal": (decimal.Decimal("1.5"), 1.5),
}


@pytest.mark.parametrize("value, expected", list(_NUMBERS.values()), ids=list(_NUMBERS))
def test_every_kind_of_number_is_logged_exactly(value, expected):
    m = Monitor(sink="null", every=3600)
    m.log(loss=value, acc=value, layer_norms={"dense": value})   # the first value: read now
    m.log(loss=value, acc=value, layer_norms={"dense": value})   # later ones: at the redraw
    m.log_epoch(val_loss=value)
    m.close()
    for key in ("loss", "acc", "layer/dense"):
        assert m.history[key].tolist() == pytest.approx([expected] * 2, rel=1e-6), key
    assert m.history["val_loss"].tolist() == pytest.approx([expected], rel=1e-6)


@pytest.mark.parametrize("value", [float("nan"), np.float32("nan"), np.inf, -np.inf,
                                   tf.constant(np.nan), tf.constant(np.inf, tf.float16)],
                         ids=["nan", "np.float32 nan", "inf", "-inf", "tensor nan",
                              "float16 tensor inf"])
def test_every_kind_of_nonfinite_loss_is_reported(value):
    m = Monitor(sink="null", every=3600)
    m.log(loss=1.0)
    m.log(loss=value)
    m.close()
    assert m.nonfinite[:2] == ("loss", 2)


_NOT_A_SCALAR = {
    "str": ("0.5", TypeError, r"acc must be a number or a scalar tensor, got str"),
    "bytes": (b"1", TypeError, r"got bytes"),
    "list": ([1.0], TypeError, r"got list"),
    "tuple": ((1.0, 2.0), TypeError, r"got tuple"),
    "dict": ({"a": 1.0}, TypeError, r"got dict"),
    "complex": (1 + 2j, TypeError, r"got complex"),
    "np.complex64": (np.complex64(1), TypeError, r"got complex64"),
    "object": (object(), TypeError, r"got object"),
    "vector array": (np.ones(3), ValueError, r"acc must be a scalar, got shape \[3\]"),
    "empty array": (np.zeros(0), ValueError, r"acc must be a scalar, got shape \[0\]"),
    "per-sample tensor": (tf.ones(4), ValueError, r"acc must be a scalar, got shape \[4\]"),
    "empty tensor": (tf.zeros((0,)), ValueError, r"got shape \[0\]"),
    "string tensor": (tf.constant("0.5"), TypeError, r"acc must be a real number, got bytes"),
    "complex tensor": (tf.constant(1 + 1j), TypeError, r"acc must be a real number, got complex"),
    "object array": (np.array([None]), TypeError, r"acc must be a real number"),
}


@pytest.mark.parametrize("value, error, message", list(_NOT_A_SCALAR.values()),
                         ids=list(_NOT_A_SCALAR))
def test_a_value_that_is_not_one_real_number_fails_at_log_time(value, error, message):
    m = Monitor(sink="null", every=3600)
    m.log(loss=1.0)
    with pytest.raises(error, match=message):
        m.log(loss=2.0, acc=value)
    m.log(loss=3.0)                       # the failed call stored nothing; the run goes on
    m.close()
    assert m.history.steps.tolist() == [1, 2] and m.history["loss"].tolist() == [1.0, 3.0]
    assert "acc" not in m.history


@pytest.mark.parametrize("value", ["0.5", [1.0], np.ones(2), tf.ones(2)],
                         ids=["str", "list", "vector array", "per-sample tensor"])
def test_a_bad_value_fails_at_log_time_under_every_argument(value):
    for kwargs in (dict(loss=value), dict(grad_norm=value), dict(layer_norms={"dense": value})):
        m = Monitor(sink="null")
        key = next(iter(kwargs)).replace("layer_norms", "layer_norms['dense']")
        with pytest.raises((TypeError, ValueError), match=re.escape(key)):
            m.log(**kwargs)
        assert len(m.history) == 0 and m.step == 0


@pytest.mark.parametrize("kwargs, message", [
    ({}, r"log\(\) got no values"),
    ({"loss": None}, r"log\(\) got no values"),
    ({"layer_norms": {}}, r"log\(\) got no values"),
    ({"loss": 1.0, "layer_norms": {0: 1.0}}, r"layer_norms keys must be layer names \(str\)"),
    ({"loss": 1.0, "layer/dense": 1.0}, r"'layer/dense': names starting with 'layer/'"),
], ids=["nothing", "only None", "empty layer_norms", "non-str layer name", "layer/ scalar"])
def test_log_without_usable_values_is_refused(kwargs, message):
    m = Monitor(sink="null")
    with pytest.raises((TypeError, ValueError), match=message):
        m.log(**kwargs)
    assert m.step == 0


@pytest.mark.parametrize("step, error, message", [
    (2.5, TypeError, r"step must be an int .* got float 2.5"),
    ("3", TypeError, r"got str"),
    (True, TypeError, r"got bool"),
    (tf.constant(2.0), TypeError, r"step must be an int"),
    (None.__class__, TypeError, r"step must be an int"),
    (-1, ValueError, r"step must be >= 0"),
    (5, ValueError, r"step must increase: got 5 after step 5"),
    (np.int64(4), ValueError, r"step must increase: got 4 after step 5"),
], ids=["float", "str", "bool", "float tensor", "a type", "negative", "repeated", "backwards"])
def test_bad_step_numbers(step, error, message):
    m = Monitor(sink="null")
    m.log(step=5, loss=1.0)
    with pytest.raises(error, match=message):
        m.log(step=step, loss=2.0)
    m.log(step=tf.constant(6), loss=3.0)  # an int tensor is fine
    m.close()
    assert m.history.steps.tolist() == [5, 6] and m.step == 6


def test_step_zero_first_is_fine():
    m = Monitor(sink="null")
    for step in range(3):
        m.log(step, loss=1.0)
    m.close()
    assert m.history.steps.tolist() == [0, 1, 2]


@pytest.mark.parametrize("kwargs, error, message", [
    ({}, ValueError, r"log_epoch\(\) got no values"),
    ({"val_loss": None}, ValueError, r"log_epoch\(\) got no values"),
    ({"val_loss": tf.ones(2)}, ValueError, r"val_loss must be a scalar, got shape \[2\]"),
    ({"val_loss": "0.5"}, TypeError, r"val_loss must be a number or a scalar tensor, got str"),
    ({"val_loss": 0.5, "val_acc": [0.9]}, TypeError, r"val_acc .* got list"),
    ({"layer/x": 1.0}, ValueError, r"names starting with 'layer/'"),
    ({"loss": 0.5}, ValueError, r"'loss' is already logged per step.*'val_loss'"),
], ids=["nothing", "only None", "vector", "str", "one bad of two", "layer/ key", "step key"])
def test_bad_log_epoch(kwargs, error, message):
    m = Monitor(sink="null")
    m.log(loss=1.0)
    with pytest.raises(error, match=message):
        m.log_epoch(**kwargs)
    m.close()
    assert m.history.epoch_keys() == [] and m.history["loss"].tolist() == [1.0]


def test_epoch_key_reused_per_step_is_refused():
    m = Monitor(sink="null")
    m.log(loss=1.0)
    m.log_epoch(accuracy=0.5)
    with pytest.raises(ValueError, match=r"'accuracy' is already an end-of-epoch key"):
        m.log(loss=1.0, accuracy=0.7)
    m.close()
    assert m.history["accuracy"].tolist() == [0.5] and len(m.history) == 1

