"""DurableScheduler on SQLite, in one process: the contract, leases and fencing, bad input, files.

The refinement check at the end drives the store with Hypothesis and replays its recorded
history through the TaskScheduler's reference model (``spec/Scheduler.tla`` under the
refinement mapping): after every call the store's ``snapshot()`` must equal the model's.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from refsched.durable import DurableScheduler, Lease
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    LeaseLostError,
    SchedulerClosedError,
    SchedulerError,
    StaleGenerationError,
    StaleLeaseError,
    StoreError,
    TaskRunningError,
    UnknownDependencyError,
    UnknownTaskError,
)
from refsched.types import TaskState
from refsched.verify.durable.history import HistoryCheck, check_history
from tests.conftest import StoreURL, sqlite_stores

NOOP = "tests.durable.jobs:noop"


def store(where: Path | StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    """A store named ``name``: a SQLite file in the folder ``where``, or by ``durable_url``."""
    options.setdefault("max_concurrency", 2)
    options.setdefault("clock", "virtual")
    url = sqlite_stores(where)(name) if isinstance(where, Path) else where(name)
    return DurableScheduler(url, **options)


def dag(db: DurableScheduler, edges: dict[str, list[str]]) -> None:
    for t, deps in edges.items():
        db.submit(t, deps, fn=NOOP)


# -- the contract ------------------------------------------------------------------------------

def test_claims_follow_seq_and_the_concurrency_limit(durable_url: StoreURL) -> None:
    db = store(durable_url)
    dag(db, {"a": [], "b": [], "c": [], "d": ["a"]})
    db.start()
    leases = db.claim("w1", limit=5, lease=10)
    assert [(x.task_id, x.attempt) for x in leases] == [("a", 1), ("b", 1)]
    assert db.claim("w2", limit=5) == []  # both slots are taken
    assert db.complete(leases[0], {"n": 1}) is TaskState.SUCCEEDED
    assert [x.task_id for x in db.claim("w2", limit=5)] == ["c"]  # c's seq is before d's
    assert db.result("a") == {"n": 1}
    db.check_invariants()


def test_an_expired_lease_is_reclaimed_as_the_next_attempt_and_the_old_one_is_fenced(
        durable_url: StoreURL) -> None:
    db = store(durable_url, max_concurrency=1)
    dag(db, {"a": [], "b": []})
    db.start()
    (first,) = db.claim("w1", lease=1)
    db.tick(2)  # past the deadline: the next claim expires it
    (second,) = db.claim("w2", lease=1)  # every slot is taken, yet the version is re-claimed
    assert (second.task_id, second.attempt, second.worker) == ("a", 2, "w2")
    with pytest.raises(StaleLeaseError) as refused:
        db.complete(first, "late")
    assert isinstance(refused.value, StaleGenerationError)
    assert (refused.value.attempt, refused.value.current_attempt) == (1, 2)
    with pytest.raises(LeaseLostError):
        db.heartbeat(first)
    assert db.complete(second, "kept") is TaskState.SUCCEEDED
    assert db.complete(second, "kept") is TaskState.SUCCEEDED  # a repeat is answered
    with pytest.raises(StaleLeaseError):
        db.complete(first, "late")
    assert db.result("a") == "kept"
    info = db.info("a")
    assert (info.attempts, info.holder) == (2, None)
    assert [s for s, _ in db.history()].count("Complete") == 0  # not recording
    db.check_invariants()


def test_a_stale_attempt_of_the_worker_that_reclaimed_the_version_is_refused(
        durable_url: StoreURL) -> None:
    """The attempt is the fence: the worker holding the version's live lease is the same one,
    and only the newer attempt's report is accepted."""
    db = store(durable_url, max_concurrency=1)
    dag(db, {"a": []})
    db.start()
    (first,) = db.claim("w", lease=1)
    db.tick(2)
    (second,) = db.claim("w", lease=1)
    assert (second.attempt, second.worker) == (2, "w")
    with pytest.raises(StaleLeaseError):
        db.complete(first, "late")
    assert db.state("a") is TaskState.RUNNING
    assert db.complete(second, "kept") is TaskState.SUCCEEDED
    assert db.result("a") == "kept"


