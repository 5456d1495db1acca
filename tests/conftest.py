"""Fixtures for tests/: no CTLKIT_MONITOR, CTLKIT_SEED or CTLKIT_EMULATE_TF32 from the environment, and a
fake IPython display."""
import IPython
import IPython.display
import pytest
from monitor_helpers import FakeHandle


@pytest.fixture(autouse=True)
def no_monitor_env(monkeypatch):
    monkeypatch.delenv("CTLKIT_MONITOR", raising=False)
    monkeypatch.delenv("CTLKIT_SEED", raising=False)   # unit tests run at the default seed
    monkeypatch.delenv("CTLKIT_EMULATE_TF32", raising=False)   # setup() would round for good


@pytest.fixture
def fake_display(monkeypatch):
    """Replace IPython's display(): records what was shown and hands out fake display handles."""
    shown, handles = [], []

    def display(*objs, display_id=None, raw=False, **kwargs):
        shown.extend(objs)
        if raw:  # a raw bundle must be a dict of mimetypes, as IPython requires
            assert all(isinstance(o, dict) and "text/plain" in o for o in objs), objs
        if display_id:
            handles.append(FakeHandle())
            return handles[-1]
        return None

    monkeypatch.setattr(IPython.display, "display", display)
    return shown, handles
