"""Worker processes with batched reports and prefetch, on both stores: the reports pending in a
batch are sent before a SIGTERM'd worker exits; a worker killed with reports pending loses
nothing the store accepted (the leases expire and the versions run again); prefetched leases are
heartbeated while they wait; whatever a function raises is reported."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from refsched.durable import DurableScheduler
from refsched.durable.worker import Attempt, Worker
from refsched.runners import CancelToken
from refsched.types import TaskState
from tests.conftest import StoreURL
from tests.durable.support import JOBS, accepted_ends, log_lines, start_worker, wait_for

N = 6


def _quick_tasks(url: str, log: Path, n: int = N, gate: Path | None = None) -> DurableScheduler:
    """``n`` quick tasks; with ``gate``, two more after them (lower priority) that wait for the
    file ``gate``: once a worker of two slots runs those, it claims nothing, so the quick
    tasks' reports stay pending in its batch (a worker whose claim finds nothing sends them)."""
    db = DurableScheduler(url, max_concurrency=8, record=True)
    for i in range(n):
        db.submit(f"t{i}", fn=f"{JOBS}:work", args={"task": f"t{i}", "log": str(log)},
                  priority=1)
    if gate is not None:
        for i in range(2):
            db.submit(f"gated{i}", fn=f"{JOBS}:wait_for_file", args={"path": str(gate)})
    db.start()
    return db


def _ended(log: Path, n: int = N) -> bool:
    return len({row[1] for row in log_lines(log) if row[0] == "end"}) == n


def _err(worker: Any) -> str:
    return worker.stderr.read() if worker.stderr else ""


def test_a_sigterm_sends_the_pending_batch_before_exit(tmp_path: Path, durable_url: StoreURL,
                                                      workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    gate = tmp_path / "gate"
    db = _quick_tasks(url, log, gate=gate)
    # a delay far longer than the test: the reports wait in the batch until the exit
    worker = start_worker(url, "--concurrency", "2", "--report-delay", "600", name="w")
    workers.append(worker)
    wait_for(lambda: _ended(log), what="every function's end")
    wait_for(lambda: all(db.state(f"gated{i}") is TaskState.RUNNING for i in range(2)),
             what="the gated tasks taking both slots")
    assert all(db.state(f"t{i}") is TaskState.RUNNING for i in range(N))  # reports pending
    worker.send_signal(signal.SIGTERM)
    gate.touch()
    assert worker.wait(60) == 0, _err(worker)
    assert all(db.state(t) is TaskState.SUCCEEDED for t in (*(f"t{i}" for i in range(N)),
                                                              "gated0", "gated1"))
    assert set(accepted_ends(db).values()) == {1}
    assert [a for a, _ in db.history()].count("Complete") == N + 2
    db.check_invariants()


def test_a_worker_killed_with_reports_pending_loses_nothing(
        tmp_path: Path, durable_url: StoreURL, workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    gate = tmp_path / "gate"
    db = _quick_tasks(url, log, gate=gate)
    victim = start_worker(url, "--concurrency", "2", "--lease", "1", "--report-delay", "600",
                          name="victim")
    workers.append(victim)
    wait_for(lambda: _ended(log), what="every function's end")
    wait_for(lambda: all(db.state(f"gated{i}") is TaskState.RUNNING for i in range(2)),
             what="the gated tasks taking both slots")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(30)
    assert all(db.state(f"t{i}") is TaskState.RUNNING for i in range(N))  # never reported
    gate.touch()
    survivor = start_worker(url, "--lease", "1", "--until-done", "--concurrency", "2",
                            name="survivor")
    workers.append(survivor)
    assert survivor.wait(60) == 0, _err(survivor)
    for i in range(N):
        info = db.info(f"t{i}")
        assert info.state is TaskState.SUCCEEDED and info.attempts == 2
    assert set(accepted_ends(db).values()) == {1}
    starts = [row[2] for row in log_lines(log) if row[0] == "start"]
    assert starts.count(victim.pid) == N and starts.count(survivor.pid) == N
    db.check_invariants()


def test_a_worker_with_nothing_to_claim_sends_its_pending_reports_at_once(
        tmp_path: Path, durable_url: StoreURL, workers: list[Any]) -> None:
    """A chain a -> b -> c under a report delay far longer than the test: each next version is
    ready only once the report before it is sent, so the chain ends only because a worker
    whose claim finds nothing sends what its batch holds (the store's max_concurrency of 1 is
    held by a pending report's lease, too)."""
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=1, record=True)
    db.submit("a", fn=f"{JOBS}:noop")
    db.submit("b", ["a"], fn=f"{JOBS}:noop")
    db.submit("c", ["b"], fn=f"{JOBS}:noop")
    db.start()
    worker = start_worker(url, "--report-delay", "600", "--until-done", name="w")
    workers.append(worker)
    assert worker.wait(60) == 0, _err(worker)
    assert all(db.info(t).state is TaskState.SUCCEEDED and db.info(t).attempts == 1
               for t in "abc")
    assert [a for a, _ in db.history()].count("Complete") == 3
    db.check_invariants()


def test_prefetched_leases_are_heartbeated_while_they_wait(
        tmp_path: Path, durable_url: StoreURL, workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    db = DurableScheduler(url, max_concurrency=8, record=True)
    marker = tmp_path / "release"
    db.submit("slow", fn=f"{JOBS}:wait_for_file", args={"path": str(marker)}, priority=1)
    for i in range(2):
        db.submit(f"q{i}", fn=f"{JOBS}:work", args={"task": f"q{i}", "log": str(log)})
    db.start()
    worker = start_worker(url, "--concurrency", "1", "--prefetch", "2", "--lease", "1",
                          "--report-delay", "0.01", name="w")
    workers.append(worker)
    # one slot, three leases: the two queued ones wait for the slow one's slot
    wait_for(lambda: {t: v.holder for t, v in db.leases().items()}
             == {"slow": "w", "q0": "w", "q1": "w"}, what="three leases held")
    first = {t: db.leases()[t].deadline for t in ("q0", "q1")}
    # each queued lease is extended (lease / 3) while it waits: never lost
    wait_for(lambda: all((db.leases()[t].deadline or 0) > first[t] + 0.5 for t in first),
             timeout=20, what="the queued leases heartbeated")
    assert log_lines(log) == []  # neither queued one started
    marker.touch()
    wait_for(lambda: db.done(), what="every version ended")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0, _err(worker)
    assert all(db.info(t).state is TaskState.SUCCEEDED and db.info(t).attempts == 1
               for t in ("slow", "q0", "q1"))
    db.check_invariants()


def test_whatever_a_function_raises_is_reported_in_a_batch(tmp_path: Path,
                                                           durable_url: StoreURL,
                                                           workers: list[Any]) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=8, record=True)
    for name in ("boom", "exits", "unstorable", "noop"):
        db.submit(name, fn=f"{JOBS}:{name}")
    db.start()
    worker = start_worker(url, "--concurrency", "4", "--prefetch", "2", "--until-done",
                          "--report-delay", "0.05", name="w")
    workers.append(worker)
    assert worker.wait(60) == 0, _err(worker)
    assert db.info("boom").error == "ValueError: boom"
    assert db.info("exits").error == "SystemExit: 3"
    unstorable = db.info("unstorable").error
    assert unstorable is not None and "cannot be stored" in unstorable
    assert db.state("noop") is TaskState.SUCCEEDED
    db.check_invariants()


def test_a_finished_attempts_slot_is_free_while_its_report_is_pending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=8)
    for t in ("a", "b"):
        db.submit(t, fn=f"{JOBS}:noop")
    db.start()
    worker = Worker(url, name="w", lease=5, report_delay=600)
    (attempt,) = worker.claim(1)
    assert worker.returned(attempt.key, "complete", 1)
    # its report waits in the batch: the lease is held, the slot free
    assert worker.held.keys() == {attempt.key}
    assert worker.held.wait_for_slot(1, worker._stopping) == 1
    (other,) = worker.claim(1)
    assert db.state(attempt.lease.task_id) is TaskState.RUNNING
    worker.send([(attempt, "complete", 1, 0.0), (attempt, "complete", 1, 0.0)])  # + a repeat
    assert db.state(attempt.lease.task_id) is TaskState.SUCCEEDED
    assert worker.held.keys() == {other.key}
    db.release()
    worker.db.release()