def test_an_expiry_ends_only_the_leases_past_their_deadline(durable_url: StoreURL) -> None:
    """A claim expires the overdue lease and keeps the live one beside it; ``expire()`` with
    nothing overdue changes nothing."""
    db = store(durable_url, max_concurrency=3)
    dag(db, {"a": [], "b": [], "c": []})
    db.start()
    (a,) = db.claim("w1", lease=1)
    (b,) = db.claim("w2", lease=5)
    db.expire()  # nothing is past its deadline
    assert {t: v.holder for t, v in db.leases().items()} == {"a": "w1", "b": "w2"}
    db.tick(2)  # a is past its deadline, b is not
    assert [(x.task_id, x.attempt) for x in db.claim("w3", limit=2)] == [("a", 2), ("c", 1)]
    assert db.leases()["b"].holder == "w2"
    with pytest.raises(LeaseLostError):
        db.heartbeat(a)
    assert db.heartbeat(b) is False
    assert db.complete(b, "b") is TaskState.SUCCEEDED
    assert db.stats().expired == 1
    db.check_invariants()


def test_a_completion_committed_before_the_expiry_wins(durable_url: StoreURL) -> None:
    db = store(durable_url)
    dag(db, {"a": []})
    db.start()
    (lease,) = db.claim("w1", lease=1)
    db.tick(5)  # the deadline passed, but no transaction expired the lease yet
    assert db.complete(lease, 1) is TaskState.SUCCEEDED
    assert db.claim("w2") == []
    assert db.info("a").attempts == 1


def test_heartbeats_keep_a_lease_and_carry_the_cancel_request(durable_url: StoreURL) -> None:
    db = store(durable_url)
    dag(db, {"a": []})
    db.start()
    (lease,) = db.claim("w1", lease=2)
    for _ in range(5):
        db.tick(1)
        assert db.heartbeat(lease) is False
        assert db.claim("w2") == []
    assert db.cancel("a") is TaskState.RUNNING
    assert db.heartbeat(lease) is True
    assert db.acknowledge_cancel(lease) is TaskState.CANCELLED


def test_max_attempts_expiries_fail_the_version_and_block_its_dependents(
        durable_url: StoreURL) -> None:
    db = store(durable_url, max_attempts=2, record=True)
    dag(db, {"a": [], "b": ["a"]})
    db.start()
    db.claim("w1", lease=1)
    db.tick(2)
    (again,) = db.claim("w2", lease=1)
    assert again.attempt == 2
    db.tick(2)
    assert db.claim("w3") == []
    info = db.info("a")
    assert info.state is TaskState.FAILED and "expired 2 times" in (info.error or "")
    assert db.state("b") is TaskState.BLOCKED and db.info("b").blocked_by == "a"
    with pytest.raises(StaleLeaseError):
        db.complete(again)
    assert db.retry("a") == 2
    assert (db.state("a"), db.state("b")) == (TaskState.READY, TaskState.PENDING)
    actions = [a for a, _ in db.history()]
    assert actions.count("Expire") == 2 and actions.count("Reclaim") == 1
    db.check_invariants()


def test_fan_in_readies_the_child_once_when_its_last_parent_succeeds(durable_url: StoreURL) -> None:
    db = store(durable_url, max_concurrency=3)
    dag(db, {"p1": [], "p2": [], "p3": [], "child": ["p1", "p2", "p3"]})
    db.start()
    leases = db.claim("w", limit=3)
    for lease in leases[:2]:
        db.complete(lease)
        assert db.info("child").remaining_deps > 0
    db.complete(leases[2])
    assert db.state("child") is TaskState.READY
    assert [x.task_id for x in db.claim("w", limit=3)] == ["child"]


