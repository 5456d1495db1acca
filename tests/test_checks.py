"""Tests for ctlkit/checks.py: the exercise checkers and the sentences they print."""
import numpy as np
import pytest
import tensorflow as tf

from ctlkit import checks
from ctlkit.checks import check_function, check_traces, compare

X = tf.constant([[1.0, -2.0], [3.0, 0.5]])
Y = tf.constant([0.5, 1.0, -1.5, 2.0])


def ref_square(x):
    return tf.square(x)


def one(report):
    assert len(report.problems) == 1, report.problems
    return report.problems[0]


# -- check_function: passing ---------------------------------------------------------------------
def test_equal_function_passes(capsys):
    def mine(x):
        return x * x

    r = check_function(mine, ref_square, cases=[(X,), (Y,)], verbose=True)
    assert r.ok and bool(r) and r.problems == [] and r.cases == 2
    assert str(r) == "PASS mine: matches the reference on all 2 case(s)."
    assert r.assert_ok() is r
    assert "PASS mine" in capsys.readouterr().out


def test_default_does_not_print_so_a_cell_shows_the_report_once(capsys):
    r = check_function(lambda x: x * x, ref_square, cases=[(X,)])
    assert capsys.readouterr().out == "" and repr(r).startswith("PASS")


def test_bare_arguments_become_one_argument_cases():
    r = check_function(lambda x: x * x, ref_square, cases=[X, Y], verbose=False)
    assert r.ok and r.cases == 2


def test_verbose_false_prints_nothing(capsys):
    check_function(lambda x: x + 1, ref_square, cases=[(X,)], verbose=False)
    assert capsys.readouterr().out == ""


def test_name_argument_is_used():
    r = check_function(lambda x: x + 1, ref_square, cases=[(X,)], name="square", verbose=False)
    assert str(r).startswith("NOT YET square:")


def test_structures_pass_when_equal():
    ref = lambda x: {"a": x, "b": (x + 1, None)}  # noqa: E731
    mine = lambda x: {"b": [x + 1, None], "a": x}  # noqa: E731
    assert check_function(mine, ref, cases=[(X,)], verbose=False).ok


def test_tolerances():
    mine = lambda x: tf.square(x) + 1e-3  # noqa: E731
    assert not check_function(mine, ref_square, cases=[(X,)], verbose=False).ok
    assert check_function(mine, ref_square, cases=[(X,)], atol=1e-2, verbose=False).ok


# -- check_function: what differs ----------------------------------------------------------------
def test_reports_shape_difference():
    p = one(check_function(lambda x: tf.reshape(tf.square(x), (4, 1)),
                           lambda x: tf.reshape(tf.square(x), (4,)), cases=[(X,)], verbose=False))
    assert "case 1: the result has shape [4, 1], expected [4]" in p
    assert "missing or extra axis" in p


def test_reports_dtype_difference():
    p = one(check_function(lambda x: tf.cast(tf.square(x), tf.float64), ref_square,
                           cases=[(X,)], verbose=False))
    assert "has dtype float64, expected float32" in p


def test_reports_value_difference_with_index_and_values():
    def mine(x):
        return tf.tensor_scatter_nd_add(tf.square(x), [[1, 0]], [5.0])

    p = one(check_function(mine, ref_square, cases=[(X,)], verbose=False))
    assert "case 1: the result differs" in p
    assert "max |difference| 5" in p
    assert "at index (1, 0)" in p
    assert "yours" in p and "14" in p and "expected" in p and "9" in p


def test_reports_the_failing_case_number():
    mine = lambda x: tf.square(x) if x.shape.rank == 2 else x  # noqa: E731
    p = one(check_function(mine, ref_square, cases=[(X,), (Y,)], verbose=False))
    assert p.startswith("case 2:")


def test_reports_nan_where_reference_has_a_number():
    def mine(x):
        return tf.where(tf.equal(x, 3.0), np.nan, tf.square(x))

    p = one(check_function(mine, ref_square, cases=[(X,)], verbose=False))
    assert "at index (1, 0)" in p and "nan" in p.lower()


def test_reports_scalar_nan_without_crashing():
    p = one(check_function(lambda x: tf.constant(np.nan), lambda x: tf.reduce_sum(x),
                           cases=[(X,)], verbose=False))
    assert "differs" in p and "NaN" in p


