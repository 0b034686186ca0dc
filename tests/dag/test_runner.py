"""Tests of ``refsched.Runner``: real worker threads (and a process pool) over a TaskScheduler.

Nothing here asserts on speed. Waits that could hang carry a generous timeout, so a bug fails the
test instead of stalling the run. Random graphs are seeded and the seed is printed.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from fractions import Fraction
from typing import Any, TypeVar

import pytest

from refsched import (
    BlockedError,
    Cancelled,
    CancelToken,
    ConflictError,
    InvalidArgumentError,
    InvalidTransitionError,
    Runner,
    SchedulerClosedError,
    SchedulerError,
    TaskFuture,
    TaskState,
    UnknownTaskError,
)
from tests.user_code_support import BASE_EXCEPTIONS, Escape, logged, returns_within

LONG = 30.0  # seconds: only reached when something is broken

_T = TypeVar("_T")


# -- module-level functions, so a ProcessPoolExecutor can pickle them ----------------------

def _square(x: int) -> int:
    return x * x


def _boom(message: str) -> None:
    raise ValueError(message)


def _token_given(token: CancelToken | None = None) -> bool:
    return token is not None


def _random_dag(seed: int, n: int, max_deps: int) -> dict[int, list[int]]:
    rng = random.Random(seed)
    return {t: rng.sample(range(t), min(t, rng.randint(0, max_deps))) for t in range(n)}


class _Recorder:
    """Records the start and end of each function in one global order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clock = 0
        self.started: dict[Hashable, int] = {}
        self.ended: dict[Hashable, int] = {}

    def task(self, task_id: Hashable, pause: float = 0.0) -> Callable[[], Hashable]:
        def run() -> Hashable:
            with self.lock:
                self.clock += 1
                self.started[task_id] = self.clock
            if pause:
                time.sleep(pause)
            with self.lock:
                self.clock += 1
                self.ended[task_id] = self.clock
            return task_id
        return run


# -- the claims ----------------------------------------------------------------------------

def test_dag_run_with_real_threads_finishes_every_dependency_before_its_dependents_start() -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    graph = _random_dag(seed, 300, 4)
    rec = _Recorder()
    with Runner(max_workers=4) as runner:
        futures = {t: runner.submit(t, rec.task(t, pause=0.0005 * (t % 3)), deps)
                   for t, deps in graph.items()}
        runner.start()
        assert runner.wait(LONG)
        for t, future in futures.items():
            assert future.result() == t
            assert runner.scheduler.state(t) is TaskState.SUCCEEDED
    for t, deps in graph.items():
        for d in deps:
            assert rec.ended[d] < rec.started[t], f"{d} ended after {t} started (seed={seed})"


def test_function_exception_fails_only_its_task_and_blocks_its_descendants() -> None:
    with Runner(max_workers=2) as runner:
        a = runner.submit("a", lambda: 1)
        b = runner.submit("b", functools.partial(_boom, "b broke"), ["a"])
        c = runner.submit("c", lambda: 3, ["b"])
        d = runner.submit("d", lambda: 4, ["c", "a"])
        e = runner.submit("e", lambda: 5, ["a"])
        runner.start()
        assert runner.wait(LONG)
        error = b.exception()
        assert isinstance(error, ValueError) and str(error) == "b broke"
        assert a.result() == 1 and e.result() == 5
        for future, cause in ((c, "b"), (d, "c")):
            blocked = future.exception()
            assert isinstance(blocked, BlockedError)
            assert blocked.task_id == future.task_id and blocked.blocked_by == cause
            with pytest.raises(BlockedError):
                future.result()
        assert runner.scheduler.state("b") is TaskState.FAILED
        assert runner.scheduler.info("d").blocked_by == "c"


