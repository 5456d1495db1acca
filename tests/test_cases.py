"""Tests for ctlkit/checks/cases.py: the cases a checker tries, each call's own copy of the
arguments, and the name and flags a checker reports under."""
import numpy as np
import pytest
import tensorflow as tf
from checks_helpers import X, Y, ref_square

from ctlkit.checks import check_function, check_traces
from ctlkit.checks.cases import checker_name, labelled_cases, own_copy


# -- the cases a checker tries --------------------------------------------------------------------
def test_bare_arguments_become_one_argument_cases():
    r = check_function(lambda x: x * x, ref_square, cases=[X, Y], verbose=False)
    assert r.ok and r.cases == 2


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


@pytest.mark.parametrize("bad", [None, 3, "x", b"x", np.ones((2, 2)), tf.ones((2, 2)), {1}])
def test_hostile_check_traces_cases_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match=r"cases must be a list of argument tuples"):
        check_traces(tf.function(ref_square), cases=bad)

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

# -- issue 12: each function gets its own arguments -----------------------------------------------
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

# -- the name and flags of a checker --------------------------------------------------------------
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


# -- the helpers, called directly -----------------------------------------------------------------
def test_labelled_cases_label_a_list_by_position_and_keep_a_dicts_labels():
    assert labelled_cases([(1, 2), [3], 4]) == [("case 1", (1, 2)), ("case 2", (3,)),
                                                 ("case 3", (4,))]
    assert labelled_cases({"one row": (X,), "a bare argument": Y}) == [("one row", (X,)),
                                                                        ("a bare argument", (Y,))]


def test_own_copy_keeps_aliasing_within_one_copy_but_not_across_copies():
    arr = np.zeros(2)
    first, second = own_copy((arr, [arr])), own_copy((arr, [arr]))
    assert first[0] is first[1][0] and first[0] is not arr and first[0] is not second[0]


def test_own_copy_keeps_named_tuples_and_copies_sets_and_bytearrays():
    import collections
    Pair = collections.namedtuple("Pair", "a b")
    pair, items, raw = Pair(np.ones(1), X), {1, 2}, bytearray(b"ab")
    out = own_copy((pair, items, raw))
    assert type(out[0]) is Pair and out[0].b is X and out[0].a is not pair.a
    assert out[1] == items and out[1] is not items and out[2] == raw and out[2] is not raw


def test_checker_name_prefers_the_name_given_then_the_functions_own():
    import functools
    assert checker_name("square", ref_square) == "square"
    assert checker_name(None, ref_square, verbose=False) == "ref_square"
    assert checker_name(None, functools.partial(ref_square)) == "your function"
    with pytest.raises(TypeError, match=r"verbose must be True or False, got str"):
        checker_name(None, ref_square, verbose="yes")
