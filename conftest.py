"""Repository-wide pytest hooks: print the measured time of each notebook after an nbval run, and,
when CTLKIT_RECORD names a folder (make test MODE=full does), keep each notebook's outputs and write
every notebook whose cells all passed there as an executed copy: the book's pages (tools/book.py)."""
import collections
import contextlib
import os
import pathlib
import sys

import pytest

_seconds = collections.defaultdict(float)
_recorder = None


def pytest_configure(config):
    global _recorder
    if os.environ.get("CTLKIT_RECORD"):
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


def pytest_terminal_summary(terminalreporter):
    notebooks = {path: s for path, s in _seconds.items() if path.endswith(".ipynb")}
    if notebooks:
        terminalreporter.write_sep("=", "time per notebook (setup + cells)")
        for path, seconds in sorted(notebooks.items()):
            terminalreporter.write_line(f"{seconds:7.1f} s  {path}")
        terminalreporter.write_line(f"{sum(notebooks.values()):7.1f} s  all notebooks")
    if _recorder is not None:
        written = _recorder.finish()
        terminalreporter.write_line(f"executed copies of {len(written)} notebook(s) written to "
                                    f"{os.environ['CTLKIT_RECORD']}")
