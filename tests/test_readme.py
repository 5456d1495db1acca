"""The README's notebook map agrees with the notebooks: every notebook is listed once, with the
minutes its own overview states, and the chain of "Next:" links runs 00 -> 12 forward; the table of
corrections and the notebooks' "Correction: <name>" lines name each other."""
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


def _corrections_table():
    """(short name, [notebook numbers]) for each row of README's table of corrections."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("| correction | what the articles say | notebook |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], [n.strip() for n in cells[-1].split(",")]))
    return rows


def _corrections_in(number):
    path = next((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                     if c["cell_type"] == "markdown")
    return [m.group(1) for m in re.finditer(r"Correction: (.{1,160})", text)]


def test_the_corrections_table_and_the_notebooks_name_each_other():
    rows = _corrections_table()
    assert len(rows) >= 15, rows
    for name, numbers in rows:
        for number in numbers:
            assert any(found.lower().startswith(name.lower()) for found in _corrections_in(number)), (
                f"README names the correction {name!r} in notebook {number}; that notebook has no "
                f"'Correction: {name}' (it has: {_corrections_in(number)})")
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        number = path.name[:2]
        for found in _corrections_in(number):
            assert any(found.lower().startswith(name.lower()) and number in numbers
                       for name, numbers in rows), (
                f"{path.name} has 'Correction: {found[:60]}...' with no row of README's table "
                f"naming it for notebook {number}")
