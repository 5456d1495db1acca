"""Repository-wide pytest hooks: print the measured time of each notebook after an nbval run."""
import collections

_seconds = collections.defaultdict(float)


def pytest_runtest_logreport(report):
    _seconds[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    notebooks = {path: s for path, s in _seconds.items() if path.endswith(".ipynb")}
    if notebooks:
        terminalreporter.write_sep("=", "time per notebook (setup + cells)")
        for path, seconds in sorted(notebooks.items()):
            terminalreporter.write_line(f"{seconds:7.1f} s  {path}")
        terminalreporter.write_line(f"{sum(notebooks.values()):7.1f} s  all notebooks")
