"""Contracts on the reference model for CrossHair (``crosshair check refsched.model.contracts``).

CrossHair explores these functions symbolically: for every input satisfying ``pre``, the ``post``
conditions must hold. ``apply_operations`` decodes any short list of integers into a sequence of
API calls on three tasks, so the contract says: whatever the calls, and whichever of them are
refused, every state reached satisfies every invariant of the spec and every step every action
property.
"""

from __future__ import annotations

from typing import Any

from refsched.errors import SchedulerError

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
