"""Repository-wide pytest hooks: print the measured time of each notebook after an nbval run, and,
when CTLKIT_RECORD names a folder (make test MODE=full does), keep each notebook's outputs and write
every notebook whose cells all passed there as an executed copy: the book's pages (tools/book.py).
Under pytest-xdist (make test runs two at a time) each worker records the notebooks it ran and
writes them when its session ends; the controller, which runs no notebook, only counts them."""
import collections
import contextlib
import os
import pathlib
import sys

import pytest

_seconds = collections.defaultdict(float)
_recorder = None
_written: list[str] = []


def _xdist_controller(config) -> bool:
    """True in the process that hands tests to xdist workers (it runs none itself)."""
    return getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")


def pytest_configure(config):
    global _recorder
    if os.environ.get("CTLKIT_RECORD") and not _xdist_controller(config):
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tools"))
        import book
        _recorder = book.Recorder(os.environ["CTLKIT_RECORD"], config.rootpath)


def pytest_collection_finish(session):
    if _recorder is not None:
        _recorder.collected(session.items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _recorder.capture(item) if _recorder is not None else contextlib.nullcontext():
        yield


def pytest_runtest_logreport(report):
    _seconds[report.nodeid.split("::")[0]] += report.duration
    if _recorder is not None:
        _recorder.report(report)


def pytest_sessionfinish(session):
    if _recorder is not None:
        written = [str(p) for p in _recorder.finish()]
        if hasattr(session.config, "workerinput"):
            session.config.workeroutput["ctlkit_written"] = written   # read by the controller below
        _written.extend(written)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist, in the controller: a worker finished; keep what it wrote."""
    _written.extend(getattr(node, "workeroutput", {}).get("ctlkit_written", []))


def pytest_terminal_summary(terminalreporter):
    notebooks = {path: s for path, s in _seconds.items() if path.endswith(".ipynb")}
    if notebooks:
        terminalreporter.write_sep("=", "time per notebook (setup + cells)")
        for path, seconds in sorted(notebooks.items()):
            terminalreporter.write_line(f"{seconds:7.1f} s  {path}")
        terminalreporter.write_line(f"{sum(notebooks.values()):7.1f} s  all notebooks")
    if os.environ.get("CTLKIT_RECORD"):
        terminalreporter.write_line(f"executed copies of {len(_written)} notebook(s) written to "
                                    f"{os.environ['CTLKIT_RECORD']}")
