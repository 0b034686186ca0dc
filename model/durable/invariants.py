"""The invariants and action properties of ``spec/DurableScheduler.tla`` as Python predicates.

State invariants take ``(state, limits)``; action properties take ``(before, after, limits)``.
Names match the spec's (``INVARIANTS`` / ``ACTION_PROPERTIES`` keys). Scheduler's checks are
the TaskScheduler model's predicates on the scheduler part (the spec reads them through its
refinement mapping); ``Refinement`` is the spec's ``Abs!Spec`` as a step check: every step is
one of the TaskScheduler model's steps, or leaves its state alone. The lease checks are written
from the contract, not from the actions: a wrong action is caught rather than repeated.
``CallsTaken`` and ``ReportsTaken`` are the spec's enabledness checks: wherever the TaskScheduler
model takes a call or an end, the durable action is enabled and makes the same scheduler step.
``ClaimsOnlyDue``, ``ClaimsInKeyOrder`` and ``AgingBound`` are the claim order's (docs/time.md),
written from the contract's words, apart from the actions' claim order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import replace
from itertools import combinations
from typing import Any

from refsched.types import Snapshot, TaskState

from ..dag import invariants as scheduler
from ..dag.graph import next_steps as scheduler_steps
from ..predicates import Violated
from .actions import ACTIONS, DurableSnapshot, Limits, eligible

__all__ = ["ACTION_PROPERTIES", "INVARIANTS", "PROVENANCE_ACTION_PROPERTIES",
           "PROVENANCE_INVARIANTS", "violated", "violated_by_provenance_step", "violated_by_step",
           "violated_provenance"]


_ANY_WORKER = "any worker"
"""A claim's worker, when the state names none: a claim's enabledness does not depend on it."""


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _ids(s: DurableSnapshot) -> set[Hashable]:
    """Every id the state names: the spec's ``Tasks`` as far as this state can tell."""
    return (set(s.scheduler.tasks) | {d for v in s.scheduler.tasks.values() for d in v.deps}
            | set(s.attempt) | set(s.holder) | set(s.deadline) | set(s.ends)
            | set(s.ended_attempt) | set(s.due) | set(s.priority)
            | {lease[0] for leases in s.held.values() for lease in leases})


def _generation(s: DurableSnapshot, task: Hashable) -> int:
    view = s.scheduler.tasks.get(task)
    return 0 if view is None else view.generation


def _lease(s: DurableSnapshot, task: Hashable) -> tuple[Hashable, int, int]:
    return (task, _generation(s, task), s.attempt.get(task, 0))


def _running(s: DurableSnapshot, task: Hashable) -> bool:
    view = s.scheduler.tasks.get(task)
    return view is not None and view.state is TaskState.RUNNING


def type_ok(s: DurableSnapshot, limits: Limits) -> bool:
    """Every variable holds a value of its type; the scheduler part is the mapping's image
    (a version counts one claim once it was given a lease)."""
    def lease_ok(lease: object) -> bool:
        return (isinstance(lease, tuple) and len(lease) == 3
                and _is_count(lease[1]) and _is_count(lease[2]))

    return (scheduler.type_ok(s.scheduler, limits.max_concurrency)
            and all(_is_count(n) for n in s.attempt.values())
            and all(_is_count(n) for n in s.deadline.values())
            and all(_is_count(n) for n in s.ends.values()) and _is_count(s.now)
            and all(_is_count(n) for n in s.ended_attempt.values())
            and all(isinstance(leases, frozenset) and all(map(lease_ok, leases))
                    for leases in s.held.values())
            and all(v.claims == min(s.attempt.get(t, 0), 1)
                    for t, v in s.scheduler.tasks.items())
            and all(_is_count(n) for n in s.due.values())
            and all(t in s.scheduler.tasks and n in limits.priorities
                    for t, n in s.priority.items()))


def _on_scheduler(check: Callable[..., bool]) -> Callable[[DurableSnapshot, Limits], bool]:
    def holds(s: DurableSnapshot, limits: Limits) -> bool:
        return check(s.scheduler, limits.max_concurrency)
    holds.__doc__ = check.__doc__
    holds.__name__ = check.__name__
    return holds


