"""The interleaving explorer on the TimerScheduler and the TimerRunner: every timer scenario is
clean on the production classes, and deliberately broken subclasses are each caught, with a
schedule id that replays the failure.

Summaries are printed (run with ``-s`` to see the figures).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable
from concurrent.futures import Future
from typing import Any

import pytest

from refsched import TimerRunner, TimerScheduler, TimerState
from refsched.cli import main as refsched_main
from refsched.explore import (
    SCENARIOS,
    Context,
    ExploreConfig,
    Scenario,
    explore,
    replay,
    scenario,
)
from refsched.explore import runtime as rt
from refsched.explore.discipline import guarded_fields
from refsched.explore.timer import scenarios as timers
from refsched.timer import scheduler as timer_module
from refsched.types import Due, Wait
from tests.explore_support import (
    SeededBug,
    assert_explores_clean,
    assert_hooks_come_out,
    assert_seeded_bug_caught,
    bug_id,
)

BOUND = ExploreConfig(max_preemptions=2)
_PLAIN_COLUMN = timer_module._column  # as imported: restored after every run


# -- deliberately broken timers ------------------------------------------------------------

class SleepsThroughEarlier(TimerRunner):
    """A change that concerns the dispatcher only flags it, never wakes it: a schedule() of an
    entry earlier than the one the dispatcher sleeps toward is seen at the later deadline."""

    def _poke_locked(self) -> None:
        self._poke = True  # no self._wake.notify()


class CancelsTheFutureOfARun(TimerRunner):
    """cancel() of a version already claimed marks its future cancelled and returns True, but
    lets the version run: its function is neither stopped nor asked to stop."""

    def _cancel(self, task_id: Hashable, version: int | None) -> bool:
        if self._scheduler.state(task_id) is not TimerState.RUNNING:
            return super()._cancel(task_id, version)
        with self._lock:
            future = self._slots[task_id].future
        return Future.cancel(future)  # the base cancel: the runner is not told


class _Deaf:
    """A condition whose notify_all() wakes nobody."""

    def __init__(self, cond: Any) -> None:
        self._cond = cond

    def notify_all(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cond, name)


class CloseLeavesDispatcherAsleep(TimerRunner):
    """close() wakes the workers and close()'s own waiters, not the dispatcher: a dispatcher
    asleep toward an entry sleeps until that entry's time, and close() waits for it."""

    def _close_locked(self, out: list[Any], error: BaseException | None
                      ) -> tuple[Hashable, ...]:
        wake = self._wake
        self._wake = _Deaf(wake)  # type: ignore[assignment]
        try:
            return super()._close_locked(out, error)
        finally:
            self._wake = wake


class FlagsClosedUnlocked(TimerRunner):
    """close() sets the closed flag before it takes the runner lock."""

    def close(self, timeout: float | None = None) -> Any:
        self._closed = True
        return super().close(timeout)


class ClockOutsideTheLock(TimerScheduler):
    """next() moves the scheduler's time forward before it takes the lock."""

    def next(self) -> Due | Wait | None:
        self._now = max(self._now, self._clock())
        return super().next()


class ResultOutsideTheLock(TimerScheduler):
    """complete() stores the result in its column after it has released the lock."""

    def complete(self, task_id: Hashable, version: int, result: Any = None) -> TimerState:
        state = super().complete(task_id, version)
        self._payload[self._tasks[task_id][5]] = result
        return state


class HeldSlotWaitsForTheNextSlot(TimerRunner):
    """The end of a run gives its schedule's held slot back to the heap without waking the
    schedule thread: the held slot is made a run only at the next slot's time."""

    def _run_finished(self, rec: Any, task_id: str, future: Any) -> None:
        with self._lock:
            if rec.runs.pop(task_id, None) is not None and (
                    rec.unfinished == 0 and rec.state.held is not None and not rec.removed):
                self._slot_seq += 1
                rec.seq = self._slot_seq
                heapq.heappush(self._slot_heap, (-math.inf, rec.seq, rec))  # nobody woken


BUGS: list[SeededBug] = [
    (timers.timer_earlier_while_sleeping, SleepsThroughEarlier, "assertion",
     "early ran at t=10.0, not at its own time t=5.0"),
    (timers.timer_cancel_races_next, CancelsTheFutureOfARun, "assertion",
     "cancel() returned True, yet a ran"),
    (timers.timer_close_during_sleep, CloseLeavesDispatcherAsleep, "assertion",
     "close() was done at t=0.0 but returned at t=1000.0"),
    (timers.timer_close_during_sleep, FlagsClosedUnlocked, "lock discipline",
     "main wrote TimerRunner._closed at test_explore.py"),
    (timers.timer_next_races_changes, ClockOutsideTheLock, "lock discipline",
     "wrote TimerScheduler._now at test_explore.py"),
    (timers.timer_next_races_changes, ResultOutsideTheLock, "lock discipline",
     "wrote TimerScheduler._payload[0] (task 'a') at test_explore.py"),
    (timers.timer_held_slot_runs_when_its_run_ends, HeldSlotWaitsForTheNextSlot, "assertion",
     "it waited for the next slot's time"),
]


