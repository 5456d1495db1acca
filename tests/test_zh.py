"""The Chinese edition (notebooks/zh/) says in Chinese what the English says and runs exactly the
English code: tools/zh.py's check passes for all 16 notebooks, and each way of drifting apart (code
edited, English text changed after translating, a cell never translated) is caught."""
import copy
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("zh", ROOT / "tools" / "zh.py")
zh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zh)

PAIRS = zh.pairs()
BADGE = "https://colab.research.google.com/github/ctlkit/ctlkit/blob/main/notebooks/zh/{name}"


def test_every_notebook_has_a_chinese_edition():
    assert len(PAIRS) == 16
    assert all(zh_path.exists() for _, zh_path in PAIRS)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].stem)
def test_the_chinese_notebook_is_current_and_runs_the_english_code(pair):
    assert zh.problems(*pair) == []


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].stem)
def test_the_chinese_skeleton(pair):
    en_path, zh_path = pair
    cells = [(c["cell_type"], "".join(c["source"])) for c in json.loads(zh_path.read_text())["cells"]]
    (kind0, title), (_, overview), (_, setup_md), (kind3, setup) = cells[:4]
    assert kind0 == "markdown" and title.startswith(f"# {en_path.name[:2]} · ")
    assert BADGE.format(name=zh_path.name) in title, "the badge opens the Chinese notebook"
    assert overview.startswith("## 概览") and setup_md.startswith("## 准备工作")
    assert kind3 == "code" and "ctlkit.setup(" in setup
    headings = [line for kind, src in cells if kind == "markdown"
                for line in src.splitlines() if line.startswith("## ")]
    assert any("练习" in h for h in headings), headings
    assert headings[-1] == "## 小结", headings


def _copies(tmp_path, name="03_custom_training_loop.ipynb"):
    en, zh_ = tmp_path / "en.ipynb", tmp_path / "zh" / name
    zh_.parent.mkdir()
    en.write_text((ROOT / "notebooks" / name).read_text())
    zh_.write_text((ROOT / "notebooks" / "zh" / name).read_text())
    return en, zh_


def _edit(path, index, change):
    nb = json.loads(path.read_text())
    nb["cells"][index]["source"] = change("".join(nb["cells"][index]["source"]))
    path.write_text(json.dumps(nb))


def _first(path, kind):
    return next(i for i, c in enumerate(json.loads(path.read_text())["cells"])
                if c["cell_type"] == kind and i > 3)


def test_a_translated_comment_is_allowed_and_changed_code_is_caught(tmp_path):
    en, zh_ = _copies(tmp_path)
    code = _first(zh_, "code")
    _edit(zh_, code, lambda s: "# 中文注释：这一行只是注释\n" + s)
    assert zh.problems(en, zh_) == []
    _edit(zh_, code, lambda s: s.replace("(", "( 1 +", 1))
    assert any(f"cell {code}: the code differs" in p for p in zh.problems(en, zh_))


def test_an_english_change_makes_the_translation_stale_and_sync_keeps_it_as_previous(tmp_path):
    en, zh_ = _copies(tmp_path)
    index = _first(en, "markdown")
    old_translation = "".join(json.loads(zh_.read_text())["cells"][index]["source"])
    _edit(en, index, lambda s: s + "\n\nOne more sentence.")
    assert any(f"cell {index}: stale" in p for p in zh.problems(en, zh_))
    left = zh.sync(en, zh_)
    assert left == 1
    cell = json.loads(zh_.read_text())["cells"][index]
    assert cell["metadata"]["ctlkit"]["previous"] == old_translation        # nothing lost
    assert any(f"cell {index}: not translated yet" in p for p in zh.problems(en, zh_))
    (item,) = zh.todo(en, zh_)
    assert item["index"] == index and item["previous"] == old_translation


def test_a_new_english_cell_is_found_untranslated(tmp_path):
    en, zh_ = _copies(tmp_path)
    nb = json.loads(en.read_text())
    new_cell = {"cell_type": "markdown", "id": "new-cell", "metadata": {}, "source": "A new idea."}
    nb["cells"].insert(5, new_cell)
    en.write_text(json.dumps(nb))
    assert "cells are not the English notebook's" in " ".join(zh.problems(en, zh_))
    zh.sync(en, zh_)
    problems = zh.problems(en, zh_)
    assert len(problems) == 1 and "cell 5: not translated yet" in problems[0]


def test_the_code_tokens_ignore_comments_but_not_code():
    base = "x = f(1)  # one\nif x:\n    y = 2\n"
    assert zh.code_tokens(base) == zh.code_tokens("x = f(1)  # 一\nif x:\n    y = 2  # 二\n")
    assert zh.code_tokens(base) != zh.code_tokens("x = f(2)\nif x:\n    y = 2\n")
    assert zh.code_tokens(base) != zh.code_tokens("x = f(1)\nif x:\n    pass\ny = 2\n")   # indentation
    magic = "%%writefile a.py\nprint('hi')  # note\n"
    assert zh.code_tokens(magic) == zh.code_tokens("%%writefile a.py\nprint('hi')  # 注释\n")
    assert zh.code_tokens(magic) != zh.code_tokens("%%writefile b.py\nprint('hi')\n")


def test_apply_refuses_a_hash_of_no_english_cell(tmp_path):
    with pytest.raises(ValueError, match="no English markdown cell"):
        zh.apply({"notebook": "03", "cells": [{"en": "0" * 16, "zh": "文字"}]})
    with pytest.raises(ValueError, match="names no English notebook"):
        zh.apply({"notebook": "99", "cells": []})
    with pytest.raises(ValueError, match="a translations file is"):
        zh.apply(copy.deepcopy([]))