def test_nan_in_both_is_equal():
    f = lambda x: x * np.nan  # noqa: E731
    assert check_function(f, f, cases=[(X,)], verbose=False).ok


def test_not_written_yet_stops_early():
    def mine(x):
        raise NotImplementedError

    r = check_function(mine, ref_square, cases=[(X,), (Y,)], verbose=False)
    assert one(r) == "case 1: not written yet (it raised NotImplementedError)."
    assert str(r).startswith("NOT YET mine:")


def test_reports_an_exception_in_the_learners_function():
    def mine(x):
        raise ValueError("boom")

    r = check_function(mine, ref_square, cases=[(X,), (Y,)], verbose=False)
    assert r.problems == ["case 1: raised ValueError: boom", "case 2: raised ValueError: boom"]


def test_error_in_reference_is_a_checker_bug():
    def bad_ref(x):
        raise KeyError("oops")

    with pytest.raises(RuntimeError, match=r"checker bug: the reference: raised KeyError"):
        check_function(ref_square, bad_ref, cases=[(X,)], verbose=False)


def test_structure_differences():
    r = check_function(lambda x: (x, x), lambda x: (x, x, x), cases=[(X,)], verbose=False)
    assert one(r) == "case 1: the result should hold 3 items, got 2."
    r = check_function(lambda x: {"a": x}, lambda x: {"b": x}, cases=[(X,)], verbose=False)
    assert "should be a dict with keys ['b'], got ['a']" in one(r)
    r = check_function(lambda x: None, ref_square, cases=[(X,)], verbose=False)
    assert "is None; expected a value of shape [2, 2]" in one(r)


# -- check_function: differentiable ---------------------------------------------------------------
def test_numpy_round_trip_is_not_differentiable():
    def mine(x):
        return tf.constant(np.square(x.numpy()))

    assert check_function(mine, ref_square, cases=[(X,)], verbose=False).ok  # values agree
    r = check_function(mine, ref_square, cases=[(X,)], differentiable=True, verbose=False)
    p = one(r)
    assert "not differentiable with respect to argument 0" in p and ".numpy()" in p


def test_wrong_gradient_is_reported():
    def mine(x):
        return x * tf.stop_gradient(x)  # same values, half the gradient

    p = one(check_function(mine, ref_square, cases=[(X,)], differentiable=True, verbose=False))
    assert "case 1: the gradient w.r.t. argument 0 differs" in p


def test_differentiable_passes_for_correct_function():
    r = check_function(lambda a, b: a * b + a, lambda a, b: tf.multiply(a, b) + a,
                       cases=[(X, X + 1.0)], differentiable=True, verbose=False)
    assert r.ok


def test_differentiable_skips_integer_arguments():
    mine = lambda x, k: tf.square(x) * tf.cast(k, tf.float32)  # noqa: E731
    r = check_function(mine, mine, cases=[(X, tf.constant(2))], differentiable=True,
                       verbose=False)
    assert r.ok


def test_differentiable_with_numpy_only_function_reports_instead_of_raising():
    x = np.array([1.0, 2.0], np.float32)

    def mine(a):  # fine on NumPy arrays, breaks on tensors
        return a.astype(np.float32) ** 2

    r = check_function(mine, lambda a: tf.square(a), cases=[(x,)], differentiable=True,
                       verbose=False)
    assert "raised AttributeError when called with tensors" in one(r)


# -- check_traces -------------------------------------------------------------------------------
def test_check_traces_flags_python_scalars():
    @tf.function
    def scale(x):
        return x * 2.0

    r = check_traces(scale, cases=[(1.0,), (2.0,), (3.0,)], verbose=False)
    p = one(r)
    assert "traced 3 times for 3 calls (allowed: 1)" in p
    assert "retraces on every call" in p and "input_signature" in p


def test_check_traces_passes_with_input_signature(capsys):
    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def scale(x):
        return x * 2.0

    r = check_traces(scale, cases=[(1.0,), (2.0,), (3.0,)], verbose=True)
    assert r.ok and "PASS scale" in capsys.readouterr().out


def test_check_traces_with_tensors_of_one_shape_passes():
    f = tf.function(lambda x: x + 1.0)
    assert check_traces(f, cases=[(tf.constant(float(i)),) for i in range(4)], verbose=False).ok


