#!/usr/bin/env python3
"""The Chinese edition, notebooks/zh/NN_*.ipynb, kept in step with the English notebooks.

    python3 tools/zh.py check            # exit 1 naming every cell that is missing, stale or different
    python3 tools/zh.py sync [NN ...]    # (re)build notebooks/zh/ from notebooks/, keeping translations
    python3 tools/zh.py todo NN          # the markdown cells of notebook NN that need a translation (JSON)
    python3 tools/zh.py apply FILE.json  # put translations in (FILE: {"notebook": "NN",
                                         #   "cells": [{"en": HASH, "zh": TEXT}, ...]})

The rules (docs/zh.md says why):

- a zh notebook has the English notebook's cells, in the same order and of the same types;
- a code cell is token for token the English one: Python's tokenizer reads both, and the two token
  lists must be equal once comments and blank lines are dropped, so a comment may be translated and
  nothing else may change (a ``%%writefile`` cell: its first line exactly, its body as Python);
- a markdown cell records, in its metadata ``ctlkit.en``, the hash of the English text it translates
  (:func:`en_hash`). When the English cell changes, the hash no longer matches and ``check`` names the
  stale translation with the English text it should now say.

``sync`` never drops a translation silently: a markdown cell whose English changed is kept as the
cell's ``ctlkit.previous`` (shown by ``todo``) until a new translation replaces it, and the cell's
text is the English one until then, so the notebook stays readable and runnable. Only the standard
library is used; files are written atomically (tools/nbnorm.py's writer).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbnorm  # noqa: E402  (tools/ is not a package)

EN_DIR = ROOT / "notebooks"
ZH_DIR = EN_DIR / "zh"
SKIPPED_TOKENS = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                  tokenize.ENCODING, tokenize.ENDMARKER)


def en_hash(text: str) -> str:
    """The hash a translation records: 16 hex digits of SHA-256 of the English text, trailing
    whitespace of each line ignored (an editor's stray space does not make a translation stale)."""
    canonical = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def code_tokens(source: str) -> list[tuple[int, str]]:
    """The tokens that make a code cell's meaning: comments, blank lines and indentation tokens
    dropped (indentation still counts: it changes the INDENT/DEDENT positions of the others, and
    the tokens' strings carry what follows). IPython line magics and shell lines (``%``, ``!``) are
    compared as whole lines; a ``%%`` cell magic by its first line and a body read as Python."""
    lines = source.splitlines(True)
    if lines and lines[0].lstrip().startswith("%%"):
        return [(-1, lines[0].strip())] + code_tokens("".join(lines[1:]))
    python, magics = [], []
    for number, line in enumerate(lines):
        if re.match(r"\s*[%!]", line):
            magics.append((-2, f"{number}:{line.strip()}"))
            python.append("\n")
        else:
            python.append(line)
    tokens = []
    for token in tokenize.generate_tokens(io.StringIO("".join(python)).readline):
        if token.type in SKIPPED_TOKENS:
            if token.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE):
                tokens.append((token.type, ""))
            continue
        tokens.append((token.type, token.string))
    return magics + tokens


def pairs() -> list[tuple[Path, Path]]:
    """(English notebook, its zh path) for every numbered English notebook."""
    return [(en, ZH_DIR / en.name) for en in sorted(EN_DIR.glob("[0-9][0-9]_*.ipynb"))]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(path: Path, nb: dict) -> None:
    repo = nbnorm.kit_repository()
    path.parent.mkdir(parents=True, exist_ok=True)
    nbnorm.write_atomic(path, nbnorm.encode(nbnorm.normalize(nb, repo, path.name, folder="notebooks/zh")))


