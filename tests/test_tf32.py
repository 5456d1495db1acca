"""ctlkit.tf32: TF32's rounding emulated on a CPU (issue 34), checked against what TensorFlow's own
docstring says TF32 does (tensorflow/python/framework/config.py, enable_tensor_float_32_execution):
inputs rounded to 10 mantissa bits, float32 accumulation, only while the switch is on."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit import tf32


@pytest.fixture
def switch_on():
    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(True)
    yield
    tf.config.experimental.enable_tensor_float_32_execution(before)


def test_rounding_keeps_ten_mantissa_bits_to_nearest_ties_to_even():
    ulp = 2.0 ** -10                                   # TF32's step just above 1
    x = tf.constant([1.0, 1 + ulp / 2, 1 + 1.5 * ulp, 1 + 0.6 * ulp, 1.0001, -(1 + 0.6 * ulp),
                     3.0e38, np.inf, -np.inf], tf.float32)
    r = tf32.round_to_tf32(x).numpy()
    assert list(r[:6]) == [1.0, 1.0, 1 + 2 * ulp, 1 + ulp, 1.0, -(1 + ulp)]   # ties: to even
    assert np.isfinite(r[6]) and abs(r[6] / np.float32(3.0e38) - 1) <= 2.0 ** -11   # float32's range
    assert r[7] == np.inf and r[8] == -np.inf
    assert np.isnan(tf32.round_to_tf32(tf.constant([np.nan])).numpy()[0])
    rng = np.random.default_rng(0)
    v = (rng.normal(size=10_000) * 10.0 ** rng.integers(-30, 30, size=10_000)).astype(np.float32)
    rv = tf32.round_to_tf32(v).numpy()
    assert np.all(rv.view(np.int32) & 0x1FFF == 0)         # the 13 dropped bits are zero
    assert np.max(np.abs(rv - v) / np.abs(v)) <= 2.0 ** -11    # half a TF32 step, relative


def test_rounding_refuses_other_dtypes_with_the_fix():
    with pytest.raises(TypeError, match=r"float32 tensor.*tf.cast\(x, tf.float32\)"):
        tf32.round_to_tf32(tf.constant([1.0], tf.float64))


def test_the_docstring_example_of_tensorflow_under_the_emulation(switch_on):
    # TF's docstring: fill 1.0001 times fill 1.0 gives 1024.0 with TF32, ~1024.1 without
    x, y = tf.fill((1024, 1024), 1.0001), tf.fill((1024, 1024), 1.0)
    with tf32.emulated():
        assert float(tf.linalg.matmul(x, y)[0, 0]) == 1024.0
        tf.config.experimental.enable_tensor_float_32_execution(False)
        assert abs(float(tf.matmul(x, y)[0, 0]) - 1024.1) < 1e-2      # the switch is read per call
    assert not tf32.active() and float(tf.matmul(x, y)[0, 0]) > 1024.05


def _rounded(x):
    return tf32.round_to_tf32(tf.constant(x, tf.float32))


def test_a_keras_layer_and_its_gradient_see_rounded_inputs_eager_graph_and_xla(switch_on):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    layer = keras.layers.Dense(3, use_bias=False)
    layer.build((None, 5))
    w = layer.kernel.numpy()
    dy = rng.normal(size=(8, 3)).astype(np.float32)
    want_y = _rounded(x) @ _rounded(w)
    want_dw = tf.matmul(_rounded(x), _rounded(dy), transpose_a=True)

    def step(x):
        with tf.GradientTape() as tape:
            y = layer(x)
        return y, tape.gradient(y, layer.kernel, output_gradients=tf.constant(dy))
    with tf32.emulated():
        for run in (step, tf.function(step), tf.function(step, jit_compile=True)):
            y, dw = run(tf.constant(x))
            np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(dw, want_dw, rtol=1e-6, atol=1e-6)
        y_plain = x @ w
        assert np.max(np.abs(step(tf.constant(x))[0].numpy() - y_plain)) > 1e-5   # it did round
    assert tf.matmul is tf.linalg.matmul and not hasattr(tf.matmul, "__ctlkit_tf32__")  # put back


def test_convolutions_einsum_and_second_order_gradients_still_work(switch_on):
    rng = np.random.default_rng(2)
    img = tf.constant(rng.normal(size=(2, 6, 6, 3)), tf.float32)
    conv = keras.layers.Conv2D(4, 3)
    conv.build((None, 6, 6, 3))
    with tf32.emulated():
        out = conv(img)
        want = tf.nn.convolution.__ctlkit_tf32__(_rounded(img), _rounded(conv.kernel.numpy()), 1,
                                                 "VALID") + conv.bias
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
        a = tf.constant(rng.normal(size=(3, 4)), tf.float32)
        b = tf.constant(rng.normal(size=(4, 2)), tf.float32)
        np.testing.assert_allclose(tf.einsum("ij,jk->ik", a, b), _rounded(a.numpy()) @ _rounded(b.numpy()),
                                   rtol=1e-6, atol=1e-6)
        with tf.GradientTape() as outer:                   # an R1 penalty: a gradient of a gradient
            with tf.GradientTape() as inner:
                inner.watch(img)
                score = tf.reduce_sum(conv(img) ** 2)
            penalty = tf.reduce_sum(inner.gradient(score, img) ** 2)
        assert all(g is not None and np.all(np.isfinite(g)) for g in
                   outer.gradient(penalty, conv.trainable_variables))
        # a gradient of a gradient with a known answer: for f(w) = sum((x @ w)^2) / 2,
        # grad_x = (x @ w) @ w^T; its penalty ||grad_x||^2 has a non-zero gradient in w
        x = tf.constant([[1.0, 2.0]])
        w = tf.Variable([[0.5], [0.25]])
        for run in (lambda f: f(), lambda f: tf.function(f)()):
            def penalty_grad():
                with tf.GradientTape() as outer:
                    with tf.GradientTape() as inner:
                        inner.watch(x)
                        f = tf.reduce_sum(tf.matmul(x, w) ** 2) / 2
                    g = inner.gradient(f, x)
                    p = tf.reduce_sum(g ** 2)
                return outer.gradient(p, w)
            # x @ w = 1, g = w^T = (0.5, 0.25), p = (x@w)^2 ||w||^2: dp/dw = 2 (x@w) x^T ||w||^2 + 2 (x@w)^2 w
            want = 2 * 1.0 * np.array([[1.0], [2.0]]) * 0.3125 + 2 * 1.0 * np.array([[0.5], [0.25]])
            np.testing.assert_allclose(run(penalty_grad), want, rtol=2e-3)   # TF32: 10 bits
        ints = tf.matmul(tf.ones((2, 2), tf.int32), tf.ones((2, 2), tf.int32))   # float32 only
        assert ints.dtype == tf.int32


def test_the_environment_variable_turns_it_on_for_the_process(monkeypatch):
    monkeypatch.setenv(tf32.ENV, "maybe")
    with pytest.raises(ValueError, match=tf32.ENV):
        tf32.enable_from_env()
    monkeypatch.setenv(tf32.ENV, "0")
    assert tf32.enable_from_env() is False and not tf32.active()


def test_the_environment_variable_keeps_it_on_after_setup_returns(monkeypatch):
    import gc
    monkeypatch.setattr(tf32, "_active", {"depth": 0, "saved": {}})
    monkeypatch.setenv(tf32.ENV, "1")
    try:
        assert tf32.enable_from_env() is True
        gc.collect()                                  # nothing left behind to undo it
        assert tf32.active() and hasattr(tf.matmul, "__ctlkit_tf32__")
        assert tf32.enable_from_env() is True and tf32._active["depth"] == 1   # once per process
    finally:
        tf32._uninstall()


def test_force_rounds_even_where_a_notebook_turned_tf32_off(monkeypatch):
    monkeypatch.setattr(tf32, "_active", {"depth": 0, "saved": {}})
    monkeypatch.setenv(tf32.ENV, "force")
    before = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        tf.config.experimental.enable_tensor_float_32_execution(False)
        assert tf32.enable_from_env() is True
        x, y = tf.fill((64, 64), 1.0001), tf.fill((64, 64), 1.0)
        assert float(tf.matmul(x, y)[0, 0]) == 64.0               # rounded although the switch is off
    finally:
        tf32._uninstall()
        tf.config.experimental.enable_tensor_float_32_execution(before)


def test_matvec_and_separable_convolutions_are_rounded_too(switch_on):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    v = rng.normal(size=(4,)).astype(np.float32)
    img = rng.normal(size=(1, 5, 5, 2)).astype(np.float32)
    depth = rng.normal(size=(3, 3, 2, 1)).astype(np.float32)
    point = rng.normal(size=(1, 1, 2, 3)).astype(np.float32)
    with tf32.emulated():
        np.testing.assert_allclose(tf.linalg.matvec(a, v), _rounded(a).numpy() @ _rounded(v).numpy(),
                                   rtol=1e-6, atol=1e-6)
        got = tf.nn.separable_conv2d(img, depth, point, [1, 1, 1, 1], "VALID")
        want = tf.nn.separable_conv2d.__ctlkit_tf32__(_rounded(img), _rounded(depth), _rounded(point),
                                                     [1, 1, 1, 1], "VALID")
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        layer = keras.layers.SeparableConv2D(3, 3)
        layer.build((None, 5, 5, 2))
        plain = tf.nn.separable_conv2d.__ctlkit_tf32__(img, layer.depthwise_kernel, layer.pointwise_kernel,
                                                      [1, 1, 1, 1], "VALID") + layer.bias
        assert np.max(np.abs(layer(img).numpy() - plain.numpy())) > 0     # the layer's inputs were rounded
