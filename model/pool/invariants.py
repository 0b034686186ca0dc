"""The invariants and action properties of ``spec/WorkStealing.tla`` as Python predicates.

State invariants take a state; action properties take ``(before, after)``. Names match the
spec's (``INVARIANTS`` / ``ACTION_PROPERTIES`` keys). Like the spec's, each predicate is
written from the contract, not from the actions: it recomputes what is queued and running by
itself, so a wrong action (or a wrong helper of the actions) is caught rather than repeated.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

from refsched.values import hashes as _hashable

from ..predicates import Violated
from .actions import Phase, PoolSnapshot

__all__ = ["ACTION_PROPERTIES", "INVARIANTS", "violated", "violated_by_step"]

_FORWARD = {
    Phase.ACCEPTING: frozenset(Phase),
    Phase.DRAINING: frozenset({Phase.DRAINING, Phase.TERMINATED}),
    Phase.TERMINATED: frozenset({Phase.TERMINATED}),
}


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _in_deques(s: PoolSnapshot) -> set[Hashable]:
    return {t for d in s.deque.values() for t in d}


def _running(s: PoolSnapshot) -> set[Hashable]:
    return set(s.running.values())


def type_ok(s: PoolSnapshot) -> bool:
    """Every variable holds a value of its type."""
    def mapping_of(m: object, ok: Callable[[object], bool]) -> bool:
        return isinstance(m, Mapping) and all(_hashable(k) and ok(v) for k, v in m.items())

    def deque_ok(d: object) -> bool:
        return isinstance(d, tuple) and all(_hashable(t) for t in d)

    return (isinstance(s.phase, Phase) and mapping_of(s.deque, deque_ok)
            and mapping_of(s.running, _hashable) and _is_count(s.outstanding)
            and all(isinstance(getattr(s, name), frozenset)
                    for name in ("submitted", "finished", "cancelled"))
            and mapping_of(s.runs, _is_count) and mapping_of(s.parent, _hashable))


def executed_at_most_once(s: PoolSnapshot) -> bool:
    """Every task is taken to run at most once; once taken it is in no deque, nor is any task
    in two deque slots: no later step can run it a second time."""
    slots: dict[Hashable, int] = {}
    for d in s.deque.values():
        for t in d:
            slots[t] = slots.get(t, 0) + 1
    return all(s.runs.get(t, 0) + slots.get(t, 0) <= 1 for t in set(slots) | set(s.runs))


def outstanding_is_queued_plus_running(s: PoolSnapshot) -> bool:
    """The pool's count is the number of tasks queued plus those running."""
    return s.outstanding == len(_in_deques(s) | _running(s))


def terminated_only_when_idle(s: PoolSnapshot) -> bool:
    """Terminated only with nothing outstanding, every deque empty and every worker idle."""
    return s.phase is not Phase.TERMINATED or (
        s.outstanding == 0 and not any(s.deque.values()) and not s.running)


def no_task_lost(s: PoolSnapshot) -> bool:
    """Every submitted task is queued, running, finished or cancelled, and nothing else is."""
    return set(s.submitted) == _in_deques(s) | _running(s) | s.finished | s.cancelled


def cancelled_never_ran(s: PoolSnapshot) -> bool:
    """Only a task that never started is cancelled."""
    return all(s.runs.get(t, 0) == 0 for t in s.cancelled)


def halts_only_when_terminated(s: PoolSnapshot) -> bool:
    """A pool that is not terminated can always take a step: accepting, it can be shut down;
    draining, it has a task to take or to end. Only a terminated pool halts."""
    return s.phase is not Phase.DRAINING or bool(_in_deques(s) | _running(s))


def _spawned(before: PoolSnapshot, after: PoolSnapshot) -> set[Hashable]:
    """The tasks submitted in the step."""
    return set(after.submitted - before.submitted)