def test_exceptions_in_functions_never_kill_a_worker() -> None:
    with Runner(max_workers=1) as runner:
        failing = [runner.submit(("fail", i), functools.partial(_boom, str(i))) for i in range(20)]
        fine = runner.submit("fine", lambda: "ok")
        runner.start()
        assert runner.wait(LONG)
        assert all(isinstance(f.exception(), ValueError) for f in failing)
        assert fine.result() == "ok"


def test_process_pool_executor_runs_module_level_functions_in_dependency_order() -> None:
    with cf.ProcessPoolExecutor(max_workers=2) as pool, Runner(max_workers=2, executor=pool) as r:
        squares = [r.submit(("sq", i), functools.partial(_square, i)) for i in range(6)]
        after = r.submit("after", functools.partial(_square, 7), [("sq", i) for i in range(6)])
        failing = r.submit("failing", functools.partial(_boom, "remote"))
        blocked = r.submit("blocked", functools.partial(_square, 8), ["failing"])
        no_token = r.submit("token", _token_given)
        r.start()
        assert r.wait(LONG)
        assert [f.result() for f in squares] == [i * i for i in range(6)]
        assert after.result() == 49
        assert isinstance(failing.exception(), ValueError)
        assert isinstance(blocked.exception(), BlockedError)
        assert no_token.result() is False  # a process pool gets token=None


def test_thread_pool_executor_gives_functions_a_live_token() -> None:
    with cf.ThreadPoolExecutor(max_workers=2) as pool, Runner(max_workers=2, executor=pool) as r:
        future = r.submit("t", _token_given)
        r.start()
        assert future.result(LONG) is True


def test_slow_function_under_close_timeout_is_listed_running_and_its_future_resolves() -> None:
    release = threading.Event()
    started = threading.Event()

    def slow() -> str:
        started.set()
        release.wait(LONG)
        return "late"

    runner = Runner(max_workers=2)
    future = runner.submit("slow", slow)
    waiting = runner.submit("waiting", lambda: None, ["slow"])
    runner.start()
    assert started.wait(LONG)
    report = runner.close(timeout=0.05)
    assert report.running == ("slow",)
    assert report.cancelled == ("waiting",)
    assert waiting.cancelled()
    assert not future.done() and future.running()
    release.set()
    assert future.result(LONG) == "late"
    final = runner.close()
    assert final.succeeded == ("slow",) and final.running == ()


def test_cooperative_cancel_of_running_function_through_its_token_ends_it_cancelled() -> None:
    started = threading.Event()
    seen: list[bool] = []

    def cooperative(token: CancelToken) -> None:
        assert not token.cancelled
        started.set()
        seen.append(token.wait(LONG))
        seen.append(token.cancelled)
        raise Cancelled()

    with Runner(max_workers=2) as runner:
        future = runner.submit("coop", cooperative)
        dependent = runner.submit("dependent", lambda: None, ["coop"])
        runner.start()
        assert started.wait(LONG)
        assert runner.cancel("coop") is TaskState.RUNNING
        assert runner.scheduler.info("coop").cancel_requested
        with pytest.raises(cf.CancelledError):
            future.result(LONG)
        assert future.cancelled()
        assert seen == [True, True]
        assert runner.wait(LONG)
        assert runner.scheduler.state("coop") is TaskState.CANCELLED
        assert isinstance(dependent.exception(), BlockedError)


def test_future_cancel_of_running_version_requests_a_stop_and_returns_false() -> None:
    started = threading.Event()

    def cooperative(token: CancelToken) -> None:
        started.set()
        token.wait(LONG)
        token.raise_if_cancelled()

    with Runner(max_workers=1) as runner:
        future = runner.submit("coop", cooperative)
        runner.start()
        assert started.wait(LONG)
        assert future.cancel() is False
        assert cf.wait([future], LONG).done == {future}
        assert future.cancelled()


