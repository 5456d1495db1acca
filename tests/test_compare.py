"""Tests for ctlkit/checks/report.py: Report, compare and the tolerance arguments."""
import numpy as np
import pytest
import tensorflow as tf

from ctlkit.checks.report import Report, compare, factor, factor_words, real_number, tolerance


def test_report_str_lists_every_problem():
    r = Report(name="f", problems=["one.", "two."], cases=2)
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

# -- hostile input --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [5, None, ("x",)])
def test_hostile_compare_where_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"where must be a string, e.g. where='the loss'"):
        compare(1.0, 1.0, where=bad)


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


# -- the number arguments, read directly ----------------------------------------------------------
@pytest.mark.parametrize("x, want", [(3, 3), (np.int64(3), 3), (np.float32(0.5), 0.5),
                                     (np.array(2.5), 2.5), (tf.constant(4), 4)])
def test_real_number_gives_the_number_itself_or_a_zero_d_ones_python_number(x, want):
    got = real_number(x, "n", "1")
    assert got == want and (got is x or type(got) in (int, float)), type(got)


@pytest.mark.parametrize("bad", [True, np.bool_(True), "1", np.array([1.0]), tf.constant([1]), 1j])
def test_real_number_refuses_what_is_not_one_real_number(bad):
    with pytest.raises(TypeError, match=r"^n must be an int, e\.g\. n=2, got "):
        real_number(bad, "n", "2", "an int")


def test_tolerance_is_a_float_at_least_zero():
    assert tolerance(0, "atol") == 0.0 and type(tolerance(np.float32(0.25), "rtol")) is float
    with pytest.raises(ValueError, match=r"atol must be a finite number >= 0, e\.g\. atol=1e-5, "
                                         r"got -1\.0"):
        tolerance(-1, "atol")


@pytest.mark.parametrize("c, words", [(2.0, "2"), (0.5, "1/2"), (32768.0, "32768 (2**15)"),
                                      (2.0 ** -15, "1/32768 (2**-15)"), (-1.0, "-1"), (8.0, "8"),
                                      (1.7, "1.7")])
def test_a_result_off_by_an_exact_factor_says_the_factor(c, words):
    want = np.array([1.0, -2.0, 0.0, 3.5])
    assert factor(c * want, want) == pytest.approx(c)
    assert factor_words(c) == words
    assert compare(c * want, want)[0].endswith(f"yours is {words} times the expected, in every entry.")


@pytest.mark.parametrize("got", [[1.0, 2.1], [2.0, 4.0 * 1.01], [0.0, 0.0], [1.0, 1.0], [np.nan, 2.0]])
def test_no_factor_where_there_is_none(got):
    """Not one factor for every entry, all zero, or a NaN: no factor is claimed."""
    assert factor(np.array(got), np.array([1.0, 2.0])) is None


def test_a_single_number_names_only_a_simple_factor():
    assert compare(np.float32(6.0), np.float32(3.0))[0].endswith("yours is 2 times the expected.")
    assert "times the expected" not in compare(np.float32(2.806), np.float32(3.0))[0]
    assert compare(np.array([1.7, 3.4]), np.array([1.0, 2.0]))[0].endswith(
        "yours is 1.7 times the expected, in every entry.")          # a pattern over several entries