def child_counted_before_parent_completes(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """A child is submitted while its parent runs, never after the parent ended (and, queued,
    it is counted: ``outstanding_is_queued_plus_running``)."""
    parents = [after.parent.get(t) for t in _spawned(before, after)]
    return all(p in _running(before) and p not in after.finished
               for p in parents if p is not None)


def _starts_running(before: PoolSnapshot, after: PoolSnapshot) -> list[Hashable]:
    """The workers that were idle and take a task in the step."""
    return [w for w in after.running if w not in before.running]


def owner_takes_bottom(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """A worker with tasks of its own takes the one at the bottom of its deque (LIFO)."""
    return all(after.running[w] == before.deque[w][-1]
               for w in _starts_running(before, after) if before.deque.get(w))


def thief_takes_top(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """A worker with an empty deque takes the task at the top of another's deque (FIFO)."""
    return all(any(v != w and d and after.running[w] == d[0] for v, d in before.deque.items())
               for w in _starts_running(before, after) if not before.deque.get(w))


def roots_only_while_accepting(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """No task is submitted from outside once shutdown() was called."""
    return all(before.phase is Phase.ACCEPTING
               for t in _spawned(before, after) if t not in after.parent)


def phases_in_order(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """accepting -> draining -> terminated, never back; only shutdown(), which moves no task,
    ends accepting."""
    if after.phase not in _FORWARD[before.phase]:
        return False
    if before.phase is Phase.ACCEPTING and after.phase is not Phase.ACCEPTING:
        return (dict(after.deque), dict(after.running), after.outstanding) == (
            dict(before.deque), dict(before.running), before.outstanding)
    return True


def _stolen(before: PoolSnapshot, after: PoolSnapshot) -> list[tuple[Hashable, int]]:
    """The thieves of the step (idle, their deque empty, and taking a task), each with how
    many tasks it took: the one it runs and those now in its deque."""
    return [(w, 1 + len(after.deque.get(w, ()))) for w in _starts_running(before, after)
            if not before.deque.get(w)]


def stolen_in_order(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """A thief takes consecutive tasks of one victim's deque and nothing else of it: it runs
    the first and keeps the others as its own deque, in the order they had. (That the first
    is the victim's top is ``thief_takes_top``.)"""
    def took_run(w: Hashable, k: int, v: Hashable, d: tuple[Hashable, ...], i: int) -> bool:
        return (d[i] == after.running[w] and i + k <= len(d)
                and after.deque.get(w, ()) == d[i + 1:i + k]
                and after.deque.get(v, ()) == d[:i] + d[i + k:])
    return all(any(took_run(w, k, v, d, i) for v, d in before.deque.items() if v != w
                   for i in range(len(d)))
               for w, k in _stolen(before, after))


def steal_takes_at_most_half(before: PoolSnapshot, after: PoolSnapshot) -> bool:
    """A steal of several tasks takes at most half of the victim's deque: a thief never leaves
    a victim with fewer tasks than it took."""
    return all(any(v != w and 2 * k <= len(d) for v, d in before.deque.items())
               for w, k in _stolen(before, after) if k > 1)


INVARIANTS: dict[str, Callable[[PoolSnapshot], bool]] = {
    "TypeOK": type_ok,
    "ExecutedAtMostOnce": executed_at_most_once,
    "OutstandingIsQueuedPlusRunning": outstanding_is_queued_plus_running,
    "TerminatedOnlyWhenIdle": terminated_only_when_idle,
    "NoTaskLost": no_task_lost,
    "CancelledNeverRan": cancelled_never_ran,
    "HaltsOnlyWhenTerminated": halts_only_when_terminated,
}
violated = Violated(INVARIANTS)  # the names of those a state violates

ACTION_PROPERTIES: dict[str, Callable[[PoolSnapshot, PoolSnapshot], bool]] = {
    "ChildCountedBeforeParentCompletes": child_counted_before_parent_completes,
    "OwnerTakesBottom": owner_takes_bottom,
    "ThiefTakesTop": thief_takes_top,
    "RootsOnlyWhileAccepting": roots_only_while_accepting,
    "PhasesInOrder": phases_in_order,
    "StolenInOrder": stolen_in_order,
    "StealTakesAtMostHalf": steal_takes_at_most_half,
}
violated_by_step = Violated(ACTION_PROPERTIES)  # the names of those a step violates