def test_cancel_of_pending_task_cancels_its_future_and_blocks_its_dependents() -> None:
    gate = threading.Event()
    with Runner(max_workers=2) as runner:
        first = runner.submit("first", lambda: gate.wait(LONG))
        pending = runner.submit("pending", lambda: "never", ["first"])
        dependent = runner.submit("dependent", lambda: "never", ["pending"])
        other = runner.submit("other", lambda: "ran")
        runner.start()
        assert runner.cancel("pending") is TaskState.CANCELLED
        assert pending.cancelled() and pending.done()
        blocked = dependent.exception(LONG)
        assert isinstance(blocked, BlockedError) and blocked.blocked_by == "pending"
        gate.set()
        assert runner.wait(LONG)
        assert first.result() is True and other.result() == "ran"
        # concurrent.futures.wait sees cancelled futures as done
        assert cf.wait([pending, dependent], LONG).not_done == set()


def test_future_cancel_of_pending_version_returns_true() -> None:
    with Runner(max_workers=1) as runner:
        future = runner.submit("t", lambda: None)
        assert future.cancel() is True
        assert runner.scheduler.state("t") is TaskState.CANCELLED


def test_resubmission_cancels_the_replaced_versions_future() -> None:
    with Runner(max_workers=1) as runner:
        old = runner.submit("t", lambda: "old")
        new = runner.submit("t", lambda: "new")
        assert old.cancelled() and (old.generation, new.generation) == (1, 2)
        assert runner.future("t") is new
        runner.start()
        assert new.result(LONG) == "new"


def test_retry_after_failure_reruns_the_task_and_its_blocked_descendants() -> None:
    calls: list[str] = []
    healthy = threading.Event()

    def flaky() -> str:
        calls.append("flaky")
        if not healthy.is_set():
            raise RuntimeError("not yet")
        return "fixed"

    def after(name: str) -> Callable[[], str]:
        def run() -> str:
            calls.append(name)
            return name
        return run

    with Runner(max_workers=2) as runner:
        first = runner.submit("flaky", flaky)
        child = runner.submit("child", after("child"), ["flaky"])
        grandchild = runner.submit("grandchild", after("grandchild"), ["child"])
        runner.start()
        assert runner.wait(LONG)
        assert isinstance(first.exception(), RuntimeError)
        assert isinstance(child.exception(), BlockedError)
        assert isinstance(grandchild.exception(), BlockedError)
        healthy.set()
        again = runner.retry("flaky")
        assert isinstance(again, TaskFuture) and again.generation == 2
        assert runner.wait(LONG)
        assert again.result() == "fixed"
        assert runner.future("child").result() == "child"
        assert runner.future("grandchild").result() == "grandchild"
        assert runner.future("grandchild").generation == 2
        assert calls == ["flaky", "flaky", "child", "grandchild"]


def test_wait_with_timeout_returns_false_while_work_is_not_done() -> None:
    gate = threading.Event()
    with Runner(max_workers=1) as runner:
        runner.submit("gated", lambda: gate.wait(LONG))
        assert runner.wait(0.01) is False  # not started
        runner.start()
        assert runner.wait(0.05) is False
        gate.set()
        assert runner.wait(LONG) is True


def test_context_manager_waits_for_the_work_then_closes() -> None:
    with Runner(max_workers=2) as runner:
        futures = [runner.submit(i, functools.partial(_square, i)) for i in range(50)]
        runner.start()
    assert [f.result(0) for f in futures] == [i * i for i in range(50)]
    with pytest.raises(SchedulerClosedError):
        runner.submit("late", lambda: None)
    assert not any(thread.is_alive() for thread in runner._threads)


def test_context_manager_leaving_on_an_error_cancels_pending_work_and_waits_for_running() -> None:
    started = threading.Event()

    def running_until_closed() -> bool:
        started.set()
        deadline = time.monotonic() + LONG
        while not runner.scheduler.snapshot().closed and time.monotonic() < deadline:
            time.sleep(0.001)
        return True

    with pytest.raises(KeyError), Runner(max_workers=1) as runner:
        running = runner.submit("running", running_until_closed)
        pending = runner.submit("pending", lambda: None, ["running"])
        runner.start()
        assert started.wait(LONG)
        raise KeyError("leave")
    assert pending.cancelled()
    assert running.result(0) is True


