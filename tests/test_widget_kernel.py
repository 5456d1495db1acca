"""The monitor's widget, as a real Jupyter kernel sends it, on this stack's ipywidgets (7 or 8).

A kernel of this venv is started with jupyter_client and runs a monitored loop in one cell. From
the messages the kernel publishes we check what a frontend (JupyterLab, Colab, VS Code) would get:
- the widget view is displayed with a display_id;
- the Image model's value is updated several times while the cell is still busy;
- at the end, an update_display_data replaces that very display (same display_id) with a static
  PNG, so a saved notebook keeps the curves. On ipywidgets 7 a plain display(widget) drops the
  display_id, and this last update targeted nothing (the bug this test guards).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from jupyter_client import KernelManager  # noqa: E402
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402

CELL = """
import time, ctlkit
with ctlkit.Monitor(total_steps=80, title="kernel test", every=0.2) as monitor:
    for i in range(80):
        monitor.log(loss=1.0 / (i + 1), grad_norm=0.5)
        time.sleep(0.04)
print("loop done")
"""
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    kernels = tmp_path_factory.mktemp("kernels")
    spec = kernels / "ctlkit-test"
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "ctlkit test", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k != "CTLKIT_MONITOR"}  # "auto": widget
    env.update(TF_CPP_MIN_LOG_LEVEL="2", MPLBACKEND="Agg")
    km = KernelManager(kernel_name="ctlkit-test",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run(kc, code, timeout=180):
    """Execute ``code``; return [(arrival seconds, iopub message)] up to the idle status."""
    msg_id = kc.execute(code)
    start, seen = time.monotonic(), []
    while time.monotonic() - start < timeout:
        try:
            msg = kc.get_iopub_msg(timeout=5)
        except Exception:  # queue.Empty: keep waiting until the deadline
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append((time.monotonic() - start, msg))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
    raise AssertionError(f"cell did not finish within {timeout} s")


def test_widget_updates_while_busy_and_final_png_replaces_the_widget(kernel):
    import ipywidgets

    msgs = _run(kernel, CELL)
    errors = [m["content"] for _, m in msgs if m["msg_type"] == "error"]
    assert not errors, errors[0]["traceback"][-3:]
    idle_at = msgs[-1][0]

    opened = {m["content"]["comm_id"]: m["content"]["data"]["state"]["_model_name"]
              for _, m in msgs if m["msg_type"] == "comm_open"}
    images = {cid for cid, model in opened.items() if model == "ImageModel"}
    boxes = {cid for cid, model in opened.items() if model == "VBoxModel"}
    assert len(images) == 1 and len(boxes) == 1, opened

    shown = [m for _, m in msgs if m["msg_type"] == "display_data"
             and WIDGET_VIEW in m["content"]["data"]]
    assert len(shown) == 1, "the monitor's widget is displayed once"
    view = shown[0]["content"]["data"][WIDGET_VIEW]
    assert view["model_id"] in boxes
    display_id = shown[0]["content"].get("transient", {}).get("display_id")
    assert display_id, f"widget displayed without a display_id (ipywidgets {ipywidgets.__version__})"

    updates = [t for t, m in msgs if m["msg_type"] == "comm_msg"
               and m["content"]["comm_id"] in images
               and m["content"]["data"].get("method") == "update"
               and "value" in json.dumps(m["content"]["data"])]
    early = [t for t in updates if t < idle_at - 0.5]
    assert len(early) >= 3, f"image updates while busy at {updates}, idle at {idle_at:.2f} s"

    finals = [m for _, m in msgs if m["msg_type"] == "update_display_data"]
    assert finals, "no update_display_data: the static PNG never replaced the widget"
    final = finals[-1]["content"]
    assert final["transient"]["display_id"] == display_id     # targets the widget's output
    assert "image/png" in final["data"] and WIDGET_VIEW not in final["data"]
    texts = "".join(m["content"].get("text", "") for _, m in msgs if m["msg_type"] == "stream")
    assert "loop done" in texts


GREEDY = """
import time, ctlkit
monitor = ctlkit.Monitor(10**6, title="no budget", every=1e-6, draw_budget=0.99)
start = time.perf_counter()
while time.perf_counter() - start < 8:
    monitor.log(loss=1.0)
    sum(range(2000))                         # a step's worth of work
monitor.close()
print(f"greedy done: {monitor.redraws} redraws, {monitor.sink.frames} frames")
"""


def test_a_monitor_with_no_budget_does_not_flood_a_client_that_reads_late(kernel):
    # nbval reads a cell's messages only once the kernel has replied that the cell finished. Until
    # then they wait in ZeroMQ queues of about 1000 messages a side; a monitor redrawing 100 times a
    # second overflowed them within ten seconds, and the messages dropped then included the print
    # and the idle status, so nbval failed the cell ("Timeout ... waiting for output").
    msg_id = kernel.execute(GREEDY)
    reply = kernel.get_shell_msg(timeout=180)
    assert reply["content"]["status"] == "ok", reply["content"]
    texts, comm_msgs = "", 0
    while True:
        msg = kernel.get_iopub_msg(timeout=10)   # queue.Empty here: the idle status was dropped
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        comm_msgs += msg["msg_type"] == "comm_msg"
        texts += msg["content"].get("text", "") if msg["msg_type"] == "stream" else ""
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert "greedy done" in texts, "the cell's printed output was lost"
    redraws, frames = map(int, re.search(r"(\d+) redraws, (\d+) frames", texts).groups())
    assert frames <= 5 * 8 + 2 < redraws, (redraws, frames)   # max_fps 5 over 8 s, plus the ends
    assert comm_msgs <= 3 * frames + 20