def test_resubmitting_a_succeeded_dep_makes_its_waiting_dependents_wait_again(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    dag(db, {"a": [], "b": [], "child": ["a", "b"]})
    db.start()
    for lease in db.claim("w", limit=2):
        if lease.task_id == "a":
            db.complete(lease)
    assert db.info("child").remaining_deps == 1
    db.submit("a", fn=NOOP)  # the success it replaces no longer counts
    info = db.info("child")
    assert (info.state, info.remaining_deps) == (TaskState.PENDING, 2)
    db.check_invariants()


def test_after_close_only_expired_versions_are_claimed_again(durable_url: StoreURL) -> None:
    db = store(durable_url, max_concurrency=2)
    dag(db, {"a": [], "b": [], "c": []})
    db.start()
    assert [x.task_id for x in db.claim("w", lease=1)] == ["a"]
    db.close(cancel_pending=False)  # b and c stay ready, and are not claimed any more
    assert db.claim("w", limit=3) == []
    db.tick(2)
    (again,) = db.claim("v", limit=3)  # a's expired lease is taken over
    assert (again.task_id, again.attempt) == ("a", 2)
    assert [db.state(t) for t in "bc"] == [TaskState.READY, TaskState.READY]
    assert db.complete(again) is TaskState.SUCCEEDED
    db.check_invariants()


def test_scheduler_errors_match_the_task_scheduler(durable_url: StoreURL) -> None:
    db = store(durable_url)
    dag(db, {"a": [], "b": ["a"]})
    with pytest.raises(InvalidTransitionError):
        db.claim("w")
    with pytest.raises(CycleError):
        db.submit("a", ["b"], fn=NOOP)
        db.start()
    db.submit("a", [], fn=NOOP)
    db.start()
    with pytest.raises(UnknownDependencyError):
        db.submit("c", ["nope"], fn=NOOP)
    before = db.snapshot()
    with pytest.raises(CycleError) as cycle:
        db.submit("a", ["b"], fn=NOOP)
    assert cycle.value.cycle[0] == cycle.value.cycle[-1] == "a"
    # Both refusals are counted, though each refused call's transaction was rolled back.
    assert db.stats().cycles_reported == 2 and db.snapshot() == before
    (lease,) = db.claim("w")
    with pytest.raises(TaskRunningError):
        db.submit("a", fn=NOOP)
    with pytest.raises(UnknownTaskError):
        db.state("zzz")
    with pytest.raises(InvalidTransitionError):
        db.retry("b")
    db.fail(lease, ValueError("x"))
    assert db.state("b") is TaskState.BLOCKED
    assert db.info("a").error == "ValueError: x"
    report = db.close()
    assert report.failed == ("a",) and report.blocked == ("b",)
    with pytest.raises(SchedulerClosedError):
        db.submit("z", fn=NOOP)
    with pytest.raises(SchedulerClosedError):
        db.retry("a")
    db.check_invariants()


@pytest.mark.parametrize("call", [
    lambda db: db.submit("", fn=NOOP),
    lambda db: db.submit(1, fn=NOOP),
    lambda db: db.submit("x", "ab", fn=NOOP),
    lambda db: db.submit("x", ["a", "a"], fn=NOOP),
    lambda db: db.submit("x", ["x"], fn=NOOP),
    lambda db: db.submit("x", fn="no colon"),
    lambda db: db.submit("x", fn="tests.durable.jobs:missing"),
    lambda db: db.submit("x", fn="no_such_module_here:f"),
    lambda db: db.submit("x", fn=lambda: None),
    lambda db: db.submit("x", fn=db.stats),
    lambda db: db.submit("x", fn=NOOP, args=[1]),
    lambda db: db.submit("x", fn=NOOP, args={"v": object()}),
    lambda db: db.submit("x", fn=NOOP, args={"v": float("nan")}),
    lambda db: db.submit("x", fn=NOOP, args={1: 2}),
    lambda db: db.submit("x", fn=NOOP, args={"v": "\ud800"}),
    lambda db: db.submit("\ud800", fn=NOOP),
    lambda db: db.claim(""),
    lambda db: db.claim("w", limit=0),
    lambda db: db.claim("w", limit=True),
    lambda db: db.claim("w", lease=0),
    lambda db: db.claim("w", lease=float("inf")),
    lambda db: db.close(cancel_pending="no"),
    lambda db: db.heartbeat(("a", 1, 1)),
    lambda db: db.complete(Lease("a", 1, 1, 0.0, NOOP, {}, "w"), object()),
    lambda db: db.tick(-1),
    lambda db: db.wait(timeout="x"),
])
def test_bad_input_is_refused_and_changes_nothing(durable_url: StoreURL, call: Any) -> None:
    db = store(durable_url)
    dag(db, {"a": []})
    db.start()
    db.claim("w")
    before = (db.snapshot(), db.leases(), db.stats())
    with pytest.raises(InvalidArgumentError):
        call(db)
    assert (db.snapshot(), db.leases(), db.stats()) == before


def test_the_store_belongs_to_its_creator_settings(durable_url: StoreURL) -> None:
    db = store(durable_url, max_concurrency=3)
    url = db.url
    with pytest.raises(InvalidArgumentError, match="max_concurrency=3"):
        DurableScheduler(url, max_concurrency=4)
    again = DurableScheduler(url)
    assert (again.max_concurrency, again.clock) == (3, "virtual")
    with pytest.raises(StoreError, match=r"no store there \(give max_concurrency"):
        DurableScheduler(durable_url("new.db"))


def test_the_wall_clock_store_refuses_tick(durable_url: StoreURL) -> None:
    db = store(durable_url, clock="wall")
    with pytest.raises(InvalidTransitionError):
        db.tick(1)
    assert db.now() > 1e9  # Unix seconds from SQLite's own clock


# -- files -------------------------------------------------------------------------------------

def _digest(path: Path) -> bytes:
    return path.read_bytes()


@pytest.mark.parametrize("content", [b"hello, not a database\n" * 10,
                                     b"SQLite format 3\x00" + b"\x00" * 84 + b"garbage" * 100])
def test_a_foreign_or_corrupt_file_is_refused_and_left_untouched(tmp_path: Path,
                                                                 content: bytes) -> None:
    path = tmp_path / "foreign.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match=r"untouched|not a"):
        DurableScheduler(f"sqlite:///{path}", max_concurrency=1)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]


