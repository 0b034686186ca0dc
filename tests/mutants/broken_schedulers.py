"""Schedulers that each break one rule of the contract, for the must-fail tests.

Each forwards to a real TaskScheduler and changes one behaviour, the way a plausible bug would.
"""

from __future__ import annotations

from typing import Any

from refsched import TaskScheduler
from refsched.types import TaskState


class BrokenScheduler:
    """A scheduler that forwards everything to a real one; subclasses break one rule."""

    def __init__(self, max_concurrency: int) -> None:
        self.inner = TaskScheduler(max_concurrency)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FailReportedAsSuccess(BrokenScheduler):
    """fail() completes the version instead: dependents run after a failure."""

    def fail(self, task_id: Any, generation: int, error: Any = None) -> TaskState:
        return self.inner.complete(task_id, generation)  # type: ignore[no-any-return]


class ClaimsTwice(BrokenScheduler):
    """ready() claims a second batch on top of the first: over-commits."""

    def ready(self, limit: int | None = None) -> list[Any]:
        first = self.inner.ready(limit)
        return first + (self.inner.ready(limit) if first else [])


class CancelIgnoresRunning(BrokenScheduler):
    """cancel() of a running version forgets the cooperative stop request."""

    def cancel(self, task_id: Any, generation: int | None = None) -> TaskState:
        if self.inner.state(task_id) is TaskState.RUNNING and generation is None:
            return TaskState.RUNNING
        return self.inner.cancel(task_id, generation)  # type: ignore[no-any-return]


class RetryWithoutDescendants(BrokenScheduler):
    """retry() resubmits the task alone, leaving its blocked descendants stuck."""

    def retry(self, task_id: Any) -> int:
        info = self.inner.info(task_id)
        if not info.state.is_dead or self.inner.snapshot().closed:
            return self.inner.retry(task_id)  # type: ignore[no-any-return]
        return self.inner.submit(task_id, info.deps)  # type: ignore[no-any-return]


class StaleCallbackAccepted(BrokenScheduler):
    """A late complete() from an older generation is applied to the current one."""

    def complete(self, task_id: Any, generation: int, result: Any = None) -> TaskState:
        info = self.inner.info(task_id)
        if isinstance(generation, int) and 0 < generation < info.generation:
            generation = info.generation
        return self.inner.complete(task_id, generation, result)  # type: ignore[no-any-return]


BROKEN = [FailReportedAsSuccess, ClaimsTwice, CancelIgnoresRunning, RetryWithoutDescendants,
          StaleCallbackAccepted]
