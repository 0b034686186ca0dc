"""Errors raised by refsched's schedulers.

Every error is a :class:`SchedulerError` and also the builtin a caller would catch anyway:
``KeyError`` for an unknown id, ``ValueError`` for bad arguments, ``RuntimeError`` for a closed
scheduler. An operation that raises has changed nothing.
"""

from __future__ import annotations

import graphlib
from collections.abc import Hashable, Sequence

__all__ = [
    "BlockedError",
    "Cancelled",
    "ConflictError",
    "CycleError",
    "GraphError",
    "InvalidArgumentError",
    "InvalidTransitionError",
    "InvariantViolation",
    "LeaseLostError",
    "SchedulerClosedError",
    "SchedulerError",
    "StaleGenerationError",
    "StaleLeaseError",
    "StoreError",
    "TaskRunningError",
    "UnknownDependencyError",
    "UnknownTaskError",
]


class SchedulerError(Exception):
    """Base class of every error a refsched scheduler raises on purpose."""


class InvalidArgumentError(SchedulerError, ValueError, TypeError):
    """An argument has the wrong type or value (an unhashable id, a duplicate dep, ...)."""


class UnknownTaskError(SchedulerError, KeyError):
    """The task id was never submitted."""

    def __init__(self, message: str, task_id: Hashable = None) -> None:
        super().__init__(message)
        self.task_id = task_id

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message; show it as written.
        return str(self.args[0]) if self.args else ""


class GraphError(SchedulerError, ValueError):
    """The dependency graph cannot be scheduled as it stands."""


class UnknownDependencyError(GraphError):
    """A version depends on an id that was never submitted.

    ``missing`` lists every ``(task_id, dependency)`` pair at fault.
    """

    def __init__(self, message: str, missing: Sequence[tuple[Hashable, Hashable]]) -> None:
        super().__init__(message)
        self.missing: tuple[tuple[Hashable, Hashable], ...] = tuple(missing)


class CycleError(graphlib.CycleError, GraphError):
    """The dependency graph has a cycle.

    ``cycle`` is one concrete path ``[a, b, c, a]`` in which each entry is a dependency of the
    next (graphlib's convention); ``cycles`` holds one such path for every strongly connected
    component that has a cycle.
    """

    def __init__(self, message: str, cycles: Sequence[Sequence[Hashable]]) -> None:
        self.cycles: tuple[tuple[Hashable, ...], ...] = tuple(tuple(c) for c in cycles)
        self.cycle: list[Hashable] = list(self.cycles[0]) if self.cycles else []
        super().__init__(message, self.cycle)

    def __str__(self) -> str:
        return str(self.args[0])


class ConflictError(SchedulerError, RuntimeError):
    """The call conflicts with the version's current life cycle."""


class TaskRunningError(ConflictError):
    """The id's current version is running and cannot be replaced."""


class StaleGenerationError(ConflictError):
    """The generation named is not the id's current one."""

    def __init__(self, message: str, task_id: Hashable = None, generation: int = 0,
                 current: int = 0) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.generation = generation
        self.current = current


class StaleLeaseError(StaleGenerationError):
    """A durable report (complete, fail, acknowledge_cancel) names a lease that is not current:
    an older generation, an older attempt, or a lease that expired. Nothing changed."""

    def __init__(self, message: str, task_id: Hashable = None, generation: int = 0,
                 current: int = 0, attempt: int = 0, current_attempt: int = 0) -> None:
        super().__init__(message, task_id, generation, current)
        self.attempt = attempt
        self.current_attempt = current_attempt


class LeaseLostError(ConflictError):
    """A heartbeat names a lease that is no longer the version's live one: stop the work."""


class StoreError(SchedulerError, RuntimeError):
    """The durable store cannot be opened or written: a foreign or corrupt file, a newer
    schema, a read-only or full disk. Nothing was half-written."""


class InvalidTransitionError(SchedulerError, RuntimeError):
    """The operation is not allowed in the version's (or the scheduler's) current state."""


class SchedulerClosedError(SchedulerError, RuntimeError):
    """The scheduler was closed: it takes no new submissions."""


class BlockedError(SchedulerError):
    """A Runner future's task was blocked: a dependency it needs can no longer succeed.

    ``blocked_by`` is the dependency that blocked it.
    """

    def __init__(self, message: str, task_id: Hashable = None, blocked_by: Hashable = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.blocked_by = blocked_by


class Cancelled(Exception):
    """Raised by a running function to acknowledge a cooperative cancel request."""


class InvariantViolation(AssertionError):
    """``check_invariants()`` found a state the spec forbids; ``invariant`` names the broken one."""

    def __init__(self, invariant: str, detail: str = "") -> None:
        super().__init__(f"{invariant} violated" + (f": {detail}" if detail else ""))
        self.invariant = invariant
