"""A Settle that blocks direct dependents only: CrossHair must find a chain it leaves waiting."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from refsched.model.dag import actions
from refsched.model.dag.contracts import settles_correctly
from refsched.types import TaskState, VersionView


def shallow_settle(tasks: dict[Hashable, VersionView]) -> dict[Hashable, VersionView]:
    out = dict(tasks)
    for t, v in tasks.items():
        dead = [d for d in v.deps if d in tasks and tasks[d].state.is_dead]
        if v.state in actions.WAITING and dead:
            out[t] = replace(v, state=TaskState.BLOCKED, blocked_by=min(dead, key=repr))
    return out


def settle_graph_shallow(states: list[int], dep_masks: list[int]) -> bool:
    """The contract of ``settle_graph``, over the shallow Settle.

    pre: len(states) == 3 and len(dep_masks) == 3
    pre: all(0 <= s < 7 for s in states) and all(0 <= m < 8 for m in dep_masks)
    post: __return__
    """
    return settles_correctly(shallow_settle, states, dep_masks)
