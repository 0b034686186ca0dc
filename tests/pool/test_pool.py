"""Tests of ``refsched.WorkStealingPool``: real worker threads, deques, steals and shutdown.

Nothing here asserts on speed. Every wait that could hang carries a generous timeout, and every
pool is shut down by a fixture that fails (rather than hangs) when the pool cannot terminate, so
a deadlock fails the test instead of stalling the run. Random choices are seeded; the seed is
printed.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from refsched import (
    InvalidArgumentError,
    PoolStats,
    SchedulerClosedError,
    SchedulerError,
    WorkStealingPool,
)
from refsched.explore import Context, ExploreConfig, Scenario, explore
from refsched.pool.pool import _Task

LONG = 20.0  # seconds: only reached when something is broken

MakePool = Callable[[int], WorkStealingPool]


@pytest.fixture
def make_pool() -> Iterator[MakePool]:
    """Build pools; afterwards shut each down and fail if it does not terminate in time."""
    pools: list[WorkStealingPool] = []

    def make(workers: int) -> WorkStealingPool:
        pool = WorkStealingPool(workers=workers)
        pools.append(pool)
        return pool

    yield make
    stuck = []
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)
        if not pool.await_termination(LONG):
            stuck.append(pool.stats())
    assert not stuck, f"pools that did not terminate (deadlock?): {stuck}"


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Poll ``predicate`` until it holds; fail after LONG seconds."""
    deadline = time.monotonic() + LONG
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.001)


def occupy(pool: WorkStealingPool) -> tuple[threading.Event, cf.Future[None]]:
    """Submit a task that holds its worker until the returned gate is set; return once it runs,
    with the gate and the task's future."""
    gate = threading.Event()
    started = threading.Event()

    def blocker() -> None:
        started.set()
        gate.wait(LONG)

    future = pool.submit(blocker)
    assert started.wait(LONG)
    return gate, future


def fib(pool: WorkStealingPool, n: int) -> int:
    """Fibonacci by fork-join: each call waits on the futures of the two it submits."""
    if n < 2:
        return n
    a = pool.submit(fib, pool, n - 1)
    b = pool.submit(fib, pool, n - 2)
    return int(a.result()) + int(b.result())


def tree_sum(pool: WorkStealingPool, depth: int) -> int:
    """The number of leaves of a full binary tree, counted by fork-join with nested waits."""
    if depth == 0:
        return 1
    left = pool.submit(tree_sum, pool, depth - 1)
    right = pool.submit(tree_sum, pool, depth - 1)
    return int(left.result()) + int(right.result())


def skewed(pool: WorkStealingPool, depth: int) -> int:
    """An unbalanced tree: a long spine whose every node also forks one slow leaf."""
    if depth == 0:
        return slow_leaf()
    spine = pool.submit(skewed, pool, depth - 1)
    leaf = pool.submit(slow_leaf)
    return int(spine.result()) + int(leaf.result())


def slow_leaf() -> int:
    time.sleep(0.001)
    return 1


def chain(pool: WorkStealingPool, length: int) -> int:
    """``length`` nested tasks: each submits the next one and waits on its result."""
    if length == 1:
        return 1
    return 1 + int(pool.submit(chain, pool, length - 1).result())


def framed_chain(pool: WorkStealingPool, length: int, frames: int) -> str:
    """``chain``, each task ``frames`` plain calls deep when it submits and waits; the name of
    the thread the innermost task ran on."""
    if frames:
        return framed_chain(pool, length, frames - 1)
    if length == 1:
        return threading.current_thread().name
    return str(pool.submit(framed_chain, pool, length - 1, 10).result())


# -- every task runs exactly once ----------------------------------------------------------

