"""The durable worker (``refsched worker``): its bookkeeping of held leases, its wake-ups, its
arguments, its logging, its signals, its time limit and its store errors, through real worker
processes where users have them. (The worker under kills and pauses: tests/durable/test_faults.py;
its bookkeeping beside the spec's model: tests/durable/test_worker_lockstep.py.)

Every wait is bounded; a regression fails instead of hanging.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from refsched import CancelToken
from refsched.durable import DurableScheduler
from refsched.durable.scheduler import Lease
from refsched.durable.worker import MIN_LEASE, Held, Worker, key_of
from refsched.errors import InvalidArgumentError, StoreError
from refsched.types import TaskState
from tests.durable.support import JOBS, ROOT, log_lines, start_worker, wait_for


def _lease(task: str, attempt: int, generation: int = 1) -> Lease:
    return Lease(task, generation, attempt, 0.0, f"{JOBS}:noop", {}, "w")


def _token(task: str = "t") -> CancelToken:
    return CancelToken(task, 1)


def _store(tmp_path: Path, *tasks: str, fn: str = "noop", concurrency: int = 2) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=concurrency, clock="virtual")
    for t in tasks:
        db.submit(t, fn=f"{JOBS}:{fn}")
    db.start()
    db.release()
    return url


# -- Held: spec held[w], a set of leases ------------------------------------------------------

def test_two_attempts_of_one_version_are_two_leases_each_dropped_alone() -> None:
    held = Held()
    old = held.take(_lease("t", 1), _token())
    new = held.take(_lease("t", 2), _token())
    assert held.keys() == {("t", 1, 1), ("t", 1, 2)}
    assert held.returned(old.key) is old  # the paused attempt's function returns
    held.drop(old.key)  # its report was refused (Spec: Refused)
    assert held.keys() == {("t", 1, 2)}  # the re-claim is still held, still heartbeated
    assert [a.key for a in held.attempts()] == [new.key]
    assert held.lost(new.key) and not held.lost(new.key)  # a lost lease is told once


def test_a_lease_held_twice_is_refused_and_changes_nothing() -> None:
    held = Held()
    first = held.take(_lease("t", 1), _token())
    with pytest.raises(InvalidArgumentError, match=r"take\(<<'t', 1, 1>>\): already held"):
        held.take(_lease("t", 1), _token())
    assert held.attempts() == [first]


def test_only_one_of_the_function_and_its_time_limit_reports() -> None:
    held = Held()
    attempt = held.take(_lease("t", 1), _token())
    assert held.returned(attempt.key) is attempt
    assert held.returned(attempt.key) is None  # the other one finds it taken
    assert not held.lost(attempt.key)  # a heartbeat racing the report: not lost


def _blocked(target: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``target(*args)`` on a thread; its answer lands in the list."""
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(target(*args)), daemon=True)
    thread.start()
    return thread, answer


def _waiting(held: Held, thread: threading.Thread) -> None:
    """Wait until ``thread`` sleeps on ``held.changed`` (its waiter is queued)."""
    wait_for(lambda: bool(held.changed._waiters), what="the thread to wait")  # type: ignore[attr-defined]
    assert thread.is_alive()


def test_a_dropped_lease_wakes_the_claimer_waiting_for_a_slot() -> None:
    """No timeout behind the wait: without drop()'s notify the claimer sleeps for ever."""
    held, stop = Held(), threading.Event()
    attempt = held.take(_lease("t", 1), _token())
    thread, answer = _blocked(held.wait_for_slot, 1, stop)
    _waiting(held, thread)
    held.drop(attempt.key)
    thread.join(30)
    assert answer == [1]


def test_stop_wakes_the_claimer_waiting_for_a_slot(tmp_path: Path) -> None:
    worker = Worker(_store(tmp_path), name="w", lease=MIN_LEASE)
    worker.held.take(_lease("t", 1), _token())
    thread, answer = _blocked(worker.held.wait_for_slot, 1, worker._stopping)
    _waiting(worker.held, thread)
    worker.stop()
    thread.join(30)
    assert answer == [0]
    worker.db.release()


