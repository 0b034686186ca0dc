"""Every wake-up of ``refsched.TimerRunner``: the dispatcher sleeping toward its deadline, the
dispatcher waiting for a free worker, the workers waiting for a claim, and ``close()`` waiting for
them, each released by the one event that should release it.

The dispatcher's sleeps are an hour long here: a test passes only if the change under test wakes
it, never by its timeout (tests/wakeup_support.py says how the tests wait).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from refsched import SchedulerError, TimerCloseReport, TimerRunner, TimerSnapshot, TimerState
from tests.wakeup_support import LONG, Blocked, closed, gated, until, waiting

HOUR = 3600.0  # a sleep only a lost wake-up waits out


class Steps:
    """Records the scheduler's steps; lets a test wait for the next one of a kind."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.steps: list[tuple[str, TimerSnapshot]] = []

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None:
        with self.cond:
            self.steps.append((action, state))
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.steps)

    def wait_for_idle(self, since: int, with_entry: str | None = None) -> None:
        """An Idle step after ``since`` (with ``with_entry`` in the heap): the dispatcher looked."""
        def seen() -> bool:
            return any(a == "Idle" and (with_entry is None
                                        or any(e.task_id == with_entry for e in s.heap))
                       for a, s in self.steps[since:])
        with self.cond:
            assert self.cond.wait_for(seen, LONG), (
                f"no Idle step within {LONG}s: the dispatcher was not woken; steps since: "
                f"{[a for a, _ in self.steps[since:]]}")


