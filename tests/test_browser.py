"""The browser test (README, "The live monitor"): the live monitor really updates in JupyterLab
while the cell runs.

A real JupyterLab is started on loopback with a random token, a headless Debian Chromium (driven by
Playwright with ``executable_path``; Playwright's own browser downloads fail here) opens a notebook,
runs it down to the live cell, and polls the ``<img>`` elements in that cell's output area while its
prompt still shows ``[*]``. Seeing several different images while the cell is busy proves that
kernel-to-browser widget messages flow during a busy cell, which is what the monitor relies on.

- ``test_browser_sees_live_widget_updates_minimal`` runs a tiny probe notebook written here (an
  ``ipywidgets.Image`` in a ``VBox`` set to fresh matplotlib Agg PNG bytes every 0.5 s for ~6 s):
  a fast proof of the mechanism on its own.
- ``test_notebook_03_monitor_updates_live`` runs ``notebooks/03_custom_training_loop.ipynb`` down to
  its first ``ctlkit.Monitor(`` cell, in quick mode.

JupyterLab is started with ``--LabApp.expose_app_in_browser=True`` so the test can drive it through
``window.jupyterapp`` (its commands and the notebook panel's model) instead of brittle clicks.
Without /usr/bin/chromium the tests skip, except in CI (``CI=true``) where that is a failure.
They run on the ``current`` stack only (``CTLKIT_STACK``, set by ``make test``): that is the stack
``make lab`` installs, the only one whose JupyterLab a learner opens. The pinned stacks hold Colab's
packages, and Colab's frontend is Colab's own, not JupyterLab (JupyterLab with Colab's pins did not
render ipywidgets 7.7.1 widgets at all); what their kernels send is checked message by message in
tests/test_widget_kernel.py.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK_03 = "03_custom_training_loop.ipynb"
MONITOR_MARKER = "ctlkit.Monitor("
PROBE = "_probe_live_widget.ipynb"
PROBE_MARKER = "widgets.Image("

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
MIN_DISTINCT_IMAGES = 3
POLL_S = 0.1


# --------------------------------------------------------------------------------------------------
# JupyterLab server
# --------------------------------------------------------------------------------------------------

# User settings for the throw-away JupyterLab: attach every cell to the DOM (no windowing), and no
# news / update checks (this machine has no internet, and their toasts only get in the way).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True,
    },
}

# Talk to the local server directly, never through an http(s)_proxy from the environment.
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def _descendants(pid: int) -> dict[int, bytes]:
    """Child processes (kernels included) of pid with their command lines, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = _cmdline(child)
            todo.append(child)
    return found


