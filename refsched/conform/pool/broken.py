"""Work-stealing pools that each break one rule of ``docs/pool.md``, for showing that the checks
reject them.

Each is a :class:`refsched.WorkStealingPool` subclass with one plausible bug, named after it, and
built as the checks build the real one (``factory(workers=n)``); the docstring names the rule
(in ``docs/pool.md``'s words, with its action of ``spec/WorkStealing.tla``) and the bug. The
checks take the workers' moves themselves (:class:`refsched.verify.pool.driver.SteppedPool`:
``submit()``, ``_take_locked``, ``_finish_locked``, ``shutdown()``), so every bug lives in one of
those methods or in one they call; most of them are the pool's internals, since a worker's moves
are no public calls. These are seeded bugs: the pool lock is taken as the real code takes it.
The replay of the pool corpus rejects each within a few steps
(``tests/test_conform_broken_systems.py``). Two of them (``FinishLeavesOutstanding``,
``IdleShutdownNeverTerminates``) never terminate, so ``shutdown(wait=True)`` of one running its
own threads hangs: check them step by step, as the checks do.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, ParamSpec, TypeVar

from refsched.errors import SchedulerClosedError
from refsched.pool.blocking import Spares
from refsched.pool.pool import WorkStealingPool

__all__ = [
    "BROKEN",
    "BROKEN_PROFILED",
    "BatchKeepsNewestOnTop",
    "CancelFuturesLeavesQueued",
    "ChildGoesRoundRobin",
    "ChildRefusedAfterShutdown",
    "FinishLeavesOutstanding",
    "IdleShutdownNeverTerminates",
    "SpareNeverRetires",
    "SparesBeyondTheBound",
    "ThiefLeavesLastTask",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class ChildGoesRoundRobin(WorkStealingPool):
    """SubmitChild(t, w): a task submitted from inside a task of worker ``w`` goes to the bottom
    of ``w``'s own deque, where ``w`` finds it first.

    Bug: ``submit()`` from a worker pushes the child onto the deque whose round-robin turn it
    is, as it does an outside submission. (Internals: it sets the thread's worker index to that
    turn for the call.)
    """

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        local = self._local
        w = local.worker
        if w is None:
            return super().submit(fn, *args, **kwargs)
        with self._lock:
            turn = self._next
            self._next = (turn + 1) % self._workers
        local.worker = turn
        try:
            return super().submit(fn, *args, **kwargs)
        finally:
            local.worker = w


class ChildRefusedAfterShutdown(WorkStealingPool):
    """SubmitChild(t, w): while the pool drains, the running tasks may still submit children;
    only submissions from outside are refused.

    Bug: ``submit()`` refuses every submission once ``shutdown()`` was called, children too, so
    a fork-join task that forks after the shutdown fails.
    """

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        with self._lock:
            state = self._state
        if state != "accepting" and callable(fn):
            raise SchedulerClosedError(f"submit({fn!r}): the pool is {state}; it takes no new "
                                       "tasks")
        return super().submit(fn, *args, **kwargs)


class ThiefLeavesLastTask(WorkStealingPool):
    """Steal(thief, victim): a worker whose own deque is empty takes the oldest task of any
    other non-empty deque.

    Bug: a thief leaves a deque's last task to its owner and steals only from deques holding
    two tasks or more, so a task queued alone behind a busy worker waits for it. (Internals: the
    steal, ``_steal_locked``.)
    """

    def _steal_locked(self, w: int, victim: int | None = None) -> Any:
        n = self._workers
        victim = self._rng.randrange(n) if victim is None else victim
        for _ in range(n):
            if victim != w and len(self._deques[victim]) > 1:
                self._stolen += 1
                self._stolen_tasks += 1
                return self._deques[victim].popleft()
            victim = (victim + 1) % n
        return None


class FinishLeavesOutstanding(WorkStealingPool):
    """Finish(w): a task that has run no longer counts in ``outstanding``; a draining pool whose
    count reaches 0 terminates.

    Bug: the Finish step counts the task as executed and wakes its joiners, but does not take it
    off ``outstanding``, so a shut-down pool that has run anything never terminates.
    (Internals: the worker's Finish, ``_finish_locked``.)
    """

    def _finish_locked(self, task: Any, ran: bool) -> None:
        if ran:
            self._executed += 1
        if task._joiners:
            self._wake_joiners_locked(task)
        if self._outstanding == 0 and self._state == "draining":
            self._terminate_locked()


class IdleShutdownNeverTerminates(WorkStealingPool):
    """Shutdown: accepting -> draining, or straight to terminated when nothing is outstanding.

    Bug: ``shutdown()`` always goes to draining and leaves termination to the last Finish, which
    never comes when nothing was queued or running: ``shutdown(wait=True)`` of an idle pool
    hangs. (Internals: it sets the pool's state.)
    """

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._state == "accepting":
                self._state = "draining"
        super().shutdown(wait, cancel_futures=cancel_futures)


class CancelFuturesLeavesQueued(WorkStealingPool):
    """CancelQueued: ``shutdown(cancel_futures=True)`` takes every queued task out of its deque
    and cancels it; it no longer counts in ``outstanding``.

    Bug: it cancels the queued tasks' futures, as ``Future.cancel()`` would, but leaves them in
    their deques, counted, for the workers to take and drop one by one.
    """

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(False)
        if cancel_futures:
            with self._lock:
                queued = [task for dq in self._deques for task in dq]
            for task in queued:
                task.cancel()
        if wait:
            super().shutdown(True)


BROKEN: tuple[type[WorkStealingPool], ...] = (
    ChildGoesRoundRobin, ChildRefusedAfterShutdown, ThiefLeavesLastTask, FinishLeavesOutstanding,
    IdleShutdownNeverTerminates, CancelFuturesLeavesQueued,
)
"""Every broken pool, in the order of the spec's actions (SubmitChild, Steal, Finish, Shutdown,
CancelQueued)."""


class BatchKeepsNewestOnTop(WorkStealingPool):
    """StealBatch (``steal="half"``): the tasks a thief keeps go to its own deque in the order
    they had, the oldest on top.

    Bug: it keeps them newest on top, so its owner pops the oldest of them first and the next
    thief takes the newest. Single steals are untouched: only a pool asked for batch steals
    (the ``batch_steals`` profile flag, the generated phase's batch walks) shows it, so it is
    not one of :data:`BROKEN`, whose every pool the single-steal corpus rejects.
    """

    def _steal_batch_locked(self, w: int, victim: int) -> Any:
        task = super()._steal_batch_locked(w, victim)
        self._deques[w].reverse()
        return task


class SpareNeverRetires(WorkStealingPool):
    """Retire(s): a spare whose blocker returned gives its thread back once it is idle with its
    own deque empty.

    Bug: a spare never retires: it stays active after its blocker returned, so it counts
    against ``max_spares`` for ever and the next blocker past the bound has none. Only a pool
    asked for spares (the ``managed_blocking`` profile flag) shows it. (Internals: the
    retirement check, ``_may_retire_locked``.)
    """

    def _may_retire_locked(self, w: int) -> bool:
        return False


class SparesBeyondTheBound(WorkStealingPool):
    """Block(x): a spare stands in for a blocker only while fewer than ``max_spares`` are
    active (CompensationBounded); past the bound the blocker blocks uncompensated.

    Bug: the bound is checked with ``<=``, so one spare more than ``max_spares`` is started.
    Only a pool asked for spares (the ``managed_blocking`` profile flag) shows it.
    (Internals: the spares' bookkeeping, ``_spares``, is given a bound one higher.)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        spares = self._spares
        object.__setattr__(self, "_spares", Spares(spares.first, spares.bound + 1))

    @property
    def max_spares(self) -> int:
        return self._spares.bound - 1


BROKEN_PROFILED: tuple[type[WorkStealingPool], ...] = (
    BatchKeepsNewestOnTop, SpareNeverRetires, SparesBeyondTheBound)
"""The broken pools that only a pool whose profile has a flag on shows (``batch_steals``,
``managed_blocking``): the phases of a profile without it must pass them."""
