"""What ``TaskScheduler.stats()`` must count, derived from the model's steps.

Every counter of ``SchedulerStats`` is a count of spec steps of one kind, of the versions those
steps moved into a state, or of API calls the contract classifies without a step of their own:

==========================  ===================================================================
submitted                   Submit and SubmitOptional steps
retried                     versions a Retry step renewed (the task and its blocked descendants)
claimed                     versions Claim steps took: the sum of their ``k``
succeeded                   Complete steps
failed                      Fail steps
cancelled                   versions a step made cancelled (Cancel of a waiting version,
                            AcknowledgeCancel, Close with ``cancelPending``)
blocked                     versions a step made blocked (Settle)
cycles_reported             ``submit()`` / ``start()`` / ``add_deps()`` calls refused with
                            ``CycleError``
claim_conflicts             ``ready()`` calls the concurrency limit cut short
                            (:func:`claim_cut_short`)
duplicate_callbacks         RepeatedCallback steps
stale_callbacks             StaleCallback steps
ready_wait.count            == claimed: each claimed version waited once
run_time.count              versions that ended from running: Complete, Fail and
                            AcknowledgeCancel steps
==========================  ===================================================================

The durations themselves (``ready_wait`` / ``run_time`` totals and maxima) are clock readings,
which the model has none of: :meth:`Counts.expected` fixes their counts only.

``TaskScheduler.signals()`` counts the same per (task type, tenant) partition, and a few more
(:meth:`Counts.expected_partition`): ``stopped`` (AcknowledgeCancel steps), ``replaced``
(pending or ready versions a Submit replaced), ``unknown_deps`` and ``edges_refused`` (calls
refused with ``UnknownDependencyError``; ``add_deps()`` refused with
``InvalidTransitionError``). The spec knows no tenants: the partition is data of a version, as
``seq`` is, kept beside the model by whoever drives it (:class:`Partitions`), and
:func:`step_charges` / :func:`call_charges` say which version's partition each count of a step
or a refused call goes to.

:class:`Counts` is an immutable value; ``counts.step(...)`` is the counts after one more step,
and two counts add up, so the counts a step adds can be computed once per edge of a state graph.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from dataclasses import dataclass, fields, replace
from typing import Any

from refsched.dag.signals import OVERFLOW, UNLABELLED
from refsched.errors import CycleError, InvalidTransitionError, UnknownDependencyError
from refsched.types import Snapshot

from .actions import BLOCKED, CANCELLED, PENDING, READY, RUNNING, running_count

__all__ = ["Charge", "Counts", "Partitions", "call_charges", "claim_cut_short", "step_charges"]


def _moved_ids(before: Snapshot, after: Snapshot) -> tuple[list[Any], list[Any], list[Any]]:
    """The ids whose versions the step from ``before`` to ``after`` renewed, made cancelled,
    made blocked.

    Renewed: a current version of another generation than before (a new id's first version is
    none). Made cancelled or blocked: in that state after the step, and a new version or one
    that was in another state before it.
    """
    renewed: list[Any] = []
    cancelled: list[Any] = []
    blocked: list[Any] = []
    old = before.tasks
    for t, v in after.tasks.items():
        was = old.get(t)
        if was is not None and was.generation != v.generation:
            renewed.append(t)
            was = None  # another version: whatever state it is in, it is new to it
        state = v.state
        if (state is CANCELLED or state is BLOCKED) and (was is None or was.state is not state):
            (cancelled if state is CANCELLED else blocked).append(t)
    return renewed, cancelled, blocked


def _moved(before: Snapshot, after: Snapshot) -> tuple[int, int, int]:
    """How many versions the step renewed, made cancelled, made blocked (:func:`_moved_ids`)."""
    renewed, cancelled, blocked = _moved_ids(before, after)
    return len(renewed), len(cancelled), len(blocked)


def claim_cut_short(s: Snapshot, max_concurrency: int, limit: int | None) -> bool:
    """Whether ``ready(limit)`` from ``s`` claims fewer versions than it asks for because of the
    concurrency limit (``stats().claim_conflicts`` + 1).

    It asks for ``limit`` ready versions (every one when ``limit`` is None, at most as many as
    are ready); it is cut short when fewer slots are free than that, and it counts so even when
    no slot is free and it claims nothing. A closed or unstarted scheduler, or one with nothing
    ready, asks for nothing. ``limit`` must be valid (None or an int >= 0).
    """
    if not s.started or s.closed:
        return False
    ready = sum(1 for v in s.tasks.values() if v.state is READY)
    if not ready:
        return False
    wanted = ready if limit is None else min(limit, ready)
    return max_concurrency - running_count(s.tasks) < wanted


@dataclass(frozen=True, slots=True)
class Counts:
    """The counters of ``SchedulerStats`` as the model's steps fix them; each field >= 0."""

    submitted: int = 0  # Submit and SubmitOptional steps
    retried: int = 0  # versions renewed by Retry steps
    claimed: int = 0  # sum of k over Claim steps
    succeeded: int = 0  # Complete steps
    failed: int = 0  # Fail steps
    cancelled: int = 0  # versions moved into cancelled
    blocked: int = 0  # versions moved into blocked
    cycles_reported: int = 0  # calls refused with CycleError
    claim_conflicts: int = 0  # ready() calls cut short (claim_cut_short)
    duplicate_callbacks: int = 0  # RepeatedCallback steps
    stale_callbacks: int = 0  # StaleCallback steps
    ended_running: int = 0  # Complete, Fail and AcknowledgeCancel steps: run_time.count
    # signals() only:
    stopped: int = 0  # AcknowledgeCancel steps
    replaced: int = 0  # pending or ready versions a Submit replaced
    unknown_deps: int = 0  # calls refused with UnknownDependencyError
    edges_refused: int = 0  # add_deps() calls refused with InvalidTransitionError

    def __add__(self, other: Counts) -> Counts:
        return Counts(*map(operator.add, _values(self), _values(other)))

    def step(self, action: str, args: tuple[Any, ...], before: Snapshot,
             after: Snapshot) -> Counts:
        """The counts after the step ``action(*args)`` from ``before`` to ``after``.

        ``args`` are the model action's arguments (Claim's first is ``k``).
        """
        renewed, cancelled, blocked = _moved(before, after)
        ended = action in _ENDING_RUNNING
        return Counts(
            submitted=self.submitted + (action in _SUBMITTING),
            retried=self.retried + (renewed if action == "Retry" else 0),
            claimed=self.claimed + (int(args[0]) if action == "Claim" else 0),
            succeeded=self.succeeded + (action == "Complete"),
            failed=self.failed + (action == "Fail"),
            cancelled=self.cancelled + cancelled,
            blocked=self.blocked + blocked,
            cycles_reported=self.cycles_reported,
            claim_conflicts=self.claim_conflicts,
            duplicate_callbacks=self.duplicate_callbacks + (action == "RepeatedCallback"),
            stale_callbacks=self.stale_callbacks + (action == "StaleCallback"),
            ended_running=self.ended_running + ended,
            stopped=self.stopped,
            replaced=self.replaced,
            unknown_deps=self.unknown_deps,
            edges_refused=self.edges_refused,
        )

    def call(self, method: str, args: tuple[Any, ...], before: Snapshot,
             error: BaseException | None, max_concurrency: int) -> Counts:
        """The counts after what the API call ``method(*args)`` from ``before`` counts besides its
        step: a ``CycleError`` it raised, or a ``ready()`` the concurrency limit cut short.

        ``error`` is what the call raised (None: it returned).
        """
        if error is not None:
            cycle = isinstance(error, CycleError) and method in ("submit", "start", "add_deps")
            return replace(self, cycles_reported=self.cycles_reported + 1) if cycle else self
        if method == "ready" and claim_cut_short(before, max_concurrency,
                                                 args[0] if args else None):
            return replace(self, claim_conflicts=self.claim_conflicts + 1)
        return self

    def expected(self) -> dict[str, int]:
        """What ``stats()`` must show, by field (``ready_wait.count``: a field of a field)."""
        shown = self.expected_partition()
        for name in _SIGNALS_ONLY:
            del shown[name]
        return shown

    def expected_partition(self) -> dict[str, int]:
        """What a partition of ``signals()`` must count, by field (its counters and the
        durations' counts; the gauges ``waiting`` and ``running`` are the state's)."""
        shown = dict(zip(_NAMES, _values(self), strict=True))
        ended = shown.pop("ended_running")
        return {**shown, "ready_wait.count": self.claimed, "run_time.count": ended}

    def charged(self, counter: str, n: int = 1) -> Counts:
        """The counts with ``n`` more of ``counter`` (a field's name)."""
        return replace(self, **{counter: getattr(self, counter) + n})


