"""Real faults against both stores: worker processes killed (SIGKILL) and paused
(SIGSTOP/SIGCONT), a process killed inside a write transaction, parents completing at once
from two processes, claimers in many processes; and, for SQLite, real full and read-only
filesystems. (The PostgreSQL server's own faults: tests/durable/test_postgres_faults.py.)

Every test bounds its waits; a regression fails instead of hanging. Task functions log their
starts and ends with the pid and the time (``tests/durable/jobs.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.errors import StaleLeaseError, StoreError
from refsched.types import TaskState
from tests.conftest import StoreURL
from tests.durable.support import (
    JOBS,
    ROOT,
    accepted_ends,
    log_lines,
    start_worker,
    started_hanging_task,
    wait_for,
)


def test_a_worker_killed_mid_task_loses_it_to_attempt_two(tmp_path: Path,
                                                          durable_url: StoreURL,
                                                          workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    db = DurableScheduler(url, max_concurrency=2, record=True)
    db.submit("slow", fn=f"{JOBS}:work", args={"task": "slow", "log": str(log), "seconds": 1.0})
    for i in range(6):
        db.submit(f"after{i}", ["slow"], fn=f"{JOBS}:work",
                  args={"task": f"after{i}", "log": str(log)})
    db.start()
    victim = start_worker(url, "--lease", "1", "--until-done", name="victim")
    workers.append(victim)
    wait_for(lambda: any(r[0] == "start" for r in log_lines(log)), what="the first start")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(30)
    survivor = start_worker(url, "--lease", "1", "--until-done", "--concurrency", "2",
                            name="survivor")
    workers.append(survivor)
    assert survivor.wait(60) == 0, survivor.stderr.read() if survivor.stderr else ""
    info = db.info("slow")
    assert info.state is TaskState.SUCCEEDED and info.attempts == 2
    assert all(db.state(f"after{i}") is TaskState.SUCCEEDED for i in range(6))
    assert set(accepted_ends(db).values()) == {1}
    starts = [r for r in log_lines(log) if r[:2] == ("start", "slow")]
    assert [r[2] for r in starts] == [victim.pid, survivor.pid]
    db.check_invariants()


def test_a_worker_paused_past_its_lease_is_refused_and_the_reclaimer_kept(
        tmp_path: Path, durable_url: StoreURL, workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    db = started_hanging_task(url, tmp_path, log, seconds=1.0)
    paused = start_worker(url, "--lease", "0.6", "--until-done", name="paused")
    workers.append(paused)
    wait_for(lambda: any(r[0] == "start" for r in log_lines(log)), what="the first start")
    os.kill(paused.pid, signal.SIGSTOP)  # its heartbeats stop with it
    reclaimer = start_worker(url, "--lease", "0.6", "--until-done", name="reclaimer")
    workers.append(reclaimer)
    assert reclaimer.wait(60) == 0
    assert db.result("x") == reclaimer.pid
    os.kill(paused.pid, signal.SIGCONT)  # it wakes, finishes its sleep, reports: refused
    assert paused.wait(60) == 0
    _, err = paused.communicate(timeout=30)
    assert "refused" in err
    assert db.result("x") == reclaimer.pid
    assert db.info("x").attempts == 2
    assert accepted_ends(db) == {("x", 1): 1}
    assert [r[2] for r in log_lines(log) if r[0] == "end"] == [reclaimer.pid, paused.pid]
    db.check_invariants()


# The worker's old bookkeeping planted back (tests/mutants/broken_worker.py), run as a process.
PLANTED_WORKER = ("import sys; from refsched.durable import worker; "
                  "from tests.mutants.broken_worker import TaskKeyedHeld; "
                  "worker.Held = TaskKeyedHeld; sys.exit(worker.main(sys.argv[1:]))")


def _pause_until_self_reclaim(db: DurableScheduler, victim: Any, name: str,
                              lease: float) -> int:
    """SIGSTOP ``victim`` past its lease, expire its lease, then SIGCONT, until it re-claims its
    own version.

    Expiry is a step of a transaction (a claim's, or ``expire()``'s), not a reading of the
    clock: left to itself, the woken worker's heartbeat thread and its claim loop race, and a
    heartbeat first finds the lease still its own and extends it. So the test takes the
    Expire step itself while the worker is stopped (as a reaper would, or another worker's
    claim): on waking, its lease is lost whichever thread runs first, and its claim loop
    re-claims the version. Pauses again (at most 20) until a Reclaim by ``name`` is recorded,
    should a pause end before the deadline passed. Returns the pauses sent."""
    for pauses in range(1, 21):
        seen = len(db.history())
        os.kill(victim.pid, signal.SIGSTOP)
        time.sleep(lease * 2.5)
        db.expire()
        os.kill(victim.pid, signal.SIGCONT)

        def answered(seen: int = seen) -> bool:
            return any(action in ("Reclaim", "Heartbeat") for action, _ in db.history()[seen:])

        wait_for(answered, what="a heartbeat or a re-claim after the pause")
        if any(action == "Reclaim" and p["w"] == name for action, p in db.history()[seen:]):
            return pauses
    raise AssertionError("20 pauses and no re-claim by the paused worker")


def _self_reclaim(tmp_path: Path, url: str, workers: list[Any],
                  command: tuple[str, ...] = ()) -> tuple[DurableScheduler, str, list[Any]]:
    log = tmp_path / "log"
    db = DurableScheduler(url, max_concurrency=2, max_attempts=4, record=True)
    db.submit("x", fn=f"{JOBS}:outlive_first", args={"task": "x", "log": str(log),
                                                     "seconds": 2.0})
    db.submit("after", ["x"], fn=f"{JOBS}:noop", args={"value": "after"})
    db.start()
    options = ("--db", url, "--poll", "0.05", "--concurrency", "2", "--lease", "1",
               "--until-done", "--name", "self")
    worker = subprocess.Popen([sys.executable, *(command or ("-m", "refsched", "worker")),
                               *options], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    workers.append(worker)
    wait_for(lambda: any(r[0] == "start1" for r in log_lines(log)), what="attempt 1")
    _pause_until_self_reclaim(db, worker, "self", 1.0)
    assert worker.wait(60) == 0
    return db, worker.communicate(timeout=30)[1], log_lines(log)


def test_a_worker_paused_past_its_lease_that_reclaims_its_own_task_ends_it_succeeded(
        tmp_path: Path, durable_url: StoreURL, workers: list[Any]) -> None:
    """Attempt 1 is paused past its lease; the same worker re-claims the version (attempt 2,
    longer than the lease, so it lives only on heartbeats); attempt 1 then returns and its
    report is refused. Attempt 2 must be heartbeated on and
    accepted: the version succeeds on its second attempt, its dependent runs."""
    db, err, log = _self_reclaim(tmp_path, durable_url("s.db"), workers)
    info = db.info("x")
    assert (info.state, info.attempts, info.result) == (TaskState.SUCCEEDED, 2, 2), err
    assert db.result("after") == "after"
    assert "report refused (complete <<'x', 1, 1>>)" in err
    assert [r[0] for r in log if r[0].startswith("end")] == ["end1", "end2"]
    assert accepted_ends(db) == {("x", 1): 1, ("after", 1): 1}
    db.check_invariants()


def test_the_old_task_keyed_bookkeeping_fails_a_version_it_reclaimed_itself(
        tmp_path: Path, workers: list[Any]) -> None:
    """The same scenario with the old bookkeeping planted in the worker: attempt 1's refused
    report drops attempt 2's entry, attempt 2 expires unheartbeated, and so on: the version
    fails after its attempts, its dependent blocked. The test above would catch it."""
    db, err, _ = _self_reclaim(tmp_path, f"sqlite:///{tmp_path / 's.db'}", workers,
                               ("-c", PLANTED_WORKER))
    info = db.info("x")
    assert (info.state, info.attempts) == (TaskState.FAILED, 4), err
    assert db.state("after") is TaskState.BLOCKED


CHILD_INSIDE_TRANSACTION = r"""
import sys, time
from refsched.durable import DurableScheduler, store

