"""Tests of managed blocking in ``refsched.WorkStealingPool``: ``blocking()``, ``managed_block()``.

Spec: the section "Managed blocking" of spec/WorkStealing.tla (Block, StartSpare, Unblock,
Retire). Nothing here asserts on speed (bench/pool.py does). Blocked tasks wait on events the
test sets; every wait has a generous timeout, and every pool is shut down by a fixture that
fails when the pool (or one of its spare threads) does not end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from refsched import InvalidArgumentError, WorkStealingPool
from refsched.pool.pool import PoolView
from tests.pool.test_pool import LONG, wait_until

MakePool = Callable[..., WorkStealingPool]


@pytest.fixture
def make_pool() -> Iterator[MakePool]:
    """Build pools; afterwards shut each down, and fail if it or a spare thread does not end."""
    pools: list[WorkStealingPool] = []

    def make(workers: int, **kwargs: Any) -> WorkStealingPool:
        pool = WorkStealingPool(workers=workers, **kwargs)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)
        assert pool.await_termination(LONG), f"did not terminate: {pool.stats()}"
        for spare in pool._spares.threads:
            assert spare.thread is not None
            spare.thread.join(LONG)
            assert not spare.thread.is_alive(), "a spare thread outlived its pool"


def block_on(pool: WorkStealingPool, gate: threading.Event,
             entered: threading.Event) -> Callable[[], str]:
    """A task that blocks inside ``pool.blocking()`` until ``gate`` is set."""
    def task() -> str:
        with pool.blocking():
            entered.set()
            assert gate.wait(LONG)
        return "returned"
    return task


def test_a_blocked_task_is_stood_in_for_and_the_queued_work_runs(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, entered = threading.Event(), threading.Event()
    blocked = pool.submit(block_on(pool, gate, entered))
    assert entered.wait(LONG)
    # The only worker blocks: a spare takes the next task, which releases the blocker.
    assert pool.submit(gate.set).result(LONG) is None
    assert blocked.result(LONG) == "returned"
    stats = pool.stats()
    assert (stats.compensated, stats.uncompensated) == (1, 0)
    wait_until(lambda: pool.stats().spares == 0, "the released spare to retire")


def test_children_of_a_task_run_by_a_spare_are_taken(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, entered = threading.Event(), threading.Event()
    blocked = pool.submit(block_on(pool, gate, entered))
    assert entered.wait(LONG)

    def fork(n: int) -> int:
        if n == 0:
            return 1
        children = [pool.submit(fork, n - 1) for _ in range(2)]
        return 1 + sum(c.result(LONG) for c in children)

    assert pool.submit(fork, 6).result(LONG) == 127
    gate.set()
    assert blocked.result(LONG) == "returned"


def test_a_released_spare_runs_what_is_left_in_its_deque_before_it_retires(
        make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, entered, hold = threading.Event(), threading.Event(), threading.Event()

    def blocker() -> None:
        with pool.blocking():
            entered.set()
            assert gate.wait(LONG)
        assert hold.wait(LONG)  # keeps the worker busy: only the spare can run the children

    def on_the_spare() -> list[Future[int]]:
        gate.set()
        wait_until(lambda: pool.stats().blocked == 0, "the blocker to return")
        # the spare is released; these go to its own deque, and it is still to take them
        return [pool.submit(lambda i=i: i) for i in range(3)]

    first = pool.submit(blocker)
    assert entered.wait(LONG)
    children = pool.submit(on_the_spare).result(LONG)
    assert [c.result(LONG) for c in children] == [0, 1, 2]
    hold.set()
    first.result(LONG)
    wait_until(lambda: pool.stats().spares == 0, "the spare to retire")


def test_at_the_bound_a_blocker_blocks_uncompensated(make_pool: MakePool) -> None:
    pool = make_pool(1, max_spares=1)
    gate1, entered1 = threading.Event(), threading.Event()
    gate2, entered2 = threading.Event(), threading.Event()
    first = pool.submit(block_on(pool, gate1, entered1))
    assert entered1.wait(LONG)
    second = pool.submit(block_on(pool, gate2, entered2))  # the spare takes it, and blocks
    assert entered2.wait(LONG)
    stats = pool.stats()
    assert (stats.spares, stats.blocked, stats.compensated, stats.uncompensated) == (1, 2, 1, 1)
    third = pool.submit(lambda: "ran")
    gate2.set()  # the spare's task returns: the spare takes the third
    assert third.result(LONG) == "ran"
    gate1.set()
    assert (first.result(LONG), second.result(LONG)) == ("returned", "returned")


def test_a_new_blocker_adopts_a_released_spare(make_pool: MakePool) -> None:
    pool = make_pool(1, max_spares=1)
    hold = threading.Event()  # keeps the first spare busy after its blocker returned

    def task() -> None:
        with pool.blocking():
            pool.submit(hold.wait, LONG)  # the spare steals it and runs it
            wait_until(lambda: pool.stats().queue_lengths[0] == 0, "the spare to steal")
        with pool.blocking():  # the spare is released but busy: it is adopted
            stats = pool.stats()
            assert (stats.spares, stats.uncompensated) == (1, 0)

    pool.submit(task).result(LONG)
    hold.set()
    stats = pool.stats()
    assert (stats.compensated, stats.uncompensated) == (2, 0)


def test_nested_blocking_in_one_task_is_one_block(make_pool: MakePool) -> None:
    pool = make_pool(2)

    def task() -> tuple[int, int]:
        with pool.blocking(), pool.blocking():
            stats = pool.stats()
            return stats.blocked, stats.compensated

    assert pool.submit(task).result(LONG) == (1, 1)


def test_blocking_outside_a_task_of_the_pool_does_nothing(make_pool: MakePool) -> None:
    pool, other = make_pool(1), make_pool(1)
    with pool.blocking():
        assert pool.stats().blocked == 0
    assert pool.managed_block(lambda x: x * 2, 21) == 42

    def in_other_pool() -> int:
        with pool.blocking():
            return pool.stats().blocked

    assert other.submit(in_other_pool).result(LONG) == 0
    assert pool.stats().compensated == 0


def test_with_max_spares_zero_blocking_does_nothing(make_pool: MakePool) -> None:
    pool = make_pool(1, max_spares=0)

    def task() -> tuple[int, int]:
        with pool.blocking():
            stats = pool.stats()
            return stats.blocked, stats.spares

    assert pool.submit(task).result(LONG) == (0, 0)
    assert pool.max_spares == 0


def test_managed_block_returns_and_raises_what_fn_does(make_pool: MakePool) -> None:
    pool = make_pool(1)

    def boom() -> None:
        raise KeyError("x")

    assert pool.submit(pool.managed_block, pow, 2, 10).result(LONG) == 1024
    with pytest.raises(KeyError):
        pool.submit(pool.managed_block, boom).result(LONG)
    stats = pool.stats()
    assert (stats.blocked, stats.compensated) == (0, 2)
    wait_until(lambda: pool.stats().spares == 0, "both spares to retire")


def test_an_exception_leaving_the_block_releases_the_spare(make_pool: MakePool) -> None:
    pool = make_pool(1)

    def task() -> None:
        with pool.blocking():
            raise BaseException("out of the block")

    with pytest.raises(BaseException, match="out of the block"):
        pool.submit(task).result(LONG)
    assert pool.stats().blocked == 0
    wait_until(lambda: pool.stats().spares == 0, "the spare to retire")


def test_shutdown_during_a_blocking_call_drains_and_terminates(make_pool: MakePool) -> None:
    pool = make_pool(1)
    gate, entered = threading.Event(), threading.Event()
    children: list[Future[int]] = []

    def task() -> str:
        with pool.blocking():
            entered.set()
            assert gate.wait(LONG)
            # draining: a child is still taken, and the spare (or the worker) runs it
            children.append(pool.submit(lambda: 7))
        return "returned"

    blocked = pool.submit(task)
    assert entered.wait(LONG)
    queued = pool.submit(lambda: "queued")
    pool.shutdown(wait=False)
    assert pool.stats().state == "draining"
    assert queued.result(LONG) == "queued"  # the spare drains the queue while the task blocks
    gate.set()
    pool.shutdown(wait=True)
    assert blocked.result() == "returned" and children[0].result() == 7
    stats = pool.stats()
    assert (stats.state, stats.spares, stats.blocked) == ("terminated", 0, 0)
    for spare in pool._spares.threads:
        assert spare.thread is not None and not spare.thread.is_alive()


@pytest.mark.parametrize("bad", [-1, True, 1.5, "2", None])
def test_max_spares_must_be_an_int_at_least_zero(bad: object) -> None:
    before = threading.active_count()
    with pytest.raises(InvalidArgumentError, match=r"max_spares=.*must be an int >= 0"):
        WorkStealingPool(2, max_spares=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        WorkStealingPool(2, max_spares=bad)  # type: ignore[arg-type]
    assert threading.active_count() == before  # rejected before any worker started


def test_managed_block_rejects_what_is_not_callable(make_pool: MakePool) -> None:
    pool = make_pool(1)
    with pytest.raises(InvalidArgumentError, match=r"managed_block\(3\): fn must be callable"):
        pool.managed_block(3)  # type: ignore[arg-type]


class _StepLog:
    """A recorder that keeps the managed-blocking steps and checks CompensationBounded."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.steps: list[tuple[str, dict[str, Any]]] = []
        self.active: set[int] = set()
        self.violations: list[str] = []

    def record(self, action: str, params: dict[str, Any], state: PoolView) -> None:
        if action not in ("Block", "StartSpare", "Unblock", "Retire"):
            return
        self.steps.append((action, dict(params)))
        if action == "Block" and params["s"] is not None:
            self.active.add(params["s"])
        if action == "Retire":
            self.active.discard(params["s"])
        if len(self.active) > self.bound:
            self.violations.append(f"{action} {params}: {sorted(self.active)} active")


