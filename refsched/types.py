"""Values shared by the schedulers, their reference models and the verification tools.

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

__all__ = [
    "Claim",
    "CloseReport",
    "Due",
    "OptionalDepsView",
    "ParentOutcome",
    "Provenance",
    "ProvenanceView",
    "Snapshot",
    "TaskInfo",
    "TaskState",
    "TimerCloseReport",
    "TimerEntry",
    "TimerSnapshot",
    "TimerState",
    "TimerStats",
    "TimerVersionView",
    "VersionView",
    "Wait",
]


class _State(enum.Enum):
    """A version's state: a string value, shown as ``Kind.NAME``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class TaskState(_State):
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


_DEAD = frozenset({TaskState.FAILED, TaskState.BLOCKED, TaskState.CANCELLED})
_TERMINAL = _DEAD | {TaskState.SUCCEEDED}


class Claim(NamedTuple):
    """One version handed out by ``ready()``: run ``fn`` then report with its generation."""

    task_id: Hashable
    generation: int
    fn: Callable[..., Any] | None


@dataclass(frozen=True, slots=True)
class ParentOutcome:
    """How an optional dependency had ended when its dependent started: one entry of the
    dependent's input summary (``TaskScheduler.input_summary``; a Runner function's ``inputs``).
    """

    task_id: Hashable
    generation: int  # the version of the dependency that ended
    state: TaskState  # succeeded, failed, blocked or cancelled
    result: Any = None  # the value given to complete(), when it succeeded
    error: Any = None  # the error given to fail(), when it failed
    blocked_by: Hashable | None = None  # the dependency that blocked it, when blocked


@dataclass(frozen=True, slots=True)
class ProvenanceView:
    """How a blocked or cancelled version came to end: the spec's ``provenance[t]``.

    ``root`` and ``generation`` name the version that failed or was cancelled (``end``);
    ``path`` runs from ``root`` to the version, each id a required dependency of the next. A
    cancelled version is its own root (``path == (t,)``).
    """

    root: Hashable
    generation: int  # the root's version
    end: TaskState  # FAILED or CANCELLED
    path: tuple[Hashable, ...]


@dataclass(frozen=True, slots=True)
class Provenance:
    """``ProvenanceView`` and what the call that ended the root said (``TaskInfo.provenance``).

    ``actor`` and ``reason`` are those given to the ``cancel()``, ``acknowledge_cancel()`` or
    ``fail()`` that ended the root (None when not given; ``close()`` gives ``reason="close"``);
    ``time`` is the scheduler's clock then; two records compare equal whatever their times
    (a reference model, which has no clock, is compared with a scheduler that has one). Set
    once; never changed while the version is current.
    """

    root: Hashable
    generation: int
    end: TaskState
    path: tuple[Hashable, ...]
    actor: Any = None
    reason: Any = None
    time: float = field(default=0.0, compare=False)

    def view(self) -> ProvenanceView:
        """The spec's part of it."""
        return ProvenanceView(self.root, self.generation, self.end, self.path)


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
    optional: frozenset[Hashable] = frozenset()  # the deps whose edge is optional
    provenance: Provenance | None = None  # when blocked or cancelled: how it came to end


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


@dataclass(frozen=True, slots=True)
class OptionalDepsView(VersionView):
    """A version with optional edges: the spec variables at index ``t``, ``optional`` too.

    Only a version that has optional edges is one; every other version is a plain
    :class:`VersionView`, so a graph without optional edges has the very snapshots it had
    before edge kinds existed (and a ``VersionView`` never equals an ``OptionalDepsView``).
    """

    # a non-empty subset of deps; on the wire (refsched.conform.values) a version's object has
    # this key only when the version is an OptionalDepsView
    optional: frozenset[Hashable] = field(default=frozenset(), metadata={"extension": True})


_NO_RECORDS: Mapping[Hashable, ProvenanceView] = MappingProxyType({})


def _frozen_tasks(tasks: Mapping[Hashable, VersionView]) -> Mapping[Hashable, VersionView]:
    return MappingProxyType(dict(tasks))


