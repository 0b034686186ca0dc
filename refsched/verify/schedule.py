"""``spec/Schedule.tla``'s states read as the model's, for the checks that TLC and the model agree.

A recurring schedule is no system of its own (the durable scheduler and the ``TimerRunner``
share it), so it has no adapter in ``refsched.verify.system``; :data:`SCHEDULE` gives
``refsched.verify.stategraph`` and the spec mutants what they read of one: the configs'
constants, how a TLC state reads as a :class:`~refsched.model.schedule.ScheduleSnapshot` (a
state of another shape is a :class:`SpecStateError`, never a silently different snapshot), and
back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from refsched.model.dag.graph import ModelGraph, describe
from refsched.model.schedule import (
    ACTIONS,
    DECISIONS,
    OVERLAPS,
    Instance,
    ScheduleSnapshot,
    explore,
)
from refsched.verify import tlc
from refsched.verify.specstate import SpecStateError
from refsched.verify.tla import ModelValue

__all__ = ["CONFIGS", "SCHEDULE", "SPEC_VARIABLES", "read_instance", "show", "snapshot_of",
           "spec_state"]

SPEC_VARIABLES = ("now", "next", "held", "paused", "unfinished", "decided")
"""The spec's variables, in the order of its ``VARIABLES`` declaration."""

CONFIGS = ("MCSchedule.cfg", "MCScheduleBuffer.cfg", "MCScheduleAllow.cfg")
"""The safety instances, one per overlap policy: TLC's graph of each is the model's."""

_CONSTANTS = ("Overlap", "Catchup", "Every", "MaxSlot", "MaxTime")


def read_instance(config: str | Path) -> Instance:
    """The constants of an ``MCSchedule*.cfg`` (relative paths: under ``spec/``)."""
    path, _, values = tlc.read_config(config, _CONSTANTS)
    overlap, catchup = values["Overlap"], values["Catchup"]
    if overlap not in OVERLAPS:
        raise ValueError(f"{path}: Overlap must be one of {', '.join(map(repr, OVERLAPS))}")
    if catchup != ModelValue("NoCatchup") and not _nat(catchup):
        raise ValueError(f"{path}: Catchup must be a natural number or NoCatchup")
    for name in ("Every", "MaxSlot", "MaxTime"):
        if not _nat(values[name]):
            raise ValueError(f"{path}: {name} must be a natural number")
    if values["Every"] == 0:
        raise ValueError(f"{path}: Every must be > 0")
    return Instance(overlap, None if isinstance(catchup, ModelValue) else catchup,
                    values["Every"], values["MaxSlot"], values["MaxTime"])


def _nat(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _slots(name: str, value: object) -> frozenset[int]:
    if not isinstance(value, frozenset) or not all(_nat(x) for x in value):
        raise SpecStateError(f"{name} must be a set of slots, not {value!r}")
    return value


def snapshot_of(values: Mapping[str, Any]) -> ScheduleSnapshot:
    """The spec's variables (TLC's or a trace's) -> the model's state."""
    missing = [v for v in SPEC_VARIABLES if v not in values]
    if missing:
        raise SpecStateError(f"no value for {', '.join(missing)}")
    now, nxt, paused, decided = (values["now"], values["next"], values["paused"],
                                 values["decided"])
    if not _nat(now) or not _nat(nxt):
        raise SpecStateError(f"now and next must be natural numbers, not {now!r}, {nxt!r}")
    if not isinstance(paused, bool):
        raise SpecStateError(f"paused must be a boolean, not {paused!r}")
    if not isinstance(decided, frozenset) or not all(
            isinstance(p, tuple) and len(p) == 2 and _nat(p[0]) and p[1] in DECISIONS
            for p in decided):
        raise SpecStateError(f"decided must be a set of <<slot, decision>>, not {decided!r}")
    return ScheduleSnapshot(now, nxt, _slots("held", values["held"]), paused,
                            _slots("unfinished", values["unfinished"]), decided)


def spec_state(s: ScheduleSnapshot) -> dict[str, Any]:
    """The model's state -> the spec's variables."""
    return {"now": s.now, "next": s.next, "held": s.held, "paused": s.paused,
            "unfinished": s.unfinished, "decided": s.decided}


def show(s: ScheduleSnapshot) -> str:
    """A state on one line, as mismatch messages show it."""
    decided = ", ".join(f"{slot}:{d}" for slot, d in sorted(s.decided))
    return (f"now={s.now} next={s.next} held={sorted(s.held)} paused={s.paused} "
            f"unfinished={sorted(s.unfinished)} decided={{{decided}}}")


class _Schedule:
    """What ``stategraph`` and the spec mutants read of a system, for the schedule spec."""

    name = "schedule"
    module = "Schedule"
    mc_module = "MCSchedule.tla"
    traces_config = CONFIGS[0]
    label_actions: Mapping[str, str] = MappingProxyType({})
    actions = ACTIONS

    def module_of(self, config: str) -> str:
        return self.mc_module

    def read_instance(self, config: str | Path) -> Instance:
        return read_instance(config)

    def explore(self, instance: Instance) -> ModelGraph[ScheduleSnapshot]:
        return explore(instance)

    def snapshot_of(self, values: Mapping[str, Any]) -> ScheduleSnapshot:
        return snapshot_of(values)

    def show(self, state: ScheduleSnapshot) -> str:
        return show(state)

    def describe(self, action: str, params: Mapping[str, Any]) -> str:
        return str(describe(action, params))


SCHEDULE = _Schedule()
"""The schedule spec, as ``stategraph.match(..., system=SCHEDULE)`` takes a system."""