def test_a_batch_the_store_refuses_whole_is_reported_report_by_report(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=8)
    db.submit("a", fn=f"{JOBS}:noop")
    db.start()
    worker = Worker(url, name="w", lease=5, report_delay=600)
    (attempt,) = worker.claim(1)
    unknown = Attempt(attempt.lease._replace(task_id="nobody"), CancelToken("nobody", 1))
    worker.send([(unknown, "fail", "x", 0.0), (attempt, "complete", 7, 0.0)])
    assert db.state("a") is TaskState.SUCCEEDED and db.result("a") == 7
    assert len(worker.held) == 0
    db.release()
    worker.db.release()


class _LoopLog(Worker):
    """A worker that writes down its claim loop: each claim's ids, and each idle wait."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loop: list[str] = []

    def claim(self, limit: int) -> list[Attempt]:
        attempts = super().claim(limit)
        self.loop.append("claim " + ",".join(a.lease.task_id for a in attempts))
        return attempts

    def _idle_wait(self, idle: float) -> float:
        self.loop.append("idle")
        return 0.0


def test_a_worker_that_sent_its_batch_claims_again_without_an_idle_wait(
        tmp_path: Path) -> None:
    """The store's one slot is held by this worker's own pending report: the claim after it
    finds nothing, the worker sends the batch itself, and its next claim (no idle wait
    between) takes the next version, which that commit made claimable."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1, record=True)
    db.submit("a", fn=f"{JOBS}:noop", priority=1)
    db.submit("b", fn=f"{JOBS}:noop")
    db.start()
    worker = _LoopLog(url, name="w", lease=5, report_delay=600, until_done=True, poll=5.0)
    assert worker.run() == 0
    assert worker.loop[:3] == ["claim a", "claim ", "claim b"], worker.loop
    assert [a for a, _ in db.history()].count("Complete") == 2
    db.check_invariants()
    db.release()
