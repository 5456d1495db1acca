"""TF32 on a CPU: what an Ampere (or newer) GPU does to float32 matmuls and convolutions, emulated.

On Ampere and newer NVIDIA GPUs (compute capability 8.0 or more), TensorFlow runs float32 matmuls and
convolutions in TensorFloat-32 by default: in most cases (not for every shape) their inputs are
rounded to 10 mantissa bits (float32 keeps 23), and the products are accumulated in float32
(``enable_tensor_float_32_execution`` in tensorflow/python/framework/config.py). A notebook that
compares a float32 result with a reference at a tolerance tighter than that rounding passes on a
CPU and on a T4, and can fail on an A100 or L4.

No GPU is needed to see it:

    tf32.round_to_tf32(x)     x rounded to TF32 precision (10 mantissa bits, to nearest, ties to
                              even), still a float32 tensor
    with tf32.emulated():     tf.matmul, tf.linalg.matmul, tf.linalg.matvec, tf.tensordot, tf.einsum
        ...                   and the tf.nn convolutions (conv1d/2d/3d, convolution, their
                              transposes, depthwise and separable) round their float32 inputs
                              first, in the forward pass and in the gradient's matmuls and
                              convolutions (the incoming gradient is rounded too), whenever
                              ``tf.config.experimental.tensor_float_32_execution_enabled()`` is
                              True, as the GPU does. Turn the switch off and they compute in full
                              float32 again, as on the GPU.

``CTLKIT_EMULATE_TF32=1`` makes ``ctlkit.setup()`` enter the emulation for the rest of the process:
``make test EMULATE_TF32=1 WHAT=notebooks`` runs the notebooks as an Ampere GPU would round them.
``CTLKIT_EMULATE_TF32=force`` rounds even where the switch is off: what a notebook that turns TF32
off would see if it did not (``make sweep KEEP=1 EMULATE_TF32=force`` measures the errors it avoids).

What it leaves out: the GPU's own summation order (cuBLAS and cuDNN add in another order than the
CPU; the rounding of each input is what TF32 adds on top of that), ops reached through other
functions (the ``@`` operator, sparse matmuls, a matmul inside a fused TensorFlow op such as an LSTM
kernel: Keras' Dense, EinsumDense and convolution layers do go through the functions above), and
the shapes for which the GPU keeps full float32 (TensorFlow: TF32 is used "in most cases"). So it
shows the size of TF32's error, not the GPU's exact bits. Under ``force`` an assert that relies on
TF32 being off fails: that is what it is for (04's "full float32" line among them).
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading

ENV = "CTLKIT_EMULATE_TF32"

# (module path under tf, attribute, float32 operands rounded): the names Keras 3's TensorFlow
# backend calls for Dense, EinsumDense and the convolution layers (keras/src/backend/tensorflow/
# numpy.py matmul/tensordot/einsum, nn.py conv/depthwise_conv/separable_conv/conv_transpose), and
# the ones the notebooks call themselves
_TARGETS = (("", "matmul", 2), ("linalg", "matmul", 2), ("linalg", "matvec", 2),
            ("", "tensordot", 2), ("linalg", "tensordot", 2), ("", "einsum", 0), ("linalg", "einsum", 0),
            ("nn", "conv1d", 2), ("nn", "conv2d", 2), ("nn", "conv3d", 2), ("nn", "convolution", 2),
            ("nn", "conv1d_transpose", 2), ("nn", "conv2d_transpose", 2), ("nn", "conv3d_transpose", 2),
            ("nn", "conv_transpose", 2), ("nn", "depthwise_conv2d", 2), ("nn", "separable_conv2d", 3))
_lock = threading.Lock()
_active = {"depth": 0, "saved": {}}


def round_to_tf32(x):
    """``x`` (float32) rounded to TF32 precision: 10 mantissa bits, to nearest, ties to even.
    Infinities and NaNs pass unchanged; the exponent range is float32's, as in TF32."""
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    if x.dtype != tf.float32:
        raise TypeError(f"round_to_tf32 takes a float32 tensor (TF32 rounds float32 inputs only), "
                        f"got {x.dtype.name}; cast it first: tf.cast(x, tf.float32)")
    bits = tf.bitcast(x, tf.int32)
    keep = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 13), 1)   # the last kept bit: ties to even
    rounded = tf.bitwise.bitwise_and(bits + 0xFFF + keep, ~0x1FFF)        # drop the 13 low bits
    return tf.where(tf.math.is_finite(x), tf.bitcast(rounded, tf.float32), x)


