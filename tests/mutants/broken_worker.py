"""The worker's old bookkeeping, planted back: held leases in a dict keyed by task id.

When a worker's own lease expired and it re-claimed the same version, the new attempt's entry
replaced the old one's, and the old attempt's clean-up then removed the new attempt's: its
heartbeats stopped, it expired, and so did every later attempt, until the version failed.
The lock-step (refsched.verify.durable.worker_lockstep) and the fault test with real processes
(tests/durable/test_faults.py) must both catch it.
"""

from __future__ import annotations

from refsched.dag.runner import CancelToken
from refsched.durable.scheduler import Lease
from refsched.durable.worker import Attempt, Held, LeaseKey


class TaskKeyedHeld(Held):
    """One entry per task id: the newest attempt taken; drop() removes the task's entry."""

    def __init__(self) -> None:
        super().__init__()
        self._by_task: dict[str, Attempt] = {}  # task id -> the attempt taken last
        self._ever: dict[LeaseKey, Attempt] = {}  # every attempt taken: each still reports

    def _sync(self) -> None:
        self._attempts = {a.key: a for a in self._by_task.values()}

    def take(self, lease: Lease, token: CancelToken) -> Attempt:
        attempt = Attempt(lease, token)
        with self._lock:
            self._by_task[lease.task_id] = attempt
            self._ever[attempt.key] = attempt
            self._sync()
        return attempt

    def returned(self, key: LeaseKey) -> Attempt | None:
        # Every attempt taken still reports, replaced or not: Held's own returned(), looking
        # among all of them.
        with self._lock:
            newest, self._attempts = self._attempts, self._ever
            try:
                return super().returned(key)
            finally:
                self._attempts = newest

    def drop(self, key: LeaseKey) -> None:
        with self._lock:
            self._by_task.pop(key[0], None)
            self._sync()
            self.changed.notify_all()

    def crash(self) -> None:
        with self._lock:
            self._by_task.clear()
            self._sync()
            self.changed.notify_all()


class DeafHeld(Held):
    """A heartbeat that finds a lease lost never tells its function to stop."""

    def lost(self, key: LeaseKey) -> bool:
        return False
