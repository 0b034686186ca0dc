"""Each seeded bug of the durable stores' signals is killed: the mutants of
``refsched/verify/durable/mutants.py`` (section "signals"), each run against the layer that
must kill it: the lock-step machine, which checks the conservation laws of ``signals()`` and
each partition against what the model's steps count in it (its durations on the store's clock
too), and the unit tests of tests/durable/test_signals.py for the times and refused reports.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.durable.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

LOCKSTEP = ("durable_signals_expiry_not_counted", "durable_signals_retry_drops_partition",
            "durable_signals_replaced_version_forgotten",
            # a time: the machine charges each version's ready wait and run time on the
            # store's clock as its ticks move it (the unit tests kill it too, below)
            "durable_signals_reclaim_moves_first_claim")
UNIT = ("durable_signals_reclaim_moves_first_claim", "durable_signals_stale_report_not_counted",
        "durable_steps_signals_claim_keeps_no_first_claim")
EVIDENCE = {
    "durable_signals_reclaim_moves_first_claim":
        "test_an_expiry_a_retry_and_a_give_up_are_counted",
    "durable_signals_stale_report_not_counted":
        "test_fencing_refused_and_repeated_reports_are_counted_in_the_store",
    "durable_steps_signals_claim_keeps_no_first_claim":
        "test_each_tenant_is_counted_apart_with_its_times_on_the_store_clock[postgresql]",
}
BY_NAME = {m.name: m for m in CATALOGUE}
# The unit layer here runs the signals tests alone (the catalogue's run has the others).
UNIT_BUDGET = replace(Budget(), durable_unit_files=("tests/durable/test_signals.py",))

pytestmark = pytest.mark.slow


def test_the_signals_section_has_its_mutants() -> None:
    assert set(LOCKSTEP + UNIT) == {n for n in BY_NAME if "_signals_" in n}


@pytest.mark.parametrize("name", LOCKSTEP)
def test_lockstep_kills_each_signals_mutant_of_the_store(name: str) -> None:
    result = run_mutant(BY_NAME[name], ["lockstep"], budget=Budget())
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert only.evidence


@pytest.mark.parametrize("name", UNIT)
def test_the_signals_tests_kill_each_times_and_refusals_mutant(name: str,
                                                               postgres_url: str) -> None:
    # (postgres_url: the server the PostgreSQL half of the tests, and its mutant, need)
    result = run_mutant(BY_NAME[name], ["unit"], budget=UNIT_BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert EVIDENCE[name] in only.evidence
