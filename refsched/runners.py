"""What the runners over the in-memory schedulers share: the scheduler underneath, the pool size."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["SchedulerRunner"]

_Scheduler = TypeVar("_Scheduler")


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
