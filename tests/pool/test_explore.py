"""The interleaving explorer on the WorkStealingPool: every pool scenario is clean on the
production class, and deliberately broken pools (subclasses overriding one method each) are
caught, with a schedule id that replays the failure.

Summaries are printed (run with ``-s`` to see the figures).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import ParamSpec, TypeVar

import pytest

from refsched import WorkStealingPool
from refsched.explore import SCENARIOS, ExploreConfig, explore, scenario
from refsched.explore.discipline import guarded_fields
from refsched.explore.pool import scenarios as pools
from refsched.pool.blocking import SpareThread
from refsched.pool.pool import _ACCEPTING, _DRAINING, _TERMINATED, _Task
from refsched.verify.mutants import Budget, run_mutant
from refsched.verify.pool.mutants import WAKEUPS
from tests.explore_support import (
    SeededBug,
    assert_explores_clean,
    assert_hooks_come_out,
    assert_seeded_bug_caught,
    bug_id,
)

_P = ParamSpec("_P")
_T = TypeVar("_T")

BOUND = ExploreConfig(max_preemptions=2)
# Scenarios explored within a smaller bound: three workers that all scan and park give more than
# 20,000 schedules within one preemption (the scenario orders its run with virtual time instead).
BOUNDS = {"pool_waiters_wake_up_as_a_child_is_pushed": ExploreConfig(max_preemptions=0)}


# -- deliberately broken pools -------------------------------------------------------------

class PopsAfterACheck(WorkStealingPool):
    """Pop split in two critical sections: a worker sees its own deque non-empty, lets go of
    the pool lock, and pops once it has the lock back; a thief can empty the deque between."""

    def _take_locked(self, w: int, victim: int | None = None) -> _Task | None:
        own = self._deques[w]
        if own:
            self._lock.release()
            self._lock.acquire()
            return own.pop()  # IndexError when a Steal took the task meanwhile
        return self._steal_locked(w, victim)


class StealsAfterACheck(WorkStealingPool):
    """Steal split in two critical sections: a thief sees a victim's deque non-empty, lets go
    of the pool lock, and takes the top once it has the lock back; the other thief or the owner
    can empty the deque between."""

    def _steal_locked(self, w: int, victim: int | None = None) -> _Task | None:
        for v, dq in enumerate(self._deques):
            if v != w and dq:
                self._lock.release()
                self._lock.acquire()
                self._stolen += 1
                return dq.popleft()  # IndexError when the task was taken meanwhile
        return None


class CountsFailedSteals(WorkStealingPool):
    """Every Steal attempt is counted in stolen, the ones that find every deque empty too."""

    def _steal_locked(self, w: int, victim: int | None = None) -> _Task | None:
        task = super()._steal_locked(w, victim)
        if task is None:
            self._stolen += 1
        return task


class WakesOneAtTermination(WorkStealingPool):
    """Termination notifies one parked worker, not all: the others never leave."""

    def _terminate_locked(self) -> None:
        self._state = _TERMINATED  # the pool compares states by identity
        if self._parked:
            w, _ = self._parked.popitem()
            self._wake[w].notify()
        self._parked.clear()
        self._terminated.notify_all()


class CountsAChildLate(WorkStealingPool):
    """SubmitChild pushes the child in one critical section and counts it (outstanding + 1) in
    a second: in between, outstanding does not cover the running parent."""

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
               ) -> Future[_T]:
        w = self._local.worker
        if w is None:
            return super().submit(fn, *args, **kwargs)
        task = _Task(self, fn, args, kwargs)
        with self._lock:
            self._deques[w].append(task)
            if self._parked and not self._searching:
                self._wake_one_locked()
        with self._lock:
            self._outstanding += 1
        return task


class DrainsBeforeTheLock(WorkStealingPool):
    """Shutdown moves the pool to draining before it takes the pool lock, when work is left."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._state is _ACCEPTING and self._outstanding:
            self._state = _DRAINING
        super().shutdown(wait, cancel_futures=cancel_futures)


class ForgetsTheJoiners(WorkStealingPool):
    """Finish does not wake the workers parked waiting on the finished task."""

    def _wake_joiners_locked(self, task: _Task) -> None:
        pass


class RegistersAJoinerUnlocked(WorkStealingPool):
    """A worker about to wait on a future makes the future's joiner list before it takes the
    pool lock: two waiters can each make one, and a Finish can wake from the other."""

    def _help_until(self, awaited: _Task, timeout: float | None) -> None:
        if awaited._joiners is None:
            awaited._joiners = []
        super()._help_until(awaited, timeout)


class KeepsTheSpare(WorkStealingPool):
    """Leaving blocking() does not release the spare: it never retires."""

    def _unblock_locked(self, x: int) -> None:
        self._spares.blocked.discard(x)


class NeverStartsTheSpare(WorkStealingPool):
    """The spare's thread is launched but never begins serving (no StartSpare)."""

    def _spare_loop(self, spare: SpareThread) -> None:
        return None


class BatchLeavesAKeptTaskBehind(WorkStealingPool):
    """A batch steal copies the task the thief keeps but leaves it in the victim's deque too:
    its owner and the thief can each run it."""

    def _steal_batch_locked(self, w: int, victim: int) -> _Task:
        task = super()._steal_batch_locked(w, victim)
        self._deques[victim].appendleft(self._deques[w][0])
        return task


