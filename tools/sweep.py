#!/usr/bin/env python3
"""Run the notebooks under several run seeds and say which cells broke under which seeds.

    python tools/sweep.py --seeds "1 2 3 4 5"                    # every notebook, quick mode
    python tools/sweep.py --seeds "1 2 3" --mode full notebooks/07_gan.ipynb
    python tools/sweep.py --seeds 1 --hog                        # with one core kept busy

``make sweep SEEDS="1 2 3 4 5" MODE=quick`` runs this in a stack's venv. Each seed is one nbval run
with ``CTLKIT_SEED=<seed>`` (``ctlkit.setup()`` reads it; every seed in a notebook derives from it)
and ``CTLKIT_QUICK`` set by the mode. ``--hog`` keeps one core busy with a spinning process for the
whole run: what a learner's laptop with a browser and a video call open looks like to the notebooks'
timing asserts.

``--keep`` executes each notebook with ``jupyter nbconvert --execute --allow-errors`` instead of nbval
(two at a time, or ``--jobs N``) and keeps every executed copy, outputs and errors included, in
``build/sweep/<mode>-seed<N>/``: the numbers each seed printed, to read the spread of a
measured value off (``make sweep KEEP=1``). A cell that raises fails the seed, as under nbval.

At the end it prints, per notebook, its seconds under each seed, then every failing cell with the
seeds that broke it and the line that failed, and exits 1 if any cell failed. A JSON record of the
whole sweep goes to ``notebooks/runs/sweep-<mode>.json`` (git-ignored).
Run it with the venv's python (the stack under test): nbval runs the kernels in that environment.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def cpu_hog(on: bool):
    """A process spinning on one core while the block runs (nothing when ``on`` is False)."""
    if not on:
        yield None
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


def failing_line(message: str) -> str:
    """The most telling line of an nbval failure: the assert or error that stopped the cell."""
    # colour codes: raw, or as pytest's JUnit XML writes the escape character ("#x1B")
    lines = [re.sub(r"(\x1b|#x1B)\[[0-9;]*m", "", ln).strip() for ln in message.splitlines()]
    for pattern in (r"^-*>\s*\d+\s+assert\b", r"^\w*(Error|Exception)\b.*", r"\bassert\b"):
        hits = [ln for ln in lines if re.search(pattern, ln)]
        if hits:
            return re.sub(r"^-*>\s*\d+\s+", "", hits[-1])[:160]
    return next((ln for ln in reversed(lines) if ln), "")[:160]


def seed_env(seed: int, mode: str) -> dict:
    """The environment a notebook runs in under ``seed`` and ``mode``, this venv first on PATH."""
    env = dict(os.environ, CTLKIT_SEED=str(seed), CTLKIT_QUICK="1" if mode == "quick" else "0",
               MPLBACKEND="Agg", TF_CPP_MIN_LOG_LEVEL="2")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_seed(seed: int, mode: str, notebooks: list[str], hog: bool, extra: list[str]) -> dict:
    """One nbval run under ``seed``: {"seconds": {notebook: s}, "failures": {(nb, cell): line}}."""
    env = seed_env(seed, mode)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-q",
               "-p", "no:cacheprovider", f"--junitxml={report}", *extra, *notebooks]
        print(f"== seed {seed}, {mode} mode{', CPU hog on one core' if hog else ''}: "
              f"{' '.join(cmd[2:])}", flush=True)
        start = time.monotonic()
        with cpu_hog(hog):
            rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        wall = time.monotonic() - start
        if not report.exists():
            return {"rc": rc, "wall": wall, "seconds": {}, "failures": {("(pytest)", "-"): f"exit {rc}"}}
        seconds, failures = collections.defaultdict(float), {}
        for case in ET.parse(report).getroot().iter("testcase"):
            nb = re.sub(r"\.ipynb$", "", case.get("classname", "?").split(".", 1)[-1])
            seconds[nb] += float(case.get("time", 0))
            for bad in list(case.iter("failure")) + list(case.iter("error")):
                text = (bad.get("message") or "") + "\n" + (bad.text or "")
                failures[(nb, case.get("name", "?"))] = failing_line(text)
    return {"rc": rc, "wall": wall, "seconds": dict(seconds), "failures": failures}


def cell_failures(executed: dict) -> dict:
    """{"cell N": failing line} for every code cell of an executed notebook that raised."""
    failures = {}
    for index, cell in enumerate(executed.get("cells", [])):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") == "error":
                text = "\n".join(out.get("traceback", [])) + f"\n{out.get('ename')}: {out.get('evalue')}"
                failures[f"cell {index}"] = failing_line(text)
    return failures


def run_seed_keep(seed: int, mode: str, notebooks: list[str], hog: bool, jobs: int,
                  keep_dir: Path | None = None) -> dict:
    """One seed by nbconvert, executed copies kept (in ``keep_dir``/<mode>-seed<N>, by default
    build/sweep/<mode>-seed<N>): the same record as ``run_seed``."""
    from concurrent.futures import ThreadPoolExecutor
    env = seed_env(seed, mode)
    out_dir = (keep_dir or ROOT / "build" / "sweep") / f"{mode}-seed{seed}"   # outside notebooks/
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"== seed {seed}, {mode} mode{', CPU hog on one core' if hog else ''}: {len(notebooks)} "
          f"notebook(s), {jobs} at a time, executed copies in {out_dir}", flush=True)

    def one(nb: str):
        start = time.monotonic()
        cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
               "--allow-errors", "--ExecutePreprocessor.timeout=3600", "--output-dir", str(out_dir), nb]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - start
        copy = out_dir / Path(nb).name
        name = Path(nb).stem
        if proc.returncode or not copy.exists():
            return name, seconds, {"(nbconvert)": failing_line(proc.stderr) or f"exit {proc.returncode}"}
        return name, seconds, cell_failures(json.loads(copy.read_text(encoding="utf-8")))

    start = time.monotonic()
    with cpu_hog(hog), ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, notebooks))
    wall = time.monotonic() - start
    seconds = {name: s for name, s, _ in results}
    failures = {(name, cell): line for name, _, f in results for cell, line in f.items()}
    for (name, cell), line in failures.items():
        print(f"   {name} {cell}: {line}", flush=True)
    return {"rc": 1 if failures else 0, "wall": wall, "seconds": seconds, "failures": failures}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", required=True, help='run seeds, e.g. "1 2 3" or 1,2,3')
    parser.add_argument("--mode", choices=("quick", "full"), default="quick")
    parser.add_argument("--hog", action="store_true", help="keep one core busy meanwhile")
    parser.add_argument("--out", type=Path, default=None, help="where the JSON record goes")
    parser.add_argument("--keep", action="store_true",
                        help="execute with nbconvert and keep each executed copy (outputs included)")
    parser.add_argument("--jobs", type=int, default=2, help="with --keep: notebooks at a time")
    parser.add_argument("--keep-dir", type=Path, default=None,
                        help="with --keep: the folder for <mode>-seed<N>/ (default build/sweep)")
    parser.add_argument("notebooks", nargs="*", help="notebooks (default: notebooks/[0-9]*.ipynb)")
    args, extra = parser.parse_known_args(argv)
    words = args.seeds.replace(",", " ").split()
    bad = [w for w in words if not (w.isdigit() and int(w) <= 1_000_000)]
    if bad or not words:
        parser.error(f"--seeds must be integers in [0, 1000000] (as CTLKIT_SEED), got "
                     f"{args.seeds!r}; pass e.g. --seeds \"1 2 3\"")
    args.seeds = [int(w) for w in words]
    notebooks = args.notebooks or sorted(str(p.relative_to(ROOT))
                                         for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    missing = [n for n in notebooks if not (ROOT / n).exists() and not Path(n).exists()]
    if missing:
        parser.error(f"no such notebook: {missing}; pass paths such as notebooks/07_gan.ipynb")

    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more (notebooks run at a time), got {args.jobs}")
    if args.keep and extra:
        parser.error(f"--keep runs nbconvert, not pytest: it takes no pytest options ({' '.join(extra)})")
    if args.keep:
        runs = {seed: run_seed_keep(seed, args.mode, notebooks, args.hog, args.jobs, args.keep_dir)
                for seed in args.seeds}
    else:
        runs = {seed: run_seed(seed, args.mode, notebooks, args.hog, extra) for seed in args.seeds}

    names = sorted({nb for r in runs.values() for nb in r["seconds"]})
    print(f"\n== sweep, {args.mode} mode{' under a CPU hog' if args.hog else ''}: "
          f"seconds per notebook and seed")
    print(f"{'notebook':<36}" + "".join(f"{'seed ' + str(s):>10}" for s in runs))
    for nb in names:
        print(f"{nb:<36}" + "".join(f"{r['seconds'].get(nb, 0):10.1f}" for r in runs.values()))
    print(f"{'wall clock':<36}" + "".join(f"{r['wall']:10.1f}" for r in runs.values()))

    broken = collections.defaultdict(dict)
    for seed, r in runs.items():
        for key, line in r["failures"].items():
            broken[key][seed] = line
    if broken:
        print(f"\n== {len(broken)} failing cell(s)")
        for (nb, cell), by_seed in sorted(broken.items()):
            print(f"{nb} {cell}: broke under seed(s) {sorted(by_seed)}")
            for seed, line in sorted(by_seed.items()):
                print(f"    seed {seed}: {line}")
    else:
        print(f"\n== every cell passed under seeds {list(runs)} ({args.mode} mode)")
    out = args.out or ROOT / "notebooks" / "runs" / f"sweep-{args.mode}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"mode": args.mode, "hog": args.hog, "seeds": {
        str(s): {"wall": r["wall"], "rc": r["rc"], "seconds": r["seconds"],
                 "failures": {f"{nb} {cell}": line for (nb, cell), line in r["failures"].items()}}
        for s, r in runs.items()}}, indent=1) + "\n", encoding="utf-8")
    print(f"record: {out}")
    return 1 if broken or any(r["rc"] for r in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
