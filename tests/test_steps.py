"""Tests for ctlkit/steps.py: notebook 03's plain step, compiled or not, and its argument checks."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from ctlkit import steps


def _build(seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation="relu"),
                              keras.layers.Dense(3)])
    return model, keras.optimizers.SGD(0.1)


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
X = tf.random.stateless_normal((8, 4), seed=(1, 2))
Y = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])


def _by_hand(model, optimizer):
    """The update written out: SGD is w - lr * grad, so the expected weights are known."""
    with tf.GradientTape() as tape:
        loss = LOSS(Y, model(X, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    lr = float(optimizer.learning_rate)
    return float(loss), [w.numpy() - lr * g.numpy() for w, g in zip(model.trainable_variables, grads)]


@pytest.mark.parametrize("compile", [True, False])
def test_one_call_is_one_sgd_update(compile):
    model, optimizer = _build()
    want_loss, want_weights = _by_hand(model, optimizer)
    step = steps.plain_step(model, optimizer, LOSS, compile=compile)
    loss = step(X, Y)
    assert abs(float(loss) - want_loss) < 1e-6
    for got, want in zip(model.trainable_variables, want_weights):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert int(optimizer.iterations) == 1


def test_compiled_and_eager_steps_make_the_same_updates():
    (m1, o1), (m2, o2) = _build(3), _build(3)
    graph, eager = steps.plain_step(m1, o1, LOSS), steps.plain_step(m2, o2, LOSS, compile=False)
    assert isinstance(graph, tf.types.experimental.GenericFunction)
    assert not isinstance(eager, tf.types.experimental.GenericFunction)
    for _ in range(3):
        np.testing.assert_allclose(float(graph(X, Y)), float(eager(X, Y)), rtol=1e-5)
    for a, b in zip(m1.get_weights(), m2.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_loss_falls_over_a_few_steps():
    model, optimizer = _build()
    step = steps.plain_step(model, optimizer, LOSS)
    losses = [float(step(X, Y)) for _ in range(20)]
    assert losses[-1] < 0.8 * losses[0]


def test_the_compiled_step_traces_once_per_shape():
    model, optimizer = _build()
    step = steps.plain_step(model, optimizer, LOSS)
    for _ in range(3):
        step(X, Y)
    assert step.experimental_get_tracing_count() == 1


def test_bad_model_is_named():
    _, optimizer = _build()
    with pytest.raises(TypeError, match="model must be a Keras model"):
        steps.plain_step("model", optimizer, LOSS)


def test_bad_optimizer_is_named_with_a_hint_on_the_order():
    model, optimizer = _build()
    with pytest.raises(TypeError, match="optimizer must be a Keras optimizer.*order"):
        steps.plain_step(model, LOSS, optimizer)
    with pytest.raises(TypeError, match="optimizer must be a Keras optimizer"):
        steps.plain_step(model, 0.1, LOSS)


def test_bad_loss_fn_is_named():
    model, optimizer = _build()
    with pytest.raises(TypeError, match="loss_fn must be a function"):
        steps.plain_step(model, optimizer, "sparse_categorical_crossentropy")


def test_compile_must_be_a_bool():
    model, optimizer = _build()
    with pytest.raises(TypeError, match="compile must be True or False"):
        steps.plain_step(model, optimizer, LOSS, compile="yes")


def test_the_module_is_reachable_from_the_package():
    import ctlkit
    assert ctlkit.steps.plain_step is steps.plain_step


def test_plain_step_adds_the_models_regularisation_penalties():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.1))])
    x, y = tf.ones((2, 4)), tf.constant([0, 1])
    penalty = float(sum(model.losses))
    data_loss = float(LOSS(y, model(x, training=True)))
    loss = float(steps.plain_step(model, keras.optimizers.SGD(0.0), LOSS)(x, y))
    assert penalty > 0 and abs(loss - (data_loss + penalty)) < 1e-5
