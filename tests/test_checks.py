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


@pytest.mark.parametrize("bad", [None, 3, "x", b"x", np.ones((2, 2)), tf.ones((2, 2)),
                                 {"x": X}])
def test_cases_must_be_a_list(bad):
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples"):
        check_function(ref_square, ref_square, cases=bad)
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples"):
        check_traces(tf.function(ref_square), cases=bad)


def test_cases_must_not_be_empty():
    with pytest.raises(ValueError, match=r"cases is empty"):
        check_function(ref_square, ref_square, cases=[])
    with pytest.raises(ValueError, match=r"cases is empty"):
        check_traces(tf.function(ref_square), cases=[])


def test_check_traces_needs_a_tf_function():
    with pytest.raises(TypeError, match=r"fn must be a tf.function"):
        check_traces(ref_square, cases=[(X,)])


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_check_traces_bad_max_traces(bad):
    with pytest.raises(ValueError, match=r"max_traces must be an int >= 1"):
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
