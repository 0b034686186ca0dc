"""Random real runs of every system that has a recording, as traces of its spec.

:func:`record_run` dispatches to the system's own recorder: the Runner's scheduler
(:func:`refsched.verify.dag.recording.record_runner_run`), the TimerRunner
(:func:`refsched.verify.timer.recording.record_timer_run`) or the WorkStealingPool
(:func:`refsched.verify.pool.recording.record_pool_run`).
"""

from __future__ import annotations

from collections.abc import Callable

from refsched.verify.dag.recording import record_runner_run
from refsched.verify.itf import Trace
from refsched.verify.pool.recording import record_pool_run
from refsched.verify.timer.recording import record_timer_run

__all__ = ["RECORDED_SYSTEMS", "record_run"]

_RECORDERS: dict[str, Callable[..., Trace]] = {
    "scheduler": record_runner_run, "timer": record_timer_run, "pool": record_pool_run}

RECORDED_SYSTEMS = tuple(_RECORDERS)
"""The systems whose real runs :func:`record_run` records, the first the default."""


def record_run(system: str, seed: int, *, tasks: int | None = None,
               workers: int | None = None) -> Trace:
    """Record one random run of ``system`` (one of :data:`RECORDED_SYSTEMS`) from ``seed``.

    ``tasks`` and ``workers`` (None: the system's default) go to the system's recorder.
    ``ValueError`` for another system.
    """
    if system not in _RECORDERS:
        raise ValueError(f"record_run: no recording of {system!r}; the systems recorded are "
                         f"{', '.join(RECORDED_SYSTEMS)}")
    sizes = {name: value for name, value in (("tasks", tasks), ("workers", workers))
             if value is not None}
    return _RECORDERS[system](seed, **sizes)
