#!/usr/bin/env bash
# The GPU check: the English notebooks on a machine with an NVIDIA GPU, on the stack a workshop's
# learners have, before the workshop (README, "Before a workshop on GPUs").
#
#     bash tools/gpu_check.sh             # every notebook in quick mode, then 07, 08 and 09 in full
#                                         # mode (their MNIST and GPU-size branches run only there)
#     FULL=1 bash tools/gpu_check.sh      # every notebook in full mode, as learners run them
#     DRY_RUN=1 bash tools/gpu_check.sh   # any machine: say what it would install and run, run nothing
#
# Which stack: on Colab (google.colab importable, or COLAB_RELEASE_TAG set) Colab's own Python and
# packages, adding only the kit and its test tools (constrained to what Colab has, so nothing of
# Colab's changes). Anywhere else a venv (.venv-gpu) built like `make venv STACK=colab` (Colab's
# Python and Colab's pins, stacks/colab.txt) plus tensorflow[and-cuda] (TensorFlow with NVIDIA's CUDA
# libraries from pip) at Colab's TensorFlow version (stacks/colab.txt's nvidia-* pins are left out:
# that extra brings the CUDA libraries it was built with). GPU_CHECK_STACK=colab-runtime|colab-pins forces one.
#
# Each notebook runs in its own kernel, one at a time (JOBS=2: two at a time; setup() turns GPU
# memory growth on, so two kernels can share the GPU, but the timings of notebook 12 then share it
# too). Results in $OUT (default ./gpu_check_out): nvidia-smi.txt, runtime.txt (what setup() and
# fit(jit_compile="auto") chose), sweep-quick.txt / sweep-full.txt (seconds per notebook, every
# failing cell with its line), the executed notebooks (executed/<mode>-seed0/, outputs included) and
# 12_performance_lab.md (the benchmark's numbers), and summary.txt: what passed, what failed, on
# which GPU, in how many minutes. Exit status: 0 when everything passed.
# No GPU has run this yet (the project has none): its first run on a T4 gives the time to plan for.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_check_out}
VENV=${VENV:-.venv-gpu}
JOBS=${JOBS:-1}
DRY=${DRY_RUN:-}
FULL_ONLY_BRANCHES="notebooks/07_gan.ipynb notebooks/08_style_transfer.ipynb notebooks/09_adversarial_training.ipynb"
say() { echo "gpu_check: $*"; }
run() { if [ -n "$DRY" ]; then echo "  would run: $*"; else "$@"; fi; }

case "$JOBS" in ''|*[!0-9]*|0) say "JOBS must be a whole number of notebooks at a time (1 or 2), got '$JOBS'"; exit 2;; esac

stack=${GPU_CHECK_STACK:-}
if [ -z "$stack" ]; then
    if [ -n "${COLAB_RELEASE_TAG:-}" ] || python3 -c "import google.colab" 2>/dev/null; then
        stack=colab-runtime
    else
        stack=colab-pins
    fi
fi
TF_VERSION=$(sed -n 's/^tensorflow==//p' stacks/colab.txt)
COLAB_PYTHON=$(sed -n 's/^# python: *//p' stacks/colab.txt)
[ -n "$TF_VERSION" ] || { say "stacks/colab.txt pins no tensorflow: regenerate it (tools/colab_pins.py)"; exit 2; }

case "$stack" in
colab-runtime)
    PY=$(command -v python3)
    say "stack: Colab's own runtime ($PY, its packages as they are; the kit and its test tools added)"
    ;;
colab-pins)
    PY=$VENV/bin/python
    say "stack: Colab's pins (stacks/colab.txt: Python $COLAB_PYTHON, TensorFlow $TF_VERSION) in $VENV," \
        "with tensorflow[and-cuda]==$TF_VERSION"
    ;;
*)
    say "GPU_CHECK_STACK must be colab-runtime or colab-pins, got '$stack'"; exit 2;;
esac
if [ -n "${FULL:-}" ]; then
    say "notebooks: every English notebook in full mode, $JOBS at a time"
else
    say "notebooks: every English notebook in quick mode, then in full mode:" $FULL_ONLY_BRANCHES
fi

if [ -z "$DRY" ]; then
    mkdir -p "$OUT"
    rm -rf "$OUT"/sweep-* "$OUT/executed" "$OUT/summary.txt" "$OUT/12_performance_lab".*   # an earlier run's
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || { say "nvidia-smi failed: is this a GPU machine?"; exit 2; }
    GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
