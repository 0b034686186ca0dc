"""Signals per task type and tenant: ``submit(tenant=, task_type=)``, ``signals()``, its bound on
partitions, its conservation laws, and its agreement with the model's counts per partition."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from refsched import Runner, TaskScheduler
from refsched.dag.signals import BUCKET_BOUNDS, OVERFLOW, UNLABELLED, DurationTail
from refsched.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    InvariantViolation,
    UnknownDependencyError,
)
from refsched.verify.dag.lockstep import run_lockstep
from refsched.verify.dag.mutants import CATALOGUE
from refsched.verify.dag.recording import TraceRecorder, record_runner_run
from refsched.verify.dag.signals import check_recorded_signals, law_breaches
from refsched.verify.mutants import Budget, run_mutant


def _work() -> None:
    """A task function: its name is its task type."""


def test_bad_labels_are_refused_and_change_nothing() -> None:
    s = TaskScheduler(2, max_partitions=2)
    s.submit("a", tenant="acme")
    before = (s.snapshot(), s.stats(), s.signals())
    with pytest.raises(InvalidArgumentError, match="tenant"):
        s.submit("b", tenant=["unhashable"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="task_type"):
        s.submit("b", task_type=3)  # type: ignore[arg-type]
    assert (s.snapshot(), s.stats(), s.signals()) == before
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidArgumentError, match="max_partitions"):
            TaskScheduler(1, max_partitions=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidTransitionError, match="max_partitions"):
        TaskScheduler(1).signals()


def test_partitions_are_bounded_and_the_overflow_one_counts() -> None:
    s = TaskScheduler(4, max_partitions=2)
    for i, tenant in enumerate(["t0", "t1", "t2", "t3"]):
        s.submit(f"x{i}", tenant=tenant, task_type="etl")
    s.start()
    for claim in s.ready():
        s.complete(claim.task_id, claim.generation)
    got = s.signals()
    assert set(got.partitions) == {("etl", "t0"), ("etl", "t1"), OVERFLOW}
    assert got.partitions[OVERFLOW].succeeded == 2
    assert law_breaches(got, s.stats()) == []


def test_config_errors_are_apart_from_function_failures() -> None:
    s = TaskScheduler(2, max_partitions=4)
    s.submit("a", task_type="etl", tenant="acme")
    s.submit("b", ["a"], task_type="etl", tenant="acme")
    s.start()
    with pytest.raises(UnknownDependencyError):
        s.submit("c", ["nowhere"], task_type="etl", tenant="zenith")
    (claim,) = s.ready()
    s.fail(claim.task_id, claim.generation)
    with pytest.raises(InvalidTransitionError):
        s.add_deps("a", ["b"])  # "a" failed: it is no longer pending
    parts = s.signals().partitions
    assert parts[("etl", "acme")].failed == 1
    assert parts[("etl", "acme")].blocked == 1
    assert parts[("etl", "acme")].config_errors == 1  # add_deps on a failed version
    assert parts[("etl", "zenith")].unknown_deps == 1
    assert parts[("etl", "zenith")].failed == 0


def test_retry_keeps_the_partition_and_resubmit_takes_the_new_one() -> None:
    s = TaskScheduler(2, max_partitions=4)
    s.submit("a", tenant="acme")
    s.start()
    (claim,) = s.ready()
    s.fail("a", claim.generation)
    s.retry("a")
    s.submit("a", tenant="zenith")  # replaces the ready retried version
    parts = s.signals().partitions
    assert parts[(None, "acme")].retried == 1
    assert parts[(None, "acme")].replaced == 1
    assert parts[(None, "zenith")].submitted == 1
    assert parts[(None, "zenith")].waiting == 1
    assert law_breaches(s.signals(), s.stats()) == []


def test_duration_tail() -> None:
    d = DurationTail(3, 1.0 + 2e-6, 1.0, (0, 2, *([0] * 10), 1))
    assert d.quantile(0.5) == BUCKET_BOUNDS[1]
    assert d.quantile(1.0) == 1.0


def test_the_runner_types_tasks_by_function_name() -> None:
    with Runner(2, max_partitions=4) as runner:
        runner.submit("a", _work, tenant="acme")
        runner.submit("b", _work, ["a"])
        runner.start()
        runner.wait()
        signals = runner.scheduler.signals()
    name = f"{__name__}:_work"
    assert signals.partitions[(name, "acme")].succeeded == 1
    assert signals.partitions[(name, None)].run_time.count == 1
    assert UNLABELLED not in signals.partitions


@pytest.mark.parametrize("max_partitions", [1, 3])
def test_lockstep_agrees_per_partition(max_partitions: int) -> None:
    run_lockstep(lambda n: TaskScheduler(n, max_partitions=max_partitions), examples=150,
                 labels=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recorded_runner_runs_keep_the_laws(seed: int) -> None:
    trace = record_runner_run(seed)
    assert trace.meta["signal_breaches"] == [], trace.meta["signal_breaches"]
    assert any(step.action == "Complete" for step in trace.steps)


SIGNAL_MUTANTS = tuple(m for m in CATALOGUE if m.name in {
    "retry_charges_renewed_to_first_tenant", "replaced_charged_to_new_tenant",
    "overflow_partition_not_counted", "failure_counted_as_config_error",
    "config_error_counted_as_failure", "propagation_counted_without_its_time",
})


def test_the_signal_section_has_its_mutants() -> None:
    assert len(SIGNAL_MUTANTS) == 6


@pytest.mark.parametrize("mutant", SIGNAL_MUTANTS, ids=lambda m: m.name)
def test_lockstep_kills_each_signal_mutant(mutant) -> None:  # type: ignore[no-untyped-def]
    result = run_mutant(mutant, ["lockstep"], budget=replace(Budget(), lockstep_examples=200))
    (only,) = result.layers
    assert only.status == "killed", f"{mutant.name}: {only.status}\n{only.evidence}"
    assert "signals()" in only.evidence


def test_a_miscount_in_a_recorded_run_is_a_failed_check() -> None:
    """The recorded-run check can fail: one failure charged to the wrong partition."""
    recorder = TraceRecorder()
    s = TaskScheduler(2, recorder=recorder, max_partitions=4)
    s.submit("a", task_type="etl", tenant="acme")
    s.submit("b", task_type="etl", tenant="zenith")
    s.start()
    for claim in s.ready():
        s.fail(claim.task_id, claim.generation)
    labels = [("etl", "acme"), ("etl", "zenith")]
    signals = s.signals()
    assert check_recorded_signals(recorder.steps, labels, signals, s.stats()) == []
    moved = dict(signals.partitions)
    acme, zenith = moved[("etl", "acme")], moved[("etl", "zenith")]
    moved[("etl", "acme")] = dataclasses.replace(acme, failed=acme.failed + 1)
    moved[("etl", "zenith")] = dataclasses.replace(zenith, failed=zenith.failed - 1)
    wrong = dataclasses.replace(signals, partitions=moved)
    found = check_recorded_signals(recorder.steps, labels, wrong, s.stats())
    assert any("claimed == succeeded + failed + stopped + running" in f for f in found), found
    assert any("the recorded steps count" in f for f in found), found


def test_partition_keys_follow_compaction_and_are_checked() -> None:
    """Resubmitting compacts the columns; the keys move with their rows, and a key on no live
    row is a TypeOK failure."""
    s = TaskScheduler(1, max_partitions=4)
    for round_ in range(50):
        s.submit("a", tenant=f"t{round_ % 2}")
        s.submit("b", ["a"], task_type="etl")
    s.check_invariants()
    signals = s.signals()
    assert signals.partitions[(None, "t1")].waiting == 1
    assert signals.partitions[("etl", None)].waiting == 1
    assert law_breaches(signals, s.stats()) == []
    s._labels[len(s._state)] = ("etl", None)  # a row that does not exist
    with pytest.raises(InvariantViolation, match="partition keys"):
        s.check_invariants()


def test_propagation_times_each_version_a_dependency_s_end_readies_or_blocks() -> None:
    s = TaskScheduler(4, max_partitions=4)
    s.submit("a", task_type="etl", tenant="acme")
    s.submit("b", ["a"], task_type="load", tenant="acme")
    s.submit("c", ["a"], task_type="load", tenant="acme")
    s.submit("d", ["b"], task_type="report", tenant="zenith")
    s.submit("e", [], task_type="report", tenant="zenith", optional=["b"])
    s.start()
    s.complete("a", s.ready()[0].generation)  # readies b and c
    assert [c.task_id for c in s.ready()] == ["b", "c"]
    s.fail("b", 1)  # blocks d, readies e through its optional edge
    parts = s.signals().partitions
    load, report = parts[("load", "acme")], parts[("report", "zenith")]
    assert (load.propagated, load.propagation.count) == (2, 2)
    assert (report.propagated, report.propagation.count) == (2, 2)  # d blocked, e ready
    assert parts[("etl", "acme")].propagated == 0  # a had no dependency
    assert 0 <= report.propagation.max <= report.propagation.total
    assert law_breaches(s.signals(), s.stats()) == []


def test_a_propagation_without_its_time_breaks_a_law() -> None:
    s = TaskScheduler(1, max_partitions=2)
    s.submit("a")
    s.submit("b", ["a"])
    s.start()
    s.ready()
    s.complete("a", 1)
    signals = s.signals()
    key = (None, None)
    parts = dict(signals.partitions)
    parts[key] = dataclasses.replace(parts[key], propagation=DurationTail())
    found = law_breaches(dataclasses.replace(signals, partitions=parts), s.stats())
    assert any("propagation.count == propagated" in f for f in found), found
