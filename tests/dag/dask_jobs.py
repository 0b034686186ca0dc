"""Functions tests/dag/test_runner_dask.py runs on dask.distributed worker processes.

They live here, not in the test module, so that a worker imports only this small module: dask
pickles a ``functools.partial`` of them by reference (``tests.dag.dask_jobs.node``), and a spawned
worker finds ``tests.dag.dask_jobs`` on the ``sys.path`` it inherits from pytest (the project's
root, since tests/ is a package).

Every task of a run shares one directory (the workers are processes on this machine): a task
reads the values of its dependencies from there, so a dependency that has not finished is a
``FileNotFoundError``, and appends ``start``/``end`` lines to one log, whose order is the order
in which things happened across all processes (each line is one ``O_APPEND`` write).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path


class JobError(Exception):
    """What :func:`fail` raises, so a test can tell it from any other error."""


def _log(workdir: str, event: str, task_id: str) -> None:
    line = f"{event} {task_id} {os.getpid()}\n".encode()
    fd = os.open(Path(workdir, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_log(workdir: str) -> list[tuple[str, str, int]]:
    """The log's ``(event, task_id, pid)`` lines, in the order they were written."""
    path = Path(workdir, "log")
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        event, task_id, pid = line.split()
        events.append((event, task_id, int(pid)))
    return events


def node(workdir: str, task_id: str, deps: Sequence[str], own: int) -> tuple[int, int]:
    """``own`` plus twice the sum of the values of ``deps``; returns ``(value, pid)``.

    Reads each dependency's value from the file that dependency wrote, and writes its own
    (atomically, by a rename) before it logs ``end``.
    """
    _log(workdir, "start", task_id)
    value = own + 2 * sum(int(Path(workdir, f"{dep}.value").read_text()) for dep in deps)
    tmp = Path(workdir, f"{task_id}.value.tmp")
    tmp.write_text(str(value))
    os.replace(tmp, Path(workdir, f"{task_id}.value"))
    _log(workdir, "end", task_id)
    return value, os.getpid()


def fail(workdir: str, task_id: str, message: str) -> None:
    """Log a start and raise :class:`JobError` with ``message``."""
    _log(workdir, "start", task_id)
    raise JobError(message)


def hold(workdir: str, task_id: str, limit: float) -> str:
    """Log a start, then wait until the file ``<task_id>.release`` exists (at most ``limit`` s)."""
    _log(workdir, "start", task_id)
    release = Path(workdir, f"{task_id}.release")
    deadline = time.monotonic() + limit
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    _log(workdir, "end", task_id)
    return "released" if release.exists() else "timed out"
