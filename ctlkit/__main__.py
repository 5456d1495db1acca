"""``python -m ctlkit doctor``: what a workshop teacher checks before a session."""
from __future__ import annotations

import argparse
import os
import sys


def doctor() -> int:
    """Print what this machine offers; exit status 1 when a check printed an ERROR."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from . import data, runtime

    print("ctlkit doctor")
    errors = 0
    try:
        print(f"Keras backend: {runtime.keras_backend()}")
    except runtime.BackendError as e:   # nothing below can run on another backend
        print(f"ERROR: {e}")
        print("doctor: 1 ERROR(s) above; the other checks need the TensorFlow backend")
        return 1
    try:
        runtime.budget()
    except ValueError as e:                        # e.g. CTLKIT_QUICK=maybe
        print(f"ERROR: {e}")
        errors += 1
        os.environ[runtime.QUICK_ENV] = ""         # carry on in full mode to check the rest
    rt = runtime.setup(seed=0, verbose=False)
    print(rt.summary())
    import tensorflow as tf

    for kind in ("CPU", "GPU", "TPU"):
        devs = tf.config.list_logical_devices(kind)
        print(f"  {kind}: {len(devs)} device(s)" + (f": {', '.join(d.name for d in devs)}"
                                                   if devs else ""))
    try:
        import ipywidgets

        widgets = f"ipywidgets {ipywidgets.__version__} installed"
    except ImportError:
        widgets = "ipywidgets missing: the monitor falls back to text"
    try:
        import jupyterlab

        widgets += f"; JupyterLab {jupyterlab.__version__} (widgets render there)"
    except ImportError:
        widgets += "; JupyterLab not installed"
    print(f"widget frontend: {widgets}")
    from .monitor.sinks import make_sink

    try:  # what Monitor(sink="auto") would pick here (honours CTLKIT_MONITOR)
        sink = type(make_sink("auto")).__name__
    except ValueError as e:
        sink, errors = f"ERROR: {e}", errors + 1
    print(f"monitor sink in this process: {sink}")
    print("datasets:")
    for name, how in data.available().items():
        print(f"  {name}: {how}")
    print(f"images offline: {', '.join(data.IMAGES)}")
    print(f"quick mode ({runtime.QUICK_ENV}=1): {rt.quick}")
    print(f"memory statistics: {'on' if rt.memory_stats else 'off'}")
    if errors:
        print(f"doctor: {errors} ERROR(s) above; fix them before the workshop")
    return 1 if errors else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctlkit", description=__doc__)
    parser.add_argument("command", choices=["doctor"], help="doctor: check this machine")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    return 2


if __name__ == "__main__":
    sys.exit(main())
