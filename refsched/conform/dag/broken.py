"""Schedulers that each break one rule of the contract, for showing that the oracle rejects them.

Each is a :class:`refsched.TaskScheduler` subclass with one plausible bug, named after it; the
docstring names the rule (in ``docs/semantics.md``'s words). Each can be checked in-process
(``refsched conform --impl refsched.conform.dag.broken:ClaimsOverLimit``) or served over the
protocol (``python -m refsched.serve --impl refsched.conform.dag.broken:ClaimsOverLimit``).

Most break the rule through the public API. Where the rule lives inside one step, the bug reaches
into the scheduler's internals (named where it does): these are seeded bugs, for one thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from refsched import TaskScheduler
from refsched.dag.scheduler import _PENDING, _READY
from refsched.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import Claim, CloseReport, ParentOutcome, Provenance, Snapshot, TaskState

__all__ = [
    "BROKEN",
    "BROKEN_CLAUSES",
    "AddDepsKeepsCount",
    "AddDepsOnReady",
    "CancelBeforeStartRefused",
    "CancelIgnoresRunning",
    "ClaimsNewestFirst",
    "ClaimsOverLimit",
    "CloseReportSortedById",
    "CompleteForgetsDependents",
    "DuplicateDepAccepted",
    "FailDoesNotBlock",
    "GenerationAsText",
    "LimitNotChecked",
    "MissingPairsCut",
    "NegativeConcurrencyAccepted",
    "NegativeGenerationInvalid",
    "ProvenanceForgetsNotes",
    "ProvenancePathSkipsBlocked",
    "ProvenanceSurvivesRenewal",
    "StaleCallbackAccepted",
    "StartMissesCycle",
    "SummaryFollowsResubmission",
    "UnknownTaskWrongError",
    "ZeroConcurrencyRefused",
]


class ClaimsOverLimit(TaskScheduler):
    """Claims: ``ready()`` never runs more than ``max_concurrency`` versions at once.

    Bug: it counts its slots from one, so it runs one version too many.
    """

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        super().__init__(max_concurrency + 1, **options)


class CompleteForgetsDependents(TaskScheduler):
    """Success releases direct dependents: a pending dependent whose last unfinished dep this
    was becomes ready.

    Bug: ``complete()`` ends the version without looking at its dependents, which stay pending
    for ever. (Internals: it hides the row's ``dependents`` list during the call.)
    """

    def complete(self, task_id: Hashable, generation: int, result: Any = None) -> TaskState:
        try:
            row = self._rows.get(task_id)
        except TypeError:  # an unhashable id: let the real complete() refuse it
            row = None
        if row is None:
            return super().complete(task_id, generation, result)
        dependents, self._dependents[row] = self._dependents[row], None
        try:
            return super().complete(task_id, generation, result)
        finally:
            self._dependents[row] = dependents


class ClaimsNewestFirst(TaskScheduler):
    """Claims: ``ready()`` hands out the ready versions with the smallest ``seq`` first, in
    ``seq`` order.

    Bug: it returns each batch of claims newest first.
    """

    def ready(self, limit: int | None = None) -> list[Claim]:
        return super().ready(limit)[::-1]


class StaleCallbackAccepted(TaskScheduler):
    """Callbacks are versioned: ``complete()`` naming a generation that is not current raises
    ``StaleGenerationError`` and changes nothing.

    Bug: a late ``complete()`` from an older generation is applied to the current version.
    """

    def complete(self, task_id: Hashable, generation: int, result: Any = None) -> TaskState:
        try:
            current = self.info(task_id).generation
        except (UnknownTaskError, InvalidArgumentError):
            current = None
        if current is not None and type(generation) is int and 0 < generation < current:
            generation = current
        return super().complete(task_id, generation, result)


class CancelIgnoresRunning(TaskScheduler):
    """Cancel of a running version sets its cooperative stop request (``cancel_requested``).

    Bug: ``cancel()`` of a running version answers ``running`` and does nothing.
    """

    def cancel(self, task_id: Hashable, generation: int | None = None, *,
               actor: str | None = None, reason: str | None = None) -> TaskState:
        try:
            running = self.state(task_id) is TaskState.RUNNING
        except (UnknownTaskError, InvalidArgumentError):
            running = False
        if running and generation in (None, self.info(task_id).generation):
            return TaskState.RUNNING
        return super().cancel(task_id, generation, actor=actor, reason=reason)


class FailDoesNotBlock(TaskScheduler):
    """Failure blocks: every pending or ready version that depends on a failed one, directly or
    through other unclaimed versions, becomes blocked.

    Bug: ``fail()`` ends the version and leaves its dependents waiting. (Internals: it skips
    the scheduler's Settle, ``_settle``, for the duration of the call.)
    """

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        super().__init__(max_concurrency, **options)
        self._failing = False

    def fail(self, task_id: Hashable, generation: int, error: Any = None, *,
             actor: str | None = None, reason: str | None = None) -> TaskState:
        self._failing = True
        try:
            return super().fail(task_id, generation, error, actor=actor, reason=reason)
        finally:
            self._failing = False

    def _settle(self, dead: Iterable[Any], fresh: Iterable[Any]) -> None:
        if not self._failing:
            super()._settle(dead, fresh)


class StartMissesCycle(TaskScheduler):
    """Start refuses a graph with a cycle (``CycleError``) and changes nothing.

    Bug: ``start()`` trusts a stale "submitted in order, so acyclic" flag and seals a graph
    with a cycle. (Internals: it sets ``_seq_ordered`` while it starts.)
    """

    def start(self) -> None:
        ordered, self._seq_ordered = self._seq_ordered, True
        try:
            super().start()
        finally:
            self._seq_ordered = ordered


def _unknown_as_invalid(method: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: TaskScheduler, task_id: Hashable, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, task_id, *args, **kwargs)
        except UnknownTaskError as error:
            raise InvalidArgumentError(str(error)) from None
    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class UnknownTaskWrongError(TaskScheduler):
    """Errors: a call naming an id never submitted raises ``UnknownTaskError`` (a ``KeyError``).

    Bug: callbacks, ``cancel()``, ``retry()`` and ``state()`` raise ``InvalidArgumentError``
    (a ``ValueError``) instead.
    """

    complete = _unknown_as_invalid(TaskScheduler.complete)
    fail = _unknown_as_invalid(TaskScheduler.fail)
    acknowledge_cancel = _unknown_as_invalid(TaskScheduler.acknowledge_cancel)
    cancel = _unknown_as_invalid(TaskScheduler.cancel)
    retry = _unknown_as_invalid(TaskScheduler.retry)
    state = _unknown_as_invalid(TaskScheduler.state)


BROKEN: tuple[type[TaskScheduler], ...] = (
    ClaimsOverLimit, CompleteForgetsDependents, ClaimsNewestFirst, StaleCallbackAccepted,
    CancelIgnoresRunning, FailDoesNotBlock, StartMissesCycle, UnknownTaskWrongError,
)
"""Every broken scheduler, in the order of the rules in ``docs/semantics.md``."""


# -- one clause each, which random calls rarely or never reach: the clauses phase asks them -----

class NegativeGenerationInvalid(TaskScheduler):
    """Rule ``dag.callback.negative-generation``: a negative generation is not the current one,
    so a callback naming it raises ``StaleGenerationError``.

    Bug: it is taken for bad input and refused with ``InvalidArgumentError``.
    """

    rule = "dag.callback.negative-generation"

    def _refuse_negative(self, call: str, task_id: Hashable, generation: Any) -> None:
        if type(generation) is int and generation < 0 and self._known(task_id):
            raise InvalidArgumentError(f"{call}({task_id!r}, {generation}): negative")

    def _known(self, task_id: Hashable) -> bool:
        try:
            self.state(task_id)
        except (UnknownTaskError, InvalidArgumentError):
            return False
        return True

    def complete(self, task_id: Hashable, generation: int, result: Any = None) -> TaskState:
        self._refuse_negative("complete", task_id, generation)
        return super().complete(task_id, generation, result)

    def fail(self, task_id: Hashable, generation: int, error: Any = None, *,
             actor: str | None = None, reason: str | None = None) -> TaskState:
        self._refuse_negative("fail", task_id, generation)
        return super().fail(task_id, generation, error, actor=actor, reason=reason)


class CloseReportSortedById(TaskScheduler):
    """Rule ``dag.close.ok``: the close report lists each state's ids in ``seq`` order.

    Bug: each list comes sorted by id.
    """

    rule = "dag.close.ok"

    def close(self, cancel_pending: bool = True) -> CloseReport:
        report = super().close(cancel_pending)
        return CloseReport(**{f.name: tuple(sorted(getattr(report, f.name), key=repr))
                              for f in dataclasses.fields(CloseReport)})


class MissingPairsCut(TaskScheduler):
    """Rule ``dag.start.unknown-dep``: ``UnknownDependencyError`` names every (task,
    dependency) pair at fault in ``missing``.

    Bug: it names only the first.
    """

    rule = "dag.start.unknown-dep"

    def start(self) -> None:
        try:
            super().start()
        except UnknownDependencyError as error:
            raise UnknownDependencyError(str(error), error.missing[:1]) from None


class LimitNotChecked(TaskScheduler):
    """Rule ``dag.ready.limit-not-int``: a ``limit`` that is not an integer (``True``, ``1.5``)
    raises ``InvalidArgumentError``.

    Bug: a boolean or a float is taken as the integer it rounds down to.
    """

    rule = "dag.ready.limit-not-int"

    def ready(self, limit: int | None = None) -> list[Claim]:
        if isinstance(limit, bool | float):
            limit = int(limit)
        return super().ready(limit)


class NegativeConcurrencyAccepted(TaskScheduler):
    """Rule ``dag.new.invalid``: a negative ``max_concurrency`` raises
    ``InvalidArgumentError``.

    Bug: it is taken as 0.
    """

    rule = "dag.new.invalid"

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        if type(max_concurrency) is int and max_concurrency < 0:
            max_concurrency = 0
        super().__init__(max_concurrency, **options)


class ZeroConcurrencyRefused(TaskScheduler):
    """Rule ``dag.new.ok``: ``max_concurrency`` 0 is accepted (a scheduler that never claims).

    Bug: 0 is refused with ``InvalidArgumentError``.
    """

    rule = "dag.new.ok"

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        if type(max_concurrency) is int and max_concurrency == 0:
            raise InvalidArgumentError("TaskScheduler(0): max_concurrency must be >= 1")
        super().__init__(max_concurrency, **options)


class CancelBeforeStartRefused(TaskScheduler):
    """Rule ``dag.cancel.ok``: ``cancel`` of a waiting version cancels it, before ``start``
    too.

    Bug: before ``start`` it raises ``InvalidTransitionError``.
    """

    rule = "dag.cancel.ok"

    def cancel(self, task_id: Hashable, generation: int | None = None, *,
               actor: str | None = None, reason: str | None = None) -> TaskState:
        state = self.state(task_id)  # an unknown id: UnknownTaskError, as the real one
        if not self.snapshot().started and state in (TaskState.PENDING, TaskState.READY):
            raise InvalidTransitionError(f"cancel({task_id!r}): start() has not been called")
        return super().cancel(task_id, generation, actor=actor, reason=reason)


class DuplicateDepAccepted(TaskScheduler):
    """Rule ``dag.submit.duplicate-dep``: ``submit`` naming a dependency twice raises
    ``InvalidArgumentError`` and changes nothing.

    Bug: it accepts the list as given, and its snapshot lists the dependency twice. The
    answer to ``submit`` already differs from the model's: a divergence at the submit, not a
    malformed snapshot after it.
    """

    rule = "dag.submit.duplicate-dep"

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        super().__init__(max_concurrency, **options)
        self._listed: dict[Hashable, tuple[Hashable, ...]] = {}

    def submit(self, task_id: Hashable, deps: Iterable[Hashable] = (),
               fn: Callable[..., Any] | None = None, optional: Iterable[Hashable] = (), *,
               tenant: Hashable = None, task_type: str | None = None) -> int:
        listed = tuple(deps)
        try:
            unique = list(dict.fromkeys(listed))
        except TypeError:  # an unhashable dep: let the real submit() refuse it
            return super().submit(task_id, listed, fn, optional, tenant=tenant,
                                  task_type=task_type)
        generation = super().submit(task_id, unique, fn, optional, tenant=tenant,
                                    task_type=task_type)
        self._listed[task_id] = listed
        return generation

    def snapshot(self, *, provenance: bool = False) -> Snapshot:
        snapshot = super().snapshot(provenance=provenance)
        tasks = {t: (dataclasses.replace(v, deps=self._listed[t])  # type: ignore[arg-type]
                     if t in self._listed and len(set(self._listed[t])) < len(self._listed[t])
                     else v)
                 for t, v in snapshot.tasks.items()}
        return dataclasses.replace(snapshot, tasks=tasks)


class GenerationAsText(TaskScheduler):
    """The protocol: ``submit`` answers the generation as an integer.

    Bug: it answers it as text (``"1"``). Served over the protocol this is a malformed answer,
    a protocol violation (exit 3), not a divergence.
    """

    rule = "dag.submit.ok"

    def submit(self, task_id: Hashable, deps: Iterable[Hashable] = (),
               fn: Callable[..., Any] | None = None, optional: Iterable[Hashable] = (), *,
               tenant: Hashable = None, task_type: str | None = None) -> int:
        return str(super().submit(task_id, deps, fn, optional, tenant=tenant,
                                       task_type=task_type))  # type: ignore[return-value]


class AddDepsOnReady(TaskScheduler):
    """Rule ``dag.add_deps.not-pending``: ``add_deps`` of a version that is not pending raises
    ``InvalidTransitionError``: an edge never lands on a ready version.

    Bug: a ready version takes the edges and waits again. (Internals: it is made pending for
    the call.)
    """

    rule = "dag.add_deps.not-pending"

    def add_deps(self, task_id: Hashable, deps: Iterable[Hashable] = (),
                 optional: Iterable[Hashable] = ()) -> TaskState:
        row = _row_of(self, task_id)
        if row is None or self._state[row] != _READY:
            return super().add_deps(task_id, deps, optional)
        self._state[row] = _PENDING
        self._ready_count -= 1
        try:
            state = super().add_deps(task_id, deps, optional)
        except Exception:
            self._state[row] = _READY
            self._ready_count += 1
            raise
        if state is TaskState.PENDING and self._remaining[row] == 0:  # every new edge settled
            self._state[row] = _READY
            self._ready_count += 1
            return TaskState.READY
        return state


class AddDepsKeepsCount(TaskScheduler):
    """Rule ``dag.add_deps.ok``: ``add_deps`` raises the version's ``remaining_deps`` by the
    new edges not settled.

    Bug: the edges are added and the count kept, so the version may run before a new
    dependency has ended. (Internals: it puts the row's count back after the call.)
    """

    rule = "dag.add_deps.ok"

    def add_deps(self, task_id: Hashable, deps: Iterable[Hashable] = (),
                 optional: Iterable[Hashable] = ()) -> TaskState:
        row = _row_of(self, task_id)
        before = None if row is None else self._remaining[row]
        state = super().add_deps(task_id, deps, optional)
        if row is not None and before is not None and state is TaskState.PENDING:
            self._remaining[row] = before
        return state


class SummaryFollowsResubmission(TaskScheduler):
    """Rule ``dag.input_summary.ok``: a claimed version's input summary is how its optional
    dependencies had ended when it was claimed.

    Bug: it is read again at each call, so a dependency resubmitted after the claim drops out
    of what the running function was given. (Internals: it skips the summary kept at the
    claim.)
    """

    rule = "dag.input_summary.ok"

    def input_summary(self, task_id: Hashable) -> dict[Hashable, ParentOutcome]:
        with self._lock:
            return self._outcomes_locked(self._lookup("input_summary", task_id))


class ProvenanceForgetsNotes(TaskScheduler):
    """Rule ``dag.provenance.cancelled``: a cancelled version's provenance carries the
    ``actor`` and ``reason`` given to the call that cancelled it.

    Bug: the record of a version cancelled by a call names no actor and no reason.
    """

    rule = "dag.provenance.cancelled"

    def provenance(self, task_id: Hashable) -> Provenance | None:
        record = super().provenance(task_id)
        if record is None or len(record.path) != 1:
            return record
        return dataclasses.replace(record, actor=None, reason=None)


class ProvenancePathSkipsBlocked(TaskScheduler):
    """Rule ``dag.provenance.blocked``: a blocked version's path runs from the root through
    every version blocked on the way to it.

    Bug: the path names only the root and the version, as if every blocked version depended
    on the root directly.
    """

    rule = "dag.provenance.blocked"

    def provenance(self, task_id: Hashable) -> Provenance | None:
        record = super().provenance(task_id)
        if record is None or len(record.path) <= 2:
            return record
        return dataclasses.replace(record, path=(record.path[0], record.path[-1]))


class ProvenanceSurvivesRenewal(TaskScheduler):
    """Rule ``dag.provenance.none``: a version renewed by ``retry`` or a new ``submit`` has no
    provenance until it is blocked or cancelled itself.

    Bug: the renewed version answers the record of the one it replaced. (It keeps every
    record it had before each renewal.)
    """

    rule = "dag.provenance.none"

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        super().__init__(max_concurrency, **options)
        self._old: dict[Hashable, Provenance] = {}

    def _keep(self) -> None:
        for task_id in self.snapshot(provenance=True).records:
            record = super().provenance(task_id)
            if record is not None:
                self._old[task_id] = record

    def submit(self, task_id: Hashable, deps: Iterable[Hashable] = (),
               fn: Callable[..., Any] | None = None, optional: Iterable[Hashable] = (), *,
               tenant: Hashable = None, task_type: str | None = None) -> int:
        self._keep()
        return super().submit(task_id, deps, fn, optional, tenant=tenant, task_type=task_type)

    def retry(self, task_id: Hashable) -> int:
        self._keep()
        return super().retry(task_id)

    def provenance(self, task_id: Hashable) -> Provenance | None:
        record = super().provenance(task_id)
        return record if record is not None else self._old.get(task_id)


def _row_of(scheduler: TaskScheduler, task_id: Hashable) -> int | None:
    """The row of ``task_id``'s current version, or None (unknown or unhashable: the real
    call refuses it)."""
    try:
        return scheduler._rows.get(task_id)
    except TypeError:
        return None


BROKEN_CLAUSES: tuple[type[TaskScheduler], ...] = (
    NegativeGenerationInvalid, CloseReportSortedById, MissingPairsCut, LimitNotChecked,
    NegativeConcurrencyAccepted, ZeroConcurrencyRefused, CancelBeforeStartRefused,
    DuplicateDepAccepted, AddDepsOnReady, AddDepsKeepsCount, SummaryFollowsResubmission,
    ProvenanceForgetsNotes, ProvenancePathSkipsBlocked, ProvenanceSurvivesRenewal,
)
"""The schedulers that break a clause random calls rarely reach; each names it as ``rule``,
and the clauses phase rejects each with a verdict naming that rule. ``GenerationAsText``
breaks the protocol instead, and is not among them."""