# -- the production classes are clean ------------------------------------------------------

# The schedule thread is a fourth thread: with it, no preemption already gives some 8,000 runs.
BOUNDS = {"timer_held_slot_runs_when_its_run_ends": ExploreConfig(max_preemptions=0)}


@pytest.mark.parametrize("name", list(timers.TIMER_SCENARIOS))
def test_every_timer_scenario_explores_clean_within_two_preemptions(name: str) -> None:
    report = assert_explores_clean(timers.TIMER_SCENARIOS[name], BOUNDS.get(name, BOUND))
    assert report.executions > 1 and report.schedules > 1, report.summary()


def test_the_catalogue_knows_the_timer_scenarios() -> None:
    for name, timer_scenario in timers.TIMER_SCENARIOS.items():
        assert SCENARIOS[name] is timer_scenario
        assert scenario(name) is timer_scenario


# -- broken timers are caught, and the failure replays -------------------------------------

@pytest.mark.parametrize("case", BUGS, ids=bug_id)
def test_a_broken_timer_is_caught_and_replays(case: SeededBug) -> None:
    assert_seeded_bug_caught(case, BOUND)


def test_a_column_written_without_its_timer_schedulers_lock_names_that_lock() -> None:
    report = explore(timers.timer_next_races_changes(ResultOutsideTheLock), BOUND)
    failure = report.failures[0]
    assert "without holding that TimerScheduler's lock (Lock" in failure.message, failure.report()


def test_every_kind_of_column_write_without_the_lock_is_caught() -> None:
    # An item assignment, then a list method, outside the scheduler's lock (schedule() appends
    # under it, and passes).
    def body(ctx: Context) -> None:
        s = TimerScheduler(rt.clock)
        s.schedule("a", 0.0)
        s._marks[0] = s._marks[0]

    report = explore(Scenario("column_write", body), ExploreConfig(max_preemptions=0))
    assert report.failures and report.failures[0].kind == "lock discipline", report.summary()
    assert "wrote TimerScheduler._marks[0] (task 'a')" in report.failures[0].message

    def extend(ctx: Context) -> None:
        TimerScheduler(rt.clock)._payload.extend([None])

    report = explore(Scenario("column_extend", extend), ExploreConfig(max_preemptions=0))
    assert report.failures and "wrote TimerScheduler._payload.extend()" in (
        report.failures[0].message), report.summary()


# -- lock discipline -----------------------------------------------------------------------

def test_the_timer_classes_guard_the_fields_init_assigns_after_the_lock() -> None:
    scheduler_fields = guarded_fields(TimerScheduler)
    assert {"_now", "_closed", "_next_seq", "_tasks", "_heap", "_stale",
            "_n_cancelled"} <= scheduler_fields
    assert not {"_clock", "_floor", "_recorder", "_lock"} & scheduler_fields
    runner_fields = guarded_fields(TimerRunner)
    assert {"_slots", "_queue", "_busy", "_claiming", "_deadline", "_poke",
            "_closed"} <= runner_fields
    assert not {"_scheduler", "_max_workers", "_lock"} & runner_fields


def test_the_timer_hooks_come_out_after_a_run() -> None:
    assert_hooks_come_out(timers.timer_next_races_changes(), (TimerScheduler, TimerRunner))
    assert timer_module._column is _PLAIN_COLUMN
    assert type(TimerScheduler()._marks) is list


# -- the virtual clock ---------------------------------------------------------------------

def test_the_virtual_clock_is_a_step_inside_a_run_and_refused_outside() -> None:
    seen: list[float] = []

    def body(ctx: Context) -> None:
        event = rt.Event()
        seen.append(rt.clock())
        event.wait(3.0)  # nobody sets it: times out, moving the clock to 3
        seen.append(rt.clock())

    clock_scenario = Scenario("clock", body)
    report = explore(clock_scenario)
    assert report.ok and report.executions == 1 and seen == [0.0, 3.0], report.summary()
    result = replay(clock_scenario, next(iter(report.ids)))
    assert [step.kind for step in result.steps].count(rt.READ_CLOCK) == 2
    with pytest.raises(RuntimeError, match="outside a run"):
        rt.clock()


# -- the command line ----------------------------------------------------------------------

def test_refsched_explore_runs_a_timer_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert refsched_main(["explore", "timer_earlier_while_sleeping"]) == 0
    out = capsys.readouterr().out
    assert "timer_earlier_while_sleeping" in out and "clean" in out
    assert refsched_main(["explore", "--list"]) == 0
    assert "timer_close_during_sleep" in capsys.readouterr().out
