"""Reference model of ``spec/Schedule.tla``: one recurring schedule, its slots decided once each.

Shared by two systems, so at the model's top: the durable scheduler decides a schedule's slots
in its store transactions and the ``TimerRunner`` on its own clock, both through
``refsched.schedule.advance``, whose every step is this model's ``Decide`` or ``Release`` (a
test walks this model's state graph and compares). The actions are pure functions over an
immutable :class:`ScheduleSnapshot`, each the spec's action of the same name; :func:`explore`
is the breadth-first search of ``Next`` under ``MCSchedule``'s ``TimeBound``, the graph TLC's
``-dump dot`` of an ``MCSchedule*.cfg`` must equal. The invariants and action properties are
predicates under the spec's names, written from docs/time.md rather than from the actions.

Like the spec, and unlike production, a run is named by its slot and slots are the integers
``0, Every, 2 * Every, ... <= MaxSlot``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .dag.graph import ModelGraph, search

__all__ = [
    "ACTIONS",
    "ACTION_PROPERTIES",
    "DECISIONS",
    "INITIAL",
    "INVARIANTS",
    "OVERLAPS",
    "Action",
    "Instance",
    "ScheduleSnapshot",
    "decision",
    "explore",
    "next_steps",
    "violated",
    "violated_by_step",
    "within_bound",
]

OVERLAPS = ("skip", "buffer_one", "allow")
DECISIONS = frozenset({"run", "skipped", "missed"})
"""What a slot ends as (the spec's ``Decisions``); ``"hold"`` keeps it undecided."""


@dataclass(frozen=True, slots=True)
class Instance:
    """The constants of a model-checking instance (an ``MCSchedule*.cfg``)."""

    overlap: str  # Overlap: in OVERLAPS
    catchup: int | None  # Catchup; None for NoCatchup
    every: int  # Every: ticks between two slots, > 0
    max_slot: int  # MaxSlot: no slot after it
    max_time: int  # MaxTime: the clock stops here (TimeBound)

    @property
    def slots(self) -> range:
        """The spec's ``Slots``."""
        return range(0, self.max_slot + 1, self.every)

    @property
    def past_last(self) -> int:
        """Where ``next`` stands once every slot is decided or held."""
        return (self.max_slot // self.every + 1) * self.every


@dataclass(frozen=True, slots=True)
class ScheduleSnapshot:
    """The spec's variables."""

    now: int = 0  # >= 0; only Tick moves it
    next: int = 0  # the oldest slot neither decided nor held
    held: frozenset[int] = frozenset()  # the held slots: at most one, under buffer_one
    paused: bool = False
    unfinished: frozenset[int] = frozenset()  # the slots whose run is unfinished
    decided: frozenset[tuple[int, str]] = field(default=frozenset())  # (slot, decision)

    @property
    def decided_slots(self) -> frozenset[int]:
        """The spec's ``DecidedSlots``."""
        return frozenset(slot for slot, _ in self.decided)


INITIAL = ScheduleSnapshot()
"""The spec's ``Init``: a schedule created at time 0."""


# -- The spec's operators ------------------------------------------------------------------------

def too_old(s: ScheduleSnapshot, slot: int, inst: Instance) -> bool:
    """Spec ``TooOld``."""
    return inst.catchup is not None and s.now - slot > inst.catchup


def decision(s: ScheduleSnapshot, slot: int, inst: Instance) -> str:
    """Spec ``Decision``: ``"missed"``, ``"skipped"``, ``"hold"`` or ``"run"``."""
    if too_old(s, slot, inst):
        return "missed"
    if s.paused:
        return "skipped"
    if inst.overlap == "skip" and s.unfinished:
        return "skipped"
    if inst.overlap == "buffer_one" and s.unfinished:
        return "skipped" if s.held else "hold"
    return "run"


def owed(s: ScheduleSnapshot, inst: Instance) -> bool:
    """Spec ``Owed``."""
    return s.next in inst.slots and s.next <= s.now


def releasable(s: ScheduleSnapshot) -> bool:
    """Spec ``Releasable``."""
    return bool(s.held) and not s.unfinished


# -- Actions -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Action:
    """A spec action: enabled condition and step, over a snapshot and the constants."""

    name: str
    params: tuple[str, ...]
    enabled: Callable[..., bool]  # (s, inst, *params) -> the action's guard holds
    step: Callable[..., ScheduleSnapshot]  # (s, inst, *params) -> the next state, when enabled


def _decide(s: ScheduleSnapshot, inst: Instance) -> ScheduleSnapshot:
    d = decision(s, s.next, inst)
    if d == "hold":
        return replace(s, held=s.held | {s.next}, next=s.next + inst.every)
    return replace(s, decided=s.decided | {(s.next, d)}, next=s.next + inst.every,
                   unfinished=s.unfinished | {s.next} if d == "run" else s.unfinished)


def _release(s: ScheduleSnapshot, inst: Instance) -> ScheduleSnapshot:
    slot = min(s.held)
    return replace(s, decided=s.decided | {(slot, "run")}, unfinished=frozenset({slot}),
                   held=s.held - {slot})


ACTIONS: dict[str, Action] = {
    a.name: a for a in (
        Action("Decide", (), lambda s, inst: owed(s, inst) and not releasable(s), _decide),
        Action("Release", (), lambda s, inst: releasable(s), _release),
        Action("Finish", ("r",), lambda s, inst, r: r in s.unfinished,
               lambda s, inst, r: replace(s, unfinished=s.unfinished - {r})),
        Action("Pause", (), lambda s, inst: not s.paused,
               lambda s, inst: replace(s, paused=True)),
        Action("Resume", (), lambda s, inst: s.paused,
               lambda s, inst: replace(s, paused=False)),
        Action("Tick", (), lambda s, inst: True,
               lambda s, inst: replace(s, now=s.now + 1)),
    )
}
"""The spec's actions, in the order of its ``Next``."""


# -- The graph -----------------------------------------------------------------------------------

def next_steps(s: ScheduleSnapshot,
               inst: Instance) -> Iterator[tuple[str, dict[str, Any], ScheduleSnapshot]]:
    """Every enabled instance of ``Next`` in ``s``: (action, parameters, next state)."""
    for name, action in ACTIONS.items():
        choices: list[dict[str, Any]] = (
            [{"r": r} for r in inst.slots] if action.params else [{}])
        for params in choices:
            args = tuple(params.values())
            if action.enabled(s, inst, *args):
                yield name, params, action.step(s, inst, *args)


def within_bound(s: ScheduleSnapshot, inst: Instance) -> bool:
    """``MCSchedule``'s ``TimeBound``."""
    return s.now <= inst.max_time


def explore(inst: Instance, initial: ScheduleSnapshot = INITIAL) -> ModelGraph[ScheduleSnapshot]:
    """Breadth-first search of ``Next`` under ``TimeBound``, as TLC explores the spec."""
    return search(initial, lambda s: next_steps(s, inst), lambda s: within_bound(s, inst))


# -- Invariants and action properties ----------------------------------------------------------

def type_ok(s: ScheduleSnapshot, inst: Instance) -> bool:
    """Every variable holds a value of its type."""
    slots = set(inst.slots)
    return (isinstance(s.now, int) and s.now >= 0
            and (s.next in slots or s.next == inst.past_last)
            and s.held <= slots and isinstance(s.paused, bool) and s.unfinished <= slots
            and all(slot in slots and d in DECISIONS for slot, d in s.decided))


def skip_never_overlaps(s: ScheduleSnapshot, inst: Instance) -> bool:
    """Under skip, at most one run of the schedule is unfinished."""
    return inst.overlap != "skip" or len(s.unfinished) <= 1


def buffer_holds_one(s: ScheduleSnapshot, inst: Instance) -> bool:
    """Under buffer_one, at most one run is unfinished and at most one slot is held."""
    return inst.overlap != "buffer_one" or (len(s.unfinished) <= 1 and len(s.held) <= 1)


def one_decision_per_slot(s: ScheduleSnapshot, t: ScheduleSnapshot, inst: Instance) -> bool:
    """A decision never changes, a slot has one, and a slot is decided only once every slot
    before it is decided or held."""
    if not s.decided <= t.decided:
        return False
    if len(t.decided_slots) != len(t.decided):
        return False
    decided_after = t.decided_slots
    return all(earlier in decided_after or earlier in s.held
               for slot, _ in t.decided - s.decided
               for earlier in inst.slots if earlier < slot)


def catchup_kept(s: ScheduleSnapshot, t: ScheduleSnapshot, inst: Instance) -> bool:
    """A slot decided as its time comes (not released) is missed exactly when it is older
    than the catch-up allows (the clock before the step)."""
    for slot in t.decided_slots - s.decided_slots - s.held:
        missed = (slot, "missed") in t.decided
        if missed != (inst.catchup is not None and s.now - slot > inst.catchup):
            return False
    return True


INVARIANTS: dict[str, Callable[[ScheduleSnapshot, Instance], bool]] = {
    "TypeOK": type_ok,
    "SkipNeverOverlaps": skip_never_overlaps,
    "BufferHoldsOne": buffer_holds_one,
}
ACTION_PROPERTIES: dict[str, Callable[[ScheduleSnapshot, ScheduleSnapshot, Instance], bool]] = {
    "OneDecisionPerSlot": one_decision_per_slot,
    "CatchupKept": catchup_kept,
}


def violated(s: ScheduleSnapshot, inst: Instance) -> list[str]:
    """The names of the invariants ``s`` breaks."""
    return [name for name, holds in INVARIANTS.items() if not holds(s, inst)]


def violated_by_step(s: ScheduleSnapshot, t: ScheduleSnapshot, inst: Instance) -> list[str]:
    """The names of the action properties the step ``s`` -> ``t`` breaks."""
    return [name for name, holds in ACTION_PROPERTIES.items() if not holds(s, t, inst)]