def test_check_traces_counts_only_new_traces():
    f = tf.function(lambda x: x + 1.0)
    f(1.0)
    f(2.0)
    assert check_traces(f, cases=[(1.0,), (2.0,)], verbose=False).ok  # already traced


def test_check_traces_max_traces():
    f = tf.function(lambda x: x * 2.0)
    assert check_traces(f, cases=[(1.0,), (2.0,)], max_traces=2, verbose=False).ok


def test_check_traces_reports_errors():
    @tf.function
    def broken(x):
        raise NotImplementedError

    assert "not written yet" in one(check_traces(broken, cases=[(1.0,)], verbose=False))


# -- bad arguments -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 5, tf.constant(1.0), "square"])
def test_fn_must_be_callable(bad):
    with pytest.raises(TypeError, match=r"fn must be a function"):
        check_function(bad, ref_square, cases=[(X,)])
    with pytest.raises(TypeError, match=r"reference must be a function"):
        check_function(ref_square, bad, cases=[(X,)])


@pytest.mark.parametrize("bad", [None, 3, "x", b"x", np.ones((2, 2)), tf.ones((2, 2))])
def test_cases_must_be_a_list(bad):
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples"):
        check_function(ref_square, ref_square, cases=bad)
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples"):
        check_traces(tf.function(ref_square), cases=bad)


def test_a_dict_of_cases_labels_them():      # {label: arguments}, not a list of arguments
    report = check_function(lambda x: x, ref_square, cases={"the matrix X": X})
    assert not report.ok and report.problems[0].startswith("the matrix X:")


def test_cases_must_not_be_empty():
    with pytest.raises(ValueError, match=r"cases is empty"):
        check_function(ref_square, ref_square, cases=[])
    with pytest.raises(ValueError, match=r"cases is empty"):
        check_traces(tf.function(ref_square), cases=[])


def test_check_traces_needs_a_tf_function():
    with pytest.raises(TypeError, match=r"fn must be a tf.function"):
        check_traces(ref_square, cases=[(X,)])


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                        ("2", TypeError), (True, TypeError), (None, TypeError)])
def test_check_traces_bad_max_traces(bad, error):
    with pytest.raises(error, match=r"max_traces must be an int >= 1, e.g. max_traces=1"):
        check_traces(tf.function(ref_square), cases=[(X,)], max_traces=bad)


# -- Report and compare --------------------------------------------------------------------------
def test_assert_ok_raises_with_the_explanation():
    r = check_function(lambda x: x + 1, ref_square, cases=[(X,)], verbose=False)
    assert not r and not r.ok
    with pytest.raises(AssertionError, match=r"NOT YET <lambda>:\n  - case 1: the result differs"):
        r.assert_ok()


def test_report_str_lists_every_problem():
    r = checks.Report(name="f", problems=["one.", "two."], cases=2)
    assert str(r) == "NOT YET f:\n  - one.\n  - two." and repr(r) == str(r)


def test_compare_numbers_arrays_and_none():
    assert compare(1.0, 1.0) == []
    assert compare(np.arange(3), np.arange(3)) == []
    assert compare(None, None) == []
    assert compare(1.0, None) == ["the result should be None, got float."]
    assert "differs" in compare(np.array([1, 2]), np.array([1, 3]), where="x")[0]
    assert compare([1.0], [1.0, 2.0], where="out") == ["out should hold 2 items, got 1."]


