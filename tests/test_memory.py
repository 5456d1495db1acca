"""Tests for ctlkit/memory.py: allocator statistics that never crash, on any CPU."""
import json
import os
import subprocess
import sys

import pytest

from ctlkit import memory

PROBE = r"""
import json, os, sys
import ctlkit
from ctlkit import memory
rt = ctlkit.setup(seed=0, verbose=False, memory_stats=sys.argv[1] == "on")
import tensorflow as tf
before = memory.stats("CPU:0")
x = tf.ones([2**20])                              # exactly 4 MiB of float32
after = memory.stats(x.device)
reset = memory.reset("CPU:0")
print(json.dumps({"available": after.available, "reason": after.reason,
                  "grew": None if not after.available else after.current - before.current,
                  "reset": reset, "rt": rt.memory_stats, "text": str(after)}))
"""


def _probe(mode, **env):
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env}
    full.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=full, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("onednn", ["0", "1"])
def test_setup_gives_exact_cpu_counts_with_or_without_onednn(onednn):
    got = _probe("on", TF_ENABLE_ONEDNN_OPTS=onednn)
    assert got["available"] and got["rt"] and got["reset"], got
    assert got["grew"] == 4 * 2**20, got           # the BFC allocator counts the tensor exactly
    assert "MiB in use" in got["text"]


def test_without_counting_allocator_stats_say_why_and_never_raise():
    got = _probe("off", TF_ENABLE_ONEDNN_OPTS="0")
    if got["available"]:   # a TF build whose default CPU allocator counts: nothing to explain
        assert got["grew"] >= 0 and got["reset"]
    else:
        assert got["reset"] is False and got["rt"] is False
        assert memory.BFC_ENV in got["reason"] and "restart" in got["reason"]
        assert "no allocator statistics" in got["text"]


def test_memory_stats_object():
    s = memory.MemoryStats("CPU:0", 3 * 2**20, 5 * 2**20)
    assert s.available and s.current_mib == 3 and s.peak_mib == 5
    none = memory.MemoryStats("CPU:0", None, None, "because")
    assert not none.available and none.current_mib is None and "because" in str(none)


@pytest.mark.parametrize("device, name", [
    ("CPU:0", "CPU:0"), ("/device:CPU:0", "CPU:0"), (" GPU:1 ", "GPU:1"),
    ("/job:localhost/replica:0/task:0/device:CPU:0", "CPU:0"),
])
def test_device_names_are_normalised(device, name):
    assert memory._device_name(device) == name


@pytest.mark.parametrize("bad", [3, None, "", "   ", b"CPU:0", ["CPU:0"]])
def test_bad_device_type_is_refused_with_the_fix(bad):
    with pytest.raises(TypeError, match="device must be a device name"):
        memory.stats(bad)


def test_unknown_device_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"GPU:7.*pass a device this process has"):
        memory.stats("GPU:7")
    with pytest.raises(ValueError, match="GPU:7"):
        memory.reset("GPU:7")


def test_enable_respects_an_explicit_false(monkeypatch):
    monkeypatch.setenv(memory.BFC_ENV, "false")
    assert memory.enable_cpu_stats() is False
    assert os.environ[memory.BFC_ENV] == "false"
