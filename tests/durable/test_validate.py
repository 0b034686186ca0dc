"""TLC validates durable stores' recorded histories (refsched.verify.durable.validate)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from refsched.durable import DurableScheduler
from refsched.profile import full_profile
from refsched.types import TaskState
from refsched.verify.durable.validate import HistoryError, history_module, validate_history

ROOT = Path(__file__).resolve().parents[2]
SLEEP = "refsched.durable.jobs:sleep"

History = list[tuple[str, dict[str, Any]]]


def virtual_history(tmp_path: Path) -> History:
    """A store on a virtual clock: a lease expires and is re-claimed, the other task fails."""
    db = DurableScheduler(f"sqlite:///{tmp_path / 'v.db'}", max_concurrency=2, max_attempts=2,
                          clock="virtual", record=True)
    db.submit("a", fn=SLEEP)
    db.submit('b "\\ é', ["a"], fn=SLEEP)
    db.start()
    db.claim("w 1", 2, 1)
    db.tick(1)
    db.tick(1)
    [again] = db.claim("w2", 1, 1)
    db.complete(again)
    [b] = db.claim("w2", 1, 1)
    db.heartbeat(b)
    db.tick(5)
    db.fail(b, "no")
    history = db.history()
    db.release()
    return history


def test_an_empty_history_is_a_usage_error_not_a_pass() -> None:
    with pytest.raises(HistoryError, match="empty"):
        validate_history([], max_concurrency=1, max_attempts=1)
    with pytest.raises(HistoryError, match="empty"):
        history_module([], max_concurrency=1, max_attempts=1, tasks={"a"}, workers={"w"})


def test_a_malformed_history_is_a_usage_error() -> None:
    with pytest.raises(HistoryError, match="not in the instance"):
        history_module([("Expire", {"t": "x"})], max_concurrency=1, max_attempts=1,
                       tasks={"a"}, workers={"w"})
    with pytest.raises(HistoryError, match="not a recorded spec action"):
        history_module([("Steal", {})], max_concurrency=1, max_attempts=1, tasks={"a"},
                       workers={"w"})


def test_ids_and_worker_names_are_written_as_ascii_tla_strings() -> None:
    module, config = history_module(
        [("Submit", {"t": 'x"*)\\', "D": []})], max_concurrency=1, max_attempts=1,
        tasks={'x"*)\\'}, workers={"(* w"})
    module.encode("ascii")
    assert "(* w" not in module and "Tasks <- TraceTasks" in config


@pytest.mark.slow
def test_a_virtual_clock_history_with_expiry_and_any_str_ids_is_accepted(tmp_path: Path) -> None:
    history = virtual_history(tmp_path)
    verdict = validate_history(history, max_concurrency=2, max_attempts=2)
    assert verdict.accepted, verdict


@pytest.mark.slow
def test_a_history_recorded_from_worker_processes_is_accepted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = DurableScheduler(url, max_concurrency=2, max_attempts=3, record=True)
    dag = {"a": [], "b": [], "c": ["a"], "d": ["a", "b"], "e": ["c", "d"], "f": []}
    for t, deps in dag.items():
        db.submit(t, deps, fn=SLEEP, args={"seconds": 0.05})
    db.start()
    workers = [subprocess.Popen(
        [sys.executable, "-m", "refsched", "worker", "--db", url, "--poll", "0.05",
         "--concurrency", "2", "--until-done", "--name", f"worker {n}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(3)]
    for p in workers:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert all(db.state(t) is TaskState.SUCCEEDED for t in dag)
    history = db.history()
    db.release()
    assert {p["w"] for a, p in history if a == "Claim"} <= {f"worker {n}" for n in range(3)}
    verdict = validate_history(history, max_concurrency=2, max_attempts=3,
                               tasks=dag, workers=[f"worker {n}" for n in range(3)])
    assert verdict.accepted, verdict
    print(f"{len(history)} steps accepted, {verdict.distinct_states} states, "
          f"{verdict.duration:.1f}s")


@pytest.mark.slow
def test_an_accepted_stale_completion_is_rejected(tmp_path: Path) -> None:
    history = virtual_history(tmp_path)
    reclaim = history.index(("Reclaim", {"w": "w2", "t": "a"}))
    # The first attempt's worker completes after its lease was expired and re-claimed.
    stale: History = [*history[:reclaim + 1],
                      ("Complete", {"w": "w 1", "t": "a", "g": 1, "a": 1}),
                      *history[reclaim + 1:]]
    verdict = validate_history(stale, max_concurrency=2, max_attempts=2)
    assert not verdict.accepted
    assert verdict.reason is not None and "OnlyCurrentAttemptEnds" in verdict.reason


@pytest.mark.slow
def test_a_double_claim_is_rejected(tmp_path: Path) -> None:
    history = virtual_history(tmp_path)
    claim = history.index(("Claim", {"w": "w 1", "k": 1}))
    # A second worker takes the version while the first one's lease is live.
    double: History = [*history[:claim + 1], ("Reclaim", {"w": "w2", "t": "a"}),
                       *history[claim + 1:]]
    verdict = validate_history(double, max_concurrency=2, max_attempts=2)
    assert not verdict.accepted
    again: History = [*history[:claim + 1], ("Claim", {"w": "w2", "k": 1})]
    assert not validate_history(again, max_concurrency=2, max_attempts=2).accepted


@pytest.mark.slow
def test_a_history_with_give_up_cancel_retry_and_close_is_accepted(tmp_path: Path) -> None:
    db = DurableScheduler(f"sqlite:///{tmp_path / 'g.db'}", max_concurrency=1, max_attempts=1,
                          clock="virtual", record=True)
    db.submit("a", fn=SLEEP)
    db.submit("b", ["a"], fn=SLEEP)
    db.submit("c", fn=SLEEP)
    db.start()
    db.claim("w1", 1, 1)
    db.tick(3)
    [c] = db.claim("w2", 1, 1)  # a ran out of attempts, so b is blocked
    assert c.task_id == "c" and db.state("b") is TaskState.BLOCKED
    db.cancel("c")
    assert db.heartbeat(c) is True
    db.acknowledge_cancel(c)
    db.retry("a")
    db.close(False)
    history = db.history()
    db.release()
    assert ("Expire", {"t": "a"}) in history and ("Retry", {"t": "a"}) in history
    verdict = validate_history(history, max_concurrency=1, max_attempts=1)
    assert verdict.accepted, verdict
    print(f"{len(history)} steps accepted, {verdict.distinct_states} states, "
          f"{verdict.duration:.1f}s")


@pytest.mark.slow
def test_histories_of_lockstep_walks_are_accepted() -> None:
    from refsched.verify.durable.lockstep import LIMITS, Ledger, run_durable_lockstep

    ledger = Ledger(keep_histories=True)
    # Walks without priorities or delays: a recorded Submit names neither, and the validation
    # of recorded histories takes every version as due at once, of priority 0
    # (refsched.verify.durable.validate).
    untimed = dataclasses.replace(full_profile("durable"), time=False)
    run_durable_lockstep(examples=20, steps=40, seed=3, ledger=ledger, profile=untimed)
    # The walks whose leases expired and were re-claimed first, then those that claimed.
    walks = sorted((h for h in ledger.histories if any(a == "Claim" for a, _ in h)),
                   key=lambda h: -sum(a in ("Expire", "Reclaim") for a, _ in h))[:4]
    assert any(a == "Reclaim" for h in walks for a, _ in h), ledger.summary()
    for history in walks:
        verdict = validate_history(history, max_concurrency=LIMITS.max_concurrency,
                                   max_attempts=LIMITS.max_attempts)
        assert verdict.accepted, (verdict, history)
        print(f"{len(history)} steps accepted, {verdict.distinct_states} states, "
              f"{verdict.duration:.1f}s")