def test_the_recorder_is_given_each_blocking_step_in_the_spec_order() -> None:
    log = _StepLog(bound=2)
    pool = WorkStealingPool(2, recorder=log, max_spares=2)

    def leaf() -> None:
        with pool.blocking():
            threading.Event().wait(0.001)

    def root() -> None:
        for f in [pool.submit(leaf) for _ in range(20)]:
            f.result(LONG)

    pool.submit(root).result(LONG)
    pool.shutdown(wait=True)
    assert log.violations == []
    started: set[int] = set()
    for action, params in log.steps:
        if action == "StartSpare":
            started.add(params["s"])
        if action == "Retire":
            assert params["s"] in started
            started.discard(params["s"])
    assert not started, "every spare started retired before the pool terminated"
    blocks = [p["x"] for a, p in log.steps if a == "Block"]
    unblocks = [p["x"] for a, p in log.steps if a == "Unblock"]
    assert len(blocks) == len(unblocks) == 20


# -- managed blocking with batch steals (steal="half") ----------------------------------------

class _Steps:
    """A recorder that keeps every step with the deques right after it, and sets ``batch`` at
    the first StealBatch."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, dict[str, Any], tuple[tuple[Future[Any], ...], ...]]] = []
        self.batch = threading.Event()

    def record(self, action: str, params: dict[str, Any], state: PoolView) -> None:
        self.steps.append((action, dict(params), state.deques))
        if action == "StealBatch":
            self.batch.set()

    def index(self, action: str, **params: Any) -> int:
        """Where the only step ``action`` with these parameters is."""
        found = [i for i, (a, p, _) in enumerate(self.steps)
                 if a == action and all(p.get(k) is v or p.get(k) == v
                                        for k, v in params.items())]
        assert len(found) == 1, (action, params, found)
        return found[0]


class _Runs:
    """How many times each named task ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count: dict[str, int] = {}

    def task(self, name: str, wait: threading.Event | None = None,
             then: threading.Event | None = None) -> Callable[[], str]:
        """A task that counts its run, waits on ``wait`` and then sets ``then``."""
        def run() -> str:
            with self.lock:
                self.count[name] = self.count.get(name, 0) + 1
            if wait is not None:
                assert wait.wait(LONG)
            if then is not None:
                then.set()
            return name
        return run


