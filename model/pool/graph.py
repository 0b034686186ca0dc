"""The work-stealing spec's ``Next`` over finite constants, and the state graph it spans.

:func:`next_steps` enumerates ``Next`` exactly as ``spec/WorkStealing.tla`` writes it: every
action, every parameter value its quantifiers range over, one step per enabled instance (so
two instances that reach the same state are two edges, as in TLC's graph). :func:`explore` is
a breadth-first search of those steps with :func:`refsched.model.dag.graph.search`. The spec is
finite as it stands (each task is submitted at most once), so ``MCWorkStealing`` has no state
constraint and :func:`within_bound` keeps every state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..dag.graph import ModelGraph, search
from .actions import ACTIONS, INITIAL, PoolSnapshot

__all__ = ["Instance", "explore", "next_steps", "within_bound"]


@dataclass(frozen=True, slots=True)
class Instance:
    """The constants of a model-checking instance (a ``MCWorkStealing*.cfg``)."""

    workers: tuple[str, ...]  # Workers
    tasks: tuple[str, ...]  # Tasks
    children: tuple[str, ...]  # Children: the tasks only a running task submits; within tasks
    steal_cap: int = 1  # StealCap: the most tasks one steal takes, >= 1; 1: single steals

    @property
    def roots(self) -> tuple[str, ...]:
        """``Tasks \\ Children``: the tasks submitted from outside."""
        return tuple(t for t in self.tasks if t not in self.children)


def _instances(instance: Instance) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (action, parameters) the disjuncts of ``Next`` quantify over."""
    for name in ("SubmitExternal", "SubmitChild"):
        for t in instance.tasks:
            for w in instance.workers:
                yield name, {"t": t, "w": w}
    for w in instance.workers:
        yield "Pop", {"w": w}
    for thief in instance.workers:
        for victim in instance.workers:
            yield "Steal", {"thief": thief, "victim": victim}
    for w in instance.workers:
        yield "Finish", {"w": w}
    yield "Shutdown", {}
    yield "CancelQueued", {}
    for thief in instance.workers:
        for victim in instance.workers:
            yield "StealBatch", {"thief": thief, "victim": victim}


def next_steps(s: PoolSnapshot,
               instance: Instance) -> Iterator[tuple[str, dict[str, Any], PoolSnapshot]]:
    """Every enabled instance of ``Next`` in ``s``: (action name, parameters, next state)."""
    children = frozenset(instance.children)
    for name, params in _instances(instance):
        action = ACTIONS[name]
        args = tuple(params[p] for p in action.params)
        if action.enabled(s, *args, children=children, steal_cap=instance.steal_cap):
            yield name, params, action.step(s, *args, steal_cap=instance.steal_cap)


def within_bound(s: PoolSnapshot, instance: Instance) -> bool:
    """``MCWorkStealing`` has no state constraint: every state is kept."""
    return True


def explore(instance: Instance, initial: PoolSnapshot = INITIAL) -> ModelGraph[PoolSnapshot]:
    """Breadth-first search of ``Next``, as TLC explores the spec."""
    return search(initial, lambda s: next_steps(s, instance), lambda s: within_bound(s, instance))
