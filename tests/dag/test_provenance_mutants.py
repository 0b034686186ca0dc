"""Each seeded bug of the TaskScheduler's provenance is killed by the lock-step layer.

The mutants are in ``refsched/verify/dag/mutants.py`` (section "provenance"); the lock-step
machine compares every version's provenance with the model's after each call, so each one
must be killed with evidence.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.dag.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

PROVENANCE_MUTANTS = tuple(m for m in CATALOGUE if m.name in {
    "provenance_overwritten_by_second_cause", "provenance_path_stops_one_level_early",
    "provenance_root_is_direct_parent", "provenance_on_optional_child",
    "close_records_no_provenance",
})

BUDGET = replace(Budget(), lockstep_examples=300)


def test_the_provenance_section_has_its_mutants() -> None:
    assert len(PROVENANCE_MUTANTS) == 5


@pytest.mark.parametrize("mutant", PROVENANCE_MUTANTS, ids=lambda m: m.name)
def test_lockstep_kills_each_provenance_mutant(mutant) -> None:  # type: ignore[no-untyped-def]
    result = run_mutant(mutant, ["lockstep"], budget=BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{mutant.name}: {only.status}\n{only.evidence}"
    assert only.evidence
