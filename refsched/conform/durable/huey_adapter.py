"""Huey's SQLite queue behind the conformance protocol, as a durable scheduler (``--system
durable``).

``python -m refsched.conform.durable.huey_adapter`` serves one ``huey.SqliteHuey`` per ``new``, in a
temporary folder. Huey is a job queue: a producer enqueues, a consumer's worker dequeues a
message (removing it from the store) and executes it. It has no dependencies, no generations,
no start phase, no leases and no heartbeats, so the profile it declares (:data:`PROFILE`) keeps
only ``submit``, ``claim``, ``complete``, ``fail``, ``tick`` and ``crash``: enough to ask what
happens to a task whose worker dies mid-task, and to a report that comes after its lease ran out.

==============================  ================================================================
request                         what Huey does
==============================  ================================================================
``submit(t)``                   ``job(t)``: a message enqueued in the SQLite store; answers 1
``claim(w, limit, lease)``      up to ``limit`` times ``dequeue()``: the message leaves the store,
                                and the worker ``w`` holds it; answered as leases of attempt 1
                                with the deadline ``now + lease`` (Huey keeps no deadline)
``complete`` / ``fail(lease)``  ``execute(message)`` of the message the lease's worker holds, the
                                task returning or raising: Huey stores the result or the error
``tick(s)``                     the oracle's clock moves; Huey keeps no time for a dequeued task
``crash(w)``                    the worker's process dies: Huey is not told, and the messages it
                                dequeued are no longer in the store
==============================  ================================================================

Nothing is corrected: a message dequeued by a worker that died is not in the store any more,
and a report is executed whenever a worker makes it (the oracle sends a report with a lease
its worker no longer holds to stand for a worker that was paused and resumes: it still holds
the message it dequeued).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from refsched.conform.protocol import Unsupported
from refsched.durable.scheduler import Lease
from refsched.profile import DurableProfile
from refsched.types import TaskState

__all__ = ["PROFILE", "HueyQueue", "main"]

# Huey has a task priority and a delay (``schedule(delay=...)``), but neither maps: its
# priorities are strict, with no aging, so among versions due at different times its order is
# not the claim key's; and a delayed message waits in Huey's schedule until a consumer's
# scheduler moves it to the queue, on the consumer's wall clock, where a dequeue cannot see it.
# Its periodic tasks are validated by a consumer's clock each minute: no slot is decided by the
# store. So neither time nor schedules are declared. Without dependencies or cancellation no
# version is blocked or cancelled, so there is no provenance to give.
PROFILE = DurableProfile(deps=False, generations=False, start=False, cancel=False, retry=False,
                         close=False, heartbeat=False, expire=False, snapshot=False,
                         validates=False, time=False, schedules=False, edges=False,
                         provenance=False)
"""What a Huey queue offers of the durable scheduler's contract."""


class _Failed(Exception):
    """What a task raises when its worker reports it failed."""


class HueyQueue:
    """One Huey SQLite queue with the part of the ``DurableScheduler`` API it has.

    Built as the checks build a durable scheduler: the url's folder holds Huey's database,
    ``max_concurrency`` and ``max_attempts`` have no counterpart in Huey and are not used.
    """

    def __init__(self, url: str, max_concurrency: Any = None, *, max_attempts: Any = None,
                 clock: Any = None, record: Any = None, aging: Any = None) -> None:
        # aging: every new store is offered one; Huey's priorities never age (profile: no time)
        from huey import SqliteHuey

        logging.getLogger("huey").setLevel(logging.CRITICAL)  # a failing task logs its error
        folder = Path(url.removeprefix("sqlite:///")).parent
        self.huey = SqliteHuey("refsched-conform", filename=str(folder / "huey.db"))
        self.failing: set[str] = set()  # the tasks whose worker reports them failed

        @self.huey.task()  # type: ignore[untyped-decorator]
        def job(task_id: str) -> str:
            if task_id in self.failing:
                raise _Failed(task_id)
            return task_id

        self.job = job
        self.clock = 0.0
        # (task, worker) -> the message the worker dequeued (and holds in its memory)
        self.held: dict[tuple[str, str], Any] = {}

    def release(self) -> None:
        self.huey.storage.close()

    def submit(self, task_id: str, deps: Iterable[str] = (), *, fn: Any = None,
               args: Any = None) -> int:
        self.job(task_id)
        return 1

    def claim(self, worker: str, limit: int = 1, lease: float = 30.0) -> list[Lease]:
        leases = []
        for _ in range(limit):
            message = self.huey.dequeue()
            if message is None:
                break
            task_id = message.args[0]
            self.held[task_id, worker] = message
            leases.append(Lease(task_id, 1, 1, self.clock + lease, "job", {}, worker))
        return leases

    def _execute(self, lease: Lease, fails: bool) -> TaskState:
        from huey.exceptions import TaskException

        message = self.held[lease.task_id, lease.worker]
        if fails:
            self.failing.add(lease.task_id)
        else:
            self.failing.discard(lease.task_id)
        self.huey.execute(message)
        try:
            self.huey.result(message.id, preserve=True)
        except TaskException:
            return TaskState.FAILED
        return TaskState.SUCCEEDED

    def complete(self, lease: Lease, result: Any = None) -> TaskState:
        return self._execute(lease, False)

    def fail(self, lease: Lease, error: Any = None) -> TaskState:
        return self._execute(lease, True)

    def tick(self, seconds: float = 1.0) -> float:
        self.clock += seconds
        return self.clock

    def now(self) -> float:
        return self.clock

    def crash(self, worker: str) -> None:
        """Huey is not told: nothing happens in the store."""

    def _unsupported(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise Unsupported("a Huey queue has no start, cancel, retry, close, heartbeat, "
                          "expiry or snapshot")

    start = heartbeat = acknowledge_cancel = cancel = retry = close = expire = _unsupported
    snapshot = leases = stats = history = _unsupported


def main() -> int:
    from importlib.metadata import version

    from refsched.conform.server import serve_stdio
    from refsched.conform.wire import get

    serve_stdio(HueyQueue, PROFILE, f"huey.SqliteHuey (huey {version('huey')})", get("durable"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
