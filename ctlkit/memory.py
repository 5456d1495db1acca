"""Allocator memory statistics that never crash: ``stats(device)`` and ``reset(device)``.

TensorFlow reports what its allocator holds with ``tf.config.experimental.get_memory_info``
(bytes in use now and the peak since the last ``reset_memory_stats``). On a GPU that always
works. On a CPU it works only when the CPU allocator keeps counts, which depends on the build
and the processor: with oneDNN's allocator some CPUs count large blocks only, and without oneDNN
(``TF_ENABLE_ONEDNN_OPTS=0``, Apple silicon, older x86) the call raises ``ValueError: Allocator
stats not available``. TensorFlow's BFC allocator on the CPU (``TF_CPU_ALLOCATOR_USE_BFC=true``)
counts every allocation on every CPU; it must be chosen before TensorFlow runs its first op,
which is why ``ctlkit.setup()`` sets it (``enable_cpu_stats()``) unless told not to.

``stats()`` returns the numbers where the device has them and, where not, ``None`` with the
reason and the fix, so a notebook can say why it falls back instead of crashing.
"""
from __future__ import annotations

import dataclasses
import os

BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
MIB = 2 ** 20


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """Allocator bytes on ``device``: ``current`` in use and ``peak`` since the last reset,
    both ``None`` when the device keeps no counts (``reason`` says why and what to do)."""

    device: str
    current: int | None
    peak: int | None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.current is not None

    @property
    def current_mib(self) -> float | None:
        return None if self.current is None else self.current / MIB

    @property
    def peak_mib(self) -> float | None:
        return None if self.peak is None else self.peak / MIB

    def __str__(self) -> str:
        if not self.available:
            return f"{self.device}: no allocator statistics ({self.reason})"
        return f"{self.device}: {self.current_mib:.2f} MiB in use, peak {self.peak_mib:.2f} MiB"


def _device_name(device) -> str:
    name = getattr(device, "name", device)  # a LogicalDevice, or a tensor/variable's .device
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"device must be a device name such as 'CPU:0' or 'GPU:0' (or a tensor's "
                        f".device), got {device!r}")
    name = name.strip()
    if "/device:" in name:            # '/job:localhost/replica:0/task:0/device:CPU:0' -> 'CPU:0'
        name = name.rsplit("/device:", 1)[1]
    if name.startswith("/"):
        name = name[1:]
    return name


def tensorflow_started() -> bool:
    """Whether TensorFlow has already created its devices (after that the allocator is fixed)."""
    try:
        from tensorflow.python.eager import context

        return context.context()._context_handle is not None  # no public flag
    except Exception:  # if TF moved it, assume started (the safe answer)
        return True


def enable_cpu_stats() -> bool:
    """Ask for TensorFlow's counting (BFC) CPU allocator, if TensorFlow has not started yet.
    Returns True if the CPU will keep counts. Respects a value the user set already."""
    if os.environ.get(BFC_ENV, "").strip().lower() in {"false", "0", "no"}:
        return False
    if tensorflow_started():
        return os.environ.get(BFC_ENV, "").strip().lower() == "true"
    os.environ[BFC_ENV] = "true"
    return True


def _why_not(name: str, error: Exception) -> str:
    if name.upper().startswith("CPU"):
        if tensorflow_started() and os.environ.get(BFC_ENV, "").lower() != "true":
            how = (f"call ctlkit.setup() before anything else runs TensorFlow ops, or set "
                   f"{BFC_ENV}=true before TensorFlow starts (restart the kernel first)")
        else:
            how = f"set {BFC_ENV}=true before TensorFlow starts (restart the kernel first)"
        return f"this CPU allocator keeps no counts; to get them, {how}"
    return f"TensorFlow has no statistics for {name}: {error}"


def stats(device="CPU:0") -> MemoryStats:
    """Current and peak allocator bytes on ``device`` ('CPU:0', 'GPU:0', or a tensor's
    ``.device``), from ``tf.config.experimental.get_memory_info``. Never raises for a device
    without counts: the result is then unavailable, with the reason."""
    import tensorflow as tf

    name = _device_name(device)
    try:
        info = tf.config.experimental.get_memory_info(name)
    except ValueError as e:
        if "not available" not in str(e) and "not supported" not in str(e):
            raise ValueError(f"device {device!r}: {e}; pass a device this process has, e.g. "
                             f"'CPU:0' (see tf.config.list_logical_devices())") from None
        return MemoryStats(name, None, None, _why_not(name, e))
    return MemoryStats(name, int(info["current"]), int(info["peak"]))


def reset(device="CPU:0") -> bool:
    """Reset the peak on ``device`` to what is in use now. Returns False where the device keeps
    no counts (nothing to reset), True otherwise."""
    import tensorflow as tf

    name = _device_name(device)
    if not stats(name).available:
        return False
    tf.config.experimental.reset_memory_stats(name)
    return True
