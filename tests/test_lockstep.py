"""The production TaskScheduler and the reference model agree, step for step.

The must-fail tests feed the same state machine deliberately broken schedulers
(``tests/mutants/broken_schedulers.py``) and show it catches each one.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from mutants.broken_schedulers import BROKEN, BrokenScheduler

from refsched import TaskScheduler
from refsched.verify.lockstep import Ledger, lockstep_machine, run_lockstep

TestSchedulerAgreesWithModel = lockstep_machine(TaskScheduler).TestCase


def test_lockstep_takes_every_action_and_every_notable_step() -> None:
    ledger = Ledger()
    run_lockstep(TaskScheduler, examples=300, ledger=ledger)
    print(ledger.summary())
    assert ledger.missing() == [], ledger.summary()
    assert ledger.actions["Claim"] >= 20 and ledger.actions["Complete"] >= 5, ledger.summary()


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