class LabServer:
    """JupyterLab on 127.0.0.1 serving ``root``, with its config, settings and runtime under ``home``."""

    def __init__(self, root: Path, home: Path):
        self.root, self.home = root, home
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _env(self) -> dict:
        env = dict(os.environ)
        # The kernel should see what a learner's kernel sees: the inline matplotlib backend, not Agg.
        env.pop("MPLBACKEND", None)
        env.update(
            # Full mode: notebook 03's training cell then runs ~15 s instead of ~3 s, long enough for
            # the monitor (which keeps its redraws within 4 % of the loop's time) to redraw a few times.
            CTLKIT_QUICK="0",
            TF_CPP_MIN_LOG_LEVEL=env.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            JUPYTER_CONFIG_DIR=str(self.home / "config"),
            JUPYTER_RUNTIME_DIR=str(self.home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(self.home / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(self.home / "workspaces"),
            IPYTHONDIR=str(self.home / "ipython"),
        )
        return env

    def start(self, timeout: float = 120) -> LabServer:
        for rel, settings in LAB_SETTINGS.items():
            path = self.home / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings))
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser", "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI runs as root; jupyter_server refuses root without it
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.root, env=self._env(), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self._request("/api/status")
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def _request(self, path: str, method: str = "GET"):
        req = urllib.request.Request(self.url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with _LOCAL.open(req, timeout=5) as resp:
            return resp.read()

    def stop(self) -> None:
        """Shut down kernels and server politely, then by signal; kill only what this server started."""
        if self.proc is None or self.proc.poll() is not None:
            return
        started = _descendants(self.proc.pid)
        try:
            self._request("/api/shutdown", method="POST")  # also shuts down the kernels
            self.proc.wait(timeout=20)
        except (urllib.error.URLError, OSError, subprocess.TimeoutExpired):
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid, cmdline in started.items():  # kernels that outlived their server (same pid, same command)
            if cmdline is not None and _cmdline(pid) == cmdline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def shutdown_kernels(self) -> None:
        """End every session (and its kernel), so that one test's kernel does not idle through the next."""
        try:
            for session in json.loads(self._request("/api/sessions")):
                self._request(f"/api/sessions/{session['id']}", method="DELETE")
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass  # best effort: stop() ends whatever is left


# --------------------------------------------------------------------------------------------------
# Driving JupyterLab in the browser
# --------------------------------------------------------------------------------------------------

# True once the notebook at `path` is the current tab, rendered, and its kernel is idle.
JS_NOTEBOOK_READY = """(path) => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.context || panel.context.path !== path || !panel.content
      || !panel.sessionContext) return false;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && panel.context.isReady
         && panel.content.widgets.length > 0;
}"""

# Run every cell above `idx`, then cell `idx` itself: the kernel queues them in order.
JS_RUN_THROUGH = """(idx) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  panel.content.activeCellIndex = idx;
  panel.content.deselectAll();
  void app.commands.execute('notebook:run-all-above');
  void app.commands.execute('notebook:run-cell');
  return panel.content.activeCellIndex;
}"""

# What the browser shows for cell `idx` right now: its prompt and a fingerprint of each non-empty image
# in its output area. Images are compared by content, not by src: an ipywidgets.Image view makes a
# fresh blob: URL even for its empty initial value and on re-render. Blob contents are fetched once
# per URL (while the widget has not yet revoked it), data: URLs are hashed as they are.
JS_SNAPSHOT = """async (idx) => {
  const fnv = (bytes) => {
    let h = 2166136261;
    for (let i = 0; i < bytes.length; i++) { h ^= bytes[i]; h = Math.imul(h, 16777619); }
    return (h >>> 0).toString(16) + ':' + bytes.length;
  };
  const cache = window.__ctlkitImageFingerprints = window.__ctlkitImageFingerprints || new Map();
  const fingerprint = async (src) => {
    if (!cache.has(src)) {
      let bytes = null;
      try {
        bytes = src.startsWith('data:') ? new TextEncoder().encode(src)
                                        : new Uint8Array(await (await fetch(src)).arrayBuffer());
      } catch (e) { return null; }  // revoked before we looked: just not counted
      cache.set(src, bytes.length && !(src.startsWith('data:') && src.endsWith(',')) ? fnv(bytes) : null);
    }
    return cache.get(src);
  };
  const panel = window.jupyterapp.shell.currentWidget;
  const cell = panel.content.widgets[idx];
  const prompt = cell.node.querySelector('.jp-InputArea-prompt');
  const promptText = prompt ? prompt.textContent.trim() : '';
  const srcs = Array.from(cell.node.querySelectorAll('.jp-Cell-outputArea img'), (img) => img.src);
  const images = [];
  for (const src of srcs) { const fp = src ? await fingerprint(src) : null; if (fp) images.push(fp); }
  return {prompt: promptText, images: images, executionCount: cell.model.executionCount};
}"""

# Execution counts and error outputs of cells 0..idx, from the notebook model.
JS_RESULTS = """(idx) => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets.slice(0, idx + 1).map((cell, i) => {
    if (cell.model.type !== 'code') return {index: i, code: false};
    const errors = cell.model.outputs.toJSON().filter((o) => o.output_type === 'error')
                       .map((o) => `${o.ename}: ${o.evalue}`);
    return {index: i, code: true, executionCount: cell.model.executionCount, errors: errors};
  });
}"""


def first_cell_containing(notebook: Path, marker: str) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and marker in source:
            return index
    raise AssertionError(f"{notebook.name}: no code cell contains {marker!r}")


def run_and_watch_live_cell(page, lab: LabServer, name: str, index: int, timeout: float) -> dict:
    """Open notebook `name`, run it through cell `index`, and collect the images that cell shows while busy.

    Returns the fingerprints of the distinct non-empty images seen while the cell's prompt was ``[*]``,
    how many polls saw it busy, and the per-cell results (execution counts, errors) of cells 0..index
    once it finished.
    """
    page.goto(lab.notebook_url(name))
    page.wait_for_function(JS_NOTEBOOK_READY, arg=name, timeout=120_000, polling=250)
    page.evaluate(JS_RUN_THROUGH, index)

    deadline = time.monotonic() + timeout
    seen: list[str] = []
    busy_polls = 0
    started = False
    while time.monotonic() < deadline:
        snap = page.evaluate(JS_SNAPSHOT, index)
        busy = "*" in snap["prompt"]
        if busy:
            started = True
            busy_polls += 1
            seen += [image for image in snap["images"] if image not in seen]
        elif started:
            break  # the live cell finished (or was aborted by an error above it)
        time.sleep(POLL_S)
    else:
        raise AssertionError(f"{name}: cell {index} still {'busy' if started else 'not started'} after "
                             f"{timeout:.0f} s; server log:\n{lab.log_tail()}")
    return {"images": seen, "busy_polls": busy_polls, "results": page.evaluate(JS_RESULTS, index)}


def assert_live_updates(name: str, index: int, watched: dict) -> None:
    results = watched["results"]
    errors = [f"cell {r['index']}: {e}" for r in results if r["code"] for e in r["errors"]]
    assert not errors, f"{name}: error output while running through cell {index}:\n" + "\n".join(errors)
    not_run = [r["index"] for r in results if r["code"] and r["executionCount"] is None]
    assert not not_run, f"{name}: cells {not_run} did not run to completion"
    print(f"{name}: cell {index} showed {len(watched['images'])} distinct images while busy")
    assert len(watched["images"]) >= MIN_DISTINCT_IMAGES, (
        f"{name}: cell {index} showed only {len(watched['images'])} distinct image(s) while busy "
        f"({watched['busy_polls']} polls saw it busy); the live plot did not update during the cell"
    )


# --------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------

STACK = os.environ.get("CTLKIT_STACK", "current")
pytestmark = pytest.mark.skipif(
    STACK != "current", reason=f"stack {STACK}: Colab's frontend is not JupyterLab; its kernel's "
                               f"widget messages are checked in tests/test_widget_kernel.py")


@pytest.fixture(scope="module")
def chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        reason = f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}; .ci/run installs it", pytrace=False)
        pytest.skip(reason)
    return CHROMIUM


