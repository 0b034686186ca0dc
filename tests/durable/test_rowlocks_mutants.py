"""Each seeded bug of the PostgreSQL store's writers without one lock is killed by the tests of
tests/durable/test_rowlocks.py, which run the transactions' interleavings on the server: the
mutants of ``refsched/verify/durable/mutants.py`` (section "writers without one lock"), each
with the test that must see it first.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from refsched.verify.durable.mutants import CATALOGUE
from refsched.verify.mutants import Budget, run_mutant

EVIDENCE = {
    "durable_steps_claim_not_skip_locked":
        "test_a_claim_takes_another_version_while_a_claim_holds_one_without_waiting",
    "durable_steps_complete_fenced_before_lock":
        "test_a_repeated_complete_waiting_for_the_first_is_fenced_on_the_row_it_then_reads",
    "durable_steps_fan_in_outside_row_lock":
        "test_a_fan_in_waiting_for_another_counts_down_from_the_row_it_then_reads",
    "durable_steps_submit_reads_deps_unlocked":
        "test_a_submit_waiting_for_a_report_of_its_dep_reads_the_state_the_report_left",
    "durable_steps_submit_no_wake_for_a_passed_over_dep":
        "test_a_claim_that_passed_over_a_dep_a_submit_holds_is_woken_at_its_commit",
    "durable_steps_submit_seq_unlocked":
        "test_submits_draw_seq_numbers_one_at_a_time_in_commit_order",
    "durable_steps_submit_shared_over_a_stored_id":
        "test_a_submit_of_an_id_stored_meanwhile_is_left_to_the_client_unchanged",
}
BY_NAME = {m.name: m for m in CATALOGUE}
UNIT_BUDGET = replace(Budget(), durable_unit_files=("tests/durable/test_rowlocks.py",))

pytestmark = pytest.mark.slow


def test_the_section_has_its_mutants() -> None:
    assert set(EVIDENCE) <= set(BY_NAME)


@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_the_row_lock_tests_kill_each_mutant(name: str, postgres_url: str) -> None:
    # (postgres_url: the server the tests, and their mutant, need)
    result = run_mutant(BY_NAME[name], ["unit"], budget=UNIT_BUDGET)
    (only,) = result.layers
    assert only.status == "killed", f"{name}: {only.status}\n{only.evidence}"
    assert EVIDENCE[name] in only.evidence