def at_most_one_end_per_version(s: DurableSnapshot, limits: Limits) -> bool:
    """The store accepts at most one end of each version."""
    return all(n <= 1 for n in s.ends.values())


def at_most_one_live_lease(s: DurableSnapshot, limits: Limits) -> bool:
    """A version has a live lease only while it runs, and the lease of its current attempt is
    held by one worker at most: the holder, if the lease is still live."""
    for t in _ids(s):
        if t in s.holder and not _running(s, t):
            return False
        lease = _lease(s, t)
        holding = [w for w, leases in s.held.items() if lease in leases]
        if len(holding) > 1 or any(s.holder.get(t, w) != w for w in holding):
            return False
    return True


def attempts_bounded(s: DurableSnapshot, limits: Limits) -> bool:
    """No version is given more than MaxAttempts leases."""
    return all(n <= limits.max_attempts for n in s.attempt.values())


def lease_fits_state(s: DurableSnapshot, limits: Limits) -> bool:
    """An absent or waiting version carries no lease state; a running one was given a lease;
    a deadline is written exactly while a lease is live; a due time is kept only while the
    version waits, and is never further from now than the longest delay."""
    for t in _ids(s):
        view = s.scheduler.tasks.get(t)
        waiting = view is None or view.state in (TaskState.PENDING, TaskState.READY)
        if waiting and (s.attempt.get(t, 0) or t in s.holder or s.deadline.get(t, 0)
                        or s.ends.get(t, 0)):
            return False
        if _running(s, t) and s.attempt.get(t, 0) < 1:
            return False
        if (t in s.holder) != (s.deadline.get(t, 0) != 0):
            return False
        if s.due.get(t, 0) and (view is None or view.state not in (TaskState.PENDING,
                                                                   TaskState.READY)):
            return False  # a due time kept for a version that does not wait
        if s.due.get(t, 0) > s.now + max(limits.delays):
            return False
    return True


def no_lost_version(s: DurableSnapshot, limits: Limits) -> bool:
    """A running version with no live lease still has an attempt left to be re-claimed with."""
    return all(s.attempt.get(t, 0) < limits.max_attempts
               for t in _ids(s) if _running(s, t) and t not in s.holder)


def ended_attempt_fits(s: DurableSnapshot, limits: Limits) -> bool:
    """The report that ended a version was made with its newest attempt and ended it for good
    (succeeded, failed or cancelled, an accepted end); a claimed version that succeeded or was
    cancelled was ended by a report."""
    for t in _ids(s):
        view = s.scheduler.tasks.get(t)
        state = None if view is None else view.state
        ended, attempt = s.ended_attempt.get(t, 0), s.attempt.get(t, 0)
        if ended > 0 and not (ended == attempt and s.ends.get(t, 0) > 0 and state in (
                TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)):
            return False
        if (attempt > 0 and state in (TaskState.SUCCEEDED, TaskState.CANCELLED)
                and ended != attempt):
            return False
    return True


def no_future_lease(s: DurableSnapshot, limits: Limits) -> bool:
    """No worker holds a lease of a generation after the current one, or of the current
    generation with an attempt after the newest."""
    for leases in s.held.values():
        for t, g, a in leases:
            current = _generation(s, t)
            if not 1 <= g <= current:
                return False
            if g == current and not 1 <= a <= s.attempt.get(t, 0):
                return False
    return True


_CALLS = ("Submit", "Start", "Cancel", "Retry", "Close", "RepeatedCallback", "Claim",
          "SubmitOptional", "AddDeps")
_ENDS = ("Complete", "Fail", "AcknowledgeCancel")


def _scheduler_steps(s: Snapshot, tasks: list[Hashable],
                     limits: Limits) -> Iterator[tuple[str, dict[str, Any], Snapshot]]:
    """Scheduler's steps from ``s``, under the mapping's constants (the gated ones included
    exactly when the instance's ``OptionalEdges`` and ``AddDepsAllowed`` allow them)."""
    return scheduler_steps(s, tasks, limits.max_concurrency, limits.optional_edges,
                           limits.add_deps)


