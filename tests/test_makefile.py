"""The Makefile's promises, run on a copy of it with a stand-in venv python (no TensorFlow needed).

`make test` on a machine with only python3: every stack whose Python it finds runs, each other stack
is named with the one line that gets its Python, and the run passes; under CI (CI=true) a stack that
cannot run fails the run. MODE, SEED, HOG and WHAT reach the notebooks' environment as documented;
JOBS sets how many test files (notebooks) run at a time.
"""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).parents[1]
STAND_IN = '#!/bin/sh\necho "ran: $* | QUICK=$CTLKIT_QUICK SEED=$CTLKIT_SEED"\n'


@pytest.fixture
def copy(tmp_path):
    """A folder with the Makefile, the stacks' pins and a ready .venv whose python only echoes."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    (tmp_path / "pyproject.toml").touch()
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN)
    python.chmod(0o755)
    os.utime(python.parent.parent, None)
    (tmp_path / ".venv" / ".installed").touch()
    return tmp_path


def make(folder, *args, ci=None):
    """make in ``folder`` with only /usr/bin and /bin on PATH and no pyenv: a fresh machine."""
    env = {"HOME": str(folder / "home"), "PATH": "/usr/bin:/bin", "PYENV_ROOT": str(folder / "none")}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(["make", "--no-print-directory", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)


def _pythons_here(*versions):
    return [v for v in versions if shutil.which(f"python{v}", path="/usr/bin:/bin")]


@pytest.mark.skipif(_pythons_here("3.12", "3.13") != [], reason="this machine has 3.12/3.13 in /usr/bin")
def test_only_python3_runs_current_names_the_others_with_the_line_that_gets_them_and_passes(copy):
    r = make(copy, "test")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "== stack current passed" in r.stdout
    for stack, version in (("colab", "3.13"), ("oldest", "3.12")):
        assert f"stack {stack} needs Python {version}" in r.stdout
        assert f"pyenv install {version}" in r.stdout
    assert "stacks not run here, for want of their Python (see above): colab oldest" in r.stdout


@pytest.mark.skipif(_pythons_here("3.12", "3.13") != [], reason="this machine has 3.12/3.13 in /usr/bin")
def test_under_ci_a_stack_that_cannot_run_fails(copy):
    r = make(copy, "test", ci="true")
    assert r.returncode != 0
    assert "CI=true: every stack must run; stack colab cannot" in r.stdout


def test_mode_seed_and_what_reach_the_notebooks(copy):
    r = make(copy, "test", "STACK=current", "MODE=full", "SEED=3", "WHAT=notebooks")
    assert r.returncode == 0, r.stdout + r.stderr
    ran = [ln for ln in r.stdout.splitlines() if ln.startswith("ran: ")]
    assert ran[-1].endswith("QUICK=0 SEED=3") and "--nbval-lax" in ran[-1]
    assert not any("pytest tests/" in ln for ln in ran)          # notebooks only
    r = make(copy, "test", "STACK=current")
    ran = [ln for ln in r.stdout.splitlines() if ln.startswith("ran: ")]
    assert any("pytest tests/" in ln for ln in ran) and ran[-1].endswith("QUICK=1 SEED=")
    assert any(ln.startswith("ran: -m ruff check .") for ln in ran)     # the linter, every run


def test_jobs_runs_tests_and_notebooks_that_many_at_a_time_file_by_file(copy):
    r = make(copy, "test", "STACK=current")
    ran = [ln for ln in r.stdout.splitlines() if ln.startswith("ran: -m pytest")]
    assert len(ran) == 2 and all(" -n 2" in ln for ln in ran), ran            # the default
    assert "--dist loadfile" in ran[1] and "--nbval" in ran[1]       # a notebook stays in one worker
    assert "2 at a time" in r.stdout
    r = make(copy, "test", "STACK=current", "JOBS=1")
    ran = [ln for ln in r.stdout.splitlines() if ln.startswith("ran: -m pytest")]
    assert len(ran) == 2 and not any(" -n " in ln for ln in ran), ran


# The hog runs in the background. This stand-in's notebook run waits (up to 30 s) for the hog's echo,
# so that on a loaded machine the shell cannot end, and kill the hog, before the hog printed its line.
HOG_STAND_IN = """#!/bin/sh
if [ "$1" = "-c" ]; then echo "ran: $* | QUICK=$CTLKIT_QUICK SEED=$CTLKIT_SEED"; touch "$0.hog"; exit 0; fi
case "$*" in *--nbval*) n=0; while [ ! -e "$0.hog" ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done;; esac
echo "ran: $* | QUICK=$CTLKIT_QUICK SEED=$CTLKIT_SEED"
"""


def test_hog_spins_a_process_while_the_notebooks_run(copy):
    (copy / ".venv" / "bin" / "python").write_text(HOG_STAND_IN)
    r = make(copy, "test", "STACK=current", "HOG=1", "WHAT=notebooks")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ran: -c while True: pass" in r.stdout and "CPU hog on one core" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["MODE=fast"], "MODE must be quick or full; got 'fast'"),
    (["SEED=abc"], "SEED must be a whole number from 0 to 1000000"),
    (["SEED=-1"], "SEED must be a whole number"),
    (["WHAT=units"], "WHAT must be all or notebooks"),
    (["STACK=nope"], "STACK must be one of: all current colab oldest"),
    (["JOBS=0"], "JOBS must be a whole number from 1 to 99"),
    (["JOBS=two"], "JOBS must be a whole number from 1 to 99"),
])
def test_bad_knobs_stop_make_with_the_fix(copy, args, message):
    r = make(copy, "test", *args)
    assert r.returncode != 0 and message in r.stderr
