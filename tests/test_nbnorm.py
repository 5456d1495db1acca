"""Tests for tools/nbnorm.py, the notebook normaliser, and a check that the kit's notebooks are normalised."""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBNORM = ROOT / "tools" / "nbnorm.py"
NOTEBOOKS = ROOT / "notebooks"

_spec = importlib.util.spec_from_file_location("nbnorm", NBNORM)
nbnorm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbnorm)


def run_cli(*args):
    return subprocess.run([sys.executable, str(NBNORM), *map(str, args)], capture_output=True, text=True)


def messy_notebook():
    """A notebook as JupyterLab or Colab might save it: outputs, counts, metadata noise, odd ids."""
    return {
        "nbformat": 4,
        "nbformat_minor": 4,
        "metadata": {
            "colab": {"provenance": [], "toc_visible": True},
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"},
            "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}},
        },
        "cells": [
            {"cell_type": "markdown", "metadata": {"id": "colab-id"}, "source": "# Title\n\nSome text"},
            {
                "cell_type": "code",
                "id": "keep-me",
                "execution_count": 3,
                "metadata": {"tags": ["slow"], "collapsed": False, "ExecuteTime": {"end": "x"},
                             "jupyter": {"source_hidden": True, "foo": 1}, "cellView": "form"},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "hello\n"}],
                "source": ["print('hello')"],
            },
            {
                "cell_type": "code",
                "execution_count": 4,
                "metadata": {},
                "outputs": [
                    {"output_type": "execute_result", "execution_count": 4, "metadata": {},
                     "data": {"text/plain": "2\n3"}},
                ],
                "source": "# NBVAL_CHECK_OUTPUT\n1 + 1",
            },
            {   # duplicate id: must be replaced
                "cell_type": "code", "id": "keep-me", "execution_count": 5, "metadata": {},
                "outputs": [{"output_type": "error", "ename": "E", "evalue": "", "traceback": []}],
                "source": "raise E",
            },
            {"cell_type": "code", "id": "bad id!", "execution_count": None, "metadata": {},
             "outputs": [], "source": "x = 'é'"},
        ],
    }


