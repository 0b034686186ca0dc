"""The timer spec's ``Next`` over finite constants, and the state graph it spans.

:func:`next_steps` enumerates ``Next`` exactly as ``spec/TimerQueue.tla`` writes it: every
action, every parameter value its quantifiers range over, one step per enabled instance (so
two instances that reach the same state are two edges, as in TLC's graph). :func:`explore` is
a breadth-first search of those steps under ``MCTimerQueue``'s constraints (``TimeBound``,
``VersionBound``), with :func:`refsched.model.dag.graph.search`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from refsched.types import TimerSnapshot

from ..dag.graph import ModelGraph, search
from .actions import ACTIONS, INITIAL

__all__ = ["Instance", "explore", "next_steps", "within_bound"]


@dataclass(frozen=True, slots=True)
class Instance:
    """The constants of a model-checking instance (a ``MCTimerQueue*.cfg``)."""

    tasks: tuple[str, ...]  # Tasks
    max_time: int  # MaxTime: Times = 0..MaxTime, and time stops there (TimeBound)
    priorities: tuple[int, ...]  # Priorities
    rebuild_floor: int  # RebuildFloor
    max_version: int  # MaxVersion: no id gets more versions (VersionBound)
    max_schedules: int  # MaxSchedules: no more schedule() calls in all (VersionBound)

    @property
    def times(self) -> range:
        """The spec's ``Times``: the run_at values Schedule may name."""
        return range(self.max_time + 1)


def _instances(s: TimerSnapshot, instance: Instance) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (action, parameters) the disjuncts of ``Next`` quantify over in state ``s``."""
    def version(t: str) -> int:
        view = s.tasks.get(t)
        return 0 if view is None else view.version

    for t in instance.tasks:
        for r in instance.times:
            for p in instance.priorities:
                yield "Schedule", {"t": t, "r": r, "p": p}
    for t in instance.tasks:
        yield "Cancel", {"t": t}
    yield "Claim", {}
    yield "Idle", {}
    for name in ("Complete", "Fail"):
        for t in instance.tasks:
            yield name, {"t": t, "v": version(t)}
    for t in instance.tasks:
        current = version(t)
        for v in range(1, current + 2):
            if v != current:
                yield "StaleCallback", {"t": t, "v": v}
    for t in instance.tasks:
        yield "RepeatedCallback", {"t": t}
    yield "Close", {}
    yield "Tick", {}


def next_steps(s: TimerSnapshot,
               instance: Instance) -> Iterator[tuple[str, dict[str, Any], TimerSnapshot]]:
    """Every enabled instance of ``Next`` in ``s``: (action name, parameters, next state).

    An id never scheduled is absent: the actions on it that need a current version are not
    enabled, exactly as in the spec.
    """
    for name, params in _instances(s, instance):
        action = ACTIONS[name]
        args = tuple(params[p] for p in action.params)
        if action.refusal(s, *args) is None:
            yield name, params, action.step(s, *args, rebuild_floor=instance.rebuild_floor)


def within_bound(s: TimerSnapshot, instance: Instance) -> bool:
    """``MCTimerQueue``'s constraints ``TimeBound`` and ``VersionBound``."""
    return (s.now <= instance.max_time and s.next_seq <= instance.max_schedules + 1
            and all(v.version <= instance.max_version for v in s.tasks.values()))


def explore(instance: Instance, initial: TimerSnapshot = INITIAL) -> ModelGraph[TimerSnapshot]:
    """Breadth-first search of ``Next`` under the constraints, as TLC explores the spec."""
    return search(initial, lambda s: next_steps(s, instance), lambda s: within_bound(s, instance))
