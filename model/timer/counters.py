"""What ``TimerScheduler.stats()`` must count, derived from the model's steps.

The timer's counterpart of :mod:`refsched.model.dag.counters`. Every field of ``TimerStats`` is a
count of spec steps of one kind, of the versions those steps moved into a state, or a count of
the state the steps reached:

==========================  ===================================================================
rebuilds                    steps that ended by rebuilding the heap (``Action.rebuilds``)
scheduled                   Schedule steps
claimed                     Claim steps
completed                   Complete steps
failed                      Fail steps
cancelled                   versions a step made cancelled (Cancel of a pending version, Close)
live                        pending versions in the state reached
heap                        heap entries in the state reached, live and stale
running                     running versions in the state reached
==========================  ===================================================================

:class:`Counts` is an immutable value; ``counts.step(...)`` is the counts after one more step,
and two counts add up, so the counts a step adds can be computed once per edge of a state graph.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from typing import Any

from refsched.types import TimerSnapshot, TimerState

from .actions import ACTIONS

__all__ = ["Counts"]


@dataclass(frozen=True, slots=True)
class Counts:
    """The counters of ``TimerStats`` that count steps, as the model's steps fix them."""

    rebuilds: int = 0  # steps that rebuilt the heap
    scheduled: int = 0  # Schedule steps
    claimed: int = 0  # Claim steps
    completed: int = 0  # Complete steps
    failed: int = 0  # Fail steps
    cancelled: int = 0  # versions moved into cancelled

    def __add__(self, other: Counts) -> Counts:
        return Counts(*map(operator.add, _values(self), _values(other)))

    def step(self, action: str, args: tuple[Any, ...], before: TimerSnapshot,
             after: TimerSnapshot, *, rebuild_floor: int) -> Counts:
        """The counts after the step ``action(*args)`` from ``before`` to ``after``.

        ``args`` are the model action's arguments; ``rebuild_floor`` is the constant
        ``RebuildFloor`` the step was taken under.
        """
        old = before.tasks
        cancelled = sum(1 for t, v in after.tasks.items() if v.state is TimerState.CANCELLED
                        and not (t in old and old[t].version == v.version
                                 and old[t].state is TimerState.CANCELLED))
        rebuilt = ACTIONS[action].rebuilds(before, *args, rebuild_floor=rebuild_floor)
        return Counts(
            rebuilds=self.rebuilds + rebuilt,
            scheduled=self.scheduled + (action == "Schedule"),
            claimed=self.claimed + (action == "Claim"),
            completed=self.completed + (action == "Complete"),
            failed=self.failed + (action == "Fail"),
            cancelled=self.cancelled + cancelled,
        )

    def expected(self, state: TimerSnapshot) -> dict[str, int]:
        """What ``stats()`` must show in ``state``, the state the counted steps reached, by
        field: every field of ``TimerStats``."""
        states = [v.state for v in state.tasks.values()]
        return {"live": states.count(TimerState.PENDING), "heap": len(state.heap),
                "running": states.count(TimerState.RUNNING),
                **dict(zip(_NAMES, _values(self), strict=True))}


_NAMES = tuple(f.name for f in fields(Counts))
_values = operator.attrgetter(*_NAMES)  # a Counts -> its fields' values, in order
