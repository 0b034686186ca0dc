"""TLC validates durable stores' recorded histories (refsched.verify.durable.validate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from refsched.durable import DurableScheduler
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
    claim = history.index(("Claim", {"w": "w 1", "k": 1, "chosen": ["a"]}))
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


def edges_history(tmp_path: Path) -> History:
    """Optional edges and add_deps: c waits for a (required) and b (optional); b fails, a
    succeeds, so c runs; d's edge to c is added while d is pending, and c's to b (optional)
    is refused once c was claimed."""
    db = DurableScheduler(f"sqlite:///{tmp_path / 'e.db'}", max_concurrency=1, max_attempts=1,
                          clock="virtual", record=True)
    db.submit("a", fn=SLEEP)
    db.submit("b", fn=SLEEP)
    db.submit("c", ["a"], fn=SLEEP, optional=["b"])
    db.submit("d", ["a"], fn=SLEEP)
    db.add_deps("d", optional=["c"])
    db.start()
    for end in ("complete", "fail"):  # a, then b
        [lease] = db.claim("w", 1, 1)
        getattr(db, end)(lease)
    [c] = db.claim("w", 1, 1)
    assert c.task_id == "c" and db.input_summary("c")["b"].state is TaskState.FAILED
    db.complete(c)
    [d] = db.claim("w", 1, 1)
    db.complete(d)
    history = db.history()
    db.release()
    return history


@pytest.mark.slow
def test_a_history_with_optional_edges_and_add_deps_is_accepted_and_a_late_add_rejected(
        tmp_path: Path) -> None:
    history = edges_history(tmp_path)
    assert [e[0] for e in history].count("SubmitOptional") == 1
    assert ("AddDeps", {"t": "d", "D": ["c"], "O": ["c"]}) in history
    verdict = validate_history(history, max_concurrency=1, max_attempts=1, clock="virtual")
    assert verdict.accepted, verdict
    print(f"{len(history)} steps accepted, {verdict.distinct_states} states, "
          f"{verdict.duration:.1f}s")
    # An edge added to d after d was claimed: the spec's AddDeps needs a pending version.
    claim_d = len(history) - 2
    late: History = [*history[:claim_d + 1], ("AddDeps", {"t": "d", "D": ["b"], "O": []}),
                     *history[claim_d + 1:]]
    assert not validate_history(late, max_concurrency=1, max_attempts=1,
                                clock="virtual").accepted


@pytest.mark.slow
def test_histories_of_lockstep_walks_are_accepted() -> None:
    from refsched.verify.durable.lockstep import LIMITS, Ledger, run_durable_lockstep

    ledger = Ledger(keep_histories=True)
    # Walks with priorities and delays, half of them on a store with aging, all on a virtual
    # clock: TLC takes the recorded ticks as the only ones, each claim's ids as Chosen(k).
    run_durable_lockstep(examples=30, steps=40, seed=3, ledger=ledger)
    claimed = [(h, aging) for h, aging in ledger.histories if any(e[0] == "Claim" for e in h)]

    def expiries(walk: tuple[list[Any], float | None]) -> int:
        return sum(e[0] in ("Expire", "Reclaim") for e in walk[0])

    def timed(walk: tuple[list[Any], float | None]) -> int:
        history, aging = walk
        return (aging is not None) + sum(e[0] == "Submit" and bool(e[1]["d"]) for e in history)

    def edges(walk: tuple[list[Any], float | None]) -> int:
        return sum(e[0] in ("SubmitOptional", "AddDeps") for e in walk[0])

    # The two walks whose leases expired and were re-claimed most, the two with aging and the
    # most delays, and the one with the most optional edges and added deps.
    walks = (sorted(claimed, key=expiries, reverse=True)[:2]
             + sorted(claimed, key=timed, reverse=True)[:2]
             + sorted(ledger.histories, key=edges, reverse=True)[:1])
    assert any(e[0] == "SubmitOptional" for h, _ in walks for e in h), ledger.summary()
    assert any(e[0] == "Reclaim" for h, _ in walks for e in h), ledger.summary()
    assert any(aging is not None for _, aging in walks), ledger.summary()
    assert any(e[0] == "Submit" and e[1]["d"] for h, _ in walks for e in h), ledger.summary()
    for history, aging in walks:
        verdict = validate_history(history, max_concurrency=LIMITS.max_concurrency,
                                   max_attempts=LIMITS.max_attempts, aging=aging,
                                   clock="virtual", lease_time=LIMITS.lease_time)
        assert verdict.accepted, (verdict, history)
        print(f"{len(history)} steps accepted, {verdict.distinct_states} states, "
              f"{verdict.duration:.1f}s")


# -- Due times, priorities and aging on a virtual clock ------------------------------------------

def aged_history(tmp_path: Path, name: str = "aged") -> tuple[DurableScheduler, list[Any]]:
    """x waits, due, while the clock passes two ticks that nothing else waits for; then y
    arrives with priority 1, and z with a delay of 2. With aging 1, x has waited long enough
    to come first."""
    db = DurableScheduler(f"sqlite:///{tmp_path / f'{name}.db'}", max_concurrency=1,
                          max_attempts=1, clock="virtual", record=True, aging=1)
    db.start()
    db.submit("x", fn=SLEEP)
    db.tick(1)
    db.tick(1)
    db.submit("y", fn=SLEEP, priority=1)
    db.submit("z", fn=SLEEP, delay=2)
    [x] = db.claim("w", 1, 1)
    assert x.task_id == "x"
    db.complete(x)
    [y] = db.claim("w", 1, 1)
    db.complete(y)
    db.tick(2)
    [z] = db.claim("w", 1, 1)
    db.complete(z)
    return db, db.timed_history()  # tick(2) moved the clock two ticks: the times say so


def validate_aged(history: list[Any]) -> Any:
    return validate_history(history, max_concurrency=1, max_attempts=1, aging=1,
                            clock="virtual", lease_time=1)


@pytest.mark.slow
def test_an_aged_virtual_history_is_accepted_and_each_time_rule_broken_is_rejected(
        tmp_path: Path) -> None:
    db, history = aged_history(tmp_path)
    db.release()
    verdict = validate_aged(history)
    # one state per step, and one more for the second tick of tick(2)
    assert verdict.accepted and verdict.distinct_states == len(history) + 2, verdict
    # y claimed before x, as a claim order that ignores how long x waited would take it
    claim = next(n for n, (a, _, _) in enumerate(history) if a == "Claim")
    swapped = [*history]
    swapped[claim] = ("Claim", {"w": "w", "k": 1, "chosen": ["y"]}, history[claim][2])
    verdict = validate_aged(swapped)
    assert not verdict.accepted and "ClaimsInKeyOrder" in (verdict.reason or ""), verdict
    # z claimed one tick before its due time: it was due 3 ticks after its submit
    early = [(a, {**p, "d": 3} if p.get("t") == "z" and a == "Submit" else p, at)
             for a, p, at in history]
    verdict = validate_aged(early)
    assert not verdict.accepted and "ClaimsOnlyDue" in (verdict.reason or ""), verdict


@pytest.mark.slow
def test_a_spec_whose_clock_stops_once_every_version_is_due_rejects_an_aged_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without Lead, the spec cannot tick while x waits due: y then comes first in the spec,
    # and the store's claim of x is no behaviour of it.
    db, history = aged_history(tmp_path)
    db.release()
    copy = tmp_path / "spec"
    copy.mkdir()
    for name in ("DurableScheduler.tla", "Scheduler.tla"):
        (copy / name).write_text((ROOT / "spec" / name).read_text())
    text = (copy / "DurableScheduler.tla").read_text()
    assert text.count("due[t] + Lead(t) > now}") == 1
    (copy / "DurableScheduler.tla").write_text(text.replace("due[t] + Lead(t) > now}",
                                                            "due[t] > now}"))
    monkeypatch.setenv("REFSCHED_SPEC_DIR", str(copy))
    verdict = validate_aged(history)
    assert not verdict.accepted, verdict


def test_a_virtual_history_with_a_fractional_tick_or_delay_is_a_usage_error() -> None:
    with pytest.raises(HistoryError, match="whole number of ticks"):
        history_module([("Submit", {"t": "a", "D": [], "p": 0, "d": 0.5})], max_concurrency=1,
                       max_attempts=1, tasks={"a"}, workers={"w"}, clock="virtual")
    with pytest.raises(HistoryError, match="not a whole"):
        history_module([("Start", {}, 0.0), ("Tick", {}, 0.5)], max_concurrency=1,
                       max_attempts=1, tasks={"a"}, workers={"w"}, clock="virtual")
    with pytest.raises(HistoryError, match="clock="):
        history_module([("Start", {})], max_concurrency=1, max_attempts=1, tasks={"a"},
                       workers={"w"}, clock="lunar")
    with pytest.raises(HistoryError, match="aging="):
        history_module([("Start", {})], max_concurrency=1, max_attempts=1, tasks={"a"},
                       workers={"w"}, aging=-1)


@pytest.mark.slow
def test_a_wall_clock_history_with_priorities_is_judged_by_its_claim_order(
        tmp_path: Path) -> None:
    # Shorter than the aging (a minute): the claim order is strict priority's, which TLC
    # judges with its ticks placed freely.
    db = DurableScheduler(f"sqlite:///{tmp_path / 'w.db'}", max_concurrency=1, max_attempts=1,
                          record=True)
    db.submit("a", fn=SLEEP)
    db.submit("b", fn=SLEEP, priority=1)
    db.submit("c", fn=SLEEP)
    db.start()
    for expected in ("b", "a", "c"):
        [lease] = db.claim("w", 1, 30)
        assert lease.task_id == expected
        db.complete(lease)
    history, aging = db.timed_history(), db.aging
    db.release()
    assert validate_history(history, max_concurrency=1, max_attempts=1, aging=aging).accepted
    first = next(n for n, (a, _, _) in enumerate(history) if a == "Claim")
    wrong = [*history]
    wrong[first] = ("Claim", {"w": "w", "k": 1, "chosen": ["a"]}, history[first][2])
    verdict = validate_history(wrong, max_concurrency=1, max_attempts=1, aging=aging)
    assert not verdict.accepted and "ClaimsInKeyOrder" in (verdict.reason or ""), verdict
    # without its times, or lasting past the aging, the order may have been aging's
    with pytest.raises(HistoryError, match="without times"):
        validate_history([(a, p) for a, p, _ in history], max_concurrency=1, max_attempts=1,
                         aging=aging)
    late = [*history[:-1], (*history[-1][:2], history[-1][2] + aging)]
    with pytest.raises(HistoryError, match="longer than the aging"):
        validate_history(late, max_concurrency=1, max_attempts=1, aging=aging)
