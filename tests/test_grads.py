"""Tests for ctlkit/grads.py: global and per-layer gradient norms, finiteness, None gradients."""
import numpy as np
import pytest
import tensorflow as tf

import keras

from ctlkit import grads


def _manual_norm(arrays):
    return float(np.sqrt(sum(np.sum(np.square(np.asarray(a, np.float64))) for a in arrays)))


@pytest.fixture(scope="module")
def model_and_grads():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, name="hidden"),
                              keras.layers.Dense(3, name="out")], name="net")
    x = tf.random.normal((8, 4))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x)))
    return model, tape.gradient(loss, model.trainable_variables)


# -- global_norm ---------------------------------------------------------------------------------
def test_global_norm_equals_sqrt_sum_of_squares():
    rng = np.random.default_rng(0)
    gs = [rng.normal(size=s).astype(np.float32) for s in [(3, 4), (4,), (2, 2, 2), ()]]
    got = grads.global_norm([tf.constant(g) for g in gs])
    assert got.shape == () and got.dtype == tf.float32
    np.testing.assert_allclose(float(got), _manual_norm(gs), rtol=1e-6)


def test_global_norm_simple_value():
    assert float(grads.global_norm([tf.constant([3.0]), tf.constant([[4.0]])])) == 5.0


def test_global_norm_of_model_gradients(model_and_grads):
    model, g = model_and_grads
    np.testing.assert_allclose(float(grads.global_norm(g)), _manual_norm([t.numpy() for t in g]),
                               rtol=1e-6)
    np.testing.assert_allclose(float(grads.global_norm(g)),
                               float(tf.clip_by_global_norm(g, 1.0)[1]), rtol=1e-6)


def test_global_norm_skips_none():
    a, b = tf.constant([1.0, 2.0]), tf.constant([2.0])
    assert float(grads.global_norm([a, None, b, None])) == pytest.approx(3.0)


def test_global_norm_all_none_is_zero():
    got = grads.global_norm([None, None])
    assert float(got) == 0.0 and got.dtype == tf.float32


def test_global_norm_mixed_dtypes():
    got = grads.global_norm([tf.constant([3.0], tf.float16), tf.constant([4.0], tf.float64)])
    assert got.dtype == tf.float32 and float(got) == pytest.approx(5.0)


def test_global_norm_accepts_tuples_and_generators():
    g = (tf.constant([3.0]), tf.constant([4.0]))
    assert float(grads.global_norm(g)) == 5.0
    assert float(grads.global_norm(t for t in g)) == 5.0


def test_global_norm_indexed_slices_from_gather():
    table = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table, [0, 2]) * tf.constant([[1.0], [2.0]]))
    (g,) = tape.gradient(loss, [table])
    assert isinstance(g, tf.IndexedSlices)
    dense = tf.convert_to_tensor(g).numpy()
    assert float(grads.global_norm([g])) == pytest.approx(_manual_norm([dense]))
    assert float(grads.global_norm([g])) == pytest.approx(np.sqrt(3 * 1 + 3 * 4))


def test_global_norm_embedding_layer_gradients():
    keras.utils.set_random_seed(0)
    emb = keras.layers.Embedding(10, 4)
    dense = keras.layers.Dense(1)
    ids = tf.constant([[1, 3, 5]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(dense(emb(ids)))
    variables = emb.trainable_variables + dense.trainable_variables
    g = tape.gradient(loss, variables)
    assert isinstance(g[0], tf.IndexedSlices)
    dense_grads = [tf.convert_to_tensor(t).numpy() for t in g]
    assert float(grads.global_norm(g)) == pytest.approx(_manual_norm(dense_grads), rel=1e-6)
    norms = grads.layer_norms(g, variables)
    assert float(norms[grads.layer_name(variables[0])]) == pytest.approx(
        _manual_norm(dense_grads[:1]), rel=1e-6)


def test_global_norm_indexed_slices_with_repeated_ids_matches_clip_by_global_norm():
    # The docstring promises "the norm clip_by_global_norm uses". With repeated ids that norm is
    # taken over the slices' values, not over the dense (summed) gradient; pinned here so a change
    # of meaning is a deliberate one.
    table = tf.Variable(tf.ones((4, 2)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table, [1, 1, 1]))
    (g,) = tape.gradient(loss, [table])
    want = float(tf.clip_by_global_norm([g], 1.0)[1])
    assert float(grads.global_norm([g])) == pytest.approx(want)


def test_global_norm_inside_tf_function():
    @tf.function
    def f(a, b):
        return grads.global_norm([a, None, b])

    a, b = tf.constant([[1.0, 2.0]]), tf.constant([2.0])
    assert float(f(a, b)) == pytest.approx(3.0)


def test_statistics_inside_a_compiled_train_step(model_and_grads):
    model, _ = model_and_grads
    x = tf.random.normal((8, 4))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x)))
        g = tape.gradient(loss, model.trainable_variables)
        return (g, grads.global_norm(g), grads.layer_norms(g, model.trainable_variables),
                grads.all_finite(g))

    g, gnorm, per_layer, ok = step(x)
    assert float(gnorm) == pytest.approx(_manual_norm([t.numpy() for t in g]), rel=1e-6)
    assert list(per_layer) == ["net/hidden", "net/out"]
    assert bool(ok) is True


