"""Every random choice in a notebook follows the run's seed (CTLKIT_SEED, read by ctlkit.setup()).

A notebook gets its seed from ``rt = ctlkit.setup()`` and derives every other seed from it
(``SEED = rt.seed``, then ``SEED + 1``, ...). A literal seed anywhere in a code cell would pin that
choice for every run, so ``make sweep`` could not vary it: this test finds them. A seed that must
stay fixed for the lesson (two calls with the same seed, to show they agree) says so with a
``# fixed seed: <reason>`` comment on its line.
"""
import ast
import json
import pathlib
import re

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SEEDING_CALLS = {"set_random_seed", "default_rng", "from_seed", "RandomState", "seed",
                 "setup", "seed_everything"}
ALLOWED = re.compile(r"#\s*fixed seed:\s*\S")


def _is_literal(node) -> bool:
    """A number, or a list/tuple of numbers (stateless seeds such as [0, 1])."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(_is_literal(e) for e in node.elts)
    return False


def _name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def literal_seeds(source: str):
    """(line number, what) for every literal seed in a cell's Python source."""
    lines = [("" if ln.lstrip().startswith(("%", "!")) else ln) for ln in source.splitlines()]
    tree = ast.parse("\n".join(lines))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and "seed" in kw.arg and _is_literal(kw.value):
                    found.append((kw.value.lineno, f"{kw.arg}={ast.unparse(kw.value)}"))
            if _name(node.func) in SEEDING_CALLS and node.args and _is_literal(node.args[0]):
                found.append((node.lineno, f"{_name(node.func)}({ast.unparse(node.args[0])})"))
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            found += [(d.lineno, f"default {a.arg}={ast.unparse(d)}")
                      for a, d in pairs if "seed" in a.arg and _is_literal(d)]
    return [(n, what) for n, what in found if not ALLOWED.search(lines[n - 1])]


def _code_cells(path):
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            yield i, "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_seed_in_a_notebook_derives_from_the_run_seed(path):
    bad = [f"cell {i} line {n}: {what}" for i, src in _code_cells(path)
           for n, what in literal_seeds(src)]
    assert not bad, (f"{path.name} pins seeds that CTLKIT_SEED cannot change: {bad}. Derive them "
                     f"from the run's seed (SEED = rt.seed; SEED + 1, ...) or, if the lesson needs "
                     f"that very seed, add '# fixed seed: <reason>' to the line")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_takes_its_seed_from_setup(path):
    calls = [node for _, src in _code_cells(path) for node in ast.walk(ast.parse(
        "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "ctlkit.setup"]
    assert calls, f"{path.name} never calls ctlkit.setup()"
    first = calls[0]
    assert not first.args and all(kw.arg != "seed" for kw in first.keywords), (
        f"{path.name}: its first ctlkit.setup() call ({ast.unparse(first)}) passes a seed, so "
        f"CTLKIT_SEED never reaches it; call ctlkit.setup() and use rt.seed")


@pytest.mark.parametrize("source, expected", [
    ("keras.utils.set_random_seed(0)", ["set_random_seed(0)"]),
    ("rng = np.random.default_rng(3)", ["default_rng(3)"]),
    ("g = tf.random.Generator.from_seed(1)", ["from_seed(1)"]),
    ("x = tf.random.stateless_uniform([2], seed=[0, 1])", ["seed=[0, 1]"]),
    ("ds.shuffle(10, seed=0)", ["seed=0"]),
    ("env.action_space.seed(0)", ["seed(0)"]),
    ("def build(width, seed=1):\n    pass", ["default seed=1"]),
    ("rt = ctlkit.setup(seed=0)", ["seed=0", "setup(0)"][:1]),
    ("keras.utils.set_random_seed(SEED + 1)", []),
    ("rng = np.random.default_rng(SEED)", []),
    ("x = tf.random.stateless_uniform([2], seed=[SEED, 1])", []),
    ("ctlkit.setup(seed=7)   # fixed seed: the same seed twice gives the same numbers", []),
    ("%timeit f()\nkeras.utils.set_random_seed(2)", ["set_random_seed(2)"]),
])
def test_the_seed_finder_finds_literal_seeds_and_only_those(source, expected):
    assert [what for _, what in literal_seeds(source)] == expected
