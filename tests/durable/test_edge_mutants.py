"""Each seeded bug of edge kinds, ``add_deps`` and input summaries in the durable stores is
killed: the mutants of ``refsched/verify/durable/mutants.py`` (section "edge kinds, add_deps,
input summaries"), each run here against the layer that must kill it with evidence: the
lock-step machine for what the model sees (states, counts, refusals), the unit tests of
tests/durable/test_edges.py for the input summaries, which the model does not keep.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.durable.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

LOCKSTEP = ("durable_optional_failure_blocks", "durable_optional_end_not_settled",
            "durable_add_deps_on_claimed_version")
# (the lock-step machine's walks take AddDeps and a resubmission of an ended optional parent
# too rarely to kill the next two within the layer's examples; the edge tests do at once)
UNIT = ("durable_add_deps_count_not_raised", "durable_replaced_end_keeps_optional_settled",
        "durable_inputs_read_at_completion", "durable_steps_claim_keeps_no_inputs")
EVIDENCE = {
    "durable_add_deps_count_not_raised":
        "test_add_deps_raises_the_count_in_its_transaction_and_a_claimed_version_refuses_it",
    "durable_replaced_end_keeps_optional_settled":
        "test_a_new_version_of_an_ended_optional_parent_makes_its_waiting_child_wait_again",
    "durable_inputs_read_at_completion":
        "test_the_input_summary_is_fixed_when_the_version_is_claimed",
    "durable_steps_claim_keeps_no_inputs":
        "test_the_input_summary_is_fixed_when_the_version_is_claimed",
}
BY_NAME = {m.name: m for m in CATALOGUE}
# The unit layer here runs the edge tests alone (the catalogue's run has them among the others).
UNIT_BUDGET = replace(Budget(), durable_unit_files=("tests/durable/test_edges.py",))
# The lock-step layer walks 300 examples here: a walk reaches an optional parent's end
# only after a SubmitOptional and a claim, and the catalogue's 100 miss it (seen: both
# optional-edge mutants survive 100 walks and die within 300, in seconds each).
LOCKSTEP_BUDGET = replace(Budget(), durable_lockstep_examples=300)

pytestmark = pytest.mark.slow


def test_the_edge_section_has_its_mutants() -> None:
    assert set(LOCKSTEP + UNIT) <= set(BY_NAME)


@pytest.mark.parametrize("name", LOCKSTEP)
def test_lockstep_kills_each_edge_mutant_of_the_store(name: str) -> None:
    result = run_mutant(BY_NAME[name], ["lockstep"], budget=LOCKSTEP_BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert only.evidence


@pytest.mark.parametrize("name", UNIT)
def test_the_edge_tests_kill_each_count_and_input_summary_mutant(name: str,
                                                                 postgres_url: str) -> None:
    # (postgres_url: the server the PostgreSQL half of the tests, and its mutant, need)
    result = run_mutant(BY_NAME[name], ["unit"], budget=UNIT_BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert EVIDENCE[name] in only.evidence
