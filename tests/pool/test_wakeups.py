"""Every wake-up of ``refsched.WorkStealingPool``: parked workers woken by a push from outside, by
a child's push, by the searcher that found a task (the wake passed on), by the end of the task
they wait on, by the end of their wait's timeout, and by termination.

Each test first lets the workers park (``stats().parked``), then makes the change under test, and
requires what only a woken worker can do to happen within a generous bound (see
tests/wakeup_support.py). Tasks wait on a barrier or an event rather than on ``result()``, which
would run the awaited task on the waiting worker itself and need no wake-up.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Iterator

import pytest

from refsched import WorkStealingPool
from tests.wakeup_support import LONG, Blocked, blocked_in, gated, until


@pytest.fixture
def pools() -> Iterator[list[WorkStealingPool]]:
    """The pools a test makes; afterwards each is shut down without waiting (a pool whose
    workers were never woken must not hang the run: they are daemon threads)."""
    made: list[WorkStealingPool] = []
    yield made
    for pool in made:
        pool.shutdown(wait=False, cancel_futures=True)


def _parked_pool(pools: list[WorkStealingPool], workers: int) -> WorkStealingPool:
    pool = WorkStealingPool(workers=workers)
    pools.append(pool)
    until(lambda: pool.stats().parked == workers, f"all {workers} workers parked")
    return pool


@pytest.mark.parametrize("workers", [2, 4])
def test_a_burst_of_submissions_from_outside_wakes_every_parked_worker(
        pools: list[WorkStealingPool], workers: int) -> None:
    # Each task waits for all the others to run at once: a worker left parked deadlocks them.
    pool = _parked_pool(pools, workers)
    barrier = threading.Barrier(workers, timeout=LONG)
    futures = [pool.submit(barrier.wait) for _ in range(workers)]
    assert sorted(f.result(LONG) for f in futures) == list(range(workers))


@pytest.mark.parametrize("workers", [2, 4])
def test_children_pushed_by_a_blocked_task_wake_the_parked_workers(
        pools: list[WorkStealingPool], workers: int) -> None:
    # The parent pushes its children on its own deque and blocks (not in result(), which would
    # run them itself): only the parked workers, woken by the pushes, can run them.
    pool = WorkStealingPool(workers=workers)
    pools.append(pool)
    others_parked = threading.Event()
    barrier = threading.Barrier(workers, timeout=LONG)

    def parent() -> int:
        assert others_parked.wait(LONG)
        children = [pool.submit(barrier.wait) for _ in range(workers - 1)]
        barrier.wait()
        return len([c.result(LONG) for c in children])

    root = pool.submit(parent)
    until(lambda: pool.stats().parked == workers - 1, "every other worker parked")
    others_parked.set()
    assert root.result(LONG) == workers - 1


def test_a_parked_worker_waiting_on_a_task_run_elsewhere_is_woken_when_it_finishes(
        pools: list[WorkStealingPool]) -> None:
    pool = WorkStealingPool(workers=2)
    pools.append(pool)
    child_started, gate = threading.Event(), threading.Event()

    child = gated(child_started, gate, "child")

    def parent() -> str:
        future = pool.submit(child)
        assert child_started.wait(LONG)  # stolen by the other worker: nothing left to help with
        return future.result()

    root = pool.submit(parent)
    assert child_started.wait(LONG)
    until(lambda: pool.stats().parked == 1, "the parent's worker parked on the child")
    gate.set()
    assert root.result(LONG) == "child"


def test_a_worker_parked_on_a_wait_with_a_timeout_wakes_at_its_end(
        pools: list[WorkStealingPool]) -> None:
    pool = WorkStealingPool(workers=2)
    pools.append(pool)
    child_started, gate = threading.Event(), threading.Event()

    child = gated(child_started, gate)

    def parent() -> str:
        future = pool.submit(child)
        assert child_started.wait(LONG)
        try:
            future.result(timeout=0.2)  # nothing to help with: the worker parks, timed
        except cf.TimeoutError:
            return "timed out"
        return "the child ended first"

    try:
        root = pool.submit(parent)
        assert root.result(LONG) == "timed out"
    finally:
        gate.set()


def test_termination_releases_await_termination_and_shutdown_waiting_in_other_threads(
        pools: list[WorkStealingPool]) -> None:
    pool = WorkStealingPool(workers=2)
    pools.append(pool)
    started, gate = threading.Event(), threading.Event()

    pool.submit(gated(started, gate))
    assert started.wait(LONG)
    awaiting = [Blocked(pool.await_termination, name=f"await-{i}") for i in range(2)]
    for waiter in awaiting:
        waiter.until_waiting()
    pool.shutdown(wait=False)  # draining: one task still runs
    shutting = blocked_in(pool.shutdown, name="shutdown")
    gate.set()  # the last Finish terminates the pool
    assert [waiter.result() for waiter in awaiting] == [True, True]
    shutting.result()
    assert not any(thread.is_alive() for thread in pool._threads)


def test_shutdown_of_an_idle_pool_wakes_every_parked_worker_to_leave(
        pools: list[WorkStealingPool]) -> None:
    pool = _parked_pool(pools, 3)
    Blocked(pool.shutdown).result()
    assert not any(thread.is_alive() for thread in pool._threads)


def test_a_draining_pool_terminates_only_once_its_last_running_task_finishes(
        pools: list[WorkStealingPool]) -> None:
    # Termination is what await_termination() and shutdown() are woken for: not before the
    # last task ends, even when every deque is empty earlier.
    pool = WorkStealingPool(workers=2)
    pools.append(pool)
    started, gate = threading.Event(), threading.Event()

    long = pool.submit(gated(started, gate, "long"))
    assert started.wait(LONG)
    short_gate = threading.Event()
    short = pool.submit(lambda: short_gate.wait(LONG) and "short")
    pool.shutdown(wait=False)  # draining, both tasks running
    short_gate.set()
    assert short.result(LONG) == "short"
    until(lambda: pool.stats().outstanding == 1, "the short task finished")
    waiter = Blocked(pool.await_termination, name="await")
    waiter.until_waiting()  # deques empty, one task running: not terminated
    assert pool.stats().state == "draining"
    gate.set()
    assert waiter.result() is True and long.result(0) == "long"
