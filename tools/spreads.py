#!/usr/bin/env python3
"""The spread over seeds of every number the notebooks print, from the executed copies a sweep kept.

    make sweep SEEDS="0 1 2 3 4" KEEP=1            # executed notebooks in build/sweep/quick-seed<N>/
    python3 tools/spreads.py                       # every notebook, quick mode, as a Markdown table
    python3 tools/spreads.py --mode full 07 09     # some notebooks, full mode

For each line a code cell prints, the numbers in it are replaced by slots (``#1``, ``#2``...) and the
line is matched across seeds by its cell and its words; each slot gets the smallest and the largest
value seen. A bar an assert sets on a printed value is read against that range: the margin is
the distance from the bar to the worst seed. Lines whose words differ between seeds (a verdict
that flips) are listed apart, with the seeds of each variant. Only the standard library is used.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:e[-+]?\d+)?%?", re.IGNORECASE)
NOISE = re.compile(r"^(WARNING|I0000|E0000|W0000)|cuda|absl::|^\s*$")


def printed_lines(executed: dict) -> list[tuple[int, str]]:
    """(cell index, line) for every line of text the code cells printed (streams and results)."""
    out = []
    for index, cell in enumerate(executed.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                text = o.get("text", "")
            elif o.get("output_type") in ("execute_result", "display_data"):
                text = o.get("data", {}).get("text/plain", "")
            else:
                continue
            text = "".join(text) if isinstance(text, list) else text
            out += [(index, line.rstrip()) for line in text.splitlines() if not NOISE.search(line)]
    return out


def template(line: str) -> tuple[str, list[float]]:
    """The line with its numbers replaced by #1, #2...; and the numbers."""
    values = []

    def slot(m):
        text = m.group(0)
        value = float(text.rstrip("%"))
        values.append(value)
        return f"#{len(values)}"
    return " ".join(NUMBER.sub(slot, line).split()), values   # padding that moves with a number


def spreads(runs: dict[int, dict]) -> tuple[list, list]:
    """From {seed: executed notebook}: rows (cell, template, [(min, max)...], seeds seen) for lines
    every seed printed alike, and the lines some seeds printed and others did not."""
    per_seed = {}
    for seed, executed in runs.items():
        seen = collections.Counter()
        keyed = {}
        for cell, line in printed_lines(executed):
            t, values = template(line)
            seen[(cell, t)] += 1
            keyed[(cell, t, seen[(cell, t)])] = values
        per_seed[seed] = keyed
    keys = sorted({k for keyed in per_seed.values() for k in keyed}, key=lambda k: (k[0], k[2], k[1]))
    rows, apart = [], []
    for key in keys:
        having = [s for s in runs if key in per_seed[s]]
        values = [per_seed[s][key] for s in having]
        if len(having) < len(runs):
            apart.append((key[0], key[1], sorted(having)))
            continue
        if not values[0]:
            continue                               # a line with no number: nothing to spread
        ranges = [(min(v[i] for v in values), max(v[i] for v in values)) for i in range(len(values[0]))]
        if all(lo == hi for lo, hi in ranges):
            continue                               # the same numbers under every seed
        rows.append((key[0], key[1], ranges, len(having)))
    return rows, apart


def _g(x: float) -> str:
    return f"{x:.4g}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("numbers", nargs="*", help="notebook numbers, e.g. 07 13 (default: all)")
    parser.add_argument("--mode", choices=("quick", "full"), default="quick")
    parser.add_argument("--dir", type=Path, default=ROOT / "build" / "sweep",
                        help="where the sweep kept its executed copies (build/sweep)")
    args = parser.parse_args(argv)
    seed_dirs = {int(m.group(1)): d for d in args.dir.glob(f"{args.mode}-seed*")
                 if (m := re.fullmatch(rf"{args.mode}-seed(\d+)", d.name))}
    if not seed_dirs:
        print(f"no executed copies in {args.dir}/{args.mode}-seed<N>/: run make sweep KEEP=1 "
              f"SEEDS=\"0 1 2\"{' MODE=full' if args.mode == 'full' else ''} first", file=sys.stderr)
        return 1
    names = sorted({p.stem for d in seed_dirs.values() for p in d.glob("[0-9][0-9]_*.ipynb")})
    if args.numbers:
        names = [n for n in names if n[:2] in args.numbers]
    for name in names:
        runs = {}
        for seed, d in sorted(seed_dirs.items()):
            path = d / f"{name}.ipynb"
            if path.exists():
                runs[seed] = json.loads(path.read_text(encoding="utf-8"))
        rows, apart = spreads(runs)
        print(f"\n## {name}: {len(runs)} seeds ({', '.join(map(str, runs))}), {args.mode} mode\n")
        print("| cell | printed line (#k: the k-th number) | range over the seeds |")
        print("|---|---|---|")
        for cell, t, ranges, _ in rows:
            spans = "; ".join(f"#{i + 1} {_g(lo)}..{_g(hi)}" for i, (lo, hi) in enumerate(ranges)
                              if lo != hi)
            print(f"| {cell} | `{t.strip()[:110]}` | {spans} |")
        for cell, t, having in apart:
            print(f"| {cell} | `{t.strip()[:110]}` | printed under seeds {having} only |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
