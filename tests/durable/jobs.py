"""Task functions for the durable scheduler's tests, run by real worker processes.

Each function that matters for a fault test appends one line to the file named by its ``log``
argument when it starts and when it ends, so a test can see which attempt ran when, across
processes: ``start <task> <pid> <time>`` / ``end <task> <pid> <time>``.
"""

from __future__ import annotations

import os
import time
from typing import Any


def _log(log: str | None, what: str, task: str) -> None:
    if log:
        with open(log, "a") as f:
            f.write(f"{what} {task} {os.getpid()} {time.time():.6f}\n")
            f.flush()


def noop(**kwargs: Any) -> Any:
    return kwargs.get("value")


def work(task: str, log: str | None = None, seconds: float = 0.0, value: Any = None) -> Any:
    """Log the start, sleep ``seconds``, log the end, return ``value`` (or the pid)."""
    _log(log, "start", task)
    time.sleep(seconds)
    _log(log, "end", task)
    return os.getpid() if value is None else value


def hang_first(task: str, marker: str, log: str | None = None, seconds: float = 60.0) -> int:
    """The first attempt (no ``marker`` file yet) creates the marker and sleeps ``seconds``;
    every later attempt returns at once: a task that one worker holds far past its lease."""
    _log(log, "start", task)
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        _log(log, "end", task)
        return os.getpid()
    os.close(fd)
    time.sleep(seconds)
    _log(log, "end", task)
    return os.getpid()


def boom() -> None:
    raise ValueError("boom")


def exits() -> None:
    raise SystemExit(3)


def unstorable() -> object:
    return object()


def stoppable(token: Any = None) -> str:
    """Run until the worker's token says a cancel was requested, then acknowledge it."""
    while not token.wait(0.05):
        pass
    token.raise_if_cancelled()
    return "not reached"


def hang(log: str | None = None, task: str = "hang") -> None:
    """Never return (a function stuck in a call that ignores its token)."""
    _log(log, "start", task)
    while True:
        time.sleep(3600)


def fenced(lease: Any) -> list[Any]:
    """Return the lease the worker passed: what a sink fences its effects on."""
    return [lease.task_id, lease.generation, lease.attempt]


def outlive_first(task: str, log: str, seconds: float = 2.0, lease: Any = None,
                  token: Any = None) -> int:
    """Attempt 1 runs until attempt 2 has started (its worker was paused past the lease and the
    version re-claimed), then returns; attempt ``k`` after it sleeps ``seconds * (k - 1)``,
    longer than the lease, so that it lives on only if its worker heartbeats it. Returns the
    attempt.

    The sleeps grow so that a worker that loses attempt ``k + 1``'s heartbeats when attempt
    ``k``'s report is refused loses it for good: with equal sleeps, attempt ``k + 1`` would
    end about when its unheartbeated lease runs out (it started about a lease after attempt
    ``k``, whose end stopped its heartbeats), and which came first would be luck.

    Attempt 1 does not heed its token (set when its worker finds the lease lost): its refused
    report must come after attempt 2 is held, or a worker that confuses the two attempts'
    bookkeeping would pass by the luck of which thread ran first. It gives up after a minute."""
    _log(log, f"start{lease.attempt}", task)
    if lease.attempt == 1:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(log) as f:
                if f"start2 {task} " in f.read():
                    break
            time.sleep(0.02)
    else:
        time.sleep(seconds * (lease.attempt - 1))
    _log(log, f"end{lease.attempt}", task)
    return int(lease.attempt)


def summarise(inputs: dict[str, Any]) -> dict[str, Any]:
    """Return the input summary it is given: how each optional dep ended, as JSON."""
    return {d: [o.state.value, o.generation, o.result, o.error] for d, o in inputs.items()}


def fail(**kwargs: Any) -> Any:
    raise ValueError("failed on purpose")


def wait_for_file(path: str, timeout: float = 60.0) -> str:
    """Return once the file ``path`` exists (the test creates it), or after ``timeout``."""
    end = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.02)
    return path