def problems(en_path: Path, zh_path: Path) -> list[str]:
    """Everything that makes ``zh_path`` not a faithful translation of ``en_path``, one line each."""
    name = f"zh/{zh_path.name}"
    if not zh_path.exists():
        return [f"{name}: missing (run: python3 tools/zh.py sync {en_path.name[:2]})"]
    en_cells, zh_cells = _load(en_path)["cells"], _load(zh_path)["cells"]
    if [c["cell_type"] for c in en_cells] != [c["cell_type"] for c in zh_cells]:
        return [f"{name}: its cells are not the English notebook's ({len(zh_cells)} cells vs "
                f"{len(en_cells)}, or a type differs); run: python3 tools/zh.py sync {en_path.name[:2]}"]
    found = []
    for index, (en, zh) in enumerate(zip(en_cells, zh_cells)):
        en_text, zh_text = _source(en), _source(zh)
        if en["cell_type"] == "code":
            try:
                same = code_tokens(en_text) == code_tokens(zh_text)
            except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
                found.append(f"{name} cell {index}: code that Python cannot tokenize ({exc})")
                continue
            if not same:
                found.append(f"{name} cell {index}: the code differs from the English cell beyond "
                             f"comments; run: python3 tools/zh.py sync {en_path.name[:2]}")
            continue
        recorded = (zh.get("metadata", {}).get("ctlkit") or {}).get("en")
        wanted = en_hash(en_text)
        first_line = en_text.strip().splitlines()[0][:70] if en_text.strip() else ""
        if recorded is None:
            found.append(f"{name} cell {index}: not translated yet (English: {first_line!r})")
        elif recorded != wanted:
            found.append(f"{name} cell {index}: stale, it translates an older English text; the English "
                         f"cell now begins {first_line!r} (python3 tools/zh.py todo {en_path.name[:2]})")
        elif zh_text.strip() == en_text.strip() and re.search(r"[A-Za-z]{4,}\s+[a-z]{3,}", en_text) \
                and not re.search(r"[\u4e00-\u9fff]", zh_text):
            found.append(f"{name} cell {index}: marked as translated but holds the English text")
    return found


