"""Tests of ``refsched.TimerRunner``: a dispatcher thread and worker threads over a TimerScheduler.

Nothing here asserts on speed. Times are tens of milliseconds on the real clock; what the tests
wait for is signalled (events, the scheduler's recorded steps), and every wait that could hang
carries a generous timeout, so a bug fails the test instead of stalling the run. "Promptly" means
well within ``SOON``, against a sleep of ``LONG`` that would follow a lost wake-up.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any, TypeVar

import pytest

from refsched import (
    Cancelled,
    CancelToken,
    InvalidArgumentError,
    SchedulerClosedError,
    SchedulerError,
    TaskRunningError,
    TimerCloseReport,
    TimerFuture,
    TimerRunner,
    TimerSnapshot,
    TimerState,
    UnknownTaskError,
)
from tests.user_code_support import BASE_EXCEPTIONS, logged, returns_within
from tests.wakeup_support import gated

LONG = 60.0  # seconds: a sleep that only a lost wake-up would wait out
SOON = 10.0  # seconds: a generous bound for what must happen at once

_T = TypeVar("_T")


class StepRecorder:
    """Keeps the scheduler's steps; lets a test wait for a step it expects."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.steps: list[tuple[str, dict[str, Any], TimerSnapshot]] = []

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None:
        with self.cond:
            self.steps.append((action, params, state))
            self.cond.notify_all()

    def mark(self) -> int:
        with self.cond:
            return len(self.steps)

    def wait_for(self, action: str, since: int = 0,
                 where: Callable[[TimerSnapshot], bool] = lambda state: True,
                 timeout: float = SOON) -> int:
        """Wait for a step ``action`` after index ``since`` whose state passes ``where``."""
        def found() -> int | None:
            for i in range(since, len(self.steps)):
                a, _, state = self.steps[i]
                if a == action and where(state):
                    return i
            return None

        with self.cond:
            assert self.cond.wait_for(lambda: found() is not None, timeout), (
                f"no {action} step within {timeout}s; steps: "
                f"{[a for a, _, _ in self.steps[since:]]}")
            index = found()
            assert index is not None
            return index

    def count(self, action: str, since: int = 0) -> int:
        with self.cond:
            return sum(1 for a, _, _ in self.steps[since:] if a == action)


def asleep_with(task_id: str) -> Callable[[TimerSnapshot], bool]:
    """An Idle state in which ``task_id`` waits in the heap: the dispatcher is going to sleep."""
    return lambda state: any(e.task_id == task_id for e in state.heap)


def now() -> float:
    return time.monotonic()


# ---------------------------------------------------------------------- timing


def test_a_function_runs_at_its_time_and_not_before() -> None:
    with TimerRunner(max_workers=2) as r:
        at = now() + 0.05
        future = r.schedule("a", at, now)
        assert isinstance(future, TimerFuture) and future.version == 1
        ran_at = future.result(SOON)
        assert ran_at >= at
        assert r.scheduler.state("a") is TimerState.COMPLETED
        assert r.scheduler.outcome("a") == ran_at


def test_due_functions_run_in_time_then_priority_then_scheduling_order() -> None:
    gate = threading.Event()
    started = threading.Event()
    order: list[str] = []

    with TimerRunner(max_workers=1) as r:
        r.schedule("blocker", 0, gated(started, gate))
        assert started.wait(SOON)  # the one worker is busy: nothing else is claimed now
        base = now()
        futures = [r.schedule(name, base - when, (lambda name=name: order.append(name)), prio)
                   for name, when, prio in [("low", 1.0, 0), ("high", 1.0, 5), ("mid", 1.0, 2),
                                            ("mid2", 1.0, 2), ("earliest", 2.0, -9)]]
        gate.set()
        for f in futures:
            f.result(SOON)
    assert order == ["earliest", "high", "mid", "mid2", "low"]


def test_an_earlier_entry_scheduled_while_the_dispatcher_sleeps_runs_first_and_promptly() -> None:
    rec = StepRecorder()
    with TimerRunner(max_workers=2, recorder=rec) as r:
        late = r.schedule("late", now() + LONG, lambda: "late")
        rec.wait_for("Idle", where=asleep_with("late"))
        early = r.schedule("early", now() + 0.02, lambda: "early")
        assert early.result(SOON) == "early"  # a missed wake-up would sleep LONG
        assert not late.done()
        assert r.scheduler.state("late") is TimerState.PENDING
    assert late.cancelled()


