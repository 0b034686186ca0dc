"""``DurableScheduler.heartbeat_many`` on SQLite and PostgreSQL: many leases extended in one
transaction, one Heartbeat step each in the order given, each judged on its own version's row
(a lost lease is refused alone); a bad argument or an unknown task changes nothing. The worker
heartbeats what it holds with one such call (tests/durable/test_batch_worker.py runs it)."""

from __future__ import annotations

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.scheduler import Lease
from refsched.errors import InvalidArgumentError, LeaseLostError, UnknownTaskError
from tests.conftest import StoreURL
from tests.durable.test_batch_reports import claimed, store
from tests.durable.test_bulk import count_transactions, everything


def lost(db: DurableScheduler, leases: dict[str, Lease], task: str) -> Lease:
    """``task``'s lease made lost: the others are kept alive, its own runs out and w2
    re-claims its version."""
    db.tick(3)
    for t, lease in leases.items():
        if t != task:
            db.heartbeat(lease)
    db.tick(3)
    (again,) = db.claim("w2", limit=1, lease=5)
    assert again.task_id == task
    return leases[task]


def test_each_live_lease_is_extended_and_a_lost_one_refused_alone(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a", "b", "c"])
    b = lost(db, leases, "b")  # b's lease ran out and w2 holds b now
    db.tick(1)
    db.cancel("c")
    before = len(db.history())
    opened = count_transactions(db)
    answers = db.heartbeat_many([leases["a"], b, leases["c"]])
    assert opened == [True]  # one transaction
    assert answers[0] is False and answers[2] is True  # c's cancel request
    assert isinstance(answers[1], LeaseLostError)
    steps = [(action, params["t"]) for action, params in db.history()[before:]]
    assert steps == [("Heartbeat", "a"), ("Heartbeat", "c")]
    now = db.now()
    held = db.leases()
    assert held["a"].deadline == held["c"].deadline == now + 5
    assert held["b"].holder == "w2"  # the lost lease changed nothing of b's
    db.check_invariants()


def test_a_lost_lease_does_not_stop_the_leases_after_it(durable_url: StoreURL) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a", "b"])
    a = lost(db, leases, "a")
    db.tick(1)
    answers = db.heartbeat_many([a, leases["b"]])
    assert isinstance(answers[0], LeaseLostError) and answers[1] is False
    assert db.leases()["b"].deadline == db.now() + 5


@pytest.mark.parametrize("bad, index", [("not a lease", 1), (None, 1)])
def test_a_bad_lease_is_refused_by_index_and_nothing_changes(
        durable_url: StoreURL, bad: object, index: int) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a", "b"])
    db.tick(1)
    before = everything(db)
    with pytest.raises(InvalidArgumentError, match=rf"heartbeat_many\[{index}\]"):
        db.heartbeat_many([leases["a"], bad])  # type: ignore[list-item]
    assert everything(db) == before


def test_an_unknown_task_refuses_the_batch_whole(durable_url: StoreURL) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a"])
    db.tick(1)
    before = everything(db)
    ghost = leases["a"]._replace(task_id="nobody")
    with pytest.raises(UnknownTaskError):
        db.heartbeat_many([leases["a"], ghost])
    assert everything(db) == before


@pytest.mark.parametrize("leases", ["abc", {"a": 1}, 3])
def test_not_an_iterable_of_leases_is_refused(durable_url: StoreURL, leases: object) -> None:
    db = store(durable_url)
    claimed(db, ["a"])
    with pytest.raises(InvalidArgumentError, match="heartbeat_many"):
        db.heartbeat_many(leases)  # type: ignore[arg-type]


def test_no_leases_is_no_transaction(durable_url: StoreURL) -> None:
    db = store(durable_url)
    claimed(db, ["a"])
    opened = count_transactions(db)
    assert db.heartbeat_many([]) == [] and opened == []
