"""DurableRunner: submit a DAG to a durable store and run it on worker processes started here.

    with DurableRunner("sqlite:///jobs.db", processes=4, max_concurrency=4) as runner:
        runner.submit("fetch", fetch, args={"url": u})
        runner.submit("parse", parse, deps=["fetch"])
        runner.start()
        runner.wait()
        print(runner.result("parse"))

The workers are ``refsched worker`` processes: they survive nothing the store does not, and
the store survives them. Workers on other processes or machines may join the same store.
Leaving the block stops this runner's workers (SIGTERM: they finish what they run); it does
not close the store.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from refsched.durable.scheduler import DurableScheduler, function_name
from refsched.durable.worker import MIN_LEASE
from refsched.errors import InvalidArgumentError
from refsched.types import TaskState

__all__ = ["DurableRunner", "function_name"]


class DurableRunner:
    """A durable store plus ``processes`` local worker processes (see the module docstring)."""

    def __init__(self, url: str, *, processes: int = 2, concurrency: int = 1,
                 lease: float = 30.0, **store_options: Any) -> None:
        for label, value in (("processes", processes), ("concurrency", concurrency)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"DurableRunner({label}={value!r}): an int >= 1")
        # The workers refuse a shorter lease: they would exit with a usage error, be replaced,
        # and exit again.
        if (isinstance(lease, bool) or not isinstance(lease, (int, float))
                or not lease >= MIN_LEASE):
            raise InvalidArgumentError(f"DurableRunner(lease={lease!r}): seconds >= {MIN_LEASE}")
        self.db = DurableScheduler(url, **store_options)
        self.processes = processes
        self.concurrency = concurrency
        self.lease = float(lease)
        self.workers: list[subprocess.Popen[bytes]] = []

    def submit(self, task_id: str, fn: str | Callable[..., Any], deps: Iterable[str] = (),
               args: dict[str, Any] | None = None, *, optional: Iterable[str] = (),
               run_at: dt.datetime | None = None, delay: float | None = None,
               priority: int = 0) -> int:
        """Submit ``fn(**args)`` as a new version of ``task_id``; return its generation.
        ``optional`` (the deps whose edge is optional), ``run_at``, ``delay`` and ``priority``
        as ``DurableScheduler.submit`` (docs/semantics.md, docs/time.md)."""
        return self.db.submit(task_id, deps, fn=fn, args=args, optional=optional,
                              run_at=run_at, delay=delay, priority=priority)

    def start(self) -> None:
        """Seal the graph and start the worker processes."""
        self.db.start()
        self._spawn()

    def _spawn(self) -> None:
        command = [sys.executable, "-m", "refsched", "worker", "--db", self.db.url,
                   "--concurrency", str(self.concurrency), "--lease", str(self.lease)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        while len(self.workers) < self.processes:
            self.workers.append(subprocess.Popen(command, env=env))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every version ended (True) or ``timeout`` seconds pass (False).

        A worker process that died is replaced, so a crash costs a lease, not the run.
        """
        deadline = None if timeout is None else _now() + timeout
        while True:
            self.workers = [w for w in self.workers if w.poll() is None]
            self._spawn()
            left = None if deadline is None else max(0.0, deadline - _now())
            if self.db.wait(timeout=None if left is None else min(left, 1.0)):
                return True
            if deadline is not None and _now() >= deadline:
                return False

    def state(self, task_id: str) -> TaskState:
        return self.db.state(task_id)

    def result(self, task_id: str) -> Any:
        return self.db.result(task_id)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop this runner's workers: SIGTERM, then SIGKILL after ``timeout`` seconds."""
        for w in self.workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.wait(timeout)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        self.workers = []

    def __enter__(self) -> DurableRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            with contextlib.suppress(Exception):
                self.db.release()


_now = time.monotonic