def test_the_dispatcher_sleeps_instead_of_polling() -> None:
    rec = StepRecorder()
    with TimerRunner(max_workers=2, recorder=rec) as r:
        r.schedule("late", now() + LONG, lambda: None)
        mark = rec.wait_for("Idle", where=asleep_with("late"))
        time.sleep(0.2)
        # A spinning dispatcher would have taken thousands of Idle steps by now.
        assert rec.count("Idle", since=mark + 1) <= 2


def test_cancel_wakes_the_dispatcher_which_drops_the_stale_entry() -> None:
    rec = StepRecorder()
    with TimerRunner(max_workers=1, recorder=rec) as r:
        future = r.schedule("a", now() + LONG, lambda: "never")
        rec.wait_for("Idle", where=asleep_with("a"))
        mark = rec.mark()
        assert r.cancel("a") is True
        assert future.cancelled()
        # Woken at once, the dispatcher looks again: the heap is empty, it sleeps for good.
        rec.wait_for("Idle", since=mark, where=lambda state: not state.heap)
        assert r.stats().heap == 0 and r.stats().cancelled == 1
        assert r.cancel("a") is False  # terminal now


# ---------------------------------------------------------------------- workers


def test_at_most_max_workers_functions_run_at_once_and_that_many_do() -> None:
    workers = 3
    barrier = threading.Barrier(workers, timeout=SOON)
    lock = threading.Lock()
    running = 0
    peak = 0

    def task(i: int) -> Callable[[], int]:
        def fn() -> int:
            nonlocal running, peak
            with lock:
                running += 1
                peak = max(peak, running)
            if i < workers:
                barrier.wait()  # the first three must run together
            else:
                time.sleep(0.002)
            with lock:
                running -= 1
            return i
        return fn

    with TimerRunner(max_workers=workers) as r:
        futures = [r.schedule(i, 0, task(i)) for i in range(20)]
        assert [f.result(SOON) for f in futures] == list(range(20))
    assert peak == workers


def test_an_exception_fails_only_its_own_task() -> None:
    error = ValueError("boom")

    def bad() -> None:
        raise error

    with TimerRunner(max_workers=2) as r:
        ok1 = r.schedule("ok1", 0, lambda: 1)
        failing = r.schedule("bad", 0, bad)
        ok2 = r.schedule("ok2", now() + 0.02, lambda: 2)
        assert failing.exception(SOON) is error
        with pytest.raises(ValueError, match="boom"):
            failing.result(0)
        assert ok1.result(SOON) == 1 and ok2.result(SOON) == 2
        assert r.scheduler.state("bad") is TimerState.FAILED
        assert r.scheduler.outcome("bad") is error
        assert r.scheduler.state("ok2") is TimerState.COMPLETED
        # The runner goes on after the failure.
        assert r.schedule("after", 0, lambda: 3).result(SOON) == 3
        stats = r.stats()
        assert (stats.completed, stats.failed) == (3, 1)


def test_a_function_with_a_token_stops_when_cancelled_and_its_future_is_cancelled() -> None:
    started = threading.Event()
    seen: list[CancelToken] = []

    def fn(token: CancelToken) -> str:
        seen.append(token)
        started.set()
        assert token.wait(SOON)
        token.raise_if_cancelled()
        return "not reached"

    with TimerRunner(max_workers=1) as r:
        future = r.schedule("t", 0, fn)
        assert started.wait(SOON)
        assert future.running()
        assert seen[0].task_id == "t" and seen[0].generation == 1
        assert r.cancel("t") is False  # running: a request, not a cancel
        with pytest.raises(cf.CancelledError):
            future.result(SOON)
        assert future.cancelled()
        assert r.scheduler.state("t") is TimerState.FAILED
        assert isinstance(r.scheduler.outcome("t"), Cancelled)
        assert r.scheduler.view("t").cancel_requested


def test_a_function_may_ignore_the_cancel_request_and_complete() -> None:
    started = threading.Event()
    proceed = threading.Event()

    def fn(token: CancelToken) -> bool:
        started.set()
        assert proceed.wait(SOON)
        return token.cancelled

    with TimerRunner(max_workers=1) as r:
        future = r.schedule("t", 0, fn)
        assert started.wait(SOON)
        assert future.cancel() is False
        proceed.set()
        assert future.result(SOON) is True
        assert r.scheduler.state("t") is TimerState.COMPLETED


