"""The invariants and action properties of ``spec/TimerQueue.tla`` as Python predicates.

State invariants take ``(state, rebuild_floor)``; action properties take ``(before, after)``.
Names match the spec's (``INVARIANTS`` / ``ACTION_PROPERTIES`` keys) and
``TimerScheduler.check_invariants()``. Like the spec's, each predicate is written from the
contract, not from the actions: it recomputes what is live and what comes first by itself, so
a wrong action (or a wrong helper of the actions) is caught rather than repeated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable

from refsched.types import TimerEntry, TimerSnapshot, TimerState, TimerVersionView
from refsched.values import is_int as _is_int

from ..predicates import Violated

__all__ = ["ACTION_PROPERTIES", "INVARIANTS", "violated", "violated_by_step"]

_MAY_LEAVE_AN_ENTRY = frozenset({TimerState.PENDING, TimerState.CANCELLED})
_RAN = frozenset({TimerState.RUNNING, TimerState.COMPLETED, TimerState.FAILED})


def _is_time(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _live(s: TimerSnapshot) -> list[TimerEntry]:
    """Entries naming their id's current version while that version is pending."""
    out = []
    for e in s.heap:
        view = s.tasks.get(e.task_id)
        if view is not None and view.version == e.version and view.state is TimerState.PENDING:
            out.append(e)
    return out


def _comes_first(e: TimerEntry, f: TimerEntry) -> bool:
    """``e`` is handed out before ``f``: earlier time, then higher priority, then smaller seq."""
    if e.run_at != f.run_at:
        return e.run_at < f.run_at
    if e.priority != f.priority:
        return e.priority > f.priority
    return e.seq < f.seq


def type_ok(s: TimerSnapshot, rebuild_floor: int) -> bool:
    """Every variable holds a value of its type; seqs are below ``next_seq`` and unique."""
    def version_ok(v: TimerVersionView) -> bool:
        return (isinstance(v, TimerVersionView) and _is_int(v.version) and v.version >= 1
                and isinstance(v.state, TimerState) and _is_time(v.run_at)
                and _is_int(v.priority) and _is_int(v.seq) and 1 <= v.seq < s.next_seq
                and isinstance(v.cancel_requested, bool) and _is_int(v.claims)
                and v.claims >= 0)

    def entry_ok(e: TimerEntry) -> bool:
        return (isinstance(e, TimerEntry) and _is_time(e.run_at) and _is_int(e.priority)
                and _is_int(e.seq) and 1 <= e.seq < s.next_seq and _is_int(e.version)
                and e.version >= 1)

    return (_is_time(s.now) and isinstance(s.closed, bool) and _is_int(s.next_seq)
            and s.next_seq >= 1 and all(version_ok(v) for v in s.tasks.values())
            and all(entry_ok(e) for e in s.heap)
            and len({e.seq for e in s.heap}) == len(s.heap))


def heap_holds_live_versions(s: TimerSnapshot, rebuild_floor: int) -> bool:
    """Every pending version has exactly one entry, the one its variables describe; no entry
    names a version not yet made; a running, completed or failed version has no entry left."""
    for t, v in s.tasks.items():
        own = {e for e in s.heap if e.task_id == t and e.version == v.version}
        if v.state is TimerState.PENDING and own != {
                TimerEntry(v.run_at, v.priority, v.seq, t, v.version)}:
            return False
    for e in s.heap:
        view = s.tasks.get(e.task_id)
        if view is None or e.version > view.version:
            return False
        if e.version == view.version and view.state not in _MAY_LEAVE_AN_ENTRY:
            return False
    return True


def at_most_one_claim_per_version(s: TimerSnapshot, rebuild_floor: int) -> bool:
    """No version was handed out by next() twice."""
    return all(v.claims <= 1 for v in s.tasks.values())


def heap_garbage_bounded(s: TimerSnapshot, rebuild_floor: int) -> bool:
    """``len(heap) <= 2 * live + rebuild_floor``: stale entries never pile up."""
    return len(s.heap) <= 2 * len(_live(s)) + rebuild_floor


def cancel_request_only_while_running(s: TimerSnapshot, rebuild_floor: int) -> bool:
    """A stop request is only ever made of a running version (it stays once that version ends)."""
    return all(v.state in _RAN for v in s.tasks.values() if v.cancel_requested)


def _starts_running(before: TimerSnapshot, t: Hashable, w: TimerVersionView) -> bool:
    """In this step ``t``'s current version (a new one or the same) goes to running."""
    v = before.tasks.get(t)
    return w.state is TimerState.RUNNING and not (
        v is not None and v.state is TimerState.RUNNING and v.version == w.version)


def claim_takes_minimum(before: TimerSnapshot, after: TimerSnapshot) -> bool:
    """A pending version that starts running had a live entry, due, that came first."""
    live = _live(before)
    for t, w in after.tasks.items():
        v = before.tasks.get(t)
        if not (_starts_running(before, t, w) and v is not None
                and v.state is TimerState.PENDING and v.version == w.version):
            continue
        mine = [e for e in live if e.task_id == t and e.version == v.version]
        if not any(e.run_at <= before.now and not any(_comes_first(f, e) for f in live)
                   for e in mine):
            return False
    return True


def no_stale_or_cancelled_run(before: TimerSnapshot, after: TimerSnapshot) -> bool:
    """Only a pending current version ever starts running (never a new, stale or ended one)."""
    for t, w in after.tasks.items():
        if _starts_running(before, t, w):
            v = before.tasks.get(t)
            if v is None or v.state is not TimerState.PENDING or v.version != w.version:
                return False
    return True


def time_never_goes_back(before: TimerSnapshot, after: TimerSnapshot) -> bool:
    """The scheduler's time never decreases."""
    return after.now >= before.now


def terminal_stays_terminal(before: TimerSnapshot, after: TimerSnapshot) -> bool:
    """A terminal version never changes; only a new schedule (a new version) replaces it."""
    for t, v in before.tasks.items():
        if v.state.is_terminal:
            w = after.tasks.get(t)
            if w is None or (w.version == v.version and w != v):
                return False
    return True


def running_never_replaced(before: TimerSnapshot, after: TimerSnapshot) -> bool:
    """A running version is never replaced by a new schedule: it ends first."""
    return all(t in after.tasks and after.tasks[t].version == v.version
               for t, v in before.tasks.items() if v.state is TimerState.RUNNING)


INVARIANTS: dict[str, Callable[[TimerSnapshot, int], bool]] = {
    "TypeOK": type_ok,
    "HeapHoldsLiveVersions": heap_holds_live_versions,
    "AtMostOneClaimPerVersion": at_most_one_claim_per_version,
    "HeapGarbageBounded": heap_garbage_bounded,
    "CancelRequestOnlyWhileRunning": cancel_request_only_while_running,
}
violated = Violated(INVARIANTS)  # the names of those a state violates

ACTION_PROPERTIES: dict[str, Callable[[TimerSnapshot, TimerSnapshot], bool]] = {
    "ClaimTakesMinimum": claim_takes_minimum,
    "NoStaleOrCancelledRun": no_stale_or_cancelled_run,
    "TimeNeverGoesBack": time_never_goes_back,
    "TerminalStaysTerminal": terminal_stays_terminal,
    "RunningNeverReplaced": running_never_replaced,
}
violated_by_step = Violated(ACTION_PROPERTIES)  # the names of those a step violates
