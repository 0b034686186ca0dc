"""The actions of ``spec/TimerQueue.tla`` as pure functions over a :class:`TimerSnapshot`.

Each action is an :class:`Action`: ``refusal(s, ...)`` (``None`` when the action is enabled,
else why not: the error the API raises, or no error when the API call simply changes nothing)
and ``step(s, ..., rebuild_floor=n)`` (the next state; only called when enabled). Schedule,
Cancel and Claim end with a compaction, the only place the constant ``RebuildFloor`` is used.
No threads, clocks or I/O: the same state and arguments always give the same result. The code
favours being obviously the spec over being fast: every helper recomputes from the whole state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from refsched.errors import (
    InvalidTransitionError,
    SchedulerClosedError,
    SchedulerError,
    StaleGenerationError,
    TaskRunningError,
    UnknownTaskError,
)
from refsched.types import TimerEntry, TimerSnapshot, TimerState, TimerVersionView

__all__ = [
    "ACTIONS",
    "INITIAL",
    "Action",
    "Refusal",
    "compact",
    "compaction_due",
    "dropped_on_top",
    "entry_of",
    "initial",
    "is_live",
    "live_entries",
    "top",
]

PENDING, RUNNING, COMPLETED, FAILED, CANCELLED = TimerState  # the spec's order


@dataclass(frozen=True)
class Refusal:
    """Why an action is not enabled: the error the API raises (``None``: no error, no change)."""

    error: type[SchedulerError] | None
    reason: str  # the API's message: the call, the value, and what is wrong with it

    @property
    def error_name(self) -> str | None:
        """The error class's name, as the API and a trace name it."""
        return None if self.error is None else self.error.__name__


# -- Queries over a state (the spec's operators) ----------------------------------------------

def entry_of(task_id: Hashable, view: TimerVersionView) -> TimerEntry:
    """The heap entry of ``task_id``'s current version, as its variables describe it."""
    return TimerEntry(view.run_at, view.priority, view.seq, task_id, view.version)


def is_live(s: TimerSnapshot, e: TimerEntry) -> bool:
    """Spec ``Live``: the entry's version is its id's current version, and that is pending."""
    view = s.tasks.get(e.task_id)
    return view is not None and view.version == e.version and view.state is PENDING


def live_entries(s: TimerSnapshot) -> frozenset[TimerEntry]:
    """The live entries of the heap."""
    return frozenset(e for e in s.heap if is_live(s, e))


def top(entries: Iterable[TimerEntry]) -> TimerEntry | None:
    """Spec ``Top``: the entry with the smallest ``(run_at, -priority, seq)``, None if none."""
    return min(entries, key=lambda e: e.key, default=None)


def dropped_on_top(s: TimerSnapshot) -> frozenset[TimerEntry]:
    """Spec ``DroppedOnTop``: the stale entries ``next()`` pops before it reaches a live one.

    Every stale entry ordered before the smallest live entry; all of them when none is live.
    """
    first = top(live_entries(s))
    return frozenset(e for e in s.heap
                     if not is_live(s, e) and (first is None or e.key < first.key))


def compaction_due(s: TimerSnapshot, rebuild_floor: int) -> bool:
    """More than ``rebuild_floor`` entries, and stale entries are more than half of them."""
    stale = len(s.heap) - len(live_entries(s))
    return len(s.heap) > rebuild_floor and 2 * stale > len(s.heap)


def compact(s: TimerSnapshot, rebuild_floor: int) -> TimerSnapshot:
    """Spec ``Compact``: the heap rebuilt from its live entries when a compaction is due."""
    return s.replace(heap=live_entries(s)) if compaction_due(s, rebuild_floor) else s


def _set(s: TimerSnapshot, task_id: Hashable, **changes: Any) -> dict[Hashable, TimerVersionView]:
    """``s.tasks`` with some fields of ``task_id``'s current version replaced."""
    return {**s.tasks, task_id: replace(s.tasks[task_id], **changes)}


# -- The actions ------------------------------------------------------------------------------

def _never(s: TimerSnapshot, *args: Any) -> bool:
    return False


def _always(s: TimerSnapshot, *args: Any) -> bool:
    return True


