"""tools/sweep.py names the line that failed, in the forms nbval's messages reach it."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "sweep", Path(__file__).resolve().parents[1] / "tools" / "sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)

CELL = """Input:
x = 1
assert x > 0                # first
assert x > 5                # second
assert x > 9                # third
"""


def traceback(esc):
    return (CELL + f"{esc}[0;31mAssertionError{esc}[0m Traceback\n"
            f"{esc}[32m---> {esc}[39m{esc}[32m3{esc}[39m {esc}[38;5;28;01massert{esc}[39;00m x > 5"
            f"                # second\n{esc}[31mAssertionError{esc}[39m: \n")


def test_the_arrowed_assert_is_named_with_raw_colour_codes():
    assert sweep.failing_line(traceback("\x1b")).startswith("assert x > 5")


def test_the_arrowed_assert_is_named_from_junit_xml_escapes():
    # pytest's JUnit report writes the escape character, invalid in XML, as "#x1B"
    assert sweep.failing_line(traceback("#x1B")).startswith("assert x > 5")


def test_an_error_without_an_arrow_falls_back_to_the_error_line():
    assert sweep.failing_line("Input:\nf()\nZeroDivisionError: division by zero\n") == (
        "ZeroDivisionError: division by zero")


def test_keep_mode_names_each_failing_cell_of_an_executed_copy():
    executed = {"cells": [
        {"cell_type": "markdown", "source": "assert x > 5"},
        {"cell_type": "code", "outputs": [{"output_type": "stream", "text": "ok"}]},
        {"cell_type": "code", "outputs": [{
            "output_type": "error", "ename": "AssertionError", "evalue": "",
            "traceback": traceback("\x1b").splitlines()}]},
        {"cell_type": "code", "outputs": [{
            "output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
            "traceback": ["Traceback (most recent call last)", "f()"]}]},
    ]}
    assert sweep.cell_failures(executed) == {
        "cell 2": "assert x > 5                # second",
        "cell 3": "ZeroDivisionError: division by zero"}
    assert sweep.cell_failures({"cells": executed["cells"][:2]}) == {}