def test_every_task_runs_exactly_once_under_concurrent_submitters(make_pool: MakePool) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    pool = make_pool(4)
    submitters, per_submitter = 8, 1_000
    # Which tasks also submit a child from inside (SubmitChild), decided up front.
    spawns = {(s, i): rng.random() < 0.3 for s in range(submitters) for i in range(per_submitter)}
    runs: Counter[tuple[Any, ...]] = Counter()
    runs_lock = threading.Lock()

    def record(key: tuple[Any, ...]) -> tuple[Any, ...]:
        with runs_lock:
            runs[key] += 1
        return key

    def task(key: tuple[int, int]) -> tuple[Any, ...]:
        record(key)
        if spawns[key]:
            child = pool.submit(record, ("child", *key))
            return ("parent", child.result(timeout=LONG))
        return key

    barrier = threading.Barrier(submitters)
    futures: dict[int, list[cf.Future[tuple[Any, ...]]]] = {}

    def submitter(s: int) -> None:
        barrier.wait()
        futures[s] = [pool.submit(task, (s, i)) for i in range(per_submitter)]

    threads = [threading.Thread(target=submitter, args=(s,)) for s in range(submitters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LONG)
    for s in range(submitters):
        for i, future in enumerate(futures[s]):
            expected = ("parent", ("child", s, i)) if spawns[(s, i)] else (s, i)
            assert future.result(timeout=LONG) == expected
    children = sum(spawns.values())
    assert len(runs) == submitters * per_submitter + children
    assert set(runs.values()) == {1}, [k for k, v in runs.items() if v != 1][:10]
    pool.shutdown()
    assert pool.stats().executed == submitters * per_submitter + children


# -- exceptions ----------------------------------------------------------------------------

def test_task_exception_goes_to_its_future_and_the_worker_survives(make_pool: MakePool) -> None:
    pool = make_pool(1)

    def boom(message: str) -> None:
        raise ValueError(message)

    def exit_() -> None:
        raise SystemExit(3)

    failed = pool.submit(boom, "bad")
    exited = pool.submit(exit_)
    with pytest.raises(ValueError, match="bad"):
        failed.result(timeout=LONG)
    assert isinstance(failed.exception(timeout=LONG), ValueError)
    assert isinstance(exited.exception(timeout=LONG), SystemExit)
    # The only worker is still there.
    assert pool.submit(lambda: 42).result(timeout=LONG) == 42
    assert pool.stats().executed == 3


def test_a_failing_done_callback_does_not_kill_the_worker(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate = threading.Event()
    first = pool.submit(gate.wait, LONG)

    def bad_callback(future: cf.Future[Any]) -> None:
        raise RuntimeError("callback fails")

    first.add_done_callback(bad_callback)
    gate.set()
    assert first.result(timeout=LONG) is True
    assert pool.submit(lambda: "alive").result(timeout=LONG) == "alive"


# -- fork-join with nested waits -----------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2])
def test_nested_fork_join_completes(make_pool: MakePool, workers: int) -> None:
    pool = make_pool(workers)
    assert pool.submit(fib, pool, 15).result(timeout=LONG) == 610
    assert pool.submit(tree_sum, pool, 10).result(timeout=LONG) == 1024
    stats = pool.stats()
    assert stats.outstanding == 0
    assert stats.executed == (2 * 987 - 1) + (2**11 - 1)  # fib(15)'s calls + the tree's nodes


def test_a_waiting_worker_is_woken_when_the_awaited_task_finishes_elsewhere(
        make_pool: MakePool) -> None:
    pool = make_pool(2)
    gate = threading.Event()
    child_started = threading.Event()
    child_thread: list[str] = []

    def child() -> str:
        child_thread.append(threading.current_thread().name)
        child_started.set()
        gate.wait(LONG)
        return "child"

    def parent() -> tuple[str, str]:
        future = pool.submit(child)
        # Block without helping until the other worker has stolen the child; then, with
        # nothing left to run, this one parks on the child's future.
        assert child_started.wait(LONG)
        return threading.current_thread().name, future.result()

    root = pool.submit(parent)
    assert child_started.wait(LONG)
    wait_until(lambda: pool.stats().parked == 1, "the parent's worker to park on the child")
    gate.set()
    parent_thread, value = root.result(timeout=LONG)
    assert value == "child"
    assert child_thread == [child_thread[0]] and child_thread[0] != parent_thread


# -- how deep waits nest --------------------------------------------------------------------

@pytest.mark.parametrize("length", [170, 185, 999])
def test_a_chain_of_nested_waits_completes_on_one_worker(make_pool: MakePool, length: int) -> None:
    # Each waiting task runs the next on its own stack; past 180 or so tasks the stack of one
    # thread is full, and waiting without helping left the child in the only deque (a hang).
    pool = make_pool(1)
    assert pool.submit(chain, pool, length).result(timeout=LONG) == length
    assert pool.stats().executed == length


def test_as_many_nested_tasks_as_the_recursion_limit_complete_and_one_more_raises(
        make_pool: MakePool) -> None:
    limit = sys.getrecursionlimit()
    pool = make_pool(1)
    assert pool.submit(chain, pool, limit).result(timeout=LONG) == limit
    with pytest.raises(RecursionError, match=rf"{limit} tasks are nested on the worker, .* "
                                             rf"sys\.getrecursionlimit\(\) is {limit}"):
        pool.submit(chain, pool, limit + 1).result(timeout=LONG)
    # the innermost task's child was left queued when its parent's wait raised; it runs anyway
    wait_until(lambda: pool.stats().outstanding == 0, "the innermost task to run")
    assert pool.stats().executed == 2 * limit + 1


def test_a_chain_far_deeper_than_the_limit_raises_and_the_pool_stays_usable() -> None:
    before = set(threading.enumerate())
    pool = WorkStealingPool(workers=1)
    try:
        with pytest.raises(RecursionError, match=r"sys\.getrecursionlimit\(\) is \d+"):
            pool.submit(chain, pool, 5_000).result(timeout=LONG)
        assert pool.submit(lambda: "usable").result(timeout=LONG) == "usable"
        # Every task of the chain runs once: each wait past the limit raised, and the child it
        # left queued started the rest of the chain afresh, at the bottom of the stack.
        wait_until(lambda: pool.stats().outstanding == 0, "the rest of the chain to run")
        assert pool.stats().executed == 5_000 + 1
    finally:
        pool.shutdown(wait=False)
        assert pool.await_termination(LONG), pool.stats()
    wait_until(lambda: not set(threading.enumerate()) - before,
               "every thread the pool started to end")


def test_a_chain_of_nested_waits_completes_on_four_workers(make_pool: MakePool) -> None:
    pool = make_pool(4)
    assert pool.submit(chain, pool, 1_000).result(timeout=LONG) == 1_000
    pool.shutdown(wait=False)
    assert pool.await_termination(LONG), pool.stats()
    assert pool.stats().executed == 1_000


def test_nested_waits_deeper_than_one_stack_go_on_as_the_same_worker(
        make_pool: MakePool) -> None:
    # 300 tasks of 10 plain calls each, then the pool's own frames: several stacks' worth.
    pool = make_pool(1)
    innermost = pool.submit(framed_chain, pool, 300, 10).result(timeout=LONG)
    assert innermost == "refsched-pool-worker-0"
    assert pool.stats().executed == 300


def test_executor_map_works_inside_and_outside_tasks(make_pool: MakePool) -> None:
    pool = make_pool(2)
    assert isinstance(pool, cf.Executor)
    assert list(pool.map(abs, [-1, -2, 3])) == [1, 2, 3]

    def squares(n: int) -> list[int]:
        return list(pool.map(lambda x: x * x, range(n)))

    assert pool.submit(squares, 20).result(timeout=LONG) == [x * x for x in range(20)]


def test_futures_work_with_wait_as_completed_and_callbacks(make_pool: MakePool) -> None:
    pool = make_pool(2)
    gate = threading.Event()
    pending = pool.submit(gate.wait, LONG)
    quick = [pool.submit(int, i) for i in range(20)]
    done, not_done = cf.wait(quick, timeout=LONG)
    assert done == set(quick) and not not_done
    seen: list[Any] = []
    quick[0].add_done_callback(lambda f: seen.append(f.result()))  # done: called at once
    pending.add_done_callback(lambda f: seen.append(f.result()))
    assert seen == [0]
    assert not pending.done()
    with pytest.raises(cf.TimeoutError):
        pending.result(timeout=0.01)
    gate.set()
    assert [f.result() for f in cf.as_completed([pending], timeout=LONG)] == [True]
    wait_until(lambda: seen == [0, True], "the done-callback")
    assert sorted(f.result() for f in cf.as_completed(quick, timeout=LONG)) == list(range(20))


# -- deque order ---------------------------------------------------------------------------

def test_a_single_worker_runs_its_own_children_newest_first(make_pool: MakePool) -> None:
    pool = make_pool(1)
    order: list[int] = []

    def parent() -> list[cf.Future[None]]:
        return [pool.submit(order.append, i) for i in range(5)]

    children = pool.submit(parent).result(timeout=LONG)
    cf.wait(children, timeout=LONG)
    assert order == [4, 3, 2, 1, 0]  # Pop(w): own deque, bottom, LIFO


def test_a_thief_takes_the_oldest_task_first(make_pool: MakePool) -> None:
    pool = make_pool(2)
    order: list[int] = []
    threads: set[str] = set()
    all_done = threading.Event()

    def child(i: int) -> None:
        order.append(i)
        threads.add(threading.current_thread().name)
        if len(order) == 5:
            all_done.set()

    def parent() -> str:
        for i in range(5):
            pool.submit(child, i)
        # Block this worker without helping: only the other one can take the children.
        assert all_done.wait(LONG)
        return threading.current_thread().name

    parent_thread = pool.submit(parent).result(timeout=LONG)
    assert order == [0, 1, 2, 3, 4]  # Steal(thief, victim): the top, FIFO
    assert len(threads) == 1 and parent_thread not in threads
    assert pool.stats().stolen >= 5


def test_steals_happen_on_an_unbalanced_tree(make_pool: MakePool) -> None:
    pool = make_pool(2)
    assert pool.submit(skewed, pool, 30).result(timeout=LONG) == 31
    assert pool.stats().stolen > 0


# -- shutdown: accepting → draining → terminated -------------------------------------------

def test_root_submit_after_shutdown_raises_and_changes_nothing(make_pool: MakePool) -> None:
    pool = make_pool(2)
    pool.submit(lambda: None).result(timeout=LONG)
    pool.shutdown()
    before = pool.stats()
    assert before.state == "terminated"
    with pytest.raises(SchedulerClosedError, match="terminated") as info:
        pool.submit(lambda: None)
    assert isinstance(info.value, RuntimeError)
    assert pool.stats() == before


def test_children_of_running_tasks_are_accepted_while_draining(make_pool: MakePool) -> None:
    pool = make_pool(2)
    shut = threading.Event()

    def parent() -> str:
        assert shut.wait(LONG)
        return "parent+" + pool.submit(lambda: "child").result()

    root = pool.submit(parent)
    pool.shutdown(wait=False)
    assert pool.stats().state == "draining"
    with pytest.raises(SchedulerClosedError, match="draining"):
        pool.submit(lambda: None)
    shut.set()
    assert root.result(timeout=LONG) == "parent+child"
    assert pool.await_termination(LONG)
    stats = pool.stats()
    assert (stats.state, stats.outstanding, stats.executed) == ("terminated", 0, 2)


def test_await_termination_is_true_only_once_outstanding_is_zero(make_pool: MakePool) -> None:
    pool = make_pool(2)
    gate, _ = occupy(pool)
    assert not pool.await_termination(0.01)  # still accepting
    pool.shutdown(wait=False)
    assert not pool.await_termination(0.05)
    stats = pool.stats()
    assert (stats.state, stats.outstanding) == ("draining", 1)
    gate.set()
    assert pool.await_termination(LONG)
    stats = pool.stats()
    assert (stats.state, stats.outstanding) == ("terminated", 0)


def test_cancel_futures_cancels_tasks_not_yet_started(make_pool: MakePool) -> None:
    pool = make_pool(1)
    ran: list[str] = []
    gate, running = occupy(pool)
    queued = [pool.submit(ran.append, name) for name in "abc"]
    told: list[cf.Future[Any]] = []
    queued[0].add_done_callback(told.append)
    waiting_on_b = queued[1].exception  # a condition exists: the cancel must notify it
    pool.shutdown(wait=False, cancel_futures=True)
    # CancelQueued: out of the deques and no longer counted in the same step, not when a
    # worker comes across them
    stats = pool.stats()
    assert (stats.queue_lengths, stats.outstanding, stats.state) == ((0,), 1, "draining")
    assert all(f.cancelled() for f in queued)
    assert told == [queued[0]]
    with pytest.raises(cf.CancelledError):
        waiting_on_b(timeout=0)
    done, _ = cf.wait(queued, timeout=0)  # cancelled and notified: wait() sees them at once
    assert done == set(queued)
    assert not running.cancelled()
    gate.set()
    assert running.result(timeout=LONG) is None
    assert pool.await_termination(LONG)
    assert ran == []
    assert pool.stats().executed == 1


def test_cancel_futures_with_only_queued_work_terminates_at_once(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, first = occupy(pool)
    queued = [pool.submit(int) for _ in range(3)]
    gate.set()
    assert first.result(timeout=LONG) is None
    # the worker may have run some of the queue meanwhile; the rest is cancelled at once
    pool.shutdown(wait=True, cancel_futures=True)
    assert pool.stats().state == "terminated"
    assert all(f.done() for f in queued)
    assert pool.stats().executed == 1 + sum(not f.cancelled() for f in queued)


def test_a_cancelled_task_never_runs(make_pool: MakePool) -> None:
    pool = make_pool(1)
    ran: list[int] = []
    gate, _ = occupy(pool)
    victim = pool.submit(ran.append, 1)
    kept = pool.submit(ran.append, 2)
    assert victim.cancel()
    gate.set()
    kept.result(timeout=LONG)
    wait_until(lambda: pool.stats().outstanding == 0, "the cancelled task to be dropped")
    assert ran == [2]
    assert pool.stats().executed == 2
    with pytest.raises(cf.CancelledError):
        victim.result(timeout=LONG)


def test_termination_wakes_every_thread_waiting_for_it(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, _ = occupy(pool)
    pool.shutdown(wait=False)
    answers: list[bool] = []
    # no timeout: a waiter nobody notifies stays blocked (with one, it would wake at the
    # timeout and still answer True)
    waiters = [threading.Thread(target=lambda: answers.append(pool.await_termination()),
                                daemon=True) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    wait_until(lambda: all(w.is_alive() for w in waiters), "the waiters to start")
    time.sleep(0.05)  # let them block in await_termination(); a late one returns at once
    gate.set()
    for waiter in waiters:
        waiter.join(LONG)
    assert answers == [True, True, True], "a thread waiting for termination was not woken"


def test_shutdown_twice_is_fine(make_pool: MakePool) -> None:
    pool = make_pool(2)
    future = pool.submit(lambda: 1)
    pool.shutdown()
    pool.shutdown()
    pool.shutdown(wait=False, cancel_futures=True)
    assert future.result(timeout=LONG) == 1
    assert pool.stats().state == "terminated"


def test_shutdown_of_an_idle_pool_terminates_at_once(make_pool: MakePool) -> None:
    pool = make_pool(3)
    pool.shutdown(wait=False)
    assert pool.stats().state == "terminated"
    assert pool.await_termination(LONG)


def test_the_context_manager_waits_for_every_task() -> None:
    with WorkStealingPool(workers=2) as pool:
        futures = [pool.submit(slow_leaf) for _ in range(20)]
    assert all(f.done() for f in futures)
    assert pool.stats() == PoolStats(executed=20, stolen=pool.stats().stolen,
                                     queue_lengths=(0, 0), parked=0, outstanding=0,
                                     state="terminated")
    assert not any(t.is_alive() for t in pool._threads)


def test_shutdown_from_inside_a_task_does_not_wait_for_itself(make_pool: MakePool) -> None:
    pool = make_pool(1)

    def task() -> str:
        pool.shutdown()  # wait=True: it would wait for this very task
        return pool.submit(lambda: "child").result()  # draining: children are still taken

    assert pool.submit(task).result(timeout=LONG) == "child"
    assert pool.await_termination(LONG)


# -- stats ---------------------------------------------------------------------------------

def test_stats_is_a_frozen_snapshot_of_the_counters(make_pool: MakePool) -> None:
    pool = make_pool(3)
    assert [f.name for f in dataclasses.fields(PoolStats)] == [
        "executed", "stolen", "queue_lengths", "parked", "outstanding", "state", "spares",
        "blocked", "compensated", "uncompensated", "stolen_tasks"]
    for f in [pool.submit(lambda: None) for _ in range(10)]:
        f.result(timeout=LONG)
    wait_until(lambda: pool.stats().parked == 3, "every worker to park")
    stats = pool.stats()
    assert stats == PoolStats(executed=10, stolen=stats.stolen, queue_lengths=(0, 0, 0),
                              parked=3, outstanding=0, state="accepting",
                              stolen_tasks=stats.stolen)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.executed = 0  # type: ignore[misc]


def test_queue_lengths_count_what_waits_in_each_deque(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, _ = occupy(pool)
    for _ in range(4):
        pool.submit(lambda: None)
    stats = pool.stats()
    assert (stats.queue_lengths, stats.outstanding, stats.parked) == ((4,), 5, 0)
    gate.set()


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, -1, True, False, 1.5, "2"])
def test_bad_worker_count_is_rejected(workers: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="workers must be an int >= 1"):
        WorkStealingPool(workers=workers)


def test_a_non_callable_is_rejected_and_changes_nothing(make_pool: MakePool) -> None:
    pool = make_pool(2)
    before = pool.stats()
    with pytest.raises(InvalidArgumentError, match="fn must be callable") as info:
        pool.submit(42)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError) and isinstance(info.value, SchedulerError)
    assert pool.stats() == before
    pool.shutdown(wait=False)
    with pytest.raises(InvalidArgumentError):  # the argument is checked first
        pool.submit(None)  # type: ignore[arg-type]


def test_a_bad_timeout_is_rejected(make_pool: MakePool) -> None:
    pool = make_pool(1)
    with pytest.raises(InvalidArgumentError):
        pool.await_termination("soon")  # type: ignore[arg-type]


# -- interleavings, under the explorer's controlled runtime --------------------------------

def fork_join_then_drain(cls: Callable[[int], WorkStealingPool]) -> Scenario:
    """Fork-join with a nested wait and an outside waiter, then shutdown(cancel_futures)."""

    def body(ctx: Context) -> None:
        pool = cls(2)
        ran: list[str] = []

        def leaf(name: str) -> str:
            ran.append(name)
            return name

        def parent() -> str:
            child = pool.submit(leaf, "child")
            return str(child.result()) + "!"

        first = pool.submit(leaf, "first").result()  # an outside waiter
        root = pool.submit(parent)
        other = pool.submit(leaf, "other")
        pool.shutdown(wait=False, cancel_futures=True)  # root and other may not have started
        terminated = pool.await_termination()

        def check() -> None:
            assert first == "first" and terminated
            stats = pool.stats()
            assert (stats.state, stats.outstanding, stats.queue_lengths) == (
                "terminated", 0, (0, 0)), stats
            assert other.cancelled() != ("other" in ran)
            if root.cancelled():
                assert "child" not in ran
            elif "child" in ran:
                assert root.result(timeout=0) == "child!"
            else:  # the child was queued when shutdown cancelled what had not started
                assert isinstance(root.exception(timeout=0), cf.CancelledError)
            assert sorted(ran) == sorted(set(ran)), ran  # nothing ran twice
            assert stats.executed == len(ran) + (not root.cancelled()), (stats, ran)

        ctx.at_end("every task ran at most once, cancelled ones never; terminated", check)

    return Scenario("pool_fork_join_then_drain", body, fork_join_then_drain.__doc__ or "")


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_explored_interleavings_find_no_deadlock_or_lost_wake_up(strategy: str) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    report = explore(fork_join_then_drain(WorkStealingPool),
                     ExploreConfig(strategy=strategy, max_schedules=300, seed=seed,
                                   max_steps=20_000, run_timeout=LONG))
    assert not report.failures, report.failures[0]
    assert report.executions == 300


class _ForgetfulPool(WorkStealingPool):
    """A broken pool: a push marks a parked worker as woken but never notifies it."""

    def _wake_one_locked(self) -> int:
        w, _ = self._parked.popitem()
        self._searching_flags[w] = True
        self._searching += 1
        return w


def test_exploration_catches_a_pool_that_forgets_to_wake_a_worker() -> None:
    report = explore(fork_join_then_drain(_ForgetfulPool),
                     ExploreConfig(strategy="random", max_schedules=300, seed=0,
                                   max_steps=20_000, run_timeout=LONG))
    assert report.failures
    assert "lost wake-up" in str(report.failures[0])


def test_a_task_claimed_twice_raises_rather_than_hangs() -> None:
    # Only a broken pool claims twice; the error must reach it, not deadlock its worker.
    pool = WorkStealingPool(1)
    try:
        task = _Task(pool, int, (), {})
        assert task._claim()
        outcome: list[BaseException] = []

        def claim_again() -> None:
            try:
                task._claim()
            except RuntimeError as error:
                outcome.append(error)

        thread = threading.Thread(target=claim_again, daemon=True)
        thread.start()
        thread.join(LONG)
        assert not thread.is_alive(), "the second claim hung"
        assert len(outcome) == 1 and "claimed twice" in str(outcome[0])
    finally:
        pool.shutdown()


# -- batch steals (steal="half") -----------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "says"), [
    ({"steal": "all"}, "steal must be one of 'single', 'half'"),
    ({"steal": None}, "steal must be one of"),
    ({"steal": "half", "steal_cap": 0}, "steal_cap must be an int >= 1"),
    ({"steal": "half", "steal_cap": True}, "steal_cap must be an int >= 1"),
    ({"steal": "half", "steal_cap": 2.0}, "steal_cap must be an int >= 1"),
    ({"steal_cap": -1}, "steal_cap must be an int >= 1"),
])
def test_a_bad_steal_policy_is_refused_before_any_thread_starts(kwargs: dict[str, Any],
                                                                 says: str) -> None:
    before = threading.active_count()
    with pytest.raises(InvalidArgumentError, match=says) as info:
        WorkStealingPool(2, **kwargs)
    assert isinstance(info.value, ValueError)
    assert threading.active_count() == before


def _stepped_with_deque(length: int, steal_cap: int) -> Any:
    """A pool driven step by step: worker w1's deque holds t0 (top) .. t<length-1>."""
    from refsched.verify.pool.driver import SteppedPool

    pool = SteppedPool(WorkStealingPool, ("w1", "w2", "w3"), steal_cap)
    for i in range(length):
        pool.submit_external(f"t{i}", "w1")
    return pool


@pytest.mark.parametrize(("length", "cap", "taken"), [
    (1, 3, 1), (2, 3, 1), (3, 3, 1), (4, 3, 1), (5, 3, 1), (6, 3, 3), (7, 3, 3), (8, 3, 3),
    (10, 3, 3), (3, 2, 1), (4, 2, 2), (10, 32, 1), (63, 32, 1), (64, 32, 32), (100, 32, 32),
    (10, 1, 1),
])
def test_a_batch_steal_takes_the_cap_from_a_deque_twice_as_long_and_a_shorter_one_gives_one(
        length: int, cap: int, taken: int) -> None:
    pool = _stepped_with_deque(length, cap)
    pool.steal("w2", "w1")
    state = pool.snapshot()
    tasks = tuple(f"t{i}" for i in range(length))
    # the oldest runs; the others taken keep their order, oldest on top; the victim keeps
    # the rest, its newest still at its bottom
    assert (state.running["w2"], *state.deque.get("w2", ())) == tasks[:taken]
    assert state.deque.get("w1", ()) == tasks[taken:]
    stats = pool.stats()
    assert (stats.stolen, stats.stolen_tasks, stats.outstanding) == (1, taken, length)
    pool.check_invariants()


def test_the_thief_pops_the_newest_it_kept_and_the_next_thief_takes_the_oldest() -> None:
    pool = _stepped_with_deque(8, 3)
    pool.steal("w2", "w1")  # runs t0, keeps t1 t2
    pool.steal("w3", "w2")  # w2's deque is short: a single steal of its oldest
    assert pool.snapshot().running["w3"] == "t1"
    pool.finish("w2")
    pool.pop("w2")
    assert pool.snapshot().running["w2"] == "t2"
    assert pool.stats().stolen_tasks == 4
    pool.check_invariants()


def _dense_fork_join(pool: WorkStealingPool, lo: int, hi: int) -> int:
    if hi - lo <= 4:
        return sum(range(lo, hi))
    mid = (lo + hi) // 2
    forks = [pool.submit(_dense_fork_join, pool, a, b)
             for a, b in ((lo, (lo + mid) // 2), ((lo + mid) // 2, mid), (mid, hi))]
    return sum(f.result() for f in forks)


@pytest.mark.parametrize("workers", [2, 4])
def test_batch_steals_run_every_task_of_a_dense_fork_join_exactly_once(workers: int) -> None:
    with WorkStealingPool(workers, steal="half", steal_cap=4) as pool:
        assert pool.submit(_dense_fork_join, pool, 0, 4096).result(timeout=LONG) == sum(
            range(4096))
        for f in [pool.submit(lambda i=i: i) for i in range(500)]:
            f.result(timeout=LONG)
        pool.shutdown(wait=True)
        stats = pool.stats()
    assert stats.outstanding == 0 and stats.state == "terminated"
    assert stats.stolen <= stats.stolen_tasks <= 4 * stats.stolen


def test_a_worker_helping_inside_result_steals_one_task_even_from_a_long_deque() -> None:
    pool = _stepped_with_deque(8, 3)
    local = pool.pool._local
    local.depth = 1  # this thread runs a task and waits inside result(): it helps
    try:
        pool.steal("w2", "w1")
    finally:
        local.depth = 0
    state = pool.snapshot()
    assert state.running["w2"] == "t0" and "w2" not in state.deque
    assert (pool.stats().stolen, pool.stats().stolen_tasks) == (1, 1)