else
    GPU_NAME="(dry run)"
fi
start=$(date +%s)

if [ "$stack" = colab-runtime ]; then
    # --exclude-editable: on a second run the kit is there as "-e ...", which pip refuses as a constraint
    if [ -n "$DRY" ]; then echo "  would run: $PY -m pip freeze --exclude-editable > $OUT/colab-freeze.txt"
    else "$PY" -m pip freeze --exclude-editable > "$OUT/colab-freeze.txt" || exit 2; fi
    run "$PY" -m pip install -q -e ".[dev]" -c "$OUT/colab-freeze.txt" || exit 2
else
    run make --no-print-directory venv STACK=colab VENV="$VENV" || exit 2
    if [ -z "$DRY" ]; then grep -v '^nvidia-' stacks/colab.txt > "$OUT/constraints-gpu.txt"; fi
    run "$PY" -m pip install -q "tensorflow[and-cuda]==$TF_VERSION" -c "$OUT/constraints-gpu.txt" || exit 2
fi
if [ -n "$DRY" ]; then say "dry run: nothing installed or run"; exit 0; fi

export MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=2 PATH="$(dirname "$PY"):$PATH"
unset CTLKIT_QUICK CTLKIT_SEED CTLKIT_EMULATE_TF32
status=0

"$PY" - > "$OUT/runtime.txt" 2>&1 <<'PY' || status=1
import keras, tensorflow as tf, ctlkit
rt = ctlkit.setup(seed=0)          # prints compute capability, TF32 and memory growth
assert rt.kind == "GPU", f"setup() found no GPU: {rt.kind}"
def auto_jit(scope=None):
    def build():
        m = keras.Sequential([keras.Input((784,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10)])
        m.compile(optimizer="adam", loss="mse")
        return m.jit_compile
    if scope is None:
        return build()
    with scope:
        return build()
print("fit jit_compile='auto' resolves to:", auto_jit(),
      "| under setup()'s strategy:", auto_jit(rt.strategy.scope()),
      "| under OneDeviceStrategy:", auto_jit(tf.distribute.OneDeviceStrategy("/gpu:0").scope()))
print("memory:", ctlkit.memory.stats("GPU:0"))
PY
cat "$OUT/runtime.txt"

sweep() {   # sweep MODE NOTEBOOKS...: one seed, executed copies kept, the readable table in $OUT
    local mode=$1; shift
    "$PY" tools/sweep.py --seeds 0 --mode "$mode" --keep --jobs "$JOBS" --keep-dir "$OUT/executed" \
        --out "$OUT/sweep-$mode.json" "$@" > "$OUT/sweep-$mode.txt" 2>&1
    local rc=$?
    sed -n '/^== sweep/,$p' "$OUT/sweep-$mode.txt"
    return $rc
}
if [ -n "${FULL:-}" ]; then
    sweep full || status=1
else
    sweep quick || status=1
    sweep full $FULL_ONLY_BRANCHES || status=1
fi

bench=$(ls "$OUT"/executed/*/12_performance_lab.ipynb 2>/dev/null | head -1)
if [ -n "$bench" ]; then
    "$PY" -m jupyter nbconvert --to markdown --output-dir "$OUT" "$bench" > "$OUT/bench.txt" 2>&1 \
        && grep -A14 "^ *variant  *examples/s" "$OUT/12_performance_lab.md" \
        || { say "the benchmark's table could not be made: $OUT/bench.txt"; status=1; }
fi

minutes=$(( ($(date +%s) - start + 59) / 60 ))
{
    echo "GPU: $GPU_NAME · stack: $stack · $(grep -m1 '^TensorFlow' "$OUT/runtime.txt")"
    grep -m1 "compute capability" "$OUT/runtime.txt"
    for f in "$OUT"/sweep-*.txt; do
        [ -e "$f" ] || continue
        if grep -q "^== every cell passed" "$f"; then echo "$(basename "$f" .txt): every cell passed"
        else echo "$(basename "$f" .txt): FAILED"; sed -n '/failing cell/,/^record:/p' "$f" | grep -v "^record:"; fi
    done
    echo "total: $minutes min (install included); $([ $status = 0 ] && echo PASSED || echo FAILED)"
} | tee "$OUT/summary.txt"
exit $status
