#!/usr/bin/env bash
# The GPU check (issue 11): every notebook in full mode and the benchmark on a machine with an
# NVIDIA GPU, mixed_float16 variants included. Run from anywhere:
#     bash tools/gpu_check.sh            # full mode (about half an hour on one GPU)
#     QUICK=1 bash tools/gpu_check.sh    # quick mode, a few minutes: proves every path runs
# It makes its own venv (.venv-gpu, TensorFlow with its CUDA libraries from pip) and writes into
# $OUT (default ./gpu_check_out): nvidia-smi.txt, runtime.txt (what setup() chose, and what
# fit(jit_compile="auto") resolved to), notebooks.txt (nbval with seconds per notebook),
# 12_performance_lab.ipynb and .md (the benchmark notebook executed, every number it measured).
# Exit status: non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
VENV=${VENV:-.venv-gpu}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
status=0

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || { echo "no nvidia-smi: is this a GPU machine?"; exit 2; }
if [ ! -x "$VENV/bin/python" ]; then "$PYTHON" -m venv "$VENV" || exit 2; fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[dev,lab]" "tensorflow[and-cuda]" || exit 2

export MPLBACKEND=Agg TF_CPP_MIN_LOG_LEVEL=2 PATH="$PWD/$VENV/bin:$PATH"
if [ -n "${QUICK:-}" ]; then export CTLKIT_QUICK=1; else unset CTLKIT_QUICK; fi

"$VENV/bin/python" - > "$OUT/runtime.txt" 2>&1 <<'PY' || status=1
import keras, tensorflow as tf, ctlkit
rt = ctlkit.setup(seed=0)
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

"$VENV/bin/python" -m pytest --nbval-lax --nbval-current-env notebooks/ -q -p no:cacheprovider \
    > "$OUT/notebooks.txt" 2>&1 || status=1
tail -25 "$OUT/notebooks.txt"

"$VENV/bin/jupyter" nbconvert --to notebook --execute --ExecutePreprocessor.timeout=3600 \
    --output-dir "$OUT" notebooks/12_performance_lab.ipynb > "$OUT/bench.txt" 2>&1 &&
    "$VENV/bin/jupyter" nbconvert --to markdown "$OUT/12_performance_lab.ipynb" >> "$OUT/bench.txt" 2>&1 \
    || status=1
grep -A12 "^variant " "$OUT/12_performance_lab.md"
exit $status