BUGS: list[SeededBug] = [
    (pools.pool_pop_races_steal, PopsAfterACheck, "exception",
     "IndexError('pop from an empty deque')"),
    (pools.pool_pop_races_steal, CountsFailedSteals, "assertion",
     "stolen 2, but [] ran off the deque they were queued on"),
    (pools.pool_two_thieves_one_victim, StealsAfterACheck, "exception",
     "IndexError('pop from an empty deque')"),
    (pools.pool_two_thieves_one_victim, WakesOneAtTermination, "lost wake-up",
     "never notified"),
    (pools.pool_shutdown_races_child, CountsAChildLate, "invariant",
     "1 tasks are inside their function, yet outstanding - queued = 1 - 1 = 0"),
    (pools.pool_shutdown_races_child, DrainsBeforeTheLock, "lock discipline",
     "main wrote WorkStealingPool._state at test_explore.py"),
    (pools.pool_nested_waits, ForgetsTheJoiners, "lost wake-up", "never notified"),
    (pools.pool_nested_waits, RegistersAJoinerUnlocked, "lock discipline",
     "wrote _Task._joiners at test_explore.py"),
    (pools.pool_blocker_returns_while_its_spare_starts, KeepsTheSpare, "assertion",
     "a spare did not retire"),
    (pools.pool_shutdown_during_a_blocking_call, NeverStartsTheSpare, "assertion",
     "a spare did not retire"),
    (pools.pool_batch_steal_races_last_pop, BatchLeavesAKeptTaskBehind, "invariant",
     "tasks are inside their function, yet outstanding - queued"),
]


# -- the production pool is clean ----------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in pools.POOL_SCENARIOS if n not in BOUNDS])
def test_every_pool_scenario_explores_clean_within_two_preemptions(name: str) -> None:
    report = assert_explores_clean(pools.POOL_SCENARIOS[name], BOUND)
    assert report.executions > 1 and len(report.traces) > 1, report.summary()


@pytest.mark.parametrize("name", list(BOUNDS))
def test_the_other_pool_scenarios_explore_clean_within_their_bound(name: str) -> None:
    report = assert_explores_clean(pools.POOL_SCENARIOS[name], BOUNDS[name])
    assert report.executions > 1 and len(report.traces) > 1, report.summary()


def test_the_catalogue_knows_the_pool_scenarios() -> None:
    for name, pool_scenario in pools.POOL_SCENARIOS.items():
        assert name.startswith("pool_")
        assert SCENARIOS[name] is pool_scenario
        assert scenario(name) is pool_scenario
    # a task waits on a future there: the reduction would miss schedules, so none is used
    assert [n for n, s in pools.POOL_SCENARIOS.items() if not s.reduction] == [
        "pool_nested_waits", "pool_waiters_wake_up_as_a_child_is_pushed"]


def test_a_scenario_the_reduction_cannot_serve_is_searched_in_full() -> None:
    report = explore(pools.pool_nested_waits(), BOUND.replace(max_schedules=5))
    assert report.config.reduction is False
    assert explore(pools.pool_pop_races_steal(),
                   BOUND.replace(max_schedules=5)).config.reduction is True


# -- broken pools are caught, and the failure replays --------------------------------------

@pytest.mark.parametrize("case", BUGS, ids=bug_id)
def test_a_broken_pool_is_caught_and_replays(case: SeededBug) -> None:
    assert_seeded_bug_caught(case, BOUND)


# -- the mutation catalogue's wake-up bug -------------------------------------------------

def test_a_waiter_that_keeps_the_wake_as_it_leaves_is_killed_by_the_explorer() -> None:
    """pool_awaited_done_no_pass_wake: a worker woken for a push while the future it waits on
    ended goes back to its task without passing the wake on. Only a third, parked worker can
    run the pushed task, and nobody wakes it: the first schedule of the scenario is a lost
    wake-up (unit, lock-step and replay tests have no third worker parked at that instant)."""
    (mutant,) = (m for m in WAKEUPS if m.name == "pool_awaited_done_no_pass_wake")
    budget = replace(Budget(), scenarios=("pool_waiters_wake_up_as_a_child_is_pushed",))
    (layer,) = run_mutant(mutant, ["explore"], budget=budget).layers
    assert layer.status == "killed", layer.evidence
    assert "pool_waiters_wake_up_as_a_child_is_pushed: lost wake-up" in layer.evidence, (
        layer.evidence)


# -- lock discipline -----------------------------------------------------------------------

def test_the_pool_lock_guards_the_fields_init_assigns_after_it() -> None:
    fields = guarded_fields(WorkStealingPool)
    assert {"_state", "_outstanding", "_executed", "_stolen", "_parked",
            "_searching_flags", "_searching", "_next", "_rng", "_stolen_tasks"} <= fields
    assert not {"_workers", "_local", "_lock"} & fields


def test_the_pool_hooks_come_out_after_a_run() -> None:
    assert_hooks_come_out(pools.pool_pop_races_steal(), (WorkStealingPool, _Task))
