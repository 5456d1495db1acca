"""What installing the kit does to a Colab runtime, and the dependency floors.

Colab's packages are the pins in stacks/colab.txt (and stacks/oldest.txt, an older Colab). pip
resolves, without installing anything (``--dry-run --ignore-installed --report``), first Colab's
own copies of the packages the kit uses and then the kit itself, both under Colab's pins and with
Colab's Python (the one the Makefile builds that stack with: environment markers are evaluated by
the interpreter that runs pip, so no other Python can stand in). The kit may add only itself: no
package changes version (the pins would make that a resolution error) and no second Jupyter
arrives. Needs the package index (CI has it).
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PINNED = sorted(p.stem for p in (ROOT / "stacks").glob("*.txt"))
# A second Jupyter: none of these may arrive with the kit (Colab brings its own frontend).
JUPYTER = {"jupyterlab", "jupyterlab-server", "jupyter-lsp", "notebook", "nbclassic",
           "jupyter-server", "voila", "nbval", "pytest", "playwright"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S).group(1)
    return re.findall(r'^\s*"([^"]+)"', block, re.M)


def _python(version: str) -> str:
    """An interpreter of ``version`` (e.g. '3.13'), found as the Makefile finds it."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for candidate in [shutil.which(f"python{version}"),
                      *sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}")),
                      f"/usr/bin/python{version}"]:
        if candidate and subprocess.run([candidate, "-m", "pip", "--version"],
                                        capture_output=True).returncode == 0:
            return candidate
    pytest.fail(f"no Python {version} with pip here: the stack needs it (see the Makefile)")


def _resolve(stack: str, targets: list[str], report: Path) -> dict:
    pins = ROOT / "stacks" / f"{stack}.txt"
    python = _python(re.search(r"^# python: *(\S+)", pins.read_text(), re.M).group(1))
    cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--disable-pip-version-check", "--report", str(report), "-c", str(pins), *targets]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, f"pip could not resolve {targets} on {stack}:\n{out.stderr[-3000:]}"
    return {_norm(i["metadata"]["name"]): i["metadata"]["version"]
            for i in json.loads(report.read_text())["install"]}


def test_runtime_dependencies_are_only_what_the_kit_imports():
    names = {_norm(re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0]) for r in _requirements()}
    assert names == {"tensorflow", "keras", "numpy", "matplotlib", "pillow", "ipython",
                     "ipywidgets", "scikit-learn", "scikit-image", "tensorboard", "gymnasium"}
    assert not names & JUPYTER


def test_the_wheel_holds_every_module_of_the_kit(tmp_path):
    # Colab installs the kit from its wheel, where only the listed packages exist: a folder
    # left out of [tool.setuptools] packages (ctlkit/exercises once was) breaks `import ctlkit`
    # there while an editable install here hides it.
    import sys
    import zipfile
    source = tmp_path / "source"                 # a clean copy: no build/ left from earlier
    shutil.copytree(ROOT / "ctlkit", source / "ctlkit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                          str(tmp_path), str(source)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("ctlkit-*.whl")
    inside = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ctlkit").rglob("*.py")}
    assert modules - inside == set(), f"missing from the wheel: {sorted(modules - inside)}"


@pytest.mark.parametrize("stack", PINNED)
def test_floors_are_the_oldest_tested_versions(stack):
    """Every floor in pyproject.toml is met by each pinned stack, and equals the oldest stack's."""
    pins = {_norm(line.split("==")[0]): line.split("==")[1].strip()
            for line in (ROOT / "stacks" / f"{stack}.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    for req in _requirements():
        name, floor = re.match(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", req).groups()
        have = tuple(int(p) for p in re.findall(r"\d+", pins[_norm(name)])[:3])
        want = tuple(int(p) for p in floor.split("."))
        assert have[:len(want)] >= want, f"{stack} has {name} {pins[_norm(name)]} < {floor}"
        if stack == "oldest":
            assert have[:len(want)] == want, f"floor {name}>={floor} but oldest tests {have}"


@pytest.mark.parametrize("stack", PINNED)
def test_installing_the_kit_on_colab_adds_only_the_kit(stack, tmp_path):
    names = [re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] for r in _requirements()]
    with ThreadPoolExecutor(2) as pool:                 # two resolutions at once: ~20 s, not 40
        colab = pool.submit(_resolve, stack, names, tmp_path / "colab.json")
        kit = pool.submit(_resolve, stack, [str(ROOT)], tmp_path / "kit.json")
        colab, kit = colab.result(), kit.result()
    added = {n: v for n, v in kit.items() if n not in colab}
    changed = {n: (colab[n], v) for n, v in kit.items() if n in colab and colab[n] != v}
    assert added == {"ctlkit": kit["ctlkit"]}, f"the kit would add {added}"
    assert not changed, f"the kit would change {changed}"
    assert not set(kit) & JUPYTER - set(colab), "a second Jupyter"
