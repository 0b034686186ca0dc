"""Values shared by the TaskScheduler, its reference model and the verification tools.

A :class:`Snapshot` is shaped like the variables of ``spec/Scheduler.tla``: the reference model
(``refsched.model``) uses it as its state, and ``TaskScheduler.snapshot()`` returns one, so the
two compare with ``==``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = ["Claim", "CloseReport", "Snapshot", "TaskInfo", "TaskState", "VersionView"]


class TaskState(enum.Enum):
    """The state of one version of a task (spec: ``state[t]``)."""

    PENDING = "pending"  # waiting for dependencies
    READY = "ready"  # every dependency succeeded; claimable
    RUNNING = "running"  # claimed by ready()
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"  # a dependency can no longer succeed
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True for succeeded, failed, blocked and cancelled: the version never changes again."""
        return self in _TERMINAL

    @property
    def is_dead(self) -> bool:
        """True for failed, blocked and cancelled: the version can never succeed."""
        return self in _DEAD

    def __repr__(self) -> str:
        return f"TaskState.{self.name}"


_DEAD = frozenset({TaskState.FAILED, TaskState.BLOCKED, TaskState.CANCELLED})
_TERMINAL = _DEAD | {TaskState.SUCCEEDED}


class Claim(NamedTuple):
    """One version handed out by ``ready()``: run ``fn`` then report with its generation."""

    task_id: Hashable
    generation: int
    fn: Callable[..., Any] | None


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """What the scheduler knows about a task's current version (``TaskScheduler.info``)."""

    task_id: Hashable
    generation: int
    state: TaskState
    deps: frozenset[Hashable]
    remaining_deps: int  # meaningful while pending or ready
    blocked_by: Hashable | None  # the dependency that blocked it, when blocked
    cancel_requested: bool
    result: Any = None  # the value given to complete()
    error: Any = None  # the error given to fail()


@dataclass(frozen=True, slots=True)
class CloseReport:
    """Every submitted id by the state of its current version when ``close()`` returned.

    Nothing disappears: each id is in exactly one list.
    """

    succeeded: tuple[Hashable, ...] = ()
    failed: tuple[Hashable, ...] = ()
    blocked: tuple[Hashable, ...] = ()
    cancelled: tuple[Hashable, ...] = ()
    running: tuple[Hashable, ...] = ()
    pending: tuple[Hashable, ...] = ()
    ready: tuple[Hashable, ...] = ()

    def by_state(self) -> dict[TaskState, tuple[Hashable, ...]]:
        return {state: getattr(self, state.value) for state in TaskState}


@dataclass(frozen=True, slots=True)
class VersionView:
    """One task's current version: the spec variables at index ``t``."""

    generation: int  # >= 1
    state: TaskState
    deps: frozenset[Hashable]
    remaining_deps: int  # == deps whose current version is not succeeded, while pending/ready
    blocked_by: Hashable | None  # in deps when state is BLOCKED, else None
    cancel_requested: bool  # only ever set while RUNNING
    claims: int  # times this version was claimed: 0 or 1
    seq: int  # submission sequence number: the ready order


def _frozen_tasks(tasks: Mapping[Hashable, VersionView]) -> Mapping[Hashable, VersionView]:
    return MappingProxyType(dict(tasks))


@dataclass(frozen=True)
class Snapshot:
    """An immutable value shaped like the spec's variables; compare two with ``==``."""

    started: bool = False
    closed: bool = False
    next_seq: int = 1
    tasks: Mapping[Hashable, VersionView] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, MappingProxyType):
            object.__setattr__(self, "tasks", _frozen_tasks(self.tasks))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return (self.started, self.closed, self.next_seq) == (
            other.started, other.closed, other.next_seq
        ) and dict(self.tasks) == dict(other.tasks)

    def __hash__(self) -> int:
        return hash((self.started, self.closed, self.next_seq, frozenset(self.tasks.items())))

    def replace(self, **changes: Any) -> Snapshot:
        """A copy with some fields replaced (``tasks`` may be any mapping)."""
        return Snapshot(**{**self._fields(), **changes})

    def _fields(self) -> dict[str, Any]:
        return {"started": self.started, "closed": self.closed, "next_seq": self.next_seq,
                "tasks": self.tasks}
