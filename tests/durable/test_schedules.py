"""Recurring schedules in a durable store, on SQLite and on PostgreSQL: every slot whose time
has come gets one decision (docs/time.md), by whichever process next claims, ticks or changes a
schedule, and nothing of a schedule lives outside the store. Every store records its history,
checked at the end of each test against the durable spec and the schedule's model; and the
check reports the histories broken on purpose at the end of this file."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.errors import InvalidArgumentError, InvalidTransitionError, UnknownTaskError
from refsched.verify.durable.schedule_history import check_schedule_history
from tests.conftest import StoreURL
from tests.durable.schedule_support import checked_history
from tests.durable.support import ROOT, wait_for

NOOP = "tests.durable.jobs:noop"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


_STORES: list[str] = []  # the URLs of the stores the running test made


@pytest.fixture(autouse=True)
def _history_checked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each store a test makes records its history; at the end of the test it is checked
    (before its database goes: set up after it)."""
    if "durable_url" in request.fixturenames:
        request.getfixturevalue("durable_url")
    _STORES.clear()
    yield
    for url in _STORES:
        checked_history(url)


def store(urls: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 4)
    options.setdefault("clock", "virtual")
    options.setdefault("record", True)
    db = DurableScheduler(urls(name), **options)
    db.start()
    _STORES.append(urls(name))
    return db


def decisions(db: DurableScheduler, name: str) -> list[tuple[float, str, str | None]]:
    """The decided slots of ``name``, oldest first: (slot, decision, run's task id)."""
    (info,) = [s for s in db.schedules(limit=1000) if s.name == name]
    return [(s.at, s.decision, s.task) for s in reversed(info.slots)]


def run_id(name: str, seconds: float) -> str:
    return f"{name}@{(EPOCH + timedelta(seconds=seconds)).replace(tzinfo=None).isoformat()}Z"


def finish(db: DurableScheduler, task: str) -> None:
    """Claim and complete ``task``'s version (it must be the only one ready)."""
    leases = db.claim("w", limit=4)
    assert [lease.task_id for lease in leases] == [task]
    db.complete(leases[0])


# -- the decisions -----------------------------------------------------------------------------

def test_skip_skips_a_slot_while_a_run_is_unfinished(durable_url: StoreURL) -> None:
    db = store(durable_url)
    assert db.schedule("s", fn=NOOP, every=10) is True
    assert decisions(db, "s") == [(0.0, "run", run_id("s", 0))]  # the first slot is now
    db.tick(10)
    assert decisions(db, "s")[1:] == [(10.0, "skipped", None)]
    finish(db, run_id("s", 0))
    db.tick(10)
    assert decisions(db, "s")[2:] == [(20.0, "run", run_id("s", 20))]
    assert db.info(run_id("s", 20)).args == {}


