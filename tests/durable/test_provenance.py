"""Provenance in the durable stores (docs/durable.md, "Provenance"), on SQLite and PostgreSQL:
every blocked or cancelled version records its root, the actor and reason of the call that
ended the root, the store's time, and the path of edges from the root; set once, in the
transaction that ended it, never rewritten; a new version starts with none. And the lock-step
machine that compares the store's records with the model's (spec: RecordProvenance)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from refsched import TaskScheduler
from refsched.durable import DurableScheduler
from refsched.durable.scheduler import MAX_NOTE_CHARS
from refsched.durable.status import _show_text, _status_text, show, status
from refsched.durable.store import SCHEMA_VERSION
from refsched.errors import InvalidArgumentError, InvariantViolation, UnknownTaskError
from refsched.types import Provenance, ProvenanceView, TaskState
from refsched.verify.durable.lockstep import run_durable_lockstep
from tests.conftest import StoreURL, postgres_factory
from tests.durable.support import JOBS, downgrade

NOOP = f"{JOBS}:noop"
FAILED, CANCELLED = TaskState.FAILED, TaskState.CANCELLED


def store(url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 8)
    options.setdefault("clock", "virtual")
    return DurableScheduler(url(name), **options)


def chain(db: DurableScheduler) -> None:
    """a <- b <- c, and x <- y <- c' (c needs b and y): a's end reaches c through b."""
    db.submit("a", fn=NOOP)
    db.submit("x", fn=NOOP)
    db.submit("b", ["a"], fn=NOOP)
    db.submit("y", ["x"], fn=NOOP)
    db.submit("c", ["b", "y"], fn=NOOP)


def claimed(db: DurableScheduler, worker: str = "w") -> dict[str, Any]:
    return {lease.task_id: lease for lease in db.claim(worker, 8)}


def test_a_failure_gives_each_version_it_blocks_its_root_path_worker_and_error(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    db.tick(5)
    leases = claimed(db, "w7")
    assert db.fail(leases["a"], ValueError("disk full")) is FAILED
    root = ("a", 1, FAILED)
    for t, path in (("b", ("a", "b")), ("c", ("a", "b", "c"))):
        p = db.info(t).provenance
        assert p == Provenance(*root, path, "w7", "ValueError: disk full")
        assert p is not None and p.time == 5.0  # the store's clock when a failed
    assert db.info("a").provenance is None  # a failed version shows none: it is the root
    assert db.info("y").provenance is None and db.info("x").provenance is None
    assert db.snapshot(provenance=True).provenance == {
        "b": ProvenanceView(*root, ("a", "b")), "c": ProvenanceView(*root, ("a", "b", "c"))}
    assert db.snapshot().provenance is None  # not asked: as a store without records
    db.check_invariants()


def test_cancel_records_its_actor_and_reason_on_itself_and_what_it_blocks(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.tick(2)
    assert db.cancel("x", actor="ops", reason="not needed") is CANCELLED
    assert db.info("x").provenance == Provenance("x", 1, CANCELLED, ("x",), "ops", "not needed")
    assert db.info("c").provenance == Provenance("x", 1, CANCELLED, ("x", "y", "c"), "ops",
                                                 "not needed")
    assert db.info("c").provenance.time == 2.0  # type: ignore[union-attr]
    db.cancel("a")  # no actor, no reason: both None
    assert db.info("b").provenance == Provenance("a", 1, CANCELLED, ("a", "b"))
    db.check_invariants()


def test_provenance_answers_the_record_info_keeps_and_refuses_as_info_does(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.cancel("x", actor="ops", reason="gone")
    for t in ("x", "y", "c", "a", "b"):
        assert db.provenance(t) == db.info(t).provenance
    assert db.provenance("c") == Provenance("x", 1, CANCELLED, ("x", "y", "c"), "ops", "gone")
    assert db.provenance("a") is None
    with pytest.raises(UnknownTaskError):
        db.provenance("nobody")
    with pytest.raises(InvalidArgumentError):
        db.provenance(7)  # type: ignore[arg-type]


def test_a_second_cause_reaching_a_blocked_version_changes_nothing(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    leases = claimed(db)
    db.fail(leases["a"], "first")
    before = db.info("c").provenance
    db.tick(3)
    db.fail(leases["x"], "second")  # y is blocked now, and c is already
    assert db.info("c").provenance == before and before is not None
    assert before.reason == "first" and before.time == 0.0
    assert db.info("y").provenance == Provenance("x", 1, FAILED, ("x", "y"), "w", "second")
    db.check_invariants()


@pytest.mark.parametrize("actor, reason", [(1, None), (None, b"bytes"),
                                           ("a" * (MAX_NOTE_CHARS + 1), None),
                                           (None, "r" * (MAX_NOTE_CHARS + 1))])
def test_cancel_refuses_a_bad_actor_or_reason_before_any_change(
        durable_url: StoreURL, actor: Any, reason: Any) -> None:
    db = store(durable_url, record=True)
    chain(db)
    before = (db.snapshot(provenance=True), db.history())
    with pytest.raises(InvalidArgumentError) as caught:
        db.cancel("a", actor=actor, reason=reason)
    assert isinstance(caught.value, ValueError)  # what a user catches
    assert (db.snapshot(provenance=True), db.history()) == before
    # the same names and the same type rule as TaskScheduler.cancel
    if not isinstance(actor, str) and not isinstance(reason, str):
        memory = TaskScheduler(8)
        memory.submit("a")
        with pytest.raises(InvalidArgumentError):
            memory.cancel("a", actor=actor, reason=reason)
    db.cancel("a", actor="a" * MAX_NOTE_CHARS, reason="")  # the longest, and an empty one
    assert db.info("b").provenance.actor == "a" * MAX_NOTE_CHARS  # type: ignore[union-attr]


def test_a_long_error_is_cut_in_the_record_and_kept_whole_as_the_error(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    text = "e" * (MAX_NOTE_CHARS + 50)
    db.fail(claimed(db)["a"], text)
    reason = db.info("b").provenance.reason  # type: ignore[union-attr]
    assert reason == "e" * MAX_NOTE_CHARS + "... (50 more characters)"
    assert db.info("a").error == text


def test_a_give_up_after_the_last_expiry_records_no_actor_and_the_error_as_reason(
        durable_url: StoreURL) -> None:
    db = store(durable_url, max_attempts=1)
    chain(db)
    db.start()
    db.claim("w", 8, lease=1)
    db.tick(2)
    db.expire()
    assert db.state("a") is FAILED
    p = db.info("b").provenance
    assert p is not None and p.actor is None and p.root == "a" and p.path == ("a", "b")
    assert p.reason == db.info("a").error and p.reason.startswith("lease expired 1 times")
    assert p.time == 2.0


def test_an_acknowledged_cancel_records_the_worker(durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    leases = claimed(db, "w2")
    db.cancel("a", actor="ops", reason="stop")  # running: a request, no record yet
    assert db.info("a").provenance is None
    db.acknowledge_cancel(leases["a"])
    assert db.info("a").provenance == Provenance("a", 1, CANCELLED, ("a",), "w2", None)
    assert db.info("c").provenance.path == ("a", "b", "c")  # type: ignore[union-attr]


def test_a_new_version_starts_without_a_record_and_records_its_own_end(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    leases = claimed(db)
    db.fail(leases["a"], "no")
    assert db.retry("a") == 2
    for t in ("a", "b", "c"):
        assert db.info(t).provenance is None and db.info(t).generation == 2
    db.check_invariants()
    db.cancel("b", actor="me")
    assert db.info("c").provenance == Provenance("b", 2, CANCELLED, ("b", "c"), "me")
    db.submit("b", ["a"], fn=NOOP)  # a new version of b: none again, and c stays as it was
    assert db.info("b").provenance is None
    assert db.info("c").provenance == Provenance("b", 2, CANCELLED, ("b", "c"), "me")
    db.check_invariants()


def test_a_version_submitted_on_a_dead_dep_is_blocked_with_its_roots_record(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    db.fail(claimed(db, "w3")["a"], "no")
    db.submit("d", ["c"], fn=NOOP)
    assert db.info("d").provenance == Provenance("a", 1, FAILED, ("a", "b", "c", "d"), "w3",
                                                 "no")


def test_close_records_reason_close(durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.close()
    for t in ("a", "b", "c", "x", "y"):
        assert db.info(t).provenance == Provenance(t, 1, CANCELLED, (t,), None, "close")
    db.check_invariants()


def test_a_path_through_a_cycle_of_an_unstarted_graph_runs_nearer_to_the_root_each_edge(
        durable_url: StoreURL) -> None:
    # b and a need each other, and a needs x too; b has the smaller seq, so each blames the
    # other: the path runs through x, one edge nearer (spec Settle's via), as in memory
    db = store(durable_url)
    memory = TaskScheduler(8)
    for s in (db, memory):
        s.submit("b", ["a"], **({"fn": NOOP} if s is db else {}))
        s.submit("a", ["b", "x"], **({"fn": NOOP} if s is db else {}))
        s.submit("x", **({"fn": NOOP} if s is db else {}))
        s.cancel("x")
    assert db.info("a").blocked_by == "b" and db.info("b").blocked_by == "a"
    assert db.info("a").provenance.path == ("x", "a")  # type: ignore[union-attr]
    assert db.info("b").provenance.path == ("x", "a", "b")  # type: ignore[union-attr]
    assert db.snapshot(provenance=True).provenance == memory.snapshot(
        provenance=True).provenance


def test_the_store_refuses_a_dead_version_without_a_record(durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.cancel("a")
    with db._store.transaction() as tx:  # what a bug that forgot one would leave
        tx.run("UPDATE task SET provenance = NULL WHERE id = 'b'")
    with pytest.raises(InvariantViolation, match="ProvenanceRecorded"):
        db.check_invariants()


def test_a_version_4_store_is_read_as_it_is_and_its_first_writer_records_its_dead_versions(
        durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    chain(db)
    db.start()
    db.fail(claimed(db, "w")["a"], "no")
    db.tick(4)
    db.cancel("y")
    url = db.url
    downgrade(db, url, tmp_path / "s.db", 4)
    reader = DurableScheduler(url, read_only=True)
    assert reader.view().settings["schema_version"] == 4
    assert reader.info("b").provenance is None and reader.state("b") is TaskState.BLOCKED
    assert reader.snapshot(provenance=True).provenance == {}
    reader.release()
    writer = DurableScheduler(url)
    assert writer.view().settings["schema_version"] == SCHEMA_VERSION == 7
    # what was dead before: its own record, or its root's, without actor or reason
    assert writer.info("b").provenance == Provenance("a", 1, FAILED, ("a", "b"))
    assert writer.info("c").provenance == Provenance("a", 1, FAILED, ("a", "b", "c"))
    assert writer.info("y").provenance == Provenance("y", 1, CANCELLED, ("y",))
    assert writer.info("y").provenance.time == 4.0  # type: ignore[union-attr]
    writer.check_invariants()
    writer.submit("d", ["b"], fn=NOOP)  # blocked by b: b's record extended
    assert writer.info("d").provenance == Provenance("a", 1, FAILED, ("a", "b", "d"))


def test_show_and_status_give_the_records_in_text_and_json(durable_url: StoreURL) -> None:
    db = store(durable_url)
    chain(db)
    db.cancel("a", actor="ops", reason="done\nfor today")
    row = show(db, "c")
    assert row["provenance"] == {"root": "a", "generation": 1, "end": "cancelled",
                                 "path": ["a", "b", "c"], "actor": "ops",
                                 "reason": "done\nfor today", "time": 0.0}
    json.dumps(row)
    text = _show_text(row)
    assert "provenance: root 'a' generation 1 cancelled" in text
    assert "path: 'a' -> 'b' -> 'c'" in text and "actor: ops" in text
    assert show(db, "x")["provenance"] is None and "provenance" not in _show_text(show(db, "x"))
    report = status(db)
    json.dumps(report)
    assert [(r["task"], r["path"]) for r in report["provenance"]] == [
        ("a", ["a"]), ("b", ["a", "b"]), ("c", ["a", "b", "c"])]
    assert report["provenance_left_out"] == 0
    lines = _status_text(report).splitlines()
    assert "  blocked 'c': root 'a' (generation 1, cancelled), path 'a' -> 'b' -> 'c'" in lines


def test_status_gives_a_bounded_number_of_records_and_cuts_long_paths(
        durable_url: StoreURL) -> None:
    from refsched.durable.status import PATH_LIMIT, PROVENANCE_LIMIT
    db = store(durable_url)
    n = PROVENANCE_LIMIT + 5
    for i in range(n):
        db.submit(f"t{i:02}", [f"t{i - 1:02}"] if i else [], fn=NOOP)
    db.cancel("t00")
    report = status(db)
    assert len(report["provenance"]) == PROVENANCE_LIMIT
    assert report["provenance_left_out"] == 5
    text = _status_text(report)
    assert "... 5 more (refsched show ID, or --json)" in text
    last = report["provenance"][-1]
    assert len(last["path"]) == PROVENANCE_LIMIT  # whole in JSON
    assert f"... ({PROVENANCE_LIMIT - PATH_LIMIT} more)" in text


def test_the_lockstep_machine_compares_the_stores_records_with_the_models() -> None:
    ledger = run_durable_lockstep(DurableScheduler, examples=100, steps=40, seed=0,
                                  provenance=True)
    for action in ("Cancel", "Fail", "Expire", "Retry", "Close"):
        assert ledger.actions[action] >= 1, ledger.summary()


def test_the_postgresql_store_records_what_the_model_records(postgres_url: str) -> None:
    ledger = run_durable_lockstep(postgres_factory(postgres_url), examples=25, steps=40, seed=1,
                                  provenance=True)
    assert ledger.actions["Cancel"] >= 1, ledger.summary()