def sync(en_path: Path, zh_path: Path) -> int:
    """Rebuild ``zh_path`` from ``en_path``; return how many markdown cells still need a translation."""
    old = _load(zh_path)["cells"] if zh_path.exists() else []
    by_hash = {}
    by_tokens = {}
    for cell in old:
        meta = cell.get("metadata", {}).get("ctlkit") or {}
        if cell["cell_type"] == "markdown" and meta.get("en"):
            by_hash.setdefault(meta["en"], cell)
        elif cell["cell_type"] == "code":
            try:
                by_tokens.setdefault(repr(code_tokens(_source(cell))), cell)
            except (tokenize.TokenError, IndentationError, SyntaxError):
                pass
    en_cells = _load(en_path)["cells"]
    cells, todo = [], 0
    for index, en in enumerate(en_cells):
        text = _source(en)
        if en["cell_type"] == "code":
            kept = by_tokens.get(repr(code_tokens(text)))
            cells.append(dict(en, source=_source(kept) if kept else text))
            continue
        kept = by_hash.get(en_hash(text))
        if kept is not None:
            cells.append(dict(en, source=_source(kept), metadata={"ctlkit": {"en": en_hash(text)}}))
            continue
        todo += 1
        meta = {}
        # the translation that stood here before the English changed, kept until replaced
        same_place = old[index] if index < len(old) and old[index]["cell_type"] == "markdown" else None
        if same_place is not None:
            previous = (same_place.get("metadata", {}).get("ctlkit") or {})
            if previous.get("en"):
                meta["previous"] = _source(same_place)
            elif previous.get("previous"):
                meta["previous"] = previous["previous"]
        cells.append(dict(en, source=text, metadata={"ctlkit": meta} if meta else {}))
    _write(zh_path, {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    return todo


def todo(en_path: Path, zh_path: Path) -> list[dict]:
    """The markdown cells of the zh notebook that need a translation: index, hash, English text and
    the previous translation if there was one."""
    en_cells = _load(en_path)["cells"]
    zh_cells = _load(zh_path)["cells"] if zh_path.exists() else []
    out = []
    for index, en in enumerate(en_cells):
        if en["cell_type"] != "markdown":
            continue
        zh = zh_cells[index] if index < len(zh_cells) else {}
        meta = zh.get("metadata", {}).get("ctlkit") or {}
        if meta.get("en") != en_hash(_source(en)):
            item = {"index": index, "en": en_hash(_source(en)), "text": _source(en)}
            if meta.get("previous"):
                item["previous"] = meta["previous"]
            elif meta.get("en"):                 # a stale translation: still the cell's text
                item["previous"] = _source(zh)
            out.append(item)
    return out


def apply(data: dict) -> tuple[Path, int]:
    """Write the translations in ``data`` into their zh notebook (synced first); return the path and
    the number of cells written. A hash that names no English cell of the notebook is an error."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "notebook" not in data:
        raise ValueError('a translations file is '
                         '{"notebook": "NN", "cells": [{"en": HASH, "zh": TEXT}, ...]}')
    matches = [p for p in pairs() if p[0].name.startswith(str(data["notebook"])[:2])]
    if len(matches) != 1:
        raise ValueError(f"notebook {data['notebook']!r} names no English notebook "
                         f"(give its number, e.g. '03')")
    en_path, zh_path = matches[0]
    en_cells = _load(en_path)["cells"]
    wanted = {en_hash(_source(c)): i for i, c in enumerate(en_cells) if c["cell_type"] == "markdown"}
    for item in data["cells"]:                  # every item checked before anything is written
        if not isinstance(item, dict) or item.get("en") not in wanted:
            raise ValueError(f"{zh_path.name}: hash {item.get('en') if isinstance(item, dict) else item!r} "
                             f"is no English markdown cell's (run todo again: the English text may "
                             f"have changed)")
        if not isinstance(item.get("zh"), str) or not item["zh"].strip():
            raise ValueError(f"{zh_path.name}: the translation of {item['en']} is empty")
    sync(en_path, zh_path)
    nb = _load(zh_path)
    written = 0
    for item in data["cells"]:
        index = wanted[item["en"]]
        nb["cells"][index]["source"] = item["zh"]
        nb["cells"][index]["metadata"] = {"ctlkit": {"en": item["en"]}}
        written += 1
    _write(zh_path, nb)
    return zh_path, written


def _select(numbers: list[str]) -> list[tuple[Path, Path]]:
    chosen = [p for p in pairs() if not numbers or p[0].name[:2] in {n.zfill(2)[:2] for n in numbers}]
    if numbers and not chosen:
        raise SystemExit(f"zh: no English notebook numbered {', '.join(numbers)}")
    return chosen


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="exit 1 naming every missing, stale or different cell")
    p_sync = sub.add_parser("sync", help="rebuild zh notebooks from the English ones, keeping translations")
    p_sync.add_argument("numbers", nargs="*", help="notebook numbers (default: all)")
    p_todo = sub.add_parser("todo", help="print the cells of one notebook that need a translation, as JSON")
    p_todo.add_argument("number")
    p_apply = sub.add_parser("apply", help="write the translations of a JSON file into its notebook")
    p_apply.add_argument("file", type=Path)
    args = parser.parse_args(argv)

    if args.command == "check":
        found = [line for en, zh in pairs() for line in problems(en, zh)]
        print("\n".join(found))
        print(f"zh: {len(pairs())} notebooks, {len(found)} problem(s)")
        return 1 if found else 0
    if args.command == "sync":
        for en, zh in _select(args.numbers):
            left = sync(en, zh)
            print(f"synced {zh.relative_to(ROOT)}: {left} markdown cell(s) to translate")
        return 0
    if args.command == "todo":
        (en, zh), = _select([args.number])
        print(json.dumps(todo(en, zh), ensure_ascii=False, indent=1))
        return 0
    try:
        path, written = apply(json.loads(args.file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        print(f"zh apply: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {written} translation(s) into {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
