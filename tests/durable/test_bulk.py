"""``DurableScheduler.submit_many`` on SQLite and PostgreSQL: a batch is the submits of its items
in order inside one transaction (one Submit or SubmitOptional step each), all or nothing, in few
round trips; and a submit with deps on PostgreSQL is one server-side call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    SchedulerClosedError,
    TaskRunningError,
    UnknownDependencyError,
)
from refsched.types import TaskState
from tests.conftest import StoreURL
from tests.durable.support import JOBS

NOOP = f"{JOBS}:noop"


def store(url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 8)
    options.setdefault("clock", "virtual")
    options.setdefault("record", True)
    return DurableScheduler(url(name), **options)


def everything(db: DurableScheduler) -> tuple[Any, ...]:
    """What a refused batch must leave as it was: the snapshot, the due times and priorities,
    the history, the counters."""
    stats = db.stats()
    return (db.snapshot(), db.times(), db.history(), stats.submitted, stats.by_state)


BATCH: list[dict[str, Any]] = [
    {"id": "a", "fn": NOOP, "args": {"value": 1}},
    {"id": "b", "deps": ["a"], "fn": NOOP, "priority": 3},
    {"id": "c", "deps": ["a"], "optional": ["b"], "fn": NOOP, "delay": 2},
    {"id": "d", "deps": ["c", "b"], "fn": NOOP},
    {"id": "a", "fn": NOOP},  # a second version of a, as a second submit makes
]


def one_by_one(db: DurableScheduler, batch: list[dict[str, Any]]) -> list[int]:
    return [db.submit(item["id"], item.get("deps", ()), fn=item["fn"], args=item.get("args"),
                      optional=item.get("optional", ()), delay=item.get("delay"),
                      priority=item.get("priority", 0)) for item in batch]


@pytest.mark.parametrize("started", [False, True])
def test_a_batch_is_its_submits_in_order(durable_url: StoreURL, started: bool) -> None:
    bulk, single = store(durable_url, "bulk.db"), store(durable_url, "single.db")
    for db in (bulk, single):
        db.submit("z", fn=NOOP)
        if started:
            db.start()
    assert bulk.submit_many(BATCH) == one_by_one(single, BATCH) == [1, 1, 1, 1, 2]
    assert everything(bulk) == everything(single)
    assert [action for action, _ in bulk.history()][-5:] == [
        "Submit", "Submit", "SubmitOptional", "Submit", "Submit"]
    assert bulk.history()[-3] == ("SubmitOptional", {"t": "c", "D": ["a", "b"], "O": ["b"],
                                                     "p": 0, "d": 2})
    # the second version of a was a new version: b and c wait for it again
    assert bulk.info("b").remaining_deps == 1 and bulk.info("d").remaining_deps == 2
    bulk.check_invariants()
    assert bulk.submit_many([]) == []
    bulk.release()
    single.release()


def test_a_batch_depending_on_a_dead_version_blocks_as_submit_does(
        durable_url: StoreURL) -> None:
    bulk, single = store(durable_url, "bulk.db"), store(durable_url, "single.db")
    batch = [{"id": "x", "deps": ["f"], "fn": NOOP},
             {"id": "y", "optional": ["f"], "fn": NOOP},
             {"id": "z", "deps": ["x"], "fn": NOOP}]
    for db in (bulk, single):
        db.submit("f", fn=NOOP)
        db.start()
        (lease,) = db.claim("w")
        db.fail(lease, "no")
    bulk.submit_many(batch)
    one_by_one(single, batch)
    assert everything(bulk) == everything(single)
    assert [bulk.state(t) for t in "xyz"] == [TaskState.BLOCKED, TaskState.READY,
                                             TaskState.BLOCKED]
    bulk.release()
    single.release()


BAD_ITEMS: list[tuple[Any, str]] = [
    ({"id": "", "fn": NOOP}, r"submit_many\[2\]"),
    ({"id": "x", "fn": "no such function"}, r"fn="),
    ({"id": "x", "deps": ["x"], "fn": NOOP}, r"submit_many\[2\]\('x'\): a task cannot depend"),
    ({"id": "x", "deps": ["a"], "optional": ["a"], "fn": NOOP}, r"'a' given twice"),
    ({"id": "x", "fn": NOOP, "delay": -1}, r"submit_many\[2\]\('x', delay=-1\)"),
    ({"id": "x", "fn": NOOP, "priority": 2**40}, r"submit_many\[2\]\('x', priority="),
    ({"id": "x", "fn": NOOP, "args": [1]}, r"args must be a dict"),
    ({"id": "x", "fn": NOOP, "if_absent": True}, r"submit_many\[2\]\('x'\): unknown keys"),
    ({"id": "x"}, r"missing \['fn'\]"),
    ("x", r"submit_many\[2\]: 'x' is not a mapping"),
]


@pytest.mark.parametrize(("bad", "says"), BAD_ITEMS)
def test_a_bad_item_at_the_end_leaves_nothing(durable_url: StoreURL, bad: Any,
                                              says: str) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    before = everything(db)
    with pytest.raises(InvalidArgumentError, match=says):
        db.submit_many([{"id": "p", "fn": NOOP}, {"id": "q", "deps": ["p"], "fn": NOOP}, bad])
    assert everything(db) == before
    db.release()


def test_not_an_iterable_of_items_is_refused(durable_url: StoreURL) -> None:
    db = store(durable_url)
    for bad in ("ab", {"id": "a", "fn": NOOP}, 3):
        with pytest.raises(InvalidArgumentError, match="submit_many"):
            db.submit_many(bad)  # type: ignore[arg-type]
    db.release()


def refusal_cases() -> list[tuple[str, Callable[[DurableScheduler], None],
                                  list[dict[str, Any]], type[Exception]]]:
    def running(db: DurableScheduler) -> None:
        db.claim("w")

    def closed(db: DurableScheduler) -> None:
        db.close()

    def nothing(db: DurableScheduler) -> None:
        pass

    return [
        ("an unknown dep at the end", nothing,
         [{"id": "p", "fn": NOOP}, {"id": "q", "deps": ["p", "nowhere"], "fn": NOOP}],
         UnknownDependencyError),
        ("a dep on a later item", nothing,
         [{"id": "p", "deps": ["q"], "fn": NOOP}, {"id": "q", "fn": NOOP}],
         UnknownDependencyError),
        ("a cycle inside the batch", nothing,
         [{"id": "p", "fn": NOOP}, {"id": "q", "deps": ["p"], "fn": NOOP},
          {"id": "p", "deps": ["q"], "fn": NOOP}], CycleError),
        ("a cycle through the stored graph", nothing,
         [{"id": "p", "deps": ["a"], "fn": NOOP}, {"id": "a", "deps": ["p"], "fn": NOOP}],
         CycleError),
        ("an id running", running,
         [{"id": "p", "fn": NOOP}, {"id": "a", "fn": NOOP}], TaskRunningError),
        ("closed", closed, [{"id": "p", "fn": NOOP}], SchedulerClosedError),
    ]


@pytest.mark.parametrize(("case", "before", "batch", "error"), refusal_cases(),
                         ids=[c[0] for c in refusal_cases()])
def test_a_refused_item_refuses_the_whole_batch(
        durable_url: StoreURL, case: str, before: Callable[[DurableScheduler], None],
        batch: list[dict[str, Any]], error: type[Exception]) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.start()
    before(db)
    seen = everything(db)
    with pytest.raises(error, match=r"submit_many\[\d\]"):
        db.submit_many(batch)
    assert everything(db) == seen
    assert db.stats().cycles_reported == (error is CycleError)
    db.check_invariants()
    db.release()


def test_a_batch_is_one_transaction_on_sqlite(tmp_path: Any) -> None:
    db = store(lambda name="s.db": f"sqlite:///{tmp_path / name}")
    opened = count_transactions(db)
    db.submit_many([{"id": f"t{i}", "deps": [f"t{i - 1}"] if i else [], "fn": NOOP}
                    for i in range(50)])
    assert opened == [True]  # one write transaction
    assert db.info("t49").remaining_deps == 1
    db.release()


def count_transactions(db: DurableScheduler) -> list[bool]:
    """Each transaction the store opens from now on (whether it writes)."""
    opened: list[bool] = []
    store_: Any = db._store
    transaction = store_.transaction

    def spy(write: bool = True, first: str | None = None) -> Any:
        opened.append(write)
        return transaction(write, first)
    store_.transaction = spy
    return opened


def test_a_batch_and_a_submit_with_deps_are_one_call_on_postgresql(postgres_url: str) -> None:
    db = DurableScheduler(f"{postgres_url}&schema=bulk", max_concurrency=4, record=True)
    calls: list[str] = []
    store_: Any = db._store
    call = store_.call

    def spy(step: str, *args: Any) -> Any:
        calls.append(step)
        return call(step, *args)
    store_.call = spy
    opened = count_transactions(db)
    assert db.submit_many([{"id": f"t{i}", "deps": [f"t{i - 1}"] if i else [], "fn": NOOP}
                           for i in range(200)]) == [1] * 200
    assert db.submit("u", ["t199"], fn=NOOP, optional=["t3"]) == 1
    assert calls == ["submit_many", "submit_many"] and opened == []
    assert db.info("u").remaining_deps == 2 and db.info("u").optional == {"t3"}
    # what the function leaves to the client: an error to raise, here a cycle after start
    db.start()
    opened.clear()
    with pytest.raises(CycleError):
        db.submit("t0", ["u"], fn=NOOP)
    assert calls[-1] == "submit_many" and opened == [True, True]  # the step, the count
    db.check_invariants()
    db.release()


def test_a_batch_counts_each_edge_as_the_table_says(durable_url: StoreURL) -> None:
    """The count of each item (docs/semantics.md): a required edge waits for its parent's
    success, an optional one for its end in any state; the batch takes no dead required dep,
    so that on PostgreSQL the server counts them all."""
    db = store(durable_url)
    for p in ("p_succeeded", "p_failed", "p_running", "p_ready"):
        db.submit(p, fn=NOOP)
    db.submit("p_cancelled", ["p_ready"], fn=NOOP)
    db.start()
    leases = {lease.task_id: lease for lease in db.claim("w", 3)}
    assert set(leases) == {"p_succeeded", "p_failed", "p_running"}
    db.complete(leases["p_succeeded"], 1)
    db.fail(leases["p_failed"], "no")
    db.cancel("p_cancelled")
    parents = ("p_succeeded", "p_failed", "p_cancelled", "p_running", "p_ready")
    db.submit_many([{"id": f"optional_{p}", "optional": [p], "fn": NOOP} for p in parents]
                   + [{"id": "required_p_succeeded", "deps": ["p_succeeded"], "fn": NOOP},
                      {"id": "required_p_ready", "deps": ["p_ready"], "fn": NOOP},
                      {"id": "both", "deps": ["p_succeeded"], "optional": parents[1:3],
                       "fn": NOOP}])
    assert {t: db.info(t).remaining_deps for t in (
        "optional_p_succeeded", "optional_p_failed", "optional_p_cancelled",
        "optional_p_running", "optional_p_ready", "required_p_succeeded", "required_p_ready",
        "both")} == {
        "optional_p_succeeded": 0, "optional_p_failed": 0, "optional_p_cancelled": 0,
        "optional_p_running": 1, "optional_p_ready": 1, "required_p_succeeded": 0,
        "required_p_ready": 1, "both": 0}
    assert db.state("optional_p_failed") is TaskState.READY
    assert db.info("both").optional == {"p_failed", "p_cancelled"}
    db.check_invariants()
    db.release()


def test_a_success_counts_for_the_children_of_both_edge_kinds(durable_url: StoreURL) -> None:
    """Complete's fan-in (on PostgreSQL the server's): a success settles required and optional
    edges alike."""
    db = store(durable_url)
    db.submit_many([{"id": "p", "fn": NOOP}, {"id": "q", "fn": NOOP},
                    {"id": "required", "deps": ["p"], "fn": NOOP},
                    {"id": "optional", "optional": ["p"], "fn": NOOP},
                    {"id": "both", "deps": ["q"], "optional": ["p"], "fn": NOOP}])
    db.start()
    leases = {lease.task_id: lease for lease in db.claim("w", 2)}
    assert db.complete(leases["p"], 1) is TaskState.SUCCEEDED
    assert [db.state(t) for t in ("required", "optional", "both")] == [
        TaskState.READY, TaskState.READY, TaskState.PENDING]
    assert db.info("both").remaining_deps == 1
    db.complete(leases["q"], 2)
    assert db.state("both") is TaskState.READY and db.info("both").became_ready_at is not None
    db.check_invariants()
    db.release()
