"""Every wake-up of ``refsched.Runner``: each thread blocked in the API is released by the one
event that should release it.

A thread is first made to wait (``Blocked.until_waiting``), then the change under test is made, and
the call must return within a generous bound (tests/wakeup_support.py). The state alone would
not tell a lost wake-up: a call made after the change returns at once whether or not anyone
would have been notified.
"""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

from refsched import Cancelled, CancelToken, Runner, SchedulerError, TaskState
from tests.wakeup_support import LONG, Blocked, blocked_in, closed, gated, until


def _outcome(future: Future[Any]) -> Any:
    """What waiting on ``future`` gives: its value, or "cancelled"."""
    try:
        return future.result(LONG)
    except CancelledError:
        return "cancelled"


def _all_idle(runner: Runner, n: int) -> None:
    until(lambda: len(runner._idle_workers) == n, f"{n} workers idle")


# -- wait() ------------------------------------------------------------------------------------

def test_wait_is_released_when_the_last_function_returns() -> None:
    started, gate = threading.Event(), threading.Event()
    runner = Runner(max_workers=2)
    runner.submit("a", gated(started, gate, 1))
    runner.start()
    assert started.wait(LONG)
    waiter = blocked_in(runner.wait)
    gate.set()
    assert waiter.result() is True
    closed(runner.close)


def test_wait_is_released_when_a_cancel_before_start_ends_every_version() -> None:
    # Nothing runs before start(): only the cancel's own settlement can release the wait.
    runner = Runner(max_workers=1)
    a = runner.submit("a", lambda: 1)
    b = runner.submit("b", lambda: 2, ["a"])
    waiter = blocked_in(runner.wait)
    assert runner.cancel("a") is TaskState.CANCELLED
    assert waiter.result() is True
    assert a.cancelled() and isinstance(b.exception(0), SchedulerError)
    closed(runner.close)


def test_every_thread_in_wait_is_released_not_only_one() -> None:
    runner = Runner(max_workers=1)
    runner.submit("a", lambda: 1)
    waiters = [Blocked(runner.wait, name=f"waiter-{i}") for i in range(3)]
    for waiter in waiters:
        waiter.until_waiting()
    runner.cancel("a")
    assert [waiter.result() for waiter in waiters] == [True, True, True]
    closed(runner.close)


def test_wait_is_released_when_start_is_called_from_another_thread() -> None:
    runner = Runner(max_workers=1)
    runner.submit("a", lambda: 1)
    waiter = blocked_in(runner.wait)
    runner.start()
    assert waiter.result() is True
    closed(runner.close)


def test_wait_is_released_when_a_submit_after_start_runs_and_a_retry_reruns() -> None:
    runner = Runner(max_workers=2)
    runner.start()
    _all_idle(runner, 2)
    started, gate = threading.Event(), threading.Event()
    runner.submit("late", gated(started, gate, "late"))  # handed to an idle worker
    assert started.wait(LONG)
    waiter = blocked_in(runner.wait)
    gate.set()
    assert waiter.result() is True

    attempts: list[int] = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first attempt")
        return len(attempts)

    runner.submit("flaky", flaky)
    assert runner.wait(LONG) is True
    _all_idle(runner, 2)
    retried = runner.retry("flaky")  # the retry's claim goes to an idle worker
    assert retried.result(LONG) == 2
    closed(runner.close)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_dependents_a_completion_readies_are_handed_on_and_run(workers: int) -> None:
    # The reporting worker takes the first claim its report made possible itself; the others go
    # to idle workers (or the shared queue). Each is a hand-off no other event would make.
    runner = Runner(max_workers=workers)
    runner.submit("root", lambda: "root")
    for i in range(3):
        runner.submit(("child", i), lambda i=i: i, ["root"])
        runner.submit(("grandchild", i), lambda i=i: -i, [("child", i)])
    runner.start()
    assert Blocked(runner.wait).result() is True
    assert [runner.future(("grandchild", i)).result(0) for i in range(3)] == [0, -1, -2]
    closed(runner.close)


