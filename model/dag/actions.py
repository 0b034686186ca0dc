"""The actions of ``spec/Scheduler.tla`` as pure functions over a :class:`Snapshot`.

Each action is an :class:`Action` with ``refusal(s, ...)`` (``None`` when the action is enabled,
else why not: the error the API raises, or no error when the API call simply changes nothing) and
``step(s, ...)`` (the next state; only called when enabled). No threads, clocks or I/O: the same
state and arguments always give the same result. The code favours being obviously the spec over
being fast: every helper recomputes from the whole state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    SchedulerError,
    StaleGenerationError,
    TaskRunningError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import Snapshot, TaskState, VersionView

PENDING, READY, RUNNING, SUCCEEDED, FAILED, BLOCKED, CANCELLED = TaskState  # the spec's order

WAITING = frozenset({PENDING, READY})  # not yet claimed: Settle may block these

Tasks = dict[Hashable, VersionView]


@dataclass(frozen=True)
class Refusal:
    """Why an action is not enabled: the error the API raises (``None``: no error, no change)."""

    error: type[SchedulerError] | None
    reason: str
    details: Any = None  # UnknownDependencyError's pairs, CycleError's cycles


# -- Queries over a state -------------------------------------------------------------------

def is_succeeded(tasks: Mapping[Hashable, VersionView], task_id: Hashable) -> bool:
    """Whether ``task_id``'s current version succeeded (an absent id has not)."""
    view = tasks.get(task_id)
    return view is not None and view.state is SUCCEEDED


def count_not_succeeded(tasks: Mapping[Hashable, VersionView], deps: Iterable[Hashable]) -> int:
    """The spec's ``Cardinality({d \\in D : state[d] /= "succeeded"})``."""
    return sum(1 for d in deps if not is_succeeded(tasks, d))


def dependents(tasks: Mapping[Hashable, VersionView], task_id: Hashable) -> list[Hashable]:
    """Ids whose current version depends on ``task_id``."""
    return [x for x, v in tasks.items() if task_id in v.deps]


def missing_dependencies(tasks: Mapping[Hashable, VersionView]) -> list[tuple[Hashable, Hashable]]:
    """Every ``(task, dependency)`` pair whose dependency was never submitted."""
    return [(t, d) for t, v in tasks.items() for d in v.deps if d not in tasks]


def reaches(tasks: Mapping[Hashable, VersionView], sources: Iterable[Hashable],
            target: Hashable) -> list[Hashable] | None:
    """A dependency path from one of ``sources`` to ``target`` (following deps), or None."""
    parent: dict[Hashable, Hashable | None] = {s: None for s in sources}
    frontier = list(parent)
    while frontier:
        node = frontier.pop()
        if node == target:
            path = [node]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            return path[::-1]
        view = tasks.get(node)
        for d in () if view is None else view.deps:
            if d not in parent:
                parent[d] = node
                frontier.append(d)
    return None