def test_a_spare_batch_steals_its_blockers_children_and_retires_only_with_its_deque_empty(
        make_pool: MakePool) -> None:
    steps, runs = _Steps(), _Runs()
    pool = make_pool(1, steal="half", steal_cap=2, recorder=steps)
    hold, unblocked, c1_ran = threading.Event(), threading.Event(), threading.Event()
    children: list[Future[str]] = []

    def root() -> None:
        # c0 (top) .. c3 (bottom) on the worker's deque, then the worker blocks: the spare's
        # first take is a batch of half of them, c0 to run (held) and c1 to keep
        children.append(pool.submit(runs.task("c0", wait=hold)))
        children.append(pool.submit(runs.task("c1", then=c1_ran)))
        children.extend(pool.submit(runs.task(f"c{i}")) for i in (2, 3))
        with pool.blocking():
            assert steps.batch.wait(LONG)
        unblocked.set()
        # the worker stays busy: the spare, released with c1 in its deque, must run it
        assert c1_ran.wait(LONG)

    done = pool.submit(root)
    assert unblocked.wait(LONG)
    hold.set()
    assert done.result(LONG) is None
    assert [c.result(LONG) for c in children] == ["c0", "c1", "c2", "c3"]
    assert runs.count == {"c0": 1, "c1": 1, "c2": 1, "c3": 1}
    wait_until(lambda: pool.stats().spares == 0, "the spare to retire")

    spare = pool.workers  # the first spare slot
    batch = steps.index("StealBatch", thief=spare, victim=0)
    _, params, deques = steps.steps[batch]
    assert params["t"] is children[0]
    assert deques[0] == (children[2], children[3]) and deques[spare] == (children[1],)
    retire = steps.index("Retire", s=spare)
    assert steps.index("Unblock", x=0) < steps.index("Pop", w=spare, t=children[1]) < retire
    assert steps.steps[retire][2][spare] == ()
    stats = pool.stats()
    assert (stats.compensated, stats.stolen, stats.stolen_tasks) == (1, 1, 2)