def test_close_without_cancel_pending_leaves_them_pending_and_cancels_their_futures() -> None:
    runner = Runner(max_workers=1)
    future = runner.submit("t", lambda: None)
    report = runner.close(cancel_pending=False)
    assert report.ready == ("t",) and future.cancelled()
    assert runner.wait(LONG) is False  # it can never end


def test_twenty_thousand_noop_tasks_all_finish_and_nothing_is_lost() -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    graph = _random_dag(seed, 20_000, 2)
    noop: Callable[[], Any] = lambda: None  # noqa: E731
    with Runner(max_workers=4) as runner:
        futures = [runner.submit(t, noop, deps) for t, deps in graph.items()]
        runner.start()
        assert runner.wait(LONG * 4)
        assert all(f.done() and f.exception() is None for f in futures)
        report = runner.close()
    assert len(report.succeeded) == 20_000
    assert report.by_state()[TaskState.SUCCEEDED] == report.succeeded
    assert sum(map(len, report.by_state().values())) == 20_000


@pytest.mark.parametrize("use_executor", [False, True], ids=["threads", "thread-executor"])
def test_concurrency_never_exceeds_max_workers(use_executor: bool) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    lock = threading.Lock()
    running = 0
    peak = 0

    def measured() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.001)
        with lock:
            running -= 1

    pool = cf.ThreadPoolExecutor(max_workers=8) if use_executor else None
    try:
        with Runner(max_workers=3, executor=pool) as runner:
            for t, deps in _random_dag(seed, 200, 2).items():
                runner.submit(t, measured, deps)
            runner.start()
            assert runner.wait(LONG)
    finally:
        if pool is not None:
            pool.shutdown()
    assert 1 <= peak <= 3


def test_future_result_timeout_holds_while_other_futures_settle() -> None:
    gate = threading.Event()
    with Runner(max_workers=2) as runner:
        gated = runner.submit("gated", lambda: gate.wait(LONG) and "opened")
        others = [runner.submit(i, functools.partial(_square, i)) for i in range(2000)]
        runner.start()
        with pytest.raises(cf.TimeoutError):
            gated.result(timeout=0.1)
        with pytest.raises(cf.TimeoutError):
            gated.exception(timeout=0.01)
        waiter = cf.ThreadPoolExecutor(max_workers=1)
        later = waiter.submit(gated.result, LONG)
        gate.set()
        assert later.result(LONG) == "opened"
        waiter.shutdown()
        done = {f.result() for f in cf.as_completed(others, timeout=LONG)}
        assert done == {i * i for i in range(2000)}


def test_a_task_future_has_every_field_a_future_has() -> None:
    # TaskFuture sets Future's fields itself (sharing one condition per runner); a Python whose
    # Future grows a field would otherwise leave it missing.
    with Runner(max_workers=1) as runner:
        future = runner.submit("a", lambda: 1)
        assert set(vars(cf.Future())) <= set(vars(future))
        runner.start()
        assert future.result(LONG) == 1


def test_two_threads_waiting_on_the_same_futures_in_opposite_orders_both_return() -> None:
    # concurrent.futures.wait() takes every future's condition in list order: with one shared
    # condition that order cannot deadlock two waiters.
    with Runner(max_workers=2) as runner:
        futures = [runner.submit(i, functools.partial(_square, i)) for i in range(200)]
        waiter = cf.ThreadPoolExecutor(max_workers=2)
        forward = waiter.submit(cf.wait, futures, LONG)
        backward = waiter.submit(cf.wait, futures[::-1], LONG)
        runner.start()
        assert not forward.result(LONG).not_done and not backward.result(LONG).not_done
        waiter.shutdown()


