"""The actions of ``spec/Scheduler.tla`` as pure functions over a :class:`Snapshot`.

Each action is an :class:`Action` with ``refusal(s, ...)`` (``None`` when the action is enabled,
else why not: the error the API raises, or no error when the API call simply changes nothing) and
``step(s, ...)`` (the next state; only called when enabled). No threads, clocks or I/O: the same
state and arguments always give the same result. The code favours being obviously the spec over
being fast: every helper recomputes from the whole state.

Edge kinds. The spec's ``optional[t]`` (the deps of a version whose edge is optional) is held by
:class:`OptionalDepsView`, a :class:`VersionView` with one more field, used only for a version
that has optional edges: every other version stays a plain ``VersionView``, so the states of a
scheduler without optional edges are the very values ``TaskScheduler.snapshot()`` returns.
``SubmitOptional`` and ``AddDeps`` are in :data:`ACTIONS` and in :data:`EDGE_ACTIONS`: the
spec gates them with its constants ``OptionalEdges`` and ``AddDepsAllowed``.

Provenance. The spec's ``provenance`` is ``Snapshot.provenance``: the steps record it only in a
snapshot whose provenance is not None (the spec's ``RecordProvenance``), so every state from
:data:`INITIAL` has none, and every state from :data:`RECORDING` records.
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
from refsched.types import OptionalDepsView, ProvenanceView, Snapshot, TaskState, VersionView

PENDING, READY, RUNNING, SUCCEEDED, FAILED, BLOCKED, CANCELLED = TaskState  # the spec's order

WAITING = frozenset({PENDING, READY})  # not yet claimed: Settle may block these

Tasks = dict[Hashable, VersionView]
Records = dict[Hashable, ProvenanceView]


def optional_of(view: VersionView) -> frozenset[Hashable]:
    """The spec's ``optional[t]``: the deps of ``view`` whose edge is optional."""
    return view.optional if isinstance(view, OptionalDepsView) else frozenset()


def required_of(view: VersionView) -> frozenset[Hashable]:
    """The deps of ``view`` whose edge is required."""
    return view.deps - optional_of(view)


def with_optional(view: VersionView, optional: frozenset[Hashable]) -> VersionView:
    """``view`` with the optional edges ``optional``: a plain VersionView when there are none."""
    fields = {name: getattr(view, name) for name in VersionView.__dataclass_fields__}
    if optional:
        return OptionalDepsView(**fields, optional=frozenset(optional))
    return VersionView(**fields)


@dataclass(frozen=True)
class Refusal:
    """Why an action is not enabled: the error the API raises (``None``: no error, no change)."""

    error: type[SchedulerError] | None
    reason: str
    details: Any = None  # UnknownDependencyError's pairs, CycleError's cycles


# -- Queries over a state -------------------------------------------------------------------

def settles(tasks: Mapping[Hashable, VersionView], task_id: Hashable, optional: bool) -> bool:
    """Spec ``Settles``: whether ``task_id``'s current version no longer holds back a child
    through an edge of that kind (required: it succeeded; optional: it ended in any way)."""
    view = tasks.get(task_id)
    if view is None:
        return False
    return view.state.is_terminal if optional else view.state is SUCCEEDED


def count_unsettled(tasks: Mapping[Hashable, VersionView], deps: Iterable[Hashable],
                    optional: frozenset[Hashable] = frozenset()) -> int:
    """Spec ``Unsettled(state, D, O)``: the deps that still hold a version back."""
    return sum(1 for d in deps if not settles(tasks, d, d in optional))


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


def settle(tasks: Tasks, ended: frozenset[Hashable] = frozenset(),
           records: Records | None = None) -> tuple[Tasks, Records | None]:
    """Spec ``Settle``: block every waiting version that reaches a dead one through required
    edges of waiting ones, then settle the optional edges to every version that ended.

    ``blockedBy`` is, among the version's required deps that are dead or blocked now, the one
    with the smallest ``seq``. ``ended`` are the versions the step itself put in a dead state;
    with the newly blocked ones, each settles the optional edges to it: a waiting version has
    that many fewer deps to wait for, and is ready when none is left. With ``records`` (the
    provenance, None when it is not recorded), each newly blocked version records its own
    (:func:`blocked_records`); returns the new versions and the new records.
    """
    dead = {t for t, v in tasks.items() if v.state.is_dead}
    blocked: set[Hashable] = set()
    grew = True
    while grew:
        grew = False
        for t, v in tasks.items():
            if v.state in WAITING and t not in blocked and any(
                    d in dead or d in blocked for d in required_of(v)):
                blocked.add(t)
                grew = True
    out = dict(tasks)
    blame: dict[Hashable, Hashable] = {}
    for t in blocked:
        blame[t] = min((d for d in required_of(tasks[t]) if d in dead or d in blocked),
                       key=lambda d: tasks[d].seq)
        out[t] = replace(tasks[t], state=BLOCKED, blocked_by=blame[t])
    gone = ended | blocked
    for t, v in tasks.items():
        freed = len(optional_of(v) & gone)
        if v.state in WAITING and t not in blocked and freed:
            out[t] = _waiting(v, v.remaining_deps - freed)
    if records is None or not blocked:
        return out, records
    return out, {**records, **blocked_records(tasks, dead, blame, records)}