Charge = tuple[Hashable, str]
"""(a partition key, a field of :class:`Counts`): one more of that count in that partition."""


class Partitions:
    """The partition keys of the versions, beside the model: ``labels[(t, g)]`` is the
    ``(task type, tenant)`` version ``g`` of ``t`` was given (absent: :data:`UNLABELLED`).

    The first ``max_partitions`` keys charged keep a partition of their own; every other goes
    to :data:`OVERFLOW`, as ``TaskScheduler(max_partitions=...)`` does.
    """

    def __init__(self, max_partitions: int) -> None:
        self.max_partitions = max_partitions
        self.labels: dict[tuple[Hashable, int], Hashable] = {}
        self.kept: dict[Hashable, None] = {}

    def key(self, labels: Hashable, *, allocate: bool = True) -> Hashable:
        """The partition ``labels`` is charged to (given one, if there is room and
        ``allocate``)."""
        if labels in self.kept:
            return labels
        if allocate and len(self.kept) < self.max_partitions:
            self.kept[labels] = None
            return labels
        return OVERFLOW

    def of(self, t: Hashable, g: int, *, allocate: bool = True) -> Hashable:
        """The partition of version ``g`` of ``t``."""
        return self.key(self.labels.get((t, g), UNLABELLED), allocate=allocate)

    def gauges(self, s: Snapshot) -> dict[Hashable, dict[str, int]]:
        """Per partition, its current versions waiting (pending or ready) and running."""
        out: dict[Hashable, dict[str, int]] = {}
        for t, v in s.tasks.items():
            if v.state in (PENDING, READY, RUNNING):
                both = out.setdefault(self.of(t, v.generation, allocate=False),
                                      {"waiting": 0, "running": 0})
                both["running" if v.state is RUNNING else "waiting"] += 1
        return out


