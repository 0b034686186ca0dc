"""Traces of spec/TimerQueue.tla recorded from the production TimerScheduler as it runs.

A :class:`TimerTraceRecorder` is a :class:`refsched.TimerRecorder`: given to a TimerScheduler
(or a TimerRunner) it receives each spec step at its linearization point, under the
scheduler's lock, so the recorded order is the order the steps took effect, whatever the
threads did. :meth:`TimerTraceRecorder.trace` turns the steps into a
:class:`~refsched.verify.itf.Trace`, with the clock's moves as the spec's ``Tick`` steps.

Time. The spec's ``now`` is a natural number that ``Tick`` moves on by one; the scheduler's
time is its own variable, ``max`` of the readings of its clock, set under its lock in the
critical section of the ``next()`` that read the clock (or of a ``snapshot()``, which is no
step). A recorded run maps onto the spec's integer time as follows, and the mapping is sound:

- The clock reads whole multiples of a tick, a power of two seconds (:data:`TICK`), and every
  ``run_at`` is a whole multiple too. Such multiples, their differences and their comparisons
  are exact in binary floating point, so the scheduler computes on them exactly as it would on
  the integers ``time / tick``: dividing every time by the tick maps the run onto an integer
  clock without changing a single decision.
- Between two recorded steps nothing but the scheduler's time can change (every other change
  is a step). When a step's state shows the time ``m`` ticks on from the state before, the
  trace has ``m`` Tick steps just before it: a Tick changes only ``now``, and the step itself
  judged what was due at the new time, which it read in its own critical section. The states
  at the recorded steps are exactly the scheduler's.
- The clock is moved on by the recording harness alone, one tick at a time, and it decides
  only which tick each of the harness's calls lands on: the dispatcher and the workers are real
  threads on their own schedule. The runner sleeps ``Wait(d)`` as ``d`` seconds while the
  harness moves the clock one tick per tick of real time, so a dispatcher that wakes before
  its tick finds nothing due (an Idle step) and one that wakes late claims late: the spec has
  no fairness on time, so both are its behaviours.

:func:`record_timer_run` records one random run of the :class:`refsched.TimerRunner`.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from refsched.errors import SchedulerError
from refsched.timer.runner import TimerRunner
from refsched.types import TimerEntry, TimerSnapshot, TimerState
from refsched.verify.itf import Step as TraceStep
from refsched.verify.itf import Trace
from refsched.verify.steplog import StepLog, task_function
from refsched.verify.timer import spec as timerspec

__all__ = ["TICK", "TickClock", "TimerTraceRecorder", "record_timer_run"]

TICK = 2.0 ** -5
"""Seconds of a recording clock's tick (1/32 s): a power of two, so multiples stay exact."""

_WAIT = 30.0  # seconds: a run that needs this long is stuck, not slow


class TickClock:
    """A clock that reads whole ticks of ``tick`` seconds and moves only when told to."""

    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        self.ticks = 0  # moved on by one thread (the harness); readers see before or after

    def __call__(self) -> float:
        return self.ticks * self.tick

    def advance(self) -> None:
        """Move on by one tick."""
        self.ticks += 1


class TimerTraceRecorder(StepLog[TimerSnapshot]):
    """Collects the spec steps of one timer scheduler; builds the :class:`Trace` they form.

    ``tick``: the seconds of one tick of the scheduler's clock (1 for a clock that counts
    ticks). Every time the scheduler holds must be a whole number of ticks.
    """

    def __init__(self, tick: float = 1) -> None:
        if not tick > 0:
            raise ValueError(f"TimerTraceRecorder(tick={tick!r}): must be a positive number")
        super().__init__()
        self.tick = tick

    def task_ids(self) -> list[Hashable]:
        """Every id the steps name, first seen first."""
        seen: dict[Hashable, None] = {}
        for _, params, state in self.steps:
            if "t" in params:
                seen[params["t"]] = None
            seen.update(dict.fromkeys(state.tasks))
        return list(seen)

    def _ticks(self, time_: float) -> int:
        ticks = time_ / self.tick
        if not float(ticks).is_integer():
            raise ValueError(f"the time {time_!r} is not a whole number of ticks of "
                             f"{self.tick!r} s: the spec's time is an integer")
        return int(ticks)

    def _in_ticks(self, s: TimerSnapshot) -> TimerSnapshot:
        """``s`` with every time counted in ticks."""
        return s.replace(
            now=self._ticks(s.now),
            tasks={t: replace(v, run_at=self._ticks(v.run_at)) for t, v in s.tasks.items()},
            heap=frozenset(TimerEntry(self._ticks(e.run_at), *e[1:]) for e in s.heap))

    def trace(self, rebuild_floor: int, *, name: str = "recorded",
              tasks: Iterable[Hashable] | None = None,
              meta: Mapping[str, Any] | None = None) -> Trace:
        """The recorded behaviour as a Trace over ``tasks`` (default: :meth:`task_ids`).

        Constants: ``Tasks`` and ``RebuildFloor``; the initial state is the spec's ``Init``
        (time 0, nothing scheduled); the time moving on shows as Tick steps, one per tick, just
        before the step that first saw it. ``ValueError`` if a time is no whole number of
        ticks or the time went back.
        """
        ids = list(self.task_ids() if tasks is None else tasks)
        before = TimerSnapshot()
        steps: list[TraceStep] = []
        for action, params, recorded in self.steps:
            state = self._in_ticks(recorded)
            if state.now < before.now:
                raise ValueError(f"{action}: the time went back from {before.now} to "
                                 f"{state.now} ticks")
            while before.now < state.now:
                before = before.replace(now=before.now + 1)
                steps.append(TraceStep("Tick", {}, timerspec.spec_state(before, ids)))
            if "r" in params:
                params = {**params, "r": self._ticks(params["r"])}
            steps.append(TraceStep(action, params, timerspec.spec_state(state, ids)))
            before = state
        return Trace(name=name, constants={"Tasks": ids, "RebuildFloor": rebuild_floor},
                     initial=timerspec.spec_state(TimerSnapshot(), ids), steps=tuple(steps),
                     meta=dict(meta or {}))