def test_skip_counts_a_claimed_run_as_unfinished(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("s", fn=NOOP, every=10)
    (lease,) = db.claim("w")  # the run of slot 0 is running
    db.tick(10)
    assert decisions(db, "s")[1:] == [(10.0, "skipped", None)]
    db.complete(lease)
    db.tick(10)
    assert decisions(db, "s")[2:] == [(20.0, "run", run_id("s", 20))]


def test_a_slot_exactly_as_old_as_the_catchup_still_runs(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("c", fn=NOOP, every=10, catchup=10)
    finish(db, run_id("c", 0))
    db.tick(20)  # slot 10 is 10 s old: not older than the catch-up, so it runs
    assert decisions(db, "c")[1:] == [(10.0, "run", run_id("c", 10)), (20.0, "skipped", None)]


def test_buffer_one_holds_one_slot_and_runs_it_when_the_run_ends(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("b", fn=NOOP, every=10, overlap="buffer_one")
    db.tick(10)  # slot 10 held
    db.tick(10)  # slot 20 skipped: one is held already
    (info,) = db.schedules()
    assert info.held_slot == 10.0
    assert decisions(db, "b") == [(0.0, "run", run_id("b", 0)), (20.0, "skipped", None)]
    finish(db, run_id("b", 0))
    db.tick(1)  # the run ended: the held slot runs now, whatever its age
    assert decisions(db, "b") == [(0.0, "run", run_id("b", 0)), (10.0, "run", run_id("b", 10)),
                                  (20.0, "skipped", None)]
    assert db.schedules()[0].held_slot is None


def test_allow_runs_every_slot(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("a", fn=NOOP, every=10, overlap="allow")
    db.tick(10)
    db.tick(10)
    assert [d for _, d, _ in decisions(db, "a")] == ["run", "run", "run"]
    assert len(db.claim("w", limit=4)) == 3


def test_after_downtime_slots_older_than_catchup_are_missed(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("c", fn=NOOP, every=10, catchup=25)
    finish(db, run_id("c", 0))
    db.release()
    again = DurableScheduler(durable_url("s.db"))
    again.tick(100)  # a store closed for 100 s, then reopened: every slot it owes is decided
    got = decisions(again, "c")
    assert got[1:8] == [(float(s), "missed", None) for s in range(10, 80, 10)]
    assert got[8:] == [(80.0, "run", run_id("c", 80)), (90.0, "skipped", None),
                       (100.0, "skipped", None)]


def test_a_downtime_longer_than_a_listing_records_its_stretches(durable_url: StoreURL) -> None:
    """Past 1000 alike decisions the rest of a stretch is decided in one step: the history
    records it as one Decide of ``count`` slots, and the check judges it (the fixture)."""
    db = store(durable_url)
    db.schedule("m", fn=NOOP, every=1, catchup=5)
    db.schedule("k", fn=NOOP, every=1)
    db.tick(3000)
    stretches = {p["schedule"]: (p["slot"], p["decision"], p["count"], p["until"])
                 for a, p in db.history() if a == "Decide" and "count" in p}
    assert stretches == {"m": (1001.0, "missed", 1994, 2995.0),
                         "k": (1001.0, "skipped", 2000, 3001.0)}


def test_pause_skips_and_resume_runs_again(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("p", fn=NOOP, every=10)
    finish(db, run_id("p", 0))
    db.pause("p")
    db.tick(10)
    assert decisions(db, "p")[-1] == (10.0, "skipped", None)
    db.resume("p")
    db.tick(10)
    assert decisions(db, "p")[-1] == (20.0, "run", run_id("p", 20))


def test_a_claim_decides_the_slots_whose_time_has_come(durable_url: StoreURL) -> None:
    db = store(durable_url, clock="wall")
    start = datetime.now(UTC) + timedelta(seconds=0.3)
    db.schedule("w", fn=NOOP, every=3600, start=start)
    assert db.claim("w1") == []  # the first slot has not come
    wait_for(lambda: datetime.now(UTC) > start + timedelta(seconds=0.05), 5, "the slot")
    (lease,) = db.claim("w1")  # no tick: the claim decided the slot, then took its run
    assert lease.task_id == run_id("w", start.timestamp())
    assert decisions(db, "w") == [(start.timestamp(), "run", lease.task_id)]


def test_a_closed_store_decides_no_slot(durable_url: StoreURL) -> None:
    """A closed store takes no submission: a run decided there would have no version, so its
    slots stay owed (and the history check sees no run without its Submit)."""
    db = store(durable_url)
    db.close()
    db.schedule("late", fn=NOOP, every=10)
    db.tick(30)
    db.pause("late")
    (info,) = db.schedules()
    assert info.slots == () and info.next_slot == 0.0 and info.paused
    assert db.stats().submitted == 0


def test_unschedule_stops_the_slots_and_keeps_the_runs(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("u", fn=NOOP, every=10)
    db.unschedule("u")
    db.tick(50)
    assert db.schedules() == []
    assert db.state(run_id("u", 0)).value == "ready"
    with pytest.raises(UnknownTaskError):
        db.unschedule("u")
    with pytest.raises(UnknownTaskError):
        db.pause("u")


def test_a_cron_schedule_runs_at_its_times_in_its_zone(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.schedule("daily", fn=NOOP, cron="30 2 * * *", timezone="Europe/Paris")
    (info,) = db.schedules()
    # 02:30 in Paris on 1 January 1970 is 01:30 UTC (CET, UTC+1).
    assert info.next_slot == 5400.0
    db.tick(5400)
    assert decisions(db, "daily") == [(5400.0, "run", run_id("daily", 5400))]


def test_a_cron_schedule_keeps_each_pass_of_a_repeated_hour(durable_url: StoreURL) -> None:
    """``30 * * * *`` in London on 25 October 2026: 01:30 comes twice (BST, then GMT), and
    each pass is a slot of its own (docs/time.md)."""
    db = store(durable_url)
    start = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)
    db.schedule("hourly", fn=NOOP, cron="30 * * * *", timezone="Europe/London", start=start,
                overlap="allow")
    db.tick(start.timestamp())
    for _ in range(6):
        db.tick(3600)
    got = [datetime.fromtimestamp(at, UTC).strftime("%H:%M") for at, _, _ in
           decisions(db, "hourly")]
    assert got == ["22:30", "23:30", "00:30", "01:30", "02:30", "03:30"]


# -- declaring ---------------------------------------------------------------------------------

def test_declaring_the_same_schedule_twice_changes_nothing(durable_url: StoreURL) -> None:
    db = store(durable_url)
    assert db.schedule("s", fn=NOOP, every=10, args={"x": 1}) is True
    assert db.schedule("s", fn=NOOP, every=10, args={"x": 1}) is False
    with pytest.raises(InvalidTransitionError, match="unschedule it first"):
        db.schedule("s", fn=NOOP, every=20)
    assert len(decisions(db, "s")) == 1


@pytest.mark.parametrize("bad", [
    {"every": 0}, {"every": -1}, {"every": float("nan")}, {"every": True},
    {"every": 10, "cron": "* * * * *"}, {}, {"cron": "61 * * * *"}, {"cron": "* * *"},
    {"every": 10, "timezone": "Mars/Olympus"}, {"every": 10, "overlap": "queue"},
    {"every": 10, "catchup": -1}, {"every": 10, "priority": 1.5},
    {"every": 10, "priority": True}, {"every": 10, "start": datetime(2026, 1, 1)},
    {"every": 10, "args": [1]}, {"every": 10, "fn": "no_module_here:f"},
])
def test_bad_arguments_are_refused_and_store_nothing(durable_url: StoreURL,
                                                     bad: dict[str, Any]) -> None:
    db = store(durable_url)
    kwargs: dict[str, Any] = {"fn": NOOP, **bad}
    with pytest.raises(InvalidArgumentError):
        db.schedule("s", **kwargs)
    assert db.schedules() == []
    assert db.stats().submitted == 0


# -- several processes -------------------------------------------------------------------------

_DECIDER = """
import sys, time
from refsched.durable import DurableScheduler
db = DurableScheduler(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    for lease in db.claim(sys.argv[3], limit=4):
        db.complete(lease)
    db.tick()
db.release()
"""


def test_processes_deciding_the_same_slots_decide_each_once(durable_url: StoreURL) -> None:
    db = store(durable_url, clock="wall", max_concurrency=8)
    db.schedule("fast", fn=NOOP, every=0.02, overlap="allow")
    deciders = [subprocess.Popen([sys.executable, "-c", _DECIDER, durable_url("s.db"), "2.0",
                                  f"w{i}"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
                for i in range(4)]
    for p in deciders:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    db.tick()
    got = decisions(db, "fast")
    slots = [at for at, _, _ in got]
    assert len(got) >= 50
    assert slots == sorted(set(slots))  # each slot once, in order
    gaps = {round(b - a, 6) for a, b in itertools.pairwise(slots)}
    assert gaps == {0.02}  # none skipped over
    runs = {task for _, d, task in got if d == "run"}
    assert len(runs) == len(got)  # allow: every slot ran, each as a task id of its own
    assert runs <= {v.task_id for v in db.view().versions}


# -- the command -------------------------------------------------------------------------------

def test_refsched_schedules_lists_each_slot_and_its_decision(durable_url: StoreURL,
                                                             tmp_path: Path) -> None:
    db = store(durable_url)
    db.schedule("s", fn=NOOP, every=10)
    db.tick(10)
    url = durable_url("s.db")
    out = subprocess.run([sys.executable, "-m", "refsched", "schedules", "--db", url, "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["name"] == "s" and row["next_slot"] == 20.0
    assert [(s["at"], s["decision"], s["task"]) for s in row["slots"]] == [
        (10.0, "skipped", None), (0.0, "run", run_id("s", 0))]
    text = subprocess.run([sys.executable, "-m", "refsched", "schedules", "--db", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert text.returncode == 0 and "skipped" in text.stdout and run_id("s", 0) in text.stdout
    bad = subprocess.run([sys.executable, "-m", "refsched", "schedules", "--db", url,
                          "--slots", "-1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_an_idle_worker_runs_each_slot_as_its_time_comes(durable_url: StoreURL) -> None:
    """A worker process with nothing to do wakes for the next slot (its wait is the store's
    time to that slot, not only its poll): a schedule of 0.3 s runs slot after slot."""
    from tests.durable.support import start_worker

    db = store(durable_url, clock="wall")
    db.schedule("tick", fn=NOOP, every=0.3, overlap="allow")
    worker = start_worker(durable_url("s.db"), "--poll", "5")
    try:
        wait_for(lambda: db.stats().succeeded >= 4, 60, "four runs")
    finally:
        worker.terminate()
        worker.wait(30)
    got = decisions(db, "tick")
    assert [d for _, d, _ in got] == ["run"] * len(got)
    ended = {v.task_id for v in db.view().versions if v.state.value == "succeeded"}
    assert {task for _, _, task in got[:4]} <= ended


# -- the history check catches what is broken on purpose -----------------------------------------

def _recorded(tmp_path: Path, **policy: Any) -> list[tuple[str, dict[str, Any], float]]:
    """A real recorded history: schedule ``h`` every 10 s, its first run finished, 30 s more."""
    db = DurableScheduler(f"sqlite:///{tmp_path / 'h.db'}", max_concurrency=4, clock="virtual",
                          record=True)
    db.start()
    db.schedule("h", fn=NOOP, every=10, **policy)
    finish(db, run_id("h", 0))
    db.tick(10)  # slot 10 runs
    db.tick(10)  # slot 20 skipped (skip) while the run of slot 10 is unfinished
    db.tick(10)
    history = db.timed_history()
    db.release()
    return history


def _problems(history: list[tuple[str, dict[str, Any], float]]) -> list[str]:
    return check_schedule_history(history, max_concurrency=4, max_attempts=3).problems


def _index(history: list[tuple[str, dict[str, Any], float]], slot: float) -> int:
    return next(i for i, (a, p, _) in enumerate(history)
                if a == "Decide" and p["slot"] == slot)


def test_the_history_check_accepts_a_recorded_history(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    decided = [(p["slot"], p["decision"]) for a, p, _ in history if a == "Decide"]
    assert decided == [(0.0, "run"), (10.0, "run"), (20.0, "skipped"), (30.0, "skipped")]
    assert _problems(history) == []


def test_the_history_check_reports_a_slot_decided_twice(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    i = _index(history, 20.0)
    history.insert(i + 1, history[i])
    assert any("decided before" in p for p in _problems(history))


def test_the_history_check_reports_a_skip_that_overlaps(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    i = _index(history, 20.0)
    action, params, at = history[i]
    history[i:i + 1] = [(action, {**params, "decision": "run"}, at),
                        ("Submit", {"t": run_id("h", 20), "D": []}, at)]
    assert any("the model decides 'skipped'" in p for p in _problems(history))


def test_the_history_check_reports_a_missed_slot_within_the_catchup(tmp_path: Path) -> None:
    history = _recorded(tmp_path, catchup=5)
    i = _index(history, 30.0)
    action, params, at = history[i]
    history[i] = (action, {**params, "decision": "missed"}, at)  # decided at 30: age 0 <= 5
    assert any("the model decides 'skipped'" in p for p in _problems(history))


def test_the_history_check_reports_a_slot_passed_over(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    del history[_index(history, 20.0)]
    assert any("passes over the next slot, 20.0" in p for p in _problems(history))


def test_the_history_check_reports_slots_passed_over_as_a_short_stretch(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    i = _index(history, 20.0)
    action, params, at = history[i]
    del history[_index(history, 30.0)]
    history[i] = (action, {**params, "count": 2, "until": 40.0}, at)
    assert any("only past 1000 alike decisions" in p for p in _problems(history))


def test_the_history_check_reports_a_run_decided_and_not_submitted(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    i = _index(history, 10.0)
    assert history[i + 1][0] == "Submit"
    del history[i + 1]
    assert any("is not submitted in its transaction" in p for p in _problems(history))


def test_the_history_check_reports_a_run_submitted_twice(tmp_path: Path) -> None:
    history = _recorded(tmp_path)
    i = _index(history, 10.0)
    history.insert(i + 2, history[i + 1])
    assert any("a second Submit of the run" in p for p in _problems(history))


def test_the_history_check_reports_a_held_slot_released_while_a_run_is_unfinished(
        tmp_path: Path) -> None:
    db = DurableScheduler(f"sqlite:///{tmp_path / 'b.db'}", max_concurrency=4, clock="virtual",
                          record=True)
    db.start()
    db.schedule("b", fn=NOOP, every=10, overlap="buffer_one")
    db.tick(10)  # slot 10 held
    finish(db, run_id("b", 0))
    db.tick(1)  # released
    history = db.timed_history()
    db.release()
    assert _problems(history) == []
    (i,) = [i for i, (a, _, _) in enumerate(history) if a == "Release"]
    complete = next(j for j, (a, _, _) in enumerate(history) if a == "Complete")
    history.insert(complete, history.pop(i))  # released before the run ended
    history.insert(complete + 1, history.pop(i + 1))  # its Submit with it
    assert any("the model does not release it" in p for p in _problems(history))


def test_a_store_older_than_schedules_is_listed_with_none(durable_url: StoreURL,
                                                          tmp_path: Path) -> None:
    """``refsched schedules`` reads a version 2 store as it is (read-only: no migration) and
    says it has no schedules, rather than failing on a table it does not have."""
    from tests.durable.support import downgrade

    db = store(durable_url)
    url = durable_url("s.db")
    downgrade(db, url, tmp_path / "s.db", 2)
    out = subprocess.run([sys.executable, "-m", "refsched", "schedules", "--db", url],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "no schedules"), out.stderr
    reader = DurableScheduler(url, read_only=True)
    assert reader.schedules() == [] and reader.next_due() is None
    reader.release()