def _straight_through(x):
    """``x`` rounded to TF32 in value, with the gradient of the identity (inf and NaN pass)."""
    import tensorflow as tf

    return tf.where(tf.math.is_finite(x), x + tf.stop_gradient(round_to_tf32(x) - x), x)


def _tf32_on() -> bool:
    import tensorflow as tf

    return _active.get("force", False) or bool(tf.config.experimental.tensor_float_32_execution_enabled())


def _rounding(fn, n_inputs: int = 2):
    """``fn`` with its first ``n_inputs`` float32 tensors (a product's two operands, a
    convolution's input and filters; every operand of an einsum: ``n_inputs=0``) rounded to TF32
    while the switch is on, in the forward pass and in the gradient (the incoming gradient too)."""
    import tensorflow as tf

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if n_inputs == 0:                                 # einsum(equation, *inputs)
            head, inputs, rest = args[:1], list(args[1:]), ()
        else:
            head, inputs, rest = (), list(args[:n_inputs]), args[n_inputs:]
        if not _tf32_on() or len(inputs) < (1 if head else n_inputs):
            return fn(*args, **kwargs)    # switch off, or operands passed by keyword: untouched
        tensors = [tf.convert_to_tensor(t) for t in inputs]
        if any(t.dtype != tf.float32 for t in tensors):
            return fn(*args, **kwargs)                    # TF32 touches float32 only

        @tf.custom_gradient
        def through(*xs):
            y = fn(*head, *[round_to_tf32(t) for t in xs], *rest, **kwargs)

            def grad(dy):
                # the forward again, from the inputs themselves: the gradient's matmuls see rounded
                # operands, and a gradient of this gradient (a gradient penalty, a Hessian-vector
                # product) still reaches the inputs through the straight-through rounding
                with tf.GradientTape() as tape:
                    tape.watch(xs)
                    y_again = fn(*head, *[_straight_through(t) for t in xs], *rest, **kwargs)
                return tape.gradient(y_again, xs, output_gradients=_straight_through(dy))
            return y, grad

        return through(*tensors)

    wrapped.__ctlkit_tf32__ = fn
    return wrapped


@contextlib.contextmanager
def emulated():
    """Inside the block, the functions listed in the module's docstring round their float32
    inputs to TF32 whenever TensorFlow's TF32 switch is on. Nested blocks are fine; leaving the
    outermost one puts the original functions back."""
    _enter()
    try:
        yield
    finally:
        with _lock:
            _active["depth"] -= 1
            if _active["depth"] == 0:
                _uninstall()


def _enter() -> None:
    with _lock:
        if _active["depth"] == 0:
            _install()
        _active["depth"] += 1


def _install() -> None:
    import tensorflow as tf

    for where, name, operands in _TARGETS:
        module = getattr(tf, where) if where else tf
        original = getattr(module, name, None)
        if original is None or hasattr(original, "__ctlkit_tf32__"):
            continue
        _active["saved"][(where, name)] = original
        setattr(module, name, _rounding(original, operands))


def _uninstall() -> None:
    import tensorflow as tf

    for (where, name), original in _active["saved"].items():
        setattr(getattr(tf, where) if where else tf, name, original)
    _active["saved"].clear()


def active() -> bool:
    """True while the emulation is installed (an ``emulated()`` block, or CTLKIT_EMULATE_TF32)."""
    return _active["depth"] > 0


def forced() -> bool:
    """True when ``CTLKIT_EMULATE_TF32=force`` rounds whatever the switch says."""
    return bool(_active.get("force", False))


def enable_from_env() -> bool:
    """Enter the emulation for the rest of the process if ``CTLKIT_EMULATE_TF32`` is on (what
    ``ctlkit.setup()`` calls). Returns whether it is active."""
    from . import validate

    force = os.environ.get(ENV, "").strip().lower() == "force"
    if (force or validate.env_flag(ENV)) and not _active.get("from_env"):
        _active["force"] = force
        _enter()                 # for good: no block to leave (and no generator to be collected)
        _active["from_env"] = True
    return active()
