"""``DurableScheduler.report_many`` on SQLite and PostgreSQL: a batch is the reports of its items in
order inside one transaction (one Complete, Fail or AcknowledgeCancel step each), each fenced on
its own version's row: a stale report is refused alone, a repeated batch is answered with no
change; one commit for the batch (one server call on PostgreSQL when every report is live)."""

from __future__ import annotations

from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.durable.scheduler import Lease
from refsched.errors import InvalidArgumentError, StaleLeaseError, UnknownTaskError
from refsched.types import TaskState
from tests.conftest import StoreURL
from tests.durable.support import JOBS
from tests.durable.test_bulk import count_transactions, everything

NOOP = f"{JOBS}:noop"


def store(url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 8)
    options.setdefault("clock", "virtual")
    options.setdefault("record", True)
    return DurableScheduler(url(name), **options)


def claimed(db: DurableScheduler, ids: list[str], worker: str = "w1") -> dict[str, Lease]:
    db.submit_many([{"id": t, "fn": NOOP} for t in ids])
    db.start()
    return {lease.task_id: lease for lease in db.claim(worker, limit=len(ids), lease=5)}


def stale(db: DurableScheduler, lease: Lease) -> Lease:
    """``lease`` made stale: it expires and another worker re-claims its version."""
    db.tick(6)
    (again,) = db.claim("w2", limit=1, lease=5)
    assert again.task_id == lease.task_id and again.attempt == lease.attempt + 1
    return lease


def test_a_batch_is_its_reports_in_order(durable_url: StoreURL) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a", "b", "c", "d"])
    db.cancel("c")
    before = len(db.history())
    answers = db.report_many([("complete", leases["b"], {"x": 1}),
                              ("fail", leases["a"], ValueError("no")),
                              ("acknowledge_cancel", leases["c"], None),
                              ("complete", leases["d"], None)])
    assert answers == [TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED,
                       TaskState.SUCCEEDED]
    steps = [(action, params["t"]) for action, params in db.history()[before:]]
    assert steps == [("Complete", "b"), ("Fail", "a"), ("AcknowledgeCancel", "c"),
                     ("Complete", "d")]
    assert db.result("b") == {"x": 1} and db.info("a").error == "ValueError: no"
    assert db.stats().by_state["succeeded"] == 2
    db.check_invariants()
    db.release()


@pytest.mark.parametrize("kind", ["complete", "fail"])
def test_a_stale_report_in_the_middle_is_refused_alone(durable_url: StoreURL,
                                                       kind: str) -> None:
    db = store(durable_url)
    # b's lease expires and w2 re-claims b; then w1 claims a and c, live
    old_b = stale(db, claimed(db, ["b"])["b"])
    db.submit_many([{"id": t, "fn": NOOP} for t in ("a", "c")])
    fresh = {lease.task_id: lease for lease in db.claim("w1", limit=2, lease=5)}
    answers = db.report_many([(kind, fresh["a"], None), (kind, old_b, None),
                              (kind, fresh["c"], None)])
    ended = TaskState.SUCCEEDED if kind == "complete" else TaskState.FAILED
    assert answers[0] == answers[2] == ended
    assert isinstance(answers[1], StaleLeaseError) and answers[1].task_id == "b"
    assert db.state("b") is TaskState.RUNNING and db.leases()["b"].holder == "w2"
    assert db.stats().stale_callbacks == 1
    db.check_invariants()
    db.release()


def test_a_repeated_batch_is_answered_and_changes_nothing(durable_url: StoreURL) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a", "b", "c"])
    batch = [("complete", leases["a"], 1), ("fail", leases["b"], "e"),
             ("complete", leases["c"], 3)]
    first = db.report_many(batch)
    kept = everything(db)
    assert db.report_many(batch) == first  # the batch's answer was lost: sent again
    assert everything(db) == kept
    assert db.stats().duplicate_callbacks == 3
    db.release()


def test_a_bad_report_refuses_the_batch_before_anything_changes(durable_url: StoreURL) -> None:
    db = store(durable_url)
    leases = claimed(db, ["a", "b"])
    kept = everything(db)
    bad: list[tuple[Any, str]] = [
        (("finish", leases["b"], None), r"report_many\[1\]: kind 'finish'"),
        (("complete", "lease", None), r"report_many\[1\]"),
        (("complete", leases["b"], object()), r"report_many\[1\]\('b'\) result"),
        (["complete", leases["b"], None], r"report_many\[1\]: .* not a \(kind"),
    ]
    for report, match in bad:
        with pytest.raises(InvalidArgumentError, match=match):
            db.report_many([("complete", leases["a"], None), report])
    with pytest.raises(InvalidArgumentError, match="report_many"):
        db.report_many("complete")  # type: ignore[arg-type]
    unknown = leases["b"]._replace(task_id="nobody")
    with pytest.raises(UnknownTaskError):
        db.report_many([("complete", leases["a"], None), ("fail", unknown, None)])
    assert everything(db) == kept
    assert db.report_many([]) == []
    db.release()


def test_a_batch_is_one_transaction(tmp_path: Any) -> None:
    db = DurableScheduler(f"sqlite:///{tmp_path / 's.db'}", max_concurrency=8, record=True)
    leases = claimed(db, [f"t{i}" for i in range(6)])
    opened = count_transactions(db)
    old = leases.pop("t0")
    db.report_many([("complete", old, None)])
    opened.clear()
    answers = db.report_many([("complete", lease, None) for lease in leases.values()]
                             + [("fail", old, None)])
    assert answers == [TaskState.SUCCEEDED] * 5 + [TaskState.SUCCEEDED]  # the repeat's answer
    assert opened == [True]
    db.release()


def test_a_batch_of_live_completes_is_one_server_call_on_postgresql(postgres_url: str) -> None:
    db = DurableScheduler(f"{postgres_url}&schema=batch", max_concurrency=8, record=True)
    leases = claimed(db, ["p"] + [f"t{i}" for i in range(5)])
    db.submit("child", ["p", "t0"], fn=NOOP)
    calls: list[str] = []
    store_: Any = db._store
    call = store_.call

    def spy(step: str, *args: Any) -> Any:
        calls.append(step)
        return call(step, *args)
    store_.call = spy
    opened = count_transactions(db)
    batch = [("complete", leases[f"t{i}"], i) for i in range(5)]
    assert db.report_many(batch) == [TaskState.SUCCEEDED] * 5
    assert calls == ["complete_many"] and opened == []
    assert db.info("child").remaining_deps == 1  # the fan-in of t0
    assert [a for a, _ in db.history()[-5:]] == ["Complete"] * 5
    # the same batch again: the server leaves it to the client's one transaction
    assert db.report_many(batch) == [TaskState.SUCCEEDED] * 5
    assert calls == ["complete_many"] * 2 and opened == [True]
    assert db.stats().by_state["succeeded"] == 5 and db.stats().duplicate_callbacks == 5
    db.check_invariants()
    db.release()