def write(path, nb):
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_strips_outputs_counts_and_metadata():
    nb = nbnorm.normalize(messy_notebook())
    md, hello, checked, dup, bad = nb["cells"]
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)
    assert nb["metadata"] == {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    assert hello["outputs"] == [] and hello["execution_count"] is None
    assert dup["outputs"] == [] and dup["execution_count"] is None
    assert hello["metadata"] == {"tags": ["slow"], "jupyter": {"source_hidden": True}, "cellView": "form"}
    assert md["metadata"] == {} and "outputs" not in md and "execution_count" not in md
    assert md["source"] == ["# Title\n", "\n", "Some text"]
    assert bad["source"] == ["x = 'é'"]


def test_keeps_outputs_and_count_of_checked_cells():
    checked = nbnorm.normalize(messy_notebook())["cells"][2]
    assert checked["execution_count"] == 4
    assert checked["outputs"] == [
        {"output_type": "execute_result", "execution_count": 4, "metadata": {},
         "data": {"text/plain": ["2\n", "3"]}}
    ]


def test_ids_are_valid_unique_and_stable():
    nb = nbnorm.normalize(messy_notebook())
    ids = [cell["id"] for cell in nb["cells"]]
    assert len(set(ids)) == len(ids)
    assert all(nbnorm.CELL_ID_RE.match(i) for i in ids)
    assert ids[1] == "keep-me"          # a valid, unique id is kept
    assert ids[3] != "keep-me"          # the duplicate gets a new one
    assert ids == [c["id"] for c in nbnorm.normalize(messy_notebook())["cells"]]  # deterministic
    assert ids == [c["id"] for c in nbnorm.normalize(nb)["cells"]]                # and kept next time


def test_does_not_modify_its_input():
    nb = messy_notebook()
    nbnorm.normalize(nb)
    assert nb == messy_notebook()


def test_output_format_matches_jupyter_and_is_idempotent(tmp_path):
    path = write(tmp_path / "a.ipynb", messy_notebook())
    assert run_cli(path).returncode == 0
    once = path.read_text(encoding="utf-8")
    assert once.endswith("}\n") and "\n \"cells\": [" in once  # indent=1, trailing newline
    assert "'é'" in once                                           # ensure_ascii=False
    assert run_cli(path).returncode == 0
    assert path.read_text(encoding="utf-8") == once
    assert nbnorm.normalize_text(once) == once


def test_check_fails_on_unnormalised_and_passes_after_normalising(tmp_path):
    sub = tmp_path / "nbs" / "deeper"
    sub.mkdir(parents=True)
    dirty = write(sub / "dirty.ipynb", messy_notebook())
    before = dirty.read_text(encoding="utf-8")

    result = run_cli("--check", tmp_path / "nbs")
    assert result.returncode == 1
    assert "dirty.ipynb" in result.stderr and "run: make normalize" in result.stderr
    assert dirty.read_text(encoding="utf-8") == before  # --check changes nothing

    assert run_cli(tmp_path / "nbs").returncode == 0
    result = run_cli("--check", tmp_path / "nbs")
    assert result.returncode == 0, result.stderr


def test_skips_checkpoints_and_reports_broken_files(tmp_path):
    (tmp_path / ".ipynb_checkpoints").mkdir()
    write(tmp_path / ".ipynb_checkpoints" / "x-checkpoint.ipynb", messy_notebook())
    assert run_cli("--check", tmp_path).returncode == 0
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    result = run_cli("--check", tmp_path)
    assert result.returncode == 2 and "broken.ipynb" in result.stderr
    assert run_cli("--check", tmp_path / "missing").returncode == 2


def test_kit_notebooks_are_normalised():
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert notebooks, f"no notebooks found in {NOTEBOOKS}: the kit is its notebooks"
    result = run_cli("--check", NOTEBOOKS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_jupyter_writes_a_normalised_notebook_unchanged():
    """What JupyterLab saves (through nbformat) round-trips: normalising and saving do not fight."""
    nbformat = pytest.importorskip("nbformat")
    once = nbnorm.normalize_text(json.dumps(messy_notebook()))
    saved = nbformat.writes(nbformat.reads(once, as_version=4)) + "\n"
    assert saved == once


# -- the kit's repository, one setting stamped into every notebook ---------------------------------
def _colab_notebook(badge_repo="someone/old", install_repo="someone/old", name="07_x.ipynb"):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source":
            f"# 07\n\n[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{badge_repo}/blob/main/notebooks/{name})"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source":
            f'KIT = "ctlkit @ git+https://github.com/{install_repo}"  # set in pyproject.toml\n'},
    ]}


def test_stamp_points_badge_at_own_file_and_install_at_the_repository():
    nb = nbnorm.normalize(_colab_notebook(name="wrong_name.ipynb"), "fork/kit", "07_gan.ipynb")
    md, code = ("".join(c["source"]) for c in nb["cells"])
    assert "colab.research.google.com/github/fork/kit/blob/main/notebooks/07_gan.ipynb" in md
    assert 'KIT = "ctlkit @ git+https://github.com/fork/kit"' in code
    assert "someone/old" not in md + code
    assert nbnorm.normalize(nb, "fork/kit", "07_gan.ipynb") == nb      # idempotent


