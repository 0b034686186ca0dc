"""Every wake-up of the durable scheduler: each step after which a claim could take a step sends
the idle workers a notification (PostgreSQL's ``LISTEN``/``NOTIFY``), whether the step runs as a
server-side function or is taken by the client; and the SQLite store, which cannot notify, polls.

Each test drains what the idle side has been told so far (``_drained``), takes the one step under
test on another connection, and requires ``wait_for_work`` to be woken within a generous bound.
No other step runs meanwhile, so only that step's notification can wake it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.durable import store as sqlite_store
from refsched.durable.scheduler import Lease
from refsched.types import TaskState
from tests.wakeup_support import LONG

NOOP = "tests.durable.jobs:noop"
SCHEMA = "s"

# pair(**options): a scheduler that takes the steps and an idle one listening, both on one
# fresh store (options go to the first).
Pair = Callable[..., tuple[DurableScheduler, DurableScheduler]]


@pytest.fixture(params=["server", "client"])
def pair(request: pytest.FixtureRequest) -> Iterator[Pair]:
    """Pairs of schedulers on one fresh store, released after the test. ``client``: the
    steps are taken by the client, as for a role that may not create the server-side
    functions (each then notifies unconditionally); ``server``: by the server's functions."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("psycopg")
    url = f"{request.getfixturevalue('postgres_url')}&schema={SCHEMA}"
    made: list[DurableScheduler] = []

    def make(**options: Any) -> tuple[DurableScheduler, DurableScheduler]:
        options.setdefault("max_concurrency", 1)
        db = DurableScheduler(url, **options)
        made.append(db)
        if request.param == "client":
            store: Any = db._store
            store._steps_ready = False  # call() returns None: the scheduler takes each step
        idle = DurableScheduler(url)
        made.append(idle)
        assert not idle.wait_for_work(0.01)  # listening from here on
        return db, idle

    yield make
    for db in made:
        db.release()


def psycopg_connect(postgres_url: str, autocommit: bool = True) -> Any:
    """A session of its own on the store's schema."""
    import psycopg

    from refsched.durable.postgres import split_url
    conninfo, _ = split_url(f"{postgres_url}&schema={SCHEMA}")
    conn = psycopg.connect(conninfo, autocommit=autocommit)
    conn.execute(f"SET search_path TO {SCHEMA}")
    if not autocommit:
        conn.commit()
    return conn


def _drained(idle: DurableScheduler) -> None:
    """Drop every notification sent so far: a round trip on the listening session receives
    what was notified before it, and forget_wakeups() reads and drops it."""
    store: Any = idle._store
    store._listener.execute("SELECT 1")
    store.forget_wakeups()