def test_a_worker_batch_steals_from_a_spares_deque_and_the_spare_retires_after(
        make_pool: MakePool) -> None:
    steps, runs = _Steps(), _Runs()
    pool = make_pool(1, steal="half", steal_cap=2, recorder=steps)
    gate, entered = threading.Event(), threading.Event()

    def root() -> None:
        with pool.blocking():
            entered.set()
            assert gate.wait(LONG)

    def spawner() -> list[Future[str]]:
        # on the spare (the worker blocks): the children go to the spare's own deque
        children = [pool.submit(runs.task(f"d{i}")) for i in range(4)]
        gate.set()  # the worker, idle again, finds its own deque empty and steals from here
        assert steps.batch.wait(LONG)
        return children

    blocked = pool.submit(root)
    assert entered.wait(LONG)
    children = pool.submit(spawner).result(LONG)
    assert [c.result(LONG) for c in children] == ["d0", "d1", "d2", "d3"]
    assert blocked.result(LONG) is None
    assert runs.count == {"d0": 1, "d1": 1, "d2": 1, "d3": 1}
    wait_until(lambda: pool.stats().spares == 0, "the spare to retire")

    spare = pool.workers
    batch = steps.index("StealBatch", thief=0, victim=spare)
    _, params, deques = steps.steps[batch]
    assert params["t"] is children[0]
    assert deques[0] == (children[1],) and deques[spare] == (children[2], children[3])
    retire = steps.index("Retire", s=spare)
    assert batch < retire and steps.steps[retire][2][spare] == ()
    assert pool.stats().compensated == 1