def _takes(s: DurableSnapshot, name: str, args: tuple[Any, ...], limits: Limits,
           target: Snapshot) -> bool:
    """The durable action ``name(args)`` is enabled and makes Scheduler's step to ``target``."""
    action = ACTIONS[name]
    return (action.enabled(s, *args, limits=limits)
            and action.step(s, *args, limits=limits).scheduler == target)


def calls_taken(s: DurableSnapshot, limits: Limits) -> bool:
    """Every call Scheduler takes from this state, the durable scheduler takes, to the same
    scheduler state (a claim by some worker, of k versions when k are due; without
    ``OldestFirst``, to one of Scheduler's claims of k)."""
    tasks = sorted(_ids(s), key=str)
    workers = sorted(set(s.held) | set(s.holder.values()), key=str) or [_ANY_WORKER]
    for name, params, target in _scheduler_steps(s.scheduler, tasks, limits):
        if name not in _CALLS:
            continue
        if name == "Claim":
            k = params["k"]
            if k > len(eligible(s)):
                continue  # Scheduler may claim a ready version that is not yet due
            if limits.oldest_first:
                taken = any(_takes(s, name, (w, k), limits, target) for w in workers)
            else:  # Scheduler's Claim(k) takes any k ready versions: the durable one, its own
                taken = any(ACTIONS[name].enabled(s, w, k, limits=limits)
                            and ACTIONS[name].step(s, w, k, limits=limits).scheduler
                            in set(_claims_of_any(s.scheduler, k)) for w in workers)
            if not taken:
                return False
            continue
        if name in ("Submit", "SubmitOptional"):  # with some priority and delay (the spec's
            # Submit has no guard on either, so one is all)
            edges = tuple(params[p] for p in ACTIONS[name].params if p not in ("p", "d"))
            if not any(_takes(s, name, (*edges, p, d), limits, target)
                       for p in limits.priorities for d in limits.delays):
                return False
            continue
        args = tuple(params[p] for p in ACTIONS[name].params)
        if not _takes(s, name, args, limits, target):
            return False
    return True


def reports_taken(s: DurableSnapshot, limits: Limits) -> bool:
    """Every end Scheduler allows is taken from the worker that holds the live lease, and the
    expiry of a last attempt past its deadline is Scheduler's Fail."""
    tasks = sorted(_ids(s), key=str)
    for name, params, target in _scheduler_steps(s.scheduler, tasks, limits):
        if name not in _ENDS:
            continue
        t = params["t"]
        lease = _lease(s, t)
        w = s.holder.get(t)
        if (w is not None and _running(s, t) and lease in s.held.get(w, frozenset())
                and not _takes(s, name, (w, *lease), limits, target)):
            return False
        if (name == "Fail" and w is not None and _running(s, t)
                and s.deadline.get(t, 0) < s.now and s.attempt.get(t, 0) >= limits.max_attempts
                and not _takes(s, "Expire", (t,), limits, target)):
            return False
    return True


def _step_on_scheduler(
        check: Callable[[Snapshot, Snapshot], bool],
) -> Callable[[DurableSnapshot, DurableSnapshot, Limits], bool]:
    """Scheduler's action property ``check``, on the scheduler part of a step (the spec's
    ``X == Abs!X``)."""
    def holds(before: DurableSnapshot, after: DurableSnapshot, limits: Limits) -> bool:
        return check(before.scheduler, after.scheduler)
    holds.__doc__ = f"Scheduler's: {check.__doc__}"
    holds.__name__ = check.__name__
    return holds


