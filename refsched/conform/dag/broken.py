"""Schedulers that each break one rule of the contract, for showing that the oracle rejects them.

Each is a :class:`refsched.TaskScheduler` subclass with one plausible bug, named after it; the
docstring names the rule (in ``docs/semantics.md``'s words). Each can be checked in-process
(``refsched conform --impl refsched.conform.dag.broken:ClaimsOverLimit``) or served over the
protocol (``python -m refsched.serve --impl refsched.conform.dag.broken:ClaimsOverLimit``).

Most break the rule through the public API. Where the rule lives inside one step, the bug reaches
into the scheduler's internals (named where it does): these are seeded bugs, for one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from refsched import TaskScheduler
from refsched.errors import InvalidArgumentError, UnknownTaskError
from refsched.types import Claim, TaskState

__all__ = [
    "BROKEN",
    "CancelIgnoresRunning",
    "ClaimsNewestFirst",
    "ClaimsOverLimit",
    "CompleteForgetsDependents",
    "FailDoesNotBlock",
    "StaleCallbackAccepted",
    "StartMissesCycle",
    "UnknownTaskWrongError",
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

    def cancel(self, task_id: Hashable, generation: int | None = None) -> TaskState:
        try:
            running = self.state(task_id) is TaskState.RUNNING
        except (UnknownTaskError, InvalidArgumentError):
            running = False
        if running and generation in (None, self.info(task_id).generation):
            return TaskState.RUNNING
        return super().cancel(task_id, generation)


class FailDoesNotBlock(TaskScheduler):
    """Failure blocks: every pending or ready version that depends on a failed one, directly or
    through other unclaimed versions, becomes blocked.

    Bug: ``fail()`` ends the version and leaves its dependents waiting. (Internals: it skips
    the scheduler's Settle, ``_settle``, for the duration of the call.)
    """

    def __init__(self, max_concurrency: int, **options: Any) -> None:
        super().__init__(max_concurrency, **options)
        self._failing = False

    def fail(self, task_id: Hashable, generation: int, error: Any = None) -> TaskState:
        self._failing = True
        try:
            return super().fail(task_id, generation, error)
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