def test_compare_points_at_the_worst_entry():
    p = compare(np.array([1.0, 2.5, 3.0, 10.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert p == ["the result differs: max |difference| 6 at index (3,) "
                 "(yours 10, expected 4)."]


def test_compare_nan_location_is_reported():
    p = compare(np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, 3.0]))
    assert len(p) == 1 and "at index (1,)" in p[0] and "NaN" in p[0]


def test_compare_non_numeric_values():
    assert compare(np.array(["a", "b"]), np.array(["a", "b"])) == []
    p = compare(np.array(["a", "b"]), np.array(["a", "c"]))
    assert len(p) == 1 and "at index (1,)" in p[0]


# -- issue 12: list cases -------------------------------------------------------------------------
def add(a, b):
    return a + b


@pytest.mark.parametrize("case", [[X, X], (X, X)], ids=["list", "tuple"])
def test_issue12_list_and_tuple_cases_are_argument_tuples(case):
    r = check_function(lambda a, b: tf.add(a, b), add, cases=[case])
    assert r.ok and r.cases == 1
    assert check_traces(tf.function(add), cases=[case, list(case)]).ok


def test_issue12_a_list_argument_is_written_inside_a_tuple():
    total = lambda values: float(np.sum(values))  # noqa: E731
    assert check_function(total, total, cases=[([1.0, 2.0],), ([3.0],)]).ok
    assert check_function(lambda *v: sum(v), lambda *v: float(np.sum(v)), cases=[[1.0, 2.0]]).ok


def test_issue12_wrong_number_of_arguments_says_how_to_write_cases():
    with pytest.raises(RuntimeError, match=r"checker bug: the reference: raised TypeError.*"
                                           r"\(case 1 called it with 1 argument\(s\); cases must "
                                           r"be a list of argument tuples, e.g. \[\(x, y\)\]"):
        check_function(add, add, cases=(X, X))         # meant [(X, X)]


@pytest.mark.parametrize("bad", [[{1, 2}], [frozenset([1])]])
def test_issue12_unordered_case_is_refused(bad):
    with pytest.raises(TypeError, match=r"cases\[0\] is a (set|frozenset), which has no order: "
                                        r"write the arguments of one call as a tuple"):
        check_function(add, add, cases=bad)


@pytest.mark.parametrize("bad", [{1, 2}, frozenset([1]), 1.5, tf.constant([[1.0]]), object()])
def test_issue12_malformed_cases_argument(bad):
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples, e.g. "
                                        r"cases=\[\(x,\), \(x, y\)\]"):
        check_function(add, add, cases=bad)


def test_issue12_generator_cases_are_fine():
    assert check_function(ref_square, ref_square, cases=((x,) for x in (X, Y))).ok


# -- issue 12: each function gets its own arguments ------------------------------------------------
def _bump_variable(v):
    v.assign_add(tf.ones_like(v))
    return v.read_value()


def test_issue12_a_reference_that_changes_a_variable_does_not_fail_the_learner():
    v = tf.Variable([1.0, 2.0], name="counter")
    r = check_function(lambda w: w.assign_add(tf.ones_like(w)) + 0.0, _bump_variable, [(v,), (v,)])
    assert r.ok, r
    assert v.numpy().tolist() == [1.0, 2.0]                     # the original is untouched


@pytest.mark.parametrize("dtype, trainable", [(tf.float64, False), (tf.float32, True),
                                              (tf.int32, True)])
def test_issue12_fresh_variables_keep_value_dtype_and_trainable_flag(dtype, trainable):
    v = tf.Variable(tf.constant([3, 4], dtype), trainable=trainable)
    seen = []

    def look(w):
        seen.append(w)
        return tf.identity(w.read_value())

    assert check_function(look, look, [(v,)]).ok
    assert len(seen) == 2 and seen[0] is not v and seen[1] is not v and seen[0] is not seen[1]
    for w in seen:
        assert isinstance(w, tf.Variable) and w.dtype == dtype and w.trainable is trainable
        assert w.numpy().tolist() == [3, 4]


def test_issue12_keras_variables_are_copied_too():
    import keras
    v = keras.Variable(np.array([1.0, 2.0], np.float32), trainable=False, name="kv")
    r = check_function(lambda w: (w.assign(w * 2.0), w.numpy())[1], lambda w: np.array([2., 4.],
                       np.float32), [(v,), (v,)])
    assert r.ok and v.numpy().tolist() == [1.0, 2.0]


def test_issue12_numpy_arrays_lists_and_dicts_are_copied():
    arr, items, table = np.array([1.0, 2.0]), [1, 2], {"a": [1]}

    def mutate(a, lst, d):
        a += 1.0
        lst.append(3)
        d["a"].append(2)
        d["b"] = 0
        return a.sum(), len(lst), len(d["a"]), sorted(d)

    r = check_function(mutate, mutate, [(arr, items, table), [arr, items, table]])
    assert r.ok, r
    assert arr.tolist() == [1.0, 2.0] and items == [1, 2] and table == {"a": [1]}


