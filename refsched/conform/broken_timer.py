"""Timer schedulers that each break one rule of ``docs/timer.md``, for showing that the checks
reject them.

Each is a :class:`refsched.TimerScheduler` subclass with one plausible bug, named after it, and
built as the checks build the real one (``factory(clock, rebuild_floor=n)``); the docstring
names the rule (in ``docs/timer.md``'s words, with its action of ``spec/TimerQueue.tla``) and the
bug. The replay of the timer corpus rejects some within a few steps and the timer lock-step
machine the others within a few calls (``tests/test_conform_broken_systems.py``); a bug in
``close()`` shows only in the replay, since the lock-step machine closes late.

Where the rule lives inside one step, the bug reaches into the scheduler's internals (named
where it does): these are seeded bugs, for one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from typing import Any

from refsched.errors import InvalidArgumentError, UnknownTaskError
from refsched.timer import TimerScheduler
from refsched.types import Due, TimerCloseReport, TimerState, Wait

__all__ = [
    "BROKEN",
    "CancelEndsRunning",
    "CloseForgetsRunning",
    "LastReportWins",
    "RescheduleKeepsPriority",
    "RescheduleReplacesRunning",
    "WaitFromStaleEntry",
]


class RescheduleKeepsPriority(TimerScheduler):
    """Schedule(t, r, p): every version of an id is due at its own ``run_at`` with its own
    ``priority``.

    Bug: ``schedule()`` of an id scheduled before moves its time but keeps the priority of its
    previous version.
    """

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        if type(priority) is int:  # a bad priority is left for the real schedule() to refuse
            with contextlib.suppress(UnknownTaskError, InvalidArgumentError):
                priority = self.view(task_id).priority
        return super().schedule(task_id, run_at, priority, fn)


class RescheduleReplacesRunning(TimerScheduler):
    """Schedule(t, r, p): rescheduling a running id raises ``TaskRunningError`` and changes
    nothing.

    Bug: ``schedule()`` only looks for a pending version to supersede, and starts a new version
    over a running one as if that had ended. (Internals: it shows the running record as
    completed to the real ``schedule()``.)
    """

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        with self._lock:
            try:
                record = self._tasks.get(task_id)
            except TypeError:  # an unhashable id: let the real schedule() refuse it
                record = None
            if record is None or record.state is not TimerState.RUNNING:
                record = None
            else:
                record.state = TimerState.COMPLETED
        try:
            return super().schedule(task_id, run_at, priority, fn)
        finally:
            if record is not None and record.state is TimerState.COMPLETED:  # refused
                record.state = TimerState.RUNNING


class WaitFromStaleEntry(TimerScheduler):
    """Idle: with nothing due, ``next()`` returns ``Wait(run_at - now)`` for the earliest *live*
    entry, or ``None`` when there is none.

    Bug: ``next()`` computes the wait from the heap's top entry as it found it, before the stale
    entries were dropped, so a cancelled or superseded version's time is reported.
    (Internals: it reads the top of the heap.)
    """

    def next(self) -> Due | Wait | None:
        with self._lock:
            top = self._heap[0][0] if self._heap else None
        answer = super().next()
        if top is not None and not isinstance(answer, Due):
            now = self.now
            if top > now:
                return Wait(top - now)
        return answer


class CancelEndsRunning(TimerScheduler):
    """Cancel(t): a running version stays running; ``cancel()`` only sets its cooperative stop
    request (``cancel_requested``) and returns False.

    Bug: ``cancel()`` ends a running version as cancelled, as it does a pending one, and
    returns True. (Internals: it changes the record's state.)
    """

    def cancel(self, task_id: Hashable) -> bool:
        with self._lock:
            try:
                record = self._tasks.get(task_id)
            except TypeError:  # an unhashable id: let the real cancel() refuse it
                record = None
            if record is not None and record.state is TimerState.RUNNING:
                record.state = TimerState.CANCELLED
                record.fn = None
                self._n_cancelled += 1
                return True
        return super().cancel(task_id)


class LastReportWins(TimerScheduler):
    """RepeatedCallback(t): a callback on a version that has ended returns its state and changes
    nothing.

    Bug: ``complete()`` of a version that failed marks it completed, and ``fail()`` of one that
    completed marks it failed: the last report wins. (Internals: it rewrites the record and the
    counters.)
    """

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        if self._overwrite(task_id, version, TimerState.COMPLETED, result):
            return TimerState.COMPLETED
        return super().complete(task_id, version, result)

    def fail(self, task_id: Hashable, version: int, error: Any = None) -> TimerState:
        if self._overwrite(task_id, version, TimerState.FAILED, error):
            return TimerState.FAILED
        return super().fail(task_id, version, error)

    def _overwrite(self, task_id: Hashable, version: object, outcome: TimerState,
                   value: Any) -> bool:
        """Turn the ended current version of ``task_id`` into ``outcome``; False if it is no
        ended version of the other outcome (the real callback then answers)."""
        ended = {TimerState.COMPLETED: TimerState.FAILED, TimerState.FAILED: TimerState.COMPLETED}
        with self._lock:
            try:
                record = self._tasks.get(task_id)
            except TypeError:  # an unhashable id: let the real callback refuse it
                return False
            if (record is None or type(version) is not int or version != record.version
                    or record.state is not ended[outcome]):
                return False
            record.state = outcome
            if outcome is TimerState.COMPLETED:
                record.result, record.error = value, None
                self._n_failed -= 1
                self._n_completed += 1
            else:
                record.result, record.error = None, value
                self._n_completed -= 1
                self._n_failed += 1
            return True


class CloseForgetsRunning(TimerScheduler):
    """Close: ``close()`` reports the pending versions it cancelled and the running versions it
    left to finish.

    Bug: the report lists only what was cancelled; the running ids, which their callers still
    have to wait for, are left out.
    """

    def close(self) -> TimerCloseReport:
        return TimerCloseReport(super().close().cancelled, ())


BROKEN: tuple[type[TimerScheduler], ...] = (
    RescheduleKeepsPriority, RescheduleReplacesRunning, WaitFromStaleEntry, CancelEndsRunning,
    LastReportWins, CloseForgetsRunning,
)
"""Every broken timer scheduler, in the order of the operations in ``docs/timer.md``."""
