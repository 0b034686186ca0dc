"""Signals of the durable stores per task type and tenant (docs/durable.md, "Signals"), on
SQLite and PostgreSQL: each version's row carries its partition and its times, a version
taken out of the task table leaves its signals in past_version, the calls that change no
version are counted in refusal; the conservation laws hold, the partitions add up to
stats(), and an older store is read as it is and migrated by its first writer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from refsched.dag.signals import OVERFLOW, UNLABELLED, PartitionSignals, Signals
from refsched.durable import DurableScheduler
from refsched.durable.status import _show_text, _signals_text, _status_text, show, status
from refsched.durable.store import SCHEMA_VERSION
from refsched.errors import (
    CycleError,
    InvalidArgumentError,
    InvalidTransitionError,
    StaleLeaseError,
    UnknownDependencyError,
)
from refsched.verify.dag.signals import DURABLE_SHARED, law_breaches
from refsched.verify.durable.lockstep import run_durable_lockstep
from tests.conftest import StoreURL, postgres_factory
from tests.durable.support import JOBS, downgrade

NOOP = f"{JOBS}:noop"
ETL_ACME = ("etl", "acme")


def store(url: StoreURL, name: str = "s.db", **options: Any) -> DurableScheduler:
    options.setdefault("max_concurrency", 8)
    options.setdefault("clock", "virtual")
    return DurableScheduler(url(name), **options)


def lawful(db: DurableScheduler, **options: Any) -> Signals:
    """``db.signals()``, once the laws are seen to hold."""
    signals = db.signals(**options)
    assert law_breaches(signals, db.stats(), DURABLE_SHARED) == []
    return signals


def part(signals: Signals, key: Any) -> PartitionSignals:
    return signals.partitions[key]


def test_each_tenant_is_counted_apart_with_its_times_on_the_store_clock(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP, task_type="etl", tenant="acme")
    db.submit("b", ["a"], fn=NOOP, task_type="etl", tenant="acme")
    db.submit("z", fn=NOOP, tenant=7)
    db.submit("u", fn=NOOP)
    db.start()
    db.tick(2)
    (a,) = db.claim("w", 1)  # a: ready at 0, claimed at 2
    db.tick(3)
    db.complete(a)  # ran 3; b ready at 5
    db.tick(1)
    leases = {lease.task_id: lease for lease in db.claim("w", 8)}
    db.fail(leases["z"], "no")
    signals = lawful(db)
    etl = part(signals, ETL_ACME)
    assert (etl.submitted, etl.claimed, etl.succeeded, etl.running) == (2, 2, 1, 1)
    assert etl.ready_wait.count == 2 and etl.ready_wait.total == 2 + 1
    assert etl.run_time.count == 1 and etl.run_time.total == 3 == etl.run_time.max
    z = part(signals, (None, 7))
    assert (z.submitted, z.failed, z.run_time.count) == (1, 1, 1)
    assert part(signals, UNLABELLED).running == 1
    assert set(signals.partitions) == {ETL_ACME, (None, 7), UNLABELLED}
    # an int tenant and its digits as a str are two tenants
    db.submit("q", fn=NOOP, tenant="7")
    assert part(db.signals(), (None, "7")).submitted == 1


def test_info_and_show_give_each_versions_task_type_and_tenant(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP, task_type="etl", tenant="acme")
    db.submit("z", fn=NOOP, tenant=7)
    db.submit("q", fn=NOOP, tenant="7")
    db.submit("u", fn=NOOP)
    labels = {t: (db.info(t).task_type, db.info(t).tenant) for t in "azqu"}
    assert labels == {"a": ("etl", "acme"), "z": (None, 7), "q": (None, "7"), "u": (None, None)}
    assert [(v.task_type, v.tenant) for v in db.view().versions] == list(labels.values())
    row = show(db, "a")
    assert (row["task_type"], row["tenant"]) == ("etl", "acme")
    assert "  task_type: etl\n  tenant: acme\n" in _show_text(row)
    assert show(db, "z")["tenant"] == 7 and show(db, "q")["tenant"] == "7"


def test_an_expiry_a_retry_and_a_give_up_are_counted(durable_url: StoreURL) -> None:
    db = store(durable_url, max_attempts=2)
    db.submit("a", fn=NOOP, task_type="etl", tenant="acme")
    db.submit("b", ["a"], fn=NOOP, task_type="report", tenant="acme")
    db.start()
    db.claim("w", 1, lease=1)
    db.tick(2)
    db.claim("w2", 1, lease=1)  # the first lease expires; w2 re-claims a
    db.tick(2)
    db.expire()  # the second expires too: a fails, b is blocked
    signals = lawful(db)
    etl = part(signals, ETL_ACME)
    assert (etl.lease_expiries, etl.claimed, etl.failed, etl.run_time.total) == (2, 1, 1, 4)
    assert part(signals, ("report", "acme")).blocked == 1
    assert db.stats().expired == 2
    db.retry("a")  # a and b get new versions, keeping their partitions
    signals = lawful(db)
    etl = part(signals, ETL_ACME)
    assert (etl.submitted, etl.retried, etl.failed, etl.waiting, etl.lease_expiries) == (
        1, 1, 1, 1, 2)
    report = part(signals, ("report", "acme"))
    assert (report.submitted, report.retried, report.blocked, report.waiting) == (1, 1, 1, 1)


def test_a_retried_version_with_optional_edges_keeps_its_end(durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.submit("c", fn=NOOP, optional=["a"], task_type="etl")
    db.cancel("c")
    db.retry("c")  # its row is waited again before it is renewed: its end is kept first
    etl = part(lawful(db), ("etl", None))
    assert (etl.cancelled, etl.replaced, etl.retried, etl.waiting) == (1, 0, 1, 1)


def test_a_replaced_version_stays_counted_in_its_own_partition(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", ["x"], fn=NOOP, tenant="old")
    db.submit("x", fn=NOOP)
    db.submit("a", ["x"], fn=NOOP, tenant="new")  # the waiting version is replaced
    db.submit("x", fn=NOOP)  # unlabelled, on the server's path on PostgreSQL
    signals = lawful(db)
    assert part(signals, (None, "old")).replaced == 1
    assert part(signals, (None, "old")).waiting == 0
    assert part(signals, (None, "new")).waiting == 1
    assert (part(signals, UNLABELLED).submitted, part(signals, UNLABELLED).replaced) == (2, 1)


def test_fencing_refused_and_repeated_reports_are_counted_in_the_store(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP, task_type="etl", tenant="acme")
    db.start()
    (old,) = db.claim("w", 1, lease=1)
    db.tick(2)
    (new,) = db.claim("w2", 1, lease=5)
    with pytest.raises(StaleLeaseError):
        db.complete(old)
    db.complete(new)
    db.complete(new)  # a repeat: answered, counted
    other = DurableScheduler(db.url)  # another process's object reads the same counts
    etl = part(lawful(other), ETL_ACME)
    assert (etl.stale_callbacks, etl.duplicate_callbacks, etl.lease_expiries) == (1, 1, 1)
    other.release()


def test_graph_configuration_errors_are_counted_apart_from_failures(
        durable_url: StoreURL) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP, tenant="acme")
    db.submit("b", ["a"], fn=NOOP, tenant="acme")
    db.start()
    with pytest.raises(CycleError):
        db.submit("a", ["b"], fn=NOOP, tenant="acme")
    with pytest.raises(UnknownDependencyError):
        db.submit_many([{"id": "c", "fn": NOOP, "tenant": "zen"},
                        {"id": "d", "fn": NOOP, "deps": ["nowhere"], "tenant": "other"}])
    with pytest.raises(InvalidTransitionError):
        db.add_deps("a", ["b"])  # a is ready: its edges are refused
    signals = lawful(db)
    acme = part(signals, (None, "acme"))
    assert (acme.cycles_reported, acme.edges_refused, acme.failed) == (1, 1, 0)
    assert acme.config_errors == 2
    assert part(signals, (None, "other")).unknown_deps == 1
    assert (None, "zen") not in signals.partitions  # its submission was rolled back


@pytest.mark.parametrize(("options", "match"), [
    ({"tenant": 1.5}, "tenant"), ({"tenant": True}, "tenant"), ({"tenant": 2**63}, "tenant"),
    ({"tenant": ("a",)}, "tenant"), ({"tenant": ""}, "tenant"), ({"tenant": "a\x00"}, "NUL"),
    ({"task_type": 3}, "task type"), ({"task_type": ""}, "task type")])
def test_a_bad_tenant_or_task_type_is_refused_with_the_store_unchanged(
        durable_url: StoreURL, options: dict[str, Any], match: str) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    before = (db.snapshot(), db.stats(), db.signals())
    with pytest.raises(InvalidArgumentError, match=match):
        db.submit("b", fn=NOOP, **options)
    with pytest.raises(InvalidArgumentError, match=match):
        db.submit_many([{"id": "c", "fn": NOOP}, {"id": "b", "fn": NOOP, **options}])
    assert (db.snapshot(), db.stats(), db.signals()) == before


def test_partitions_past_the_bound_go_to_the_overflow_in_the_order_they_were_made(
        durable_url: StoreURL) -> None:
    db = store(durable_url, max_partitions=2)
    for i, tenant in enumerate(["t0", "t1", "t2", "t3", "t0"]):
        db.submit(f"v{i}", fn=NOOP, tenant=tenant)
    signals = lawful(db)
    assert set(signals.partitions) == {(None, "t0"), (None, "t1"), OVERFLOW}
    assert part(signals, OVERFLOW).submitted == 2
    assert set(lawful(db, max_partitions=8).partitions) == {(None, f"t{i}") for i in range(4)}
    with pytest.raises(InvalidArgumentError):
        db.signals(max_partitions=0)
    with pytest.raises(InvalidArgumentError):
        DurableScheduler(db.url, max_partitions=0)


def test_a_version_5_store_is_read_as_it_is_and_its_first_writer_migrates_it(
        durable_url: StoreURL, tmp_path: Path) -> None:
    db = store(durable_url)
    db.submit("a", fn=NOOP)
    db.submit("b", ["a"], fn=NOOP)
    db.start()
    (a,) = db.claim("w", 1)
    db.tick(2)
    db.complete(a)
    url = db.url
    downgrade(db, url, tmp_path / "s.db", 5)
    reader = DurableScheduler(url, read_only=True)
    assert reader.view().settings["schema_version"] == 5
    signals = reader.signals()
    assert set(signals.partitions) == {UNLABELLED}
    old = part(signals, UNLABELLED)
    assert (old.submitted, old.succeeded, old.waiting, old.run_time.total) == (2, 1, 1, 2)
    reader.release()
    writer = DurableScheduler(url)
    assert writer.view().settings["schema_version"] == SCHEMA_VERSION == 7
    assert lawful(writer) == signals
    writer.submit("c", fn=NOOP, tenant="acme")
    assert part(lawful(writer), (None, "acme")).submitted == 1


def test_status_gives_each_partition_in_text_and_json(durable_url: StoreURL) -> None:
    db = store(durable_url, max_partitions=1)
    db.submit("a", fn=NOOP, task_type="etl", tenant="acme")
    db.submit("b", fn=NOOP, tenant=3)
    db.start()
    (a,) = db.claim("w", 1)
    db.tick(2)
    db.complete(a)
    report = status(db)
    etl, overflow = report["signals"]
    assert (etl["task_type"], etl["tenant"]) == ETL_ACME
    assert etl["counters"] == {"submitted": 1, "claimed": 1, "succeeded": 1}
    assert etl["run_time"]["count"] == 1 and etl["run_time"]["max"] == 2
    assert overflow == {**overflow, "overflow": True,
                        "counters": {"submitted": 1, "waiting": 1}}
    assert "per task type and tenant" not in _status_text(report)
    text = "\n".join(_signals_text(report["signals"]))  # what --signals adds
    assert "etl/acme: 1 submitted, 1 claimed, 1 succeeded" in text
    assert "(overflow): 1 submitted, 1 waiting" in text
    assert json.loads(json.dumps(report))["signals"] == report["signals"]
    db.release()
    shown = subprocess.run([sys.executable, "-m", "refsched", "status", "--db", db.url,
                            "--signals"], capture_output=True, text=True, check=True)
    assert "etl/acme: 1 submitted, 1 claimed, 1 succeeded" in shown.stdout


def test_the_lockstep_machine_checks_the_laws_and_the_models_counts_per_partition() -> None:
    ledger = run_durable_lockstep(DurableScheduler, examples=100, steps=40, seed=0,
                                  signals=True)
    for action in ("Cancel", "Fail", "Expire", "Retry", "Close", "Claim", "Reclaim"):
        assert ledger.actions[action] >= 1, ledger.summary()


def test_the_postgresql_store_keeps_the_laws_and_the_models_counts(postgres_url: str) -> None:
    ledger = run_durable_lockstep(postgres_factory(postgres_url), examples=25, steps=40, seed=1,
                                  signals=True)
    assert ledger.actions["Expire"] >= 1, ledger.summary()