def test_the_last_dropped_lease_and_a_crash_wake_the_exit_wait() -> None:
    held = Held()
    for attempt in (1, 2):
        held.take(_lease("t", attempt), _token())
    thread, answer = _blocked(held.wait_empty)
    _waiting(held, thread)
    held.drop(("t", 1, 1))
    assert thread.is_alive()  # one lease is left: it waits on
    _waiting(held, thread)
    held.drop(("t", 1, 2))
    thread.join(30)
    assert answer == [None]
    held.take(_lease("u", 1), _token("u"))
    thread, answer = _blocked(held.wait_empty)
    _waiting(held, thread)
    held.crash()
    thread.join(30)
    assert answer == [None]


def test_a_heartbeat_racing_its_own_report_is_not_a_lost_lease(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The heartbeat thread reads the held leases, then the function's report commits, then
    the heartbeat finds the lease ended: that lease was not lost, and nothing is asked to stop.
    A lease another attempt took over is lost, and its function is asked to stop."""
    url = _store(tmp_path, "a", "b")
    db = DurableScheduler(url)
    worker = Worker(url, name="w", lease=5)
    ended, lost = worker.claim(2)
    assert worker.held.returned(ended.key) is ended  # its function returned; report in flight
    db.complete(ended.lease)
    db.tick(10)
    assert db.claim("other") and db.info("b").attempts == 2
    with caplog.at_level("WARNING", logger="refsched.worker"):
        worker.beat()
    assert not ended.token.cancelled and lost.token.cancelled
    assert ["<<'b', 1, 1>> lost while its function still runs" in r.getMessage()
            for r in caplog.records] == [True]
    assert "held the GIL" in caplog.records[0].getMessage()
    worker.db.release()


# -- arguments ------------------------------------------------------------------------------

@pytest.mark.parametrize("lease", [0.001, MIN_LEASE / 2, 0, float("nan"), True])
def test_a_lease_below_the_minimum_is_refused(tmp_path: Path, lease: float) -> None:
    with pytest.raises(InvalidArgumentError, match=r"Worker\(lease="):
        Worker(_store(tmp_path), lease=lease)


def test_the_command_refuses_a_lease_below_the_minimum_with_a_usage_error(
        tmp_path: Path) -> None:
    url = _store(tmp_path, "a")
    done = subprocess.run([sys.executable, "-m", "refsched", "worker", "--db", url, "--lease",
                           "0.001", "--until-done"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert f"a lease must be at least {MIN_LEASE} s" in done.stderr
    assert "Traceback" not in done.stderr
    assert DurableScheduler(url).state("a") is TaskState.READY  # nothing was claimed


def test_a_function_that_asks_for_its_lease_gets_it(tmp_path: Path) -> None:
    url = _store(tmp_path, "f", fn="fenced")
    worker = start_worker(url, "--until-done", "--lease", "5", name="w")
    assert worker.wait(60) == 0, worker.communicate()[1]
    assert DurableScheduler(url).result("f") == ["f", 1, 1]


# -- logging --------------------------------------------------------------------------------

def test_verbose_logs_every_claim_and_report_with_its_lease(tmp_path: Path,
                                                           workers: list[Any]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=2)
    db.submit("good", fn=f"{JOBS}:noop")
    db.submit("bad", fn=f"{JOBS}:boom")
    db.start()
    worker = start_worker(url, "--until-done", "-v", "--lease", "5", name="w")
    workers.append(worker)
    assert worker.wait(60) == 0
    err = worker.communicate()[1]
    for line in ("claimed <<'good', 1, 1>>", "claimed <<'bad', 1, 1>>",
                 "reported complete <<'good', 1, 1>>: accepted, the version is succeeded",
                 "reported fail <<'bad', 1, 1>>: accepted, the version is failed"):
        assert line in err, err
    quiet = start_worker(url, "--until-done", "--lease", "5", name="q")
    workers.append(quiet)
    assert quiet.wait(60) == 0
    assert "claimed" not in quiet.communicate()[1]


# -- signals and the time limit -------------------------------------------------------------

def test_a_second_signal_ends_a_worker_whose_function_never_returns(
        tmp_path: Path, workers: list[Any]) -> None:
    log = tmp_path / "log"
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("stuck", fn=f"{JOBS}:hang", args={"log": str(log), "task": "stuck"})
    db.start()
    err = tmp_path / "err"
    with err.open("w") as sink:
        worker = subprocess.Popen([sys.executable, "-m", "refsched", "worker", "--db", url,
                                   "--lease", "1", "--poll", "0.05"], cwd=ROOT, stderr=sink)
    workers.append(worker)
    wait_for(lambda: bool(log_lines(log)), what="the function to start")
    worker.send_signal(signal.SIGTERM)
    wait_for(lambda: "send it again to exit at once" in err.read_text(), what="the first stop")
    assert worker.poll() is None  # it waits for its function, as it should
    worker.send_signal(signal.SIGINT)
    assert worker.wait(60) == 128 + signal.SIGINT
    assert "SIGINT again: exiting now" in err.read_text()
    info = db.info("stuck")  # nothing reported: the lease expires as after a crash
    assert info.state is TaskState.RUNNING and info.holder is not None


def test_an_attempt_past_its_time_limit_is_reported_failed_and_its_slot_freed(
        tmp_path: Path) -> None:
    """With one slot, the task after the stuck one runs only if the time limit gives the slot
    back: drop() in the time limit's path wakes the claim loop."""
    log = tmp_path / "log"
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("stuck", fn=f"{JOBS}:hang", args={"log": str(log), "task": "stuck"})
    db.submit("after", fn=f"{JOBS}:noop", args={"value": 1})
    db.submit("child", ["stuck"], fn=f"{JOBS}:noop")
    db.start()
    worker = start_worker(url, "--until-done", "--time-limit", "0.5", "--lease", "5",
                          name="w")
    assert worker.wait(60) == 0
    err = worker.communicate()[1]
    info = db.info("stuck")
    assert info.state is TaskState.FAILED and info.attempts == 1
    assert "time limit of 0.5 s passed" in str(info.error)
    assert db.state("child") is TaskState.BLOCKED
    assert db.result("after") == 1
    assert "<<'stuck', 1, 1>> ran past its time limit of 0.5 s" in err
    db.check_invariants()


def _run_in_thread(worker: Worker) -> threading.Thread:
    runner = threading.Thread(target=worker.run, name="test-worker-loop", daemon=True)
    runner.start()
    return runner


def _slot_threads(worker: Worker) -> list[threading.Thread]:
    """The threads that ran the worker's functions (named after the worker and a task)."""
    own = (f"{worker.name}-heartbeat", f"{worker.name}-reports")
    return [t for t in threading.enumerate()
            if t.name.startswith(f"{worker.name}-") and t.name not in own]


def test_a_slot_thread_is_handed_each_next_attempt_and_returns_when_the_loop_ends(
        tmp_path: Path) -> None:
    """A chain a -> b -> c -> d on one slot: each next version is claimed after the thread
    that ran the one before has given its slot back and waits to be handed another, so each
    runs only if the hand-off wakes that thread; once the loop ends, no such thread is left."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=1)
    for t, deps in (("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["c"])):
        db.submit(t, deps, fn=f"{JOBS}:noop")
    db.start()
    worker = Worker(url, name="handoff", lease=5, until_done=True, poll=0.01)
    runner = _run_in_thread(worker)
    runner.join(60)
    assert not runner.is_alive(), "the worker did not finish a chain of four on one slot"
    assert all(db.state(t) is TaskState.SUCCEEDED for t in "abcd")
    for thread in _slot_threads(worker):
        thread.join(10)
    assert _slot_threads(worker) == []
    db.release()


def test_a_function_returning_after_its_time_limit_is_discarded(tmp_path: Path) -> None:
    url = _store(tmp_path, "t")
    worker = Worker(url, name="w", lease=5, time_limit=60)
    (attempt,) = worker.claim(1)
    worker.time_up(attempt.key)
    assert attempt.token.cancelled and worker.held.keys() == frozenset()
    worker.returned(attempt.key, "complete", "late")  # the abandoned thread comes back
    db = DurableScheduler(url)
    assert db.state("t") is TaskState.FAILED
    worker.time_up(attempt.key)  # a timer firing after the function returned: nothing
    assert db.state("t") is TaskState.FAILED
    worker.db.release()


# -- store errors ---------------------------------------------------------------------------

def test_a_worker_that_cannot_write_the_store_exits_2_at_once(tmp_path: Path) -> None:
    """A read-only SQLite file (immutable: the tests run as root, who ignores modes)."""
    url = _store(tmp_path, "a")
    path = tmp_path / "s.db"
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        done = subprocess.run([sys.executable, "-m", "refsched", "worker", "--db", url,
                               "--until-done", "--poll", "0.05"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert done.returncode == 2
    assert "refuses this worker's writes" in done.stderr and "read-only" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_worker_whose_postgresql_role_may_only_read_exits_2_at_once(
        postgres_url: str) -> None:
    import psycopg

    url = f"{postgres_url}&schema=jobs"
    db = DurableScheduler(url, max_concurrency=1)
    db.submit("a", fn=f"{JOBS}:noop")
    db.start()
    db.release()
    role = f"reader_{os.getpid()}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA jobs TO {role}")
        admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA jobs TO {role}")
    try:
        reader = url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)
        done = subprocess.run([sys.executable, "-m", "refsched", "worker", "--db", reader,
                               "--until-done", "--poll", "0.05"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")
    assert done.returncode == 2, done.stderr
    assert "refuses this worker's writes" in done.stderr, done.stderr
    assert "permission denied" in done.stderr and "Traceback" not in done.stderr
    assert DurableScheduler(url).state("a") is TaskState.READY


def test_a_worker_gives_up_after_store_tries_failed_claims(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    worker = Worker(_store(tmp_path, "a"), name="w", lease=5, store_tries=3)
    calls: list[int] = []

    def broken(*args: Any, **kwargs: Any) -> list[Lease]:
        calls.append(1)
        raise StoreError("sqlite:///s.db: disk I/O error")

    worker.db.claim = broken  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="refsched.worker"), \
            pytest.raises(StoreError, match=r"3 claims in a row failed, giving up: .*disk I/O"):
        worker.run()
    assert len(calls) == 3
    assert [r.getMessage().split(":")[1] for r in caplog.records] == [
        " store error (claim 1 of 3 in a row), will try again",
        " store error (claim 2 of 3 in a row), will try again"]
    assert os.path.exists(tmp_path / "s.db")


def test_held_keys_are_the_spec_lease() -> None:
    assert key_of(_lease("t", 3, 2)) == ("t", 2, 3)


def test_the_soak_counts_a_reclaim_by_the_worker_that_lost_the_lease_as_a_self_reclaim(
        tmp_path: Path) -> None:
    from refsched.verify.durable.soak import self_reclaims

    db = DurableScheduler(f"sqlite:///{tmp_path / 's.db'}", max_concurrency=2,
                          max_attempts=3, clock="virtual", record=True)
    for t in ("a", "b"):
        db.submit(t, fn=f"{JOBS}:noop")
    db.start()
    db.claim("w1", limit=1, lease=1)  # a
    db.tick(2)
    assert [x.task_id for x in db.claim("w1", limit=1, lease=1)] == ["a"]  # its own: self
    db.claim("w2", limit=1, lease=1)  # b
    db.tick(2)
    assert [x.task_id for x in db.claim("w1", limit=2, lease=1)] == ["a", "b"]  # a self, b not
    assert self_reclaims(db.history(), 2, 3) == 2


def test_a_durable_runner_refuses_a_lease_its_workers_would_refuse(tmp_path: Path) -> None:
    from refsched.durable.runner import DurableRunner

    with pytest.raises(InvalidArgumentError, match=r"DurableRunner\(lease=0.1\)"):
        DurableRunner(f"sqlite:///{tmp_path / 'r.db'}", lease=0.1)
