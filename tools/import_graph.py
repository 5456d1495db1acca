"""The import graph between ctlkit's top-level units: its modules, and its subpackages each as one.

    python tools/import_graph.py            # nodes, edges, every edge, and any cycle
    python tools/import_graph.py --check    # exit 1 if there is a cycle

Read from the source with ``ast`` (nothing is imported), so it runs without TensorFlow. An import
inside a subpackage that stays in it is not an edge; one that leaves it is an edge of the
subpackage. ``tests/test_import_graph.py`` keeps the graph free of cycles.
"""
from __future__ import annotations

import argparse
import ast
import pathlib
import sys

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "ctlkit"


def graph(package: pathlib.Path = PACKAGE) -> tuple:
    """(nodes, edges): the top-level units, and the (importer, imported) pairs between two of them."""
    units = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    edges = set()
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        unit = parts[0]
        package_path = list(parts[:-1])            # what `from .` means in this file
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:                         # from .x import y, from .. import z
                anchor = package_path[:len(package_path) - node.level + 1]
                module = anchor + (node.module.split(".") if node.module else [])
            elif (node.module or "").split(".")[0] == "ctlkit":
                module = node.module.split(".")[1:]
            else:
                continue
            targets = [module] if module else [[a.name] for a in node.names]   # from . import a, b
            for target in targets:
                if target[0] in units and target[0] != unit:
                    edges.add((unit, target[0]))
    return units, edges


def cycles(nodes: set, edges: set) -> list:
    """Every cycle's nodes, found by depth-first search (empty when the graph is acyclic)."""
    out, state, stack = [], {}, []
    succ = {n: sorted(b for a, b in edges if a == n) for n in nodes}

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in succ[n]:
            if state.get(m) == "open":
                out.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = "done"

    for n in sorted(nodes):
        if n not in state:
            visit(n)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the graph has a cycle")
    args = parser.parse_args(argv)
    nodes, edges = graph()
    found = cycles(nodes, edges)
    print(f"{len(nodes)} nodes, {len(edges)} edges, {len(found)} cycles")
    if not args.check:
        for a, b in sorted(edges):
            print(f"  {a} -> {b}")
    for c in found:
        print("cycle: " + " -> ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
