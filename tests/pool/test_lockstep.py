"""WorkStealingPool and the pool's reference model agree, step for step, on random walks.

The must-fail tests feed the same state machine pools that each break one rule of the spec the
way a plausible bug would, and show it catches each one and says what went wrong.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest

from refsched import WorkStealingPool
from refsched.errors import SchedulerClosedError
from refsched.model.pool.blocking import BlockingSnapshot
from refsched.pool.pool import PoolStats, _Task
from refsched.verify.pool.lockstep import (
    BATCH_STEAL_CAPS,
    BLOCKING_MAX_SPARES,
    Disagreement,
    run_pool_lockstep,
)
from refsched.verify.pool.spec import blocking_snapshot_of


def test_the_pool_agrees_with_the_model_and_takes_every_action() -> None:
    started = time.perf_counter()
    ledger = run_pool_lockstep(WorkStealingPool, examples=300, steps=50)
    assert ledger.actions["StealBatch"] == 0, ledger.summary()  # single steals by default
    # and with batch steals: the same walks, StealCap 2 then 3 on both sides
    batches = {}
    for cap in BATCH_STEAL_CAPS:
        before = ledger.actions["StealBatch"]
        run_pool_lockstep(WorkStealingPool, examples=200, steps=50, ledger=ledger,
                          steal_cap=cap)
        batches[cap] = ledger.actions["StealBatch"] - before
    print(f"{ledger.summary()} in {time.perf_counter() - started:.1f}s")
    assert ledger.missing() == [], ledger.summary()
    for action in ("SubmitExternal", "SubmitChild", "Pop", "Steal", "Finish"):
        assert ledger.actions[action] >= 300, ledger.summary()
    assert min(batches.values()) >= 10, batches
    for refused in ("SubmitExternal refused", "submit(not callable) refused"):
        assert ledger.actions[refused] >= 20, ledger.summary()


def test_with_managed_blocking_the_pool_agrees_and_takes_every_action() -> None:
    started = time.perf_counter()
    ledger = run_pool_lockstep(WorkStealingPool, examples=120, steps=60,
                               max_spares=BLOCKING_MAX_SPARES)
    # and with a single spare: a second blocker blocks uncompensated more often
    run_pool_lockstep(WorkStealingPool, examples=60, steps=60, ledger=ledger, max_spares=1)
    print(f"{ledger.summary()} in {time.perf_counter() - started:.1f}s")
    assert ledger.missing() == ["StealBatch"], ledger.summary()  # single steals here
    for action in ("Block", "StartSpare", "Unblock", "Retire"):
        assert ledger.actions[action] >= 100, ledger.summary()


# -- Broken pools: each breaks one rule ----------------------------------------------------------

class ChildGoesElsewhere(WorkStealingPool):
    """A child goes to the next worker's deque, not to its parent's worker's."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future = super().submit(fn, *args, **kwargs)
        w = self._local.worker
        if w is not None:
            with self._lock:
                self._deques[(w + 1) % self._workers].append(self._deques[w].pop())
        return future


class RefusedSubmitCounts(WorkStealingPool):
    """A root submitted after shutdown() is refused, but counted first."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().submit(fn, *args, **kwargs)
        except SchedulerClosedError:
            with self._lock:
                self._outstanding += 1
            raise


class StealsFromItself(WorkStealingPool):
    """A thief whose own deque is empty takes from the victim's bottom, like its owner."""

    def _steal_locked(self, w: int, victim: int | None = None) -> _Task | None:
        for dq in self._deques:
            if dq:
                self._stolen += 1
                return dq.pop()
        return None


class CancelLeavesFutures(WorkStealingPool):
    """shutdown(cancel_futures=True) takes queued tasks out, but their futures stay pending."""

    def _cancel_queued_locked(self) -> list[_Task]:
        taken = sum(len(dq) for dq in self._deques)
        for dq in self._deques:
            dq.clear()
        self._outstanding -= taken
        if taken and self._outstanding == 0:
            self._terminate_locked()
        return []


class QueueLengthsSkipEmpty(WorkStealingPool):
    """Leaves the empty deques out of stats().queue_lengths: the lengths no longer line up with
    the workers."""

    def stats(self) -> PoolStats:
        counted = super().stats()
        return dataclasses.replace(counted,
                                   queue_lengths=tuple(n for n in counted.queue_lengths if n))


class BatchKeepsNewestOnTop(WorkStealingPool):
    """A batch steal puts the tasks the thief keeps into its deque in reverse order."""

    def _steal_batch_locked(self, w: int, victim: int) -> _Task:
        task = super()._steal_batch_locked(w, victim)
        self._deques[w].reverse()
        return task