def end_record(tasks: Mapping[Hashable, VersionView], task_id: Hashable,
               end: TaskState) -> ProvenanceView:
    """Spec ``EndRecord``: the record of a version that ended itself, its own root."""
    return ProvenanceView(task_id, tasks[task_id].generation, end, (task_id,))


def levels(tasks: Mapping[Hashable, VersionView], dead: set[Hashable],
           blocked: Iterable[Hashable]) -> dict[Hashable, int]:
    """The spec's ``level`` in Settle: the fewest required edges from each version of ``dead``
    (0) or ``blocked`` to a dead version, through the blocked ones."""
    level = dict.fromkeys(dead, 0)
    left = set(blocked)
    k = 0
    while left:
        k += 1
        near = {x for x in left if any(level.get(d, k) < k for d in required_of(tasks[x]))}
        level.update(dict.fromkeys(near, k))
        left -= near
    return level


def blocked_records(tasks: Mapping[Hashable, VersionView], dead: set[Hashable],
                    blame: Mapping[Hashable, Hashable], records: Records) -> Records:
    """Spec Settle's ``record``: the provenance of each version Settle blocks (``blame``: each
    one's blamed dep). Its path is its blamed dep's extended by itself, when the chain of blame
    leads to a dead version; in an unstarted graph with a cycle it may loop, and then the path
    runs through the dep of smallest seq one edge nearer to a dead version. A failed dep is
    its own root."""
    sound = set(dead)
    grew = True
    while grew:
        new = {x for x, b in blame.items() if x not in sound and b in sound}
        sound |= new
        grew = bool(new)
    level = levels(tasks, dead, blame)

    def via(x: Hashable) -> Hashable:
        if x in sound:
            return blame[x]
        return min((d for d in required_of(tasks[x]) if level.get(d, -2) == level[x] - 1),
                   key=lambda d: tasks[d].seq)

    made: Records = {}

    def record(x: Hashable) -> ProvenanceView:
        if x not in made:
            d = via(x)
            if d in blame:
                root = record(d)
            elif tasks[d].state is FAILED:
                root = end_record(tasks, d, FAILED)
            else:
                root = records[d]
            made[x] = replace(root, path=(*root.path, x))
        return made[x]

    for x in blame:
        record(x)
    return made


def _waiting(view: VersionView, remaining: int) -> VersionView:
    """A waiting version with ``remaining`` deps left: ready when none is."""
    return replace(view, remaining_deps=remaining, state=READY if remaining == 0 else PENDING)


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


def _new_version(old: VersionView | None, deps: frozenset[Hashable], seq: int,
                 optional: frozenset[Hashable] = frozenset()) -> VersionView:
    """A fresh version as Submit makes it, before its dependencies are counted."""
    return with_optional(VersionView(
        generation=1 if old is None else old.generation + 1,
        state=PENDING, deps=deps, remaining_deps=0, blocked_by=None,
        cancel_requested=False, claims=0, seq=seq,
    ), optional)


def _counted(tasks: Mapping[Hashable, VersionView], view: VersionView) -> VersionView:
    return _waiting(view, count_unsettled(tasks, view.deps, optional_of(view)))


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
    return _edges_refusal(s, call, task_id, deps)


def _edges_refusal(s: Snapshot, call: str, task_id: Hashable,
                   deps: frozenset[Hashable]) -> Refusal | None:
    """After Start, new edges from ``task_id`` to ``deps`` need known ids and no cycle."""
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
    return submit_optional_step(s, task_id, deps, frozenset())


def submit_optional_refusal(s: Snapshot, task_id: Hashable, deps: frozenset[Hashable],
                            optional: frozenset[Hashable]) -> Refusal | None:
    call = f"submit({task_id!r})"
    if not optional:
        return Refusal(InvalidArgumentError, f"{call}: no optional dependency given")
    if not optional <= deps:
        return Refusal(InvalidArgumentError, f"{call}: optional dependencies "
                       f"{sorted(map(repr, optional - deps))} are not dependencies")
    return submit_refusal(s, task_id, deps)


def submit_optional_step(s: Snapshot, task_id: Hashable, deps: frozenset[Hashable],
                         optional: frozenset[Hashable]) -> Snapshot:
    old = s.tasks.get(task_id)
    tasks = dict(s.tasks)
    fresh = _new_version(old, frozenset(deps), s.next_seq, frozenset(optional))
    tasks[task_id] = _counted(tasks, fresh)
    if old is not None:
        # A replaced version that had settled an edge of a waiting dependent no longer does.
        for x in dependents(s.tasks, task_id):
            v = tasks[x]
            if v.state in WAITING and settles(s.tasks, task_id, task_id in optional_of(v)):
                tasks[x] = _waiting(v, v.remaining_deps + 1)
    settled, records = settle(tasks, records=_without(s.provenance, {task_id}))
    return s.replace(tasks=settled, next_seq=s.next_seq + 1, provenance=records)


