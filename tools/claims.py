#!/usr/bin/env python3
"""The claims list: every sentence a notebook says with a universal word, and what backs it.

    python3 tools/claims.py check [NN ...]   # exit 1 naming each sentence with no line, each stale line
    python3 tools/claims.py todo NN          # the lines notebook NN still needs, evidence left blank

A sentence that says "any", "every", "only", "never", "cannot", "faster", "on CPUs"... claims a scope.
The scope must be shown where the sentence stands, or the sentence narrowed (CONTRIBUTING.md, "No
sentence claims more than its cell shows"). `docs/claims/NN.md` keeps one line per such sentence of
notebook NN (its markdown, its code comments, and the text its code prints or raises):

    - <the sentence, whitespace collapsed> || <kind>: <evidence>

The kinds, each checked here where it can be:

    assert: CODE    an assert of the notebook shows it; CODE is text of that assert line (checked)
    cell: CODE      a cell shows it by what it prints or raises; CODE is text of that cell (checked)
    source: PATH[::NAME]  installed TensorFlow/Keras source, PATH from site-packages (the file must
                    exist, NAME must occur in it: checked on the stack that runs the test)
    test: FILE::NAME  a test of this repository (FILE must exist and hold NAME: checked)
    scope: WHY      the word claims nothing past what the sentence names (a count, "all four"; an
                    instruction, "run every cell"; a definition); WHY says which

A sentence ends at ".", "!" or "?" before a capital; a paragraph, list item or blockquote is cut
into sentences whole. A comment after code is one unit with nothing else (it speaks of its own line);
comment lines of their own join the comment right above them when they start in its column.

Only the standard library is used. The English notebooks are listed; the Chinese ones translate them
and tools/zh.py keeps each translation tied to its English text.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import sysconfig
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CLAIMS = ROOT / "docs" / "claims"

UNIVERSAL = re.compile(
    r"\b(any|anything|anywhere|every|everything|everywhere|all|only|never|always|cannot|can't|"
    r"must|none|nothing|impossible|guarantee[sd]?|faster|slower|fastest|slowest|"
    r"on (?:a |any |every |all )?(?:CPU|GPU|TPU)s?)\b", re.IGNORECASE)
KINDS = ("assert", "cell", "source", "test", "scope")
SEP = " || "
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*_\"(\[>])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+|^\s*#{1,6}\s+|^\s*>\s*|^\s*\|")


def normal(text: str) -> str:
    """Whitespace collapsed: the form a sentence has in the list."""
    return " ".join(text.split())


def _sentences(paragraph: str) -> list[str]:
    return [normal(s) for s in _SENTENCE_END.split(normal(paragraph)) if s.strip()]


def _markdown_units(text: str) -> list[str]:
    """Paragraphs and list items (fenced code and HTML comments left out), then their sentences."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    units, current, fenced, in_quote = [], [], False, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            units.append(current)
            current = []
            continue
        if fenced:
            continue
        quoted = re.match(r"^\s*>\s?(.*)$", line)
        if quoted:                    # a blockquote: its lines join as a paragraph's do
            inner = quoted.group(1)
            if not inner.strip() or _LIST_ITEM.match(inner) or not in_quote:
                units.append(current)
                current = []
            if inner.strip():
                current.append(re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", inner))
            in_quote = True
            continue
        in_quote = False
        if not line.strip():
            units.append(current)
            current = []
        elif _LIST_ITEM.match(line):
            units.append(current)
            current = [re.sub(r"^\s*(?:[-*+]|\d+[.)]|>)\s+", "", line)]
        else:
            current.append(line)
    units.append(current)
    return [s for unit in units if unit for s in _sentences(" ".join(unit))]


def _python(source: str) -> str:
    """The cell as Python: IPython's magics and shell lines blanked (same line numbers)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def _comment_units(source: str) -> list[str]:
    blocks, current, last, last_col = [], [], -2, -1
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(_python(source)).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        text = tok.string.lstrip("#").strip()
        if text.startswith(("noqa", "type:", "NBVAL_", "@title", "fixed seed")):
            continue
        # A comment after code is about that code: it starts a new block, even right under another
        # one. A comment on a line of its own goes on the block above it when it starts in the same
        # column as the comment right above it (a block of such lines, or a trailing comment's
        # continuation aligned under it).
        own_line = tok.line.lstrip().startswith("#")
        continues = tok.start[0] == last + 1 and own_line and tok.start[1] == last_col
        if not continues and current:
            blocks.append(current)
            current = []
        current.append(text)
        last, last_col = tok.start[0], tok.start[1]
    if current:
        blocks.append(current)
    return [s for block in blocks for s in _sentences(" ".join(block))]


def _said_by_code(source: str) -> list[str]:
    """The text a cell prints, asserts with or raises: each literal as written in the cell."""
    code = _python(source)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    spoken = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            spoken += node.args
        elif isinstance(node, ast.Assert) and node.msg is not None:
            spoken.append(node.msg)
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            spoken += node.exc.args
    said = []
    for node in sorted(spoken, key=lambda n: (n.lineno, n.col_offset)):
        for part in ast.walk(node):
            if isinstance(part, (ast.JoinedStr, ast.Constant)) and (
                    isinstance(part, ast.JoinedStr) or isinstance(part.value, str)):
                segment = ast.get_source_segment(code, part)
                if segment:
                    said.append(normal(segment))
    # an f-string's constant parts are walked too: keep the outermost literal only
    return [s for s in dict.fromkeys(said) if not any(s != other and s in other for other in said)]


def flagged(path: Path) -> list[str]:
    """Every sentence of the notebook with a universal word, in the notebook's order, once each."""
    found = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            units = _markdown_units(source)
        elif cell["cell_type"] == "code":
            units = _comment_units(source) + _said_by_code(source)
        else:
            units = []
        found += [u for u in units if UNIVERSAL.search(u)]
    return list(dict.fromkeys(found))


def notebook(number: str) -> Path:
    matches = sorted(NOTEBOOKS.glob(f"{number}_*.ipynb"))
    if len(matches) != 1:
        raise SystemExit(f"no single notebook numbered {number!r} in {NOTEBOOKS} (give two digits, e.g. 07)")
    return matches[0]


def read_list(number: str) -> list[tuple[int, str, str, str]]:
    """(line number, sentence, kind, evidence) for each entry of docs/claims/NN.md."""
    path = CLAIMS / f"{number}.md"
    if not path.exists():
        return []
    entries = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("- "):
            continue
        sentence, _, evidence = line[2:].rpartition(SEP)
        kind, _, detail = evidence.partition(":")
        entries.append((i, normal(sentence), kind.strip(), detail.strip()))
    return entries


def _site_packages() -> list[Path]:
    paths = sysconfig.get_paths()
    return [Path(p) for p in dict.fromkeys([paths["purelib"], paths["platlib"]])]


def evidence_problem(path: Path, kind: str, detail: str) -> str | None:
    """Why this evidence does not hold, or None."""
    if kind not in KINDS:
        return f"kind {kind!r} is none of {', '.join(KINDS)}"
    if not detail:
        return f"'{kind}:' names no evidence"
    if kind in ("assert", "cell"):
        cells = ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                 if c["cell_type"] == "code"]
        code = detail.strip("`")
        lines = [line for cell in cells for line in cell.splitlines()]
        if kind == "assert" and not any(code in line and re.match(r"\s*assert\b", line) for line in lines):
            return f"no assert line of {path.name} contains {code!r}"
        if kind == "cell" and not any(code in cell for cell in cells):
            return f"no code cell of {path.name} contains {code!r}"
    elif kind == "source":
        file, _, name = detail.strip("`").partition("::")
        hits = [base / file for base in _site_packages() if (base / file).exists()]
        if not any((base / "keras").is_dir() for base in _site_packages()):
            return (f"this Python ({sys.executable}) has no Keras to read {file} in: run "
                    f"tools/claims.py with a stack's venv, e.g. .venv/bin/python tools/claims.py check")
        if not hits:
            return f"no installed file {file} (paths start at site-packages, e.g. keras/src/...)"
        if name and name not in hits[0].read_text(encoding="utf-8", errors="replace"):
            return f"{file} does not contain {name!r}"
    elif kind == "test":
        file, _, name = detail.strip("`").partition("::")
        if not (ROOT / file).exists() or (name and name not in (ROOT / file).read_text(encoding="utf-8")):
            return f"no test {detail} in this repository"
    return None


