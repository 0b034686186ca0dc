"""The invariants and action properties of ``spec/Scheduler.tla`` as Python predicates.

State invariants take ``(state, max_concurrency)``; action properties take
``(before, after)``. Names match the spec's (``INVARIANTS`` / ``ACTION_PROPERTIES`` keys) and
``TaskScheduler.check_invariants()``; a test keeps the three sets equal.

``EDGE_ACTION_PROPERTIES`` are the action properties of the edge kinds and of AddDeps, which only
the configs with ``OptionalEdges`` or ``AddDepsAllowed`` list. ``PROVENANCE_INVARIANTS`` and
``PROVENANCE_ACTION_PROPERTIES`` are those of the provenance, which only the configs with
``RecordProvenance`` list (they read ``Snapshot.records``).
"""

from __future__ import annotations

from collections.abc import Callable

from refsched.types import OptionalDepsView, ProvenanceView, Snapshot, TaskState, VersionView

from ..predicates import Violated
from .actions import (
    WAITING,
    count_unsettled,
    end_record,
    find_cycles,
    missing_dependencies,
    optional_of,
    required_of,
)

_ENDS = frozenset({TaskState.BLOCKED, TaskState.CANCELLED})  # the states that have a record


def type_ok(s: Snapshot, max_concurrency: int) -> bool:
    """Every variable holds a value of its type."""
    def version_ok(v: VersionView) -> bool:
        return (isinstance(v, VersionView) and isinstance(v.generation, int) and v.generation >= 1
                and isinstance(v.state, TaskState) and isinstance(v.deps, frozenset)
                and isinstance(v.remaining_deps, int) and v.remaining_deps >= 0
                and isinstance(v.cancel_requested, bool) and isinstance(v.claims, int)
                and v.claims >= 0 and isinstance(v.seq, int) and 1 <= v.seq < s.next_seq
                and (not isinstance(v, OptionalDepsView)
                     or (isinstance(v.optional, frozenset) and v.optional <= v.deps)))
    return (isinstance(s.started, bool) and isinstance(s.closed, bool)
            and isinstance(s.next_seq, int) and s.next_seq >= 1
            and all(version_ok(v) for v in s.tasks.values()))


def at_most_one_claim_per_version(s: Snapshot, max_concurrency: int) -> bool:
    """No version was handed out by ready() twice."""
    return all(v.claims <= 1 for v in s.tasks.values())


def indegree_invariant(s: Snapshot, max_concurrency: int) -> bool:
    """A waiting version's remaining count is the number of its deps not settled (required
    ones not succeeded, optional ones not ended); it is ready exactly when that number is 0."""
    for v in s.tasks.values():
        if v.state in WAITING:
            expected = count_unsettled(s.tasks, v.deps, optional_of(v))
            if v.remaining_deps != expected:
                return False
            if (v.state is TaskState.READY) != (expected == 0):
                return False
    return True


def concurrency_bound(s: Snapshot, max_concurrency: int) -> bool:
    """Never more running versions than the concurrency limit."""
    return sum(1 for v in s.tasks.values() if v.state is TaskState.RUNNING) <= max_concurrency


def blocked_has_cause(s: Snapshot, max_concurrency: int) -> bool:
    """A version is blocked exactly when it names a cause, and the cause is one of its deps."""
    return all(
        (v.state is TaskState.BLOCKED) == (v.blocked_by is not None)
        and (v.blocked_by is None or v.blocked_by in v.deps)
        for v in s.tasks.values()
    )


def blocked_propagated(s: Snapshot, max_concurrency: int) -> bool:
    """No waiting version depends through a required edge on a version that can no longer
    succeed."""
    def dead(d: object) -> bool:
        view = s.tasks.get(d)
        return view is not None and view.state.is_dead
    return all(not any(dead(d) for d in required_of(v))
               for v in s.tasks.values() if v.state in WAITING)