@dataclass(frozen=True)
class Snapshot:
    """An immutable value shaped like the spec's variables; compare two with ``==``."""

    started: bool = False
    closed: bool = False
    next_seq: int = 1
    tasks: Mapping[Hashable, VersionView] = field(default_factory=lambda: MappingProxyType({}))
    # The spec's provenance, by id (only blocked and cancelled versions have a record). None:
    # not recorded (the spec's RecordProvenance off), which compares equal to no record at
    # all; the model's steps record only in a snapshot whose provenance is not None. The
    # protocol's snapshot has no provenance: it stays off the wire (metadata "wire").
    provenance: Mapping[Hashable, ProvenanceView] | None = field(default=None,
                                                                  metadata={"wire": False})

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, MappingProxyType):
            object.__setattr__(self, "tasks", _frozen_tasks(self.tasks))
        if self.provenance is not None and not isinstance(self.provenance, MappingProxyType):
            object.__setattr__(self, "provenance", MappingProxyType(dict(self.provenance)))

    @property
    def records(self) -> Mapping[Hashable, ProvenanceView]:
        """The provenance records, empty when none is recorded."""
        return self.provenance or _NO_RECORDS

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return (self.started, self.closed, self.next_seq) == (
            other.started, other.closed, other.next_seq
        ) and dict(self.tasks) == dict(other.tasks) and (
            dict(self.records) == dict(other.records))

    def __hash__(self) -> int:
        if not self.provenance:
            return hash((self.started, self.closed, self.next_seq,
                         frozenset(self.tasks.items())))
        return hash((self.started, self.closed, self.next_seq, frozenset(self.tasks.items()),
                     frozenset(self.provenance.items())))

    def replace(self, **changes: Any) -> Snapshot:
        """A copy with some fields replaced (``tasks`` may be any mapping)."""
        return Snapshot(**{**self._fields(), **changes})

    def _fields(self) -> dict[str, Any]:
        return {"started": self.started, "closed": self.closed, "next_seq": self.next_seq,
                "tasks": self.tasks, "provenance": self.provenance}


# -- The timer scheduler (spec/TimerQueue.tla) ------------------------------------------------

class TimerState(_State):
    """The state of one version of a timer task (spec: ``state[t]``)."""

    PENDING = "pending"  # in the heap, waiting for its time
    RUNNING = "running"  # handed out by next()
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # cancelled, superseded never: a superseded version simply ends

    @property
    def is_terminal(self) -> bool:
        """True for completed, failed and cancelled: the version never changes again."""
        return self in _TIMER_TERMINAL


_TIMER_TERMINAL = frozenset({TimerState.COMPLETED, TimerState.FAILED, TimerState.CANCELLED})


class Due(NamedTuple):
    """``next()``: this version is due and now running; run ``fn``, then report its version."""

    task_id: Hashable
    version: int
    fn: Callable[..., Any] | None


class Wait(NamedTuple):
    """``next()``: nothing is due; the earliest live entry is due in ``seconds`` (> 0)."""

    seconds: float


class TimerEntry(NamedTuple):
    """One heap entry (spec: an element of ``heap``). Ordered by :attr:`key`."""

    run_at: float
    priority: int
    seq: int  # unique: the entry's submission sequence number
    task_id: Hashable
    version: int

    @property
    def key(self) -> tuple[float, int, int]:
        """Earliest time first, then higher priority, then first scheduled."""
        return (self.run_at, -self.priority, self.seq)


@dataclass(frozen=True, slots=True)
class TimerVersionView:
    """One timer task's current version: the spec variables at index ``t``."""

    version: int  # >= 1; +1 per schedule of the id
    state: TimerState
    run_at: float
    priority: int
    seq: int  # the sequence number of this version's heap entry
    cancel_requested: bool  # only ever set while RUNNING
    claims: int  # times this version was handed out by next(): 0 or 1


@dataclass(frozen=True)
class TimerSnapshot:
    """An immutable value shaped like ``spec/TimerQueue.tla``'s variables; compare with ``==``."""

    now: float = 0
    closed: bool = False
    next_seq: int = 1
    tasks: Mapping[Hashable, TimerVersionView] = field(
        default_factory=lambda: MappingProxyType({}))
    heap: frozenset[TimerEntry] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, MappingProxyType):
            object.__setattr__(self, "tasks", MappingProxyType(dict(self.tasks)))
        if not isinstance(self.heap, frozenset):
            object.__setattr__(self, "heap", frozenset(self.heap))

    def _key(self) -> tuple[Any, ...]:
        return (self.now, self.closed, self.next_seq, self.heap)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimerSnapshot):
            return NotImplemented
        return self._key() == other._key() and dict(self.tasks) == dict(other.tasks)

    def __hash__(self) -> int:
        return hash((*self._key(), frozenset(self.tasks.items())))

    def replace(self, **changes: Any) -> TimerSnapshot:
        """A copy with some fields replaced (``tasks`` may be any mapping)."""
        fields = {"now": self.now, "closed": self.closed, "next_seq": self.next_seq,
                  "tasks": self.tasks, "heap": self.heap}
        return TimerSnapshot(**{**fields, **changes})


@dataclass(frozen=True, slots=True)
class TimerCloseReport:
    """What ``TimerScheduler.close()`` did: the ids it cancelled, the ids still running."""

    cancelled: tuple[Hashable, ...] = ()  # pending when close() began, in scheduling order
    running: tuple[Hashable, ...] = ()  # left to finish and report


@dataclass(frozen=True, slots=True)
class TimerStats:
    """Counters of a ``TimerScheduler``; ``heap - live`` entries are garbage awaiting removal."""

    live: int  # pending versions: each has exactly one heap entry
    heap: int  # heap entries, live and stale; heap <= 2 * live + rebuild_floor
    rebuilds: int  # times the heap was rebuilt from its live entries
    running: int
    scheduled: int  # schedule() calls that made a version
    claimed: int  # versions handed out by next()
    completed: int
    failed: int
    cancelled: int