def problems(number: str, sources: bool = True) -> list[str]:
    path = notebook(number)
    wanted = flagged(path)
    entries = read_list(number)
    listed = {}
    out = []
    for line, sentence, kind, detail in entries:
        where = f"docs/claims/{number}.md:{line}"
        if sentence in listed:
            out.append(f"{where}: listed twice (also line {listed[sentence]})")
        listed[sentence] = line
        if sentence not in wanted:
            out.append(f"{where}: no sentence of {path.name} reads so any more: {sentence[:90]!r}")
            continue
        if kind == "source" and not sources:
            continue
        why = evidence_problem(path, kind, detail)
        if why:
            out.append(f"{where}: {why}")
    for sentence in wanted:
        if sentence not in listed:
            out.append(f"{path.name}: no line in docs/claims/{number}.md for: {sentence}")
    return out


def numbers() -> list[str]:
    return [p.name[:2] for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check")
    check.add_argument("numbers", nargs="*")
    todo = sub.add_parser("todo")
    todo.add_argument("number")
    args = parser.parse_args(argv)
    if args.command == "todo":
        listed = {s for _, s, _, _ in read_list(args.number)}
        for sentence in flagged(notebook(args.number)):
            if sentence not in listed:
                print(f"- {sentence}{SEP}")
        return 0
    found = [p for n in (args.numbers or numbers()) for p in problems(n)]
    print("\n".join(found) or "every flagged sentence has its line, and every line holds")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
