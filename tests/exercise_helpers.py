"""What the tests/test_exercises_nbNN.py files share: a right answer must pass, a wrong one must be
rejected with a message that names the mistake."""
import re

from ctlkit.exercises import check


def accepted(key, fn, **context):
    """The checker ``key`` passes ``fn`` (a right answer, in whatever style it is written)."""
    report = check(key, fn, **context)
    assert report.ok, f"a right answer was rejected by {key}:\n{report}"
    return report


def rejected(key, fn, message, **context):
    """The checker ``key`` rejects ``fn``, and one of its sentences matches the regex ``message``."""
    report = check(key, fn, **context)
    assert not report.ok, f"a wrong answer passed {key}"
    assert any(re.search(message, p) for p in report.problems), str(report)
    return report