def test_issue12_aliasing_inside_the_arguments_is_kept():
    arr = np.zeros(2)

    def same(a, b):
        a[0] = 5.0
        return b[0]               # 5.0 only if a and b are still one array

    assert check_function(same, lambda a, b: 5.0, [(arr, arr)]).ok
    assert arr[0] == 0.0


def test_issue12_tensors_and_other_objects_are_shared():
    class Model:
        calls = 0

    model, seen = Model(), []

    def use(m, t):
        m.calls += 1
        seen.append(t)
        return t

    assert check_function(use, use, [(model, X)]).ok
    assert model.calls == 2 and all(t is X for t in seen)


def test_issue12_copies_under_differentiable_too():
    v = tf.Variable([1.0, 2.0])

    def square_then_bump(w):
        out = tf.square(w)
        w.assign_add(tf.ones_like(w))
        return out

    r = check_function(square_then_bump, square_then_bump, [(v,), (v,)], differentiable=True)
    assert r.ok, r
    assert v.numpy().tolist() == [1.0, 2.0]


# -- issue 12: compare integers and complex numbers exactly ---------------------------------------
def test_issue12_compare_complex_uses_both_parts():
    p = compare(np.array([1 + 2j, 3 + 4j]), np.array([1 + 2j, 3 - 4j]))
    assert p == ["the result differs: max |difference| 8 at index (1,) (yours (3+4j), "
                 "expected (3-4j))."]
    assert compare(tf.constant([1 + 1j], tf.complex64), tf.constant([1 + 1.0000001j],
                                                                     tf.complex64)) == []
    assert compare(np.complex128(1j), np.complex128(0)) != []
    assert compare(np.array([1 + 0j]), np.array([1.0])) == [
        "the result has dtype complex128, expected float64."]          # same value, other dtype
    assert compare(np.array([1 + 1j]), np.array([1.0]))[-1] == (
        "the result differs: max |difference| 1 at index (0,) (yours (1+1j), expected 1).")
    assert compare(np.array([1e6 + 1j]), np.array([1e6 + 0j]), rtol=0, atol=0.5) != []


@pytest.mark.parametrize("got, want, difference", [
    (np.int64(2**53 + 1), np.int64(2**53), 1),
    (tf.constant([2**62 + 1], tf.int64), tf.constant([2**62], tf.int64), 1),
    (np.array([2**63 + 1], np.uint64), np.array([2**63], np.uint64), 1),
    (np.array([-1], np.int64), np.array([2**64 - 1], np.uint64), 2**64),
    (np.array([True, False]), np.array([True, True]), 1)])
def test_issue12_compare_integers_exactly(got, want, difference):
    p = compare(got, want, rtol=1e-3, atol=1.0)          # a tolerance that floats would pass
    assert p[-1].startswith(f"the result differs: max |difference| {difference}"), p


def test_issue12_compare_integers_exact_difference_and_equal_big_values():
    p = compare(np.array([0, 2**62 + 7], np.int64), np.array([0, 2**62], np.int64))
    assert p == [f"the result differs: max |difference| 7 at index (1,) (yours {2**62 + 7}, "
                 f"expected {2**62})."]
    assert compare(np.array([2**63 - 1], np.int64), np.array([2**63 - 1], np.int64)) == []
    assert compare(tf.constant(2**62, tf.int64), tf.constant(2**62, tf.int64)) == []


def test_issue12_compare_floats_keep_their_tolerance():
    assert compare(np.float64(1.0), np.float64(1.0 + 1e-7)) == []
    assert compare(np.float64(1.0), np.float64(1.001)) != []
    assert compare(np.float64(1.0), np.float64(1.001), rtol=1e-2) == []


# -- hostile input ---------------------------------------------------------------------------------
NUMBER_VARIANTS = [lambda x: x, lambda x: np.float32(x), lambda x: np.array(x),
                   lambda x: tf.constant(x)]
VARIANT_IDS = ["python", "numpy-scalar", "numpy-0d", "tensor"]