# -- layer_norms / layer_name ---------------------------------------------------------------------
def test_layer_norms_groups_by_layer_in_order(model_and_grads):
    model, g = model_and_grads
    norms = grads.layer_norms(g, model.trainable_variables)
    assert list(norms) == ["net/hidden", "net/out"]
    np.testing.assert_allclose(float(norms["net/hidden"]), _manual_norm([g[0], g[1]]), rtol=1e-6)
    np.testing.assert_allclose(float(norms["net/out"]), _manual_norm([g[2], g[3]]), rtol=1e-6)


def test_layer_norms_squares_sum_to_global_norm_squared(model_and_grads):
    model, g = model_and_grads
    norms = grads.layer_norms(g, model.trainable_variables)
    total = sum(float(n) ** 2 for n in norms.values())
    assert total == pytest.approx(float(grads.global_norm(g)) ** 2, rel=1e-5)


def test_layer_norms_drops_layers_without_gradients(model_and_grads):
    model, g = model_and_grads
    norms = grads.layer_norms([g[0], g[1], None, None], model.trainable_variables)
    assert list(norms) == ["net/hidden"]


def test_layer_name():
    v = tf.Variable(1.0, name="dense_1/kernel")
    assert grads.layer_name(v) == "dense_1"
    assert grads.layer_name(tf.Variable(1.0, name="w")) == "w"
    layer = keras.layers.Dense(2, name="proj")
    layer.build((None, 3))
    assert {grads.layer_name(v) for v in layer.trainable_variables} == {"proj"}


def test_none_gradients(model_and_grads):
    model, g = model_and_grads
    names = grads.none_gradients([g[0], None, g[2], None], model.trainable_variables)
    assert names == ["net/hidden/bias", "net/out/bias"]
    assert grads.none_gradients(g, model.trainable_variables) == []


# -- all_finite ---------------------------------------------------------------------------------
def test_all_finite_true_for_finite():
    ok = grads.all_finite([tf.constant([1.0, 2.0]), None, tf.constant(3.0)])
    assert ok.dtype == tf.bool and bool(ok) is True


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_all_finite_false_on_nan_or_inf(bad):
    assert bool(grads.all_finite([tf.constant([1.0]), tf.constant([2.0, bad])])) is False


def test_all_finite_float16_overflow():
    overflowed = tf.cast(tf.constant([70000.0]), tf.float16)  # > float16 max: inf
    assert bool(grads.all_finite([tf.constant([1.0]), overflowed])) is False


def test_all_finite_indexed_slices():
    bad = tf.IndexedSlices(tf.constant([[1.0, np.nan]]), tf.constant([0]), tf.constant([3, 2]))
    good = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([0]), tf.constant([3, 2]))
    assert bool(grads.all_finite([good])) is True
    assert bool(grads.all_finite([good, bad])) is False


def test_all_finite_only_none_is_true():
    assert bool(grads.all_finite([None])) is True


def test_all_finite_inside_tf_function():
    f = tf.function(lambda a: grads.all_finite([a]))
    assert bool(f(tf.constant([1.0]))) is True
    assert bool(f(tf.constant([np.nan]))) is False


# -- bad input ------------------------------------------------------------------------------------
FUNCS = [grads.global_norm, grads.all_finite]


@pytest.mark.parametrize("fn", FUNCS)
@pytest.mark.parametrize("bad", [tf.constant([1.0]), tf.Variable([1.0]), np.ones(3), 5, None,
                                 "abc", {"dense": tf.constant(1.0)}])
def test_grads_must_be_a_list(fn, bad):
    with pytest.raises(TypeError, match=r"grads must be a list of gradients"):
        fn(bad)


@pytest.mark.parametrize("fn", FUNCS)
def test_grads_empty(fn):
    with pytest.raises(ValueError, match=r"grads is empty"):
        fn([])


@pytest.mark.parametrize("fn", [grads.layer_norms, grads.none_gradients])
def test_mismatched_lengths(fn, model_and_grads):
    model, g = model_and_grads
    with pytest.raises(ValueError, match=r"grads has 3 entries but variables has 4"):
        fn(g[:3], model.trainable_variables)
    with pytest.raises(ValueError, match=r"grads has 4 entries but variables has 2"):
        fn(g, model.trainable_variables[:2])


@pytest.mark.parametrize("fn", [grads.layer_norms, grads.none_gradients])
def test_bad_variables(fn, model_and_grads):
    model, g = model_and_grads
    with pytest.raises(ValueError, match=r"variables is empty"):
        fn(g, [])
    with pytest.raises(TypeError, match=r"variables must be a list"):
        fn(g[:1], tf.Variable([1.0]))
    with pytest.raises(TypeError, match=r"grads must be a list"):
        fn(g[0], model.trainable_variables)