def _without(records: Mapping[Hashable, ProvenanceView] | None,
             ids: Iterable[Hashable]) -> Records | None:
    """``records`` without the records of ``ids`` (whose versions are new); None stays None."""
    if records is None:
        return None
    gone = set(ids)
    return {t: r for t, r in records.items() if t not in gone}


def _with_ends(s: Snapshot, tasks: Mapping[Hashable, VersionView], ids: Iterable[Hashable],
               end: TaskState) -> Records | None:
    """Spec ``Recorded``: the records of ``s`` and, when it records, those of ``ids`` as
    versions that ended themselves."""
    if s.provenance is None:
        return None
    return {**s.provenance, **{t: end_record(tasks, t, end) for t in ids}}


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
    ends = (task_id,) if state is CANCELLED else ()  # a failed version keeps no record
    settled, records = settle(tasks, frozenset({task_id}), _with_ends(s, tasks, ends, state))
    return s.replace(tasks=settled, provenance=records)


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
        old = tasks[t]
        tasks[t] = _new_version(old, old.deps, s.next_seq + offset, optional_of(old))
    for t in members:  # counted only once every member is a new version, not ended
        tasks[t] = _counted(tasks, tasks[t])
    # Members were dead: a waiting version's optional edge to one was settled, and no longer is.
    for t, v in s.tasks.items():
        bumps = len(optional_of(v) & set(members))
        if v.state in WAITING and bumps:
            tasks[t] = _waiting(v, v.remaining_deps + bumps)
    settled, records = settle(tasks, records=_without(s.provenance, members))
    return s.replace(tasks=settled, next_seq=s.next_seq + len(members), provenance=records)


def close_refusal(s: Snapshot, cancel_pending: bool) -> Refusal | None:
    return Refusal(None, "close(): already closed") if s.closed else None


def close_step(s: Snapshot, cancel_pending: bool) -> Snapshot:
    tasks = dict(s.tasks)
    if not cancel_pending:
        return s.replace(closed=True)
    waiting = [t for t, v in tasks.items() if v.state in WAITING]
    for t in waiting:
        tasks[t] = replace(tasks[t], state=CANCELLED)
    return s.replace(tasks=tasks, closed=True,
                     provenance=_with_ends(s, tasks, waiting, CANCELLED))


def add_deps_refusal(s: Snapshot, task_id: Hashable, deps: frozenset[Hashable],
                     optional: frozenset[Hashable]) -> Refusal | None:
    call = f"add_deps({task_id!r})"
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"{call}: unknown task")
    if not deps:
        return Refusal(InvalidArgumentError, f"{call}: no dependency given")
    if not optional <= deps:
        return Refusal(InvalidArgumentError, f"{call}: optional dependencies "
                       f"{sorted(map(repr, optional - deps))} are not dependencies")
    if task_id in deps:
        return Refusal(InvalidArgumentError, f"{call}: a task cannot depend on itself")
    already = deps & view.deps
    if already:
        return Refusal(InvalidArgumentError,
                       f"{call}: {sorted(map(repr, already))} are dependencies already")
    if s.closed:
        return Refusal(SchedulerClosedError, f"{call}: the scheduler is closed")
    if view.state is not PENDING:
        return Refusal(InvalidTransitionError, f"{call}: generation {view.generation} is "
                       f"{view.state.value}, not pending")
    return _edges_refusal(s, call, task_id, deps)


def add_deps_step(s: Snapshot, task_id: Hashable, deps: frozenset[Hashable],
                  optional: frozenset[Hashable]) -> Snapshot:
    view = s.tasks[task_id]
    grown = with_optional(replace(view, deps=view.deps | deps), optional_of(view) | optional)
    added = count_unsettled(s.tasks, deps, frozenset(optional))
    tasks = {**s.tasks, task_id: replace(grown, remaining_deps=view.remaining_deps + added)}
    settled, records = settle(tasks, records=_without(s.provenance, ()))
    return s.replace(tasks=settled, provenance=records)


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

SubmitOptional = Action("SubmitOptional", ("t", "D", "O"), submit_optional_refusal,
                        submit_optional_step)
AddDeps = Action("AddDeps", ("t", "D", "O"), add_deps_refusal, add_deps_step)

ACTIONS: dict[str, Action] = {a.name: a for a in (
    Submit, SubmitOptional, AddDeps, Start, Claim, Complete, Fail, Cancel, AcknowledgeCancel,
    Retry, Close, StaleCallback, RepeatedCallback,
)}

EDGE_ACTIONS: dict[str, Action] = {a.name: a for a in (SubmitOptional, AddDeps)}
"""The actions of :data:`ACTIONS` the spec gates with ``OptionalEdges`` and
``AddDepsAllowed``: the TaskScheduler's ``submit(..., optional=...)`` and ``add_deps``
(``D``: every new dep; ``O``: those of ``D`` whose edge is optional). An instance with a gate
off has no step of them."""

INITIAL = Snapshot()
"""Spec ``Init``: nothing submitted, not started, not closed, ``nextSeq = 1``."""

RECORDING = Snapshot(provenance={})
"""Spec ``Init`` with ``RecordProvenance``: equal to :data:`INITIAL`, and its steps record."""
