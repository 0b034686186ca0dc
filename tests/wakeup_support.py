"""What the wake-up tests share (tests/<system>/test_wakeups.py): a call run on a thread of its
own, and a way to know that thread is blocked waiting before the event that must release it
happens.

A wake-up can only be tested on a thread that is already waiting when the event comes: one that
comes later finds the state changed and never needs the notification. So each test starts the
blocking call, waits (``Blocked.until_waiting``) until that thread sits in ``Condition.wait`` (or
in a queue's ``get``), makes the one change under test, and then requires the call to return
within a generous bound. The bound is only reached when the wake-up is lost: it fails the test
instead of hanging the run, and says nothing about speed.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

LONG = 10.0  # seconds: only reached when a wake-up is lost

# Where a thread blocked on a condition or an event sits: the innermost Python frame is
# threading.Condition.wait (Event.wait and Condition.wait_for call it), whose ``waiter`` lock is
# on the condition's list from before the frame lets the lock go until a notify takes it off. A
# thread in that frame whose waiter is still listed is waiting and has not been notified: a
# notify made under the lock from now on is the one that must reach it. (A thread notified but
# not yet resumed is still in the frame: its waiter is off the list, so it does not count.)
_THREADING = threading.__file__


def _waiting_unnotified(frame: Any) -> bool:
    if frame is None or (frame.f_code.co_filename, frame.f_code.co_name) != (_THREADING, "wait"):
        return False
    local = frame.f_locals
    condition, waiter = local.get("self"), local.get("waiter")
    return waiter is not None and waiter in getattr(condition, "_waiters", ())


def waiting(thread: threading.Thread) -> bool:
    """Whether ``thread`` is blocked in ``Condition.wait`` (or an event's wait), not notified."""
    return _waiting_unnotified(sys._current_frames().get(thread.ident or -1))


class Blocked:
    """``call()`` on a daemon thread; its outcome (value or exception) once it returned."""

    def __init__(self, call: Callable[[], Any], name: str = "blocked-call") -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self._call = call
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.value = self._call()
        except BaseException as exc:  # handed to the test's thread
            self.error = exc

    def until_waiting(self, timeout: float = LONG) -> None:
        """Return once the thread waits on a condition, not yet notified (see ``waiting``);
        fail if it returns or has not blocked within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            if waiting(self.thread):
                return
            assert self.thread.is_alive(), (
                f"{self._call} returned before it waited: {self.error or self.value!r}")
            assert time.monotonic() < deadline, f"{self._call} did not block within {timeout}s"
            time.sleep(0.001)

    def result(self, timeout: float = LONG) -> Any:
        """The call's value once it returned within ``timeout`` (its exception is raised)."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), (
            f"{self._call} was not released within {timeout}s: a lost wake-up")
        if self.error is not None:
            raise self.error
        return self.value

    def still_blocked(self) -> bool:
        return self.thread.is_alive()


def blocked_in(call: Callable[[], Any], name: str = "blocked-call") -> Blocked:
    """``call()`` on a thread of its own, returned once that thread waits, not yet notified:
    the change the test makes next is the one that must release it."""
    blocked = Blocked(call, name)
    blocked.until_waiting()
    return blocked


def gated(started: threading.Event, gate: threading.Event, value: Any = None
          ) -> Callable[[], Any]:
    """A task function held running until the test lets it end: it sets ``started``, waits
    for ``gate`` (a lost release fails at LONG instead of hanging), and returns ``value``."""
    def run() -> Any:
        started.set()
        assert gate.wait(LONG)
        return value
    return run


def closed(close: Callable[[], Any]) -> Any:
    """What ``close()`` returns, called so that a close that never returns fails the test
    instead of hanging the run (a test that ends without one leaves only daemon threads)."""
    return Blocked(close, name="close").result()


def until(predicate: Callable[[], bool], what: str, timeout: float = LONG) -> None:
    """Wait (polling) for a state the test cannot be told of by an event; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.001)
