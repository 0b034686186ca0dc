"""Delayed and prioritised versions of the durable scheduler (docs/time.md), on both stores.

Due times on the store's clock (run_at, delay, clamped to now), the claim order (priority,
aging, strict priority), retry, the store's aging setting, a store of the previous schema
version, what status and show say, and idle workers that wait for the next due time instead
of polling for it (and, on PostgreSQL, are woken by a delayed submit).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from refsched.durable import DurableRunner, DurableScheduler
from refsched.durable.scheduler import AGING, NOT_LOOKED, TimeView
from refsched.durable.status import main as status_main
from refsched.durable.status import show, status
from refsched.durable.store import SCHEMA_VERSION
from refsched.durable.worker import Worker
from refsched.errors import InvalidArgumentError, StoreError
from refsched.types import TaskState
from tests.conftest import StoreURL, postgres_stores
from tests.durable.support import downgrade

NOOP = "tests.durable.jobs:noop"
UTC = dt.UTC


def store(durable_url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 2)
    options.setdefault("clock", "virtual")
    return DurableScheduler(durable_url(name), **options)


def at(seconds: float) -> dt.datetime:
    """The instant ``seconds`` on the store's clock (Unix seconds; a virtual clock starts at 0)."""
    return dt.datetime.fromtimestamp(seconds, tz=UTC)


def claim_one_by_one(db: DurableScheduler, n: int) -> list[str]:
    """The ids ``n`` claims of one version each take, each completed before the next."""
    order = []
    for _ in range(n):
        (lease,) = db.claim("w")
        order.append(lease.task_id)
        db.complete(lease)
    return order


def everything(db: DurableScheduler) -> tuple[Any, ...]:
    return db.snapshot(), db.leases(), db.stats(), db.times(), db.view().settings


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda db: db.submit("x", fn=NOOP, run_at=dt.datetime(2030, 1, 1)),  # naive
    lambda db: db.submit("x", fn=NOOP, run_at="2030-01-01T00:00:00Z"),
    lambda db: db.submit("x", fn=NOOP, run_at=dt.date(2030, 1, 1)),
    lambda db: db.submit("x", fn=NOOP, run_at=1e9),
    lambda db: db.submit("x", fn=NOOP, delay=-1),
    lambda db: db.submit("x", fn=NOOP, delay=float("nan")),
    lambda db: db.submit("x", fn=NOOP, delay=float("inf")),
    lambda db: db.submit("x", fn=NOOP, delay=True),
    lambda db: db.submit("x", fn=NOOP, delay="5"),
    lambda db: db.submit("x", fn=NOOP, delay=1, run_at=at(5)),
    lambda db: db.submit("x", fn=NOOP, priority=True),
    lambda db: db.submit("x", fn=NOOP, priority=1.0),
    lambda db: db.submit("x", fn=NOOP, priority="1"),
    lambda db: db.submit("x", fn=NOOP, priority=None),
    lambda db: db.submit("x", fn=NOOP, priority=2**31),
    lambda db: db.submit("x", ["a"], fn=NOOP, priority=-2**31 - 1),
    lambda db: db.submit("a", fn=NOOP, if_absent=True, delay=-1),
], ids=lambda _: "")
def test_bad_time_arguments_are_refused_and_change_nothing(durable_url: StoreURL,
                                                           call: Callable[[Any], Any]) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP, delay=3, priority=2)
    db.start()
    before = everything(db)
    with pytest.raises(InvalidArgumentError):
        call(db)
    assert everything(db) == before


@pytest.mark.parametrize("aging", [0, -1.0, float("inf"), float("nan"), True, "60", [60]])
def test_a_bad_aging_is_refused_and_creates_nothing(durable_url: StoreURL, aging: Any,
                                                    tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="aging"):
        store(durable_url, aging=aging)
    with pytest.raises(StoreError, match="no store"):
        DurableScheduler(durable_url("s.db"))
    assert not (tmp_path / "s.db").exists()


# -- due times -----------------------------------------------------------------------------------