def test_future_cancel_of_a_pending_version_cancels_it() -> None:
    ran = threading.Event()
    with TimerRunner(max_workers=1) as r:
        future = r.schedule("a", now() + LONG, ran.set)
        assert future.cancel() is True
        assert future.cancelled() and future.cancel() is True
        assert r.scheduler.state("a") is TimerState.CANCELLED
    assert not ran.is_set()


def test_a_reschedule_ends_the_superseded_future_as_cancelled_and_its_function_never_runs(
) -> None:
    calls: list[str] = []

    def run_new() -> str:
        calls.append("new")
        return "new"

    with TimerRunner(max_workers=2) as r:
        old = r.schedule("x", now() + 0.05, lambda: calls.append("old"))
        new = r.schedule("x", now() + 0.02, run_new)
        assert old.cancelled() and old.done()
        assert (old.version, new.version) == (1, 2)
        assert old.cancel() is True  # done: says it was cancelled, changes nothing
        assert new.result(SOON) == "new"
        time.sleep(0.08)  # past the old version's time
    assert calls == ["new"]


def test_rescheduling_a_running_task_is_refused_and_its_run_goes_on() -> None:
    started = threading.Event()
    proceed = threading.Event()

    fn = gated(started, proceed, "done")
    with TimerRunner(max_workers=1) as r:
        future = r.schedule("a", 0, fn)
        assert started.wait(SOON)
        with pytest.raises(TaskRunningError):
            r.schedule("a", 0, fn)
        proceed.set()
        assert future.result(SOON) == "done"
        again = r.schedule("a", 0, lambda: "again")
        assert again.version == 2 and again.result(SOON) == "again"