def sealed_graph(s: Snapshot, max_concurrency: int) -> bool:
    """Once started, every dependency was submitted and the graph has no cycle."""
    return not s.started or (not missing_dependencies(s.tasks) and not find_cycles(s.tasks))


def no_terminal_to_ready(before: Snapshot, after: Snapshot) -> bool:
    """A terminal version never changes state (it only gives way to a new generation)."""
    for t, v in before.tasks.items():
        w = after.tasks.get(t)
        if v.state.is_terminal and (w is None or (
                w.generation == v.generation and w.state is not v.state)):
            return False
    return True


def claim_only_after_deps_succeeded(before: Snapshot, after: Snapshot) -> bool:
    """A version becomes running only when every required dependency has succeeded."""
    for t, w in after.tasks.items():
        v = before.tasks.get(t)
        newly_running = w.state is TaskState.RUNNING and (
            v is None or v.generation != w.generation or v.state is not TaskState.RUNNING)
        if newly_running and count_unsettled(before.tasks, required_of(w)) != 0:
            return False
    return True


def claims_oldest_first(before: Snapshot, after: Snapshot) -> bool:
    """A step that claims a ready version claims every older ready version (smaller seq) too."""
    def claimed(t: object) -> bool:
        w = after.tasks.get(t)
        return w is not None and w.state is TaskState.RUNNING

    ready = [(t, v.seq) for t, v in before.tasks.items() if v.state is TaskState.READY]
    return all(claimed(u) for t, newer in ready if claimed(t)
               for u, older in ready if older < newer)


def running_never_replaced(before: Snapshot, after: Snapshot) -> bool:
    """A running version is never replaced by a new one: it ends first."""
    return all(t in after.tasks and after.tasks[t].generation == v.generation
               for t, v in before.tasks.items() if v.state is TaskState.RUNNING)


def _enters(before: Snapshot, after: Snapshot, t: object, states: frozenset[TaskState]) -> bool:
    """Whether the step puts the version of ``t`` into one of ``states`` (a new version in one
    of them does too)."""
    w = after.tasks.get(t)
    v = before.tasks.get(t)
    return w is not None and w.state in states and (
        v is None or v.generation != w.generation or v.state is not w.state)


def ready_only_after_deps_settled(before: Snapshot, after: Snapshot) -> bool:
    """A version becomes ready or running only once each required parent has succeeded and
    each optional parent has ended (read from the states after the step)."""
    def parent_state(d: object) -> TaskState | None:
        view = after.tasks.get(d)
        return None if view is None else view.state

    for t, w in after.tasks.items():
        if _enters(before, after, t, frozenset({TaskState.READY, TaskState.RUNNING})):
            for d in w.deps:
                state = parent_state(d)
                if d in optional_of(w):
                    if state is None or not state.is_terminal:
                        return False
                elif state is not TaskState.SUCCEEDED:
                    return False
    return True


def edges_added_only_to_pending(before: Snapshot, after: Snapshot) -> bool:
    """A version gains deps only while it is pending."""
    for t, v in before.tasks.items():
        w = after.tasks.get(t)
        if (w is not None and w.generation == v.generation and w.deps != v.deps
                and v.state is not TaskState.PENDING):
            return False
    return True


def optional_parent_never_blocks(before: Snapshot, after: Snapshot) -> bool:
    """A version is blocked only by a dead required parent, never by an optional one."""
    def dead(d: object) -> bool:
        view = after.tasks.get(d)
        return view is not None and view.state.is_dead

    return all(any(dead(d) for d in required_of(w)) for t, w in after.tasks.items()
               if _enters(before, after, t, frozenset({TaskState.BLOCKED})))


INVARIANTS: dict[str, Callable[[Snapshot, int], bool]] = {
    "TypeOK": type_ok,
    "AtMostOneClaimPerVersion": at_most_one_claim_per_version,
    "IndegreeInvariant": indegree_invariant,
    "ConcurrencyBound": concurrency_bound,
    "BlockedHasCause": blocked_has_cause,
    "BlockedPropagated": blocked_propagated,
    "SealedGraph": sealed_graph,
}
violated = Violated(INVARIANTS)  # the names of those a state violates

