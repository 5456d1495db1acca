#!/usr/bin/env python3
"""Normalise Jupyter notebooks so that they are stored output-free, with minimal metadata.

    python tools/nbnorm.py notebooks            # rewrite every notebook under notebooks/ in place
    python tools/nbnorm.py --check notebooks    # exit 1 and list the notebooks that would change

What a normalised notebook looks like (CONTRIBUTING.md has the whole notebook skeleton):

- code cells carry no outputs and no execution_count, except cells whose source contains
  ``# NBVAL_CHECK_OUTPUT``: nbval compares their output, so the output and the execution_count
  stay (nbval rejects stored outputs without a count);
- cell metadata keeps only ``tags``, ``jupyter`` (source_hidden / outputs_hidden), ``cellView``
  (Colab's collapsed forms) and ``ctlkit`` (a Chinese cell's record of the English text it
  translates, tools/zh.py); everything else (Colab ids, execution timings, ...) goes;
- notebook metadata is just the Python 3 ``kernelspec`` and ``language_info: {name: python}``;
- nbformat 4.5 with stable cell ids: a valid, unique id is kept, any other cell gets a
  deterministic one derived from its index and source;
- JSON as Jupyter itself writes it (indent 1, sorted keys, non-ASCII kept, sources as lists of
  lines, trailing newline), so saving from JupyterLab and normalising agree;
- the kit's repository stamped where a notebook names it: the Colab badge points at
  ``github/<repo>/blob/main/notebooks/<this file>`` (``notebooks/zh/...`` for the Chinese edition)
  and the Setup cell installs
  ``ctlkit @ git+https://github.com/<repo>``, where ``<repo>`` comes from the one setting
  ``[project.urls] Repository`` in pyproject.toml. A fork edits that line and runs make normalize.

Normalising is idempotent. Only the standard library is used.

Nothing is lost by a failure: the new text is written to a temporary file in the notebook's folder
and moved over the old file in one step (``os.replace``), so a full disk or an interrupted run
leaves the old notebook whole. A notebook that cannot be normalised (not JSON, not UTF-8, or a
cell holding text that cannot be stored as UTF-8, such as the JSON escape of a lone surrogate
``"\\ud800"``) is left untouched, and the error names the file and the cell.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

CHECK_OUTPUT_MARKER = "# NBVAL_CHECK_OUTPUT"
KEPT_CELL_METADATA = ("tags", "jupyter", "cellView", "ctlkit")
KEPT_JUPYTER_METADATA = ("source_hidden", "outputs_hidden")
NOTEBOOK_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
CELL_ID_RE = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")
# mimetypes that Jupyter stores as lists of lines besides text/* (nbformat.v4.rwbase)
SPLIT_MIMES = ("application/javascript", "image/svg+xml")
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
REPOSITORY_RE = re.compile(r'^Repository\s*=\s*"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?"\s*$',
                           re.M)
BADGE_RE = re.compile(r"https://colab\.research\.google\.com/github/[^)\s\"'<>]+?\.ipynb")
INSTALL_RE = re.compile(r"ctlkit @ git\+https://github\.com/[\w.-]+/[\w.-]+")


def kit_repository(pyproject: Path = PYPROJECT) -> str:
    """``owner/name`` of the kit's GitHub repository, from ``[project.urls] Repository``."""
    m = REPOSITORY_RE.search(pyproject.read_text(encoding="utf-8"))
    if not m:
        raise ValueError(f"{pyproject}: [project.urls] needs a line "
                         f'Repository = "https://github.com/OWNER/NAME"')
    return m.group(1)


def stamp(source: str, cell_type: str, repo: str, name: str, folder: str = "notebooks") -> str:
    """``source`` with the Colab badge (markdown) and the kit's install URL (any cell) pointing at
    ``repo`` and, for the badge, at the notebook's own file ``folder/name``."""
    if cell_type == "markdown":
        source = BADGE_RE.sub(
            f"https://colab.research.google.com/github/{repo}/blob/main/{folder}/{name}", source)
    return INSTALL_RE.sub(f"ctlkit @ git+https://github.com/{repo}", source)


def _text(value) -> str:
    """A source or output field as one string (files store them as lists of lines)."""
    return "".join(value) if isinstance(value, list) else (value or "")


def _lines(value) -> list[str]:
    """The stored form of a multi-line string: a list of lines, each keeping its newline."""
    return _text(value).splitlines(True)


def _cell_metadata(metadata: dict) -> dict:
    kept = {}
    for key in KEPT_CELL_METADATA:
        if key not in metadata:
            continue
        value = metadata[key]
        if key == "jupyter" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k in KEPT_JUPYTER_METADATA}
        if value in ({}, [], None):
            continue
        kept[key] = value
    return kept


def _output(output: dict) -> dict:
    output = {k: v for k, v in output.items() if k != "transient"}
    if output.get("output_type") == "stream":
        output["text"] = _lines(output.get("text"))
    data = output.get("data")
    if isinstance(data, dict):
        output["data"] = {
            key: _lines(value)
            if isinstance(value, (str, list)) and (key.startswith("text/") or key in SPLIT_MIMES)
            else value
            for key, value in data.items()
        }
    return output


def _new_id(index: int, source: str, taken: set[str]) -> str:
    salt = 0
    while True:
        seed = f"{index}\n{salt}\n{source}" if salt else f"{index}\n{source}"
        cell_id = hashlib.sha1(seed.encode("utf-8")).hexdigest()[:8]
        if cell_id not in taken:
            return cell_id
        salt += 1


