"""Tests for ctlkit/grads.py: global and per-layer gradient norms, finiteness, None gradients."""
import keras
import numpy as np
import pytest
import tensorflow as tf

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
    got = grads.global_norm([tf.constant([3.0], tf.float16), tf.constant([4.0], tf.float32)])
    assert got.dtype == tf.float32 and float(got) == pytest.approx(5.0)
    got = grads.global_norm([tf.constant([3.0], tf.float16), tf.constant([4.0], tf.float64)])
    assert got.dtype == tf.float64 and float(got) == 5.0   # any 64-bit gradient: a float64 norm


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


# -- issue 12: (gradient, variable) pairs ---------------------------------------------------------
def _pairs(g, variables):
    return zip(g, variables)


def test_issue12_global_norm_of_pairs_counts_only_the_gradients(model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    want = float(grads.global_norm(g))
    assert float(grads.global_norm(zip(g, v))) == want
    assert float(grads.global_norm([[a, b] for a, b in zip(g, v)])) == want   # lists too
    with_weights = float(tf.linalg.global_norm(list(g) + [w.value for w in v]))
    assert with_weights > want * 1.01          # the old, silently wrong, answer is far off


def test_issue12_pairs_for_every_function(model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    assert bool(grads.all_finite(zip(g, v))) is True
    by_pairs = grads.layer_norms(zip(g, v))
    assert {k: float(t) for k, t in by_pairs.items()} == {
        k: float(t) for k, t in grads.layer_norms(g, v).items()}
    assert grads.layer_norms(zip(g, v), v).keys() == by_pairs.keys()   # the same variables: fine
    assert grads.none_gradients(zip([g[0], None, g[2], None], v)) == ["net/hidden/bias",
                                                                      "net/out/bias"]


def test_issue12_pairs_with_none_gradients_and_inside_tf_function(model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    f = tf.function(lambda a, b: grads.global_norm(zip([a, None, b, None], v)))
    assert float(f(g[0], g[2])) == pytest.approx(_manual_norm([g[0], g[2]]), rel=1e-6)
    assert not bool(grads.all_finite(zip([g[0], tf.fill([5], np.nan), None, None], v)))


def test_issue12_pairs_with_other_variables_are_refused(model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    with pytest.raises(ValueError, match=r"grads\[0\] is paired with net/hidden/kernel but "
                                         r"variables\[0\] is net/out/kernel: pass the pairs alone"):
        grads.layer_norms(zip(g, v), [v[2], v[3], v[0], v[1]])
    with pytest.raises(ValueError, match=r"grads has 4 entries but variables has 2"):
        grads.none_gradients(zip(g, v), v[:2])


@pytest.mark.parametrize("fn", [grads.global_norm, grads.all_finite, grads.layer_norms,
                                grads.none_gradients])
def test_issue12_mixed_pairs_reversed_pairs_and_variables_are_refused(fn, model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    with pytest.raises(ValueError, match=r"grads mixes \(gradient, variable\) pairs with bare "
                                         r"gradients \(grads\[1\] is not a pair\)"):
        fn([(g[0], v[0]), g[1], (g[2], v[2]), (g[3], v[3])])
    with pytest.raises(TypeError, match=r"grads\[0\] is a \(variable, gradient\) pair; "
                                        r"apply_gradients pairs are \(gradient, variable\)"):
        fn(list(zip(v, g)), v) if fn in (grads.layer_norms, grads.none_gradients) else fn(zip(v, g))
    with pytest.raises(TypeError, match=r"grads\[0\] is the variable net/hidden/kernel, not a "
                                        r"gradient: pass tape.gradient"):
        fn(v, v) if fn in (grads.layer_norms, grads.none_gradients) else fn(v)


def test_issue12_pairs_are_not_needed_without_variables():
    with pytest.raises(TypeError, match=r"layer_norms needs the variables: pass "
                                        r"layer_norms\(grads, model.trainable_variables\)"):
        grads.layer_norms([tf.constant([1.0])])
    with pytest.raises(TypeError, match=r"none_gradients needs the variables"):
        grads.none_gradients([None])


# -- issue 12: gradient and variable shapes -------------------------------------------------------
@pytest.mark.parametrize("fn", [grads.layer_norms, grads.none_gradients])
def test_issue12_swapped_order_is_refused(fn, model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \[5, 3\] but variables\[0\] "
                                         r"\(net/hidden/kernel\) has shape \[4, 5\]: pass the "
                                         r"gradients in the order of the variables"):
        fn([g[2], g[3], g[0], g[1]], v)
    with pytest.raises(ValueError, match=r"grads\[2\] has shape \[5\] .* variables\[2\] "
                                         r"\(net/out/kernel\)"):
        fn([g[0], g[1], g[1], g[3]], v)


def test_issue12_swapped_order_is_refused_inside_tf_function(model_and_grads):
    model, g = model_and_grads
    v = model.trainable_variables
    good = tf.function(lambda *t: grads.layer_norms(list(t), v))
    assert list(good(*g)) == ["net/hidden", "net/out"]
    bad = tf.function(lambda *t: grads.layer_norms([t[2], t[3], t[0], t[1]], v))
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \[5, 3\] but variables\[0\]"):
        bad(*g)


def test_issue12_partly_known_shapes_compare_what_is_known():
    v = tf.Variable(tf.zeros((4, 3)), name="emb/table")
    ok = tf.function(lambda t: grads.layer_norms([t], [v])["emb"],
                     input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    assert float(ok(tf.ones((4, 3)))) == pytest.approx(np.sqrt(12))
    unknown_rank = tf.function(lambda t: grads.layer_norms([t], [v])["emb"],
                               input_signature=[tf.TensorSpec(None, tf.float32)])
    assert float(unknown_rank(tf.ones((4, 3)))) == pytest.approx(np.sqrt(12))
    bad = tf.function(lambda t: grads.layer_norms([t], [v]),
                      input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \[None, 2\] but variables\[0\] "
                                         r"\(emb/table:0\) has shape \[4, 3\]"):
        bad.get_concrete_function()


def _embedding_grads():
    table, other = tf.Variable(tf.ones((4, 3)), name="table"), tf.Variable(tf.ones((3, 4)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table, [0, 2])) + tf.reduce_sum(tf.gather(other, [1]))
    return tape.gradient(loss, [table, other]), [table, other]


def test_issue12_indexed_slices_compare_their_dense_shape():
    g, (table, other) = _embedding_grads()
    assert isinstance(g[0], tf.IndexedSlices) and g[0].values.shape == (2, 3)
    assert set(grads.layer_norms(g, [table, other])) == {"table", "Variable"}
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \[4, 3\] but variables\[0\] "
                                         r"\(Variable:0\) has shape \[3, 4\]"):
        grads.layer_norms(g, [other, table])


def test_issue12_indexed_slices_inside_tf_function():
    table = tf.Variable(tf.ones((4, 3)), name="table")
    wrong = tf.Variable(tf.ones((4, 2)), name="wrong")

    def norms(variables):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(table, [0, 2]))
        return grads.layer_norms(tape.gradient(loss, [table]), variables)

    assert float(tf.function(lambda: norms([table]))()["table"]) == pytest.approx(np.sqrt(6))
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \[(4|None), 3\] but variables\[0\] "
                                         r"\(wrong:0\) has shape \[4, 2\]"):
        tf.function(lambda: norms([wrong]))()


# -- issue 12: dtypes -----------------------------------------------------------------------------
def test_issue12_all_finite_checks_each_tensor_in_its_own_dtype():
    assert bool(grads.all_finite([tf.constant([1e300], tf.float64)])) is True
    assert bool(grads.all_finite([tf.constant([1e300, np.inf], tf.float64)])) is False
    assert bool(grads.all_finite([tf.constant([60000.0], tf.float16)])) is True
    assert bool(grads.all_finite([tf.constant([1.0], tf.bfloat16) * 1e38])) is True
    assert bool(grads.all_finite([tf.constant([2**62, -2**63], tf.int64)])) is True


@pytest.mark.parametrize("value, finite", [
    (1 + 2j, True), (1e300 + 1e300j, True), (complex(1, np.nan), False),
    (complex(np.inf, 0), False), (complex(0, -np.inf), False), (complex(np.nan, 0), False)])
@pytest.mark.parametrize("dtype", [tf.complex64, tf.complex128])
def test_issue12_all_finite_complex_checks_both_parts(value, finite, dtype):
    if dtype == tf.complex64 and abs(value.real) > 1e38:
        finite = False                        # 1e300 is not a complex64 number: it became inf
    assert bool(grads.all_finite([tf.constant([1.0]), tf.constant([value], dtype)])) is finite


@pytest.mark.parametrize("value, dtype", [(1e200, tf.float64), (1e-200, tf.float64),
                                          (1e20, tf.float32), (1e-30, tf.float32),
                                          (6e4, tf.float16)])
def test_issue12_global_norm_does_not_overflow_or_underflow(value, dtype):
    got = grads.global_norm([tf.fill([4], tf.constant(value, dtype)), tf.zeros([3], dtype)])
    want_dtype = tf.float64 if dtype == tf.float64 else tf.float32
    assert got.dtype == want_dtype
    expected = 2 * float(tf.constant(value, dtype))          # sqrt(4 * value**2)
    assert float(got) == pytest.approx(expected, rel=1e-6)
    per_layer = grads.layer_norms([tf.fill([4], tf.constant(value, dtype))],
                                  [tf.Variable(tf.zeros([4], dtype), name="big")])
    assert per_layer["big"].dtype == want_dtype
    assert float(per_layer["big"]) == pytest.approx(expected, rel=1e-6)


def test_issue12_global_norm_matches_tf_in_the_normal_range(model_and_grads):
    _, g = model_and_grads
    assert float(grads.global_norm(g)) == pytest.approx(float(tf.linalg.global_norm(g)),
                                                        rel=1e-7)


def test_issue12_global_norm_returned_dtype():
    assert grads.global_norm([tf.constant([1.0], tf.bfloat16)]).dtype == tf.float32
    assert grads.global_norm([tf.constant([1.0], tf.float64)]).dtype == tf.float64
    assert grads.global_norm([tf.constant([3 + 4j], tf.complex64)]).dtype == tf.float32
    assert float(grads.global_norm([tf.constant([3 + 4j], tf.complex128)])) == 5.0
    assert grads.global_norm([tf.constant([3, 4], tf.int64)]).dtype == tf.float64
    assert float(grads.global_norm([tf.constant([3, 4], tf.int32)])) == 5.0
    assert float(grads.global_norm([tf.constant([2**62, 2**62], tf.int64)])) == pytest.approx(
        np.sqrt(2) * 2.0**62)


# -- hostile input ---------------------------------------------------------------------------------
NEEDS_VARIABLES = {grads.layer_norms, grads.none_gradients}
ALL = [grads.global_norm, grads.all_finite, grads.layer_norms, grads.none_gradients]


def _call(fn, g, variables=None):
    if fn in NEEDS_VARIABLES:
        variables = variables or [tf.Variable(tf.zeros(tf.shape(t)), name=f"v{i}")
                                  for i, t in enumerate(g) if t is not None]
        return fn(g, variables)
    return fn(g)


@pytest.mark.parametrize("fn", ALL)
@pytest.mark.parametrize("bad", [tf.constant([1.0]), tf.Variable([1.0]), np.ones(3), 5, None,
                                 "abc", b"abc", {"dense": tf.constant(1.0)},
                                 {tf.constant(1.0).ref()}, tf.IndexedSlices(
                                     tf.ones((1, 2)), tf.constant([0]), tf.constant([3, 2]))])
def test_hostile_grads_of_the_wrong_type(fn, bad):
    with pytest.raises(TypeError, match=r"grads must be a list of gradients .* wrap a single one "
                                        r"as \[x\]"):
        fn(bad, [tf.Variable([1.0])]) if fn in NEEDS_VARIABLES else fn(bad)


@pytest.mark.parametrize("fn", ALL)
@pytest.mark.parametrize("bad, dtype", [("abc", "string"), (tf.constant([True]), "bool"),
                                        (np.array(["a"]), "string")])
def test_hostile_gradient_entries_that_are_not_numbers(fn, bad, dtype):
    with pytest.raises(TypeError, match=rf"grads\[1\] has dtype {dtype}; a gradient holds "
                                        r"floating-point numbers"):
        fn([tf.ones([1]), bad], [tf.Variable([1.0]), tf.Variable([1.0])]) \
            if fn in NEEDS_VARIABLES else fn([tf.ones([1]), bad])


@pytest.mark.parametrize("fn", ALL)
def test_hostile_gradient_entry_that_cannot_become_a_tensor(fn):
    with pytest.raises(TypeError, match=r"grads\[0\] \(object\) is not a tensor of numbers .*; "
                                        r"pass the gradients tape.gradient returns"):
        fn([object()], [tf.Variable([1.0])]) if fn in NEEDS_VARIABLES else fn([object()])


@pytest.mark.parametrize("fn", ALL)
def test_hostile_empty_grads(fn):
    with pytest.raises(ValueError, match=r"grads is empty: pass tape.gradient"):
        fn([], []) if fn in NEEDS_VARIABLES else fn([])
    with pytest.raises(ValueError, match=r"grads is empty"):
        fn(iter([]), []) if fn in NEEDS_VARIABLES else fn(x for x in [])


@pytest.mark.parametrize("fn", ALL)
def test_hostile_empty_and_scalar_tensors(fn):
    g = [tf.zeros([0]), tf.zeros([2, 0, 3]), tf.constant(3.0), tf.fill([1, 1, 1, 1, 1], 4.0)]
    out = _call(fn, g)
    if fn is grads.global_norm:
        assert float(out) == 5.0
    elif fn is grads.all_finite:
        assert bool(out) is True and bool(fn([tf.zeros([0])])) is True
    elif fn is grads.layer_norms:
        assert [float(t) for t in out.values()] == [0.0, 0.0, 3.0, 4.0]
    else:
        assert out == []


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_hostile_non_finite_gradients(bad):
    g = [tf.constant([1.0, bad]), tf.constant([2.0])]
    v = [tf.Variable([0.0, 0.0], name="a/k"), tf.Variable([0.0], name="b/k")]
    norm = float(grads.global_norm(g))
    assert np.isnan(norm) if np.isnan(bad) else norm == np.inf
    per_layer = grads.layer_norms(g, v)
    assert (np.isnan(float(per_layer["a"])) if np.isnan(bad) else float(per_layer["a"]) == np.inf)
    assert float(per_layer["b"]) == 2.0                         # the other layer is unaffected
    assert bool(grads.all_finite(g)) is False
    assert grads.none_gradients(g, v) == []
    f = tf.function(lambda a: (grads.global_norm([a]), grads.all_finite([a])))
    n, ok = f(tf.constant([bad], tf.float64))
    assert n.dtype == tf.float64 and not np.isfinite(float(n)) and not bool(ok)


@pytest.mark.parametrize("make", [lambda x: np.asarray(x), lambda x: tf.constant(x, tf.float64),
                                  lambda x: x, lambda x: np.float64(x), lambda x: [x]],
                         ids=["numpy", "tensor", "python", "numpy-scalar", "python-list"])
def test_hostile_number_variants_of_a_gradient(make):
    g = [make(3.0), make(4.0)]
    assert float(grads.global_norm(g)) == 5.0
    assert grads.global_norm(g).dtype == tf.float64       # Python floats are float64, as in NumPy
    assert bool(grads.all_finite(g)) is True
    assert bool(grads.all_finite([make(3.0), make(float("nan"))])) is False
    assert bool(grads.all_finite([make(1e300)])) is True
    assert float(grads.global_norm([make(1e300)])) == 1e300
    v = [tf.Variable(tf.zeros(np.shape(x), tf.float64), name=f"l{i}/w") for i, x in enumerate(g)]
    assert [float(t) for t in grads.layer_norms(g, v).values()] == [3.0, 4.0]
    assert grads.none_gradients(g, v) == []


def test_hostile_layer_norms_variables_of_the_wrong_type(model_and_grads):
    model, g = model_and_grads
    with pytest.raises(TypeError, match=r"variables\[1\] must be a variable "
                                        r"\(model.trainable_variables\), got EagerTensor"):
        grads.layer_norms(g[:2], [model.trainable_variables[0], tf.zeros(5)])
    with pytest.raises(TypeError, match=r"variables\[0\] must be a variable .* got str"):
        grads.none_gradients([None], ["net/hidden/kernel"])
    with pytest.raises(TypeError, match=r"variables must be a list of variables "
                                        r"\(model.trainable_variables\), got dict"):
        grads.layer_norms(g[:1], {"kernel": model.trainable_variables[0]})


@pytest.mark.parametrize("bad", ["dense_1/kernel", 5, None, tf.constant(1.0), np.ones(2)])
def test_hostile_layer_name_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"variable must be a variable \(one of "
                                        r"model.trainable_variables\), got"):
        grads.layer_name(bad)


def test_hostile_variables_empty(model_and_grads):
    with pytest.raises(ValueError, match=r"variables is empty: pass model.trainable_variables "
                                         r"for a model that has been built"):
        grads.layer_norms([tf.ones(1)], [])


@pytest.mark.parametrize("value", [3.0, 3e20, np.nan, np.inf])
def test_hostile_xla_compiled(value):
    f = tf.function(lambda a, b: (grads.global_norm([a, b]), grads.all_finite([a, b]),
                                  grads.layer_norms([a, b], [va, vb])), jit_compile=True)
    va, vb = tf.Variable([0.0], name="a/k"), tf.Variable([[0.0]], name="b/k")
    norm, ok, per_layer = f(tf.constant([value]), tf.constant([[4 * value / 3]]))
    np.testing.assert_allclose(float(norm), 5 * value / 3, rtol=1e-6)
    assert bool(ok) is bool(np.isfinite(value))
    np.testing.assert_allclose(float(per_layer["a"]), value, rtol=1e-6)


def test_hostile_layer_name_of_keras_and_plain_variables():
    assert grads.layer_name(keras.Variable(np.zeros(2), name="w")) == "w"
    assert grads.layer_name(tf.Variable(1.0, name="a/b/c")) == "a/b"
    assert grads.layer_name(tf.Variable(1.0)) == "Variable"


@pytest.mark.parametrize("value", [tf.zeros([0]), tf.constant([np.nan, np.inf]), 3.0,
                                   np.float64(3.0)], ids=["empty", "non-finite", "python",
                                                          "numpy"])
def test_hostile_layer_name_ignores_the_value(value):
    assert grads.layer_name(tf.Variable(value, name="block/w")) == "block"
    assert grads.layer_name(keras.Variable(np.asarray(value), name="w")) == "w"
