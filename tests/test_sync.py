"""refsched.sync.acquire: how the Runner's and the pool's threads take their lock once per task."""

from __future__ import annotations

import threading

import pytest

from refsched import sync


def test_a_free_lock_is_taken_without_yielding(monkeypatch: pytest.MonkeyPatch) -> None:
    yields: list[float] = []
    monkeypatch.setattr(sync, "_sleep", yields.append)
    lock = threading.Lock()
    sync.acquire(lock)
    assert lock.locked() and yields == []


def test_a_held_lock_is_yielded_to_once_then_taken(
        lock_let_go_at_the_yield: tuple[threading.Lock, list[float]]) -> None:
    lock, yields = lock_let_go_at_the_yield
    sync.acquire(lock)
    assert lock.locked() and yields == [0]


def test_a_lock_still_held_after_the_yield_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = threading.Lock()
    go = threading.Event()
    order: list[str] = []

    def holder() -> None:
        with lock:
            taken.set()
            go.wait()
            order.append("released")

    taken = threading.Event()
    thread = threading.Thread(target=holder)
    thread.start()
    taken.wait()
    monkeypatch.setattr(sync, "_sleep", lambda seconds: go.set())  # still held after it
    sync.acquire(lock)
    order.append("acquired")
    lock.release()
    thread.join()
    assert order == ["released", "acquired"]