def test_kit_repository_reads_the_one_setting(tmp_path):
    assert nbnorm.kit_repository() == re.search(
        r'Repository = "https://github.com/([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    p = tmp_path / "pyproject.toml"
    p.write_text('[project.urls]\nRepository = "https://github.com/me/ctlkit-fork.git"\n')
    assert nbnorm.kit_repository(p) == "me/ctlkit-fork"
    p.write_text('[project.urls]\nHomepage = "https://example.org"\n')
    with pytest.raises(ValueError, match="Repository"):
        nbnorm.kit_repository(p)


def test_check_fails_when_a_notebook_names_another_repository(tmp_path):
    write(tmp_path / "07_gan.ipynb", nbnorm.normalize(_colab_notebook()))   # not stamped
    result = run_cli("--check", tmp_path)
    assert result.returncode == 1 and "07_gan.ipynb" in result.stderr
    assert run_cli(tmp_path).returncode == 0
    text = (tmp_path / "07_gan.ipynb").read_text()
    repo = nbnorm.kit_repository()
    assert f"github/{repo}/blob/main/notebooks/07_gan.ipynb" in text and f"github.com/{repo}" in text


def test_every_kit_notebook_has_the_badge_and_the_colab_install():
    repo = nbnorm.kit_repository()
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        md = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        assert f"colab.research.google.com/github/{repo}/blob/main/notebooks/{path.name}" in md
        assert "google.colab" in code[0] and f'KIT = "ctlkit @ git+https://github.com/{repo}"' in code[0]
        assert '"install", "-q", KIT]' in code[0], f"{path.name}: the setup cell installs only the kit"


# Nothing a user has is lost by a failure: the normaliser writes a temporary file beside the
# notebook and moves it over the old one, and leaves a notebook it cannot normalise untouched.

def _saved(tmp_path, text):
    path = tmp_path / "mine.ipynb"
    path.write_bytes(text.encode("utf-8"))
    return path


def test_a_cell_utf8_cannot_store_leaves_the_notebook_untouched_and_is_named(tmp_path):
    nb = messy_notebook()
    nb["cells"][1]["source"] = "x = 1\n"
    text = json.dumps(nb).replace("x = 1", "x = '\\ud800'")   # the JSON escape of a lone surrogate
    path = _saved(tmp_path, text)
    result = run_cli(path)
    assert result.returncode == 2
    assert path.read_bytes() == text.encode("utf-8")            # not truncated, not rewritten
    assert "mine.ipynb" in result.stderr and "cell 1 (code" in result.stderr, result.stderr
    assert "left as it was" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.ipynb"]   # no temporary file left


def test_a_failed_write_leaves_the_old_notebook_whole(tmp_path, monkeypatch, capsys):
    text = json.dumps(messy_notebook())
    path = _saved(tmp_path, text)

    def disk_full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(nbnorm.os, "fsync", disk_full)
    monkeypatch.setattr(nbnorm, "kit_repository", lambda: "ctlkit/ctlkit")
    assert nbnorm.main([str(path)]) == 2
    assert path.read_bytes() == text.encode("utf-8")
    err = capsys.readouterr().err
    assert "cannot write" in err and "mine.ipynb" in err and "No space left" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.ipynb"]


def test_a_notebook_that_is_not_utf8_is_named_and_left_alone(tmp_path):
    path = tmp_path / "latin1.ipynb"
    raw = json.dumps(messy_notebook()).replace("Some text", "Caf\u00e9").encode("latin-1")
    path.write_bytes(raw)
    result = run_cli(path)
    assert result.returncode == 2 and "latin1.ipynb" in result.stderr, result.stderr
    assert path.read_bytes() == raw


def test_a_rewrite_keeps_the_file_mode(tmp_path):
    path = _saved(tmp_path, json.dumps(messy_notebook()))
    path.chmod(0o640)
    assert run_cli(path).returncode == 0
    assert (path.stat().st_mode & 0o777) == 0o640
    assert json.loads(path.read_text(encoding="utf-8"))["nbformat_minor"] == 5


def test_executed_copies_in_a_runs_folder_are_not_the_kits_notebooks(tmp_path):
    # make bench and make sweep leave executed notebooks in notebooks/runs/: neither make test's
    # normalisation check nor its notebook run may take them for the kit's own
    (tmp_path / "runs" / "sweep").mkdir(parents=True)
    (tmp_path / "runs" / "sweep" / "00_x.ipynb").write_text("{}")
    (tmp_path / "zh" / "runs").mkdir(parents=True)
    (tmp_path / "zh" / "runs" / "00_x.ipynb").write_text("{}")
    (tmp_path / "00_x.ipynb").write_text("{}")
    assert nbnorm.find_notebooks([tmp_path]) == [tmp_path / "00_x.ipynb"]
    assert nbnorm.find_notebooks([tmp_path / "runs" / "sweep" / "00_x.ipynb"]) != []   # named: taken
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "--ignore=notebooks/runs" in makefile