def test_another_programs_sqlite_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        DurableScheduler(f"sqlite:///{path}", max_concurrency=1)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = store(tmp_path)
    db.release()
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        store(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_a_read_only_store_gives_a_clear_error(tmp_path: Path) -> None:
    db = store(tmp_path)
    dag(db, {"a": []})
    db.release()
    for p in tmp_path.iterdir():
        p.chmod(stat.S_IRUSR)
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(StoreError):
            reopened = store(tmp_path)
            reopened.submit("b", fn=NOOP)
    finally:
        tmp_path.chmod(stat.S_IRWXU)


def test_a_read_only_connection_writes_nothing_half(tmp_path: Path) -> None:
    """SQLite's query_only pragma makes a real read-only connection, even for root."""
    db = store(tmp_path)
    dag(db, {"a": [], "b": ["a"]})
    db.start()
    before = db.snapshot()
    db._store._conn.execute("PRAGMA query_only = ON")  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match=r"read-only|readonly"):
        db.submit("c", ["a"], fn=NOOP)
    db._store._conn.execute("PRAGMA query_only = OFF")  # type: ignore[attr-defined]
    assert db.snapshot() == before
    db.check_invariants()


def test_a_full_disk_fails_the_step_whole(tmp_path: Path) -> None:
    """A store whose file may not grow (max_page_count) behaves as on a full disk."""
    db = store(tmp_path)
    db.start()
    conn = db._store._conn  # type: ignore[attr-defined]
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    big = {"blob": "x" * 200_000}
    with pytest.raises(StoreError, match="full"):
        db.submit("a", fn=NOOP, args=big)
    assert db.snapshot().tasks == {}
    db.check_invariants()


# -- refinement: the recorded history is a behaviour of Scheduler.tla ---------------------------

IDS = ("a", "b", "c")