def only_current_attempt_ends(before: DurableSnapshot, after: DurableSnapshot,
                              limits: Limits) -> bool:
    """The store accepts an end only from the current attempt, under a live lease: the holder
    reports with that lease (and drops it, or keeps it when the answer is lost; no other
    worker's leases change), or, with no report, it expires after the last attempt."""
    for t in _ids(before) | _ids(after):
        if _generation(after, t) != _generation(before, t):
            continue
        if after.ends.get(t, 0) == before.ends.get(t, 0):
            continue
        if not (_running(before, t) and t in before.holder):
            return False
        lease, w = _lease(before, t), before.holder[t]
        mine = before.held.get(w, frozenset())
        others = {v: leases for v, leases in before.held.items() if v != w}
        reported = (lease in mine and after.held.get(w, frozenset()) in (mine, mine - {lease})
                    and {v: leases for v, leases in after.held.items() if v != w} == others)
        gave_up = (dict(after.held) == dict(before.held)
                   and before.deadline.get(t, 0) < before.now
                   and before.attempt.get(t, 0) >= limits.max_attempts)
        if not (reported or gave_up):
            return False
    return True


def _claims_of_any(s: Snapshot, k: int) -> Iterator[Snapshot]:
    """Scheduler's Claim(k) without ``OldestFirst``: a claim of any ``k`` ready versions
    (its guards are the same as with it, and are judged there)."""
    ready = sorted((t for t, v in s.tasks.items() if v.state is TaskState.READY), key=str)
    for chosen in combinations(ready, k):
        tasks = dict(s.tasks)
        for t in chosen:
            tasks[t] = replace(tasks[t], state=TaskState.RUNNING, claims=tasks[t].claims + 1)
        yield s.replace(tasks=tasks)


def refinement(before: DurableSnapshot, after: DurableSnapshot, limits: Limits) -> bool:
    """Every step is one of Scheduler's steps, or a stuttering one, under the mapping (with
    ``OldestFirst`` when the instance has neither priorities nor delays)."""
    if after.scheduler == before.scheduler:
        return True
    tasks = sorted(_ids(before) | _ids(after), key=str)
    for name, params, target in _scheduler_steps(before.scheduler, tasks, limits):
        if target == after.scheduler:
            return True
        if (name == "Claim" and not limits.oldest_first
                and after.scheduler in set(_claims_of_any(before.scheduler, params["k"]))):
            return True
    return False


def _claimed_now(before: DurableSnapshot, after: DurableSnapshot, t: Hashable) -> bool:
    """Spec ``ClaimedNow(t)``: the step moves the version of ``t`` from ready to running."""
    old, new = before.scheduler.tasks.get(t), after.scheduler.tasks.get(t)
    return (old is not None and new is not None and old.state is TaskState.READY
            and new.state is TaskState.RUNNING)


def _left_eligible(before: DurableSnapshot, after: DurableSnapshot, t: Hashable) -> bool:
    """Spec ``LeftEligible(t)``: the version of ``t`` was ready and due, and stays ready."""
    old, new = before.scheduler.tasks.get(t), after.scheduler.tasks.get(t)
    return (old is not None and new is not None and old.state is TaskState.READY
            and new.state is TaskState.READY and before.due.get(t, 0) <= before.now)


def _claim_pairs(before: DurableSnapshot,
                 after: DurableSnapshot) -> Iterator[tuple[Hashable, Hashable]]:
    """(t, u): the step claims ``u`` and leaves the eligible ``t`` waiting."""
    ids = _ids(before) | _ids(after)
    claimed = [u for u in ids if _claimed_now(before, after, u)]
    for t in ids:
        if claimed and _left_eligible(before, after, t):
            for u in claimed:
                yield t, u


def claims_only_due(before: DurableSnapshot, after: DurableSnapshot, limits: Limits) -> bool:
    """No version is claimed before its due time."""
    return all(before.due.get(t, 0) <= before.now
               for t in _ids(before) | _ids(after) if _claimed_now(before, after, t))


