"""Real faults against the schedules of both stores, on the wall clock unless said: processes
racing for the same slots, processes killed at random inside their decision passes, a store left
alone longer than the catch-up window, a clock stepped forward, a worker paused past its lease
while it runs a slot's run. After each, the store's recorded history is checked against the
durable spec and every schedule decision against the schedule's model
(``refsched.verify.durable.schedule_history``): each slot decided once, none passed over, each
decision the model's in the state it was made in, each run submitted once, with its decision.

Every wait is bounded; random choices are seeded and the seed printed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from refsched.durable import DurableScheduler
from refsched.schedule import Timing
from refsched.types import TaskState
from tests.conftest import StoreURL, cluster_of_its_own
from tests.durable.schedule_support import checked_history
from tests.durable.support import JOBS, ROOT, accepted_ends, log_lines, start_worker, wait_for

NOOP = f"{JOBS}:noop"

# The last test restarts the server: a cluster for this module alone.
postgres_cluster = cluster_of_its_own()

# A process that decides slots as a worker and a keeper of schedules do: claims (each claim
# decides the slots whose time has come first), completes what it took, ticks.
_DECIDER = """
import sys, time
from refsched.durable import DurableScheduler
db = DurableScheduler(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    for lease in db.claim(sys.argv[3], limit=2, lease=30):
        db.complete(lease)
    db.tick()
db.release()
"""


def _decider(url: str, seconds: float, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _DECIDER, url, str(seconds), name],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _now(db: DurableScheduler) -> datetime:
    """A moment ago on the store's clock: a schedule's first slot, to be decided at once (by
    default it is the next whole second). A moment ago, for a datetime rounds to microseconds
    and may fall after the store's next reading."""
    return datetime.fromtimestamp(db.now() - 0.01, UTC)


def _decided(db: DurableScheduler, name: str) -> list[tuple[float, str, str | None]]:
    (info,) = [s for s in db.schedules(limit=100_000) if s.name == name]
    return [(s.at, s.decision, s.task) for s in reversed(info.slots)]


def _decide_steps(url: str) -> list[tuple[dict[str, Any], float]]:
    db = DurableScheduler(url)
    try:
        return [(p, at) for a, p, at in db.timed_history() if a == "Decide"]
    finally:
        db.release()


def test_four_processes_racing_for_the_slots_decide_each_once(durable_url: StoreURL,
                                                              workers: list[Any]) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=4, record=True)
    db.start()
    # skip: a slot's fate depends on whether the last run has ended
    db.schedule("fast", fn=NOOP, every=0.05, start=_now(db))
    for i in range(4):
        workers.append(_decider(url, 2.0, f"d{i}"))
    for p in workers:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    check = checked_history(url)  # each slot once, in order, each the model's decision
    got = _decided(db, "fast")
    assert check.decisions >= 20 and len(got) >= 20
    assert {d for _, d, _ in got} == {"run", "skipped"}
    ran = {task for _, d, task in got if d == "run"}
    assert ran <= {v.task_id for v in db.view().versions}
    db.release()


def test_deciders_killed_at_random_leave_no_half_decision(durable_url: StoreURL,
                                                          workers: list[Any]) -> None:
    seed = random.randrange(1 << 30)
    print(f"\nseed {seed}")
    rng = random.Random(seed)
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=8, record=True)
    db.start()
    db.schedule("often", fn=NOOP, every=0.02, overlap="allow")
    db.schedule("rarely", fn=NOOP, every=0.07, overlap="buffer_one")
    alive = [_decider(url, 60.0, f"d{i}") for i in range(4)]
    workers.extend(alive)
    kills = 0
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.05, 0.3))
        victim = alive.pop(rng.randrange(len(alive)))
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
        kills += 1
        fresh = _decider(url, 60.0, f"d{kills + 3}")
        alive.append(fresh)
        workers.append(fresh)
    for p in alive:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    db.tick()  # this process decides what the killed ones left owed
    checked_history(url)
    versions = {v.task_id for v in db.view().versions}
    for name in ("often", "rarely"):
        got = _decided(db, name)
        assert len(got) >= 10, (name, got)
        assert {task for _, d, task in got if d == "run"} <= versions  # no run without its task
    print(f"{kills} processes killed; {len(versions)} runs")
    db.release()


def test_a_store_left_alone_past_the_catchup_misses_only_the_older_slots(
        durable_url: StoreURL) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=4, record=True)
    db.start()
    db.schedule("c", fn=NOOP, every=0.1, catchup=0.5, start=_now(db))
    (lease,) = db.claim("w")
    db.complete(lease)
    db.release()  # no process touches the store
    time.sleep(1.5)
    again = DurableScheduler(url)
    reopened = again.now()
    again.tick()
    checked_history(url)  # each decision the model's: missed exactly past the catch-up window
    after = [(p, at) for p, at in _decide_steps(url) if at >= reopened]
    assert after, "the reopened store decided nothing"
    for p, at in after:
        assert (p["decision"] == "missed") == (at - p["slot"] > 0.5), p
    assert {p["decision"] for p, _ in after} == {"missed", "run", "skipped"}
    again.release()


