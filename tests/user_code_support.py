"""What the tests of the threaded runners share about user code that raises: a
``BaseException`` of the user's own, the exceptions each test raises, a call that must return
(rather than hang the suite) and the exception types logged (tests/dag/test_runner.py,
tests/timer/test_runner.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from tests.wakeup_support import LONG

_T = TypeVar("_T")


class Escape(BaseException):
    """A BaseException of the user's own, as GeneratorExit is one of Python's."""


BASE_EXCEPTIONS = pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt, Escape],
                                          ids=["SystemExit", "KeyboardInterrupt", "custom"])


def returns_within(call: Callable[[], _T], timeout: float = LONG) -> _T:
    """Run ``call`` on a daemon thread; fail (instead of hanging) if it has not returned in time."""
    outcome: list[_T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{call} did not return within {timeout}s"
    if errors:
        raise errors[0]
    return outcome[0]


def logged(caplog: pytest.LogCaptureFixture) -> list[type[BaseException] | None]:
    """The exception types of the records logged with a traceback, in order."""
    return [record.exc_info[0] for record in caplog.records if record.exc_info]
