"""tools/book.py without building the site (make book builds and checks it in a browser): the
recorder keeps what a cell showed, the monitor's final figure included; the cache key changes with
what an output depends on and with nothing else; a page gets its header, its language and Colab
links and the English run's outputs; a notebook without a current executed copy is found."""
import copy
import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("book", ROOT / "tools" / "book.py")
book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(book)


def msg(kind, parent="cell", **content):
    return {"msg_type": kind, "parent_header": {"msg_id": parent}, "content": content}


def test_outputs_keep_streams_results_and_the_final_display_update():
    widget = {"text/plain": "ctlkit monitor (live plot widget)",
              "application/vnd.jupyter.widget-view+json": {}}
    messages = [
        msg("execute_input", execution_count=7, code="..."),
        msg("stream", name="stdout", text="step 1\n"),
        msg("stream", name="stdout", text="step 2\n"),
        msg("display_data", data=widget, metadata={}, transient={"display_id": "m1"}),
        msg("stream", name="stderr", text="a warning\n"),
        msg("update_display_data", data={"image/png": "PNG"}, metadata={}, transient={"display_id": "m1"}),
        msg("execute_result", data={"text/plain": "42"}, metadata={}, execution_count=7),
        msg("status", execution_state="idle"),
    ]
    outputs, count = book.outputs_from_messages(messages)
    assert count == 7
    assert [o["output_type"] for o in outputs] == ["stream", "display_data", "stream", "execute_result"]
    assert outputs[0]["text"] == "step 1\nstep 2\n"                 # one stream, joined
    assert outputs[1]["data"] == {"image/png": "PNG"}                # the widget replaced by its figure
    assert outputs[3]["data"] == {"text/plain": "42"}


def test_clear_output_now_and_on_the_next_output():
    outputs, _ = book.outputs_from_messages([
        msg("stream", name="stdout", text="old\n"), msg("clear_output", wait=False),
        msg("stream", name="stdout", text="kept\n"), msg("clear_output", wait=True),
        msg("display_data", data={"text/plain": "new"}, metadata={}),
    ])
    assert outputs == [{"output_type": "display_data", "data": {"text/plain": "new"}, "metadata": {}}]


def test_the_key_changes_with_the_notebook_the_kit_the_stack_mode_and_seed(tmp_path):
    notebook = tmp_path / "00_x.ipynb"
    notebook.write_text('{"cells": []}')
    key = book.run_key(notebook, "current", "full", 0, kit="k1")
    assert key == book.run_key(notebook, "current", "full", 0, kit="k1")
    others = {book.run_key(notebook, "current", "full", 0, kit="k2"),
              book.run_key(notebook, "colab", "full", 0, kit="k1"),
              book.run_key(notebook, "current", "quick", 0, kit="k1"),
              book.run_key(notebook, "current", "full", 1, kit="k1")}
    notebook.write_text('{"cells": [1]}')
    others.add(book.run_key(notebook, "current", "full", 0, kit="k1"))
    assert key not in others and len(others) == 5


def test_a_missing_or_outdated_executed_copy_is_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(book, "EXECUTED", tmp_path)
    first, second = book.english_notebooks()[:2]
    (tmp_path / "current").mkdir()
    kit = book.kit_digest()
    for notebook, key in ((first, book.run_key(first, "current", "full", 0, kit)), (second, "outdated")):
        nb = {"cells": [], "metadata": {"ctlkit_run": {"key": key}}}
        (tmp_path / "current" / notebook.name).write_text(json.dumps(nb))
    stale = book.stale()
    assert first not in stale and second in stale and len(stale) == len(book.english_notebooks()) - 1


def _executed(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    for number, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"cell {number}\n"}]
        cell["execution_count"] = number + 1
    nb["metadata"]["ctlkit_run"] = {"key": "k", "stack": "current", "mode": "full", "seed": 0,
                                    "machine": "a test", "python": "3", "tensorflow": "2", "keras": "3",
                                    "finished": "today", "seconds": 9}
    return nb


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_page_has_the_english_outputs_the_header_and_the_links(lang):
    name = "03_custom_training_loop"
    folder = ROOT / "notebooks" / ("zh" if lang == "zh" else "")
    source = json.loads((folder / f"{name}.ipynb").read_text())
    executed = _executed(name)
    nb = book.page(source, executed, lang, name)
    assert len(nb["cells"]) == len(source["cells"]) + 1
    title, header = "".join(nb["cells"][0]["source"]), nb["cells"][1]["source"]
    assert title.startswith("# 03 · ") and "colab-badge.svg" not in title    # no outside image
    folder = "notebooks/zh" if lang == "zh" else "notebooks"
    colab = f"https://colab.research.google.com/github/ctlkit/ctlkit/blob/main/{folder}/{name}.ipynb"
    assert f'href="{colab}"' in header
    assert (f'href="zh/{name}.html"' if lang == "en" else f'href="../{name}.html"') in header
    assert ("full mode, seed 0" if lang == "en" else "完整模式") in header and "a test" in header
    assert "at a time" not in header and "同时运行" not in header     # a copy that did not say
    executed["metadata"]["ctlkit_run"]["at_a_time"] = 2
    header = book.page(source, executed, lang, name)["cells"][1]["source"]
    assert ("in 9 s (2 notebooks at a time" if lang == "en" else "用时 9 秒（同时运行 2 个笔记本") in header
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["outputs"][0]["text"] for c in code] == [f"cell {n}\n" for n in range(len(code))]