def step_charges(action: str, args: tuple[Any, ...], before: Snapshot, after: Snapshot,
                 parts: Partitions) -> list[Charge]:
    """What the step ``action(*args)`` from ``before`` to ``after`` counts, partition by
    partition, in the order the counts are made (the order in which keys get partitions).

    ``parts.labels`` already holds the new versions' labels (a Retry's keep their
    predecessors').
    """
    charges: list[Charge] = []
    tasks = after.tasks
    if action in _SUBMITTING:
        t = args[0]
        charges.append((parts.of(t, tasks[t].generation), "submitted"))
        was = before.tasks.get(t)
        if was is not None and was.state in (PENDING, READY):
            charges.append((parts.of(t, was.generation), "replaced"))
    elif action == "Claim":
        charges += [(parts.of(t, v.generation), "claimed") for t, v in tasks.items()
                    if v.state is RUNNING and before.tasks[t].state is READY]
    elif action in _ENDING_RUNNING:
        t = args[0]
        key = parts.of(t, tasks[t].generation)
        charges += [(key, _ENDING_RUNNING_AS[action]), (key, "ended_running")]
    elif action in _CALLBACK_STEPS:
        t = args[0]
        charges.append((parts.of(t, tasks[t].generation), _CALLBACK_STEPS[action]))
    renewed, cancelled, blocked = _moved_ids(before, after)
    if action == "Retry":
        charges += [(parts.of(t, tasks[t].generation), "retried") for t in renewed]
    charges += [(parts.of(t, tasks[t].generation), "cancelled") for t in cancelled]
    charges += [(parts.of(t, tasks[t].generation), "blocked") for t in blocked]
    return charges


def call_charges(method: str, args: tuple[Any, ...], labels: Hashable, before: Snapshot,
                 error: BaseException | None, max_concurrency: int,
                 parts: Partitions) -> list[Charge]:
    """What the API call ``method(*args)`` from ``before`` counts besides its step, and where:
    a configuration error it raised (a cycle, an unknown dependency, an edge refused) goes to
    the partition of the submission (``labels``) or of the version ``add_deps()`` named; a
    ``ready()`` cut short and a refused ``start()``, which concern no version, to
    :data:`UNLABELLED`'s."""
    if error is None:
        if method == "ready" and claim_cut_short(before, max_concurrency,
                                                 args[0] if args else None):
            return [(parts.key(UNLABELLED), "claim_conflicts")]
        return []
    if isinstance(error, CycleError):
        counter = "cycles_reported"
    elif isinstance(error, UnknownDependencyError):
        counter = "unknown_deps"
    elif isinstance(error, InvalidTransitionError) and method == "add_deps":
        counter = "edges_refused"
    else:
        return []
    if method == "submit":
        return [(parts.key(labels), counter)]
    if method == "add_deps":
        t = args[0]
        return [(parts.of(t, before.tasks[t].generation), counter)]
    if method == "start":
        return [(parts.key(UNLABELLED), counter)]
    return []


_NAMES = tuple(f.name for f in fields(Counts))
_ENDING_RUNNING = frozenset({"Complete", "Fail", "AcknowledgeCancel"})
_SUBMITTING = frozenset({"Submit", "SubmitOptional"})
# a step that ends a running version -> what it counts beside ended_running
_ENDING_RUNNING_AS = {"Complete": "succeeded", "Fail": "failed", "AcknowledgeCancel": "stopped"}
_CALLBACK_STEPS = {"RepeatedCallback": "duplicate_callbacks", "StaleCallback": "stale_callbacks"}
_SIGNALS_ONLY = ("stopped", "replaced", "unknown_deps", "edges_refused")
_values = operator.attrgetter(*_NAMES)  # a Counts -> its fields' values, in order
