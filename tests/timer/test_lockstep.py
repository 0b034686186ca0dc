"""The production TimerScheduler and the timer's reference model agree, step for step.

The must-fail tests feed the same state machine TimerSchedulers that each break one rule of
``docs/timer.md`` the way a plausible bug would, and show it catches each one and says what
went wrong.
"""

from __future__ import annotations

import heapq
import re
import time
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from refsched import TimerScheduler
from refsched.errors import StaleGenerationError
from refsched.types import Due, TimerSnapshot, TimerState, Wait
from refsched.verify.timer.lockstep import Disagreement, Ledger, run_timer_lockstep


def test_timer_scheduler_agrees_with_the_model_and_takes_every_action() -> None:
    started = time.perf_counter()
    ledger = run_timer_lockstep(TimerScheduler, examples=500, steps=50)
    print(f"{ledger.summary()} in {time.perf_counter() - started:.1f}s")
    assert ledger.missing() == [], ledger.summary()
    assert ledger.examples >= 500, ledger.summary()
    for action in ("Schedule", "Claim", "Complete", "Fail", "Cancel", "Tick"):
        assert ledger.actions[action] >= 50, ledger.summary()
    assert ledger.events["compaction"] >= 50, ledger.summary()


# -- Broken schedulers: each breaks one rule -----------------------------------------------------

class _Unordered(int):
    """A negated priority the heap cannot tell from another one: equal times go by seq alone."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unordered) or int.__eq__(self, other)

    def __lt__(self, other: int) -> bool:
        return not isinstance(other, _Unordered) and int.__lt__(self, other)

    __hash__ = int.__hash__


class PriorityIgnoredInOrder(TimerScheduler):
    """Priorities are recorded, but the heap orders entries by run_at and seq only."""

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        version = super().schedule(task_id, run_at, priority, fn)
        with self._lock:
            tasks = self._tasks
            for part in (self._heap, self._sorted):
                for i, e in enumerate(part):
                    part[i] = blind = (e[0], _Unordered(e[1]), *e[2:])
                    if tasks[e[3]] is e:  # the id's current entry: the same tuple, still live
                        tasks[e[3]] = blind
            heapq.heapify(self._heap)
            self._sorted.sort(reverse=True)
        return version


class NeverCompacts(TimerScheduler):
    """Stale entries stay in the heap until next() meets them at the top."""

    def _compact_locked(self) -> None:
        pass


class CancelLeavesPendingRunnable(TimerScheduler):
    """cancel() of a pending version answers True but leaves it pending, to be run."""

    def cancel(self, task_id: Hashable) -> bool:
        if self.state(task_id) is TimerState.PENDING:
            return True
        return super().cancel(task_id)


class StaleCompleteAccepted(TimerScheduler):
    """A late complete() of an older version is applied to the current one."""

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        try:
            return super().complete(task_id, version, result)
        except StaleGenerationError as stale:
            return super().complete(task_id, stale.current, result)


class FollowsTheClockBack(TimerScheduler):
    """The scheduler's time is the clock's last reading, even when that went back."""

    def _follow(self) -> None:
        with self._lock:
            self._now = self._clock()

    def next(self) -> Due | Wait | None:
        self._follow()
        return super().next()

    def snapshot(self) -> TimerSnapshot:
        self._follow()
        return super().snapshot()


def _caught(broken: type[TimerScheduler]) -> Disagreement:
    started = time.perf_counter()
    with pytest.raises(Disagreement) as caught:
        run_timer_lockstep(broken, examples=300, steps=50, seed=0)
    print(f"{broken.__name__} caught in {time.perf_counter() - started:.1f}s:\n{caught.value}")
    # Hypothesis shrank the run: the calls are few, and the last is the failing one
    assert len(caught.value.calls) <= 10, caught.value
    assert [c.agrees for c in caught.value.calls].count(False) <= 1, caught.value
    return caught.value


def test_catches_priority_ignored_in_the_order() -> None:
    found = _caught(PriorityIgnoredInOrder)
    last = found.calls[-1]
    assert last.method == "next", found
    # next() hands out the wrong entry, or pops the wrong stale entries on its way
    assert ("the implementation returned Due(" in found.reason
            or "stats().rebuilds" in found.reason or "heap" in found.reason), found


def test_catches_a_heap_never_compacted() -> None:
    found = _caught(NeverCompacts)
    assert "the states differ after the call" in found.reason, found
    assert "heap (entries only in)" in found.reason, found
    assert "stats().rebuilds" in found.reason, found


def test_catches_a_cancel_that_leaves_the_version_runnable() -> None:
    found = _caught(CancelLeavesPendingRunnable)
    last = found.calls[-1]
    assert last.method == "cancel" and last.model == last.implementation == "True", found
    assert "tasks['" in found.reason and "'].state" in found.reason, found
    assert any(row.split()[1:] == ["cancelled", "pending"] and row.split()[0].endswith(".state")
               for row in last.diff.splitlines()), found


def test_catches_a_stale_complete_accepted() -> None:
    found = _caught(StaleCompleteAccepted)
    assert found.calls[-1].method == "complete", found
    # the implementation completed the current version (or tried to), the model refused
    assert re.search(r"the model (raised )?StaleGenerationError", found.reason), found
    # the message: the reason, then the run as Python calls with their answers
    message = str(found)
    assert message.startswith(found.reason)
    lines = message[len(found.reason):].splitlines()[1:]
    assert lines[:2] == ["clock = FakeClock()",
                         f"timer = factory(clock, rebuild_floor={found.rebuild_floor})"]
    failing = [ln for ln in lines if ln.startswith(found.calls[-1].text)]
    assert failing and "model: StaleGenerationError" in failing[-1], found


def test_catches_time_going_back_with_the_clock() -> None:
    found = _caught(FollowsTheClockBack)
    assert any(call.text == "clock.advance(-1)" for call in found.calls), found
    assert found.calls[-1].method in ("snapshot", "next"), found
    assert any(line.split()[:1] == ["now"] for line in found.calls[-1].diff.splitlines()), found


def test_ledger_lists_what_was_never_taken() -> None:
    ledger = Ledger()
    assert "Claim" in ledger.missing() and "compaction" in ledger.missing()
