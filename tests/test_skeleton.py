"""Every notebook has the skeleton CONTRIBUTING.md describes: an H1 "NN · Title" with the Colab badge
at the file's own path, "## Overview", "## Setup" heading the one Colab-aware Setup cell that calls
ctlkit.setup(), the lessons, the exercises, and "## Summary" the last section."""
import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BADGE = "https://colab.research.google.com/github/{repo}/blob/main/notebooks/{name}"


def _cells(path):
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_skeleton(path):
    cells = _cells(path)
    (kind0, title), (kind1, overview), (kind2, setup_md), (kind3, setup) = cells[:4]
    assert kind0 == "markdown" and title.startswith(f"# {path.name[:2]} · ")
    assert BADGE.format(repo="ctlkit/ctlkit", name=path.name) in title, "the badge opens this file"
    assert kind1 == "markdown" and overview.startswith("## Overview")
    assert kind2 == "markdown" and setup_md.startswith("## Setup")
    assert kind3 == "code" and 'if "google.colab" in sys.modules:' in setup and "ctlkit.setup(" in setup
    assert sum("google.colab" in src for kind, src in cells if kind == "code") == 1, "one Setup cell"
    headings = [line for kind, src in cells if kind == "markdown"
                for line in src.splitlines() if line.startswith("## ")]
    assert any("Exercises" in h for h in headings), headings
    assert headings[-1] == "## Summary", headings


def test_a_notebook_without_the_setup_heading_fails(tmp_path):
    """The test above can fail: a notebook whose Setup cell has no heading is refused."""
    bad = json.loads(NOTEBOOKS[0].read_text())
    del bad["cells"][2]
    path = tmp_path / NOTEBOOKS[0].name
    path.write_text(json.dumps(bad))
    with pytest.raises(AssertionError):
        test_the_skeleton(path)