# -- random runs of the TimerRunner ---------------------------------------------------------

def _function(rng: random.Random, kind: str) -> Callable[..., Any]:
    """A task function of one kind, its duration drawn now from ``rng`` (in ticks)."""
    return task_function(rng, kind, pause=(0.2, 1.5), patience=(1.0, 3.0), unit=TICK)


_KINDS = ("succeed", "sleep", "sleep", "raise", "watch", "watch")


def record_timer_run(seed: int, *, tasks: int = 5, workers: int = 2) -> Trace:
    """Record one random run of a :class:`TimerRunner` with ``workers`` threads over ``tasks`` ids.

    The runner reads a :class:`TickClock` that this thread moves on one tick (:data:`TICK`
    seconds) at a time, sleeping a tick in between, for a horizon of a few ticks. From the
    seed: at each tick, a few calls: schedule an id (due in the past, now or a few ticks on,
    with a priority of 0 to 2; again while it is pending supersedes it, while it runs is refused),
    or cancel one (pending, running or ended). Each function succeeds, sleeps for part of a
    tick, raises, or waits on its cancel token. After the horizon the run reports a late
    duplicate and a stale callback as a lost worker would, may schedule one id far ahead, and
    closes. The dispatcher and the workers are real threads: which step comes when is up to
    them. The Trace is named ``timer-seed-<seed>``; ``ValueError`` for ``tasks`` or
    ``workers`` below 1.
    """
    for label, value in (("tasks", tasks), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"record_timer_run({seed!r}): {label}={value!r}: must be an "
                             "integer >= 1")
    rng = random.Random(seed)
    ids = [f"t{i}" for i in range(tasks)]
    horizon = rng.randint(4, 7)
    rebuild_floor = rng.choice((0, 1, 2))
    clock = TickClock(TICK)
    recorder = TimerTraceRecorder(tick=TICK)
    runner = TimerRunner(max_workers=workers, clock=clock, rebuild_floor=rebuild_floor,
                         recorder=recorder)
    scheduled: list[str] = []
    try:
        for now in range(horizon):
            for _ in range(rng.randint(1, 3)):
                t = rng.choice(ids)
                if scheduled and rng.random() < 0.3:
                    with contextlib.suppress(SchedulerError):  # UnknownTaskError: no step
                        runner.cancel(rng.choice(scheduled))
                    continue
                run_at = max(0, now + rng.randint(-1, 3)) * TICK
                fn = _function(rng, rng.choice(_KINDS))
                with contextlib.suppress(SchedulerError):  # TaskRunningError: no step
                    runner.schedule(t, run_at, fn, priority=rng.randint(0, 2))
                    scheduled.append(t)
            time.sleep(TICK)
            clock.advance()
        if scheduled:
            _late_reports(runner, rng.choice(scheduled))
        if rng.random() < 0.5:  # pending when the runner closes: Close cancels it
            with contextlib.suppress(SchedulerError):
                runner.schedule(rng.choice(ids), (horizon + 10) * TICK,
                                _function(rng, "succeed"))
        time.sleep(TICK)  # the last tick's work may still be claimed
    finally:
        runner.close(timeout=_WAIT)
    return recorder.trace(rebuild_floor, name=f"timer-seed-{seed}", meta={
        "source": "refsched.verify.timer.recording.record_timer_run",
        "seed": seed, "tasks": tasks, "workers": workers, "tick": TICK,
    })


def _late_reports(runner: TimerRunner, task_id: Hashable) -> None:
    """Report ``task_id`` again, as a worker that lost a race would: for a version that is not
    the current one (StaleCallback) and, once the current one ended, for it (RepeatedCallback).

    Taken on the scheduler directly: neither changes anything, so the runner's futures stay
    right.
    """
    scheduler = runner.scheduler
    view = scheduler.view(task_id)
    other = view.version - 1 if view.version > 1 else view.version + 1
    # StaleGenerationError, and a step all the same
    with contextlib.suppress(SchedulerError):
        scheduler.complete(task_id, other)
    if view.state in (TimerState.COMPLETED, TimerState.FAILED, TimerState.CANCELLED):
        scheduler.complete(task_id, view.version)
