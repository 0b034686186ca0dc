"""The timer scheduler's operations on the wire (``--system timer``).

The ops are the ``TimerScheduler`` API (``docs/timer.md``), plus ``advance``: the instance reads
time from a virtual clock that only the oracle moves, so a run is the same run wherever it goes.

======================================  ============================  =========================
request                                 call                          ``ok`` result
======================================  ============================  =========================
``new {rebuild_floor, now: 0}``         ``TimerScheduler(clock,       ``null``
                                        rebuild_floor=...)``, the
                                        clock reading ``now``
``advance {now}``                       the clock now reads ``now``   ``null``
                                        (it may go back: a clock
                                        misbehaving)
``schedule {task, run_at,               ``schedule(task, run_at,      the version
priority: 0}``                          priority)``
``cancel {task}``                       ``cancel(task)``              ``true`` / ``false``
``next {}``                             ``next()``                    ``{task_id, version}``
                                                                      (Due), ``{seconds}``
                                                                      (Wait) or ``null``
``complete`` / ``fail {task,            ``complete`` / ``fail``       a state
version}``
``close {}``                            ``close()``                   ``{cancelled, running}``
``snapshot {}``                         ``snapshot()``                the spec's variables
``stats {}``                            ``stats()``                   the counters
``state {task}``                        ``state(task)``               a state
======================================  ============================  =========================
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Hashable
from typing import Any

from refsched.conform.wire import Op, Remote, Wire, lazy
from refsched.types import (
    Due,
    TimerCloseReport,
    TimerSnapshot,
    TimerState,
    TimerStats,
    Wait,
)

__all__ = ["WIRE", "RemoteTimer", "ServedTimer"]


class _Clock:
    """The served scheduler's clock: it reads what the oracle last said."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ServedTimer:
    """A timer scheduler served over the wire, on a clock the oracle moves."""

    def __init__(self, factory: Callable[..., Any], rebuild_floor: Any, now: Any) -> None:
        self.clock = _Clock(now)
        self.timers = factory(self.clock, rebuild_floor=rebuild_floor)

    def advance(self, now: float) -> None:
        self.clock.now = now

    def schedule(self, task: str, run_at: float, priority: int) -> int:
        return int(self.timers.schedule(task, run_at, priority))

    def cancel(self, task: str) -> bool:
        return bool(self.timers.cancel(task))

    def next(self) -> Due | Wait | None:
        result: Due | Wait | None = self.timers.next()
        return result

    def complete(self, task: str, version: int) -> TimerState:
        return TimerState(self.timers.complete(task, version))

    def fail(self, task: str, version: int) -> TimerState:
        return TimerState(self.timers.fail(task, version))

    def close(self) -> TimerCloseReport:
        report: TimerCloseReport = self.timers.close()
        return report

    def snapshot(self) -> TimerSnapshot:
        snapshot: TimerSnapshot = self.timers.snapshot()
        return snapshot

    def stats(self) -> TimerStats:
        stats: TimerStats = self.timers.stats()
        return stats

    def state(self, task: str) -> TimerState:
        return TimerState(self.timers.state(task))


def _task(call: str, task_id: Hashable) -> str:
    if not isinstance(task_id, str):
        raise TypeError(f"{call}: task ids on the wire are strings, not {task_id!r}")
    return task_id


class RemoteTimer(Remote[TimerSnapshot, TimerStats]):
    """A timer scheduler over the protocol, with the ``TimerScheduler`` API.

    Built as the checks build a timer scheduler, ``RemoteTimer(impl, clock, rebuild_floor=n)``;
    before each call the clock's reading goes out as ``advance`` when it moved since the last.
    A task's function stays on this side: ``next()`` answers ``Due`` with ``fn`` None.
    """

    def __init__(self, implementation: Any, clock: Callable[[], float], *,
                 rebuild_floor: int = 64) -> None:
        self._clock = clock
        self._sent = clock()
        super().__init__(implementation, rebuild_floor=rebuild_floor, now=self._sent)

    def _call(self, op: str, **args: Any) -> Any:
        reading = self._clock()
        if reading != self._sent:
            super()._call("advance", now=reading)
            self._sent = reading
        return super()._call(op, **args)

    def schedule(self, task_id: Hashable, run_at: float, priority: int = 0,
                 fn: Callable[..., Any] | None = None) -> int:
        if (isinstance(run_at, numbers.Real) and not isinstance(run_at, (bool, int, float))):
            run_at = float(run_at)  # a Fraction, say: the contract takes it as a float
        result: int = self._call("schedule", task=_task("schedule", task_id), run_at=run_at,
                                 priority=priority)
        return result

    def cancel(self, task_id: Hashable) -> bool:
        result: bool = self._call("cancel", task=_task("cancel", task_id))
        return result

    def next(self) -> Due | Wait | None:
        result: Due | Wait | None = self._call("next")
        return result

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        state: TimerState = self._call("complete", task=_task("complete", task_id),
                                       version=version)
        return state

    def fail(self, task_id: Hashable, version: int, error: Any = None) -> TimerState:
        state: TimerState = self._call("fail", task=_task("fail", task_id), version=version)
        return state

    def close(self) -> TimerCloseReport:
        report: TimerCloseReport = self._call("close")
        return report

    def state(self, task_id: Hashable) -> TimerState:
        state: TimerState = self._call("state", task=_task("state", task_id))
        return state


def paired(factory: Callable[..., Any], pair: Callable[..., Any],
           profile: Any = None) -> Callable[..., Any]:
    """Instances as the timer's checks make them (``factory(clock, **options)``), each beside
    the reference model on the same clock (a profile narrows the calls, not their answers)."""
    def new(clock: Callable[[], float], **options: Any) -> Any:
        from refsched.model.timer import ReferenceTimerScheduler

        return pair(factory(clock, **options), ReferenceTimerScheduler(clock, **options),
                    clock=clock)
    return new


WIRE = Wire(
    system="timer",
    title="refsched.TimerScheduler",
    new=Op(("rebuild_floor",), {"now": 0}),
    ops={
        "advance": Op(("now",)),
        "schedule": Op(("task", "run_at"), {"priority": 0}, int),
        "cancel": Op(("task",), result=bool, flag="cancel"),
        "next": Op(result=Due | Wait | None),
        "complete": Op(("task", "version"), result=TimerState, flag="callbacks"),
        "fail": Op(("task", "version"), result=TimerState, flag="callbacks"),
        "close": Op(result=TimerCloseReport, flag="close"),
        "snapshot": Op(result=TimerSnapshot, flag="snapshot"),
        "stats": Op(result=TimerStats, flag="stats"),
        "state": Op(("task",), result=TimerState, flag="snapshot"),
    },
    serve=ServedTimer,
    default_factory=lazy("refsched.timer.scheduler:TimerScheduler"),
    remote=RemoteTimer,
    paired=paired,
)
RemoteTimer.wire = WIRE