def find_cycles(tasks: Mapping[Hashable, VersionView]) -> list[list[Hashable]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component that has one.

    Each entry is a dependency of the next. Components are found by mutual reachability,
    which is quadratic: fine for a model, never for production.
    """
    cycles: list[list[Hashable]] = []
    seen: set[Hashable] = set()
    for t in tasks:
        if t in seen:
            continue
        back = reaches(tasks, tasks[t].deps, t)  # t -> ... -> t along deps
        if back is None:
            continue
        component = {x for x in tasks if x == t or (
            reaches(tasks, tasks[t].deps, x) is not None and reaches(tasks, tasks[x].deps, t))}
        seen |= component
        # back runs from a dep of t down to t, each entry depending on the next: reversed and
        # closed with t, each entry is a dependency of the next.
        cycles.append([*back[::-1], t])
    return cycles


def ready_order(tasks: Mapping[Hashable, VersionView]) -> list[Hashable]:
    """Ready ids, smallest submission sequence first: the order Claim takes them."""
    return sorted((t for t, v in tasks.items() if v.state is READY), key=lambda t: tasks[t].seq)


def running_count(tasks: Mapping[Hashable, VersionView]) -> int:
    return sum(1 for v in tasks.values() if v.state is RUNNING)


def settle(tasks: Tasks) -> Tasks:
    """Spec ``Settle``: block every waiting version that reaches a dead one through waiting ones.

    ``blockedBy`` is, among the version's deps that are dead or blocked now, the one with the
    smallest ``seq``.
    """
    dead = {t for t, v in tasks.items() if v.state.is_dead}
    blocked: set[Hashable] = set()
    grew = True
    while grew:
        grew = False
        for t, v in tasks.items():
            if v.state in WAITING and t not in blocked and any(
                    d in dead or d in blocked for d in v.deps):
                blocked.add(t)
                grew = True
    out = dict(tasks)
    for t in blocked:
        cause = min((d for d in tasks[t].deps if d in dead or d in blocked),
                    key=lambda d: tasks[d].seq)
        out[t] = replace(tasks[t], state=BLOCKED, blocked_by=cause)
    return out


def retry_set(tasks: Mapping[Hashable, VersionView], task_id: Hashable) -> list[Hashable]:
    """``task_id`` and every blocked version whose ``blockedBy`` chain leads back to it."""
    members = [task_id]
    grew = True
    while grew:
        grew = False
        for t, v in tasks.items():
            if v.state is BLOCKED and t not in members and v.blocked_by in members:
                members.append(t)
                grew = True
    return members


def _new_version(old: VersionView | None, deps: frozenset[Hashable], seq: int) -> VersionView:
    """A fresh version as Submit makes it, before its dependencies are counted."""
    return VersionView(
        generation=1 if old is None else old.generation + 1,
        state=PENDING, deps=deps, remaining_deps=0, blocked_by=None,
        cancel_requested=False, claims=0, seq=seq,
    )


def _counted(tasks: Mapping[Hashable, VersionView], view: VersionView) -> VersionView:
    remaining = count_not_succeeded(tasks, view.deps)
    return replace(view, remaining_deps=remaining, state=READY if remaining == 0 else PENDING)


def _callback_refusal(s: Snapshot, call: str, task_id: Hashable, generation: int) -> Refusal | None:
    """Refusals shared by the callbacks on a running version (Complete, Fail, AcknowledgeCancel)."""
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"{call}({task_id!r}, {generation}): unknown task")
    if generation != view.generation:
        return Refusal(StaleGenerationError, f"{call}({task_id!r}, {generation}): generation "
                       f"{generation} is stale, current is {view.generation}")
    if view.state.is_terminal:
        return Refusal(None, f"{call}({task_id!r}, {generation}): already {view.state.value}")
    if view.state is not RUNNING:
        return Refusal(InvalidTransitionError, f"{call}({task_id!r}, {generation}): the version "
                       f"is {view.state.value}, not running")
    return None


# -- The actions ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    """A spec action: its name, its parameters' names in the spec, when it is enabled, its step.

    ``refusal`` and ``step`` take the parameters in the order of ``params``; Claim also takes
    the constant ``MaxConcurrency`` after ``k``.
    """

    name: str
    params: tuple[str, ...]
    refusal: Callable[..., Refusal | None]
    step: Callable[..., Snapshot]

    def enabled(self, s: Snapshot, *args: Any) -> bool:
        return self.refusal(s, *args) is None


def submit_refusal(s: Snapshot, task_id: Hashable, deps: frozenset[Hashable]) -> Refusal | None:
    call = f"submit({task_id!r})"
    if task_id in deps:
        return Refusal(InvalidArgumentError, f"{call}: a task cannot depend on itself")
    if s.closed:
        return Refusal(SchedulerClosedError, f"{call}: the scheduler is closed")
    view = s.tasks.get(task_id)
    if view is not None and view.state is RUNNING:
        return Refusal(TaskRunningError, f"{call}: generation {view.generation} is running")
    if s.started:
        missing = [(task_id, d) for d in deps if d not in s.tasks]
        if missing:
            return Refusal(UnknownDependencyError, f"{call}: unknown dependencies", missing)
        path = reaches(s.tasks, deps, task_id)
        if path is not None:
            # path runs d -> ... -> task_id along deps; reversed and closed with task_id (which
            # will depend on d), each entry is a dependency of the next.
            cycle = [*path[::-1], task_id]
            return Refusal(CycleError, f"{call}: the new dependencies close a cycle", [cycle])
    return None


def submit_step(s: Snapshot, task_id: Hashable, deps: frozenset[Hashable]) -> Snapshot:
    old = s.tasks.get(task_id)
    tasks = dict(s.tasks)
    tasks[task_id] = _counted(tasks, _new_version(old, frozenset(deps), s.next_seq))
    if old is not None and old.state is SUCCEEDED:
        for x in dependents(tasks, task_id):
            v = tasks[x]
            if v.state in WAITING:
                tasks[x] = replace(v, remaining_deps=v.remaining_deps + 1, state=PENDING)
    return s.replace(tasks=settle(tasks), next_seq=s.next_seq + 1)


def start_refusal(s: Snapshot) -> Refusal | None:
    if s.closed:
        return Refusal(SchedulerClosedError, "start(): the scheduler is closed")
    if s.started:
        return Refusal(InvalidTransitionError, "start(): already started")
    missing = missing_dependencies(s.tasks)
    if missing:
        return Refusal(UnknownDependencyError, "start(): unknown dependencies", missing)
    cycles = find_cycles(s.tasks)
    if cycles:
        return Refusal(CycleError, "start(): the dependency graph has a cycle", cycles)
    return None


def start_step(s: Snapshot) -> Snapshot:
    return s.replace(started=True)


def claim_refusal(s: Snapshot, k: int, max_concurrency: int) -> Refusal | None:
    if not s.started:
        return Refusal(InvalidTransitionError, "ready(): start() has not been called")
    if s.closed:
        return Refusal(None, "ready(): closed")
    free = min(len(ready_order(s.tasks)), max_concurrency - running_count(s.tasks))
    if not 1 <= k <= free:
        return Refusal(None, f"ready(): cannot claim {k}, {free} claimable")
    return None


def claim_step(s: Snapshot, k: int, max_concurrency: int) -> Snapshot:
    tasks = dict(s.tasks)
    for t in ready_order(tasks)[:k]:
        tasks[t] = replace(tasks[t], state=RUNNING, claims=tasks[t].claims + 1)
    return s.replace(tasks=tasks)


def complete_refusal(s: Snapshot, task_id: Hashable, generation: int) -> Refusal | None:
    return _callback_refusal(s, "complete", task_id, generation)


def complete_step(s: Snapshot, task_id: Hashable, generation: int) -> Snapshot:
    tasks = dict(s.tasks)
    tasks[task_id] = replace(tasks[task_id], state=SUCCEEDED)
    for x in dependents(tasks, task_id):
        v = tasks[x]
        if v.state is PENDING:
            remaining = v.remaining_deps - 1
            tasks[x] = replace(v, remaining_deps=remaining,
                               state=READY if remaining == 0 else PENDING)
    return s.replace(tasks=tasks)


def fail_refusal(s: Snapshot, task_id: Hashable, generation: int) -> Refusal | None:
    return _callback_refusal(s, "fail", task_id, generation)


def _end_dead(s: Snapshot, task_id: Hashable, state: TaskState) -> Snapshot:
    tasks = dict(s.tasks)
    tasks[task_id] = replace(tasks[task_id], state=state)
    return s.replace(tasks=settle(tasks))


def fail_step(s: Snapshot, task_id: Hashable, generation: int) -> Snapshot:
    return _end_dead(s, task_id, FAILED)


def cancel_refusal(s: Snapshot, task_id: Hashable) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"cancel({task_id!r}): unknown task")
    if view.state in WAITING or (view.state is RUNNING and not view.cancel_requested):
        return None
    return Refusal(None, f"cancel({task_id!r}): already {view.state.value}")


def cancel_step(s: Snapshot, task_id: Hashable) -> Snapshot:
    view = s.tasks[task_id]
    if view.state is RUNNING:
        return s.replace(tasks={**s.tasks, task_id: replace(view, cancel_requested=True)})
    return _end_dead(s, task_id, CANCELLED)


def acknowledge_cancel_refusal(s: Snapshot, task_id: Hashable, generation: int) -> Refusal | None:
    return _callback_refusal(s, "acknowledge_cancel", task_id, generation)


def acknowledge_cancel_step(s: Snapshot, task_id: Hashable, generation: int) -> Snapshot:
    return _end_dead(s, task_id, CANCELLED)


def retry_refusal(s: Snapshot, task_id: Hashable) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"retry({task_id!r}): unknown task")
    if s.closed:
        return Refusal(SchedulerClosedError, f"retry({task_id!r}): the scheduler is closed")
    if not view.state.is_dead:
        return Refusal(InvalidTransitionError, f"retry({task_id!r}): the version is "
                       f"{view.state.value}, not failed, cancelled or blocked")
    return None


def retry_step(s: Snapshot, task_id: Hashable) -> Snapshot:
    members = sorted(retry_set(s.tasks, task_id), key=lambda t: s.tasks[t].seq)
    tasks = dict(s.tasks)
    for offset, t in enumerate(members):
        tasks[t] = _new_version(tasks[t], tasks[t].deps, s.next_seq + offset)
    for t in members:  # counted only once every member is a new, unsucceeded version
        tasks[t] = _counted(tasks, tasks[t])
    return s.replace(tasks=settle(tasks), next_seq=s.next_seq + len(members))


def close_refusal(s: Snapshot, cancel_pending: bool) -> Refusal | None:
    return Refusal(None, "close(): already closed") if s.closed else None


def close_step(s: Snapshot, cancel_pending: bool) -> Snapshot:
    tasks = dict(s.tasks)
    if cancel_pending:
        for t, v in tasks.items():
            if v.state in WAITING:
                tasks[t] = replace(v, state=CANCELLED)
    return s.replace(tasks=tasks, closed=True)


def stale_callback_refusal(s: Snapshot, task_id: Hashable, generation: int) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"({task_id!r}, {generation}): unknown task")
    if generation == view.generation:
        return Refusal(None, f"({task_id!r}, {generation}): generation is current")
    return None


def repeated_callback_refusal(s: Snapshot, task_id: Hashable) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"({task_id!r}): unknown task")
    if not view.state.is_terminal:
        return Refusal(None, f"({task_id!r}): not terminal")
    return None


def _unchanged(s: Snapshot, *args: Any) -> Snapshot:
    return s


Submit = Action("Submit", ("t", "D"), submit_refusal, submit_step)
Start = Action("Start", (), start_refusal, start_step)
Claim = Action("Claim", ("k",), claim_refusal, claim_step)
Complete = Action("Complete", ("t", "g"), complete_refusal, complete_step)
Fail = Action("Fail", ("t", "g"), fail_refusal, fail_step)
Cancel = Action("Cancel", ("t",), cancel_refusal, cancel_step)
AcknowledgeCancel = Action("AcknowledgeCancel", ("t", "g"), acknowledge_cancel_refusal,
                           acknowledge_cancel_step)
Retry = Action("Retry", ("t",), retry_refusal, retry_step)
Close = Action("Close", ("cancelPending",), close_refusal, close_step)
StaleCallback = Action("StaleCallback", ("t", "g"), stale_callback_refusal, _unchanged)
RepeatedCallback = Action("RepeatedCallback", ("t",), repeated_callback_refusal, _unchanged)

ACTIONS: dict[str, Action] = {a.name: a for a in (
    Submit, Start, Claim, Complete, Fail, Cancel, AcknowledgeCancel, Retry, Close,
    StaleCallback, RepeatedCallback,
)}

INITIAL = Snapshot()
"""Spec ``Init``: nothing submitted, not started, not closed, ``nextSeq = 1``."""
