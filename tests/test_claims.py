"""The claims list (docs/claims/NN.md, tools/claims.py): every sentence of a notebook that says
"any", "only", "never", "cannot", "faster", "on CPUs"... has a line saying what backs it at that
scope, and every line still matches its notebook and points at evidence that exists."""
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("claims", ROOT / "tools" / "claims.py")
claims = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(claims)


@pytest.mark.parametrize("number", claims.numbers())
def test_every_universal_sentence_has_its_line_and_every_line_holds(number):
    assert claims.problems(number) == []


def _notebook(tmp_path, cells):
    nb = {"cells": [{"cell_type": kind, "source": source, "metadata": {}} for kind, source in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "notebooks" / "99_probe.ipynb"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture
def probe(tmp_path, monkeypatch):
    monkeypatch.setattr(claims, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(claims, "CLAIMS", tmp_path / "claims")
    (tmp_path / "claims").mkdir()
    return tmp_path


def test_sentences_come_from_markdown_comments_and_printed_text(probe):
    path = _notebook(probe, [
        ("markdown", "# Title\n\nThe tape sees every variable. It is fine.\n\n- only this item\n"
                     "```python\nall = 1  # inside a fence: not prose\n```"),
        ("code", "x = 1  # this never fails\nprint(f'all {x} done')\nassert x, 'always one'\n"
                 "y = tf.reduce_all(x)\n%time z = 2\n")])
    assert claims.flagged(path) == ["The tape sees every variable.", "only this item",
                                    "this never fails", "f'all {x} done'", "'always one'"]


def test_a_comment_after_code_is_its_own_sentence_and_a_blockquote_one_paragraph(probe):
    path = _notebook(probe, [
        ("markdown", "> **Note:** a quote that runs\n> over two lines, every one of them.\n>\n"
                     "> - only this item\n\nAll plain."),
        ("code", "a = 1      # every a\nb = 2      # only b\n\n"
                 "c = 3      # all of c, said\n           # over two lines\n"
                 "# a block of its own lines, all\n# joined\nd = 4      # never d\n")])
    assert claims.flagged(path) == [
        "**Note:** a quote that runs over two lines, every one of them.", "only this item", "All plain.",
        "every a", "only b", "all of c, said over two lines", "a block of its own lines, all joined",
        "never d"]


def test_a_missing_line_a_stale_line_and_bad_evidence_are_each_named(probe):
    _notebook(probe, [("markdown", "Only TensorFlow does this. Every step counts."),
                      ("code", "assert 1 + 1 == 2\n")])
    (probe / "claims" / "99.md").write_text(
        "# 99\n\n"
        "- Only TensorFlow does this. || assert: 1 + 1 == 3\n"
        "- A sentence that is gone. || scope: a count\n")
    found = claims.problems("99")
    assert any("no assert line of 99_probe.ipynb contains '1 + 1 == 3'" in p for p in found), found
    assert any("no sentence of 99_probe.ipynb reads so any more" in p for p in found), found
    assert any("no line in docs/claims/99.md for: Every step counts." in p for p in found), found
    (probe / "claims" / "99.md").write_text(
        "# 99\n\n"
        "- Only TensorFlow does this. || assert: 1 + 1 == 2\n"
        "- Every step counts. || scope: an instruction\n")
    assert claims.problems("99") == []


@pytest.mark.parametrize("evidence, complaint", [
    ("guess: it seems so", "kind 'guess' is none of"),
    ("scope:", "'scope:' names no evidence"),
    ("cell: print('never shown')", "no code cell of 99_probe.ipynb contains"),
    ("source: keras/src/no_such_file.py", "no installed file keras/src/no_such_file.py"),
    ("source: keras/src/backend/tensorflow/trainer.py::no_such_name_here", "does not contain"),
    ("test: tests/test_readme.py::test_no_such_test", "no test tests/test_readme.py::test_no_such"),
])
def test_evidence_that_does_not_hold_is_refused(probe, evidence, complaint):
    _notebook(probe, [("markdown", "It never fails.")])
    (probe / "claims" / "99.md").write_text(f"- It never fails. || {evidence}\n")
    found = claims.problems("99")
    assert any(complaint in p for p in found), found


def test_source_and_test_evidence_that_exists_is_accepted(probe):
    _notebook(probe, [("markdown", "It never fails. It always runs.")])
    (probe / "claims" / "99.md").write_text(
        "- It never fails. || source: keras/src/backend/tensorflow/trainer.py::do_not_convert\n"
        "- It always runs. || test: tests/test_claims.py::test_source_and_test_evidence\n")
    assert claims.problems("99") == []
