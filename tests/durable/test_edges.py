"""Edge kinds, add_deps and input summaries in the durable stores (docs/semantics.md), on SQLite
and PostgreSQL: spec/DurableScheduler.tla's SubmitOptional and AddDeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler
from refsched.durable import DurableScheduler
from refsched.durable.status import _show_text, show
from refsched.durable.store import SCHEMA_VERSION
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    SchedulerClosedError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import TaskState
from tests.conftest import StoreURL
from tests.durable.support import JOBS, downgrade, start_worker

NOOP = f"{JOBS}:noop"
PARENT_ENDS = ("succeeded", "failed", "cancelled", "blocked")


def store(url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 8)
    options.setdefault("clock", "virtual")
    return DurableScheduler(url(name), **options)


def end_parents(db: Any, claim: Any) -> None:
    """p_succeeded succeeds, p_failed fails (so p_blocked, which needs it, is blocked), and
    p_cancelled is cancelled while it waits; ``claim(db)`` takes the ready versions and gives
    a report callable per id."""
    reports = claim(db)
    db.cancel("p_cancelled")
    reports["p_succeeded"]("complete", {"from": "p_succeeded"})
    reports["p_failed"]("fail", "no")


def submit_table(db: Any, **fn: Any) -> None:
    """A parent per end, and a child per edge kind x parent end."""
    for p in ("p_succeeded", "p_failed"):
        db.submit(p, **fn)
    db.submit("p_cancelled", ["p_succeeded"], **fn)  # waits: cancelled before anything ends
    db.submit("p_blocked", ["p_failed"], **fn)
    for p in PARENT_ENDS:
        db.submit(f"required_{p}", [f"p_{p}"], **fn)
        db.submit(f"optional_{p}", optional=[f"p_{p}"], **fn)


def durable_claims(db: DurableScheduler) -> dict[str, Any]:
    leases = {lease.task_id: lease for lease in db.claim("w", 8)}
    return {t: (lambda end, value, lease=lease: getattr(db, end)(lease, value))
            for t, lease in leases.items()}


def memory_claims(ts: TaskScheduler) -> dict[str, Any]:
    return {str(c.task_id): (lambda end, value, c=c: getattr(ts, end)(c.task_id, c.generation,
                                                                        value))
            for c in ts.ready(8)}


def test_each_edge_kind_settles_as_the_truth_table_says_and_as_the_task_scheduler_does(
        durable_url: StoreURL) -> None:
    db = store(durable_url, record=True)
    submit_table(db, fn=NOOP)
    db.start()
    end_parents(db, durable_claims)
    ts = TaskScheduler(8)
    submit_table(ts)
    ts.start()
    end_parents(ts, memory_claims)
    # A required edge waits for success and is blocked by any other end; an optional one is
    # settled by every end, and never blocks.
    states = {t: db.state(t) for p in PARENT_ENDS for t in (f"required_{p}", f"optional_{p}")}
    assert states == {
        "required_succeeded": TaskState.READY, "required_failed": TaskState.BLOCKED,
        "required_cancelled": TaskState.BLOCKED, "required_blocked": TaskState.BLOCKED,
        **{f"optional_{p}": TaskState.READY for p in PARENT_ENDS}}
    assert db.snapshot() == ts.snapshot()
    assert db.info("optional_failed").optional == frozenset({"p_failed"})
    db.check_invariants()
    assert [a for a, _ in db.history()].count("SubmitOptional") == len(PARENT_ENDS)


def test_an_id_in_both_deps_and_optional_or_twice_is_refused_and_changes_nothing(
        durable_url: StoreURL) -> None:
    db = store(durable_url, record=True)
    db.submit("a", fn=NOOP)
    db.submit("c", fn=NOOP, optional=["a"])
    before = (db.snapshot(), db.history())
    for deps, optional in ((["a"], ["a"]), ([], ["a", "a"]), (["a", "a"], []), ([], "a")):
        with pytest.raises(InvalidArgumentError):
            db.submit("b", deps, fn=NOOP, optional=optional)
        with pytest.raises(InvalidArgumentError):
            db.add_deps("c", deps, optional=optional)
    with pytest.raises(InvalidArgumentError, match="itself"):
        db.submit("b", fn=NOOP, optional=["b"])
    assert (db.snapshot(), db.history()) == before


def test_add_deps_raises_the_count_in_its_transaction_and_a_claimed_version_refuses_it(
        durable_url: StoreURL) -> None:
    db = store(durable_url, record=True)
    for t in ("a", "b", "x"):
        db.submit(t, fn=NOOP)
    db.submit("c", ["a"], fn=NOOP)
    db.start()
    assert db.add_deps("c", ["b"], optional=["x"]) is TaskState.PENDING
    info = db.info("c")
    assert (info.remaining_deps, info.deps, info.optional) == (3, {"a", "b", "x"}, {"x"})
    assert db.history()[-1] == ("AddDeps", {"t": "c", "D": ["a", "b", "x"][1:], "O": ["x"]})
    for lease in db.claim("w", 3):
        db.complete(lease)
    # Another process's claim committed first: the version is running, and keeps its deps.
    other = DurableScheduler(db.url)
    [lease] = other.claim("w2", 1)
    assert lease.task_id == "c"
    db.submit("y", fn=NOOP)
    with pytest.raises(InvalidTransitionError, match="running, not pending"):
        db.add_deps("c", ["y"])
    with pytest.raises(InvalidTransitionError, match="ready, not pending"):
        db.add_deps("y", ["a"])
    assert db.info("c").deps == {"a", "b", "x"}
    other.release()
    db.check_invariants()


def test_add_deps_refuses_in_the_models_order_and_counts_a_cycle(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.submit("b", ["a"], fn=NOOP)
    db.submit("c", ["b"], fn=NOOP)
    db.start()
    with pytest.raises(UnknownTaskError):
        db.add_deps("nobody")  # unknown before no dep given
    with pytest.raises(InvalidArgumentError, match="no dependency"):
        db.add_deps("a")
    with pytest.raises(InvalidArgumentError, match="itself"):
        db.add_deps("b", ["b"])
    with pytest.raises(InvalidArgumentError, match="already"):
        db.add_deps("c", optional=["b"])
    with pytest.raises(InvalidTransitionError):
        db.add_deps("a", ["nobody"])  # ready, before the unknown dep
    with pytest.raises(UnknownDependencyError):
        db.add_deps("b", ["nobody"])
    with pytest.raises(CycleError, match="'b' -> 'c' -> 'b'"):
        db.add_deps("b", optional=["c"])
    assert db.stats().cycles_reported == 1
    db.close()
    with pytest.raises(SchedulerClosedError):
        db.add_deps("b", ["c"])


def test_a_new_required_dep_that_is_dead_blocks_the_version_and_its_dependents(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    for t in ("a", "p"):
        db.submit(t, fn=NOOP)
    db.submit("b", ["p"], fn=NOOP)
    db.submit("c", ["b"], fn=NOOP)
    db.submit("d", optional=["b"], fn=NOOP)
    db.submit("e", ["p"], fn=NOOP)
    db.start()
    db.cancel("a")
    assert db.add_deps("e", optional=["a"]) is TaskState.PENDING  # settled: it ended
    assert db.info("e").remaining_deps == 1
    assert db.add_deps("b", ["a"]) is TaskState.BLOCKED
    assert db.info("b").blocked_by == "a"
    assert db.state("c") is TaskState.BLOCKED
    assert db.state("d") is TaskState.READY  # its optional parent ended (blocked)
    db.check_invariants()


def test_a_new_version_of_an_ended_optional_parent_makes_its_waiting_child_wait_again(
        durable_url: StoreURL) -> None:
    db = store(durable_url, record=True)
    ts = TaskScheduler(8)
    for s in (db, ts):
        fn = {"fn": NOOP} if s is db else {}
        s.submit("p", **fn)
        s.submit("gate", **fn)
        s.submit("c", ["gate"], optional=["p"], **fn)
        s.start()
        s.cancel("p")
    assert db.info("c").remaining_deps == 1
    for s in (db, ts):
        s.submit("p", **({"fn": NOOP} if s is db else {}))  # its end no longer settles c's edge
    assert db.info("c").remaining_deps == 2 and db.state("c") is TaskState.PENDING
    db.cancel("p")
    ts.cancel("p")
    db.retry("p")  # the same by retry()
    ts.retry("p")
    assert db.snapshot() == ts.snapshot()
    assert db.info("c").remaining_deps == 2
    db.check_invariants()


def test_the_input_summary_is_fixed_when_the_version_is_claimed(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("p", fn=NOOP)
    db.submit("q", fn=NOOP)
    db.submit("c", fn=NOOP, optional=["p", "q"])
    db.start()
    leases = {lease.task_id: lease for lease in db.claim("w", 2)}
    db.complete(leases["p"], [1, "one"])
    assert set(db.input_summary("c")) == {"p"}  # so far: not claimed yet
    db.fail(leases["q"], ValueError("bad input"))
    [c] = db.claim("w", 1)
    summary = db.input_summary("c")
    assert {d: (o.state, o.generation, o.result, o.error) for d, o in summary.items()} == {
        "p": (TaskState.SUCCEEDED, 1, [1, "one"], None),
        "q": (TaskState.FAILED, 1, None, "ValueError: bad input")}
    # A new version of an input, run and ended after the claim, does not change it.
    db.retry("q")
    [q] = db.claim("w", 1)
    db.complete(q, "later")
    assert db.input_summary("c") == summary == db.info("c").input_summary
    db.complete(c)
    assert db.input_summary("c") == summary
    row = show(db, "c")
    assert row["optional"] == ["p", "q"]
    assert row["input_summary"]["q"] == {"generation": 1, "state": "failed", "result": None,
                                         "error": "ValueError: bad input", "blocked_by": None}
    assert json.loads(json.dumps(row)) == row
    assert "'q': failed, generation 1, error ValueError: bad input" in _show_text(row)
    db.submit("c", fn=NOOP, optional=["q"])  # a new version, not claimed: so far
    assert [(o.generation, o.result) for o in db.input_summary("c").values()] == [(2, "later")]
    with pytest.raises(UnknownTaskError):
        db.input_summary("nobody")


def test_a_worker_gives_a_function_that_takes_inputs_its_input_summary(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=2)
    db.submit("ok", fn=NOOP, args={"value": 7})
    db.submit("bad", fn=f"{JOBS}:fail")
    db.submit("c", ["ok"], fn=f"{JOBS}:summarise", optional=["bad"])
    db.start()
    worker = start_worker(url, "--until-done", "--lease", "5", name="w")
    assert worker.wait(60) == 0, worker.communicate()[1]
    assert db.result("c") == {"bad": ["failed", 1, None, "ValueError: failed on purpose"]}


def test_a_version_3_store_is_migrated_by_its_first_writer_and_takes_edge_kinds(
        durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.submit("b", ["a"], fn=NOOP)
    url = db.url
    downgrade(db, url, tmp_path / "s.db", 3)
    reader = DurableScheduler(url, read_only=True)
    assert reader.view().settings["schema_version"] == 3
    assert reader.info("b").optional == frozenset() and reader.input_summary("b") == {}
    assert reader.snapshot().tasks["b"].deps == {"a"}
    reader.release()
    writer = DurableScheduler(url)
    assert writer.view().settings["schema_version"] == SCHEMA_VERSION
    writer.submit("c", fn=NOOP, optional=["b"])
    writer.start()
    writer.cancel("a")  # b is blocked; c's optional parent ended
    assert writer.state("c") is TaskState.READY
    assert [x.task_id for x in writer.claim("w", 1)] == ["c"]
    assert writer.input_summary("c")["b"].state is TaskState.BLOCKED
    writer.check_invariants()