class DurableRefinement(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile
        self.dir = tempfile.TemporaryDirectory()
        self.db = DurableScheduler(f"sqlite:///{self.dir.name}/r.db", max_concurrency=2,
                                   max_attempts=2, clock="virtual", record=True)
        self.check = HistoryCheck(2, 2)
        self.held: list[Lease] = []

    def teardown(self) -> None:
        self.db.release()
        self.dir.cleanup()

    def _call(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except SchedulerError:
            return None

    @rule(t=st.sampled_from(IDS), deps=st.sets(st.sampled_from(IDS), max_size=2))
    def submit(self, t: str, deps: set[str]) -> None:
        self._call(self.db.submit, t, sorted(deps - {t}), fn=NOOP)

    @rule()
    def start(self) -> None:
        self._call(self.db.start)

    @rule(w=st.sampled_from(("w1", "w2")), limit=st.integers(1, 3))
    def claim(self, w: str, limit: int) -> None:
        leases = self._call(self.db.claim, w, limit=limit, lease=1)
        self.held.extend(leases or [])

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 10), how=st.sampled_from(("complete", "fail", "acknowledge_cancel",
                                                     "heartbeat")))
    def report(self, i: int, how: str) -> None:
        lease = self.held[i % len(self.held)]
        try:
            getattr(self.db, how)(lease)
        except (StaleLeaseError, LeaseLostError):
            self.held.remove(lease)

    @rule(t=st.sampled_from(IDS))
    def cancel(self, t: str) -> None:
        self._call(self.db.cancel, t)

    @rule(t=st.sampled_from(IDS))
    def retry(self, t: str) -> None:
        self._call(self.db.retry, t)

    @rule(c=st.booleans())
    def close(self, c: bool) -> None:
        self._call(self.db.close, c)

    @rule()
    def tick(self) -> None:
        self.db.tick(1)

    @invariant()
    def refines_the_scheduler(self) -> None:
        for action, params in self.db.history()[self.check.steps:]:
            self.check.step(action, params)
        assert self.check.problems == []
        assert self.db.snapshot() == self.check.model.snapshot()
        self.db.check_invariants()
        for t, view in self.db.leases().items():
            assert view.attempt <= 2, t


TestDurableRefinement = DurableRefinement.TestCase
TestDurableRefinement.settings = settings(max_examples=60, stateful_step_count=30,
                                          deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])


def test_the_refinement_check_catches_a_store_that_forgets_the_fan_in(tmp_path: Path,
                                                                      monkeypatch: Any) -> None:
    """Break the fan-in count on purpose: the refinement check must see it."""
    import refsched.durable.scheduler as module

    original = module.DurableScheduler._end

    def no_fan_in(self: Any, lease: Lease, call: str, action: str, state: str,
                  **kw: Any) -> TaskState:
        if state != "succeeded":
            return original(self, lease, call, action, state, **kw)
        with self._store.transaction() as tx:
            tx.run("UPDATE task SET state = 'succeeded', holder = NULL, ended_attempt = ? "
                   "WHERE id = ?", (lease.attempt, lease.task_id))
            self._step(tx, "Complete", w=lease.worker, t=lease.task_id, g=lease.generation,
                       a=lease.attempt)
        return TaskState.SUCCEEDED

    monkeypatch.setattr(module.DurableScheduler, "_end", no_fan_in)
    db = store(tmp_path, record=True)
    dag(db, {"a": [], "b": ["a"]})
    db.start()
    (lease,) = db.claim("w")
    db.complete(lease)
    check = check_history(db.history(), max_concurrency=2, max_attempts=3,
                          final=db.snapshot())
    assert check.problems == ["the store's final state is not the one its history leads to"]


def test_the_history_check_rejects_a_stale_completion_and_an_unconditional_expiry() -> None:
    good = [("Submit", {"t": "a", "D": []}), ("Start", {}), ("Claim", {"w": "w1", "k": 1}),
            ("Tick", {}), ("Expire", {"t": "a"}), ("Reclaim", {"w": "w2", "t": "a"}),
            ("Complete", {"w": "w2", "t": "a", "g": 1, "a": 2})]
    assert check_history(good, max_concurrency=1, max_attempts=3).problems == []
    stale = [*good[:6], ("Complete", {"w": "w1", "t": "a", "g": 1, "a": 1})]
    assert "OnlyCurrentAttemptEnds" in check_history(stale, max_concurrency=1,
                                                     max_attempts=3).problems[0]
    twice = [*good, ("Complete", {"w": "w2", "t": "a", "g": 1, "a": 2})]
    assert check_history(twice, max_concurrency=1, max_attempts=3).problems
    late_expiry = [*good, ("Expire", {"t": "a"})]
    assert "not conditional" in check_history(late_expiry, max_concurrency=1,
                                              max_attempts=3).problems[0]
    assert check_history([], max_concurrency=1, max_attempts=3).problems


def test_history_rows_are_json(tmp_path: Path) -> None:
    db = store(tmp_path, record=True)
    dag(db, {"a": []})
    db.start()
    conn = sqlite3.connect(tmp_path / "s.db")
    rows = conn.execute("SELECT action, params FROM step ORDER BY n").fetchall()
    assert [(a, json.loads(p)) for a, p in rows] == [
        ("Submit", {"t": "a", "D": [], "p": 0, "d": 0}), ("Start", {})]
