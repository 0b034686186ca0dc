"""What the runners over the in-memory schedulers share: the scheduler underneath, the pool size."""

from __future__ import annotations

import os
from typing import Generic, TypeVar

from refsched.errors import InvalidArgumentError

__all__ = ["SchedulerRunner", "worker_count"]

_Scheduler = TypeVar("_Scheduler")


def worker_count(runner: str, max_workers: int | None) -> int:
    """The ``max_workers`` a runner was given, checked; None is ThreadPoolExecutor's default.

    Errors: not an int >= 1 (a bool is none) -> ``InvalidArgumentError`` naming ``runner``.
    """
    if max_workers is None:
        return min(32, (os.cpu_count() or 1) + 4)
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise InvalidArgumentError(
            f"{runner}(max_workers={max_workers!r}): max_workers must be an int >= 1")
    return max_workers


class SchedulerRunner(Generic[_Scheduler]):
    """A runner driving one scheduler (``_scheduler``) on ``_max_workers`` worker threads."""

    _scheduler: _Scheduler
    _max_workers: int

    @property
    def scheduler(self) -> _Scheduler:
        """The scheduler underneath, for inspection (``state``, ``snapshot``...).

        Change it only through the runner: an action taken on it directly bypasses the futures.
        """
        return self._scheduler

    @property
    def max_workers(self) -> int:
        """The most functions the runner runs at once."""
        return self._max_workers
