"""What this machine can run on: a local TPU, the GPUs' compute capability, and the precision
policy worth using there (mixed_float16 where every GPU has tensor cores; float32 on a CPU, where
notebook 04 measures what mixed_float16 costs on the learner's processor)."""
from __future__ import annotations

import os


def find_tpu():
    """Return a TPUClusterResolver for a local TPU VM, or None. Never raises."""
    import tensorflow as tf

    if not (os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR")
            or os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0")):
        return None  # cheap check first: no TPU hint on this machine
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return resolver
    except Exception:  # any failure means "no usable TPU"
        return None


def gpu_compute_capability(device) -> tuple | None:
    """(major, minor) of a physical GPU, or None if TensorFlow cannot tell."""
    import tensorflow as tf

    try:
        cc = tf.config.experimental.get_device_details(device).get("compute_capability")
    except Exception:
        return None
    return tuple(cc) if cc else None


def recommend_policy(kind: str, capabilities=()) -> str:
    """The precision policy worth using: float16 needs tensor cores (compute capability >= 7)."""
    if kind not in {"CPU", "GPU", "TPU"}:
        raise ValueError(f"kind must be 'CPU', 'GPU' or 'TPU', got {kind!r}")
    if isinstance(capabilities, (str, bytes)) or not hasattr(capabilities, "__iter__"):
        raise TypeError(f"capabilities must be a list of (major, minor) tuples, got "
                        f"{capabilities!r}")
    caps = list(capabilities)
    for c in caps:
        if c is not None and not (isinstance(c, (tuple, list)) and c
                                  and all(isinstance(i, int) for i in c)):
            raise TypeError(f"capabilities must be a list of (major, minor) tuples (None for "
                            f"unknown), got {capabilities!r}; e.g. capabilities=[(7, 0)]")
    if kind == "TPU":
        return "mixed_bfloat16"
    if kind == "GPU" and caps and all(c and c[0] >= 7 for c in caps):
        return "mixed_float16"
    return "float32"  # CPU: not recommended; notebook 04 measures mixed_float16 on this CPU
