"""Every wake-up of the durable scheduler: each step after which a claim could take a step sends
the idle workers a notification (PostgreSQL's ``LISTEN``/``NOTIFY``), whether the step runs as a
server-side function or is taken by the client; and the SQLite store, which cannot notify, polls.

Each test drains what the idle side has been told so far (``_drained``), takes the one step under
test on another connection, and requires ``wait_for_work`` to be woken within a generous bound.
No other step runs meanwhile, so only that step's notification can wake it.
"""

from __future__ import annotations

import os
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
