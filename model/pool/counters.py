"""What ``WorkStealingPool.stats()`` must count, derived from the model's steps.

The pool's counterpart of :mod:`refsched.model.dag.counters`. The fields of ``PoolStats`` the spec
fixes are counts of spec steps of one kind, or counts of the state the steps reached:

==========================  ===================================================================
executed                    Finish steps (each runs the task's function once)
stolen                      Steal and StealBatch steps
queue_lengths               per worker, in the order of the instance's ``Workers``: the tasks
                            in its deque in the state reached
outstanding                 ``outstanding`` in the state reached (queued or running tasks)
state                       the phase of the state reached: "accepting", "draining" or
                            "terminated"
stolen_tasks                the tasks those steps took: 1 per Steal, the k of each StealBatch
                            (the one the thief runs and the k - 1 it keeps)
==========================  ===================================================================

With managed blocking (:class:`BlockingCounts`, over the model's
:class:`~refsched.model.pool.blocking.BlockingSnapshot`) also:

==========================  ===================================================================
queue_lengths               per thread: the workers', then a deque per spare slot the pool has
                            used so far (the spares of ``Spares`` in order, up to the last one
                            ever active)
spares                      the spares active in the state reached
blocked                     the threads blocked in the state reached
compensated                 Block steps a spare stood in for
uncompensated               Block steps none did
==========================  ===================================================================

``parked`` counts worker threads waiting for work, which the spec does not model: a pool whose
workers' moves are taken step by step has no thread to park, and the checks expect 0 of it.

:class:`Counts` is an immutable value; ``counts.step(...)`` is the counts after one more step,
and two counts add up, so the counts a step adds can be computed once per edge of a state graph.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from .actions import PoolSnapshot
from .blocking import BlockingSnapshot

__all__ = ["BlockingCounts", "Counts"]


@dataclass(frozen=True, slots=True)
class Counts:
    """The counters of ``PoolStats`` that count steps, as the model's steps fix them."""

    executed: int = 0  # Finish steps
    stolen: int = 0  # Steal and StealBatch steps
    stolen_tasks: int = 0  # tasks those steps took: 1 per Steal, k per StealBatch of k

    def __add__(self, other: Counts) -> Counts:
        return Counts(*map(operator.add, _values(self), _values(other)))

    def step(self, action: str, args: tuple[Any, ...], before: PoolSnapshot,
             after: PoolSnapshot) -> Counts:
        """The counts after the step ``action(*args)`` from ``before`` to ``after``."""
        steal = action in ("Steal", "StealBatch")
        taken = 1 + len(after.deque.get(args[0], ())) if steal else 0  # args[0]: the thief
        return Counts(executed=self.executed + (action == "Finish"),
                      stolen=self.stolen + steal, stolen_tasks=self.stolen_tasks + taken)

    def expected(self, state: PoolSnapshot, workers: Sequence[Hashable]) -> dict[str, Any]:
        """What ``stats()`` must show in ``state``, the state the counted steps reached, over
        the instance's ``workers``, by field (every field of ``PoolStats`` but ``parked``)."""
        return {"executed": self.executed, "stolen": self.stolen,
                "queue_lengths": tuple(len(state.deque.get(w, ())) for w in workers),
                "outstanding": state.outstanding, "state": state.phase.value,
                "stolen_tasks": self.stolen_tasks}


@dataclass(frozen=True, slots=True)
class BlockingCounts:
    """The counters of ``PoolStats`` that count steps, with managed blocking on."""

    pool: Counts = Counts()
    compensated: int = 0  # Block steps a spare stood in for
    uncompensated: int = 0  # Block steps none did
    used: frozenset[Hashable] = frozenset()  # every spare active so far: the pool's slots

    def __add__(self, other: BlockingCounts) -> BlockingCounts:
        return BlockingCounts(self.pool + other.pool, self.compensated + other.compensated,
                              self.uncompensated + other.uncompensated, self.used | other.used)

    def step(self, action: str, args: tuple[Any, ...], before: BlockingSnapshot,
             after: BlockingSnapshot) -> BlockingCounts:
        """The counts after the step ``action(*args)`` from ``before`` to ``after``."""
        stood_in = action == "Block" and any(args[0] in b for b in after.blocker.values())
        block = action == "Block"
        return BlockingCounts(self.pool.step(action, args, before.pool, after.pool),
                              self.compensated + (block and stood_in),
                              self.uncompensated + (block and not stood_in),
                              self.used | after.active())

    def expected(self, state: BlockingSnapshot, workers: Sequence[Hashable],
                 spares: Sequence[Hashable]) -> dict[str, Any]:
        """What ``stats()`` must show in ``state`` over the instance's ``workers`` and
        ``spares`` (the spec's ``Spares``, spare i the pool's slot ``len(workers) + i``)."""
        slots = max((i + 1 for i, sp in enumerate(spares) if sp in self.used), default=0)
        shown = self.pool.expected(state.pool, (*workers, *spares[:slots]))
        shown.update(spares=len(state.active()), blocked=len(state.blocked),
                     compensated=self.compensated, uncompensated=self.uncompensated)
        return shown


_NAMES = tuple(f.name for f in fields(Counts))
_values = operator.attrgetter(*_NAMES)  # a Counts -> its fields' values, in order