def test_a_batch_steal_that_loses_the_order_is_caught() -> None:
    with pytest.raises(Disagreement) as caught:
        run_pool_lockstep(BatchKeepsNewestOnTop, examples=300, steps=50, shrink=False,
                          steal_cap=max(BATCH_STEAL_CAPS))
    assert "the pool's state is not the model's" in str(caught.value)
    assert "StealBatch" in str(caught.value)


@pytest.mark.parametrize(("factory", "says"), [
    (ChildGoesElsewhere, "the pool's state is not the model's"),
    (RefusedSubmitCounts, "a refused call changed the pool"),
    (StealsFromItself, "the pool's state is not the model's"),
    (CancelLeavesFutures, "the pool's state is not the model's"),
    (QueueLengthsSkipEmpty, "the pool's stats() are not what the model's steps count: "
                            "queue_lengths\n  field                  model      pool\n"
                            "  stats().queue_lengths  "),
], ids=["child-goes-elsewhere", "refused-submit-counts", "steals-bottom",
        "cancel-leaves-futures", "queue-lengths-skip-empty"])
def test_a_broken_pool_is_caught(factory: Callable[..., Any], says: str) -> None:
    with pytest.raises(Disagreement) as caught:
        run_pool_lockstep(factory, examples=300, steps=50, shrink=False)
    text = str(caught.value)
    assert says in text, text
    assert "steps:\n  1. " in text, text


def test_a_disagreement_is_shrunk_to_a_short_walk() -> None:
    with pytest.raises(Disagreement) as caught:
        run_pool_lockstep(ChildGoesElsewhere, examples=300, steps=50)
    walk = str(caught.value).split("steps:\n")[1].splitlines()
    # a few roots, a Pop, then the child that lands on the wrong deque; not 50 steps
    assert len(walk) <= 10, walk
    assert "Pop" in " ".join(walk) and "SubmitChild" in walk[-1], walk


# -- Broken pools with managed blocking ----------------------------------------------------------

class UnblockKeepsTheSpare(WorkStealingPool):
    """Leaving blocking() does not release the spare: it goes on standing in for a thread that
    runs again."""

    def _unblock_locked(self, x: int) -> None:
        self._spares.blocked.discard(x)


class SpareNeverRetires(WorkStealingPool):
    """A released spare, idle with its deque empty, serves on instead of retiring."""

    def _may_retire_locked(self, w: int) -> bool:
        return False


class SparesUnbounded(WorkStealingPool):
    """Block launches a spare whatever the number already active: max_spares bounds nothing."""

    def _block_locked(self, x: int) -> None:
        spares, bound = self._spares, self._spares.bound
        spares.bound = bound + len(spares.blocked) + 1  # type: ignore[misc]
        try:
            super()._block_locked(x)
        finally:
            spares.bound = bound  # type: ignore[misc]




@pytest.mark.parametrize(("factory", "says"), [
    (UnblockKeepsTheSpare, "the pool's managed blocking is not the model's"),
    (SpareNeverRetires, "Retire"),
    (SparesUnbounded, "the pool's managed blocking is not the model's"),
], ids=["unblock-keeps-the-spare", "spare-never-retires", "spares-unbounded"])
def test_a_broken_pool_with_managed_blocking_is_caught(factory: Callable[..., Any],
                                                       says: str) -> None:
    with pytest.raises(Disagreement) as caught:
        run_pool_lockstep(factory, examples=300, steps=60, shrink=False,
                          max_spares=BLOCKING_MAX_SPARES)
    text = str(caught.value)
    assert says in text, text
    assert "Block" in text, text


def test_a_disagreement_with_managed_blocking_carries_a_spec_trace_of_the_walk() -> None:
    with pytest.raises(Disagreement) as caught:
        run_pool_lockstep(UnblockKeepsTheSpare, examples=300, steps=60, shrink=False,
                          max_spares=BLOCKING_MAX_SPARES)
    trace = caught.value.trace
    assert trace.constants["MaxSpares"] == BLOCKING_MAX_SPARES, trace.constants
    states = [blocking_snapshot_of(trace.initial)]
    states += [blocking_snapshot_of(step.state) for step in trace.steps]
    assert states[0] == BlockingSnapshot()
    assert trace.steps[-1].action == "Unblock", [s.action for s in trace.steps]
    x = trace.steps[-1].params["x"]
    # the model's Unblock: x no longer blocked, and no spare stands in for it
    assert x not in states[-1].blocked and not any(x in b for b in states[-1].blocker.values())
