"""Each seeded bug of edge kinds and ``add_deps`` in the TaskScheduler is killed.

The mutants are in ``refsched/verify/dag/mutants.py`` (section "edge kinds and add_deps"); each
one is run here against the lock-step layer alone, which must kill it with evidence, but the
race of ``add_deps`` with a claim, which only the explorer's interleavings can show.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.dag.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

EDGE_MUTANTS = tuple(m for m in CATALOGUE if m.name in {
    "optional_failure_blocks", "required_failure_does_not_block",
    "optional_dead_parent_counted_unsettled", "blocking_stops_after_optional_level",
    "blocked_parent_settles_no_optional_edge", "blocked_by_names_optional_parent",
    "resubmit_keeps_optional_child_settled", "retry_keeps_optional_child_settled",
    "retry_forgets_optional_edges", "add_deps_to_ready_version",
    "add_deps_count_not_raised_for_running_parent", "add_deps_closes_cycles",
    "add_deps_ignores_dead_required_parent", "info_hides_edge_kinds",
})

# The mutants' walks are derandomized: an edit of the lock-step machine (its input summaries)
# gave add_deps_count_not_raised_for_running_parent walks that reach a running new dependency
# only after 600 examples; the others are killed within their first examples.
BUDGET = replace(Budget(), lockstep_examples=1000)


def test_the_edge_section_has_its_mutants() -> None:
    assert len(EDGE_MUTANTS) == 14


def test_the_explorer_kills_add_deps_that_lets_a_claim_in_between() -> None:
    """No single-threaded check can see it: a claim must come between the check and the
    change. The scenario add_deps_claim makes it come there."""
    (mutant,) = (m for m in CATALOGUE if m.name == "add_deps_check_then_act")
    budget = replace(Budget(), scenarios=("add_deps_claim",))
    result = run_mutant(mutant, ["lockstep", "explore"], budget=budget, all_layers=True)
    lockstep, explore = result.layers
    assert lockstep.status == "survived", lockstep.evidence
    assert explore.status == "killed", explore.evidence
    assert "add_deps_claim" in explore.evidence


@pytest.mark.parametrize("mutant", EDGE_MUTANTS, ids=lambda m: m.name)
def test_lockstep_kills_each_edge_mutant(mutant) -> None:  # type: ignore[no-untyped-def]
    result = run_mutant(mutant, ["lockstep"], budget=BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{mutant.name}: {only.status}\n{only.evidence}"
    assert only.evidence