def test_a_clock_stepped_forward_decides_every_owed_slot_in_bounded_steps(
        durable_url: StoreURL, workers: list[Any]) -> None:
    url = durable_url("s.db")
    db = DurableScheduler(url, max_concurrency=4, clock="virtual", record=True)
    db.start()
    db.schedule("m", fn=NOOP, every=1, catchup=30)
    db.schedule("h", fn=NOOP, every=1, overlap="buffer_one")
    db.schedule("daily", fn=NOOP, cron="0 3 * * *", timezone="Europe/London")
    db.tick(5 * 86_400.0)  # five days at once
    worker = start_worker(url, "--until-done")
    workers.append(worker)
    assert worker.wait(60) == 0
    db.tick(1)  # the held slot of h is released now that its run has ended
    check = checked_history(url)
    stretches = [p for p, _ in _decide_steps(url) if "count" in p]
    assert {p["schedule"] for p in stretches} == {"m", "h"}  # decided in bulk, counted
    assert check.decisions >= 2000
    daily = Timing(cron="0 3 * * *", timezone="Europe/London")
    assert [at for at, _, _ in _decided(db, "daily")] == [
        daily.at_or_after(k * 86_400.0) for k in range(5)]
    db.release()


def test_a_worker_paused_past_its_lease_under_skip_runs_no_slot_twice(
        tmp_path: Path, durable_url: StoreURL, workers: list[Any]) -> None:
    url = durable_url("s.db")
    log = tmp_path / "log"
    db = DurableScheduler(url, max_concurrency=2, record=True)
    db.start()
    # Its first run hangs (a first attempt, no marker yet); every later attempt and run ends
    # at once.
    db.schedule("s", fn=f"{JOBS}:hang_first", every=0.3, start=_now(db),
                args={"task": "s", "marker": str(tmp_path / "marker"), "log": str(log),
                      "seconds": 3.0})
    (first, _, _), = _decided(db, "s")
    paused = start_worker(url, "--lease", "0.6", name="paused")
    workers.append(paused)
    wait_for(lambda: any(r[0] == "start" for r in log_lines(log)), what="the first start")
    os.kill(paused.pid, signal.SIGSTOP)  # its heartbeats stop with it
    reclaimer = start_worker(url, "--lease", "0.6", name="reclaimer")
    workers.append(reclaimer)
    first_run = _decided(db, "s")[0][2]
    assert first_run is not None
    wait_for(lambda: db.state(first_run) is TaskState.SUCCEEDED, what="the re-claimed run")
    wait_for(lambda: sum(d == "run" for _, d, _ in _decided(db, "s")) >= 3, what="more runs")
    os.kill(paused.pid, signal.SIGCONT)  # its report of the first run is refused
    wait_for(lambda: ("end", "s", paused.pid) in {r[:3] for r in log_lines(log)},
             what="the paused worker's first run to end")
    time.sleep(0.3)  # its report, refused
    for p in (paused, reclaimer):
        p.terminate()
        p.wait(30)
    db.tick()
    checked_history(url)  # under skip: every slot while the first run was unfinished skipped
    got = _decided(db, "s")
    assert got[0][:2] == (first, "run") and db.info(first_run).attempts == 2
    assert got[1][1] == "skipped"  # the slots that came while it hung
    assert set(accepted_ends(db).values()) == {1}  # no run ended twice
    db.release()


def test_workers_running_slots_ride_out_a_server_restart(
        postgres_cluster: Any, postgres_url: str, tmp_path: Path, workers: list[Any]) -> None:
    log = tmp_path / "log"
    db = DurableScheduler(postgres_url, max_concurrency=2, record=True)
    db.start()
    db.schedule("s", fn=f"{JOBS}:work", every=0.1,
                args={"task": "s", "log": str(log), "seconds": 0.25})
    for k in range(2):
        workers.append(start_worker(postgres_url, "--lease", "5", name=f"w{k}"))

    def ends() -> int:
        return sum(1 for r in log_lines(log) if r[0] == "end")

    wait_for(lambda: ends() >= 3, what="three runs")
    before = ends()
    postgres_cluster.restart()  # fast shutdown: every backend ended, runs in flight
    wait_for(lambda: ends() >= before + 3, timeout=90, what="three runs after the restart")
    for p in workers:
        p.terminate()
        p.wait(60)
    db.tick()
    checked_history(postgres_url)  # each slot once, in order, each the model's decision
    got = _decided(db, "s")
    assert {d for _, d, _ in got} == {"run", "skipped"}  # runs of 0.25 s, slots every 0.1 s
    assert set(accepted_ends(db).values()) == {1}  # no run ended twice
    db.release()