def claims_in_key_order(before: DurableSnapshot, after: DurableSnapshot,
                        limits: Limits) -> bool:
    """A claim never leaves an eligible version that comes before one it took: with aging
    ``A`` the claim key is ``priority * A - due`` (higher first), without it ``priority``
    (higher first) then ``due`` (earlier first); then the smaller seq."""
    a = limits.aging
    for t, u in _claim_pairs(before, after):
        pt, pu = before.priority.get(t, 0), before.priority.get(u, 0)
        dt, du = before.due.get(t, 0), before.due.get(u, 0)
        st, su = before.scheduler.tasks[t].seq, before.scheduler.tasks[u].seq
        if a > 0:
            first = pu * a - du > pt * a - dt or (pu * a - du == pt * a - dt and su < st)
        else:
            first = pu > pt or (pu == pt and (du < dt or (du == dt and su < st)))
        if not first:
            return False
    return True


def aging_bound(before: DurableSnapshot, after: DurableSnapshot, limits: Limits) -> bool:
    """With aging, a claim never takes ``u`` while it leaves an eligible ``t`` with
    ``due[u] - due[t] > (max(Priorities) - priority[t]) * Aging``."""
    if limits.aging == 0:
        return True
    top = max(limits.priorities)
    return all(before.due.get(u, 0) - before.due.get(t, 0)
               <= (top - before.priority.get(t, 0)) * limits.aging
               for t, u in _claim_pairs(before, after))


INVARIANTS: dict[str, Callable[[DurableSnapshot, Limits], bool]] = {
    "TypeOK": type_ok,
    "IndegreeInvariant": _on_scheduler(scheduler.indegree_invariant),
    "ConcurrencyBound": _on_scheduler(scheduler.concurrency_bound),
    "BlockedHasCause": _on_scheduler(scheduler.blocked_has_cause),
    "BlockedPropagated": _on_scheduler(scheduler.blocked_propagated),
    "SealedGraph": _on_scheduler(scheduler.sealed_graph),
    "AtMostOneEndPerVersion": at_most_one_end_per_version,
    "AtMostOneLiveLease": at_most_one_live_lease,
    "AttemptsBounded": attempts_bounded,
    "LeaseFitsState": lease_fits_state,
    "NoLostVersion": no_lost_version,
    "EndedAttemptFits": ended_attempt_fits,
    "NoFutureLease": no_future_lease,
    "CallsTaken": calls_taken,
    "ReportsTaken": reports_taken,
}
violated = Violated(INVARIANTS)  # the names of those a state violates

ACTION_PROPERTIES: dict[str, Callable[[DurableSnapshot, DurableSnapshot, Limits], bool]] = {
    "NoTerminalToReady": _step_on_scheduler(scheduler.no_terminal_to_ready),
    "ClaimOnlyAfterDepsSucceeded": _step_on_scheduler(scheduler.claim_only_after_deps_succeeded),
    "OnlyCurrentAttemptEnds": only_current_attempt_ends,
    "ClaimsOnlyDue": claims_only_due,
    "ClaimsInKeyOrder": claims_in_key_order,
    "AgingBound": aging_bound,
    "Refinement": refinement,
    "ReadyOnlyAfterDepsSettled": _step_on_scheduler(scheduler.ready_only_after_deps_settled),
    "EdgesAddedOnlyToPending": _step_on_scheduler(scheduler.edges_added_only_to_pending),
    "OptionalParentNeverBlocks": _step_on_scheduler(scheduler.optional_parent_never_blocks),
}
violated_by_step = Violated(ACTION_PROPERTIES)  # the names of those a step violates


# -- Provenance (RecordProvenance): Scheduler's, on the scheduler part ---------------------------

PROVENANCE_INVARIANTS: dict[str, Callable[[DurableSnapshot, Limits], bool]] = {
    name: _on_scheduler(check) for name, check in scheduler.PROVENANCE_INVARIANTS.items()}
violated_provenance = Violated(PROVENANCE_INVARIANTS)
"""The names of the provenance invariants a state violates (only where it is recorded)."""

PROVENANCE_ACTION_PROPERTIES: dict[
    str, Callable[[DurableSnapshot, DurableSnapshot, Limits], bool]] = {
    name: _step_on_scheduler(check)
    for name, check in scheduler.PROVENANCE_ACTION_PROPERTIES.items()}
violated_by_provenance_step = Violated(PROVENANCE_ACTION_PROPERTIES)
"""The names of the provenance action properties a step violates."""
