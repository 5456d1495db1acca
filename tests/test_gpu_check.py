"""tools/gpu_check.sh, dry-run on a CPU (issue 34): which stack it picks, what it would install and
run, and that the lines it reads from other tools are lines those tools print. No GPU runs it here."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu_check.sh"


def dry(**env):
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**{k: v for k, v in os.environ.items() if k != "COLAB_RELEASE_TAG"},
                              "DRY_RUN": "1", "OUT": "/nonexistent/gpu_check_out", **env})
    return run.returncode, run.stdout + run.stderr


def colab_pin(name):
    return re.search(rf"^{name}==(\S+)", (ROOT / "stacks" / "colab.txt").read_text(), re.M).group(1)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


def test_off_colab_it_builds_colab_pins_with_the_cuda_tensorflow_of_colab_and_runs_nothing():
    rc, out = dry(GPU_CHECK_STACK="colab-pins")
    tf = colab_pin("tensorflow")
    assert rc == 0 and "dry run: nothing installed or run" in out
    assert f"TensorFlow {tf}" in out and "Python 3." in out
    assert "would run: make --no-print-directory venv STACK=colab VENV=.venv-gpu" in out
    assert (f"pip install -q tensorflow[and-cuda]=={tf} "
            f"-c /nonexistent/gpu_check_out/constraints-gpu.txt") in out
    assert not Path("/nonexistent/gpu_check_out").exists()
    assert "in full mode: notebooks/07_gan.ipynb notebooks/08_style_transfer.ipynb " \
           "notebooks/09_adversarial_training.ipynb" in out


def test_on_colab_it_keeps_colabs_packages_and_adds_only_the_kit():
    rc, out = dry(COLAB_RELEASE_TAG="release-colab_20261201")     # how Colab marks its runtime
    assert rc == 0 and "stack: Colab's own runtime" in out
    assert re.search(r"would run: \S*python3 -m pip install -q -e \.\[dev\] -c \S*colab-freeze\.txt", out)
    assert "pip freeze --exclude-editable" in out        # a second run: pip refuses "-e" constraints
    assert "tensorflow[and-cuda]" not in out
    rc, out = dry(GPU_CHECK_STACK="colab-runtime", FULL="1")
    assert "every English notebook in full mode, 1 at a time" in out


@pytest.mark.parametrize("env, complaint", [
    ({"GPU_CHECK_STACK": "laptop"}, "GPU_CHECK_STACK must be colab-runtime or colab-pins, got 'laptop'"),
    ({"JOBS": "two"}, "JOBS must be a whole number of notebooks at a time (1 or 2), got 'two'"),
])
def test_bad_settings_are_named(env, complaint):
    rc, out = dry(**env)
    assert rc == 2 and complaint in out


def test_the_full_mode_list_holds_every_notebook_with_a_branch_only_full_mode_takes():
    listed = set(re.search(r'FULL_ONLY_BRANCHES="([^"]+)"', SCRIPT.read_text()).group(1).split())
    branching = set()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "code")
        if re.search(r"^[^#\n]*=[^=\n]*not B\.quick", code, re.M):   # a choice made only in full mode
            branching.add(f"notebooks/{path.name}")
    assert branching == listed


def test_the_lines_it_reads_are_the_lines_the_tools_print():
    sweep = (ROOT / "tools" / "sweep.py").read_text()
    assert '"\\n== every cell passed under seeds' in sweep and "failing cell(s)" in sweep
    assert '"\\n== sweep, ' in sweep and '"record: ' in sweep          # the table it prints from
    source = (ROOT / "ctlkit" / "bench.py").read_text()        # the benchmark table's header
    assert "{'variant':28s} {'examples/s':>10s}" in source
    assert re.search(r"^ *variant  *examples/s", f"{'variant':28s} {'examples/s':>10s}")