ACTION_PROPERTIES: dict[str, Callable[[Snapshot, Snapshot], bool]] = {
    "NoTerminalToReady": no_terminal_to_ready,
    "ClaimOnlyAfterDepsSucceeded": claim_only_after_deps_succeeded,
    "ClaimsOldestFirst": claims_oldest_first,
    "RunningNeverReplaced": running_never_replaced,
}
violated_by_step = Violated(ACTION_PROPERTIES)  # the names of those a step violates

EDGE_ACTION_PROPERTIES: dict[str, Callable[[Snapshot, Snapshot], bool]] = {
    "ReadyOnlyAfterDepsSettled": ready_only_after_deps_settled,
    "EdgesAddedOnlyToPending": edges_added_only_to_pending,
    "OptionalParentNeverBlocks": optional_parent_never_blocks,
}
violated_by_edge_step = Violated({**ACTION_PROPERTIES, **EDGE_ACTION_PROPERTIES})
"""The names of the action properties, those of the edge kinds too, that a step violates."""


# -- Provenance -----------------------------------------------------------------------------

def provenance_recorded(s: Snapshot, max_concurrency: int) -> bool:
    """Every blocked or cancelled version has a provenance record, and no other one has."""
    records = s.records
    return (all((v.state in _ENDS) == (t in records) for t, v in s.tasks.items())
            and all(t in s.tasks for t in records))


def provenance_root_ended(s: Snapshot, max_concurrency: int) -> bool:
    """A record's root ended the way the record says, while that version is current."""
    for r in s.records.values():
        root = s.tasks.get(r.root)
        if root is not None and root.generation == r.generation and root.state is not r.end:
            return False
    return True


def provenance_never_rewritten(before: Snapshot, after: Snapshot) -> bool:
    """A record, once set, stays as it is while its version is current."""
    for t, r in before.records.items():
        v, w = before.tasks.get(t), after.tasks.get(t)
        if v is not None and w is not None and v.generation == w.generation and (
                after.records.get(t) != r):
            return False
    return True


def provenance_paths_real(before: Snapshot, after: Snapshot) -> bool:
    """A record is set with a real path from a dead root: a cancelled version is its own root;
    a blocked one extends, by the required edge from it, a dead dep's path (a failed dep's is
    the dep alone, any other's is the dep's own record)."""
    for t, r in after.records.items():
        if before.records.get(t) == r:
            continue
        if not r.path or r.path[-1] != t or t not in after.tasks:
            return False
        if len(r.path) == 1:
            if r != end_record(after.tasks, t, TaskState.CANCELLED) or (
                    after.tasks[t].state is not TaskState.CANCELLED):
                return False
            continue
        p = r.path[-2]
        parent = after.tasks.get(p)
        if p not in required_of(after.tasks[t]) or parent is None or not parent.state.is_dead:
            return False
        if parent.state is TaskState.FAILED:
            expected: ProvenanceView | None = ProvenanceView(
                p, parent.generation, TaskState.FAILED, (p, t))
            if r != expected:
                return False
        else:
            kept = after.records.get(p)
            if kept is None or kept != ProvenanceView(r.root, r.generation, r.end, r.path[:-1]):
                return False
    return True


PROVENANCE_INVARIANTS: dict[str, Callable[[Snapshot, int], bool]] = {
    "ProvenanceRecorded": provenance_recorded,
    "ProvenanceRootEnded": provenance_root_ended,
}
violated_provenance = Violated(PROVENANCE_INVARIANTS)

PROVENANCE_ACTION_PROPERTIES: dict[str, Callable[[Snapshot, Snapshot], bool]] = {
    "ProvenanceNeverRewritten": provenance_never_rewritten,
    "ProvenancePathsReal": provenance_paths_real,
}
violated_by_provenance_step = Violated(PROVENANCE_ACTION_PROPERTIES)
