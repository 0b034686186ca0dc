"""The hand-off of ``refsched.sync.acquire``: a thread that finds the lock held yields once, which
is when the holder lets it go, and then takes it. A lost hand-off blocks the taker for good, so
the call runs on a thread of its own and must return within a generous bound (see
tests/wakeup_support.py) instead of hanging the run.
"""

from __future__ import annotations

import threading

import pytest

from refsched import sync
from tests.wakeup_support import Blocked


def test_a_lock_let_go_at_the_yield_is_taken_by_the_thread_that_yielded(
        lock_let_go_at_the_yield: tuple[threading.Lock, list[float]]) -> None:
    lock, yields = lock_let_go_at_the_yield
    taker = Blocked(lambda: sync.acquire(lock), name="taker")
    taker.result()
    assert yields == [0] and lock.locked()
    lock.release()


def test_a_lock_held_past_the_yield_is_taken_once_its_holder_lets_go(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lock = threading.Lock()
    lock.acquire()
    yielded = threading.Event()
    monkeypatch.setattr(sync, "_sleep", lambda seconds: yielded.set())
    taker = Blocked(lambda: sync.acquire(lock), name="taker")
    assert yielded.wait(10)
    lock.release()  # after the yield the taker blocks on the lock: this hands it over
    taker.result()
    assert not lock.acquire(False), "the taker returned without the lock"
    lock.release()