@pytest.mark.parametrize("make", NUMBER_VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("arg", ["rtol", "atol"])
def test_hostile_tolerance_number_variants(make, arg):
    mine = lambda x: tf.square(x) + 1e-3  # noqa: E731
    other = "atol" if arg == "rtol" else "rtol"
    loose = {arg: make(0.5), other: 0}
    assert check_function(mine, ref_square, cases=[(X,)], **loose).ok
    assert compare(np.float64(1.0), np.float64(1.2), **loose) == []
    assert check_function(mine, ref_square, cases=[(X,)], **{arg: make(0.0), other: 0}).ok is False


@pytest.mark.parametrize("bad", ["1e-5", None, [1e-5], True, np.bool_(False), 1j,
                                 np.array([1e-5, 1e-5]), tf.constant([1e-5])])
@pytest.mark.parametrize("arg", ["rtol", "atol"])
def test_hostile_tolerance_of_the_wrong_type(bad, arg):
    with pytest.raises(TypeError, match=rf"{arg} must be a number, e.g. {arg}=1e-5, got"):
        check_function(ref_square, ref_square, cases=[(X,)], **{arg: bad})
    with pytest.raises(TypeError, match=rf"{arg} must be a number, e.g. {arg}=1e-5"):
        compare(1.0, 1.0, **{arg: bad})


@pytest.mark.parametrize("bad", [-1e-5, np.nan, np.inf, -np.inf, np.float32(-1),
                                 tf.constant(np.nan)])
@pytest.mark.parametrize("arg", ["rtol", "atol"])
def test_hostile_tolerance_out_of_range(bad, arg):
    with pytest.raises(ValueError, match=rf"{arg} must be a finite number >= 0, e.g. {arg}=1e-5"):
        check_function(ref_square, ref_square, cases=[(X,)], **{arg: bad})
    with pytest.raises(ValueError, match=rf"{arg} must be a finite number >= 0"):
        compare(1.0, 1.0, **{arg: bad})


@pytest.mark.parametrize("arg", ["differentiable", "verbose"])
@pytest.mark.parametrize("bad", [1, 0, "yes", None, np.array([True])])
def test_hostile_flags_of_the_wrong_type(arg, bad):
    with pytest.raises(TypeError, match=rf"{arg} must be True or False, got"):
        check_function(ref_square, ref_square, cases=[(X,)], **{arg: bad})


def test_hostile_flags_accept_numpy_bools(capsys):
    assert check_function(ref_square, ref_square, [(X,)], differentiable=np.bool_(True),
                          verbose=np.bool_(True)).ok
    assert "PASS" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [5, b"name", ["square"]])
def test_hostile_name_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"name must be a string \(or None for fn's own name\)"):
        check_function(ref_square, ref_square, cases=[(X,)], name=bad)
    with pytest.raises(TypeError, match=r"name must be a string"):
        check_traces(tf.function(ref_square), cases=[(X,)], name=bad)
    with pytest.raises(TypeError, match=r"verbose must be True or False"):
        check_traces(tf.function(ref_square), cases=[(X,)], verbose="no")


@pytest.mark.parametrize("bad", [5, None, ("x",)])
def test_hostile_compare_where_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"where must be a string, e.g. where='the loss'"):
        compare(1.0, 1.0, where=bad)


@pytest.mark.parametrize("make", [lambda x: x, lambda x: np.int64(x), lambda x: np.array(x),
                                  lambda x: tf.constant(x)], ids=VARIANT_IDS)
def test_hostile_max_traces_number_variants(make):
    f = tf.function(lambda x: x * 2.0)
    assert check_traces(f, cases=[(1.0,), (2.0,)], max_traces=make(2)).ok
    g = tf.function(lambda x: x * 2.0)
    r = check_traces(g, cases=[(1.0,), (2.0,), (3.0,)], max_traces=make(2))
    assert "traced 3 times for 3 calls (allowed: 2)" in one(r)


@pytest.mark.parametrize("bad", [np.float64(2.0), tf.constant(2.0), np.array([2]), np.nan,
                                 tf.constant([1, 2])])
def test_hostile_max_traces_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"max_traces must be an int >= 1, e.g. max_traces=1"):
        check_traces(tf.function(ref_square), cases=[(X,)], max_traces=bad)


@pytest.mark.parametrize("bad", [np.int64(0), tf.constant(-3)])
def test_hostile_max_traces_out_of_range(bad):
    with pytest.raises(ValueError, match=r"max_traces must be an int >= 1"):
        check_traces(tf.function(ref_square), cases=[(X,)], max_traces=bad)