def test_a_version_is_due_at_run_at_or_after_delay_or_now(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.tick(100)
    db.submit("now", fn=NOOP)
    db.submit("later", fn=NOOP, delay=7.5)
    db.submit("at", fn=NOOP, run_at=at(130))
    db.submit("at_other_zone", fn=NOOP,
              run_at=at(140).astimezone(dt.timezone(dt.timedelta(hours=-5))))
    assert {t: v.due for t, v in db.times().items()} == {
        "now": 100.0, "later": 107.5, "at": 130.0, "at_other_zone": 140.0}
    assert db.info("later").due == 107.5 and db.info("later").priority == 0


def test_a_run_at_in_the_past_is_due_now_and_queues_behind_what_waits(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.tick(100)
    db.submit("first", fn=NOOP)
    db.tick(1)
    db.submit("past", fn=NOOP, run_at=at(10))
    assert db.info("past").due == 101.0
    db.start()
    assert claim_one_by_one(db, 2) == ["first", "past"]


def test_a_version_is_not_claimed_one_tick_before_its_due_time(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("late", fn=NOOP, delay=5)
    db.start()
    assert db.claim("w") == [] and db.next_due() == 5.0
    db.tick(4)
    assert db.next_due() == 1.0
    db.submit("filler", fn=NOOP)  # eligible: the claim below looks, and must leave "late"
    assert [lease.task_id for lease in db.claim("w", limit=2)] == ["filler"]
    assert db.state("late") is TaskState.READY
    db.tick(1)
    assert db.next_due() is None
    assert [lease.task_id for lease in db.claim("w", limit=2)] == ["late"]


def test_a_claim_that_takes_nothing_tells_the_next_due_time(durable_url: StoreURL) -> None:
    # What an idle worker waits for, read in the claim's own look: next_due() would say the same.
    db = store(durable_url)
    db.submit("late", fn=NOOP, delay=5)
    db.start()
    assert db.claim_and_due("w") == ([], 5.0) and db.next_due() == 5.0
    db.tick(4)
    assert db.claim_and_due("w") == ([], 1.0)
    db.tick(1)
    taken, due_in = db.claim_and_due("w", limit=2)
    assert [lease.task_id for lease in taken] == ["late"] and due_in is NOT_LOOKED
    assert db.claim_and_due("w") == ([], None) and db.next_due() is None


def test_a_claim_after_a_full_one_skips_the_first_look_on_a_store_with_a_claim_step(
        durable_url: StoreURL, monkeypatch: pytest.MonkeyPatch) -> None:
    # A busy worker's claim goes straight to the server's claim step (which looks before it
    # locks); an empty answer then carries no due time, and the claim after it looks again.
    db = store(durable_url)
    looks = []
    first_look = db._claimable
    monkeypatch.setattr(db, "_claimable", lambda: looks.append(1) or first_look())
    server = durable_url("probe").startswith("postgresql")
    assert db._store.has_steps is server
    for t in ("a", "b"):
        db.submit(t, fn=NOOP)
    db.submit("late", fn=NOOP, delay=5)
    db.start()
    assert [lease.task_id for lease in db.claim("w")] == ["a"] and len(looks) == 1
    assert [lease.task_id for lease in db.claim("w")] == ["b"]
    assert len(looks) == (1 if server else 2)
    assert db.claim_and_due("w") == ([], NOT_LOOKED if server else 5.0)
    assert db.next_due() == 5.0
    assert db.claim_and_due("w") == ([], 5.0)  # the empty claim ended the busy run
    assert len(looks) == (2 if server else 4)


def test_a_delayed_version_waits_for_its_time_after_its_deps_succeed(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("dep", fn=NOOP)
    db.submit("x", ["dep"], fn=NOOP, delay=10, priority=4)
    db.start()
    assert claim_one_by_one(db, 1) == ["dep"]
    assert db.state("x") is TaskState.READY and db.claim("w") == []
    db.tick(10)
    assert claim_one_by_one(db, 1) == ["x"]


# -- the claim order -----------------------------------------------------------------------------

@pytest.mark.parametrize("aging", [AGING, None])
def test_claims_take_the_highest_priority_first(durable_url: StoreURL,
                                                aging: float | None) -> None:
    db = store(durable_url, aging=aging)
    for t, p in (("low", 0), ("high", 5), ("negative", -3), ("mid", 2)):
        db.submit(t, fn=NOOP, priority=p)
    db.start()
    assert [lease.task_id for lease in db.claim("w", limit=2)] == ["high", "mid"]
    db.release()
    assert {t: v.priority for t, v in store(durable_url).times().items()} == {
        "low": 0, "high": 5, "negative": -3, "mid": 2}


def test_aging_lets_a_version_due_long_ago_outrun_a_higher_priority(
        durable_url: StoreURL) -> None:
    # aging 10 s: keys low 0*10 - 0 = 0, high 5*10 - 100 = -50, low_later 0*10 - 60 = -60
    db = store(durable_url, max_concurrency=1, aging=10.0)
    db.submit("low", fn=NOOP)
    db.tick(60)
    db.submit("low_later", fn=NOOP)
    db.tick(40)
    db.submit("high", fn=NOOP, priority=5)
    db.start()
    assert claim_one_by_one(db, 3) == ["low", "high", "low_later"]


def test_strict_priority_lets_no_wait_outrun_a_higher_priority(durable_url: StoreURL) -> None:
    db = store(durable_url, max_concurrency=1, aging=None)
    db.submit("low", fn=NOOP)
    db.submit("due_late", fn=NOOP, delay=50)
    db.tick(10)
    db.submit("due_early", fn=NOOP)
    db.tick(990)
    db.submit("high", fn=NOOP, priority=1)
    db.start()
    assert db.aging is None
    # then, within one priority, the earliest due first, whatever the submission order
    assert claim_one_by_one(db, 4) == ["high", "low", "due_early", "due_late"]


def test_equal_priorities_and_due_times_are_claimed_in_submission_order(
        durable_url: StoreURL) -> None:
    db = store(durable_url, max_concurrency=1)
    for t in ("c", "a", "b"):
        db.submit(t, fn=NOOP, priority=1)
    db.start()
    assert claim_one_by_one(db, 3) == ["c", "a", "b"]


# -- retry ----------------------------------------------------------------------------------------

def test_retry_makes_the_new_versions_due_now_and_keeps_their_priorities(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("parked", fn=NOOP, delay=1000, priority=3)
    db.submit("child", ["parked"], fn=NOOP, priority=-1)
    db.start()
    db.cancel("parked")  # waiting -> cancelled; child is blocked by it
    db.tick(20)
    db.retry("parked")
    assert db.times() == {"parked": TimeView(20.0, 3), "child": TimeView(20.0, -1)}
    assert [lease.task_id for lease in db.claim("w")] == ["parked"]


# -- the store's setting ------------------------------------------------------------------------

def test_the_aging_belongs_to_the_store(durable_url: StoreURL) -> None:
    strict = store(durable_url, "strict.db", aging=None)
    url = strict.url
    strict.release()
    assert DurableScheduler(url).aging is None
    assert DurableScheduler(url, aging=None).aging is None
    with pytest.raises(InvalidArgumentError, match=r"aging=30\.0\): the store has aging=None"):
        DurableScheduler(url, aging=30)
    slow = store(durable_url, "slow.db", aging=12.5)
    assert DurableScheduler(slow.url).aging == 12.5
    with pytest.raises(InvalidArgumentError, match="aging=None"):
        DurableScheduler(slow.url, aging=None)
    assert store(durable_url, "default.db").aging == AGING == 60.0


def test_a_version_2_store_is_read_as_it_is_and_migrated_by_its_first_writer(
        durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url, max_concurrency=1)
    for t in ("a", "b"):
        db.submit(t, fn=NOOP)
    db.start()
    url = db.url
    downgrade(db, url, tmp_path / "s.db", 2)
    reader = DurableScheduler(url, read_only=True)
    assert reader.view().settings["schema_version"] == 2 and reader.aging == AGING
    assert reader.times() == {"a": TimeView(0.0, 0), "b": TimeView(0.0, 0)}
    assert reader.info("b").due == 0.0
    reader.release()
    writer = DurableScheduler(url)
    assert writer.view().settings["schema_version"] == SCHEMA_VERSION and writer.aging == AGING
    writer.tick(5)
    writer.submit("new", fn=NOOP)
    writer.submit("delayed", fn=NOOP, delay=2)
    # The stored versions, due at 0, keep their place ahead of what came since.
    assert claim_one_by_one(writer, 3) == ["a", "b", "new"]
    assert writer.next_due() == 2.0


def test_a_migrating_writer_may_set_the_aging(durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    url = db.url
    downgrade(db, url, tmp_path / "s.db", 2)
    assert DurableScheduler(url, aging=None).aging is None
    assert DurableScheduler(url).aging is None


# -- what people and the replay read -------------------------------------------------------------

def test_status_and_show_give_due_times_and_priorities(
        durable_url: StoreURL, capsys: pytest.CaptureFixture[str]) -> None:
    db = store(durable_url)
    db.submit("soon", fn=NOOP, delay=4, priority=7)
    db.submit("now", fn=NOOP)
    db.start()
    report = status(db)
    assert report["aging"] == AGING
    assert report["not_yet_due"] == [{"task": "soon", "due": 4.0, "priority": 7,
                                      "seconds_left": 4.0}]
    shown = show(db, "soon")
    assert (shown["due"], shown["due_in_seconds"], shown["priority"]) == (4.0, 4.0, 7)
    assert show(db, "now")["due_in_seconds"] == 0.0
    assert status_main(["--db", db.url]) == 0
    text = capsys.readouterr().out
    assert "aging 60 s" in text and "ready 'soon': due in 4.0 s, priority 7" in text


# -- idle workers ----------------------------------------------------------------------------------

class CountedWorker:
    """A worker of the store at ``url`` on a thread of this process, counting its claims."""

    def __init__(self, url: str, poll: float) -> None:
        self.worker = Worker(url, poll=poll, until_done=True, lease=5.0)
        self.claims = 0
        claim = self.worker.db.claim

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.claims += 1
            return claim(*args, **kwargs)

        self.worker.db.claim = counted  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.worker.run, daemon=True)

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the worker did not finish"


def _lateness(db: DurableScheduler, task_id: str) -> float:
    info = db.info(task_id)
    assert info.state is TaskState.SUCCEEDED and info.claimed_at is not None
    return info.claimed_at - info.due


def test_an_idle_worker_claims_a_delayed_version_when_it_comes_due(
        durable_url: StoreURL) -> None:
    db = store(durable_url, clock="wall")
    db.start()
    worker = CountedWorker(db.url, poll=60.0)
    # Idle, the worker backs off 1 ms, 2 ms, ... towards its 60 s poll: it looks at 2.05 s
    # and next at 4.1 s. Due at 2.2 s, the version is claimed on time only by a wait that
    # ends at its due time.
    db.submit("x", fn=NOOP, delay=2.2)
    worker.thread.start()
    worker.join(30)
    assert 0 <= _lateness(db, "x") < 1.0
    assert worker.claims < 30


def test_a_version_submitted_later_but_due_sooner_is_claimed_first(
        durable_url: StoreURL) -> None:
    db = store(durable_url, clock="wall")
    db.submit("far", fn=NOOP, delay=60)
    db.start()
    # PostgreSQL notifies: a worker sleeps its whole 60 s poll unless woken. SQLite cannot
    # tell a worker of a submit: it looks again every poll.
    notifies = db.notifies
    worker = CountedWorker(db.url, poll=60.0 if notifies else 0.5)
    worker.thread.start()
    # Thirteen looks: the worker now sleeps 4.1 s (PostgreSQL) or 0.5 s (SQLite) before the
    # next (its waits double from 1 ms).
    end = time.monotonic() + 30
    while worker.claims < 13:
        assert time.monotonic() < end, "the worker did not look"
        time.sleep(0.01)
    db.submit("near", fn=NOOP, delay=0.3)
    end = time.monotonic() + 30
    while db.state("near") is not TaskState.SUCCEEDED:
        assert time.monotonic() < end, "the version due sooner was not claimed"
        time.sleep(0.01)
    assert db.state("far") is TaskState.READY
    assert 0 <= _lateness(db, "near") < 2.0
    db.cancel("far")
    db.submit("last", fn=NOOP)  # wakes the worker, which then finds the store done
    worker.join(30)


def test_a_runner_runs_delayed_work_on_its_worker_processes(durable_url: StoreURL) -> None:
    with DurableRunner(durable_url("s.db"), processes=1, max_concurrency=1) as runner:
        runner.submit("later", NOOP, args={"value": 2}, delay=0.5)
        runner.submit("sooner", NOOP, args={"value": 1}, priority=-1)
        runner.start()
        assert runner.wait(timeout=60)
        assert (runner.result("sooner"), runner.result("later")) == (1, 2)
        later = runner.db.info("later")
        assert later.claimed_at is not None and later.claimed_at >= later.due


def test_idle_workers_are_woken_for_a_due_time_and_not_for_work_not_yet_due(
        postgres_url: str) -> None:
    db = store(postgres_stores(postgres_url))
    db.submit("x", fn=NOOP, delay=5)
    db.start()
    idle = DurableScheduler(db.url)
    assert not idle.wait_for_work(0.01)  # listening from here on
    db.submit("y", fn=NOOP, delay=10)
    assert idle.wait_for_work(10)  # a delayed submit: read the next due time again
    listener: Any = idle._store
    listener._listener.execute("SELECT 1")  # every notification sent so far has arrived
    assert idle.claim("w") == [] and idle.next_due() == 5.0
    db.expire()  # a step that wakes only if a claim could take one: none is due
    assert not idle.wait_for_work(0.5)
    db.tick(5)
    assert idle.wait_for_work(10)
    assert [lease.task_id for lease in idle.claim("w")] == ["x"]
    idle.release()