def _a_running_and_b_waiting_for_the_slot(db: DurableScheduler, idle: DurableScheduler) -> Lease:
    """On a started store with one slot: ``a`` claimed (its lease returned), ``b`` ready but
    for the slot; ``idle`` told nothing yet (:func:`_drained`)."""
    db.submit("a", fn=NOOP)
    db.submit("b", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    _drained(idle)
    return lease


def test_start_wakes_the_idle_workers_for_the_versions_already_ready(pair: Pair) -> None:
    db, idle = pair()
    db.submit("a", fn=NOOP)  # ready, but nothing may be claimed before start
    _drained(idle)
    db.start()
    assert idle.wait_for_work(LONG)


def test_a_submit_after_start_wakes_the_idle_workers(pair: Pair) -> None:
    db, idle = pair()
    db.start()
    _drained(idle)
    db.submit("a", fn=NOOP)
    assert idle.wait_for_work(LONG)


def test_a_claim_that_leaves_a_ready_version_and_a_free_slot_wakes_the_next_worker(
        pair: Pair) -> None:
    db, idle = pair(max_concurrency=2)
    db.submit("a", fn=NOOP)
    db.submit("b", fn=NOOP)
    db.start()
    _drained(idle)
    (lease,) = db.claim("w", limit=1)
    assert lease.task_id == "a"
    assert idle.wait_for_work(LONG)


def test_a_completion_that_frees_the_slot_wakes_the_idle_workers(pair: Pair) -> None:
    db, idle = pair()
    lease = _a_running_and_b_waiting_for_the_slot(db, idle)
    assert db.complete(lease, 1) is TaskState.SUCCEEDED
    assert idle.wait_for_work(LONG)


def test_a_completion_that_readies_a_dependent_wakes_the_idle_workers(pair: Pair) -> None:
    db, idle = pair()
    db.submit("a", fn=NOOP)
    db.submit("b", ["a"], fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    _drained(idle)
    assert db.complete(lease) is TaskState.SUCCEEDED
    assert db.state("b") is TaskState.READY
    assert idle.wait_for_work(LONG)


def test_a_failure_that_frees_the_slot_wakes_the_idle_workers(pair: Pair) -> None:
    db, idle = pair()
    lease = _a_running_and_b_waiting_for_the_slot(db, idle)
    assert db.fail(lease, "boom") is TaskState.FAILED
    assert idle.wait_for_work(LONG)


def test_a_retry_wakes_the_idle_workers(pair: Pair) -> None:
    db, idle = pair()
    db.submit("a", fn=NOOP)
    db.start()
    (lease,) = db.claim("w")
    assert db.fail(lease, "boom") is TaskState.FAILED
    _drained(idle)
    db.retry("a")
    assert idle.wait_for_work(LONG)


def test_an_expiry_wakes_the_idle_workers_to_reclaim(pair: Pair) -> None:
    db, idle = pair(clock="virtual")
    db.submit("a", fn=NOOP)
    db.start()
    db.claim("w", lease=1.0)
    db.tick(2.0)  # the lease is past its deadline
    _drained(idle)
    db.expire()
    assert idle.wait_for_work(LONG)
    (lease,) = idle.claim("w2")
    assert lease.task_id == "a" and lease.attempt == 2


# -- who is told: the idle workers' rows (steps_postgres.py, idle_listener) -------------------

def _stores(postgres_url: str, **options: Any) -> tuple[DurableScheduler, DurableScheduler]:
    url = f"{postgres_url}&schema={SCHEMA}"
    options.setdefault("max_concurrency", 2)
    return DurableScheduler(url, **options), DurableScheduler(url)


def _idle_pids(db: DurableScheduler) -> set[int]:
    return {pid for (pid,) in db._store.read([("SELECT pid FROM idle_listener", ())])[0]}


def _listener_pid(idle: DurableScheduler) -> int:
    store: Any = idle._store
    pid: int = store._listener.info.backend_pid
    return pid


def test_a_step_notifies_only_while_a_worker_is_idle(postgres_url: str) -> None:
    # A transaction that notifies commits under a database-wide lock: on a busy store (no
    # worker idle) a complete that leaves work claimable sends nothing; once a worker waits,
    # the same complete wakes it.
    db, idle = _stores(postgres_url)
    store: Any = db._store
    raw = psycopg_connect(postgres_url)
    try:
        raw.execute(f'LISTEN "{store._channel}"')
        for t in "abcd":
            db.submit(t, fn=NOOP)
        db.start()
        (lease,) = db.claim("w")
        assert db.complete(lease) is TaskState.SUCCEEDED
        raw.execute("SELECT 1")  # what was notified before this has arrived
        assert list(raw.notifies(timeout=0)) == []
        assert idle.wait_for_work(LONG)  # going idle, it finds b claimable at once
        assert _idle_pids(db) == {_listener_pid(idle)}
        (lease,) = db.claim("w")
        _drained(idle)
        assert db.complete(lease) is TaskState.SUCCEEDED
        assert idle.wait_for_work(LONG)  # told
        raw.execute("SELECT 1")
        assert len(list(raw.notifies(timeout=0))) >= 1
    finally:
        raw.close()
        db.release()
        idle.release()


def test_a_claim_of_as_many_as_asked_ends_the_idle_row_and_a_shorter_one_keeps_it(
        postgres_url: str) -> None:
    db, idle = _stores(postgres_url)
    db.start()
    assert not idle.wait_for_work(0.01)
    pid = _listener_pid(idle)
    assert _idle_pids(db) == {pid}
    db.submit("a", fn=NOOP)
    assert [x.task_id for x in idle.claim("w", limit=2)] == ["a"]  # fewer than asked: idle
    assert _idle_pids(db) == {pid}
    db.submit("b", fn=NOOP)
    assert [x.task_id for x in idle.claim("w", limit=1)] == ["b"]  # busy while it runs
    assert _idle_pids(db) == set()
    _drained(idle)  # the submit of b told the idle worker
    assert not idle.wait_for_work(0.01)  # the slots are taken: nothing to look at
    assert _idle_pids(db) == {pid}
    idle.release()
    assert _idle_pids(db) == set()
    db.release()


def test_a_worker_going_idle_while_a_step_is_open_waits_for_its_commit_and_looks_again(
        postgres_url: str) -> None:
    # The step (a submit, its transaction left open) decided whom to tell before the worker's
    # row existed: going idle waits for the store's lock until the step commits, then sees
    # what it made claimable, and says so at once (no notification was sent for it).
    db, idle = _stores(postgres_url)
    db.start()
    assert not idle.wait_for_work(0.01)
    idle._store.busy()
    store: Any = db._store
    step = psycopg_connect(postgres_url, autocommit=False)
    watcher = psycopg_connect(postgres_url)
    try:
        step.execute("SELECT refsched_submit_many(%s, false, %s, false, 2, 0.0, %s, %s, %s, "
                     "%s, %s, %s, '{}', '{}', '{}')",
                     (store._lock_key, store._channel, ["a"], [NOOP], ["{}"], [None], [None],
                      [0]))
        woken: list[bool] = []
        waiting = threading.Thread(target=lambda: woken.append(idle.wait_for_work(LONG)))
        waiting.start()
        listener = _listener_pid(idle)
        for _ in range(10_000):  # the server's own account of whom the listener waits for
            (blockers,) = watcher.execute("SELECT pg_blocking_pids(%s)",
                                          (listener,)).fetchone()
            if step.info.backend_pid in blockers:
                break
        else:
            raise AssertionError("going idle did not wait for the open step")
        step.commit()
        waiting.join(LONG)
        assert woken == [True]
    finally:
        step.close()
        watcher.close()
        db.release()
        idle.release()


def test_a_worker_going_idle_looks_again_when_a_version_comes_due_within_its_wait(
        postgres_url: str) -> None:
    db, idle = _stores(postgres_url)
    db.start()
    assert not idle.wait_for_work(0.01)
    idle._store.busy()
    db.submit("a", fn=NOOP, delay=2.0)  # after its last look; no worker was idle to tell
    assert idle.wait_for_work(LONG)
    db.release()
    idle.release()


def test_going_idle_waits_no_longer_than_the_wait_for_a_lock_a_stopped_client_holds(
        postgres_url: str) -> None:
    db, idle = _stores(postgres_url)
    db.start()
    store: Any = db._store
    stopped = psycopg_connect(postgres_url, autocommit=False)
    try:
        stopped.execute("SELECT pg_advisory_xact_lock(%s)", (store._lock_key,))
        woken: list[bool] = []
        waiting = threading.Thread(target=lambda: woken.append(idle.wait_for_work(0.2)))
        waiting.start()
        waiting.join(LONG)
        assert woken == [False]  # the wait's time passed, and the listener is kept
        assert _idle_pids(idle) == set()
        stopped.commit()
        assert not idle.wait_for_work(0.01)  # the next wait goes idle
        assert _idle_pids(idle) == {_listener_pid(idle)}
    finally:
        stopped.close()
        db.release()
        idle.release()


def test_the_row_of_a_session_that_ended_is_removed_when_a_worker_goes_idle(
        postgres_url: str) -> None:
    db, idle = _stores(postgres_url)
    ended = psycopg_connect(postgres_url)
    ended.execute("INSERT INTO idle_listener (pid) VALUES (pg_backend_pid())")
    ended.close()
    assert len(_idle_pids(db)) == 1
    assert not idle.wait_for_work(0.01)
    assert _idle_pids(db) == {_listener_pid(idle)}
    db.release()
    idle.release()


def test_the_sqlite_store_cannot_notify_so_an_idle_worker_polls_for_the_whole_wait(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(sqlite_store.time, "sleep", slept.append)
    db = DurableScheduler(f"sqlite:///{tmp_path / 'jobs.db'}", max_concurrency=1)
    try:
        assert db.notifies is False
        db.start()
        db.submit("a", fn=NOOP)
        assert db.wait_for_work(0.25) is False  # no sign of new work, ever: a poll
        assert slept == [0.25]
    finally:
        db.release()