def probe_notebook() -> dict:
    """A notebook whose second cell updates an ipywidgets.Image (in a VBox) every 0.5 s for ~6 s."""
    setup = ("import io, time\n"
             "import ipywidgets as widgets\n"
             "from IPython.display import display\n"
             "from matplotlib.figure import Figure\n"
             "from matplotlib.backends.backend_agg import FigureCanvasAgg")
    live = ("image = widgets.Image(format='png')\n"
            "display(widgets.VBox([widgets.Label('live probe'), image]))\n"
            "start, step = time.monotonic(), 0\n"
            "while time.monotonic() - start < 6:\n"
            "    fig = Figure(figsize=(3, 2), dpi=72)\n"
            "    FigureCanvasAgg(fig)\n"
            "    fig.add_subplot().plot([i * i for i in range(step + 2)])\n"
            "    buf = io.BytesIO()\n"
            "    fig.savefig(buf, format='png')\n"
            "    image.value = buf.getvalue()\n"
            "    step += 1\n"
            "    time.sleep(0.5)\n"
            "print('steps:', step)")
    cells = [setup, live, "print('after the live cell: not run by the test')"]
    return {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"probe-{i}", "metadata": {},
                   "outputs": [], "source": src} for i, src in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory):
    """One JupyterLab for this module, serving a copy of notebooks/ plus the probe notebook."""
    base = tmp_path_factory.mktemp("lab")
    root = base / "notebooks"
    if NOTEBOOKS.is_dir():
        shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "runs"))
    else:
        root.mkdir()
    (root / PROBE).write_text(json.dumps(probe_notebook()), encoding="utf-8")
    server = LabServer(root, base / "jupyter").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(chromium):
    try:
        from playwright import sync_api
    except ImportError as exc:  # a dev dependency: `pip install -e ".[dev]"` brings it
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but playwright is not importable: {exc}", pytrace=False)
        pytest.skip(f"playwright is not installed: {exc}")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, lab):
    """A fresh browser context (no cookies, no storage) per test; page errors are echoed on failure."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.on("pageerror", lambda exc: print(f"browser page error: {exc}"))
    try:
        yield page
    finally:
        context.close()
        lab.shutdown_kernels()


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------

@pytest.mark.timeout(300)
def test_browser_sees_live_widget_updates_minimal(lab, page):
    index = first_cell_containing(lab.root / PROBE, PROBE_MARKER)
    watched = run_and_watch_live_cell(page, lab, PROBE, index, timeout=120)
    assert_live_updates(PROBE, index, watched)


@pytest.mark.timeout(600)
def test_notebook_03_monitor_updates_live(lab, page):
    assert (NOTEBOOKS / NOTEBOOK_03).exists(), f"notebooks/{NOTEBOOK_03} is missing"
    index = first_cell_containing(lab.root / NOTEBOOK_03, MONITOR_MARKER)
    watched = run_and_watch_live_cell(page, lab, NOTEBOOK_03, index, timeout=480)
    assert_live_updates(NOTEBOOK_03, index, watched)
