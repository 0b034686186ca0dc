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
from refsched.timer.scheduler import _STATE, _STATES, TimerScheduler
from refsched.types import Due, TimerCloseReport, TimerState, Wait

__all__ = [
    "BROKEN",
    "BROKEN_CLAUSES",
    "CancelEndsRunning",
    "CloseForgetsRunning",
    "CloseReportSortedById",
    "LastReportWins",
    "NegativeFloorAccepted",
    "NegativeVersionInvalid",
    "RescheduleKeepsPriority",
    "RescheduleReplacesRunning",
    "WaitFromStaleEntry",
]


def _slot(scheduler: TimerScheduler, task_id: Hashable) -> int | None:
    """The slot of ``task_id`` in the scheduler's columns; None for an unknown or unhashable id
    (the real method then refuses it). Lock held."""
    try:
        entry = scheduler._tasks.get(task_id)
    except TypeError:
        return None
    return None if entry is None else entry[5]


def _state(scheduler: TimerScheduler, slot: int) -> TimerState:
    """The state of the current version in ``slot``. Lock held."""
    return _STATES[scheduler._marks[slot] & _STATE]


def _set_state(scheduler: TimerScheduler, slot: int, state: TimerState) -> None:
    """Rewrite the state of the version in ``slot``, keeping its cancel request and claims.
    Lock held."""
    marks = scheduler._marks
    marks[slot] = marks[slot] & ~_STATE | _STATES.index(state)


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
    over a running one as if that had ended. (Internals: it shows the running version's mark as
    completed to the real ``schedule()``.)
    """

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        with self._lock:
            slot = _slot(self, task_id)
            if slot is not None and _state(self, slot) is TimerState.RUNNING:
                _set_state(self, slot, TimerState.COMPLETED)
            else:
                slot = None
        try:
            return super().schedule(task_id, run_at, priority, fn)
        finally:
            if slot is not None:
                with self._lock:
                    if _state(self, slot) is TimerState.COMPLETED:  # refused
                        _set_state(self, slot, TimerState.RUNNING)


class WaitFromStaleEntry(TimerScheduler):
    """Idle: with nothing due, ``next()`` returns ``Wait(run_at - now)`` for the earliest *live*
    entry, or ``None`` when there is none.

    Bug: ``next()`` computes the wait from the heap's top entry as it found it, before the stale
    entries were dropped, so a cancelled or superseded version's time is reported.
    (Internals: it reads the top of the heap.)
    """

    def next(self) -> Due | Wait | None:
        with self._lock:
            tops = [part[i] for part, i in ((self._heap, 0), (self._sorted, -1)) if part]
            top = min(tops)[0] if tops else None
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
    returns True. (Internals: it changes the version's mark.)
    """

    def cancel(self, task_id: Hashable) -> bool:
        with self._lock:
            slot = _slot(self, task_id)
            if slot is not None and _state(self, slot) is TimerState.RUNNING:
                _set_state(self, slot, TimerState.CANCELLED)
                self._payload[slot] = None
                self._n_cancelled += 1
                return True
        return super().cancel(task_id)


class LastReportWins(TimerScheduler):
    """RepeatedCallback(t): a callback on a version that has ended returns its state and changes
    nothing.

    Bug: ``complete()`` of a version that failed marks it completed, and ``fail()`` of one that
    completed marks it failed: the last report wins. (Internals: it rewrites the version's mark,
    its outcome and the counters.)
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
            slot = _slot(self, task_id)
            if (slot is None or type(version) is not int
                    or version != self._tasks[task_id][4]
                    or _state(self, slot) is not ended[outcome]):
                return False
            _set_state(self, slot, outcome)
            self._payload[slot] = value  # the result once completed, the error once failed
            if outcome is TimerState.COMPLETED:
                self._n_failed -= 1
                self._n_completed += 1
            else:
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


# -- one clause each, which random calls rarely or never reach: the clauses phase asks them -----

class NegativeVersionInvalid(TimerScheduler):
    """Rule ``timer.callback.negative-version``: a negative version is not the current one,
    so a report naming it raises ``StaleGenerationError``.

    Bug: it is taken for bad input and refused with ``InvalidArgumentError``.
    """

    rule = "timer.callback.negative-version"

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        if type(version) is int and version < 0 and task_id in self.snapshot().tasks:
            raise InvalidArgumentError(f"complete({task_id!r}, {version}): negative")
        return super().complete(task_id, version, result)


class CloseReportSortedById(TimerScheduler):
    """Rule ``timer.close.ok``: the close report lists the ids in the order their versions
    were scheduled.

    Bug: each list comes sorted by id.
    """

    rule = "timer.close.ok"

    def close(self) -> TimerCloseReport:
        report = super().close()
        return TimerCloseReport(cancelled=tuple(sorted(report.cancelled, key=repr)),
                                running=tuple(sorted(report.running, key=repr)))


class NegativeFloorAccepted(TimerScheduler):
    """Rule ``timer.new.invalid``: a negative ``rebuild_floor`` raises
    ``InvalidArgumentError``.

    Bug: it is taken as 0.
    """

    rule = "timer.new.invalid"

    def __init__(self, clock: Callable[[], float], *, rebuild_floor: int = 64,
                 **options: Any) -> None:
        if type(rebuild_floor) is int and rebuild_floor < 0:
            rebuild_floor = 0
        super().__init__(clock, rebuild_floor=rebuild_floor, **options)


BROKEN_CLAUSES: tuple[type[TimerScheduler], ...] = (
    NegativeVersionInvalid, CloseReportSortedById, NegativeFloorAccepted,
)
"""The timer schedulers that break a clause random calls rarely reach; each names it as
``rule``, and the clauses phase rejects each with a verdict naming that rule."""