class ManualClock:
    """A clock the test sets; it never moves by itself. Far from zero, so that a deadline kept
    as a length of time instead of a time on the clock is caught."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class HeldClock:
    """A clock whose reading blocks while ``held``: the dispatcher stays inside ``next()`` (its
    reservation held) until the test lets it go."""

    def __init__(self) -> None:
        self.reading = threading.Event()
        self.go = threading.Event()

    def __call__(self) -> float:
        if not self.go.is_set():
            self.reading.set()
            assert self.go.wait(LONG)
        return time.monotonic()


@contextlib.contextmanager
def _opened(**options: Any) -> Iterator[TimerRunner]:
    """A runner closed on leaving, by a close that fails rather than hangs."""
    r = TimerRunner(**options)
    try:
        yield r
    finally:
        closed(r.close)


# -- the dispatcher asleep toward its deadline -------------------------------------------------

def test_an_earlier_entry_wakes_the_dispatcher_on_a_clock_far_from_zero() -> None:
    clock = ManualClock()
    steps = Steps()
    with _opened(max_workers=1, clock=clock, recorder=steps) as r:
        mark = steps.mark()
        r.schedule("late", clock.t + HOUR, lambda: "late")
        steps.wait_for_idle(mark, with_entry="late")  # asleep toward clock.t + HOUR
        clock.t += HOUR / 2  # read at the dispatcher's next look only
        early = r.schedule("early", clock.t, lambda: "early")  # before the deadline: a wake-up
        assert early.result(LONG) == "early"


def test_a_supersede_of_the_entry_slept_toward_wakes_the_dispatcher() -> None:
    steps = Steps()
    with _opened(max_workers=1, recorder=steps) as r:
        mark = steps.mark()
        first = r.schedule("a", time.monotonic() + HOUR, lambda: "first")
        steps.wait_for_idle(mark, with_entry="a")
        mark = steps.mark()
        r.schedule("a", time.monotonic() + 2 * HOUR, lambda: "second")  # later: its old entry
        assert first.cancelled()  # is stale, and the dispatcher looks again at once
        steps.wait_for_idle(mark + 1, with_entry="a")


def test_a_cancel_of_the_entry_slept_toward_wakes_the_dispatcher() -> None:
    steps = Steps()
    with _opened(max_workers=1, recorder=steps) as r:
        r.schedule("other", time.monotonic() + 2 * HOUR, lambda: None)
        mark = steps.mark()
        r.schedule("a", time.monotonic() + HOUR, lambda: None)
        steps.wait_for_idle(mark, with_entry="a")
        mark = steps.mark()
        assert r.cancel("a") is True
        steps.wait_for_idle(mark + 1, with_entry="other")


def test_close_wakes_the_dispatcher_asleep_toward_a_far_entry() -> None:
    steps = Steps()
    r = TimerRunner(max_workers=2, recorder=steps)
    mark = steps.mark()
    far = r.schedule("far", time.monotonic() + HOUR, lambda: None)
    steps.wait_for_idle(mark, with_entry="far")
    assert closed(r.close) == TimerCloseReport(cancelled=("far",), running=())
    assert far.cancelled()
    assert not any(thread.is_alive() for thread in r._threads)


class _BreakingRecorder(Steps):
    """Raises at every step named in ``actions``: the runner's own machinery fails, and so does
    the close it then makes."""

    def __init__(self, *actions: str) -> None:
        super().__init__()
        self.actions = actions

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None:
        super().record(action, params, state)
        if action in self.actions:
            raise RuntimeError(f"the recorder broke at {action}")


def test_a_runner_stopped_by_a_worker_wakes_its_dispatcher_asleep_toward_a_far_entry() -> None:
    steps = _BreakingRecorder("Complete", "Close")
    r = TimerRunner(max_workers=1, recorder=steps)
    mark = steps.mark()
    far = r.schedule("far", time.monotonic() + HOUR, lambda: None)
    steps.wait_for_idle(mark, with_entry="far")
    due = r.schedule("due", 0, lambda: "due")  # its worker fails reporting it: the runner stops
    for future in (due, far):
        assert isinstance(future.exception(LONG), SchedulerError)
    closed(r.close)
    assert not any(thread.is_alive() for thread in r._threads)


# -- the dispatcher waiting for a free worker --------------------------------------------------

def test_a_worker_that_reports_wakes_the_dispatcher_waiting_for_a_free_worker() -> None:
    started, gate = threading.Event(), threading.Event()
    with _opened(max_workers=1) as r:
        r.schedule("a", 0, gated(started, gate, "a"))
        assert started.wait(LONG)
        b = r.schedule("b", 0, lambda: "b")  # due, but the one worker is busy
        until(lambda: r._slot_wanted, "the dispatcher waits for a worker")
        assert r.scheduler.state("b") is TimerState.PENDING  # not claimed for nobody to run
        gate.set()
        assert b.result(LONG) == "b"


# -- close() waiting for the threads -----------------------------------------------------------

def test_close_is_released_when_the_running_function_returns() -> None:
    started, gate = threading.Event(), threading.Event()
    r = TimerRunner(max_workers=2)
    a = r.schedule("a", 0, gated(started, gate, "a"))
    assert started.wait(LONG)
    closer = Blocked(r.close)
    dispatcher = r._threads[0]
    dispatcher.join(LONG)  # closed, it leaves (and notifies close() on its way out): from here
    assert not dispatcher.is_alive()  # on only the worker's report can wake close()
    closer.until_waiting()
    gate.set()
    assert closer.result() == TimerCloseReport(cancelled=(), running=())
    assert a.result(0) == "a"
    assert not any(thread.is_alive() for thread in r._threads)


def test_close_is_released_when_the_dispatcher_comes_back_from_reading_the_clock() -> None:
    clock = HeldClock()
    r = TimerRunner(max_workers=1, clock=clock)  # the dispatcher's first look reads the clock
    assert clock.reading.wait(LONG)
    closer = Blocked(r.close)
    closer.until_waiting()  # for the dispatcher's reservation
    clock.go.set()
    assert closer.result() == TimerCloseReport()
    assert not any(thread.is_alive() for thread in r._threads)


def test_every_worker_waiting_for_a_claim_leaves_on_close() -> None:
    r = TimerRunner(max_workers=3)
    workers = r._threads[1:]
    for worker in workers:
        until(lambda worker=worker: waiting(worker), f"{worker.name} waits for a claim")
    closed(r.close)
    assert not any(thread.is_alive() for thread in r._threads)



class _HoldingSteps(Steps):
    """Steps whose next Idle step, once ``hold()`` is called, blocks inside ``next()`` (the
    scheduler's lock held) until ``release()``: the dispatcher has looked at the heap and not yet
    come back for the runner lock."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.holding = threading.Event()
        self.released = threading.Event()

    def hold(self) -> None:
        self.armed = True

    def release(self) -> None:
        self.armed = False
        self.released.set()

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None:
        super().record(action, params, state)
        if action == "Idle" and self.armed:
            self.holding.set()
            assert self.released.wait(LONG)


def test_an_entry_scheduled_while_the_dispatcher_is_in_next_makes_it_look_again() -> None:
    steps = _HoldingSteps()
    with _opened(max_workers=1, recorder=steps) as r:
        dispatcher = r._threads[0]
        until(lambda: waiting(dispatcher), "the dispatcher asleep, nothing scheduled")
        steps.hold()
        r.schedule("far", time.monotonic() + HOUR, lambda: None)  # wakes it: it looks again
        assert steps.holding.wait(LONG)  # next() found only "far": it answers Wait(an hour)
        due = Blocked(lambda: r.schedule("due", 0, lambda: "due"), name="schedule")
        # The schedule holds the runner lock and waits for the scheduler's: it lands after the
        # look, before the dispatcher takes the runner lock back to sleep on that answer.
        until(r._lock.locked, "the schedule of 'due' under way")
        steps.release()
        assert due.result().result(LONG) == "due"
