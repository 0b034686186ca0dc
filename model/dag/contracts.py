"""Contracts on the reference model for CrossHair.

Run: ``crosshair check refsched.model.dag.contracts``.

CrossHair explores these functions symbolically: for every input satisfying ``pre``, the ``post``
conditions must hold.

- ``settle_graph`` builds any state of three tasks from a few integers and runs Settle on it: the
  contract says Settle leaves no waiting version behind a dead dependency, blocks only waiting
  versions, names a cause that is a dead or blocked dependency, and touches nothing else.
- ``step_keeps_invariants``: from any such state that satisfies the spec's invariants, any one
  API call leads to a state that satisfies them (the invariants are inductive).
- ``apply_operations`` decodes a short list of integers into API calls on three tasks: whatever the
  calls, and whichever are refused, every state reached satisfies every invariant of the spec and
  every step every action property, and a refused call changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from refsched.errors import SchedulerError
from refsched.types import Snapshot, TaskState, VersionView

from . import actions
from .api import ReferenceScheduler
from .invariants import violated, violated_by_step

TASKS = ("a", "b", "c")
MAX_CONCURRENCY = 2
_CALLS = ("submit", "start", "ready", "complete", "fail", "cancel", "acknowledge_cancel",
          "retry", "close")


def decode(op: int) -> tuple[str, tuple[Any, ...]]:
    """Turn one integer into an API call with arguments: the call, a task, deps or a generation.

    pre: op >= 0
    post: __return__[0] in _CALLS
    """
    call = _CALLS[op % len(_CALLS)]
    rest = op // len(_CALLS)
    task = TASKS[rest % len(TASKS)]
    rest //= len(TASKS)
    if call == "submit":
        deps = [t for i, t in enumerate(TASKS) if rest & (1 << i)]
        return call, (task, deps)
    if call in ("complete", "fail", "acknowledge_cancel"):
        return call, (task, 1 + rest % 3)
    if call == "ready":
        return call, (rest % 3 or None,)
    if call == "close":
        return call, (bool(rest % 2),)
    if call == "start":
        return call, ()
    return call, (task,)


def apply_operations(ops: list[int]) -> bool:
    """Apply the decoded calls to a fresh model; True when every invariant held throughout.

    pre: len(ops) <= 8
    pre: all(0 <= op < 10_000 for op in ops)
    post: __return__
    """
    model = ReferenceScheduler(MAX_CONCURRENCY)
    for op in ops:
        call, args = decode(op)
        before = model.snapshot()
        try:
            getattr(model, call)(*args)
        except SchedulerError:
            if model.snapshot() != before:
                return False  # a refused call changed the state
        if violated(model.snapshot(), MAX_CONCURRENCY) or violated_by_step(before,
                                                                           model.snapshot()):
            return False
    return True


_STATES = tuple(TaskState)


def build_state(states: list[int], dep_masks: list[int]) -> Snapshot:
    """Three started tasks; task i is in state ``states[i]`` with the deps in bit mask
    ``dep_masks[i]``, submitted i-th. Remaining counts are exact; a blocked task names its first
    dead dependency as cause."""
    deps = [frozenset(t for j, t in enumerate(TASKS) if j != i and dep_masks[i] & (1 << j))
            for i in range(len(TASKS))]
    state = [_STATES[states[i] % len(_STATES)] for i in range(len(TASKS))]
    tasks: dict[object, VersionView] = {}
    for i, name in enumerate(TASKS):
        remaining = sum(1 for j, t in enumerate(TASKS)
                        if t in deps[i] and state[j] is not TaskState.SUCCEEDED)
        dead = [t for j, t in enumerate(TASKS) if t in deps[i] and state[j].is_dead]
        cause = dead[0] if state[i] is TaskState.BLOCKED and dead else None
        tasks[name] = VersionView(1, state[i], deps[i], remaining, cause, False,
                                  int(state[i] not in actions.WAITING), i + 1)
    return Snapshot(started=True, tasks=tasks, next_seq=len(TASKS) + 1)


Settle = Callable[[dict[Hashable, VersionView]], dict[Hashable, VersionView]]


def settles_correctly(settle: Settle, states: list[int], dep_masks: list[int]) -> bool:
    """Whether ``settle`` did what the spec's Settle says on the state ``build_state`` makes."""
    before = build_state(states, dep_masks).tasks
    after = settle(dict(before))
    for t, v in after.items():
        old = before[t]
        if v.state in actions.WAITING and any(
                after[d].state.is_dead for d in v.deps if d in after):
            return False  # a waiting version behind a dead dependency
        if v != old:
            if old.state not in actions.WAITING or v.state is not TaskState.BLOCKED:
                return False  # only waiting versions change, and only to blocked
            if v.blocked_by not in v.deps or not after[v.blocked_by].state.is_dead:
                return False  # the cause is a dependency that can no longer succeed
    return True


def settle_graph(states: list[int], dep_masks: list[int]) -> bool:
    """Settle on any state of three tasks does what the spec says.

    pre: len(states) == 3 and len(dep_masks) == 3
    pre: all(0 <= s < 7 for s in states) and all(0 <= m < 8 for m in dep_masks)
    post: __return__
    """
    return settles_correctly(lambda tasks: actions.settle(tasks)[0], states, dep_masks)


def step_keeps_invariants(states: list[int], dep_masks: list[int], op: int) -> bool:
    """From any state of three tasks that satisfies the invariants, one API call keeps them.

    This is the inductive step: the invariants hold initially (``INITIAL``) and every call
    from a state satisfying them leads to a state satisfying them.

    pre: len(states) == 3 and len(dep_masks) == 3
    pre: all(0 <= s < 7 for s in states) and all(0 <= m < 8 for m in dep_masks)
    pre: 0 <= op < 1000
    pre: not violated(build_state(states, dep_masks), MAX_CONCURRENCY)
    post: __return__
    """
    model = ReferenceScheduler(MAX_CONCURRENCY)
    model.state_value = build_state(states, dep_masks)
    before = model.snapshot()
    call, args = decode(op)
    try:
        getattr(model, call)(*args)
    except SchedulerError:
        return model.snapshot() == before
    return not violated(model.snapshot(), MAX_CONCURRENCY) and not violated_by_step(
        before, model.snapshot())