@pytest.mark.parametrize("bad", [None, 3, "x", b"x", np.ones((2, 2)), tf.ones((2, 2)), {1}])
def test_hostile_check_traces_cases_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples"):
        check_traces(tf.function(ref_square), cases=bad)


@pytest.mark.parametrize("x", [tf.zeros([0]), tf.zeros([2, 0, 3]), np.zeros([0], np.float32)],
                         ids=["empty-1d", "empty-3d", "empty-numpy"])
def test_hostile_empty_tensors(x):
    assert check_function(lambda t: tf.square(t), ref_square, [(x,)], differentiable=True).ok
    assert check_function(lambda t: tf.reduce_sum(t), lambda t: tf.constant(0.0), [(x,)]).ok
    p = one(check_function(lambda t: tf.zeros([1]), ref_square, [(x,)]))
    assert "has shape [1], expected" in p
    assert check_traces(tf.function(ref_square), [(x,)]).ok
    assert compare(x, tf.zeros([0]) if x.shape == (0,) else x) == []


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_hostile_non_finite_arguments_and_results(bad):
    x = tf.constant([1.0, bad])
    assert check_function(lambda t: t * t, ref_square, [(x,)]).ok      # same NaN / Inf: equal
    p = one(check_function(lambda t: tf.square(tf.where(tf.math.is_finite(t), t, 0.0)),
                           ref_square, [(x,)]))
    assert "at index (1,)" in p
    assert compare(np.array([bad]), np.array([bad])) == []
    assert compare(np.array([bad], np.float32), np.array([2.0], np.float32)) != []
    assert compare(np.complex128(complex(bad, 0)), np.complex128(complex(bad, 0))) == []


def test_hostile_inf_and_minus_inf_differ():
    p = compare(np.array([np.inf]), np.array([-np.inf]))
    assert p and "differs" in p[0]


@pytest.mark.parametrize("got, want", [(1.0, np.float64(1.0)), (np.float64(2.0), tf.constant(2.0,
                         tf.float64)), (3, np.int64(3)), (tf.constant(4), np.int32(4)),
                         ([1.0, 2.0], np.array([1.0, 2.0])), (True, np.bool_(True))])
def test_hostile_compare_number_variants_agree(got, want):
    assert compare(got, want) == []


@pytest.mark.parametrize("got, want, shape_msg", [
    (np.zeros((2, 3)), np.zeros((3, 2)), "has shape [2, 3], expected [3, 2]"),
    (np.zeros((0,)), np.zeros((1,)), "has shape [0], expected [1]"),
    (np.float64(1.0), np.array([1.0]), "has shape [], expected [1] (a missing or extra axis")])
def test_hostile_compare_wrong_shapes(got, want, shape_msg):
    assert shape_msg in one_item(compare(got, want))


def one_item(problems):
    assert len(problems) == 1, problems
    return problems[0]


@pytest.mark.parametrize("got", [np.array(["a"]), "a", object(), {"a": 1}, {1.0}])
def test_hostile_compare_wrong_types(got):
    p = one_item(compare(got, np.array([1.0])))
    assert p.startswith("the result should be like the reference's float64 of shape [1], got "
                        f"{type(got).__name__} ("), p
    assert one_item(compare(1.0, got)).startswith("the result should be ")


def test_hostile_compare_a_list_against_an_array_compares_values():
    assert compare([1.0, 2.0], np.array([1.0, 2.0])) == []
    assert "differs" in one_item(compare([1.0, 2.5], np.array([1.0, 2.0])))


def test_hostile_reference_results_not_numbers_are_compared_exactly():
    assert compare(np.array([b"x"]), np.array([b"x"])) == []
    assert "not equal" in compare(np.array([b"x"]), np.array([b"y"]))[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_hostile_check_traces_with_non_finite_arguments(bad):
    f = tf.function(lambda x: x * 2.0)
    assert check_traces(f, [(tf.constant(bad),), (tf.constant(1.0),)]).ok   # one tensor signature
    r = check_traces(tf.function(lambda x: x * 2.0), [(bad,), (1.0,)])      # Python floats retrace
    assert "traced 2 times for 2 calls (allowed: 1)" in one(r)
