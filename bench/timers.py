"""The timer scheduler against ``sched.scheduler``: workloads and contenders.

A workload is a list of ``(task_id, run_at, priority)`` entries, built once from a fixed seed
and given to every contender; each contender does the whole job on a fake clock (nobody sleeps)
and returns how many entries it handled, which must be the workload's length. Every function
that comes due is called (a no-op), on both sides.

``sched.scheduler`` orders by ``(time, priority)`` with the lower priority number first; ours
runs the higher priority first. The workloads draw priorities so both orders are exercised; the
order itself is checked by the tests, not here.
"""

from __future__ import annotations

import contextlib
import random
import sched
from collections.abc import Callable

from refsched import Due, TimerScheduler
from refsched.errors import TaskRunningError

Entry = tuple[int, float, int]
Workload = list[Entry]
TimerContender = Callable[[Workload], int]

SEED = 20_261_130
HORIZON = 1_000.0  # run_at is drawn from [0, HORIZON)


def entries(n: int, *, seed: int = SEED) -> Workload:
    """``n`` entries with distinct ids, times drawn from [0, HORIZON), priorities 0..3."""
    rng = random.Random(f"{seed}-{n}")
    return [(i, rng.random() * HORIZON, rng.randrange(4)) for i in range(n)]


class FakeClock:
    """A clock that says whatever it was set to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _noop() -> None:
    return None


def _no_delay(seconds: float) -> None:
    return None


def _drain(timers: TimerScheduler) -> int:
    """Take every due version with next() and complete it after calling its function."""
    ran = 0
    take, complete = timers.next, timers.complete
    while True:
        due = take()
        if type(due) is not Due:
            return ran
        due.fn()
        complete(due.task_id, due.version)
        ran += 1


# -- schedule every entry, then run them all -------------------------------------------------

def drain_refsched(workload: Workload) -> int:
    clock = FakeClock()
    timers = TimerScheduler(clock)
    schedule = timers.schedule
    for task_id, run_at, priority in workload:
        schedule(task_id, run_at, priority, _noop)
    clock.now = HORIZON
    ran = _drain(timers)
    assert ran == len(workload), ran
    return ran


def drain_sched(workload: Workload) -> int:
    clock = FakeClock()
    s = sched.scheduler(clock, _no_delay)
    enterabs = s.enterabs
    for _task_id, run_at, priority in workload:
        enterabs(run_at, priority, _noop)
    clock.now = HORIZON
    s.run()
    assert s.empty()
    return len(workload)


# -- schedule every entry, cancel every other one, run the rest --------------------------------

def cancel_half_refsched(workload: Workload) -> int:
    clock = FakeClock()
    timers = TimerScheduler(clock)
    schedule, cancel = timers.schedule, timers.cancel
    for task_id, run_at, priority in workload:
        schedule(task_id, run_at, priority, _noop)
    for task_id, _run_at, _priority in workload[::2]:
        cancel(task_id)
    clock.now = HORIZON
    ran = _drain(timers)
    assert ran == len(workload) // 2, ran
    return len(workload)


def cancel_half_sched(workload: Workload) -> int:
    clock = FakeClock()
    s = sched.scheduler(clock, _no_delay)
    enterabs, cancel = s.enterabs, s.cancel
    events = [enterabs(run_at, priority, _noop) for _task_id, run_at, priority in workload]
    for event in events[::2]:
        cancel(event)
    clock.now = HORIZON
    s.run()
    return len(workload)


# -- schedule every entry, reschedule each three times, run the last versions ------------------

RESCHEDULES = 3


def _later(run_at: float, k: int) -> float:
    return (run_at + 7.0 * k) % HORIZON


def reschedule_refsched(workload: Workload) -> int:
    clock = FakeClock()
    timers = TimerScheduler(clock)
    schedule = timers.schedule
    for k in range(RESCHEDULES + 1):  # the first pass schedules, the others supersede
        for task_id, run_at, priority in workload:
            schedule(task_id, _later(run_at, k), priority, _noop)
    clock.now = HORIZON
    ran = _drain(timers)
    assert ran == len(workload), ran
    return len(workload)


def reschedule_sched(workload: Workload) -> int:
    """sched has no reschedule: cancel the event and enter the new one, the idiom users write."""
    clock = FakeClock()
    s = sched.scheduler(clock, _no_delay)
    enterabs, cancel = s.enterabs, s.cancel
    events = {task_id: enterabs(run_at, priority, _noop)
              for task_id, run_at, priority in workload}
    for k in range(1, RESCHEDULES + 1):
        for task_id, run_at, priority in workload:
            cancel(events[task_id])
            events[task_id] = enterabs(_later(run_at, k), priority, _noop)
    clock.now = HORIZON
    s.run()
    return len(workload)


# -- garbage: the heap's size against the live entries, throughout -----------------------------

def worst_garbage(workload: Workload, *, seed: int = SEED) -> tuple[int, int, int]:
    """Random schedules, reschedules, cancels and claims over ``workload``'s ids, checking
    ``stats()`` after every call: (calls, the most heap - 2 * live seen, rebuild_floor)."""
    rng = random.Random(f"{seed}-garbage-{len(workload)}")
    clock = FakeClock()
    timers = TimerScheduler(clock)
    worst = -len(workload)
    calls = 0
    scheduled: set[int] = set()
    for task_id, run_at, priority in workload:
        for _ in range(rng.randrange(1, 5)):
            roll = rng.random()
            if roll < 0.6:
                with contextlib.suppress(TaskRunningError):  # a refusal that changes nothing
                    timers.schedule(task_id, run_at + rng.random() * 10, priority, _noop)
                scheduled.add(task_id)
            elif roll < 0.9:
                if task_id in scheduled:
                    timers.cancel(task_id)
            else:
                clock.now += 1.0
                due = timers.next()
                if type(due) is Due:
                    timers.complete(due.task_id, due.version)
            calls += 1
            stats = timers.stats()
            worst = max(worst, stats.heap - 2 * stats.live)
    return calls, worst, timers.rebuild_floor