# -- close() -----------------------------------------------------------------------------------

def test_close_sends_every_idle_worker_away() -> None:
    runner = Runner(max_workers=3)
    runner.start()
    _all_idle(runner, 3)
    closer = Blocked(runner.close)
    assert closer.result().running == ()
    assert not any(thread.is_alive() for thread in runner._threads)


def test_close_without_cancel_pending_returns_once_the_running_function_returns() -> None:
    # A pending version stays live in the scheduler, so only "nothing in flight" may wake close.
    started, gate = threading.Event(), threading.Event()
    runner = Runner(max_workers=1)
    a = runner.submit("a", gated(started, gate, "a"))
    runner.submit("b", lambda: "b", ["a"])
    runner.start()
    assert started.wait(LONG)
    closer = blocked_in(lambda: runner.close(cancel_pending=False))
    gate.set()
    assert closer.result().running == ()
    assert a.result(0) == "a"
    assert not any(thread.is_alive() for thread in runner._threads)


def test_close_and_wait_are_both_released_when_the_running_function_returns() -> None:
    started, gate = threading.Event(), threading.Event()
    runner = Runner(max_workers=1)
    runner.submit("a", gated(started, gate))
    runner.submit("b", lambda: None, ["a"])
    runner.start()
    assert started.wait(LONG)
    waiter = blocked_in(runner.wait, name="waiter")
    closer = Blocked(runner.close, name="closer")  # cancels b: wait() then waits for a only
    closer.until_waiting()
    gate.set()
    assert closer.result().running == ()
    assert waiter.result() is True


class _BreakingRecorder:
    """A recorder that raises at the first ``action``: the runner's own machinery fails."""

    def __init__(self, action: str) -> None:
        self.action = action

    def record(self, action: str, params: dict[str, Any], state: Any) -> None:
        if action == self.action:
            raise RuntimeError(f"recorder broke at {action}")


def test_a_runner_stopped_on_its_own_failure_sends_its_idle_workers_away() -> None:
    started, gate = threading.Event(), threading.Event()
    runner = Runner(max_workers=3, recorder=_BreakingRecorder("Complete"))
    a = runner.submit("a", gated(started, gate))
    runner.start()
    assert started.wait(LONG)
    _all_idle(runner, 2)  # the two other workers wait for a claim
    gate.set()  # a's worker fails reporting it: the runner stops
    assert isinstance(a.exception(LONG), SchedulerError)
    closer = Blocked(runner.close)
    closer.result()
    assert not any(thread.is_alive() for thread in runner._threads)


# -- futures -----------------------------------------------------------------------------------

def test_a_settled_result_wakes_its_waiter_though_a_waiter_of_another_future_waits_first() -> None:
    # The futures of a runner share one condition: waking one waiter may wake the wrong one.
    gates = {t: threading.Event() for t in "ab"}
    runner = Runner(max_workers=2)
    futures = {t: runner.submit(t, lambda t=t: gates[t].wait(LONG) and t) for t in "ab"}
    runner.start()
    first = blocked_in(lambda: futures["a"].result(LONG), name="waits-on-a")
    second = blocked_in(lambda: futures["b"].result(LONG), name="waits-on-b")
    gates["b"].set()
    assert second.result() == "b"
    # The waiter of a was woken too (one condition), and must have gone back to waiting.
    assert first.still_blocked()
    gates["a"].set()
    assert first.result() == "a"
    closed(runner.close)


def test_an_exception_and_a_cancel_wake_the_threads_waiting_on_their_futures() -> None:
    started, gate = threading.Event(), threading.Event()
    runner = Runner(max_workers=1)

    def boom() -> None:
        started.set()
        assert gate.wait(LONG)
        raise ValueError("boom")

    failing = runner.submit("failing", boom)
    pending = runner.submit("pending", lambda: None, ["failing"])
    other = runner.submit("other", lambda: None)
    runner.start()
    assert started.wait(LONG)
    on_error = blocked_in(lambda: failing.exception(LONG), name="waits-on-failing")
    on_cancel = blocked_in(lambda: _outcome(other), name="waits-on-other")
    assert runner.cancel("other") is TaskState.CANCELLED
    assert on_cancel.result() == "cancelled"
    gate.set()
    assert isinstance(on_error.result(), ValueError)
    assert isinstance(pending.exception(LONG), SchedulerError)
    closed(runner.close)