def test_functions_may_submit_more_tasks_while_the_runner_runs() -> None:
    with Runner(max_workers=2) as runner:
        children: list[TaskFuture] = []

        def parent() -> str:
            children.extend(runner.submit(("child", i), functools.partial(_square, i), ["parent"])
                            for i in range(5))
            return "parent"

        runner.submit("parent", parent)
        runner.start()
        assert runner.wait(LONG)
        assert [f.result() for f in children] == [i * i for i in range(5)]


def test_every_future_agrees_with_the_scheduler_under_random_cancels_retries_and_resubmits(
) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    graph = _random_dag(seed, 150, 3)

    def work(x: int, token: CancelToken) -> int:
        if token.wait(0.0005 * (x % 4)):
            raise Cancelled()
        if x % 7 == 3:
            raise ValueError(x)
        return x

    issued: list[TaskFuture] = []
    with Runner(max_workers=4) as runner:
        for t, deps in graph.items():
            issued.append(runner.submit(t, functools.partial(work, t), deps))
        runner.start()
        for _ in range(300):
            t = rng.randrange(len(graph))
            action = rng.choice(["cancel", "retry", "resubmit", "future"])
            try:
                if action == "cancel":
                    runner.cancel(t)
                elif action == "retry":
                    issued.append(runner.retry(t))
                elif action == "resubmit":
                    issued.append(runner.submit(t, functools.partial(work, t + 1), graph[t]))
                else:
                    issued.append(runner.future(t))
            except (ConflictError, InvalidTransitionError):
                pass  # running (resubmit) or not dead (retry)
        assert runner.wait(LONG), f"seed={seed}"
        assert all(f.done() for f in issued), f"seed={seed}"
        for t in graph:
            info = runner.scheduler.info(t)
            future = runner.future(t)
            assert future.generation == info.generation
            if info.state is TaskState.SUCCEEDED:
                assert future.result() == info.result
            elif info.state is TaskState.FAILED:
                assert future.exception() is info.error
            elif info.state is TaskState.BLOCKED:
                error = future.exception()
                assert isinstance(error, BlockedError) and error.blocked_by == info.blocked_by
            else:
                assert info.state is TaskState.CANCELLED and future.cancelled(), f"seed={seed}"
        runner.scheduler.check_invariants()


# -- what user code raises never costs a worker --------------------------------------------

