"""Tests for ctlkit/checks/function.py: check_function, check_traces, and the names the front door
re-exports (the rooms behind it have their own test files: test_compare, test_explain,
test_cases, test_stepcheck)."""
import numpy as np
import pytest
import tensorflow as tf
from checks_helpers import X, Y, one, ref_square

from ctlkit import checks
from ctlkit.checks import check_function, check_traces, compare
from ctlkit.checks import errors as explain_room
from ctlkit.checks import report as compare_room
from ctlkit.checks import step as stepcheck


# -- the front door -------------------------------------------------------------------------------
def test_the_front_door_re_exports_the_same_objects():
    assert checks.Report is compare_room.Report and checks.compare is compare_room.compare
    assert checks.explain is explain_room.explain and checks.check_step is stepcheck.check_step
    assert checks.ContextError is compare_room.ContextError
    assert sorted(checks.__all__) == ["ContextError", "Report", "check_function", "check_step",
                                      "check_traces", "compare", "explain"]


# -- check_function: passing ----------------------------------------------------------------------
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

# -- check_function: what differs -----------------------------------------------------------------
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

# -- check_traces ---------------------------------------------------------------------------------
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


def test_check_traces_does_not_count_the_double_trace_of_a_first_call_that_creates_variables():
    made = []

    @tf.function
    def f(x):
        if not made:                                  # a variable made on first use, as optimizers do
            made.append(tf.Variable(1.0))
        return x * made[0]
    cases = [(tf.constant(float(i)),) for i in range(3)]
    assert check_traces(f, cases=cases, verbose=False).ok
    assert f.experimental_get_tracing_count() == 2    # TF traced the first call twice
    g = tf.function(lambda x: x * 2.0)
    assert not check_traces(g, cases=[(1.0,), (2.0,)], verbose=False).ok   # a real retrace


def test_check_traces_max_traces():
    f = tf.function(lambda x: x * 2.0)
    assert check_traces(f, cases=[(1.0,), (2.0,)], max_traces=2, verbose=False).ok


def test_check_traces_reports_errors():
    @tf.function
    def broken(x):
        raise NotImplementedError

    assert "not written yet" in one(check_traces(broken, cases=[(1.0,)], verbose=False))

# -- bad arguments --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 5, tf.constant(1.0), "square"])
def test_fn_must_be_callable(bad):
    with pytest.raises(TypeError, match=r"fn must be a function"):
        check_function(bad, ref_square, cases=[(X,)])
    with pytest.raises(TypeError, match=r"reference must be a function"):
        check_function(ref_square, bad, cases=[(X,)])


def test_check_traces_needs_a_tf_function():
    with pytest.raises(TypeError, match=r"fn must be a tf.function"):
        check_traces(ref_square, cases=[(X,)])


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                        ("2", TypeError), (True, TypeError), (None, TypeError)])
def test_check_traces_bad_max_traces(bad, error):
    with pytest.raises(error, match=r"max_traces must be an int >= 1, e.g. max_traces=1"):
        check_traces(tf.function(ref_square), cases=[(X,)], max_traces=bad)

# -- Report.assert_ok -----------------------------------------------------------------------------
def test_assert_ok_raises_with_the_explanation():
    r = check_function(lambda x: x + 1, ref_square, cases=[(X,)], verbose=False)
    assert not r and not r.ok
    with pytest.raises(AssertionError, match=r"NOT YET <lambda>:\n  - case 1: the result differs"):
        r.assert_ok()

# -- hostile input --------------------------------------------------------------------------------
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


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_hostile_check_traces_with_non_finite_arguments(bad):
    f = tf.function(lambda x: x * 2.0)
    assert check_traces(f, [(tf.constant(bad),), (tf.constant(1.0),)]).ok   # one tensor signature
    r = check_traces(tf.function(lambda x: x * 2.0), [(bad,), (1.0,)])      # Python floats retrace
    assert "traced 2 times for 2 calls (allowed: 1)" in one(r)


# -- float32 noise: a right answer written in another order is never rejected --------------------
CANCELLING = tf.constant([1e8, 1.0, -1e8, 1.0, 3.0, 2.5e7, -2.5e7, 0.5], tf.float32)   # exact sum 5.5


def test_a_right_answer_summed_in_another_order_passes_where_float32_cannot_tell():
    """tf.reduce_sum, a left fold and a right fold give 2.0, 4.5 and 0.0 in float32: each is
    rounding. The reference itself is 3.5 from the exact 5.5, so the case allows that much."""
    def ref(x):
        return tf.reduce_sum(x)

    def in_order(x):
        return tf.foldl(lambda a, b: a + b, x)

    def reversed_(x):
        return tf.foldl(lambda a, b: a + b, tf.reverse(x, [0]))
    assert float(in_order(CANCELLING)) != float(ref(CANCELLING))              # they do differ
    for right in (in_order, reversed_):
        report = check_function(right, ref, {"cancelling": (CANCELLING,)}, differentiable=True)
        assert report.ok, str(report)
    doubled = check_function(lambda x: 2.0 * tf.reduce_sum(x), ref,
                             {"cancelling": (CANCELLING,), "plain": (tf.constant([1.0, 2.0, 3.0]),)},
                             differentiable=True)
    assert not doubled.ok                                     # well-conditioned points still judge
    assert any(p.startswith("plain: the result differs") for p in doubled.problems), doubled


def test_slack_is_per_entry_and_only_widens():
    want = np.array([1000.0, 1e-7], np.float32)
    got = np.array([1000.01, 2e-7], np.float32)
    assert compare(got, want, rtol=0.0, atol=0.0)                               # both differ
    found = compare(got, want, rtol=0.0, atol=0.0, slack=np.array([0.1, 0.0]))
    assert len(found) == 1 and "index (1,)" in found[0]    # the big entry's slack does not cover the small
    assert not compare((got,), (want,), rtol=0.0, atol=0.0, slack=(np.array([0.1, 1e-6]),))