@dataclass(frozen=True)
class Action:
    """A spec action: its name, its parameters' names in the spec, when it is enabled, its step.

    ``refusal(s, *args)`` and ``effect(s, *args)`` take the parameters in the order of
    ``params`` (Tick may also take the time it moves to). ``step`` is the effect followed, when
    ``compacts(s, *args)`` says the spec's action ends with ``Compact``, by :func:`compact` with
    the constant ``RebuildFloor``.
    """

    name: str
    params: tuple[str, ...]
    refusal: Callable[..., Refusal | None]
    effect: Callable[..., TimerSnapshot]  # the step before its compaction
    compacts: Callable[..., bool] = _never  # Schedule, Claim; Cancel of a pending version

    def enabled(self, s: TimerSnapshot, *args: Any) -> bool:
        return self.refusal(s, *args) is None

    def step(self, s: TimerSnapshot, *args: Any, rebuild_floor: int) -> TimerSnapshot:
        after = self.effect(s, *args)
        return compact(after, rebuild_floor) if self.compacts(s, *args) else after

    def rebuilds(self, s: TimerSnapshot, *args: Any, rebuild_floor: int) -> bool:
        """Whether this step ends by rebuilding the heap (``stats().rebuilds`` + 1)."""
        return self.compacts(s, *args) and compaction_due(self.effect(s, *args), rebuild_floor)


def schedule_refusal(s: TimerSnapshot, task_id: Hashable, run_at: float,
                     priority: int) -> Refusal | None:
    call = f"schedule({task_id!r}, {run_at!r})"
    if s.closed:
        return Refusal(SchedulerClosedError, f"{call}: the scheduler is closed")
    view = s.tasks.get(task_id)
    if view is not None and view.state is RUNNING:
        return Refusal(TaskRunningError, f"{call}: version {view.version} is running")
    return None


def schedule_effect(s: TimerSnapshot, task_id: Hashable, run_at: float,
                    priority: int) -> TimerSnapshot:
    old = s.tasks.get(task_id)
    view = TimerVersionView(
        version=1 if old is None else old.version + 1, state=PENDING, run_at=run_at,
        priority=priority, seq=s.next_seq, cancel_requested=False, claims=0,
    )
    return s.replace(tasks={**s.tasks, task_id: view}, next_seq=s.next_seq + 1,
                     heap=s.heap | {entry_of(task_id, view)})


def cancel_refusal(s: TimerSnapshot, task_id: Hashable) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"cancel({task_id!r}): unknown task")
    if view.state is PENDING or (view.state is RUNNING and not view.cancel_requested):
        return None
    if view.state is RUNNING:
        return Refusal(None, f"cancel({task_id!r}): a stop was already requested")
    return Refusal(None, f"cancel({task_id!r}): already {view.state.value}")


def cancel_effect(s: TimerSnapshot, task_id: Hashable) -> TimerSnapshot:
    if s.tasks[task_id].state is RUNNING:
        return s.replace(tasks=_set(s, task_id, cancel_requested=True))
    return s.replace(tasks=_set(s, task_id, state=CANCELLED))


def cancel_compacts(s: TimerSnapshot, task_id: Hashable) -> bool:
    """Only the cancel of a pending version compacts; a stop request leaves the heap alone."""
    return s.tasks[task_id].state is PENDING


def claim_refusal(s: TimerSnapshot) -> Refusal | None:
    first = top(live_entries(s))
    if first is None:
        return Refusal(None, "next(): no live entry")
    if first.run_at > s.now:
        return Refusal(None, f"next(): the earliest entry is due at {first.run_at!r}, "
                             f"now is {s.now!r}")
    return None


def claim_effect(s: TimerSnapshot) -> TimerSnapshot:
    first = top(live_entries(s))
    assert first is not None
    view = s.tasks[first.task_id]
    tasks = _set(s, first.task_id, state=RUNNING, claims=view.claims + 1)
    return s.replace(tasks=tasks, heap=s.heap - dropped_on_top(s) - {first})


def idle_refusal(s: TimerSnapshot) -> Refusal | None:
    if claim_refusal(s) is None:
        return Refusal(None, "next(): an entry is due")
    return None


def idle_effect(s: TimerSnapshot) -> TimerSnapshot:
    return s.replace(heap=s.heap - dropped_on_top(s))


