"""The production TaskScheduler and the reference model agree, step for step.

The must-fail tests feed the same state machine deliberately broken schedulers
(``tests/mutants/broken_schedulers.py``, and here schedulers that miscount one counter of
``stats()``) and show it catches each one.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from refsched import TaskScheduler
from refsched.dag.scheduler import SchedulerStats
from refsched.model.dag.counters import Counts
from refsched.types import Claim
from refsched.verify.dag.lockstep import Disagreement, Ledger, lockstep_machine, run_lockstep
from tests.mutants.broken_schedulers import BROKEN, BrokenScheduler

TestSchedulerAgreesWithModel = lockstep_machine(TaskScheduler).TestCase


def test_lockstep_takes_every_action_and_every_notable_step() -> None:
    ledger = Ledger()
    built: list[TaskScheduler] = []

    def factory(max_concurrency: int) -> TaskScheduler:
        built.append(TaskScheduler(max_concurrency))
        return built[-1]

    run_lockstep(factory, examples=300, ledger=ledger)
    print(ledger.summary())
    assert ledger.missing() == [], ledger.summary()
    assert ledger.actions["Claim"] >= 20 and ledger.actions["Complete"] >= 5, ledger.summary()
    # every counter of stats() was compared with a count other than 0 somewhere
    totals = {name: sum(getattr(s.stats(), name) for s in built)
              for name in (f.name for f in dataclasses.fields(SchedulerStats))
              if name not in ("ready_wait", "run_time")}
    assert all(totals.values()), totals


def test_the_model_counts_every_counter_of_stats() -> None:
    named = {name.split(".")[0] for name in Counts().expected()}
    assert named == {f.name for f in dataclasses.fields(SchedulerStats)}


# -- Schedulers that miscount -------------------------------------------------------------------

class MiscountsClaims(TaskScheduler):
    """Counts as claimed only the versions running or succeeded: one that failed or acknowledged
    a cancel drops out of stats().claimed. Its states are right, its counts are not."""

    def stats(self) -> SchedulerStats:
        counted = super().stats()
        stopped = counted.run_time.count - counted.succeeded
        return dataclasses.replace(counted, claimed=counted.claimed - stopped)


class ConflictWhenFewReady(TaskScheduler):
    """Counts a claim conflict whenever ready(limit) hands out fewer than ``limit`` versions,
    also when fewer are ready: that is no conflict, the concurrency limit did not cut it short."""

    def __init__(self, max_concurrency: int) -> None:
        super().__init__(max_concurrency)
        self.extra = 0

    def ready(self, limit: int | None = None) -> list[Claim]:
        before = super().stats().claim_conflicts
        claims = super().ready(limit)
        if (limit is not None and len(claims) < limit
                and super().stats().claim_conflicts == before):
            self.extra += 1
        return claims

    def stats(self) -> SchedulerStats:
        counted = super().stats()
        return dataclasses.replace(counted,
                                   claim_conflicts=counted.claim_conflicts + self.extra)


class WaitsLongerThanInTotal(TaskScheduler):
    """Reports a longest wait for a claim above the total of the waits."""

    def stats(self) -> SchedulerStats:
        counted = super().stats()
        wait = counted.ready_wait
        return dataclasses.replace(counted, ready_wait=dataclasses.replace(
            wait, max=wait.total + 1.0 if wait.count else 0.0))


@pytest.mark.parametrize(("broken", "counter", "shown_by"), [
    (MiscountsClaims, "claimed", ("fail", "acknowledge_cancel")),
    (ConflictWhenFewReady, "claim_conflicts", ("ready",)),
    (WaitsLongerThanInTotal, "ready_wait.max", ("ready",)),
], ids=["claimed", "claim-conflicts", "ready-wait-max"])
def test_lockstep_catches_a_scheduler_that_miscounts(broken: type[TaskScheduler], counter: str,
                                                     shown_by: tuple[str, ...]) -> None:
    with pytest.raises(Disagreement) as caught:  # unshrunk: the verdict is the point
        run_lockstep(broken, examples=300, seed=20240611, hypothesis_settings={
            "phases": [Phase.generate], "report_multiple_bugs": False})
    failing = caught.value.calls[-1]
    assert failing.method in shown_by, [c.text for c in caught.value.calls]
    assert caught.value.reason == (f"{failing.text}: stats() is not what the model's steps "
                                   f"count after the call: {counter}"), caught.value.reason
    # one row, as the snapshot's differences are shown: no id, the counter, model, scheduler
    header, row = failing.diff.splitlines()
    assert header.split() == ["id", "field", "model", "implementation"]
    field, model, implementation = row.split(maxsplit=2)
    assert field == f"stats().{counter}" and model != implementation, failing.diff


@pytest.mark.parametrize("broken", BROKEN, ids=lambda cls: cls.__name__)
def test_lockstep_catches_a_broken_scheduler(broken: type[BrokenScheduler]) -> None:
    machine = lockstep_machine(broken)
    # Hypothesis raises an ExceptionGroup when it finds several distinct failures.
    with pytest.raises((AssertionError, ExceptionGroup)):
        run_state_machine_as_test(machine, settings=settings(
            max_examples=1000, stateful_step_count=40, deadline=None, database=None,
            derandomize=True,  # the same search every run: a mutant is caught or it is not
            phases=[Phase.generate],  # finding the failure is the point; shrinking it is not
            suppress_health_check=[HealthCheck.too_slow]))