url, ready = sys.argv[1], sys.argv[2]
db = DurableScheduler(url)
tx_class = store._SQLiteTx
if url.startswith("postgresql"):
    from refsched.durable import postgres
    tx_class = postgres._PostgresTx
original = tx_class.many

def many(self, sql, rows):
    original(self, sql, rows)
    if sql.startswith("INSERT INTO dep"):
        if getattr(self, "_queued", None):  # on the server: sent, not committed
            self._send_queued()
        open(ready, "w").close()  # the task row and its edges are written, uncommitted
        time.sleep(60)

tx_class.many = many
# The store takes the step itself, in a transaction of this process (on PostgreSQL a submit
# with deps is otherwise one server-side call, which no kill can interrupt halfway here).
db._store.call = lambda step, *args: None
db.submit("half", ["a"], fn="tests.durable.jobs:noop")
"""


def test_a_process_killed_inside_a_write_transaction_leaves_a_valid_store(
        tmp_path: Path, durable_url: StoreURL) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("a", fn=f"{JOBS}:noop")
    before = db.snapshot()
    db.release()
    ready = tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", CHILD_INSIDE_TRANSACTION, url, str(ready)],
                             cwd=ROOT)
    try:
        wait_for(ready.exists, what="the child inside its transaction")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    reopened = DurableScheduler(url)
    assert reopened.snapshot() == before  # nothing of the killed submit
    reopened.check_invariants()
    reopened.submit("half", ["a"], fn=f"{JOBS}:noop")  # the write lock was released
    reopened.start()
    reopened.check_invariants()


def _complete_at_once(url: str, leases: Any, barrier: Any, done: Any) -> None:
    """Take each lease sent, meet the other process at the barrier, complete at once."""
    db = DurableScheduler(url)
    while (lease := leases.get(timeout=60)) is not None:
        barrier.wait(30)
        db.complete(lease)
        done.put(lease.task_id)


def test_two_parents_completing_at_once_from_two_processes_ready_the_child_once(
        durable_url: StoreURL) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=2)
    db.start()
    context = multiprocessing.get_context("spawn")
    barrier, done = context.Barrier(2), context.Queue()
    queues = [context.Queue(), context.Queue()]
    procs = [context.Process(target=_complete_at_once, args=(url, q, barrier, done))
             for q in queues]
    for p in procs:
        p.start()
    try:
        for i in range(20):
            db.submit(f"p{i}a", fn=f"{JOBS}:noop")
            db.submit(f"p{i}b", fn=f"{JOBS}:noop")
            db.submit(f"c{i}", [f"p{i}a", f"p{i}b"], fn=f"{JOBS}:noop")
            leases = db.claim("parents", limit=2, lease=60)
            assert sorted(x.task_id for x in leases) == [f"p{i}a", f"p{i}b"]
            for q, lease in zip(queues, leases, strict=True):
                q.put(lease)
            assert sorted(done.get(timeout=60) for _ in leases) == [f"p{i}a", f"p{i}b"]
            info = db.info(f"c{i}")
            assert (info.state, info.remaining_deps) == (TaskState.READY, 0)
            (child,) = db.claim("children", limit=2, lease=60)
            assert child.task_id == f"c{i}"
            assert db.claim("children", limit=2) == []
            db.complete(child)
    finally:
        for q in queues:
            q.put(None)
        for p in procs:
            p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    db.check_invariants()


def _claim_and_complete(url: str, start: Any, out: Any) -> None:
    """Claim and complete until nothing is left; send back what was done and every error."""
    db = DurableScheduler(url)
    done: list[str] = []
    errors: list[str] = []
    start.wait(60)
    while True:
        try:
            leases = db.claim(f"w{os.getpid()}", limit=1, lease=60)
            if not leases:
                if db.done():
                    break
                continue
            db.complete(leases[0])
            done.append(leases[0].task_id)
        except StoreError as e:
            errors.append(str(e))
    out.put((done, errors))


def test_claimers_in_many_processes_never_see_a_busy_store(durable_url: StoreURL) -> None:
    """Each claim and report reads, then writes. Taken as one write transaction from its start,
    it waits for the write lock; on SQLite, begun as a read, it would fail with "database is
    locked" whenever another process wrote in between."""
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=4)
    for i in range(600):
        db.submit(f"t{i}", fn=f"{JOBS}:noop")
    db.start()
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    procs = [context.Process(target=_claim_and_complete, args=(url, start, out))
             for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    errors = [e for _, found in results for e in found]
    done = sorted(t for ran, _ in results for t in ran)
    assert errors == [], f"{len(errors)} store errors, the first: {errors[0]}"
    assert done == sorted(f"t{i}" for i in range(600))
    assert db.stats().succeeded == 600
    db.check_invariants()


def test_max_concurrency_holds_across_processes_and_deps_run_first(tmp_path: Path,
                                                                   durable_url: StoreURL,
                                                                   workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    db = DurableScheduler(url, max_concurrency=3, record=True)
    layers = [[f"L{layer}n{i}" for i in range(6)] for layer in range(4)]
    deps: dict[str, list[str]] = {}
    for layer, names in enumerate(layers):
        for i, t in enumerate(names):
            deps[t] = [] if layer == 0 else [layers[layer - 1][i], layers[layer - 1][(i + 1) % 6]]
            db.submit(t, deps[t], fn=f"{JOBS}:work",
                      args={"task": t, "log": str(log), "seconds": 0.03})
    db.start()
    for k in range(4):
        workers.append(start_worker(url, "--concurrency", "3", "--until-done", "--lease", "5",
                                    name=f"w{k}"))
    for p in workers:
        assert p.wait(120) == 0
    rows = log_lines(log)
    events = sorted((at, 1 if what == "start" else -1) for what, _, _, at in rows)
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert 1 <= peak <= 3
    ended = {task: at for what, task, _, at in rows if what == "end"}
    for what, task, _, at in rows:
        if what == "start":
            assert all(ended[d] <= at for d in deps[task]), task
    assert set(accepted_ends(db).values()) == {1}
    db.check_invariants()


# -- real filesystems: full and read-only ------------------------------------------------------

@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own (needs root; skipped where mounting is not allowed)."""
    where = tmp_path / "fs"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_filesystem_gives_a_clear_error_and_nothing_half_written(
        small_filesystem: Path) -> None:
    url = f"sqlite:///{small_filesystem / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("first", fn=f"{JOBS}:noop")
    ballast = small_filesystem / "ballast"
    ballast.write_bytes(b"\0" * 300_000)
    blob = "x" * 50_000
    accepted = 0
    with pytest.raises(StoreError, match="full"):
        for i in range(200):
            db.submit(f"t{i}", fn=f"{JOBS}:noop", args={"blob": blob})
            accepted += 1
    snapshot = db.snapshot()
    assert len(snapshot.tasks) == accepted + 1  # the refused submit left no row behind
    db.check_invariants()
    ballast.unlink()  # room again: the store carries on where it stopped
    db.start()
    (lease,) = db.claim("w")
    assert db.complete(lease) is TaskState.SUCCEEDED
    db.release()
    assert len(DurableScheduler(url).snapshot().tasks) == accepted + 1


def test_a_read_only_filesystem_gives_a_clear_error(small_filesystem: Path) -> None:
    url = f"sqlite:///{small_filesystem / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("a", fn=f"{JOBS}:noop")
    db.release()
    subprocess.run(["mount", "-o", "remount,ro", str(small_filesystem)], check=True)
    with pytest.raises(StoreError) as refused:
        reopened = DurableScheduler(url)
        reopened.submit("b", fn=f"{JOBS}:noop")
    assert "read-only" in str(refused.value)


def test_a_late_report_from_a_stale_lease_changes_nothing(durable_url: StoreURL) -> None:
    """The in-process shape of the pause test, on the wall clock: expiry is by deadline."""
    db = DurableScheduler(durable_url("s.db"), max_concurrency=1)
    db.submit("x", fn=f"{JOBS}:noop")
    db.start()
    (old,) = db.claim("w1", lease=0.05)
    time.sleep(0.2)
    (new,) = db.claim("w2", lease=30)
    with pytest.raises(StaleLeaseError):
        db.complete(old, "old")
    db.complete(new, "new")
    assert db.result("x") == "new"