@BASE_EXCEPTIONS
def test_a_done_callback_raising_a_base_exception_is_logged_and_the_worker_goes_on(
        raised: type[BaseException], caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def bad(future: cf.Future[Any]) -> None:
        calls.append("bad")
        raise raised()

    runner = Runner(max_workers=1)
    a = runner.submit("a", lambda: "A")
    a.add_done_callback(bad)
    a.add_done_callback(lambda future: calls.append("next"))
    b = runner.submit("b", lambda: "B", ["a"])
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        runner.start()
        assert runner.wait(LONG)
        report = returns_within(runner.close)
    assert a.result(0) == "A" and b.result(0) == "B"
    assert calls == ["bad", "next"]  # the callback after the one that raised still ran
    assert report.succeeded == ("a", "b")
    assert logged(caplog) == [raised]
    assert not any(thread.is_alive() for thread in runner._threads)


def test_a_done_callback_raising_in_the_callers_thread_is_logged_and_wait_still_returns(
        caplog: pytest.LogCaptureFixture) -> None:
    def bad(future: cf.Future[Any]) -> None:
        raise Escape("from a callback")

    runner = Runner(max_workers=1)
    a = runner.submit("a", lambda: None)
    a.add_done_callback(bad)
    runner.submit("b", lambda: "B")
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        assert runner.cancel("a") is TaskState.CANCELLED  # settles a's future in this thread
    assert a.cancelled() and logged(caplog) == [Escape]
    runner.start()
    assert runner.wait(LONG)
    assert returns_within(runner.close).cancelled == ("a",)


@BASE_EXCEPTIONS
@pytest.mark.parametrize("use_executor", [False, True], ids=["threads", "thread-executor"])
def test_a_function_raising_a_base_exception_fails_its_task_and_the_worker_goes_on(
        raised: type[BaseException], use_executor: bool) -> None:
    error = raised()

    def bad() -> None:
        raise error

    pool = cf.ThreadPoolExecutor(max_workers=1) if use_executor else None
    try:
        runner = Runner(max_workers=1, executor=pool)
        failing = runner.submit("bad", bad)
        dependent = runner.submit("dependent", lambda: None, ["bad"])
        fine = runner.submit("fine", lambda: "ok")
        runner.start()
        assert runner.wait(LONG)
        assert failing.exception(0) is error  # exception(), not result(): it would raise it here
        assert isinstance(dependent.exception(0), BlockedError)
        assert fine.result(0) == "ok"
        assert runner.scheduler.state("bad") is TaskState.FAILED
        assert returns_within(runner.close).failed == ("bad",)
    finally:
        if pool is not None:
            pool.shutdown()


# -- the runner's own failure stops it and releases every waiter ---------------------------

class _BreakingRecorder:
    """Raises at the ``nth`` step named ``action``: the runner's own machinery fails there."""

    def __init__(self, action: str, nth: int = 1) -> None:
        self.action = action
        self.nth = nth
        self.seen = 0

    def record(self, action: str, params: dict[str, Any], state: Any) -> None:
        if action == self.action:
            self.seen += 1
            if self.seen == self.nth:
                raise RuntimeError(f"the recorder broke at {action}")


def _broken_runner(where: str, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """A one-worker runner whose own machinery raises at ``where``, on the worker's thread."""
    if where == "recorder-at-complete":
        return Runner(max_workers=1, recorder=_BreakingRecorder("Complete"))
    if where == "recorder-at-claim":
        # the first Claim is start()'s, in the test's thread; the second the worker's, after "a"
        return Runner(max_workers=1, recorder=_BreakingRecorder("Claim", nth=2))
    runner = Runner(max_workers=1)

    def broken(*args: Any) -> None:
        raise RuntimeError("the runner's bookkeeping broke")

    monkeypatch.setattr(runner, "_collect_locked", broken)  # first called by the worker
    return runner


@pytest.mark.parametrize("where", ["recorder-at-complete", "recorder-at-claim", "collect-raises"])
def test_a_worker_whose_own_bookkeeping_fails_stops_the_runner_and_releases_every_waiter(
        where: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    runner = _broken_runner(where, monkeypatch)
    a = runner.submit("a", lambda: "A")
    b = runner.submit("b", lambda: "B", ["a"])
    c = runner.submit("c", lambda: "C", ["b"])
    with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
        runner.start()
        assert returns_within(runner.wait) is False  # not every version could end
        returns_within(runner.close)
    for future in (b, c):
        error = future.exception(0)
        assert isinstance(error, SchedulerError) and isinstance(error.__cause__, RuntimeError)
    assert a.done()
    assert logged(caplog) == [RuntimeError]
    assert not any(thread.is_alive() for thread in runner._threads)
    with pytest.raises(SchedulerClosedError):
        runner.submit("late", lambda: None)


def test_after_a_worker_fails_close_still_waits_for_the_functions_other_workers_run() -> None:
    started = threading.Event()
    release = threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(LONG)
        return "late"

    runner = Runner(max_workers=2, recorder=_BreakingRecorder("Complete"))
    slow_future = runner.submit("slow", slow)
    gate = runner.submit("gate", lambda: None)
    runner.submit("after", lambda: None, ["gate"])
    runner.start()
    assert started.wait(LONG)
    assert isinstance(gate.exception(LONG), SchedulerError)  # its worker failed reporting it
    assert isinstance(slow_future.exception(LONG), SchedulerError)  # its outcome can't count
    assert runner.close(timeout=0.05).running == ("slow",)  # still running: waited for
    release.set()
    assert returns_within(runner.close).running == ()
    assert not any(thread.is_alive() for thread in runner._threads)


# -- bad arguments change nothing ----------------------------------------------------------

_BAD_TIMEOUTS = pytest.mark.parametrize(
    "timeout", ["x", -1, -0.5, float("nan"), float("inf"), True, [1.0], 1j])


@_BAD_TIMEOUTS
def test_close_with_a_bad_timeout_is_refused_and_changes_nothing(timeout: Any) -> None:
    runner = Runner(max_workers=1)
    future = runner.submit("a", lambda: "A")
    with pytest.raises(InvalidArgumentError, match=r"close\(timeout="):
        returns_within(lambda: runner.close(timeout=timeout))
    assert not runner.scheduler.snapshot().closed and not future.done()
    runner.start()
    assert future.result(LONG) == "A"
    assert returns_within(runner.close).succeeded == ("a",)


@pytest.mark.parametrize("flag", [None, 0, 1, "no", 0.0])
def test_close_with_a_cancel_pending_that_is_no_bool_is_refused_and_changes_nothing(
        flag: Any) -> None:
    runner = Runner(max_workers=1)
    future = runner.submit("a", lambda: "A")
    with pytest.raises(InvalidArgumentError, match="cancel_pending"):
        returns_within(lambda: runner.close(cancel_pending=flag))
    assert not runner.scheduler.snapshot().closed and not future.done()
    runner.start()
    assert future.result(LONG) == "A"
    runner.close()


@_BAD_TIMEOUTS
def test_wait_with_a_bad_timeout_is_refused(timeout: Any) -> None:
    runner = Runner(max_workers=1)
    runner.submit("a", lambda: "A")
    with pytest.raises(InvalidArgumentError, match=r"wait\(timeout="):
        returns_within(lambda: runner.wait(timeout))
    assert runner._idle_waiters == 0
    runner.start()
    assert runner.wait(LONG)
    runner.close()


def test_timeouts_of_every_real_kind_and_size_are_taken() -> None:
    release = threading.Event()
    runner = Runner(max_workers=1)
    runner.submit("a", lambda: release.wait(LONG))
    assert runner.wait(0) is False and runner.wait(Fraction(1, 100)) is False
    runner.start()
    assert runner.close(timeout=0.0).running == ("a",)
    threading.Timer(0.05, release.set).start()
    # longer than a lock can time: no limit
    assert returns_within(lambda: runner.wait(1e12)) is True
    assert returns_within(lambda: runner.close(timeout=10**400)).succeeded == ("a",)


@pytest.mark.parametrize("timeout", [float("nan"), -1, 0])
def test_a_future_asked_with_a_nan_or_negative_timeout_does_not_wait(timeout: float) -> None:
    runner = Runner(max_workers=1)
    future = runner.submit("a", lambda: "A")
    with pytest.raises(cf.TimeoutError):  # as a concurrent.futures.Future would
        returns_within(lambda: future.result(timeout))
    with pytest.raises(cf.TimeoutError):
        returns_within(lambda: future.exception(timeout))
    runner.start()
    assert future.result(1e12) == "A"  # longer than a lock can time: no limit
    runner.close()


def test_a_recorder_without_a_record_method_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="recorder"):
        Runner(max_workers=1, recorder=object())  # type: ignore[arg-type]


def test_deps_whose_iteration_fails_submit_nothing() -> None:
    def deps() -> Iterator[str]:
        yield "a"
        raise TypeError("the iterable broke")

    runner = Runner(max_workers=1)
    runner.submit("a", lambda: None)
    runner.submit("b", lambda: None)
    with pytest.raises(TypeError, match="broke"):
        runner.submit("c", lambda: None, deps())
    with pytest.raises(UnknownTaskError):
        runner.scheduler.info("c")
    runner.close()