def normalize(nb: dict, repo: str | None = None, name: str | None = None,
              folder: str = "notebooks") -> dict:
    """Return the normalised form of a notebook given as parsed JSON (the input is not modified).
    With ``repo`` and ``name`` (the notebook's file name, in the repository folder ``folder``), also
    stamp badge and install URL."""
    if nb.get("nbformat") != 4:
        raise ValueError(f"only nbformat 4 notebooks are supported (found {nb.get('nbformat')!r})")
    raw_cells = nb.get("cells", [])

    # Keep the first occurrence of every valid id; everything else gets a fresh, deterministic one.
    ids: list[str | None] = []
    taken: set[str] = set()
    for cell in raw_cells:
        cell_id = cell.get("id")
        if isinstance(cell_id, str) and CELL_ID_RE.match(cell_id) and cell_id not in taken:
            taken.add(cell_id)
            ids.append(cell_id)
        else:
            ids.append(None)

    cells = []
    for index, (cell, cell_id) in enumerate(zip(raw_cells, ids)):
        source = _text(cell.get("source"))
        if repo is not None and name is not None:
            source = stamp(source, cell.get("cell_type", "code"), repo, name, folder)
        if cell_id is None:
            cell_id = _new_id(index, source, taken)
            taken.add(cell_id)
        cell_type = cell.get("cell_type", "code")
        out = {
            "cell_type": cell_type,
            "id": cell_id,
            "metadata": _cell_metadata(cell.get("metadata") or {}),
            "source": _lines(source),
        }
        if cell_type == "code":
            if CHECK_OUTPUT_MARKER in source:
                out["execution_count"] = cell.get("execution_count")
                out["outputs"] = [_output(o) for o in cell.get("outputs") or []]
            else:
                out["execution_count"] = None
                out["outputs"] = []
        elif cell.get("attachments"):  # images pasted into markdown cells live here
            out["attachments"] = cell["attachments"]
        cells.append(out)

    return {
        "cells": cells,
        "metadata": json.loads(json.dumps(NOTEBOOK_METADATA)),
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dumps(nb: dict) -> str:
    """Serialise like Jupyter (nbformat.v4.nbjson) does, with a trailing newline."""
    return json.dumps(nb, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False) + "\n"


def normalize_text(text: str, repo: str | None = None, name: str | None = None) -> str:
    return dumps(normalize(json.loads(text), repo, name))


def unencodable_part(nb: dict) -> str:
    """Where a normalised notebook holds text that UTF-8 cannot store (a lone surrogate):
    "cell 3 (code, id 'ab12cd34')", or "the notebook's metadata"."""
    for index, cell in enumerate(nb.get("cells", [])):
        try:
            dumps(cell).encode("utf-8")
        except UnicodeEncodeError:
            return f"cell {index} ({cell.get('cell_type')}, id {cell.get('id')!r})"
    return "the notebook's metadata"


def encode(nb: dict) -> bytes:
    """The stored bytes of a normalised notebook; ValueError naming the cell that UTF-8 cannot hold."""
    try:
        return dumps(nb).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{unencodable_part(nb)} holds text that UTF-8 cannot store "
                         f"({exc.reason}: {exc.object[exc.start:exc.end]!r}, for example the JSON "
                         f"escape of a lone surrogate); fix that cell in an editor") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` in one step: the old file stays whole on any failure."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(OSError):      # keep the notebook's permissions
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def repo_folder(path: Path) -> str:
    """The folder of a notebook as the repository names it, for its badge: ``notebooks`` or
    ``notebooks/zh`` (everything from the last ``notebooks`` part of the path on)."""
    parts = path.resolve().parent.parts
    if "notebooks" not in parts:
        return "notebooks"
    last = len(parts) - 1 - parts[::-1].index("notebooks")
    return "/".join(parts[last:])


def find_notebooks(paths) -> list[Path]:
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            found += [
                p for p in path.rglob("*.ipynb")
                if ".ipynb_checkpoints" not in p.parts
                and "runs" not in p.relative_to(path).parts   # executed copies the kit's tools write
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            ]
        elif path.suffix == ".ipynb" and path.is_file():
            found.append(path)
        elif not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
    return sorted(set(found))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="notebooks or folders to search for *.ipynb")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a notebook is not normalised")
    args = parser.parse_args(argv)

    try:
        notebooks = find_notebooks(args.paths)
    except FileNotFoundError as exc:
        print(f"nbnorm: {exc}", file=sys.stderr)
        return 2

    try:
        repo = kit_repository()
    except (OSError, ValueError) as exc:
        print(f"nbnorm: {exc}", file=sys.stderr)
        return 2
    changed, broken = [], []
    for path in notebooks:
        try:
            old = path.read_bytes()
            # JSONDecodeError and UnicodeDecodeError are ValueErrors
            new = encode(normalize(json.loads(old.decode("utf-8")), repo, path.name, repo_folder(path)))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            broken.append(f"cannot normalise {path} (left as it was): {exc}")
            continue
        if new != old:
            changed.append(path)
            if not args.check:
                try:
                    write_atomic(path, new)
                except OSError as exc:
                    broken.append(f"cannot write {path} (left as it was): {exc}")
                    changed.remove(path)

    for line in broken:
        print(f"nbnorm: {line}", file=sys.stderr)
    if args.check:
        if changed:
            print("These notebooks are not normalised:", file=sys.stderr)
            for path in changed:
                print(f"  {path}", file=sys.stderr)
            print("run: make normalize", file=sys.stderr)
            return 1
        if not broken:
            print(f"nbnorm: {len(notebooks)} notebook(s) normalised")
    else:
        for path in changed:
            print(f"normalised {path}")
    return 2 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