def test_bad_calls_are_refused() -> None:
    with TimerRunner(max_workers=1) as r:
        with pytest.raises(InvalidArgumentError, match="callable"):
            r.schedule("a", 0, 42)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            r.schedule("a", float("nan"), lambda: None)
        with pytest.raises(InvalidArgumentError):
            r.schedule(["a"], 0, lambda: None)  # type: ignore[arg-type]
        with pytest.raises(UnknownTaskError):
            r.cancel("never")
        assert r.stats().scheduled == 0
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgumentError):
            TimerRunner(max_workers=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- close


def test_close_during_a_long_sleep_returns_promptly_and_cancels_what_is_pending() -> None:
    rec = StepRecorder()
    r = TimerRunner(max_workers=2, recorder=rec)
    future = r.schedule("a", now() + LONG, lambda: "never")
    rec.wait_for("Idle", where=asleep_with("a"))
    began = now()
    report = r.close()
    assert now() - began < SOON
    assert report == TimerCloseReport(cancelled=("a",), running=())
    assert future.cancelled()
    assert not any(thread.is_alive() for thread in r._threads)
    with pytest.raises(SchedulerClosedError):
        r.schedule("b", 0, lambda: None)
    assert r.close() == TimerCloseReport()


def test_close_with_a_timeout_reports_what_still_runs_and_lets_it_finish() -> None:
    started = threading.Event()
    release = threading.Event()

    slow = gated(started, release, 1)
    r = TimerRunner(max_workers=2)
    running = r.schedule("slow", 0, slow)
    pending = r.schedule("later", now() + LONG, lambda: "never")
    assert started.wait(SOON)
    report = r.close(timeout=0.05)
    assert report == TimerCloseReport(cancelled=("later",), running=("slow",))
    assert pending.cancelled() and not running.done()
    with pytest.raises(SchedulerClosedError):
        r.schedule("new", 0, slow)
    release.set()
    assert running.result(SOON) == 1
    assert r.close() == TimerCloseReport()
    assert not any(thread.is_alive() for thread in r._threads)


def test_close_waits_for_running_functions_to_finish() -> None:
    started = threading.Event()

    def fn() -> str:
        started.set()
        time.sleep(0.05)
        return "finished"

    r = TimerRunner(max_workers=1)
    future = r.schedule("a", 0, fn)
    assert started.wait(SOON)
    assert r.close() == TimerCloseReport()
    assert future.done() and future.result(0) == "finished"


def test_close_from_inside_a_function_reports_that_function_as_running() -> None:
    holder: list[TimerRunner] = []

    def fn() -> TimerCloseReport:
        return holder[0].close()

    r = TimerRunner(max_workers=2)
    holder.append(r)
    future = r.schedule("self", 0, fn)
    assert future.result(SOON) == TimerCloseReport(cancelled=(), running=("self",))
    assert r.scheduler.state("self") is TimerState.COMPLETED


class BreakableClock:
    """The monotonic clock until the test sets ``broken``; then every read raises OSError."""

    broken = False

    def __call__(self) -> float:
        if self.broken:
            raise OSError("the clock is gone")
        return time.monotonic()


def test_a_failing_clock_stops_the_dispatcher_and_fails_pending_futures() -> None:
    clock = BreakableClock()
    rec = StepRecorder()
    r = TimerRunner(max_workers=1, clock=clock, recorder=rec)
    first = r.schedule("a", now() + LONG, lambda: None)
    rec.wait_for("Idle", where=asleep_with("a"))
    clock.broken = True
    second = r.schedule("b", 0, lambda: None)  # wakes the dispatcher, whose next() fails
    for future in (first, second):
        error = future.exception(SOON)
        assert isinstance(error, SchedulerError)
        assert isinstance(error.__cause__, OSError)
    with pytest.raises(SchedulerClosedError):
        r.schedule("c", 0, lambda: None)
    assert r.close() == TimerCloseReport()


def test_futures_work_with_concurrent_futures_wait() -> None:
    with TimerRunner(max_workers=2) as r:
        futures = [r.schedule(i, now() + 0.01 * i, lambda i=i: i) for i in range(5)]
        cancelled = r.schedule("gone", now() + LONG, lambda: None)
        cancelled.cancel()
        done, not_done = cf.wait([*futures, cancelled], timeout=SOON)
        assert not not_done and len(done) == 6
        assert sorted(f.result() for f in futures) == list(range(5))


def test_a_time_far_in_the_future_does_not_break_the_dispatcher() -> None:
    rec = StepRecorder()
    with TimerRunner(max_workers=1, recorder=rec) as r:
        far = r.schedule("far", 1e300, lambda: None)
        rec.wait_for("Idle", where=asleep_with("far"))
        assert r.schedule("near", 0, lambda: "near").result(SOON) == "near"
        assert not far.done()
    assert far.cancelled()


# ---------------------------------------------------------------------- what user code raises


@BASE_EXCEPTIONS
def test_a_done_callback_raising_a_base_exception_is_logged_and_the_worker_goes_on(
        raised: type[BaseException], caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    go = threading.Event()

    def bad(future: cf.Future[Any]) -> None:
        calls.append("bad")
        raise raised()

    r = TimerRunner(max_workers=1)
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        first = r.schedule("a", 0, lambda: go.wait(SOON) and "A")
        first.add_done_callback(bad)  # before the function returns: the worker runs it
        first.add_done_callback(lambda future: calls.append("next"))
        go.set()
        assert first.result(SOON) == "A"
        assert r.schedule("b", 0, lambda: "B").result(SOON) == "B"  # the one worker lives on
        assert returns_within(r.close) == TimerCloseReport()
    assert calls == ["bad", "next"]
    assert logged(caplog) == [raised]
    assert not any(thread.is_alive() for thread in r._threads)


@BASE_EXCEPTIONS
def test_a_done_callback_raising_in_the_dispatcher_is_logged_and_every_future_resolves(
        raised: type[BaseException], caplog: pytest.LogCaptureFixture) -> None:
    def bad(future: cf.Future[Any]) -> None:
        raise raised()

    clock = BreakableClock()
    rec = StepRecorder()
    r = TimerRunner(max_workers=1, clock=clock, recorder=rec)
    first = r.schedule("a", now() + LONG, lambda: None)
    second = r.schedule("b", now() + LONG, lambda: None)
    first.add_done_callback(bad)
    rec.wait_for("Idle", where=asleep_with("b"))
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        clock.broken = True
        r.schedule("c", now() + LONG / 2, lambda: None)  # wakes the dispatcher: next() fails
        for future in (first, second):
            assert isinstance(future.exception(SOON), SchedulerError)
        assert returns_within(r.close) == TimerCloseReport()
    assert raised in logged(caplog)
    assert not any(thread.is_alive() for thread in r._threads)


@BASE_EXCEPTIONS
def test_a_function_raising_a_base_exception_fails_its_task_and_the_worker_goes_on(
        raised: type[BaseException]) -> None:
    error = raised()

    def bad() -> None:
        raise error

    r = TimerRunner(max_workers=1)
    failing = r.schedule("bad", 0, bad)
    assert failing.exception(SOON) is error  # exception(), not result(): it would raise it here
    assert r.scheduler.state("bad") is TimerState.FAILED
    assert r.schedule("after", 0, lambda: "ok").result(SOON) == "ok"
    assert returns_within(r.close) == TimerCloseReport()


# ---------------------------------------------------------------------- the runner's own failure


class _BreakingRecorder(StepRecorder):
    """A StepRecorder that raises at the ``nth`` step named ``action``, after keeping it."""

    def __init__(self, action: str, nth: int = 1) -> None:
        super().__init__()
        self.action = action
        self.nth = nth

    def record(self, action: str, params: dict[str, Any], state: TimerSnapshot) -> None:
        super().record(action, params, state)
        if action == self.action and self.count(action) == self.nth:
            raise RuntimeError(f"the recorder broke at {action}")


class _SlotsFailingInTheDispatcher(dict[Hashable, Any]):
    """The runner's slots, whose lookup raises when the dispatcher makes it."""

    def get(self, key: Hashable, default: Any = None) -> Any:
        if threading.current_thread().name == "refsched-timer-dispatcher":
            raise RuntimeError("the dispatcher's bookkeeping broke")
        return super().get(key, default)


def _broken_runner(where: str) -> TimerRunner:
    """A one-worker runner whose own machinery raises at ``where``."""
    if where == "recorder-at-complete":  # in the worker, reporting
        return TimerRunner(max_workers=1, recorder=_BreakingRecorder("Complete"))
    if where == "recorder-at-claim":  # in the dispatcher's next(), the version claimed
        return TimerRunner(max_workers=1, recorder=_BreakingRecorder("Claim"))
    r = TimerRunner(max_workers=1)
    r._slots = _SlotsFailingInTheDispatcher()  # in the dispatcher, holding a reservation
    return r


@pytest.mark.parametrize("where", ["recorder-at-complete", "recorder-at-claim",
                                   "dispatcher-bookkeeping"])
def test_a_thread_whose_own_bookkeeping_fails_stops_the_runner_and_releases_every_waiter(
        where: str, caplog: pytest.LogCaptureFixture) -> None:
    r = _broken_runner(where)
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        later = r.schedule("later", now() + LONG, lambda: "later")  # first: the runner is open
        due = r.schedule("due", 0, lambda: "due")
        for future in (due, later):
            error = future.exception(SOON)
            assert isinstance(error, SchedulerError) and isinstance(error.__cause__, RuntimeError)
        returns_within(r.close)
    assert logged(caplog) == [RuntimeError]
    assert not any(thread.is_alive() for thread in r._threads)
    with pytest.raises(SchedulerClosedError):
        r.schedule("late", 0, lambda: None)


# ---------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("timeout", ["x", -1, -0.5, float("nan"), float("inf"), True, [1.0], 1j])
def test_close_with_a_bad_timeout_is_refused_and_changes_nothing(timeout: Any) -> None:
    r = TimerRunner(max_workers=1)
    pending = r.schedule("later", now() + LONG, lambda: None)
    with pytest.raises(InvalidArgumentError, match=r"close\(timeout="):
        returns_within(lambda: r.close(timeout=timeout))
    assert not pending.done() and r.scheduler.state("later") is TimerState.PENDING
    assert r.schedule("now", 0, lambda: "ran").result(SOON) == "ran"
    assert returns_within(r.close) == TimerCloseReport(cancelled=("later",))


def test_close_takes_timeouts_of_every_real_kind_and_size() -> None:
    started = threading.Event()
    release = threading.Event()

    r = TimerRunner(max_workers=1)
    r.schedule("gated", 0, gated(started, release))
    r.schedule("later", now() + LONG, lambda: None)
    assert started.wait(SOON)
    report = r.close(timeout=Fraction(1, 100))
    assert report == TimerCloseReport(cancelled=("later",), running=("gated",))
    assert r.close(timeout=0) == TimerCloseReport(running=("gated",))
    threading.Timer(0.05, release.set).start()
    # longer than a lock can time: no limit
    assert returns_within(lambda: r.close(timeout=1e12)) == TimerCloseReport()
    assert r.close(timeout=10**400) == TimerCloseReport()