def test_a_page_refuses_cells_that_do_not_match_the_run():
    name = "03_custom_training_loop"
    source = json.loads((ROOT / "notebooks" / "zh" / f"{name}.ipynb").read_text())
    executed = _executed(name)
    shorter = copy.deepcopy(source)
    del shorter["cells"][5]
    with pytest.raises(SystemExit, match="do not match the executed English notebook"):
        book.page(shorter, executed, "zh", name)


def test_chinese_lines_are_joined_outside_code_only():
    text = "第一行\n第二行。\nEnglish\n中文\n```\n代码\n注释\n```\n"
    assert book.join_cjk_lines(text) == "第一行第二行。\nEnglish\n中文\n```\n代码\n注释\n```\n"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_landing_page_maps_every_notebook(lang):
    text = book.landing(lang)
    for notebook in book.english_notebooks():
        assert f"| [{notebook.stem}]({notebook.stem}.ipynb) |" in text
    assert ('href="zh/index.html"' if lang == "en" else 'href="../index.html"') in text


def test_the_recorder_writes_only_a_notebook_whose_cells_all_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("CTLKIT_STACK", "current")       # what make test MODE=full sets on current
    monkeypatch.setenv("CTLKIT_QUICK", "0")
    monkeypatch.delenv("CTLKIT_SEED", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")   # as an xdist worker of `-n 3` sees it
    name = "00_start_here.ipynb"
    notebook = tmp_path / name
    shutil.copy(ROOT / "notebooks" / name, notebook)
    code_cells = sum(c["cell_type"] == "code" for c in json.loads(notebook.read_text())["cells"])
    recorder = book.Recorder(tmp_path / "out", tmp_path)

    class Item:
        def __init__(self, number):
            self.cell, self.cell_num = object(), number
            self.parent = Parent()

    class Parent:
        path = notebook

        def get_kernel_message(self, timeout=None):
            return self.queue.pop(0)

    recorder.collected([Item(0)])
    ran = notebook.read_bytes()
    notebook.write_text(notebook.read_text().replace("Start here", "Edited while running"))
    for number in range(code_cells):
        item = Item(number)
        item.parent.queue = [msg("execute_input", parent=f"c{number}", execution_count=number + 1),
                             msg("stream", parent=f"c{number}", name="stdout", text=f"out {number}\n")]
        with recorder.capture(item):
            item.parent.get_kernel_message()
            item.parent.get_kernel_message()
        assert "get_kernel_message" not in vars(item.parent)      # the spy is removed
    time.sleep(1.1)                       # the session goes on after the notebook's last cell
    written = recorder.finish()
    assert written == [tmp_path / "out" / name]
    nb = json.loads(written[0].read_text())
    key = book.run_key(ran, "current", "full", 0)
    assert nb["metadata"]["ctlkit_run"]["key"] == key            # the key of what ran, not of the edit
    assert "Edited while running" not in json.dumps(nb)
    assert nb["metadata"]["ctlkit_run"]["seconds"] == 0       # its cells' time, not the session's
    assert nb["metadata"]["ctlkit_run"]["at_a_time"] == 3     # measured beside two other notebooks
    assert nb["metadata"]["ctlkit_run"]["tensorflow"] == __import__("tensorflow").__version__
    outputs = [c["outputs"] for c in nb["cells"] if c["cell_type"] == "code"]
    assert outputs[-1][0]["text"] == f"out {code_cells - 1}\n"

    class Failed:
        failed, nodeid = True, f"{name}::Cell 3"

    recorder.report(Failed())
    (tmp_path / "out" / name).unlink()
    assert recorder.finish() == [] and not (tmp_path / "out" / name).exists()
