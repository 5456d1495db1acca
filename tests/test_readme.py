"""The README's notebook map agrees with the notebooks: every notebook is listed once, with the
minutes its own overview states, and the chain of "Next:" links runs 00 -> 12 forward."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _overview(path):
    cells = json.loads(path.read_text())["cells"]
    return next("".join(c["source"]) for c in cells if "".join(c["source"]).startswith("## Overview"))


def test_every_notebook_is_in_the_map_with_the_minutes_of_its_overview():
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS:
        row = rf"^\| \[{path.stem}\]\(notebooks/{path.name}\) \|.*\| ~(\d+) min \|$"
        rows = re.findall(row, readme, re.M)
        assert len(rows) == 1, f"{path.name}: {len(rows)} rows in the README's map"
        stated = re.findall(r"[Aa]bout\s+(\d+)\s+minutes\s+to\s+read\s+and\s+work\s+through", _overview(path))
        assert stated == rows, f"{path.name}: overview says {stated}, README says ~{rows[0]} min"


def test_each_notebook_sends_the_reader_to_the_next_one():
    for path, following in zip(NOTEBOOKS, NOTEBOOKS[1:]):
        text = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"][-3:])
        assert following.stem in text, f"{path.name} does not point on to {following.stem}"