# -- claims handed to a worker ----------------------------------------------------------------

def test_a_claim_cancelled_while_it_waits_in_the_queue_is_handed_on_as_cancelled() -> None:
    # Both slots free at once, no worker idle: the second claim waits in the shared queue (its
    # worker is held in a done-callback), and is cancelled there. The worker that takes it must
    # acknowledge the cancel, not run it or report it as run.
    runner = Runner(max_workers=2)
    started = {t: threading.Event() for t in ("a", "b", "x")}
    gates = {t: threading.Event() for t in ("a", "b", "x")}
    in_callback, leave_callback = threading.Event(), threading.Event()
    ran: list[str] = []
    runner.submit("a", gated(started["a"], gates["a"]))
    b = runner.submit("b", gated(started["b"], gates["b"]))

    def held(_: Future[Any]) -> None:
        in_callback.set()
        assert leave_callback.wait(LONG)

    b.add_done_callback(held)
    runner.submit("x", gated(started["x"], gates["x"]), ["a"])
    y = runner.submit("y", lambda: ran.append("y"), ["a"])
    runner.start()
    assert started["a"].wait(LONG) and started["b"].wait(LONG)
    gates["b"].set()
    assert in_callback.wait(LONG)  # b's worker is busy settling b
    gates["a"].set()  # a's worker takes x itself; y is claimed and queued
    assert started["x"].wait(LONG)
    until(lambda: runner.scheduler.state("y") is TaskState.RUNNING, "y claimed")
    assert runner.cancel("y") is TaskState.RUNNING  # claimed: a request to the taker
    leave_callback.set()
    gates["x"].set()
    assert _outcome(y) == "cancelled"
    assert runner.scheduler.state("y") is TaskState.CANCELLED and ran == []
    closed(runner.close)


# -- cancel tokens -----------------------------------------------------------------------------

class _TokenFunction:
    """A callable taking a token whose signature lookup (done by the worker before it makes the
    token) blocks until the test lets it go: a cancel can then land between the claim and the
    token's making."""

    def __init__(self) -> None:
        self.looked_up = threading.Event()
        self.go_on = threading.Event()

    @property
    def __code__(self) -> Any:  # what wants_token() reads first: user code, run by the worker
        self.looked_up.set()
        assert self.go_on.wait(LONG)
        raise AttributeError("__code__")

    def __call__(self, token: CancelToken | None = None) -> str:
        assert token is not None
        if token.cancelled:
            raise Cancelled("asked before the function was called")
        return "ran"


def test_a_cancel_requested_before_the_token_is_made_reaches_the_token() -> None:
    fn = _TokenFunction()
    runner = Runner(max_workers=1)
    future = runner.submit("a", fn)
    runner.start()
    assert fn.looked_up.wait(LONG)
    assert runner.cancel("a") is TaskState.RUNNING  # claimed: a request, not a cancel
    fn.go_on.set()
    assert Blocked(lambda: _outcome(future)).result() == "cancelled"
    assert runner.scheduler.state("a") is TaskState.CANCELLED
    closed(runner.close)


def test_a_token_waiting_in_the_function_is_woken_by_cancel() -> None:
    runner = Runner(max_workers=1)
    waiting = threading.Event()

    def run(token: CancelToken) -> str:
        waiting.set()
        if token.wait(LONG):
            raise Cancelled("stopped")
        return "not asked"

    future = runner.submit("a", run)
    runner.start()
    assert waiting.wait(LONG)
    assert runner.cancel("a") is TaskState.RUNNING
    assert Blocked(lambda: _outcome(future)).result() == "cancelled"
    closed(runner.close)
