"""Each seeded bug of the batch submit and of the DAG path on the PostgreSQL server is killed: the
mutants of ``refsched/verify/durable/mutants.py`` (section "the batch submit and the DAG path on
the server"), each run against the layer that must kill it, with the evidence: the lock-step
machine's ``submit_many`` rule for the client's batch, the tests of tests/durable/test_bulk.py
for the server's functions, which the lock-step machine (on SQLite) never calls.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.durable.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

LOCKSTEP = ("durable_bulk_not_atomic",)
# (durable_bulk_skips_cycle_check survived the layer's 100 walks: a batch that closes a cycle
# after start() needs a resubmission inside it, which the walks draw too rarely; the batch
# tests kill it at once)
EVIDENCE = {
    "durable_bulk_not_atomic": "test_a_refused_item_refuses_the_whole_batch",
    "durable_bulk_skips_cycle_check": "test_a_refused_item_refuses_the_whole_batch",
    "durable_steps_bulk_skips_cycle_check": "test_a_refused_item_refuses_the_whole_batch",
    "durable_steps_bulk_not_atomic": "test_a_refused_item_refuses_the_whole_batch",
    # (the first test to see it: its one-by-one side submits an optional child of a failed
    # parent on the server)
    "durable_steps_bulk_optional_as_required":
        "test_a_batch_depending_on_a_dead_version_blocks_as_submit_does",
    "durable_steps_complete_fan_in_required_only":
        "test_a_success_counts_for_the_children_of_both_edge_kinds",
}
BY_NAME = {m.name: m for m in CATALOGUE}
# The unit layer here runs the batch tests alone (the catalogue's run has them among the others).
UNIT_BUDGET = replace(Budget(), durable_unit_files=("tests/durable/test_bulk.py",))

pytestmark = pytest.mark.slow


def test_the_bulk_section_has_its_mutants() -> None:
    assert set(LOCKSTEP) | set(EVIDENCE) <= set(BY_NAME)


@pytest.mark.parametrize("name", LOCKSTEP)
def test_lockstep_kills_each_mutant_of_the_clients_batch(name: str) -> None:
    result = run_mutant(BY_NAME[name], ["lockstep"])
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert "submit_many" in only.evidence


@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_the_batch_tests_kill_each_mutant(name: str, postgres_url: str) -> None:
    # (postgres_url: the server the PostgreSQL half of the tests, and its mutant, need)
    result = run_mutant(BY_NAME[name], ["unit"], budget=UNIT_BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert EVIDENCE[name] in only.evidence