def _callback_refusal(s: TimerSnapshot, call: str, task_id: Hashable,
                      version: int) -> Refusal | None:
    """Refusals shared by the callbacks on a running version (Complete, Fail)."""
    view = s.tasks.get(task_id)
    name = f"{call}({task_id!r}, {version!r})"
    if view is None:
        return Refusal(UnknownTaskError, f"{name}: unknown task")
    if version != view.version:
        return Refusal(StaleGenerationError,
                       f"{name}: version {version} is stale, current is {view.version}")
    if view.state.is_terminal:
        return Refusal(None, f"{name}: already {view.state.value}")
    if view.state is not RUNNING:
        return Refusal(InvalidTransitionError,
                       f"{name}: version {version} is {view.state.value}, not running")
    return None


def complete_refusal(s: TimerSnapshot, task_id: Hashable, version: int) -> Refusal | None:
    return _callback_refusal(s, "complete", task_id, version)


def complete_effect(s: TimerSnapshot, task_id: Hashable, version: int) -> TimerSnapshot:
    return s.replace(tasks=_set(s, task_id, state=COMPLETED))


def fail_refusal(s: TimerSnapshot, task_id: Hashable, version: int) -> Refusal | None:
    return _callback_refusal(s, "fail", task_id, version)


def fail_effect(s: TimerSnapshot, task_id: Hashable, version: int) -> TimerSnapshot:
    return s.replace(tasks=_set(s, task_id, state=FAILED))


def stale_callback_refusal(s: TimerSnapshot, task_id: Hashable, version: int) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"({task_id!r}, {version!r}): unknown task")
    if version == view.version:
        return Refusal(None, f"({task_id!r}, {version!r}): the version is current")
    return None


def repeated_callback_refusal(s: TimerSnapshot, task_id: Hashable) -> Refusal | None:
    view = s.tasks.get(task_id)
    if view is None:
        return Refusal(UnknownTaskError, f"({task_id!r}): unknown task")
    if not view.state.is_terminal:
        return Refusal(None, f"({task_id!r}): {view.state.value}, not terminal")
    return None


def close_refusal(s: TimerSnapshot) -> Refusal | None:
    return Refusal(None, "close(): already closed") if s.closed else None


def close_effect(s: TimerSnapshot) -> TimerSnapshot:
    tasks = {t: replace(v, state=CANCELLED) if v.state is PENDING else v
             for t, v in s.tasks.items()}
    return s.replace(tasks=tasks, closed=True, heap=frozenset())


def tick_refusal(s: TimerSnapshot, to: float | None = None) -> Refusal | None:
    if to is not None and not to > s.now:
        return Refusal(None, f"the clock reads {to!r}, not later than now {s.now!r}")
    return None


def tick_effect(s: TimerSnapshot, to: float | None = None) -> TimerSnapshot:
    """Spec ``Tick``: time moves on by one unit; a real clock moves it to its reading ``to``."""
    return s.replace(now=s.now + 1 if to is None else to)


def _unchanged(s: TimerSnapshot, *args: Any) -> TimerSnapshot:
    return s


Schedule = Action("Schedule", ("t", "r", "p"), schedule_refusal, schedule_effect, _always)
Cancel = Action("Cancel", ("t",), cancel_refusal, cancel_effect, cancel_compacts)
Claim = Action("Claim", (), claim_refusal, claim_effect, _always)
Idle = Action("Idle", (), idle_refusal, idle_effect)
Complete = Action("Complete", ("t", "v"), complete_refusal, complete_effect)
Fail = Action("Fail", ("t", "v"), fail_refusal, fail_effect)
StaleCallback = Action("StaleCallback", ("t", "v"), stale_callback_refusal, _unchanged)
RepeatedCallback = Action("RepeatedCallback", ("t",), repeated_callback_refusal, _unchanged)
Close = Action("Close", (), close_refusal, close_effect)
Tick = Action("Tick", (), tick_refusal, tick_effect)

ACTIONS: dict[str, Action] = {a.name: a for a in (
    Schedule, Cancel, Claim, Idle, Complete, Fail, StaleCallback, RepeatedCallback, Close, Tick,
)}


def initial(now: float = 0) -> TimerSnapshot:
    """Spec ``Init`` at time ``now``: nothing scheduled, not closed, ``nextSeq = 1``."""
    return TimerSnapshot(now=now)


INITIAL = initial()
"""Spec ``Init``: time 0, nothing scheduled, not closed, an empty heap."""
